//! The JSON writer of every kvcr document (docs/format.md §9.6): one
//! pretty document whose strings are escaped beyond what JSON requires
//! (DEL, C1 controls, bidi overrides and the other dangerous characters as
//! `\uXXXX`), so it is safe to print on a terminal and means the same to
//! any JSON reader.

use crate::format::text::{is_dangerous, is_plain_ascii};
use serde::Serialize;
use std::io::{self, Write};

/// A formatter that also escapes terminal-dangerous characters.
struct SafeFormatter(serde_json::ser::PrettyFormatter<'static>);

impl serde_json::ser::Formatter for SafeFormatter {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        frag: &str,
    ) -> io::Result<()> {
        // Printable ASCII holds no dangerous character: written as is.
        if is_plain_ascii(frag) {
            return w.write_all(frag.as_bytes());
        }
        let mut start = 0;
        for (i, c) in frag.char_indices() {
            if is_dangerous(c) {
                w.write_all(&frag.as_bytes()[start..i])?;
                // Outside the BMP (tag characters, planes 15 and 16), JSON
                // spells a character as its UTF-16 surrogate pair.
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    write!(w, "\\u{:04x}", u)?;
                }
                start = i + c.len_utf8();
            }
        }
        w.write_all(&frag.as_bytes()[start..])
    }
    // Delegate layout to the pretty formatter.
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// Writes any serialisable value as one pretty, terminal-safe JSON document.
///
/// The serializer writes through a buffer of its own type, not straight
/// into `out`: `out` is most often a `dyn Write` (the command's stdout), and
/// the serializer's many small writes (a bracket, a colon, two spaces of
/// indentation) would each be a dynamic call. Through the buffer each is an
/// inlined copy, and `out` gets a call per 64 KiB.
pub fn write<T: Serialize, W: Write + ?Sized>(out: &mut W, value: &T) -> io::Result<()> {
    let mut buf = io::BufWriter::with_capacity(1 << 16, &mut *out);
    let mut ser = serde_json::Serializer::with_formatter(
        &mut buf,
        SafeFormatter(serde_json::ser::PrettyFormatter::new()),
    );
    value.serialize(&mut ser).map_err(io::Error::other)?;
    buf.write_all(b"\n")?;
    buf.flush()
}

#[cfg(test)]
fn is_dangerous_raw(c: char) -> bool {
    c != '\n' && is_dangerous(c)
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_dangerous_characters_and_stays_valid() {
        let mut buf = Vec::new();
        super::write(
            &mut buf,
            &serde_json::json!({"p": "a\u{1b}b\u{9b}c\u{202e}d/é"}),
        )
        .unwrap();
        let s = String::from_utf8(buf).unwrap();
        assert!(s.contains(r"a\u001bb\u009bc\u202ed/é"), "{s}");
        assert!(!s.chars().any(super::is_dangerous_raw));
        let back: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back["p"], "a\u{1b}b\u{9b}c\u{202e}d/é");
    }

    #[test]
    fn escapes_by_general_category_with_surrogate_pairs() {
        let raw =
            "x\u{ad}\u{600}\u{180e}\u{206a}\u{fff9}\u{e0041}\u{2028}\u{e000}\u{378}\u{10fffd}日本é";
        let mut buf = Vec::new();
        super::write(&mut buf, &serde_json::json!({ "p": raw })).unwrap();
        let s = String::from_utf8(buf).unwrap();
        assert!(
            s.contains(
                r"x\u00ad\u0600\u180e\u206a\ufff9\udb40\udc41\u2028\ue000\u0378\udbff\udffd日本é"
            ),
            "{s}"
        );
        assert!(!s.chars().any(super::is_dangerous_raw));
        let back: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back["p"], raw);
    }
}
