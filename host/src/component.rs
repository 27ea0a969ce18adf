//! [`ComponentEngine`]: the plugin as a WIT component in wasmtime.
//!
//! Set-up runs once, in the order Engine → Component → Linker → InstancePre ([`ComponentPlugin`]);
//! every [`ComponentEngine`] instantiates from the shared `InstancePre` into its own `Store`. Each
//! call into the guest gets a time limit ([`Limits::time_per_call`], wasmtime epoch interruption),
//! the store a memory limit ([`Limits::memory_bytes`]), the engine a wasm stack limit
//! ([`Limits::max_wasm_stack`]); a status reason longer than [`Limits::max_status_reason_bytes`]
//! becomes an `Error` status saying so (see [`crate::limits`]).
//!
//! A trap (a guest panic, an out-of-bounds access or a garbage pointer in what it returns, a limit
//! hit) never ends the replay:
//! the call answers with an `Error` status carrying the trap message, and the engine replaces the
//! store and instance and restores the plugin's state. To restore, it keeps a journal of everything
//! that changed the state: the configuration, each batch of object events, and each bound pod with
//! its node and allocations. A fresh instance is configured, gets the same event batches, and runs
//! each bound pod's cycle again on the recorded node (prefilter, filter, reserve, bind); the
//! allocations must come out identical, or the restore fails with an error naming the pod. An
//! interrupted cycle is resumed too: its pod is prefiltered again and the nodes that passed filter
//! are filtered again (and its PreScore list sent again), so `score`, `reserve` and `bind` still
//! work after a trap in a later call.
//!
//! Per node, the engine calls the guest through the `nodes` interface's indexes: Filter once per
//! node, and PreScore with Score for every feasible node in a single `nodes.scores` call, whose
//! answers Score then reads; a Score for a node PreScore did not name goes to the guest alone.

use std::path::Path;
use std::time::Duration;

use sharing_affinity_core::contract::Scheduler;
use sharing_affinity_core::object::Object;
use sharing_affinity_core::{ClaimAllocation, Code as CoreCode, Status as CoreStatus};
use wasmtime::component::{Component, Linker};
use wasmtime::error::Context;
use wasmtime::{Config, Result, Store, Trap, bail, format_err};

use crate::bindings::sharing_affinity::plugin::types::{Code, DeviceResult, EventKind};
use crate::bindings::{self, Event, PluginPre};

/// [`PluginRuntime::load`] sends the objects in `update` calls of about this much JSON (1 MiB) each:
/// what one call copies into the guest's linear memory, which never shrinks.
pub const LOAD_BATCH_BYTES: usize = 1 << 20;
use crate::engine::PluginRuntime;
pub use crate::limits::Limits;
use crate::limits::{Exceeded, MemoryLimiter, exceeded};

/// The data each store carries: its memory limiter (which records the largest linear memory it
/// allowed).
pub struct HostState {
    limiter: MemoryLimiter,
}

/// A compiled, pre-linked plugin component, built once and shared by every engine instance.
#[derive(Clone)]
pub struct ComponentPlugin {
    engine: wasmtime::Engine,
    pre: PluginPre<HostState>,
    /// The wasm stack limit the component was compiled with.
    max_wasm_stack: usize,
}

impl ComponentPlugin {
    /// Compiles a component (or a core module built with wit-bindgen, encoded on the fly).
    pub fn from_file(path: &Path) -> Result<Self> {
        let bytes = crate::artifact::read_plugin(path)?;
        Self::from_bytes(&bytes).with_context(|| format!("loading plugin {}", path.display()))
    }

    /// Compiles a component from its binary, with the default wasm stack limit.
    pub fn from_bytes(component: &[u8]) -> Result<Self> {
        Self::from_bytes_with_limits(component, &Limits::default())
    }

    /// As [`ComponentPlugin::from_file`], compiled for `limits` (the wasm stack is fixed at compile
    /// time; [`ComponentPlugin::instantiate`] must then get the same `max_wasm_stack`).
    pub fn from_file_with_limits(path: &Path, limits: &Limits) -> Result<Self> {
        let bytes = crate::artifact::read_plugin(path)?;
        Self::from_bytes_with_limits(&bytes, limits)
            .with_context(|| format!("loading plugin {}", path.display()))
    }

    /// Compiles a component from its binary, for `limits`.
    pub fn from_bytes_with_limits(component: &[u8], limits: &Limits) -> Result<Self> {
        let mut config = Config::new();
        limits.configure(&mut config);
        let engine = wasmtime::Engine::new(&config)?;
        crate::limits::start_ticker(&engine);
        let component = Component::new(&engine, component).context("compiling the plugin component")?;
        let linker = Linker::<HostState>::new(&engine);
        let pre = linker
            .instantiate_pre(&component)
            .context("linking the plugin component")?;
        let pre =
            PluginPre::new(pre).context("the component does not export the sharing-affinity:plugin world")?;
        Ok(ComponentPlugin {
            engine,
            pre,
            max_wasm_stack: limits.max_wasm_stack,
        })
    }

    /// Instantiates and configures the plugin; `config` is its JSON configuration (empty = defaults).
    /// An invalid configuration is an error, as is a trap while configuring, and so are limits with
    /// another wasm stack than the component was compiled with.
    pub fn instantiate(&self, config: &str, limits: Limits) -> Result<ComponentEngine> {
        limits.check_stack(self.max_wasm_stack)?;
        let mut engine = ComponentEngine {
            plugin: self.clone(),
            limits,
            restore_limits: limits,
            config: config.to_string(),
            live: None,
            journal: Vec::new(),
            cycle: None,
            replacements: 0,
            now: None,
        };
        engine.live = Some(engine.fresh_instance()?);
        Ok(engine)
    }
}

/// A running instance and its store.
struct Live {
    store: Store<HostState>,
    plugin: bindings::Plugin,
    /// The guest's `nodes` index for each node name Filter or Score was called with.
    nodes: NodeIndexes,
    /// Which table of indexes `nodes` is: a number no other table of this process had (a fresh
    /// instance and every [`Live::forget`] start a new one), so that scores kept by index
    /// ([`Scored`]) never answer for a table they were not asked with.
    table: u64,
}

/// A new number for a table of node indexes ([`Live::table`]).
fn next_table() -> u64 {
    static TABLES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    TABLES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Node names in call order, in one buffer: a cycle's lists of nodes (thousands of names) cost
/// a copy of each name's bytes and one allocation to drop, not a shared pointer per name whose
/// reference count a 5,000-node cycle's end would touch on lines long out of cache.
#[derive(Default)]
struct NameList {
    text: String,
    ends: Vec<usize>,
}

impl NameList {
    fn push(&mut self, name: &str) {
        self.text.push_str(name);
        self.ends.push(self.text.len());
    }

    fn iter(&self) -> impl Iterator<Item = &str> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).map(|(start, &end)| &self.text[start..end])
    }

    /// The name at position `p`.
    fn get(&self, p: usize) -> Option<&str> {
        let end = *self.ends.get(p)?;
        let start = p.checked_sub(1).map_or(0, |q| self.ends[q]);
        self.text.get(start..end)
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn clear(&mut self) {
        self.text.clear();
        self.ends.clear();
    }
}

/// The guest's node indexes by name. The scheduler asks for the nodes in the same order cycle
/// after cycle (Filter over its node list, Score over the feasible ones), so a lookup first tries
/// the name after the one found last: the names sit in one buffer in the order they were indexed,
/// and that check reads the next bytes of it instead of a hash table's slot and a separately
/// allocated key, each a likely cache miss in a 5,000-node cycle. Other lookups go through a
/// table of positions hashed with Fx (node names are short).
#[derive(Default)]
struct NodeIndexes {
    /// The names in the order they were indexed.
    names: NameList,
    /// The guest's index of each name, by position in `names`.
    indexes: Vec<u32>,
    /// Positions in `names`, by the name's hash.
    by_name: hashbrown::HashTable<u32>,
    /// The position after the last name found.
    next: std::cell::Cell<usize>,
}

impl NodeIndexes {
    fn hash(name: &str) -> u64 {
        std::hash::BuildHasher::hash_one(&rustc_hash::FxBuildHasher, name)
    }

    /// The guest's index of `name`.
    fn get(&self, name: &str) -> Option<u32> {
        let guess = self.next.get();
        let p = if self.names.get(guess) == Some(name) {
            guess
        } else {
            let p = *self
                .by_name
                .find(Self::hash(name), |&p| self.names.get(p as usize) == Some(name))?;
            p as usize
        };
        self.next.set(p + 1);
        self.indexes.get(p).copied()
    }

    /// Records the guest's index of `name`, which [`NodeIndexes::get`] did not find.
    fn insert(&mut self, name: &str, index: u32) {
        let p = self.names.len();
        self.names.push(name);
        self.indexes.push(index);
        let names = &self.names;
        self.by_name.insert_unique(Self::hash(name), p as u32, |&q| {
            Self::hash(names.get(q as usize).unwrap_or_default())
        });
        self.next.set(p + 1);
    }

    fn len(&self) -> usize {
        self.indexes.len()
    }

    fn clear(&mut self) {
        self.names.clear();
        self.indexes.clear();
        self.by_name.clear();
        self.next.set(0);
    }
}

/// At most this many node names are indexed per instance; past it the guest's table is emptied
/// (`nodes.forget`) and names are indexed again as nodes are called (a bound on what nodes that
/// left the cluster can hold).
const MAX_NODE_INDEXES: usize = 1 << 16;

impl Live {
    /// The guest's index for the node named `name`, asked for on first use.
    fn node(&mut self, name: &str) -> Result<u32> {
        if let Some(index) = self.nodes.get(name) {
            return Ok(index);
        }
        if self.nodes.len() >= MAX_NODE_INDEXES {
            self.forget()?;
        }
        let nodes = self.plugin.sharing_affinity_plugin_nodes();
        let index = nodes.call_index(&mut self.store, name)?;
        self.nodes.insert(name, index);
        Ok(index)
    }

    /// Empties the guest's table of node names (`nodes.forget`) and the indexes kept here.
    fn forget(&mut self) -> Result<()> {
        self.plugin
            .sharing_affinity_plugin_nodes()
            .call_forget(&mut self.store)?;
        self.nodes.clear();
        self.table = next_table();
        Ok(())
    }

    /// Filter through the node's index: the status, with the reason when it is not a success.
    fn filter(&mut self, name: &str) -> Result<bindings::Status> {
        let node = self.node(name)?;
        let nodes = self.plugin.sharing_affinity_plugin_nodes();
        let code = nodes.call_filter(&mut self.store, node)?;
        self.with_reason(code)
    }

    /// PreScore with `names` and Score for each of them, in one `nodes.scores` call: the scores by
    /// name, or the status of the call that failed. A list longer than the table of indexes goes
    /// by name to the world's `prescore` instead, and gives no scores (Score asks per node).
    fn scores<S: AsRef<str>>(&mut self, names: &[S]) -> Result<Result<Option<Scored>, bindings::Status>> {
        if names.len() > MAX_NODE_INDEXES {
            let names: Vec<String> = names.iter().map(|n| n.as_ref().to_string()).collect();
            let status = self.plugin.call_prescore(&mut self.store, &names)?;
            return Ok(if status.code == Code::Success {
                Ok(None)
            } else {
                Err(status)
            });
        }
        // Every index of the call must come from one table: when the names could fill it, it
        // is emptied first, so that indexing them cannot empty it half-way through the list.
        if self.nodes.len() + names.len() > MAX_NODE_INDEXES {
            self.forget()?;
        }
        let mut indexes = Vec::with_capacity(names.len());
        let mut listed = NameList::default();
        for name in names {
            indexes.push(self.node(name.as_ref())?);
            listed.push(name.as_ref());
        }
        let nodes = self.plugin.sharing_affinity_plugin_nodes();
        match nodes.call_scores(&mut self.store, &indexes)? {
            Ok(scores) if scores.len() == indexes.len() => {
                let mut positions = vec![0; indexes.iter().max().map_or(0, |&i| i as usize + 1)];
                for (p, &i) in indexes.iter().enumerate() {
                    // Positions fit: the list is at most MAX_NODE_INDEXES long.
                    positions[i as usize] = u32::try_from(p + 1).unwrap_or(u32::MAX);
                }
                Ok(Ok(Some(Scored {
                    table: self.table,
                    nodes: listed,
                    scores,
                    positions,
                })))
            }
            Ok(scores) => Ok(Err(bindings::Status {
                code: Code::Error,
                reason: format!(
                    "the plugin returned {} scores for {} nodes from nodes.scores",
                    scores.len(),
                    indexes.len()
                ),
            })),
            Err(code) => self.with_reason(code).map(Err),
        }
    }

    /// Score through the node's index.
    fn score(&mut self, name: &str) -> Result<Result<u32, bindings::Status>> {
        let node = self.node(name)?;
        let nodes = self.plugin.sharing_affinity_plugin_nodes();
        match nodes.call_score(&mut self.store, node)? {
            Ok(score) => Ok(Ok(score)),
            Err(code) => self.with_reason(code).map(Err),
        }
    }

    /// A status for a code of the `nodes` interface, with `last-reason` read when it is not a
    /// success.
    fn with_reason(&mut self, code: Code) -> Result<bindings::Status> {
        let reason = match code {
            Code::Success => String::new(),
            _ => self
                .plugin
                .sharing_affinity_plugin_nodes()
                .call_last_reason(&mut self.store)?,
        };
        Ok(bindings::Status { code, reason })
    }
}

/// A state change the engine replays into a replacement instance.
enum Entry {
    /// A batch of object events.
    Events(Vec<Event>),
    /// The host's clock, set before a PreFilter or Bind (Unix seconds).
    Time(i64),
    /// A pod's PostFilter that deallocated `claim`, after Filter on `nodes`.
    Deallocated {
        pod: String,
        nodes: Vec<String>,
        claim: String,
    },
    /// A pod bound to a node, with the allocations `bind` returned.
    Bound {
        pod: String,
        node: String,
        allocations: Vec<ClaimAllocation>,
    },
    /// A bound pod whose wait for binding conditions failed (`unbind`).
    Unbound(String),
}

/// The scheduling cycle in progress.
struct Cycle {
    pod: String,
    /// Nodes that passed filter in this cycle, in call order.
    feasible: NameList,
    /// The answer of the cycle's `prescore` (`nodes.scores`), until a later Filter.
    scored: Option<Scored>,
}

/// The nodes a `prescore` named, and the scores `nodes.scores` gave them.
struct Scored {
    /// The table of node indexes the scores were asked with ([`Live::table`]).
    table: u64,
    /// The nodes in PreScore's order (duplicates kept: a restore sends the same list again).
    nodes: NameList,
    /// Their scores, in the same order.
    scores: Vec<u32>,
    /// By node index of that table: the position in `nodes`, plus one (0: not named).
    positions: Vec<u32>,
}

impl Scored {
    /// The score of the node at `index` of table `table`; `None` when PreScore did not name it
    /// or named it under another table (indexes are handed out again after [`Live::forget`] and
    /// in a replacement instance, so an index of another table may be another node).
    fn get(&self, table: u64, index: u32) -> Option<u32> {
        if table != self.table {
            return None;
        }
        let p = (*self.positions.get(index as usize)? as usize).checked_sub(1)?;
        self.scores.get(p).copied()
    }
}

/// One plugin instance in wasmtime, driven through [`PluginRuntime`] and the core's [`Scheduler`].
pub struct ComponentEngine {
    plugin: ComponentPlugin,
    /// Limits for calls.
    limits: Limits,
    /// Limits for (re)creating and restoring an instance: those given at instantiation.
    restore_limits: Limits,
    config: String,
    /// `None` after a trap whose restore failed; the next call tries again.
    live: Option<Live>,
    journal: Vec<Entry>,
    cycle: Option<Cycle>,
    replacements: usize,
    /// The time last given to the plugin ([`Scheduler::set_time`]); a wait for binding
    /// conditions advances it.
    now: Option<i64>,
}

impl ComponentEngine {
    /// How many times the instance was replaced after a trap.
    pub fn replacements(&self) -> usize {
        self.replacements
    }

    /// Changes the time limit of later calls (tests use `Duration::ZERO` to force a trap).
    /// Restoring an instance keeps the limits given at instantiation.
    pub fn set_time_per_call(&mut self, time: Duration) {
        self.limits.time_per_call = time;
    }

    /// The current limits.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Sends one batch of raw object events (`kind`, object JSON as the guest receives it, valid or
    /// not) through the component's `update` export, and journals it like [`PluginRuntime::load`]'s.
    /// Returns the events the plugin rejected, as (index in the batch, message); a trap is an
    /// `Error` status (the instance is then replaced and restored without this batch).
    pub fn update_events(
        &mut self,
        events: &[(sharing_affinity_core::EventKind, String)],
    ) -> Result<Vec<(u32, String)>, CoreStatus> {
        use sharing_affinity_core::EventKind as Kind;
        let events: Vec<Event> = events
            .iter()
            .map(|(kind, object)| Event {
                kind: match kind {
                    Kind::Add => EventKind::Add,
                    Kind::Update => EventKind::Update,
                    Kind::Delete => EventKind::Delete,
                },
                object: object.clone(),
            })
            .collect();
        let errors = self.call("update", |l| l.plugin.call_update(&mut l.store, &events))?;
        self.journal.push(Entry::Events(events));
        Ok(errors.into_iter().map(|e| (e.index, e.message)).collect())
    }

    /// Filter through the world's name-based `filter` export (the [`Scheduler`] calls go through
    /// the `nodes` interface's indexes); for comparing the two paths.
    pub fn filter_by_name(&mut self, node: &str) -> CoreStatus {
        self.call("filter", |l| l.plugin.call_filter(&mut l.store, node))
            .map(|s| self.checked(s, "filter"))
            .unwrap_or_else(|trap| trap)
    }

    /// `nodes.filter` with a raw node index, as a host that kept a stale or made-up index would
    /// call it; for tests of the guest's table of node names.
    pub fn filter_by_index(&mut self, index: u32) -> CoreStatus {
        self.call("filter", |l| {
            let code = l
                .plugin
                .sharing_affinity_plugin_nodes()
                .call_filter(&mut l.store, index)?;
            l.with_reason(code)
        })
        .map(|s| self.checked(s, "filter"))
        .unwrap_or_else(|trap| trap)
    }

    /// Empties the guest's table of node names (`nodes.forget`) and the engine's indexes, as the
    /// engine does past 65,536 names; later calls index the names again.
    pub fn forget_node_indexes(&mut self) -> Result<(), CoreStatus> {
        self.call("forget", Live::forget)
    }

    /// Score through the world's name-based `score` export; for comparing with [`Scheduler::score`].
    pub fn score_by_name(&mut self, node: &str) -> Result<u32, CoreStatus> {
        self.call("score", |l| l.plugin.call_score(&mut l.store, node))?
            .map_err(|s| self.checked(s, "score"))
    }

    /// A status from the guest; a reason longer than the limit makes it an `Error` saying so (the
    /// reason is then cut to its first 256 bytes).
    fn checked(&self, status: bindings::Status, what: &str) -> CoreStatus {
        let limit = self.limits.max_status_reason_bytes;
        if status.reason.len() <= limit {
            return core_status(status);
        }
        let len = status.reason.len();
        let mut cut = 256.min(len);
        while !status.reason.is_char_boundary(cut) {
            cut -= 1;
        }
        CoreStatus::error(format!(
            "{} in {what} (it begins {:?})",
            Exceeded::Reason { limit, len },
            &status.reason[..cut]
        ))
    }

    /// A new store and instance, configured, with no objects.
    fn fresh_instance(&self) -> Result<Live> {
        let limits = self.restore_limits;
        let mut store = Store::new(
            &self.plugin.engine,
            HostState {
                limiter: limits.limiter(),
            },
        );
        store.limiter(|state| &mut state.limiter);
        store.set_epoch_deadline(limits.deadline_ticks());
        let plugin = self
            .plugin
            .pre
            .instantiate(&mut store)
            .map_err(|e| trap_error(e, &limits))
            .context("instantiating the plugin")?;
        store.set_epoch_deadline(limits.deadline_ticks());
        plugin
            .call_configure(&mut store, &self.config)
            .map_err(|e| trap_error(e, &limits))
            .context("configuring the plugin")?
            .map_err(|e| format_err!("invalid plugin configuration: {e}"))?;
        Ok(Live {
            store,
            plugin,
            nodes: NodeIndexes::default(),
            table: next_table(),
        })
    }

    /// Replaces the instance and replays the journal and the interrupted cycle into it.
    fn restore(&mut self) -> Result<()> {
        self.live = None;
        self.replacements += 1;
        let mut live = self.fresh_instance()?;
        let limits = self.restore_limits;
        for entry in &self.journal {
            match entry {
                Entry::Events(events) => {
                    live.store.set_epoch_deadline(limits.deadline_ticks());
                    live.plugin
                        .call_update(&mut live.store, events)
                        .map_err(|e| trap_error(e, &limits))?;
                }
                Entry::Bound {
                    pod,
                    node,
                    allocations,
                } => {
                    rebind(&mut live, limits, pod, node, allocations)
                        .with_context(|| format!("re-binding pod {pod} to node {node}"))?;
                }
                Entry::Time(now) => {
                    live.store.set_epoch_deadline(limits.deadline_ticks());
                    live.plugin
                        .call_set_time(&mut live.store, *now)
                        .map_err(|e| trap_error(e, &limits))?;
                }
                Entry::Unbound(pod) => {
                    live.store.set_epoch_deadline(limits.deadline_ticks());
                    live.plugin
                        .call_unbind(&mut live.store, pod)
                        .map_err(|e| trap_error(e, &limits))?;
                }
                Entry::Deallocated { pod, nodes, claim } => {
                    redeallocate(&mut live, limits, pod, nodes, claim)
                        .with_context(|| format!("deallocating claim {claim} for pod {pod} again"))?;
                }
            }
        }
        if let Some(cycle) = &mut self.cycle {
            live.store.set_epoch_deadline(limits.deadline_ticks());
            let status = live
                .plugin
                .call_prefilter(&mut live.store, &cycle.pod)
                .map_err(|e| trap_error(e, &limits))?;
            expect_success(status, || format!("prefilter of pod {}", cycle.pod))?;
            for node in cycle.feasible.iter() {
                live.store.set_epoch_deadline(limits.deadline_ticks());
                let status = live
                    .plugin
                    .call_filter(&mut live.store, node)
                    .map_err(|e| trap_error(e, &limits))?;
                expect_success(status, || format!("filter of pod {} on node {node}", cycle.pod))?;
            }
            if let Some(scored) = &mut cycle.scored {
                live.store.set_epoch_deadline(limits.deadline_ticks());
                let names: Vec<&str> = scored.nodes.iter().collect();
                let again = live.scores(&names).map_err(|e| trap_error(e, &limits))?;
                match again {
                    // The same scores, under the new instance's indexes.
                    Ok(Some(again)) if again.scores == scored.scores => *scored = again,
                    Ok(_) => bail!("prescore of pod {}: the scores differ from before", cycle.pod),
                    Err(status) => expect_success(status, || format!("prescore of pod {}", cycle.pod))?,
                }
            }
        }
        self.live = Some(live);
        Ok(())
    }

    /// Calls the guest with a fresh time limit. A trap becomes an `Error` status, after which the
    /// instance is replaced and restored.
    fn call<T>(&mut self, what: &str, f: impl FnOnce(&mut Live) -> Result<T>) -> Result<T, CoreStatus> {
        if self.live.is_none() {
            self.restore()
                .map_err(|e| CoreStatus::error(format!("plugin instance could not be restored: {e:#}")))?;
        }
        let live = self
            .live
            .as_mut()
            .expect("restore succeeded, so there is an instance");
        live.store.set_epoch_deadline(self.limits.deadline_ticks());
        let outcome = f(live);
        let limits = self.limits;
        outcome.map_err(|err| {
            let mut reason = format!("plugin trapped in {what}: {}", trap_error(err, &limits));
            if let Err(e) = self.restore() {
                reason.push_str(&format!("; restoring the instance failed: {e:#}"));
            }
            CoreStatus::error(reason)
        })
    }
}

impl PluginRuntime for ComponentEngine {
    fn name(&self) -> &'static str {
        "component"
    }

    fn guest_memory_bytes(&mut self) -> Option<u64> {
        self.live
            .as_ref()
            .map(|l| l.store.data().limiter.peak_memory() as u64)
    }

    fn load_refused(&mut self, objects: &[String]) -> Result<()> {
        if objects.is_empty() {
            return Ok(());
        }
        let events: Vec<Event> = objects
            .iter()
            .map(|object| Event {
                kind: EventKind::Add,
                object: object.clone(),
            })
            .collect();
        // The plugin rejects each one (and records it): the errors are the ones already listed.
        let _rejected = self
            .call("update", |l| l.plugin.call_update(&mut l.store, &events))
            .map_err(|status| {
                format_err!(
                    "handing over {} rejected objects: {}",
                    objects.len(),
                    status.reason
                )
            })?;
        self.journal.push(Entry::Events(events));
        Ok(())
    }

    fn load(&mut self, objects: &[Object]) -> Result<Vec<String>> {
        // In batches of about LOAD_BATCH_BYTES of JSON: a batch's events are copied into the
        // guest's linear memory, which never shrinks, so one batch of a whole 5,000-node cluster
        // (83 MB) would set the guest's memory for good.
        let mut rejected = Vec::new();
        let mut done = 0;
        while done < objects.len() {
            let mut bytes = 0;
            let mut events = Vec::new();
            for o in &objects[done..] {
                if !events.is_empty() && bytes >= LOAD_BATCH_BYTES {
                    break;
                }
                let object = o.to_json_string();
                bytes += object.len();
                events.push(Event {
                    kind: EventKind::Add,
                    object,
                });
            }
            let errors = self
                .call("update", |l| l.plugin.call_update(&mut l.store, &events))
                .map_err(|status| {
                    format_err!(
                        "loading objects {}..{} of {}: {}",
                        done,
                        done + events.len(),
                        objects.len(),
                        status.reason
                    )
                })?;
            done += events.len();
            self.journal.push(Entry::Events(events));
            rejected.extend(errors.into_iter().map(|e| e.message));
        }
        Ok(rejected)
    }
}

impl Scheduler for ComponentEngine {
    fn set_time(&mut self, unix_seconds: i64) {
        self.now = Some(unix_seconds);
        // A trap here is replayed with the journal on the next call (which restores first).
        if self
            .call("set-time", |l| l.plugin.call_set_time(&mut l.store, unix_seconds))
            .is_ok()
        {
            // Only the last time counts until the next other entry.
            if let Some(Entry::Time(last)) = self.journal.last_mut() {
                *last = unix_seconds;
            } else {
                self.journal.push(Entry::Time(unix_seconds));
            }
        }
    }

    fn prefilter(&mut self, pod: &str) -> CoreStatus {
        // A new cycle replaces the previous one; it is recorded once prefilter succeeded, so that a
        // restore after a trap in this very call does not run into the same trap.
        self.cycle = None;
        let status = self
            .call("prefilter", |l| l.plugin.call_prefilter(&mut l.store, pod))
            .map(|s| self.checked(s, "prefilter"));
        let status = status.unwrap_or_else(|trap| trap);
        if status.is_success() {
            self.cycle = Some(Cycle {
                pod: pod.to_string(),
                feasible: NameList::default(),
                scored: None,
            });
        }
        status
    }

    fn filter(&mut self, node: &str) -> CoreStatus {
        // A Filter after PreScore may change what Score answers for the node: the guest answers
        // again.
        if let Some(cycle) = &mut self.cycle {
            cycle.scored = None;
        }
        let status = match self.call("filter", |l| l.filter(node)) {
            Ok(s) => self.checked(s, "filter"),
            Err(trap) => trap,
        };
        if status.is_success()
            && let Some(cycle) = &mut self.cycle
        {
            cycle.feasible.push(node);
        }
        status
    }

    fn prescore(&mut self, nodes: &[String]) -> CoreStatus {
        // PreScore and Score on every node it names are one call into the guest; Score then
        // answers from it.
        if let Some(cycle) = &mut self.cycle {
            cycle.scored = None;
        }
        match self.call("prescore", |l| l.scores(nodes)) {
            Ok(Ok(scored)) => {
                if let Some(cycle) = &mut self.cycle {
                    cycle.scored = scored;
                }
                CoreStatus::success()
            }
            Ok(Err(status)) => self.checked(status, "prescore"),
            Err(trap) => trap,
        }
    }

    fn score(&mut self, node: &str) -> Result<u32, CoreStatus> {
        if let Some(scored) = self.cycle.as_ref().and_then(|c| c.scored.as_ref())
            && let Some(live) = &self.live
            && let Some(index) = live.nodes.get(node)
            && let Some(score) = scored.get(live.table, index)
        {
            return Ok(score);
        }
        self.call("score", |l| l.score(node))?
            .map_err(|s| self.checked(s, "score"))
    }

    fn reserve(&mut self, node: &str) -> Result<Vec<ClaimAllocation>, CoreStatus> {
        let result = self.call("reserve", |l| l.plugin.call_reserve(&mut l.store, node))?;
        decode_allocations(result.map_err(|s| self.checked(s, "reserve"))?)
    }

    fn unreserve(&mut self, pod: &str, node: &str) -> Result<(), CoreStatus> {
        // After a trap here the instance is replaced, and the replacement holds no reservation
        // either, which is what unreserve asks for. Without a cycle (prefilter failed) nothing was
        // reserved; after a failed reserve the plugin reports "no reservation".
        if self.cycle.take().is_none() {
            return Ok(());
        }
        self.call("unreserve", |l| l.plugin.call_unreserve(&mut l.store, pod, node))?
            .map_err(core_status)
    }

    fn postfilter(&mut self, pod: &str, nodes: &[String]) -> (CoreStatus, Option<String>) {
        match self.call("postfilter", |l| l.plugin.call_postfilter(&mut l.store, pod)) {
            Ok((status, deallocated)) => {
                let claim = deallocated.map(|d| d.claim);
                if let Some(claim) = &claim {
                    self.journal.push(Entry::Deallocated {
                        pod: pod.to_string(),
                        nodes: nodes.to_vec(),
                        claim: claim.clone(),
                    });
                }
                (self.checked(status, "postfilter"), claim)
            }
            Err(trap) => (trap, None),
        }
    }

    fn bind(&mut self, pod: &str, node: &str) -> Result<Vec<ClaimAllocation>, CoreStatus> {
        if self.cycle.is_none() {
            return Err(CoreStatus::error("bind called without a cycle"));
        }
        let result = self.call("bind", |l| l.plugin.call_bind(&mut l.store, pod, node))?;
        let allocations = decode_allocations(result.map_err(|s| self.checked(s, "bind"))?)?;
        if self.cycle.take().is_some() {
            self.journal.push(Entry::Bound {
                pod: pod.to_string(),
                node: node.to_string(),
                allocations: allocations.clone(),
            });
        }
        self.wait_for_binding(pod)?;
        Ok(allocations)
    }
}

impl ComponentEngine {
    /// PreBind's wait for the binding conditions of `pod`'s devices: `binding-poll` until it
    /// answers `ready`; each `wait` advances the clock (a replay has no driver that could set a
    /// condition meanwhile). A `failed` answer, or a trap while waiting, takes the binding back
    /// with `unbind`.
    fn wait_for_binding(&mut self, pod: &str) -> Result<(), CoreStatus> {
        // The core's longest wait, checked every 5 s: a plugin that asks for more is refused.
        const MAX_POLLS: u32 = (sharing_affinity_core::config::MAX_BINDING_TIMEOUT
            / sharing_affinity_core::binding::POLL_SECONDS as u64) as u32
            + 1;
        let mut polls = 0;
        let failed = loop {
            if polls > MAX_POLLS {
                break CoreStatus::error(format!(
                    "the plugin asked to wait for binding conditions more than {MAX_POLLS} times"
                ));
            }
            let poll = self.call("binding-poll", |l| {
                l.plugin.call_binding_poll(&mut l.store, pod, polls)
            });
            match poll {
                Ok(bindings::BindingPoll::Ready) => return Ok(()),
                Ok(bindings::BindingPoll::Wait(seconds)) => {
                    if let Some(now) = self.now {
                        self.set_time(now.saturating_add(i64::from(seconds)));
                    }
                    polls += 1;
                }
                Ok(bindings::BindingPoll::Failed(status)) => break self.checked(status, "binding-poll"),
                Err(trap) => break trap,
            }
        };
        self.call("unbind", |l| l.plugin.call_unbind(&mut l.store, pod))?;
        self.journal.push(Entry::Unbound(pod.to_string()));
        Err(failed)
    }
}

/// Runs a pod's cycle that ended in a deallocation again on a replacement instance (PreFilter,
/// Filter on the same nodes, PostFilter) and checks that the same claim is deallocated.
fn redeallocate(live: &mut Live, limits: Limits, pod: &str, nodes: &[String], claim: &str) -> Result<()> {
    let trap = |e| trap_error(e, &limits);
    live.store.set_epoch_deadline(limits.deadline_ticks());
    live.plugin.call_prefilter(&mut live.store, pod).map_err(trap)?;
    for node in nodes {
        live.store.set_epoch_deadline(limits.deadline_ticks());
        live.plugin.call_filter(&mut live.store, node).map_err(trap)?;
    }
    live.store.set_epoch_deadline(limits.deadline_ticks());
    let (_, again) = live.plugin.call_postfilter(&mut live.store, pod).map_err(trap)?;
    match again {
        Some(d) if d.claim == claim => Ok(()),
        other => Err(format_err!(
            "the replacement instance deallocated {:?} instead of {claim}",
            other.map(|d| d.claim)
        )),
    }
}

/// Runs a bound pod's cycle again on a replacement instance and checks the allocations match.
fn rebind(
    live: &mut Live,
    limits: Limits,
    pod: &str,
    node: &str,
    expected: &[ClaimAllocation],
) -> Result<()> {
    let trap = |e| trap_error(e, &limits);
    live.store.set_epoch_deadline(limits.deadline_ticks());
    expect_success(
        live.plugin.call_prefilter(&mut live.store, pod).map_err(trap)?,
        || "prefilter".into(),
    )?;
    live.store.set_epoch_deadline(limits.deadline_ticks());
    expect_success(
        live.plugin.call_filter(&mut live.store, node).map_err(trap)?,
        || "filter".into(),
    )?;
    live.store.set_epoch_deadline(limits.deadline_ticks());
    let reserved = live.plugin.call_reserve(&mut live.store, node).map_err(trap)?;
    reserved.map_err(|s| format_err!("reserve: {}", core_status(s)))?;
    live.store.set_epoch_deadline(limits.deadline_ticks());
    let bound = live.plugin.call_bind(&mut live.store, pod, node).map_err(trap)?;
    let bound = bound.map_err(|s| format_err!("bind: {}", core_status(s)))?;
    let bound = decode_allocations(bound).map_err(|s| format_err!("bind: {}", s.reason))?;
    if bound != expected {
        return Err(format_err!(
            "the replacement instance allocated differently: {bound:?} instead of {expected:?}"
        ));
    }
    Ok(())
}

fn expect_success(status: bindings::Status, what: impl FnOnce() -> String) -> Result<()> {
    let status = core_status(status);
    if status.is_success() {
        Ok(())
    } else {
        Err(format_err!(
            "{} failed on the replacement instance: {status}",
            what()
        ))
    }
}

/// The message of a trap (or of another wasmtime failure), without the wasm backtrace; a limit
/// the guest ran into is named with its value.
fn trap_error(err: wasmtime::Error, limits: &Limits) -> wasmtime::Error {
    if let Some(limit) = exceeded(&err, limits) {
        return format_err!("{limit}");
    }
    match err.downcast_ref::<Trap>() {
        Some(trap) => format_err!("{trap}"),
        None => format_err!("{err:#}"),
    }
}

fn core_status(s: bindings::Status) -> CoreStatus {
    let code = match s.code {
        Code::Success => CoreCode::Success,
        Code::Error => CoreCode::Error,
        Code::Unschedulable => CoreCode::Unschedulable,
        Code::UnschedulableAndUnresolvable => CoreCode::UnschedulableAndUnresolvable,
    };
    CoreStatus::new(code, s.reason)
}

/// Decodes the allocations a guest returned; an undecodable one is the plugin's fault: an `Error`.
fn decode_allocations(list: Vec<bindings::ClaimAllocation>) -> Result<Vec<ClaimAllocation>, CoreStatus> {
    list.into_iter()
        .map(|a| {
            let claim = a.claim.clone();
            claim_allocation(a).map_err(|e| {
                CoreStatus::error(format!(
                    "plugin returned an invalid allocation for claim {claim}: {e}"
                ))
            })
        })
        .collect()
}

fn claim_allocation(a: bindings::ClaimAllocation) -> Result<ClaimAllocation, String> {
    use sharing_affinity_core::model::{AllocationResult, DeviceAllocationResult};
    let config = from_json_or_default(&a.config, "config")?;
    let node_selector = a
        .node_selector
        .as_deref()
        .map(|s| serde_json::from_str(s).map_err(|e| format!("nodeSelector: {e}")))
        .transpose()?;
    let results = a
        .results
        .into_iter()
        .map(device_result)
        .collect::<Result<_, _>>()?;
    Ok(ClaimAllocation {
        claim: a.claim,
        allocation: AllocationResult {
            devices: DeviceAllocationResult { results, config },
            node_selector,
            allocation_timestamp: a.allocation_timestamp,
        },
    })
}

fn device_result(
    r: DeviceResult,
) -> Result<sharing_affinity_core::model::DeviceRequestAllocationResult, String> {
    let consumed_capacity = r
        .consumed_capacity
        .map(|pairs| {
            pairs
                .into_iter()
                .map(|(name, q)| {
                    let quantity = q
                        .parse()
                        .map_err(|e| format!("device {}: consumedCapacity {name}: {e}", r.device))?;
                    Ok((name, quantity))
                })
                .collect::<Result<_, String>>()
        })
        .transpose()?;
    Ok(sharing_affinity_core::model::DeviceRequestAllocationResult {
        tolerations: from_json_or_default(&r.tolerations, "tolerations")?,
        request: r.request.into(),
        driver: r.driver.into(),
        pool: r.pool.into(),
        device: r.device.into(),
        admin_access: r.admin_access,
        binding_conditions: r.binding_conditions,
        binding_failure_conditions: r.binding_failure_conditions,
        share_id: r.share_id,
        consumed_capacity,
    })
}

/// Decodes a JSON field that the WIT encodes as an empty string when it has no entries.
fn from_json_or_default<T: serde::de::DeserializeOwned + Default>(
    text: &str,
    field: &str,
) -> Result<T, String> {
    if text.is_empty() {
        Ok(T::default())
    } else {
        serde_json::from_str(text).map_err(|e| format!("{field}: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cycle's node list gives back every name, in order, byte for byte (duplicates, an empty
    /// name and multi-byte characters included): the trap recovery replays Filter with them.
    #[test]
    fn name_lists_give_back_the_names_in_order() {
        let names = ["node-1", "node-22", "", "node-1", "nœud-ü"];
        let mut list = NameList::default();
        assert_eq!(list.iter().count(), 0);
        for n in names {
            list.push(n);
        }
        assert_eq!(list.iter().collect::<Vec<_>>(), names);
    }

    /// Node indexes are found by name whatever the order of the lookups: the same order as they
    /// were indexed (the guess of the next name), a subsequence of it, reversed, repeated, names
    /// that are prefixes of others, and nothing after `clear`.
    #[test]
    fn node_indexes_are_found_in_any_order() {
        let names = ["node-1", "node-10", "node-2", "", "nœud-ü", "node"];
        let mut t = NodeIndexes::default();
        for (i, n) in names.iter().enumerate() {
            assert_eq!(t.get(n), None, "{n:?} before it was indexed");
            // Indexes the guest hands out need not be positions.
            t.insert(n, 100 + 7 * i as u32);
        }
        assert_eq!(t.len(), names.len());
        let index = |n: &str| names.iter().position(|m| *m == n).map(|i| 100 + 7 * i as u32);
        let orders: [Vec<&str>; 4] = [
            names.to_vec(),
            names.iter().step_by(2).copied().collect(),
            names.iter().rev().copied().collect(),
            vec!["node", "node", "node-1", "node-1", "node-10"],
        ];
        for order in orders {
            for _ in 0..2 {
                for n in &order {
                    assert_eq!(t.get(n), index(n), "{n:?} in order {order:?}");
                }
            }
        }
        for n in ["node-", "node-100", "nœud", "x"] {
            assert_eq!(t.get(n), None, "{n:?} was never indexed");
        }
        t.clear();
        assert_eq!((t.len(), t.get("node-1"), t.get("")), (0, None, None));
        t.insert("node-2", 5);
        assert_eq!((t.get("node-2"), t.get("node-1")), (Some(5), None));
    }

    /// Every table of node indexes gets a number no earlier table had, so scores asked under one
    /// table never answer under another.
    #[test]
    fn scores_answer_only_under_their_table() {
        let (a, b) = (next_table(), next_table());
        assert_ne!(a, b);
        let scored = Scored {
            table: a,
            nodes: NameList::default(),
            scores: vec![70, 30],
            positions: vec![0, 2, 1],
        };
        assert_eq!((scored.get(a, 1), scored.get(a, 2)), (Some(30), Some(70)));
        assert_eq!(scored.get(a, 0), None, "index not named");
        assert_eq!(scored.get(a, 3), None, "index past the list");
        assert_eq!(scored.get(b, 1), None, "another table");
    }

    #[test]
    fn a_component_without_the_world_is_refused_with_a_clear_error() {
        // An empty core module encodes to a valid component that exports nothing.
        let empty = crate::artifact::encode_component(b"\0asm\x01\0\0\0").unwrap();
        let err = ComponentPlugin::from_bytes(&empty)
            .err()
            .expect("an empty component is not a plugin");
        let msg = format!("{err:#}");
        assert!(
            msg.contains("does not export the sharing-affinity:plugin world"),
            "{msg}"
        );
    }

    #[test]
    fn allocations_round_trip_through_the_wit_records() {
        use sharing_affinity_core::model::{
            AllocationResult, DeviceRequestAllocationResult, DeviceToleration,
        };
        let mut result = DeviceRequestAllocationResult {
            request: "nic".into(),
            driver: "net.example.com".into(),
            pool: "node-1".into(),
            device: "eth1".into(),
            admin_access: Some(false),
            share_id: Some("0f0e".into()),
            tolerations: vec![DeviceToleration {
                key: "k".into(),
                operator: "Exists".into(),
                ..Default::default()
            }],
            binding_conditions: vec!["ready".into()],
            ..Default::default()
        };
        result.binding_failure_conditions = vec!["failed".into()];
        let mut allocation = AllocationResult::default();
        allocation.devices.results.push(result.clone());
        allocation.allocation_timestamp = Some("2025-01-01T00:00:00Z".into());
        // What the guest sends for it (see plugin/guest/src/component.rs).
        let wire = bindings::ClaimAllocation {
            claim: "ns/c".into(),
            results: vec![DeviceResult {
                request: result.request.to_string(),
                driver: result.driver.to_string(),
                pool: result.pool.to_string(),
                device: result.device.to_string(),
                admin_access: Some(false),
                share_id: Some("0f0e".into()),
                consumed_capacity: None,
                tolerations: serde_json::to_string(&result.tolerations).unwrap(),
                binding_conditions: vec!["ready".into()],
                binding_failure_conditions: vec!["failed".into()],
            }],
            config: String::new(),
            node_selector: None,
            allocation_timestamp: Some("2025-01-01T00:00:00Z".into()),
        };
        let decoded = decode_allocations(vec![wire]).unwrap();
        assert_eq!(
            decoded,
            vec![ClaimAllocation {
                claim: "ns/c".into(),
                allocation
            }]
        );
    }

    #[test]
    fn undecodable_allocations_are_error_statuses() {
        let wire = bindings::ClaimAllocation {
            claim: "ns/c".into(),
            results: vec![],
            config: "{not json".into(),
            node_selector: None,
            allocation_timestamp: None,
        };
        let status = decode_allocations(vec![wire]).unwrap_err();
        assert_eq!(status.code, CoreCode::Error);
        assert!(
            status.reason.contains("claim ns/c") && status.reason.contains("config"),
            "{status}"
        );
    }
}
