//! A run that could not happen: the exit status it maps to, the message and
//! one hint telling the operator what to do. Commands return it; only the
//! dispatcher ([`crate::app::run`]) prints it.

use crate::exit;

#[derive(Debug)]
pub struct Failure {
    pub status: i32,
    pub message: String,
    pub hint: Option<String>,
}

impl Failure {
    pub fn new(status: i32, message: impl Into<String>) -> Failure {
        Failure {
            status,
            message: message.into(),
            hint: None,
        }
    }

    /// A usage error or a run that cannot happen (exit 2).
    pub fn usage(message: impl Into<String>, hint: impl Into<Option<String>>) -> Failure {
        Failure {
            status: exit::USAGE,
            message: message.into(),
            hint: hint.into(),
        }
    }
}
