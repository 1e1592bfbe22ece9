//! No function in src/ runs past [`MAX_LINES`] lines unless it says why
//! (issue #37: "every file of src/ holds one idea (no function over ~150
//! lines without a reason in its comment)"). The reason is a comment that
//! starts `// long:` in the comment and attribute lines right above the
//! `fn` (its doc comment included). A function is counted from its `fn`
//! line to its closing brace; a nested function is counted on its own too.

use crate::util::repo;
use std::path::Path;

/// The most lines a function may take without a `// long:` reason.
const MAX_LINES: usize = 150;

/// Folders of src/ not checked yet: none (src/offload/ was the last).
const NOT_YET: &[&str] = &[];

/// A function found in a source text.
#[derive(Debug, PartialEq, Eq)]
struct Function {
    name: String,
    /// 1-based lines of `fn` and of the closing brace.
    first: usize,
    last: usize,
    /// A `// long:` comment stands right above it.
    reason: bool,
}

impl Function {
    fn lines(&self) -> usize {
        self.last - self.first + 1
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Punct(char),
}

/// The identifiers and the punctuation `{ } ; (` of `text`, each with its
/// 1-based line, comments and string and char literals skipped.
fn tokens(text: &str) -> Vec<(Tok, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    while i < b.len() {
        let c = b[i];
        let prev_ident = i > 0 && ident(b[i - 1]);
        if c == b'\n' {
            line += 1;
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
        } else if c == b'"' || (c == b'b' && !prev_ident && b.get(i + 1) == Some(&b'"')) {
            let mut j = if c == b'b' { i + 2 } else { i + 1 };
            while j < b.len() && b[j] != b'"' {
                if b[j] == b'\\' {
                    j += 1;
                }
                line += usize::from(b.get(j) == Some(&b'\n'));
                j += 1;
            }
            i = j + 1;
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{1b}', '"'); else a lifetime.
            let rest = &b[i + 1..];
            let len = if rest.first() == Some(&b'\\') {
                rest.iter().position(|&x| x == b'\'').map(|p| p + 2)
            } else {
                let ch = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (rest.get(ch) == Some(&b'\'')).then_some(ch + 2)
            };
            i += len.unwrap_or(1);
        } else if ident(c) {
            let start = i;
            while i < b.len() && ident(b[i]) {
                i += 1;
            }
            out.push((Tok::Ident(text[start..i].to_string()), line));
        } else {
            if matches!(c, b'{' | b'}' | b';' | b'(') {
                out.push((Tok::Punct(c as char), line));
            }
            i += 1;
        }
    }
    out
}

/// Whether a `// long:` comment stands in the comment and attribute lines
/// right above line `first` (1-based).
fn has_reason(lines: &[&str], first: usize) -> bool {
    lines[..first - 1]
        .iter()
        .rev()
        .map(|l| l.trim_start())
        .take_while(|l| l.starts_with("//") || l.starts_with("#[") || l.starts_with(')'))
        .any(|l| l.starts_with("// long:"))
}

/// Every function with a body in `text`.
fn functions(text: &str) -> Vec<Function> {
    let toks = tokens(text);
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (k, (t, line)) in toks.iter().enumerate() {
        let (Tok::Ident(kw), Some((Tok::Ident(name), _))) = (t, toks.get(k + 1)) else {
            continue;
        };
        if kw != "fn" {
            continue;
        }
        // The body is the first `{` before any `;` (a declaration has none).
        let Some(open) = toks[k + 2..]
            .iter()
            .position(|(t, _)| matches!(t, Tok::Punct('{') | Tok::Punct(';')))
            .map(|p| p + k + 2)
            .filter(|&p| toks[p].0 == Tok::Punct('{'))
        else {
            continue;
        };
        let mut depth = 0usize;
        let mut last = None;
        for (t, l) in &toks[open..] {
            match t {
                Tok::Punct('{') => depth += 1,
                Tok::Punct('}') => {
                    depth -= 1;
                    if depth == 0 {
                        last = Some(*l);
                        break;
                    }
                }
                _ => {}
            }
        }
        let last = last.unwrap_or_else(|| panic!("fn {name} at line {line} never closes"));
        out.push(Function {
            name: name.clone(),
            first: *line,
            last,
            reason: has_reason(&lines, *line),
        });
    }
    out
}

/// Every function of `src` (not under [`NOT_YET`]) longer than
/// [`MAX_LINES`] without a reason, as `path:line: name (N lines)`.
fn too_long(src: &Path) -> (Vec<String>, usize) {
    let mut bad = Vec::new();
    let mut seen = 0;
    for e in walkdir::WalkDir::new(src).sort_by_file_name() {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(src).unwrap();
        if NOT_YET.iter().any(|d| rel.starts_with(d))
            || !(e.file_type().is_file() && rel.extension().is_some_and(|x| x == "rs"))
        {
            continue;
        }
        let text = std::fs::read_to_string(e.path()).unwrap();
        for f in functions(&text) {
            seen += 1;
            if f.lines() > MAX_LINES && !f.reason {
                bad.push(format!(
                    "src/{}:{}: {} ({} lines)",
                    rel.display(),
                    f.first,
                    f.name,
                    f.lines()
                ));
            }
        }
    }
    (bad, seen)
}

#[test]
fn no_function_in_src_is_over_150_lines_without_a_reason() {
    let (bad, seen) = too_long(&repo().join("src"));
    assert!(seen > 1000, "the scan found only {seen} functions");
    assert!(
        bad.is_empty(),
        "functions over {MAX_LINES} lines: split them, or say why not in a \
         `// long:` comment right above the fn:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_folders_not_yet_checked_still_exist() {
    for d in NOT_YET {
        assert!(
            repo().join("src").join(d).is_dir(),
            "src/{d} is gone: remove it from NOT_YET"
        );
    }
}

#[test]
fn the_scanner_counts_bodies_and_skips_literals_and_declarations() {
    let body = "    let x = 1;\n".repeat(151);
    let text = format!(
        "trait T {{\n    fn declared(&self);\n}}\n\
         fn short(f: fn(u8) -> u8) -> char {{\n    let _ = \"{{ }} fn no\";\n    '{{'\n}}\n\
         /// Docs.\n// long: a planted reason.\n#[inline]\nfn long_with_reason() {{\n{body}}}\n\
         fn long_without() {{\n    let _ = r#\"}}\"#;\n    \
         fn inner<'a>(s: &'a str) -> &'a str {{ s }}\n{body}}}\n"
    );
    let fs = functions(&text);
    let got: Vec<(&str, usize, bool)> = fs
        .iter()
        .map(|f| (f.name.as_str(), f.lines(), f.reason))
        .collect();
    assert_eq!(
        got,
        [
            ("short", 4, false),
            ("long_with_reason", 153, true),
            ("long_without", 155, false),
            ("inner", 1, false),
        ]
    );
    // Planted in a tree: only the one without a reason is named.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("lib.rs"), &text).unwrap();
    let (bad, seen) = too_long(dir.path());
    assert_eq!(seen, 4);
    assert_eq!(bad, ["src/lib.rs:164: long_without (155 lines)"]);
}
