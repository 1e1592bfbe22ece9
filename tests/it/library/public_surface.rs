//! The crate's public surface is what docs/format.md §13 lists, and nothing
//! hides beside it (issue #22: "the hidden internals facade goes"): every
//! `pub mod` of src/lib.rs is named in §13's list of public modules and the
//! list names nothing else, src/lib.rs has no `#[doc(hidden)]` item, and the
//! code outside the crate (tests/, benches/, examples/, fuzz/, python/)
//! names only public modules of `kvcr`.

use crate::util::repo;
use std::collections::BTreeSet;
use std::path::Path;

/// The modules src/lib.rs makes public: `pub mod NAME;` or `pub mod NAME {`,
/// and the modules it re-exports from the folders (`pub use format::{NAME,
/// …};`, `pub use api::NAME;`: lower-case names; `VERSION` is a constant).
fn public_modules() -> BTreeSet<String> {
    let lib = std::fs::read_to_string(repo().join("src/lib.rs")).unwrap();
    let mut out = BTreeSet::new();
    for l in lib.lines() {
        if let Some(rest) = l.strip_prefix("pub mod ") {
            out.insert(rest.trim_end_matches(['{', ';', ' ']).trim().to_string());
        } else if let Some(rest) = l.strip_prefix("pub use ") {
            let rest = rest.trim_end_matches(';');
            let names = match rest.split_once("::{") {
                Some((_, list)) => list.trim_end_matches('}').to_string(),
                None => rest.rsplit("::").next().unwrap_or_default().to_string(),
            };
            out.extend(
                names
                    .split(',')
                    .map(str::trim)
                    .filter(|n| n.starts_with(|c: char| c.is_ascii_lowercase()))
                    .map(str::to_string),
            );
        }
    }
    out
}

/// The backticked names of docs/format.md §13's paragraph on the crate's
/// public modules ("The Rust crate's public modules are ...").
fn documented_modules() -> BTreeSet<String> {
    let doc = std::fs::read_to_string(repo().join("docs/format.md")).unwrap();
    let start = doc
        .find("The Rust crate's public modules are")
        .expect("docs/format.md §13 lists the crate's public modules");
    let para = &doc[start..];
    let para = &para[..para.find("\n\n").unwrap_or(para.len())];
    // Up to "Nothing else is public": the names after it are not modules.
    let para = &para[..para.find("Nothing else").unwrap_or(para.len())];
    para.split('`')
        .skip(1)
        .step_by(2)
        .flat_map(|n| n.split('/'))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_public_module_is_documented_and_nothing_else_is() {
    let public = public_modules();
    assert!(
        public.contains("api") && public.contains("display"),
        "{public:?}"
    );
    let documented = documented_modules();
    // `run` and `command` are the command line's two functions, listed
    // with the modules.
    let mut want = public.clone();
    want.insert("run".into());
    want.insert("command".into());
    assert_eq!(documented, want, "docs/format.md §13 and src/lib.rs differ");
}

#[test]
fn nothing_public_is_hidden() {
    let lib = std::fs::read_to_string(repo().join("src/lib.rs")).unwrap();
    assert!(!lib.contains("doc(hidden)"), "src/lib.rs hides an item");
    assert!(!public_modules().contains("internals"));
}

/// Every `kvcr_audit::NAME` path in the `.rs` files below `dir`.
fn named(dir: &Path, out: &mut BTreeSet<(String, String)>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        // This file's own text names example paths.
        if name == "target" || name.starts_with('.') || name == "public_surface.rs" {
            continue;
        }
        if p.is_dir() {
            named(&p, out);
        } else if name.ends_with(".rs") {
            let text = std::fs::read_to_string(&p).unwrap();
            for (i, _) in text.match_indices("kvcr_audit::") {
                // A longer identifier ending in `kvcr` is another crate.
                let before = text[..i].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let rest = &text[i + "kvcr_audit::".len()..];
                let ident = |s: &str| -> String {
                    s.trim_start()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect()
                };
                let shown = p.strip_prefix(repo()).unwrap_or(&p).display().to_string();
                // `kvcr_audit::{a::b, c}`: each first segment of the use tree.
                let names: Vec<String> = match rest.strip_prefix('{') {
                    Some(tree) => {
                        let tree = &tree[..tree.find('}').unwrap_or(tree.len())];
                        tree.split(',').map(ident).collect()
                    }
                    None => vec![ident(rest)],
                };
                for n in names.into_iter().filter(|n| !n.is_empty()) {
                    out.insert((n, shown.clone()));
                }
            }
        }
    }
}

#[test]
fn code_outside_the_crate_names_only_public_modules() {
    let mut allowed = public_modules();
    for item in ["run", "command", "VERSION"] {
        allowed.insert(item.into());
    }
    let mut uses = BTreeSet::new();
    for dir in ["tests", "benches", "examples", "fuzz", "python/src"] {
        named(&repo().join(dir), &mut uses);
    }
    assert!(
        uses.iter().any(|(n, _)| n == "api"),
        "the scan found no use of kvcr_audit::api"
    );
    let bad: Vec<String> = uses
        .iter()
        .filter(|(n, _)| !allowed.contains(n))
        .map(|(n, f)| format!("{f}: kvcr_audit::{n}"))
        .collect();
    assert!(bad.is_empty(), "not public: {bad:#?}");
}
