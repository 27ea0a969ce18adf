//! Stored claims hold one copy of their repeated parts (equal specs, a spec's opaque configuration
//! and the allocation's copy of it, equal node selectors), and write back exactly
//! what was read.

mod common;

use std::sync::Arc;

use common::*;
use serde_json::{Value, json};
use sharing_affinity_core::EventKind;
use sharing_affinity_core::model::{NodeSelector, OpaqueDeviceConfiguration, ResourceClaim};

fn base() -> Vec<Value> {
    vec![
        node(NODE),
        class_a(),
        slice1(&[device("device-1"), device("device-2"), device("device-3")]),
    ]
}

fn params(subnet: &str) -> Value {
    json!({"apiVersion": "net.example.com/v1", "kind": "NICConfig", "subnet": subnet})
}

/// A claim allocated on node-1, with its config copied into the allocation as the allocator does.
fn allocated(name: &str, device: &str, subnet: &str) -> Value {
    let mut c = claim(name, &[req("gpu", "class-a")])
        .config(&[], params(subnet))
        .allocated(json!([dedicated("gpu", device)]))
        .json();
    c["status"]["allocation"]["devices"]["config"] =
        json!([{"source": "FromClaim", "opaque": {"driver": DRIVER, "parameters": params(subnet)}}]);
    c
}

/// The spec's and the allocation's opaque configuration.
fn configs(c: &ResourceClaim) -> [&Arc<OpaqueDeviceConfiguration>; 2] {
    let alloc = c.status.allocation.as_ref().expect("allocated");
    [
        c.spec.devices.config[0].opaque.as_ref().expect("spec config"),
        alloc.devices.config[0]
            .opaque
            .as_ref()
            .expect("allocation config"),
    ]
}

/// The allocation's node selector.
fn selector(c: &ResourceClaim) -> &Arc<NodeSelector> {
    let selector = c
        .status
        .allocation
        .as_ref()
        .and_then(|a| a.node_selector.as_ref());
    selector.expect("node selector")
}

#[test]
fn loaded_claims_hold_one_copy_of_equal_parts() {
    let mut objects = base();
    objects.push(allocated("a", "device-1", "subnet-1"));
    objects.push(allocated("b", "device-2", "subnet-1"));
    objects.push(allocated("c", "device-3", "subnet-2"));
    let p = plugin("", &objects);
    let get = |name: &str| p.claim(&format!("{NS}/{name}")).expect("stored");
    let (a, b, c) = (get("a"), get("b"), get("c"));
    assert!(
        Arc::ptr_eq(configs(a)[0], configs(a)[1]),
        "a claim's spec and allocation config"
    );
    assert!(
        Arc::ptr_eq(configs(a)[1], configs(b)[1]),
        "equal configs of two claims"
    );
    assert!(!Arc::ptr_eq(configs(a)[0], configs(c)[0]), "another subnet");
    assert!(!Arc::ptr_eq(&a.spec, &c.spec), "another subnet");
    assert!(Arc::ptr_eq(selector(a), selector(c)), "claims on one node");
}

#[test]
fn stored_claims_write_back_what_was_read() {
    let mut objects = base();
    let claims = [
        allocated("a", "device-1", "subnet-1"),
        allocated("b", "device-2", "subnet-1"),
    ];
    objects.extend(claims.iter().cloned());
    let p = plugin("", &objects);
    for c in &claims {
        let key = format!("{NS}/{}", c["metadata"]["name"].as_str().unwrap());
        let unshared: ResourceClaim = serde_json::from_value(c.clone()).unwrap();
        let stored = p.claim(&key).expect("stored");
        assert_eq!(stored, &unshared, "{key}");
        assert_eq!(
            serde_json::to_string(stored).unwrap(),
            serde_json::to_string(&unshared).unwrap(),
            "{key}"
        );
    }
}

#[test]
fn claims_from_one_template_share_the_spec_config_and_node_selector() {
    let mut objects = base();
    objects.push(
        json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate",
        "metadata":{"name":"t","namespace":NS},
        "spec":{"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"class-a"}}],
            "config":[{"opaque":{"driver":DRIVER,"parameters":params("subnet-1")}}]}}}}),
    );
    let mut p = plugin("", &objects);
    for name in ["p", "q"] {
        let pod = json!({"apiVersion":"v1","kind":"Pod",
            "metadata":{"name":name,"namespace":NS,"uid":format!("uid-{name}")},
            "spec":{"resourceClaims":[{"name":"gpu","resourceClaimTemplateName":"t"}]}});
        p.apply(EventKind::Add, &pod.to_string()).unwrap();
        schedule(&mut p, name);
    }
    let get = |name: &str| {
        p.claim(&format!("{NS}/{name}-gpu"))
            .expect("generated claim stored")
    };
    let (a, b) = (get("p"), get("q"));
    assert!(Arc::ptr_eq(&a.spec, &b.spec), "spec");
    assert!(
        Arc::ptr_eq(configs(a)[0], configs(a)[1]),
        "a claim's spec and allocation config"
    );
    assert!(Arc::ptr_eq(configs(a)[1], configs(b)[1]), "allocation configs");
    assert!(
        Arc::ptr_eq(selector(a), selector(b)),
        "node selectors on one node"
    );
}
