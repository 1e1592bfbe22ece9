//! Finding codes (docs/format.md §5): the stable vocabulary of every rejection and notice.

use serde::Serialize;
use std::fmt;

/// Every finding code of docs/format.md §5, in table order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Code {
    KV001,
    KV002,
    KV003,
    KV004,
    KV005,
    KV006,
    KV007,
    KV008,
    KV009,
    KV010,
    KV101,
    KV102,
    KV103,
    KV104,
    KV105,
    KV106,
    KV107,
    KV108,
    KV109,
    KV110,
    KV111,
}

impl Code {
    pub const ALL: [Code; 21] = [
        Code::KV001,
        Code::KV002,
        Code::KV003,
        Code::KV004,
        Code::KV005,
        Code::KV006,
        Code::KV007,
        Code::KV008,
        Code::KV009,
        Code::KV010,
        Code::KV101,
        Code::KV102,
        Code::KV103,
        Code::KV104,
        Code::KV105,
        Code::KV106,
        Code::KV107,
        Code::KV108,
        Code::KV109,
        Code::KV110,
        Code::KV111,
    ];

    /// The stable short name (docs/format.md §5 "name" column).
    pub fn name(self) -> &'static str {
        match self {
            Code::KV001 => "symlink",
            Code::KV002 => "not-regular",
            Code::KV003 => "unsafe-permissions",
            Code::KV004 => "too-large",
            Code::KV005 => "unreadable",
            Code::KV006 => "malformed",
            Code::KV007 => "schema",
            Code::KV008 => "digest",
            Code::KV009 => "torn",
            Code::KV010 => "stray",
            Code::KV101 => "wrong-rank",
            Code::KV102 => "duplicate-rank",
            Code::KV103 => "missing-rank",
            Code::KV104 => "geometry",
            Code::KV105 => "model",
            Code::KV106 => "gpu-uuid",
            Code::KV107 => "incarnation",
            Code::KV108 => "stale",
            Code::KV109 => "not-quiesced",
            Code::KV110 => "foreign-node",
            Code::KV111 => "handle-reuse",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Code::KV001 => "KV001",
            Code::KV002 => "KV002",
            Code::KV003 => "KV003",
            Code::KV004 => "KV004",
            Code::KV005 => "KV005",
            Code::KV006 => "KV006",
            Code::KV007 => "KV007",
            Code::KV008 => "KV008",
            Code::KV009 => "KV009",
            Code::KV010 => "KV010",
            Code::KV101 => "KV101",
            Code::KV102 => "KV102",
            Code::KV103 => "KV103",
            Code::KV104 => "KV104",
            Code::KV105 => "KV105",
            Code::KV106 => "KV106",
            Code::KV107 => "KV107",
            Code::KV108 => "KV108",
            Code::KV109 => "KV109",
            Code::KV110 => "KV110",
            Code::KV111 => "KV111",
        }
    }

    /// Accepts `KV104`, `kv104`, the bare number (`104`, and `9` or `009`
    /// for KV009) or the name (`geometry`).
    ///
    /// ```
    /// use kvcr::finding::Code;
    /// assert_eq!(Code::parse("KV104"), Some(Code::KV104));
    /// assert_eq!(Code::parse("104"), Some(Code::KV104));
    /// assert_eq!(Code::parse("9"), Some(Code::KV009));
    /// assert_eq!(Code::parse("geometry"), Some(Code::KV104));
    /// assert_eq!(Code::parse("KV999"), None);
    /// assert_eq!(Code::parse("999"), None);
    /// ```
    pub fn parse(s: &str) -> Option<Code> {
        let s = s.trim();
        if !s.is_empty() && s.len() <= 3 && s.bytes().all(|b| b.is_ascii_digit()) {
            let n: u16 = s.parse().ok()?;
            return Code::ALL
                .into_iter()
                .find(|c| c.as_str()[2..].parse::<u16>() == Ok(n));
        }
        Code::ALL
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(s) || c.name().eq_ignore_ascii_case(s))
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Notice,
    Reject,
}

/// What a finding is about, when it is not the inventory's files: the
/// headline's safe next step depends on it, so it is a value, not a prefix
/// of the message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Subject {
    /// The inventory's files (every code's own action applies).
    #[default]
    Files,
    /// What the operator asked for (`--local-ranks`, the profile's
    /// `local_ranks`): nothing in the files is wrong.
    Request,
    /// The reports given to `kvcr merge`.
    MergeInputs,
    /// This user may not list, open or read the entry (EACCES, EPERM):
    /// nothing is known about the file, so the run cannot judge the
    /// inventory at all (exit 2, docs/format.md §6), never a verdict.
    Access,
}

/// One finding. `path` is relative to the resolved root; `expected`/`found`
/// are set wherever the finding compares two values.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub code: Code,
    pub name: &'static str,
    pub severity: Severity,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found: Option<String>,
    /// `false` only for a problem of a descriptor outside the group's
    /// current incarnation (docs/format.md §10.1): listed as a notice, never
    /// counted against the group. Written as `"counted": false`; absent
    /// (true) everywhere else.
    #[serde(skip_serializing_if = "is_true")]
    pub counted: bool,
    /// Not printed: chooses the headline's action ([`Subject`]).
    #[serde(skip)]
    pub subject: Subject,
}

fn is_true(b: &bool) -> bool {
    *b
}

impl Finding {
    /// A rejecting finding.
    pub fn reject(code: Code, message: impl Into<String>) -> Self {
        Finding {
            code,
            name: code.name(),
            severity: Severity::Reject,
            message: message.into(),
            path: None,
            expected: None,
            found: None,
            counted: true,
            subject: Subject::Files,
        }
    }

    /// A notice: reported, never decides a verdict.
    pub fn notice(code: Code, message: impl Into<String>) -> Self {
        Finding {
            severity: Severity::Notice,
            ..Finding::reject(code, message)
        }
    }

    pub fn at(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    pub fn values(mut self, expected: impl fmt::Display, found: impl fmt::Display) -> Self {
        self.expected = Some(expected.to_string());
        self.found = Some(found.to_string());
        self
    }

    /// Marks what the finding is about ([`Subject`]).
    pub fn about(mut self, subject: Subject) -> Self {
        self.subject = subject;
        self
    }

    /// Marks a finding made from an I/O error as [`Subject::Access`] when
    /// the error is a permission refusal (its kind, never its text).
    pub fn denied_if(self, e: &std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            self.about(Subject::Access)
        } else {
            self
        }
    }

    pub fn is_reject(&self) -> bool {
        self.severity == Severity::Reject
    }
}
