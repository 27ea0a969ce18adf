//! A Filter-path workload for profilers (`valgrind --tool=callgrind`, `perf`): one generated
//! cluster (the scale benches' `nic` profile), one full cycle to reach steady state, then
//! `ROUNDS` passes of Filter over every node for the first pending pod, with every verdict
//! checked against the first pass.
//!
//! ```text
//! cargo build --release -p sharing-affinity-benches --example profile
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='profile::filter_pass*' \
//!     target/release/examples/profile 500 8 native 5
//! ```
//!
//! Arguments: nodes (500), devices per node (8), engine (`native`, `component` or `kswe`),
//! rounds (5). Prints the mean Filter time per node.

use std::time::Instant;

use sharing_affinity_benches::{cycle, engine_named, filter_codes, generated, load_checked};
use sharing_affinity_core::Code;
use sharing_affinity_host::engine::PluginRuntime;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.to_string());
    let nodes: usize = arg(0, "500").parse().expect("nodes: a number");
    let devices: usize = arg(1, "8").parse().expect("devices per node: a number");
    let engine_name = arg(2, "native");
    let rounds: usize = arg(3, "5").parse().expect("rounds: a number");

    let g = generated(nodes, devices);
    let mut engine = engine_named(&engine_name, &g.config);
    load_checked(engine.as_mut(), &g.cluster);
    cycle(engine.as_mut(), &g.pod, &g.cluster.nodes);
    assert!(engine.prefilter(&g.pod).is_success());
    let expected = filter_codes(engine.as_mut(), &g.cluster.nodes);
    let feasible = expected.iter().filter(|(_, c)| *c == Code::Success).count();
    let start = Instant::now();
    for _ in 0..rounds {
        filter_pass(engine.as_mut(), &expected);
    }
    let per_node = start.elapsed() / (rounds * g.cluster.nodes.len()).max(1) as u32;
    println!(
        "{} {engine_name}: {feasible}/{} nodes feasible; Filter {per_node:?} per node (mean of {rounds} passes)",
        g.label,
        g.cluster.nodes.len()
    );
}

/// One Filter call per node, each verdict checked.
#[inline(never)]
fn filter_pass(engine: &mut dyn PluginRuntime, expected: &[(String, Code)]) {
    for (node, code) in expected {
        let status = engine.filter(node);
        assert_eq!(status.code, *code, "filter on {node}: {status}");
    }
}
