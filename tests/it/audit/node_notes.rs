//! The node probe prints nothing: it hands back the notes an operator is
//! owed about where its facts come from, terminal-safe (src/io/node/tests_notes.rs),
//! and the command prints each once as `kvcr: note: …` (issue #23, "node
//! calls the sanitizer inside a library eprintln!").

use crate::util::kvcr;
use crate::util::testkit::{seal, to_bytes, Desc};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn facts_fixture() -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/live/node-match.json"))
        .unwrap()
}

#[test]
fn the_command_prints_the_note_once_with_its_prefix() {
    let t = tempfile::tempdir().unwrap();
    let d = Desc::new("llama3-70b-a", 0, 4, 1);
    for rank in 0..d.tp * d.pp {
        let mut r = d.clone();
        r.rank = rank;
        let mut v = r.value();
        seal(&mut v);
        let p = t.path().join(format!("rank-{rank}.json"));
        std::fs::write(&p, to_bytes(&v)).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let f = tempfile::tempdir().unwrap();
    let facts = f.path().join("facts\u{1b}.json");
    std::fs::write(&facts, facts_fixture()).unwrap();
    let out = kvcr()
        .env("KVCR_NODE_FACTS", &facts)
        .arg("audit")
        .arg(t.path())
        .args(["--live", "--format", "json"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8(out.stderr).unwrap();
    let want = format!(
        "kvcr: note: node facts come from KVCR_NODE_FACTS={}, not from this node\n",
        facts.to_string_lossy().replace('\u{1b}', "\\x1b")
    );
    assert_eq!(err.matches(&want).count(), 1, "{err}");
    assert!(!err.contains('\u{1b}'), "{err}");
}
