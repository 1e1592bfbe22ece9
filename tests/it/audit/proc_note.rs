//! The `KVCR_PROC_ROOT` test hook's note is a value the library hands back
//! (`ProcFs::note`, and `node::probe` among its notes: src/io/node/tests_proc_note.rs,
//! which also checks the library prints nothing), never a line the library
//! prints: the command line prints it once, as `kvcr: note: …`, for every
//! command that opens files (issue #23, "return the note instead of
//! printing it").

use crate::util::kvcr;
use crate::util::testkit::{put_group, Desc};
use std::path::Path;

/// The test hook (`node::proc::ROOT_ENV`).
const ROOT_ENV: &str = "KVCR_PROC_ROOT";

/// The note for a hook naming `dir` (the test kit's `proc::hook_note`).
fn announced(dir: &Path) -> String {
    crate::util::testkit::proc::hook_note(dir)
}

/// A directory (not procfs) whose name holds terminal controls.
fn hostile_root() -> (tempfile::TempDir, std::path::PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let dir = crate::util::testkit::proc::hostile_root(t.path());
    (t, dir)
}

fn inventory() -> tempfile::TempDir {
    let inv = tempfile::tempdir().unwrap();
    put_group(inv.path(), "", &Desc::new("proc-note", 0, 2, 1));
    inv
}

#[test]
fn a_live_audit_announces_the_hook_once_then_why_proc_is_not_trusted() {
    let (_t, dir) = hostile_root();
    let inv = inventory();
    let out = kvcr()
        .env(ROOT_ENV, &dir)
        .arg("audit")
        .arg(inv.path())
        .args(["--live", "--format", "json"])
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    // Every descriptor is KV005 (nothing opens race-free): a rejection.
    assert_eq!(out.status.code(), Some(1), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.to_string().contains("KV005"), "{v:#}");
    let note = announced(&dir);
    assert_eq!(err.matches(&note).count(), 1, "{err}");
    assert_eq!(err.matches("kvcr: note: ").count(), 2, "{err}");
    let untrusted = err.find("is not procfs").expect("the untrusted note");
    assert!(err.find(&note).unwrap() < untrusted, "hook first: {err}");
    assert!(err.contains("are not checked\n"), "{err}");
    assert!(
        !err.contains('\u{1b}') && !err.contains('\u{202e}'),
        "{err}"
    );
}

#[test]
fn an_audit_without_live_and_examine_announce_the_hook_too() {
    let inv = inventory();
    // The real /proc named through the hook: trusted, read as usual, and
    // still announced (the hook changed what files are opened through).
    let proc = Path::new("/proc");
    let out = kvcr()
        .env(ROOT_ENV, proc)
        .arg("audit")
        .arg(inv.path())
        .args(["--format", "json"])
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(err, announced(proc));
    let out = kvcr()
        .env(ROOT_ENV, proc)
        .arg("examine")
        .arg(inv.path().join("rank-0.json"))
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(err, announced(proc));
}

#[test]
fn without_the_hook_or_for_built_in_text_nothing_is_announced() {
    let inv = inventory();
    let out = kvcr()
        .arg("audit")
        .arg(inv.path())
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8(out.stderr).unwrap(), "");
    let (_t, dir) = hostile_root();
    for args in [
        &["explain"][..],
        &["explain", "KV005"],
        &["schema", "error"],
    ] {
        let out = kvcr().env(ROOT_ENV, &dir).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert_eq!(String::from_utf8(out.stderr).unwrap(), "", "{args:?}");
    }
}
