//! The strict JSON reader and the docs/format.md §3.2 canonical digest.
//!
//! Oracles for any input the reader accepts:
//! - the canonical form is valid UTF-8, parses again, and is a fixed point;
//! - `digest_without` equals SHA-256 of `canonical_bytes` (streamed hashing
//!   agrees with the materialised form), and `compute_digest` agrees;
//! - re-serialising the parsed value with members in reverse order, random
//!   whitespace and gratuitous escapes (`\/`, `\u00XX`) changes nothing;
//! - removing the top-level `digest` member is the same as skipping it.
#![no_main]

use kvcr_audit::descriptor::canon::{canonical_bytes, digest_without};
use kvcr_audit::descriptor::json::{parse, Value, View};
use kvcr_audit::descriptor::parse::compute_digest;
use libfuzzer_sys::fuzz_target;
use sha2::{Digest, Sha256};

/// A tiny deterministic PRNG (xorshift), seeded from the input.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn ws(&mut self, out: &mut String) {
        for _ in 0..(self.next() % 3) {
            out.push([' ', '\n', '\t', '\r'][(self.next() % 4) as usize]);
        }
    }
}

fn write_str(rng: &mut Rng, s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' if rng.next() % 2 == 0 => out.push_str("\\/"),
            c if (c as u32) < 0x20 || rng.next() % 8 == 0 => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    if rng.next() % 2 == 0 {
                        out.push_str(&format!("\\u{unit:04x}"));
                    } else {
                        out.push_str(&format!("\\u{unit:04X}"));
                    }
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Members in reverse order, random whitespace, gratuitous escapes.
fn reformat(rng: &mut Rng, v: Value<'_>, out: &mut String) {
    reformat_without(rng, v, None, out)
}

/// [`reformat`], leaving out the member `skip` of `v` (an object).
fn reformat_without(rng: &mut Rng, v: Value<'_>, skip: Option<&str>, out: &mut String) {
    rng.ws(out);
    match v.view() {
        View::Null => out.push_str("null"),
        View::Bool(b) => out.push_str(if b { "true" } else { "false" }),
        View::Number(n) => out.push_str(n.text),
        View::String(s) => write_str(rng, s, out),
        View::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                reformat(rng, item, out);
            }
            rng.ws(out);
            out.push(']');
        }
        View::Object(members) => {
            out.push('{');
            let kept: Vec<_> = members.iter().filter(|(k, _)| Some(*k) != skip).collect();
            for (i, (k, item)) in kept.into_iter().rev().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                rng.ws(out);
                write_str(rng, k, out);
                rng.ws(out);
                out.push(':');
                reformat(rng, item, out);
            }
            rng.ws(out);
            out.push('}');
        }
    }
    rng.ws(out);
}

fuzz_target!(|data: &[u8]| {
    let Ok(v) = parse(data) else { return };
    let canon = canonical_bytes(&v, None);
    let root = v.root();
    std::str::from_utf8(&canon).expect("canonical form is UTF-8");
    let again = parse(&canon).expect("canonical form parses");
    assert_eq!(canonical_bytes(&again, None), canon, "not a fixed point");

    let skipped = canonical_bytes(&v, Some("digest"));
    let direct: [u8; 32] = Sha256::digest(&skipped).into();
    let streamed = digest_without(&v, "digest");
    assert_eq!(streamed, direct, "streamed digest differs");
    assert_eq!(compute_digest(data).expect("parsed"), streamed);

    let seed = u64::from_le_bytes(Sha256::digest(data)[..8].try_into().unwrap()) | 1;
    let mut text = String::new();
    reformat(&mut Rng(seed), root, &mut text);
    let w = parse(text.as_bytes()).expect("reformatted text parses");
    assert_eq!(
        canonical_bytes(&w, None),
        canon,
        "reformatting changed the canonical form"
    );
    assert_eq!(digest_without(&w, "digest"), streamed);

    if root.as_object().is_some() {
        let mut text = String::new();
        reformat_without(&mut Rng(seed), root, Some("digest"), &mut text);
        let without = parse(text.as_bytes()).expect("reformatted text parses");
        assert_eq!(canonical_bytes(&without, None), skipped);
    }
});
