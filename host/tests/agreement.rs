//! Agreement and invariants on random clusters: for many seeds, a random generated cluster (random
//! profile, size, running pods, affinity keys and groups, extractors in slices or in the
//! configuration, and random [`Shapes`]: pools with and without extractors or with selector-scoped
//! ones, request selectors, `firstAvailable`, `allocationMode: All`, two-device claims with
//! `matchAttribute` / `distinctAttribute`, unconfigured claims; counters come with the `gpu`
//! profile) is replayed through the native engine, the component in wasmtime and the KSWE guest in
//! the KSWE host (synchronous binding for even seeds, kube-scheduler's asynchronous binding for odd
//! ones).
//!
//! Required, per seed: the three engines take identical decisions (per pod: node, every node's
//! filter status and reason, scores, the allocations; and the rejected objects); no engine traps,
//! errors or logs; every pod is decided (bound, or failing on every node); the auditor finds nothing
//! in the starting state and nothing after any Bind.
//!
//! A fourth engine, when `go` and the KSWE source are there (`support/go_harness.rs`; otherwise
//! one `SKIPPED` line): the Go harness, our KSWE guest in the unmodified KSWE plugin on wazero, as a
//! real kube-scheduler runs it, with the seed's binding mode (`kswe-harness replay --async` on odd
//! seeds). Each seed's cluster and configuration are written to a temporary directory and
//! replayed with `kswe-harness replay --timing=false`; its report must equal the native engine's
//! [`report::decisions`] exactly (nodes, statuses and reasons, scores, allocations, rejected
//! objects), and the guest must log nothing there either. The auditor is not run on the Go
//! report (it audits the host's own outcomes, not JSON): the Go allocations equal the native ones
//! on the same starting state, so they get the same verdict, which the native replay checked after
//! every Bind. Each Go replay is a process start (about a second: wazero compiles the guest), so
//! it runs for the first `SA_AGREEMENT_GO_SEEDS` seeds of the run (default 6; 0 turns it off
//! without building the harness).
//!
//! `SA_AGREEMENT_SEEDS` (default 24) is the number of seeds, starting at `SA_AGREEMENT_FIRST`
//! (default 1); `SA_AGREEMENT_THREADS` (default: available cores, at most 4) the worker threads. A
//! failing seed's cluster and configuration are written to
//! `target/agreement-failures/seed-<N>/` with the spec that produced them, after shrinking the
//! number of pending pods to the smallest prefix that still fails. The full run, timed, is in
//! docs/RELIABILITY.md:
//! `SA_AGREEMENT_SEEDS=1000 cargo test --release -p sharing-affinity-host --test agreement -- --nocapture`,
//! with the Go engine on every seed:
//! `SA_AGREEMENT_SEEDS=200 SA_AGREEMENT_GO_SEEDS=200 cargo test --release -p sharing-affinity-host --test agreement -- --nocapture`.

#[path = "support/go_harness.rs"]
mod go_harness;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde_json::Value;
use sharing_affinity_host::artifact;
use sharing_affinity_host::audit::Trail;
use sharing_affinity_host::component::{ComponentPlugin, Limits};
use sharing_affinity_host::engine::PluginRuntime;
use sharing_affinity_host::generate::{ClaimShape, Generated, Profile, Rng, Shapes, Spec, generate};
use sharing_affinity_host::kswe::{KsweEngine, KsweModule};
use sharing_affinity_host::native;
use sharing_affinity_host::replay::{Binding, Cluster, Replay, replay_observed, replay_with};
use sharing_affinity_host::report;

/// The random spec of a seed: 2–8 nodes, 1–8 devices each, 1–12 pending pods.
fn spec_for(seed: u64) -> Spec {
    let mut r = Rng::new(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0xa9ee);
    let profiles = [
        Profile::Nic,
        Profile::Gpu,
        Profile::Fpga,
        Profile::Rdma,
        Profile::Plain,
    ];
    let profile = profiles[r.range(0, profiles.len() - 1)];
    let nodes = r.range(2, 8);
    let dpn = r.range(1, 8);
    let devices = nodes * dpn;
    let running = match profile {
        // Dedicated devices: leave at least half free.
        Profile::Plain => r.range(0, devices / 2),
        // The gpu power budget lets three quarters of a node's GPUs be open.
        _ => r.range(0, devices * 3 / 4 + 1),
    };
    let shapes = if r.chance(1, 8) {
        Shapes::default()
    } else {
        Shapes {
            pool_extractors: r.chance(3, 4),
            selectors: r.chance(3, 4),
            first_available: r.chance(3, 4),
            all: r.chance(3, 4),
            constraints: r.chance(3, 4),
            unconfigured: r.chance(1, 2),
        }
    };
    Spec {
        pods: r.range(1, 12),
        running,
        affinity_keys: r.range(1, 3),
        groups: r.range(1, 4),
        profile,
        seed,
        extractors_in_config: profile != Profile::Plain && r.chance(1, 4),
        burst: r.range(1, 3),
        shapes,
        ..Spec::new(nodes, dpn)
    }
}

/// The compiled guests, shared by every worker, and the Go harness when it is available.
struct Guests {
    component: ComponentPlugin,
    kswe: KsweModule,
    go: Option<&'static go_harness::GoHarness>,
    /// Seeds below this one also run on the Go harness.
    go_until: u64,
}

fn guests() -> Guests {
    let path = artifact::default_component().expect("building the plugin component");
    let component = ComponentPlugin::from_file(&path).expect("compiling the plugin component");
    let path = artifact::default_kswe_module().expect("building the KSWE guest");
    let wasm = artifact::read_kswe_module(&path).expect("reading the KSWE guest");
    let kswe = KsweModule::new(&wasm).expect("compiling the KSWE guest");
    let go_seeds = env_u64("SA_AGREEMENT_GO_SEEDS", 6);
    let go = if go_seeds == 0 {
        None
    } else {
        let start = Instant::now();
        match go_harness::GoHarness::get() {
            Ok(h) => {
                eprintln!(
                    "agreement: the Go harness built in {:.1} s",
                    start.elapsed().as_secs_f64()
                );
                Some(h)
            }
            Err(why) => {
                go_harness::skipped(&format!("go harness: {why}"));
                None
            }
        }
    };
    let go_until = env_u64("SA_AGREEMENT_FIRST", 1) + go_seeds;
    Guests {
        component,
        kswe,
        go,
        go_until,
    }
}

/// What one seed's replays showed: bound and unbound pods per claim shape.
#[derive(Default)]
struct Tally {
    bound: BTreeMap<String, usize>,
    unbound: BTreeMap<String, usize>,
    audits: usize,
    /// Seeds the Go harness replayed.
    go: usize,
}

/// A fresh directory for one seed's Go replay.
fn tempdir(seed: u64) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("agreement-go")
        .join(format!("seed-{seed}-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    dir
}

/// Replays one generated cluster through the engines; `Err` says what went wrong.
fn check(g: &Generated, binding: Binding, guests: &Guests, tally: &mut Tally) -> Result<(), String> {
    let cluster = Cluster::parse(&g.cluster).map_err(|e| format!("parsing: {e:#}"))?;
    if !cluster.invalid.is_empty() {
        return Err(format!("objects that do not decode: {:?}", cluster.invalid));
    }
    let config = g.config.as_str();

    // Native, audited after every Bind.
    let mut trail = Trail::new(&cluster, config).map_err(|e| format!("audit trail: {e:#}"))?;
    if !trail.findings.is_empty() {
        return Err(format!("the starting state violates: {:#?}", trail.findings));
    }
    let mut native = native::plugin(config).map_err(|e| format!("native engine: {e:#}"))?;
    let mut audits = 0;
    let native = replay_observed(&mut native, &cluster, &mut || {}, &mut |outcome| {
        audits += 1;
        trail.after_bind(outcome);
    })
    .map_err(|e| format!("native replay: {e:#}"))?;
    tally.audits += audits;
    if !trail.findings.is_empty() {
        return Err(format!("audit after Bind: {:#?}", trail.findings));
    }
    if !trail.unplaced.is_empty() {
        return Err(format!(
            "allocations the audit could not place: {:?}",
            trail.unplaced
        ));
    }
    decided(&native)?;

    // Component.
    let mut component = guests
        .component
        .instantiate(config, Limits::default())
        .map_err(|e| format!("component engine: {e:#}"))?;
    let replayed = replay_observed(&mut component, &cluster, &mut || {}, &mut |_| {})
        .map_err(|e| format!("component replay: {e:#}"))?;
    if component.replacements() > 0 {
        return Err(format!(
            "the component trapped {} time(s)",
            component.replacements()
        ));
    }
    same(&native, &replayed)?;

    // KSWE, with the seed's binding mode.
    let mut kswe =
        KsweEngine::from_module(&guests.kswe, config).map_err(|e| format!("kswe engine: {e:#}"))?;
    let replayed = replay_with(&mut kswe, &cluster, binding, &mut || {}, &mut |_| {})
        .map_err(|e| format!("kswe replay: {e:#}"))?;
    let logs = kswe.take_logs();
    if kswe.traps() > 0 || !logs.is_empty() {
        return Err(format!(
            "kswe: {} failed guest call(s); log:\n{}",
            kswe.traps(),
            logs.join("\n")
        ));
    }
    same(&native, &replayed)?;

    // The Go harness: the guest in the unmodified KSWE plugin on wazero.
    if let Some(go) = guests.go
        && g.workload.spec.seed < guests.go_until
    {
        let dir = tempdir(g.workload.spec.seed);
        std::fs::write(dir.join("cluster.json"), &g.cluster).map_err(|e| e.to_string())?;
        if !g.config.is_empty() {
            std::fs::write(dir.join("config.json"), &g.config).map_err(|e| e.to_string())?;
        }
        let outcome = go.replay(&dir, binding == Binding::Async);
        let _ = std::fs::remove_dir_all(&dir);
        let decisions = outcome.map_err(|e| format!("go harness (KSWE on wazero): {e}"))?;
        first_difference(
            "the Go harness (KSWE on wazero)",
            &report::decisions(&native),
            &decisions,
        )?;
        tally.go += 1;
    }

    for (k, pod) in native.pods.iter().enumerate() {
        let shape = format!("{:?}", g.workload.claim_shape(k));
        let map = if pod.node.is_some() {
            &mut tally.bound
        } else {
            &mut tally.unbound
        };
        *map.entry(shape).or_default() += 1;
    }
    Ok(())
}

/// Every pod bound, or failing on every node; nothing rejected; no error ([`Replay::undecided`]);
/// no node status `Error`.
fn decided(r: &Replay) -> Result<(), String> {
    if let Some(e) = r.undecided() {
        return Err(e);
    }
    for p in &r.pods {
        for n in &p.nodes {
            if n.status.code == sharing_affinity_core::Code::Error {
                return Err(format!("{} on {}: {}", p.pod, n.node, n.status));
            }
        }
    }
    Ok(())
}

/// The decisions of `other` are those of the native engine; `Err` names the first difference.
fn same(native: &Replay, other: &Replay) -> Result<(), String> {
    first_difference(
        other.engine,
        &report::decisions(native),
        &report::decisions(other),
    )
}

/// The decisions `b` of `engine` (a [`report::decisions`] document) are the native engine's `a`;
/// `Err` names the first difference.
fn first_difference(engine: &str, a: &Value, b: &Value) -> Result<(), String> {
    if a == b {
        return Ok(());
    }
    if a["rejected"] != b["rejected"] {
        return Err(format!(
            "{engine}: rejected {} vs native {}",
            b["rejected"], a["rejected"]
        ));
    }
    let empty = Vec::new();
    let (pa, pb) = (
        a["pods"].as_array().unwrap_or(&empty),
        b["pods"].as_array().unwrap_or(&empty),
    );
    for (x, y) in pa.iter().zip(pb) {
        if x != y {
            return Err(format!(
                "{engine} disagrees with native on {}:\nnative: {}\n{engine}: {}",
                x["pod"],
                pretty(x),
                pretty(y)
            ));
        }
    }
    if pa.len() != pb.len() {
        return Err(format!("{engine}: {} pods vs native {}", pb.len(), pa.len()));
    }
    Err(format!(
        "{engine} disagrees with native outside the pods:\nnative: {}\n{engine}: {}",
        pretty(a),
        pretty(b)
    ))
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

fn binding_of(seed: u64) -> Binding {
    if seed % 2 == 1 {
        Binding::Async
    } else {
        Binding::Sync
    }
}

/// Shrinks a failing spec to its smallest failing pod prefix (the generator draws pods in order,
/// so fewer pods keeps the same cluster and the first pods), writes it out and returns the report.
fn record_failure(seed: u64, spec: &Spec, first: String, guests: &Guests) -> String {
    let mut smallest = spec.clone();
    let mut error = first;
    for pods in 1..spec.pods {
        let candidate = Spec { pods, ..spec.clone() };
        let Ok(g) = generate(&candidate) else { continue };
        if let Err(e) = check(&g, binding_of(seed), guests, &mut Tally::default()) {
            smallest = candidate;
            error = e;
            break;
        }
    }
    let dir = artifact::target_dir()
        .join("agreement-failures")
        .join(format!("seed-{seed}"));
    let written = generate(&smallest).map(|g| {
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(dir.join("cluster.json"), g.cluster + "\n");
        if !g.config.is_empty() {
            let _ = std::fs::write(dir.join("config.json"), g.config + "\n");
        }
        let _ = std::fs::write(dir.join("spec.txt"), format!("{smallest:#?}\n"));
    });
    format!(
        "seed {seed} ({:?} binding), shrunk to {} pods{}:\n{smallest:?}\n{error}",
        binding_of(seed),
        smallest.pods,
        if written.is_ok() {
            format!(", written to {}", dir.display())
        } else {
            String::new()
        }
    )
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn the_engines_agree_and_the_auditor_finds_nothing_on_random_clusters() {
    let seeds = env_u64("SA_AGREEMENT_SEEDS", 24);
    let first = env_u64("SA_AGREEMENT_FIRST", 1);
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let threads = env_u64("SA_AGREEMENT_THREADS", cores.min(4) as u64).max(1);
    let guests = guests();
    let start = Instant::now();
    let next = AtomicU64::new(first);
    let end = first + seeds;
    let failures = Mutex::new(Vec::new());
    let total = Mutex::new(Tally::default());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut tally = Tally::default();
                loop {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= end {
                        break;
                    }
                    let spec = spec_for(seed);
                    let result = generate(&spec)
                        .map_err(|e| format!("generating: {e}"))
                        .and_then(|g| check(&g, binding_of(seed), &guests, &mut tally));
                    if let Err(e) = result {
                        let report = record_failure(seed, &spec, e, &guests);
                        failures.lock().unwrap_or_else(|p| p.into_inner()).push(report);
                    }
                }
                let mut total = total.lock().unwrap_or_else(|p| p.into_inner());
                for (k, n) in tally.bound {
                    *total.bound.entry(k).or_default() += n;
                }
                for (k, n) in tally.unbound {
                    *total.unbound.entry(k).or_default() += n;
                }
                total.audits += tally.audits;
                total.go += tally.go;
            });
        }
    });
    let total = total.into_inner().unwrap_or_else(|p| p.into_inner());
    let failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    eprintln!(
        "agreement: seeds {first}..{end} in {:.1} s on {threads} thread(s); {} on the Go harness; \
         {} audits after Bind; bound per claim shape {:?}; unbound {:?}",
        start.elapsed().as_secs_f64(),
        total.go,
        total.audits,
        total.bound,
        total.unbound
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // The random shapes must really reach Bind: with enough seeds, every claim shape is bound.
    if seeds >= 20 {
        let shapes = [
            ClaimShape::Basic,
            ClaimShape::Selector("fast"),
            ClaimShape::Selector("slow"),
            ClaimShape::FirstAvailable,
            ClaimShape::All { fast_only: true },
            ClaimShape::All { fast_only: false },
            ClaimShape::Count2,
            ClaimShape::Match,
            ClaimShape::Distinct,
            ClaimShape::Unconfigured,
        ];
        for shape in shapes {
            let key = format!("{shape:?}");
            assert!(
                total.bound.get(&key).copied().unwrap_or(0) > 0,
                "no pod with a {key} claim was bound in {seeds} seeds: {:?}",
                total.bound
            );
        }
    }
}

#[test]
fn specs_cover_every_shape_and_profile() {
    // The spec draw itself: over the CI seeds, every profile and every shape flag occurs, and
    // sizes stay in the documented ranges.
    let specs: Vec<Spec> = (1..=24).map(spec_for).collect();
    for profile in [
        Profile::Nic,
        Profile::Gpu,
        Profile::Fpga,
        Profile::Rdma,
        Profile::Plain,
    ] {
        assert!(specs.iter().any(|s| s.profile == profile), "{profile:?}");
    }
    assert!(specs.iter().any(|s| !s.shapes.any()));
    assert!(specs.iter().any(|s| s.shapes.pool_extractors));
    assert!(specs.iter().any(|s| s.shapes.unconfigured));
    assert!(specs.iter().any(|s| s.extractors_in_config));
    assert!(specs.iter().any(|s| s.affinity_keys > 1));
    for s in &specs {
        assert!((2..=8).contains(&s.nodes), "{s:?}");
        assert!((1..=8).contains(&s.devices_per_node), "{s:?}");
        assert!((1..=12).contains(&s.pods), "{s:?}");
        generate(s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
    }
}
