//! Cost of object events for the native core on the largest recorded cycle: what one claim event
//! and one slice event cost, each followed by the next PreFilter (which rebuilds the slice index
//! after a slice event), against PreFilter alone.
//!
//! `cargo bench -p sharing-affinity-benches --bench events` (add `-- --test` for a smoke run).

use criterion::{Criterion, criterion_group, criterion_main};
use sharing_affinity_benches::testdata_dir;
use sharing_affinity_core::object::{Object, parse_objects};
use sharing_affinity_core::{EventKind, Plugin};

fn bench_events(c: &mut Criterion) {
    let dir = testdata_dir().join("large-32-nodes-60-pods");
    let Ok(text) = std::fs::read_to_string(dir.join("cluster.json")) else {
        eprintln!("events: {} not found, skipping", dir.display());
        return;
    };
    let parsed = parse_objects(&text).expect("cluster.json parses");
    let slice = parsed
        .objects
        .iter()
        .find(|o| matches!(o, Object::ResourceSlice(s) if !s.spec.devices.is_empty()))
        .expect("a device slice")
        .to_json()
        .to_string();
    let claim = parsed
        .objects
        .iter()
        .find(|o| matches!(o, Object::ResourceClaim(c) if c.status.allocation.is_some()))
        .expect("an allocated claim")
        .to_json()
        .to_string();
    let pod = parsed
        .objects
        .iter()
        .find_map(|o| match o {
            Object::Pod(p) if p.spec.node_name.is_empty() => Some(o.key()),
            _ => None,
        })
        .expect("a pending pod");
    let mut plugin = Plugin::new("").expect("default config");
    assert!(plugin.load(&text).expect("loads").is_empty());
    assert!(plugin.prefilter(&pod).is_success());

    let mut g = c.benchmark_group("events/large-32-nodes-60-pods");
    g.bench_function("prefilter", |b| {
        b.iter(|| assert!(plugin.prefilter(&pod).is_success()))
    });
    g.bench_function("claim-update+prefilter", |b| {
        b.iter(|| {
            plugin.apply(EventKind::Update, &claim).expect("claim applies");
            assert!(plugin.prefilter(&pod).is_success());
        })
    });
    g.bench_function("slice-update+prefilter", |b| {
        b.iter(|| {
            plugin.apply(EventKind::Update, &slice).expect("slice applies");
            assert!(plugin.prefilter(&pod).is_success());
        })
    });
    g.finish();
}

criterion_group!(benches, bench_events);
criterion_main!(benches);
