//! The workload generator: deterministic for a seed, and every generated cluster replays with no
//! rejected object and every pending pod decided; the sharing profiles really share devices, the
//! plain profile never does, and extractors in the configuration decide as extractors in metadata
//! slices do.

use std::collections::HashMap;

use sharing_affinity_host::generate::{Profile, Spec, Variant, Workload, generate};
use sharing_affinity_host::native::NativeEngine;
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
    let mut engine = NativeEngine::new(config).expect("generated config is valid");
    replay(&mut engine, &cluster, &mut || {}).expect("replay runs")
}

/// Every pod is bound, or every node has a failing status for it; nothing errors or is rejected.
fn assert_decided(r: &Replay, what: &str) {
    assert!(r.rejected.is_empty(), "{what}: rejected {:?}", r.rejected);
    for p in &r.pods {
        assert!(p.error.is_none(), "{what}: {}: {:?}", p.pod, p.error);
        if p.node.is_none() {
            assert!(
                !p.nodes.is_empty() && p.nodes.iter().all(|n| !n.status.is_success()),
                "{what}: {} unbound although a node passed",
                p.pod
            );
        }
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
