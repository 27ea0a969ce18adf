//! The core's error type: bad input that aborts an operation, as opposed to "unschedulable here",
//! which is a [`crate::status::Status`] value.

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
    /// A CEL expression that fails to compile or evaluate (the CEL module builds it from its own
    /// error, so that this type depends on no module of the crate).
    #[error("{object}: {field}: CEL expression {expression:?}: {reason}")]
    Cel {
        /// The object holding the expression (`DeviceClass gpu`, `ResourceClaim ns/name`).
        object: String,
        /// The field, e.g. `spec.selectors[0].cel.expression`.
        field: String,
        /// The expression text.
        expression: String,
        /// The CEL failure, e.g. `compilation failed: ...`.
        reason: String,
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
    /// An error in one object of a larger document, with where in the document it was found:
    /// what [`crate::object::parse_objects`] reports for each object that does not decode, so
    /// that a reader can find the object (and the bad field) in a file of thousands.
    #[error("{error} (at byte {offset})")]
    At {
        /// Bytes from the start of the document to the error: the bad value when the decoder
        /// stopped at one, else the start of the object.
        offset: usize,
        /// The object's error, as [`crate::object::decode_str`] gives it for the object alone.
        error: Box<Error>,
    },
}

impl Error {
    /// The error without its place in a document ([`Error::At`]).
    pub fn without_position(&self) -> &Error {
        match self {
            Error::At { error, .. } => error.without_position(),
            other => other,
        }
    }

    /// The byte offset in its document, for an [`Error::At`].
    pub fn offset(&self) -> Option<usize> {
        match self {
            Error::At { offset, .. } => Some(*offset),
            _ => None,
        }
    }
}
