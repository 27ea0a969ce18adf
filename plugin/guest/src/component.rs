//! The WIT component adapter: exports the `sharing-affinity:plugin/plugin` world (`wit/plugin.wit`).
//!
//! This module holds the crate's only `wit_bindgen::generate!`. Each export decodes its arguments,
//! calls [`sharing_affinity_core::Plugin`] and encodes the answer; there is no domain logic
//! here. The plugin lives in a thread-local slot that `configure` fills; every other export answers
//! with an `error` status (or error entries) until then, never with a trap.

use std::cell::RefCell;

use sharing_affinity_core::model::{AllocationResult, DeviceRequestAllocationResult};
use sharing_affinity_core::{
    BindingPoll as CoreBindingPoll, ClaimAllocation as CoreClaimAllocation, Code as CoreCode,
    EventKind as CoreEventKind, NodeName, Plugin, Status as CoreStatus,
};

wit_bindgen::generate!({
    path: "../../wit",
    world: "plugin",
});

use exports::sharing_affinity::plugin::nodes;
use sharing_affinity::plugin::types::{Code, DeviceResult, EventKind};

/// The exported component.
struct Component;

export!(Component);

thread_local! {
    /// The configured plugin, or `None` before `configure`.
    static PLUGIN: RefCell<Option<Plugin>> = const { RefCell::new(None) };
    /// The `nodes` interface's table of node names.
    static NODE_NAMES: RefCell<NodeNames> = RefCell::new(NodeNames::default());
    /// The reason of the last `nodes` call (`filter` or `score` by index): empty after a success.
    static LAST_REASON: RefCell<String> = const { RefCell::new(String::new()) };
}

/// The reason given when an extension point is called before `configure`.
const NOT_CONFIGURED: &str = "plugin is not configured: call configure first";

/// Runs `f` on the configured plugin, or returns `unconfigured` when there is none.
fn with_plugin<T>(unconfigured: impl FnOnce() -> T, f: impl FnOnce(&mut Plugin) -> T) -> T {
    PLUGIN.with(|slot| match slot.borrow_mut().as_mut() {
        Some(plugin) => f(plugin),
        None => unconfigured(),
    })
}

impl Guest for Component {
    fn configure(config: String) -> Result<(), String> {
        let plugin = Plugin::new(&config).map_err(|e| e.to_string())?;
        PLUGIN.with(|slot| *slot.borrow_mut() = Some(plugin));
        Ok(())
    }

    fn update(events: Vec<Event>) -> Vec<EventError> {
        let not_configured = || {
            (0..events.len())
                .map(|i| EventError {
                    index: index_u32(i),
                    message: NOT_CONFIGURED.to_string(),
                })
                .collect()
        };
        with_plugin(not_configured, |plugin| {
            let mut errors = Vec::new();
            for (i, event) in events.iter().enumerate() {
                if let Err(e) = plugin.apply(event_kind(event.kind), &event.object) {
                    errors.push(EventError {
                        index: index_u32(i),
                        message: e.to_string(),
                    });
                }
            }
            errors
        })
    }

    fn prefilter(pod: String) -> Status {
        with_plugin(not_configured, |plugin| status(plugin.prefilter(&pod)))
    }

    fn filter(node: String) -> Status {
        with_plugin(not_configured, |plugin| status(plugin.filter(&node)))
    }

    fn prescore(nodes: Vec<String>) -> Status {
        with_plugin(not_configured, |plugin| status(plugin.prescore(&nodes)))
    }

    fn score(node: String) -> Result<u32, Status> {
        with_plugin(
            || Err(not_configured()),
            |plugin| plugin.score(&node).map_err(status),
        )
    }

    fn set_time(unix_seconds: i64) {
        with_plugin(|| (), |plugin| plugin.set_time(unix_seconds));
    }

    fn postfilter(pod: String) -> (Status, Option<Deallocation>) {
        with_plugin(
            || (not_configured(), None),
            |plugin| {
                let answer = plugin.postfilter(&pod);
                let deallocate = answer.deallocate.map(|(claim, resource_version)| Deallocation {
                    claim,
                    resource_version,
                });
                (status(answer.status), deallocate)
            },
        )
    }

    fn reserve(node: String) -> Result<Vec<ClaimAllocation>, Status> {
        with_plugin(
            || Err(not_configured()),
            |plugin| allocations(plugin.reserve(&node)),
        )
    }

    fn unreserve(pod: String, node: String) -> Result<(), Status> {
        with_plugin(
            || Err(not_configured()),
            |plugin| plugin.unreserve(&pod, &node).map_err(status),
        )
    }

    fn bind(pod: String, node: String) -> Result<Vec<ClaimAllocation>, Status> {
        with_plugin(
            || Err(not_configured()),
            |plugin| allocations(plugin.bind(&pod, &node)),
        )
    }

    fn binding_poll(pod: String, polls: u32) -> BindingPoll {
        with_plugin(
            || BindingPoll::Failed(not_configured()),
            |plugin| match plugin.binding_poll(&pod, polls) {
                CoreBindingPoll::Ready => BindingPoll::Ready,
                CoreBindingPoll::Wait(seconds) => BindingPoll::Wait(seconds),
                CoreBindingPoll::Failed(s) => BindingPoll::Failed(status(s)),
            },
        )
    }

    fn unbind(pod: String) -> Vec<String> {
        with_plugin(Vec::new, |plugin| plugin.unbind(&pod))
    }
}

/// The `nodes` interface's table of node names: an index per name, given on first use, each a
/// [`NodeName`] that remembers where the plugin found it (so that Filter by index skips the
/// name's lookup).
#[derive(Default)]
struct NodeNames {
    names: Vec<NodeName>,
    indexes: std::collections::HashMap<String, u32>,
}

/// Runs `f` on the name at `index` and its memo, or returns an `error` status naming the bad
/// index.
fn with_node_name<T>(index: u32, unknown: impl FnOnce(Status) -> T, f: impl FnOnce(&NodeName) -> T) -> T {
    NODE_NAMES.with(|t| match t.borrow().names.get(index as usize) {
        Some(name) => f(name),
        None => unknown(unknown_index(index)),
    })
}

/// The `error` status for a node index the table does not hold.
fn unknown_index(index: u32) -> Status {
    Status {
        code: Code::Error,
        reason: format!("node index {index} is not in the plugin's table of node names"),
    }
}

impl nodes::Guest for Component {
    fn index(name: String) -> u32 {
        NODE_NAMES.with(|t| {
            let mut t = t.borrow_mut();
            if let Some(&i) = t.indexes.get(&name) {
                return i;
            }
            let i = index_u32(t.names.len());
            t.names.push(NodeName::new(name.as_str()));
            t.indexes.insert(name, i);
            i
        })
    }

    fn forget() {
        NODE_NAMES.with(|t| *t.borrow_mut() = NodeNames::default());
    }

    fn filter(node: u32) -> Code {
        let s = with_node_name(
            node,
            |s| s,
            |name| with_plugin(not_configured, |plugin| status(plugin.filter(name))),
        );
        code_keeping_reason(s)
    }

    fn score(node: u32) -> Result<u32, Code> {
        let r = with_node_name(node, Err, |name| {
            with_plugin(
                || Err(not_configured()),
                |plugin| plugin.score(name).map_err(status),
            )
        });
        value_keeping_reason(r)
    }

    fn scores(nodes: Vec<u32>) -> Result<Vec<u32>, Code> {
        let r = NODE_NAMES.with(|t| {
            let t = t.borrow();
            let names = nodes
                .iter()
                .map(|&i| t.names.get(i as usize).ok_or_else(|| unknown_index(i)))
                .collect::<Result<Vec<_>, Status>>()?;
            with_plugin(
                || Err(not_configured()),
                |plugin| plugin.prescore_scores(&names).map_err(status),
            )
        });
        value_keeping_reason(r)
    }

    fn last_reason() -> String {
        LAST_REASON.with(|r| r.borrow().clone())
    }
}

/// The value, with `last-reason` emptied, or the status's code, with its reason kept for
/// `last-reason`.
fn value_keeping_reason<T>(r: Result<T, Status>) -> Result<T, Code> {
    match r {
        Ok(value) => {
            LAST_REASON.with(|r| r.borrow_mut().clear());
            Ok(value)
        }
        Err(s) => Err(code_keeping_reason(s)),
    }
}

/// The status's code; its reason becomes what `last-reason` returns.
fn code_keeping_reason(s: Status) -> Code {
    LAST_REASON.with(|r| *r.borrow_mut() = s.reason);
    s.code
}

fn not_configured() -> Status {
    Status {
        code: Code::Error,
        reason: NOT_CONFIGURED.to_string(),
    }
}

/// Batch positions fit in `u32`: a batch is a `list` whose length the canonical ABI bounds by `u32`.
fn index_u32(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

fn event_kind(kind: EventKind) -> CoreEventKind {
    match kind {
        EventKind::Add => CoreEventKind::Add,
        EventKind::Update => CoreEventKind::Update,
        EventKind::Delete => CoreEventKind::Delete,
    }
}

fn status(s: CoreStatus) -> Status {
    let code = match s.code {
        CoreCode::Success => Code::Success,
        CoreCode::Error => Code::Error,
        CoreCode::Unschedulable => Code::Unschedulable,
        CoreCode::UnschedulableAndUnresolvable => Code::UnschedulableAndUnresolvable,
        // `Code` is non-exhaustive: a code this WIT version cannot carry is reported, not dropped.
        other => {
            return Status {
                code: Code::Error,
                reason: format!("status code {other} has no WIT encoding: {}", s.reason),
            };
        }
    };
    Status {
        code,
        reason: s.reason,
    }
}

fn allocations(r: Result<Vec<CoreClaimAllocation>, CoreStatus>) -> Result<Vec<ClaimAllocation>, Status> {
    match r {
        Ok(list) => list.into_iter().map(claim_allocation).collect(),
        Err(s) => Err(status(s)),
    }
}

/// Encodes one claim's allocation; JSON-typed fields are serialised here, and a serialisation
/// failure (which cannot happen for these plain data types) is reported as an `error` status.
fn claim_allocation(a: CoreClaimAllocation) -> Result<ClaimAllocation, Status> {
    let AllocationResult {
        devices,
        node_selector,
        allocation_timestamp,
    } = a.allocation;
    let config = if devices.config.is_empty() {
        String::new()
    } else {
        to_json(&devices.config, &a.claim)?
    };
    let node_selector = node_selector.map(|s| to_json(&s, &a.claim)).transpose()?;
    let results = devices
        .results
        .into_iter()
        .map(|r| device_result(r, &a.claim))
        .collect::<Result<_, _>>()?;
    Ok(ClaimAllocation {
        claim: a.claim,
        results,
        config,
        node_selector,
        allocation_timestamp,
    })
}

fn device_result(r: DeviceRequestAllocationResult, claim: &str) -> Result<DeviceResult, Status> {
    let tolerations = if r.tolerations.is_empty() {
        String::new()
    } else {
        to_json(&r.tolerations, claim)?
    };
    Ok(DeviceResult {
        request: r.request.into(),
        driver: r.driver.into(),
        pool: r.pool.into(),
        device: r.device.into(),
        admin_access: r.admin_access,
        share_id: r.share_id,
        consumed_capacity: r
            .consumed_capacity
            .map(|m| m.into_iter().map(|(name, q)| (name, q.to_string())).collect()),
        tolerations,
        binding_conditions: r.binding_conditions,
        binding_failure_conditions: r.binding_failure_conditions,
    })
}

fn to_json<T: serde::Serialize>(value: &T, claim: &str) -> Result<String, Status> {
    serde_json::to_string(value).map_err(|e| Status {
        code: Code::Error,
        reason: format!("claim {claim}: encoding the allocation: {e}"),
    })
}
