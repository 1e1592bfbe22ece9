//! A differential oracle for the hand-written JSON reader
//! (`kvcr_audit::descriptor::json`): serde_json reads the same bytes, and the two
//! must agree.
//!
//! - Both accept: the same tree (object keys in the same order with the same
//!   text, equal strings, equal booleans and nulls; an integer literal that
//!   fits 64 bits is the same integer, every other number is a float to
//!   serde_json and exactly the same float: serde_json's `float_roundtrip`
//!   feature (enabled by this crate) and std's `f64::from_str` both round
//!   correctly, so any difference is a reader that split or read the
//!   literal wrong).
//! - Only the hand reader refuses: allowed only for the reasons documented in
//!   `src/format/json/read.rs`, which serde_json does not check
//!   ([`HAND_ONLY_REFUSALS`]: a duplicate key, nesting deeper than
//!   `MAX_DEPTH`).
//! - Only serde_json refuses: allowed only when a number literal overflows
//!   an `f64` (serde_json refuses it; the reader keeps every literal as
//!   written, and the descriptor checks judge its range).
//!
//! The `json` fuzz target (fuzz/fuzz_targets/json.rs) calls [`check`] on
//! every input; under `cargo test`, tests/it/report/json_oracle.rs feeds it
//! generated documents and mutations of them. Like the rest of the kit it
//! takes plain data (bytes, serde_json values), never a kvcr type.

use kvcr_audit::descriptor::json::{self, NumKind, Value, View};
use serde_json::Value as S;

/// Prefixes of the hand reader's error messages for input that is valid
/// JSON (RFC 8259) but not a valid descriptor document.
pub const HAND_ONLY_REFUSALS: &[&str] = &["duplicate key ", "nesting deeper than "];

/// Checks one input against serde_json; panics (a fuzz crash) on a
/// disagreement, naming both results.
pub fn check(bytes: &[u8]) {
    let serde = serde_json::from_slice::<S>(bytes);
    match json::parse(bytes) {
        Ok(doc) => agree_tree(doc.root(), serde.as_ref().map_err(|e| e.to_string()), bytes),
        Err(e) => {
            if let Ok(s) = &serde {
                assert!(
                    HAND_ONLY_REFUSALS.iter().any(|w| e.what.starts_with(w)),
                    "the hand reader refuses ({e}) what serde_json reads as {s}: {:?}",
                    String::from_utf8_lossy(bytes)
                );
            }
        }
    }
}

/// The hand reader's tree of `hand` (bytes it must accept) against
/// `serde`, serde_json's result for the same bytes or, to test the oracle
/// itself, for other bytes: panics, naming the JSON path, where they differ.
pub fn agree(hand: &[u8], serde: Result<&S, String>) {
    match json::parse(hand) {
        Ok(doc) => agree_tree(doc.root(), serde, hand),
        Err(e) => panic!(
            "the hand reader refuses ({e}) {:?}",
            String::from_utf8_lossy(hand)
        ),
    }
}

/// The hand reader accepted `bytes` as `hand`; serde_json's result is `serde`.
fn agree_tree(hand: Value<'_>, serde: Result<&S, String>, bytes: &[u8]) {
    match serde {
        Ok(s) => same(hand, s, "$"),
        Err(e) => assert!(
            overflows_f64(hand),
            "serde_json refuses ({e}) what the hand reader accepts: {:?}",
            String::from_utf8_lossy(bytes)
        ),
    }
}

/// Whether some number literal in `v` is too large for an `f64`.
fn overflows_f64(v: Value<'_>) -> bool {
    match v.view() {
        View::Number(n) => n.text.parse::<f64>().is_ok_and(|f| f.is_infinite()),
        View::Array(items) => items.iter().any(overflows_f64),
        View::Object(members) => members.values().any(overflows_f64),
        _ => false,
    }
}

/// Panics, naming the JSON path `at`, where `hand` and `s` differ.
fn same(hand: Value<'_>, s: &S, at: &str) {
    match (hand.view(), s) {
        (View::Null, S::Null) => {}
        (View::Bool(a), S::Bool(b)) => assert_eq!(a, *b, "{at}"),
        (View::String(a), S::String(b)) => assert_eq!(a, b, "{at}"),
        (View::Number(n), S::Number(b)) => {
            let as_int = match n.kind {
                NumKind::Int(i) => b
                    .as_i64()
                    .map(i128::from)
                    .or(b.as_u64().map(i128::from))
                    .map(|x| (i, x)),
                _ => None,
            };
            match as_int {
                Some((i, x)) => assert_eq!(i, x, "{at}: integer {}", n.text),
                None => {
                    // Beyond 64 bits, or a fraction/exponent, or "-0":
                    // serde_json holds an f64.
                    // Both correctly rounded (std's `f64::from_str`;
                    // serde_json with `float_roundtrip`): the same bits,
                    // the sign of a zero included.
                    let b = b.as_f64().unwrap_or(f64::NAN);
                    let a: f64 = n.text.parse().expect("a JSON number is an f64 literal");
                    assert!(
                        b.is_finite() && a.to_bits() == b.to_bits(),
                        "{at}: number {} is {a:e} here and {b:e} for serde_json",
                        n.text
                    );
                    if let NumKind::Int(i) = n.kind {
                        let fits = i64::try_from(i).is_ok() || u64::try_from(i).is_ok();
                        assert!(
                            !fits || n.text == "-0",
                            "{at}: integer {} read as f64",
                            n.text
                        );
                    }
                }
            }
        }
        (View::Array(a), S::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{at}: array length");
            for (k, (x, y)) in a.iter().zip(b).enumerate() {
                same(x, y, &format!("{at}[{k}]"));
            }
        }
        (View::Object(a), S::Object(b)) => {
            assert_eq!(a.len(), b.len(), "{at}: member count");
            for ((ka, x), (kb, y)) in a.iter().zip(b) {
                assert_eq!(ka, kb, "{at}: member order");
                same(x, y, &format!("{at}.{ka}"));
            }
        }
        (h, s) => panic!("{at}: {h:?} here, {s} for serde_json"),
    }
}
