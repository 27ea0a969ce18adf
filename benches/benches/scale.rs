//! The plugin at cluster scale, on generated clusters (`sharing_affinity_host::generate`, the
//! default `nic` profile), for each engine: groups `native`, `component` and `kswe` run the same
//! benches over the same inputs, so the wasm overhead is a subtraction.
//!
//! ```text
//! cargo bench -p sharing-affinity-benches --bench scale                 # full run
//! SA_BENCH_NODES=100,1000 cargo bench -p sharing-affinity-benches --bench scale
//! SA_BENCH_QUICK=1 cargo bench -p sharing-affinity-benches --bench scale -- --test   # CI smoke run
//! ```
//!
//! Benches (`<group>/<bench>/<size>`), each checking its result inside the loop:
//! - `filter/<N>x<D>`: one Filter call per iteration, cycling through the nodes, its code checked
//!   against the native engine's (N×8 for every size, and 100×32; locks from running pods);
//! - `prefilter-steady/<N>`: PreFilter of the same pod again (after a first cycle);
//! - `prefilter-cold/<N>`: the first PreFilter after loading the cluster (the load is not timed);
//! - `cycle/<N>`: PreFilter, Filter on every node, Score on the feasible ones, Reserve on the
//!   best, then Unreserve; the chosen node is checked against the native engine's;
//! - `events/<N>`: a batch of 100 object events (50 ResourceSlices with a changed attribute, 50
//!   allocated ResourceClaims) and the PreFilter that follows (the largest size only);
//! - `instantiate`: a configured plugin instance (native: `Plugin::new`; component: InstancePre
//!   to a configured instance; kswe: a KSWE host with its first guest instance);
//! - `load/<N>`: loading the whole cluster into a fresh instance (the largest size only).
//!
//! Sample sizes: 20 samples for Filter and steady PreFilter, 10 (criterion's minimum, one
//! iteration per sample) for the cold and load benches, whose setup loads a whole cluster.

use std::time::{Duration, Instant};

use criterion::{
    BenchmarkGroup, Criterion, SamplingMode, criterion_group, criterion_main, measurement::WallTime,
};
use sharing_affinity_benches::{Generated, cycle, filter_codes, generated, load_checked, quick, scale_nodes};
use sharing_affinity_core::object::{Object, parse_objects};
use sharing_affinity_host::artifact;
use sharing_affinity_host::component::{ComponentPlugin, Limits};
use sharing_affinity_host::engine::PluginRuntime;
use sharing_affinity_host::kswe::{KsweEngine, KsweModule};
use sharing_affinity_host::native;

/// A configured engine from a plugin configuration.
type MakeEngine = Box<dyn Fn(&str) -> Box<dyn PluginRuntime>>;

/// Makes fresh engines of one kind.
struct Maker {
    group: &'static str,
    make: MakeEngine,
}

fn makers() -> Vec<Maker> {
    let component =
        ComponentPlugin::from_file(&artifact::default_component().expect("building the component"))
            .expect("compiling the component");
    let wasm = artifact::read_kswe_module(&artifact::default_kswe_module().expect("building the KSWE guest"))
        .expect("reading the KSWE guest");
    let kswe = KsweModule::new(&wasm).expect("compiling the KSWE guest");
    vec![
        Maker {
            group: "native",
            make: Box::new(|config| Box::new(native::plugin(config).expect("native engine"))),
        },
        Maker {
            group: "component",
            make: Box::new(move |config| {
                Box::new(
                    component
                        .instantiate(config, Limits::default())
                        .expect("component engine"),
                )
            }),
        },
        Maker {
            group: "kswe",
            make: Box::new(move |config| {
                Box::new(KsweEngine::from_module(&kswe, config).expect("KSWE engine"))
            }),
        },
    ]
}

/// The reference answers, from the native engine: filter codes of every node and the node the
/// cycle chooses.
struct Reference {
    codes: Vec<(String, sharing_affinity_core::Code)>,
    chosen: Option<String>,
}

fn reference(g: &Generated) -> Reference {
    let mut engine = native::plugin(&g.config).expect("native engine");
    load_checked(&mut engine, &g.cluster);
    let chosen = cycle(&mut engine, &g.pod, &g.cluster.nodes);
    assert!(engine.prefilter(&g.pod).is_success());
    let codes = filter_codes(&mut engine, &g.cluster.nodes);
    Reference { codes, chosen }
}

/// A loaded engine, after one full cycle (steady state).
fn ready(maker: &Maker, g: &Generated) -> Box<dyn PluginRuntime> {
    let mut engine = (maker.make)(&g.config);
    load_checked(engine.as_mut(), &g.cluster);
    cycle(engine.as_mut(), &g.pod, &g.cluster.nodes);
    engine
}

fn bench_filter(group: &mut BenchmarkGroup<'_, WallTime>, maker: &Maker, g: &Generated, r: &Reference) {
    let mut engine = ready(maker, g);
    assert!(engine.prefilter(&g.pod).is_success());
    group.bench_function(format!("filter/{}", g.label), |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for i in 0..iters as usize {
                let (node, code) = &r.codes[i % r.codes.len()];
                let status = engine.filter(node);
                assert_eq!(status.code, *code, "filter on {node}: {status}");
            }
            start.elapsed()
        })
    });
}

/// Times `run` on a fresh, loaded engine per iteration; the load is not timed.
fn fresh_each(maker: &Maker, g: &Generated, iters: u64, run: &dyn Fn(&mut dyn PluginRuntime)) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let mut engine = (maker.make)(&g.config);
        load_checked(engine.as_mut(), &g.cluster);
        let start = Instant::now();
        run(engine.as_mut());
        total += start.elapsed();
    }
    total
}

/// 100 object events: 50 device slices with a changed attribute (alternating between two
/// versions, so every batch changes them) and 50 allocated claims, re-applied.
fn event_batches(g: &Generated) -> [Vec<Object>; 2] {
    let slices: Vec<&Object> = g
        .cluster
        .objects
        .iter()
        .filter(|o| matches!(o, Object::ResourceSlice(s) if !s.spec.devices.is_empty()))
        .take(50)
        .collect();
    let claims: Vec<Object> = g
        .cluster
        .objects
        .iter()
        .filter(|o| matches!(o, Object::ResourceClaim(c) if c.status.allocation.is_some()))
        .take(50)
        .cloned()
        .collect();
    assert_eq!(
        slices.len() + claims.len(),
        100,
        "the cluster is large enough for 100 events"
    );
    [1, 2].map(|version| {
        let mut batch: Vec<Object> = slices
            .iter()
            .map(|s| {
                let mut json = s.to_json();
                for d in json["spec"]["devices"].as_array_mut().expect("devices") {
                    d["attributes"]["networking.example.com/firmware"] =
                        serde_json::json!({"string": format!("28.{version}")});
                }
                parse_objects(&json.to_string()).expect("slice").objects.remove(0)
            })
            .collect();
        batch.extend(claims.iter().cloned());
        batch
    })
}

fn scale(c: &mut Criterion) {
    let sizes = scale_nodes();
    let largest = *sizes.iter().max().expect("at least one size");
    let makers = makers();
    let mut inputs: Vec<(Generated, Reference)> = Vec::new();
    for &n in &sizes {
        let g = generated(n, 8);
        let r = reference(&g);
        inputs.push((g, r));
    }
    let wide = generated(if quick() { 50 } else { 100 }, 32);
    let wide_ref = reference(&wide);
    for maker in &makers {
        let mut group = c.benchmark_group(maker.group);
        group
            .sample_size(20)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(3));
        bench_filter(&mut group, maker, &wide, &wide_ref);
        for (g, r) in &inputs {
            bench_filter(&mut group, maker, g, r);
            let nodes = g.cluster.nodes.len();
            let mut engine = ready(maker, g);
            group.bench_function(format!("prefilter-steady/{nodes}"), |b| {
                b.iter(|| assert!(engine.prefilter(&g.pod).is_success()))
            });
            group.bench_function(format!("cycle/{nodes}"), |b| {
                b.iter(|| assert_eq!(cycle(engine.as_mut(), &g.pod, &g.cluster.nodes), r.chosen))
            });
            if nodes == largest {
                let batches = event_batches(g);
                let mut k = 0;
                group.bench_function(format!("events/{nodes}"), |b| {
                    b.iter(|| {
                        k += 1;
                        let rejected = engine.load(&batches[k % 2]).expect("events apply");
                        assert!(rejected.is_empty(), "{rejected:?}");
                        assert!(engine.prefilter(&g.pod).is_success());
                    })
                });
            }
            drop(engine);
            group.sampling_mode(SamplingMode::Flat).sample_size(10);
            group.bench_function(format!("prefilter-cold/{nodes}"), |b| {
                b.iter_custom(|iters| {
                    fresh_each(maker, g, iters, &|e| assert!(e.prefilter(&g.pod).is_success()))
                })
            });
            if nodes == largest {
                group.bench_function(format!("load/{nodes}"), |b| {
                    b.iter_custom(|iters| {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            let mut engine = (maker.make)(&g.config);
                            let start = Instant::now();
                            load_checked(engine.as_mut(), &g.cluster);
                            total += start.elapsed();
                        }
                        total
                    })
                });
            }
            group.sampling_mode(SamplingMode::Auto).sample_size(20);
        }
        group.bench_function("instantiate", |b| {
            b.iter(|| {
                let mut engine = (maker.make)(&wide.config);
                assert!(engine.prefilter("batch/absent").code != sharing_affinity_core::Code::Success);
            })
        });
        group.finish();
    }
}

criterion_group!(benches, scale);
criterion_main!(benches);
