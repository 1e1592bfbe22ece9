//! Hostile inventories that git cannot hold, built at run time: every one
//! gives findings, never a panic, a hang or a change to the inventory.

use crate::util::testkit::{put, put_group, snapshot, Desc};
use crate::util::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn group2(dir: &Path) {
    put_group(dir, "", &Desc::new("hostile-a", 0, 2, 1));
}

/// Audits, asserts exit 1, the code on the path, and an untouched inventory.
fn assert_rejects(dir: &Path, code: &str, path_part: &str) -> serde_json::Value {
    let before = snapshot(dir);
    let (exit, report) = audit_json(dir, &[]);
    assert_eq!(snapshot(dir), before, "inventory changed");
    assert_eq!(exit, 1, "{report:#}");
    assert!(
        has(&report, code, path_part),
        "no {code} on {path_part}: {report:#}"
    );
    report
}

#[test]
fn fifo_named_as_descriptor_does_not_hang() {
    let t = tempfile::tempdir().unwrap();
    group2(t.path());
    std::fs::remove_file(t.path().join("rank-1.json")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        t.path().join("rank-1.json"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let r = assert_rejects(t.path(), "KV002", "rank-1.json");
    assert_eq!(r["groups"][0]["verdict"], "reject");
}

#[test]
fn char_device_named_as_descriptor() {
    let t = tempfile::tempdir().unwrap();
    group2(t.path());
    std::fs::remove_file(t.path().join("rank-1.json")).unwrap();
    let made = rustix::fs::mknodat(
        rustix::fs::CWD,
        t.path().join("rank-1.json"),
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o600),
        rustix::fs::makedev(1, 3),
    );
    if made.is_err() {
        if crate::util::is_root() {
            crate::util::skip_fact(&format!("mknod is refused here ({made:?})"));
        } else {
            crate::util::missing("needs root to create a device node");
        }
        return;
    }
    assert_rejects(t.path(), "KV002", "rank-1.json");
}

#[test]
fn two_mib_file_is_rejected_unread() {
    let t = tempfile::tempdir().unwrap();
    group2(t.path());
    put(t.path(), "rank-1.json", &vec![b' '; 2 * 1024 * 1024]);
    assert_rejects(t.path(), "KV004", "rank-1.json");
}

#[test]
fn deep_nesting_is_malformed_not_a_stack_overflow() {
    let t = tempfile::tempdir().unwrap();
    group2(t.path());
    put(t.path(), "rank-1.json", &vec![b'['; 200_000]);
    assert_rejects(t.path(), "KV006", "rank-1.json");
}

#[test]
fn invalid_utf8_bom_and_empty_are_malformed() {
    for (name, bytes) in [
        ("utf8", b"{\"schema\": \"\xff\xfe\"}".to_vec()),
        ("bom", {
            let mut b = b"\xef\xbb\xbf".to_vec();
            b.extend(Desc::new("hostile-a", 1, 2, 1).bytes());
            b
        }),
        ("empty", Vec::new()),
    ] {
        let t = tempfile::tempdir().unwrap();
        group2(t.path());
        put(t.path(), "rank-1.json", &bytes);
        eprintln!("case {name}");
        assert_rejects(t.path(), "KV006", "rank-1.json");
    }
}

#[test]
fn directory_symlink_outside_is_reported_never_traversed() {
    let outside = tempfile::tempdir().unwrap();
    put_group(
        outside.path(),
        "",
        &Desc::new("outside-secret-engine", 0, 1, 1),
    );
    let t = tempfile::tempdir().unwrap();
    group2(t.path());
    std::os::unix::fs::symlink(outside.path(), t.path().join("escape")).unwrap();
    let r = assert_rejects(t.path(), "KV001", "escape");
    let text = r.to_string();
    assert!(
        !text.contains("outside-secret-engine"),
        "followed the link: {text}"
    );
    assert!(
        text.contains(&outside.path().display().to_string()),
        "target not named"
    );
}

#[test]
fn file_name_with_terminal_escapes_is_escaped_on_the_table() {
    let t = tempfile::tempdir().unwrap();
    group2(t.path());
    put(t.path(), "evil\x1b]0;pwned\x07\x1b[31m.txt", b"x");
    let out = kvcr().arg("audit").arg(t.path()).output().unwrap();
    let stdout = out.stdout;
    assert!(!stdout.contains(&0x1b), "raw ESC reached the terminal");
    assert!(String::from_utf8_lossy(&stdout).contains("\\x1b"));
    // JSON carries it escaped too.
    let (_, r) = audit_json(t.path(), &[]);
    assert!(findings(&r)
        .iter()
        .any(|(c, _, p)| c == "KV010" && p.contains('\u{1b}')));
}

#[test]
fn world_writable_file_and_directory_are_unsafe() {
    let t = tempfile::tempdir().unwrap();
    group2(t.path());
    std::fs::set_permissions(
        t.path().join("rank-1.json"),
        std::fs::Permissions::from_mode(0o666),
    )
    .unwrap();
    let r = assert_rejects(t.path(), "KV003", "rank-1.json");
    assert_eq!(r["groups"][0]["verdict"], "reject");

    let t = tempfile::tempdir().unwrap();
    put_group(t.path(), "sub", &Desc::new("hostile-a", 0, 2, 1));
    std::fs::set_permissions(t.path().join("sub"), std::fs::Permissions::from_mode(0o777)).unwrap();
    let r = assert_rejects(t.path(), "KV003", "sub");
    // Descriptors below the unsafe directory are rejected too.
    assert!(has(&r, "KV003", "sub/rank-0.json"), "{r:#}");
    assert_eq!(r["groups"][0]["verdict"], "reject");
}

#[test]
fn descriptor_owned_by_another_uid_is_unsafe() {
    if !is_root() {
        crate::util::missing("needs root to chown");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    group2(t.path());
    std::os::unix::fs::chown(t.path().join("rank-1.json"), Some(65534), Some(65534)).unwrap();
    assert_rejects(t.path(), "KV003", "rank-1.json");
}

#[test]
fn unreadable_descriptor_is_exit_2_not_a_verdict() {
    // Permission denied means this user cannot audit (docs/format.md §6):
    // exit 2 and the error document, never KV005 and exit 1.
    let t = tempfile::tempdir().unwrap();
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    group2(t.path());
    std::fs::set_permissions(
        t.path().join("rank-1.json"),
        std::fs::Permissions::from_mode(0o000),
    )
    .unwrap();
    let mut cmd = kvcr();
    if is_root() {
        // Root reads anything: run kvcr as nobody, for whom the root-owned
        // 0000 file is unreadable (root ownership itself is not unsafe).
        // The build tree may sit under a 0700 directory: run a copy of the
        // binary from a directory nobody can reach.
        use std::os::unix::process::CommandExt;
        let bin_dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(bin_dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let bin = bin_dir.path().join("kvcr");
        std::fs::copy(crate::util::bin(), &bin).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut std_cmd = std::process::Command::new(&bin);
        crate::util::test_env(&mut std_cmd)
            .uid(65534)
            .gid(65534)
            .arg("audit")
            .arg(t.path())
            .args(["--format", "json"]);
        // Another test's child, forked while the copy was open for writing,
        // holds that fd until it execs: exec fails with ETXTBSY meanwhile.
        let mut tries = 0;
        let run = loop {
            match std_cmd.output() {
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 100 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                r => break r,
            }
        };
        let out = match run {
            Ok(out) => out,
            Err(e) => {
                crate::util::missing(&format!("needs to run kvcr as nobody ({e})"));
                return;
            }
        };
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(v["code"], "permission-denied", "{v:#}");
        assert!(
            v["message"].as_str().unwrap().contains("rank-1.json"),
            "{v:#}"
        );
        return;
    }
    let out = cmd
        .arg("audit")
        .arg(t.path())
        .args(["--format", "json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(v["code"], "permission-denied", "{v:#}");
    assert!(
        v["message"].as_str().unwrap().contains("rank-1.json"),
        "{v:#}"
    );
}

#[test]
fn missing_root_is_a_usage_error() {
    let out = kvcr()
        .args(["audit", "/nonexistent/kvcr-root"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/kvcr-root"));
    let out = kvcr().args(["audit"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("KVCR_INVENTORY"));
}

#[test]
fn symlinked_root_is_resolved_once_and_shown() {
    let t = tempfile::tempdir().unwrap();
    let real = t.path().join("real");
    group2(&real);
    std::os::unix::fs::symlink(&real, t.path().join("link")).unwrap();
    let (exit, r) = audit_json(&t.path().join("link"), &[]);
    assert_eq!(exit, 0, "{r:#}");
    assert_eq!(
        r["root"],
        std::fs::canonicalize(&real).unwrap().display().to_string()
    );
}

#[test]
fn env_root_is_used() {
    let t = tempfile::tempdir().unwrap();
    group2(t.path());
    let out = kvcr()
        .env("KVCR_INVENTORY", t.path())
        .args(["audit", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn every_rank_flagged_still_reports_world_size_and_missing_ranks() {
    let t = tempfile::tempdir().unwrap();
    for rank in [0, 1] {
        let d = Desc::new("hostile-a", rank, 4, 1);
        put(t.path(), &format!("rank-{rank}.json"), &d.bytes());
    }
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let (exit, r) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1);
    let g = &r["groups"][0];
    assert_eq!(g["world_size"], 4, "{g:#}");
    let missing = g["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "KV103");
    assert_eq!(missing.expect("KV103")["found"], "missing 2-3");
}

#[test]
fn unknown_engine_is_a_listed_reason_and_bad_engine_ids_are_usage_errors() {
    let t = tempfile::tempdir().unwrap();
    group2(t.path());
    // A typo is a usage error naming the groups that are there.
    let out = kvcr()
        .arg("audit")
        .arg(t.path())
        .args(["--engine", "no-such-engine"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("groups present: "), "{err}");
    assert!(out.stdout.is_empty());
    for bad in ["bad id", "", "x\u{1b}y"] {
        let out = kvcr()
            .arg("audit")
            .arg(t.path())
            .args(["--engine", bad])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
    }
}

#[test]
fn a_superseded_descriptors_own_problems_are_listed_as_notices() {
    let t = tempfile::tempdir().unwrap();
    put_group(t.path(), "old", &Desc::new("hostile-a", 0, 2, 1));
    let mut new = Desc::new("hostile-a", 0, 2, 1);
    new.incarnation = crate::util::testkit::INCARNATION_B.into();
    new.epoch = 2;
    put_group(t.path(), "new", &new);
    std::fs::set_permissions(
        t.path().join("old/rank-0.json"),
        std::fs::Permissions::from_mode(0o666),
    )
    .unwrap();
    let (exit, r) = audit_json(t.path(), &[]);
    assert_eq!(exit, 0, "an old lifetime never rejects the group: {r:#}");
    assert!(
        findings(&r)
            .iter()
            .any(|(c, s, p)| c == "KV003" && s == "notice" && p == "old/rank-0.json"),
        "{r:#}"
    );
}
