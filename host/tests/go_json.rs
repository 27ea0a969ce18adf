//! Kubernetes JSON as Go writes it decides exactly as the same objects written by the API server,
//! and an object the plugin rejects is named where a decision misses it.
//!
//! Go's `encoding/json` writes a typed object's zero `metav1.Time` as `"creationTimestamp": null`,
//! a nil slice or map without `omitempty` as `null`, and an empty struct as `{}`; `kubectl create
//! --dry-run=client -o json` and every Go client that re-encodes an informer's object print the
//! same. `go_written` rewrites a cluster that way (without touching opaque parameters, which are
//! raw JSON to Go too). Required, for every recorded cycle under `testdata/` on every engine
//! (native, component, KSWE guest), and for generated clusters on the native engine: the rewritten
//! cluster loads with no rejected object and gives the same decisions as the original.
//!
//! `SA_GO_JSON_SEEDS` (default 40) is the number of generated clusters.

#[path = "support/go_written.rs"]
mod go_written;

use std::path::Path;

use go_written::go_written;
use serde_json::Value;
use sharing_affinity_host::artifact;
use sharing_affinity_host::component::{ComponentPlugin, Limits};
use sharing_affinity_host::engine::PluginRuntime;
use sharing_affinity_host::generate::{Profile, Spec, generate};
use sharing_affinity_host::kswe::{KsweEngine, KsweModule};
use sharing_affinity_host::native;
use sharing_affinity_host::replay::{Cluster, replay, scenario_dirs};
use sharing_affinity_host::report;

fn decisions(engine: &mut dyn PluginRuntime, cluster: &str, what: &str) -> Value {
    let cluster = Cluster::parse(cluster).unwrap_or_else(|e| panic!("{what}: {e:#}"));
    assert!(
        cluster.invalid.is_empty(),
        "{what}: objects rejected: {:#?}",
        cluster.invalid
    );
    let replayed = replay(engine, &cluster, &mut || {}).unwrap_or_else(|e| panic!("{what}: {e:#}"));
    assert!(
        replayed.rejected.is_empty(),
        "{what}: the engine rejected: {:#?}",
        replayed.rejected
    );
    report::decisions(&replayed)
}

/// Makes a fresh engine.
type NewEngine<'a> = Box<dyn Fn() -> Box<dyn PluginRuntime> + 'a>;

fn config(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("config.json")).unwrap_or_default()
}

#[test]
fn every_recorded_cycle_written_by_go_decides_the_same_on_every_engine() {
    let component = ComponentPlugin::from_file(&artifact::default_component().unwrap()).unwrap();
    let kswe_path = artifact::default_kswe_module().unwrap();
    let kswe = KsweModule::new(&artifact::read_kswe_module(&kswe_path).unwrap()).unwrap();
    let dirs = scenario_dirs();
    assert!(!dirs.is_empty());
    let mut nulls = 0;
    for dir in dirs {
        let original = std::fs::read_to_string(dir.join("cluster.json")).unwrap();
        let rewritten = go_written(&original);
        nulls += rewritten.matches(":null").count();
        let config = config(&dir);
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let engines: [(&str, NewEngine<'_>); 3] = [
            ("native", Box::new(|| Box::new(native::plugin(&config).unwrap()))),
            (
                "component",
                Box::new(|| Box::new(component.instantiate(&config, Limits::default()).unwrap())),
            ),
            (
                "kswe",
                Box::new(|| Box::new(KsweEngine::from_module(&kswe, &config).unwrap())),
            ),
        ];
        for (engine, new) in engines {
            let want = decisions(&mut *new(), &original, &format!("{name} on {engine}"));
            let got = decisions(
                &mut *new(),
                &rewritten,
                &format!("{name} written by Go on {engine}"),
            );
            assert_eq!(got, want, "{name} written by Go decides differently on {engine}");
        }
    }
    assert!(nulls > 1_000, "the rewrite wrote {nulls} nulls");
}

#[test]
fn generated_clusters_written_by_go_decide_the_same() {
    let seeds: u64 = std::env::var("SA_GO_JSON_SEEDS")
        .ok()
        .map(|s| s.parse().expect("SA_GO_JSON_SEEDS is a number"))
        .unwrap_or(40);
    let profiles = [
        Profile::Nic,
        Profile::Gpu,
        Profile::Fpga,
        Profile::Rdma,
        Profile::Plain,
    ];
    for seed in 1..=seeds {
        let spec = Spec {
            pods: 6,
            running: 4,
            profile: profiles[(seed % profiles.len() as u64) as usize],
            seed,
            ..Spec::new(3, 3)
        };
        let g = generate(&spec).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let want = decisions(
            &mut native::plugin(&g.config).unwrap(),
            &g.cluster,
            &format!("seed {seed}"),
        );
        let got = decisions(
            &mut native::plugin(&g.config).unwrap(),
            &go_written(&g.cluster),
            &format!("seed {seed} written by Go"),
        );
        assert_eq!(got, want, "seed {seed}: written by Go decides differently");
    }
}

/// A Node the plugin rejects is still a node to the scheduler: every engine lists the rejection
/// and names it, with its error, in that node's Filter status; a Node written by Go beside it
/// (`"creationTimestamp": null`) is a node like any other.
#[test]
fn a_rejected_node_is_named_in_its_filter_status_on_every_engine() {
    const CLUSTER: &str = r#"{"apiVersion":"v1","kind":"List","items":[
      {"apiVersion":"v1","kind":"Node","metadata":{"name":"node-1","creationTimestamp":null,"labels":{"a":7}}},
      {"apiVersion":"v1","kind":"Node","metadata":{"name":"node-2","creationTimestamp":null,"labels":null}},
      {"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u1","creationTimestamp":null},
       "spec":{"containers":null,"resourceClaims":null},"status":{}}]}"#;
    let error = "Node node-1: field metadata.labels.a: invalid type: integer `7`, expected a string";
    let component = ComponentPlugin::from_file(&artifact::default_component().unwrap()).unwrap();
    let kswe_path = artifact::default_kswe_module().unwrap();
    let kswe = KsweModule::new(&artifact::read_kswe_module(&kswe_path).unwrap()).unwrap();
    let cluster = Cluster::parse(CLUSTER).unwrap();
    assert_eq!(cluster.nodes, ["node-1", "node-2"]);
    let engines: [Box<dyn PluginRuntime>; 3] = [
        Box::new(native::plugin("").unwrap()),
        Box::new(component.instantiate("", Limits::default()).unwrap()),
        Box::new(KsweEngine::from_module(&kswe, "").unwrap()),
    ];
    for mut engine in engines {
        let r = replay(&mut *engine, &cluster, &mut || {}).unwrap();
        assert_eq!(r.rejected, [error], "{}", engine.name());
        let pod = &r.pods[0];
        assert_eq!(pod.node.as_deref(), Some("node-2"), "{}", engine.name());
        assert_eq!(
            pod.nodes[0].status.reason,
            format!("node node-1 was rejected: {error}"),
            "{}",
            engine.name()
        );
    }
}

/// A claim the plugin rejects (here: a version it does not read) still holds the device its
/// allocation names: with its config unread the shared device is Unreconstructable, so a claim
/// of another subnet never shares it, on every engine; the device is free again once the claim
/// is deleted.
#[test]
fn a_rejected_claim_keeps_holding_its_device_on_every_engine() {
    let nic = |name: &str| {
        format!(
            r#"{{"name":"{name}","allowMultipleAllocations":true,
            "capacity":{{"example.com/slots":{{"value":"4"}}}}}}"#
        )
    };
    let subnet =
        |s: &str| format!(r#"{{"opaque":{{"driver":"example.com","parameters":{{"subnet":"{s}"}}}}}}"#);
    let request = r#"{"name":"nic","exactly":{"deviceClassName":"nic","capacity":{"requests":{"example.com/slots":"1"}}}}"#;
    let cluster = format!(
        r#"{{"apiVersion":"v1","kind":"List","items":[
      {{"apiVersion":"v1","kind":"Node","metadata":{{"name":"n1"}}}},
      {{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{{"name":"nic"}},"spec":{{}}}},
      {{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{{"name":"n1-nics"}},
        "spec":{{"driver":"example.com","nodeName":"n1","pool":{{"name":"n1","generation":1,"resourceSliceCount":1}},
                "devices":[{eth1},{eth2}],"sharingAffinity":[{{"cel":{{"subnet":"object.subnet"}}}}]}}}},
      {{"apiVersion":"resource.k8s.io/v1beta2","kind":"ResourceClaim","metadata":{{"name":"old","namespace":"ns","uid":"u-old"}},
        "spec":{{"devices":{{"requests":[{request}],"config":[{b}]}}}},
        "status":{{"allocation":{{"devices":{{"results":[{{"request":"nic","driver":"example.com","pool":"n1","device":"eth1",
          "shareID":"00000000-0000-4000-8000-000000000001","consumedCapacity":{{"example.com/slots":"1"}}}}]}},
          "nodeSelector":{{"nodeSelectorTerms":[{{"matchFields":[{{"key":"metadata.name","operator":"In","values":["n1"]}}]}}]}}}},
          "reservedFor":[{{"resource":"pods","name":"old-pod","uid":"u-old-pod"}}]}}}},
      {{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{{"name":"new","namespace":"ns","uid":"u-new"}},
        "spec":{{"devices":{{"requests":[{request}],"config":[{a}]}}}}}},
      {{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p","namespace":"ns","uid":"u-p"}},
        "spec":{{"resourceClaims":[{{"name":"nic","resourceClaimName":"new"}}]}}}}]}}"#,
        eth1 = nic("eth1"),
        eth2 = nic("eth2"),
        a = subnet("subnet-a"),
        b = subnet("subnet-b"),
    );
    let component = ComponentPlugin::from_file(&artifact::default_component().unwrap()).unwrap();
    let kswe_path = artifact::default_kswe_module().unwrap();
    let kswe = KsweModule::new(&artifact::read_kswe_module(&kswe_path).unwrap()).unwrap();
    // The allocation reads, or reads only for the device it names (a quantity that is not one).
    let consumed = r#""consumedCapacity":{"example.com/slots":"1"}"#;
    assert!(cluster.contains(consumed));
    let unreadable_quantity = cluster.replace(consumed, r#""consumedCapacity":{"example.com/slots":"lots"}"#);
    for cluster in [&cluster, &unreadable_quantity] {
        let parsed = Cluster::parse(cluster).unwrap();
        assert_eq!(parsed.refused.len(), 1, "{:?}", parsed.invalid);
        let engines: [Box<dyn PluginRuntime>; 3] = [
            Box::new(native::plugin("").unwrap()),
            Box::new(component.instantiate("", Limits::default()).unwrap()),
            Box::new(KsweEngine::from_module(&kswe, "").unwrap()),
        ];
        for mut engine in engines {
            let r = replay(&mut *engine, &parsed, &mut || {}).unwrap();
            assert_eq!(r.rejected.len(), 1, "{}", engine.name());
            let devices: Vec<&str> = r.pods[0]
                .allocations
                .iter()
                .flat_map(|a| &a.allocation.devices.results)
                .map(|d| d.device.as_str())
                .collect();
            assert_eq!(
                devices,
                ["eth2"],
                "{}: eth1 stays held by the unreadable claim",
                engine.name()
            );
        }
    }
    // Without the unreadable claim, eth1 is the first fit.
    let without = cluster.replace("resource.k8s.io/v1beta2", "resource.k8s.io/v0");
    let mut native = native::plugin("").unwrap();
    let unheld =
        Cluster::parse(&without.replace("\"status\":{\"allocation\"", "\"statusX\":{\"allocation\""))
            .unwrap();
    let r = replay(&mut native, &unheld, &mut || {}).unwrap();
    let device = &r.pods[0].allocations[0].allocation.devices.results[0].device;
    assert_eq!(
        device.as_str(),
        "eth1",
        "with no allocation to read, nothing is held"
    );
}
