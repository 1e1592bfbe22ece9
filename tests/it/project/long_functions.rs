//! No function in src/ runs past [`MAX_LINES`] lines unless it says why
//! (issue #37: "every file of src/ holds one idea (no function over ~150
//! lines without a reason in its comment)"). The reason is a comment that
//! starts `// long:` in the comment and attribute lines right above the
//! `fn` (its doc comment included). A function is counted from its `fn`
//! line to its closing brace; a nested function is counted on its own too.

use super::rust_tokens::{tokens, Tok};
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
            .position(|(t, _)| matches!(t, Tok::Open | Tok::Semi))
            .map(|p| p + k + 2)
            .filter(|&p| toks[p].0 == Tok::Open)
        else {
            continue;
        };
        let mut depth = 0usize;
        let mut last = None;
        for (t, l) in &toks[open..] {
            match t {
                Tok::Open => depth += 1,
                Tok::Close => {
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
