//! The canonical form of docs/format.md §3.2 and the descriptor digest.
//!
//! Canonical form: UTF-8 JSON, object keys sorted by byte value, no
//! whitespace, integers in plain decimal (`-0` becomes `0`), strings escaped
//! only where JSON requires it: `"` and `\`, and U+0000..U+001F, with
//! `\b \f \n \r \t` in short form and the others as `\u00xx` (lowercase
//! hex). Everything else, `/`, DEL and non-ASCII included, is written raw.
//!
//! A JSON integer literal is already plain decimal (JSON forbids leading
//! zeros and `+`), so integers are written from their literal text, which
//! also covers integers too large for any machine type. Floats never occur in
//! a schema-valid descriptor; should one be hashed (to check the digest of a
//! schema-invalid file) its literal is written unchanged.
//!
//! A string written without escapes holds none of the bytes the canonical
//! form escapes (the reader refuses raw `"`, `\` and control characters),
//! so it is copied with its quotes straight from the input; only strings
//! that had escapes are re-encoded. [`digest_without`] writes the canonical
//! form into a buffer kept per thread (never longer than the input: escapes
//! only get shorter, whitespace goes) and hashes it in one call; short runs
//! are copied as fixed 16-byte moves rather than through memcpy.

use crate::format::json::{find_special, Doc, Tag};
use sha2::{Digest, Sha256};
use std::cell::RefCell;

thread_local! {
    static CANON: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// SHA-256 of the canonical form of `doc`, leaving out the top-level
/// member named `skip_top_key` (only at the top level, only if the
/// document is an object).
pub fn digest_without(doc: &Doc<'_>, skip_top_key: &str) -> [u8; 32] {
    let hash = |buf: &mut Vec<u8>| {
        let n = write(buf, doc, Some(skip_top_key));
        Sha256::digest(&buf[..n]).into()
    };
    CANON.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => hash(&mut buf),
        Err(_) => hash(&mut Vec::new()),
    })
}

/// The canonical bytes of `doc`, optionally leaving out one top-level member.
pub fn canonical_bytes(doc: &Doc<'_>, skip_top_key: Option<&str>) -> Vec<u8> {
    let mut out = Vec::new();
    let n = write(&mut out, doc, skip_top_key);
    out.truncate(n);
    out
}

/// Slack after the canonical bytes, so short copies can move a fixed 16 bytes.
const SLACK: usize = 16;

/// Writes the canonical form of `doc` at the start of `buf` (grown as
/// needed); returns its length. The canonical form is never longer than the
/// input: whitespace goes, every escape becomes at most as long as it was
/// written, `-0` becomes `0`, and everything else is copied.
///
/// The writers below take the buffer and the position to write at and
/// return the position after what they wrote, so the position stays in a
/// register. Every write lies within the canonical form's final length
/// (each container's members are written each followed by a comma, and the
/// last comma becomes the closing bracket), so at most that length plus the
/// [`SLACK`] a fixed 16-byte move may reach past it: the buffer's length.
/// Bytes a fixed move writes past its run are written over by the next write.
fn write(buf: &mut Vec<u8>, doc: &Doc<'_>, skip: Option<&str>) -> usize {
    let need = doc.src.len() + SLACK;
    if buf.len() < need {
        buf.resize(need, 0);
    }
    write_value(&mut buf[..need], doc, 0, 0, skip)
}

/// `b` at `pos`.
#[inline(always)]
fn byte(buf: &mut [u8], pos: usize, b: u8) -> usize {
    buf[pos] = b;
    pos + 1
}

/// `s` at `pos`.
#[inline(always)]
fn put(buf: &mut [u8], pos: usize, s: &[u8]) -> usize {
    buf[pos..pos + s.len()].copy_from_slice(s);
    pos + s.len()
}

/// `src[a..b]` at `pos`; a short run as one fixed 16-byte move (the bytes
/// after the run are written over later or lie in the slack), not a memcpy
/// call.
#[inline(always)]
fn put_run(buf: &mut [u8], pos: usize, src: &[u8], a: usize, b: usize) -> usize {
    let n = b - a;
    match (src.get(a..a + SLACK), buf.get_mut(pos..pos + SLACK)) {
        (Some(from), Some(to)) if n <= SLACK => to.copy_from_slice(from),
        _ => buf[pos..pos + n].copy_from_slice(&src[a..b]),
    }
    pos + n
}

/// `sha256:` followed by the 64 lowercase hex digits of `digest`.
pub fn format_digest(digest: &[u8; 32]) -> String {
    crate::format::hex::encode_after("sha256:", digest)
}

/// Objects up to this size are key-sorted on the stack ([`write_object`]).
const STACK_SORT: usize = 32;

/// The first eight bytes of a key, zero-padded, as a number: when two
/// prefixes differ they order like the whole keys (a tie needs the keys).
#[inline]
fn key_prefix(k: &[u8]) -> u64 {
    if let Some(w) = k.first_chunk::<8>() {
        return u64::from_be_bytes(*w);
    }
    let mut w = [0u8; 8];
    w[..k.len()].copy_from_slice(k);
    u64::from_be_bytes(w)
}

/// [`key_prefix`] of the key of member node `c`. A key written without
/// escapes is followed in the input by at least its closing quote, so
/// eight bytes can mostly be read at once and the bytes past the key masked.
#[inline]
fn key_prefix_of(doc: &Doc<'_>, c: usize) -> u64 {
    let n = &doc.nodes[c];
    let (a, len) = (n.key.0 as usize, (n.key.1 - n.key.0) as usize);
    match doc.src.as_bytes().get(a..a + 8) {
        Some(w) if !n.key_esc && len < 8 => {
            let w = u64::from_be_bytes(w.try_into().unwrap_or([0; 8]));
            // len < 8: keep the first len bytes (the high ones).
            w & !(u64::MAX >> (8 * len))
        }
        _ => key_prefix(doc.key_bytes(c)),
    }
}

/// Node `i` of `doc` at `pos`. Recursion is bounded by the reader's depth
/// limit (docs/format.md §3: 32).
fn write_value(buf: &mut [u8], doc: &Doc<'_>, i: usize, pos: usize, skip: Option<&str>) -> usize {
    let n = &doc.nodes[i];
    match n.tag {
        Tag::Arr => {
            let mut pos = byte(buf, pos, b'[');
            let open = pos;
            let mut c = i + 1;
            for _ in 0..n.len {
                pos = write_member_value(buf, doc, c, pos);
                pos = byte(buf, pos, b',');
                c = doc.nodes[c].end as usize;
            }
            close(buf, open, pos, b']')
        }
        Tag::Obj if n.len <= 4 => write_object::<4>(buf, doc, i, pos, skip),
        Tag::Obj if n.len <= 8 => write_object::<8>(buf, doc, i, pos, skip),
        Tag::Obj if n.len as usize <= STACK_SORT => {
            write_object::<STACK_SORT>(buf, doc, i, pos, skip)
        }
        Tag::Obj => {
            let mut idx: Vec<usize> = Vec::with_capacity(n.len as usize);
            let mut c = i + 1;
            for _ in 0..n.len {
                idx.push(c);
                c = doc.nodes[c].end as usize;
            }
            idx.sort_unstable_by(|&a, &b| doc.key_bytes(a).cmp(doc.key_bytes(b)));
            write_members(buf, doc, idx.into_iter(), pos, skip)
        }
        _ => write_scalar(buf, doc, i, pos),
    }
}

/// A member or item `c`: scalars written here, containers by [`write_value`].
#[inline(always)]
fn write_member_value(buf: &mut [u8], doc: &Doc<'_>, c: usize, pos: usize) -> usize {
    match doc.nodes[c].tag {
        Tag::Arr | Tag::Obj => write_value(buf, doc, c, pos, None),
        _ => write_scalar(buf, doc, c, pos),
    }
}

/// The scalar node `i` (not an array or object) at `pos`.
#[inline(always)]
fn write_scalar(buf: &mut [u8], doc: &Doc<'_>, i: usize, pos: usize) -> usize {
    let n = &doc.nodes[i];
    let src = doc.src.as_bytes();
    let (a, b) = (n.text.0 as usize, n.text.1 as usize);
    match n.tag {
        // Copied with its quotes when written without escapes.
        Tag::Str if !n.text_esc => put_run(buf, pos, src, a - 1, b + 1),
        Tag::Str => write_string(buf, pos, doc.text(n.text, true)),
        Tag::Int | Tag::Float if &src[a..b] == b"-0" => byte(buf, pos, b'0'),
        Tag::Int | Tag::Float => put_run(buf, pos, src, a, b),
        Tag::Null => put(buf, pos, b"null"),
        Tag::True => put(buf, pos, b"true"),
        Tag::False => put(buf, pos, b"false"),
        Tag::Arr | Tag::Obj => write_value(buf, doc, i, pos, None),
    }
}

/// Closes a container opened just before `open` whose members, each
/// followed by a comma, end at `pos`: the last comma becomes `bracket`.
#[inline(always)]
fn close(buf: &mut [u8], open: usize, pos: usize, bracket: u8) -> usize {
    if pos == open {
        byte(buf, pos, bracket)
    } else {
        buf[pos - 1] = bracket;
        pos
    }
}

/// Object `i` (at most `M` members), its keys sorted on the stack: by their
/// first eight bytes, whole keys only where those tie. Writers mostly keep
/// one order, so insertion sort is linear there and cheap on objects this small.
#[inline(always)]
fn write_object<const M: usize>(
    buf: &mut [u8],
    doc: &Doc<'_>,
    i: usize,
    pos: usize,
    skip: Option<&str>,
) -> usize {
    let mut idx = [(0u64, 0usize); M];
    let idx = &mut idx[..(doc.nodes[i].len as usize).min(M)];
    let mut c = i + 1;
    for slot in idx.iter_mut() {
        *slot = (key_prefix_of(doc, c), c);
        c = doc.nodes[c].end as usize;
    }
    let less = |a: &(u64, usize), b: &(u64, usize)| {
        a.0 < b.0 || (a.0 == b.0 && doc.key_bytes(a.1) < doc.key_bytes(b.1))
    };
    for j in 1..idx.len() {
        let mut k = j;
        while k > 0 && less(&idx[k], &idx[k - 1]) {
            idx.swap(k, k - 1);
            k -= 1;
        }
    }
    write_members(buf, doc, idx.iter().map(|&(_, c)| c), pos, skip)
}

/// The members `order` (node indices, keys sorted) of one object at `pos`.
#[inline(always)]
fn write_members(
    buf: &mut [u8],
    doc: &Doc<'_>,
    order: impl Iterator<Item = usize>,
    pos: usize,
    skip: Option<&str>,
) -> usize {
    let mut pos = byte(buf, pos, b'{');
    let open = pos;
    let src = doc.src.as_bytes();
    for c in order {
        if skip.is_some_and(|s| s.as_bytes() == doc.key_bytes(c)) {
            continue;
        }
        let n = &doc.nodes[c];
        let (a, b) = (n.key.0 as usize, n.key.1 as usize);
        // A key written without escapes and short: `"key"` as one fixed
        // 16-byte move, the colon written over the byte after its quote.
        pos = if n.key_esc {
            let pos = write_string(buf, pos, doc.text(n.key, true));
            byte(buf, pos, b':')
        } else {
            match (src.get(a - 1..a + 15), buf.get_mut(pos..pos + SLACK)) {
                (Some(from), Some(to)) if b - a <= SLACK - 3 => {
                    to.copy_from_slice(from);
                    to[b - a + 2] = b':';
                    pos + (b - a) + 3
                }
                _ => {
                    let pos = put_run(buf, pos, src, a - 1, b + 1);
                    byte(buf, pos, b':')
                }
            }
        };
        pos = write_member_value(buf, doc, c, pos);
        pos = byte(buf, pos, b',');
    }
    close(buf, open, pos, b'}')
}

/// A string from its decoded form, escaped as docs/format.md §3.2 says; for
/// the rare string or key that was written with escapes.
#[cold]
#[inline(never)]
fn write_string(buf: &mut [u8], pos: usize, s: &str) -> usize {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let b = s.as_bytes();
    let mut pos = byte(buf, pos, b'"');
    let mut run = 0;
    loop {
        let i = find_special(b, run);
        pos = put(buf, pos, &b[run..i]);
        let Some(&c) = b.get(i) else { break };
        run = i + 1;
        pos = match c {
            b'"' => put(buf, pos, b"\\\""),
            b'\\' => put(buf, pos, b"\\\\"),
            0x08 => put(buf, pos, b"\\b"),
            0x0c => put(buf, pos, b"\\f"),
            b'\n' => put(buf, pos, b"\\n"),
            b'\r' => put(buf, pos, b"\\r"),
            b'\t' => put(buf, pos, b"\\t"),
            c => put(
                buf,
                pos,
                &[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[(c >> 4) as usize],
                    HEX[(c & 15) as usize],
                ],
            ),
        };
    }
    byte(buf, pos, b'"')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::json::parse;

    fn canon(s: &str) -> String {
        String::from_utf8(canonical_bytes(&parse(s.as_bytes()).unwrap(), None)).unwrap()
    }

    fn hex_digest(s: &str, skip: &str) -> String {
        crate::format::hex::encode(&digest_without(&parse(s.as_bytes()).unwrap(), skip))
    }

    // Expected values computed independently with Python:
    // json.dumps(obj, sort_keys=True, separators=(",",":"), ensure_ascii=False)
    // (Python escapes control characters as \u00xx lowercase, like docs/format.md §3.2.)
    #[test]
    fn known_vector_nested() {
        let input = r#"{ "b": 1, "a": [true, null, {"z": "x", "\u00e9": 0, "A": -5}],
                         "c": "\u0001\u00e9\/" }"#;
        let expected =
            "{\"a\":[true,null,{\"A\":-5,\"z\":\"x\",\"é\":0}],\"b\":1,\"c\":\"\\u0001é/\"}";
        assert_eq!(canon(input), expected);
        assert_eq!(
            hex_digest(input, "digest"),
            "8a9eb9133fec30822e415734937bb6a3f9bf0bea2e208c75ec700b2423595089"
        );
    }

    #[test]
    fn known_vector_without_digest_member() {
        let input =
            r#"{"schema":"x","digest":"sha256:00","n":{"k":"line\nbreak\u001F"},"z":[],"y":{}}"#;
        let expected = r#"{"n":{"k":"line\nbreak\u001f"},"schema":"x","y":{},"z":[]}"#;
        let v = parse(input.as_bytes()).unwrap();
        assert_eq!(
            String::from_utf8(canonical_bytes(&v, Some("digest"))).unwrap(),
            expected
        );
        assert_eq!(
            hex_digest(input, "digest"),
            "2e0c5077f780be481c2be274b78ae1161f3da0a14e8fe6715a6388880d31a6d7"
        );
        // The skipped key is only skipped at the top level.
        assert_eq!(
            canon(r#"{"a":{"digest":1}}"#),
            String::from_utf8(canonical_bytes(
                &parse(br#"{"a":{"digest":1}}"#).unwrap(),
                Some("digest")
            ))
            .unwrap()
        );
    }

    #[test]
    fn digest_matches_sha256_of_canonical_bytes() {
        // Large enough to cross the hash buffer several times.
        let mut s = String::from("{\"items\":[");
        for i in 0..3000 {
            if i > 0 {
                s.push(',');
            }
            s.push_str(&format!(
                "{{\"id\":\"alloc-{i}\",\"size\":{},\"blob\":\"{}\"}}",
                i * 7,
                "x".repeat(i % 50)
            ));
        }
        s.push_str("],\"big\":\"");
        s.push_str(&"y".repeat(20_000));
        s.push_str("\"}");
        let v = parse(s.as_bytes()).unwrap();
        let bytes = canonical_bytes(&v, Some("nothing"));
        let direct: [u8; 32] = Sha256::digest(&bytes).into();
        assert_eq!(digest_without(&v, "nothing"), direct);
    }

    #[test]
    fn key_order_and_whitespace_invariance() {
        let a = r#"{"x":1,"y":{"q":[1,2],"p":"s"},"digest":"sha256:ab"}"#;
        let b = "{ \"digest\" : \"other\",\n\t\"y\" : { \"p\" : \"s\" , \"q\" : [ 1 , 2 ] } ,\r\n \
            \"x\" : 1 }";
        assert_eq!(hex_digest(a, "digest"), hex_digest(b, "digest"));
        assert_ne!(hex_digest(a, "digest"), hex_digest(a, "x"));
    }

    #[test]
    fn keys_sort_by_byte_value() {
        // 'Z' (0x5a) < '_' (0x5f) < 'a' (0x61) < 'é' (0xc3 0xa9) < '😀' (0xf0 ..)
        assert_eq!(
            canon(r#"{"😀":0,"é":1,"a":2,"_":3,"Z":4,"":5,"aa":6}"#),
            r#"{"":5,"Z":4,"_":3,"a":2,"aa":6,"é":1,"😀":0}"#
        );
        // Larger than the stack sort buffer.
        let mut s = String::from("{");
        for i in (0..100).rev() {
            s.push_str(&format!("\"k{i:03}\":{i},"));
        }
        s.pop();
        s.push('}');
        let c = canon(&s);
        assert!(c.starts_with(r#"{"k000":0,"k001":1,"#), "{c}");
        assert!(c.ends_with(r#""k099":99}"#));
    }

    /// The writer's fixed 16-byte moves and its closing of each container
    /// over the last member's comma, at every key length around the move's
    /// size, at the very end of the input, for empty containers and for an
    /// object left empty by the skipped member.
    #[test]
    fn short_moves_and_closing_brackets() {
        let with_skip = |s: &str| {
            String::from_utf8(canonical_bytes(
                &parse(s.as_bytes()).unwrap(),
                Some("digest"),
            ))
            .unwrap()
        };
        for len in 0..=20 {
            let k = "k".repeat(len);
            assert_eq!(canon(&format!(r#"{{"{k}":1}}"#)), format!(r#"{{"{k}":1}}"#));
            assert_eq!(
                canon(&format!(r#"{{ "z" : [ ] , "{k}" : {{ }} }}"#)),
                format!(r#"{{"{k}":{{}},"z":[]}}"#)
            );
            assert_eq!(
                canon(&format!(r#"{{"k{k}":[true,{{"{k}":-0}},"{k}",[]]}}"#)),
                format!(r#"{{"k{k}":[true,{{"{k}":0}},"{k}",[]]}}"#)
            );
            assert_eq!(
                with_skip(&format!(r#"{{"digest":"x","{k}":[null,false]}}"#)),
                format!(r#"{{"{k}":[null,false]}}"#)
            );
        }
        assert_eq!(with_skip(r#"{"digest":1}"#), "{}");
        assert_eq!(with_skip(r#"[{"digest":1},{}]"#), r#"[{"digest":1},{}]"#);
        assert_eq!(canon("[]"), "[]");
        assert_eq!(canon("[[],{},[{}]]"), "[[],{},[{}]]");
    }

    #[test]
    fn string_escapes() {
        assert_eq!(canon(r#""\u0001""#), r#""\u0001""#);
        assert_eq!(canon(r#""\u001F\u001f""#), r#""\u001f\u001f""#);
        assert_eq!(canon(r#""\u00e9""#), "\"é\"");
        assert_eq!(canon(r#""\/""#), "\"/\"");
        assert_eq!(canon(r#""\u007f""#), "\"\u{7f}\"");
        assert_eq!(canon(r#""\u0000""#), r#""\u0000""#);
        assert_eq!(canon(r#""\b\f\n\r\t\u0008\u000C""#), r#""\b\f\n\r\t\b\f""#);
        assert_eq!(canon(r#""\"\\\u0022\u005c""#), r#""\"\\\"\\""#);
        assert_eq!(canon(r#""\ud83d\ude00 ok""#), "\"😀 ok\"");
    }

    #[test]
    fn numbers_plain_decimal() {
        assert_eq!(
            canon("[-0,0,-1,123456789012345678901234567890123456789012]"),
            "[0,0,-1,123456789012345678901234567890123456789012]"
        );
    }

    #[test]
    fn format_digest_shape() {
        let d = [0xabu8; 32];
        let s = format_digest(&d);
        assert_eq!(s.len(), 71);
        assert!(s.starts_with("sha256:abab"));
    }

    mod props {
        use super::*;
        use proptest::prelude::*;
        use serde_json::Value as J;

        fn any_json() -> impl Strategy<Value = J> {
            let key_or_text = "(?s).{0,12}";
            let leaf = prop_oneof![
                Just(J::Null),
                any::<bool>().prop_map(J::Bool),
                any::<i64>().prop_map(J::from),
                any::<u64>().prop_map(J::from),
                key_or_text.prop_map(J::String),
            ];
            leaf.prop_recursive(4, 48, 6, move |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..6).prop_map(J::Array),
                    prop::collection::vec((key_or_text, inner), 0..6)
                        .prop_map(|kv| J::Object(kv.into_iter().collect())),
                ]
            })
        }

        /// Keys sorted by byte value, recursively (serde_json keeps insertion order).
        fn sorted(v: &J) -> J {
            match v {
                J::Array(a) => J::Array(a.iter().map(sorted).collect()),
                J::Object(m) => {
                    let mut kv: Vec<(&String, &J)> = m.iter().collect();
                    kv.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                    J::Object(
                        kv.into_iter()
                            .map(|(k, v)| (k.clone(), sorted(v)))
                            .collect(),
                    )
                }
                x => x.clone(),
            }
        }

        proptest! {
            // serde_json's compact output escapes exactly like docs/format.md §3.2 (short
            // forms, lowercase \u00xx, nothing else), so with sorted keys it
            // is an independent oracle for the canonical form.
            #[test]
            fn canonical_equals_sorted_compact_serde(v in any_json()) {
                let pretty = serde_json::to_string_pretty(&v).unwrap();
                let parsed = parse(pretty.as_bytes()).unwrap();
                let ours = canonical_bytes(&parsed, None);
                let oracle = serde_json::to_vec(&sorted(&v)).unwrap();
                prop_assert_eq!(&ours, &oracle);
                let direct: [u8; 32] = Sha256::digest(&oracle).into();
                prop_assert_eq!(digest_without(&parsed, "\u{0}never"), direct);
                // The canonical form is a fixed point.
                prop_assert_eq!(canonical_bytes(&parse(&ours).unwrap(), None), ours);
            }
        }
    }
}
