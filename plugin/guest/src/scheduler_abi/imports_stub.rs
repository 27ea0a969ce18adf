//! Native stand-ins for `imports.rs` (same wrappers, no `unsafe`), so the adapter builds and is
//! tested on the host. They follow the KSWE host protocol over a thread-local [`FakeHost`] that
//! tests fill and inspect. There are no exported symbols natively.

use std::cell::RefCell;

/// What the fake host offers and what the guest sent it.
#[derive(Clone, Debug, Default)]
pub struct FakeHost {
    /// `get_config`.
    pub config: String,
    /// `currentPod` bytes.
    pub pod: Vec<u8>,
    /// `currentNodeName`.
    pub node: String,
    /// `filteredNodeList` (JSON array of names).
    pub filtered: String,
    /// `klog.severity`.
    pub severity: i32,
    /// The feed document `changes` returns for a cursor not in `pages`.
    pub feed: String,
    /// Feed documents by the cursor they answer (pages of a feed).
    pub pages: std::collections::BTreeMap<String, String>,
    /// Cursors the guest sent to `changes`, one per call (retries included).
    pub cursors: Vec<String>,
    /// `result.status_reason` calls.
    pub reasons: Vec<String>,
    /// `logs` calls: severity, message, key/value strings.
    pub logs: Vec<(i32, String, Vec<String>)>,
    /// Accepted `allocation` calls: claim, JSON.
    pub allocations: Vec<(String, String)>,
    /// Accepted `pending_allocation` calls: claim, JSON.
    pub pending: Vec<(String, String)>,
    /// What `now` returns (Unix seconds).
    pub now: i64,
    /// `wait` calls (seconds); each advances `now` when `wait_result` is 0.
    pub waits: Vec<u32>,
    /// The code `wait` returns (0 = waited).
    pub wait_result: i32,
    /// Accepted `deallocation` calls: claim, resourceVersion.
    pub deallocations: Vec<(String, String)>,
    /// The code `allocation`, `pending_allocation` and `deallocation` return (0 = accepted).
    pub write_result: i32,
}

thread_local! {
    static HOST: RefCell<FakeHost> = RefCell::new(FakeHost::default());
}

/// Runs `f` on this thread's fake host.
pub fn with_host<R>(f: impl FnOnce(&mut FakeHost) -> R) -> R {
    HOST.with(|h| f(&mut h.borrow_mut()))
}

fn offer(value: &[u8], buf: &mut [u8]) -> usize {
    if value.len() <= buf.len() {
        buf[..value.len()].copy_from_slice(value);
    }
    value.len()
}

/// `get_config`.
pub fn get_config(buf: &mut [u8]) -> usize {
    with_host(|h| offer(h.config.as_bytes(), buf))
}

/// `currentPod`.
pub fn current_pod(buf: &mut [u8]) -> usize {
    with_host(|h| offer(&h.pod, buf))
}

/// `currentNodeName`.
pub fn current_node_name(buf: &mut [u8]) -> usize {
    with_host(|h| offer(h.node.as_bytes(), buf))
}

/// `filteredNodeList`.
pub fn filtered_node_list(buf: &mut [u8]) -> usize {
    with_host(|h| offer(h.filtered.as_bytes(), buf))
}

/// `result.status_reason`.
pub fn set_status_reason(reason: &str) {
    with_host(|h| h.reasons.push(reason.to_string()));
}

/// `klog.severity`.
pub fn klog_severity() -> i32 {
    with_host(|h| h.severity)
}

/// `klog.logs`.
pub fn klog_logs(severity: i32, message: &str, kvs: &[u8]) {
    let kvs = kvs
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect();
    with_host(|h| h.logs.push((severity, message.to_string(), kvs)));
}

/// `changes`.
pub fn dra_changes(cursor: &str, buf: &mut [u8]) -> usize {
    with_host(|h| {
        h.cursors.push(cursor.to_string());
        let doc = h.pages.get(cursor).unwrap_or(&h.feed);
        offer(doc.as_bytes(), buf)
    })
}

/// `allocation`.
pub fn dra_allocation(claim: &str, json: &str) -> i32 {
    with_host(|h| {
        if h.write_result == 0 {
            h.allocations.push((claim.to_string(), json.to_string()));
        }
        h.write_result
    })
}

/// `pending_allocation`.
pub fn dra_pending_allocation(claim: &str, json: &str) -> i32 {
    with_host(|h| {
        if h.write_result == 0 {
            h.pending.push((claim.to_string(), json.to_string()));
        }
        h.write_result
    })
}

/// `deallocation`.
pub fn dra_deallocation(claim: &str, resource_version: &str) -> i32 {
    with_host(|h| {
        if h.write_result == 0 {
            h.deallocations
                .push((claim.to_string(), resource_version.to_string()));
        }
        h.write_result
    })
}

/// `wait`: records the call and, when it succeeds, advances `now`.
pub fn dra_wait(seconds: u32) -> i32 {
    with_host(|h| {
        h.waits.push(seconds);
        if h.wait_result == 0 {
            h.now += i64::from(seconds);
        }
        h.wait_result
    })
}

/// `now`.
pub fn dra_now() -> i64 {
    with_host(|h| h.now)
}
