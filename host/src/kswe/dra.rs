//! The `sharing-affinity.dra/v1` host module: the DRA change feed and the allocation write-back
//! (specified in `docs/kswe-dra-extension.md`).
//!
//! - `changes(cursor, cursor_len, buf, buf_limit) -> len`: the JSON change feed since the cursor,
//!   with KSWE's buf_limit protocol. Callable at any time, including `_start`.
//! - `allocation(claim, claim_len, json, json_len) -> i32`: writes `status.allocation` and adds the
//!   current pod to `status.reservedFor` (PreBind).
//! - `pending_allocation(claim, claim_len, json, json_len) -> i32`: records an in-flight allocation
//!   (Reserve), shown to other instances' feeds and dropped by Unreserve.
//!
//! - `deallocation(claim, claim_len, version, version_len) -> i32`: clears the allocation of a
//!   claim still at `metadata.resourceVersion` `version` that no other pod uses (PostFilter).
//! - `now() -> i64`: the host's clock in Unix seconds (the replay's time).
//! - `wait(seconds) -> i32`: PreBind's wait for binding conditions; a replay has no driver that
//!   could change a claim meanwhile, so it advances the clock by `seconds`.
//!
//! The writes return 0 or a [`DraError`] code and need a current pod (a framework callback).

use std::sync::Arc;

use sharing_affinity_core::model::AllocationResult;
use wasmtime::{Caller, Linker};

use super::abi::MODULE_DRA;
use super::context::{DraWrite, GuestData};
use super::imports::read;
use super::store::DraError;
use super::table::host_panic;

type C<'a> = Caller<'a, GuestData>;

/// The events of one `changes` document stop after about this much JSON (1 MiB); the document
/// then says `"more":true` and the guest asks again from its cursor.
pub const FEED_PAGE_BYTES: usize = 1 << 20;

fn write_fits(c: &mut C<'_>, value: &[u8], buf: i32, limit: i32) -> wasmtime::Result<i32> {
    if value.len() > limit as u32 as usize {
        return Ok(value.len() as i32);
    }
    if !super::imports::write(c, buf, value) {
        return Err(host_panic(
            (MODULE_DRA, "changes"),
            "out of memory writing changes",
        ));
    }
    Ok(value.len() as i32)
}

fn read_str(c: &mut C<'_>, ptr: i32, len: i32, name: &str, what: &str) -> wasmtime::Result<String> {
    let bytes = read(c, ptr, len)
        .ok_or_else(|| host_panic((MODULE_DRA, name), format!("out of memory reading {what}")))?;
    Ok(super::imports::text(bytes))
}

/// Shared body of `allocation` and `pending_allocation`.
fn write_call(
    c: &mut C<'_>,
    name: &str,
    claim: (i32, i32),
    json: (i32, i32),
    pending: bool,
) -> wasmtime::Result<i32> {
    let claim = read_str(c, claim.0, claim.1, name, "claim")?;
    let json = read_str(c, json.0, json.1, name, "allocation")?;
    let Some(pod) = c.data().stack.as_ref().and_then(|s| s.current_pod_object.clone()) else {
        return Ok(DraError::NoPod as i32);
    };
    let Ok(allocation) = serde_json::from_str::<AllocationResult>(&json) else {
        return Ok(DraError::Invalid as i32);
    };
    let shared = Arc::clone(&c.data().shared);
    let result = {
        let mut cluster = shared.cluster();
        if pending {
            cluster
                .store
                .set_pending(&claim, &pod, allocation.clone())
                .map(drop)
        } else {
            cluster
                .store
                .write_allocation(&claim, &pod, allocation.clone())
                .map(drop)
        }
    };
    if let Err(e) = result {
        return Ok(e as i32);
    }
    if let Some(stack) = c.data_mut().stack.as_mut() {
        let record = DraWrite { claim, allocation };
        if pending {
            stack.pending_allocations.push(record)
        } else {
            stack.allocations.push(record)
        }
    }
    Ok(0)
}

/// Adds `sharing-affinity.dra/v1`.
pub fn add_dra(linker: &mut Linker<GuestData>) -> wasmtime::Result<()> {
    linker.func_wrap(
        MODULE_DRA,
        "changes",
        |mut c: C<'_>, cursor: i32, cursor_len: i32, buf: i32, limit: i32| {
            let cursor = read_str(&mut c, cursor, cursor_len, "changes", "cursor")?;
            let shared = Arc::clone(&c.data().shared);
            let doc = {
                let mut cluster = shared.cluster();
                let rev = cluster.store.revision();
                match &cluster.feed_cache {
                    Some((c, r, doc)) if *c == cursor && *r == rev => doc.clone(),
                    _ => {
                        let doc = Arc::new(cluster.store.changes_page(&cursor, FEED_PAGE_BYTES));
                        cluster.feed_cache = Some((cursor, rev, doc.clone()));
                        doc
                    }
                }
            };
            write_fits(&mut c, doc.as_bytes(), buf, limit)
        },
    )?;
    linker.func_wrap(
        MODULE_DRA,
        "allocation",
        |mut c: C<'_>, claim: i32, claim_len: i32, json: i32, json_len: i32| {
            write_call(&mut c, "allocation", (claim, claim_len), (json, json_len), false)
        },
    )?;
    linker.func_wrap(MODULE_DRA, "now", |c: C<'_>| -> i64 {
        c.data().shared.cluster().now
    })?;
    linker.func_wrap(MODULE_DRA, "wait", |c: C<'_>, seconds: i32| -> i32 {
        if c.data()
            .stack
            .as_ref()
            .and_then(|s| s.current_pod_object.as_ref())
            .is_none()
        {
            return DraError::NoPod as i32;
        }
        if !(1..=600).contains(&seconds) {
            return DraError::Invalid as i32;
        }
        let mut cluster = c.data().shared.cluster();
        cluster.now = cluster.now.saturating_add(i64::from(seconds));
        0
    })?;
    linker.func_wrap(
        MODULE_DRA,
        "deallocation",
        |mut c: C<'_>, claim: i32, claim_len: i32, version: i32, version_len: i32| {
            let claim = read_str(&mut c, claim, claim_len, "deallocation", "claim")?;
            let version = read_str(&mut c, version, version_len, "deallocation", "version")?;
            let Some(pod) = c.data().stack.as_ref().and_then(|s| s.current_pod_object.clone()) else {
                return Ok(DraError::NoPod as i32);
            };
            let shared = Arc::clone(&c.data().shared);
            let result = shared.cluster().store.deallocate(&claim, &version, &pod);
            if let Err(e) = result {
                return Ok(e as i32);
            }
            if let Some(stack) = c.data_mut().stack.as_mut() {
                stack.deallocations.push(claim);
            }
            Ok(0)
        },
    )?;
    linker.func_wrap(
        MODULE_DRA,
        "pending_allocation",
        |mut c: C<'_>, claim: i32, claim_len: i32, json: i32, json_len: i32| {
            write_call(
                &mut c,
                "pending_allocation",
                (claim, claim_len),
                (json, json_len),
                true,
            )
        },
    )?;
    Ok(())
}
