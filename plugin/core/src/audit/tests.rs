//! One test per audit rule: each builds a cluster that breaks exactly that rule (and a clean one
//! that breaks none), so a rule that stops being checked fails its test.

use serde_json::{Value, json};

use super::*;
use crate::object::parse_objects;

const NIC: &str = "nic.example.com";
const GPU: &str = "gpu.example.com";

fn nic_device(name: &str, subnet_domain: &str) -> Value {
    json!({
        "name": name,
        "allowMultipleAllocations": true,
        "attributes": {"speed": {"int": 100}, "domain": {"string": subnet_domain}},
        "capacity": {"slots": {"value": "4", "requestPolicy": {"default": "1", "validValues": ["1", "2", "4"]}}}
    })
}

/// Two pools: `nic.example.com/node-a` (two shared NICs, extractor `subnet` in a metadata slice)
/// and `gpu.example.com/node-a` (two dedicated partitions sharing a counter set of 8Gi).
fn base() -> Vec<Value> {
    vec![
        json!({"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"nic"},
               "spec":{"selectors":[{"cel":{"expression":"device.driver == \"nic.example.com\""}}]}}),
        json!({"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"gpu"},
               "spec":{"selectors":[{"cel":{"expression":"device.driver == \"gpu.example.com\""}}]}}),
        json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"nic-devices"},
               "spec":{"driver":NIC,"nodeName":"node-a","pool":{"name":"node-a","generation":1,"resourceSliceCount":2},
                       "devices":[nic_device("eth1", "x"), nic_device("eth2", "x")]}}),
        json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"nic-meta"},
               "spec":{"driver":NIC,"nodeName":"node-a","pool":{"name":"node-a","generation":1,"resourceSliceCount":2},
                       "sharingAffinity":[{"cel":{"subnet":"has(object.subnet) ? object.subnet : \"\""}}]}}),
        json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"gpu"},
        "spec":{"driver":GPU,"nodeName":"node-a","pool":{"name":"node-a","generation":1,"resourceSliceCount":1},
                "sharedCounters":[{"name":"gpu0","counters":{"memory":{"value":"8Gi"}}}],
                "devices":[
                  {"name":"part0","attributes":{"numa":{"int":0}},
                   "consumesCounters":[{"counterSet":"gpu0","counters":{"memory":{"value":"5Gi"}}}]},
                  {"name":"part1","attributes":{"numa":{"int":1}},
                   "consumesCounters":[{"counterSet":"gpu0","counters":{"memory":{"value":"5Gi"}}}]},
                  {"name":"part2","attributes":{"numa":{"int":1}}}
                ]}}),
    ]
}

fn nic_result(device: &str, slots: &str, share: &str) -> Value {
    json!({"request":"nic","driver":NIC,"pool":"node-a","device":device,
           "shareID":share,"consumedCapacity":{"slots":slots}})
}

fn gpu_result(request: &str, device: &str) -> Value {
    json!({"request":request,"driver":GPU,"pool":"node-a","device":device})
}

/// A claim with one `nic` request (wanting `slots`), an opaque config giving `subnet` (when
/// set), and the given results.
fn nic_claim(name: &str, subnet: Option<Value>, slots: &str, results: Vec<Value>) -> Value {
    let config = match subnet {
        Some(s) => json!([{"opaque":{"driver":NIC,"parameters":{"subnet":s}}}]),
        None => json!([]),
    };
    json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",
           "metadata":{"name":name,"namespace":"ns"},
           "spec":{"devices":{"requests":[{"name":"nic","exactly":{"deviceClassName":"nic",
                    "capacity":{"requests":{"slots":slots}}}}],"config":config}},
           "status":{"allocation":{"devices":{"results":results}}}})
}

fn gpu_claim(name: &str, requests: Value, constraints: Value, results: Vec<Value>) -> Value {
    json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",
           "metadata":{"name":name,"namespace":"ns"},
           "spec":{"devices":{"requests":requests,"constraints":constraints}},
           "status":{"allocation":{"devices":{"results":results}}}})
}

fn gpu_request(name: &str) -> Value {
    json!({"name":name,"exactly":{"deviceClassName":"gpu"}})
}

fn run_with(extra: Vec<Value>, config: &Config) -> Vec<Violation> {
    let mut items = base();
    items.extend(extra);
    let text = json!({"kind":"List","items":items}).to_string();
    let parsed = parse_objects(&text).unwrap();
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    audit(&parsed.objects, config)
}

fn run(extra: Vec<Value>) -> Vec<Violation> {
    run_with(extra, &Config::default())
}

fn rules(v: &[Violation]) -> Vec<Rule> {
    v.iter().map(|v| v.rule).collect()
}

/// The one violation, which must be of `rule`.
fn only(v: Vec<Violation>, rule: Rule) -> Violation {
    assert_eq!(rules(&v), [rule], "{v:#?}");
    v.into_iter().next().unwrap()
}

#[test]
fn a_correct_cluster_has_no_violations() {
    let v = run(vec![
        nic_claim("a", Some(json!("A")), "1", vec![nic_result("eth1", "1", "s1")]),
        nic_claim("b", Some(json!("A")), "2", vec![nic_result("eth1", "2", "s2")]),
        nic_claim("c", Some(json!("B")), "4", vec![nic_result("eth2", "4", "s3")]),
        gpu_claim(
            "g",
            json!([gpu_request("g")]),
            json!([]),
            vec![gpu_result("g", "part0")],
        ),
    ]);
    assert!(v.is_empty(), "{v:#?}");
}

#[test]
fn capacity_sum_over_the_device() {
    let v = only(
        run(vec![
            nic_claim("a", Some(json!("A")), "2", vec![nic_result("eth1", "2", "s1")]),
            nic_claim("b", Some(json!("A")), "2", vec![nic_result("eth1", "2", "s2")]),
            nic_claim("c", Some(json!("A")), "1", vec![nic_result("eth1", "1", "s3")]),
        ]),
        Rule::Capacity,
    );
    assert_eq!(v.device, "nic.example.com/node-a/eth1");
    assert_eq!(v.claims, ["ns/a", "ns/b", "ns/c"]);
    assert!(
        v.message.contains("sums to 5, more than the capacity 4"),
        "{}",
        v.message
    );
}

#[test]
fn a_share_consuming_less_than_requested_or_an_unknown_capacity() {
    let v = only(
        run(vec![nic_claim(
            "a",
            Some(json!("A")),
            "2",
            vec![nic_result("eth1", "1", "s1")],
        )]),
        Rule::Capacity,
    );
    assert!(
        v.message.contains("asks for slots 2 but its share consumes 1"),
        "{}",
        v.message
    );
    let mut result = nic_result("eth1", "1", "s1");
    result["consumedCapacity"]["bandwidth"] = json!("1");
    let v = only(
        run(vec![nic_claim("a", Some(json!("A")), "1", vec![result])]),
        Rule::Capacity,
    );
    assert!(v.message.contains("names bandwidth"), "{}", v.message);
}

#[test]
fn request_policy_valid_values() {
    let v = only(
        run(vec![nic_claim(
            "a",
            Some(json!("A")),
            "3",
            vec![nic_result("eth1", "3", "s1")],
        )]),
        Rule::RequestPolicy,
    );
    assert!(v.message.contains("validValues"), "{}", v.message);
}

#[test]
fn request_policy_valid_range_and_default() {
    let policy = Some(CapacityRequestPolicy {
        default: Some("1".parse().unwrap()),
        valid_values: vec![],
        valid_range: Some(Box::new(crate::model::CapacityRequestPolicyRange {
            min: "2".parse().unwrap(),
            max: Some("10".parse().unwrap()),
            step: Some("2".parse().unwrap()),
        })),
    });
    let check = |q: &str| policy_violation(&q.parse().unwrap(), policy.as_ref());
    assert_eq!(check("1"), None, "the default is always allowed");
    assert_eq!(check("4"), None);
    assert!(check("3").is_some_and(|m| m.contains("step")));
    assert!(check("12").is_some_and(|m| m.contains("max")));
    assert!(check("1500m").is_some_and(|m| m.contains("min")));
    assert_eq!(policy_violation(&"7".parse().unwrap(), None), None, "no policy");
}

#[test]
fn dedicated_device_allocated_twice() {
    let v = only(
        run(vec![
            gpu_claim(
                "g1",
                json!([gpu_request("g")]),
                json!([]),
                vec![gpu_result("g", "part2")],
            ),
            gpu_claim(
                "g2",
                json!([gpu_request("g")]),
                json!([]),
                vec![gpu_result("g", "part2")],
            ),
        ]),
        Rule::Dedicated,
    );
    assert_eq!(v.claims, ["ns/g1", "ns/g2"]);
    assert!(
        v.message.contains("does not allow multiple allocations"),
        "{}",
        v.message
    );
    // A dedicated allocation (no shareID) of a shared device excludes every other allocation.
    let mut dedicated = nic_result("eth1", "1", "");
    dedicated.as_object_mut().unwrap().remove("shareID");
    dedicated.as_object_mut().unwrap().remove("consumedCapacity");
    let v = only(
        run(vec![
            nic_claim("a", Some(json!("A")), "1", vec![dedicated]),
            nic_claim("b", Some(json!("A")), "1", vec![nic_result("eth1", "1", "s2")]),
        ]),
        Rule::Dedicated,
    );
    assert!(v.message.contains("one allocation is dedicated"), "{}", v.message);
    // A shareID on a device that is not multi-allocatable.
    let mut shared = gpu_result("g", "part2");
    shared["shareID"] = json!("s1");
    let v = only(
        run(vec![gpu_claim(
            "g1",
            json!([gpu_request("g")]),
            json!([]),
            vec![shared],
        )]),
        Rule::Dedicated,
    );
    assert!(v.message.contains("shareID"), "{}", v.message);
}

#[test]
fn admin_access_results_do_not_hold_the_device() {
    let mut admin = gpu_result("g", "part2");
    admin["adminAccess"] = json!(true);
    let v = run(vec![
        gpu_claim(
            "g1",
            json!([gpu_request("g")]),
            json!([]),
            vec![gpu_result("g", "part2")],
        ),
        gpu_claim("g2", json!([gpu_request("g")]), json!([]), vec![admin]),
    ]);
    assert!(v.is_empty(), "{v:#?}");
}

#[test]
fn counters_within_their_set() {
    let v = only(
        run(vec![
            gpu_claim(
                "g1",
                json!([gpu_request("g")]),
                json!([]),
                vec![gpu_result("g", "part0")],
            ),
            gpu_claim(
                "g2",
                json!([gpu_request("g")]),
                json!([]),
                vec![gpu_result("g", "part1")],
            ),
        ]),
        Rule::Counters,
    );
    assert_eq!(v.device, "gpu.example.com/node-a counter set gpu0");
    assert_eq!(v.claims, ["ns/g1", "ns/g2"]);
    assert!(
        v.message.contains("10Gi of counter memory, more than its 8Gi"),
        "{}",
        v.message
    );
}

#[test]
fn class_and_request_selectors() {
    // A GPU partition for a request of class nic.
    let request = json!([{"name":"g","exactly":{"deviceClassName":"nic"}}]);
    let v = only(
        run(vec![gpu_claim(
            "g1",
            request,
            json!([]),
            vec![gpu_result("g", "part2")],
        )]),
        Rule::Selector,
    );
    assert!(
        v.message.contains("DeviceClass nic spec.selectors[0]"),
        "{}",
        v.message
    );
    let request = json!([{"name":"g","exactly":{"deviceClassName":"gpu",
        "selectors":[{"cel":{"expression":"device.attributes[\"gpu.example.com\"].numa == 1"}}]}}]);
    let v = only(
        run(vec![gpu_claim(
            "g1",
            request,
            json!([]),
            vec![gpu_result("g", "part0")],
        )]),
        Rule::Selector,
    );
    assert!(v.message.contains("request g selectors[0]"), "{}", v.message);
}

#[test]
fn first_available_subrequests_are_checked_against_their_own_class() {
    let request = json!([{"name":"r","firstAvailable":[
        {"name":"big","deviceClassName":"nic"},
        {"name":"small","deviceClassName":"gpu"}]}]);
    let ok = run(vec![gpu_claim(
        "g1",
        request.clone(),
        json!([]),
        vec![gpu_result("r/small", "part2")],
    )]);
    assert!(ok.is_empty(), "{ok:#?}");
    let v = only(
        run(vec![gpu_claim(
            "g1",
            request,
            json!([]),
            vec![gpu_result("r/big", "part2")],
        )]),
        Rule::Selector,
    );
    assert!(v.message.contains("DeviceClass nic"), "{}", v.message);
}

#[test]
fn match_and_distinct_attribute_constraints() {
    let requests = json!([gpu_request("a"), gpu_request("b")]);
    let matching = json!([{"matchAttribute":"gpu.example.com/numa"}]);
    let ok = run(vec![gpu_claim(
        "g",
        requests.clone(),
        matching.clone(),
        vec![gpu_result("a", "part1"), gpu_result("b", "part2")],
    )]);
    assert!(ok.is_empty(), "{ok:#?}");
    let v = only(
        run(vec![gpu_claim(
            "g",
            requests.clone(),
            matching,
            vec![gpu_result("a", "part0"), gpu_result("b", "part2")],
        )]),
        Rule::Constraint,
    );
    assert!(
        v.message.contains("matchAttribute gpu.example.com/numa"),
        "{}",
        v.message
    );
    let distinct = json!([{"distinctAttribute":"gpu.example.com/numa","requests":["a","b"]}]);
    let v = only(
        run(vec![gpu_claim(
            "g",
            requests.clone(),
            distinct,
            vec![gpu_result("a", "part1"), gpu_result("b", "part2")],
        )]),
        Rule::Constraint,
    );
    assert!(v.message.contains("distinctAttribute"), "{}", v.message);
    // A device without the attribute breaks the constraint.
    let missing = json!([{"matchAttribute":"gpu.example.com/model"}]);
    let v = only(
        run(vec![gpu_claim(
            "g",
            requests,
            missing,
            vec![gpu_result("a", "part1")],
        )]),
        Rule::Constraint,
    );
    assert!(v.message.contains("no single value"), "{}", v.message);
}

#[test]
fn lock_invariant_different_affinity_values_on_one_device() {
    let v = only(
        run(vec![
            nic_claim("a", Some(json!("A")), "1", vec![nic_result("eth1", "1", "s1")]),
            nic_claim("b", Some(json!("B")), "1", vec![nic_result("eth1", "1", "s2")]),
        ]),
        Rule::Lock,
    );
    assert_eq!(v.device, "nic.example.com/node-a/eth1");
    assert_eq!(v.claims, ["ns/a", "ns/b"]);
    assert!(
        v.message.contains("subnet=A (ns/a) vs subnet=B (ns/b)"),
        "{}",
        v.message
    );
}

#[test]
fn lock_invariant_with_extractors_from_the_configuration() {
    let mut items = vec![
        nic_claim("a", Some(json!("A")), "1", vec![nic_result("eth1", "1", "s1")]),
        nic_claim("b", Some(json!("B")), "1", vec![nic_result("eth1", "1", "s2")]),
    ];
    // Without the metadata slice the pool has no extractor: no lock, no violation.
    let mut cluster = base();
    cluster.retain(|o| o["metadata"]["name"] != "nic-meta");
    cluster[2]["spec"]["pool"]["resourceSliceCount"] = json!(1);
    cluster.append(&mut items);
    let text = json!({"kind":"List","items":cluster}).to_string();
    let objects = parse_objects(&text).unwrap().objects;
    assert!(audit(&objects, &Config::default()).is_empty());
    let config = Config::from_json(
        r#"{"sharingAffinity":[{"driver":"nic.example.com","cel":{"subnet":"has(object.subnet) ? object.subnet : \"\""}}]}"#,
    )
    .unwrap();
    assert_eq!(rules(&audit(&objects, &config)), [Rule::Lock]);
}

#[test]
fn strict_gating_missing_key_and_failed_extraction() {
    let v = only(
        run(vec![nic_claim(
            "a",
            None,
            "1",
            vec![nic_result("eth1", "1", "s1")],
        )]),
        Rule::Gating,
    );
    assert!(
        v.message.contains("no value for affinity key subnet"),
        "{}",
        v.message
    );
    let v = only(
        run(vec![nic_claim(
            "a",
            Some(json!(5)),
            "1",
            vec![nic_result("eth1", "1", "s1")],
        )]),
        Rule::Gating,
    );
    assert!(v.message.contains("extraction failed"), "{}", v.message);
}

#[test]
fn unknown_device_pool_and_request() {
    let v = only(
        run(vec![nic_claim(
            "a",
            Some(json!("A")),
            "1",
            vec![nic_result("eth9", "1", "s1")],
        )]),
        Rule::UnknownReference,
    );
    assert_eq!(v.device, "nic.example.com/node-a/eth9");
    let mut result = nic_result("eth1", "1", "s1");
    result["request"] = json!("other");
    let v = only(
        run(vec![nic_claim("a", Some(json!("A")), "1", vec![result])]),
        Rule::UnknownReference,
    );
    assert!(v.message.contains("request other"), "{}", v.message);
}

#[test]
fn a_newer_pool_generation_replaces_the_devices_of_the_old_one() {
    let mut items = base();
    let mut newer = items[4].clone();
    newer["metadata"]["name"] = json!("gpu-gen2");
    newer["spec"]["pool"]["generation"] = json!(2);
    newer["spec"]["devices"] = json!([{"name":"whole"}]);
    items.push(newer);
    items.push(gpu_claim(
        "g",
        json!([gpu_request("g")]),
        json!([]),
        vec![gpu_result("g", "part2")],
    ));
    let text = json!({"kind":"List","items":items}).to_string();
    let v = audit(&parse_objects(&text).unwrap().objects, &Config::default());
    assert_eq!(rules(&v), [Rule::UnknownReference], "{v:#?}");
}

#[test]
fn record_allocations_fills_existing_and_generated_claims() {
    let mut items = base();
    items.push(nic_claim("a", Some(json!("A")), "1", vec![]));
    items.push(
        json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate",
        "metadata":{"name":"t","namespace":"ns"},
        "spec":{"spec":{"devices":{"requests":[{"name":"nic","exactly":{"deviceClassName":"nic"}}],
            "config":[{"opaque":{"driver":NIC,"parameters":{"subnet":"B"}}}]}}}}),
    );
    items.push(
        json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns"},
        "spec":{"resourceClaims":[{"name":"net","resourceClaimTemplateName":"t"}]}}),
    );
    let text = json!({"kind":"List","items":items}).to_string();
    let mut objects = parse_objects(&text).unwrap().objects;
    let alloc = |device: &str, share: &str| crate::model::AllocationResult {
        devices: serde_json::from_value(json!({"results":[nic_result(device, "1", share)]})).unwrap(),
        ..Default::default()
    };
    let allocations = vec![
        crate::plugin::ClaimAllocation {
            claim: "ns/a".into(),
            allocation: alloc("eth1", "s1"),
        },
        crate::plugin::ClaimAllocation {
            claim: "ns/p-net".into(),
            allocation: alloc("eth1", "s2"),
        },
        crate::plugin::ClaimAllocation {
            claim: "ns/nowhere".into(),
            allocation: alloc("eth2", "s3"),
        },
    ];
    let unplaced = record_allocations(&mut objects, "ns/p", &allocations);
    assert_eq!(unplaced, ["ns/nowhere"]);
    // The generated claim carries the template's config (subnet B): the lock is broken.
    let v = only(audit(&objects, &Config::default()), Rule::Lock);
    assert_eq!(v.claims, ["ns/a", "ns/p-net"]);
}

#[test]
fn lock_invariant_and_gating_with_structured_declarations() {
    // The NIC pool without its metadata slice; eth1 declares `subnet` (structured design).
    let cluster = |declare_on_extractor_pool: bool| {
        let mut c = base();
        if !declare_on_extractor_pool {
            c.retain(|o| o["metadata"]["name"] != "nic-meta");
            c[2]["spec"]["pool"]["resourceSliceCount"] = json!(1);
        }
        let nic = c
            .iter_mut()
            .find(|o| o["metadata"]["name"] == "nic-devices")
            .unwrap();
        nic["spec"]["devices"][0]["sharingAffinity"] = json!({"attributeKeys": ["subnet"]});
        c
    };
    let holder = |name: &str, subnet: Option<Value>, share: &str| {
        let mut c = nic_claim(name, None, "1", vec![nic_result("eth1", "1", share)]);
        if let Some(v) = subnet {
            c["spec"]["devices"]["config"] = json!([{"structured":{"driver":NIC,"attributes":{"subnet":v}}}]);
        }
        c
    };
    let check = |declare_on_extractor_pool: bool, claims: Vec<Value>| {
        let mut items = cluster(declare_on_extractor_pool);
        items.extend(claims);
        let text = json!({"kind":"List","items":items}).to_string();
        audit(&parse_objects(&text).unwrap().objects, &Config::default())
    };
    let same = check(
        false,
        vec![
            holder("a", Some(json!({"string":"A"})), "s1"),
            holder("b", Some(json!({"string":"A"})), "s2"),
        ],
    );
    assert!(same.is_empty(), "{same:#?}");
    let v = only(
        check(
            false,
            vec![
                holder("a", Some(json!({"string":"A"})), "s1"),
                holder("b", Some(json!({"string":"B"})), "s2"),
            ],
        ),
        Rule::Lock,
    );
    assert!(
        v.message
            .contains("nic.example.com/subnet=A (ns/a) vs nic.example.com/subnet=B (ns/b)"),
        "{}",
        v.message
    );
    let v = only(
        check(false, vec![holder("a", Some(json!({"int":5})), "s1")]),
        Rule::Gating,
    );
    assert!(v.message.contains("not a string"), "{}", v.message);
    let v = only(check(false, vec![holder("a", None, "s1")]), Rule::Gating);
    assert!(v.message.contains("no structured value"), "{}", v.message);
    let v = only(
        check(true, vec![holder("a", Some(json!({"string":"A"})), "s1")]),
        Rule::Gating,
    );
    assert!(v.message.contains("declared one way only"), "{}", v.message);
}
