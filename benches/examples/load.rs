//! Load time and guest memory for one recorded cluster and one engine: the one-off measurement
//! behind `docs/PERFORMANCE.md` ("Load and guest memory"), quicker than the criterion
//! `load/<N>` bench.
//!
//! ```text
//! target/release/sharing-affinity generate --nodes 5000 --devices-per-node 8 --pods 2 --out /tmp/g5000m
//! cargo build --release -p sharing-affinity-benches --example load
//! target/release/examples/load /tmp/g5000m/cluster.json native
//! ```
//!
//! Arguments: the cluster file, the engine (`native`, `component` or `kswe`). Prints the time to
//! parse the file on the host, to load every object into a fresh instance, and the first PreFilter
//! of the first pending pod, with the guest's linear memory after the load and after that
//! PreFilter (wasm engines).

use std::path::Path;
use std::time::Instant;

use sharing_affinity_benches::{engine_named, load_checked};
use sharing_affinity_host::replay::Cluster;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let file = args
        .first()
        .expect("usage: load <cluster.json> [native|component|kswe]");
    let engine_name = args.get(1).map_or("native", String::as_str);
    let mut engine = engine_named(engine_name, "");
    let mib = |b: Option<u64>| b.map_or("-".to_string(), |b| format!("{:.1} MiB", b as f64 / 1048576.0));
    let start = Instant::now();
    let cluster = Cluster::from_file(Path::new(file)).expect("reading the cluster");
    let parse = start.elapsed();
    let start = Instant::now();
    load_checked(engine.as_mut(), &cluster);
    let load = start.elapsed();
    let after_load = engine.guest_memory_bytes();
    let pod = cluster.pending.first().expect("a pending pod");
    let start = Instant::now();
    let status = engine.prefilter(pod);
    let prefilter = start.elapsed();
    assert!(status.is_success(), "prefilter of {pod}: {status}");
    println!(
        "{engine_name}: {} objects; host parse {parse:.2?}; load {load:.2?} (guest memory {}); \
         first PreFilter {prefilter:.2?} (guest memory {})",
        cluster.objects.len(),
        mib(after_load),
        mib(engine.guest_memory_bytes()),
    );
}
