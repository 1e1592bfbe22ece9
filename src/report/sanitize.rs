//! Terminal safety: descriptor strings and file names are untrusted, so
//! control and bidirectional-override characters are escaped before they
//! reach a terminal.

use std::borrow::Cow;

/// Characters a terminal could act on: C0/C1 controls, DEL, and the Unicode
/// bidi/format characters that can reorder what an operator reads.
pub fn is_dangerous(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{061c}'
        | '\u{200b}'..='\u{200f}'
        | '\u{2028}'..='\u{202e}'
        | '\u{2060}'..='\u{2069}'
        | '\u{feff}')
}

/// Escapes dangerous characters as `\xNN` (below U+0100) or `\u{NNNN}`.
pub fn terminal(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_dangerous) {
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

#[cfg(test)]
mod tests {
    use super::terminal;

    #[test]
    fn escapes_controls_and_bidi() {
        assert_eq!(terminal("rank-1.json"), "rank-1.json");
        assert_eq!(terminal("a\u{1b}[31mb"), "a\\x1b[31mb");
        assert_eq!(terminal("x\u{9b}y"), "x\\x9by");
        assert_eq!(terminal("\u{202e}gpj.exe"), "\\u{202e}gpj.exe");
        assert_eq!(terminal("tab\there"), "tab\\x09here");
        assert_eq!(terminal("é ok"), "é ok");
    }
}
