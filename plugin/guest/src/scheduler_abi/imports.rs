//! The host functions the KSWE core module imports, each behind a safe wrapper: every `unsafe`
//! block of the module is here. Compiled for `wasm32` only; `imports_stub.rs` provides the same
//! wrappers natively. Nothing here calls back into the guest's other modules.
//!
//! Safety contract of the host (`kswe-abi.md` §1.1, `docs/kswe-dra-extension.md`): a getter
//! writes at most `buf_limit` bytes at `buf` and only when the value fits, and returns the value's
//! length; a setter or write only reads `len` bytes at `ptr`; no import keeps a pointer after it
//! returns. The wrappers pass pointers and lengths of live Rust slices, so every access the host
//! makes is inside memory the wrapper exclusively borrows for the call.

/// A guest address as the 32-bit offset the ABI uses.
fn addr(ptr: *const u8) -> u32 {
    ptr as usize as u32
}

// --- k8s.io/scheduler -------------------------------------------------------------------------

#[link(wasm_import_module = "k8s.io/scheduler")]
unsafe extern "C" {
    #[link_name = "get_config"]
    fn k8s_get_config(buf: u32, buf_limit: u32) -> u32;
    #[link_name = "currentPod"]
    fn k8s_current_pod(buf: u32, buf_limit: u32) -> u32;
    #[link_name = "currentNodeName"]
    fn k8s_current_node_name(buf: u32, buf_limit: u32) -> u32;
    #[link_name = "filteredNodeList"]
    fn k8s_filtered_node_list(buf: u32, buf_limit: u32) -> u32;
    #[link_name = "result.status_reason"]
    fn k8s_result_status_reason(ptr: u32, len: u32);
}

/// `get_config`: the plugin's guestConfig (buf_limit protocol: returns the needed length).
pub fn get_config(buf: &mut [u8]) -> usize {
    // SAFETY: the host writes at most `buf.len()` bytes into `buf`, which we borrow mutably.
    unsafe { k8s_get_config(addr(buf.as_mut_ptr()), buf.len() as u32) as usize }
}

/// `currentPod`: the pod being scheduled as protobuf (buf_limit protocol).
pub fn current_pod(buf: &mut [u8]) -> usize {
    // SAFETY: as `get_config`.
    unsafe { k8s_current_pod(addr(buf.as_mut_ptr()), buf.len() as u32) as usize }
}

/// `currentNodeName`: the node being evaluated (buf_limit protocol).
pub fn current_node_name(buf: &mut [u8]) -> usize {
    // SAFETY: as `get_config`.
    unsafe { k8s_current_node_name(addr(buf.as_mut_ptr()), buf.len() as u32) as usize }
}

/// `filteredNodeList`: PreScore's feasible nodes as a JSON array of names (buf_limit protocol).
pub fn filtered_node_list(buf: &mut [u8]) -> usize {
    // SAFETY: as `get_config`.
    unsafe { k8s_filtered_node_list(addr(buf.as_mut_ptr()), buf.len() as u32) as usize }
}

/// `result.status_reason`: the reason of the current call (last call wins).
pub fn set_status_reason(reason: &str) {
    // SAFETY: the host reads `reason.len()` bytes at `reason`, a live borrowed string.
    unsafe { k8s_result_status_reason(addr(reason.as_ptr()), reason.len() as u32) }
}

// --- k8s.io/klog ------------------------------------------------------------------------------

#[link(wasm_import_module = "k8s.io/klog")]
unsafe extern "C" {
    #[link_name = "severity"]
    fn klog_severity_raw() -> i32;
    #[link_name = "logs"]
    fn klog_logs_raw(severity: i32, msg: u32, msg_len: u32, kvs: u32, kvs_len: u32);
}

/// `severity`: the configured minimum severity (0 info .. 3 fatal).
pub fn klog_severity() -> i32 {
    // SAFETY: no arguments, no memory access.
    unsafe { klog_severity_raw() }
}

/// `logs`: a structured log line; `kvs` holds NUL-terminated keys and values.
pub fn klog_logs(severity: i32, message: &str, kvs: &[u8]) {
    // SAFETY: the host reads `message` and `kvs` within their lengths; both are live borrows.
    unsafe {
        klog_logs_raw(
            severity,
            addr(message.as_ptr()),
            message.len() as u32,
            addr(kvs.as_ptr()),
            kvs.len() as u32,
        )
    }
}

// --- sharing-affinity.dra/v1 ------------------------------------------------------------------

#[link(wasm_import_module = "sharing-affinity.dra/v1")]
unsafe extern "C" {
    #[link_name = "changes"]
    fn dra_changes_raw(cursor: u32, cursor_len: u32, buf: u32, buf_limit: u32) -> u32;
    #[link_name = "allocation"]
    fn dra_allocation_raw(claim: u32, claim_len: u32, json: u32, json_len: u32) -> i32;
    #[link_name = "pending_allocation"]
    fn dra_pending_allocation_raw(claim: u32, claim_len: u32, json: u32, json_len: u32) -> i32;
    #[link_name = "deallocation"]
    fn dra_deallocation_raw(claim: u32, claim_len: u32, version: u32, version_len: u32) -> i32;
    #[link_name = "now"]
    fn dra_now_raw() -> i64;
    #[link_name = "wait"]
    fn dra_wait_raw(seconds: u32) -> i32;
}

/// `now`: the host's clock in Unix seconds.
pub fn dra_now() -> i64 {
    // SAFETY: no arguments, no memory access.
    unsafe { dra_now_raw() }
}

/// `wait`: blocks PreBind for `seconds` (a replay host advances its clock); 0 or an error code.
pub fn dra_wait(seconds: u32) -> i32 {
    // SAFETY: one integer argument, no memory access.
    unsafe { dra_wait_raw(seconds) }
}

/// `deallocation`: clears the allocation of `claim` (`namespace/name`) if its
/// `metadata.resourceVersion` is still `resource_version`; 0 or an error code.
pub fn dra_deallocation(claim: &str, resource_version: &str) -> i32 {
    // SAFETY: the host only reads both strings within their lengths.
    unsafe {
        dra_deallocation_raw(
            addr(claim.as_ptr()),
            claim.len() as u32,
            addr(resource_version.as_ptr()),
            resource_version.len() as u32,
        )
    }
}

/// `changes`: the change feed since `cursor` (buf_limit protocol).
pub fn dra_changes(cursor: &str, buf: &mut [u8]) -> usize {
    // SAFETY: the host reads `cursor` within its length and writes at most `buf.len()` bytes
    // into `buf`; the two borrows do not overlap (shared and exclusive).
    unsafe {
        dra_changes_raw(
            addr(cursor.as_ptr()),
            cursor.len() as u32,
            addr(buf.as_mut_ptr()),
            buf.len() as u32,
        ) as usize
    }
}

/// `allocation`: writes `status.allocation` of `claim` (`namespace/name`); 0 or an error code.
pub fn dra_allocation(claim: &str, json: &str) -> i32 {
    // SAFETY: the host only reads both strings within their lengths.
    unsafe {
        dra_allocation_raw(
            addr(claim.as_ptr()),
            claim.len() as u32,
            addr(json.as_ptr()),
            json.len() as u32,
        )
    }
}

/// `pending_allocation`: signals an in-flight allocation of `claim`; 0 or an error code.
pub fn dra_pending_allocation(claim: &str, json: &str) -> i32 {
    // SAFETY: the host only reads both strings within their lengths.
    unsafe {
        dra_pending_allocation_raw(
            addr(claim.as_ptr()),
            claim.len() as u32,
            addr(json.as_ptr()),
            json.len() as u32,
        )
    }
}
