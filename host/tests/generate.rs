//! The workload generator: deterministic for a seed, and every generated cluster replays with no
//! rejected object and every pending pod decided; the sharing profiles really share devices, the
//! plain profile never does, and extractors in the configuration decide as extractors in metadata
//! slices do. With [`Shapes`] off (the default) the generator's output is pinned byte for byte by
//! golden files (`host/tests/golden/generate/`; `AFFINITY_BLESS=1` rewrites them).

use std::collections::HashMap;

use sharing_affinity_host::generate::{Profile, Shapes, Spec, Variant, Workload, generate};
use sharing_affinity_host::native;
use sharing_affinity_host::replay::{Cluster, Replay, replay};
use sharing_affinity_host::simulate::simulate;

fn small(profile: Profile, seed: u64) -> Spec {
    Spec {
        pods: 40,
        profile,
        seed,
        groups: 5,
        ..Spec::new(12, 4)
    }
}

fn run(cluster: &str, config: &str) -> Replay {
    let cluster = Cluster::parse(cluster).expect("generated JSON parses");
    let mut engine = native::plugin(config).expect("generated config is valid");
    replay(&mut engine, &cluster, &mut || {}).expect("replay runs")
}

/// Every pod is bound, or every node has a failing status for it; nothing errors or is rejected
/// ([`Replay::undecided`]).
fn assert_decided(r: &Replay, what: &str) {
    if let Some(e) = r.undecided() {
        panic!("{what}: {e}");
    }
    // And an unbound pod has the status of at least one node (Filter, or PreFilter per node).
    for p in r.pods.iter().filter(|p| p.node.is_none()) {
        assert!(
            !p.nodes.is_empty(),
            "{what}: {} unbound with no node status",
            p.pod
        );
    }
}

/// Claims per device at the end: the running pods' and the replay's allocations.
fn holders(w: &Workload, r: &Replay) -> HashMap<String, usize> {
    let mut count: HashMap<String, usize> = HashMap::new();
    for p in &w.running {
        *count
            .entry(format!("{}/{}", w.node_name(p.node), w.device_name(p.device)))
            .or_default() += 1;
    }
    for p in &r.pods {
        for a in &p.allocations {
            for d in &a.allocation.devices.results {
                *count.entry(format!("{}/{}", d.pool, d.device)).or_default() += 1;
            }
        }
    }
    count
}

#[test]
fn the_same_seed_gives_the_same_bytes_and_another_seed_does_not() {
    for profile in [Profile::Nic, Profile::Gpu, Profile::Plain] {
        let a = generate(&small(profile, 7)).unwrap();
        let b = generate(&small(profile, 7)).unwrap();
        let c = generate(&small(profile, 8)).unwrap();
        assert_eq!(a.cluster, b.cluster, "{profile:?}");
        assert_ne!(a.cluster, c.cluster, "{profile:?}");
    }
}

#[test]
fn every_profile_and_seed_replays_with_all_pods_decided() {
    for profile in [
        Profile::Nic,
        Profile::Gpu,
        Profile::Fpga,
        Profile::Rdma,
        Profile::Plain,
    ] {
        for seed in 1..=3 {
            let g = generate(&small(profile, seed)).unwrap();
            let r = run(&g.cluster, &g.config);
            let what = format!("{profile:?} seed {seed}");
            assert_decided(&r, &what);
            assert_eq!(r.pods.len(), 40, "{what}");
            let shared = holders(&g.workload, &r).values().filter(|&&n| n > 1).count();
            if profile == Profile::Plain {
                assert_eq!(shared, 0, "{what}: plain devices are never shared");
                // 48 devices, 24 held by running pods: exactly 24 of the 40 pending pods fit.
                let bound = r.pods.iter().filter(|p| p.node.is_some()).count();
                assert_eq!(bound, 24, "{what}");
            } else {
                assert!(r.pods.iter().filter(|p| p.node.is_some()).count() >= 30, "{what}");
            }
        }
    }
}

#[test]
fn pending_pods_share_devices_in_the_default_profile() {
    let spec = Spec {
        pods: 60,
        ..Spec::new(10, 8)
    };
    let g = generate(&spec).unwrap();
    let r = run(&g.cluster, &g.config);
    assert_decided(&r, "nic");
    assert!(r.pods.iter().all(|p| p.node.is_some()), "all 60 fit");
    // Pending pods land on devices a running pod of their group already holds.
    let running: HashMap<String, usize> = g
        .workload
        .running
        .iter()
        .map(|p| {
            (
                format!(
                    "{}/{}",
                    g.workload.node_name(p.node),
                    g.workload.device_name(p.device)
                ),
                p.group,
            )
        })
        .collect();
    let joined = r
        .pods
        .iter()
        .enumerate()
        .filter(|(k, p)| {
            p.allocations.iter().any(|a| {
                a.allocation.devices.results.iter().any(|d| {
                    running.get(&format!("{}/{}", d.pool, d.device)) == Some(&g.workload.pending[*k])
                })
            })
        })
        .count();
    assert!(joined >= 30, "only {joined} of 60 pods joined a locked device");
    // And never a device of another group.
    for (k, p) in r.pods.iter().enumerate() {
        for a in &p.allocations {
            for d in &a.allocation.devices.results {
                if let Some(g2) = running.get(&format!("{}/{}", d.pool, d.device)) {
                    assert_eq!(
                        *g2, g.workload.pending[k],
                        "{} joined another group's device",
                        p.pod
                    );
                }
            }
        }
    }
}

#[test]
fn extractors_in_config_decide_as_extractors_in_metadata_slices() {
    for keys in [1, 3] {
        let spec = Spec {
            affinity_keys: keys,
            burst: 3,
            ..small(Profile::Rdma, 11)
        };
        let in_slices = generate(&spec).unwrap();
        let in_config = generate(&Spec {
            extractors_in_config: true,
            ..spec.clone()
        })
        .unwrap();
        assert!(in_slices.config.is_empty() && !in_config.config.is_empty());
        assert!(!in_config.cluster.contains("sharingAffinity"));
        let a = run(&in_slices.cluster, &in_slices.config);
        let b = run(&in_config.cluster, &in_config.config);
        let nodes = |r: &Replay| r.pods.iter().map(|p| p.node.clone()).collect::<Vec<_>>();
        assert_eq!(nodes(&a), nodes(&b), "{keys} keys");
    }
}

#[test]
fn the_workaround_variant_loads_and_simulate_accounts_for_every_pod() {
    let w = Workload::new(&small(Profile::Nic, 3)).unwrap();
    let r = run(&w.render(Variant::Workaround).unwrap(), "");
    assert_decided(&r, "workaround");
    assert!(w.render(Variant::Workaround).unwrap().contains("/group"));

    let spec = Spec {
        burst: 8,
        running: 0,
        ..small(Profile::Nic, 3)
    };
    let s = simulate(&spec, 4).unwrap();
    for arm in [&s.native, &s.workaround] {
        assert_eq!(arm.scheduled + arm.unschedulable, 40, "{}", arm.name);
        assert_eq!(
            arm.attempts,
            40 + arm.failed_cycles - arm.unschedulable,
            "{}",
            arm.name
        );
    }
    assert_eq!(s.native.slice_updates + s.native.contraction_updates, 0);
    assert!(s.workaround.slice_updates > 0, "the driver opened devices");
    // Runs of 8 pods per group and a driver reacting every 4 attempts: the workaround opens more
    // devices than native affinity, which packs each group.
    assert!(
        s.workaround.devices_opened > s.native.devices_opened,
        "{:?} vs {:?}",
        s.workaround,
        s.native
    );
}

/// Small specs with [`Shapes`] off, one per profile and option: their output must stay byte for
/// byte what it was before shapes existed (the golden files were checked against the generator of
/// the commit before shapes were added), so that every recorded figure and test built on the
/// default generator keeps its meaning.
fn golden_cases() -> Vec<(&'static str, Spec, Variant)> {
    let nic = Spec {
        pods: 6,
        running: 4,
        affinity_keys: 2,
        groups: 3,
        seed: 7,
        ..Spec::new(3, 3)
    };
    vec![
        ("nic", nic.clone(), Variant::Native),
        ("nic-workaround", nic, Variant::Workaround),
        (
            "gpu",
            Spec {
                pods: 5,
                profile: Profile::Gpu,
                seed: 11,
                ..Spec::new(2, 4)
            },
            Variant::Native,
        ),
        (
            "fpga-config-burst",
            Spec {
                pods: 6,
                groups: 2,
                burst: 2,
                extractors_in_config: true,
                profile: Profile::Fpga,
                seed: 3,
                ..Spec::new(2, 2)
            },
            Variant::Native,
        ),
        (
            "rdma-3-keys",
            Spec {
                pods: 4,
                affinity_keys: 3,
                groups: 4,
                profile: Profile::Rdma,
                seed: 5981,
                ..Spec::new(2, 3)
            },
            Variant::Native,
        ),
        (
            "plain",
            Spec {
                pods: 4,
                profile: Profile::Plain,
                seed: 2,
                ..Spec::new(2, 2)
            },
            Variant::Native,
        ),
    ]
}

#[test]
fn without_shapes_the_generator_writes_the_golden_bytes() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/generate");
    let bless = std::env::var_os("AFFINITY_BLESS").is_some_and(|v| v == "1");
    for (name, spec, variant) in golden_cases() {
        assert_eq!(
            spec.shapes,
            Shapes::default(),
            "{name}: the default spec has no shapes"
        );
        let workload = Workload::new(&spec).unwrap();
        assert!(workload.drawn.is_none(), "{name}: nothing drawn without shapes");
        let files = [
            (format!("{name}.cluster.json"), workload.render(variant).unwrap()),
            (format!("{name}.config.json"), workload.config()),
        ];
        for (file, actual) in files {
            let path = dir.join(&file);
            if bless {
                std::fs::create_dir_all(&dir).unwrap();
                if actual.is_empty() {
                    let _ = std::fs::remove_file(&path);
                } else {
                    std::fs::write(&path, &actual).unwrap();
                }
                continue;
            }
            // An empty configuration has no file.
            let expected = match std::fs::read_to_string(&path) {
                Ok(text) => text,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
                Err(e) => panic!("{}: {e}", path.display()),
            };
            if actual != expected {
                // The cluster is one line of JSON: show where the bytes part.
                let at = actual
                    .bytes()
                    .zip(expected.bytes())
                    .position(|(a, b)| a != b)
                    .unwrap_or(actual.len().min(expected.len()));
                let around = |s: &str| {
                    let from = at.saturating_sub(120);
                    let to = (at + 120).min(s.len());
                    String::from_utf8_lossy(&s.as_bytes()[from..to]).into_owned()
                };
                panic!(
                    "{name}: the generator's output differs from {} at byte {at} (lengths {} and \
                     {}):\nexpected: ...{}...\nactual:   ...{}...\nWith shapes off the output \
                     must not change; if the change is intended, re-run with AFFINITY_BLESS=1",
                    path.display(),
                    expected.len(),
                    actual.len(),
                    around(&expected),
                    around(&actual)
                );
            }
        }
    }
}

/// Every count of `generate` and `simulate` is range-checked: a huge `--pods` (or `--burst`) is
/// a usage error naming the flag, exit status 2, never a panic or an allocation without bound.
#[test]
fn huge_counts_are_range_errors() {
    for (command, flag, value) in [
        ("generate", "--pods", "18446744073709551615"),
        ("generate", "--pods", "4294967296"),
        ("simulate", "--pods", "18446744073709551615"),
        ("generate", "--burst", "18446744073709551615"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sharing-affinity"))
            .args([command, "--nodes", "1", "--devices-per-node", "1", flag, value])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command} {flag} {value}: {stderr}");
        assert!(
            stderr.contains(flag) && stderr.contains("must be"),
            "{command} {flag} {value}: {stderr}"
        );
    }
}
