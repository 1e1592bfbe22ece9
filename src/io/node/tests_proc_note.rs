//! The `KVCR_PROC_ROOT` test hook's note is returned, never printed
//! (issue #23): [`ProcFs::note`], and [`node::probe`] among its notes. The
//! command's end of it (printed once, for every command that opens files)
//! is tests/it/audit/proc_note.rs.

use crate::io::node;
use crate::io::procfs::{ProcFs, ROOT_ENV};
use std::ffi::OsStr;
use std::path::Path;

/// The note for a hook naming `dir` (the test kit's `proc::hook_note`).
fn announced(dir: &Path) -> String {
    crate::testkit::proc::hook_note(dir)
}

/// A directory (not procfs) whose name holds terminal controls.
fn hostile_root() -> (tempfile::TempDir, std::path::PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let dir = crate::testkit::proc::hostile_root(t.path());
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
    assert_eq!(p.display("stat"), format!("{}/stat", dir.to_string_lossy()));
    // Unset or empty: /proc itself, and nothing to say.
    for unset in [None, Some(OsStr::new(""))] {
        let p = ProcFs::from_hook(unset);
        assert_eq!(p.note(), None);
        assert_eq!(p.display("stat"), "/proc/stat");
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
        crate::format::text::terminal(&Path::new(&dir).to_string_lossy())
    );
    // Installed as the command line installs it (the library alone never
    // reads the variable: child_ignores_the_hook_unless_installed).
    assert!(ProcFs::install_hook(Some(&dir)));
    assert!(
        !ProcFs::install_hook(None),
        "installed once, before first use"
    );
    // Every way into the system root: the root itself, the probe and its
    // facts, a descriptor's reopen.
    let proc = ProcFs::system();
    assert_eq!(proc.note(), Some(want.as_str()));
    let (probe, notes) = node::probe(None, crate::service::audit::FACTS_ENV_NAMED).unwrap();
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
    let e = crate::io::safe_file::reopen_for_reading_in(proc, &fd).unwrap_err();
    assert!(e.to_string().contains("is not procfs"), "{e}");
    println!("child-ran-to-the-end");
}

#[test]
fn the_library_prints_nothing_itself() {
    let (_t, dir) = hostile_root();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "io::node::tests_proc_note::child_reads_proc_through_the_hook",
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

/// Run by [`the_library_ignores_the_hook_in_its_environment`] in a child
/// process with the hook set: without the command line's install, the
/// system root is `/proc` and nothing is said about a hook.
#[test]
#[ignore = "a child of the_library_ignores_the_hook_in_its_environment"]
fn child_ignores_the_hook_unless_installed() {
    assert!(std::env::var_os(ROOT_ENV).is_some(), "run by the parent");
    let proc = ProcFs::system();
    assert_eq!(proc.note(), None);
    assert_eq!(proc.display("stat"), "/proc/stat");
    let (_probe, notes) = node::probe(None, crate::service::audit::FACTS_ENV_NAMED).unwrap();
    assert!(notes.iter().all(|n| !n.contains(ROOT_ENV)), "{notes:?}");
    println!("child-ran-to-the-end");
}

#[test]
fn the_library_ignores_the_hook_in_its_environment() {
    let (_t, dir) = hostile_root();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "io::node::tests_proc_note::child_ignores_the_hook_unless_installed",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROOT_ENV, &dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("child-ran-to-the-end"), "{stdout}");
}
