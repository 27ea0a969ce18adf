//! Why a CEL expression could not be used, and how that becomes the crate's [`crate::error::Error`].

/// Why a CEL expression could not be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CelError {
    /// The expression does not compile (syntax or type error).
    #[error("compilation failed: {0}")]
    Compile(String),
    /// The expression failed at run time (missing key, no such overload, cost budget exceeded...).
    #[error("evaluation failed: {0}")]
    Runtime(String),
    /// The expression returned a value of the wrong type.
    #[error("expression must return {expected}, got {got}")]
    WrongType {
        /// Expected type name (`bool` or `string`).
        expected: &'static str,
        /// Actual type name.
        got: String,
    },
}

impl CelError {
    /// The crate's [`crate::error::Error::Cel`] for this failure of `expression`, the `field` of
    /// `object`. The conversion lives here so that the crate's error type does not depend on
    /// the CEL module: the error keeps the failure as its message.
    pub fn in_expression(
        self,
        object: impl Into<String>,
        field: impl Into<String>,
        expression: impl Into<String>,
    ) -> crate::error::Error {
        crate::error::Error::Cel {
            object: object.into(),
            field: field.into(),
            expression: expression.into(),
            reason: self.to_string(),
        }
    }
}

/// A compile error.
pub(super) fn compile_error(msg: impl Into<String>) -> CelError {
    CelError::Compile(msg.into())
}
