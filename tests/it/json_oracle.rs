//! A differential oracle for the hand-written JSON reader
//! (`kvcr::descriptor::json`): serde_json reads the same bytes, and the two
//! must agree.
//!
//! - Both accept: the same tree (object keys in the same order with the same
//!   text, equal strings, equal booleans and nulls; an integer literal that
//!   fits 64 bits is the same integer, every other number is a float to
//!   serde_json and the same float within one rounding step).
//! - Only the hand reader refuses: allowed only for the reasons documented in
//!   `src/descriptor/json.rs`, which serde_json does not check
//!   ([`HAND_ONLY_REFUSALS`]: a duplicate key, nesting deeper than
//!   `MAX_DEPTH`).
//! - Only serde_json refuses: allowed only when a number literal overflows
//!   an `f64` (serde_json refuses it; the reader keeps every literal as
//!   written, and the descriptor checks judge its range).
//!
//! The same file is the `json` fuzz target's oracle
//! (fuzz/fuzz_targets/json.rs includes it by path); under `cargo test` the
//! property tests at the end feed it generated documents and mutations of
//! them. `KVCR_PROP_CASES=N` runs N cases per property.

use kvcr::descriptor::json::{self, NumKind, Value, View};
use serde_json::Value as S;

/// Prefixes of the hand reader's error messages for input that is valid
/// JSON (RFC 8259) but not a valid descriptor document.
pub const HAND_ONLY_REFUSALS: &[&str] = &["duplicate key ", "nesting deeper than "];

/// Checks one input against serde_json; panics (a fuzz crash) on a
/// disagreement, naming both results.
pub fn check(bytes: &[u8]) {
    let serde = serde_json::from_slice::<S>(bytes);
    match json::parse(bytes) {
        Ok(doc) => agree(doc.root(), serde.as_ref().map_err(|e| e.to_string()), bytes),
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

/// The hand reader accepted `bytes` as `hand`; serde_json's result is `serde`.
pub fn agree(hand: Value<'_>, serde: Result<&S, String>, bytes: &[u8]) {
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
                    let b = b.as_f64().unwrap_or(f64::NAN);
                    let a: f64 = n.text.parse().expect("a JSON number is an f64 literal");
                    assert!(
                        b.is_finite() && (a - b).abs() <= f64::EPSILON * a.abs().max(b.abs()),
                        "{at}: number {} is {a} here and {b} for serde_json",
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

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    fn cases(default: u32) -> u32 {
        std::env::var("KVCR_PROP_CASES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    }

    #[test]
    fn both_readers_agree_on_hand_picked_documents() {
        for doc in [
            r#"{"a":1,"b":[true,false,null],"c":"x\u00e9\ud83d\ude00\n"}"#,
            r#"{"big":123456789012345678901234567890,"neg":-9223372036854775808}"#,
            r#"[18446744073709551615, 18446744073709551616, -0, 0.1, 1e300, 2E-5]"#,
            r#"{"":{"\u0000":"\"\\\/\b\f\n\r\t"}}"#,
            " \t\r\n[ ] ",
            "\"\u{7f}\u{10ffff}\"",
        ] {
            check(doc.as_bytes());
            assert!(json::parse(doc.as_bytes()).is_ok(), "{doc}");
        }
    }

    #[test]
    fn the_hand_reader_refuses_only_for_its_documented_reasons() {
        let deep = format!("{}{}", "[".repeat(40), "]".repeat(40));
        let refused_here = [
            r#"{"a":1,"a":2}"#.to_string(),
            r#"{"a":{"k":1,"\u006b":2}}"#.to_string(),
            deep,
        ];
        for doc in &refused_here {
            assert!(serde_json::from_slice::<S>(doc.as_bytes()).is_ok(), "{doc}");
            assert!(json::parse(doc.as_bytes()).is_err(), "{doc}");
            check(doc.as_bytes());
        }
        // serde_json refuses a literal beyond f64; the reader keeps it.
        let huge = format!("[1e400, 1{}]", "0".repeat(400));
        assert!(serde_json::from_slice::<S>(huge.as_bytes()).is_err());
        check(huge.as_bytes());
        // Both refuse.
        for bad in [
            "",
            "[1,]",
            "{\"a\":1,}",
            "\u{feff}{}",
            "\"\\ud800\"",
            "01",
            "[] x",
        ] {
            assert!(json::parse(bad.as_bytes()).is_err(), "{bad:?}");
            check(bad.as_bytes());
        }
    }

    #[test]
    fn the_oracle_notices_a_disagreement() {
        let doc = json::parse(br#"{"a":[1,"x"],"b":2}"#).unwrap();
        for other in [
            r#"{"a":[1,"x"],"b":3}"#,
            r#"{"b":2,"a":[1,"x"]}"#,
            r#"{"a":[1,"y"],"b":2}"#,
            r#"{"a":[1],"b":2}"#,
            r#"{"a":[1.0,"x"],"b":2}"#,
        ] {
            let s: S = serde_json::from_str(other).unwrap();
            let caught = std::panic::catch_unwind(|| agree(doc.root(), Ok(&s), b""));
            assert!(caught.is_err(), "no disagreement found with {other}");
        }
        let refused = std::panic::catch_unwind(|| agree(doc.root(), Err("x".into()), b""));
        assert!(
            refused.is_err(),
            "a serde_json refusal of a plain document passed"
        );
    }

    /// A JSON text, built to reach the corners both readers must agree on:
    /// escapes (including surrogate pairs and lone surrogates), integers at
    /// the 64-bit edges and beyond, floats, duplicate and escaped keys,
    /// nesting near `MAX_DEPTH`, and odd whitespace.
    fn text(depth: u32) -> BoxedStrategy<String> {
        let string = prop::collection::vec(
            prop_oneof![
                "[a-z \u{e9}\u{1F600}]{1,3}",
                Just("\\n".to_string()),
                Just("\\\"".to_string()),
                Just("\\u0041".to_string()),
                Just("\\ud83d\\ude00".to_string()),
                Just("\\ud800".to_string()),
                Just("\\x".to_string()),
                Just("\u{1}".to_string()),
            ],
            0..4,
        )
        .prop_map(|parts| format!("\"{}\"", parts.concat()));
        let number = prop_oneof![
            any::<i64>().prop_map(|i| i.to_string()),
            any::<u64>().prop_map(|i| i.to_string()),
            Just("18446744073709551616".to_string()),
            Just("-0".to_string()),
            Just("1e400".to_string()),
            Just("01".to_string()),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| format!("{f:e}")),
            (any::<i32>(), 0u32..1000).prop_map(|(a, b)| format!("{a}.{b}")),
        ];
        let leaf = prop_oneof![
            Just("null".to_string()),
            Just("true".to_string()),
            Just("false".to_string()),
            number,
            string.clone(),
        ];
        if depth == 0 {
            return leaf.boxed();
        }
        let inner = text(depth - 1);
        // "k" and "\u006b" are one key spelled two ways: a duplicate.
        let key = prop_oneof![
            string,
            Just("\"k\"".to_string()),
            Just("\"\\u006b\"".to_string()),
        ];
        let ws = prop_oneof![Just(""), Just(" "), Just("\n\t"), Just("\r\n")];
        prop_oneof![
            3 => leaf,
            1 => prop::collection::vec((inner.clone(), ws.clone()), 0..4).prop_map(|xs| {
                let xs: Vec<String> = xs.into_iter().map(|(x, w)| format!("{w}{x}{w}")).collect();
                format!("[{}]", xs.join(","))
            }),
            1 => prop::collection::vec((key, inner.clone()), 0..4)
            .prop_map(|ms| {
                let ms: Vec<String> = ms.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
                format!("{{{}}}", ms.join(","))
            }),
            // Nesting around MAX_DEPTH (32) and serde_json's own limit (128).
            1 => (28usize..36, inner).prop_map(|(n, x)| {
                format!("{}{x}{}", "[".repeat(n), "]".repeat(n))
            }),
        ]
        .boxed()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: cases(256), ..ProptestConfig::default() })]

        #[test]
        fn both_readers_agree_on_generated_documents(doc in text(3)) {
            check(doc.as_bytes());
        }

        #[test]
        fn both_readers_agree_on_mutated_documents(
            doc in text(2),
            edits in prop::collection::vec(
                (any::<prop::sample::Index>(), any::<u8>(), 0u8..3),
                1..4,
            ),
        ) {
            let mut b = doc.into_bytes();
            for (at, byte, how) in edits {
                let i = if b.is_empty() { 0 } else { at.index(b.len()) };
                match how {
                    0 if !b.is_empty() => b[i] = byte,
                    1 => b.insert(i, byte),
                    _ if !b.is_empty() => { b.remove(i); }
                    _ => b.push(byte),
                }
            }
            check(&b);
        }
    }
}
