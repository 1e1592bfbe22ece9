//! kvcr on a real terminal, through `script` (util-linux), which runs a
//! command on a fresh pseudo-terminal: colour follows NO_COLOR, TERM=dumb
//! and --color; JSON carries no escape bytes; tables fit the terminal's
//! width; -q stays silent. Skipped (with a note) where `script` is missing.

use crate::util::{bin, repo, test_env};
use std::process::{Command, Stdio};

fn which(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Runs `sh_cmd` on a pseudo-terminal of `cols` columns with `env`
/// on top of the test environment; returns the exit status and what
/// the terminal received, with the terminal's \r\n turned into \n.
fn on_terminal(sh_cmd: &str, cols: u16, env: &[(&str, &str)]) -> Option<(i32, String)> {
    let Some(script) = which("script") else {
        eprintln!("script(1) not installed: terminal behaviour not checked");
        return None;
    };
    let full = format!("stty cols {cols} rows 50 2>/dev/null; {sh_cmd}");
    let mut c = Command::new(script);
    test_env(&mut c)
        .args(["-qec", &full, "/dev/null"])
        .stdin(Stdio::null())
        .env("TERM", "xterm-256color");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap().replace("\r\n", "\n");
    Some((out.status.code().unwrap_or(-1), text))
}

fn kvcr_cmd(args: &str) -> String {
    format!("'{}' {args}", bin().display())
}

fn inv(case: &str) -> String {
    format!(
        "'{}'",
        repo()
            .join("fixtures")
            .join(case)
            .join("inventory")
            .display()
    )
}

/// SGR (colour and attribute) sequences: ESC [ digits/semicolons m.
fn has_sgr(s: &str) -> bool {
    let b = s.as_bytes();
    (0..b.len()).any(|i| {
        b[i] == 0x1b && b.get(i + 1) == Some(&b'[') && {
            let rest = &b[i + 2..];
            let n = rest
                .iter()
                .take_while(|c| c.is_ascii_digit() || **c == b';')
                .count();
            rest.get(n) == Some(&b'm')
        }
    })
}

#[test]
fn colour_on_a_terminal_by_default() {
    // Proves the pseudo-terminal path: without it the other tests prove little.
    let Some((code, out)) = on_terminal(
        &kvcr_cmd(&format!("audit {}", inv("kv103-missing-rank"))),
        120,
        &[],
    ) else {
        return;
    };
    assert_eq!(code, 1, "{out}");
    assert!(has_sgr(&out), "no colour on a terminal:\n{out}");
    assert!(out.contains("REJECTED"), "{out}");
}

#[test]
fn no_color_is_honoured_on_a_terminal() {
    let cmd = kvcr_cmd(&format!("audit {}", inv("kv103-missing-rank")));
    for env in [&[("NO_COLOR", "1")][..], &[("TERM", "dumb")][..]] {
        let Some((code, out)) = on_terminal(&cmd, 120, env) else {
            return;
        };
        assert_eq!(code, 1, "{env:?}: {out}");
        assert!(out.contains("REJECTED"), "{env:?}: {out}");
        assert!(!has_sgr(&out), "{env:?}: colour despite it:\n{out:?}");
    }
    // TERM=dumb also means no progress bar: nothing but plain text.
    let Some((_, out)) = on_terminal(&cmd, 120, &[("TERM", "dumb")]) else {
        return;
    };
    assert!(!out.contains('\x1b'), "{out:?}");
    // --color never, and --color always beating NO_COLOR.
    let Some((_, out)) = on_terminal(&format!("{cmd} --color never"), 120, &[]) else {
        return;
    };
    assert!(!has_sgr(&out), "{out:?}");
    let Some((_, out)) = on_terminal(&format!("{cmd} --color always"), 120, &[("NO_COLOR", "1")])
    else {
        return;
    };
    assert!(has_sgr(&out), "{out:?}");
}

#[test]
fn json_on_a_terminal_has_no_escape_bytes() {
    for extra in ["", "--color always", "-v"] {
        let cmd = kvcr_cmd(&format!(
            "audit {} --format json {extra}",
            inv("kv001-symlink")
        ));
        let Some((code, out)) = on_terminal(&cmd, 100, &[]) else {
            return;
        };
        assert_eq!(code, 1, "{out}");
        // stdout and stderr share the terminal: no colour, no progress bar.
        assert!(
            !out.contains('\x1b'),
            "escape bytes with {extra:?}:\n{out:?}"
        );
        let v: serde_json::Value = serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("not one JSON document ({e}):\n{out}"));
        assert_eq!(v["schema"], "kvcr.audit-report/v1");
    }
}

#[test]
fn quiet_on_a_terminal_prints_nothing() {
    let cmd = kvcr_cmd(&format!("audit -q {}", inv("kv103-missing-rank")));
    let Some((code, out)) = on_terminal(&cmd, 100, &[]) else {
        return;
    };
    assert_eq!(code, 1);
    assert!(out.is_empty(), "{out:?}");
}

#[test]
fn tables_fit_the_terminal_width() {
    for cols in [80u16, 100] {
        let cmd = kvcr_cmd(&format!("audit {} 2>/dev/null", inv("kv104-geometry")));
        let Some((code, out)) = on_terminal(&cmd, cols, &[("NO_COLOR", "1")]) else {
            return;
        };
        assert_eq!(code, 1, "{out}");
        let widest = out.lines().map(|l| l.chars().count()).max().unwrap();
        assert!(widest <= cols as usize, "{widest} > {cols} columns:\n{out}");
        // Wrapped, not cut: the long reason is all there.
        let joined: String = out.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(joined.contains("geometry needs"), "{out}");
    }
}

#[test]
fn no_spinner_for_a_small_inventory() {
    // stderr on the terminal too: a 4-file audit ends long before 200 ms.
    let cmd = kvcr_cmd(&format!("audit {} >/dev/null", inv("kv104-geometry")));
    let Some((code, out)) = on_terminal(&cmd, 80, &[("NO_COLOR", "1")]) else {
        return;
    };
    assert_eq!(code, 1);
    assert!(!out.contains("reading descriptors"), "{out:?}");
}
