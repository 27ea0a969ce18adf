//! Per-node filter cost over the `testdata/*/` scenarios, for each engine.
//!
//! `cargo bench -p sharing-affinity-benches --bench filter` (add `-- --test` for a one-shot smoke run).
//! Groups: `native` (the core called directly), `component` (the WIT component in wasmtime) and
//! `core-module` (the KSWE core module in the KSWE host, objects through `sharing-affinity.dra/v1`);
//! the differences are the wasm and ABI overheads. Each group has `filter/<scenario>`: one filter call on one
//! node per iteration (cycling through the scenario's nodes), its verdict checked against
//! `expected.json` inside the loop; and `search/<scenario>` for the scenarios whose first pod
//! cannot fit (`search-*`: counting bounds, the step budget): a whole cycle per iteration
//! (PreFilter, then Filter on the node, which searches anew), the worst case a node can cost.

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use sharing_affinity_benches::{Scenario, cycle, filter_checked, prepare, scenarios};
use sharing_affinity_host::artifact;
use sharing_affinity_host::component::{ComponentPlugin, Limits};
use sharing_affinity_host::engine::PluginRuntime;
use sharing_affinity_host::kswe::{KsweEngine, KsweModule};
use sharing_affinity_host::native;

/// Times `iters` filter calls, cycling through the scenario's nodes.
fn filter_loop(engine: &mut dyn PluginRuntime, scenario: &Scenario, iters: u64) -> Duration {
    let nodes = &scenario.first_pod.1;
    let start = Instant::now();
    for i in 0..iters {
        let (node, code) = &nodes[(i as usize) % nodes.len()];
        filter_checked(engine, node, *code);
    }
    start.elapsed()
}

fn bench_group(
    c: &mut Criterion,
    group: &str,
    scenarios: &[Scenario],
    make: &dyn Fn(&Scenario) -> Box<dyn PluginRuntime>,
) {
    let mut g = c.benchmark_group(group);
    for scenario in scenarios {
        let mut engine = make(scenario);
        if let Err(why) = prepare(engine.as_mut(), scenario) {
            eprintln!("{group}: skipping {}: {why}", scenario.name);
            continue;
        }
        g.bench_function(BenchmarkId::new("filter", &scenario.name), |b| {
            b.iter_custom(|iters| filter_loop(engine.as_mut(), scenario, iters))
        });
        if scenario.name.starts_with("search-") {
            let (pod, nodes) = &scenario.first_pod;
            let nodes: Vec<String> = nodes.iter().map(|(n, _)| n.clone()).collect();
            g.bench_function(BenchmarkId::new("search", &scenario.name), |b| {
                b.iter(|| assert_eq!(cycle(engine.as_mut(), pod, &nodes), None, "{pod} fits nowhere"))
            });
        }
    }
    g.finish();
}

fn filter(c: &mut Criterion) {
    let scenarios = scenarios();
    bench_group(c, "native", &scenarios, &|s| {
        Box::new(native::plugin(&s.config).expect("native engine"))
    });

    let path = artifact::default_component().expect("building the plugin component");
    let plugin = ComponentPlugin::from_file(&path).expect("compiling the plugin component");
    bench_group(c, "component", &scenarios, &|s| {
        Box::new(
            plugin
                .instantiate(&s.config, Limits::default())
                .expect("component engine"),
        )
    });

    let path = artifact::default_kswe_module().expect("building the KSWE guest");
    let wasm = artifact::read_kswe_module(&path).expect("reading the KSWE guest");
    let module = KsweModule::new(&wasm).expect("compiling the KSWE guest");
    bench_group(c, "core-module", &scenarios, &|s| {
        Box::new(KsweEngine::from_module(&module, &s.config).expect("KSWE engine"))
    });
}

criterion_group!(benches, filter);
criterion_main!(benches);
