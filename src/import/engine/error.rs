//! Why a step failed: the driver call and its status, the backend's error,
//! and the rank, allocation and step named in the report.

use super::Step;
use serde::Serialize;
use std::fmt;

/// The driver call that failed and the integer status it returned (any
/// integer: a code this build does not know is kept as it is).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DriverCall {
    pub call: &'static str,
    pub status: i32,
}

/// Why a backend step or release failed: a one-line message, and the
/// driver call and status when a driver call failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BackendError {
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<DriverCall>,
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<String> for BackendError {
    fn from(message: String) -> BackendError {
        BackendError {
            message,
            driver: None,
        }
    }
}

impl From<&str> for BackendError {
    fn from(message: &str) -> BackendError {
        BackendError::from(message.to_string())
    }
}

impl From<crate::io::cuda_ffi::CallError> for BackendError {
    fn from(e: crate::io::cuda_ffi::CallError) -> BackendError {
        BackendError {
            message: e.to_string(),
            driver: e.status.map(|s| DriverCall {
                call: e.call,
                status: s.0,
            }),
        }
    }
}

/// Why the import stopped at a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// The step (or publishing the ready file, or a release) failed.
    Failed,
    /// SIGINT/SIGTERM arrived before the step.
    Interrupted,
}

/// Which rank, allocation and step failed (or was about to run when the
/// import was interrupted).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StepFailure {
    pub rank: u64,
    pub allocation: Option<String>,
    pub step: Step,
    /// Failed or interrupted (the report's `result` says it too, except
    /// when a release failed afterwards).
    #[serde(skip)]
    pub cause: Cause,
    /// What went wrong (and the driver call and status, when one failed).
    #[serde(flatten)]
    pub error: BackendError,
}

impl fmt::Display for StepFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rank {}", self.rank)?;
        if let Some(a) = &self.allocation {
            write!(f, ", allocation {a:?}")?;
        }
        write!(f, ", step {}: {}", self.step, self.error)
    }
}
