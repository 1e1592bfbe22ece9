//! The JSON report (docs/format.md §9): exactly one document on stdout.
//!
//! Shape: `{"schema": "kvcr.audit-report/v1", <metadata>, "root",
//! "groups": [...], "files": [...], "summary": {...}}`, written through the
//! typed wire layer ([`super::wire`]) that merge and the gate read, where the metadata
//! ([`Meta`], docs/format.md §9.4) says who wrote the report, when, from
//! which facts, with which options and with which exit status. Strings are escaped beyond what JSON
//! requires (DEL, C1 controls and bidi overrides as `\uXXXX`), so the document
//! is safe to print on a terminal and means the same to any JSON reader.

use crate::text::{is_dangerous, is_plain_ascii};
use serde::Serialize;
use std::io::{self, Write};

pub use crate::ids::AUDIT_REPORT as REPORT_SCHEMA;

/// The options a run was judged under (flags, else the profile's).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Options {
    pub engine: Option<crate::descriptor::EngineId>,
    pub profile: Option<String>,
    /// Where `profile` came from, `"flag"` or `"env"`; absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile_source: Option<&'static str>,
    pub min_epoch: Option<u64>,
    pub max_age_s: Option<u64>,
    pub local_ranks: Option<crate::rankset::RankSet>,
    pub incarnation: Option<uuid::Uuid>,
}

/// Report metadata (docs/format.md §9.4), shared by the audit, merge and
/// import reports.
#[derive(Clone, Debug, Serialize)]
pub struct Meta {
    pub kvcr_version: &'static str,
    pub generated_unix_ms: u64,
    /// This node's hostname (lets `kvcr merge` tell nodes apart); `null` in
    /// a merged report.
    pub host: Option<String>,
    /// The node's boot id, when live and readable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<uuid::Uuid>,
    pub live: bool,
    /// Facts that could not be checked reject (`audit --strict`, every real import).
    pub strict: bool,
    /// Where node facts came from: "proc", or the facts file
    /// (`KVCR_NODE_FACTS=PATH`); `null` offline.
    pub node_facts_source: Option<String>,
    pub options: Options,
    pub exit_status: i32,
}

impl Meta {
    /// The metadata of a report whose exit status is already known: there
    /// is no placeholder status a report could be printed with.
    pub fn new(live: bool, now_ms: u64, exit_status: i32) -> Meta {
        Meta {
            kvcr_version: crate::version::VERSION,
            generated_unix_ms: now_ms,
            host: None,
            boot_id: None,
            live,
            strict: false,
            node_facts_source: None,
            options: Options::default(),
            exit_status,
        }
    }
}

/// `kvcr merge` only: what the inputs were.
#[derive(Clone, Debug, Serialize)]
pub struct MergeMeta {
    /// The per-node reports merged, in argument order.
    pub reports: Vec<String>,
    /// Every input report was written by `kvcr audit --live`.
    pub all_inputs_live: bool,
    /// Age of the oldest input at merge time (from its `generated_unix_ms`);
    /// `null` when an input does not say when it was written.
    pub oldest_input_age_ms: Option<u64>,
    /// Where each input came from, in argument order.
    pub inputs: Vec<MergeInput>,
}

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

/// A formatter that also escapes terminal-dangerous characters.
struct SafeFormatter(serde_json::ser::PrettyFormatter<'static>);

impl serde_json::ser::Formatter for SafeFormatter {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        frag: &str,
    ) -> io::Result<()> {
        // Printable ASCII holds no dangerous character: written as is.
        if is_plain_ascii(frag) {
            return w.write_all(frag.as_bytes());
        }
        let mut start = 0;
        for (i, c) in frag.char_indices() {
            if is_dangerous(c) {
                w.write_all(&frag.as_bytes()[start..i])?;
                // Outside the BMP (tag characters, planes 15 and 16), JSON
                // spells a character as its UTF-16 surrogate pair.
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    write!(w, "\\u{:04x}", u)?;
                }
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

    #[test]
    fn escapes_by_general_category_with_surrogate_pairs() {
        let raw =
            "x\u{ad}\u{600}\u{180e}\u{206a}\u{fff9}\u{e0041}\u{2028}\u{e000}\u{378}\u{10fffd}日本é";
        let mut buf = Vec::new();
        super::write(&mut buf, &serde_json::json!({ "p": raw })).unwrap();
        let s = String::from_utf8(buf).unwrap();
        assert!(
            s.contains(
                r"x\u00ad\u0600\u180e\u206a\ufff9\udb40\udc41\u2028\ue000\u0378\udbff\udffd日本é"
            ),
            "{s}"
        );
        assert!(!s.chars().any(super::is_dangerous_raw));
        let back: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back["p"], raw);
    }
}
