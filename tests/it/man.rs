//! The committed man pages (man/*.1) must be what the CLI generates now.
//! Regenerate with `cargo run --example gen-man` (or
//! `KVCR_BLESS=1 cargo test --test it man::`) and commit the result.

use std::path::{Path, PathBuf};

fn man_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("man")
}

#[test]
fn committed_pages_match_the_cli() {
    if std::env::var_os("KVCR_BLESS").is_some() {
        crate::util::man::write_all(&man_dir()).unwrap();
    }
    let pages = crate::util::man::pages();
    let mut failures = Vec::new();
    for p in &pages {
        let path = man_dir().join(&p.file_name);
        match std::fs::read_to_string(&path) {
            Ok(committed) if committed == p.text => {}
            Ok(_) => failures.push(format!("{} drifted from the CLI", path.display())),
            Err(e) => failures.push(format!("{}: {e}", path.display())),
        }
    }
    // A page for a subcommand that no longer exists is drift too.
    for e in std::fs::read_dir(man_dir()).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".1") && !pages.iter().any(|p| p.file_name == name) {
            failures.push(format!("man/{name} has no command"));
        }
    }
    assert!(
        failures.is_empty(),
        "{}\nregenerate with: cargo run --example gen-man",
        failures.join("\n")
    );
}

#[test]
fn one_page_per_visible_subcommand() {
    let names: Vec<String> = crate::util::man::pages()
        .into_iter()
        .map(|p| p.file_name)
        .collect();
    let cli = kvcr::command();
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
    let scripts = crate::util::man::completions();
    assert_eq!(scripts.len(), 3);
    for (name, script) in scripts {
        let committed = std::fs::read(dir.join(name)).unwrap_or_default();
        assert!(
            committed == script,
            "completions/{name} drifted from the CLI; regenerate with: cargo run --example gen-man"
        );
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
