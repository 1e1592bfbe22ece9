//! What a call answers: a [`Document`] (the JSON text the command prints,
//! its exit status and notes), the same before rendering ([`Structured`]),
//! and a finding's message as text.

use super::Error;
use std::fmt;

/// One JSON document exactly as the command line prints it (UTF-8, one
/// object, a trailing newline), with the exit status it stands for and the
/// notes the command would have printed on stderr.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Document {
    pub(super) text: String,
    pub(super) exit_status: i32,
    pub(super) notes: Vec<String>,
}

impl Document {
    pub(super) fn of<T: serde::Serialize>(value: &T, exit_status: i32) -> Result<Document, Error> {
        let mut out = Vec::new();
        crate::format::json::write(&mut out, value)
            .map_err(|e| Error::usage(format!("cannot render the document: {e}")))?;
        Ok(Document {
            text: String::from_utf8(out)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
            exit_status,
            notes: Vec::new(),
        })
    }

    pub(super) fn with_notes(mut self, notes: Vec<String>) -> Document {
        self.notes = notes;
        self
    }

    /// What the operator is owed about where the facts came from, one line
    /// each, terminal-safe, without the command line's `kvcr: note: `
    /// prefix: that they come from a facts file and not from this node;
    /// that `/proc` is not procfs and nothing read from it is trusted. The
    /// command line prints these on stderr; the library prints nothing.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The JSON text.
    pub fn as_json(&self) -> &str {
        &self.text
    }

    /// The JSON text, owned.
    pub fn into_json(self) -> String {
        self.text
    }

    /// The exit status the command line gives for this document (an audit:
    /// 0 when every group in scope is accepted, 1 otherwise).
    pub fn exit_status(&self) -> i32 {
        self.exit_status
    }
}

/// The audit report (`kvcr.audit-report/v1`), as `kvcr audit --format json` prints it.
pub type AuditReport = Document;

/// The audit report's earlier name, kept so the public path stays valid.
#[deprecated(note = "use AuditReport: \"report\" alone is any document kvcr writes")]
pub type Report = Document;

/// A document before it is rendered as text: what [`audit_structured`](super::audit_structured) and
/// [`gate_structured`](super::gate_structured) answer, for a caller that builds its own objects
/// from it (the Python package builds its dicts from it directly, with no
/// JSON text to render and parse back).
///
/// Its [`serde::Serialize`] is the document itself: the [`Document`]'s
/// JSON text is this value written by the one JSON writer (docs/format.md
/// §9.6), so any serializer sees the same keys, in the same order, with the
/// same values; [`Structured::to_document`] gives that text.
pub struct Structured {
    pub(super) body: Body,
    pub(super) exit_status: i32,
    pub(super) notes: Vec<String>,
}

pub(super) enum Body {
    Audit(Box<crate::print::audit::AuditRun>),
    Plan(Box<crate::import::plan::document::ImportPlan>),
}

impl fmt::Debug for Structured {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.body {
            Body::Audit(_) => "kvcr.audit-report/v1",
            Body::Plan(_) => "kvcr.import-plan/v1",
        };
        f.debug_struct("Structured")
            .field("schema", &kind)
            .field("exit_status", &self.exit_status)
            .field("notes", &self.notes)
            .finish_non_exhaustive()
    }
}

impl serde::Serialize for Structured {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.body {
            Body::Audit(run) => crate::print::json::printed(
                &run.root,
                &run.meta,
                run.merge.as_ref(),
                &run.judgement,
            )
            .serialize(s),
            Body::Plan(plan) => plan.serialize(s),
        }
    }
}

impl Structured {
    /// The exit status the command line gives for this document
    /// ([`Document::exit_status`]).
    pub fn exit_status(&self) -> i32 {
        self.exit_status
    }

    /// The notes the command would print on stderr ([`Document::notes`]).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The document as the command line prints it: the JSON text.
    pub fn to_document(&self) -> Result<Document, Error> {
        match &self.body {
            Body::Audit(run) => audit_document(run, self.notes.clone()),
            Body::Plan(_) => {
                Ok(Document::of(self, self.exit_status)?.with_notes(self.notes.clone()))
            }
        }
    }
}

/// A finding's message as every kvcr output writes it: its text, with the
/// numbers it carries (an age, a moment) in the operator's units. The
/// numbers themselves are the message's parts
/// ([`Message::parts`](crate::format::finding::Message::parts)).
///
/// ```
/// use kvcr_audit::finding::Message;
/// let m = Message::from("sealed ").duration_ms(90_000).text(" ago");
/// assert_eq!(kvcr_audit::api::message_text(&m), "sealed 1m 30s ago");
/// ```
pub fn message_text(m: &crate::format::finding::Message) -> String {
    crate::format::message::render(m)
}

/// The report of `run`, as `kvcr audit --format json` prints it, with the
/// notes the command would print on stderr.
pub(super) fn audit_document(
    run: &crate::print::audit::AuditRun,
    notes: Vec<String>,
) -> Result<AuditReport, Error> {
    let mut out = Vec::new();
    let printer = crate::print::Printer {
        format: crate::print::Format::Json,
        color: false,
        verbosity: crate::print::Verbosity::Normal,
        progress: false,
        width: None,
    };
    crate::print::audit::print_audit(&mut out, &printer, run, None)
        .map_err(|e| Error::usage(format!("cannot render the report: {e}")))?;
    Ok(Document {
        // The writer writes UTF-8 (docs/format.md §9.6): no copy.
        text: String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        exit_status: run.judgement.exit_status(),
        notes,
    })
}
