//! The committed man pages (man/*.1) and shell completions
//! (completions/*) must be what the CLI generates now, through the renderer
//! `cargo xtask man` runs (xtask/src/man.rs). Regenerate with
//! `cargo xtask man` (or `KVCR_BLESS=1 cargo test --test it cli::man::`) and
//! commit the result.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use xtask::Task;

fn man_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("man")
}

#[test]
fn committed_pages_match_the_cli() {
    if std::env::var_os("KVCR_BLESS").is_some() {
        crate::util::man::write_all(&man_dir()).unwrap();
    }
    let failures = crate::util::man::page_drift(&man_dir());
    assert!(
        failures.is_empty(),
        "{}\nregenerate with: cargo xtask man",
        failures.join("\n")
    );
}

/// `cargo xtask man DIR` writes exactly what is committed: every page and
/// every completion script, byte for byte, and nothing else.
#[test]
fn the_xtask_writes_the_committed_pages_and_completions() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let written = xtask::write_man(Some(&out)).unwrap();
    let pages = crate::util::man::pages();
    assert_eq!(written.len(), pages.len() + 3, "{written:?}");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for path in &written {
        let rel = path.strip_prefix(&out).unwrap();
        let committed = match rel.parent() {
            Some(p) if p == Path::new("completions") => root.join(rel),
            _ => root.join("man").join(rel),
        };
        assert_eq!(
            std::fs::read(path).unwrap(),
            std::fs::read(&committed).unwrap(),
            "{} differs from {}",
            path.display(),
            committed.display()
        );
    }
    assert!(xtask::man_drift(Some(&out)).is_empty());
    // Without DIR it writes into the repository's own man/ and completions/.
    assert_eq!(
        xtask::man_dirs(None),
        (root.join("man"), root.join("completions"))
    );
}

/// The drift check names each stale, missing or extra file, so the drift
/// tests above fail on any of them; regenerating heals all three.
#[test]
fn drift_names_a_stale_page_a_missing_script_and_a_page_without_command() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path();
    xtask::write_man(Some(out)).unwrap();
    assert_eq!(xtask::man_drift(Some(out)), Vec::<String>::new());
    let stale = out.join("kvcr-audit.1");
    let mut text = std::fs::read(&stale).unwrap();
    text.extend_from_slice(b".PP\nhand edit\n");
    std::fs::write(&stale, text).unwrap();
    std::fs::remove_file(out.join("completions/_kvcr")).unwrap();
    std::fs::write(out.join("kvcr-gone.1"), b".TH GONE 1\n").unwrap();
    // Not a page: no drift.
    std::fs::write(out.join("README"), b"notes\n").unwrap();
    let drift = xtask::man_drift(Some(out));
    assert_eq!(drift.len(), 3, "{drift:#?}");
    assert!(
        drift[0].starts_with(&stale.display().to_string())
            && drift[0].ends_with("drifted from the CLI"),
        "{drift:#?}"
    );
    assert_eq!(
        drift[1],
        format!("{} has no command", out.join("kvcr-gone.1").display())
    );
    assert!(
        drift[2].starts_with(&out.join("completions/_kvcr").display().to_string()),
        "{drift:#?}"
    );
    // A one-byte change of a completion script is drift too.
    xtask::write_man(Some(out)).unwrap();
    let bash = out.join("completions/kvcr.bash");
    let mut b = std::fs::read(&bash).unwrap();
    b.pop();
    std::fs::write(&bash, b).unwrap();
    assert_eq!(
        xtask::man_drift(Some(out)),
        vec![format!("{} drifted from the CLI", bash.display())]
    );
    xtask::write_man(Some(out)).unwrap();
    assert_eq!(xtask::man_drift(Some(out)), Vec::<String>::new());
    assert!(!out.join("kvcr-gone.1").exists());
    assert!(
        out.join("README").exists(),
        "regenerating removes pages only"
    );
}

/// `cargo xtask man [--check] [DIR]`, and nothing else.
#[test]
fn the_xtask_command_line() {
    let args = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
    let parse = |a: &[&str]| xtask::parse(&args(a));
    let d = || Some(PathBuf::from("d"));
    assert_eq!(parse(&["man"]), Ok(Task::Man(None)));
    assert_eq!(parse(&["man", "d"]), Ok(Task::Man(d())));
    assert_eq!(parse(&["man", "--check"]), Ok(Task::ManCheck(None)));
    assert_eq!(parse(&["man", "--check", "d"]), Ok(Task::ManCheck(d())));
    assert_eq!(parse(&["man", "d", "--check"]), Ok(Task::ManCheck(d())));
    for (bad, why) in [
        (&[][..], "no task given"),
        (&["mans"][..], "unknown task \"mans\""),
        (
            &["man", "--force"][..],
            "man: unexpected option \"--force\"",
        ),
        (
            &["man", "--check", "--check"][..],
            "man: unexpected option \"--check\"",
        ),
        (&["man", "a", "b"][..], "man: more than one DIR"),
    ] {
        let e = parse(bad).unwrap_err();
        assert!(e.starts_with(why), "{bad:?}: {e}");
    }
}

#[test]
fn one_page_per_visible_subcommand() {
    let names: Vec<String> = crate::util::man::pages()
        .into_iter()
        .map(|p| p.file_name)
        .collect();
    let cli = kvcr_audit::command();
    let mut want = vec!["kvcr.1".to_string()];
    want.extend(
        cli.get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| format!("kvcr-{}.1", s.get_name())),
    );
    assert_eq!(names, want);
}

#[test]
fn hand_written_sections_are_there() {
    for p in crate::util::man::pages() {
        let t = &p.text;
        for s in [
            ".SH NAME",
            ".SH SYNOPSIS",
            ".SH \"EXIT STATUS\"",
            ".SH \"SEE ALSO\"",
        ] {
            assert!(t.contains(s), "{}: no {s}", p.file_name);
        }
        assert!(t.contains(".SH EXAMPLES"), "{}: no EXAMPLES", p.file_name);
    }
    let top = &crate::util::man::pages()[0];
    assert_eq!(top.file_name, "kvcr.1");
    for s in [".SH FILES", ".SH ENVIRONMENT"] {
        assert!(top.text.contains(s), "kvcr.1: no {s}");
    }
    // Every exit status of docs/format.md §6, and every variable operators meet.
    for code in ["0", "1", "2", "3", "4", "130"] {
        assert!(
            top.text.contains(&format!(".TP\n\\fB{code}\\fR\n")),
            "kvcr.1: exit status {code}"
        );
    }
    for var in [
        "KVCR_INVENTORY",
        "NO_COLOR",
        "TERM",
        "CUDA_VISIBLE_DEVICES",
        "KVCR_NODE_FACTS",
    ] {
        assert!(top.text.contains(var), "kvcr.1: {var}");
    }
    for f in ["rank\\-<R>.json", ".tmp"] {
        assert!(top.text.contains(f), "kvcr.1: FILES {f}");
    }
}

/// `man -l man/kvcr.1` renders, with EXIT STATUS, where man(1) is installed.
#[test]
fn man_renders_the_top_page() {
    let Ok(out) = std::process::Command::new("man")
        .args(["--warnings", "-l"])
        .arg(man_dir().join("kvcr.1"))
        .env("MANWIDTH", "80")
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .output()
    else {
        eprintln!("man(1) not installed: rendering not checked");
        return;
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("EXIT STATUS"), "{text}");
    assert!(text.contains("130"), "{text}");
    let warnings = String::from_utf8_lossy(&out.stderr);
    assert!(warnings.trim().is_empty(), "man warnings: {warnings}");
}

#[test]
fn committed_completions_match_the_cli() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("completions");
    if std::env::var_os("KVCR_BLESS").is_some() {
        crate::util::man::write_completions(&dir).unwrap();
    }
    let failures = crate::util::man::completion_drift(&dir);
    assert!(
        failures.is_empty(),
        "{}\nregenerate with: cargo xtask man",
        failures.join("\n")
    );
    let scripts = crate::util::man::completions();
    assert_eq!(scripts.len(), 3);
    for (name, script) in scripts {
        // Every subcommand is completed, the new ones included.
        let text = String::from_utf8(script).unwrap();
        for sub in ["audit", "import", "seal", "digest"] {
            assert!(text.contains(sub), "{name} lacks {sub}");
        }
    }
}

#[test]
fn synopsis_names_every_option_value() {
    let page = crate::util::man::pages()
        .into_iter()
        .find(|p| p.file_name == "kvcr-import.1")
        .unwrap();
    let syn = page.text.split(".SH SYNOPSIS").nth(1).unwrap();
    let syn = syn.split(".SH").next().unwrap();
    for want in [
        r"[\fB\-\-profile\fR \fIFILE\fR]",
        r"[\fB\-\-min\-epoch\fR \fIN\fR]",
        r"[\fB\-\-max\-age\fR \fIAGE\fR]",
        r"[\fB\-\-incarnation\fR \fIUUID\fR]",
        r"[\fB\-q\fR|\fB\-\-quiet\fR]",
    ] {
        assert!(syn.contains(want), "synopsis lacks {want}: {syn}");
    }
    assert!(!syn.contains(r"[\fB\-\-profile\fR]"), "{syn}");
}
