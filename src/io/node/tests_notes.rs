//! The node probe prints nothing: it hands back the notes an operator is
//! owed about where its facts come from, terminal-safe (issue #23, "node
//! calls the sanitizer inside a library eprintln!"); the command prints each
//! once (tests/it/audit/node_notes.rs).

use crate::io::node;
use std::path::Path;

fn facts_fixture() -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/live/node-match.json"))
        .unwrap()
}

#[test]
fn the_probe_returns_the_facts_file_note_with_the_path_escaped() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("facts\u{1b}[31m\u{202e}.json");
    std::fs::write(&path, facts_fixture()).unwrap();
    let (_probe, notes) = node::probe(Some(&path), crate::service::audit::FACTS_ENV_NAMED).unwrap();
    let shown = path
        .to_string_lossy()
        .replace('\u{1b}', "\\x1b")
        .replace('\u{202e}', "\\u{202e}");
    assert_eq!(
        notes,
        vec![format!(
            "node facts come from KVCR_NODE_FACTS={shown}, not from this node"
        )]
    );
    assert!(!notes[0].contains('\u{1b}') && !notes[0].contains('\u{202e}'));
}

#[test]
fn a_bad_facts_file_is_an_error_and_no_note() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("facts.json");
    std::fs::write(&path, b"{").unwrap();
    let e = node::probe(Some(&path), crate::service::audit::FACTS_ENV_NAMED)
        .err()
        .expect("a bad facts file is an error");
    assert!(e.contains("bad node facts in"), "{e}");
}
