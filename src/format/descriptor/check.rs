//! The field-checking layer shared by descriptors ([`super::parse`]) and
//! the deployment profile ([`crate::format::profile`]), so both files speak the
//! same language: a [`Checker`] collects every schema problem as a
//! [`FieldError`] naming the field path, what is wrong and both values.
//!
//! It walks the flat node list of [`crate::format::json`] directly: looking a field
//! up costs one key comparison when members are in the expected order (any
//! order is accepted), and nothing is formatted unless a check fails.

use super::{parse_canonical_uuid, EngineId, GpuUuid};
use crate::format::json::read::short_eq;
use crate::format::json::{preview, quote_preview, Items, Members, NumKind, Value, View};
use std::cell::Cell;
use std::fmt::{self, Write as _};
use uuid::Uuid;

/// `sha256:` + 64 lowercase hex digits; anything else is `None`.
pub fn parse_digest(s: &str) -> Option<[u8; 32]> {
    let hex = s.strip_prefix("sha256:")?;
    let mut out = [0u8; 32];
    crate::format::hex::decode(hex.as_bytes(), &mut out, false).then_some(out)
}

/// One schema problem: the field path, what is wrong, and both values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Path of the field, e.g. `geometry.num_layers`, `allocations[3].handle.hex`.
    pub field: String,
    /// What is wrong, e.g. `out of range`, `missing field`, `unknown field`.
    pub problem: String,
    pub expected: String,
    /// The found value as JSON (cut to about 60 chars), or `(missing)`.
    pub found: String,
}

/// The `found` text of a missing field.
pub const MISSING: &str = "(missing)";

impl FieldError {
    /// `geometry.num_layers: out of range, found 0`.
    pub fn message(&self) -> String {
        if self.found == MISSING {
            format!("{}: {}", self.field, self.problem)
        } else {
            format!("{}: {}, found {}", self.field, self.problem, self.found)
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}`: {}: expected {}, found {}",
            self.field, self.problem, self.expected, self.found
        )
    }
}

#[derive(Clone, Copy, Debug)]
enum Seg<'p> {
    Key(&'p str),
    Index(usize),
}

/// A field path, built on the stack as extraction descends and rendered
/// only when an error is recorded.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Path<'p> {
    parent: Option<&'p Path<'p>>,
    seg: Option<Seg<'p>>,
}

impl<'p> Path<'p> {
    pub(crate) const ROOT: Path<'static> = Path {
        parent: None,
        seg: None,
    };

    #[inline]
    pub(crate) fn key<'s>(&'s self, key: &'s str) -> Path<'s> {
        Path {
            parent: Some(self),
            seg: Some(Seg::Key(key)),
        }
    }

    pub(crate) fn index(&self, i: usize) -> Path<'_> {
        Path {
            parent: Some(self),
            seg: Some(Seg::Index(i)),
        }
    }

    pub(crate) fn render(&self) -> String {
        let mut segs = Vec::new();
        let mut p = Some(self);
        while let Some(x) = p {
            segs.extend(x.seg);
            p = x.parent;
        }
        if segs.is_empty() {
            return "(top level)".to_owned();
        }
        let mut s = String::new();
        for seg in segs.iter().rev() {
            match seg {
                Seg::Key(k) if is_plain_key(k) => {
                    if !s.is_empty() {
                        s.push('.');
                    }
                    s.push_str(k);
                }
                Seg::Key(k) => {
                    let _ = write!(s, "[{}]", quote_preview(k));
                }
                Seg::Index(i) => {
                    let _ = write!(s, "[{i}]");
                }
            }
        }
        s
    }
}

fn is_plain_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 64
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A field to check: its path and its value (`None` when absent).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Field<'p, 'v> {
    pub(crate) path: Path<'p>,
    pub(crate) value: Option<Value<'v>>,
}

impl<'v> Field<'static, 'v> {
    pub(crate) fn root(v: Value<'v>) -> Self {
        Field {
            path: Path::ROOT,
            value: Some(v),
        }
    }
}

impl<'p, 'v> Field<'p, 'v> {
    /// Item `i` of this (array) field.
    #[inline]
    pub(crate) fn item<'s>(&'s self, i: usize, v: Value<'v>) -> Field<'s, 'v> {
        Field {
            path: self.path.index(i),
            value: Some(v),
        }
    }

    /// `None` when the field is absent or `null` (optional profile fields).
    pub(crate) fn optional(self) -> Option<Self> {
        match self.value {
            Some(v) if !v.is_null() => Some(self),
            _ => None,
        }
    }
}

/// The members of a JSON object being checked.
pub(crate) struct Obj<'p, 'v> {
    pub(crate) path: Path<'p>,
    members: Members<'v>,
    /// The member after the last one found (node index) and how many
    /// members are left from it: a lookup tries it first, since callers
    /// look fields up in the spec's order and writers mostly keep it.
    next: Cell<(u32, u32)>,
}

impl<'p, 'v> Obj<'p, 'v> {
    #[inline]
    pub(crate) fn new(path: Path<'p>, members: Members<'v>) -> Self {
        let first = members.value().index() as u32 + 1;
        Obj {
            path,
            members,
            next: Cell::new((first, members.len() as u32)),
        }
    }

    /// Inlined into each caller, where `key` is a literal: the common case
    /// is one comparison of known length.
    #[inline(always)]
    pub(crate) fn get(&self, key: &str) -> Option<Value<'v>> {
        let m = &self.members;
        let (next, left) = self.next.get();
        if left > 0 {
            let v = m.at(next);
            if m.key_is(v, key) {
                self.next.set((m.next_sibling(v), left - 1));
                return Some(v);
            }
        }
        self.scan(key)
    }

    #[inline(never)]
    fn scan(&self, key: &str) -> Option<Value<'v>> {
        let m = &self.members;
        let len = m.len() as u32;
        for (i, v) in m.values().enumerate() {
            if m.key_is(v, key) {
                self.next.set((m.next_sibling(v), len - i as u32 - 1));
                return Some(v);
            }
        }
        None
    }

    #[inline(always)]
    pub(crate) fn at<'s>(&'s self, key: &'s str) -> Field<'s, 'v> {
        Field {
            path: self.path.key(key),
            value: self.get(key),
        }
    }
}

/// Collects schema problems; every check records an error when it returns `None`.
#[derive(Debug, Default)]
pub(crate) struct Checker {
    /// The first [`Checker::KEEP`] problems.
    pub(crate) errors: Vec<FieldError>,
    /// How many problems there were in all.
    pub(crate) total: usize,
}

impl Checker {
    const KEEP: usize = 64;

    pub(crate) fn new() -> Self {
        Self::default()
    }

    pub(crate) fn is_clean(&self) -> bool {
        self.total == 0
    }

    pub(crate) fn fail(
        &mut self,
        path: &Path<'_>,
        problem: impl Into<String>,
        expected: impl Into<String>,
        found: impl Into<String>,
    ) {
        self.total += 1;
        if self.errors.len() < Self::KEEP {
            self.errors.push(FieldError {
                field: path.render(),
                problem: problem.into(),
                expected: expected.into(),
                found: found.into(),
            });
        }
    }

    /// The value of a required field; records "missing field" when absent.
    #[inline]
    fn present<'v>(
        &mut self,
        f: &Field<'_, 'v>,
        expected: impl FnOnce() -> String,
    ) -> Option<Value<'v>> {
        if f.value.is_none() {
            self.fail(&f.path, "missing field", expected(), MISSING);
        }
        f.value
    }

    /// Records a type mismatch (a float gets its own wording).
    fn wrong_type(&mut self, path: &Path<'_>, v: Value<'_>, expected: String) {
        let problem = match v.type_name() {
            "float" => "float not allowed".to_owned(),
            _ => format!("wrong type ({})", v.type_name()),
        };
        self.fail(path, problem, expected, preview(v));
    }

    #[inline]
    pub(crate) fn members<'v>(
        &mut self,
        f: &Field<'_, 'v>,
        expected: impl Fn() -> String,
    ) -> Option<Members<'v>> {
        let v = self.present(f, &expected)?;
        let m = v.as_object();
        if m.is_none() {
            self.wrong_type(&f.path, v, expected());
        }
        m
    }

    /// Records every member of `o` not named in `known` (in file order).
    pub(crate) fn unknown_fields(&mut self, o: &Obj<'_, '_>, known: &[&str]) {
        let m = o.members;
        m.each_unknown(known, |v| self.unknown_field(&o.path, m.key(v), v, known));
    }

    #[cold]
    #[inline(never)]
    fn unknown_field(&mut self, path: &Path<'_>, k: &str, v: Value<'_>, known: &[&str]) {
        self.fail(
            &path.key(k),
            "unknown field",
            format!("one of {}", known.join(", ")),
            preview(v),
        );
    }

    /// A required object with exactly the `known` fields (missing ones are
    /// reported by the field checks that follow).
    #[inline]
    pub(crate) fn object<'p, 'v>(
        &mut self,
        f: Field<'p, 'v>,
        known: &[&str],
    ) -> Option<Obj<'p, 'v>> {
        let members = self.members(&f, || format!("object with {}", known.join(", ")))?;
        let o = Obj::new(f.path, members);
        self.unknown_fields(&o, known);
        Some(o)
    }

    pub(crate) fn array<'v>(
        &mut self,
        f: &Field<'_, 'v>,
        min: usize,
        max: usize,
        what: &str,
    ) -> Option<Items<'v>> {
        let expected = || format!("array of {min}–{max} {what}");
        let v = self.present(f, expected)?;
        let Some(items) = v.as_array() else {
            self.wrong_type(&f.path, v, expected());
            return None;
        };
        if items.len() < min || items.len() > max {
            let problem = if items.is_empty() {
                "empty array".to_owned()
            } else {
                format!("wrong number of items ({})", items.len())
            };
            self.fail(&f.path, problem, expected(), preview(f.value?));
            return None;
        }
        Some(items)
    }

    #[inline]
    pub(crate) fn int(&mut self, f: Field<'_, '_>, lo: i128, hi: i128) -> Option<i128> {
        let expected = || format!("integer {lo}..={hi}");
        let v = self.present(&f, expected)?;
        match v.view() {
            View::Number(n) => match n.kind {
                NumKind::Int(i) if (lo..=hi).contains(&i) => Some(i),
                NumKind::Int(_) | NumKind::BigInt => {
                    self.fail(&f.path, "out of range", expected(), preview(v));
                    None
                }
                NumKind::Float => {
                    self.wrong_type(&f.path, v, expected());
                    None
                }
            },
            _ => {
                self.wrong_type(&f.path, v, expected());
                None
            }
        }
    }

    /// The common case inline (a non-negative integer literal of at most
    /// 19 digits, in range); everything else, errors included, out of line.
    #[inline(always)]
    pub(crate) fn uint(&mut self, f: Field<'_, '_>, lo: u64, hi: u64) -> Option<u64> {
        if let Some(v) = f.value.and_then(|v| v.as_small_uint()) {
            if (lo..=hi).contains(&v) {
                return Some(v);
            }
        }
        self.uint_slow(f, lo, hi)
    }

    #[inline(never)]
    fn uint_slow(&mut self, f: Field<'_, '_>, lo: u64, hi: u64) -> Option<u64> {
        // In range lo..=hi, so the conversion back to u64 is lossless.
        self.int(f, i128::from(lo), i128::from(hi))
            .map(|i| i as u64)
    }

    #[inline]
    pub(crate) fn boolean(&mut self, f: Field<'_, '_>) -> Option<bool> {
        let v = self.present(&f, || "boolean".into())?;
        let b = v.as_bool();
        if b.is_none() {
            self.wrong_type(&f.path, v, "boolean".into());
        }
        b
    }

    #[inline]
    fn str_value<'v>(
        &mut self,
        f: &Field<'_, 'v>,
        expected: impl Fn() -> String,
    ) -> Option<&'v str> {
        let v = self.present(f, &expected)?;
        let s = v.as_str();
        if s.is_none() {
            self.wrong_type(&f.path, v, expected());
        }
        s
    }

    /// Checks the length (in characters) of an already type-checked string.
    #[inline]
    fn check_len(
        &mut self,
        path: &Path<'_>,
        s: &str,
        min: usize,
        max: usize,
        expected: impl FnOnce() -> String,
    ) -> bool {
        if len_surely_in(s, min, max) {
            return true;
        }
        let n = s.chars().count();
        if n < min {
            let problem = if n == 0 {
                "empty string".to_owned()
            } else {
                format!("too short ({n} chars)")
            };
            self.fail(path, problem, expected(), quote_preview(s));
            false
        } else if n > max {
            self.fail(
                path,
                format!("too long ({n} chars)"),
                expected(),
                quote_preview(s),
            );
            false
        } else {
            true
        }
    }

    /// The common case inline (a string whose byte length alone proves its
    /// character count in range); everything else out of line.
    #[inline(always)]
    pub(crate) fn string<'v>(
        &mut self,
        f: Field<'_, 'v>,
        min: usize,
        max: usize,
    ) -> Option<&'v str> {
        if let Some(s) = f.value.and_then(|v| v.as_str()) {
            if len_surely_in(s, min, max) {
                return Some(s);
            }
        }
        self.string_slow(f, min, max)
    }

    #[inline(never)]
    fn string_slow<'v>(&mut self, f: Field<'_, 'v>, min: usize, max: usize) -> Option<&'v str> {
        let expected = || format!("string of {min}–{max} chars");
        let s = self.str_value(&f, expected)?;
        self.check_len(&f.path, s, min, max, expected).then_some(s)
    }

    /// A required string or `null` (`Some(None)`).
    pub(crate) fn string_or_null<'v>(
        &mut self,
        f: Field<'_, 'v>,
        min: usize,
        max: usize,
    ) -> Option<Option<&'v str>> {
        if f.value.is_some_and(|v| v.is_null()) {
            return Some(None);
        }
        let expected = || format!("null or string of {min}–{max} chars");
        let s = self.str_value(&f, expected)?;
        self.check_len(&f.path, s, min, max, expected)
            .then_some(Some(s))
    }

    /// A string that must equal `want` exactly.
    pub(crate) fn exact(&mut self, f: Field<'_, '_>, want: &str) -> Option<()> {
        let expected = || format!("\"{want}\"");
        let s = self.str_value(&f, expected)?;
        if s == want {
            Some(())
        } else {
            self.fail(&f.path, "wrong schema", expected(), quote_preview(s));
            None
        }
    }

    /// A string that is one of `options`: found inline, anything else out of line.
    #[inline(always)]
    pub(crate) fn one_of<'v>(&mut self, f: Field<'_, 'v>, options: &[&str]) -> Option<&'v str> {
        if let Some(s) = f.value.and_then(|v| v.as_str()) {
            if options.iter().any(|o| short_eq(o.as_bytes(), s.as_bytes())) {
                return Some(s);
            }
        }
        self.one_of_slow(f, options)
    }

    #[inline(never)]
    fn one_of_slow<'v>(&mut self, f: Field<'_, 'v>, options: &[&str]) -> Option<&'v str> {
        let expected = || format!("one of {}", options.join(", "));
        let s = self.str_value(&f, expected)?;
        if options.contains(&s) {
            Some(s)
        } else {
            self.fail(&f.path, "unknown value", expected(), quote_preview(s));
            None
        }
    }

    /// `engine_id`: 1–128 chars of `[A-Za-z0-9._:/-]`.
    pub(crate) fn engine_id(&mut self, f: Field<'_, '_>) -> Option<EngineId> {
        let expected = || EngineId::EXPECTED.to_owned();
        let s = self.str_value(&f, expected)?;
        self.engine_id_str(&f.path, s)
            .then(|| EngineId(s.to_owned()))
    }

    /// The `engine_id` rule on a string already read (a descriptor's, or a
    /// report's: docs/format.md §10.2): true when it holds.
    pub(crate) fn engine_id_str(&mut self, path: &Path<'_>, s: &str) -> bool {
        let expected = || EngineId::EXPECTED.to_owned();
        if !self.check_len(path, s, EngineId::MIN_CHARS, EngineId::MAX_CHARS, expected) {
            return false;
        }
        if let Some((i, c)) = EngineId::first_bad(s) {
            self.fail(
                path,
                format!("invalid character {c:?} at byte {i}"),
                expected(),
                quote_preview(s),
            );
            return false;
        }
        true
    }

    /// A string's length rule on a string already read.
    pub(crate) fn string_str(&mut self, path: &Path<'_>, s: &str, min: usize, max: usize) -> bool {
        self.check_len(path, s, min, max, || format!("string of {min}–{max} chars"))
    }

    /// An integer's range rule on an integer already read.
    pub(crate) fn uint_value(&mut self, path: &Path<'_>, v: u64, lo: u64, hi: u64) -> bool {
        if (lo..=hi).contains(&v) {
            return true;
        }
        self.fail(
            path,
            "out of range",
            format!("integer {lo}..={hi}"),
            v.to_string(),
        );
        false
    }

    /// A canonical lowercase hyphenated UUID, not nil.
    pub(crate) fn uuid(&mut self, f: Field<'_, '_>) -> Option<Uuid> {
        let expected = || "canonical lowercase hyphenated UUID, not nil".to_owned();
        let s = self.str_value(&f, expected)?;
        self.uuid_str(&f.path, s)
    }

    /// The UUID rule on a string already read.
    pub(crate) fn uuid_str(&mut self, path: &Path<'_>, s: &str) -> Option<Uuid> {
        let expected = || "canonical lowercase hyphenated UUID, not nil".to_owned();
        match parse_canonical_uuid(s) {
            Some(u) if !u.is_nil() => Some(u),
            Some(_) => {
                self.fail(path, "nil UUID", expected(), quote_preview(s));
                None
            }
            None => {
                let problem = uuid_problem(s);
                self.fail(path, problem, expected(), quote_preview(s));
                None
            }
        }
    }

    /// `GPU-<uuid>` or `MIG-<uuid>`.
    pub(crate) fn gpu_uuid(&mut self, f: Field<'_, '_>) -> Option<GpuUuid> {
        let expected = || "\"GPU-\" or \"MIG-\" + canonical lowercase UUID, not nil".to_owned();
        let s = self.str_value(&f, expected)?;
        self.gpu_uuid_str(&f.path, s)
    }

    /// The GPU UUID rule on a string already read.
    pub(crate) fn gpu_uuid_str(&mut self, path: &Path<'_>, s: &str) -> Option<GpuUuid> {
        let expected = || "\"GPU-\" or \"MIG-\" + canonical lowercase UUID, not nil".to_owned();
        if let Some(g) = GpuUuid::parse(s) {
            return Some(g);
        }
        let problem = match s.strip_prefix("GPU-").or_else(|| s.strip_prefix("MIG-")) {
            None => "missing GPU- or MIG- prefix",
            Some(rest) => match parse_canonical_uuid(rest) {
                Some(_) => "nil UUID",
                None => uuid_problem(rest),
            },
        };
        self.fail(path, problem, expected(), quote_preview(s));
        None
    }

    /// `sha256:` + 64 lowercase hex.
    pub(crate) fn digest(&mut self, f: Field<'_, '_>) -> Option<[u8; 32]> {
        let expected = || "\"sha256:\" + 64 lowercase hex digits".to_owned();
        let s = self.str_value(&f, expected)?;
        let d = parse_digest(s);
        if d.is_none() {
            self.fail(&f.path, "malformed digest", expected(), quote_preview(s));
        }
        d
    }

    /// 128 hex digits (either case) → the 64 bytes of `out` (decoded in
    /// place: a handle is not copied on its way to the summary).
    pub(crate) fn hex64(&mut self, f: Field<'_, '_>, out: &mut [u8; 64]) -> Option<()> {
        let expected = || "128 hex chars (64 bytes)".to_owned();
        let s = self.str_value(&f, expected)?;
        if crate::format::hex::decode(s.as_bytes(), out, true) {
            return Some(());
        }
        let problem = match s.chars().find(|c| !c.is_ascii_hexdigit()) {
            Some(c) if s.len() == 128 => format!("non-hex character {c:?}"),
            _ => format!("wrong length ({} chars)", s.chars().count()),
        };
        self.fail(&f.path, problem, expected(), quote_preview(s));
        None
    }
}

/// Whether the byte length alone proves `s` has `min..=max` characters: a
/// string of n bytes has between ceil(n/4) and n characters.
#[inline(always)]
fn len_surely_in(s: &str, min: usize, max: usize) -> bool {
    s.len() <= max && s.len() >= min.saturating_mul(4)
}

fn uuid_problem(s: &str) -> &'static str {
    if parse_canonical_uuid(&s.to_ascii_lowercase()).is_some() {
        "uppercase UUID (must be lowercase)"
    } else {
        "not a canonical hyphenated UUID"
    }
}
