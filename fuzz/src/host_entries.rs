//! Entry points of the fuzz targets over the wasm hosts (`kswe_imports`, `component_events`). They
//! need the `sharing-affinity-host` crate (wasmtime). Compiled by the cargo-fuzz crate and, through
//! `#[path]`, by the normal test suite (`host/tests/fuzz_corpora.rs`), next to `entries.rs`.

use std::fmt::Write as _;
use std::sync::OnceLock;
use std::time::Duration;

use arbitrary::{Arbitrary, Result as ArbResult, Unstructured};
use serde_json::Value;
use sharing_affinity_core::contract::Scheduler;
use sharing_affinity_core::object::{Object, parse_objects};
use sharing_affinity_core::{EventKind, Plugin};
use sharing_affinity_host::component::{ComponentEngine, ComponentPlugin};
use sharing_affinity_host::kswe::context::Cluster;
use sharing_affinity_host::kswe::store::Change;
use sharing_affinity_host::kswe::table::{DRA, HostFn, UPSTREAM, W, WASI};
use sharing_affinity_host::kswe::{KsweConfig, KsweModule, KsweStatus, PreparedPod, TrapPolicy};
use sharing_affinity_host::limits::Limits;

use crate::entries::{Leaf, set_leaf};

/// The cluster both targets start from: two nodes, NIC slices with an extractor, claims and
/// pending pods.
pub const HOST_CLUSTER: &str = include_str!("../../testdata/multi-node-packing-compatible-lock/cluster.json");

/// Limits for fuzzed guests: small, so a slow input is found as a timeout quickly.
fn fuzz_limits() -> Limits {
    Limits {
        time_per_call: Duration::from_secs(2),
        memory_bytes: 16 << 20,
        ..Limits::default()
    }
}

// --- kswe_imports ------------------------------------------------------------------------------

/// Every host function the KSWE host provides, in the order the interpreter numbers them.
pub fn host_functions() -> Vec<HostFn> {
    UPSTREAM.iter().chain(DRA).chain(WASI).copied().collect()
}

/// Where the interpreter keeps its program (decoded from the hex `guestConfig`).
const PROGRAM_AT: u32 = 0x4_0000;
/// Where `get_config` writes the hex text, and its limit.
const HEX_AT: u32 = 0x5_0000;
const HEX_LIMIT: u32 = 0x2_0000;
/// One call record: `u32` function number, `u32` padding, five `u64` arguments.
pub const RECORD: usize = 48;

fn wat_type(w: W) -> &'static str {
    match w {
        W::I32 => "i32",
        W::I64 => "i64",
    }
}

/// The interpreter guest: it imports every host function, and each of its exports (every KSWE
/// hook) reads its program with `get_config` (hex text), then calls the host functions it names
/// with the arguments it gives, in order, dropping their results. Function number `len` (one past
/// the last host function) grows memory by its first argument's low byte in pages instead.
pub fn interpreter_wat() -> String {
    let fns = host_functions();
    let get_config = fns
        .iter()
        .position(|f| f.name == "get_config")
        .expect("get_config is a host function");
    let mut w = String::from("(module $fuzz_interpreter\n");
    for (i, f) in fns.iter().enumerate() {
        let params: Vec<&str> = f.params.iter().map(|p| wat_type(*p)).collect();
        let results: Vec<&str> = f.results.iter().map(|p| wat_type(*p)).collect();
        let _ = writeln!(
            w,
            "  (import \"{}\" \"{}\" (func $f{i} (param {}) (result {})))",
            f.module,
            f.name,
            params.join(" "),
            results.join(" ")
        );
    }
    w.push_str("  (memory (export \"memory\") 8)\n");
    // hex digit → value (garbage for other bytes, which is fine)
    w.push_str(
        "  (func $nibble (param $c i32) (result i32)
    (if (result i32) (i32.le_u (local.get $c) (i32.const 57))
      (then (i32.sub (local.get $c) (i32.const 48)))
      (else (i32.and (i32.sub (local.get $c) (i32.const 87)) (i32.const 15)))))\n",
    );
    let _ = writeln!(
        w,
        "  (func $run
    (local $len i32) (local $i i32) (local $n i32) (local $r i32)
    (local.set $len (call $f{get_config} (i32.const {HEX_AT}) (i32.const {HEX_LIMIT})))
    (if (i32.gt_u (local.get $len) (i32.const {HEX_LIMIT})) (then (return)))
    (block $decoded (loop $decode
      (br_if $decoded (i32.ge_u (i32.add (local.get $i) (i32.const 1)) (local.get $len)))
      (i32.store8 (i32.add (i32.const {PROGRAM_AT}) (i32.shr_u (local.get $i) (i32.const 1)))
        (i32.or
          (i32.shl (call $nibble (i32.load8_u (i32.add (i32.const {HEX_AT}) (local.get $i)))) (i32.const 4))
          (call $nibble (i32.load8_u (i32.add (i32.const {HEX_AT}) (i32.add (local.get $i) (i32.const 1)))))))
      (local.set $i (i32.add (local.get $i) (i32.const 2)))
      (br $decode)))
    (local.set $n (i32.div_u (i32.shr_u (local.get $len) (i32.const 1)) (i32.const {RECORD})))
    (local.set $i (i32.const 0))
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (local.set $r (i32.add (i32.const {PROGRAM_AT}) (i32.mul (local.get $i) (i32.const {RECORD}))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))"
    );
    // Nested blocks: the innermost holds the br_table; after block $bK ends comes case K.
    let cases = fns.len() + 1;
    w.push_str("      (block $c_end\n");
    for k in (0..cases).rev() {
        let _ = writeln!(w, "      (block $b{k}");
    }
    let labels: Vec<String> = (0..cases).map(|k| format!("$b{k}")).collect();
    let _ = writeln!(
        w,
        "        (br_table {} $b{} (i32.rem_u (i32.load (local.get $r)) (i32.const {cases}))))",
        labels.join(" "),
        cases - 1
    );
    for (k, f) in fns.iter().enumerate() {
        let mut call = format!("        (call $f{k}");
        for (j, p) in f.params.iter().enumerate() {
            let offset = 8 + 8 * j;
            let load = match p {
                W::I32 => "i32.load",
                W::I64 => "i64.load",
            };
            let _ = write!(call, " ({load} offset={offset} (local.get $r))");
        }
        call.push(')');
        for _ in f.results {
            call = format!("        (drop {})", call.trim_start());
        }
        let _ = writeln!(w, "{call}\n        (br $c_end))");
    }
    let _ = writeln!(
        w,
        "        (drop (memory.grow (i32.and (i32.load offset=8 (local.get $r)) (i32.const 255)))))"
    );
    w.push_str("      (br $next))))\n");
    for (export, result) in [
        ("enqueue", ""),
        ("prefilter", "i32"),
        ("filter", "i32"),
        ("postfilter", "i64"),
        ("addpod", "i32"),
        ("removepod", "i32"),
        ("prescore", "i32"),
        ("score", "i64"),
        ("normalizescore", "i32"),
        ("reserve", "i32"),
        ("unreserve", ""),
        ("permit", "i64"),
        ("prebind", "i32"),
        ("bind", "i32"),
        ("postbind", ""),
    ] {
        let (sig, value) = match result {
            "" => (String::new(), ""),
            "i32" => ("(result i32)".into(), "(i32.const 0)"),
            _ => ("(result i64)".into(), "(i64.const 0)"),
        };
        let _ = writeln!(w, "  (func (export \"{export}\") {sig} (call $run) {value})");
    }
    w.push_str(")\n");
    w
}

/// The interpreter guest, compiled once.
pub fn interpreter() -> &'static KsweModule {
    static MODULE: OnceLock<KsweModule> = OnceLock::new();
    MODULE.get_or_init(|| {
        let wasm = wat::parse_str(interpreter_wat()).expect("the interpreter parses");
        KsweModule::with_limits(&wasm, &fuzz_limits()).expect("the interpreter loads")
    })
}

/// An argument, biased toward the values that matter for pointers and lengths.
#[derive(Clone, Copy, Debug)]
pub enum Arg {
    /// An offset inside the first 64 KiB of memory.
    Low(u16),
    /// This far below the end of the initial memory (8 pages).
    BelowEnd(u16),
    /// A small length.
    Small(u8),
    /// Any 32-bit value (negative lengths, pointers far outside memory).
    Any(u32),
    /// Any 64-bit value (for `i64` parameters).
    Wide(u64),
}

impl Arg {
    /// The value the interpreter loads.
    pub fn value(self) -> u64 {
        match self {
            Arg::Low(v) => u64::from(v),
            Arg::BelowEnd(v) => u64::from((8u32 << 16).wrapping_sub(u32::from(v))),
            Arg::Small(v) => u64::from(v),
            Arg::Any(v) => u64::from(v),
            Arg::Wide(v) => v,
        }
    }
}

impl<'a> Arbitrary<'a> for Arg {
    fn arbitrary(u: &mut Unstructured<'a>) -> ArbResult<Self> {
        Ok(match u.int_in_range(0..=4u8)? {
            0 => Arg::Low(u16::arbitrary(u)?),
            1 => Arg::BelowEnd(u16::arbitrary(u)?),
            2 => Arg::Small(u8::arbitrary(u)?),
            3 => Arg::Any(u32::arbitrary(u)?),
            _ => Arg::Wide(u64::arbitrary(u)?),
        })
    }
}

/// One host function call of a `kswe_imports` program.
#[derive(Clone, Debug)]
pub struct Call {
    /// The function (modulo the number of host functions, plus one for `memory.grow`).
    pub function: u16,
    /// Its arguments (as many as it takes are used).
    pub args: [Arg; 5],
}

impl<'a> Arbitrary<'a> for Call {
    fn arbitrary(u: &mut Unstructured<'a>) -> ArbResult<Self> {
        Ok(Call {
            function: u16::arbitrary(u)?,
            args: [
                Arg::arbitrary(u)?,
                Arg::arbitrary(u)?,
                Arg::arbitrary(u)?,
                Arg::arbitrary(u)?,
                Arg::arbitrary(u)?,
            ],
        })
    }
}

/// A program as the interpreter's `guestConfig`: hex of the 48-byte records.
pub fn program_hex(calls: &[Call]) -> String {
    let mut hex = String::with_capacity(calls.len() * RECORD * 2);
    for call in calls {
        let mut record = [0u8; RECORD];
        record[..4].copy_from_slice(&u32::from(call.function).to_le_bytes());
        for (j, a) in call.args.iter().enumerate() {
            record[8 + 8 * j..16 + 8 * j].copy_from_slice(&a.value().to_le_bytes());
        }
        for b in record {
            let _ = write!(hex, "{b:02x}");
        }
    }
    hex
}

/// [`HOST_CLUSTER`]'s objects, parsed once per process: the text is a constant, so every input
/// starts from the same objects whether they are parsed once or each time.
fn host_objects() -> &'static [Object] {
    static OBJECTS: OnceLock<Vec<Object>> = OnceLock::new();
    OBJECTS.get_or_init(|| parse_objects(HOST_CLUSTER).map(|p| p.objects).unwrap_or_default())
}

/// A fresh KSWE cluster state (its own object store) holding [`HOST_CLUSTER`]'s objects.
fn host_cluster() -> Cluster {
    let mut cluster = Cluster::default();
    for object in host_objects() {
        let _ = cluster.store.apply(Change::Add, object.clone());
    }
    cluster
}

fn check(hook: &str, status: &KsweStatus) {
    if status.trapped {
        assert!(
            !status.reason.is_empty(),
            "{hook}: a failed call without a reason"
        );
    }
}

/// `kswe_imports`: a program of host-function calls with hostile pointers and lengths, run by the
/// interpreter guest in every hook of a cycle. Never panics (a Go-host panic is a trap, an
/// `Error` status or a host error, never a Rust panic), and the host still answers afterwards.
pub fn kswe_imports(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(calls) = Vec::<Call>::arbitrary(&mut u) else {
        return;
    };
    let calls = &calls[..calls.len().min(64)];
    run_kswe_program(calls);
}

/// Runs one program through every hook; returns how many hook calls failed (trapped).
pub fn run_kswe_program(calls: &[Call]) -> usize {
    let config = KsweConfig {
        guest_config: program_hex(calls),
        trap_policy: TrapPolicy::Replace,
        limits: fuzz_limits(),
        ..KsweConfig::default()
    };
    let Ok(mut host) = interpreter().host_with_cluster(config, host_cluster()) else {
        // `_start`-free module: creating the first instance cannot run the program; a failure
        // here is a host bug.
        panic!("the interpreter guest failed to start");
    };
    let pods: Vec<PreparedPod> = {
        let cluster = host.cluster();
        cluster
            .store
            .objects(sharing_affinity_core::object::Kind::Pod)
            .filter_map(|o| match o {
                Object::Pod(p) => PreparedPod::new(p).ok(),
                _ => None,
            })
            .collect()
    };
    let (Some(pod), Some(target)) = (pods.first(), pods.last()) else {
        panic!("the host cluster has pods");
    };
    let node = pod.pod.spec.node_name.clone();
    let node = if node.is_empty() {
        "node-1".to_string()
    } else {
        node
    };
    let mut failed = 0;
    let mut note = |hook: &str, status: &KsweStatus| {
        check(hook, status);
        failed += usize::from(status.trapped);
    };
    let _ = host.events_to_register();
    if let Ok((_, s)) = host.prefilter(pod) {
        note("prefilter", &s);
    }
    if let Ok(s) = host.filter(pod, &node) {
        note("filter", &s);
    }
    let statuses = [(node.clone(), 2)].into_iter().collect();
    if let Ok((_, s)) = host.postfilter(pod, &statuses) {
        note("postfilter", &s);
    }
    if let Ok(s) = host.add_or_remove_pod(true, pod, target, &node) {
        note("addpod", &s);
    }
    if let Ok(s) = host.prescore(pod, std::slice::from_ref(&node)) {
        note("prescore", &s);
    }
    if let Ok((_, s)) = host.score(pod, &node) {
        note("score", &s);
    }
    let mut scores = vec![(node.clone(), 7)];
    if let Ok(s) = host.normalize_score(pod, &mut scores) {
        note("normalizescore", &s);
    }
    if let Ok((s, _)) = host.reserve(pod, &node) {
        note("reserve", &s);
    }
    if let Ok((s, _)) = host.permit(pod, &node) {
        note("permit", &s);
    }
    if let Ok((s, _)) = host.prebind(pod, &node) {
        note("prebind", &s);
    }
    if let Ok(s) = host.bind(pod, &node) {
        note("bind", &s);
    }
    let _ = host.postbind(pod, &node);
    let _ = host.unreserve(pod, &node);
    // The host still answers (no poisoned lock, no stuck pool).
    let _ = host.take_logs();
    let _ = host.take_events();
    let _ = host.guest_memory_bytes();
    failed
}

// --- component_events --------------------------------------------------------------------------

/// How an event's object is damaged.
#[derive(Debug)]
pub enum Damage {
    /// Sent as recorded.
    None,
    /// One JSON leaf replaced.
    Leaf(u16, Leaf),
    /// The JSON text cut after this many bytes (at a character boundary).
    Truncate(u16),
    /// Arbitrary text instead of the object.
    Text(String),
    /// `kind` replaced by another recorded kind, or an unknown one.
    Kind(u8),
}

impl<'a> Arbitrary<'a> for Damage {
    fn arbitrary(u: &mut Unstructured<'a>) -> ArbResult<Self> {
        Ok(match u.int_in_range(0..=5u8)? {
            0 | 1 => Damage::None,
            2 => Damage::Leaf(u16::arbitrary(u)?, Leaf::arbitrary(u)?),
            3 => Damage::Truncate(u16::arbitrary(u)?),
            4 => Damage::Text(String::arbitrary(u)?),
            _ => Damage::Kind(u8::arbitrary(u)?),
        })
    }
}

/// One object event of a batch.
#[derive(Debug)]
pub struct Ev {
    /// 0 Add, 1 Update, 2 Delete (modulo 3).
    pub kind: u8,
    /// Which object of the cluster.
    pub object: u8,
    /// How it is damaged.
    pub damage: Damage,
}

impl<'a> Arbitrary<'a> for Ev {
    fn arbitrary(u: &mut Unstructured<'a>) -> ArbResult<Self> {
        Ok(Ev {
            kind: u8::arbitrary(u)?,
            object: u8::arbitrary(u)?,
            damage: Damage::arbitrary(u)?,
        })
    }
}

fn base_items() -> &'static [Value] {
    static ITEMS: OnceLock<Vec<Value>> = OnceLock::new();
    ITEMS.get_or_init(|| match serde_json::from_str::<Value>(HOST_CLUSTER) {
        Ok(Value::Object(mut m)) => match m.remove("items") {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        },
        _ => Vec::new(),
    })
}

/// The event as the plugin receives it.
pub fn render(ev: &Ev) -> (EventKind, String) {
    let items = base_items();
    let mut item = items[usize::from(ev.object) % items.len()].clone();
    let kind = match ev.kind % 3 {
        0 => EventKind::Add,
        1 => EventKind::Update,
        _ => EventKind::Delete,
    };
    let text = match &ev.damage {
        Damage::None => item.to_string(),
        Damage::Leaf(at, leaf) => {
            set_leaf(&mut item, usize::from(*at), leaf);
            item.to_string()
        }
        Damage::Truncate(n) => {
            let text = item.to_string();
            let mut cut = usize::from(*n).min(text.len());
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text[..cut].to_string()
        }
        Damage::Text(t) => t.clone(),
        Damage::Kind(k) => {
            const KINDS: [&str; 9] = [
                "Node",
                "Pod",
                "ResourceSlice",
                "DeviceClass",
                "ResourceClaim",
                "ResourceClaimTemplate",
                "DeviceTaintRule",
                "ConfigMap",
                "",
            ];
            item["kind"] = Value::String(KINDS[usize::from(*k) % KINDS.len()].into());
            item.to_string()
        }
    };
    (kind, text)
}

/// The compiled plugin component the host prepared last
/// ([`sharing_affinity_host::artifact::prepared_component`]), read from the
/// workspace's target directory (build it first,
/// e.g. with `cargo run --release -p sharing-affinity-host -- replay testdata/<any>`; the test
/// suite builds it).
pub fn component_plugin() -> &'static ComponentPlugin {
    static PLUGIN: OnceLock<ComponentPlugin> = OnceLock::new();
    PLUGIN.get_or_init(|| {
        let path = sharing_affinity_host::artifact::prepared_component().unwrap_or_else(|| {
            sharing_affinity_host::artifact::Guest::Component
                .target_dir()
                .join(sharing_affinity_host::artifact::OPTIMIZED_COMPONENT)
        });
        ComponentPlugin::from_file_with_limits(&path, &fuzz_limits()).unwrap_or_else(|e| {
            panic!(
                "{e:#}: build the component first (cargo run --release -p sharing-affinity-host -- \
                 replay testdata/multi-node-packing-compatible-lock)"
            )
        })
    })
}

/// `component_events`: batches of Add/Update/Delete events of recorded objects, damaged or not,
/// through the component's `update` export and through the same core path natively
/// (`Plugin::apply` per event, as the guest does). Never panics; the component rejects exactly the
/// events the native plugin rejects, with the same messages (each non-empty); afterwards every
/// pending pod's PreFilter and Filter on every node give the same statuses in both.
pub fn component_events(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(batches) = Vec::<Vec<Ev>>::arbitrary(&mut u) else {
        return;
    };
    let batches: Vec<&[Ev]> = batches.iter().take(8).map(|b| &b[..b.len().min(16)]).collect();
    run_component_events(&batches);
}

/// The native and the component status agree: code and reason; but the component host reports
/// its status reason limit instead of a reason longer than it (the plugin quotes selectors, which
/// can be long).
fn same(native: &sharing_affinity_core::Status, wasm: &sharing_affinity_core::Status, what: &str) {
    let limit = fuzz_limits().max_status_reason_bytes;
    if native.reason.len() > limit {
        let expected = format!(
            "guest exceeded its status reason limit of 16 KiB: a reason of {} bytes",
            native.reason.len()
        );
        assert!(
            wasm.code == sharing_affinity_core::Code::Error && wasm.reason.starts_with(&expected),
            "{what}: a {}-byte reason: {wasm}",
            native.reason.len()
        );
    } else {
        assert_eq!((native.code, &native.reason), (wasm.code, &wasm.reason), "{what}");
    }
}

/// Runs the batches (see [`component_events`]); returns how many events were rejected.
pub fn run_component_events(batches: &[&[Ev]]) -> usize {
    let mut native = Plugin::new("").expect("the default configuration");
    let mut component: ComponentEngine = component_plugin()
        .instantiate("", fuzz_limits())
        .expect("the component starts");
    let mut rejected = 0;
    for batch in batches {
        let events: Vec<(EventKind, String)> = batch.iter().map(render).collect();
        let mut expected = Vec::new();
        for (i, (kind, json)) in events.iter().enumerate() {
            if let Err(e) = native.apply(*kind, json) {
                let message = e.to_string();
                assert!(!message.is_empty(), "event {i}: an empty error");
                expected.push((u32::try_from(i).unwrap_or(u32::MAX), message));
            }
        }
        let got = component
            .update_events(&events)
            .unwrap_or_else(|s| panic!("update trapped: {s}"));
        assert_eq!(got, expected, "rejected events, component vs native");
        rejected += got.len();
    }
    let nodes = native.node_names();
    let pods: Vec<String> = host_objects()
        .iter()
        .filter_map(|o| match o {
            Object::Pod(p) if p.spec.node_name.is_empty() => Some(o.key()),
            _ => None,
        })
        .collect();
    for pod in pods {
        let (a, b) = (native.prefilter(&pod), component.prefilter(&pod));
        same(&a, &b, &format!("prefilter {pod}"));
        if !a.is_success() {
            continue;
        }
        for node in &nodes {
            let (a, b) = (native.filter(node), component.filter(node));
            same(&a, &b, &format!("filter {pod} on {node}"));
        }
    }
    assert_eq!(component.replacements(), 0, "the component trapped");
    rejected
}
