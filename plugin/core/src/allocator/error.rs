//! Why an allocation call fails: bad input that aborts the attempt on the node (a CEL error, a
//! missing class, a constraint that `All` mode cannot satisfy...), or the step budget running
//! out. A node the claims merely do not fit is not a failure ([`super::AllocOutcome::Unfit`]).
//!
//! Each case keeps what its message names; the text is made only when the error is shown, and it
//! is the scheduler-facing reason (goldens compare it byte for byte).

use crate::affinity::FullName;
use crate::cel::CelError;
use crate::index::DeviceKey;

/// A request's full name, owned: `request` or `request/subrequest`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestName {
    /// The request.
    pub request: String,
    /// The subrequest, if any.
    pub sub: Option<String>,
}

impl RequestName {
    pub(super) fn new(request: &str, sub: Option<&str>) -> Self {
        RequestName {
            request: request.to_string(),
            sub: sub.map(str::to_string),
        }
    }
}

impl std::fmt::Display for RequestName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        FullName(&self.request, self.sub.as_deref()).fmt(f)
    }
}

/// Whose selector failed: a DeviceClass's or the claim's own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SelectorOwner {
    /// A selector of the named class.
    Class(String),
    /// A selector of the claim (`namespace/name`).
    Claim(String),
}

impl std::fmt::Display for SelectorOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SelectorOwner::Class(c) => write!(f, "class {c}"),
            SelectorOwner::Claim(c) => write!(f, "claim {c}"),
        }
    }
}

/// Why an allocation call failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// A request sets both `exactly` and `firstAvailable`.
    #[error("claim {claim}, request {request}: exactly one of exactly and firstAvailable must be set")]
    ExactlyAndFirstAvailable {
        /// The claim.
        claim: String,
        /// The request.
        request: String,
    },
    /// A request sets neither `exactly` nor `firstAvailable`.
    #[error(
        "claim {claim}, request {request}: neither exactly nor firstAvailable is set (unsupported request type?)"
    )]
    NoRequestType {
        /// The claim.
        claim: String,
        /// The request.
        request: String,
    },
    /// The claim's requests need more devices than a claim may have.
    #[error("claim {claim}: number of requested devices {requested} exceeds the claim limit of {limit}")]
    TooManyDevices {
        /// The claim.
        claim: String,
        /// The least number of devices its requests need.
        requested: u64,
        /// [`super::MAX_RESULTS_PER_CLAIM`].
        limit: usize,
    },
    /// A request names no device class.
    #[error("claim {claim}, request {request}: missing device class name")]
    MissingClassName {
        /// The claim.
        claim: String,
        /// The request.
        request: RequestName,
    },
    /// A request's device class does not exist.
    #[error("claim {claim}, request {request}: device class {class} not found")]
    ClassNotFound {
        /// The claim.
        claim: String,
        /// The request.
        request: RequestName,
        /// The class.
        class: String,
    },
    /// An `ExactCount` request with a count below 1.
    #[error("claim {claim}, request {request}: count {count} must be at least 1")]
    BadCount {
        /// The claim.
        claim: String,
        /// The request.
        request: RequestName,
        /// The count.
        count: i64,
    },
    /// An allocation mode other than `ExactCount` and `All`.
    #[error("claim {claim}, request {request}: unsupported allocation mode {mode}")]
    UnsupportedMode {
        /// The claim.
        claim: String,
        /// The request.
        request: RequestName,
        /// The mode.
        mode: String,
    },
    /// An `All` request on a node with a pool that is not complete.
    #[error(
        "claim {claim}, request {request}: asks for all devices, but resource pool {pool} is currently being updated"
    )]
    AllModePoolUpdating {
        /// The claim.
        claim: String,
        /// The request.
        request: RequestName,
        /// The pool (`driver/pool`).
        pool: String,
    },
    /// An `All` request on a node with an invalid pool.
    #[error(
        "claim {claim}, request {request}: asks for all devices, but resource pool {pool} is currently invalid"
    )]
    AllModePoolInvalid {
        /// The claim.
        claim: String,
        /// The request.
        request: RequestName,
        /// The pool (`driver/pool`).
        pool: String,
    },
    /// A claim constraint sets neither or both of `matchAttribute` and `distinctAttribute`.
    #[error(
        "claim {claim}, constraint #{index}: exactly one of matchAttribute and distinctAttribute must be set"
    )]
    BadConstraint {
        /// The claim.
        claim: String,
        /// The constraint's position.
        index: usize,
    },
    /// A selector does not compile.
    #[error("{owner}: selector {expr:?}: CEL compile error: {error}")]
    SelectorCompile {
        /// Whose selector.
        owner: SelectorOwner,
        /// The expression.
        expr: String,
        /// The compiler's error.
        error: CelError,
    },
    /// A device cannot be presented to CEL.
    #[error("{owner}: device {device}: {error}")]
    DeviceCel {
        /// Whose selector was to run.
        owner: SelectorOwner,
        /// The device.
        device: DeviceKey,
        /// Why.
        error: String,
    },
    /// A selector fails on a device.
    #[error("{owner}: selector #{index} {expr:?} on device {device}: CEL runtime error: {error}")]
    SelectorRuntime {
        /// Whose selector.
        owner: SelectorOwner,
        /// Its position among the class's then the request's selectors.
        index: usize,
        /// The expression.
        expr: String,
        /// The device.
        device: DeviceKey,
        /// The evaluation error.
        error: CelError,
    },
    /// A device's own node selection cannot be evaluated.
    #[error("device {device}: {error}")]
    NodeSelection {
        /// The device.
        device: DeviceKey,
        /// Why.
        error: String,
    },
    /// An `All` request cannot take one of its devices because of a claim constraint.
    #[error(
        "claim {claim}, request {request}: cannot add device {device} because a claim constraint would not be satisfied"
    )]
    AllModeConstraint {
        /// The claim.
        claim: String,
        /// The request.
        request: RequestName,
        /// The device.
        device: DeviceKey,
    },
    /// The claims do not fit and one of the node's pools is invalid.
    #[error("invalid resource pool {pool}: {reason}")]
    InvalidPool {
        /// The pool (`driver/pool`).
        pool: String,
        /// Why it is invalid.
        reason: String,
    },
    /// The search tried [`super::MAX_STEPS`] devices without an answer: upstream's Filter
    /// timeout.
    #[error("timed out trying to allocate devices")]
    TimedOut,
    /// A slice's node selector has more than one term.
    #[error("unsupported ResourceSlice.NodeSelector with {0} terms")]
    NodeSelectorTerms(usize),
    /// Allocation calls nest (an internal error).
    #[error("internal: an allocation call inside another")]
    Nested,
    /// An allocation built for other claims than the allocator's (an internal error).
    #[error("internal: an allocation of {allocated} claims materialized for {prepared}")]
    Mismatch {
        /// Claims in the allocation.
        allocated: usize,
        /// Claims prepared.
        prepared: usize,
    },
    /// A prepared request's class vanished (an internal error).
    #[error("internal: device class {0} of a prepared request not found")]
    PreparedClassMissing(String),
}

impl From<AllocError> for String {
    /// The reason text, for callers that report it as a status.
    fn from(e: AllocError) -> String {
        e.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts are the scheduler-facing reasons: each case shows exactly what the allocator
    /// reported before it had a type.
    #[test]
    fn texts_are_the_reasons() {
        let key = || DeviceKey::new("d", "p", "x");
        let name = || RequestName::new("r", Some("s"));
        let cases: Vec<(AllocError, &str)> = vec![
            (
                AllocError::ClassNotFound {
                    claim: "ns/c".into(),
                    request: name(),
                    class: "gpu".into(),
                },
                "claim ns/c, request r/s: device class gpu not found",
            ),
            (
                AllocError::TooManyDevices {
                    claim: "ns/c".into(),
                    requested: 33,
                    limit: 32,
                },
                "claim ns/c: number of requested devices 33 exceeds the claim limit of 32",
            ),
            (
                AllocError::AllModeConstraint {
                    claim: "ns/c".into(),
                    request: RequestName::new("r", None),
                    device: key(),
                },
                "claim ns/c, request r: cannot add device d/p/x because a claim constraint would not be satisfied",
            ),
            (
                AllocError::DeviceCel {
                    owner: SelectorOwner::Class("gpu".into()),
                    device: key(),
                    error: "bad".into(),
                },
                "class gpu: device d/p/x: bad",
            ),
            (
                AllocError::InvalidPool {
                    pool: "d/p".into(),
                    reason: "why".into(),
                },
                "invalid resource pool d/p: why",
            ),
            (AllocError::TimedOut, "timed out trying to allocate devices"),
            (
                AllocError::NodeSelectorTerms(2),
                "unsupported ResourceSlice.NodeSelector with 2 terms",
            ),
            (
                AllocError::BadConstraint {
                    claim: "ns/c".into(),
                    index: 1,
                },
                "claim ns/c, constraint #1: exactly one of matchAttribute and distinctAttribute must be set",
            ),
        ];
        for (e, text) in cases {
            assert_eq!(e.to_string(), text);
            assert_eq!(String::from(e), text);
        }
    }
}
