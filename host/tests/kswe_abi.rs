//! KSWE ABI conformance of the wasmtime host, driven by the hand-written `.wat` guests in
//! `tests/wat/` (compiled from text here; each file's header says what it checks): status and score
//! packing at the `i32` extremes, traps in every hook, load-time errors with upstream's exact
//! texts, the buf_limit retry, last-call-wins results, klog, events and WASI.

use std::path::Path;

use sharing_affinity_core::model::Pod;
use sharing_affinity_host::kswe::abi::code;
use sharing_affinity_host::kswe::context::LogRecord;
use sharing_affinity_host::kswe::host::RegisteredEvents;
use sharing_affinity_host::kswe::{KsweConfig, KsweHost, PreparedPod, TrapPolicy};

fn wat(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/wat").join(name);
    wat::parse_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn load(name: &str, config: KsweConfig) -> KsweHost {
    KsweHost::new(&wat(name), config).unwrap_or_else(|e| panic!("{name}: {e:#}"))
}

fn load_err(wasm: &[u8], config: KsweConfig) -> String {
    match KsweHost::new(wasm, config) {
        Ok(_) => panic!("expected a load error"),
        Err(e) => e.to_string(),
    }
}

fn pod(name: &str) -> PreparedPod {
    let json = format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","uid":"uid-{name}"}},"spec":{{"nodeName":"good-node"}}}}"#
    );
    PreparedPod::new(&serde_json::from_str::<Pod>(&json).unwrap()).unwrap()
}

#[test]
fn codes_scores_modes_and_timeouts_survive_int32_extremes() {
    let mut host = load("codes_from_globals.wat", KsweConfig::default());
    let p = pod("p");
    for v in [i32::MIN, -1, 0, 1, 4, i32::MAX] {
        for (g, value) in [
            ("status_code_global", v),
            ("score_global", v.wrapping_neg()),
            ("nominating_mode_global", v),
            ("timeout_global", v),
        ] {
            assert!(host.set_global(g, value), "{g}");
        }
        assert_eq!(host.prefilter(&p).unwrap().1.code, v, "prefilter {v}");
        assert_eq!(host.filter(&p, "n").unwrap().code, v, "filter {v}");
        assert_eq!(
            host.add_or_remove_pod(true, &p, &pod("t"), "n").unwrap().code,
            v,
            "addpod {v}"
        );
        assert_eq!(
            host.add_or_remove_pod(false, &p, &pod("t"), "n").unwrap().code,
            v,
            "removepod {v}"
        );
        let (result, status) = host.postfilter(&p, &Default::default()).unwrap();
        assert_eq!(
            (result.unwrap().nominating_mode, status.code),
            (v, v),
            "postfilter {v}"
        );
        assert_eq!(host.prescore(&p, &["n".into()]).unwrap().code, v, "prescore {v}");
        let (score, status) = host.score(&p, "n").unwrap();
        assert_eq!(
            (score, status.code),
            (i64::from(v.wrapping_neg()), v),
            "score {v}"
        );
        let mut scores = vec![("n".to_string(), 7)];
        assert_eq!(
            host.normalize_score(&p, &mut scores).unwrap().code,
            v,
            "normalizescore {v}"
        );
        assert_eq!(
            scores,
            [("n".to_string(), 7)],
            "no list returned: the input is kept"
        );
        assert_eq!(host.reserve(&p, "n").unwrap().0.code, v, "reserve {v}");
        let (status, timeout) = host.permit(&p, "n").unwrap();
        assert_eq!(
            (status.code, timeout),
            (v, v as u32),
            "permit packs (code, timeout) {v}"
        );
        assert_eq!(host.prebind(&p, "n").unwrap().0.code, v, "prebind {v}");
        assert_eq!(host.bind(&p, "n").unwrap().code, v, "bind {v}");
        assert_eq!(host.postbind(&p, "n").unwrap(), None, "postbind {v}");
    }
    assert_eq!(host.instances_created(), 1, "one instance served everything");
    assert!(
        host.cluster().waiting.contains_key("uid-p"),
        "Permit Wait (4) made the pod a waiting pod"
    );
}

#[test]
fn unreserve_and_postbind_traps_are_only_logged() {
    let mut host = load("codes_from_globals.wat", KsweConfig::default());
    let p = pod("p");
    host.set_global("flag_global", 1);
    let logged = host.unreserve(&p, "n").unwrap().expect("unreserve trapped");
    assert_eq!(
        logged,
        "wasm: unreserve error: wasm error: unreachable\nwasm stack trace:\n\tcodes_from_globals.$11()"
    );
    host.permit(&p, "n").unwrap();
    let logged = host.postbind(&p, "n").unwrap().expect("postbind trapped");
    assert_eq!(
        logged,
        "wasm: postbind error: wasm error: unreachable\nwasm stack trace:\n\tcodes_from_globals.$15()"
    );
    let logs = host.take_logs();
    let messages: Vec<&str> = logs.iter().map(|l| l.message.as_str()).collect();
    assert_eq!(messages, ["failed unreserve", "failed postbind"]);
    assert_eq!(
        logs[0].kvs,
        [
            "err".to_string(),
            "wasm: unreserve error: wasm error: unreachable\nwasm stack trace:\n\tcodes_from_globals.$11()"
                .into()
        ]
    );
}

#[test]
fn a_trap_in_each_hook_becomes_an_error_status_with_upstreams_text() {
    let mut host = load("trap_in_each_hook.wat", KsweConfig::default());
    let p = pod("p");
    let expect = |hook: &str, result: &str| {
        format!(
            "wasm: {hook} error: panic!\nwasm error: unreachable\nwasm stack trace:\n\ttrap_in_each_hook.{hook}(){result}"
        )
    };
    let check = |status: sharing_affinity_host::kswe::KsweStatus, hook: &str, result: &str| {
        assert_eq!(status.code, code::ERROR, "{hook}");
        assert!(status.trapped, "{hook}");
        assert_eq!(status.reason, expect(hook, result), "{hook}");
    };
    check(host.prefilter(&p).unwrap().1, "prefilter", " i32");
    check(host.filter(&p, "n").unwrap(), "filter", " i32");
    let (result, status) = host.postfilter(&p, &Default::default()).unwrap();
    assert!(result.is_none(), "no PostFilterResult after a trap");
    check(status, "postfilter", " i64");
    check(
        host.add_or_remove_pod(true, &p, &pod("t"), "n").unwrap(),
        "addpod",
        " i32",
    );
    check(
        host.add_or_remove_pod(false, &p, &pod("t"), "n").unwrap(),
        "removepod",
        " i32",
    );
    check(host.prescore(&p, &[]).unwrap(), "prescore", " i32");
    let (score, status) = host.score(&p, "n").unwrap();
    assert_eq!(score, 0);
    check(status, "score", " i64");
    check(
        host.normalize_score(&p, &mut []).unwrap(),
        "normalizescore",
        " i32",
    );
    let err = host
        .normalize_score(&p, &mut [("n".into(), 1)])
        .unwrap_err()
        .to_string();
    assert_eq!(
        err, "size mismatch: scores has 1 elements, but updatedScores has 0 elements",
        "Go host panics"
    );
    check(host.reserve(&p, "n").unwrap().0, "reserve", " i32");
    assert_eq!(host.unreserve(&p, "n").unwrap(), Some(expect("unreserve", "")));
    let (status, timeout) = host.permit(&p, "n").unwrap();
    assert_eq!(timeout, 0);
    check(status, "permit", " i64");
    check(host.prebind(&p, "n").unwrap().0, "prebind", " i32");
    check(host.bind(&p, "n").unwrap(), "bind", " i32");
    assert_eq!(host.postbind(&p, "n").unwrap(), Some(expect("postbind", "")));
    let err = host.events_to_register().unwrap_err().to_string();
    assert_eq!(err, expect("enqueue", ""), "a trap in enqueue panics the Go host");
    assert_eq!(host.instances_created(), 1, "upstream reuses trapped instances");
}

#[test]
fn replace_policy_drops_trapped_instances() {
    let config = KsweConfig {
        trap_policy: TrapPolicy::Replace,
        ..KsweConfig::default()
    };
    let mut host = load("trap_in_each_hook.wat", config);
    let p = pod("p");
    for round in 1..=3 {
        assert!(host.filter(&p, "n").unwrap().trapped);
        assert_eq!(
            host.instances_created(),
            round,
            "a fresh instance for every call after a trap"
        );
    }
}

#[test]
fn load_errors_have_upstreams_exact_text() {
    let cases = [
        (
            "trap_in_start.wat",
            "failed to create a guest pool: wasm: instantiate error: panic!\nmodule[1] function[_start] failed: wasm error: unreachable\nwasm stack trace:\n\ttrap_in_start.$2()",
        ),
        ("missing_memory.wat", "wasm: guest doesn't export memory[memory]"),
        (
            "no_plugin_functions.wat",
            "wasm: guest does not export any plugin functions",
        ),
        (
            "unsupported_combination.wat",
            "wasm: filter, score, reserve, permit or bind must be exported",
        ),
        (
            "import_unknown_module.wat",
            "failed to create a guest pool: wasm: instantiate error: module[env] not instantiated",
        ),
        (
            "import_unknown_function.wat",
            "failed to create a guest pool: wasm: instantiate error: \"currentNode\" is not exported in module \"k8s.io/scheduler\"",
        ),
        (
            "import_wrong_signature.wat",
            "failed to create a guest pool: wasm: instantiate error: import func[k8s.io/scheduler.currentPod]: signature mismatch: i32_i32 != i32i32_i32",
        ),
        (
            "getter_in_start.wat",
            "failed to create a guest pool: wasm: instantiate error: module[1] function[_start] failed: interface conversion: interface {} is nil, not *wasm.stack (recovered by wazero)\nwasm stack trace:\n\tk8s.io/scheduler.currentPod(i32,i32) i32\n\tgetter_in_start.start()",
        ),
    ];
    for (file, expected) in cases {
        assert_eq!(load_err(&wat(file), KsweConfig::default()), expected, "{file}");
    }
    let no_dra = KsweConfig {
        dra_extension: false,
        ..KsweConfig::default()
    };
    assert_eq!(
        load_err(&wat("dra_extension.wat"), no_dra),
        "failed to create a guest pool: wasm: instantiate error: module[sharing-affinity.dra/v1] not instantiated",
        "without the extension the module is unknown, as upstream"
    );
    let err = load_err(b"\0asm\x01\0\0\0\x05", KsweConfig::default());
    assert!(err.starts_with("wasm: error compiling guest: "), "{err}");
}

#[test]
fn wrong_export_signatures_name_the_export_and_the_required_signature() {
    // A template, not valid text on its own: NAME and SIG are replaced below.
    let template =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/wat/wrong_signature.wat"))
            .unwrap();
    for (name, sig, should) in [
        ("enqueue", "(result i32)", "() -> ()"),
        ("prefilter", "(result i64)", "() -> (i32)"),
        ("filter", "(param i32) (result i32)", "() -> (i32)"),
        ("postfilter", "(result i32)", "() -> (i64)"),
        ("prescore", "", "() -> (i32)"),
        ("score", "(result i32)", "() -> (i64)"),
        ("normalizescore", "(result i64)", "() -> (i32)"),
        ("reserve", "(result f32)", "() -> (i32)"),
        ("unreserve", "(result i32)", "() -> ()"),
        ("permit", "(result i32)", "() -> (i64)"),
        ("prebind", "(result i32 i32)", "() -> (i32)"),
        ("bind", "(result i64)", "() -> (i32)"),
        ("postbind", "(param i64)", "() -> ()"),
        ("addpod", "(result i64)", "() -> ()"),
        ("removepod", "", "() -> ()"),
    ] {
        let text = template.replace("NAME", name).replace("SIG", sig);
        let wasm = wat::parse_str(&text).unwrap();
        assert_eq!(
            load_err(&wasm, KsweConfig::default()),
            format!("wasm: guest exports the wrong signature for func[{name}]. should be {should}"),
            "{name} {sig}"
        );
    }
}

#[test]
fn prebind_without_bind_is_masked_out_as_upstream() {
    let host = load("prebind_without_bind.wat", KsweConfig::default());
    let mask = host.mask();
    assert!(mask.filter && mask.score && mask.reserve);
    assert!(!mask.bind, "the framework would never call prebind");
}

#[test]
fn buffer_retry_reads_values_longer_than_the_first_buffer() {
    for (config, msg) in [
        ("hello, longer than four", "retry"),
        ("abc", "fits the first buffer"),
        ("", "empty"),
    ] {
        let mut host = load(
            "buffer_retry.wat",
            KsweConfig {
                guest_config: config.into(),
                ..KsweConfig::default()
            },
        );
        let (_, status) = host.prefilter(&pod("p")).unwrap();
        assert_eq!(
            (status.code, status.reason.as_str()),
            (config.len() as i32, config),
            "{msg}"
        );
    }
    let mut host = load("buffer_retry.wat", KsweConfig::default());
    let p = pod("p");
    let status = host.filter(&p, "n").unwrap();
    assert_eq!(status.code as usize, p.bytes.len(), "currentPod length");
    assert!(p.bytes.len() > 4, "longer than the first buffer");
    // The reason is a string: compare with the same lossy UTF-8 conversion the host applies.
    assert_eq!(
        status.reason,
        String::from_utf8_lossy(&p.bytes),
        "the guest read exactly the protobuf bytes"
    );
    let (score, status) = host.score(&p, "a-rather-long-node-name").unwrap();
    assert_eq!(
        (score, status.code, status.reason.as_str()),
        (23, 0, "a-rather-long-node-name")
    );
}

#[test]
fn status_reason_and_node_names_last_call_wins_and_nothing_leaks_between_calls() {
    let mut host = load("status_reason_last_wins.wat", KsweConfig::default());
    let p = pod("p");
    let (names, status) = host.prefilter(&p).unwrap();
    assert_eq!(
        names,
        Some(vec!["c".to_string()]),
        "last call wins; the unterminated entry is dropped"
    );
    assert_eq!(status.reason, "");
    let status = host.filter(&p, "n").unwrap();
    assert_eq!((status.code, status.reason.as_str()), (2, "second"));
    let (_, status) = host.score(&p, "n").unwrap();
    assert_eq!(
        (status.code, status.reason.as_str()),
        (3, ""),
        "the reason is per call"
    );
    let (status, _) = host.reserve(&p, "n").unwrap();
    assert_eq!(
        (status.code, status.reason.as_str()),
        (1, "BUG: out of memory reading message")
    );
    assert!(!status.trapped);
}

#[test]
fn klog_records_follow_upstreams_filters_including_the_inverted_log_check() {
    let rec = |severity: i32, message: &str, kvs: &[&str]| LogRecord {
        severity,
        message: message.into(),
        kvs: kvs.iter().map(|s| s.to_string()).collect(),
    };
    let mut host = load("klog_capture.wat", KsweConfig::default());
    assert_eq!(host.take_logs(), [rec(0, "started", &[])], "klog works in _start");
    let (_, status) = host.prefilter(&pod("p")).unwrap();
    assert_eq!(status.code, 0, "severity() returns the configured severity");
    assert_eq!(
        host.take_logs(),
        [
            rec(0, "info via log", &[]),
            rec(0, "info via logs", &["k", "v"]),
            rec(2, "error via logs", &["k", "v"])
        ]
    );
    let mut host = load(
        "klog_capture.wat",
        KsweConfig {
            log_severity: 2,
            ..KsweConfig::default()
        },
    );
    host.take_logs();
    let (_, status) = host.prefilter(&pod("p")).unwrap();
    assert_eq!(status.code, 2);
    assert_eq!(
        host.take_logs(),
        [
            rec(0, "info via log", &[]),
            rec(2, "error via log", &[]),
            rec(2, "error via logs", &["k", "v"]),
            rec(2, "error via logs without kvs", &[]),
        ],
        "with severity 2, `log` keeps info and error (inverted check), `logs` drops info"
    );
}

#[test]
fn eventf_records_events_and_bad_json_panics_the_host_function() {
    let mut host = load("klog_capture.wat", KsweConfig::default());
    let p = pod("p");
    assert_eq!(host.filter(&p, "n").unwrap().code, 0);
    let events = host.take_events();
    assert_eq!(events.len(), 1);
    let e = &events[0];
    assert_eq!(
        (
            e.regarding.kind.as_str(),
            e.regarding.name.as_str(),
            e.regarding.namespace.as_str()
        ),
        ("Pod", "p", "ns")
    );
    assert_eq!(
        (
            e.event_type.as_str(),
            e.reason.as_str(),
            e.action.as_str(),
            e.note.as_str()
        ),
        ("Normal", "Scheduled", "Binding", "ok")
    );
    let (_, status) = host.score(&p, "n").unwrap();
    assert!(status.trapped);
    assert!(
        status.reason.starts_with("wasm: score error: "),
        "{}",
        status.reason
    );
    assert!(
        status.reason.contains(" (recovered by wazero)\nwasm stack trace:\n\tk8s.io/scheduler.handle.eventrecorder.eventf(i32,i32)\n\tklog_capture.$"),
        "{}",
        status.reason
    );
}

#[test]
fn events_to_register_defaults_without_enqueue_or_events() {
    let mut host = load("codes_from_globals.wat", KsweConfig::default());
    assert_eq!(
        host.events_to_register().unwrap(),
        RegisteredEvents::Default,
        "enqueue returned no event"
    );
    let mut host = load("status_reason_last_wins.wat", KsweConfig::default());
    assert_eq!(
        host.events_to_register().unwrap(),
        RegisteredEvents::Default,
        "no enqueue export"
    );
}
