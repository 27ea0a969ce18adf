//! KEP-5981 sharing affinity through the cycle API: one test per rule, the KEP stories as
//! multi-pod sequences, packing, and the affinity analogues of upstream cases 18, 23 and 25.

mod common;

use common::*;
use serde_json::{Value, json};
use sharing_affinity_core::Code;
use sharing_affinity_core::affinity::LockState;
use sharing_affinity_core::index::DeviceKey;
use sharing_affinity_core::{EventKind, NodeName, Plugin};

const SUBNET: &str = "object.kind == \"NICConfig\" ? object.subnet : \"\"";
const PKEY: &str = "object.kind == \"NICConfig\" ? object.pkey : \"\"";

/// A metadata slice of pool-1 carrying extractors (pool count includes it).
fn meta(extractors: Value) -> Value {
    json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"pool-1-meta"},
           "spec":{"driver":DRIVER,"nodeName":NODE,"pool":{"name":"pool-1","generation":1,"resourceSliceCount":2},
                   "sharingAffinity": extractors}})
}

fn subnet_extractor() -> Value {
    meta(json!([{"cel": {"subnet": SUBNET}}]))
}

/// A NIC with `slots` consumable slots (default 1 per claim).
fn nic(name: &str, slots: &str) -> Dev {
    device(name).ama().cap_policy(
        "slots",
        slots,
        json!({"default": "1", "validRange": {"min": "1"}}),
    )
}

fn devices_slice(devs: &[Dev]) -> Value {
    slice("pool-1-devices", "pool-1", 1, 2, devs)
}

fn nic_config(subnet: &str) -> Value {
    json!({"apiVersion": "net.example.com/v1", "kind": "NICConfig", "subnet": subnet})
}

fn nic_claim(name: &str, subnet: &str) -> Claim {
    claim(name, &[req("nic", "class-a")]).config(&[], nic_config(subnet))
}

/// Base cluster: node, class A, extractor metadata slice, devices.
fn cluster(extractors: Value, devs: &[Dev]) -> Vec<Value> {
    vec![node(NODE), class_a(), extractors, devices_slice(devs)]
}

fn add(p: &mut Plugin, objects: &[Value]) {
    for o in objects {
        p.apply(EventKind::Add, &o.to_string())
            .unwrap_or_else(|e| panic!("{o}: {e}"));
    }
}

/// Adds a claim and a pod using it.
fn add_pod(p: &mut Plugin, pod_name: &str, c: Claim) {
    let claim_name = c.0["metadata"]["name"].as_str().unwrap().to_string();
    add(
        p,
        &[c.json(), pod(pod_name, &[&claim_name], "2026-01-01T00:00:00Z")],
    );
}

fn device_of(got: &[Vec<Got>]) -> &str {
    &got[0][0].1
}

fn lock(p: &mut Plugin, dev: &str) -> LockState {
    p.lock_state(&DeviceKey::new(DRIVER, "pool-1", dev))
}

fn locked(pairs: &[(&str, &str)]) -> LockState {
    LockState::Locked(std::sync::Arc::new(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    ))
}

// ------------------------------------------------------------------ rules

#[test]
fn first_claim_locks_clean_device_and_equal_values_share_it() {
    let mut p = plugin(
        "",
        &cluster(subnet_extractor(), &[nic("eth1", "4"), nic("eth2", "4")]),
    );
    assert_eq!(lock(&mut p, "eth1"), LockState::Clean);
    add_pod(&mut p, "a", nic_claim("ca", "x"));
    assert_eq!(device_of(&schedule(&mut p, "a")), "eth1");
    assert_eq!(lock(&mut p, "eth1"), locked(&[("subnet", "x")]));
    add_pod(&mut p, "b", nic_claim("cb", "x"));
    assert_eq!(
        device_of(&schedule(&mut p, "b")),
        "eth1",
        "equal values share the device"
    );
}

#[test]
fn different_values_cannot_share_and_reason_names_device_and_key() {
    let mut p = plugin("", &cluster(subnet_extractor(), &[nic("eth1", "4")]));
    add_pod(&mut p, "a", nic_claim("ca", "subnet-A"));
    schedule(&mut p, "a");
    add_pod(&mut p, "b", nic_claim("cb", "subnet-B"));
    assert_status(
        run(&mut p, "b"),
        Code::Unschedulable,
        "eth1: locked to subnet=subnet-A, claim wants subnet=subnet-B",
        "lock conflict",
    );
}

#[test]
fn missing_key_makes_device_not_viable_but_other_pools_remain() {
    let mut objects = cluster(subnet_extractor(), &[nic("eth1", "4")]);
    objects.push(json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"plain"},
        "spec":{"driver":DRIVER,"nodeName":NODE,"pool":{"name":"pool-2","generation":1,"resourceSliceCount":1},
                "devices":[nic("plain-0", "4").0]}}));
    let mut p = plugin("", &objects);
    add_pod(&mut p, "a", claim("ca", &[req("nic", "class-a")]));
    let got = schedule(&mut p, "a");
    assert_eq!(
        device_of(&got),
        "plain-0",
        "strict gating skips eth1; a pool without extractors still works"
    );
    assert_eq!(lock(&mut p, "eth1"), LockState::Clean, "never an empty lock");
}

#[test]
fn empty_string_means_not_handled() {
    let mut p = plugin("", &cluster(subnet_extractor(), &[nic("eth1", "4")]));
    let c = nic_claim("ca", "x").config(&[], json!({"kind": "SomethingElse"}));
    add_pod(&mut p, "a", c);
    assert_eq!(
        device_of(&schedule(&mut p, "a")),
        "eth1",
        "the other object yields \"\" and is ignored"
    );
}

#[test]
fn cel_error_or_non_string_makes_device_not_viable() {
    for (expr, what) in [
        ("object.subnetMissing", "CEL error"),
        ("object.kind == \"NICConfig\" ? 42 : \"\"", "non-string"),
    ] {
        let mut p = plugin(
            "",
            &cluster(meta(json!([{"cel": {"subnet": expr}}])), &[nic("eth1", "4")]),
        );
        add_pod(&mut p, "a", nic_claim("ca", "x"));
        assert_status(
            run(&mut p, "a"),
            Code::Unschedulable,
            "eth1: affinity extraction failed",
            what,
        );
    }
}

#[test]
fn two_objects_with_different_values_are_unresolvable() {
    let mut p = plugin("", &cluster(subnet_extractor(), &[nic("eth1", "4")]));
    add_pod(
        &mut p,
        "a",
        nic_claim("ca", "x").config(&["nic"], nic_config("y")),
    );
    assert_status(
        run(&mut p, "a"),
        Code::UnschedulableAndUnresolvable,
        "two values",
        "self-inconsistent claim",
    );
}

#[test]
fn config_scope_is_per_request_and_covers_subrequests() {
    let mut p = plugin(
        "",
        &cluster(subnet_extractor(), &[nic("eth1", "4"), nic("eth2", "4")]),
    );
    let c = claim(
        "ca",
        &[
            req("a", "class-a"),
            req_first("b", &[sub("only", "class-a", json!({}))]),
        ],
    )
    .config(&["a"], nic_config("x"))
    .config(&["b"], nic_config("y"));
    add_pod(&mut p, "p", c);
    let got = schedule(&mut p, "p");
    assert_eq!(got[0][0], g("a", "eth1", true, Some(&[("slots", "1")])));
    assert_eq!(
        got[0][1],
        g("b/only", "eth2", true, Some(&[("slots", "1")])),
        "no cross-talk: b locks another device"
    );
    assert_eq!(lock(&mut p, "eth1"), locked(&[("subnet", "x")]));
    assert_eq!(lock(&mut p, "eth2"), locked(&[("subnet", "y")]));
}

#[test]
fn class_config_is_not_a_source() {
    let class = json!({"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"class-a"},
        "spec":{"selectors":[{"cel":{"expression":"device.driver == \"driver-a\""}}],
                "config":[{"opaque":{"driver":DRIVER,"parameters":nic_config("x")}}]}});
    let mut p = plugin(
        "",
        &[
            node(NODE),
            class,
            subnet_extractor(),
            devices_slice(&[nic("eth1", "4")]),
        ],
    );
    add_pod(&mut p, "a", claim("ca", &[req("nic", "class-a")]));
    assert_status(
        run(&mut p, "a"),
        Code::Unschedulable,
        "no value for affinity key subnet",
        "class config ignored",
    );
}

#[test]
fn selector_scopes_extractors_and_collisions_are_errors() {
    let ex = meta(json!([
        {"selector": {"cel": {"expression": "device.attributes[\"driver-a\"].kind == \"nic\""}}, "cel": {"subnet": SUBNET}},
        {"selector": {"cel": {"expression": "device.attributes[\"driver-a\"].kind == \"vf\""}}, "cel": {"pkey": PKEY}},
    ]));
    let devs = [
        nic("nic-0", "4").attr("kind", "string", json!("nic")),
        nic("vf-0", "4").attr("kind", "string", json!("vf")),
    ];
    let mut p = plugin("", &cluster(ex, &devs));
    // Only a subnet: the NIC extractor applies to nic-0, the VF extractor (pkey) gates vf-0.
    add_pod(&mut p, "a", nic_claim("ca", "x"));
    assert_eq!(device_of(&schedule(&mut p, "a")), "nic-0");
    assert_eq!(lock(&mut p, "nic-0"), locked(&[("subnet", "x")]));

    // Two extractors declaring one key for the same device: a slice error for that device.
    let ex = meta(json!([{"cel": {"subnet": SUBNET}}, {"cel": {"subnet": SUBNET, "pkey": PKEY}}]));
    let mut p = plugin("", &cluster(ex, &[nic("eth1", "4")]));
    add_pod(&mut p, "a", nic_claim("ca", "x"));
    assert_status(
        run(&mut p, "a"),
        Code::Unschedulable,
        "key subnet declared by both",
        "collision",
    );
}

#[test]
fn extractors_come_from_metadata_slices_of_the_same_pool_generation() {
    // Extractors on generation 1, devices on generation 2: the metadata slice is stale.
    let stale = meta(json!([{"cel": {"subnet": SUBNET}}]));
    let devs = json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"pool-1-devices"},
        "spec":{"driver":DRIVER,"nodeName":NODE,"pool":{"name":"pool-1","generation":2,"resourceSliceCount":1},
                "devices":[nic("eth1", "4").0]}});
    let mut p = plugin("", &[node(NODE), class_a(), stale, devs]);
    add_pod(&mut p, "a", claim("ca", &[req("nic", "class-a")]));
    assert_eq!(
        device_of(&schedule(&mut p, "a")),
        "eth1",
        "no extractors in effect: plain sharing"
    );
}

#[test]
fn config_supplied_extractors_apply_by_driver_and_pool() {
    let config =
        json!({"sharingAffinity": [{"driver": DRIVER, "pool": "pool-1", "cel": {"subnet": SUBNET}}]})
            .to_string();
    let devs = slice("s", "pool-1", 1, 1, &[nic("eth1", "4")]);
    let other = json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"t"},
        "spec":{"driver":DRIVER,"nodeName":NODE,"pool":{"name":"pool-2","generation":1,"resourceSliceCount":1},
                "devices":[nic("free-0", "4").0]}});
    let mut p = plugin(&config, &[node(NODE), class_a(), devs, other]);
    add_pod(&mut p, "a", nic_claim("ca", "x"));
    schedule(&mut p, "a");
    assert_eq!(lock(&mut p, "eth1"), locked(&[("subnet", "x")]));
    add_pod(&mut p, "b", nic_claim("cb", "y"));
    let got = schedule(&mut p, "b");
    assert_eq!(got[0][0].1, "free-0", "pool-2 has no extractor: unrestricted");
}

#[test]
fn lock_clears_when_last_claim_is_deleted() {
    let mut p = plugin("", &cluster(subnet_extractor(), &[nic("eth1", "4")]));
    add_pod(&mut p, "a", nic_claim("ca", "x"));
    schedule(&mut p, "a");
    add_pod(&mut p, "b", nic_claim("cb", "x"));
    schedule(&mut p, "b");
    let bound_a = p.claim("default/ca").unwrap().clone();
    let bound_b = p.claim("default/cb").unwrap().clone();
    p.apply(
        EventKind::Delete,
        &serde_json::to_string(&json!({"kind":"ResourceClaim","metadata":bound_a.metadata})).unwrap(),
    )
    .unwrap();
    assert_eq!(
        lock(&mut p, "eth1"),
        locked(&[("subnet", "x")]),
        "cb still holds eth1"
    );
    p.apply(
        EventKind::Delete,
        &json!({"kind":"ResourceClaim","metadata":bound_b.metadata}).to_string(),
    )
    .unwrap();
    assert_eq!(
        lock(&mut p, "eth1"),
        LockState::Clean,
        "released by the last claim"
    );
    add_pod(&mut p, "c", nic_claim("cc", "y"));
    assert_eq!(device_of(&schedule(&mut p, "c")), "eth1");
}

fn existing(name: &str, dev: &str, share: &str, config: Option<Value>) -> Value {
    let mut c = claim(name, &[req("nic", "class-a")]);
    if let Some(cfg) = config {
        c = c.config(&[], cfg);
    }
    c.allocated(
        json!([{"request":"nic","driver":DRIVER,"pool":"pool-1","device":dev,"shareID":share,
                        "consumedCapacity":{"slots":"1"}}]),
    )
    .json()
}

#[test]
fn locks_are_rebuilt_from_allocated_claims() {
    let mut objects = cluster(subnet_extractor(), &[nic("eth1", "4"), nic("eth2", "4")]);
    objects.push(existing(
        "old-1",
        "eth1",
        "11111111-0000-0000-0000-000000000001",
        Some(nic_config("x")),
    ));
    objects.push(existing(
        "old-2",
        "eth1",
        "11111111-0000-0000-0000-000000000002",
        Some(nic_config("x")),
    ));
    let mut p = plugin("", &objects);
    assert_eq!(lock(&mut p, "eth1"), locked(&[("subnet", "x")]));
    add_pod(&mut p, "a", nic_claim("ca", "y"));
    assert_eq!(device_of(&schedule(&mut p, "a")), "eth2");
}

#[test]
fn unreconstructable_causes_block_until_clean() {
    let cases: [(&str, Vec<Value>, &str); 4] = [
        (
            "legacy claim without config",
            vec![existing("old", "eth1", "s-1", None)],
            "",
        ),
        (
            "claims that disagree",
            vec![
                existing("old-1", "eth1", "s-1", Some(nic_config("x"))),
                existing("old-2", "eth1", "s-2", Some(nic_config("y"))),
            ],
            "",
        ),
        (
            "CEL error on the holder",
            vec![existing("old", "eth1", "s-1", Some(json!({"kind": "NICConfig"})))],
            "",
        ),
        (
            "changed extractors",
            vec![existing("old", "eth1", "s-1", Some(nic_config("x")))],
            "pkey",
        ),
    ];
    for (what, holders, extra_key) in cases {
        let ex = if extra_key.is_empty() {
            subnet_extractor()
        } else {
            meta(json!([{"cel": {"subnet": SUBNET, "pkey": PKEY}}]))
        };
        let mut objects = cluster(ex, &[nic("eth1", "4")]);
        objects.extend(holders);
        let mut p = plugin("", &objects);
        assert_eq!(lock(&mut p, "eth1"), LockState::Unreconstructable, "{what}");
        let c = claim("ca", &[req("nic", "class-a")])
            .config(&[], json!({"kind": "NICConfig", "subnet": "x", "pkey": "1"}));
        add_pod(&mut p, "a", c);
        assert_status(
            run(&mut p, "a"),
            Code::Unschedulable,
            "cannot be reconstructed",
            what,
        );
    }
}

#[test]
fn extractor_change_rederives_locks_of_bound_claims() {
    let mut p = plugin("", &cluster(subnet_extractor(), &[nic("eth1", "4")]));
    let with_pkey = claim("ca", &[req("nic", "class-a")])
        .config(&[], json!({"kind": "NICConfig", "subnet": "x", "pkey": "1"}));
    add_pod(&mut p, "a", with_pkey);
    schedule(&mut p, "a");
    assert_eq!(
        lock(&mut p, "eth1"),
        locked(&[("subnet", "x")]),
        "values fixed by Reserve"
    );
    // The driver adds a key: the bound claim's lock is re-derived from its config.
    add(
        &mut p,
        &[meta(json!([{"cel": {"subnet": SUBNET, "pkey": PKEY}}]))],
    );
    assert_eq!(lock(&mut p, "eth1"), locked(&[("pkey", "1"), ("subnet", "x")]));
    // A bound claim without the new key cannot be re-derived.
    let mut q = plugin("", &cluster(subnet_extractor(), &[nic("eth1", "4")]));
    add_pod(&mut q, "a", nic_claim("ca", "x"));
    schedule(&mut q, "a");
    add(
        &mut q,
        &[meta(json!([{"cel": {"subnet": SUBNET, "pkey": PKEY}}]))],
    );
    assert_eq!(lock(&mut q, "eth1"), LockState::Unreconstructable);
}

#[test]
fn reserve_sets_tentative_lock_and_unreserve_removes_it() {
    let mut p = plugin("", &cluster(subnet_extractor(), &[nic("eth1", "4")]));
    add_pod(&mut p, "a", nic_claim("ca", "x"));
    assert!(p.prefilter("default/a").is_success());
    assert!(p.filter(NODE).is_success());
    p.reserve(NODE).unwrap();
    assert_eq!(
        lock(&mut p, "eth1"),
        locked(&[("subnet", "x")]),
        "in-flight claim locks"
    );
    p.unreserve("default/a", NODE).unwrap();
    assert_eq!(lock(&mut p, "eth1"), LockState::Clean, "unreserve releases");
}

#[test]
fn reserve_fails_when_device_was_locked_meanwhile() {
    let mut p = plugin("", &cluster(subnet_extractor(), &[nic("eth1", "4")]));
    add_pod(&mut p, "a", nic_claim("ca", "x"));
    assert!(p.prefilter("default/a").is_success());
    assert!(p.filter(NODE).is_success());
    // Another scheduler instance allocates eth1 to subnet y between Filter and Reserve.
    add(&mut p, &[existing("other", "eth1", "s-9", Some(nic_config("y")))]);
    let err = p.reserve(NODE).unwrap_err();
    assert_eq!(err.code, Code::Unschedulable);
    assert!(
        err.reason
            .contains("eth1: locked to subnet=y, claim wants subnet=x"),
        "{}",
        err.reason
    );
    assert_eq!(
        lock(&mut p, "eth1"),
        locked(&[("subnet", "y")]),
        "no state was changed by the failed reserve"
    );
}

#[test]
fn unreserve_keeps_lock_held_by_another_claim() {
    let mut objects = cluster(subnet_extractor(), &[nic("eth1", "4")]);
    objects.push(existing("old", "eth1", "s-1", Some(nic_config("x"))));
    let mut p = plugin("", &objects);
    add_pod(&mut p, "a", nic_claim("ca", "x"));
    assert!(p.prefilter("default/a").is_success());
    assert!(p.filter(NODE).is_success());
    p.reserve(NODE).unwrap();
    p.unreserve("default/a", NODE).unwrap();
    assert_eq!(lock(&mut p, "eth1"), locked(&[("subnet", "x")]));
}

/// Pod A's binding cycle overlaps pod B's scheduling cycle (as in kube-scheduler): B's PreFilter
/// must not drop A's reservation, and Bind/Unreserve act on the pod they name.
#[test]
fn reservations_are_per_pod_and_survive_the_next_cycle() {
    let mut p = plugin(
        "",
        &cluster(subnet_extractor(), &[nic("eth1", "4"), nic("eth2", "4")]),
    );
    add_pod(&mut p, "a", nic_claim("ca", "x"));
    add_pod(&mut p, "b", nic_claim("cb", "y"));
    assert_eq!(device_of(&run(&mut p, "a").unwrap()), "eth1");
    // B's cycle starts while A is still reserved.
    assert!(p.prefilter("default/b").is_success());
    assert_eq!(
        p.reserved_node("default/a"),
        Some(NODE),
        "B's prefilter kept A's reservation"
    );
    assert_eq!(lock(&mut p, "eth1"), locked(&[("subnet", "x")]));
    assert!(p.filter(NODE).is_success());
    let b = p.reserve(NODE).unwrap();
    assert_eq!(
        b[0].allocation.devices.results[0].device, "eth2",
        "A's in-flight lock holds eth1"
    );
    // Unreserving B releases only B.
    p.unreserve("default/b", NODE).unwrap();
    assert_eq!(lock(&mut p, "eth2"), LockState::Clean);
    assert_eq!(lock(&mut p, "eth1"), locked(&[("subnet", "x")]));
    assert_eq!(p.reserved_node("default/a"), Some(NODE));
    assert_eq!(p.reserved_node("default/b"), None);
    // B again, then both bind, A first (its binding cycle ends after B's Reserve).
    assert_eq!(device_of(&run(&mut p, "b").unwrap()), "eth2");
    assert_eq!(p.bind("default/a", NODE).unwrap()[0].claim, "default/ca");
    assert_eq!(p.bind("default/b", NODE).unwrap()[0].claim, "default/cb");
    assert_eq!(lock(&mut p, "eth1"), locked(&[("subnet", "x")]));
    assert_eq!(lock(&mut p, "eth2"), locked(&[("subnet", "y")]));
    for (claim, dev) in [("default/ca", "eth1"), ("default/cb", "eth2")] {
        let a = p
            .claim(claim)
            .and_then(|c| c.status.allocation.as_ref())
            .expect("allocated");
        assert_eq!(a.devices.results[0].device, dev);
    }
    assert_eq!(p.pod("default/a").unwrap().spec.node_name, NODE);
    // Neither pod holds a reservation any more.
    let err = p.bind("default/a", NODE).unwrap_err();
    assert!(err.reason.contains("pod default/a"), "{}", err.reason);
    let err = p.unreserve("default/b", NODE).unwrap_err();
    assert!(err.reason.contains("pod default/b"), "{}", err.reason);
}

/// A pod deleted and recreated under the same name between Reserve and Bind is not the reserved
/// pod: Bind refuses, naming both UIDs, and Unreserve still releases the reservation.
#[test]
fn bind_refuses_a_recreated_pod() {
    let mut p = plugin("", &cluster(subnet_extractor(), &[nic("eth1", "4")]));
    add_pod(&mut p, "a", nic_claim("ca", "x"));
    run(&mut p, "a").unwrap();
    let mut recreated = pod("a", &["ca"], "2026-01-01T00:00:00Z");
    recreated["metadata"]["uid"] = json!("uid-a-2");
    add(&mut p, &[recreated]);
    let err = p.bind("default/a", NODE).unwrap_err();
    assert!(err.reason.contains("uid uid-a was reserved"), "{}", err.reason);
    assert!(err.reason.contains("uid-a-2"), "{}", err.reason);
    let err = p.bind("default/a", "node-2").unwrap_err();
    assert!(err.reason.contains("reserved on node-1"), "{}", err.reason);
    p.unreserve("default/a", NODE).unwrap();
    assert_eq!(lock(&mut p, "eth1"), LockState::Clean);
}

/// A claim with two requests on one shared device is two holders: the lock is derived from
/// each request's config, not from the last result of the claim.
#[test]
fn locks_are_derived_per_claim_and_request() {
    let two = |cfg: &dyn Fn(Claim) -> Claim| {
        cfg(claim("old", &[req("a", "class-a"), req("b", "class-a")]))
            .allocated(json!([
                shared("a", "eth1", "s-1", json!({"slots": "1"})),
                shared("b", "eth1", "s-2", json!({"slots": "1"}))
            ]))
            .json()
    };
    // Request a has no config in scope, b has subnet=x.
    let only_b = two(&|c| c.config(&["b"], nic_config("x")));
    let mut objects = cluster(subnet_extractor(), &[nic("eth1", "4")]);
    objects.push(only_b);
    let mut p = plugin("", &objects);
    assert_eq!(lock(&mut p, "eth1"), LockState::Unreconstructable);
    // Both have subnet=x but different values for a key added later.
    let pkeys = two(&|c| {
        c.config(&["a"], json!({"kind": "NICConfig", "subnet": "x", "pkey": "1"}))
            .config(&["b"], json!({"kind": "NICConfig", "subnet": "x", "pkey": "2"}))
    });
    let mut objects = cluster(subnet_extractor(), &[nic("eth1", "4")]);
    objects.push(pkeys);
    let mut p = plugin("", &objects);
    assert_eq!(lock(&mut p, "eth1"), locked(&[("subnet", "x")]));
    add(
        &mut p,
        &[meta(json!([{"cel": {"subnet": SUBNET, "pkey": PKEY}}]))],
    );
    assert_eq!(lock(&mut p, "eth1"), LockState::Unreconstructable);
}

/// Values fixed at Reserve are a cache keyed by the extractor's content: a new expression with
/// the same key name is evaluated again, and one that fails makes the device unreconstructable.
#[test]
fn extractor_change_with_the_same_keys_rederives_the_lock() {
    let mut p = plugin("", &cluster(subnet_extractor(), &[nic("eth1", "4")]));
    let c = claim("ca", &[req("nic", "class-a")])
        .config(&[], json!({"kind": "NICConfig", "subnet": "x", "alt": "z"}));
    add_pod(&mut p, "a", c);
    schedule(&mut p, "a");
    assert_eq!(lock(&mut p, "eth1"), locked(&[("subnet", "x")]));
    let alt = r#"object.kind == "NICConfig" ? object.alt : """#;
    add(&mut p, &[meta(json!([{"cel": {"subnet": alt}}]))]);
    assert_eq!(
        lock(&mut p, "eth1"),
        locked(&[("subnet", "z")]),
        "new expression, same key"
    );
    add(&mut p, &[meta(json!([{"cel": {"subnet": "object.nothere"}}]))]);
    assert_eq!(
        lock(&mut p, "eth1"),
        LockState::Unreconstructable,
        "fails on the holder"
    );
}

/// Admin access bypasses affinity: no gating (no config needed), no lock check, and the lock
/// state of the device it lands on does not change.
#[test]
fn admin_access_bypasses_affinity() {
    let mut objects = cluster(subnet_extractor(), &[nic("eth1", "4"), nic("eth2", "4")]);
    objects.push(existing("old", "eth1", "s-1", Some(nic_config("y"))));
    let mut p = plugin("", &objects);
    add_pod(&mut p, "adm", claim("cadm", &[req("nic", "class-a").admin()]));
    assert_eq!(
        device_of(&schedule(&mut p, "adm")),
        "eth1",
        "locked device, no config"
    );
    assert_eq!(lock(&mut p, "eth1"), locked(&[("subnet", "y")]), "lock unchanged");
    add_pod(&mut p, "b", nic_claim("cb", "z"));
    assert_eq!(
        device_of(&schedule(&mut p, "b")),
        "eth2",
        "eth1 is still locked to y"
    );
    // On a clean device the admin claim sets no lock, and holds none that blocks others.
    let mut p = plugin("", &cluster(subnet_extractor(), &[nic("eth1", "4")]));
    add_pod(&mut p, "adm", claim("cadm", &[req("nic", "class-a").admin()]));
    assert_eq!(device_of(&schedule(&mut p, "adm")), "eth1");
    assert_eq!(lock(&mut p, "eth1"), LockState::Clean, "admin sets no lock");
    add_pod(&mut p, "c", nic_claim("cc", "z"));
    assert_eq!(device_of(&schedule(&mut p, "c")), "eth1");
    assert_eq!(lock(&mut p, "eth1"), locked(&[("subnet", "z")]));
}

/// Claim events between Reserve and Bind update the stored object, not the in-flight
/// allocation; after Bind, an event that predates it (by `resourceVersion`) does not clear the
/// lock, and a newer one does.
#[test]
fn inflight_allocations_survive_claim_events() {
    let mut p = plugin("", &cluster(subnet_extractor(), &[nic("eth1", "4")]));
    let mut c = nic_claim("ca", "x");
    c.0["metadata"]["resourceVersion"] = json!("5");
    add_pod(&mut p, "a", c.clone());
    run(&mut p, "a").unwrap();
    let mut update = c.clone();
    update.0["metadata"]["resourceVersion"] = json!("6");
    update.0["metadata"]["labels"] = json!({"touched": "yes"});
    add(&mut p, &[update.json()]);
    assert_eq!(
        lock(&mut p, "eth1"),
        locked(&[("subnet", "x")]),
        "event kept the in-flight lock"
    );
    assert_eq!(p.reserved_node("default/a"), Some(NODE));
    p.bind("default/a", NODE).unwrap();
    let bound = p.claim("default/ca").unwrap();
    assert!(bound.status.allocation.is_some());
    assert_eq!(bound.metadata.resource_version, "6", "the newer metadata is kept");
    for stale in ["5", "6"] {
        let mut e = c.clone();
        e.0["metadata"]["resourceVersion"] = json!(stale);
        add(&mut p, &[e.json()]);
        assert_eq!(
            lock(&mut p, "eth1"),
            locked(&[("subnet", "x")]),
            "stale event rv {stale}"
        );
        assert!(p.claim("default/ca").unwrap().status.allocation.is_some());
    }
    let mut newer = c.clone();
    newer.0["metadata"]["resourceVersion"] = json!("7");
    add(&mut p, &[newer.json()]);
    assert_eq!(
        lock(&mut p, "eth1"),
        LockState::Clean,
        "a newer deallocation releases"
    );
}

/// Reserve re-checks consumable capacity: when another claim took the last slot after Filter,
/// Reserve fails naming the device and the capacity.
#[test]
fn reserve_rechecks_consumable_capacity() {
    let mut p = plugin("", &cluster(subnet_extractor(), &[nic("eth1", "1")]));
    add_pod(&mut p, "a", nic_claim("ca", "x"));
    assert!(p.prefilter("default/a").is_success());
    assert!(p.filter(NODE).is_success());
    add(&mut p, &[existing("other", "eth1", "s-9", Some(nic_config("x")))]);
    let err = p.reserve(NODE).unwrap_err();
    assert_eq!(err.code, Code::Unschedulable);
    assert!(err.reason.contains("eth1: capacity slots"), "{}", err.reason);
    assert_eq!(p.reserved_node("default/a"), None, "nothing reserved");
}

/// Reserve re-checks counters too: when another claim consumed the shared counter after Filter,
/// Reserve fails naming the device and the counter set.
#[test]
fn reserve_rechecks_counters() {
    let sets = json!([{"name": "gpu0", "counters": {"memory": {"value": "8Gi"}}}]);
    let parts = [
        device("part0").counters("gpu0", json!({"memory": {"value": "5Gi"}})),
        device("part1").counters("gpu0", json!({"memory": {"value": "5Gi"}})),
    ];
    let mut p = plugin(
        "",
        &[
            node(NODE),
            class_a(),
            slice("slice-1", "pool-1", 1, 2, &parts),
            counter_slice("slice-2", "pool-1", 2, sets),
        ],
    );
    add_pod(&mut p, "a", claim("ca", &[req("gpu", "class-a")]));
    assert!(p.prefilter("default/a").is_success());
    assert!(p.filter(NODE).is_success(), "part0 fits: 5Gi of 8Gi");
    let other = claim("other", &[req("gpu", "class-a")]).allocated(json!([dedicated("gpu", "part1")]));
    add(&mut p, &[other.json()]);
    let err = p.reserve(NODE).unwrap_err();
    assert_eq!(err.code, Code::Unschedulable);
    assert!(
        err.reason
            .contains("part0: counters of counter set gpu0 are no longer available"),
        "{}",
        err.reason
    );
    assert_eq!(p.reserved_node("default/a"), None, "nothing reserved");
}

/// Only extractors that apply to a device the request could select are evaluated: an
/// extractor of another driver's pool that finds two different values in the claim's config
/// does not make the pod unresolvable.
#[test]
fn only_extractors_of_candidate_devices_are_evaluated() {
    let other_driver = json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"b-0"},
        "spec":{"driver":"driver-b","nodeName":NODE,"pool":{"name":"pool-b","generation":1,"resourceSliceCount":1},
                "sharingAffinity":[{"cel": {"vlan": "has(object.vlan) ? object.vlan : \"\""}}],
                "devices":[nic("b-eth", "4").0]}});
    let mut objects = cluster(subnet_extractor(), &[nic("eth1", "4")]);
    objects.push(other_driver);
    let mut p = plugin("", &objects);
    let c = claim("ca", &[req("nic", "class-a")])
        .config(&[], json!({"kind": "NICConfig", "subnet": "x", "vlan": "1"}))
        .config(&[], json!({"kind": "NICConfig", "subnet": "x", "vlan": "2"}));
    add_pod(&mut p, "a", c);
    assert_eq!(device_of(&schedule(&mut p, "a")), "eth1");
    // A conflict among the extractors of candidate devices is still unresolvable.
    let c = claim("cb", &[req("nic", "class-a")])
        .config(&[], nic_config("x"))
        .config(&[], nic_config("y"));
    add_pod(&mut p, "b", c);
    assert_status(
        run(&mut p, "b"),
        Code::UnschedulableAndUnresolvable,
        "two values",
        "conflict on a candidate's extractor",
    );
}

/// Metadata-slice extractors are authoritative for their pool: configuration entries for it are
/// ignored (one warning per pool) instead of declaring the same key twice.
#[test]
fn slice_extractors_are_authoritative_over_configuration() {
    let config = json!({"sharingAffinity": [{"driver": DRIVER, "cel": {"subnet": SUBNET}}]}).to_string();
    let mut p = plugin(&config, &cluster(subnet_extractor(), &[nic("eth1", "4")]));
    add_pod(&mut p, "a", nic_claim("ca", "x"));
    assert_eq!(device_of(&schedule(&mut p, "a")), "eth1");
    assert_eq!(lock(&mut p, "eth1"), locked(&[("subnet", "x")]));
    let warnings = p.take_warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("pool driver-a/pool-1"), "{}", warnings[0]);
    assert!(warnings[0].contains("sharingAffinity[0]"), "{}", warnings[0]);
    add_pod(&mut p, "b", nic_claim("cb", "x"));
    schedule(&mut p, "b");
    assert!(p.take_warnings().is_empty(), "each warning once");
}

/// The limit of 8 extractors applies per metadata slice: two metadata slices of one complete pool
/// may publish 10 between them; 9 in one slice make the pool's devices not viable.
#[test]
fn extractor_limit_is_per_metadata_slice() {
    let exs = |from: usize, to: usize| -> Value {
        (from..to)
            .map(|i| json!({"cel": {format!("k{i}"): "object.kind == \"NICConfig\" ? \"v\" : \"\""}}))
            .collect()
    };
    let meta_slice = |name: &str, count: i64, extractors: Value| {
        json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":name},
               "spec":{"driver":DRIVER,"nodeName":NODE,"pool":{"name":"pool-1","generation":1,"resourceSliceCount":count},
                       "sharingAffinity": extractors}})
    };
    let devices = slice("pool-1-devices", "pool-1", 1, 3, &[nic("eth1", "4")]);
    let objects = vec![
        node(NODE),
        class_a(),
        meta_slice("meta-a", 3, exs(0, 5)),
        meta_slice("meta-b", 3, exs(5, 10)),
        devices,
    ];
    let mut p = plugin("", &objects);
    add_pod(&mut p, "a", nic_claim("ca", "x"));
    assert_eq!(device_of(&schedule(&mut p, "a")), "eth1");
    let LockState::Locked(values) = lock(&mut p, "eth1") else {
        panic!("eth1 should be locked");
    };
    assert_eq!(values.len(), 10, "{values:?}");
    let devices = slice("pool-1-devices", "pool-1", 1, 2, &[nic("eth1", "4")]);
    let mut p = plugin(
        "",
        &[node(NODE), class_a(), meta_slice("meta-a", 2, exs(0, 9)), devices],
    );
    add_pod(&mut p, "a", nic_claim("ca", "x"));
    assert_status(
        run(&mut p, "a"),
        Code::Unschedulable,
        "ResourceSlice meta-a has 9 sharing-affinity extractors",
        "9 in one slice",
    );
}

#[test]
fn score_prefers_locked_compatible_over_clean() {
    let mut objects = cluster(subnet_extractor(), &[nic("eth1", "4"), nic("eth2", "4")]);
    objects.push(existing("old", "eth2", "s-1", Some(nic_config("x"))));
    let mut p = plugin("", &objects);
    add_pod(&mut p, "a", nic_claim("ca", "x"));
    assert!(p.prefilter("default/a").is_success());
    assert!(p.filter(NODE).is_success());
    assert_eq!(p.affinity_rank(NODE).unwrap(), 100, "joins the locked eth2");
    let got = p.reserve(NODE).unwrap();
    assert_eq!(
        got[0].allocation.devices.results[0].device, "eth2",
        "consolidation beats first-fit eth1"
    );

    let mut p = plugin("", &cluster(subnet_extractor(), &[nic("eth1", "4")]));
    add_pod(&mut p, "a", nic_claim("ca", "x"));
    assert!(p.prefilter("default/a").is_success());
    assert!(p.filter(NODE).is_success());
    assert_eq!(p.affinity_rank(NODE).unwrap(), 50, "a clean device");
    assert_eq!(
        p.score(NODE).unwrap(),
        0,
        "one feasible node: all ranks equal, score 0"
    );

    let mut p = plugin("", &[node(NODE), class_a(), slice1(&[nic("eth1", "4")])]);
    add_pod(&mut p, "a", claim("ca", &[req("nic", "class-a")]));
    assert!(p.prefilter("default/a").is_success());
    assert!(p.filter(NODE).is_success());
    assert_eq!(p.affinity_rank(NODE).unwrap(), 0, "no affinity: neutral");
}

// ------------------------------------------------------------------ scoring across nodes

/// An extractor for every pool of driver-a, from the plugin configuration; with a selector, only
/// for devices whose `type` attribute is `nic`.
fn config_extractor(selector: bool) -> String {
    let mut ex = json!({"driver": DRIVER, "cel": {"subnet": SUBNET}});
    if selector {
        ex["selector"] = json!({"cel": {"expression": "device.attributes[\"driver-a\"].type == \"nic\""}});
    }
    json!({"sharingAffinity": [ex]}).to_string()
}

/// A one-slice pool of `driver` on `node`.
fn node_slice(node_name: &str, driver: &str, pool: &str, devs: &[Dev]) -> Value {
    json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":format!("{pool}-slice")},
           "spec":{"driver":driver,"nodeName":node_name,"pool":{"name":pool,"generation":1,"resourceSliceCount":1},
                   "devices": devs.iter().map(|d| d.0.clone()).collect::<Vec<_>>()}})
}

/// A claim of subnet `subnet` allocated on `device` of driver-a's `pool` on `node_name`.
fn holder_on(name: &str, node_name: &str, pool: &str, device: &str, subnet: &str) -> Value {
    let mut c = nic_claim(name, subnet).json();
    c["status"] = json!({"allocation": {"devices": {"results": [{"request":"nic","driver":DRIVER,"pool":pool,
        "device":device,"shareID":format!("00000000-0000-0000-0000-{:0>12}", name.len()),"consumedCapacity":{"slots":"1"}}]},
        "nodeSelector": {"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name","operator":"In","values":[node_name]}]}]}}});
    c
}

/// Runs PreFilter and Filter on `nodes`; every node must pass.
fn filter_all(p: &mut Plugin, pod_name: &str, nodes: &[&str]) {
    assert!(p.prefilter(&format!("default/{pod_name}")).is_success());
    for n in nodes {
        let st = p.filter(n);
        assert!(st.is_success(), "{n}: {st}");
    }
}

#[test]
fn score_is_not_diluted_by_requests_on_pools_without_extractors() {
    // n1: a NIC locked to x plus four plain GPUs; n2: a clean NIC plus one GPU. The GPUs
    // (driver-b, no extractors) are neutral, so joining the lock wins.
    let gpus = |n: usize| (0..n).map(|i| device(&format!("gpu-{i}"))).collect::<Vec<_>>();
    let objects = vec![
        node("n1"),
        node("n2"),
        class_a(),
        class("class-b", "device.driver == \"driver-b\""),
        node_slice("n1", DRIVER, "nic-n1", &[nic("eth1", "4")]),
        node_slice("n1", "driver-b", "gpu-n1", &gpus(4)),
        node_slice("n2", DRIVER, "nic-n2", &[nic("eth1", "4")]),
        node_slice("n2", "driver-b", "gpu-n2", &gpus(1)),
        holder_on("old", "n1", "nic-n1", "eth1", "x"),
    ];
    let mut p = plugin(&config_extractor(false), &objects);
    let c = claim("ca", &[req("nic", "class-a"), req("gpu", "class-b").all()]).config(&[], nic_config("x"));
    add_pod(&mut p, "a", c);
    filter_all(&mut p, "a", &["n1", "n2"]);
    assert_eq!(p.affinity_rank("n1").unwrap(), 100, "join, GPUs neutral");
    assert_eq!(p.affinity_rank("n2").unwrap(), 50, "clean, GPU neutral");
    assert!(p.prescore(&["n1", "n2"]).is_success());
    assert_eq!(p.score("n1").unwrap(), 100);
    assert_eq!(p.score("n2").unwrap(), 0);
}

/// Three nodes with one NIC each: n1's locked to subnet x, n2's clean, n3's in an affinity pool
/// that no extractor gates (with `config_extractor(true)`).
fn join_clean_unknown() -> Vec<Value> {
    vec![
        node("n1"),
        node("n2"),
        node("n3"),
        class_a(),
        node_slice(
            "n1",
            DRIVER,
            "p1",
            &[nic("eth1", "4").attr("type", "string", json!("nic"))],
        ),
        node_slice(
            "n2",
            DRIVER,
            "p2",
            &[nic("eth1", "4").attr("type", "string", json!("nic"))],
        ),
        // Shared, in an affinity pool, but no extractor applies: unknown affinity.
        node_slice(
            "n3",
            DRIVER,
            "p3",
            &[nic("eth1", "4").attr("type", "string", json!("other"))],
        ),
        holder_on("old", "n1", "p1", "eth1", "x"),
    ]
}

#[test]
fn score_ranks_join_over_clean_over_unknown_and_normalises_over_prescore_nodes() {
    let objects = join_clean_unknown();
    let mut p = plugin(&config_extractor(true), &objects);
    add_pod(&mut p, "a", nic_claim("ca", "x"));
    filter_all(&mut p, "a", &["n1", "n2", "n3"]);
    let ranks: Vec<u32> = ["n1", "n2", "n3"]
        .iter()
        .map(|n| p.affinity_rank(n).unwrap())
        .collect();
    assert_eq!(ranks, [100, 50, 0], "join > clean > unknown affinity");
    let scores: Vec<u32> = ["n1", "n2", "n3"].iter().map(|n| p.score(n).unwrap()).collect();
    assert_eq!(
        scores,
        [100, 50, 0],
        "without PreScore: over the nodes that passed Filter"
    );

    assert!(p.prescore(&["n2", "n3"]).is_success());
    assert_eq!(p.score("n2").unwrap(), 100, "max of the PreScore nodes");
    assert_eq!(p.score("n3").unwrap(), 0);
    let err = p.score("n1").unwrap_err();
    assert!(err.reason.contains("prescore did not name"), "{err}");

    assert!(p.prescore(&["n2"]).is_success());
    assert_eq!(p.score("n2").unwrap(), 0, "all ranks equal: 0");
    let err = p.score("n3").unwrap_err();
    assert!(
        err.reason.contains("prescore did not name"),
        "a later PreScore replaces the list: {err}"
    );

    let st = p.prescore(&["n9"]);
    assert_eq!(st.code, Code::Error);
    assert!(st.reason.contains("n9, which did not pass filter"), "{st}");
    assert_eq!(
        p.score("n2").unwrap(),
        0,
        "a failed PreScore keeps the list before it"
    );
    assert!(
        p.score("n3").is_err(),
        "a failed PreScore keeps the list before it"
    );

    assert!(p.filter("n2").is_success());
    assert_eq!(
        p.score("n2").unwrap(),
        0,
        "filtered again: still named by PreScore"
    );
    assert!(p.filter("n3").is_success());
    assert!(p.score("n3").is_err(), "filtered again: still not named");

    let mut p = plugin(
        &json!({"consolidate": false, "sharingAffinity": [{"driver": DRIVER, "cel": {"subnet": SUBNET}}]})
            .to_string(),
        &objects,
    );
    add_pod(&mut p, "a", nic_claim("ca", "x"));
    filter_all(&mut p, "a", &["n1", "n2", "n3"]);
    assert_eq!(p.score("n1").unwrap(), 0, "consolidate false: every node 0");
}

#[test]
fn prescore_scores_is_prescore_then_score_on_each_node() {
    let objects = join_clean_unknown();
    let lists: [&[&str]; 5] = [
        &["n1", "n2", "n3"],
        &["n3", "n2"],
        &["n2"],
        &["n2", "n2", "n1"],
        &[],
    ];
    for consolidate in [true, false] {
        let config = json!({"consolidate": consolidate,
                            "sharingAffinity": [{"driver": DRIVER, "cel": {"subnet": SUBNET},
                                "selector": {"cel": {"expression": "device.attributes[\"driver-a\"].type == \"nic\""}}}]})
        .to_string();
        let mut one = plugin(&config, &objects);
        let mut two = plugin(&config, &objects);
        // The same through memos of the names, kept from list to list.
        let mut three = plugin(&config, &objects);
        let memos: Vec<NodeName> = ["n1", "n2", "n3", "n9"].into_iter().map(NodeName::new).collect();
        let remembered = |nodes: &[&str]| -> Vec<&NodeName> {
            nodes
                .iter()
                .map(|n| memos.iter().find(|m| m.as_str() == *n).unwrap())
                .collect()
        };
        for p in [&mut one, &mut two, &mut three] {
            add_pod(p, "a", nic_claim("ca", "x"));
            filter_all(p, "a", &["n1", "n2", "n3"]);
        }
        for nodes in lists {
            let batch = one.prescore_scores(nodes);
            assert_eq!(three.prescore_scores(&remembered(nodes)), batch, "{nodes:?}");
            assert!(two.prescore(nodes).is_success());
            let each: Vec<u32> = nodes.iter().map(|n| two.score(n).unwrap()).collect();
            assert_eq!(batch, Ok(each), "consolidate {consolidate}, {nodes:?}");
            // The PreScore state is the same afterwards: Score answers alike on every node.
            for n in ["n1", "n2", "n3"] {
                assert_eq!(one.score(n), two.score(n), "{n} after {nodes:?}");
            }
        }
        let failed = one.prescore_scores(&["n2", "n9"]).unwrap_err();
        assert_eq!(failed, two.prescore(&["n2", "n9"]));
        assert_eq!(
            three.prescore_scores(&remembered(&["n2", "n9"])),
            Err(failed.clone())
        );
        assert!(
            failed.reason.contains("n9, which did not pass filter"),
            "{failed}"
        );
        assert_eq!(
            one.score("n2"),
            two.score("n2"),
            "a failed PreScore keeps the list before it"
        );
    }
    let mut p = plugin("", &objects);
    let st = p.prescore_scores(&["n1"]).unwrap_err();
    assert!(st.reason.contains("before prefilter"), "{st}");
}

#[test]
fn second_claim_of_a_pod_joins_the_first_claims_tentative_lock() {
    // c1 needs 2 slots, so it skips eth1 (1 slot) and opens eth2; c2 (1 slot, same subnet) would
    // open eth1 first-fit, but joins c1's tentative lock on eth2 instead.
    let mut p = plugin(
        "",
        &cluster(subnet_extractor(), &[nic("eth1", "1"), nic("eth2", "4")]),
    );
    let c1 =
        claim("c1", &[req("nic", "class-a").capacity(json!({"slots": "2"}))]).config(&[], nic_config("x"));
    let c2 = nic_claim("c2", "x");
    add(
        &mut p,
        &[
            c1.json(),
            c2.json(),
            pod("p", &["c1", "c2"], "2026-01-01T00:00:00Z"),
        ],
    );
    assert!(p.prefilter("default/p").is_success());
    assert!(p.filter(NODE).is_success());
    assert_eq!(
        p.affinity_rank(NODE).unwrap(),
        150,
        "c1 takes a clean device (50), c2 joins c1's tentative lock (100)"
    );
    let got = p.reserve(NODE).unwrap();
    let devices: Vec<&str> = got
        .iter()
        .map(|a| a.allocation.devices.results[0].device.as_str())
        .collect();
    assert_eq!(devices, ["eth2", "eth2"]);
    p.bind("default/p", NODE).unwrap();
    assert_eq!(lock(&mut p, "eth1"), LockState::Clean, "no second device opened");

    // Different values: c2 cannot join, and opens eth1.
    let mut p = plugin(
        "",
        &cluster(subnet_extractor(), &[nic("eth1", "1"), nic("eth2", "4")]),
    );
    let c1 =
        claim("c1", &[req("nic", "class-a").capacity(json!({"slots": "2"}))]).config(&[], nic_config("x"));
    add(
        &mut p,
        &[
            c1.json(),
            nic_claim("c2", "y").json(),
            pod("p", &["c1", "c2"], "2026-01-01T00:00:00Z"),
        ],
    );
    let got = run(&mut p, "p").unwrap();
    assert_eq!((got[0][0].1.as_str(), got[1][0].1.as_str()), ("eth2", "eth1"));
}

#[test]
fn tentative_join_keeps_one_order_for_a_request_with_several_devices() {
    // c1 opens eth3 (only eth3 has 3 slots); c2 asks for two devices of subnet x: it joins eth3
    // first and then takes the next device in first-fit order, never eth3 twice.
    let mut p = plugin(
        "",
        &cluster(
            subnet_extractor(),
            &[nic("eth1", "1"), nic("eth2", "1"), nic("eth3", "4")],
        ),
    );
    let c1 =
        claim("c1", &[req("nic", "class-a").capacity(json!({"slots": "3"}))]).config(&[], nic_config("x"));
    let c2 = claim("c2", &[req("nic", "class-a").count(2)]).config(&[], nic_config("x"));
    add(
        &mut p,
        &[
            c1.json(),
            c2.json(),
            pod("p", &["c1", "c2"], "2026-01-01T00:00:00Z"),
        ],
    );
    let got = run(&mut p, "p").unwrap();
    assert_eq!(got[0][0].1, "eth3");
    assert_eq!(
        got[1].iter().map(|r| r.1.as_str()).collect::<Vec<_>>(),
        ["eth3", "eth1"]
    );
}

// ------------------------------------------------------------------ KEP stories

#[test]
fn story_rdma_pkey() {
    let ex = meta(json!([{"cel": {"pkey": PKEY}}]));
    let mut p = plugin("", &cluster(ex, &[nic("mlx5-0", "8"), nic("mlx5-1", "8")]));
    let pk = |name: &str, key: &str| {
        claim(name, &[req("rdma", "class-a")]).config(&[], json!({"kind": "NICConfig", "pkey": key}))
    };
    add_pod(&mut p, "a", pk("ca", "0x8001"));
    assert_eq!(device_of(&schedule(&mut p, "a")), "mlx5-0");
    add_pod(&mut p, "b", pk("cb", "0x8001"));
    assert_eq!(device_of(&schedule(&mut p, "b")), "mlx5-0");
    add_pod(&mut p, "c", pk("cc", "0x8002"));
    assert_eq!(
        device_of(&schedule(&mut p, "c")),
        "mlx5-1",
        "0x8002 goes to mlx5_1"
    );
    add_pod(&mut p, "d", pk("cd", "0x8003"));
    assert_status(
        run(&mut p, "d"),
        Code::Unschedulable,
        "locked to pkey=0x8001",
        "third pkey",
    );
}

#[test]
fn story_fpga_bitstreams() {
    let ex = meta(json!([{"cel": {"bitstream": "object.kind == \"FPGAConfig\" ? object.bitstream : \"\""}}]));
    let mut p = plugin("", &cluster(ex, &[nic("fpga-0", "4"), nic("fpga-1", "4")]));
    let fp = |name: &str, b: &str| {
        claim(name, &[req("fpga", "class-a")]).config(&[], json!({"kind": "FPGAConfig", "bitstream": b}))
    };
    for (i, b, want) in [
        (0, "bitstream-ml-v2", "fpga-0"),
        (1, "bitstream-crypto-v1", "fpga-1"),
        (2, "bitstream-ml-v2", "fpga-0"),
        (3, "bitstream-crypto-v1", "fpga-1"),
    ] {
        add_pod(&mut p, &format!("p{i}"), fp(&format!("c{i}"), b));
        assert_eq!(
            device_of(&schedule(&mut p, &format!("p{i}"))),
            want,
            "pod {i} with {b}"
        );
    }
}

#[test]
fn story_single_subnet_nic_16_slots() {
    let mut p = plugin(
        "",
        &cluster(subnet_extractor(), &[nic("eth1", "16"), nic("eth2", "16")]),
    );
    for i in 0..17 {
        add_pod(&mut p, &format!("p{i}"), nic_claim(&format!("c{i}"), "subnet-X"));
        let got = schedule(&mut p, &format!("p{i}"));
        let want = if i < 16 { "eth1" } else { "eth2" };
        assert_eq!(device_of(&got), want, "pod {i}");
    }
    assert_eq!(lock(&mut p, "eth2"), locked(&[("subnet", "subnet-X")]));
}

#[test]
fn story_multi_key_subnet_and_pkey() {
    let ex = meta(
        json!([{"cel": {"subnet": SUBNET, "pkey": "object.kind == \"NICConfig\" ? object.ibPKey : \"\""}}]),
    );
    let mut p = plugin("", &cluster(ex, &[nic("ib0", "8"), nic("ib1", "8")]));
    let cfg = |name: &str, pkey: Option<&str>| {
        let mut o = json!({"kind": "NICConfig", "subnet": "subnet-a"});
        if let Some(k) = pkey {
            o["ibPKey"] = json!(k);
        }
        claim(name, &[req("nic", "class-a")]).config(&[], o)
    };
    add_pod(&mut p, "a", cfg("ca", Some("0x8001")));
    assert_eq!(device_of(&schedule(&mut p, "a")), "ib0");
    add_pod(&mut p, "b", cfg("cb", Some("0x8002")));
    assert_eq!(
        device_of(&schedule(&mut p, "b")),
        "ib1",
        "pkey 0x8002 cannot join subnet-a/0x8001"
    );
    add_pod(&mut p, "c", cfg("cc", None));
    assert_status(
        run(&mut p, "c"),
        Code::Unschedulable,
        "affinity extraction failed",
        "missing ibPKey is a CEL error",
    );
}

#[test]
fn story_heterogeneous_pool_with_common_vendor_key() {
    let vendor = "object.kind == \"NICConfig\" || object.kind == \"VFConfig\" ? object.vendor : \"\"";
    let ex = meta(json!([
        {"selector": {"cel": {"expression": "device.attributes[\"driver-a\"].type == \"nic\""}},
         "cel": {"subnet": SUBNET, "vendor": vendor}},
        {"selector": {"cel": {"expression": "device.attributes[\"driver-a\"].type == \"vf\""}},
         "cel": {"vlan": "object.kind == \"VFConfig\" ? object.vlan : \"\"", "vendor": vendor}},
    ]));
    let devs = [
        nic("nic-0", "4").attr("type", "string", json!("nic")),
        nic("vf-0", "4").attr("type", "string", json!("vf")),
    ];
    let mut p = plugin("", &cluster(ex, &devs));
    let c = claim(
        "ca",
        &[
            req("nic", "class-a").selector("device.attributes[\"driver-a\"].type == \"nic\""),
            req("vf", "class-a").selector("device.attributes[\"driver-a\"].type == \"vf\""),
        ],
    )
    .config(
        &["nic"],
        json!({"kind": "NICConfig", "subnet": "s1", "vendor": "acme"}),
    )
    .config(
        &["vf"],
        json!({"kind": "VFConfig", "vlan": "100", "vendor": "acme"}),
    );
    add_pod(&mut p, "a", c);
    let got = schedule(&mut p, "a");
    assert_eq!((got[0][0].1.as_str(), got[0][1].1.as_str()), ("nic-0", "vf-0"));
    assert_eq!(
        lock(&mut p, "nic-0"),
        locked(&[("subnet", "s1"), ("vendor", "acme")])
    );
    assert_eq!(
        lock(&mut p, "vf-0"),
        locked(&[("vendor", "acme"), ("vlan", "100")])
    );
}

// ------------------------------------------------------------------ packing

/// Schedules pods with the given subnets in order; returns how many devices end up locked to
/// subnet y (one already is) and how many pods did not fit.
fn packing_run(config: &str, subnets: &[&str]) -> (usize, usize) {
    let mut objects = cluster(
        subnet_extractor(),
        &[nic("eth1", "4"), nic("eth2", "4"), nic("eth3", "4")],
    );
    // A pod of subnet y already sits on eth2.
    objects.push(existing("old", "eth2", "s-1", Some(nic_config("y"))));
    let mut p = plugin(config, &objects);
    let mut failed = 0;
    for (i, s) in subnets.iter().enumerate() {
        add_pod(&mut p, &format!("p{i}"), nic_claim(&format!("c{i}"), s));
        match run(&mut p, &format!("p{i}")) {
            Ok(_) => {
                p.bind(&format!("default/p{i}"), NODE).unwrap();
            }
            Err(_) => failed += 1,
        }
    }
    let y = ["eth1", "eth2", "eth3"]
        .iter()
        .filter(|d| lock(&mut p, d) == locked(&[("subnet", "y")]))
        .count();
    (y, failed)
}

#[test]
fn packing_opens_fewer_devices_than_first_fit() {
    let subnets = ["y", "x", "z", "y"];
    assert_eq!(
        packing_run("", &subnets),
        (1, 0),
        "y joins eth2; x and z get eth1 and eth3"
    );
    assert_eq!(
        packing_run(r#"{"consolidate": false}"#, &subnets),
        (2, 1),
        "first-fit: y opens eth1, x takes eth3, z finds no clean device"
    );
}

// ------------------------------------------------------------------ tentative state (upstream 18, 23, 25)

#[test]
fn affinity_analogue_of_18_rollback_releases_tentative_lock() {
    let mut p = plugin(
        "",
        &cluster(
            subnet_extractor(),
            &[
                nic("d1", "1").attr("rack", "string", json!("r1")),
                nic("d2", "2").attr("rack", "string", json!("r2")),
            ],
        ),
    );
    let c0 = claim("c0", &[req("req-0", "class-a"), req("req-1", "class-a")])
        .constraint(json!({"matchAttribute": "driver-a/rack"}))
        .config(&[], nic_config("A"));
    let c1 = nic_claim("c1", "B");
    add(
        &mut p,
        &[
            c0.json(),
            c1.json(),
            pod("p", &["c0", "c1"], "2026-01-01T00:00:00Z"),
        ],
    );
    let got = run(&mut p, "p").unwrap();
    assert_eq!(
        got[0].iter().map(|r| r.1.as_str()).collect::<Vec<_>>(),
        ["d2", "d2"]
    );
    assert_eq!(
        got[1][0].1, "d1",
        "d1's tentative lock to A was undone when req-0 moved to d2"
    );
}

#[test]
fn affinity_analogue_of_23_all_mode_sees_tentative_lock() {
    let devs = [nic("d1", "2"), nic("d2", "1")];
    let mut p = plugin("", &cluster(subnet_extractor(), &devs));
    add_pod(
        &mut p,
        "same",
        claim("c0", &[req("req-0", "class-a"), req("req-1", "class-a").all()]).config(&[], nic_config("A")),
    );
    let got = run(&mut p, "same").unwrap();
    assert_eq!(
        got[0].iter().map(|r| r.1.as_str()).collect::<Vec<_>>(),
        ["d1", "d1", "d2"]
    );

    let mut p = plugin("", &cluster(subnet_extractor(), &devs));
    let c = claim("c0", &[req("req-0", "class-a"), req("req-1", "class-a").all()])
        .config(&["req-0"], nic_config("A"))
        .config(&["req-1"], nic_config("B"));
    add_pod(&mut p, "diff", c);
    assert_status(
        run(&mut p, "diff"),
        Code::Unschedulable,
        "locked to subnet=A, claim wants subnet=B",
        "in-call lock",
    );
}

/// `All` mode fixes its device set without the devices that persistent state makes not viable
/// (like capacity-insufficient shared devices in upstream rows 21, 22, 26): a lock to other
/// values and an unreconstructable device are left out, the rest is allocated.
#[test]
fn affinity_analogue_of_25_all_mode_leaves_out_persistently_locked_devices() {
    let mut objects = cluster(
        subnet_extractor(),
        &[nic("d1", "2"), nic("d2", "2"), nic("d3", "2")],
    );
    objects.push(existing("old", "d2", "s-1", Some(nic_config("B"))));
    objects.push(existing("legacy", "d3", "s-2", None));
    let mut p = plugin("", &objects);
    add_pod(
        &mut p,
        "p",
        claim("c0", &[req("req-1", "class-a").all()]).config(&[], nic_config("A")),
    );
    let got = run(&mut p, "p").unwrap();
    assert_eq!(
        got[0].iter().map(|r| r.1.as_str()).collect::<Vec<_>>(),
        ["d1"],
        "d2 (locked to B) and d3 (unreconstructable) are left out"
    );
}

/// n1: a slow NIC locked to subnet x (joining it packs best); n2: a clean fast NIC. The claim
/// lists `firstAvailable: [fast, any]`.
fn fast_first() -> (Vec<Value>, Claim) {
    let speed = |d: Dev, s: &str| d.attr("speed", "string", json!(s));
    let objects = vec![
        node("n1"),
        node("n2"),
        class_a(),
        node_slice("n1", DRIVER, "p1", &[speed(nic("eth1", "4"), "slow")]),
        node_slice("n2", DRIVER, "p2", &[speed(nic("eth1", "4"), "fast")]),
        holder_on("old", "n1", "p1", "eth1", "x"),
    ];
    let fast =
        json!({"selectors": [{"cel": {"expression": "device.attributes[\"driver-a\"].speed == \"fast\""}}]});
    let c = claim(
        "ca",
        &[req_first(
            "nic",
            &[sub("fast", "class-a", fast), sub("any", "class-a", json!({}))],
        )],
    )
    .config(&[], nic_config("x"));
    (objects, c)
}

#[test]
fn score_ranks_the_prioritized_list_before_affinity_packing() {
    let (objects, c) = fast_first();
    let mut p = plugin(&config_extractor(false), &objects);
    add_pod(&mut p, "a", c);
    filter_all(&mut p, "a", &["n1", "n2"]);
    assert_eq!(p.prioritized_rank("n1").unwrap(), 7, "second subrequest: 8 - 1");
    assert_eq!(p.prioritized_rank("n2").unwrap(), 8, "first subrequest: 8 - 0");
    assert_eq!(p.affinity_rank("n1").unwrap(), 100, "joins the lock");
    assert_eq!(p.affinity_rank("n2").unwrap(), 50, "clean");
    assert!(p.prescore(&["n1", "n2"]).is_success());
    assert_eq!(p.score("n2").unwrap(), 100, "the claim's first choice wins");
    assert_eq!(p.score("n1").unwrap(), 0);
}

#[test]
fn without_consolidation_score_still_ranks_the_prioritized_list() {
    let (objects, c) = fast_first();
    let config = config_extractor(false).replace(
        "{\"sharingAffinity\"",
        "{\"consolidate\":false,\"sharingAffinity\"",
    );
    let mut p = plugin(&config, &objects);
    add_pod(&mut p, "a", c);
    filter_all(&mut p, "a", &["n1", "n2"]);
    assert_eq!(p.affinity_rank("n1").unwrap(), 0, "no packing term");
    assert_eq!(p.prioritized_rank("n2").unwrap(), 8);
    assert!(p.prescore(&["n1", "n2"]).is_success());
    assert_eq!(p.score("n2").unwrap(), 100);
    assert_eq!(p.score("n1").unwrap(), 0);
}
