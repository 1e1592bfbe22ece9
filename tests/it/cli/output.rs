//! Output behaviour through the binary: -q and -v, a closed pipe, colour off
//! a terminal, completions. Terminal behaviour is in tests/it/cli/terminal.rs.

use crate::util::{bin, kvcr, kvcr_std, repo, test_env};
use std::process::{Command, Stdio};

fn inventory(case: &str) -> std::path::PathBuf {
    repo().join("fixtures").join(case).join("inventory")
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = kvcr().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn quiet_prints_nothing_and_keeps_the_status() {
    for (case, want) in [
        ("accept-tp4", 0),
        ("kv103-missing-rank", 1),
        ("kv001-symlink", 1),
    ] {
        let inv = inventory(case);
        let inv = inv.to_str().unwrap();
        for extra in [
            &[][..],
            &["--format", "json"][..],
            &["--format", "table", "--color", "always"][..],
        ] {
            let mut args = vec!["audit", inv, "-q"];
            args.extend_from_slice(extra);
            let (code, out, err) = run(&args);
            assert_eq!(code, want, "{case} {extra:?}");
            assert!(out.is_empty(), "{case} {extra:?}: stdout {out:?}");
            assert!(err.is_empty(), "{case} {extra:?}: stderr {err:?}");
        }
        let (code, out, _) = run(&["audit", "--quiet", inv]);
        assert_eq!((code, out.as_str()), (want, ""), "--quiet");
    }
}

#[test]
fn quiet_still_reports_errors_on_stderr() {
    // Exit 2 says the audit could not run; a silent 2 would leave an
    // operator guessing, so the one error line stays (2>/dev/null hides it).
    let (code, out, err) = run(&["audit", "-q", "/nonexistent/kvcr-inventory"]);
    assert_eq!(code, 2);
    assert!(out.is_empty(), "{out}");
    assert!(err.starts_with("kvcr: error: "), "{err}");
    let (code, out, _) = run(&["audit", "-q", "-v", "x"]);
    assert_eq!((code, out.as_str()), (2, ""), "-q and -v conflict");
}

#[test]
fn verbose_shows_every_check_and_what_was_not_checked() {
    let inv = inventory("kv104-geometry");
    let inv = inv.to_str().unwrap();
    let (code, table, _) = run(&["audit", inv, "-v"]);
    assert_eq!(code, 1);
    for want in [
        "rank: pass",
        "geometry: pass",
        "geometry: fail",
        "model: pass",
        "gpu-uuid: pass",
        "staleness: pass",
        "node facts: not checked (no --live)",
        // -v lists every finding of a rank, not only the first.
        "KV104",
        "rank 0 file: rank-0.json",
    ] {
        assert!(table.contains(want), "-v lacks {want:?}:\n{table}");
    }
    let (_, short, _) = run(&["audit", inv]);
    assert!(!short.contains("geometry: pass"), "{short}");
    assert!(!short.contains("node facts: not checked"), "{short}");
    assert!(
        short.contains("(offline: node not checked; add --live)"),
        "{short}"
    );

    // Live facts that cannot be read show as not checked, per check.
    let facts = repo().join("fixtures/live/node-unknown.json");
    let out = kvcr()
        .args(["audit", "--live", "-v"])
        .arg(inventory("accept-tp4"))
        .env("KVCR_NODE_FACTS", &facts)
        .output()
        .unwrap();
    let table = String::from_utf8(out.stdout).unwrap();
    for want in [
        "boot_id: not checked",
        "owner: not checked",
        "hostname: not checked",
        "gpu-present: not checked",
    ] {
        assert!(table.contains(want), "live -v lacks {want:?}:\n{table}");
    }
    assert!(!table.contains("no --live"), "{table}");
    // ... and the header counts them: 4 ranks × hostname, boot_id, owner, GPU.
    assert!(
        table.contains("(live: checked against this node; 16 facts not checked"),
        "{table}"
    );
}

#[test]
fn verbose_does_not_change_the_json_document() {
    let inv = inventory("kv104-geometry");
    let inv = inv.to_str().unwrap();
    let (_, plain, _) = run(&["audit", inv, "--format", "json"]);
    let (_, verbose, _) = run(&["audit", inv, "--format", "json", "-v"]);
    let strip_host = |s: &str| {
        let mut v: serde_json::Value = serde_json::from_str(s).unwrap();
        v["host"] = serde_json::Value::Null;
        crate::util::testkit::without_clock(v)
    };
    assert_eq!(strip_host(&plain), strip_host(&verbose));
}

/// Runs kvcr with stdout on a pipe whose reader is already gone, so every
/// write fails with EPIPE.
fn closed_pipe(args: &[&str]) -> (i32, String) {
    // CLOEXEC: a child another test forks meanwhile must not inherit the
    // reader (it would keep the pipe open); kvcr gets the writer as stdout.
    let (reader, writer) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
    drop(reader);
    let out = kvcr_std()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn a_closed_pipe_ends_quietly() {
    let tp4 = inventory("accept-tp4");
    let tp4 = tp4.to_str().unwrap();
    let kv103 = inventory("kv103-missing-rank");
    let kv103 = kv103.to_str().unwrap();
    let cases: Vec<(Vec<&str>, i32)> = vec![
        (vec!["audit", tp4], 0),
        (vec!["audit", tp4, "-v"], 0),
        (vec!["audit", tp4, "--format", "json"], 0),
        (vec!["audit", kv103], 1),
        (vec!["explain"], 0),
        (vec!["explain", "KV104"], 0),
        (vec!["schema", "report"], 0),
        (vec!["completions", "bash"], 0),
    ];
    for (args, want) in cases {
        let (code, err) = closed_pipe(&args);
        assert_eq!(code, want, "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?}: stderr {err:?}");
    }
}

#[test]
fn audit_piped_into_head_exits_quietly() {
    let Ok(sh) = which("sh") else { return };
    let script = format!(
        "'{}' audit -v '{}' | head -1",
        bin().display(),
        inventory("accept-tp4").display()
    );
    let out = test_env(&mut Command::new(sh))
        .args(["-c", &script])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stdout.starts_with("inventory "), "{stdout}");
    assert!(stderr.is_empty(), "{stderr}");
}

fn which(name: &str) -> Result<std::path::PathBuf, ()> {
    let path = std::env::var_os("PATH").ok_or(())?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or(())
}

#[test]
fn no_colour_off_a_terminal_unless_always() {
    let inv = inventory("kv103-missing-rank");
    let inv = inv.to_str().unwrap();
    let (_, auto, _) = run(&["audit", inv]);
    assert!(!auto.contains('\x1b'), "{auto}");
    let (_, always, _) = run(&["audit", inv, "--color", "always"]);
    assert!(always.contains("\x1b["), "{always}");
    let out = kvcr()
        .args(["audit", inv, "--color", "always"])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(
        String::from_utf8(out.stdout).unwrap().contains("\x1b["),
        "always beats NO_COLOR"
    );
    let (_, json, _) = run(&["audit", inv, "--format", "json", "--color", "always"]);
    assert!(!json.contains('\x1b'), "JSON is never coloured: {json}");
}

#[test]
fn tables_do_not_wrap_on_a_pipe() {
    let (_, table, _) = run(&["audit", inventory("kv104-geometry").to_str().unwrap()]);
    // The full reason stays on one line: nothing to wrap to.
    assert!(
        table.lines().any(
            |l| l.contains("KV104 allocations total") && l.contains("bytes the geometry needs")
        ),
        "{table}"
    );
}

#[test]
fn bash_completion_loads() {
    let Ok(bash) = which("bash") else {
        eprintln!("bash not installed: completion loading not checked");
        return;
    };
    let out = test_env(&mut Command::new(bash))
        .args([
            "-c",
            &format!(
                "source <('{}' completions bash) && complete -p kvcr",
                bin().display()
            ),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(
        line.contains("complete") && line.trim_end().ends_with("kvcr"),
        "{line}"
    );
}

#[test]
fn completions_for_every_shell_name_the_subcommands() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let (code, script, err) = run(&["completions", shell]);
        assert_eq!(code, 0, "{shell}: {err}");
        for sub in ["audit", "import", "explain", "schema", "completions"] {
            assert!(script.contains(sub), "{shell} completion lacks {sub}");
        }
    }
    let (code, _, _) = run(&["completions", "tcsh"]);
    assert_eq!(code, 2);
}

/// How stdout is given to kvcr when stderr is a pipe whose reader is gone.
#[derive(Clone, Copy, Debug)]
enum Stdout {
    /// fd 1 closed before exec (the runtime finds it closed).
    Closed,
    /// fd 1 open read-only: every write fails with EBADF.
    ReadOnly,
    /// Also a pipe whose reader is gone: EPIPE.
    BrokenPipe,
}

/// Runs kvcr with stderr on a pipe whose reader is already gone (every
/// write to it fails with EPIPE) and stdout as `how` says; the exit status.
fn broken_stderr(args: &[&str], env: &[(&str, &std::path::Path)], how: Stdout) -> i32 {
    use std::os::unix::process::CommandExt;
    let (reader, writer) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
    drop(reader);
    let mut c = kvcr_std();
    c.args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::from(writer));
    for (k, v) in env {
        c.env(k, v);
    }
    match how {
        Stdout::Closed => {
            // SAFETY: close(2) is async-signal-safe; nothing else runs
            // between fork and exec.
            unsafe {
                c.pre_exec(|| {
                    libc::close(1);
                    Ok(())
                })
            };
        }
        Stdout::ReadOnly => {
            c.stdout(std::fs::File::open("/dev/null").unwrap());
        }
        Stdout::BrokenPipe => {
            let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
            drop(r);
            c.stdout(Stdio::from(w));
        }
    }
    let status = c.status().unwrap();
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

#[test]
fn a_broken_stderr_never_panics_and_keeps_the_exit_status() {
    let facts = crate::util::fixtures_live("node-match.json");
    let facts = facts.as_path();
    let posix = inventory("accept-posix-fd");
    let posix = posix.to_str().unwrap();
    let kv103 = inventory("kv103-missing-rank");
    let kv103 = kv103.to_str().unwrap();
    let seal_dir = tempfile::tempdir().unwrap();
    let bad = seal_dir.path().join("rank-0.json");
    std::fs::write(&bad, b"{\"schema\": 1}").unwrap();
    let bad = bad.to_str().unwrap();
    let env: &[(&str, &std::path::Path)] = &[("KVCR_NODE_FACTS", facts)];
    let cases: Vec<(Vec<&str>, i32)> = vec![
        // The two of the issue: a refusal on stderr, a note on stderr.
        (vec!["profile", kv103], 1),
        (vec!["audit", "--live", "--format", "json", posix], 0),
        (vec!["audit", "--live", "--format", "json", kv103], 1),
        (vec!["audit", "--live", posix], 0),
        // An error and its hint; a clap error; a refused seal.
        (vec!["audit", "/nonexistent/kvcr-inventory"], 2),
        (vec!["audit", "--no-such-flag"], 2),
        (vec!["audit", "--format", "json", "--no-such-flag"], 2),
        (vec!["seal", bad], 1),
        (vec!["import", "--dry-run", posix], 2),
    ];
    for how in [Stdout::Closed, Stdout::ReadOnly, Stdout::BrokenPipe] {
        for (args, want) in &cases {
            let code = broken_stderr(args, env, how);
            assert_eq!(
                code, *want,
                "{how:?} {args:?}: exit {code} (101 is a panic)"
            );
        }
    }
}

/// Tables are measured in terminal columns (issue #29 §3): a path with
/// wide characters (two columns each) or a combining mark (none) keeps the
/// files table's columns aligned and every line within COLUMNS=80. Counted
/// in characters, the wide path's code column sat two columns right of the
/// others, the combining mark's one column left.
#[test]
fn wide_and_combining_characters_keep_the_table_aligned_at_80_columns() {
    use crate::util::testkit::{self, Desc};
    use unicode_width::UnicodeWidthStr;
    let d = tempfile::tempdir().unwrap();
    testkit::put_group(d.path(), "", &Desc::new("w80", 0, 2, 1));
    let paths = [
        "缓存キャッシュ/rank-5.json",
        "cafe\u{301}/rank-6.json",
        "plain/rank-7.json",
    ];
    for p in paths {
        testkit::put(d.path(), p, b"x");
    }
    let out = kvcr()
        .arg("audit")
        .arg(d.path())
        .env("COLUMNS", "80")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    let wide: Vec<&str> = text.lines().filter(|l| l.width() > 80).collect();
    assert!(wide.is_empty(), "lines over 80 columns: {wide:#?}\n{text}");
    // Each file's row: the column where its code starts, in terminal columns.
    let columns: Vec<usize> = paths
        .iter()
        .map(|p| {
            let row = text
                .lines()
                .find(|l| l.trim_start().starts_with(p))
                .unwrap_or_else(|| panic!("no row for {p}:\n{text}"));
            let at = row.find("KV").unwrap_or_else(|| panic!("no code: {row}"));
            row[..at].width()
        })
        .collect();
    assert!(
        columns.windows(2).all(|w| w[0] == w[1]),
        "code columns {columns:?}:\n{text}"
    );
}

/// The `--format` values a subcommand's `--help` offers (both of clap's
/// layouts: "[possible values: a, b]" and the "Possible values:" list).
fn offered_formats(sub: &str) -> Option<Vec<String>> {
    let (_, help, _) = run(&[sub, "--help"]);
    let at = help.find("--format <FORMAT>")?;
    // The option's own block: up to the next option's line.
    let block: Vec<&str> = help[at..]
        .lines()
        .enumerate()
        .take_while(|(i, l)| {
            let l = l.trim_start();
            *i == 0 || !l.starts_with('-') || l.starts_with("- ")
        })
        .map(|(_, l)| l.trim())
        .collect();
    let text = block.join(" ");
    if let Some(i) = text.find("[possible values: ") {
        let list = &text[i + "[possible values: ".len()..];
        let list = &list[..list.find(']').unwrap()];
        return Some(list.split(", ").map(str::to_string).collect());
    }
    Some(
        block
            .iter()
            .filter_map(|l| l.strip_prefix("- "))
            .map(|l| l.split(':').next().unwrap().to_string())
            .collect(),
    )
}

/// `--help`, the man pages and the completions offer only the formats each
/// command accepts (issue #31 §3): `kvcr examine --help` offered
/// `--format prometheus`, which examine then refused. Every subcommand
/// with `--format` is asked here with each value it offers, and none is a
/// usage error; examine offers a table or JSON, and refuses prometheus as
/// clap refuses any value it does not offer.
#[test]
fn every_offered_format_is_accepted_by_its_command() {
    let d = tempfile::tempdir().unwrap();
    let inv = inventory("profile-accept");
    let inv = inv.to_str().unwrap();
    let profile = repo().join("fixtures/profile-accept/profile.json");
    let report = d.path().join("node.json");
    let (_, json, _) = run(&["audit", inv, "--format", "json"]);
    std::fs::write(&report, json).unwrap();
    let rank = format!("{inv}/rank-0.json");
    // An empty directory: gms finds no artifact there (exit 2), which is
    // no refusal of its format.
    let empty = d.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("audit", vec!["audit", inv]),
        ("merge", vec!["merge", report.to_str().unwrap()]),
        (
            "import",
            vec![
                "import",
                "--dry-run",
                inv,
                "--profile",
                profile.to_str().unwrap(),
            ],
        ),
        ("examine", vec!["examine", &rank]),
        (
            "gms",
            vec!["gms", "--interval-ms", "0", empty.to_str().unwrap()],
        ),
        (
            "pools",
            vec!["pools", "--interval-ms", "0", empty.to_str().unwrap()],
        ),
        ("offload", vec!["offload", empty.to_str().unwrap()]),
    ];
    // Every subcommand that has --format is one of the cases.
    let (_, top, _) = run(&["--help"]);
    let subs: Vec<&str> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|s| *s != "help")
        .collect();
    let with_format: Vec<&str> = subs
        .iter()
        .copied()
        .filter(|s| offered_formats(s).is_some())
        .collect();
    let mut asked: Vec<&str> = cases.iter().map(|c| c.0).collect();
    asked.sort();
    let mut with_format_sorted = with_format.clone();
    with_format_sorted.sort();
    assert_eq!(with_format_sorted, asked, "subcommands with --format");
    for (sub, args) in &cases {
        let offered = offered_formats(sub).unwrap();
        assert!(offered.contains(&"table".to_string()), "{sub}: {offered:?}");
        for f in &offered {
            let out = kvcr()
                .args(args)
                .args(["--format", f])
                .env("KVCR_IMPORT_BACKEND", "sim")
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            if *sub != "gms" {
                assert_ne!(
                    out.status.code(),
                    Some(2),
                    "{sub} --format {f} is offered but refused: {stderr}"
                );
            }
            assert!(
                !stderr.contains("--format") && !stderr.contains("invalid value"),
                "{sub} --format {f} is offered but refused: {stderr}"
            );
        }
    }
    assert_eq!(
        offered_formats("examine").unwrap(),
        ["table", "json"],
        "examine writes a table or kvcr.examine/v1"
    );
    let out = kvcr()
        .args(["examine", &rank, "--format", "prometheus"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("invalid value 'prometheus'"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
