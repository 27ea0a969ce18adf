//! The upstream host modules `k8s.io/api`, `k8s.io/scheduler` and `k8s.io/klog` (upstream
//! `scheduler/plugin/host.go`, `mem.go`, `cstring.go`, `clusterevent.go`), with the buf_limit
//! protocol, last-call-wins setters and the Go host's panics turned into traps.

use std::collections::BTreeMap;
use std::sync::Arc;

use prost::Message;
use serde_json::Value;
use sharing_affinity_core::object::{Kind, Object};
use sharing_affinity_kswe_proto as proto;
use wasmtime::{Caller, Linker};

use super::abi::{MODULE_API, MODULE_KLOG, MODULE_SCHEDULER};
use super::context::{CallStack, ClusterEvent, EventReference, GuestData, LogRecord, RecordedEvent};
use super::table::host_panic;
use crate::limits::Exceeded;

type C<'a> = Caller<'a, GuestData>;

/// The guest's exported `memory` ([`GuestData::memory`], or by name before it is kept).
pub(crate) fn memory(caller: &mut C<'_>) -> Option<wasmtime::Memory> {
    caller
        .data()
        .memory
        .or_else(|| caller.get_export(super::abi::EXPORT_MEMORY)?.into_memory())
}

/// Reads `len` bytes at `ptr` of the guest's `memory`; `None` when out of bounds.
pub(crate) fn read(caller: &mut C<'_>, ptr: i32, len: i32) -> Option<Vec<u8>> {
    let memory = memory(caller)?;
    let start = ptr as u32 as usize;
    let end = start.checked_add(len as u32 as usize)?;
    memory.data(&*caller).get(start..end).map(<[u8]>::to_vec)
}

/// Writes `bytes` at `ptr`; false when out of bounds (nothing is written then).
pub(crate) fn write(caller: &mut C<'_>, ptr: i32, bytes: &[u8]) -> bool {
    let Some(memory) = memory(caller) else {
        return false;
    };
    let start = ptr as u32 as usize;
    match start
        .checked_add(bytes.len())
        .and_then(|end| memory.data_mut(&mut *caller).get_mut(start..end))
    {
        Some(dst) => {
            dst.copy_from_slice(bytes);
            true
        }
        None => false,
    }
}

/// `writeStringIfUnderLimit`: 0 for an empty value; the length without writing when it exceeds
/// the limit; otherwise the value is written and its length returned. Like wazero's
/// `Memory.WriteString`, a write outside memory is silently skipped.
pub(crate) fn write_string_if_under_limit(caller: &mut C<'_>, value: &[u8], buf: i32, limit: i32) -> i32 {
    if value.is_empty() {
        return 0;
    }
    if value.len() > limit as u32 as usize {
        return value.len() as i32;
    }
    let _ = write(caller, buf, value);
    value.len() as i32
}

/// `marshalIfUnderLimit`: as [`write_string_if_under_limit`], but a write outside memory panics
/// the Go host ("out of memory"), i.e. traps.
fn marshal_if_under_limit(
    caller: &mut C<'_>,
    value: Option<&[u8]>,
    buf: i32,
    limit: i32,
    frame: (&str, &str),
) -> wasmtime::Result<i32> {
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        return Ok(0);
    };
    if value.len() > limit as u32 as usize {
        return Ok(value.len() as i32);
    }
    if !write(caller, buf, value) {
        return Err(host_panic(frame, "out of memory"));
    }
    Ok(value.len() as i32)
}

/// The current call's stack, or the Go host's type-assertion panic when no callback is running.
fn stack<'a>(caller: &'a mut C<'_>, frame: (&str, &str)) -> wasmtime::Result<&'a mut CallStack> {
    {
        let mut cluster = caller.data().shared.cluster();
        if cluster.trap_next.as_deref() == Some(frame.1) {
            cluster.trap_next = None;
            return Err(host_panic(frame, "injected fault"));
        }
    }
    caller.data_mut().stack.as_mut().ok_or_else(|| {
        host_panic(
            frame,
            "interface conversion: interface {} is nil, not *wasm.stack",
        )
    })
}

fn read_or_panic(
    caller: &mut C<'_>,
    ptr: i32,
    len: i32,
    frame: (&str, &str),
    what: &str,
) -> wasmtime::Result<Vec<u8>> {
    read(caller, ptr, len).ok_or_else(|| host_panic(frame, format!("out of memory reading {what}")))
}

/// `fromNULTerminated`: NUL-terminated entries; empty entries are skipped and a trailing entry
/// without its NUL is dropped (upstream `cstring.go`). Invalid UTF-8 becomes U+FFFD, entry by
/// entry.
pub fn from_nul_terminated(bytes: &[u8]) -> Vec<String> {
    // Only what ends with a NUL counts: the entries are the pieces between the NULs before it.
    let Some(last) = bytes.iter().rposition(|b| *b == 0) else {
        return Vec::new();
    };
    let terminated = &bytes[..last];
    // A NUL never occurs inside a multi-byte UTF-8 sequence, so when the whole text is valid
    // every entry is (one fast check instead of one per entry).
    if let Ok(text) = std::str::from_utf8(terminated) {
        return text
            .split('\0')
            .filter(|e| !e.is_empty())
            .map(str::to_owned)
            .collect();
    }
    terminated
        .split(|b| *b == 0)
        .filter(|e| !e.is_empty())
        .map(|e| String::from_utf8_lossy(e).into_owned())
        .collect()
}

/// Guest bytes as text, invalid UTF-8 replaced by U+FFFD (as `String::from_utf8_lossy`, without
/// copying valid text).
pub(crate) fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// `nodeImageStates` for a node: its `NodeInfo.ImageStates` as the scheduler snapshot has them,
/// marshalled by Go's `encoding/json` (keys sorted, Go field names). Every name of every image in
/// the node's `status.images` maps to `{"Size":..,"NumNodes":..,"Nodes":null}`: `NumNodes` counts
/// the nodes listing that name, `Size` is the size the scheduler cache recorded when it first saw
/// the name (here: the first node in name order listing it), and `Nodes` is nil in a snapshot
/// (`ImageStateSummary.Snapshot`). A node without images gives `{}`, an unknown node `null`.
pub fn image_states_json(store: &super::store::ObjectStore, node: &str) -> String {
    let Some(Object::Node(target)) = store.get(Kind::Node, node) else {
        return "null".into();
    };
    let mut states: BTreeMap<&str, (i64, usize)> = BTreeMap::new();
    for image in &target.status.images {
        for name in &image.names {
            states.insert(name, (image.size_bytes, 0));
        }
    }
    let mut first_size: BTreeMap<&str, i64> = BTreeMap::new();
    for object in store.objects(Kind::Node) {
        let Object::Node(n) = object else { continue };
        let mut seen = std::collections::BTreeSet::new();
        for image in &n.status.images {
            for name in &image.names {
                if let Some(state) = states.get_mut(name.as_str()) {
                    first_size.entry(name).or_insert(image.size_bytes);
                    if seen.insert(name) {
                        state.1 += 1;
                    }
                }
            }
        }
    }
    // Keys sorted (a Go map), fields in struct order (Size, NumNodes, Nodes).
    let entries: Vec<String> = states
        .into_iter()
        .map(|(name, (size, num_nodes))| {
            let size = first_size.get(name).copied().unwrap_or(size);
            format!(
                "{}:{{\"Size\":{size},\"NumNodes\":{num_nodes},\"Nodes\":null}}",
                Value::String(name.to_string())
            )
        })
        .collect();
    format!("{{{}}}", entries.join(","))
}

/// Upstream GVK index → EventResource (`clusterevent.go`).
pub fn gvk_resource(index: u32) -> String {
    const NAMES: [&str; 11] = [
        "Pod",
        "Node",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "PodSchedulingContext",
        "ResourceClaim",
        "storage.k8s.io/StorageClass",
        "storage.k8s.io/CSINode",
        "storage.k8s.io/CSIDriver",
        "storage.k8s.io/CSIStorageCapacity",
        "*",
    ];
    NAMES
        .get(index as usize)
        .map(|s| s.to_string())
        .unwrap_or_else(|| format!("EventResource({index})"))
}

/// `decodeClusterEvents`: 8-byte records `u32le gvk, u32le actionType`; a partial tail is ignored.
pub fn decode_cluster_events(bytes: &[u8]) -> Vec<ClusterEvent> {
    bytes
        .chunks_exact(8)
        .map(|c| ClusterEvent {
            resource: gvk_resource(u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            action_type: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
        })
        .collect()
}

/// Protobuf bytes of a node, cached per revision; `None` when the node does not exist.
fn node_bytes(caller: &mut C<'_>, name: &str) -> Option<Arc<Vec<u8>>> {
    let shared = caller.data().shared.clone();
    let mut cluster = shared.cluster();
    let Some(rev) = cluster.store.modified(Kind::Node, name) else {
        // A node the plugin rejected: the framework knows it, here by its name only.
        if !cluster.store.is_refused_node(name) {
            return None;
        }
        let mut node = sharing_affinity_core::model::Node::default();
        node.metadata.name = name.into();
        return Some(Arc::new(proto::node_to_proto(&node).ok()?.encode_to_vec()));
    };
    if let Some((r, bytes)) = cluster.node_bytes.get(name)
        && *r == rev
    {
        return Some(bytes.clone());
    }
    let Some(Object::Node(node)) = cluster.store.get(Kind::Node, name) else {
        return None;
    };
    // The store only holds nodes that convert (checked on insert).
    let bytes = Arc::new(proto::node_to_proto(node).ok()?.encode_to_vec());
    cluster.node_bytes.insert(name.to_string(), (rev, bytes.clone()));
    Some(bytes)
}

/// Go `encoding/json` of a `map[string]V`: keys sorted.
fn json_map<V: serde::Serialize>(map: &BTreeMap<String, V>) -> Vec<u8> {
    serde_json::to_vec(map).unwrap_or_else(|_| b"{}".to_vec())
}

/// Adds `k8s.io/api`.
pub fn add_api(linker: &mut Linker<GuestData>) -> wasmtime::Result<()> {
    linker.func_wrap(
        MODULE_API,
        "node",
        |mut c: C<'_>, name: i32, name_len: i32, buf: i32, limit: i32| {
            const F: (&str, &str) = (MODULE_API, "node");
            let name = read_or_panic(&mut c, name, name_len, F, "nodeName")?;
            let bytes = node_bytes(&mut c, &String::from_utf8_lossy(&name));
            marshal_if_under_limit(&mut c, bytes.as_deref().map(Vec::as_slice), buf, limit, F)
        },
    )?;
    linker.func_wrap(MODULE_API, "nodeList", |mut c: C<'_>, buf: i32, limit: i32| {
        let list = {
            let shared = c.data().shared.clone();
            let cluster = shared.cluster();
            let items = cluster
                .store
                .objects(Kind::Node)
                .filter_map(|o| match o {
                    Object::Node(n) => proto::node_to_proto(n).ok(),
                    _ => None,
                })
                .collect();
            proto::NodeList {
                metadata: Some(proto::ListMeta::default()),
                items,
            }
            .encode_to_vec()
        };
        marshal_if_under_limit(&mut c, Some(&list), buf, limit, (MODULE_API, "nodeList"))
    })?;
    Ok(())
}

/// Adds `k8s.io/scheduler`.
pub fn add_scheduler(linker: &mut Linker<GuestData>) -> wasmtime::Result<()> {
    const M: &str = MODULE_SCHEDULER;
    linker.func_wrap(M, "get_config", |mut c: C<'_>, buf: i32, limit: i32| {
        let config = c.data().shared.settings.guest_config.clone();
        Ok(write_string_if_under_limit(&mut c, config.as_bytes(), buf, limit))
    })?;
    linker.func_wrap(M, "filteredNodeList", |mut c: C<'_>, buf: i32, limit: i32| {
        let nodes = stack(&mut c, (M, "filteredNodeList"))?
            .filtered_nodes
            .clone()
            .unwrap_or_default();
        let json = serde_json::to_vec(&nodes).unwrap_or_else(|_| b"[]".to_vec());
        Ok(write_string_if_under_limit(&mut c, &json, buf, limit))
    })?;
    for (name, target) in [("currentPod", false), ("targetPod", true)] {
        linker.func_wrap(M, name, move |mut c: C<'_>, buf: i32, limit: i32| {
            let s = stack(&mut c, (M, name))?;
            let pod = if target {
                s.target_pod.clone()
            } else {
                s.current_pod.clone()
            };
            marshal_if_under_limit(&mut c, pod.as_deref().map(Vec::as_slice), buf, limit, (M, name))
        })?;
    }
    linker.func_wrap(M, "currentNodeName", |mut c: C<'_>, buf: i32, limit: i32| {
        let name = stack(&mut c, (M, "currentNodeName"))?.current_node_name.clone();
        Ok(write_string_if_under_limit(&mut c, name.as_bytes(), buf, limit))
    })?;
    linker.func_wrap(
        M,
        "nodeImageStates",
        |mut c: C<'_>, name: i32, name_len: i32, buf: i32, limit: i32| {
            let name = read_or_panic(&mut c, name, name_len, (M, "nodeImageStates"), "nodeName")?;
            let name = text(name);
            let json = image_states_json(&c.data().shared.cluster().store, &name);
            Ok(write_string_if_under_limit(&mut c, json.as_bytes(), buf, limit))
        },
    )?;
    linker.func_wrap(M, "nodeToStatusMap", |mut c: C<'_>, buf: i32, limit: i32| {
        let map = stack(&mut c, (M, "nodeToStatusMap"))?
            .node_to_status
            .clone()
            .unwrap_or_default();
        Ok(write_string_if_under_limit(&mut c, &json_map(&map), buf, limit))
    })?;
    linker.func_wrap(M, "nodeScoreList", |mut c: C<'_>, buf: i32, limit: i32| {
        let list = stack(&mut c, (M, "nodeScoreList"))?
            .node_scores
            .clone()
            .unwrap_or_default();
        let map: BTreeMap<String, i64> = list.into_iter().collect();
        Ok(write_string_if_under_limit(&mut c, &json_map(&map), buf, limit))
    })?;
    linker.func_wrap(M, "result.cluster_events", |mut c: C<'_>, buf: i32, len: i32| {
        const F: (&str, &str) = (M, "result.cluster_events");
        let bytes = read_or_panic(&mut c, buf, len, F, "clusterEvents")?;
        stack(&mut c, F)?.result_cluster_events = decode_cluster_events(&bytes);
        Ok(())
    })?;
    linker.func_wrap(M, "result.node_names", |mut c: C<'_>, buf: i32, len: i32| {
        const F: (&str, &str) = (M, "result.node_names");
        let bytes = read_or_panic(&mut c, buf, len, F, "nodeNames")?;
        let names = from_nul_terminated(&bytes);
        stack(&mut c, F)?.result_node_names = (!names.is_empty()).then_some(names);
        Ok(())
    })?;
    linker.func_wrap(
        M,
        "result.nominated_node_name",
        |mut c: C<'_>, buf: i32, len: i32| {
            const F: (&str, &str) = (M, "result.nominated_node_name");
            let bytes = read_or_panic(&mut c, buf, len, F, "nominatedNodeName")?;
            stack(&mut c, F)?.result_nominated_node_name = text(bytes);
            Ok(())
        },
    )?;
    linker.func_wrap(M, "result.status_reason", |mut c: C<'_>, buf: i32, len: i32| {
        // Not upstream: a reason over the limit ends the call (the host would copy it, and the
        // scheduler would keep it per node).
        let limit = c.data().shared.settings.limits.max_status_reason_bytes;
        let len_bytes = len as u32 as usize;
        if len_bytes > limit {
            return Err(wasmtime::Error::new(Exceeded::Reason {
                limit,
                len: len_bytes,
            }));
        }
        let (reason, unreadable) = match read(&mut c, buf, len) {
            Some(b) => (text(b), false),
            None => ("BUG: out of memory reading message".to_string(), true),
        };
        let s = stack(&mut c, (M, "result.status_reason"))?;
        s.result_status_reason = reason;
        s.result_status_reason_unreadable = unreadable;
        Ok(())
    })?;
    linker.func_wrap(
        M,
        "result.normalized_score_list",
        |mut c: C<'_>, buf: i32, len: i32| {
            const F: (&str, &str) = (M, "result.normalized_score_list");
            let bytes = read_or_panic(&mut c, buf, len, F, "normalized score list")?;
            // Go unmarshals into map[string]int and panics on error; `null` gives a nil map.
            let map: Option<BTreeMap<String, i64>> =
                serde_json::from_slice(&bytes).map_err(|e| host_panic(F, e.to_string()))?;
            // Upstream rebuilds the list by iterating the Go map (random order). This host uses name
            // order: one of the orders Go may produce, deterministic for tests.
            stack(&mut c, F)?.result_normalized_scores = map.map(|m| m.into_iter().collect());
            Ok(())
        },
    )?;
    linker.func_wrap(
        M,
        "handle.eventrecorder.eventf",
        |mut c: C<'_>, buf: i32, len: i32| {
            const F: (&str, &str) = (M, "handle.eventrecorder.eventf");
            let bytes = read_or_panic(&mut c, buf, len, F, "eventrecorder event")?;
            let event = parse_event(&bytes).map_err(|e| host_panic(F, e))?;
            c.data().shared.cluster().push_event(event);
            Ok(())
        },
    )?;
    linker.func_wrap(
        M,
        "handle.reject_waiting_pod",
        |mut c: C<'_>, uid: i32, uid_len: i32, out: i32, _limit: i32| {
            let uid = read_or_panic(
                &mut c,
                uid,
                uid_len,
                (M, "handle.reject_waiting_pod"),
                "rejectWaitingPod",
            )?;
            let uid = text(uid);
            let rejected = c.data().shared.cluster().waiting.remove(&uid).is_some();
            // The limit is ignored and a failed write is not reported, as upstream.
            let _ = write(&mut c, out, &u64::from(rejected).to_le_bytes());
            Ok(())
        },
    )?;
    linker.func_wrap(
        M,
        "handle.get_waiting_pod",
        |mut c: C<'_>, uid: i32, uid_len: i32, out: i32, limit: i32| {
            const F: (&str, &str) = (M, "handle.get_waiting_pod");
            let uid = read_or_panic(&mut c, uid, uid_len, F, "getWaitingPod")?;
            let uid = text(uid);
            let pod = c.data().shared.cluster().waiting.get(&uid).cloned();
            let Some(pod) = pod else {
                let _ = write(&mut c, out, &0u64.to_le_bytes());
                return Ok(());
            };
            let bytes = proto::pod_to_proto(&pod)
                .map_err(|e| host_panic(F, e.to_string()))?
                .encode_to_vec();
            // No length reaches the guest: the export has no result (upstream bug, kswe-abi.md §1.3).
            if marshal_if_under_limit(&mut c, Some(&bytes), out, limit, F)? == 0 {
                return Err(host_panic(F, "out of memory writing getWaitingPod result"));
            }
            Ok(())
        },
    )?;
    Ok(())
}

/// Go `encoding/json` into the upstream `EventMessage`: field names match case-insensitively,
/// unknown fields are ignored, a wrongly typed field is an error.
fn parse_event(bytes: &[u8]) -> Result<RecordedEvent, String> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let Value::Object(map) = value else {
        return if value.is_null() {
            Ok(RecordedEvent::default())
        } else {
            Err(format!(
                "json: cannot unmarshal {value} into Go value of type wasm.EventMessage"
            ))
        };
    };
    fn field<'a>(map: &'a serde_json::Map<String, Value>, name: &str) -> Option<&'a Value> {
        map.get(name).or_else(|| {
            map.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v)
        })
    }
    fn string(map: &serde_json::Map<String, Value>, name: &str) -> Result<String, String> {
        match field(map, name) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(format!(
                "json: cannot unmarshal {other} into Go struct field of type string ({name})"
            )),
        }
    }
    fn reference(map: &serde_json::Map<String, Value>, name: &str) -> Result<EventReference, String> {
        match field(map, name) {
            None | Some(Value::Null) => Ok(EventReference::default()),
            Some(Value::Object(r)) => Ok(EventReference {
                kind: string(r, "Kind")?,
                api_version: string(r, "APIVersion")?,
                name: string(r, "Name")?,
                namespace: string(r, "Namespace")?,
                uid: string(r, "UID")?,
                resource_version: string(r, "ResourceVersion")?,
            }),
            Some(other) => Err(format!(
                "json: cannot unmarshal {other} into Go struct field of type ObjectReference ({name})"
            )),
        }
    }
    Ok(RecordedEvent {
        regarding: reference(&map, "RegardingReference")?,
        related: reference(&map, "RelatedReference")?,
        event_type: string(&map, "Eventtype")?,
        reason: string(&map, "Reason")?,
        action: string(&map, "Action")?,
        note: string(&map, "Note")?,
    })
}

fn record_log(c: &C<'_>, severity: i32, message: String, kvs: Vec<String>) {
    // klog.Info for 0 and klog.Error for 2; warnings and fatal are dropped, as upstream.
    if severity == 0 || severity == 2 {
        c.data().shared.cluster().push_log(LogRecord {
            severity,
            message,
            kvs,
        });
    }
}

fn klog_log(c: &mut C<'_>, severity: i32, msg: i32, msg_len: i32) {
    // Upstream bug kept on purpose (kswe-abi.md §1.4): the check is inverted, so with the
    // default configuration errors are dropped and infos are kept.
    if severity > c.data().shared.settings.log_severity {
        return;
    }
    if let Some(bytes) = read(c, msg, msg_len) {
        record_log(c, severity, text(bytes), Vec::new());
    }
}

/// Adds `k8s.io/klog`.
pub fn add_klog(linker: &mut Linker<GuestData>) -> wasmtime::Result<()> {
    linker.func_wrap(MODULE_KLOG, "severity", |c: C<'_>| {
        c.data().shared.settings.log_severity
    })?;
    linker.func_wrap(
        MODULE_KLOG,
        "log",
        |mut c: C<'_>, severity: i32, msg: i32, msg_len: i32| {
            klog_log(&mut c, severity, msg, msg_len);
        },
    )?;
    linker.func_wrap(
        MODULE_KLOG,
        "logs",
        |mut c: C<'_>, severity: i32, msg: i32, msg_len: i32, kvs: i32, kvs_len: i32| {
            if kvs_len == 0 {
                klog_log(&mut c, severity, msg, msg_len);
                return;
            }
            if severity < c.data().shared.settings.log_severity {
                return;
            }
            let (Some(msg), Some(kvs)) = (read(&mut c, msg, msg_len), read(&mut c, kvs, kvs_len)) else {
                return;
            };
            record_log(&c, severity, text(msg), from_nul_terminated(&kvs));
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_terminated_matches_upstream_cstring_cases() {
        for (input, expected, msg) in [
            (&b""[..], &[][..], "empty"),
            (b"a\0", &["a"][..], "one"),
            (b"a\0two\0", &["a", "two"], "two"),
            (b"a\0\0two\0", &["a", "two"], "skip empty"),
            (b"a\0two", &["a"], "skip truncated"),
            ("a\0fóo\0c\0".as_bytes(), &["a", "fóo", "c"], "unicode"),
            (b"\0\0\0", &[][..], "only NULs"),
            (
                b"a\xff\0b\0",
                &["a\u{fffd}", "b"],
                "invalid UTF-8, replaced per entry",
            ),
            (b"a\0\xe2\x82", &["a"], "invalid UTF-8 only in the dropped tail"),
            (
                b"\xe2\x82\0\xac\0",
                &["\u{fffd}", "\u{fffd}"],
                "a sequence cut by a NUL",
            ),
        ] {
            assert_eq!(from_nul_terminated(input), expected, "{msg}");
            // The upstream rule, entry by entry, as the reference.
            let mut reference = Vec::new();
            let mut start = 0;
            for (i, b) in input.iter().enumerate() {
                if *b == 0 {
                    if i > start {
                        reference.push(String::from_utf8_lossy(&input[start..i]).into_owned());
                    }
                    start = i + 1;
                }
            }
            assert_eq!(from_nul_terminated(input), reference, "{msg}");
        }
    }

    #[test]
    fn text_is_lossy_utf8() {
        for bytes in [
            &b""[..],
            b"plain",
            "fóo".as_bytes(),
            b"a\xffb",
            b"\xe2\x82",
            b"\0x",
        ] {
            assert_eq!(text(bytes.to_vec()), String::from_utf8_lossy(bytes), "{bytes:?}");
        }
    }

    #[test]
    fn cluster_events_decode_with_unknown_gvk_and_partial_tail() {
        let mut bytes = Vec::new();
        for (gvk, action) in [(1u32, 1u32), (2, 2), (10, 63), (42, 4)] {
            bytes.extend_from_slice(&gvk.to_le_bytes());
            bytes.extend_from_slice(&action.to_le_bytes());
        }
        bytes.extend_from_slice(&[1, 2, 3]);
        let events = decode_cluster_events(&bytes);
        let got: Vec<(&str, u32)> = events
            .iter()
            .map(|e| (e.resource.as_str(), e.action_type))
            .collect();
        assert_eq!(
            got,
            [
                ("Node", 1),
                ("PersistentVolume", 2),
                ("*", 63),
                ("EventResource(42)", 4)
            ]
        );
    }

    #[test]
    fn event_json_is_case_insensitive_and_typed() {
        let e = parse_event(
            br#"{"regardingreference":{"kind":"Pod","Name":"p"},"EVENTTYPE":"Normal","Note":"n","x":1}"#,
        )
        .unwrap();
        assert_eq!(e.regarding.kind, "Pod");
        assert_eq!(e.regarding.name, "p");
        assert_eq!(e.event_type, "Normal");
        assert_eq!(e.note, "n");
        assert!(parse_event(br#"{"Reason":5}"#).unwrap_err().contains("Reason"));
        assert!(parse_event(b"not json").is_err());
    }
}
