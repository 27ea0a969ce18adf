//! `simulate`: native sharing affinity against the driver workaround, on one generated workload.
//!
//! Both arms drive the real plugin (the native engine) through real scheduling cycles
//! ([`crate::replay::schedule`]); only the driver is modelled.
//!
//! - **Native** ([`Variant::Native`]): the KEP-5981 extractors are in the metadata slices (or the
//!   configuration); the scheduler locks devices itself. Pods are scheduled once each in queue
//!   order; a pod that fits nowhere stays unschedulable (no event would make it fit).
//! - **Workaround** ([`Variant::Workaround`]): no extractors. A clean device is published as a
//!   placeholder (empty `group` attribute, room for exactly one claim); every claim selects the
//!   placeholders and the devices whose `group` is its own. The driver reconciles every
//!   `driver_lag` scheduling attempts (and whenever the scheduler's queue runs dry): each
//!   placeholder that received a claim is rewritten to the claim's group with its full capacity,
//!   and the node's slices are republished (one update per ResourceSlice, pool generation + 1).
//!   Pods that failed are retried after a reconcile that published something (kube-scheduler's
//!   queueing hint for a ResourceSlice change). Until the driver has rewritten a group's device, a
//!   second claim of the group cannot share it: it opens another placeholder, or fails.
//!
//! Then the groups leave, one after the other: every pod the simulation bound is deleted with its
//! claim. In the workaround, the driver contracts each opened device whose last claim left back to
//! a placeholder (more slice updates); natively, the lock simply clears.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Instant;

use serde_json::json;
use sharing_affinity_core::{ClaimAllocation, EventKind, Plugin};
use sharing_affinity_replay::cluster::add_objects;
use wasmtime::{Result, bail, format_err};

use crate::generate::{DeviceState, Spec, Variant, Workload};
use crate::native;
use crate::replay::{Cluster, Samples, schedule};

/// kube-scheduler's default initial and maximum pod backoff, in seconds.
const BACKOFF_INITIAL_S: u64 = 1;
const BACKOFF_MAX_S: u64 = 10;

/// What one arm did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Arm {
    /// `native` or `workaround`.
    pub name: &'static str,
    /// Scheduling cycles run (first tries and retries).
    pub attempts: usize,
    /// Cycles that ended with the pod not bound.
    pub failed_cycles: usize,
    /// Pending pods bound in the end.
    pub scheduled: usize,
    /// Pending pods never bound.
    pub unschedulable: usize,
    /// ResourceSlice objects the driver republished while pods were scheduled.
    pub slice_updates: usize,
    /// ResourceSlice objects republished when the groups left (contraction).
    pub contraction_updates: usize,
    /// Devices that were unused and got their first claim.
    pub devices_opened: usize,
    /// The largest number of devices in use at once.
    pub peak_devices_in_use: usize,
    /// Sum over pods of kube-scheduler's backoff before each retry (1 s doubling to 10 s): time
    /// pods spend waiting that no plugin speed-up removes.
    pub backoff_seconds: u64,
    /// Time in scheduling cycles, in nanoseconds.
    pub schedule_ns: u64,
    /// Time applying slice updates and deletions in the plugin, in nanoseconds.
    pub events_ns: u64,
}

impl Arm {
    /// All plugin time: cycles and events.
    pub fn total_ns(&self) -> u64 {
        self.schedule_ns + self.events_ns
    }
}

/// The result of [`simulate`].
#[derive(Clone, Debug)]
pub struct Simulation {
    /// The workload.
    pub spec: Spec,
    /// The workaround driver's reaction time, in scheduling attempts.
    pub driver_lag: usize,
    /// Native sharing affinity.
    pub native: Arm,
    /// The driver workaround.
    pub workaround: Arm,
}

/// Runs both arms on the workload `spec` describes.
pub fn simulate(spec: &Spec, driver_lag: usize) -> Result<Simulation> {
    if driver_lag == 0 {
        bail!("--driver-lag must be at least 1 (the driver reacts after a scheduling attempt)");
    }
    let workload = Workload::new(spec).map_err(|e| format_err!("{e}"))?;
    if workload.shares() < 2 {
        bail!("simulate needs a sharing profile (nic, gpu, fpga, rdma), not plain");
    }
    let native = Run::new(&workload, Variant::Native, usize::MAX)?.run()?;
    let workaround = Run::new(&workload, Variant::Workaround, driver_lag)?.run()?;
    Ok(Simulation {
        spec: spec.clone(),
        driver_lag,
        native,
        workaround,
    })
}

/// One arm in progress.
struct Run<'a> {
    w: &'a Workload,
    variant: Variant,
    lag: usize,
    engine: Plugin,
    cluster: Cluster,
    arm: Arm,
    /// Per node × device: the published state and the claims holding it.
    state: Vec<DeviceState>,
    holders: Vec<usize>,
    in_use: usize,
    /// Placeholders that received a claim, waiting for the driver: device index → group.
    to_open: BTreeMap<usize, usize>,
    generation: Vec<i64>,
    node_index: HashMap<String, usize>,
    device_index: HashMap<String, usize>,
    /// Pod → (group, claims it holds, device indexes).
    bound: BTreeMap<String, (usize, Vec<String>, Vec<usize>)>,
}

impl<'a> Run<'a> {
    fn new(w: &'a Workload, variant: Variant, lag: usize) -> Result<Run<'a>> {
        let text = w.render(variant).map_err(|e| format_err!("{e}"))?;
        let config = if variant == Variant::Native {
            w.config()
        } else {
            String::new()
        };
        let cluster = Cluster::parse(&text)?;
        let mut engine = native::plugin(&config)?;
        let mut rejected = cluster.invalid.clone();
        rejected.extend(add_objects(&mut engine, &cluster.objects));
        if !rejected.is_empty() {
            bail!(
                "the generated cluster has rejected objects: {}",
                rejected.join("; ")
            );
        }
        let initial = w.initial_devices();
        let state = initial
            .iter()
            .map(|&(g, used)| match variant {
                Variant::Native => DeviceState::Native,
                Variant::Workaround if used == 0 => DeviceState::Placeholder,
                Variant::Workaround => DeviceState::Opened(g),
            })
            .collect();
        let holders: Vec<usize> = initial.iter().map(|&(_, used)| used).collect();
        let dpn = w.spec.devices_per_node;
        Ok(Run {
            w,
            variant,
            lag,
            engine,
            cluster,
            arm: Arm {
                name: match variant {
                    Variant::Native => "native",
                    Variant::Workaround => "workaround",
                },
                ..Arm::default()
            },
            in_use: holders.iter().filter(|&&h| h > 0).count(),
            state,
            holders,
            to_open: BTreeMap::new(),
            generation: vec![1; w.spec.nodes],
            node_index: (0..w.spec.nodes).map(|n| (w.node_name(n), n)).collect(),
            device_index: (0..dpn).map(|d| (w.device_name(d), d)).collect(),
            bound: BTreeMap::new(),
        })
    }

    fn run(mut self) -> Result<Arm> {
        self.arm.peak_devices_in_use = self.in_use;
        let group_of: HashMap<String, usize> = (0..self.w.spec.pods)
            .map(|k| (self.w.pending_pod(k), self.w.pending[k]))
            .collect();
        let mut failures: HashMap<String, u32> = HashMap::new();
        let mut active: VecDeque<String> = self.cluster.pending.iter().cloned().collect();
        let mut parked: Vec<String> = Vec::new();
        let mut since_reconcile = 0;
        let nodes = self.cluster.nodes.clone();
        while let Some(pod) = active.pop_front() {
            self.arm.attempts += 1;
            let start = Instant::now();
            let outcome = schedule(&mut self.engine, &pod, &nodes, &mut Samples::default());
            self.arm.schedule_ns += elapsed(start);
            if let Some(error) = &outcome.error {
                bail!("scheduling {pod}: {error}");
            }
            if outcome.node.is_some() {
                let group = group_of.get(&pod).copied().unwrap_or(0);
                self.record_bound(&pod, group, &outcome.allocations)?;
            } else {
                self.arm.failed_cycles += 1;
                *failures.entry(pod.clone()).or_default() += 1;
                parked.push(pod);
            }
            since_reconcile += 1;
            if self.variant == Variant::Workaround && (since_reconcile >= self.lag || active.is_empty()) {
                since_reconcile = 0;
                if self.reconcile()? > 0 {
                    active.extend(parked.drain(..));
                }
            }
        }
        self.arm.scheduled = self.bound.len();
        self.arm.unschedulable = parked.len();
        self.arm.backoff_seconds = failures.values().map(|&f| backoff(f)).sum();
        self.leave()?;
        Ok(self.arm)
    }

    fn record_bound(&mut self, pod: &str, group: usize, allocations: &[ClaimAllocation]) -> Result<()> {
        let mut devices = Vec::new();
        for a in allocations {
            for r in &a.allocation.devices.results {
                let (Some(&n), Some(&d)) = (
                    self.node_index.get(r.pool.as_str()),
                    self.device_index.get(r.device.as_str()),
                ) else {
                    bail!("{pod}: allocated unknown device {}/{}", r.pool, r.device);
                };
                let idx = n * self.w.spec.devices_per_node + d;
                if self.holders[idx] == 0 {
                    self.arm.devices_opened += 1;
                    self.in_use += 1;
                    self.arm.peak_devices_in_use = self.arm.peak_devices_in_use.max(self.in_use);
                }
                self.holders[idx] += 1;
                if self.state[idx] == DeviceState::Placeholder {
                    self.to_open.insert(idx, group);
                }
                devices.push(idx);
            }
        }
        let claims = allocations.iter().map(|a| a.claim.clone()).collect();
        self.bound.insert(pod.to_string(), (group, claims, devices));
        Ok(())
    }

    /// The workaround driver: opens the placeholders that received a claim. Returns the number of
    /// nodes whose slices it republished.
    fn reconcile(&mut self) -> Result<usize> {
        let dpn = self.w.spec.devices_per_node;
        let mut nodes: Vec<usize> = Vec::new();
        for (idx, group) in std::mem::take(&mut self.to_open) {
            self.state[idx] = DeviceState::Opened(group);
            if nodes.last() != Some(&(idx / dpn)) {
                nodes.push(idx / dpn);
            }
        }
        for &n in &nodes {
            self.arm.slice_updates += self.republish(n)?;
        }
        Ok(nodes.len())
    }

    /// Publishes node `n`'s slices at the next pool generation; returns how many.
    fn republish(&mut self, n: usize) -> Result<usize> {
        let dpn = self.w.spec.devices_per_node;
        self.generation[n] += 1;
        let slices = self.w.node_slices(
            n,
            self.variant,
            &self.state[n * dpn..(n + 1) * dpn],
            self.generation[n],
        );
        let start = Instant::now();
        for s in &slices {
            self.engine
                .apply(EventKind::Update, &s.to_string())
                .map_err(|e| format_err!("slice update on {}: {e}", self.w.node_name(n)))?;
        }
        self.arm.events_ns += elapsed(start);
        Ok(slices.len())
    }

    /// The groups leave one after the other: the bound pods and their claims are deleted; the
    /// workaround driver turns each device left without claims back into a placeholder.
    fn leave(&mut self) -> Result<()> {
        let dpn = self.w.spec.devices_per_node;
        let mut by_group: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for (pod, (group, _, _)) in &self.bound {
            by_group.entry(*group).or_default().push(pod.clone());
        }
        for pods in by_group.values() {
            let mut emptied = Vec::new();
            for pod in pods {
                let (_, claims, devices) = self.bound[pod].clone();
                let start = Instant::now();
                for claim in &claims {
                    self.delete("ResourceClaim", claim)?;
                }
                self.delete("Pod", pod)?;
                self.arm.events_ns += elapsed(start);
                for idx in devices {
                    self.holders[idx] -= 1;
                    if self.holders[idx] == 0 {
                        self.in_use -= 1;
                        emptied.push(idx);
                    }
                }
            }
            if self.variant == Variant::Workaround {
                let mut nodes: Vec<usize> = Vec::new();
                emptied.sort_unstable();
                for idx in emptied {
                    if matches!(self.state[idx], DeviceState::Opened(_)) {
                        self.state[idx] = DeviceState::Placeholder;
                        if nodes.last() != Some(&(idx / dpn)) {
                            nodes.push(idx / dpn);
                        }
                    }
                }
                for n in nodes {
                    self.arm.contraction_updates += self.republish(n)?;
                }
            }
        }
        Ok(())
    }

    fn delete(&mut self, kind: &str, key: &str) -> Result<()> {
        let (ns, name) = key.split_once('/').unwrap_or(("", key));
        let object = json!({"kind": kind, "metadata": {"namespace": ns, "name": name}});
        self.engine
            .apply(EventKind::Delete, &object.to_string())
            .map_err(|e| format_err!("deleting {kind} {key}: {e}"))
    }
}

fn elapsed(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// kube-scheduler's backoff before the retries of a pod that failed `failures` times.
fn backoff(failures: u32) -> u64 {
    (0..failures)
        .map(|i| (BACKOFF_INITIAL_S << i.min(8)).min(BACKOFF_MAX_S))
        .sum()
}

/// The result as JSON.
pub fn to_json(s: &Simulation) -> String {
    let arm = |a: &Arm| {
        json!({
            "attempts": a.attempts, "failedCycles": a.failed_cycles, "scheduled": a.scheduled,
            "unschedulable": a.unschedulable, "sliceUpdates": a.slice_updates,
            "contractionUpdates": a.contraction_updates, "devicesOpened": a.devices_opened,
            "peakDevicesInUse": a.peak_devices_in_use, "backoffSeconds": a.backoff_seconds,
            "scheduleNs": a.schedule_ns, "eventsNs": a.events_ns, "totalNs": a.total_ns()
        })
    };
    let spec = &s.spec;
    serde_json::to_string_pretty(&json!({
        "workload": {"nodes": spec.nodes, "devicesPerNode": spec.devices_per_node, "pods": spec.pods,
                     "running": spec.running, "burst": spec.burst, "groups": spec.groups, "affinityKeys": spec.affinity_keys,
                     "profile": format!("{:?}", spec.profile).to_lowercase(), "seed": spec.seed},
        "driverLag": s.driver_lag,
        "native": arm(&s.native),
        "workaround": arm(&s.workaround),
    }))
    .unwrap_or_default()
}

/// The result as a table: one row per measure, native and workaround side by side.
pub fn table(s: &Simulation) -> String {
    let (n, w) = (&s.native, &s.workaround);
    let ms = |ns: u64| format!("{:.1} ms", ns as f64 / 1e6);
    let rows: Vec<(&str, String, String)> = vec![
        (
            "scheduling attempts",
            n.attempts.to_string(),
            w.attempts.to_string(),
        ),
        (
            "failed cycles",
            n.failed_cycles.to_string(),
            w.failed_cycles.to_string(),
        ),
        ("pods scheduled", n.scheduled.to_string(), w.scheduled.to_string()),
        (
            "pods unschedulable",
            n.unschedulable.to_string(),
            w.unschedulable.to_string(),
        ),
        (
            "slice updates (scheduling)",
            n.slice_updates.to_string(),
            w.slice_updates.to_string(),
        ),
        (
            "slice updates (groups leaving)",
            n.contraction_updates.to_string(),
            w.contraction_updates.to_string(),
        ),
        (
            "devices opened",
            n.devices_opened.to_string(),
            w.devices_opened.to_string(),
        ),
        (
            "peak devices in use",
            n.peak_devices_in_use.to_string(),
            w.peak_devices_in_use.to_string(),
        ),
        (
            "pod backoff before retries",
            format!("{} s", n.backoff_seconds),
            format!("{} s", w.backoff_seconds),
        ),
        ("plugin time: cycles", ms(n.schedule_ns), ms(w.schedule_ns)),
        (
            "plugin time: slice updates, deletions",
            ms(n.events_ns),
            ms(w.events_ns),
        ),
        ("plugin time: total", ms(n.total_ns()), ms(w.total_ns())),
    ];
    let spec = &s.spec;
    let mut out = format!(
        "workload: {} nodes x {} devices, {} running pods, {} pending pods in runs of {}, {} groups, {} key(s), \
         {:?}, seed {}; workaround driver reconciles every {} attempts\n",
        spec.nodes,
        spec.devices_per_node,
        spec.running,
        spec.pods,
        spec.burst,
        spec.groups,
        spec.affinity_keys,
        spec.profile,
        spec.seed,
        s.driver_lag
    );
    out.push_str(&format!("{:<34} {:>14} {:>14}\n", "", "native", "workaround"));
    for (label, a, b) in rows {
        out.push_str(&format!("{label:<34} {a:>14} {b:>14}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_the_cap() {
        assert_eq!(backoff(0), 0);
        assert_eq!(backoff(1), 1);
        assert_eq!(backoff(3), 1 + 2 + 4);
        assert_eq!(backoff(6), 1 + 2 + 4 + 8 + 10 + 10);
    }
}
