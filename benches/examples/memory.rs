//! Guest linear memory per object kind: loads a recorded cluster into a fresh instance one kind
//! at a time and prints how much the guest's memory grew with each, then with the first
//! PreFilter (which builds the slice index), then with the rest of that cycle (Filter on every
//! node, PreScore and Score, Reserve and Bind on the first feasible node). The breakdown behind `docs/PERFORMANCE.md`
//! ("Load and guest memory").
//!
//! ```text
//! target/release/sharing-affinity generate --nodes 5000 --devices-per-node 8 --pods 2 --out /tmp/g5000m
//! cargo build --release -p sharing-affinity-benches --example memory
//! target/release/examples/memory /tmp/g5000m/cluster.json component
//! ```
//!
//! Arguments: the cluster file and a wasm engine (`component` or `kswe`; the KSWE guest pulls
//! the cluster only at its first PreFilter, so only that line shows growth). Linear memory only
//! grows: each figure is the peak so far, at 64 KiB page granularity.

use std::path::Path;

use sharing_affinity_benches::{KINDS_IN_LOAD_ORDER, engine_named};
use sharing_affinity_host::replay::Cluster;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let file = args
        .first()
        .expect("usage: memory <cluster.json> [component|kswe]");
    let engine_name = args.get(1).map_or("component", String::as_str);
    let mut engine = engine_named(engine_name, "");
    let cluster = Cluster::from_file(Path::new(file)).expect("reading the cluster");
    let mib = |b: u64| b as f64 / 1048576.0;
    let memory = |e: &mut dyn sharing_affinity_host::engine::PluginRuntime| {
        e.guest_memory_bytes()
            .expect("a wasm engine (component or kswe) reports its guest memory")
    };
    let mut last = memory(engine.as_mut());
    println!("{engine_name}: empty instance {:.1} MiB", mib(last));
    for kind in KINDS_IN_LOAD_ORDER {
        let objects: Vec<_> = cluster
            .objects
            .iter()
            .filter(|o| o.kind() == kind)
            .cloned()
            .collect();
        if objects.is_empty() {
            continue;
        }
        let rejected = engine.load(&objects).expect("loading the cluster");
        assert!(rejected.is_empty(), "rejected objects: {rejected:?}");
        let now = memory(engine.as_mut());
        println!(
            "{:>22}: {:>6} objects, +{:>6.1} MiB ({:>5} B each), {:.1} MiB in all",
            kind.as_str(),
            objects.len(),
            mib(now - last),
            (now - last) / objects.len() as u64,
            mib(now)
        );
        last = now;
    }
    let pod = cluster.pending.first().expect("a pending pod");
    let status = engine.prefilter(pod);
    assert!(status.is_success(), "prefilter of {pod}: {status}");
    let mut step = |what: &str, e: &mut dyn sharing_affinity_host::engine::PluginRuntime| {
        let now = memory(e);
        println!(
            "{what:>22}: +{:.1} MiB, {:.1} MiB in all",
            mib(now - last),
            mib(now)
        );
        last = now;
    };
    step("first PreFilter", engine.as_mut());
    // The rest of that cycle: what a cycle holds on top of the stored objects.
    let feasible: Vec<String> = cluster
        .nodes
        .iter()
        .filter(|n| engine.filter(n).is_success())
        .cloned()
        .collect();
    step("Filter on every node", engine.as_mut());
    let status = engine.prescore(&feasible);
    assert!(status.is_success(), "prescore of {pod}: {status}");
    for node in &feasible {
        engine.score(node).expect("score of a feasible node");
    }
    step("PreScore and Score", engine.as_mut());
    let node = feasible.first().expect("a feasible node");
    engine.reserve(node).expect("reserve");
    engine.bind(pod, node).expect("bind");
    step("Reserve and Bind", engine.as_mut());
}
