//! Where a whole scheduling cycle's time goes, per phase and engine: PreFilter, Filter on every
//! node, PreScore, Score on the feasible nodes, Reserve, Unreserve. Wall-clock means over `ROUNDS` cycles; every engine's
//! verdicts and chosen node are checked against the native engine's.
//!
//! ```text
//! cargo build --release -p sharing-affinity-benches --example phases
//! target/release/examples/phases 1000 8 20
//! ```
//!
//! Arguments: nodes (1000), devices per node (8), rounds (20), and optionally one engine
//! (`native`, `component` or `kswe`). Under callgrind, count one engine's cycles with
//! `--collect-atstart=no --toggle-collect='phases::one_cycle*'`.

use std::time::{Duration, Instant};

use sharing_affinity_benches::{cycle, engine_named, filter_codes, generated, load_checked};
use sharing_affinity_core::Code;
use sharing_affinity_host::engine::PluginRuntime;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.to_string());
    let nodes: usize = arg(0, "1000").parse().expect("nodes: a number");
    let devices: usize = arg(1, "8").parse().expect("devices per node: a number");
    let rounds: u32 = arg(2, "20").parse().expect("rounds: a number");
    let only = args.get(3).cloned();
    let g = generated(nodes, devices);
    let mut reference: Option<(Vec<(String, Code)>, String)> = None;
    println!("{}: mean per cycle over {rounds} cycles", g.label);
    for name in ["native", "component", "kswe"] {
        if only.as_ref().is_some_and(|o| o != name) {
            continue;
        }
        let mut engine = engine_named(name, &g.config);
        load_checked(engine.as_mut(), &g.cluster);
        cycle(engine.as_mut(), &g.pod, &g.cluster.nodes);
        let mut t = [Duration::ZERO; 6];
        for _ in 0..rounds {
            let (codes, node) = one_cycle(engine.as_mut(), &g.pod, &g.cluster.nodes, &mut t);
            match &reference {
                None => reference = Some((codes, node)),
                Some((codes0, node0)) => {
                    assert_eq!(&codes, codes0, "{name}: Filter verdicts differ from native");
                    assert_eq!(&node, node0, "{name}: chosen node differs from native");
                }
            }
        }
        let us = |d: Duration| d.as_secs_f64() * 1e6 / f64::from(rounds);
        println!(
            "{name:9} prefilter {:8.1} µs | filter {:8.1} µs | prescore {:7.1} µs | score {:7.1} µs | reserve {:6.1} µs | unreserve {:6.1} µs | total {:8.1} µs",
            us(t[0]),
            us(t[1]),
            us(t[2]),
            us(t[3]),
            us(t[4]),
            us(t[5]),
            us(t.iter().sum()),
        );
    }
}

/// One cycle, each phase's time added to `t`: the Filter verdicts and the chosen node.
#[inline(never)]
fn one_cycle(
    engine: &mut dyn PluginRuntime,
    pod: &str,
    nodes: &[String],
    t: &mut [Duration; 6],
) -> (Vec<(String, Code)>, String) {
    let mut phase = |i: usize, start: Instant| t[i] += start.elapsed();
    let s = Instant::now();
    let status = engine.prefilter(pod);
    phase(0, s);
    assert!(status.is_success(), "prefilter: {status}");
    let s = Instant::now();
    let codes = filter_codes(engine, nodes);
    phase(1, s);
    let feasible: Vec<String> = codes
        .iter()
        .filter(|(_, c)| *c == Code::Success)
        .map(|(n, _)| n.clone())
        .collect();
    assert!(!feasible.is_empty(), "no feasible node");
    let s = Instant::now();
    let status = engine.prescore(&feasible);
    phase(2, s);
    assert!(status.is_success(), "prescore: {status}");
    let s = Instant::now();
    let mut best: Option<(u32, &String)> = None;
    for node in &feasible {
        let score = engine.score(node).expect("score of a feasible node");
        if best.is_none_or(|(b, _)| score > b) {
            best = Some((score, node));
        }
    }
    phase(3, s);
    let (_, node) = best.expect("a feasible node");
    let s = Instant::now();
    engine.reserve(node).expect("reserve on the best node");
    phase(4, s);
    let s = Instant::now();
    engine.unreserve(pod, node).expect("unreserve after reserve");
    phase(5, s);
    (codes, node.clone())
}
