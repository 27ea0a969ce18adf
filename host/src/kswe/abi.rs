//! Names, codes and value packing of the KSWE core-module ABI (`reference/kswe-abi.md` §1–§3).

use std::fmt;

use wasmtime::ValType;

/// Import module with the Node getters.
pub const MODULE_API: &str = "k8s.io/api";
/// Import module with the per-call getters, the `result.*` setters and the handle functions.
pub const MODULE_SCHEDULER: &str = "k8s.io/scheduler";
/// Import module with the log functions.
pub const MODULE_KLOG: &str = "k8s.io/klog";
/// WASI preview 1, provided only when the guest imports it.
pub const MODULE_WASI: &str = "wasi_snapshot_preview1";
/// The sharing-affinity DRA extension (`docs/kswe-dra-extension.md`); not part of upstream KSWE.
pub const MODULE_DRA: &str = "sharing-affinity.dra/v1";

/// The memory export every guest must have.
pub const EXPORT_MEMORY: &str = "memory";
/// The optional start function, run once per instance.
pub const EXPORT_START: &str = "_start";

/// Framework status codes as the guest returns them. The host passes any `i32` through, as
/// `framework.Code(int32)` does upstream.
pub mod code {
    /// Success.
    pub const SUCCESS: i32 = 0;
    /// Error: the host also uses it for traps.
    pub const ERROR: i32 = 1;
    /// Unschedulable.
    pub const UNSCHEDULABLE: i32 = 2;
    /// UnschedulableAndUnresolvable.
    pub const UNSCHEDULABLE_AND_UNRESOLVABLE: i32 = 3;
    /// Wait (Permit only).
    pub const WAIT: i32 = 4;
    /// Skip.
    pub const SKIP: i32 = 5;
    /// Pending (k8s ≥ 1.32); passes through.
    pub const PENDING: i32 = 6;
}

/// The result of one guest call as the framework sees it: a raw code and a reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KsweStatus {
    /// Raw status code (see [`code`]); any `i32` the guest returns.
    pub code: i32,
    /// `result.status_reason` of the same call, or the decorated trap message.
    pub reason: String,
    /// True when the status comes from a failed call (trap, exit, closed instance), not from the
    /// guest's return value.
    pub trapped: bool,
}

impl KsweStatus {
    /// A status returned by the guest.
    pub fn new(code: i32, reason: impl Into<String>) -> Self {
        KsweStatus {
            code,
            reason: reason.into(),
            trapped: false,
        }
    }
    /// Success without reason (what the host returns for an unexported "pre"/"post" hook).
    pub fn success() -> Self {
        Self::new(code::SUCCESS, "")
    }
    /// `framework.AsStatus(err)`: code Error with the error text.
    pub fn from_failure(message: impl Into<String>) -> Self {
        KsweStatus {
            code: code::ERROR,
            reason: message.into(),
            trapped: true,
        }
    }
    /// Whether the code is Success.
    pub fn is_success(&self) -> bool {
        self.code == code::SUCCESS
    }
}

impl fmt::Display for KsweStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.reason.is_empty() {
            write!(f, "code {}", self.code)
        } else {
            write!(f, "code {}: {}", self.code, self.reason)
        }
    }
}

/// Packs two `i32` halves into the `i64` an export returns: `(hi << 32) | lo`.
///
/// ```
/// use sharing_affinity_host::kswe::abi::{pack, unpack};
/// assert_eq!(unpack(pack(i32::MIN, i32::MAX)), (i32::MIN, i32::MAX));
/// ```
pub fn pack(hi: i32, lo: i32) -> i64 {
    (((hi as u32 as u64) << 32) | (lo as u32 as u64)) as i64
}

/// Splits an export's `i64` into `(hi, lo)` as the Go host does: `int32(v >> 32)`, `int32(v)`.
pub fn unpack(value: i64) -> (i32, i32) {
    ((value >> 32) as i32, value as i32)
}

/// The result type of an export, as `detectInterfaces` checks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ret {
    /// `() -> ()`.
    Unit,
    /// `() -> (i32)`.
    I32,
    /// `() -> (i64)`.
    I64,
}

/// A guest export the host knows, with its exact signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Export {
    /// `enqueue`: `() -> ()`.
    Enqueue,
    /// `prefilter`: `() -> i32`.
    PreFilter,
    /// `filter`: `() -> i32`.
    Filter,
    /// `postfilter`: `() -> i64` (hi = nominating mode, lo = code).
    PostFilter,
    /// `prescore`: `() -> i32`.
    PreScore,
    /// `score`: `() -> i64` (hi = score, lo = code).
    Score,
    /// `normalizescore`: `() -> i32`.
    NormalizeScore,
    /// `reserve`: `() -> i32`.
    Reserve,
    /// `unreserve`: `() -> ()`.
    Unreserve,
    /// `permit`: `() -> i64` (hi = code, lo = timeout ms).
    Permit,
    /// `prebind`: `() -> i32`.
    PreBind,
    /// `bind`: `() -> i32`.
    Bind,
    /// `postbind`: `() -> ()`.
    PostBind,
    /// `addpod`: `() -> i32`.
    AddPod,
    /// `removepod`: `() -> i32`.
    RemovePod,
}

impl Export {
    /// Every known export.
    pub const ALL: [Export; 15] = [
        Export::Enqueue,
        Export::PreFilter,
        Export::Filter,
        Export::PostFilter,
        Export::PreScore,
        Export::Score,
        Export::NormalizeScore,
        Export::Reserve,
        Export::Unreserve,
        Export::Permit,
        Export::PreBind,
        Export::Bind,
        Export::PostBind,
        Export::AddPod,
        Export::RemovePod,
    ];

    /// The export name.
    pub fn name(self) -> &'static str {
        match self {
            Export::Enqueue => "enqueue",
            Export::PreFilter => "prefilter",
            Export::Filter => "filter",
            Export::PostFilter => "postfilter",
            Export::PreScore => "prescore",
            Export::Score => "score",
            Export::NormalizeScore => "normalizescore",
            Export::Reserve => "reserve",
            Export::Unreserve => "unreserve",
            Export::Permit => "permit",
            Export::PreBind => "prebind",
            Export::Bind => "bind",
            Export::PostBind => "postbind",
            Export::AddPod => "addpod",
            Export::RemovePod => "removepod",
        }
    }

    /// Looks an export up by name.
    pub fn from_name(name: &str) -> Option<Export> {
        Export::ALL.into_iter().find(|e| e.name() == name)
    }

    /// The required result type.
    pub fn ret(self) -> Ret {
        match self {
            Export::Enqueue | Export::Unreserve | Export::PostBind => Ret::Unit,
            Export::PostFilter | Export::Score | Export::Permit => Ret::I64,
            _ => Ret::I32,
        }
    }

    /// The signature text of the upstream "wrong signature" error. Upstream prints `() -> ()` for
    /// `addpod`/`removepod` although it checks `() -> (i32)`; this keeps that text.
    pub fn signature_text(self) -> &'static str {
        match self {
            Export::AddPod | Export::RemovePod => "() -> ()",
            _ => match self.ret() {
                Ret::Unit => "() -> ()",
                Ret::I32 => "() -> (i32)",
                Ret::I64 => "() -> (i64)",
            },
        }
    }
}

/// wazero's short name of a value type (`i32`, `i64`, `f32`, `f64`, `v128`, `funcref`, `externref`).
pub fn val_type_name(t: &ValType) -> &'static str {
    match t {
        ValType::I32 => "i32",
        ValType::I64 => "i64",
        ValType::F32 => "f32",
        ValType::F64 => "f64",
        ValType::V128 => "v128",
        ValType::Ref(r) if r.heap_type().is_extern() => "externref",
        ValType::Ref(_) => "funcref",
    }
}

/// wazero's signature key of a function type, e.g. `i32i32_i32` or `v_v` (used in
/// "signature mismatch" errors).
pub fn signature_key(params: &[ValType], results: &[ValType]) -> String {
    let mut key: String = params.iter().map(val_type_name).collect();
    key.push_str(if params.is_empty() { "v_" } else { "_" });
    key.extend(results.iter().map(val_type_name));
    if results.is_empty() {
        key.push('v');
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_matches_the_go_host_at_the_extremes() {
        for (hi, lo, msg) in [
            (0, 0, "zero"),
            (100, 0, "score 100, success"),
            (i32::MIN, i32::MAX, "min score, max code"),
            (i32::MAX, i32::MIN, "max score, min code"),
            (-1, -1, "all ones"),
        ] {
            assert_eq!(unpack(pack(hi, lo)), (hi, lo), "{msg}");
        }
        assert_eq!(pack(1, 2), 0x0000_0001_0000_0002, "hi is the high word");
        assert_eq!(unpack(-1i64 << 32), (-1, 0), "negative score, success code");
    }

    #[test]
    fn export_names_round_trip_and_signatures() {
        for e in Export::ALL {
            assert_eq!(Export::from_name(e.name()), Some(e));
        }
        assert_eq!(Export::Score.signature_text(), "() -> (i64)");
        assert_eq!(
            Export::AddPod.signature_text(),
            "() -> ()",
            "upstream message quirk"
        );
        assert_eq!(Export::AddPod.ret(), Ret::I32, "but the check is i32");
        assert_eq!(
            signature_key(&[ValType::I32, ValType::I32], &[ValType::I32]),
            "i32i32_i32"
        );
        assert_eq!(signature_key(&[], &[]), "v_v");
    }
}
