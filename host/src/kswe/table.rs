//! The table of every host function, with its exact signature: the single source for the import
//! check (wazero's resolution errors), for host-panic stack frames, and for the test that the
//! linker defines exactly these functions.

use wasmtime::{ExternType, Module, ValType};

use super::abi::{MODULE_API, MODULE_DRA, MODULE_KLOG, MODULE_SCHEDULER, MODULE_WASI, signature_key};
use super::trap::HostPanic;

/// A wasm value type in the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum W {
    /// `i32`.
    I32,
    /// `i64`.
    I64,
}

impl W {
    /// The wasmtime value type.
    pub fn val(self) -> ValType {
        match self {
            W::I32 => ValType::I32,
            W::I64 => ValType::I64,
        }
    }
}

/// One host function.
#[derive(Clone, Copy, Debug)]
pub struct HostFn {
    /// Import module.
    pub module: &'static str,
    /// Function name.
    pub name: &'static str,
    /// Parameter types.
    pub params: &'static [W],
    /// Result types.
    pub results: &'static [W],
}

use W::{I32, I64};

const fn f(module: &'static str, name: &'static str, params: &'static [W], results: &'static [W]) -> HostFn {
    HostFn {
        module,
        name,
        params,
        results,
    }
}

const P2: &[W] = &[I32, I32];
const P4: &[W] = &[I32, I32, I32, I32];
const R: &[W] = &[I32];
const V: &[W] = &[];

/// The upstream modules `k8s.io/api`, `k8s.io/scheduler` and `k8s.io/klog` (`host.go:61-140`).
pub const UPSTREAM: &[HostFn] = &[
    f(MODULE_API, "node", P4, R),
    f(MODULE_API, "nodeList", P2, R),
    f(MODULE_KLOG, "log", &[I32, I32, I32], V),
    f(MODULE_KLOG, "logs", &[I32, I32, I32, I32, I32], V),
    f(MODULE_KLOG, "severity", V, R),
    f(MODULE_SCHEDULER, "get_config", P2, R),
    f(MODULE_SCHEDULER, "filteredNodeList", P2, R),
    f(MODULE_SCHEDULER, "targetPod", P2, R),
    f(MODULE_SCHEDULER, "currentNodeName", P2, R),
    f(MODULE_SCHEDULER, "nodeImageStates", P4, R),
    f(MODULE_SCHEDULER, "currentPod", P2, R),
    f(MODULE_SCHEDULER, "result.cluster_events", P2, V),
    f(MODULE_SCHEDULER, "result.node_names", P2, V),
    f(MODULE_SCHEDULER, "result.nominated_node_name", P2, V),
    f(MODULE_SCHEDULER, "result.status_reason", P2, V),
    f(MODULE_SCHEDULER, "nodeToStatusMap", P2, R),
    f(MODULE_SCHEDULER, "result.normalized_score_list", P2, V),
    f(MODULE_SCHEDULER, "nodeScoreList", P2, R),
    f(MODULE_SCHEDULER, "handle.eventrecorder.eventf", P2, V),
    f(MODULE_SCHEDULER, "handle.reject_waiting_pod", P4, V),
    f(MODULE_SCHEDULER, "handle.get_waiting_pod", P4, V),
];

/// The `sharing-affinity.dra/v1` extension.
pub const DRA: &[HostFn] = &[
    f(MODULE_DRA, "changes", P4, R),
    f(MODULE_DRA, "allocation", P4, R),
    f(MODULE_DRA, "pending_allocation", P4, R),
    f(MODULE_DRA, "deallocation", P4, R),
    f(MODULE_DRA, "now", &[], &[I64]),
    f(MODULE_DRA, "wait", &[I32], R),
];

/// WASI preview 1: the 46 functions of wazero's `wasi_snapshot_preview1` module.
pub const WASI: &[HostFn] = &[
    f(MODULE_WASI, "args_get", P2, R),
    f(MODULE_WASI, "args_sizes_get", P2, R),
    f(MODULE_WASI, "environ_get", P2, R),
    f(MODULE_WASI, "environ_sizes_get", P2, R),
    f(MODULE_WASI, "clock_res_get", P2, R),
    f(MODULE_WASI, "clock_time_get", &[I32, I64, I32], R),
    f(MODULE_WASI, "fd_advise", &[I32, I64, I64, I32], R),
    f(MODULE_WASI, "fd_allocate", &[I32, I64, I64], R),
    f(MODULE_WASI, "fd_close", &[I32], R),
    f(MODULE_WASI, "fd_datasync", &[I32], R),
    f(MODULE_WASI, "fd_fdstat_get", P2, R),
    f(MODULE_WASI, "fd_fdstat_set_flags", P2, R),
    f(MODULE_WASI, "fd_fdstat_set_rights", &[I32, I64, I64], R),
    f(MODULE_WASI, "fd_filestat_get", P2, R),
    f(MODULE_WASI, "fd_filestat_set_size", &[I32, I64], R),
    f(MODULE_WASI, "fd_filestat_set_times", &[I32, I64, I64, I32], R),
    f(MODULE_WASI, "fd_pread", &[I32, I32, I32, I64, I32], R),
    f(MODULE_WASI, "fd_prestat_get", P2, R),
    f(MODULE_WASI, "fd_prestat_dir_name", &[I32, I32, I32], R),
    f(MODULE_WASI, "fd_pwrite", &[I32, I32, I32, I64, I32], R),
    f(MODULE_WASI, "fd_read", P4, R),
    f(MODULE_WASI, "fd_readdir", &[I32, I32, I32, I64, I32], R),
    f(MODULE_WASI, "fd_renumber", P2, R),
    f(MODULE_WASI, "fd_seek", &[I32, I64, I32, I32], R),
    f(MODULE_WASI, "fd_sync", &[I32], R),
    f(MODULE_WASI, "fd_tell", P2, R),
    f(MODULE_WASI, "fd_write", P4, R),
    f(MODULE_WASI, "path_create_directory", &[I32, I32, I32], R),
    f(MODULE_WASI, "path_filestat_get", &[I32, I32, I32, I32, I32], R),
    f(
        MODULE_WASI,
        "path_filestat_set_times",
        &[I32, I32, I32, I32, I64, I64, I32],
        R,
    ),
    f(MODULE_WASI, "path_link", &[I32, I32, I32, I32, I32, I32, I32], R),
    f(
        MODULE_WASI,
        "path_open",
        &[I32, I32, I32, I32, I32, I64, I64, I32, I32],
        R,
    ),
    f(MODULE_WASI, "path_readlink", &[I32, I32, I32, I32, I32, I32], R),
    f(MODULE_WASI, "path_remove_directory", &[I32, I32, I32], R),
    f(MODULE_WASI, "path_rename", &[I32, I32, I32, I32, I32, I32], R),
    f(MODULE_WASI, "path_symlink", &[I32, I32, I32, I32, I32], R),
    f(MODULE_WASI, "path_unlink_file", &[I32, I32, I32], R),
    f(MODULE_WASI, "poll_oneoff", P4, R),
    f(MODULE_WASI, "proc_exit", &[I32], V),
    f(MODULE_WASI, "proc_raise", &[I32], R),
    f(MODULE_WASI, "sched_yield", V, R),
    f(MODULE_WASI, "random_get", P2, R),
    f(MODULE_WASI, "sock_accept", &[I32, I32, I32], R),
    f(MODULE_WASI, "sock_recv", &[I32, I32, I32, I32, I32, I32], R),
    f(MODULE_WASI, "sock_send", &[I32, I32, I32, I32, I32], R),
    f(MODULE_WASI, "sock_shutdown", P2, R),
];

/// The host function `module.name`, if any.
pub fn lookup(module: &str, name: &str) -> Option<&'static HostFn> {
    UPSTREAM
        .iter()
        .chain(DRA)
        .chain(WASI)
        .find(|f| f.module == module && f.name == name)
}

/// A Go host-function panic with its wazero frame, e.g. `k8s.io/api.node(i32,i32,i32,i32) i32`.
pub fn host_panic(frame: (&str, &str), message: impl Into<String>) -> wasmtime::Error {
    let (module, name) = frame;
    let frame = match lookup(module, name) {
        Some(f) => {
            let names = |ws: &[W]| {
                ws.iter()
                    .map(|w| if *w == I32 { "i32" } else { "i64" })
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let results = match f.results.len() {
                0 => String::new(),
                1 => format!(" {}", names(f.results)),
                _ => format!(" ({})", names(f.results)),
            };
            format!("{module}.{name}({}){results}", names(f.params))
        }
        None => format!("{module}.{name}"),
    };
    wasmtime::Error::new(HostPanic {
        message: message.into(),
        frame,
    })
}

/// Which host modules a guest imports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Imported {
    /// `wasi_snapshot_preview1`.
    pub wasi: bool,
    /// `sharing-affinity.dra/v1`.
    pub dra: bool,
}

fn extern_name(ty: &ExternType) -> &'static str {
    match ty {
        ExternType::Func(_) => "func",
        ExternType::Table(_) => "table",
        ExternType::Memory(_) => "memory",
        ExternType::Global(_) => "global",
        ExternType::Tag(_) => "tag",
    }
}

/// Resolves the guest's imports as wazero does at instantiation, in import order, with wazero's
/// messages: `module[<m>] not instantiated`, `"<n>" is not exported in module "<m>"`,
/// `export "<n>" in module "<m>" is a func, not a <type>` and
/// `import func[<m>.<n>]: signature mismatch: <want> != <have>`.
pub fn resolve_imports(module: &Module, dra_extension: bool) -> Result<Imported, String> {
    let mut imported = Imported::default();
    for import in module.imports() {
        let (m, n) = (import.module(), import.name());
        let known_module = [MODULE_API, MODULE_SCHEDULER, MODULE_KLOG, MODULE_WASI].contains(&m)
            || (dra_extension && m == MODULE_DRA);
        if !known_module {
            return Err(format!("module[{m}] not instantiated"));
        }
        imported.wasi |= m == MODULE_WASI;
        imported.dra |= m == MODULE_DRA;
        let Some(host) = lookup(m, n) else {
            return Err(format!("{n:?} is not exported in module {m:?}"));
        };
        let ty = import.ty();
        let ExternType::Func(ft) = &ty else {
            return Err(format!(
                "export {n:?} in module {m:?} is a func, not a {}",
                extern_name(&ty)
            ));
        };
        let want: Vec<ValType> = ft.params().collect();
        let want_results: Vec<ValType> = ft.results().collect();
        let have: Vec<ValType> = host.params.iter().map(|w| w.val()).collect();
        let have_results: Vec<ValType> = host.results.iter().map(|w| w.val()).collect();
        let same = |a: &[ValType], b: &[ValType]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| ValType::eq(x, y))
        };
        if !same(&want, &have) || !same(&want_results, &have_results) {
            return Err(format!(
                "import func[{m}.{n}]: signature mismatch: {} != {}",
                signature_key(&want, &want_results),
                signature_key(&have, &have_results)
            ));
        }
    }
    Ok(imported)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_have_no_duplicates_and_wasi_is_complete() {
        let all: Vec<_> = UPSTREAM
            .iter()
            .chain(DRA)
            .chain(WASI)
            .map(|f| (f.module, f.name))
            .collect();
        let mut dedup = all.clone();
        dedup.sort();
        dedup.dedup();
        assert_eq!(all.len(), dedup.len());
        assert_eq!(WASI.len(), 46);
        assert_eq!(UPSTREAM.len(), 21);
    }

    #[test]
    fn host_panic_frames_read_like_wazero() {
        let err = host_panic((MODULE_SCHEDULER, "currentPod"), "boom");
        let panic = err.downcast_ref::<HostPanic>().unwrap();
        assert_eq!(panic.frame, "k8s.io/scheduler.currentPod(i32,i32) i32");
        let err = host_panic((MODULE_KLOG, "log"), "x");
        assert_eq!(
            err.downcast_ref::<HostPanic>().unwrap().frame,
            "k8s.io/klog.log(i32,i32,i32)"
        );
    }
}
