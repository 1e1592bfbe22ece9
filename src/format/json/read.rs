//! A strict, depth-bounded JSON reader (RFC 8259 and nothing more).
//!
//! It refuses what a lenient parser would let through and a descriptor must
//! never contain: a byte order mark, invalid UTF-8, duplicate keys within one
//! object, trailing data after the top-level value, nesting deeper than
//! [`MAX_DEPTH`], invalid escapes, lone surrogates and raw control characters
//! in strings. Every error carries the byte offset where it was detected.
//!
//! The result is a [`Doc`]: one flat list of nodes in document order (each
//! container followed by its descendants, each node knowing where its next
//! sibling starts), so reading a document allocates that list and nothing
//! per value. Strings without escapes and number literals are byte ranges
//! of the input; strings with escapes are decoded once into one side
//! buffer. A [`Value`] is a cheap, copyable handle on one node.
//!
//! Recursion is bounded by [`MAX_DEPTH`] (a container opened at depth 33 is an
//! error before anything inside it is read), so hostile input such as 200,000
//! nested `[` cannot overflow the stack. Code that walks a [`Value`]
//! recursively relies on this bound.
//!
//! # Why a hand-written reader, beside serde_json
//!
//! serde_json (a dependency, used for everything kvcr *writes*) cannot do
//! what reading a descriptor needs, all from one parse:
//!
//! - **Duplicate keys are found.** serde_json keeps the last of two equal
//!   keys without a word; a descriptor with two `"rank"` members would be
//!   judged by one and hashed with both. Here a duplicate (compared after
//!   decoding escapes, so `"k"` and `"\u006b"` are one key) is an error.
//! - **Number literals are kept as written.** The docs/format.md §3.2
//!   digest is computed over the canonical form, which writes each number
//!   as its literal; serde_json would turn `1.0`, `1e2` or a 40-digit integer
//!   into an `f64` first, or refuse one beyond `f64` as unreadable JSON
//!   where the field checks here judge its range (KV007) from the literal.
//! - **Errors carry byte offsets** into the file, and the messages name what
//!   is wrong in the file's own terms (KV006 findings quote them).
//! - **One parse serves the digest and the checks**: [`crate::format::descriptor::canon`] hashes
//!   the same node list the field checks read, so the bytes judged are the
//!   bytes hashed, with no second reader that might disagree.
//! - The depth bound is [`MAX_DEPTH`] (32, the format's), not serde_json's
//!   128, and reading allocates one node list instead of a tree of maps.
//!
//! Where both accept, they must read the same tree; the hand reader may
//! refuse what serde_json accepts only for a duplicate key or depth. The
//! differential oracle `tests/it/report/json_oracle.rs` checks this (property
//! tests under `cargo test`, and the `json` fuzz target in fuzz/).

/// Deepest allowed nesting of arrays/objects (the top-level object is depth 1).
pub const MAX_DEPTH: usize = 32;
use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashSet;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tag {
    Null,
    True,
    False,
    /// A number literal without fraction or exponent.
    Int,
    /// A number literal with a fraction or an exponent.
    Float,
    Str,
    Arr,
    Obj,
}

/// A byte range, of the input or (when escaped) of [`Doc::decoded`].
pub(crate) type Span = (u32, u32);

/// One value of the document.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Node {
    pub(crate) tag: Tag,
    /// The member key is held decoded (it was written with escapes).
    pub(crate) key_esc: bool,
    /// The string is held decoded (it was written with escapes).
    pub(crate) text_esc: bool,
    /// Number of children (arrays and objects).
    pub(crate) len: u32,
    /// Index one past this node's last descendant: its next sibling.
    pub(crate) end: u32,
    /// The member key (objects' children only), without quotes.
    pub(crate) key: Span,
    /// String content (without quotes) or number literal.
    pub(crate) text: Span,
}

/// A parsed JSON document: its nodes in document order; node 0 is the
/// top-level value.
#[derive(Clone, Debug)]
pub struct Doc<'a> {
    pub(crate) src: &'a str,
    pub(crate) nodes: Vec<Node>,
    /// Decoded contents of the strings and keys that had escapes.
    pub(crate) decoded: String,
}

thread_local! {
    /// The node list of the last document this thread dropped, for its next
    /// parse: a descriptor's list (2-10 KB) is above the allocator's
    /// per-thread cache, so a fresh one cost 1,100-1,900 instructions of
    /// `malloc` per parse (docs/bench.md, "Issue #39, fifth round").
    static SPARE: Cell<Vec<Node>> = const { Cell::new(Vec::new()) };
}

/// The largest node list a thread keeps between parses: 64 KiB, a
/// pretty-printed document of about 36 KB. A larger one is freed, so an
/// engine's thread that once read a large file does not hold it.
const SPARE_MAX_BYTES: usize = 64 << 10;

/// An empty node list with room for `capacity` nodes: the thread's spare
/// when it has one.
fn node_list(capacity: usize) -> Vec<Node> {
    let mut nodes = SPARE.try_with(Cell::take).unwrap_or_default();
    nodes.clear();
    nodes.reserve(capacity);
    nodes
}

impl Drop for Doc<'_> {
    fn drop(&mut self) {
        if self.nodes.capacity() * std::mem::size_of::<Node>() <= SPARE_MAX_BYTES {
            let nodes = std::mem::take(&mut self.nodes);
            // During the thread's exit the slot is gone: the list is freed.
            let _ = SPARE.try_with(|s| s.set(nodes));
        }
    }
}

impl<'a> Doc<'a> {
    /// The top-level value.
    #[inline]
    pub fn root(&self) -> Value<'_> {
        Value { doc: self, at: 0 }
    }

    /// A string or key: raw input, or decoded when it had escapes.
    #[inline]
    pub(crate) fn text(&self, (a, b): Span, esc: bool) -> &str {
        if esc {
            &self.decoded[a as usize..b as usize]
        } else {
            &self.src[a as usize..b as usize]
        }
    }

    /// The key of member node `i`, as bytes (no char-boundary checks).
    #[inline]
    pub(crate) fn key_bytes(&self, i: usize) -> &[u8] {
        let n = &self.nodes[i];
        let (a, b) = (n.key.0 as usize, n.key.1 as usize);
        if n.key_esc {
            &self.decoded.as_bytes()[a..b]
        } else {
            &self.src.as_bytes()[a..b]
        }
    }

    /// Whether the key of member node `i` is `want`: the lengths first
    /// (most keys differ there), no char-boundary checks.
    #[inline]
    pub(crate) fn key_is(&self, i: usize, want: &[u8]) -> bool {
        let n = &self.nodes[i];
        (n.key.1 - n.key.0) as usize == want.len() && self.key_bytes(i) == want
    }

    #[inline]
    pub(crate) fn key_of(&self, i: usize) -> &str {
        let n = &self.nodes[i];
        self.text(n.key, n.key_esc)
    }
}

/// Byte equality without a `memcmp` call for the short keys of a schema:
/// up to 16 bytes it compares two overlapping words from each end.
#[inline(always)]
pub(crate) fn short_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    fn w4(x: &[u8], at: usize) -> u32 {
        u32::from_le_bytes([x[at], x[at + 1], x[at + 2], x[at + 3]])
    }
    fn w8(x: &[u8], at: usize) -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&x[at..at + 8]);
        u64::from_le_bytes(w)
    }
    match n {
        0 => true,
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=8 => w4(a, 0) == w4(b, 0) && w4(a, n - 4) == w4(b, n - 4),
        9..=16 => w8(a, 0) == w8(b, 0) && w8(a, n - 8) == w8(b, n - 8),
        _ => a == b,
    }
}

/// One value of a [`Doc`] (a handle: copying it copies two words).
#[derive(Clone, Copy)]
pub struct Value<'d> {
    doc: &'d Doc<'d>,
    at: u32,
}

/// What a [`Value`] is, with its contents.
#[derive(Clone, Copy, Debug)]
pub enum View<'d> {
    Null,
    Bool(bool),
    Number(Number<'d>),
    String(&'d str),
    Array(Items<'d>),
    Object(Members<'d>),
}

/// A number, kept as its literal text plus what kind of number it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Number<'a> {
    /// The literal exactly as written (valid JSON number syntax).
    pub text: &'a str,
    pub kind: NumKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumKind {
    /// An integer literal (no fraction, no exponent) that fits an `i128`.
    Int(i128),
    /// An integer literal too large for an `i128`.
    BigInt,
    /// A literal with a fraction or an exponent (`1.0`, `1e3`).
    Float,
}

impl Number<'_> {
    pub fn is_integer(&self) -> bool {
        !matches!(self.kind, NumKind::Float)
    }
}

/// The kind of an integer literal (valid JSON syntax, no fraction or exponent).
#[inline]
fn int_kind(text: &str) -> NumKind {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, text),
    };
    // 38 decimal digits always fit an i128 (max ≈ 1.7e38).
    if digits.len() > 38 {
        return NumKind::BigInt;
    }
    let mut v: i128 = 0;
    for d in digits.bytes() {
        v = v * 10 + i128::from(d - b'0');
    }
    NumKind::Int(if negative { -v } else { v })
}

impl<'d> Value<'d> {
    #[inline]
    fn node(&self) -> &'d Node {
        &self.doc.nodes[self.at as usize]
    }

    /// What this value is.
    #[inline]
    pub fn view(&self) -> View<'d> {
        let n = self.node();
        let (doc, at) = (self.doc, self.at);
        match n.tag {
            Tag::Null => View::Null,
            Tag::True => View::Bool(true),
            Tag::False => View::Bool(false),
            Tag::Int => {
                let text = doc.text(n.text, false);
                View::Number(Number {
                    text,
                    kind: int_kind(text),
                })
            }
            Tag::Float => View::Number(Number {
                text: doc.text(n.text, false),
                kind: NumKind::Float,
            }),
            Tag::Str => View::String(doc.text(n.text, n.text_esc)),
            Tag::Arr => View::Array(Items { doc, at }),
            Tag::Obj => View::Object(Members { doc, at }),
        }
    }

    /// The JSON type name (`null`, `boolean`, `integer`, `float`, `string`,
    /// `array`, `object`), for error messages.
    #[inline]
    pub fn type_name(&self) -> &'static str {
        match self.node().tag {
            Tag::Null => "null",
            Tag::True | Tag::False => "boolean",
            Tag::Int => "integer",
            Tag::Float => "float",
            Tag::Str => "string",
            Tag::Arr => "array",
            Tag::Obj => "object",
        }
    }

    #[inline]
    pub fn is_null(&self) -> bool {
        self.node().tag == Tag::Null
    }

    #[inline]
    pub fn as_bool(&self) -> Option<bool> {
        match self.node().tag {
            Tag::True => Some(true),
            Tag::False => Some(false),
            _ => None,
        }
    }

    /// An integer literal without sign of at most 19 digits (always < 10^19,
    /// so it fits a u64), read without going through [`NumKind`].
    #[inline]
    pub fn as_small_uint(&self) -> Option<u64> {
        let n = self.node();
        let digits = self
            .doc
            .src
            .as_bytes()
            .get(n.text.0 as usize..n.text.1 as usize)?;
        if n.tag != Tag::Int || digits.len() > 19 || digits.first() == Some(&b'-') {
            return None;
        }
        Some(
            digits
                .iter()
                .fold(0u64, |v, &d| v * 10 + u64::from(d - b'0')),
        )
    }

    #[inline]
    pub fn as_str(&self) -> Option<&'d str> {
        let n = self.node();
        (n.tag == Tag::Str).then(|| self.doc.text(n.text, n.text_esc))
    }

    #[inline]
    pub fn as_array(&self) -> Option<Items<'d>> {
        (self.node().tag == Tag::Arr).then_some(Items {
            doc: self.doc,
            at: self.at,
        })
    }

    #[inline]
    pub fn as_object(&self) -> Option<Members<'d>> {
        (self.node().tag == Tag::Obj).then_some(Members {
            doc: self.doc,
            at: self.at,
        })
    }

    /// The member `key` of an object (`None` for non-objects).
    #[inline]
    pub fn get(&self, key: &str) -> Option<Value<'d>> {
        self.as_object()?.get(key)
    }

    /// The index of this value's node in its document.
    #[inline]
    pub(crate) fn index(&self) -> usize {
        self.at as usize
    }
}

impl fmt::Debug for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&preview(*self))
    }
}

/// The children of a container, in document order.
#[derive(Clone)]
pub struct Children<'d> {
    doc: &'d Doc<'d>,
    next: u32,
    left: u32,
}

impl<'d> Iterator for Children<'d> {
    type Item = Value<'d>;
    #[inline]
    fn next(&mut self) -> Option<Value<'d>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let at = self.next;
        self.next = self.doc.nodes[at as usize].end;
        Some(Value { doc: self.doc, at })
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl ExactSizeIterator for Children<'_> {}

#[inline]
fn children<'d>(doc: &'d Doc<'d>, at: u32) -> Children<'d> {
    Children {
        doc,
        next: at + 1,
        left: doc.nodes[at as usize].len,
    }
}

/// The items of an array.
#[derive(Clone, Copy)]
pub struct Items<'d> {
    doc: &'d Doc<'d>,
    at: u32,
}

impl<'d> Items<'d> {
    #[inline]
    pub fn len(&self) -> usize {
        self.doc.nodes[self.at as usize].len as usize
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    #[inline]
    pub fn iter(&self) -> Children<'d> {
        children(self.doc, self.at)
    }
    /// The array itself.
    #[inline]
    pub fn value(&self) -> Value<'d> {
        Value {
            doc: self.doc,
            at: self.at,
        }
    }
}

impl fmt::Debug for Items<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value().fmt(f)
    }
}

/// The members of an object, in the order they were written; keys are unique.
#[derive(Clone, Copy)]
pub struct Members<'d> {
    doc: &'d Doc<'d>,
    at: u32,
}

impl<'d> Members<'d> {
    #[inline]
    pub fn len(&self) -> usize {
        self.doc.nodes[self.at as usize].len as usize
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// `(key, value)` pairs in file order.
    #[inline]
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&'d str, Value<'d>)> + 'd {
        let doc = self.doc;
        children(doc, self.at).map(move |v| (doc.key_of(v.index()), v))
    }
    /// The values, in file order (each knows its key: [`Members::key`]).
    #[inline]
    pub fn values(&self) -> Children<'d> {
        children(self.doc, self.at)
    }
    /// The key of member `v` (a value from [`Members::values`]).
    #[inline]
    pub fn key(&self, v: Value<'d>) -> &'d str {
        self.doc.key_of(v.index())
    }
    /// Whether member `v`'s key is `want` ([`Doc::key_is`]).
    #[inline]
    pub(crate) fn key_is(&self, v: Value<'d>, want: &str) -> bool {
        self.doc.key_is(v.index(), want.as_bytes())
    }
    #[inline]
    pub fn get(&self, key: &str) -> Option<Value<'d>> {
        let doc = self.doc;
        self.values().find(|v| doc.key_of(v.index()) == key)
    }
    /// Calls `unknown` with each member whose key is not in `known`, in
    /// file order: one pass over the node list with the nodes and the
    /// source held in locals. Members mostly come in the order of `known`,
    /// so the next known key is tried first.
    #[inline]
    pub(crate) fn each_unknown(&self, known: &[&str], mut unknown: impl FnMut(Value<'d>)) {
        let doc = self.doc;
        let nodes = &doc.nodes[..];
        let (src, dec) = (doc.src.as_bytes(), doc.decoded.as_bytes());
        let Some(obj) = nodes.get(self.at as usize) else {
            return;
        };
        let mut at = self.at + 1;
        let mut next = 0;
        for _ in 0..obj.len {
            let Some(n) = nodes.get(at as usize) else {
                return;
            };
            let span = n.key.0 as usize..n.key.1 as usize;
            let key = if n.key_esc { &dec[span] } else { &src[span] };
            if known.get(next).is_some_and(|k| short_eq(k.as_bytes(), key)) {
                next += 1;
            } else if let Some(p) = known.iter().position(|k| short_eq(k.as_bytes(), key)) {
                next = p + 1;
            } else {
                unknown(Value { doc, at });
            }
            at = n.end;
        }
    }
    /// The object itself.
    #[inline]
    pub fn value(&self) -> Value<'d> {
        Value {
            doc: self.doc,
            at: self.at,
        }
    }
    /// The member whose node is `index` (from [`Value::index`]).
    #[inline]
    pub(crate) fn at(&self, index: u32) -> Value<'d> {
        Value {
            doc: self.doc,
            at: index,
        }
    }
    /// The node index of the member after `v` (one of these members).
    #[inline]
    pub(crate) fn next_sibling(&self, v: Value<'d>) -> u32 {
        self.doc.nodes[v.index()].end
    }
}

impl fmt::Debug for Members<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value().fmt(f)
    }
}

/// Why the input is not acceptable JSON.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonError {
    /// Byte offset into the input where the problem was detected.
    pub offset: usize,
    /// What is wrong, e.g. `duplicate key "rank"`.
    pub what: String,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.what, self.offset)
    }
}

impl std::error::Error for JsonError {}

fn err<T>(offset: usize, what: impl Into<String>) -> Result<T, JsonError> {
    Err(JsonError {
        offset,
        what: what.into(),
    })
}

/// Objects with at least this many members check duplicates with a hash set
/// instead of a linear scan (which would be quadratic on hostile input).
const HASHED_DUP_CHECK: usize = 32;

/// Bytes that end a run of plain string content: `"`, `\` and control
/// characters (exactly the bytes the canonical form escapes, too).
static STRING_STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// The special bytes of the word `x` (eight input bytes, little-endian):
/// the high bit of each byte that is `"`, `\` or below 0x20 is set, and
/// perhaps of bytes above such a byte, never below the first one.
///
/// Per byte, `v - 0x01` (or `x - 0x20`) borrows exactly where `v` is 0 (`x`
/// is below 0x20), and a borrow can only flag the bytes above it. The
/// three tests share one mask of the bytes below 0x80: `x ^ '"'` and
/// `x ^ '\'` have the high bit of `x` (both constants are ASCII), so the
/// usual `& !v` of each is the same `& !x`, and a byte of 0x80 or more is
/// never flagged.
#[inline(always)]
fn special_bits(x: u64) -> u64 {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    ((x ^ (LO * u64::from(b'"'))).wrapping_sub(LO)
        | (x ^ (LO * u64::from(b'\\'))).wrapping_sub(LO)
        | x.wrapping_sub(LO * 0x20))
        & !x
        & HI
}

/// The eight bytes at `at` of `b` as a little-endian word.
#[inline(always)]
fn word(b: &[u8; 16], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// Index of the first byte at or after `i` that is `"`, `\` or below 0x20
/// (`b.len()` if there is none). Scans sixteen bytes (two words, one bounds
/// check) at a time.
#[inline]
pub(crate) fn find_special(b: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = b.get(i..).and_then(<[u8]>::first_chunk::<16>) {
        let lo = special_bits(word(chunk, 0));
        if lo != 0 {
            return i + (lo.trailing_zeros() / 8) as usize;
        }
        let hi = special_bits(word(chunk, 8));
        if hi != 0 {
            return i + 8 + (hi.trailing_zeros() / 8) as usize;
        }
        i += 16;
    }
    while i < b.len() {
        if STRING_STOP[b[i] as usize] {
            return i;
        }
        i += 1;
    }
    b.len()
}

/// Parses `bytes` as exactly one strict JSON value.
pub fn parse(bytes: &[u8]) -> Result<Doc<'_>, JsonError> {
    if bytes.is_empty() {
        return err(0, "empty file");
    }
    if bytes.starts_with(&[0xEF, 0xBB, 0xBF]) {
        return err(0, "UTF-8 byte order mark (not allowed)");
    }
    if bytes.starts_with(&[0xFE, 0xFF]) || bytes.starts_with(&[0xFF, 0xFE]) {
        return err(0, "UTF-16 byte order mark (the file must be UTF-8)");
    }
    let src = match std::str::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => return err(e.valid_up_to(), "invalid UTF-8"),
    };
    if u32::try_from(bytes.len()).is_err() {
        return err(0, "input larger than 4 GiB");
    }
    let mut p = Parser {
        src,
        b: bytes,
        pos: 0,
        // About one node per 16 bytes in a pretty-printed descriptor.
        nodes: node_list(bytes.len() / 16 + 4),
        decoded: String::new(),
    };
    p.skip_ws();
    if p.pos == bytes.len() {
        return err(p.pos, "no JSON value (only whitespace)");
    }
    p.value(1, NO_KEY)?;
    p.skip_ws();
    if p.pos != bytes.len() {
        return err(p.pos, "trailing data after the top-level value");
    }
    Ok(Doc {
        src,
        nodes: p.nodes,
        decoded: p.decoded,
    })
}

/// A member key: its span packed into one word (`start | end << 32`: one
/// store and one load, never two halves) and whether it had escapes.
type Key = (u64, bool);
const NO_KEY: Key = (0, false);

#[inline]
fn pack(start: usize, end: usize) -> u64 {
    start as u64 | (end as u64) << 32
}

#[inline]
fn unpack(k: u64) -> Span {
    (k as u32, (k >> 32) as u32)
}

struct Parser<'a> {
    src: &'a str,
    b: &'a [u8],
    pos: usize,
    nodes: Vec<Node>,
    decoded: String,
}

impl<'a> Parser<'a> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    #[inline]
    fn skip_ws(&mut self) {
        // Indentation first, eight bytes at a time.
        const SPACES: u64 = u64::from_le_bytes([b' '; 8]);
        if self.peek() == Some(b'\n') {
            self.pos += 1;
            while let Some(w) = self.b.get(self.pos..self.pos + 8) {
                let w = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
                // The number of leading spaces of the word.
                let n = ((w ^ SPACES).trailing_zeros() / 8) as usize;
                self.pos += n;
                if n < 8 {
                    break;
                }
            }
        }
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// The next byte that is not whitespace: one comparison when there is
    /// none to skip (after a key, a value: pretty printers write `": "`
    /// and `,` straight after).
    #[inline(always)]
    fn peek_past_ws(&mut self) -> Option<u8> {
        match self.peek() {
            Some(b' ' | b'\t' | b'\n' | b'\r') => {
                self.skip_ws();
                self.peek()
            }
            c => c,
        }
    }

    /// A member's value or an array's item, whitespace before it skipped:
    /// strings and numbers read here, without a call; the rest by
    /// [`Parser::value`].
    #[inline(always)]
    fn member(&mut self, depth: usize, key: Key) -> Result<(), JsonError> {
        match self.peek_past_ws() {
            Some(b'"') => {
                let (text, esc) = self.string()?;
                self.push(Tag::Str, key, unpack(text), esc);
                Ok(())
            }
            Some(b'-' | b'0'..=b'9') => self.number(key),
            _ => self.value(depth, key),
        }
    }

    #[inline]
    fn push(&mut self, tag: Tag, (key, key_esc): Key, text: Span, text_esc: bool) -> usize {
        let key = unpack(key);
        let at = self.nodes.len();
        self.nodes.push(Node {
            tag,
            key_esc,
            text_esc,
            len: 0,
            end: at as u32 + 1,
            key,
            text,
        });
        at
    }

    /// Closes container `at`, which has `len` children.
    fn close(&mut self, at: usize, len: u32) {
        let end = self.nodes.len() as u32;
        let n = &mut self.nodes[at];
        n.len = len;
        n.end = end;
    }

    #[inline]
    fn key_str(&self, (key, esc): Key) -> &str {
        self.str_at(unpack(key), esc)
    }

    /// [`Parser::key_str`] as bytes, without the `str` char-boundary checks.
    #[inline]
    fn key_bytes(&self, (key, esc): Key) -> &[u8] {
        self.bytes_at(unpack(key), esc)
    }

    /// [`Parser::str_at`] as bytes, without the `str` char-boundary checks.
    #[inline]
    fn bytes_at(&self, (a, b): Span, esc: bool) -> &[u8] {
        let (a, b) = (a as usize, b as usize);
        if esc {
            &self.decoded.as_bytes()[a..b]
        } else {
            &self.b[a..b]
        }
    }

    #[inline]
    fn str_at(&self, (a, b): Span, esc: bool) -> &str {
        let (a, b) = (a as usize, b as usize);
        if esc {
            &self.decoded[a..b]
        } else {
            &self.src[a..b]
        }
    }

    /// Describes the character at the current position for an error message.
    fn unexpected<T>(&self, wanted: &str) -> Result<T, JsonError> {
        match self.src.get(self.pos..).and_then(|s| s.chars().next()) {
            None => err(
                self.pos,
                format!("unexpected end of input, expected {wanted}"),
            ),
            Some(c) => err(
                self.pos,
                format!(
                    "unexpected character {}, expected {wanted}",
                    describe_char(c)
                ),
            ),
        }
    }

    /// `depth` is the depth a container starting here would have.
    fn value(&mut self, depth: usize, key: Key) -> Result<(), JsonError> {
        match self.peek() {
            Some(b'{') => {
                self.check_depth(depth)?;
                self.object(depth, key)
            }
            Some(b'[') => {
                self.check_depth(depth)?;
                self.array(depth, key)
            }
            Some(b'"') => {
                let (text, esc) = self.string()?;
                self.push(Tag::Str, key, unpack(text), esc);
                Ok(())
            }
            Some(b'-' | b'0'..=b'9') => self.number(key),
            Some(b't') => self.literal("true", Tag::True, key),
            Some(b'f') => self.literal("false", Tag::False, key),
            Some(b'n') => self.literal("null", Tag::Null, key),
            _ => self.unexpected("a JSON value"),
        }
    }

    fn check_depth(&self, depth: usize) -> Result<(), JsonError> {
        if depth > MAX_DEPTH {
            return err(self.pos, format!("nesting deeper than {MAX_DEPTH} levels"));
        }
        Ok(())
    }

    fn literal(&mut self, word: &'static str, tag: Tag, key: Key) -> Result<(), JsonError> {
        if self.b[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            self.push(tag, key, (0, 0), false);
            Ok(())
        } else {
            self.unexpected("a JSON value")
        }
    }

    fn array(&mut self, depth: usize, key: Key) -> Result<(), JsonError> {
        let at = self.push(Tag::Arr, key, (0, 0), false);
        self.pos += 1; // '['
        let mut len = 0u32;
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.skip_ws();
            if self.peek() == Some(b']') {
                return err(self.pos, "trailing comma in array");
            }
            self.member(depth + 1, NO_KEY)?;
            len += 1;
            match self.peek_past_ws() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    self.close(at, len);
                    return Ok(());
                }
                _ => return self.unexpected("',' or ']'"),
            }
        }
    }

    /// Whether `key` is already the key of a member of object `at` (its
    /// members so far are the nodes after it).
    fn has_key(&self, at: usize, key: Key) -> bool {
        let want = self.key_bytes(key);
        let len = want.len() as u32;
        let mut c = at + 1;
        while c < self.nodes.len() {
            let n = &self.nodes[c];
            // Keys of another length (most of them) are not read at all.
            if n.key.1 - n.key.0 == len && self.bytes_at(n.key, n.key_esc) == want {
                return true;
            }
            c = n.end as usize;
        }
        false
    }

    fn key_cow(&self, (a, b): Span, esc: bool) -> Cow<'a, str> {
        if esc {
            Cow::Owned(self.str_at((a, b), true).to_owned())
        } else {
            Cow::Borrowed(&self.src[a as usize..b as usize])
        }
    }

    fn object(&mut self, depth: usize, key: Key) -> Result<(), JsonError> {
        let at = self.push(Tag::Obj, key, (0, 0), false);
        self.pos += 1; // '{'
        let mut len = 0u32;
        let mut seen: Option<HashSet<Cow<'a, str>>> = None;
        let mut bloom = 0u64;
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.skip_ws();
            match self.peek() {
                Some(b'"') => {}
                Some(b'}') => return err(self.pos, "trailing comma in object"),
                _ => return self.unexpected("a string key"),
            }
            let key_at = self.pos;
            let k = self.string()?;
            let dup = match &mut seen {
                Some(set) => {
                    let cow = self.key_cow(unpack(k.0), k.1);
                    !set.insert(cow)
                }
                None => {
                    // A key whose (length, first, last byte) no earlier key
                    // of this object had cannot be a duplicate: most keys
                    // skip the scan.
                    let kb = self.key_bytes(k);
                    let h = kb.len()
                        ^ usize::from(kb.first().copied().unwrap_or(0)) << 1
                        ^ usize::from(kb.last().copied().unwrap_or(0)) << 3;
                    let bit = 1u64 << (h % 64);
                    let maybe = bloom & bit != 0;
                    bloom |= bit;
                    let dup = maybe && self.has_key(at, k);
                    if !dup && len as usize + 1 >= HASHED_DUP_CHECK {
                        let mut set: HashSet<Cow<'a, str>> = HashSet::new();
                        let mut c = at + 1;
                        while c < self.nodes.len() {
                            let n = self.nodes[c];
                            set.insert(self.key_cow(n.key, n.key_esc));
                            c = n.end as usize;
                        }
                        set.insert(self.key_cow(unpack(k.0), k.1));
                        seen = Some(set);
                    }
                    dup
                }
            };
            if dup {
                return err(
                    key_at,
                    format!("duplicate key {}", quote_preview(self.key_str(k))),
                );
            }
            if self.peek_past_ws() != Some(b':') {
                return self.unexpected("':'");
            }
            self.pos += 1;
            self.member(depth + 1, k)?;
            len += 1;
            match self.peek_past_ws() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    self.close(at, len);
                    return Ok(());
                }
                _ => return self.unexpected("',' or '}'"),
            }
        }
    }

    /// Reads a string starting at the opening quote: its content as a span
    /// of the input, or (when it has escapes) of the decoded buffer.
    #[inline(always)]
    fn string(&mut self) -> Result<Key, JsonError> {
        let start = self.pos + 1;
        // Fast path (inlined): no escapes.
        let i = find_special(self.b, start);
        if self.b.get(i) == Some(&b'"') {
            self.pos = i + 1;
            return Ok((pack(start, i), false));
        }
        self.string_slow(i)
    }

    /// A string whose first special byte, at `i`, is not its closing quote.
    #[inline(never)]
    fn string_slow(&mut self, mut i: usize) -> Result<Key, JsonError> {
        let open = self.pos;
        let start = open + 1;
        match self.b.get(i) {
            None => {
                return err(
                    self.b.len(),
                    format!("unterminated string (opened at byte {open})"),
                )
            }
            Some(b'\\') => {}
            Some(&c) => return err(i, control_char_error(c)),
        }
        // Slow path: decode escapes into the side buffer.
        let from = self.decoded.len();
        let out = &mut self.decoded;
        out.push_str(&self.src[start..i]);
        loop {
            // self.b[i] is '\\' or the start of a raw run.
            let Some(&c) = self.b.get(i) else {
                return err(
                    self.b.len(),
                    format!("unterminated string (opened at byte {open})"),
                );
            };
            match c {
                b'"' => {
                    self.pos = i + 1;
                    return Ok((pack(from, out.len()), true));
                }
                b'\\' => {
                    i = escape(self.src, i, out)?;
                }
                c if c < 0x20 => return err(i, control_char_error(c)),
                _ => {
                    let run = i;
                    i = find_special(self.b, i);
                    out.push_str(&self.src[run..i]);
                }
            }
        }
    }

    fn digits(&mut self) -> usize {
        let s = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - s
    }

    fn number(&mut self, key: Key) -> Result<(), JsonError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if let Some(b'0'..=b'9') = self.peek() {
                    return err(start, "leading zero in number");
                }
            }
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return err(start, "invalid number"),
        }
        let mut tag = Tag::Int;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return err(start, "invalid number (no digits after '.')");
            }
            tag = Tag::Float;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return err(start, "invalid number (no digits in exponent)");
            }
            tag = Tag::Float;
        }
        self.push(tag, key, (start as u32, self.pos as u32), false);
        Ok(())
    }
}

/// Decodes the escape at `at` (a backslash) of `src`; returns the offset after it.
fn escape(src: &str, at: usize, out: &mut String) -> Result<usize, JsonError> {
    let b = src.as_bytes();
    let Some(&e) = b.get(at + 1) else {
        return err(at, "unterminated escape");
    };
    let ch = match e {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => {
            let hi = hex4(b, at)?;
            if (0xDC00..=0xDFFF).contains(&hi) {
                return err(at, format!("lone low surrogate \\u{hi:04x} in string"));
            }
            if (0xD800..=0xDBFF).contains(&hi) {
                let next = at + 6;
                if b.get(next) != Some(&b'\\') || b.get(next + 1) != Some(&b'u') {
                    return err(at, format!("lone high surrogate \\u{hi:04x} in string"));
                }
                let lo = hex4(b, next)?;
                if !(0xDC00..=0xDFFF).contains(&lo) {
                    return err(at, format!("lone high surrogate \\u{hi:04x} in string"));
                }
                let cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                // Always valid: 0x10000..=0x10FFFF.
                out.push(char::from_u32(cp).unwrap_or('\u{FFFD}'));
                return Ok(at + 12);
            }
            out.push(char::from_u32(hi).unwrap_or('\u{FFFD}'));
            return Ok(at + 6);
        }
        _ => {
            let shown = src
                .get(at + 1..)
                .and_then(|s| s.chars().next())
                .map(describe_char)
                .unwrap_or_default();
            return err(at, format!("invalid escape \\{shown} in string"));
        }
    };
    out.push(ch);
    Ok(at + 2)
}

/// The four hex digits after `\u` at `at`.
fn hex4(b: &[u8], at: usize) -> Result<u32, JsonError> {
    let digits = b.get(at + 2..at + 6);
    let mut v = 0u32;
    match digits {
        Some(d) if d.iter().all(u8::is_ascii_hexdigit) => {
            for &c in d {
                // Checked hex digits above: to_digit never fails here.
                v = v * 16 + (c as char).to_digit(16).unwrap_or(0);
            }
            Ok(v)
        }
        _ => err(at, "invalid \\u escape (needs 4 hex digits)"),
    }
}

fn control_char_error(c: u8) -> String {
    format!("raw control character U+{c:04X} in string (must be escaped)")
}

/// Printable ASCII is shown quoted; anything else (control characters,
/// non-breaking or zero-width spaces, bidi controls) by its code point.
fn describe_char(c: char) -> String {
    if c.is_ascii_graphic() {
        format!("'{c}'")
    } else {
        format!("U+{:04X}", c as u32)
    }
}

/// The longest preview, in characters, before it is cut with an ellipsis.
pub const PREVIEW_CHARS: usize = 60;

/// A JSON rendering of `s` for messages, cut to [`PREVIEW_CHARS`].
pub fn quote_preview(s: &str) -> String {
    let mut p = Preview::new(PREVIEW_CHARS);
    p.string(s);
    p.finish()
}

/// The same document as a `serde_json::Value`, numbers read by the one
/// rule of the descriptor reader (docs/format.md §3.2): an integer literal is
/// its integer value (`-0` is 0), one outside the signed and unsigned 64-bit
/// range is refused as out of range (naming the field and the literal, as
/// the audit does), and only a literal with a fraction or an exponent is a
/// float. `kvcr seal` reads files through this, so it never disagrees with
/// the audit on a number (serde_json alone reads `-0` as the float `-0.0`
/// and 2^64 as a float).
pub fn to_serde(v: Value<'_>) -> Result<serde_json::Value, String> {
    fn go(v: Value<'_>, path: &mut String) -> Result<serde_json::Value, String> {
        use serde_json::Value as J;
        Ok(match v.view() {
            View::Null => J::Null,
            View::Bool(b) => J::Bool(b),
            View::String(s) => J::String(s.to_owned()),
            View::Number(n) => match n.kind {
                NumKind::Int(i) => {
                    if let Ok(u) = u64::try_from(i) {
                        J::from(u)
                    } else if let Ok(s) = i64::try_from(i) {
                        J::from(s)
                    } else {
                        return Err(out_of_range(path, n.text));
                    }
                }
                NumKind::BigInt => return Err(out_of_range(path, n.text)),
                NumKind::Float => match n.text.parse::<f64>() {
                    Ok(f) if f.is_finite() => J::from(f),
                    _ => {
                        return Err(format!(
                            "{}: float not allowed, found {}",
                            shown(path),
                            n.text
                        ))
                    }
                },
            },
            View::Array(items) => {
                let mut out = Vec::new();
                for (k, item) in items.iter().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{k}]"));
                    out.push(go(item, path)?);
                    path.truncate(len);
                }
                J::Array(out)
            }
            View::Object(members) => {
                let mut out = serde_json::Map::new();
                for (key, item) in members.iter() {
                    let len = path.len();
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(key);
                    out.insert(key.to_owned(), go(item, path)?);
                    path.truncate(len);
                }
                J::Object(out)
            }
        })
    }
    fn shown(path: &str) -> &str {
        if path.is_empty() {
            "the document"
        } else {
            path
        }
    }
    fn out_of_range(path: &str, text: &str) -> String {
        let cut: String = text.chars().take(PREVIEW_CHARS).collect();
        let more = if cut.len() < text.len() { "…" } else { "" };
        format!(
            "{}: out of range (an integer must fit 64 bits), found {cut}{more}",
            shown(path)
        )
    }
    go(v, &mut String::new())
}

/// A compact JSON rendering of `v` (members in file order, strings escaped
/// as in the canonical form), cut to [`PREVIEW_CHARS`] characters with an
/// ellipsis. Stops early, so previewing a huge value is cheap.
pub fn preview(v: Value<'_>) -> String {
    let mut p = Preview::new(PREVIEW_CHARS);
    p.value(v);
    p.finish()
}

struct Preview {
    out: String,
    chars: usize,
    limit: usize,
    cut: bool,
}

impl Preview {
    fn new(limit: usize) -> Self {
        Preview {
            out: String::new(),
            chars: 0,
            limit,
            cut: false,
        }
    }

    fn full(&self) -> bool {
        self.cut
    }

    fn push(&mut self, c: char) {
        if self.chars >= self.limit {
            self.cut = true;
            return;
        }
        self.out.push(c);
        self.chars += 1;
    }

    fn push_str(&mut self, s: &str) {
        for c in s.chars() {
            self.push(c);
            if self.cut {
                return;
            }
        }
    }

    fn string(&mut self, s: &str) {
        self.push('"');
        for c in s.chars() {
            if self.full() {
                return;
            }
            match c {
                '"' => self.push_str("\\\""),
                '\\' => self.push_str("\\\\"),
                '\n' => self.push_str("\\n"),
                '\r' => self.push_str("\\r"),
                '\t' => self.push_str("\\t"),
                '\u{8}' => self.push_str("\\b"),
                '\u{c}' => self.push_str("\\f"),
                c if (c as u32) < 0x20 => self.push_str(&format!("\\u{:04x}", c as u32)),
                c => self.push(c),
            }
        }
        self.push('"');
    }

    fn value(&mut self, v: Value<'_>) {
        if self.full() {
            return;
        }
        match v.view() {
            View::Null => self.push_str("null"),
            View::Bool(b) => self.push_str(if b { "true" } else { "false" }),
            View::Number(n) => self.push_str(n.text),
            View::String(s) => self.string(s),
            View::Array(items) => {
                self.push('[');
                for (i, item) in items.iter().enumerate() {
                    if self.full() {
                        return;
                    }
                    if i > 0 {
                        self.push(',');
                    }
                    self.value(item);
                }
                self.push(']');
            }
            View::Object(members) => {
                self.push('{');
                for (i, (k, item)) in members.iter().enumerate() {
                    if self.full() {
                        return;
                    }
                    if i > 0 {
                        self.push(',');
                    }
                    self.string(k);
                    self.push(':');
                    self.value(item);
                }
                self.push('}');
            }
        }
    }

    fn finish(mut self) -> String {
        if self.cut {
            self.out.push('…');
        }
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_list_is_reused_on_the_thread_and_bounded() {
        use std::mem::size_of;
        let small = br#"{"a": [1, 2, {"b": "c\\n"}], "d": null}"#;
        let first = {
            let d = parse(small).unwrap();
            d.nodes.as_ptr() as usize
        };
        // A second document, and one parsed while it is alive, read the same.
        let d = parse(small).unwrap();
        assert_eq!(d.nodes.as_ptr() as usize, first, "the spare list came back");
        let e = parse(small).unwrap();
        assert_ne!(e.nodes.as_ptr(), d.nodes.as_ptr());
        assert_eq!(format!("{:?}", d.nodes), format!("{:?}", e.nodes));
        assert_eq!(d.root().get("d").map(|v| v.is_null()), Some(true));
        drop((d, e));
        // A large document's list is freed, not kept for the next parse.
        let big = format!("[{}0]", "0,".repeat(100_000));
        let d = parse(big.as_bytes()).unwrap();
        assert!(d.nodes.capacity() * size_of::<Node>() > SPARE_MAX_BYTES);
        drop(d);
        let kept = SPARE.with(Cell::take);
        assert!(
            kept.capacity() * size_of::<Node>() <= SPARE_MAX_BYTES,
            "{}",
            kept.capacity()
        );
    }

    /// `short_eq` is `==` on bytes, for every length around its word sizes
    /// and a difference at every position.
    #[test]
    fn short_eq_is_byte_equality() {
        for n in 0..=40usize {
            let a: Vec<u8> = (0..n as u8).map(|i| b'a' + i % 26).collect();
            assert!(short_eq(&a, &a.clone()), "len {n}");
            for at in 0..n {
                let mut b = a.clone();
                b[at] ^= 0x20;
                assert!(!short_eq(&a, &b), "len {n}, byte {at}");
            }
            let mut longer = a.clone();
            longer.push(b'x');
            assert!(!short_eq(&a, &longer) && !short_eq(&longer, &a), "len {n}");
        }
    }

    /// `each_unknown` names the members outside `known` in file order,
    /// whatever order the known ones come in, escaped keys included.
    #[test]
    fn each_unknown_in_file_order() {
        let known = ["a", "bb", "ccc", "dddd_eeee"];
        let doc =
            parse(br#"{"x":1,"ccc":2,"a":3,"\u0062b":4,"y":{"a":1},"dddd_eeee":5,"dddd_eeeE":6}"#)
                .unwrap();
        let m = doc.root().as_object().unwrap();
        let mut got = Vec::new();
        m.each_unknown(&known, |v| got.push(m.key(v).to_owned()));
        assert_eq!(got, ["x", "y", "dddd_eeeE"]);
        let mut none = Vec::new();
        m.each_unknown(
            &["x", "ccc", "a", "bb", "y", "dddd_eeee", "dddd_eeeE"],
            |v| none.push(m.key(v).to_owned()),
        );
        assert!(none.is_empty(), "{none:?}");
    }

    fn e(s: &[u8]) -> JsonError {
        parse(s).expect_err("should be rejected")
    }

    fn nested(depth: usize) -> String {
        "[".repeat(depth) + &"]".repeat(depth)
    }

    #[test]
    fn parses_all_value_kinds_in_order() {
        let d =
            parse(br#" {"b": [1, -2, 3.5, 1e3, true, false, null], "a": "x\u00e9\n"} "#).unwrap();
        let m: Vec<(&str, Value)> = d.root().as_object().unwrap().iter().collect();
        assert_eq!(m[0].0, "b");
        assert_eq!(m[1].0, "a");
        assert_eq!(m[1].1.as_str(), Some("xé\n"));
        let items: Vec<Value> = m[0].1.as_array().unwrap().iter().collect();
        let kinds: Vec<NumKind> = items[..4]
            .iter()
            .map(|v| match v.view() {
                View::Number(n) => n.kind,
                _ => panic!(),
            })
            .collect();
        assert_eq!(
            kinds,
            [
                NumKind::Int(1),
                NumKind::Int(-2),
                NumKind::Float,
                NumKind::Float
            ]
        );
        assert_eq!(items[4].as_bool(), Some(true));
        assert_eq!(items[5].as_bool(), Some(false));
        assert!(items[6].is_null());
        // One node per value, in document order; nothing else allocated.
        assert_eq!(d.nodes.len(), 10);
        assert_eq!(d.decoded, "xé\n");
    }

    #[test]
    fn strings_without_escapes_are_not_copied() {
        let d = parse(br#"{"key":"plain"}"#).unwrap();
        assert_eq!(d.root().get("key").unwrap().as_str(), Some("plain"));
        assert!(d.decoded.is_empty());
        assert!(!d.nodes[1].key_esc && !d.nodes[1].text_esc);
        let d = parse(br#""a\tb""#).unwrap();
        assert!(d.nodes[0].text_esc);
        assert_eq!(d.root().as_str(), Some("a\tb"));
        // Escaped keys are decoded too, and found by their decoded form.
        let d = parse(br#"{"\u0061b":1,"c":{"d\n":[]}}"#).unwrap();
        assert!(d.root().get("ab").is_some());
        assert!(d.root().get("c").unwrap().get("d\n").is_some());
    }

    #[test]
    fn integers() {
        fn n(s: &str) -> (String, NumKind) {
            match parse(s.as_bytes()).unwrap().root().view() {
                View::Number(n) => (n.text.to_owned(), n.kind),
                _ => panic!(),
            }
        }
        assert_eq!(n("0").1, NumKind::Int(0));
        assert_eq!(n("-0").1, NumKind::Int(0));
        assert_eq!(n("-0").0, "-0");
        assert_eq!(
            n("18446744073709551616").1,
            NumKind::Int(18446744073709551616)
        );
        let big = "9".repeat(38);
        assert_eq!(n(&big).1, NumKind::Int(big.parse().unwrap()));
        assert_eq!(n(&"9".repeat(39)).1, NumKind::BigInt);
        assert_eq!(n(&format!("-{}", "1".repeat(50))).1, NumKind::BigInt);
        assert_eq!(n("1.0").1, NumKind::Float);
        assert_eq!(n("1E+2").1, NumKind::Float);
        assert_eq!(n("-1e-2").1, NumKind::Float);
    }

    #[test]
    fn siblings_skip_whole_subtrees() {
        let d = parse(br#"[{"a":[1,[2,3]],"b":{}},4,[],{"c":null}]"#).unwrap();
        let top: Vec<Value> = d.root().as_array().unwrap().iter().collect();
        assert_eq!(top.len(), 4);
        assert_eq!(top[0].type_name(), "object");
        assert_eq!(format!("{:?}", top[1]), "4");
        assert_eq!(top[2].as_array().unwrap().len(), 0);
        assert!(top[3].get("c").unwrap().is_null());
        let m = top[0].as_object().unwrap();
        let keys: Vec<&str> = m.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["a", "b"]);
        assert_eq!(format!("{:?}", m.get("a").unwrap()), "[1,[2,3]]");
    }

    #[test]
    fn empty_and_whitespace() {
        assert_eq!(e(b"").what, "empty file");
        assert_eq!(e(b"").offset, 0);
        assert!(e(b" \n ").what.contains("only whitespace"));
    }

    #[test]
    fn bom_rejected() {
        let x = e(b"\xEF\xBB\xBF{}");
        assert!(x.what.contains("byte order mark"), "{x}");
        assert_eq!(x.offset, 0);
        assert!(e(b"\xFF\xFE{\x00}\x00").what.contains("byte order mark"));
    }

    #[test]
    fn invalid_utf8_with_offset() {
        let x = e(b"{\"a\":\"\xC3\x28\"}");
        assert_eq!(x.what, "invalid UTF-8");
        assert_eq!(x.offset, 6);
    }

    #[test]
    fn duplicate_keys_named() {
        let x = e(br#"{"a":1,"b":2,"a":3}"#);
        assert_eq!(x.what, r#"duplicate key "a""#);
        assert_eq!(x.offset, 13);
        // Nested objects are checked too; equal keys in sibling objects are fine.
        assert!(parse(br#"{"a":{"x":1},"b":{"x":2}}"#).is_ok());
        assert!(e(br#"{"a":{"x":1,"x":2}}"#).what.contains("duplicate key"));
        // Escaped and raw spellings of one key are the same key.
        assert!(e(br#"{"a":1,"\u0061":2}"#).what.contains("duplicate key"));
    }

    #[test]
    fn duplicate_keys_in_large_objects() {
        let mut s = String::from("{");
        for i in 0..100 {
            s.push_str(&format!("\"k{i}\":{i},"));
        }
        s.push_str("\"k50\":0}");
        assert_eq!(e(s.as_bytes()).what, r#"duplicate key "k50""#);
        let ok = s.replace("\"k50\":0}", "\"k100\":0}");
        assert_eq!(
            parse(ok.as_bytes())
                .unwrap()
                .root()
                .as_object()
                .unwrap()
                .len(),
            101
        );
    }

    #[test]
    fn trailing_data() {
        let x = e(b"{} {}");
        assert!(x.what.contains("trailing data"));
        assert_eq!(x.offset, 3);
        assert!(e(b"{}x").what.contains("trailing data"));
        assert!(parse(b"{} \n\t\r").is_ok());
    }

    #[test]
    fn syntax_errors() {
        for bad in [
            &b"{"[..],
            b"{\"a\"}",
            b"{\"a\":}",
            b"{\"a\":1,}",
            b"[1,]",
            b"[1 2]",
            b"{'a':1}",
            b"{a:1}",
            b"01",
            b"-",
            b"1.",
            b"1e",
            b".5",
            b"+1",
            b"tru",
            b"nul",
            b"NaN",
            b"Infinity",
            b"[1]]",
            b"\"abc",
            b"/* c */ {}",
            b"\x0b{}",
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn unexpected_characters_are_described() {
        assert_eq!(
            e(b"{\"a\":x}").what,
            "unexpected character 'x', expected a JSON value"
        );
        assert_eq!(
            e("{\u{a0}}".as_bytes()).what,
            "unexpected character U+00A0, expected a string key"
        );
        assert_eq!(
            e(b"[1").what,
            "unexpected end of input, expected ',' or ']'"
        );
    }

    #[test]
    fn escapes() {
        let s = |j: &str| parse(j.as_bytes()).map(|d| d.root().as_str().unwrap().to_owned());
        assert_eq!(s(r#""\"\\\/\b\f\n\r\t""#).unwrap(), "\"\\/\u{8}\u{c}\n\r\t");
        assert_eq!(s(r#""\u0041\u00E9\u00e9""#).unwrap(), "Aéé");
        assert_eq!(s(r#""\ud83d\ude00""#).unwrap(), "😀");
        assert_eq!(s(r#""\u0000""#).unwrap(), "\0");
        assert!(s(r#""\x41""#).unwrap_err().what.contains("invalid escape"));
        assert!(s(r#""\u12""#).unwrap_err().what.contains("4 hex digits"));
        assert!(s(r#""\u12g4""#).unwrap_err().what.contains("4 hex digits"));
        let lone = s(r#""a\ud800b""#).unwrap_err();
        assert!(lone.what.contains("lone high surrogate"), "{lone}");
        assert_eq!(lone.offset, 2);
        assert!(s(r#""\udc00""#)
            .unwrap_err()
            .what
            .contains("lone low surrogate"));
        assert!(s(r#""\ud800\u0041""#)
            .unwrap_err()
            .what
            .contains("lone high"));
        assert!(s(r#""\ud800\ud800""#)
            .unwrap_err()
            .what
            .contains("lone high"));
    }

    #[test]
    fn raw_control_characters_rejected() {
        let x = e(b"\"a\nb\"");
        assert!(x.what.contains("control character U+000A"), "{x}");
        assert_eq!(x.offset, 2);
        assert!(e(b"\"a\\n\tb\"").what.contains("U+0009"));
        assert!(e(b"\"\x00\"").what.contains("U+0000"));
        // DEL and non-ASCII are fine raw.
        assert!(parse("\"\u{7f}é\"".as_bytes()).is_ok());
    }

    #[test]
    fn depth_32_ok_33_rejected() {
        assert!(parse(nested(32).as_bytes()).is_ok());
        let x = e(nested(33).as_bytes());
        assert!(x.what.contains("nesting deeper than 32"), "{x}");
        assert_eq!(x.offset, 32);
        // Objects count the same way; the top-level object is depth 1.
        let obj = r#"{"a":"#.repeat(31) + "[]" + &"}".repeat(31);
        assert!(parse(obj.as_bytes()).is_ok());
        let obj = r#"{"a":"#.repeat(32) + "[]" + &"}".repeat(32);
        assert!(e(obj.as_bytes()).what.contains("nesting"));
        // Scalars inside the deepest container are fine.
        let s = "[".repeat(32) + "1" + &"]".repeat(32);
        assert!(parse(s.as_bytes()).is_ok());
    }

    #[test]
    fn deep_nesting_does_not_overflow_the_stack() {
        let s = "[".repeat(200_000);
        let x = e(s.as_bytes());
        assert!(x.what.contains("nesting"));
        let s = "{\"a\":".repeat(200_000);
        assert!(e(s.as_bytes()).what.contains("nesting"));
    }

    #[test]
    fn find_special_matches_bytewise_scan() {
        let slow = |b: &[u8], i: usize| {
            (i..b.len())
                .find(|&j| STRING_STOP[b[j] as usize])
                .unwrap_or(b.len())
        };
        let mut buf: Vec<u8> = b"abcdefghijklmnopqrstuvwxyz0123456789".to_vec();
        buf.extend("é😀~\u{7f}".as_bytes());
        for special in [
            b'"', b'\\', 0x00, 0x1f, b'\n', 0x20, 0x7f, 0x80, 0xff, 0x21, 0x5b,
        ] {
            for pos in 0..buf.len() {
                let mut b = buf.clone();
                b[pos] = special;
                for from in 0..b.len() {
                    assert_eq!(
                        find_special(&b, from),
                        slow(&b, from),
                        "{special:#x} {pos} {from}"
                    );
                }
            }
        }
        assert_eq!(find_special(b"", 0), 0);
    }

    #[test]
    fn find_special_first_of_many() {
        // Several special bytes per word, and the bytes a borrow could
        // wrongly flag beside them: the first special one is found.
        const ALPHABET: &[u8] = &[
            b'"', b'\\', 0x00, 0x01, 0x1f, 0x20, 0x21, 0x23, 0x5d, 0x5b, 0x7f, 0x80, 0xff, b'a',
        ];
        let slow = |b: &[u8], i: usize| {
            (i..b.len())
                .find(|&j| STRING_STOP[b[j] as usize])
                .unwrap_or(b.len())
        };
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for len in 0..40 {
            for _ in 0..200 {
                let b: Vec<u8> = (0..len)
                    .map(|_| {
                        seed = seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        ALPHABET[(seed >> 33) as usize % ALPHABET.len()]
                    })
                    .collect();
                for from in 0..=b.len() {
                    assert_eq!(find_special(&b, from), slow(&b, from), "{b:x?} from {from}");
                }
            }
        }
    }

    /// Whitespace of every kind, or none, around each colon, comma and
    /// value reads as the compact document; each misplaced byte is refused
    /// at its offset, with the same words.
    #[test]
    fn whitespace_anywhere_between_tokens() {
        let compact = br#"{"a":[1,"x",{},[],-0.5,true],"b":{"c":null},"d":"e"}"#;
        let want = to_serde(parse(compact).unwrap().root()).unwrap();
        for ws in ["", " ", "\t", "\r\n", "\n    ", " \n\t "] {
            let spaced: String = String::from_utf8(compact.to_vec())
                .unwrap()
                .chars()
                .flat_map(|c| match c {
                    ':' | ',' | '[' | '{' => format!("{ws}{c}{ws}").chars().collect::<Vec<_>>(),
                    ']' | '}' => format!("{ws}{c}").chars().collect(),
                    c => vec![c],
                })
                .collect();
            let got = parse(spaced.as_bytes()).unwrap_or_else(|e| panic!("{spaced:?}: {e}"));
            assert_eq!(to_serde(got.root()).unwrap(), want, "{spaced:?}");
        }
        for (doc, offset, what) in [
            (
                &b"{\"a\" 1}"[..],
                5,
                "unexpected character '1', expected ':'",
            ),
            (
                b"{\"a\":}",
                5,
                "unexpected character '}', expected a JSON value",
            ),
            (
                b"{\"a\": \n }",
                8,
                "unexpected character '}', expected a JSON value",
            ),
            (
                b"{\"a\":1 \"b\":2}",
                7,
                "unexpected character '\"', expected ',' or '}'",
            ),
            (b"[1 2]", 3, "unexpected character '2', expected ',' or ']'"),
            (
                b"[\"x\"\t:]",
                5,
                "unexpected character ':', expected ',' or ']'",
            ),
            (b"[1,\n]", 4, "trailing comma in array"),
            (b"{\"a\":1 , }", 9, "trailing comma in object"),
            (
                b"{\"a\": ",
                6,
                "unexpected end of input, expected a JSON value",
            ),
            (b"[1 ", 3, "unexpected end of input, expected ',' or ']'"),
        ] {
            let x = e(doc);
            assert_eq!((x.offset, x.what.as_str()), (offset, what), "{doc:?}");
        }
    }

    #[test]
    fn previews_are_cut() {
        let long = format!("\"{}\"", "x".repeat(500));
        let p = preview(parse(long.as_bytes()).unwrap().root());
        assert_eq!(p.chars().count(), PREVIEW_CHARS + 1);
        assert!(p.ends_with('…'));
        assert_eq!(preview(parse(b"\"fp8\"").unwrap().root()), "\"fp8\"");
        assert_eq!(
            preview(parse(br#"{"b": [1, 2], "a": null}"#).unwrap().root()),
            r#"{"b":[1,2],"a":null}"#
        );
        assert_eq!(
            preview(parse(br#""a\u0001""#).unwrap().root()),
            r#""a\u0001""#
        );
    }
}
