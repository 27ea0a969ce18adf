//! The core's error type: bad input that aborts an operation, as opposed to "unschedulable here",
//! which is a [`crate::Status`] value.

use crate::cel::CelError;

/// Errors of the core library. Each names the object and, where known, the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// Input that is not JSON at all.
    #[error("malformed JSON: {0}")]
    Json(String),
    /// An object whose kind, namespace or name cannot be determined.
    #[error("object #{index}: {reason}")]
    Unidentified {
        /// Position of the object in the input (0-based).
        index: usize,
        /// What is wrong.
        reason: String,
    },
    /// An object that does not decode: names the object and the JSON path of the bad field.
    #[error("{object}: field {path}: {reason}")]
    Field {
        /// `Kind namespace/name`.
        object: String,
        /// JSON path, e.g. `spec.devices[0].capacity.memory.value`.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A semantically invalid object (duplicate device names, unknown counter set...).
    #[error("{object}: {reason}")]
    Invalid {
        /// `Kind namespace/name`.
        object: String,
        /// What is wrong.
        reason: String,
    },
    /// A CEL expression that fails to compile or evaluate.
    #[error("{object}: {field}: CEL expression {expression:?}: {source}")]
    Cel {
        /// The object holding the expression (`DeviceClass gpu`, `ResourceClaim ns/name`).
        object: String,
        /// The field, e.g. `spec.selectors[0].cel.expression`.
        field: String,
        /// The expression text.
        expression: String,
        /// The CEL failure.
        #[source]
        source: CelError,
    },
    /// The plugin configuration is invalid.
    #[error("configuration: {0}")]
    Config(String),
    /// An operation referenced an object that is not known.
    #[error("{0} not found")]
    NotFound(String),
    /// An extension point was called out of order (e.g. filter before prefilter).
    #[error("{0}")]
    Protocol(String),
}
