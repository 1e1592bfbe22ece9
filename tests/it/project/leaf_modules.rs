//! The leaf modules issue #23 made (text helpers, schema ids, the import's
//! plain values) name no other module of the crate, so that every layer can
//! use them without an arrow running up (tests/it/project/architecture.rs places
//! them in the lowest layer, where an arrow between two leaves would not
//! show).

use std::path::Path;

const LEAVES: &[&str] = &[
    "src/format/text.rs",
    "src/format/ids.rs",
    "src/import/spec.rs",
];

/// The lines of `text` before its unit tests that name `crate::` or
/// `super::` (comments and doc comments aside).
fn upward(text: &str) -> Vec<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    code.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .filter(|l| l.contains("crate::") || l.contains("super::"))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_leaf_modules_name_no_other_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for leaf in LEAVES {
        let text = std::fs::read_to_string(root.join(leaf)).unwrap();
        assert_eq!(upward(&text), Vec::<String>::new(), "{leaf}");
    }
}

#[test]
fn the_check_sees_a_crate_path() {
    assert_eq!(
        upward("//! crate::x in a doc\nuse crate::print::json;\n#[cfg(test)]\nuse super::x;\n"),
        vec!["use crate::print::json;".to_string()]
    );
}
