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

use sharing_affinity_benches::{cycle, filter_codes, generated, load_checked};
use sharing_affinity_core::Code;
use sharing_affinity_host::artifact;
use sharing_affinity_host::component::{ComponentPlugin, Limits};
use sharing_affinity_host::engine::Engine;
use sharing_affinity_host::kswe::{KsweEngine, KsweModule};
use sharing_affinity_host::native::NativeEngine;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.to_string());
    let nodes: usize = arg(0, "500").parse().expect("nodes: a number");
    let devices: usize = arg(1, "8").parse().expect("devices per node: a number");
    let engine_name = arg(2, "native");
    let rounds: usize = arg(3, "5").parse().expect("rounds: a number");

    let g = generated(nodes, devices);
    let mut engine: Box<dyn Engine> = match engine_name.as_str() {
        "native" => Box::new(NativeEngine::new(&g.config).expect("native engine")),
        "component" => {
            let path = artifact::default_component().expect("building the component");
            let plugin = ComponentPlugin::from_file(&path).expect("compiling the component");
            Box::new(
                plugin
                    .instantiate(&g.config, Limits::default())
                    .expect("component engine"),
            )
        }
        "kswe" => {
            let path = artifact::default_kswe_module().expect("building the KSWE guest");
            let wasm = artifact::read_kswe_module(&path).expect("reading the KSWE guest");
            let module = KsweModule::new(&wasm).expect("compiling the KSWE guest");
            Box::new(KsweEngine::from_module(&module, &g.config).expect("KSWE engine"))
        }
        other => panic!("engine {other}: expected native, component or kswe"),
    };
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
fn filter_pass(engine: &mut dyn Engine, expected: &[(String, Code)]) {
    for (node, code) in expected {
        let status = engine.filter(node);
        assert_eq!(status.code, *code, "filter on {node}: {status}");
    }
}
