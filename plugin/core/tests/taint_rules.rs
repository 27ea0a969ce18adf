//! DeviceTaintRules (`resource.k8s.io` v1, v1beta2, v1alpha3): their taints act exactly like taints
//! published in the slice (same toleration rules, same effects, same Filter reason).

mod common;

use common::*;
use serde_json::{Value, json};
use sharing_affinity_core::Code;
use sharing_affinity_core::EventKind;

fn rule(version: &str, name: &str, selector: Option<Value>, key: &str, effect: &str) -> Value {
    let mut spec = json!({"taint": {"key": key, "value": "true", "effect": effect,
                                    "timeAdded": "2026-01-01T00:00:00Z"}});
    if let Some(s) = selector {
        spec["deviceSelector"] = s;
    }
    json!({"apiVersion": format!("resource.k8s.io/{version}"), "kind": "DeviceTaintRule",
           "metadata": {"name": name}, "spec": spec})
}

fn base() -> Vec<Value> {
    vec![
        node(NODE),
        class_a(),
        slice1(&[device("device-1").attr("model", "string", json!("a100"))]),
        pod("pod-0", &["claim-0"], "2026-01-01T00:00:00Z"),
    ]
}

/// Runs pod-0 with one claim of one request against `base()` plus `extra` objects.
fn outcome(extra: Vec<Value>, request: Req) -> Result<Vec<Vec<Got>>, sharing_affinity_core::Status> {
    let mut objects = base();
    objects.extend(extra);
    objects.push(claim("claim-0", &[request]).json());
    let mut p = plugin("", &objects);
    run(&mut p, "pod-0")
}

fn blocked(extra: Vec<Value>, msg: &str) {
    let got = outcome(extra, req("req-0", "class-a"));
    // The same status and reason as a NoSchedule taint in the slice.
    let mut p = plugin(
        "",
        &[
            node(NODE),
            class_a(),
            slice1(&[device("device-1").taint("k", "NoSchedule")]),
            pod("pod-0", &["claim-0"], "2026-01-01T00:00:00Z"),
            claim("claim-0", &[req("req-0", "class-a")]).json(),
        ],
    );
    let slice_taint = run(&mut p, "pod-0").expect_err("slice taint blocks");
    assert_eq!(
        got.expect_err(msg),
        slice_taint,
        "{msg}: same status as a slice taint"
    );
}

fn allowed(extra: Vec<Value>, request: Req, msg: &str) {
    let got = outcome(extra, request).unwrap_or_else(|s| panic!("{msg}: {s}"));
    assert_eq!(got, vec![vec![g("req-0", "device-1", false, None)]], "{msg}");
}

#[test]
fn selector_fields_pick_devices_in_every_version() {
    for version in ["v1", "v1beta2", "v1alpha3"] {
        let by_name = json!({"driver": DRIVER, "pool": "pool-1", "device": "device-1"});
        blocked(
            vec![rule(version, "r", Some(by_name), "maint", "NoSchedule")],
            &format!("{version}: driver+pool+device"),
        );
        blocked(
            vec![rule(version, "r", Some(json!({})), "maint", "NoExecute")],
            &format!("{version}: the empty selector matches every device"),
        );
        allowed(
            vec![rule(version, "r", None, "maint", "NoSchedule")],
            req("req-0", "class-a"),
            &format!("{version}: no selector matches no device"),
        );
        for other in [
            json!({"driver": "driver-b"}),
            json!({"pool": "pool-2"}),
            json!({"device": "device-2"}),
            json!({"driver": DRIVER, "device": "device-2"}),
        ] {
            allowed(
                vec![rule(version, "r", Some(other.clone()), "maint", "NoSchedule")],
                req("req-0", "class-a"),
                &format!("{version}: {other} does not match"),
            );
        }
    }
}

#[test]
fn effects_and_tolerations_as_for_slice_taints() {
    let all = Some(json!({}));
    allowed(
        vec![rule("v1", "r", all.clone(), "maint", "None")],
        req("req-0", "class-a"),
        "effect None never blocks",
    );
    allowed(
        vec![rule("v1", "r", all.clone(), "maint", "PreferNoSchedule")],
        req("req-0", "class-a"),
        "an unknown effect is treated as None",
    );
    allowed(
        vec![rule("v1", "r", all.clone(), "maint", "NoSchedule")],
        req("req-0", "class-a").tolerate("maint"),
        "tolerated",
    );
    let two = vec![
        rule("v1", "a", all.clone(), "maint", "NoSchedule"),
        rule("v1beta2", "b", all.clone(), "ecc", "NoExecute"),
    ];
    let got = outcome(two.clone(), req("req-0", "class-a").tolerate("maint"));
    assert_eq!(
        got.expect_err("every rule taint needs a toleration").code,
        Code::Unschedulable
    );
    let mut both = req("req-0", "class-a");
    both.0["exactly"]["tolerations"] = json!([{"key": "maint", "operator": "Exists"},
                                             {"key": "ecc", "operator": "Equal", "value": "true"}]);
    allowed(two, both, "each rule taint tolerated");
    let mut with_slice_taint = base();
    with_slice_taint[2] = slice1(&[device("device-1").taint("slice", "NoSchedule")]);
    with_slice_taint.push(rule("v1", "r", all, "maint", "NoSchedule"));
    with_slice_taint.push(claim("claim-0", &[req("req-0", "class-a").tolerate("maint")]).json());
    let mut p = plugin("", &with_slice_taint);
    assert!(
        run(&mut p, "pod-0").is_err(),
        "a rule adds to the slice's taints, it does not replace them"
    );
}

#[test]
fn alpha_cel_selectors_and_device_class_name() {
    let cel = |expr: &str| json!({"selectors": [{"cel": {"expression": expr}}]});
    blocked(
        vec![rule(
            "v1alpha3",
            "r",
            Some(cel("device.attributes[\"driver-a\"].model == \"a100\"")),
            "maint",
            "NoSchedule",
        )],
        "CEL selector matches",
    );
    allowed(
        vec![rule(
            "v1alpha3",
            "r",
            Some(cel("device.attributes[\"driver-a\"].model == \"h100\"")),
            "maint",
            "NoSchedule",
        )],
        req("req-0", "class-a"),
        "CEL selector does not match",
    );
    blocked(
        vec![rule(
            "v1alpha3",
            "r",
            Some(json!({"deviceClassName": "class-a"})),
            "maint",
            "NoSchedule",
        )],
        "the class's selectors match",
    );
    allowed(
        vec![
            class("class-b", "device.driver == \"driver-b\""),
            rule(
                "v1alpha3",
                "r",
                Some(json!({"deviceClassName": "class-b"})),
                "maint",
                "NoSchedule",
            ),
        ],
        req("req-0", "class-a"),
        "the class's selectors do not match",
    );
    // An unknown class or a failing expression is an error naming the rule, never a guess.
    for (selector, needle) in [
        (
            json!({"deviceClassName": "missing"}),
            "device class missing not found",
        ),
        (
            cel("device.attributes[\"driver-a\"].nope == 1"),
            "CEL runtime error",
        ),
    ] {
        let got = outcome(
            vec![rule(
                "v1alpha3",
                "bad-rule",
                Some(selector),
                "maint",
                "NoSchedule",
            )],
            req("req-0", "class-a"),
        );
        let status = got.expect_err(needle);
        assert!(
            status.reason.contains("DeviceTaintRule bad-rule") && status.reason.contains(needle),
            "{status}"
        );
    }
}

#[test]
fn alpha_fields_in_later_versions_are_errors() {
    for version in ["v1", "v1beta2"] {
        let r = rule(
            version,
            "r",
            Some(json!({"deviceClassName": "class-a"})),
            "maint",
            "NoSchedule",
        );
        let mut p = plugin("", &[]);
        let err = p
            .apply(EventKind::Add, &r.to_string())
            .expect_err("not a field of this version")
            .to_string();
        assert!(
            err.contains("DeviceTaintRule r") && err.contains("v1alpha3"),
            "{err}"
        );
    }
    let mut p = plugin("", &[]);
    let err = p
        .apply(
            EventKind::Add,
            &rule("v1beta1", "r", None, "k", "NoSchedule").to_string(),
        )
        .expect_err("unknown version")
        .to_string();
    assert!(
        err.contains("DeviceTaintRule r") && err.contains("resource.k8s.io/v1beta1"),
        "{err}"
    );
}

#[test]
fn rule_events_update_the_taints() {
    let mut objects = base();
    objects.push(claim("claim-0", &[req("req-0", "class-a")]).json());
    let mut p = plugin("", &objects);
    assert!(run(&mut p, "pod-0").is_ok(), "no rule yet");
    p.unreserve(&format!("{NS}/pod-0"), NODE).unwrap();
    let r = rule("v1", "r", Some(json!({})), "maint", "NoSchedule");
    p.apply(EventKind::Add, &r.to_string()).unwrap();
    assert!(run(&mut p, "pod-0").is_err(), "rule added");
    p.apply(EventKind::Delete, &r.to_string()).unwrap();
    assert!(run(&mut p, "pod-0").is_ok(), "rule deleted");
    p.unreserve(&format!("{NS}/pod-0"), NODE).unwrap();
    // A v1alpha3 rule naming a class is evaluated again when the class changes.
    let by_class = rule(
        "v1alpha3",
        "c",
        Some(json!({"deviceClassName": "class-x"})),
        "maint",
        "NoSchedule",
    );
    p.apply(
        EventKind::Add,
        &class("class-x", "device.driver == \"driver-b\"").to_string(),
    )
    .unwrap();
    p.apply(EventKind::Add, &by_class.to_string()).unwrap();
    assert!(run(&mut p, "pod-0").is_ok(), "class-x does not select device-1");
    p.unreserve(&format!("{NS}/pod-0"), NODE).unwrap();
    p.apply(
        EventKind::Update,
        &class("class-x", "device.driver == \"driver-a\"").to_string(),
    )
    .unwrap();
    assert_eq!(
        run(&mut p, "pod-0")
            .expect_err("class-x now selects device-1")
            .code,
        Code::Unschedulable
    );
}
