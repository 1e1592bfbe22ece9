//! The JSON report (docs/format.md §9): exactly one document on stdout.
//!
//! Shape: `{"schema": "kvcr.audit-report/v1", "root", "live", "groups": [...],
//! "files": [...], "summary": {...}}`. Strings are escaped beyond what JSON
//! requires (DEL, C1 controls and bidi overrides as `\uXXXX`), so the document
//! is safe to print on a terminal and means the same to any JSON reader.

use super::sanitize::is_dangerous;
use crate::verdict::{FileVerdict, GroupVerdict, Judgement, Summary};
use serde::Serialize;
use std::io::{self, Write};

pub const REPORT_SCHEMA: &str = "kvcr.audit-report/v1";

/// `kvcr merge` only: one input report, as it describes itself. `kvcr
/// import --fleet-report` finds this node's share by `host` and `boot_id`.
#[derive(Clone, Debug, Serialize)]
pub struct MergeInput {
    /// The report's name (its path as given to merge).
    pub report: String,
    pub host: Option<String>,
    pub boot_id: Option<uuid::Uuid>,
    pub live: bool,
    /// When the input was written; `null` when it does not say.
    pub generated_unix_ms: Option<u64>,
}

#[derive(Serialize)]
pub struct AuditReport<'a> {
    pub schema: &'static str,
    pub root: &'a str,
    /// This node's hostname (lets `kvcr merge` tell nodes apart).
    pub host: Option<&'a str>,
    /// The node's boot id, when live and readable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<uuid::Uuid>,
    /// When the report was written (Unix milliseconds): live and merged
    /// reports, whose facts age (an offline report stays byte-identical).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generated_unix_ms: Option<u64>,
    pub live: bool,
    /// `audit --strict`: facts not checked rejected their ranks.
    pub strict: bool,
    /// `kvcr merge` only: the per-node reports merged, in argument order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reports: Option<&'a [String]>,
    /// `kvcr merge` only: every input was written by a live audit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub all_inputs_live: Option<bool>,
    /// `kvcr merge` only: where each input came from, in argument order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inputs: Option<&'a [MergeInput]>,
    pub groups: &'a [GroupVerdict],
    pub files: &'a [FileVerdict],
    pub summary: &'a Summary,
}

impl<'a> AuditReport<'a> {
    pub fn new(root: &'a str, live: bool, j: &'a Judgement) -> Self {
        AuditReport {
            schema: REPORT_SCHEMA,
            root,
            host: None,
            boot_id: None,
            generated_unix_ms: None,
            live,
            strict: false,
            reports: None,
            all_inputs_live: None,
            inputs: None,
            groups: &j.groups,
            files: &j.files,
            summary: &j.summary,
        }
    }
}

/// A formatter that also escapes terminal-dangerous characters.
struct SafeFormatter(serde_json::ser::PrettyFormatter<'static>);

impl serde_json::ser::Formatter for SafeFormatter {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        frag: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in frag.char_indices() {
            if is_dangerous(c) {
                w.write_all(&frag.as_bytes()[start..i])?;
                write!(w, "\\u{:04x}", c as u32)?;
                start = i + c.len_utf8();
            }
        }
        w.write_all(&frag.as_bytes()[start..])
    }
    // Delegate layout to the pretty formatter.
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// Writes any serialisable value as one pretty, terminal-safe JSON document.
pub fn write<T: Serialize, W: Write + ?Sized>(out: &mut W, value: &T) -> io::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(
        &mut *out,
        SafeFormatter(serde_json::ser::PrettyFormatter::new()),
    );
    value.serialize(&mut ser).map_err(io::Error::other)?;
    out.write_all(b"\n")
}

#[cfg(test)]
fn is_dangerous_raw(c: char) -> bool {
    c != '\n' && is_dangerous(c)
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_dangerous_characters_and_stays_valid() {
        let mut buf = Vec::new();
        super::write(
            &mut buf,
            &serde_json::json!({"p": "a\u{1b}b\u{9b}c\u{202e}d/é"}),
        )
        .unwrap();
        let s = String::from_utf8(buf).unwrap();
        assert!(s.contains(r"a\u001bb\u009bc\u202ed/é"), "{s}");
        assert!(!s.chars().any(super::is_dangerous_raw));
        let back: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back["p"], "a\u{1b}b\u{9b}c\u{202e}d/é");
    }
}
