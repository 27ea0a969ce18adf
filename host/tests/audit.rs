//! The auditor on recorded cycles: it reports the racy placeholder fixture's lock violation, finds
//! nothing after any Bind of the native replay of every scenario, and the CLI's `audit` and
//! `replay --audit` print the violations and exit with status 3.

use std::process::Command;

use sharing_affinity_core::Plugin;
use sharing_affinity_core::audit::{Rule, audit};
use sharing_affinity_core::config::Config;
use sharing_affinity_core::contract::Scheduler;
use sharing_affinity_host::audit::Trail;
use sharing_affinity_host::engine::PluginRuntime;
use sharing_affinity_host::native;
use sharing_affinity_host::replay::{Cluster, replay_observed, scenario_dirs};

const RACY: &str = "racy-placeholder-two-subnets-share-eth1";

fn config_of(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join("config.json")).unwrap_or_default()
}

#[test]
fn the_racy_placeholder_fixture_violates_the_lock_invariant() {
    let dir = scenario_dirs()
        .into_iter()
        .find(|d| d.ends_with(RACY))
        .expect("the racy placeholder scenario is in testdata/");
    let cluster = Cluster::from_file(&dir.join("cluster.json")).unwrap();
    let violations = audit(&cluster.objects, &Config::default());
    assert_eq!(violations.len(), 1, "{violations:#?}");
    let v = &violations[0];
    assert_eq!(v.rule, Rule::Lock);
    assert_eq!(v.device, "networking.example.com/net-node-1/eth1");
    assert_eq!(v.claims, ["tenant/racer-a-nic", "tenant/racer-b-nic"]);
    assert!(
        v.message.contains("subnet=subnet-a") && v.message.contains("subnet=subnet-b"),
        "{v}"
    );
}

/// Every scenario replayed natively: the auditor finds nothing new after any Bind. Violations of
/// the starting state are those the scenarios were recorded with.
#[test]
fn no_violation_after_any_bind_of_the_recorded_cycles() {
    let dirs = scenario_dirs();
    assert!(dirs.len() >= 15, "scenarios found: {dirs:?}");
    for dir in dirs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let cluster = Cluster::from_file(&dir.join("cluster.json")).unwrap();
        let config = config_of(&dir);
        let mut engine = native::plugin(&config).unwrap();
        let mut trail = Trail::new(&cluster, &config).unwrap();
        let mut binds = 0;
        replay_observed(&mut engine, &cluster, &mut || {}, &mut |outcome| {
            binds += 1;
            assert_eq!(
                trail.after_bind(outcome),
                0,
                "{name}: after {}: {:#?}",
                outcome.pod,
                trail.findings
            );
        })
        .unwrap();
        assert!(trail.unplaced.is_empty(), "{name}: {:?}", trail.unplaced);
        let start: Vec<_> = trail
            .findings
            .iter()
            .map(|f| (f.violation.rule, f.violation.device.as_str()))
            .collect();
        let expected: &[(Rule, &str)] = match name.as_str() {
            RACY => &[(Rule::Lock, "networking.example.com/net-node-1/eth1")],
            "unreconstructable-legacy-claim-blocks-device" => {
                &[(Rule::Gating, "networking.example.com/net-node-1/eth1")]
            }
            _ => &[],
        };
        assert_eq!(start, expected, "{name}");
        if name == "large-32-nodes-60-pods" {
            assert!(binds > 30, "{name}: {binds} binds");
        }
    }
}

fn cli(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sharing-affinity"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn cli_audit_exit_status_and_outputs() {
    let root = sharing_affinity_host::artifact::workspace_root().join("testdata");
    let racy = root.join(RACY);
    let racy = racy.to_str().unwrap();
    let (code, table) = cli(&["audit", racy]);
    assert_eq!(code, 3, "{table}");
    assert!(
        table.contains("lock") && table.contains("tenant/racer-a-nic,tenant/racer-b-nic"),
        "{table}"
    );
    let (code, json) = cli(&["audit", racy, "--output", "json"]);
    assert_eq!(code, 3);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v[0]["rule"], "lock", "{json}");
    assert_eq!(v[0]["device"], "networking.example.com/net-node-1/eth1");
    let clean = root.join("rdma-pkey-locked-mlx5-0-next-device");
    let (code, table) = cli(&["audit", clean.to_str().unwrap()]);
    assert_eq!((code, table.as_str()), (0, "no violations\n"));
    let (code, json) = cli(&[
        "replay", "--engine", "native", "--audit", racy, "--output", "json",
    ]);
    assert_eq!(code, 3, "{json}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["audit"].as_array().map(Vec::len), Some(1), "{json}");
    assert_eq!(v["audit"][0]["after_bind"], serde_json::Value::Null);
    let (code, table) = cli(&["replay", "--engine", "native", "--audit", clean.to_str().unwrap()]);
    assert_eq!(code, 0, "{table}");
    assert!(table.contains("audit: no violations after any bind"), "{table}");
}

/// An engine that binds what the native engine decided, but moves every device result to
/// `mlx5-0`: the wrong share the per-Bind audit must catch right after it happens.
struct Misbinding(Plugin);

impl PluginRuntime for Misbinding {
    fn name(&self) -> &'static str {
        "misbinding"
    }
    fn load(&mut self, objects: &[sharing_affinity_core::object::Object]) -> wasmtime::Result<Vec<String>> {
        PluginRuntime::load(&mut self.0, objects)
    }
}

impl Scheduler for Misbinding {
    fn prefilter(&mut self, pod: &str) -> sharing_affinity_core::Status {
        self.0.prefilter(pod)
    }
    fn filter(&mut self, node: &str) -> sharing_affinity_core::Status {
        self.0.filter(node)
    }
    fn set_time(&mut self, unix_seconds: i64) {
        self.0.set_time(unix_seconds)
    }
    fn postfilter(&mut self, pod: &str, nodes: &[String]) -> (sharing_affinity_core::Status, Option<String>) {
        Scheduler::postfilter(&mut self.0, pod, nodes)
    }
    fn score(&mut self, node: &str) -> Result<u32, sharing_affinity_core::Status> {
        self.0.score(node)
    }
    fn reserve(
        &mut self,
        node: &str,
    ) -> Result<Vec<sharing_affinity_core::ClaimAllocation>, sharing_affinity_core::Status> {
        self.0.reserve(node)
    }
    fn unreserve(&mut self, pod: &str, node: &str) -> Result<(), sharing_affinity_core::Status> {
        Scheduler::unreserve(&mut self.0, pod, node)
    }
    fn bind(
        &mut self,
        pod: &str,
        node: &str,
    ) -> Result<Vec<sharing_affinity_core::ClaimAllocation>, sharing_affinity_core::Status> {
        let mut out = self.0.bind(pod, node)?;
        for a in &mut out {
            for r in &mut a.allocation.devices.results {
                r.device = "mlx5-0".into();
            }
        }
        Ok(out)
    }
}

#[test]
fn a_wrong_bind_is_reported_right_after_it() {
    let dir = sharing_affinity_host::artifact::workspace_root()
        .join("testdata")
        .join("rdma-pkey-locked-mlx5-0-next-device");
    let cluster = Cluster::from_file(&dir.join("cluster.json")).unwrap();
    let mut engine = Misbinding(native::plugin("").unwrap());
    let mut trail = Trail::new(&cluster, "").unwrap();
    replay_observed(&mut engine, &cluster, &mut || {}, &mut |o| {
        trail.after_bind(o);
    })
    .unwrap();
    let found: Vec<_> = trail
        .findings
        .iter()
        .map(|f| (f.after_bind.as_deref(), f.violation.rule))
        .collect();
    // Found right after trainer-c's Bind; trainer-d joining the broken device is reported again.
    assert_eq!(
        found,
        [
            (Some("ml-team/trainer-c"), Rule::Lock),
            (Some("ml-team/trainer-d"), Rule::Lock)
        ],
        "{:#?}",
        trail.findings
    );
}

/// An audit that could not read a claim that may hold devices is not clean: exit status 4, and
/// the claim is named.
#[test]
fn cli_audit_with_an_unreadable_holder_is_incomplete() {
    let cluster = r#"{"apiVersion":"v1","kind":"List","items":[
      {"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}},
      {"apiVersion":"resource.k8s.io/v1beta2","kind":"ResourceClaim","metadata":{"name":"held","namespace":"ns"},
       "status":{"allocation":{"devices":{"results":[{"request":"r","driver":"d","pool":"n1","device":"eth1"}]}}}}]}"#;
    let dir = std::env::temp_dir().join(format!("sa-audit-incomplete-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("cluster.json");
    std::fs::write(&file, cluster).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sharing-affinity"))
        .arg("audit")
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("audit incomplete") && stderr.contains("ns/held"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Input with nothing to decide on is an error, never an empty success: an empty file, a List
/// whose items are `null`, a List of other kinds (`replay` and `audit`: exit 1), and text the
/// plugin cannot read as objects (exit 1: an array at the top level is not an object).
#[test]
fn cli_unusable_input_exits_non_zero() {
    let dir = std::env::temp_dir().join(format!("sa-unusable-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let deep = "[".repeat(100_000);
    let cases: [(&str, &str, i32); 5] = [
        ("empty", "", 1),
        ("null-items", r#"{"kind":"List","items":null}"#, 1),
        (
            "other-kinds",
            r#"{"kind":"List","items":[{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}]}"#,
            1,
        ),
        ("deep", &deep, 1),
        ("array", "[1, 2]", 1),
    ];
    for (name, text, code) in cases {
        let file = dir.join(format!("{name}.json"));
        std::fs::write(&file, text).unwrap();
        for command in [&["replay", "--engine", "native"][..], &["audit"][..]] {
            let out = Command::new(env!("CARGO_BIN_EXE_sharing-affinity"))
                .arg(command[0])
                .arg(&file)
                .args(&command[1..])
                .output()
                .unwrap();
            assert_eq!(
                out.status.code(),
                Some(code),
                "{} {name}: {}",
                command[0],
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
