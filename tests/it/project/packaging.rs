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
            continue; // built by cargo (scripts/dist.sh: target/<triple>/release/kvcr)
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
            "KVCR_PRODUCER_USER",
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
        crate::util::missing(
            "needs systemd-analyze to verify the units (.ci/run installs systemd)",
        );
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

/// `name = "VALUE"` of Cargo.toml's `[package]` table.
fn package_field(name: &str) -> String {
    let toml = std::fs::read_to_string(repo("Cargo.toml")).unwrap();
    let package = toml.split("\n[").next().unwrap();
    let prefix = format!("{name} = \"");
    package
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or_else(|| panic!("no {name} in [package]"))
        .to_string()
}

/// Issue #31 §1, #35 §1: the README's Install section gives the three
/// prebuilt routes, with the file names scripts/dist.sh writes for this
/// version (packages named kvcr-audit, the command kvcr), before any `cargo
/// install`. No release is published and the project controls no public
/// repository yet: Cargo.toml has no `repository`, and the README claims no
/// download location nor a placeholder for one.
#[test]
fn readme_install_names_the_dist_files_and_no_repository() {
    let version = package_field("version");
    assert_eq!(package_field("name"), "kvcr-audit");
    let toml = std::fs::read_to_string(repo("Cargo.toml")).unwrap();
    let package = toml.split("\n[").next().unwrap();
    assert!(
        !package.lines().any(|l| l.starts_with("repository")),
        "a repository URL the project does not control"
    );
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    assert_eq!(readme.matches("github.com/").count(), 0, "a repository URL");
    assert!(readme.contains("No release has been published"));
    for placeholder in ["<this repository", "<repository", "<repo>", "OWNER/"] {
        assert!(!readme.contains(placeholder), "{placeholder}");
    }
    let start = readme.find("\n## Install\n").expect("an Install section");
    let install = &readme[start..];
    let install = &install[..install[1..].find("\n## ").unwrap()];
    let dist = std::fs::read_to_string(repo("scripts/dist.sh")).unwrap();
    assert!(dist.contains(r#"name="kvcr-audit-$version-x86_64-linux-gnu""#));
    assert!(dist.contains("--compatibility manylinux2014"));
    let pyproject = std::fs::read_to_string(repo("python/pyproject.toml")).unwrap();
    assert!(pyproject.contains("requires-python = \">=3.9\""));
    let routes = [
        format!("tar -xzf kvcr-audit-{version}-x86_64-linux-gnu.tar.gz"),
        format!("sudo dpkg -i kvcr-audit_{version}-1_amd64.deb"),
        format!(
            "pip install kvcr_audit-{version}-cp39-abi3-\
             manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
        ),
    ];
    let first_cargo_install = readme.find("cargo install").unwrap();
    for r in &routes {
        let at = install
            .find(r.as_str())
            .unwrap_or_else(|| panic!("Install lacks {r}"));
        assert!(
            start + at < first_cargo_install,
            "{r} comes after a cargo install"
        );
    }
}

/// The release workflow builds and checks with the same scripts as CI and
/// attaches dist/ to the tag's release.
#[test]
fn the_release_workflow_runs_the_dist_scripts_on_a_version_tag() {
    let wf = std::fs::read_to_string(repo(".github/workflows/release.yml")).unwrap();
    assert!(wf.contains("tags: [\"v*\"]"), "{wf}");
    let runs: Vec<&str> = wf
        .lines()
        .filter_map(|l| l.trim().strip_prefix("run: "))
        .collect();
    assert!(runs.contains(&"bash scripts/dist.sh"), "{runs:?}");
    assert!(runs.contains(&"bash scripts/dist-check.sh"), "{runs:?}");
    assert!(wf.contains("gh release create") && wf.contains("dist/*"));
    let ci = std::fs::read_to_string(repo(".ci/run")).unwrap();
    // CI runs dist.sh with CARGO_TARGET_DIR set (issue #35 §2).
    assert!(
        ci.contains("\nCARGO_TARGET_DIR=\"$dist_target\" bash scripts/dist.sh\n")
            && ci.contains("\nbash scripts/dist-check.sh\n")
    );
}

/// The package's one maintainer script applies tmpfiles.d/kvcr.conf at
/// install (into $DPKG_ROOT when dpkg installs into another root), so the
/// default inventory exists before the next boot.
#[test]
fn the_postinst_applies_the_tmpfiles_at_install() {
    let toml = std::fs::read_to_string(repo("Cargo.toml")).unwrap();
    assert!(toml.contains("maintainer-scripts = \"packaging/debian/\""));
    let names: Vec<_> = std::fs::read_dir(repo("packaging/debian"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["postinst"]);
    let dir = tempfile::tempdir().unwrap();
    // A stand-in systemd-tmpfiles that records its arguments.
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let log = dir.path().join("args");
    let fake = bin.join("systemd-tmpfiles");
    std::fs::write(
        &fake,
        format!("#!/bin/sh\necho \"$@\" > '{}'\n", log.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.display());
    for (arg, dpkg_root, want) in [
        ("configure", "", Some("--create kvcr.conf")),
        (
            "configure",
            "/srv/root",
            Some("--root=/srv/root --create kvcr.conf"),
        ),
        ("abort-remove", "", None),
    ] {
        let _ = std::fs::remove_file(&log);
        let st = Command::new("sh")
            .arg(repo("packaging/debian/postinst"))
            .arg(arg)
            .env("PATH", &path)
            .env("DPKG_ROOT", dpkg_root)
            .status()
            .unwrap();
        assert!(st.success());
        let got = std::fs::read_to_string(&log).ok();
        assert_eq!(got.as_deref().map(str::trim), want, "postinst {arg}");
    }
}
