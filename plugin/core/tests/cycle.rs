//! The cycle API's own rules: claim resolution at PreFilter, templates, protocol order, incremental
//! state from object events, and bad input.

mod common;

use common::*;
use serde_json::json;
use sharing_affinity_core::Code;
use sharing_affinity_core::{EventKind, NodeName, Plugin};

fn base() -> Vec<serde_json::Value> {
    vec![
        node(NODE),
        class_a(),
        slice1(&[device("device-1"), device("device-2")]),
    ]
}

fn template(name: &str) -> serde_json::Value {
    json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate",
           "metadata":{"name":name,"namespace":NS},
           "spec":{"metadata":{"labels":{"app":"x"}},
                   "spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"class-a"}}]}}}})
}

fn template_pod(name: &str, tmpl: &str) -> serde_json::Value {
    json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":name,"namespace":NS,"uid":format!("uid-{name}")},
           "spec":{"resourceClaims":[{"name":"gpu","resourceClaimTemplateName":tmpl}]}})
}

#[test]
fn claim_generated_from_template_is_created_on_bind() {
    let mut objects = base();
    objects.push(template("t"));
    objects.push(template_pod("p", "t"));
    let mut p = plugin("", &objects);
    let got = schedule(&mut p, "p");
    assert_eq!(got, vec![vec![g("gpu", "device-1", false, None)]]);
    let claim = p.claim("default/p-gpu").expect("generated claim stored");
    assert_eq!(
        claim.metadata.labels.get("app").map(String::as_str),
        Some("x"),
        "template metadata copied"
    );
    assert_eq!(claim.metadata.owner_references[0].name, "p");
    assert_eq!(claim.status.reserved_for[0].name, "p");
    let pod = p.pod("default/p").unwrap();
    assert_eq!(pod.spec.node_name, NODE);
    assert_eq!(
        pod.status.resource_claim_statuses[0]
            .resource_claim_name
            .as_deref(),
        Some("p-gpu")
    );
    // The next pod from the same template gets the other device.
    p.apply(EventKind::Add, &template_pod("q", "t").to_string())
        .unwrap();
    assert_eq!(
        schedule(&mut p, "q"),
        vec![vec![g("gpu", "device-2", false, None)]]
    );
}

#[test]
fn missing_claim_or_template_is_unresolvable() {
    let mut objects = base();
    objects.push(pod("p", &["nope"], "2026-01-01T00:00:00Z"));
    objects.push(template_pod("q", "no-template"));
    let mut p = plugin("", &objects);
    assert_status(
        run(&mut p, "p"),
        Code::UnschedulableAndUnresolvable,
        "waiting for resource claim default/nope",
        "claim",
    );
    assert_status(
        run(&mut p, "q"),
        Code::UnschedulableAndUnresolvable,
        "template default/no-template not found",
        "template",
    );
}

#[test]
fn unknown_pod_and_out_of_order_calls_are_errors() {
    let mut p = plugin("", &base());
    assert_eq!(p.filter(NODE).code, Code::Error, "filter before prefilter");
    assert_eq!(p.prefilter("default/ghost").code, Code::Error);
    assert!(p.reserve(NODE).is_err());
    let err = p.bind("default/ghost", NODE).unwrap_err();
    assert!(err.reason.contains("pod default/ghost"), "{}", err.reason);
    let err = p.unreserve("default/ghost", NODE).unwrap_err();
    assert!(err.reason.contains("pod default/ghost"), "{}", err.reason);
}

/// Pods bound to a node are not kept (the scheduler never schedules them): an event that binds a
/// stored pod drops it, and its PreFilter says why.
#[test]
fn bound_pods_are_not_kept() {
    let mut objects = base();
    let mut bound = pod("b", &[], "2026-01-01T00:00:00Z");
    bound["spec"]["nodeName"] = json!(NODE);
    objects.push(bound.clone());
    objects.push(pod("p", &[], "2026-01-01T00:00:00Z"));
    let mut p = plugin("", &objects);
    assert!(p.pod("default/b").is_none());
    let status = p.prefilter("default/b");
    assert_eq!(status.code, Code::Error);
    assert!(status.reason.contains("bound to a node"), "{}", status.reason);
    assert!(p.pod("default/p").is_some());
    let mut now_bound = pod("p", &[], "2026-01-01T00:00:00Z");
    now_bound["spec"]["nodeName"] = json!(NODE);
    p.apply(EventKind::Update, &now_bound.to_string()).unwrap();
    assert!(p.pod("default/p").is_none());
}

#[test]
fn pod_without_claims_passes_every_node() {
    let mut objects = base();
    objects.push(pod("p", &[], "2026-01-01T00:00:00Z"));
    let mut p = plugin("", &objects);
    assert!(p.prefilter("default/p").is_success());
    assert!(p.filter(NODE).is_success());
    assert_eq!(p.score(NODE).unwrap(), 0);
}

#[test]
fn allocated_claim_restricts_nodes() {
    let mut objects = base();
    objects.push(node("node-2"));
    objects.push(
        claim("c", &[req("r", "class-a")])
            .allocated(json!([dedicated("r", "device-1")]))
            .json(),
    );
    objects.push(pod("p", &["c"], "2026-01-01T00:00:00Z"));
    let mut p = plugin("", &objects);
    assert!(p.prefilter("default/p").is_success());
    assert!(p.filter(NODE).is_success(), "allocated on node-1");
    let st = p.filter("node-2");
    assert_eq!(st.code, Code::UnschedulableAndUnresolvable);
    assert!(
        st.reason.contains("not available on node node-2"),
        "{}",
        st.reason
    );
}

#[test]
fn claim_update_that_deallocates_frees_the_device() {
    let mut objects = vec![node(NODE), class_a(), slice1(&[device("device-1")])];
    let allocated = claim("old", &[req("r", "class-a")]).allocated(json!([dedicated("r", "device-1")]));
    objects.push(allocated.json());
    objects.push(claim("c", &[req("r", "class-a")]).json());
    objects.push(pod("p", &["c"], "2026-01-01T00:00:00Z"));
    let mut p = plugin("", &objects);
    assert_status(
        run(&mut p, "p"),
        Code::Unschedulable,
        "cannot allocate all claims",
        "device-1 in use",
    );
    p.apply(
        EventKind::Update,
        &claim("old", &[req("r", "class-a")]).json().to_string(),
    )
    .unwrap();
    assert_eq!(
        run(&mut p, "p").unwrap(),
        vec![vec![g("r", "device-1", false, None)]],
        "freed by the update"
    );
}

#[test]
fn slice_events_rebuild_the_index() {
    let mut p = plugin("", &[node(NODE), class_a(), slice1(&[device("device-1")])]);
    p.apply(
        EventKind::Add,
        &claim("c", &[req("r", "class-a")]).json().to_string(),
    )
    .unwrap();
    p.apply(
        EventKind::Add,
        &pod("p", &["c"], "2026-01-01T00:00:00Z").to_string(),
    )
    .unwrap();
    p.apply(EventKind::Update, &slice1(&[device("device-9")]).to_string())
        .unwrap();
    assert_eq!(
        run(&mut p, "p").unwrap(),
        vec![vec![g("r", "device-9", false, None)]]
    );
    p.unreserve("default/p", NODE).unwrap();
    p.apply(EventKind::Delete, &slice1(&[]).to_string()).unwrap();
    assert_status(
        run(&mut p, "p"),
        Code::Unschedulable,
        "cannot allocate",
        "no slices left",
    );
}

#[test]
fn bad_objects_are_errors_naming_object_and_field() {
    let mut p = Plugin::new("").unwrap();
    let bad_quantity = json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"s"},
        "spec":{"driver":"d","nodeName":"n","pool":{"name":"p","generation":1,"resourceSliceCount":1},
                "devices":[{"name":"x","capacity":{"mem":{"value":"1.2.3Gi"}}}]}});
    let err = p
        .apply(EventKind::Add, &bad_quantity.to_string())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("ResourceSlice s") && err.contains("spec.devices[0].capacity.mem.value"),
        "{err}"
    );
    let err = p.apply(EventKind::Add, "{not json").unwrap_err().to_string();
    assert!(err.contains("malformed JSON"), "{err}");
    let missing = json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c","namespace":"ns"},
        "spec":{"devices":{"requests":[{"exactly":{"deviceClassName":"x"}}]}}});
    let err = p
        .apply(EventKind::Add, &missing.to_string())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("ResourceClaim ns/c")
            && err.contains("spec.devices.requests[0]")
            && err.contains("name"),
        "{err}"
    );
    let huge = format!(
        "\"{}\"",
        "x".repeat(sharing_affinity_core::object::MAX_INPUT_BYTES)
    );
    let err = p.apply(EventKind::Add, &huge).unwrap_err().to_string();
    assert!(
        err.contains("more than the limit"),
        "huge object refused up front: {err}"
    );
    let deep = "[".repeat(10_000);
    assert!(
        p.apply(EventKind::Add, &deep).is_err(),
        "deeply nested input is an error, not a stack overflow"
    );
    let errors = p
        .load(&format!(
            r#"{{"kind":"List","items":[{bad_quantity},{}]}}"#,
            node("n")
        ))
        .unwrap();
    assert_eq!(errors.len(), 1, "one bad object reported");
    assert_eq!(p.node_names(), vec!["n".to_string()], "the good object loaded");
}

#[test]
fn config_errors_name_the_field() {
    for (cfg, needle) in [
        ("{", "configuration"),
        (
            r#"{"sharingAffinity":[{"driver":"d","cel":{"k":"object.x ==="}}]}"#,
            "sharingAffinity[0].cel.k",
        ),
        (
            r#"{"sharingAffinity":[{"driver":"d","cel":{"k":"\"x\""},"selector":{"cel":{"expression":"1 +"}}}]}"#,
            "selector",
        ),
    ] {
        let err = Plugin::new(cfg).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains(needle), "{cfg}: {err}");
    }
}

/// A kubectl recording of a live cluster: the resource-claim controller already created the claim
/// (`<pod>-<entry>-<random>`) and named it in `status.resourceClaimStatuses`. The plugin uses that
/// claim, and only if the pod controls it (upstream `IsForPod`).
#[test]
fn claim_named_in_pod_status_is_used_only_when_the_pod_owns_it() {
    let claim_for = |owner_uid: &str| {
        json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",
               "metadata":{"name":"p-gpu-x7k2m","namespace":NS,"generateName":"p-gpu-",
                           "ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"p","uid":owner_uid,
                                               "controller":true}]},
               "spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"class-a",
                                                "allocationMode":"ExactCount","count":1}}]}}})
    };
    let mut pod = template_pod("p", "t");
    pod["status"] = json!({"resourceClaimStatuses":[{"name":"gpu","resourceClaimName":"p-gpu-x7k2m"}]});
    let mut objects = base();
    objects.push(template("t"));
    objects.push(pod.clone());
    objects.push(claim_for("uid-p"));
    let mut p = plugin("", &objects);
    assert_eq!(
        schedule(&mut p, "p"),
        vec![vec![g("gpu", "device-1", false, None)]]
    );
    assert!(p.claim("default/p-gpu").is_none(), "no second claim generated");
    assert_eq!(
        p.claim("default/p-gpu-x7k2m").unwrap().status.reserved_for[0].name,
        "p"
    );

    let mut objects = base();
    objects.push(template("t"));
    objects.push(pod);
    objects.push(claim_for("uid-someone-else"));
    let mut p = plugin("", &objects);
    let st = p.prefilter("default/p");
    assert_eq!(st.code, Code::UnschedulableAndUnresolvable, "{st}");
    assert!(st.reason.contains("not created for pod default/p"), "{st}");
}

#[test]
fn a_class_change_during_the_cycle_applies_to_later_filter_calls() {
    // Filter caches a request's compiled selectors for the cycle; a DeviceClass event must drop
    // that cache, as it changes what the class selects.
    let mut objects = base();
    objects.push(claim("c", &[req("r", "class-a")]).json());
    objects.push(pod("p", &["c"], "2026-01-01T00:00:00Z"));
    let mut p = plugin("", &objects);
    assert!(p.prefilter("default/p").is_success());
    assert!(p.filter(NODE).is_success());
    let narrowed = class("class-a", "device.driver == \"no-such-driver\"");
    p.apply(EventKind::Update, &narrowed.to_string()).unwrap();
    let status = p.filter(NODE);
    assert_eq!(status.code, Code::Unschedulable, "{status}");
    p.apply(EventKind::Update, &class_a().to_string()).unwrap();
    assert!(p.filter(NODE).is_success());
}

/// Per-node state is kept by a node id that a deleted node's successor reuses: neither Filter's
/// result nor the node's pools may carry over to another node.
#[test]
fn a_deleted_nodes_state_does_not_pass_to_the_next_node() {
    let mut objects = base();
    objects.push(claim("c1", &[req("gpu", "class-a")]).json());
    objects.push(pod("p", &["c1"], "2024-01-01T00:00:00Z"));
    let mut p = plugin("", &objects);
    assert!(p.prefilter(&format!("{NS}/p")).is_success());
    assert!(p.filter(NODE).is_success());
    p.apply(EventKind::Delete, &node(NODE).to_string()).unwrap();
    p.apply(EventKind::Add, &node("node-3").to_string()).unwrap();
    let err = p.score("node-3").expect_err("node-3 was never filtered");
    assert!(err.reason.contains("called before filter"), "{err}");
    let err = p.reserve(NODE).expect_err("node-1 is gone");
    assert!(err.reason.contains("called before filter"), "{err}");
    // node-3 has no devices: node-1's pools must not be taken for its own.
    let st = p.filter("node-3");
    assert_eq!(st.code, Code::Unschedulable, "{st}");
    // node-1 comes back under a new id, with its pools computed again.
    p.apply(EventKind::Add, &node(NODE).to_string()).unwrap();
    assert!(p.filter(NODE).is_success());
    assert!(p.score("node-3").is_err(), "node-3 did not pass filter");
    assert!(!p.reserve(NODE).unwrap().is_empty());
    // An unknown node is not found, and not recorded.
    let st = p.filter("node-9");
    assert_eq!(st.code, Code::UnschedulableAndUnresolvable, "{st}");
    assert!(st.reason.contains("node node-9 not found"), "{st}");
}

/// Filter's results belong to their cycle: after the next PreFilter (the same pod again, or
/// another pod after a Bind), a node filtered only in the earlier cycle has no result, whatever
/// the plugin keeps of the earlier cycle's memory.
#[test]
fn filter_results_do_not_pass_to_the_next_cycle() {
    let mut objects = base();
    objects.push(node("node-2"));
    objects.push(claim("c1", &[req("gpu", "class-a")]).json());
    objects.push(claim("c2", &[req("gpu", "class-a")]).json());
    objects.push(pod("p", &["c1"], "2024-01-01T00:00:00Z"));
    objects.push(pod("q", &["c2"], "2024-01-01T00:00:01Z"));
    let mut p = plugin("", &objects);
    let not_filtered = |p: &mut Plugin, node: &str| {
        let err = p.score(node).expect_err("not filtered in this cycle");
        assert!(err.reason.contains("called before filter"), "score: {err}");
        let err = p.prescore(&[node.to_string()]);
        assert!(
            err.reason.contains("did not pass filter in this cycle"),
            "prescore: {err}"
        );
        let err = p.reserve(node).expect_err("not filtered in this cycle");
        assert!(err.reason.contains("called before filter"), "reserve: {err}");
    };
    assert!(p.prefilter(&format!("{NS}/p")).is_success());
    assert!(p.filter(NODE).is_success());
    assert!(p.score(NODE).is_ok());
    // The same pod again: a new cycle.
    assert!(p.prefilter(&format!("{NS}/p")).is_success());
    not_filtered(&mut p, NODE);
    assert!(p.filter(NODE).is_success());
    assert!(!p.reserve(NODE).unwrap().is_empty());
    assert!(!p.bind(&format!("{NS}/p"), NODE).unwrap().is_empty());
    // Bind ended the cycle; the next pod's cycle starts without results.
    assert!(p.prefilter(&format!("{NS}/q")).is_success());
    not_filtered(&mut p, NODE);
    assert!(p.filter("node-2").is_success() || p.filter("node-2").code == Code::Unschedulable);
    not_filtered(&mut p, NODE);
    assert!(p.filter(NODE).is_success(), "device-2 is free");
    let alloc = p.reserve(NODE).unwrap();
    assert!(format!("{alloc:?}").contains("device-2"), "{alloc:?}");
}

/// The calls of one cycle share the claims' prepared requests, except a request in `All` mode:
/// its device set is the node's own, so every node allocates its own devices.
#[test]
fn all_mode_device_sets_are_per_node_within_a_cycle() {
    let slice_on = |node_name: &str, pool: &str, devices: &[&str]| {
        json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":format!("slice-{pool}")},
               "spec":{"driver":DRIVER,"nodeName":node_name,"pool":{"name":pool,"generation":1,"resourceSliceCount":1},
                       "devices": devices.iter().map(|d| json!({"name": d})).collect::<Vec<_>>()}})
    };
    let all =
        Req(json!({"name": "gpus", "exactly": {"deviceClassName": "class-a", "allocationMode": "All"}}));
    let objects = vec![
        node(NODE),
        node("node-2"),
        class_a(),
        slice_on(NODE, "pool-1", &["a", "b"]),
        slice_on("node-2", "pool-2", &["c", "d", "e"]),
        claim("c1", &[all]).json(),
        pod("p", &["c1"], "2024-01-01T00:00:00Z"),
    ];
    let mut p = plugin("", &objects);
    assert!(p.prefilter(&format!("{NS}/p")).is_success());
    // Both nodes in one cycle, then each again (a second call of the cycle on each).
    for node_name in [NODE, "node-2", NODE, "node-2"] {
        let st = p.filter(node_name);
        assert!(st.is_success(), "{node_name}: {st}");
    }
    let got = p.reserve("node-2").expect("reserve");
    let devices: Vec<&str> = got[0]
        .allocation
        .devices
        .results
        .iter()
        .map(|r| r.device.as_str())
        .collect();
    assert_eq!(devices, ["c", "d", "e"]);
}

/// Filter through a [`NodeName`] (which remembers its lookup) decides as Filter by name while nodes come and go: a memo of a
/// deleted node finds its id free, a memo is looked up again after a node was added (a deleted
/// node's id goes to the next new node), and a memo made by another plugin instance is never
/// taken for its own.
#[test]
fn filter_by_node_name_follows_nodes_added_and_deleted() {
    let mut objects = base();
    objects.push(node("node-2"));
    objects.push(claim("c1", &[req("gpu", "class-a")]).json());
    objects.push(pod("p", &["c1"], "2024-01-01T00:00:00Z"));
    let mut p = plugin("", &objects);
    let pod = format!("{NS}/p");
    assert!(p.prefilter(&pod).is_success());
    let (m1, m2, m9) = (
        NodeName::new(NODE),
        NodeName::new("node-2"),
        NodeName::new("node-9"),
    );
    // Made before any call below changes the nodes: tried on a second plugin at the end.
    let other = NodeName::new(NODE);
    assert!(p.filter(&other).is_success());
    for _ in 0..2 {
        assert_eq!(p.filter(&m1), p.filter(NODE));
        assert!(p.filter(&m1).is_success());
        let st = p.filter(&m2);
        assert_eq!(st, p.filter("node-2"));
        assert_eq!(st.code, Code::Unschedulable, "node-2 has no devices: {st}");
        let st = p.filter(&m9);
        assert_eq!(st.code, Code::UnschedulableAndUnresolvable, "{st}");
        assert!(st.reason.contains("node node-9 not found"), "{st}");
    }
    // node-1 leaves and node-3 takes its id: node-1's memo must not find node-3.
    p.apply(EventKind::Delete, &node(NODE).to_string()).unwrap();
    p.apply(EventKind::Add, &node("node-3").to_string()).unwrap();
    let st = p.filter(&m1);
    assert_eq!(st.code, Code::UnschedulableAndUnresolvable, "{st}");
    assert!(st.reason.contains("node node-1 not found"), "{st}");
    assert_eq!(p.filter(&m2).code, Code::Unschedulable);
    // node-1 comes back; node-9, not found before, appears (a memo of "not found" is refreshed too).
    p.apply(EventKind::Add, &node(NODE).to_string()).unwrap();
    p.apply(EventKind::Add, &node("node-9").to_string()).unwrap();
    assert!(p.filter(&m1).is_success());
    let st = p.filter(&m9);
    assert_eq!(
        st.code,
        Code::Unschedulable,
        "node-9 is known now, without devices: {st}"
    );
    // A node replaced by an update keeps its id and the memo: the update's content counts.
    let mut labelled = node("node-9");
    labelled["metadata"]["labels"] = json!({"zone": "b"});
    p.apply(EventKind::Update, &labelled.to_string()).unwrap();
    assert_eq!(p.filter(&m9), p.filter("node-9"));
    // A second plugin with the same nodes added in the other order: the same number of node
    // changes, other ids. The first plugin's memo is looked up again there.
    let mut reordered = vec![node("node-2")];
    reordered.extend(objects.iter().cloned());
    reordered.remove(1 + reordered[1..].iter().position(|o| *o == node("node-2")).unwrap());
    let mut q = plugin("", &reordered);
    assert!(q.prefilter(&pod).is_success());
    assert!(q.filter(&other).is_success());
    assert_eq!(q.filter(&m2).code, Code::Unschedulable);
}
