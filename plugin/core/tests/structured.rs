//! The seed's structured-configuration design: `Device.sharingAffinity.attributeKeys` with claim
//! `config[].structured.attributes`, mapped onto the same lock machinery as the CEL extractors.

mod common;

use common::*;
use serde_json::{Value, json};
use sharing_affinity_core::Code;
use sharing_affinity_core::affinity::LockState;
use sharing_affinity_core::index::DeviceKey;
use sharing_affinity_core::{EventKind, Plugin};

const SUBNET_KEY: &str = "driver-a/subnet";

/// A NIC with 4 slots that declares `keys` as its sharing-affinity attribute keys.
fn nic(name: &str, keys: &[&str]) -> Dev {
    let mut d =
        device(name)
            .ama()
            .cap_policy("slots", "4", json!({"default": "1", "validRange": {"min": "1"}}));
    d.0["sharingAffinity"] = json!({ "attributeKeys": keys });
    d
}

/// A structured config entry scoped to `requests`.
fn structured(requests: &[&str], driver: &str, attributes: Value) -> Value {
    json!({"requests": requests, "structured": {"driver": driver, "attributes": attributes}})
}

/// A claim with one `nic` request and the given config entries.
fn claim_with(name: &str, config: &[Value]) -> Claim {
    let mut c = claim(name, &[req("nic", "class-a")]);
    c.0["spec"]["devices"]["config"] = json!(config);
    c
}

fn subnet_claim(name: &str, subnet: &str) -> Claim {
    claim_with(
        name,
        &[structured(&[], DRIVER, json!({"subnet": {"string": subnet}}))],
    )
}

fn cluster(devs: &[Dev]) -> Vec<Value> {
    vec![node(NODE), class_a(), slice1(devs)]
}

fn add_pod(p: &mut Plugin, pod_name: &str, c: Claim) {
    let name = c.0["metadata"]["name"].as_str().unwrap().to_string();
    for o in [c.json(), pod(pod_name, &[&name], "2026-01-01T00:00:00Z")] {
        p.apply(EventKind::Add, &o.to_string()).unwrap();
    }
}

fn lock(p: &mut Plugin, dev: &str) -> LockState {
    p.lock_state(&DeviceKey::new(DRIVER, "pool-1", dev))
}

fn locked(subnet: &str) -> LockState {
    LockState::Locked(std::sync::Arc::new(
        [(SUBNET_KEY.to_string(), subnet.to_string())].into(),
    ))
}

#[test]
fn unknown_fields_in_the_declarations_are_errors_naming_the_field() {
    let mut p = Plugin::new("").unwrap();
    let mut dev = nic("eth1", &["subnet"]);
    dev.0["sharingAffinity"]["attributeKey"] = json!(["x"]);
    let err = p.apply(EventKind::Add, &slice1(&[dev]).to_string()).unwrap_err();
    assert!(err.to_string().contains("attributeKey"), "{err}");
    let mut c = subnet_claim("c", "x").json();
    c["spec"]["devices"]["config"][0]["structured"]["attrs"] = json!({});
    let err = p.apply(EventKind::Add, &c.to_string()).unwrap_err();
    assert!(err.to_string().contains("attrs"), "{err}");
}

#[test]
fn structured_values_lock_share_and_conflict_like_cel_extractors() {
    let mut p = plugin(
        "",
        &cluster(&[nic("eth1", &["subnet"]), nic("eth2", &["subnet"])]),
    );
    add_pod(&mut p, "a", subnet_claim("ca", "x"));
    assert_eq!(schedule(&mut p, "a")[0][0].1, "eth1");
    assert_eq!(lock(&mut p, "eth1"), locked("x"));
    add_pod(&mut p, "b", subnet_claim("cb", "x"));
    assert_eq!(schedule(&mut p, "b")[0][0].1, "eth1", "equal values share");
    add_pod(&mut p, "c", subnet_claim("cc", "y"));
    assert_eq!(schedule(&mut p, "c")[0][0].1, "eth2", "other values open eth2");
    add_pod(&mut p, "d", subnet_claim("cd", "z"));
    assert_status(
        run(&mut p, "d"),
        Code::Unschedulable,
        "eth1: locked to driver-a/subnet=x, claim wants driver-a/subnet=z",
        "lock conflict names the qualified key",
    );
}

#[test]
fn strict_gating_missing_wrong_type_and_other_driver() {
    let mut p = plugin("", &cluster(&[nic("eth1", &["subnet"])]));
    add_pod(&mut p, "a", claim_with("ca", &[]));
    assert_status(
        run(&mut p, "a"),
        Code::Unschedulable,
        "claim gives no value for affinity key driver-a/subnet",
        "no structured config",
    );
    add_pod(
        &mut p,
        "b",
        claim_with(
            "cb",
            &[structured(
                &[],
                "other.example.com",
                json!({"driver-a/subnet": {"string": "x"}}),
            )],
        ),
    );
    assert_status(
        run(&mut p, "b"),
        Code::Unschedulable,
        "claim gives no value for affinity key driver-a/subnet",
        "a structured config for another driver is not read",
    );
    add_pod(
        &mut p,
        "c",
        claim_with("cc", &[structured(&[], DRIVER, json!({"subnet": {"int": 7}}))]),
    );
    assert_status(
        run(&mut p, "c"),
        Code::Unschedulable,
        "key driver-a/subnet: structured attribute is an int, only string values are supported",
        "alpha: strings only",
    );
    add_pod(
        &mut p,
        "d",
        claim_with(
            "cd",
            &[structured(
                &[],
                DRIVER,
                json!({"driver-a/subnet": {"string": "x"}}),
            )],
        ),
    );
    assert!(
        run(&mut p, "d").is_ok(),
        "a qualified name in the driver's domain matches"
    );
}

#[test]
fn conflicting_structured_values_are_unresolvable_and_scoping_follows_requests() {
    let mut p = plugin(
        "",
        &cluster(&[nic("eth1", &["subnet"]), nic("eth2", &["subnet"])]),
    );
    add_pod(
        &mut p,
        "a",
        claim_with(
            "ca",
            &[
                structured(&[], DRIVER, json!({"subnet": {"string": "x"}})),
                structured(&["nic"], DRIVER, json!({"subnet": {"string": "y"}})),
            ],
        ),
    );
    assert_status(
        run(&mut p, "a"),
        Code::UnschedulableAndUnresolvable,
        "config objects give affinity key driver-a/subnet two values",
        "self-inconsistent claim",
    );

    let mut c = claim("cb", &[req("a", "class-a"), req("b", "class-a")]);
    c.0["spec"]["devices"]["config"] = json!([
        structured(&["a"], DRIVER, json!({"subnet": {"string": "x"}})),
        structured(&["b"], DRIVER, json!({"subnet": {"string": "y"}})),
    ]);
    add_pod(&mut p, "b", c);
    let got = schedule(&mut p, "b");
    assert_eq!((got[0][0].1.as_str(), got[0][1].1.as_str()), ("eth1", "eth2"));
    assert_eq!(lock(&mut p, "eth1"), locked("x"));
    assert_eq!(lock(&mut p, "eth2"), locked("y"));
}

#[test]
fn a_device_declaring_affinity_both_ways_is_not_viable() {
    let meta = json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"pool-1-meta"},
        "spec":{"driver":DRIVER,"nodeName":NODE,"pool":{"name":"pool-1","generation":1,"resourceSliceCount":2},
                "sharingAffinity":[{"selector":{"cel":{"expression":"device.attributes[\"driver-a\"].cel == true"}},
                                    "cel":{"subnet":"object.kind == \"NICConfig\" ? object.subnet : \"\""}}]}});
    let devs = [
        nic("both", &["subnet"]).attr("cel", "bool", json!(true)),
        nic("structured-only", &["subnet"]).attr("cel", "bool", json!(false)),
    ];
    let mut p = plugin(
        "",
        &[
            node(NODE),
            class_a(),
            meta,
            slice("pool-1-devices", "pool-1", 1, 2, &devs),
        ],
    );
    let mut c = claim(
        "ca",
        &[req("nic", "class-a").selector("device.attributes[\"driver-a\"].cel == true")],
    );
    c.0["spec"]["devices"]["config"] = json!([
        structured(&[], DRIVER, json!({"subnet": {"string": "x"}})),
        {"opaque": {"driver": DRIVER, "parameters": {"kind": "NICConfig", "subnet": "x"}}},
    ]);
    add_pod(&mut p, "a", c);
    assert_status(
        run(&mut p, "a"),
        Code::Unschedulable,
        "device both declares sharingAffinity.attributeKeys and ResourceSlice pool-1-meta",
        "both kinds",
    );
    add_pod(&mut p, "b", subnet_claim("cb", "x"));
    assert_eq!(
        schedule(&mut p, "b")[0][0].1,
        "structured-only",
        "the other device of the pool is fine"
    );
}

#[test]
fn invalid_attribute_keys_make_the_device_not_viable() {
    let mut p = plugin("", &cluster(&[nic("eth1", &["Bad Key"])]));
    add_pod(&mut p, "a", subnet_claim("ca", "x"));
    assert_status(
        run(&mut p, "a"),
        Code::Unschedulable,
        "device eth1: sharingAffinity.attributeKeys[0]: \"Bad Key\"",
        "invalid key",
    );
    let nine: Vec<String> = (0..9).map(|i| format!("k{i}")).collect();
    let nine: Vec<&str> = nine.iter().map(String::as_str).collect();
    let mut p = plugin("", &cluster(&[nic("eth1", &nine)]));
    add_pod(&mut p, "a", subnet_claim("ca", "x"));
    assert_status(
        run(&mut p, "a"),
        Code::Unschedulable,
        "has 9 keys, at most 8 allowed",
        "too many keys",
    );
}

#[test]
fn locks_are_rebuilt_from_structured_configs_of_allocated_claims() {
    let held = |name: &str, share: &str, subnet: Option<&str>| {
        let c = match subnet {
            Some(s) => subnet_claim(name, s),
            None => claim_with(name, &[]),
        };
        c.allocated(
            json!([{"request":"nic","driver":DRIVER,"pool":"pool-1","device":"eth1",
                            "shareID":share,"consumedCapacity":{"slots":"1"}}]),
        )
        .json()
    };
    let mut objects = cluster(&[nic("eth1", &["subnet"]), nic("eth2", &["subnet"])]);
    objects.push(held("old-1", "11111111-0000-0000-0000-000000000001", Some("x")));
    objects.push(held("old-2", "11111111-0000-0000-0000-000000000002", Some("x")));
    let mut p = plugin("", &objects);
    assert_eq!(lock(&mut p, "eth1"), locked("x"));
    add_pod(&mut p, "a", subnet_claim("ca", "x"));
    assert!(p.prefilter("default/a").is_success());
    assert!(p.filter(NODE).is_success());
    assert_eq!(p.affinity_rank(NODE).unwrap(), 100, "joins the rebuilt lock");

    objects.push(held("legacy", "11111111-0000-0000-0000-000000000003", None));
    let mut p = plugin("", &objects);
    assert_eq!(lock(&mut p, "eth1"), LockState::Unreconstructable);
}
