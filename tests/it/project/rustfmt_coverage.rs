//! `cargo fmt --check` covers every line of code.
//!
//! rustfmt leaves a whole statement (a closure body, a `vec![…]`, a whole
//! function) as written when it cannot fit one of its lines into
//! `max_width` (100, the default: the project has no rustfmt.toml), and it
//! says nothing: `cargo fmt --check` then passes over code it never looked
//! at. The usual cause is one long string literal. This test fails, naming
//! file:line, on any line of `src/`, `tests/`, `examples/`, `benches/` or
//! the other workspace members (`crates/`, `xtask/`) longer than 100
//! characters outside a comment or a raw string. Break such a string with a
//! `\` continuation (the next line's leading spaces are not part of the
//! string) or `concat!`.
//!
//! (`rustfmt --config error_on_line_overflow=true,error_on_unformatted=true`
//! reports these lines too, and rustfmt 1.9.0-stable applied both here; but
//! they are documented as unstable, the first alone misses an overlong
//! string, and together they also report long comments and raw strings.
//! This check needs only std.)
//!
//! [`KNOWN`] lists the files that still hold such lines; the list must be
//! exact, so it shrinks as they are fixed.

use std::collections::BTreeMap;
use std::path::Path;

const MAX_WIDTH: usize = 100;

/// Files allowed to have lines over [`MAX_WIDTH`]: none since issue #23.
/// Add an entry only with a reason, and remove it when its file is fixed:
/// the test fails while a listed file has no such line.
const KNOWN: &[&str] = &[];

/// The 1-based numbers of the lines of `text` that are longer than
/// `MAX_WIDTH` characters and hold code: not a `//` comment line, not a line
/// that starts inside or ends inside a raw string. Ordinary strings count:
/// they are what makes rustfmt give up.
fn overlong(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    // Some(n): inside a raw string opened with n `#`.
    let mut raw: Option<usize> = None;
    let mut in_str = false;
    for (n, line) in text.lines().enumerate() {
        let began_in_raw = raw.is_some();
        let b = line.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if let Some(h) = raw {
                let close = format!("\"{}", "#".repeat(h));
                match find(&b[i..], close.as_bytes()) {
                    Some(j) => {
                        i += j + close.len();
                        raw = None;
                    }
                    None => i = b.len(),
                }
                continue;
            }
            let c = b[i];
            if in_str {
                match c {
                    b'\\' => i += 2,
                    b'"' => {
                        in_str = false;
                        i += 1;
                    }
                    _ => i += 1,
                }
                continue;
            }
            if b[i..].starts_with(b"//") {
                break;
            }
            let word_start = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
            if word_start && (c == b'r' || (c == b'b' && b.get(i + 1) == Some(&b'r'))) {
                let mut j = if c == b'b' { i + 2 } else { i + 1 };
                let mut h = 0;
                while b.get(j) == Some(&b'#') {
                    h += 1;
                    j += 1;
                }
                if b.get(j) == Some(&b'"') {
                    raw = Some(h);
                    i = j + 1;
                    continue;
                }
            }
            match c {
                b'"' => in_str = true,
                // A char literal ('"', '\'', '\u{..}') must not open a string;
                // a lifetime ('a) has no closing quote and is skipped as one byte.
                b'\'' if b.get(i + 1) == Some(&b'\\') => {
                    if let Some(k) = find(b.get(i + 2..).unwrap_or(&[]), b"'") {
                        i += 2 + k;
                    }
                }
                b'\'' if b.get(i + 2) == Some(&b'\'') => i += 2,
                _ => {}
            }
            i += 1;
        }
        let code = !line.trim_start().starts_with("//");
        if line.chars().count() > MAX_WIDTH && code && !began_in_raw && raw.is_none() {
            out.push(n + 1);
        }
    }
    out
}

/// Where `needle` first occurs in `hay` (bytes: a line is scanned byte by
/// byte, and an escape may leave the index inside a UTF-8 sequence).
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn rust_files(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for top in ["src", "tests", "examples", "benches", "crates", "xtask"] {
        for e in walkdir::WalkDir::new(root.join(top)) {
            let e = e.unwrap();
            if e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "rs") {
                let rel = e.path().strip_prefix(root).unwrap();
                out.push(rel.to_str().unwrap().to_string());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn no_line_of_code_is_too_long_for_rustfmt() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for f in rust_files(root) {
        let text = std::fs::read_to_string(root.join(&f)).unwrap();
        let lines = overlong(&text);
        if !lines.is_empty() {
            found.insert(f, lines);
        }
    }
    let new: Vec<String> = found
        .iter()
        .filter(|(f, _)| !KNOWN.contains(&f.as_str()))
        .flat_map(|(f, ls)| ls.iter().map(move |l| format!("{f}:{l}")))
        .collect();
    assert!(
        new.is_empty(),
        "lines over {MAX_WIDTH} characters that make rustfmt skip the code around them \
         (break the string with a `\\` continuation):\n{}",
        new.join("\n")
    );
    let fixed: Vec<&&str> = KNOWN.iter().filter(|f| !found.contains_key(**f)).collect();
    assert!(
        fixed.is_empty(),
        "no longer hold an overlong line: remove them from KNOWN: {fixed:?}"
    );
}

#[test]
fn the_width_check_sees_a_long_string_and_not_a_comment_or_raw_string() {
    let long = "x".repeat(MAX_WIDTH);
    let text = format!(
        "fn f() {{\n    g(\"{long}\");\n    // {long}\n    let r = r#\"\n{long}\n\"#;\n    \
         let c = '\"'; let s = \"a\";\n    h(\"{long}\\\n    \");\n}}\n"
    );
    assert_eq!(overlong(&text), vec![2, 8], "{text}");
    // A char literal '"' must not open a string (which would hide the raw
    // string after it).
    let fine = format!("let q = '\"'; let r = r#\"\n{long}\n\"#;\n");
    assert_eq!(overlong(&fine), Vec::<usize>::new());
}
