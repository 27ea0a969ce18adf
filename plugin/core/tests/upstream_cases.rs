//! The upstream allocator cases of `dra-semantics.md` §5, re-expressed as data and run through the
//! cycle API (PreFilter → Filter on node-1 → Reserve). Each test is named after the upstream case.
//! Share IDs are only checked for presence (upstream replaces them with a fixed UUID).

mod common;

use common::*;
use serde_json::{Value, json};
use sharing_affinity_core::Code;

/// Loads the objects plus a pod `pod-0` using the claims in order, and runs one cycle.
fn run_case(objects: Vec<Value>, claims: &[Claim]) -> Result<Vec<Vec<Got>>, sharing_affinity_core::Status> {
    let mut all = vec![node(NODE)];
    all.extend(objects);
    let names: Vec<String> = claims
        .iter()
        .map(|c| c.0["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    for c in claims {
        all.push(c.json());
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    all.push(pod("pod-0", &refs, "2026-01-01T00:00:00Z"));
    let mut p = plugin("", &all);
    run(&mut p, "pod-0")
}

fn unfit(got: Result<Vec<Vec<Got>>, sharing_affinity_core::Status>, msg: &str) {
    assert_status(got, Code::Unschedulable, "cannot allocate all claims", msg);
}

fn error(got: Result<Vec<Vec<Got>>, sharing_affinity_core::Status>, needle: &str, msg: &str) {
    assert_status(got, Code::Error, needle, msg);
}

const C0: &str = "capacity-0";

fn c0(v: &str) -> Option<&'static [(&'static str, &'static str)]> {
    // Leak-free static table for the common single-capacity results.
    match v {
        "0" => Some(&[(C0, "0")]),
        "1" => Some(&[(C0, "1")]),
        "2" => Some(&[(C0, "2")]),
        "3" => Some(&[(C0, "3")]),
        "4" => Some(&[(C0, "4")]),
        _ => panic!("no table entry for {v}"),
    }
}

/// An allocated claim holding a share of device-1 with consumed capacity (upstream's
/// `allocatedSharedDeviceIDs` + `allocatedCapacityDevices`).
fn consumed(device: &str, v: &str) -> Value {
    claim("existing", &[req("req-0", "class-a")])
        .allocated(json!([shared(
            "req-0",
            device,
            "11111111-1111-1111-1111-111111111111",
            json!({C0: v})
        )]))
        .json()
}

// Row 1: upstream checks that capacity requests fail when DRAConsumableCapacity is disabled. This
// plugin always runs with the gate on (beta, on by default since 1.36), so the same input allocates.
#[test]
fn consumable_capacity_disabled_feature_is_always_enabled_here() {
    let got = run_case(
        vec![class_a(), slice1(&[device("device-1").ama().cap(C0, "1")])],
        &[claim("claim-0", &[req("req-0", "class-a").rq("1")])],
    );
    assert_eq!(got.unwrap(), vec![vec![g("req-0", "device-1", true, c0("1"))]]);
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_missing_capacity_request() {
    let got = run_case(
        vec![
            class_a(),
            slice1(&[device("device-1").ama().cap("capacity-1", "1")]),
        ],
        &[claim("claim-0", &[req("req-0", "class-a").rq("1")])],
    );
    unfit(got, "request names a capacity the device lacks: device skipped");
}

#[test]
fn consumable_capacity_without_capacity_without_capacity_request() {
    let got = run_case(
        vec![class_ma(true), slice1(&[device("device-1").ama()])],
        &[
            claim("claim-0", &[req("req-0", "class-ma-true")]),
            claim("claim-1", &[req("req-0", "class-ma-true")]),
        ],
    );
    assert_eq!(
        got.unwrap(),
        vec![
            vec![g("req-0", "device-1", true, None)],
            vec![g("req-0", "device-1", true, None)]
        ]
    );
}

#[test]
fn consumable_capacity_without_policy_without_capacity_request() {
    let got = run_case(
        vec![
            class_ma(true),
            slice1(&[
                device("device-1").ama().cap(C0, "1"),
                device("device-2").ama().cap(C0, "1"),
            ]),
        ],
        &[
            claim("claim-0", &[req("req-0", "class-ma-true")]),
            claim("claim-1", &[req("req-0", "class-ma-true")]),
        ],
    );
    assert_eq!(
        got.unwrap(),
        vec![
            vec![g("req-0", "device-1", true, c0("1"))],
            vec![g("req-0", "device-2", true, c0("1"))]
        ]
    );
}

#[test]
fn consumable_capacity_without_policy_without_capacity_request_block() {
    let got = run_case(
        vec![class_ma(true), slice1(&[device("device-1").ama().cap(C0, "2")])],
        &[
            claim("claim-0", &[req("req-0", "class-ma-true")]),
            claim("claim-1", &[req("req-0", "class-ma-true")]),
        ],
    );
    unfit(got, "no request consumes the whole device");
}

#[test]
fn consumable_capacity_without_policy_with_capacity_request() {
    let got = run_case(
        vec![class_ma(true), slice1(&[device("device-1").ama().cap(C0, "2")])],
        &[
            claim("claim-0", &[req("req-0", "class-ma-true").rq("1")]),
            claim("claim-1", &[req("req-0", "class-ma-true").rq("1")]),
        ],
    );
    assert_eq!(
        got.unwrap(),
        vec![
            vec![g("req-0", "device-1", true, c0("1"))],
            vec![g("req-0", "device-1", true, c0("1"))]
        ]
    );
}

#[test]
fn consumable_capacity_with_policy_without_capacity_request() {
    let got = run_case(
        vec![class_ma(true), slice1(&[device("device-1").ama().r("4")])],
        &[
            claim("claim-0", &[req("req-0", "class-ma-true")]),
            claim("claim-1", &[req("req-0", "class-ma-true")]),
        ],
    );
    assert_eq!(
        got.unwrap(),
        vec![
            vec![g("req-0", "device-1", true, c0("2"))],
            vec![g("req-0", "device-1", true, c0("2"))]
        ]
    );
}

#[test]
fn consumable_capacity_with_zero_request_policy() {
    let got = run_case(
        vec![
            class_ma(true),
            slice1(&[device("device-1").ama().vv("0", "1", &[])]),
        ],
        &[
            claim("claim-0", &[req("req-0", "class-ma-true")]),
            claim("claim-1", &[req("req-0", "class-ma-true")]),
        ],
    );
    assert_eq!(
        got.unwrap(),
        vec![
            vec![g("req-0", "device-1", true, c0("0"))],
            vec![g("req-0", "device-1", true, c0("0"))]
        ]
    );
}

#[test]
fn consumable_capacity_violates_zero_request_policy() {
    let got = run_case(
        vec![
            class_ma(true),
            slice1(&[device("device-1").ama().vv("0", "1", &[])]),
        ],
        &[claim("claim-0", &[req("req-0", "class-ma-true").rq("1")])],
    );
    unfit(got, "1 is not in validValues [0]");
}

#[test]
fn consumable_capacity_with_range_policy_with_capacity_request() {
    let got = run_case(
        vec![class_ma(true), slice1(&[device("device-1").ama().r("4")])],
        &[
            claim("claim-0", &[req("req-0", "class-ma-true").rq("1")]),
            claim("claim-1", &[req("req-0", "class-ma-true").rq("1")]),
        ],
    );
    assert_eq!(
        got.unwrap(),
        vec![
            vec![g("req-0", "device-1", true, c0("2"))],
            vec![g("req-0", "device-1", true, c0("2"))]
        ]
    );
}

#[test]
fn consumable_capacity_with_range_policy_step() {
    let got = run_case(
        vec![class_ma(true), slice1(&[device("device-1").ama().r("4")])],
        &[claim("claim-0", &[req("req-0", "class-ma-true").rq("3")])],
    );
    assert_eq!(got.unwrap(), vec![vec![g("req-0", "device-1", true, c0("4"))]]);
}

#[test]
fn consumable_capacity_with_valid_values_policy() {
    let got = run_case(
        vec![
            class_ma(true),
            slice1(&[device("device-1").ama().vv("1", "4", &["2"])]),
        ],
        &[claim("claim-0", &[req("req-0", "class-ma-true").rq("2")])],
    );
    assert_eq!(got.unwrap(), vec![vec![g("req-0", "device-1", true, c0("2"))]]);
}

#[test]
fn consumable_capacity_with_valid_values_policy_round_up() {
    let got = run_case(
        vec![
            class_ma(true),
            slice1(&[device("device-1").ama().vv("1", "3", &["3"])]),
        ],
        &[claim("claim-0", &[req("req-0", "class-ma-true").rq("2")])],
    );
    assert_eq!(got.unwrap(), vec![vec![g("req-0", "device-1", true, c0("3"))]]);
}

#[test]
fn consumable_capacity_with_exceeded_consumable_capacity_request() {
    let got = run_case(
        vec![class_ma(true), slice1(&[device("device-1").ama().r("2")])],
        &[
            claim("claim-0", &[req("req-0", "class-ma-true").rq("1")]),
            claim("claim-1", &[req("req-0", "class-ma-true").rq("2")]),
        ],
    );
    unfit(got, "2 (rounded up) + 2 > 2");
}

#[test]
fn consumable_capacity_with_request_over_max_sharing_policy() {
    let got = run_case(
        vec![class_ma(true), slice1(&[device("device-1").ama().r("10")])],
        &[claim("claim-0", &[req("req-0", "class-ma-true").rq("6")])],
    );
    unfit(got, "6 > max 4 although 6 < 10");
}

#[test]
fn consumable_capacity_with_allocated_capacity_use_remaining() {
    let got = run_case(
        vec![
            class_ma(true),
            slice1(&[device("device-1").ama().r("4")]),
            consumed("device-1", "2"),
        ],
        &[claim("claim-0", &[req("req-0", "class-ma-true").rq("2")])],
    );
    assert_eq!(got.unwrap(), vec![vec![g("req-0", "device-1", true, c0("2"))]]);
}

#[test]
fn consumable_capacity_with_allocated_capacity_next_device() {
    let got = run_case(
        vec![
            class_ma(true),
            slice1(&[device("device-1").ama().r("2"), device("device-2").ama().r("2")]),
            consumed("device-1", "2"),
        ],
        &[claim("claim-0", &[req("req-0", "class-ma-true").rq("2")])],
    );
    assert_eq!(got.unwrap(), vec![vec![g("req-0", "device-2", true, c0("2"))]]);
}

#[test]
fn consumable_capacity_with_multi_allocatable_device_backtrack() {
    let got = run_case(
        vec![
            class_a(),
            slice1(&[
                device("device-2").ama().r("2").attr(
                    "stringAttribute",
                    "string",
                    json!("stringAttributeValue1"),
                ),
                device("device-1").ama().r("4").attr(
                    "stringAttribute",
                    "string",
                    json!("stringAttributeValue2"),
                ),
            ]),
        ],
        &[
            claim(
                "claim-0",
                &[req("req-0", "class-a").rq("2"), req("req-1", "class-a").rq("2")],
            )
            .constraint(json!({"matchAttribute": "driver-a/stringAttribute"})),
            claim("claim-1", &[req("req-0", "class-a").rq("2")]),
        ],
    );
    assert_eq!(
        got.unwrap(),
        vec![
            vec![
                g("req-0", "device-1", true, c0("2")),
                g("req-1", "device-1", true, c0("2"))
            ],
            vec![g("req-0", "device-2", true, c0("2"))]
        ]
    );
}

#[test]
fn consumable_capacity_with_subrequest() {
    let got = run_case(
        vec![class_a(), slice1(&[device("device-1").ama().r("2")])],
        &[claim(
            "claim-0",
            &[req_first(
                "req-0",
                &[
                    sub(
                        "subReq-0",
                        "class-a",
                        json!({"capacity": {"requests": {C0: "4"}}}),
                    ),
                    sub(
                        "subReq-1",
                        "class-a",
                        json!({"capacity": {"requests": {C0: "2"}}}),
                    ),
                    sub("subReq-2", "class-a", json!({})),
                ],
            )],
        )],
    );
    assert_eq!(
        got.unwrap(),
        vec![vec![g("req-0/subReq-1", "device-1", true, c0("2"))]]
    );
}

#[test]
fn consumable_capacity_with_no_available_consumable_capacity() {
    let got = run_case(
        vec![
            class_a(),
            slice1(&[device("device-1").ama().r("2")]),
            consumed("device-1", "2"),
        ],
        &[claim("claim-0", &[req("req-0", "class-a").rq("2")])],
    );
    unfit(got, "capacity used up by an allocated claim");
}

#[test]
fn consumable_capacity_allocation_mode_all_filter_out_no_capacity() {
    let got = run_case(
        vec![
            class_ma(true),
            slice1(&[device("device-1").ama().cap(C0, "2"), device("device-2").ama()]),
        ],
        &[claim("claim-0", &[req("req-0", "class-ma-true").all().rq("2")])],
    );
    assert_eq!(got.unwrap(), vec![vec![g("req-0", "device-1", true, c0("2"))]]);
}

/// Not an upstream case: devices of one node with different capacity maps each get their own
/// capacity check (the allocator works out a request's need once per capacity shape). A device
/// that lacks the requested capacity comes first and does not hide the one that has it.
#[test]
fn consumable_capacity_checked_per_capacity_shape() {
    let got = run_case(
        vec![
            class_a(),
            slice1(&[device("device-1").ama(), device("device-2").ama().cap(C0, "2")]),
        ],
        &[claim("claim-0", &[req("req-0", "class-a").rq("1")])],
    );
    assert_eq!(got.unwrap(), vec![vec![g("req-0", "device-2", true, c0("1"))]]);
    // The other way round: a device that has the capacity does not make one without it fit.
    let got = run_case(
        vec![
            class_a(),
            slice1(&[device("device-1").ama().cap(C0, "2"), device("device-2").ama()]),
        ],
        &[claim("claim-0", &[req("req-0", "class-a").count(2).rq("1")])],
    );
    unfit(got, "device-2 lacks the requested capacity");
}

#[test]
fn consumable_capacity_allocation_mode_all_filter_out_insufficient_capacity() {
    let got = run_case(
        vec![
            class_a(),
            slice1(&[
                device("device-1").ama().cap(C0, "2"),
                device("device-2").ama().cap(C0, "1"),
            ]),
        ],
        &[claim("claim-0", &[req("req-0", "class-a").all().rq("2")])],
    );
    assert_eq!(got.unwrap(), vec![vec![g("req-0", "device-1", true, c0("2"))]]);
}

#[test]
fn consumable_capacity_allocation_mode_all_allocating_sufficient() {
    let got = run_case(
        vec![
            class_a(),
            slice1(&[
                device("device-1").ama().cap(C0, "2"),
                device("device-2").ama().cap(C0, "1"),
            ]),
        ],
        &[claim(
            "claim-0",
            &[
                req("req-0", "class-a").rq("1"),
                req("req-1", "class-a").all().rq("1"),
            ],
        )],
    );
    assert_eq!(
        got.unwrap(),
        vec![vec![
            g("req-0", "device-1", true, c0("1")),
            g("req-1", "device-1", true, c0("1")),
            g("req-1", "device-2", true, c0("1")),
        ]]
    );
}

#[test]
fn consumable_capacity_allocation_mode_all_in_use_sufficient() {
    let got = run_case(
        vec![
            class_a(),
            slice1(&[
                device("device-1").ama().cap(C0, "2"),
                device("device-2").ama().cap(C0, "1"),
            ]),
            consumed("device-1", "1"),
        ],
        &[claim("claim-0", &[req("req-0", "class-a").all().rq("1")])],
    );
    assert_eq!(
        got.unwrap(),
        vec![vec![
            g("req-0", "device-1", true, c0("1")),
            g("req-0", "device-2", true, c0("1"))
        ]]
    );
}

#[test]
fn consumable_capacity_allocation_mode_all_allocating_insufficient() {
    let got = run_case(
        vec![
            class_a(),
            slice1(&[
                device("device-1").ama().cap(C0, "1"),
                device("device-2").ama().cap(C0, "1"),
            ]),
        ],
        &[claim(
            "claim-0",
            &[
                req("req-0", "class-a").rq("1"),
                req("req-1", "class-a").all().rq("1"),
            ],
        )],
    );
    unfit(
        got,
        "the All set is fixed before allocation; req-0 exhausts one of them",
    );
}

#[test]
fn consumable_capacity_allocation_mode_all_in_use_insufficient() {
    let got = run_case(
        vec![
            class_a(),
            slice1(&[
                device("device-1").ama().cap(C0, "1"),
                device("device-2").ama().cap(C0, "1"),
            ]),
            consumed("device-1", "1"),
        ],
        &[claim("claim-0", &[req("req-0", "class-a").all().rq("1")])],
    );
    assert_eq!(got.unwrap(), vec![vec![g("req-0", "device-2", true, c0("1"))]]);
}

#[test]
fn consumable_capacity_dedicated_device_with_consumable_capacity_request() {
    let got = run_case(
        vec![
            class_ma(false),
            slice1(&[device("device-1").not_ama().cap(C0, "1")]),
        ],
        &[claim("claim-0", &[req("req-0", "class-ma-false").rq("1")])],
    );
    assert_eq!(
        got.unwrap(),
        vec![vec![g("req-0", "device-1", false, None)]],
        "no shareID, no consumedCapacity"
    );
}

#[test]
fn consumable_capacity_dedicated_device_with_multiple_consumable_capacity_request() {
    let got = run_case(
        vec![class_ma(false), slice1(&[device("device-1").not_ama().r("2")])],
        &[
            claim("claim-0", &[req("req-0", "class-ma-false").rq("1")]),
            claim("claim-1", &[req("req-0", "class-ma-false").rq("1")]),
        ],
    );
    unfit(got, "a dedicated device takes one claim");
}

#[test]
fn allow_multiple_allocations_exclude_multi_allocatable_device_by_class_selector() {
    let got = run_case(
        vec![class_ma(false), slice1(&[device("device-1").ama()])],
        &[claim("claim-0", &[req("req-0", "class-ma-false")])],
    );
    unfit(got, "class excludes multi-allocatable devices");
}

#[test]
fn allow_multiple_allocations_not_allocate_multi_allocatable_device_which_already_dedicated() {
    let got = run_case(
        vec![
            class_a(),
            slice1(&[device("device-1").ama().r("2")]),
            claim("existing", &[req("req-0", "class-a")])
                .allocated(json!([dedicated("req-0", "device-1")]))
                .json(),
        ],
        &[claim("claim-0", &[req("req-0", "class-a")])],
    );
    unfit(got, "exclusively allocated before it became multi-allocatable");
}

#[test]
fn allow_multiple_allocations_not_allocate_dedicated_device_which_change_from_multi_allocatable() {
    let got = run_case(
        vec![
            class_ma(true),
            slice1(&[device("device-1").not_ama().r("2")]),
            consumed("device-1", "1"),
        ],
        &[claim("claim-0", &[req("req-0", "class-ma-true")])],
    );
    unfit(got, "no longer multi-allocatable");
    // The same device with a class that admits dedicated devices: the shared allocation still
    // blocks a dedicated one? Upstream only blocks via AllocatedDevices; capacity 1+2 > 2 blocks here.
}

fn counter_slice2(sets: Value) -> Value {
    counter_slice("slice-2", "pool-1", 2, sets)
}

#[test]
fn allow_multiple_allocations_with_partitionable_device() {
    let mem = |v: &str| device_mem(v);
    let got = run_case(
        vec![
            class_ma(true),
            slice(
                "slice-1",
                "pool-1",
                1,
                2,
                &[
                    mem("4Gi").rename("device-1"),
                    mem("6Gi").rename("device-2"),
                    mem("4Gi").rename("device-3"),
                ],
            ),
            counter_slice2(json!([{"name": "counter-set-1", "counters": {"memory": {"value": "8Gi"}}}])),
        ],
        &[claim(
            "claim-0",
            &[
                req("req-0", "class-ma-true"),
                req_first(
                    "req-1",
                    &[
                        sub(
                            "subReq-0",
                            "class-ma-true",
                            json!({"selectors": [{"cel": {"expression":
                    "device.capacity[\"driver-a\"].memory.compareTo(quantity(\"6Gi\")) >= 0"}}]}),
                        ),
                        sub(
                            "subReq-1",
                            "class-ma-true",
                            json!({"selectors": [{"cel": {"expression":
                    "device.capacity[\"driver-a\"].memory.compareTo(quantity(\"4Gi\")) >= 0"}}]}),
                        ),
                    ],
                ),
            ],
        )],
    );
    assert_eq!(
        got.unwrap(),
        vec![vec![
            g("req-0", "device-1", true, Some(&[("memory", "4Gi")])),
            g("req-1/subReq-1", "device-3", true, Some(&[("memory", "4Gi")])),
        ]]
    );
}

/// A multi-allocatable device whose memory capacity equals its counter consumption.
fn device_mem(v: &str) -> Dev {
    device("x")
        .ama()
        .cap("memory", v)
        .counters("counter-set-1", json!({"memory": {"value": v}}))
}

trait Rename {
    fn rename(self, name: &str) -> Self;
}
impl Rename for Dev {
    fn rename(mut self, name: &str) -> Self {
        self.0["name"] = json!(name);
        self
    }
}

#[test]
fn allow_multiple_allocations_with_shared_device_counter_cross_cycle() {
    let dev = |name: &str, mode: &str| {
        device(name)
            .ama()
            .cap(C0, "1")
            .attr("mode", "string", json!(mode))
            .counters("counter-set-1", json!({C0: {"value": "1"}}))
    };
    let got = run_case(
        vec![
            class_ma(true),
            slice(
                "slice-1",
                "pool-1",
                1,
                2,
                &[dev("device-1", "a"), dev("device-2", "b")],
            ),
            counter_slice2(json!([{"name": "counter-set-1", "counters": {C0: {"value": "1"}}}])),
            consumed("device-1", "1"),
        ],
        &[claim(
            "claim-0",
            &[req("req-0", "class-ma-true")
                .rq("1")
                .selector("device.attributes[\"driver-a\"].mode == \"b\"")],
        )],
    );
    unfit(got, "the counter is used by the shared device-1");
}

#[test]
fn consumable_capacity_with_partitionable_device_multiple_capacity_pools() {
    let policy = json!({"default": "2", "validRange": {"min": "2", "step": "2", "max": "4"}});
    let dev = |name: &str, c0v: &str| {
        device(name)
            .ama()
            .cap(C0, c0v)
            .cap_policy("capacity-1", "4", policy.clone())
            .counters("counter-set-1", json!({C0: {"value": c0v}}))
            .counters("counter-set-2", json!({"capacity-1": {"value": "4"}}))
    };
    let got = run_case(
        vec![
            class_a(),
            slice(
                "slice-1",
                "pool-1",
                1,
                2,
                &[dev("device-1", "2"), dev("device-2", "4"), dev("device-3", "2")],
            ),
            counter_slice2(json!([
                {"name": "counter-set-1", "counters": {C0: {"value": "4"}}},
                {"name": "counter-set-2", "counters": {"capacity-1": {"value": "8"}}}
            ])),
        ],
        &[claim(
            "claim-0",
            &[
                req("req-0", "class-a").rq("1"),
                req("req-2", "class-a").rq("2"),
                req_first(
                    "req-1",
                    &[
                        sub(
                            "subReq-0",
                            "class-a",
                            json!({"capacity": {"requests": {C0: "1"}}, "selectors": [{"cel": {"expression":
                    "device.capacity[\"driver-a\"][\"capacity-0\"].compareTo(quantity(\"4\")) >= 0"}}]}),
                        ),
                        sub(
                            "subReq-1",
                            "class-a",
                            json!({"capacity": {"requests": {C0: "1"}}, "selectors": [{"cel": {"expression":
                    "device.capacity[\"driver-a\"][\"capacity-0\"].compareTo(quantity(\"2\")) >= 0"}}]}),
                        ),
                    ],
                ),
            ],
        )],
    );
    assert_eq!(
        got.unwrap(),
        vec![vec![
            g("req-0", "device-1", true, Some(&[(C0, "1"), ("capacity-1", "2")])),
            g("req-2", "device-3", true, Some(&[(C0, "2"), ("capacity-1", "2")])),
            g(
                "req-1/subReq-1",
                "device-1",
                true,
                Some(&[(C0, "1"), ("capacity-1", "2")])
            ),
        ]]
    );
}

fn distinct_device(name: &str, version: &str, numa: i64, b: bool) -> Dev {
    device(name)
        .ama()
        .attr("driverVersion", "version", json!(version))
        .attr("numa", "int", json!(numa))
        .attr("boolAttribute", "bool", json!(b))
}

#[test]
fn with_distinct_constraints() {
    let got = run_case(
        vec![
            class_a(),
            slice1(&[
                distinct_device("device-1", "1.0.0", 0, true),
                distinct_device("device-2", "1.0.1", 1, false),
                distinct_device("device-3", "1.0.2", 2, true),
                distinct_device("device-4", "1.0.0", 3, true),
            ]),
        ],
        &[claim(
            "claim-0",
            &[
                req("req-0", "class-a"),
                req("req-1", "class-a"),
                req("req-2", "class-a"),
                req("req-3", "class-a"),
            ],
        )
        .constraint(json!({"distinctAttribute": "driver-a/boolAttribute", "requests": ["req-0", "req-1"]}))
        .constraint(
            json!({"distinctAttribute": "driver-a/driverVersion", "requests": ["req-0", "req-1", "req-2"]}),
        )
        .constraint(
            json!({"distinctAttribute": "driver-a/numa", "requests": ["req-0", "req-1", "req-2", "req-3"]}),
        )],
    );
    assert_eq!(
        got.unwrap(),
        vec![vec![
            g("req-0", "device-1", true, None),
            g("req-1", "device-2", true, None),
            g("req-2", "device-3", true, None),
            g("req-3", "device-4", true, None),
        ]]
    );
}

#[test]
fn with_distinct_constraints_attribute_not_set() {
    let got = run_case(
        vec![class_a(), slice1(&[device("device-1").ama()])],
        &[claim("claim-0", &[req("req-0", "class-a")])
            .constraint(json!({"distinctAttribute": "driver-a/boolAttribute", "requests": ["req-0"]}))],
    );
    unfit(got, "attribute not set");
}

#[test]
fn with_distinct_constraints_unknown_type_attribute() {
    let got = run_case(
        vec![
            class_a(),
            slice1(&[device("device-1").ama().raw_attr("boolAttribute", json!({}))]),
        ],
        &[claim("claim-0", &[req("req-0", "class-a")])
            .constraint(json!({"distinctAttribute": "driver-a/boolAttribute", "requests": ["req-0"]}))],
    );
    error(got, "unsupported attribute value", "empty one-of attribute");
}

#[test]
fn with_distinct_constraints_with_subrequests() {
    let subs = || {
        vec![
            sub(
                "subReq-0",
                "class-a",
                json!({"selectors": [{"cel": {"expression": "device.attributes[\"driver-a\"].boolAttribute"}}]}),
            ),
            sub("subReq-1", "class-a", json!({})),
        ]
    };
    let got = run_case(
        vec![
            class_a(),
            slice1(&[
                device("device-1")
                    .ama()
                    .attr("boolAttribute", "bool", json!(true)),
                device("device-2")
                    .ama()
                    .attr("boolAttribute", "bool", json!(false)),
            ]),
        ],
        &[claim(
            "claim-0",
            &[
                req_first("req-0", &subs()),
                req_first("req-1", &subs()),
                req_first("req-2", &subs()),
            ],
        )
        .constraint(json!({"distinctAttribute": "driver-a/boolAttribute", "requests": ["req-0", "req-1"]}))],
    );
    assert_eq!(
        got.unwrap(),
        vec![vec![
            g("req-0/subReq-0", "device-1", true, None),
            g("req-1/subReq-1", "device-2", true, None),
            g("req-2/subReq-0", "device-1", true, None),
        ]]
    );
}

#[test]
fn distinct_constraint_one_multi_allocatable_device_with_distinct_constraint() {
    let got = run_case(
        vec![
            class_a(),
            slice1(&[device("device-1")
                .ama()
                .r("2")
                .attr("stringAttribute", "string", json!("v"))]),
        ],
        &[claim(
            "claim-0",
            &[req("req-0", "class-a").rq("1"), req("req-1", "class-a").rq("1")],
        )
        .constraint(json!({"distinctAttribute": "driver-a/stringAttribute"}))],
    );
    unfit(got, "one device cannot serve two requests with distinct values");
}

#[test]
fn distinct_constraint_two_multi_allocatable_devices_with_distinct_constraint() {
    let got = run_case(
        vec![
            class_a(),
            slice(
                "slice-1",
                "pool-1",
                1,
                2,
                &[device("device-1")
                    .ama()
                    .r("4")
                    .attr("stringAttribute", "string", json!("a"))],
            ),
            slice(
                "slice-2",
                "pool-1",
                1,
                2,
                &[device("device-2")
                    .ama()
                    .r("4")
                    .attr("stringAttribute", "string", json!("b"))],
            ),
        ],
        &[claim(
            "claim-0",
            &[req("req-0", "class-a").rq("2"), req("req-1", "class-a").rq("2")],
        )
        .constraint(json!({"distinctAttribute": "driver-a/stringAttribute"}))],
    );
    assert_eq!(
        got.unwrap(),
        vec![vec![
            g("req-0", "device-1", true, c0("2")),
            g("req-1", "device-2", true, c0("2"))
        ]]
    );
}

fn attrs_device(name: &str) -> Dev {
    device(name)
        .attr("numa", "int", json!(1))
        .attr("driverVersion", "version", json!("1.0.0"))
        .attr("stringAttribute", "string", json!("stringAttributeValue"))
        .attr("boolAttribute", "bool", json!(true))
}

#[test]
fn with_constraint() {
    let got = run_case(
        vec![
            class_a(),
            slice1(&[attrs_device("device-1"), attrs_device("device-2")]),
        ],
        &[
            claim("claim-0", &[req("req-0", "class-a"), req("req-1", "class-a")])
                .constraint(json!({"matchAttribute": "driver-a/numa"}))
                .constraint(json!({"matchAttribute": "driver-a/driverVersion"}))
                .constraint(json!({"matchAttribute": "driver-a/stringAttribute"}))
                .constraint(json!({"matchAttribute": "driver-a/boolAttribute"})),
        ],
    );
    assert_eq!(
        got.unwrap(),
        vec![vec![
            g("req-0", "device-1", false, None),
            g("req-1", "device-2", false, None)
        ]]
    );
}

#[test]
fn with_constraint_not_matching_int_attribute_all_devices() {
    let got = run_case(
        vec![
            class_a(),
            slice1(&[
                device("device-1").attr("numa", "int", json!(1)),
                device("device-2").attr("numa", "int", json!(2)),
            ]),
        ],
        &[claim("claim-0", &[req("req-0", "class-a").all()])
            .constraint(json!({"matchAttribute": "driver-a/numa"}))],
    );
    error(
        got,
        "cannot add device driver-a/pool-1/device-2 because a claim constraint would not be satisfied",
        "All mode cannot skip a device",
    );
}

#[test]
fn all_devices_of_the_incomplete_pool() {
    let got = run_case(
        vec![class_a(), slice("slice-1", "pool-1", 1, 2, &[device("device-1")])],
        &[claim("claim-0", &[req("req-0", "class-a").all()])],
    );
    error(
        got,
        "asks for all devices, but resource pool driver-a/pool-1 is currently being updated",
        "incomplete pool",
    );
}

#[test]
fn all_devices_some_allocated() {
    let got = run_case(
        vec![
            class_a(),
            slice1(&[device("device-1"), device("device-2")]),
            claim("existing", &[req("req-0", "class-a")])
                .allocated(json!([dedicated("req-0", "device-1")]))
                .json(),
        ],
        &[claim("claim-0", &[req("req-0", "class-a").all()])],
    );
    unfit(got, "All with an allocated device");
}

// ---- Further upstream rules, one test each ----

#[test]
fn node_selector_is_local_for_node_local_devices() {
    let mut all = vec![node(NODE), class_a(), slice1(&[device("device-1")])];
    all.push(claim("claim-0", &[req("req-0", "class-a")]).json());
    all.push(pod("pod-0", &["claim-0"], "2026-01-01T00:00:00Z"));
    let mut p = plugin("", &all);
    assert!(p.prefilter("default/pod-0").is_success());
    assert!(p.filter(NODE).is_success());
    let a = p.reserve(NODE).unwrap();
    let sel = a[0].allocation.node_selector.as_ref().expect("node selector");
    let f = &sel.node_selector_terms[0].match_fields[0];
    assert_eq!(
        (f.key.as_str(), f.operator.as_str(), f.values.clone()),
        ("metadata.name", "In", vec![NODE.to_string()])
    );
}

#[test]
fn taints_block_unless_tolerated() {
    let objects = vec![
        class_a(),
        slice1(&[device("device-1").taint("broken", "NoSchedule")]),
    ];
    unfit(
        run_case(objects.clone(), &[claim("claim-0", &[req("req-0", "class-a")])]),
        "NoSchedule taint",
    );
    let got = run_case(
        objects,
        &[claim("claim-0", &[req("req-0", "class-a").tolerate("broken")])],
    );
    assert_eq!(got.unwrap(), vec![vec![g("req-0", "device-1", false, None)]]);
    let got = run_case(
        vec![class_a(), slice1(&[device("device-1").taint("info", "None")])],
        &[claim("claim-0", &[req("req-0", "class-a")])],
    );
    assert!(got.is_ok(), "effect None never blocks");
}

#[test]
fn admin_access_may_use_allocated_device() {
    let got = run_case(
        vec![
            class_a(),
            slice1(&[device("device-1")]),
            claim("existing", &[req("req-0", "class-a")])
                .allocated(json!([dedicated("req-0", "device-1")]))
                .json(),
        ],
        &[claim("claim-0", &[req("req-0", "class-a").admin()])],
    );
    assert_eq!(got.unwrap(), vec![vec![g("req-0", "device-1", false, None)]]);
}

#[test]
fn exact_count_takes_combinations_in_order() {
    let got = run_case(
        vec![
            class_a(),
            slice1(&[device("device-1"), device("device-2"), device("device-3")]),
        ],
        &[claim("claim-0", &[req("req-0", "class-a").count(2)])],
    );
    assert_eq!(
        got.unwrap(),
        vec![vec![
            g("req-0", "device-1", false, None),
            g("req-0", "device-2", false, None)
        ]]
    );
}

#[test]
fn missing_class_is_unresolvable() {
    let got = run_case(
        vec![slice1(&[device("device-1")])],
        &[claim("claim-0", &[req("req-0", "no-such-class")])],
    );
    assert_status(
        got,
        Code::UnschedulableAndUnresolvable,
        "device class no-such-class not found",
        "missing class",
    );
}

#[test]
fn selector_that_does_not_compile_is_an_error_naming_the_class() {
    let got = run_case(
        vec![class("bad", "device.driver ==="), slice1(&[device("device-1")])],
        &[claim("claim-0", &[req("req-0", "bad")])],
    );
    error(got, "class bad", "CEL compile error names the class");
}

#[test]
fn selector_runtime_error_names_the_claim() {
    let got = run_case(
        vec![class_a(), slice1(&[device("device-1")])],
        &[claim(
            "claim-0",
            &[req("req-0", "class-a").selector("device.attributes[\"driver-a\"].missing == 1")],
        )],
    );
    error(got, "claim default/claim-0", "runtime error names the claim");
}

#[test]
fn duplicate_device_names_make_the_pool_invalid() {
    let got = run_case(
        vec![
            class_a(),
            slice("slice-1", "pool-1", 1, 2, &[device("device-1")]),
            slice("slice-2", "pool-1", 1, 2, &[device("device-1")]),
        ],
        &[claim("claim-0", &[req("req-0", "class-a")])],
    );
    assert_status(
        got,
        Code::Unschedulable,
        "duplicate device name device-1",
        "invalid pool",
    );
}

#[test]
fn highest_generation_is_used() {
    let got = run_case(
        vec![
            class_a(),
            slice("slice-old", "pool-1", 1, 1, &[device("old")]),
            slice("slice-new", "pool-1", 2, 1, &[device("new")]),
        ],
        &[claim("claim-0", &[req("req-0", "class-a")])],
    );
    assert_eq!(got.unwrap(), vec![vec![g("req-0", "new", false, None)]]);
}

#[test]
fn more_than_32_devices_per_claim_is_an_error() {
    let got = run_case(
        vec![class_a(), slice1(&[device("device-1")])],
        &[claim("claim-0", &[req("req-0", "class-a").count(33)])],
    );
    error(got, "exceeds the claim limit of 32", "AllocationResultsMaxSize");
}

#[test]
fn huge_counts_are_over_the_claim_limit_on_every_target() {
    // The claim's device count is summed in u64, saturating, from the counts as written: the
    // sum of three i64::MAX counts neither wraps nor depends on the target's usize (wasm32).
    let got = run_case(
        vec![class_a(), slice1(&[device("device-1")])],
        &[claim(
            "claim-0",
            &[
                req("req-0", "class-a").count(i64::MAX),
                req("req-1", "class-a").count(i64::MAX),
                req("req-2", "class-a").count(i64::MAX),
            ],
        )],
    );
    error(
        got,
        "number of requested devices 18446744073709551615 exceeds the claim limit of 32",
        "sum of three i64::MAX counts saturates",
    );
    // A firstAvailable subrequest with a huge count is skipped for the next one, not wrapped.
    let got = run_case(
        vec![class_a(), slice1(&[device("device-1")])],
        &[claim(
            "claim-0",
            &[req_first(
                "req-0",
                &[
                    sub("huge", "class-a", json!({"count": i64::MAX})),
                    sub("one", "class-a", json!({})),
                ],
            )],
        )],
    );
    assert_eq!(
        got.unwrap(),
        vec![vec![g("req-0/one", "device-1", false, None)]],
        "the huge subrequest exceeds the limit; the next one is allocated"
    );
}

/// With `perDeviceNodeSelection`, each device says where it is available: a device with a
/// selector of two terms fails Filter as a slice's does, unless a node-local device of the same
/// claim comes first (the claim is then pinned to the node and no selector is merged).
#[test]
fn a_multi_term_device_node_selector_fails_filter_after_no_node_local_device() {
    let two_terms = json!({"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "region", "operator": "In", "values": ["region-1"]}]},
        {"matchExpressions": [{"key": "region", "operator": "In", "values": ["region-2"]}]}
    ]});
    let run = |local_first: bool| {
        let mut wide = device("wide");
        wide.0["nodeSelector"] = two_terms.clone();
        let mut local = device("local");
        local.0["nodeName"] = json!(NODE);
        let devices = if local_first { [local, wide] } else { [wide, local] };
        let mut s = slice1(&devices);
        let spec = s["spec"].as_object_mut().unwrap();
        spec.remove("nodeName");
        spec.insert("perDeviceNodeSelection".into(), json!(true));
        let claim = claim("claim-0", &[req("req-0", "class-a").count(2)]).json();
        let mut p = plugin(
            "",
            &[
                node(NODE),
                class_a(),
                s,
                claim,
                pod("pod-0", &["claim-0"], "2026-01-01T00:00:00Z"),
            ],
        );
        assert!(p.prefilter(&format!("{NS}/pod-0")).is_success());
        p.filter(NODE)
    };
    let status = run(false);
    assert_eq!(status.code, Code::Error, "{status}");
    assert!(
        status
            .reason
            .contains("unsupported ResourceSlice.NodeSelector with 2 terms"),
        "{status}"
    );
    let status = run(true);
    assert!(
        status.is_success(),
        "a node-local device first pins the claim: {status}"
    );
}

#[test]
fn a_multi_term_slice_node_selector_fails_filter() {
    // Upstream's createNodeSelector supports one term per slice selector. Filter must report it
    // (Filter keeps its results compact and builds the selector only at Reserve, so this checks
    // that the check still runs at Filter).
    let mut s = slice1(&[device("device-1")]);
    let spec = s["spec"].as_object_mut().unwrap();
    spec.remove("nodeName");
    spec.insert(
        "nodeSelector".into(),
        json!({"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "region", "operator": "In", "values": ["region-1"]}]},
            {"matchExpressions": [{"key": "region", "operator": "In", "values": ["region-2"]}]}
        ]}),
    );
    let claim = claim("claim-0", &[req("req-0", "class-a")]).json();
    let mut p = plugin(
        "",
        &[
            node(NODE),
            class_a(),
            s,
            claim,
            pod("pod-0", &["claim-0"], "2026-01-01T00:00:00Z"),
        ],
    );
    assert!(p.prefilter(&format!("{NS}/pod-0")).is_success());
    let status = p.filter(NODE);
    assert_eq!(status.code, Code::Error, "{status}");
    assert!(
        status
            .reason
            .contains("unsupported ResourceSlice.NodeSelector with 2 terms"),
        "{status}"
    );
}

#[test]
fn invalid_zero_step_does_not_crash_the_allocator() {
    let policy = json!({"default": "1", "validRange": {"min": "1", "step": "0"}});
    let got = run_case(
        vec![
            class_a(),
            slice1(&[device("device-1").ama().cap_policy(C0, "4", policy)]),
        ],
        &[claim("claim-0", &[req("req-0", "class-a").rq("3")])],
    );
    assert_eq!(
        got.unwrap(),
        vec![vec![g("req-0", "device-1", true, c0("3"))]],
        "request taken unrounded"
    );
}

#[test]
fn binds_to_node_pins_a_network_attached_device_to_the_chosen_node() {
    // KEP-5007: a device reachable from every node (`allNodes`) that `bindsToNode` gives the
    // allocation a node selector naming the node it was made for, so a second pod sharing the
    // claim can only go there; without `bindsToNode` the allocation is valid everywhere.
    let run = |binds: bool| {
        let mut d = device("device-1");
        if binds {
            d.0["bindsToNode"] = json!(true);
        }
        let mut s = slice1(&[d]);
        let spec = s["spec"].as_object_mut().unwrap();
        spec.remove("nodeName");
        spec.insert("allNodes".into(), json!(true));
        let mut p = plugin(
            "",
            &[
                node(NODE),
                node("node-2"),
                class_a(),
                s,
                claim("claim-0", &[req("req-0", "class-a")]).json(),
                pod("pod-0", &["claim-0"], "2026-01-01T00:00:00Z"),
            ],
        );
        assert!(p.prefilter(&format!("{NS}/pod-0")).is_success());
        assert!(p.filter("node-2").is_success());
        p.reserve("node-2").unwrap()[0].allocation.node_selector.clone()
    };
    assert_eq!(run(false), None, "available everywhere");
    let sel = run(true).expect("bindsToNode gives a node selector");
    let f = &sel.node_selector_terms[0].match_fields[0];
    assert_eq!(
        (f.key.as_str(), f.operator.as_str(), f.values.clone()),
        ("metadata.name", "In", vec!["node-2".to_string()])
    );
}

#[test]
fn a_claim_whose_binding_failed_is_unavailable_on_every_node() {
    // KEP-5007: an allocated device's binding failure condition reported True by the driver in
    // the claim's status.devices makes the claim unusable on every node (upstream's Filter);
    // False, another condition, or another device's report does not.
    let run = |status: &str, reported: &str| {
        let mut result = dedicated("req-0", "device-1");
        result["bindingConditions"] = json!(["example.com/Attached"]);
        result["bindingFailureConditions"] = json!(["example.com/AttachFailed"]);
        let mut c = claim("claim-0", &[req("req-0", "class-a")]).allocated(json!([result]));
        c.0["status"]["devices"] = json!([{"driver": DRIVER, "pool": "pool-1", "device": reported,
            "conditions": [{"type": "example.com/AttachFailed", "status": status, "reason": "Timeout",
                            "message": "fabric did not answer", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]);
        let mut p = device_1_and_pod_0_with(&c);
        let pre = p.prefilter(&format!("{NS}/pod-0"));
        (pre.clone(), p.filter(NODE))
    };
    let (pre, filter) = run("True", "device-1");
    assert!(pre.is_success(), "upstream's PreFilter goes on: {pre}");
    assert_eq!(filter.code, Code::UnschedulableAndUnresolvable, "{filter}");
    assert!(
        filter.reason.contains("default/claim-0")
            && filter.reason.contains("example.com/AttachFailed is True")
            && filter.reason.contains("fabric did not answer"),
        "{filter}"
    );
    for (status, reported) in [("False", "device-1"), ("True", "device-2")] {
        let (pre, filter) = run(status, reported);
        assert!(
            pre.is_success() && filter.is_success(),
            "{status} {reported}: {pre} / {filter}"
        );
    }
}

#[test]
fn a_claim_reserved_for_256_consumers_takes_no_other_pod() {
    // Upstream's PreFilter: `status.reservedFor` holds at most 256 consumers; a pod that is not
    // among them waits ("in use"), a pod that is among them goes on.
    let run = |consumers: usize, includes_pod: bool| {
        let mut c =
            claim("claim-0", &[req("req-0", "class-a")]).allocated(json!([dedicated("req-0", "device-1")]));
        let mut reserved: Vec<Value> = (0..consumers)
            .map(|i| json!({"resource": "pods", "name": format!("other-{i}"), "uid": format!("uid-other-{i}")}))
            .collect();
        if includes_pod {
            reserved[0] = json!({"resource": "pods", "name": "pod-0", "uid": "uid-pod-0"});
        }
        c.0["status"]["reservedFor"] = json!(reserved);
        let mut p = device_1_and_pod_0_with(&c);
        p.prefilter(&format!("{NS}/pod-0"))
    };
    let full = run(256, false);
    assert_eq!(full.code, Code::Unschedulable, "{full}");
    assert!(full.reason.contains("default/claim-0 is in use"), "{full}");
    assert!(run(255, false).is_success(), "one place left");
    assert!(run(256, true).is_success(), "the pod is a consumer already");
}

/// node-1 with device-1, and pod-0 using `claim` (named claim-0).
fn device_1_and_pod_0_with(claim: &Claim) -> sharing_affinity_core::Plugin {
    plugin(
        "",
        &[
            node(NODE),
            class_a(),
            slice1(&[device("device-1")]),
            claim.json(),
            pod("pod-0", &["claim-0"], "2026-01-01T00:00:00Z"),
        ],
    )
}

/// node-1 and node-2 with device-1 each (pools pool-1 and pool-2), and pod-0 using `claim`
/// (named claim-0); the pod's cycle Filters both nodes and returns PostFilter's answer.
fn postfilter_after_two_nodes(claim: &Claim) -> sharing_affinity_core::PostFilter {
    postfilter_and_plugin(claim).1
}

fn postfilter_and_plugin(
    claim: &Claim,
) -> (sharing_affinity_core::Plugin, sharing_affinity_core::PostFilter) {
    let mut s2 = slice("slice-2", "pool-2", 1, 1, &[device("device-1")]);
    s2["spec"]["nodeName"] = json!("node-2");
    let mut p = plugin(
        "",
        &[
            node(NODE),
            node("node-2"),
            class_a(),
            slice1(&[device("device-1")]),
            s2,
            claim.json(),
            pod("pod-0", &["claim-0"], "2026-01-01T00:00:00Z"),
        ],
    );
    let pod = format!("{NS}/pod-0");
    assert!(p.prefilter(&pod).is_success());
    for n in [NODE, "node-2"] {
        let f = p.filter(n);
        if n == "node-2" || !f.is_success() {
            assert_eq!(f.code, Code::UnschedulableAndUnresolvable, "{n}: {f}");
        }
    }
    let answer = p.postfilter(&pod);
    (p, answer)
}

#[test]
fn postfilter_deallocates_a_claim_unavailable_on_a_node_that_no_other_pod_uses() {
    // Upstream's PostFilter: an allocated claim that was unavailable on at least one node and
    // whose `reservedFor` is empty or holds only this pod is deallocated, one per attempt; a
    // claim another pod uses is left alone.
    let on_node_1 =
        || claim("claim-0", &[req("req-0", "class-a")]).allocated(json!([dedicated("req-0", "device-1")]));
    let mut c = on_node_1();
    c.0["metadata"]["resourceVersion"] = json!("41");
    let got = postfilter_after_two_nodes(&c);
    assert_eq!(got.status.code, Code::Unschedulable);
    assert_eq!(got.status.reason, "deallocation of ResourceClaim completed");
    assert_eq!(
        got.deallocate,
        Some(("default/claim-0".to_string(), "41".to_string()))
    );

    let mut c = on_node_1();
    c.0["status"]["reservedFor"] = json!([{"resource": "pods", "name": "pod-0", "uid": "uid-pod-0"}]);
    assert!(
        postfilter_after_two_nodes(&c).deallocate.is_some(),
        "reserved only for this pod"
    );

    let mut c = on_node_1();
    c.0["status"]["reservedFor"] = json!([{"resource": "pods", "name": "other", "uid": "uid-other"}]);
    let got = postfilter_after_two_nodes(&c);
    assert_eq!(
        (got.status.reason.as_str(), got.deallocate),
        ("still not schedulable", None)
    );
}

#[test]
fn postfilter_deallocates_a_claim_allocated_to_a_node_that_is_gone() {
    // The claim's node selector names a node that no longer exists: it is unavailable on every
    // node there is, and PostFilter deallocates it so that the next attempt allocates anew.
    let mut c =
        claim("claim-0", &[req("req-0", "class-a")]).allocated(json!([dedicated("req-0", "device-1")]));
    c.0["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] =
        json!(["node-gone"]);
    let (mut p, got) = postfilter_and_plugin(&c);
    assert_eq!(got.deallocate.map(|(k, _)| k).as_deref(), Some("default/claim-0"));
    // The plugin's own state has the claim deallocated: the next attempt allocates it anew.
    let stored = p.claim("default/claim-0").unwrap();
    assert!(stored.status.allocation.is_none() && stored.status.reserved_for.is_empty());
    assert_eq!(
        schedule(&mut p, "pod-0"),
        vec![vec![g("req-0", "device-1", false, None)]]
    );
}

#[test]
fn postfilter_deallocates_a_claim_whose_binding_failed() {
    let mut result = dedicated("req-0", "device-1");
    result["bindingConditions"] = json!(["example.com/Attached"]);
    result["bindingFailureConditions"] = json!(["example.com/AttachFailed"]);
    let mut c = claim("claim-0", &[req("req-0", "class-a")]).allocated(json!([result]));
    c.0["status"]["allocation"]
        .as_object_mut()
        .unwrap()
        .remove("nodeSelector");
    c.0["status"]["devices"] = json!([{"driver": DRIVER, "pool": "pool-1", "device": "device-1",
        "conditions": [{"type": "example.com/AttachFailed", "status": "True", "reason": "Timeout",
                        "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]);
    let got = postfilter_after_two_nodes(&c);
    assert_eq!(got.deallocate.map(|(k, _)| k).as_deref(), Some("default/claim-0"));
}

#[test]
fn postfilter_has_nothing_to_deallocate_for_pending_claims_or_a_failed_prefilter() {
    // An unallocated claim that fits nowhere is not deallocated (nothing is allocated).
    let mut p = plugin(
        "",
        &[
            node(NODE),
            class_a(),
            claim("claim-0", &[req("req-0", "class-a")]).json(),
            pod("pod-0", &["claim-0"], "2026-01-01T00:00:00Z"),
            pod("pod-1", &["missing"], "2026-01-01T00:00:00Z"),
        ],
    );
    let pod = format!("{NS}/pod-0");
    assert!(p.prefilter(&pod).is_success());
    assert!(!p.filter(NODE).is_success());
    let got = p.postfilter(&pod);
    assert_eq!(
        (got.status.reason.as_str(), got.deallocate),
        ("still not schedulable", None)
    );
    // PreFilter failed: the cycle holds no claims, as upstream's state after such a PreFilter.
    let pod = format!("{NS}/pod-1");
    assert!(!p.prefilter(&pod).is_success());
    let got = p.postfilter(&pod);
    assert_eq!(got.status.code, Code::Unschedulable);
    assert_eq!(
        (got.status.reason.as_str(), got.deallocate),
        ("no new claims to deallocate", None)
    );
    // PostFilter for another pod than the cycle's is an error.
    assert_eq!(p.postfilter(&format!("{NS}/pod-0")).status.code, Code::Error);
}

/// claim-0 allocated (at `stamp`, if any) with device-1, whose binding condition
/// `example.com/Attached` the driver reported as `attached`.
fn waiting_for_binding(stamp: Option<&str>, attached: &str) -> Claim {
    let mut result = dedicated("req-0", "device-1");
    result["bindingConditions"] = json!(["example.com/Attached"]);
    result["bindingFailureConditions"] = json!(["example.com/AttachFailed"]);
    let mut c = claim("claim-0", &[req("req-0", "class-a")]).allocated(json!([result]));
    if let Some(stamp) = stamp {
        c.0["status"]["allocation"]["allocationTimestamp"] = json!(stamp);
    }
    c.0["status"]["devices"] = json!([{"driver": DRIVER, "pool": "pool-1", "device": "device-1",
        "conditions": [{"type": "example.com/Attached", "status": attached, "reason": "Waiting",
                        "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]);
    c
}

#[test]
fn a_claim_whose_binding_timed_out_is_unavailable_and_postfilter_deallocates_it() {
    // KEP-5007: an allocation whose device's binding conditions are not all True
    // `bindingTimeoutSeconds` (600 by default) after its `allocationTimestamp` is unavailable on
    // every node, and PostFilter deallocates it. Within the timeout, with the conditions True,
    // without a timestamp, or before the host set a time, it is usable.
    let at = "2026-01-01T00:00:00Z";
    let (t0, _) = sharing_affinity_core::time::parse_rfc3339(at).unwrap();
    let run = |c: &Claim, config: &str, now: Option<i64>| {
        let mut p = plugin(
            config,
            &[
                node(NODE),
                class_a(),
                slice1(&[device("device-1")]),
                c.json(),
                pod("pod-0", &["claim-0"], "2026-01-01T00:00:00Z"),
            ],
        );
        if let Some(now) = now {
            p.set_time(now);
        }
        let pod = format!("{NS}/pod-0");
        assert!(p.prefilter(&pod).is_success());
        let filter = p.filter(NODE);
        (filter, p.postfilter(&pod).deallocate.map(|(claim, _)| claim))
    };
    let (filter, deallocated) = run(&waiting_for_binding(Some(at), "False"), "", Some(t0 + 601));
    assert_eq!(filter.code, Code::UnschedulableAndUnresolvable, "{filter}");
    assert!(
        filter.reason.contains("default/claim-0")
            && filter
                .reason
                .contains("example.com/Attached is not True 600s after the allocation"),
        "{filter}"
    );
    assert_eq!(deallocated.as_deref(), Some("default/claim-0"));
    for (c, config, now, why) in [
        (
            waiting_for_binding(Some(at), "False"),
            "",
            Some(t0 + 600),
            "at the timeout",
        ),
        (
            waiting_for_binding(Some(at), "True"),
            "",
            Some(t0 + 6000),
            "conditions met",
        ),
        (
            waiting_for_binding(None, "False"),
            "",
            Some(t0 + 6000),
            "no timestamp",
        ),
        (waiting_for_binding(Some(at), "False"), "", None, "no time set"),
        (
            waiting_for_binding(Some(at), "False"),
            r#"{"bindingTimeoutSeconds": 7200}"#,
            Some(t0 + 6000),
            "a longer timeout",
        ),
    ] {
        let (filter, deallocated) = run(&c, config, now);
        assert!(filter.is_success(), "{why}: {filter}");
        assert_eq!(deallocated, None, "{why}");
    }
    match sharing_affinity_core::Plugin::new(r#"{"bindingTimeoutSeconds": 0}"#) {
        Err(e) => assert!(e.to_string().contains("bindingTimeoutSeconds"), "{e}"),
        Ok(_) => panic!("a zero binding timeout is refused"),
    }
}

#[test]
fn bind_stamps_allocations_that_wait_for_binding_conditions() {
    // Upstream's PreBind records `allocationTimestamp` for the binding timeout; an allocation of
    // devices without binding conditions is not stamped, nor any before the host set a time.
    let run = |conditions: bool, now: Option<i64>| {
        let mut d = device("device-1");
        if conditions {
            d = d.binding_conditions(&["example.com/Attached"]);
        }
        let mut p = plugin(
            "",
            &[
                node(NODE),
                class_a(),
                slice1(&[d]),
                claim("claim-0", &[req("req-0", "class-a")]).json(),
                pod("pod-0", &["claim-0"], "2026-01-01T00:00:00Z"),
            ],
        );
        if let Some(now) = now {
            p.set_time(now);
        }
        schedule(&mut p, "pod-0");
        let stored = p.claim("default/claim-0").unwrap();
        stored
            .status
            .allocation
            .as_ref()
            .unwrap()
            .allocation_timestamp
            .clone()
    };
    assert_eq!(
        run(true, Some(1_767_225_600)).as_deref(),
        Some("2026-01-01T00:00:00Z")
    );
    assert_eq!(run(false, Some(1_767_225_600)), None);
    assert_eq!(run(true, None), None);
}

/// pod-0 scheduled and bound (without the wait) on node-1 with claim-0 on device-1, whose binding
/// condition is `example.com/Attached` and failure condition `example.com/AttachFailed`; the
/// plugin's clock is `now`.
fn bound_waiting_for_binding(config: &str, now: i64) -> sharing_affinity_core::Plugin {
    let mut p = waiting_for_binding_conditions(config);
    p.set_time(now);
    schedule(&mut p, "pod-0");
    p
}

/// pod-0 and claim-0 on node-1, whose device-1 has the binding condition `example.com/Attached`
/// and the failure condition `example.com/AttachFailed`; nothing scheduled yet.
fn waiting_for_binding_conditions(config: &str) -> sharing_affinity_core::Plugin {
    let mut d = device("device-1").binding_conditions(&["example.com/Attached"]);
    d.0["bindingFailureConditions"] = json!(["example.com/AttachFailed"]);
    plugin(
        config,
        &[
            node(NODE),
            class_a(),
            slice1(&[d]),
            claim("claim-0", &[req("req-0", "class-a")]).json(),
            pod("pod-0", &["claim-0"], "2026-01-01T00:00:00Z"),
        ],
    )
}

/// What the driver reports for device-1 of claim-0: the stored claim with this condition.
fn report(p: &mut sharing_affinity_core::Plugin, condition: &str, status: &str) {
    let mut c = serde_json::to_value(p.claim("default/claim-0").unwrap()).unwrap();
    c["apiVersion"] = json!("resource.k8s.io/v1");
    c["kind"] = json!("ResourceClaim");
    c["status"]["devices"] = json!([{"driver": DRIVER, "pool": "pool-1", "device": "device-1",
        "conditions": [{"type": condition, "status": status, "reason": "Driver",
                        "message": "port 7", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]);
    p.apply(sharing_affinity_core::EventKind::Update, &c.to_string())
        .unwrap();
}

#[test]
fn prebind_waits_for_binding_conditions_until_they_hold() {
    // Upstream's PreBind: checks at once, then every 5 s, until every binding condition of the
    // allocated devices is True.
    use sharing_affinity_core::BindingPoll;
    let t0 = 1_767_225_600;
    let mut p = bound_waiting_for_binding("", t0);
    let pod_key = format!("{NS}/pod-0");
    assert_eq!(p.binding_poll(&pod_key, 0), BindingPoll::Wait(5));
    report(&mut p, "example.com/Attached", "False");
    p.set_time(t0 + 5);
    assert_eq!(p.binding_poll(&pod_key, 1), BindingPoll::Wait(5));
    report(&mut p, "example.com/Attached", "True");
    p.set_time(t0 + 10);
    assert_eq!(p.binding_poll(&pod_key, 2), BindingPoll::Ready);

    // Devices without binding conditions: ready at once.
    let mut p = plugin(
        "",
        &[
            node(NODE),
            class_a(),
            slice1(&[device("device-1")]),
            claim("claim-0", &[req("req-0", "class-a")]).json(),
            pod("pod-0", &["claim-0"], "2026-01-01T00:00:00Z"),
        ],
    );
    schedule(&mut p, "pod-0");
    assert_eq!(p.binding_poll(&pod_key, 0), BindingPoll::Ready);
}

#[test]
fn prebind_fails_on_a_binding_failure_a_claim_timeout_or_the_wait_timeout() {
    use sharing_affinity_core::BindingPoll;
    let t0 = 1_767_225_600;
    let pod_key = format!("{NS}/pod-0");
    let failed = |poll: BindingPoll| match poll {
        BindingPoll::Failed(s) => {
            assert_eq!(s.code, Code::Error, "{s}");
            s.reason
        }
        other => panic!("expected a failure, got {other:?}"),
    };
    // A failure condition True: upstream's message, with the condition's reason and message.
    let mut p = bound_waiting_for_binding("", t0);
    report(&mut p, "example.com/AttachFailed", "True");
    assert_eq!(
        failed(p.binding_poll(&pod_key, 1)),
        r#"claim claim-0 binding failed: reason=Driver, message="port 7""#
    );
    // The claim's own timeout: Bind stamped it at t0; 601 s later it is over.
    let mut p = bound_waiting_for_binding("", t0);
    p.set_time(t0 + 600);
    assert_eq!(p.binding_poll(&pod_key, 1), BindingPoll::Wait(5));
    p.set_time(t0 + 601);
    assert_eq!(
        failed(p.binding_poll(&pod_key, 1)),
        "claim claim-0 binding timeout"
    );
    // The wait's own timeout counts checks, whatever the clock says: checks at 0, 5, ..., 600 s,
    // the last one fails.
    let p = bound_waiting_for_binding("", t0);
    assert_eq!(p.binding_poll(&pod_key, 119), BindingPoll::Wait(5));
    assert_eq!(failed(p.binding_poll(&pod_key, 120)), "device binding timeout");
    let p = bound_waiting_for_binding(r#"{"bindingTimeoutSeconds": 10}"#, t0);
    assert_eq!(p.binding_poll(&pod_key, 1), BindingPoll::Wait(5));
    assert_eq!(failed(p.binding_poll(&pod_key, 2)), "device binding timeout");
    // A bound pod that is gone.
    let mut p = bound_waiting_for_binding("", t0);
    p.apply(
        sharing_affinity_core::EventKind::Delete,
        &pod_json_for_delete("pod-0"),
    )
    .unwrap();
    assert!(failed(p.binding_poll(&pod_key, 1)).contains("deleted while waiting"));
    match sharing_affinity_core::Plugin::new(r#"{"bindingTimeoutSeconds": 86401}"#) {
        Err(e) => assert!(e.to_string().contains("1 to 86400"), "{e}"),
        Ok(_) => panic!("a binding timeout over a day is refused"),
    }
}

fn pod_json_for_delete(name: &str) -> String {
    json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":name,"namespace":NS,"uid":format!("uid-{name}")}})
        .to_string()
}

#[test]
fn a_failed_wait_unbinds_the_pod_and_keeps_the_allocation() {
    // The framework's Unreserve after a failed PreBind: the pod leaves the claim's reservedFor,
    // the allocation stays (the next cycle's PostFilter deallocates it once timed out).
    use sharing_affinity_core::contract::Scheduler;
    let t0 = 1_767_225_600;
    let pod_key = format!("{NS}/pod-0");
    let mut p = bound_waiting_for_binding("", t0);
    assert_eq!(p.pod(&pod_key).unwrap().spec.node_name, NODE);
    assert_eq!(p.claim("default/claim-0").unwrap().status.reserved_for.len(), 1);
    assert_eq!(p.unbind(&pod_key), ["default/claim-0"]);
    let c = p.claim("default/claim-0").unwrap();
    assert!(c.status.reserved_for.is_empty());
    assert!(c.status.allocation.is_some());
    assert_eq!(p.pod(&pod_key).unwrap().spec.node_name, "");
    assert!(p.unbind(&pod_key).is_empty(), "nothing left to take back");

    // The native engine's Bind runs the whole wait: nothing sets the condition, so after 600 s
    // of its clock PreBind fails and the pod is unbound.
    let mut p = waiting_for_binding_conditions("");
    Scheduler::set_time(&mut p, t0);
    run(&mut p, "pod-0").unwrap();
    let err = Scheduler::bind(&mut p, &pod_key, NODE).unwrap_err();
    assert_eq!(err.reason, "device binding timeout");
    assert_eq!(p.now(), Some(t0 + 600));
    let c = p.claim("default/claim-0").unwrap();
    assert!(c.status.reserved_for.is_empty() && c.status.allocation.is_some());
    // The next attempt: Filter finds the binding timed out (the clock is past the timeout once
    // more time passed), and PostFilter deallocates the claim.
    Scheduler::set_time(&mut p, t0 + 601);
    assert!(p.prefilter(&pod_key).is_success());
    assert_eq!(p.filter(NODE).code, Code::UnschedulableAndUnresolvable);
    assert_eq!(
        p.postfilter(&pod_key).deallocate.map(|(c, _)| c).as_deref(),
        Some("default/claim-0")
    );
}

#[test]
fn bind_reserves_claims_allocated_before_the_cycle_for_the_pod() {
    // Upstream's PreBind reserves every claim of the pod that is not reserved for it yet: a claim
    // another pod allocated gets this pod in `status.reservedFor` too, and Bind returns it with
    // its allocation unchanged for the host to write the consumer. A claim already reserved for
    // the pod is not written again.
    let allocated =
        claim("claim-0", &[req("req-0", "class-a")]).allocated(json!([dedicated("req-0", "device-1")]));
    let mut c = allocated.json();
    c["status"]["reservedFor"] = json!([{"resource": "pods", "name": "other", "uid": "uid-other"}]);
    let mut p = plugin(
        "",
        &[
            node(NODE),
            class_a(),
            slice1(&[device("device-1"), device("device-2")]),
            c,
            claim("claim-1", &[req("req-0", "class-a")]).json(),
            pod("pod-0", &["claim-0", "claim-1"], "2026-01-01T00:00:00Z"),
        ],
    );
    run(&mut p, "pod-0").unwrap();
    let bound = p.bind("default/pod-0", NODE).unwrap();
    let claims: Vec<&str> = bound.iter().map(|a| a.claim.as_str()).collect();
    assert_eq!(
        claims,
        ["default/claim-1", "default/claim-0"],
        "new allocations first"
    );
    assert_eq!(bound[1].allocation.devices.results[0].device, "device-1");
    let reserved_uids = |p: &sharing_affinity_core::Plugin| -> Vec<String> {
        let claim = p.claim("default/claim-0").unwrap();
        claim.status.reserved_for.iter().map(|r| r.uid.clone()).collect()
    };
    assert_eq!(reserved_uids(&p), ["uid-other", "uid-pod-0"]);
    // After a failed PreBind, unbind takes the pod out of both claims again.
    let mut left = p.unbind("default/pod-0");
    left.sort();
    assert_eq!(left, ["default/claim-0", "default/claim-1"]);
    assert_eq!(reserved_uids(&p), ["uid-other"]);
}
