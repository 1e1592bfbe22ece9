//! The `KVCR_PROC_ROOT` test hook's note is a value the library hands back
//! (`ProcFs::note`, and `node::probe` among its notes), never a line the
//! library prints: the command line prints it once, as `kvcr: note: …`, for
//! every command that opens files (issue #23, "return the note instead of
//! printing it").

use crate::util::kvcr;
use crate::util::testkit::{put_group, Desc};
use kvcr::internals::node;
use kvcr::internals::node::proc::{ProcFs, ROOT_ENV};
use std::ffi::OsStr;
use std::path::Path;

/// The note for a hook naming `dir`, as the operator sees it (with the
/// prefix the command adds), the path escaped as the terminal sanitizer does.
fn announced(dir: &Path) -> String {
    format!(
        "kvcr: note: /proc is read from KVCR_PROC_ROOT={}, a test hook\n",
        dir.to_string_lossy()
            .replace('\u{1b}', "\\x1b")
            .replace('\u{202e}', "\\u{202e}")
    )
}

/// A directory (not procfs) whose name holds terminal controls.
fn hostile_root() -> (tempfile::TempDir, std::path::PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("proc\u{1b}[31m\u{202e}");
    std::fs::create_dir(&dir).unwrap();
    (t, dir)
}

#[test]
fn the_hook_note_is_returned_escaped_and_only_when_the_hook_is_set() {
    let (_t, dir) = hostile_root();
    let p = ProcFs::from_hook(Some(dir.as_os_str()));
    let note = p.note().expect("the hook has a note");
    assert_eq!(
        format!("kvcr: note: {note}\n"),
        announced(&dir),
        "the note names the hook and the escaped path"
    );
    assert!(
        !note.contains('\u{1b}') && !note.contains('\u{202e}'),
        "{note}"
    );
    // The hook's root is checked like /proc: a plain directory is refused.
    assert!(p.untrusted().unwrap().contains("is not procfs"));
    assert_eq!(p.label(), dir.to_string_lossy());
    // Unset or empty: /proc itself, and nothing to say.
    for unset in [None, Some(OsStr::new(""))] {
        let p = ProcFs::from_hook(unset);
        assert_eq!(p.note(), None);
        assert_eq!(p.label(), "/proc");
    }
    // ProcFs::open (the tests' constructor) is no hook either.
    assert_eq!(ProcFs::open(&dir).note(), None);
}

/// Run by [`the_library_prints_nothing_itself`] in a child process with the
/// hook set (ignored otherwise): the library hands back the note, and
/// whatever it printed lands on the child's stderr for the parent to see.
#[test]
#[ignore = "a child of the_library_prints_nothing_itself"]
fn child_reads_proc_through_the_hook() {
    let dir = std::env::var_os(ROOT_ENV).expect("run by the parent with the hook set");
    let want = format!(
        "/proc is read from KVCR_PROC_ROOT={}, a test hook",
        kvcr::internals::report::terminal(&Path::new(&dir).to_string_lossy())
    );
    // Every way into the system root: the root itself, the probe and its
    // facts, a descriptor's reopen.
    let proc = ProcFs::system();
    assert_eq!(proc.note(), Some(want.as_str()));
    let (probe, notes) = node::probe(None).unwrap();
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert_eq!(notes[0], want);
    assert!(notes[1].contains("is not procfs"), "{notes:?}");
    assert!(notes[1].contains("not checked"), "{notes:?}");
    let _ = node::gather(probe.as_ref(), [std::process::id() as i32]);
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("f"), b"x").unwrap();
    let fd = rustix::fs::open(
        t.path().join("f"),
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let e = kvcr::internals::inventory::open::reopen_for_reading_in(proc, &fd).unwrap_err();
    assert!(e.to_string().contains("is not procfs"), "{e}");
    println!("child-ran-to-the-end");
}

#[test]
fn the_library_prints_nothing_itself() {
    let (_t, dir) = hostile_root();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "proc_note::child_reads_proc_through_the_hook",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROOT_ENV, &dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("child-ran-to-the-end"), "{stdout}");
    assert!(!stderr.contains("note"), "the library printed: {stderr}");
    assert!(
        !stderr.contains("KVCR_PROC_ROOT"),
        "the library printed: {stderr}"
    );
    assert!(
        !stdout.contains("kvcr: note"),
        "the library printed: {stdout}"
    );
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
