//! Scheduler status codes and verdicts: "unschedulable here" is a value, not an error.

use std::fmt;

/// kube-scheduler framework status codes, with the same discriminants as the host's `StatusCode`.
#[repr(i32)]
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Code {
    /// The pod fits (or the step succeeded).
    Success = 0,
    /// An internal or input error: the scheduler retries later; the reason says what broke.
    Error = 1,
    /// The pod does not fit now, but could after other pods are removed (preemption may help).
    Unschedulable = 2,
    /// The pod does not fit and preemption cannot help (e.g. a self-contradictory claim).
    UnschedulableAndUnresolvable = 3,
}

impl Code {
    /// The kube-scheduler name of the code.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Success => "Success",
            Code::Error => "Error",
            Code::Unschedulable => "Unschedulable",
            Code::UnschedulableAndUnresolvable => "UnschedulableAndUnresolvable",
        }
    }

    /// Parses the kube-scheduler name of a code.
    pub fn from_name(name: &str) -> Option<Code> {
        Some(match name {
            "Success" => Code::Success,
            "Error" => Code::Error,
            "Unschedulable" => Code::Unschedulable,
            "UnschedulableAndUnresolvable" => Code::UnschedulableAndUnresolvable,
            _ => return None,
        })
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The outcome of one extension-point call: a code and a human-readable reason.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Status {
    /// The code.
    pub code: Code,
    /// Why; empty for success.
    pub reason: String,
}

impl Status {
    /// Success without a reason.
    pub fn success() -> Self {
        Status {
            code: Code::Success,
            reason: String::new(),
        }
    }
    /// A status with a code and reason.
    pub fn new(code: Code, reason: impl Into<String>) -> Self {
        Status {
            code,
            reason: reason.into(),
        }
    }
    /// `Error` with a reason.
    pub fn error(reason: impl Into<String>) -> Self {
        Self::new(Code::Error, reason)
    }
    /// `Unschedulable` with a reason.
    pub fn unschedulable(reason: impl Into<String>) -> Self {
        Self::new(Code::Unschedulable, reason)
    }
    /// `UnschedulableAndUnresolvable` with a reason.
    pub fn unresolvable(reason: impl Into<String>) -> Self {
        Self::new(Code::UnschedulableAndUnresolvable, reason)
    }
    /// Whether the code is `Success`.
    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.reason.is_empty() {
            write!(f, "{}", self.code)
        } else {
            write!(f, "{}: {}", self.code, self.reason)
        }
    }
}
