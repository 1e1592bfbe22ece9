//! The workspace layout README.md's "Workspace layout" describes: code that
//! more than one crate needs is a crate (crates/kvcr-testkit, xtask/), never
//! a file compiled into a second crate through `#[path]`, and the dev-only
//! members never reach the shipped binary's dependencies.

use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The lines of the `[section]` table of a Cargo.toml, up to the next table.
fn table<'a>(manifest: &'a str, section: &str) -> Vec<&'a str> {
    let head = format!("[{section}]");
    manifest
        .lines()
        .skip_while(|l| l.trim() != head)
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with('['))
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .collect()
}

#[test]
fn no_source_file_is_included_into_another_crate_by_path() {
    // Built so that this file does not match itself.
    let needle = concat!("#[", "path");
    let mut found = Vec::new();
    let mut scanned = 0;
    for top in [
        "src",
        "tests",
        "examples",
        "benches",
        "crates",
        "xtask",
        "fuzz/fuzz_targets",
        "python/src",
    ] {
        for e in walkdir::WalkDir::new(Path::new(ROOT).join(top)) {
            let e = e.unwrap();
            if !(e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "rs")) {
                continue;
            }
            scanned += 1;
            let text = std::fs::read_to_string(e.path()).unwrap();
            for (n, line) in text.lines().enumerate() {
                if line.trim_start().starts_with(needle) {
                    found.push(format!("{}:{}: {line}", e.path().display(), n + 1));
                }
            }
        }
    }
    assert!(scanned > 100, "only {scanned} files scanned");
    assert!(
        found.is_empty(),
        "a file compiled into a second crate: make it part of a crate \
         (crates/kvcr-testkit, xtask/) instead:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_dev_only_members_are_dev_dependencies_and_never_published() {
    let root = std::fs::read_to_string(Path::new(ROOT).join("Cargo.toml")).unwrap();
    let members = table(&root, "workspace").join("\n");
    for m in ["\".\"", "\"crates/kvcr-testkit\"", "\"xtask\""] {
        assert!(members.contains(m), "workspace members lack {m}: {members}");
    }
    // (cargo itself refuses either member under [dependencies]: both depend
    // on kvcr, a cycle only a dev-dependency may close.)
    let shipped = table(&root, "dependencies");
    assert!(shipped.len() > 5, "{shipped:?}");
    let dev = table(&root, "dev-dependencies");
    for (name, dir) in [("kvcr-testkit", "crates/kvcr-testkit"), ("xtask", "xtask")] {
        let starts = |l: &&str| l.trim_start().starts_with(&format!("{name} ="));
        assert!(
            !shipped.iter().any(starts),
            "{name} is a dependency of the shipped crate"
        );
        assert!(dev.iter().any(starts), "{name} is not a dev-dependency");
        let own = std::fs::read_to_string(Path::new(ROOT).join(dir).join("Cargo.toml")).unwrap();
        assert!(
            table(&own, "package").contains(&"publish = false"),
            "{dir}/Cargo.toml: publish = false"
        );
    }
    // Roff is rendered by the xtask only, never by the shipped binary.
    for l in shipped.iter().chain(&dev) {
        assert!(!l.contains("clap_mangen"), "Cargo.toml: {l}");
    }
}
