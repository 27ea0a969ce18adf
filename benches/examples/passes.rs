//! The first Filter of a cycle against a repeated one: per cycle, PreFilter, then Filter on every
//! node twice (each pass timed), then, unless `bare`, the rest of the cycle (PreScore, Score on
//! the feasible nodes, Reserve and Unreserve on the best, timed together). Criterion's `filter`
//! bench measures repeated passes, the `cycle` bench first passes: this shows the difference
//! and whether the rest of the cycle causes it. Both passes' verdicts are checked equal.
//!
//! ```text
//! cargo build --release -p sharing-affinity-benches --example passes
//! taskset -c 0 target/release/examples/passes 5000 8 10 component        # full cycles
//! taskset -c 0 target/release/examples/passes 5000 8 10 component bare   # PreFilter + 2 passes
//! ```
//!
//! Arguments: nodes (1000), devices per node (8), rounds (10), engine (`component`), and
//! optionally `bare`.

use std::time::{Duration, Instant};

use sharing_affinity_benches::{cycle, engine_named, filter_codes, finish_cycle, generated, load_checked};
use sharing_affinity_core::Code;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.to_string());
    let nodes: usize = arg(0, "1000").parse().expect("nodes: a number");
    let devices: usize = arg(1, "8").parse().expect("devices per node: a number");
    let rounds: u32 = arg(2, "10").parse().expect("rounds: a number");
    let name = arg(3, "component");
    let bare = args.get(4).is_some_and(|a| a == "bare");
    let g = generated(nodes, devices);
    let mut engine = engine_named(&name, &g.config);
    load_checked(engine.as_mut(), &g.cluster);
    cycle(engine.as_mut(), &g.pod, &g.cluster.nodes);
    let mut t = [Duration::ZERO; 4];
    for _ in 0..rounds {
        let s = Instant::now();
        let status = engine.prefilter(&g.pod);
        t[0] += s.elapsed();
        assert!(status.is_success(), "prefilter: {status}");
        let s = Instant::now();
        let first = filter_codes(engine.as_mut(), &g.cluster.nodes);
        t[1] += s.elapsed();
        let s = Instant::now();
        let second = filter_codes(engine.as_mut(), &g.cluster.nodes);
        t[2] += s.elapsed();
        assert_eq!(
            first, second,
            "the second pass's verdicts differ from the first's"
        );
        if !bare {
            let s = Instant::now();
            let feasible: Vec<String> = first
                .iter()
                .filter(|(_, c)| *c == Code::Success)
                .map(|(n, _)| n.clone())
                .collect();
            assert!(
                finish_cycle(engine.as_mut(), &g.pod, &feasible).is_some(),
                "no feasible node"
            );
            t[3] += s.elapsed();
        }
    }
    let per_node = |d: Duration| d.as_secs_f64() * 1e6 / f64::from(rounds) / nodes as f64;
    let per_cycle = |d: Duration| d.as_secs_f64() * 1e6 / f64::from(rounds);
    println!(
        "{} {name}{}: prefilter {:.1} µs | first pass {:.3} µs/node | second pass {:.3} µs/node | rest {:.1} µs",
        g.label,
        if bare { " bare" } else { "" },
        per_cycle(t[0]),
        per_node(t[1]),
        per_node(t[2]),
        per_cycle(t[3]),
    );
}
