//! KEP-5981 sharing affinity: the rule that decides whether two claims may share a device.
//!
//! The rule, in the order it is applied:
//! 1. **Extractors → values.** A driver publishes extractors per pool (CEL expressions over the
//!    claim's opaque config, or structured `sharingAffinity.attributeKeys`); the plugin
//!    configuration ([`crate::config::Config`]) supplies them for API servers without the field.
//!    For a request and a device, the extractors that apply to the device yield the affinity
//!    values the request wants there ([`extract()`], [`wanted`]).
//! 2. **Strict gating.** A shared device of an affinity pool is viable for a request only if every
//!    applicable extractor is satisfied (every key has a value); a CEL error, a non-string result
//!    or a misconfigured device makes it not viable ([`Rejection`]).
//! 3. **The first claim locks a clean device** to the values it wants.
//! 4. **Later claims share it only with equal values** ([`LockState::admits`]); within one
//!    allocation call the locks the call takes tentatively count too ([`AffinityConstraint`]).
//! 5. **The lock clears with the last holder**: a device's lock is derived from the claims holding
//!    it ([`lock_from`]), so it is clean again once none does.
//!
//! Where each part lives:
//! - `extract.rs`: extractors ([`Extractors`], [`Extractor`], [`SetOf`], [`StructuredKey`],
//!   [`declared_keys`]), running them over a claim ([`extract()`], [`claim_objects`], [`Outcome`]),
//!   the values a request wants ([`wanted`], [`Values`]) and why a device is refused
//!   ([`Rejection`]).
//! - `locks.rs`: a device's lock ([`LockState`], [`lock_from`]) and the per-index table of locks
//!   ([`LockTable`]).
//! - `constraint.rs`: the allocator-facing side, as upstream's `constraint.go`: what a request
//!   wants on a device, cached ([`Gate`]), and the tentative locks of one allocation call with
//!   admit and undo ([`AffinityConstraint`]).
//! - `score.rs`: the affinity rank of a node's allocation ([`rank`]).

mod constraint;
mod extract;
mod locks;
mod score;

pub use constraint::{
    AffinityConstraint, ClaimOutcomes, Gate, RequestAffinity, Wanted, WantedCache, WantedMemo, admits,
};
pub(crate) use extract::validate_extractor;
pub use extract::{
    ConfigObject, ExtId, Extractor, Extractors, FullName, MAX_EXTRACTORS, MAX_KEYS, Outcome, Rejection,
    SetOf, StructuredKey, Values, claim_objects, declared_keys, extract, fingerprint, full_name, qualify,
    show, structured_marker, wanted,
};
pub use locks::{LockState, LockTable, lock_from, same};
pub use score::{Pick, rank};

/// Values from `(key, value)` pairs, for the module's tests.
#[cfg(test)]
pub(crate) fn test_values(pairs: &[(&str, &str)]) -> Values {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
