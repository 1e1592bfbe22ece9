//! A run that could not happen: the exit status it maps to, the message and
//! one hint telling the operator what to do. Commands return it; only the
//! dispatcher ([`crate::cli::run`]) prints it.

use crate::format::exit;
use serde::Serialize;

pub use crate::format::ids::ERROR as ERROR_SCHEMA;

/// What kind of run could not happen: the error document's `code`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// The command line could not be parsed (an unknown flag, a bad value).
    Usage,
    /// The run could not happen: something the command names is missing,
    /// wrong or unusable (the root, the profile, the driver, an output).
    CannotRun,
    /// This user may not list, open or read part of the inventory: no
    /// verdict is possible (run as root or as the owner's user).
    PermissionDenied,
    /// kvcr broke one of its own invariants: a bug to report, not the
    /// operator's mistake (exit 70, docs/format.md §6).
    Internal,
}

#[derive(Debug)]
pub struct Failure {
    pub status: i32,
    pub message: String,
    pub hint: Option<String>,
    pub kind: Kind,
}

impl Failure {
    pub fn new(status: i32, message: impl Into<String>) -> Failure {
        Failure {
            status,
            message: message.into(),
            hint: None,
            kind: Kind::CannotRun,
        }
    }

    /// A usage error or a run that cannot happen (exit 2).
    pub fn usage(message: impl Into<String>, hint: impl Into<Option<String>>) -> Failure {
        Failure {
            status: exit::USAGE,
            message: message.into(),
            hint: hint.into(),
            kind: Kind::CannotRun,
        }
    }

    /// An internal error (exit 70, [`Kind::Internal`]): `message` says what
    /// broke; the hint asks for a report.
    pub fn internal(message: impl Into<String>, hint: impl Into<Option<String>>) -> Failure {
        Failure {
            status: exit::INTERNAL,
            message: message.into(),
            hint: hint.into(),
            kind: Kind::Internal,
        }
    }

    /// The same failure, of another kind.
    pub fn of_kind(mut self, kind: Kind) -> Failure {
        self.kind = kind;
        self
    }

    /// The error document `--format json` prints on stdout in place of a
    /// report when the run could not happen (docs/format.md §9.2).
    pub fn document(&self, command: Option<&str>, now_unix_ms: u64) -> ErrorDocument {
        ErrorDocument {
            schema: ERROR_SCHEMA,
            kvcr_version: crate::format::version::VERSION,
            generated_unix_ms: now_unix_ms,
            command: command.map(str::to_string),
            exit_status: self.status,
            code: self.kind,
            message: self.message.clone(),
            hint: self.hint.clone(),
        }
    }
}

/// True when `e` (or its source) is a permission refusal (EACCES, EPERM).
pub fn is_denied(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(x) = cur {
        if x.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::PermissionDenied)
        {
            return true;
        }
        cur = x.source();
    }
    false
}

/// `kvcr.error/v1`: the one JSON document on stdout of a run that could
/// not happen (`schemas/error.schema.json`).
#[derive(Debug, Serialize)]
pub struct ErrorDocument {
    pub schema: &'static str,
    pub kvcr_version: &'static str,
    pub generated_unix_ms: u64,
    /// The subcommand (`audit`, `import`...), when one was recognised.
    pub command: Option<String>,
    pub exit_status: i32,
    pub code: Kind,
    pub message: String,
    pub hint: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_internal_error_is_not_a_usage_error() {
        let f = Failure::internal("internal error while planning: x", None);
        assert_eq!(f.status, exit::INTERNAL);
        assert_eq!(exit::INTERNAL, 70);
        assert_ne!(f.status, exit::USAGE);
        assert_eq!(f.kind, Kind::Internal);
        let doc = serde_json::to_value(f.document(Some("import"), 1)).unwrap();
        assert_eq!(doc["exit_status"], 70);
        assert_eq!(doc["code"], "internal");
        // The library API keeps the status the command line would exit with.
        let e: crate::api::Error = f.into();
        assert_eq!(e.exit_status(), exit::INTERNAL);
        // A usage failure stays exit 2, kind cannot-run.
        let u = Failure::usage("bad", None);
        assert_eq!((u.status, u.kind), (exit::USAGE, Kind::CannotRun));
    }

    #[test]
    fn the_error_schema_lists_every_kind() {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../schemas/error.schema.json")).unwrap();
        let listed = &schema["properties"]["code"]["enum"];
        for k in [
            Kind::Usage,
            Kind::CannotRun,
            Kind::PermissionDenied,
            Kind::Internal,
        ] {
            let name = serde_json::to_value(k).unwrap();
            assert!(
                listed.as_array().unwrap().contains(&name),
                "{name} missing from schemas/error.schema.json"
            );
        }
    }
}
