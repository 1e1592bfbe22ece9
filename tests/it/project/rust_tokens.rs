//! The one Rust lexer of the project's source checks (the layering and
//! cycle checks of `architecture`, the length check of `long_functions`):
//! tokens with their 1-based lines, comments gone, and every string, byte
//! string, raw string, char literal and lifetime one [`Tok::Other`], so no
//! brace or keyword inside a literal is ever seen.

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tok {
    Ident(String),
    Colons,
    Open,
    Close,
    Comma,
    Semi,
    Hash,
    Other,
}

/// Tokens with their line numbers; comments, strings and char literals gone.
pub(super) fn tokens(text: &str) -> Vec<(Tok, usize)> {
    let b = text.as_bytes();
    let mut i = 0;
    let mut line = 1;
    let mut out = Vec::new();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    while i < b.len() {
        let c = b[i];
        let prev_ident = i > 0 && ident(b[i - 1]);
        if c == b'\n' {
            line += 1;
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(b[i] == b'\n');
                    i += 1;
                }
            }
        } else if !prev_ident && (c == b'r' || (c == b'b' && b.get(i + 1) == Some(&b'r'))) && {
            // A raw string: r"…", r#"…"#, br"…".
            let start = if c == b'b' { i + 2 } else { i + 1 };
            let hashes = b[start..].iter().take_while(|&&h| h == b'#').count();
            b.get(start + hashes) == Some(&b'"')
        } {
            let start = if c == b'b' { i + 2 } else { i + 1 };
            let hashes = b[start..].iter().take_while(|&&h| h == b'#').count();
            let mut end = vec![b'"'];
            end.extend(std::iter::repeat_n(b'#', hashes));
            let mut j = start + hashes + 1;
            while j < b.len() && !b[j..].starts_with(&end) {
                line += usize::from(b[j] == b'\n');
                j += 1;
            }
            i = j + end.len();
            out.push((Tok::Other, line));
        } else if c == b'"' || (c == b'b' && !prev_ident && b.get(i + 1) == Some(&b'"')) {
            // A string or byte string.
            let mut j = if c == b'b' { i + 2 } else { i + 1 };
            while j < b.len() && b[j] != b'"' {
                if b[j] == b'\\' {
                    j += 1;
                }
                line += usize::from(b.get(j) == Some(&b'\n'));
                j += 1;
            }
            i = j + 1;
            out.push((Tok::Other, line));
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{1b}', '"', 'é'); else a lifetime.
            let rest = &b[i + 1..];
            let len = if rest.first() == Some(&b'\\') {
                rest.iter().position(|&x| x == b'\'').map(|p| p + 2)
            } else {
                let ch = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (rest.get(ch) == Some(&b'\'')).then_some(ch + 2)
            };
            match len {
                Some(n) => i += n,
                None => {
                    i += 1;
                    while i < b.len() && ident(b[i]) {
                        i += 1;
                    }
                }
            }
            out.push((Tok::Other, line));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let s = i;
            while i < b.len() && ident(b[i]) {
                i += 1;
            }
            out.push((Tok::Ident(text[s..i].to_string()), line));
        } else if b[i..].starts_with(b"::") {
            out.push((Tok::Colons, line));
            i += 2;
        } else {
            out.push((
                match c {
                    b'{' => Tok::Open,
                    b'}' => Tok::Close,
                    b',' => Tok::Comma,
                    b';' => Tok::Semi,
                    b'#' => Tok::Hash,
                    _ => Tok::Other,
                },
                line,
            ));
            i += 1;
        }
    }
    out
}

#[test]
fn literals_and_comments_hide_what_they_hold() {
    let text = "fn a() { \"}\"; b\"{\"; br#\"}\"#; r\"{\"; '}'; '\\''; 'é'; }\n\
                /* { /* } */ } */ // }\nfn b<'x>(v: &'x u8) {}\n";
    let t = tokens(text);
    let opens = t.iter().filter(|(x, _)| *x == Tok::Open).count();
    let closes = t.iter().filter(|(x, _)| *x == Tok::Close).count();
    assert_eq!((opens, closes), (2, 2), "{t:?}");
    let idents: Vec<(&str, usize)> = t
        .iter()
        .filter_map(|(x, l)| match x {
            Tok::Ident(s) => Some((s.as_str(), *l)),
            _ => None,
        })
        .collect();
    assert_eq!(
        idents,
        [
            ("fn", 1),
            ("a", 1),
            ("fn", 3),
            ("b", 3),
            ("v", 3),
            ("u8", 3)
        ]
    );
}
