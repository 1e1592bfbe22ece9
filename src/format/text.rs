//! Text helpers every layer may use (a leaf: it names no other module of
//! the crate): the terminal sanitizer, the operator's duration and size.
//!
//! Terminal safety: descriptor strings and file names are untrusted, so
//! characters a terminal could act on, or that change what an operator
//! reads without being seen, are escaped before they reach a terminal (the
//! table, stderr) or a JSON document (`print::json`), by one rule:
//! [`is_dangerous`].

use std::borrow::Cow;
use unicode_general_category::{get_general_category, GeneralCategory};

/// Characters escaped everywhere, by Unicode general category (the tables
/// of the `unicode-general-category` crate, not a hand-written list):
/// Cc controls (C0, DEL, C1), Cf format characters (bidi controls and
/// isolates, zero-width characters, soft hyphen, U+0600, U+180E, U+206A,
/// U+FFF9, tag characters, ...), Zl and Zp (U+2028, U+2029), Co private use
/// and Cn unassigned code points (whose meaning a newer terminal may give
/// them). ASCII is decided without a table lookup.
#[inline]
pub fn is_dangerous(c: char) -> bool {
    if c.is_ascii() {
        return c < ' ' || c == '\u{7f}';
    }
    matches!(
        get_general_category(c),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
            | GeneralCategory::PrivateUse
            | GeneralCategory::Unassigned
            | GeneralCategory::Surrogate
    )
}

/// True when `s` is printable ASCII only: nothing to escape (the fast path
/// of both printers).
#[inline]
pub fn is_plain_ascii(s: &str) -> bool {
    s.bytes().all(|b| (0x20..0x7f).contains(&b))
}

/// Escapes dangerous characters as `\xNN` (below U+0100) or `\u{NNNN}`.
pub fn terminal(s: &str) -> Cow<'_, str> {
    if is_plain_ascii(s) || !s.chars().any(is_dangerous) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_dangerous(c) {
            let n = c as u32;
            if n < 0x100 {
                out.push_str(&format!("\\x{n:02x}"));
            } else {
                out.push_str(&format!("\\u{{{n:04x}}}"));
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `3d 4h`, `5m 2s`, `850ms`: coarse, for operators.
pub fn human_duration_ms(ms: u64) -> String {
    let s = ms / 1000;
    if s == 0 {
        return format!("{ms}ms");
    }
    let (d, h, m, sec) = (s / 86400, (s % 86400) / 3600, (s % 3600) / 60, s % 60);
    if d > 0 {
        format!("{d}d {h}h")
    } else if h > 0 {
        format!("{h}h {m}m")
    } else if m > 0 {
        format!("{m}m {sec}s")
    } else {
        format!("{sec}s")
    }
}

/// `1.5 GiB`, `512 MiB`, `4 KiB`, `17 B`.
pub fn human_bytes(n: u128) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else if v >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::{human_bytes, human_duration_ms, terminal};

    #[test]
    fn human_sizes() {
        assert_eq!(human_bytes(17), "17 B");
        assert_eq!(human_bytes(3 << 20), "3 MiB");
        assert_eq!(human_bytes(1536 << 20), "1.5 GiB");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1024), "1 KiB");
        assert_eq!(human_bytes(150 << 30), "150 GiB");
        assert_eq!(
            human_bytes(u128::MAX),
            format!("{:.0} PiB", u128::MAX as f64 / 1024f64.powi(5))
        );
    }

    #[test]
    fn durations() {
        assert_eq!(human_duration_ms(850), "850ms");
        assert_eq!(human_duration_ms(62_000), "1m 2s");
        assert_eq!(
            human_duration_ms(3 * 86400 * 1000 + 4 * 3600 * 1000),
            "3d 4h"
        );
    }

    #[test]
    fn escapes_controls_and_bidi() {
        assert_eq!(terminal("rank-1.json"), "rank-1.json");
        assert_eq!(terminal("a\u{1b}[31mb"), "a\\x1b[31mb");
        assert_eq!(terminal("x\u{9b}y"), "x\\x9by");
        assert_eq!(terminal("\u{202e}gpj.exe"), "\\u{202e}gpj.exe");
        assert_eq!(terminal("tab\there"), "tab\\x09here");
        assert_eq!(terminal("é ok"), "é ok");
    }

    #[test]
    fn escapes_by_general_category() {
        for (c, want) in [
            ('\u{ad}', "\\xad"),           // Cf soft hyphen
            ('\u{600}', "\\u{0600}"),      // Cf Arabic number sign
            ('\u{180e}', "\\u{180e}"),     // Cf Mongolian vowel separator
            ('\u{206a}', "\\u{206a}"),     // Cf inhibit symmetric swapping
            ('\u{fff9}', "\\u{fff9}"),     // Cf interlinear annotation anchor
            ('\u{e0041}', "\\u{e0041}"),   // Cf tag latin capital A
            ('\u{202e}', "\\u{202e}"),     // Cf right-to-left override
            ('\u{2028}', "\\u{2028}"),     // Zl
            ('\u{2029}', "\\u{2029}"),     // Zp
            ('\u{e000}', "\\u{e000}"),     // Co
            ('\u{10fffd}', "\\u{10fffd}"), // Co, plane 16
            ('\u{378}', "\\u{0378}"),      // Cn
            ('\u{fffe}', "\\u{fffe}"),     // Cn noncharacter
            ('\u{e0080}', "\\u{e0080}"),   // Cn between tags and variation selectors
            ('\u{85}', "\\x85"),           // Cc NEL
        ] {
            assert_eq!(terminal(&format!("a{c}b")), format!("a{want}b"), "{c:?}");
        }
        // Letters, marks, symbols and spaces of other scripts stay.
        for s in ["é", "日本", "e\u{301}", "\u{1f600}", "a\u{a0}b", "\u{fe0f}"] {
            assert_eq!(terminal(s), s);
        }
    }
}
