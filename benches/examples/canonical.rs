//! How long making an opaque configuration canonical takes (`json::canonical`, what every
//! ResourceClaim and DeviceClass configuration pays on load), for three shapes of about `MB`
//! megabytes: one long string (`flat`), the same string under `DEPTH` nested arrays (`deep`, the
//! shape that made a one-level-at-a-time reader scan the text once per level), and many small
//! objects (`wide`). The one-off measurement behind the canonical-configuration figures of
//! `docs/PERFORMANCE.md`.
//!
//! ```text
//! cargo build --release -p sharing-affinity-benches --example canonical
//! target/release/examples/canonical 10 127
//! ```
//!
//! Prints the median of 5 runs per shape. Every run's output is checked against the first's.

use std::time::{Duration, Instant};

use sharing_affinity_core::json::canonical;

fn main() {
    let mut args = std::env::args().skip(1);
    let mb: usize = args.next().map_or(1, |a| a.parse().expect("MB: a whole number"));
    let depth: usize = args
        .next()
        .map_or(127, |a| a.parse().expect("DEPTH: a whole number"));
    let leaf = format!("\"{}\"", "x".repeat(mb << 20));
    let shapes = [
        ("flat", format!("[{leaf}]")),
        (
            "deep",
            format!("{}{leaf}{}", "[".repeat(depth), "]".repeat(depth)),
        ),
        (
            "wide",
            format!(
                "[{}]",
                vec![r#"{"b":1,"a":[1.5,"x\n",null,true],"c":{"k":-2}}"#; mb * 20_000].join(",")
            ),
        ),
    ];
    for (name, text) in &shapes {
        let first = canonical(text).expect("canonical JSON");
        let mut times: Vec<Duration> = (0..5)
            .map(|_| {
                let start = Instant::now();
                let out = canonical(text).expect("canonical JSON");
                let took = start.elapsed();
                assert_eq!(out, first, "{name}: the same text every run");
                took
            })
            .collect();
        times.sort();
        println!(
            "{name}: {} bytes in, {} out, median {:.2} ms",
            text.len(),
            first.len(),
            times[2].as_secs_f64() * 1e3
        );
    }
}
