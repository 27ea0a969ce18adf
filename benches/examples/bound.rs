//! Reserve and Unreserve after the plugin itself has bound many pods: what a long-running
//! scheduler pays per cycle for the state its own Binds left (the affinity values Reserve fixed
//! stay known until the claim goes). Wall-clock mean of Reserve + Unreserve on the first feasible
//! node, over the last 20 pending pods, each `ROUNDS` times; the allocations are checked to be
//! non-empty.
//!
//! ```text
//! cargo build --release -p sharing-affinity-benches --example bound
//! target/release/examples/bound 4000 native 50
//! ```
//!
//! Arguments: pending pods (4000; the cluster has pods / 4 + 10 nodes × 8 devices and no running
//! pods, so all but the last 20 pods are bound first), the engine (`native`, `component` or
//! `kswe`), rounds (50). Under callgrind, count the timed calls with
//! `--collect-atstart=no --toggle-collect='bound::reserve_unreserve*'`.

use std::time::{Duration, Instant};

use sharing_affinity_benches::{engine_named, load_checked};
use sharing_affinity_host::engine::PluginRuntime;
use sharing_affinity_host::generate::{Spec, generate};
use sharing_affinity_host::replay::Cluster;

/// Pods left pending for the timed Reserve and Unreserve.
const TIMED_PODS: usize = 20;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.to_string());
    let pods: usize = arg(0, "4000").parse().expect("pods: a number");
    let name = arg(1, "native");
    let rounds: u32 = arg(2, "50").parse().expect("rounds: a number");
    assert!(pods > TIMED_PODS, "pods: more than {TIMED_PODS}");
    let spec = Spec {
        pods,
        running: 0,
        ..Spec::new(pods / 4 + 10, 8)
    };
    let generated = generate(&spec).expect("generating the cluster");
    let cluster = Cluster::parse(&generated.cluster).expect("the generated cluster parses");
    let mut engine = engine_named(&name, &generated.config);
    load_checked(engine.as_mut(), &cluster);
    let (to_bind, timed) = cluster.pending.split_at(cluster.pending.len() - TIMED_PODS);
    let mut bound = 0;
    for pod in to_bind {
        if !engine.prefilter(pod).is_success() {
            continue;
        }
        if let Some(node) = first_feasible(engine.as_mut(), &cluster.nodes) {
            engine.reserve(&node).expect("reserve on a feasible node");
            engine.bind(pod, &node).expect("bind after reserve");
            bound += 1;
        }
    }
    let mut total = Duration::ZERO;
    for _ in 0..rounds {
        for pod in timed {
            assert!(engine.prefilter(pod).is_success(), "prefilter of {pod}");
            let node = first_feasible(engine.as_mut(), &cluster.nodes).expect("a feasible node");
            let start = Instant::now();
            reserve_unreserve(engine.as_mut(), pod, &node);
            total += start.elapsed();
        }
    }
    let calls = f64::from(rounds) * TIMED_PODS as f64;
    println!(
        "{name}: {bound} pods bound; Reserve + Unreserve {:.1} µs (mean of {calls} calls)",
        total.as_secs_f64() * 1e6 / calls
    );
}

/// The first node in `nodes` that passes Filter for the prepared pod.
fn first_feasible(engine: &mut dyn PluginRuntime, nodes: &[String]) -> Option<String> {
    nodes.iter().find(|n| engine.filter(n).is_success()).cloned()
}

/// Reserve `pod` on `node`, checked, then Unreserve.
#[inline(never)]
fn reserve_unreserve(engine: &mut dyn PluginRuntime, pod: &str, node: &str) {
    let allocations = engine.reserve(node).expect("reserve on a feasible node");
    assert!(!allocations.is_empty(), "reserve on {node} allocated nothing");
    engine.unreserve(pod, node).expect("unreserve after reserve");
}
