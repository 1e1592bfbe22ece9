//! What the Debian package ships (Cargo.toml `[package.metadata.deb]`):
//! every asset exists, and the systemd units pass `systemd-analyze verify`
//! (where it is installed) and do what they say with the shipped
//! /etc/default/kvcr. `.ci/run` builds the package and scripts/deb-check.sh
//! installs it into a scratch root.

use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn repo(rel: &str) -> PathBuf {
    Path::new(ROOT).join(rel)
}

/// The source side of each `[source, destination, mode]` asset.
fn asset_sources() -> Vec<String> {
    let toml = std::fs::read_to_string(repo("Cargo.toml")).unwrap();
    let deb = toml
        .split("[package.metadata.deb]")
        .nth(1)
        .expect("a [package.metadata.deb] table");
    let assets = deb.split("assets = [").nth(1).expect("assets");
    assets
        .lines()
        .take_while(|l| l.trim() != "]")
        .filter_map(|l| l.trim().strip_prefix("[\""))
        .map(|l| l.split('"').next().unwrap().to_string())
        .collect()
}

#[test]
fn every_deb_asset_exists() {
    let sources = asset_sources();
    assert!(sources.len() >= 10, "{sources:?}");
    for s in &sources {
        if s == "target/release/kvcr" {
            continue; // built by cargo deb itself
        }
        if let Some(dir) = s.strip_suffix("/*.1").or_else(|| s.strip_suffix("/*.md")) {
            let n = std::fs::read_dir(repo(dir)).unwrap().count();
            assert!(n > 0, "{s} matches nothing");
        } else if let Some(dir) = s.strip_suffix("/*.json") {
            assert!(std::fs::read_dir(repo(dir)).unwrap().count() > 0, "{s}");
        } else {
            assert!(repo(s).is_file(), "{s} does not exist");
        }
    }
    for unit in [
        "packaging/systemd/kvcr-audit-textfile.service",
        "packaging/systemd/kvcr-audit-textfile.timer",
        "packaging/default/kvcr",
        "packaging/systemd/kvcr-hold.service",
        "packaging/tmpfiles.d/kvcr.conf",
        "packaging/prometheus/kvcr-alerts.yml",
    ] {
        assert!(sources.iter().any(|s| s == unit), "{unit} is not shipped");
    }
}

/// KEY=VALUE lines of an EnvironmentFile (no quoting is used in ours).
fn environment_file(path: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim_start().starts_with('#') && l.contains('='))
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap();
            (k.trim().to_string(), v.trim().to_string())
        })
        .collect()
}

#[test]
fn the_service_command_writes_the_textfile() {
    let unit =
        std::fs::read_to_string(repo("packaging/systemd/kvcr-audit-textfile.service")).unwrap();
    assert!(unit.contains("EnvironmentFile=/etc/default/kvcr"));
    assert!(unit.contains("SuccessExitStatus=1"));
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart");
    let env = environment_file(&repo("packaging/default/kvcr"));
    let keys: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "KVCR_INVENTORY",
            "KVCR_TEXTFILE",
            "KVCR_AUDIT_ARGS",
            "KVCR_HOLD_ARGS"
        ]
    );
    let dir = tempfile::tempdir().unwrap();
    let prom = dir.path().join("kvcr.prom");
    // systemd: ${X} is one argument, $X splits on whitespace.
    let mut words: Vec<String> = Vec::new();
    for w in exec.split_whitespace() {
        match w {
            "${KVCR_TEXTFILE}" => words.push(prom.display().to_string()),
            "$KVCR_AUDIT_ARGS" => words.extend(
                ["--engine", "llama3-70b-a", "--format", "json"]
                    .iter()
                    .map(|s| s.to_string()),
            ),
            w => words.push(w.to_string()),
        }
    }
    assert_eq!(words[0], "/usr/bin/kvcr");
    let out = crate::util::kvcr()
        .args(&words[1..])
        .env("KVCR_INVENTORY", repo("fixtures/accept-tp4/inventory"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stdout.is_empty(),
        "--quiet prints nothing, whatever the format"
    );
    let text = std::fs::read_to_string(&prom).unwrap();
    assert!(
        text.contains("kvcr_group_accepted{engine_id=\"llama3-70b-a\"} 1\n"),
        "{text}"
    );
    assert!(text.contains("kvcr_audit_success 1"));
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["kvcr.prom"]);
}

#[test]
fn systemd_units_pass_systemd_analyze_verify() {
    let have = Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        eprintln!("skipped: systemd-analyze is not installed, so the units cannot be verified");
        return;
    }
    // verify checks that ExecStart exists and that Documentation= man pages
    // resolve: point it at the built binary and the committed pages.
    let dir = tempfile::tempdir().unwrap();
    let man1 = dir.path().join("man/man1");
    std::fs::create_dir_all(&man1).unwrap();
    for e in std::fs::read_dir(repo("man")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), man1.join(e.file_name())).unwrap();
    }
    let mut units = Vec::new();
    for u in [
        "kvcr-audit-textfile.service",
        "kvcr-audit-textfile.timer",
        "kvcr-hold.service",
    ] {
        let text = std::fs::read_to_string(repo(&format!("packaging/systemd/{u}")))
            .unwrap()
            .replace("/usr/bin/kvcr", crate::util::bin().to_str().unwrap());
        let p = dir.path().join(u);
        std::fs::write(&p, text).unwrap();
        units.push(p);
    }
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .args(&units)
        .env("MANPATH", dir.path().join("man"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "systemd-analyze verify: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // And it does fail on a broken unit, so the pass above means something.
    let bad = dir.path().join("kvcr-broken.service");
    std::fs::write(&bad, "[Service]\nExecStart=/nonexistent/kvcr audit\n").unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
}
