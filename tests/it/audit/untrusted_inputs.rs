//! Issue #19's edges (items 4, 7–13): a `/proc` that is not procfs, Unicode
//! format characters, one number reader, the profile's GPU count, the
//! profile's source, the ready file's backend, hard links, staging
//! directories and clap's echo. Each class has its own cases beyond the
//! issue's.

use crate::util::testkit::put_group;
use crate::util::*;
use std::path::Path;

// ---------------------------------------------------------------------------
// Item 7: a /proc that is not procfs is never trusted (the probe's and the
// opener's cases are inside the crate: src/io/node/tests_proc.rs).

/// A plain directory laid out like procfs, with forged facts
/// (the test kit's `proc::forged_proc`).
fn forged_proc() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    crate::util::testkit::proc::forged_proc(t.path());
    t
}

#[test]
fn proc_forged_root_audit_refuses_every_descriptor_kv005() {
    // End to end through the test hook: nothing is opened, every
    // descriptor is KV005 naming why, and live mode says on stderr that the
    // node facts are not checked.
    let fake = forged_proc();
    let inv = tempfile::tempdir().unwrap();
    put_group(
        inv.path(),
        "",
        &crate::util::testkit::Desc::new("edges-proc", 0, 2, 1),
    );
    let out = kvcr()
        .arg("audit")
        .arg(inv.path())
        .args(["--format", "json", "--live"])
        .env("KVCR_PROC_ROOT", fake.path())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{v:#}\n{stderr}");
    assert!(
        has(&v, "KV005", "rank-0.json") && has(&v, "KV005", "rank-1.json"),
        "{v:#}"
    );
    assert!(v.to_string().contains("is not procfs"), "{v:#}");
    assert!(stderr.contains("KVCR_PROC_ROOT="), "{stderr}");
    assert!(stderr.contains("not checked"), "{stderr}");
    // Control: the same inventory with the real /proc named is read.
    let (code, v) = {
        let out = kvcr()
            .arg("audit")
            .arg(inv.path())
            .args(["--format", "json"])
            .env("KVCR_PROC_ROOT", "/proc")
            .output()
            .unwrap();
        (
            out.status.code(),
            serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap(),
        )
    };
    assert!(!codes(&v).iter().any(|c| c == "KV005"), "{v:#}");
    assert_eq!(code, Some(0), "{v:#}");
}

// ---------------------------------------------------------------------------
// Item 4: escape by Unicode general category, in the JSON and the table.

/// Characters of each escaped category (Cc, Cf, Zl, Zp, Co, Cn), with the
/// JSON spelling (UTF-16 units) and the table spelling.
const ESCAPED: &[(char, &str, &str)] = &[
    ('\u{ad}', r"\u00ad", r"\xad"),
    ('\u{600}', r"\u0600", r"\u{0600}"),
    ('\u{180e}', r"\u180e", r"\u{180e}"),
    ('\u{206a}', r"\u206a", r"\u{206a}"),
    ('\u{fff9}', r"\ufff9", r"\u{fff9}"),
    ('\u{e0041}', r"\udb40\udc41", r"\u{e0041}"),
    ('\u{202e}', r"\u202e", r"\u{202e}"),
    ('\u{2066}', r"\u2066", r"\u{2066}"),
    ('\u{2028}', r"\u2028", r"\u{2028}"),
    ('\u{2029}', r"\u2029", r"\u{2029}"),
    ('\u{f8ff}', r"\uf8ff", r"\u{f8ff}"),
    ('\u{f0000}', r"\udb80\udc00", r"\u{f0000}"),
    ('\u{378}', r"\u0378", r"\u{0378}"),
    ('\u{e0080}', r"\udb40\udc80", r"\u{e0080}"),
    ('\u{9b}', r"\u009b", r"\x9b"),
];

#[test]
fn unicode_format_characters_are_escaped_in_json_and_table() {
    let inv = tempfile::tempdir().unwrap();
    put_group(
        inv.path(),
        "",
        &crate::util::testkit::Desc::new("edges-u", 0, 1, 1),
    );
    for (i, (c, _, _)) in ESCAPED.iter().enumerate() {
        // A stray entry whose name holds the character: reported by path.
        std::fs::write(inv.path().join(format!("stray-{i}-{c}z.json")), b"{}").unwrap();
    }
    let (_, v) = audit_json(inv.path(), &[]);
    let out = kvcr()
        .arg("audit")
        .arg(inv.path())
        .args(["--format", "json"])
        .output()
        .unwrap();
    let json = String::from_utf8(out.stdout).unwrap();
    let table = kvcr().arg("audit").arg(inv.path()).output().unwrap();
    let table = String::from_utf8(table.stdout).unwrap();
    for (i, (c, j, t)) in ESCAPED.iter().enumerate() {
        assert!(!json.contains(*c), "raw {c:?} in the JSON");
        assert!(!table.contains(*c), "raw {c:?} in the table:\n{table}");
        assert!(
            json.contains(&format!("stray-{i}-{j}z.json")),
            "{j} for {c:?}:\n{json}"
        );
        assert!(
            table.contains(&format!("stray-{i}-{t}z.json")),
            "{t} for {c:?}:\n{table}"
        );
        // The JSON still means the same name to a JSON reader.
        let name = format!("stray-{i}-{c}z.json");
        assert!(
            findings(&v).iter().any(|f| f.2 == name),
            "{name:?} in {:?}",
            findings(&v)
        );
    }
}

// ---------------------------------------------------------------------------
// Item 8: one number reader for seal and the audit.

/// An unsealed descriptor's text with `"rank": 0` written as `lit`.
fn rank_literal(field: &str, lit: &str) -> String {
    let v = crate::util::testkit::Desc::new("edges-num", 0, 1, 1).value();
    let text = String::from_utf8(crate::util::testkit::to_bytes(&v)).unwrap();
    let from = format!("\"{field}\": {}", v[field]);
    assert!(text.contains(&from), "{from}");
    text.replacen(&from, &format!("\"{field}\": {lit}"), 1)
}

fn seal_text(text: &str) -> (tempfile::TempDir, std::process::Output) {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("rank-0.json"), text).unwrap();
    let out = kvcr()
        .arg("seal")
        .arg(t.path().join("rank-0.json"))
        .output()
        .unwrap();
    (t, out)
}

#[test]
fn numbers_minus_zero_is_zero_in_seal_and_audit() {
    for lit in ["-0", "0"] {
        let (t, out) = seal_text(&rank_literal("rank", lit));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{lit}: {err}");
        let (code, v) = audit_json(t.path(), &[]);
        assert_eq!(code, 0, "{lit}: {v:#}");
        assert_eq!(v["groups"][0]["ranks"][0]["rank"], 0, "{v:#}");
    }
    // `-0` where 0 is out of range is refused by both, for the same reason.
    let (t, out) = seal_text(&rank_literal("epoch", "-0"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("epoch: out of range"), "{err}");
    assert!(!err.contains("float"), "{err}");
    let _ = t;
}

#[test]
fn numbers_beyond_64_bits_are_out_of_range_not_floats() {
    for (field, lit) in [
        ("rank", "18446744073709551616"),
        ("rank", "18446744073709551617"),
        ("epoch", "-9223372036854775809"),
        ("epoch", "100000000000000000000000000000000000000000"),
    ] {
        let (t, out) = seal_text(&rank_literal(field, lit));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{lit}: {err}");
        assert!(
            err.contains(&format!("{field}: out of range")),
            "{lit}: {err}"
        );
        assert!(!err.contains("float"), "{lit}: {err}");
        assert!(err.contains(&lit[..12]), "names the literal: {err}");
        // The audit of the same bytes (with a digest, so the schema is
        // judged) says out of range too.
        let mut v: serde_json::Value =
            crate::util::testkit::Desc::new("edges-num", 0, 1, 1).value();
        crate::util::testkit::seal(&mut v);
        let text = String::from_utf8(crate::util::testkit::to_bytes(&v)).unwrap();
        let from = format!("\"{field}\": {}", v[field]);
        std::fs::write(
            t.path().join("rank-0.json"),
            text.replacen(&from, &format!("\"{field}\": {lit}"), 1),
        )
        .unwrap();
        let (code, rep) = audit_json(t.path(), &[]);
        assert_eq!(code, 1);
        let msg = rep.to_string();
        assert!(
            msg.contains(&format!("{field}: out of range")),
            "{lit}: {msg}"
        );
    }
    // Floats stay floats in both: refused as such.
    for lit in ["0.0", "-0.0", "1e0", "0E+0"] {
        let (_t, out) = seal_text(&rank_literal("rank", lit));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{lit}: {err}");
        assert!(err.contains("rank: float not allowed"), "{lit}: {err}");
    }
}

// ---------------------------------------------------------------------------
// Item 9: the number of GPUs a profile lists is its world size.

/// A profile of `d`'s group with only `engine_id`, `schema` and `gpus`
/// (`n` GPUs of group 0), plus `extra` members.
fn gpus_profile(
    d: &crate::util::testkit::Desc,
    n: u64,
    extra: serde_json::Value,
) -> serde_json::Value {
    let mut p = serde_json::json!({
        "schema": kvcr_audit::profile::PROFILE_SCHEMA,
        "engine_id": d.engine_id,
        "gpus": (0..n).map(|r| crate::util::testkit::gpu(0, r)).collect::<Vec<_>>(),
    });
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    p
}

fn audit_with_profile(inv: &Path, p: &serde_json::Value) -> (i32, serde_json::Value, String) {
    let pf = inv.parent().unwrap().join(format!(
        "profile-{}.json",
        inv.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&pf, crate::util::testkit::to_bytes(p)).unwrap();
    let out = kvcr()
        .arg("audit")
        .arg(inv)
        .args(["--format", "json", "--profile"])
        .arg(&pf)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code().unwrap_or(-1), v, stderr)
}

#[test]
fn profile_gpu_count_is_the_world_size() {
    let t = tempfile::tempdir().unwrap();
    let inv = t.path().join("inv");
    let d = crate::util::testkit::Desc::new("edges-gpus", 0, 2, 1);
    put_group(&inv, "", &d);
    // 3 GPUs, no world_size: a 2-rank group is rejected, naming the sizes.
    let (code, v, err) = audit_with_profile(&inv, &gpus_profile(&d, 3, serde_json::json!({})));
    assert_eq!(code, 1, "{v:#}\n{err}");
    assert_eq!(v["groups"][0]["verdict"], "reject", "{v:#}");
    let all = v.to_string();
    assert!(has(&v, "KV104", "rank-0.json"), "{v:#}");
    assert!(
        all.contains("world_size is 2 but the profile has 3"),
        "{v:#}"
    );
    assert_eq!(v["groups"][0]["world_size"], 3, "{v:#}");
    assert!(
        findings(&v).iter().any(|f| f.0 == "KV103"),
        "rank 2 of 3 is missing: {v:#}"
    );
    // 1 GPU for a 2-rank group: rejected too.
    let (code, v, err) = audit_with_profile(&inv, &gpus_profile(&d, 1, serde_json::json!({})));
    assert_eq!(code, 1, "{v:#}\n{err}");
    // The control: exactly 2 GPUs, no world_size: accepted.
    let (code, v, err) = audit_with_profile(&inv, &gpus_profile(&d, 2, serde_json::json!({})));
    assert_eq!(code, 0, "{v:#}\n{err}");
    // tp × pp without world_size must match the list: a bad profile (exit 2)
    // naming the field and both counts.
    let (code, _, err) = audit_with_profile(
        &inv,
        &gpus_profile(&d, 3, serde_json::json!({"tp": 2, "pp": 1})),
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("`gpus`: one GPU per rank required"), "{err}");
    assert!(
        err.contains("2 GPU UUIDs (tp × pp)") && err.contains("3 GPU UUIDs"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------
// Item 10: a profile from the environment is never silent.

#[test]
fn profile_from_the_environment_is_named_in_header_and_json() {
    let t = tempfile::tempdir().unwrap();
    let inv = t.path().join("inv");
    let d = crate::util::testkit::Desc::new("edges-env", 0, 2, 1);
    put_group(&inv, "", &d);
    // A profile pinning another incarnation flips the verdict.
    let pf = t.path().join("ambient.json");
    let mut p = crate::util::testkit::profile(&d);
    p["incarnation"] = serde_json::json!(crate::util::testkit::INCARNATION_B);
    std::fs::write(&pf, crate::util::testkit::to_bytes(&p)).unwrap();
    let run = |env: bool, format: &str| {
        let mut c = kvcr();
        c.arg("audit").arg(&inv).args(["--format", format]);
        if env {
            c.env("KVCR_PROFILE", &pf);
        } else {
            c.arg("--profile").arg(&pf);
        }
        c.output().unwrap()
    };
    let out = run(true, "json");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["options"]["profile_source"], "env", "{v:#}");
    assert_eq!(v["options"]["profile"], pf.display().to_string());
    let table = String::from_utf8(run(true, "table").stdout).unwrap();
    let header: Vec<&str> = table.lines().take(3).collect();
    assert!(
        header
            .iter()
            .any(|l| l.contains("from $KVCR_PROFILE") && l.contains(&pf.display().to_string())),
        "{table}"
    );
    // The same profile on the command line: "flag", and no such line.
    let out = run(false, "json");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["options"]["profile_source"], "flag", "{v:#}");
    let table = String::from_utf8(run(false, "table").stdout).unwrap();
    assert!(!table.contains("KVCR_PROFILE"), "{table}");
    // --profile wins over the environment, and says it came from the flag.
    let out = kvcr()
        .arg("audit")
        .arg(&inv)
        .args(["--format", "json", "--profile"])
        .arg(&pf)
        .env("KVCR_PROFILE", "/nonexistent/profile.json")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["options"]["profile_source"], "flag", "{v:#}");
    // No profile: no member.
    let (_, v) = audit_json(&inv, &[]);
    assert!(v["options"].get("profile_source").is_none(), "{v:#}");
    // A bad profile from the environment names its origin in the error.
    let out = kvcr()
        .arg("audit")
        .arg(&inv)
        .env("KVCR_PROFILE", t.path().join("missing.json"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("(from $KVCR_PROFILE)"), "{err}");
    // The import's report says so too (a dry run stops before any GPU).
    let out = kvcr()
        .arg("import")
        .arg(&inv)
        .args(["--dry-run", "--format", "json"])
        .env("KVCR_PROFILE", &pf)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("\"profile_source\": \"env\""),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// ---------------------------------------------------------------------------
// Item 13 (clap): command-line errors never echo dangerous characters raw.

#[test]
fn clap_errors_escape_dangerous_characters() {
    for arg in [
        "--\u{202e}evil",
        "--x\u{1b}[31m",
        "--a\u{2028}b",
        "--soft\u{ad}hyphen",
        "--tag\u{e0041}",
        "--bell\u{7}",
    ] {
        let out = kvcr().args(["audit", "/tmp", arg]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("unexpected argument"), "{err}");
        // clap's own styles are not turned into escapes either.
        assert!(err.starts_with("error: unexpected argument '--"), "{err}");
        assert!(
            !err.chars()
                .any(|c| c != '\n' && kvcr_audit::display::is_dangerous(c)),
            "raw dangerous character echoed for {arg:?}: {err:?}"
        );
        assert!(
            err.contains("\\u{") || err.contains("\\x"),
            "escaped, not dropped: {err}"
        );
    }
    // A value a value parser refuses is echoed escaped too.
    let out = kvcr()
        .args(["audit", "/tmp", "--engine", "a\u{202e}b"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("a\\u{202e}b"), "{err}");
    // A subcommand name, too.
    let out = kvcr().arg("aud\u{202e}it").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains('\u{202e}'), "{err}");
    // --help and --version still print to stdout and exit 0.
    let out = kvcr().arg("--version").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("kvcr "));
    let out = kvcr().args(["audit", "--help"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("--profile"));
}

// ---------------------------------------------------------------------------
// Item 11: the ready file names its backend.

#[test]
fn ready_schema_requires_the_backend() {
    let schema: serde_json::Value =
        serde_json::from_str(kvcr_audit::schema::Kind::Ready.text()).unwrap();
    let v = jsonschema::draft202012::new(&schema).unwrap();
    let doc = |backend: Option<serde_json::Value>| {
        let mut d = serde_json::json!({"schema": "kvcr.import-ready/v1", "engine_id": "e",
            "incarnation": null, "epoch": null, "pid": 7, "start_ticks": 9,
            "ranks": [{"rank": 0, "gpu_uuid": "GPU-x", "device": 0,
                       "allocations": 1, "bytes": 1, "items": [{"id": "kv-0",
                       "size_bytes": 1, "offset_bytes": 0,
                       "handle": {"kind": "posix_fd", "fd": 7},
                       "obtain": {"from": "hand-over", "index": 0}}]}]});
        if let Some(b) = backend {
            d["backend"] = b;
        }
        d
    };
    assert!(v.is_valid(&doc(Some("cuda".into()))));
    assert!(v.is_valid(&doc(Some("sim".into()))));
    for bad in [
        None,
        Some("none".into()),
        Some("CUDA".into()),
        Some(serde_json::json!(null)),
    ] {
        assert!(!v.is_valid(&doc(bad.clone())), "{bad:?}");
    }
}

// ---------------------------------------------------------------------------
// Item 12: one rule for hard links, in seal and the audit.

/// The group's headline: its cause, cause code and action.
fn group_headline(v: &serde_json::Value) -> String {
    let g = &v["groups"][0];
    format!("{} {} {}", g["cause_code"], g["cause"], g["action"])
}

#[test]
fn hard_links_are_refused_by_audit_and_seal() {
    let t = tempfile::tempdir().unwrap();
    let inv = t.path().join("inv");
    let d = crate::util::testkit::Desc::new("edges-link", 0, 2, 1);
    put_group(&inv, "", &d);
    let (code, _) = audit_json(&inv, &[]);
    assert_eq!(code, 0, "control: the group is accepted");
    // A second name outside the inventory.
    let outside = t.path().join("elsewhere.json");
    std::fs::hard_link(inv.join("rank-1.json"), &outside).unwrap();
    let (code, v) = audit_json(&inv, &[]);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(v["groups"][0]["verdict"], "reject", "{v:#}");
    assert!(has(&v, "KV002", "rank-1.json"), "{v:#}");
    assert!(!has(&v, "KV002", "rank-0.json"), "{v:#}");
    let all = v.to_string();
    assert!(all.contains("has 2 hard links"), "{v:#}");
    assert!(
        group_headline(&v).contains("KV002"),
        "{}",
        group_headline(&v)
    );
    // The table says it too.
    let table = kvcr().arg("audit").arg(&inv).output().unwrap();
    assert_eq!(table.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&table.stdout).contains("hard links"));
    // Seal refuses the same file by the same rule.
    let out = kvcr()
        .arg("seal")
        .arg(inv.join("rank-1.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("2 hard links"));
    // Examine reports it as a finding of the file itself.
    let out = kvcr()
        .arg("examine")
        .arg(inv.join("rank-1.json"))
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let ev: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        ev.to_string().contains("KV002") && ev.to_string().contains("has 2 hard links"),
        "{ev:#}"
    );
    let out = kvcr()
        .arg("examine")
        .arg(inv.join("rank-0.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "control: one link");
    // Three names: the count is named.
    let third = t.path().join("third.json");
    std::fs::hard_link(&outside, &third).unwrap();
    let (_, v) = audit_json(&inv, &[]);
    assert!(v.to_string().contains("has 3 hard links"), "{v:#}");
    // Removing the other names makes it acceptable again.
    std::fs::remove_file(&outside).unwrap();
    std::fs::remove_file(&third).unwrap();
    let (code, v) = audit_json(&inv, &[]);
    assert_eq!(code, 0, "{v:#}");
}

#[test]
fn hard_links_inside_the_inventory_are_one_file_not_two_ranks() {
    // The same inode under two groups' directories: both names rejected.
    let t = tempfile::tempdir().unwrap();
    let inv = t.path().join("inv");
    let d = crate::util::testkit::Desc::new("edges-link2", 0, 1, 1);
    put_group(&inv, "a", &d);
    std::fs::create_dir_all(inv.join("b")).unwrap();
    std::fs::hard_link(inv.join("a/rank-0.json"), inv.join("b/rank-0.json")).unwrap();
    let (code, v) = audit_json(&inv, &[]);
    assert_eq!(code, 1, "{v:#}");
    assert!(
        has(&v, "KV002", "a/rank-0.json") && has(&v, "KV002", "b/rank-0.json"),
        "{v:#}"
    );
}

// ---------------------------------------------------------------------------
// Item 13: staging directories, and 0 in the profile as in the flags.

#[test]
fn staging_directories_are_reported_not_entered() {
    for name in [
        ".rank-0.json.tmp",
        ".group.tmp",
        ".x.tmp",
        ".rank-0.json.a1b2c3.tmp",
    ] {
        let t = tempfile::tempdir().unwrap();
        let inv = t.path().join("inv");
        let d = crate::util::testkit::Desc::new("edges-stage", 0, 1, 1);
        put_group(&inv, "live", &d);
        // A whole group staged in a directory and never renamed into place:
        // a different engine whose descriptors must not be judged.
        let staged = crate::util::testkit::Desc::new("edges-staged", 0, 1, 1);
        put_group(&inv, name, &staged);
        // And something unsafe inside: not reported either, as not entered.
        std::os::unix::fs::symlink("/etc/passwd", inv.join(name).join("rank-9.json")).unwrap();
        let (code, v) = audit_json(&inv, &[]);
        assert_eq!(code, 1, "{name}: {v:#}");
        assert!(has(&v, "KV009", name), "{name}: {v:#}");
        let msg = v.to_string();
        assert!(msg.contains("not entered"), "{v:#}");
        assert!(
            !msg.contains("edges-staged"),
            "{name}: the staged group was judged: {v:#}"
        );
        assert!(
            !findings(&v).iter().any(|f| f.0 == "KV001"),
            "{name}: entered: {v:#}"
        );
        assert_eq!(v["groups"].as_array().unwrap().len(), 1, "{v:#}");
        // A rejecting file no group claims rejects every group in scope and
        // is named in its cause (docs/format.md §5.6).
        assert_eq!(v["groups"][0]["verdict"], "reject", "{v:#}");
        assert!(
            v["groups"][0]["cause"].as_str().unwrap().contains("KV009"),
            "{v:#}"
        );
    }
    // Controls: a dot directory that is not a staging name is entered, and a
    // directory ending in .tmp without the dot too.
    for name in [".hidden", "group.tmp", ".tmpdir"] {
        let t = tempfile::tempdir().unwrap();
        let d = crate::util::testkit::Desc::new("edges-dot", 0, 1, 1);
        put_group(t.path(), name, &d);
        let (code, v) = audit_json(t.path(), &[]);
        assert!(!has(&v, "KV009", name), "{name}: {v:#}");
        assert_eq!(v["groups"][0]["engine_id"], "edges-dot", "{name}: {v:#}");
        let _ = code;
    }
}

#[test]
fn profile_zero_min_epoch_and_max_age_mean_what_the_flags_mean() {
    let t = tempfile::tempdir().unwrap();
    let inv = t.path().join("inv");
    let d = crate::util::testkit::Desc::new("edges-zero", 0, 1, 1);
    put_group(&inv, "", &d);
    let with = |extra: serde_json::Value| {
        let mut p = crate::util::testkit::profile(&d);
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        audit_with_profile(&inv, &p)
    };
    // min_epoch 0: accepted, as --min-epoch 0.
    let (code, v, err) = with(serde_json::json!({"min_epoch": 0}));
    assert_eq!(code, 0, "{v:#}\n{err}");
    assert_eq!(v["options"]["min_epoch"], 0);
    let (flag_code, _) = audit_json(&inv, &["--min-epoch", "0"]);
    assert_eq!(flag_code, code);
    // max_age_s 0: the profile loads, and rejects like --max-age 0 (KV108).
    let (code, v, err) = with(serde_json::json!({"max_age_s": 0}));
    assert_eq!(code, 1, "{v:#}\n{err}");
    assert!(has(&v, "KV108", "rank-0.json"), "{v:#}");
    let (flag_code, fv) = audit_json(&inv, &["--max-age", "0"]);
    assert_eq!(flag_code, code);
    assert!(has(&fv, "KV108", "rank-0.json"), "{fv:#}");
    // Beyond 2^63-1 both refuse (exit 2).
    let (code, _, err) = with(serde_json::json!({"min_epoch": 9223372036854775808u64}));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("min_epoch"), "{err}");
    for (flag, val) in [
        ("--min-epoch", "9223372036854775808"),
        ("--max-age", "9223372036854775808"),
    ] {
        let out = kvcr()
            .arg("audit")
            .arg(&inv)
            .args([flag, val])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag} {val}");
    }
    // The largest value is accepted by both.
    let (code, _, err) = with(serde_json::json!({"min_epoch": 9223372036854775807u64}));
    assert_eq!(code, 1, "{err}"); // every epoch is below it: KV108
    let (flag_code, _) = audit_json(&inv, &["--min-epoch", "9223372036854775807"]);
    assert_eq!(flag_code, 1);
}
