//! [`Error`]: why a library call did not give its answer, and the exit
//! status the command line gives the same input.

use super::Document;
use crate::format::failure::Failure;
use crate::format::finding::Code;
use std::fmt;

/// Why a call did not give its answer. Each kind maps to the exit status the
/// command line gives the same input ([`Error::exit_status`]).
#[derive(Debug)]
pub enum Error {
    /// What the command line rejects before it runs, or a run that cannot
    /// happen (a missing root, a bad or missing profile, an unreadable file,
    /// a failed write): exit 2.
    Usage {
        /// What is wrong, naming the file or option and the values.
        message: String,
        /// What to do about it, when there is one thing to do.
        hint: Option<String>,
    },
    /// A descriptor that is not valid (exit 1): the finding code the audit
    /// gives it, the member's dotted path as the CLI prints it
    /// (`node.boot_id`, `allocations[0].size_bytes`; `None` when the problem
    /// is not one member's) and the message.
    Descriptor {
        /// The finding code (`KV006` malformed JSON, `KV007` schema, `KV004` too large).
        code: Code,
        /// The member's path, when one member is wrong.
        field: Option<String>,
        /// The whole problem, as `kvcr seal` words it.
        message: String,
    },
    /// The import gate refused the group (exit 1): `report` is the
    /// `kvcr.import-report/v1` document (mode `gate`) saying why.
    Refused {
        /// The first reason, one line.
        message: String,
        /// The import report as JSON text.
        report: Document,
    },
    /// Anything else the command line answers with exit 1 (a file refused
    /// by `kvcr seal`: a symlink, not a regular file, a process that is not
    /// running).
    Other {
        /// What is wrong.
        message: String,
        /// The command line's exit status for it.
        status: i32,
    },
}

impl Error {
    /// The exit status the command line gives the same input.
    pub fn exit_status(&self) -> i32 {
        match self {
            Error::Usage { .. } => crate::format::exit::USAGE,
            Error::Descriptor { .. } | Error::Refused { .. } => crate::format::exit::REJECTED,
            Error::Other { status, .. } => *status,
        }
    }

    pub(super) fn usage(message: impl Into<String>) -> Error {
        Error::Usage {
            message: message.into(),
            hint: None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage { message, .. } | Error::Other { message, .. } => f.write_str(message),
            Error::Descriptor { code, message, .. } => write!(f, "{code} {message}"),
            Error::Refused { message, .. } => write!(f, "refused: {message}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<Failure> for Error {
    fn from(f: Failure) -> Error {
        if f.status == crate::format::exit::USAGE {
            Error::Usage {
                message: f.message,
                hint: f.hint,
            }
        } else {
            Error::Other {
                message: f.message,
                status: f.status,
            }
        }
    }
}
