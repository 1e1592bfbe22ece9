//! Finding codes (docs/format.md §5, and §14.6 for the GMS reader): the stable vocabulary of
//! every rejection and notice.

use serde::Serialize;
use std::borrow::Cow;
use std::fmt;

/// Every finding code of docs/format.md §5.3 and §14.6, in table order: the
/// discriminant is the code's row in [`TABLE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Code {
    KV001 = 0,
    KV002 = 1,
    KV003 = 2,
    KV004 = 3,
    KV005 = 4,
    KV006 = 5,
    KV007 = 6,
    KV008 = 7,
    KV009 = 8,
    KV010 = 9,
    KV101 = 10,
    KV102 = 11,
    KV103 = 12,
    KV104 = 13,
    KV105 = 14,
    KV106 = 15,
    KV107 = 16,
    KV108 = 17,
    KV109 = 18,
    KV110 = 19,
    KV111 = 20,
    KV201 = 21,
    KV202 = 22,
    KV203 = 23,
    KV204 = 24,
    KV205 = 25,
    KV206 = 26,
    KV207 = 27,
    KV208 = 28,
    KV209 = 29,
    KV210 = 30,
    KV211 = 31,
    KV212 = 32,
    KV213 = 33,
    KV221 = 34,
    KV222 = 35,
    KV223 = 36,
    KV224 = 37,
    KV225 = 38,
    KV226 = 39,
    KV227 = 40,
    KV228 = 41,
    KV229 = 42,
    KV231 = 43,
    KV232 = 44,
    KV233 = 45,
    KV234 = 46,
    KV235 = 47,
    KV236 = 48,
    KV241 = 49,
    KV242 = 50,
    KV250 = 51,
    KV301 = 52,
    KV302 = 53,
    KV303 = 54,
    KV304 = 55,
    KV305 = 56,
    KV306 = 57,
    KV307 = 58,
    KV308 = 59,
    KV309 = 60,
    KV310 = 61,
    KV311 = 62,
    KV312 = 63,
    KV313 = 64,
    KV314 = 65,
    KV315 = 66,
    KV316 = 67,
    KV317 = 68,
    KV318 = 69,
    KV319 = 70,
    KV320 = 71,
    KV321 = 72,
    KV322 = 73,
    KV323 = 74,
    KV350 = 75,
    KV351 = 76,
    KV352 = 77,
    KV353 = 78,
    KV354 = 79,
}

/// One row of the finding-code table: everything a code is, in one place.
/// The explanation (`kvcr explain`) is `rules::explain`'s exhaustive match,
/// so a new code without one does not compile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spec {
    pub code: Code,
    /// The code as printed (`KV104`).
    pub id: &'static str,
    /// The stable short name (docs/format.md §5 "name" column).
    pub name: &'static str,
    /// The severity the code is listed with in §5 (a finding may still be
    /// made a notice, e.g. outside the current incarnation).
    pub severity: Severity,
    /// Place in the headline's root-cause order (0 is named first); the
    /// ranks are a permutation of 0..80, checked when compiling
    /// `rules::cause::ROOT_ORDER`.
    pub root_rank: u8,
    /// What the code judges: a kvcr inventory (`kvcr audit`, §5.3) or a
    /// GMS artifact (`kvcr gms`, §14.6).
    pub family: Family,
}

/// What a finding code judges: the two vocabularies share one table (one
/// code never means two things), each printed by its own command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// A kvcr inventory (`kvcr audit`, `kvcr merge`, `kvcr import`): KV0xx, KV1xx.
    Inventory,
    /// A Dynamo GPU Memory Service artifact (`kvcr gms`): KV2xx.
    Gms,
    /// A disk offload tier (`kvcr offload`, docs/format.md §15): KV3xx.
    Offload,
}

const fn row(code: Code, id: &'static str, name: &'static str, root_rank: u8) -> Spec {
    Spec {
        code,
        id,
        name,
        severity: Severity::Reject,
        root_rank,
        family: Family::Inventory,
    }
}

const fn offload(code: Code, id: &'static str, name: &'static str, root_rank: u8) -> Spec {
    Spec {
        family: Family::Offload,
        ..row(code, id, name, root_rank)
    }
}

const fn gms(code: Code, id: &'static str, name: &'static str, root_rank: u8) -> Spec {
    Spec {
        family: Family::Gms,
        ..row(code, id, name, root_rank)
    }
}

/// The finding codes of docs/format.md §5, in table order (row `i` is the
/// code with discriminant `i`).
pub const TABLE: [Spec; 80] = [
    row(Code::KV001, "KV001", "symlink", 2),
    row(Code::KV002, "KV002", "not-regular", 3),
    row(Code::KV003, "KV003", "unsafe-permissions", 11),
    row(Code::KV004, "KV004", "too-large", 4),
    row(Code::KV005, "KV005", "unreadable", 5),
    row(Code::KV006, "KV006", "malformed", 6),
    row(Code::KV007, "KV007", "schema", 7),
    row(Code::KV008, "KV008", "digest", 0),
    row(Code::KV009, "KV009", "torn", 8),
    Spec {
        severity: Severity::Notice,
        ..row(Code::KV010, "KV010", "stray", 20)
    },
    row(Code::KV101, "KV101", "wrong-rank", 12),
    row(Code::KV102, "KV102", "duplicate-rank", 13),
    row(Code::KV103, "KV103", "missing-rank", 19),
    row(Code::KV104, "KV104", "geometry", 15),
    row(Code::KV105, "KV105", "model", 16),
    row(Code::KV106, "KV106", "gpu-uuid", 18),
    row(Code::KV107, "KV107", "incarnation", 1),
    row(Code::KV108, "KV108", "stale", 10),
    row(Code::KV109, "KV109", "not-quiesced", 14),
    row(Code::KV110, "KV110", "foreign-node", 9),
    row(Code::KV111, "KV111", "handle-reuse", 17),
    gms(Code::KV201, "KV201", "lease-legacy-layout", 21),
    gms(Code::KV202, "KV202", "lease-header", 22),
    gms(Code::KV203, "KV203", "lease-size", 23),
    gms(Code::KV204, "KV204", "lease-state", 24),
    gms(Code::KV205, "KV205", "lease-transition", 27),
    gms(Code::KV206, "KV206", "lease-owner-state", 28),
    Spec {
        severity: Severity::Notice,
        ..gms(Code::KV207, "KV207", "lease-sealed-unowned", 33)
    },
    gms(Code::KV208, "KV208", "lease-free-count", 29),
    gms(Code::KV209, "KV209", "lease-mutations", 26),
    gms(Code::KV210, "KV210", "lease-barrier", 25),
    gms(Code::KV211, "KV211", "lease-reservation-range", 30),
    gms(Code::KV212, "KV212", "lease-reservation-torn", 31),
    gms(Code::KV213, "KV213", "lease-foreign-owner", 32),
    gms(Code::KV221, "KV221", "recovery-size", 34),
    gms(Code::KV222, "KV222", "recovery-magic", 35),
    gms(Code::KV223, "KV223", "recovery-epoch", 36),
    gms(Code::KV224, "KV224", "recovery-uncommitted", 37),
    gms(Code::KV225, "KV225", "recovery-binding", 38),
    gms(Code::KV226, "KV226", "recovery-valid-word", 39),
    gms(Code::KV227, "KV227", "recovery-crc", 40),
    gms(Code::KV228, "KV228", "recovery-lengths", 41),
    Spec {
        severity: Severity::Notice,
        ..gms(Code::KV229, "KV229", "recovery-binding-unchecked", 42)
    },
    gms(Code::KV231, "KV231", "cohort-unretired", 44),
    gms(Code::KV232, "KV232", "cohort-writer-running", 45),
    gms(Code::KV233, "KV233", "cohort-staging", 46),
    gms(Code::KV234, "KV234", "cohort-marker", 43),
    Spec {
        severity: Severity::Notice,
        ..gms(Code::KV235, "KV235", "cohort-not-checked", 47)
    },
    Spec {
        severity: Severity::Notice,
        ..gms(Code::KV236, "KV236", "cohort-stale-joining", 48)
    },
    gms(Code::KV241, "KV241", "superseded-format", 49),
    gms(Code::KV242, "KV242", "superseded-size", 50),
    gms(Code::KV250, "KV250", "gms-changed", 51),
    offload(Code::KV301, "KV301", "namespace-unverifiable", 52),
    offload(Code::KV302, "KV302", "namespace-digest", 53),
    offload(Code::KV303, "KV303", "block-incomplete", 54),
    offload(Code::KV304, "KV304", "size-short", 55),
    offload(Code::KV305, "KV305", "size-long", 56),
    offload(Code::KV306, "KV306", "size-misaligned", 57),
    offload(Code::KV307, "KV307", "ranks-disagree", 58),
    offload(Code::KV308, "KV308", "offload-symlink", 59),
    offload(Code::KV309, "KV309", "special-file", 60),
    offload(Code::KV310, "KV310", "rank-out-of-range", 61),
    Spec {
        severity: Severity::Notice,
        ..offload(Code::KV311, "KV311", "staging", 62)
    },
    Spec {
        severity: Severity::Notice,
        ..offload(Code::KV312, "KV312", "foreign", 63)
    },
    Spec {
        severity: Severity::Notice,
        ..offload(Code::KV313, "KV313", "partial-chunk", 64)
    },
    Spec {
        severity: Severity::Notice,
        ..offload(Code::KV314, "KV314", "ambiguous", 65)
    },
    Spec {
        severity: Severity::Notice,
        ..offload(Code::KV315, "KV315", "ranks-not-checkable", 66)
    },
    Spec {
        severity: Severity::Notice,
        ..offload(Code::KV316, "KV316", "geometry-unchecked", 67)
    },
    Spec {
        severity: Severity::Notice,
        ..offload(Code::KV317, "KV317", "mixed-world-sizes", 68)
    },
    Spec {
        severity: Severity::Notice,
        ..offload(Code::KV318, "KV318", "probe-file", 69)
    },
    Spec {
        severity: Severity::Notice,
        ..offload(Code::KV319, "KV319", "empty-dirs", 70)
    },
    Spec {
        severity: Severity::Notice,
        ..offload(Code::KV320, "KV320", "agnostic-direct", 71)
    },
    Spec {
        severity: Severity::Notice,
        ..offload(Code::KV321, "KV321", "group-beyond-config", 72)
    },
    Spec {
        severity: Severity::Notice,
        ..offload(Code::KV322, "KV322", "unreachable-after-restart", 73)
    },
    Spec {
        severity: Severity::Notice,
        ..offload(Code::KV323, "KV323", "legacy-layout", 74)
    },
    Spec {
        severity: Severity::Notice,
        ..offload(Code::KV350, "KV350", "sglang-suffix-overlap", 75)
    },
    offload(Code::KV351, "KV351", "gds-sidecar-missing", 76),
    offload(Code::KV352, "KV352", "gds-sidecar-orphan", 77),
    offload(Code::KV353, "KV353", "gds-sidecar-mismatch", 78),
    offload(Code::KV354, "KV354", "gds-header-invalid", 79),
];

impl Code {
    pub const ALL: [Code; 80] = {
        let mut all = [Code::KV001; 80];
        let mut i = 0;
        while i < TABLE.len() {
            assert!(TABLE[i].code as usize == i, "TABLE row out of order");
            all[i] = TABLE[i].code;
            i += 1;
        }
        all
    };

    /// This code's row of [`TABLE`].
    pub fn spec(self) -> &'static Spec {
        &TABLE[self as usize]
    }

    /// The stable short name (docs/format.md §5 "name" column).
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    pub fn as_str(self) -> &'static str {
        self.spec().id
    }

    /// The severity docs/format.md §5 lists the code with.
    pub fn severity(self) -> Severity {
        self.spec().severity
    }

    /// What the code judges ([`Family`]).
    pub fn family(self) -> Family {
        self.spec().family
    }

    /// Accepts `KV104`, `kv104`, the bare number (`104`, and `9` or `009`
    /// for KV009) or the name (`geometry`).
    ///
    /// ```
    /// use kvcr_audit::finding::Code;
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
    /// A file or directory owned by this uid, which is neither root, the
    /// invoking user nor the declared producer user (KV003, docs/format.md
    /// §2.4): the fix is to declare the producer's user when it is this
    /// one, not to rewrite the files.
    UndeclaredOwner(u32),
    /// This user may not list, open or read the entry (EACCES, EPERM):
    /// nothing is known about the file, so the run cannot judge the
    /// inventory at all (exit 2, docs/format.md §6), never a verdict.
    Access,
}

/// A finding's message: its text and the typed quantities in it (an age, a
/// maximum age, a moment). The core carries the numbers and the printers
/// format them: `print::render` (for library callers
/// `kvcr_audit::api::message_text`) is the one function that turns a message into
/// text, so the table, the JSON document, the headline, `examine`, `merge`
/// and the import report all say the same (docs/format.md §9.2). There is no `Display`
/// on purpose, so the core cannot format one; tests of the core read the
/// numbers from [`Message::parts`].
///
/// Adjacent text is kept as one part: a message without quantities is one
/// [`Part::Text`] (or none when empty), which [`Message::as_text`] returns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message {
    parts: Vec<Part>,
}

/// One piece of a [`Message`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Part {
    /// Text, printed as it is (escaped for a terminal by the printer).
    Text(Cow<'static, str>),
    /// A length of time in milliseconds, printed coarse for operators
    /// (`850ms`, `5m 2s`, `3d 4h`).
    DurationMs(u64),
    /// A moment in Unix milliseconds, printed as UTC
    /// (`2025-11-30 07:10:25 UTC`).
    UnixMs(u64),
}

impl Message {
    /// An empty message.
    pub fn new() -> Message {
        Message::default()
    }

    /// Appends text.
    pub fn text(mut self, s: impl Into<Cow<'static, str>>) -> Message {
        self.push_text(s.into());
        self
    }

    /// Appends a length of time in milliseconds ([`Part::DurationMs`]).
    pub fn duration_ms(mut self, ms: u64) -> Message {
        self.parts.push(Part::DurationMs(ms));
        self
    }

    /// Appends a moment in Unix milliseconds ([`Part::UnixMs`]).
    pub fn unix_ms(mut self, ms: u64) -> Message {
        self.parts.push(Part::UnixMs(ms));
        self
    }

    /// Appends the parts of `other`.
    pub fn then(mut self, other: Message) -> Message {
        for p in other.parts {
            match p {
                Part::Text(t) => self.push_text(t),
                p => self.parts.push(p),
            }
        }
        self
    }

    /// Appends text in place.
    pub fn push_str(&mut self, s: &str) {
        self.push_text(Cow::Owned(s.to_string()));
    }

    /// Puts text before the message.
    pub fn prepend(&mut self, s: &str) {
        match self.parts.first_mut() {
            Some(Part::Text(t)) => t.to_mut().insert_str(0, s),
            _ if s.is_empty() => {}
            _ => self.parts.insert(0, Part::Text(Cow::Owned(s.to_string()))),
        }
    }

    fn push_text(&mut self, s: Cow<'static, str>) {
        if s.is_empty() {
            return;
        }
        match self.parts.last_mut() {
            Some(Part::Text(t)) => t.to_mut().push_str(&s),
            _ => self.parts.push(Part::Text(s)),
        }
    }

    /// The parts, in order.
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// The message when it holds text only (`""` when empty); `None` when
    /// it carries a quantity, which only a printer may turn into text.
    pub fn as_text(&self) -> Option<&str> {
        match self.parts.as_slice() {
            [] => Some(""),
            [Part::Text(t)] => Some(t),
            _ => None,
        }
    }

    /// Whether one of the text parts contains `needle` (a quantity is not
    /// text and never matches).
    pub fn contains(&self, needle: &str) -> bool {
        self.parts
            .iter()
            .any(|p| matches!(p, Part::Text(t) if t.contains(needle)))
    }

    /// Whether the message begins with the text `prefix`.
    pub fn starts_with(&self, prefix: &str) -> bool {
        match self.parts.first() {
            Some(Part::Text(t)) => t.starts_with(prefix),
            _ => prefix.is_empty(),
        }
    }

    /// The lengths of time the message carries, in order (milliseconds).
    pub fn durations_ms(&self) -> Vec<u64> {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::DurationMs(ms) => Some(*ms),
                _ => None,
            })
            .collect()
    }
}

impl From<String> for Message {
    fn from(s: String) -> Message {
        Message::new().text(s)
    }
}

impl From<&'static str> for Message {
    fn from(s: &'static str) -> Message {
        Message::new().text(s)
    }
}

impl From<Cow<'static, str>> for Message {
    fn from(s: Cow<'static, str>) -> Message {
        Message::new().text(s)
    }
}

/// A message equals a string when it is that text and carries no quantity.
impl PartialEq<str> for Message {
    fn eq(&self, other: &str) -> bool {
        self.as_text() == Some(other)
    }
}

impl PartialEq<&str> for Message {
    fn eq(&self, other: &&str) -> bool {
        self.as_text() == Some(*other)
    }
}

impl PartialEq<String> for Message {
    fn eq(&self, other: &String) -> bool {
        self.as_text() == Some(other.as_str())
    }
}

/// One finding. `path` is relative to the resolved root; `expected`/`found`
/// are set wherever the finding compares two values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub code: Code,
    pub name: &'static str,
    pub severity: Severity,
    /// Rendered to text by the printers only ([`Message`]).
    pub message: Message,
    pub path: Option<String>,
    pub expected: Option<String>,
    pub found: Option<String>,
    /// `false` only for a problem of a descriptor outside the group's
    /// current incarnation (docs/format.md §10.1): listed as a notice, never
    /// counted against the group. Written as `"counted": false`; absent
    /// (true) everywhere else.
    pub counted: bool,
    /// Not printed: chooses the headline's action ([`Subject`]).
    pub subject: Subject,
}

impl Finding {
    /// A rejecting finding.
    pub fn reject(code: Code, message: impl Into<Message>) -> Self {
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
    pub fn notice(code: Code, message: impl Into<Message>) -> Self {
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

#[cfg(test)]
mod tests {
    use super::{Message, Part};

    #[test]
    fn adjacent_text_is_one_part_and_quantities_stay_numbers() {
        let m = Message::from("sealed ")
            .text("")
            .duration_ms(61_000)
            .text(" ago")
            .text(String::from(", older than "))
            .duration_ms(60_000);
        assert_eq!(
            m.parts(),
            [
                Part::Text("sealed ".into()),
                Part::DurationMs(61_000),
                Part::Text(" ago, older than ".into()),
                Part::DurationMs(60_000),
            ]
        );
        assert_eq!(m.durations_ms(), [61_000, 60_000]);
        assert_eq!(m.as_text(), None);
        // A message with a quantity never equals a string, whatever a
        // printer would make of it.
        assert!(m != "sealed 1m 1s ago, older than 1m 0s");
        assert!(m.starts_with("sealed "));
        assert!(m.contains(" ago, older"));
        // A quantity is not text: no match across it.
        assert!(!m.contains("sealed 61"));
        assert!(!m.contains("sealed  ago"));
    }

    #[test]
    fn text_only_messages_compare_as_their_text() {
        assert_eq!(Message::new().as_text(), Some(""));
        assert!(Message::new() == "");
        let m = Message::from("a").then(Message::from("b")).text("c");
        assert_eq!(m.parts().len(), 1);
        let abc = String::from("abc");
        assert!(m == "abc" && m == abc);
        let mut m = Message::from(String::from("owner pid 7 is gone"));
        m.push_str(" (and 2 more)");
        m.prepend("(not counted) ");
        assert_eq!(
            m.as_text(),
            Some("(not counted) owner pid 7 is gone (and 2 more)")
        );
    }

    #[test]
    fn prepend_and_then_keep_the_quantities() {
        let mut m = Message::new().duration_ms(5).text(" late");
        assert!(!m.starts_with("late"));
        assert!(m.starts_with(""));
        m.prepend("");
        assert_eq!(m.parts().len(), 2);
        m.prepend("(not counted) ");
        assert_eq!(
            m.parts(),
            [
                Part::Text("(not counted) ".into()),
                Part::DurationMs(5),
                Part::Text(" late".into()),
            ]
        );
        let joined = Message::from("x ").then(m).unix_ms(9).then(Message::new());
        assert_eq!(
            joined.parts(),
            [
                Part::Text("x (not counted) ".into()),
                Part::DurationMs(5),
                Part::Text(" late".into()),
                Part::UnixMs(9),
            ]
        );
        let mut empty = Message::new();
        empty.prepend("now");
        assert_eq!(empty.as_text(), Some("now"));
    }
}
