//! The attacker's suite: hand-made inventories that once got an unsafe
//! group accepted, blew up memory or output, or made kvcr open what it must
//! not. One test (or more) per class of docs/format.md §10; each asserts the
//! code, the verdict, the exit status and, where it matters, the headline.

use crate::util::fleet::{merge_reports, node_report, write_reports};
use crate::util::testkit::{self, put, put_group, Desc, INCARNATION_B};
use crate::util::{audit_json, can_unshare_mounts, codes, findings, fixtures_live, has, kvcr};
use serde_json::{json, Value};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn with(d: &Desc, f: impl FnOnce(&mut Value)) -> Vec<u8> {
    d.bytes_with(f)
}

fn tp(n: u64) -> Desc {
    Desc::new("adv", 0, n, 1)
}

fn rank(d: &Desc, r: u64) -> Desc {
    let mut x = d.clone();
    x.rank = r;
    x
}

fn put_raw(dir: &Path, rel: &[u8], bytes: &[u8]) {
    let p = dir.join(OsStr::from_bytes(rel));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
}

fn verdict(v: &Value) -> &str {
    v["groups"][0]["verdict"].as_str().unwrap_or("?")
}

/// A dry run without a profile: its exit status (2: the real import
/// answers the missing profile first, docs/format.md §8.7) and its result
/// ("rejected" when the audit refuses the group).
fn dry_run(root: &Path) -> (i32, String) {
    let out = kvcr()
        .args(["import", "--dry-run", "--format", "json"])
        .arg(root)
        .env("KVCR_NODE_FACTS", fixtures_live("node-match.json"))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let status = out.status.code().unwrap_or(-1);
    assert_eq!(v["exit_status"], status, "{v:#}");
    (status, v["result"].as_str().unwrap_or_default().to_string())
}

// ---- 1. Identity is raw path bytes, never the display string -------------

/// A directory named with the byte 0xFF and one literally named `d\xff`
/// print alike. The superseded copy in one must not hide a second current
/// rank 0 in the other.
#[test]
fn display_aliasing_cannot_hide_a_current_duplicate() {
    let t = tempfile::tempdir().unwrap();
    let g = tp(2);
    put_group(t.path(), "a", &g);
    // A second current rank 0 behind the invalid byte.
    put_raw(t.path(), b"d\xff/rank-0.json", &g.bytes());
    // A superseded rank 0 in the directory whose name is the escape text.
    let mut old = g.clone();
    old.incarnation = INCARNATION_B.into();
    old.epoch = 0;
    put_raw(
        t.path(),
        b"d\\xff/rank-0.json",
        &with(&old, |v| v["epoch"] = json!(1)),
    );
    // Make the old one really older: the current has epoch 2.
    let mut cur = g.clone();
    cur.epoch = 2;
    put_group(t.path(), "a", &cur);
    put_raw(t.path(), b"d\xff/rank-0.json", &cur.bytes());
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1, "{v:#}");
    assert_eq!(verdict(&v), "reject");
    assert!(has(&v, "KV102", "a/rank-0.json"), "{v:#}");
    assert!(has(&v, "KV102", "d\\xff/rank-0.json"), "{v:#}");
    // The superseded copy is a notice, the current duplicate a rejection.
    assert!(findings(&v)
        .iter()
        .any(|(c, s, _)| c == "KV108" && s == "notice"));
    assert_eq!(dry_run(t.path()), (2, "rejected".into()));
}

/// Two current copies whose paths print alike are still two claimants.
#[test]
fn aliasing_paths_are_two_descriptors() {
    let t = tempfile::tempdir().unwrap();
    let g = tp(1);
    put_raw(t.path(), b"x\xfe/rank-0.json", &g.bytes());
    put_raw(t.path(), b"x\\xfe/rank-0.json", &g.bytes());
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1, "{v:#}");
    let ranks = v["groups"][0]["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 2);
    for r in ranks {
        let codes: Vec<&str> = r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["code"].as_str().unwrap())
            .collect();
        assert!(codes.contains(&"KV102"), "{r:#}");
    }
    assert_eq!(dry_run(t.path()), (2, "rejected".into()));
}

// ---- 2. A GPU is its 16 UUID bytes ---------------------------------------

#[test]
fn gpu_and_mig_spelling_of_one_uuid_is_one_gpu() {
    let t = tempfile::tempdir().unwrap();
    let g = tp(2);
    put(t.path(), "rank-0.json", &g.bytes());
    let mig = testkit::gpu(0, 0).replacen("GPU-", "MIG-", 1);
    put(
        t.path(),
        "rank-1.json",
        &with(&rank(&g, 1), |v| v["gpu_uuid"] = json!(mig)),
    );
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1, "{v:#}");
    assert!(has(&v, "KV106", "rank-1.json"), "{v:#}");
    assert!(has(&v, "KV106", "rank-0.json"), "{v:#}");
    assert!(v["groups"][0]["cause"].as_str().unwrap().contains("KV106"));
    assert_eq!(dry_run(t.path()), (2, "rejected".into()));
}

#[test]
fn a_profile_naming_one_gpu_twice_in_two_spellings_is_bad() {
    let t = tempfile::tempdir().unwrap();
    put_group(t.path(), "", &tp(2));
    let gpu0 = testkit::gpu(0, 0);
    let profile = t.path().join("../profile-adv.json");
    std::fs::write(
        &profile,
        serde_json::to_vec(&json!({"schema": "kvcr.profile/v1", "engine_id": "adv",
            "gpus": [gpu0, gpu0.replacen("GPU-", "MIG-", 1)]}))
        .unwrap(),
    )
    .unwrap();
    let out = kvcr()
        .arg("audit")
        .arg(t.path())
        .arg("--profile")
        .arg(&profile)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already listed"));
    let _ = std::fs::remove_file(profile);
}

// ---- 3. One memory, one allocation ---------------------------------------

#[test]
fn the_same_handle_twice_in_one_rank_or_across_ranks_is_kv111() {
    for kind in ["fabric", "cuda_ipc", "posix_fd"] {
        // Within one rank.
        let t = tempfile::tempdir().unwrap();
        let mut g = tp(1);
        g.handle_kind = kind;
        put(
            t.path(),
            "rank-0.json",
            &with(&g, |v| {
                let h = v["allocations"][0]["handle"].clone();
                v["allocations"][1]["handle"] = h;
            }),
        );
        let (exit, v) = audit_json(t.path(), &[]);
        assert_eq!(exit, 1, "{kind}: {v:#}");
        assert!(has(&v, "KV111", "rank-0.json"), "{kind}: {v:#}");
        assert!(
            v["groups"][0]["cause"].as_str().unwrap().contains("KV111"),
            "{kind}"
        );

        // Rank 1 carries rank 0's handle.
        let t = tempfile::tempdir().unwrap();
        let mut g = tp(2);
        g.handle_kind = kind;
        put(t.path(), "rank-0.json", &g.bytes());
        let r0 = g.value();
        put(
            t.path(),
            "rank-1.json",
            &with(&rank(&g, 1), |v| {
                v["allocations"][1]["handle"] = r0["allocations"][0]["handle"].clone()
            }),
        );
        let (exit, v) = audit_json(t.path(), &[]);
        assert_eq!(exit, 1, "{kind}: {v:#}");
        assert!(has(&v, "KV111", "rank-1.json"), "{kind}: {v:#}");
        assert!(has(&v, "KV111", "rank-0.json"), "{kind}: {v:#}");
        assert_eq!(dry_run(t.path()), (2, "rejected".into()), "{kind}");
    }
}

#[test]
fn posix_fd_identity_includes_the_owner() {
    // fd 10 of two different owners is two handles.
    let t = tempfile::tempdir().unwrap();
    let mut g = tp(2);
    g.handle_kind = "posix_fd";
    g.allocations = 1;
    put(t.path(), "rank-0.json", &g.bytes());
    put(
        t.path(),
        "rank-1.json",
        &with(&rank(&g, 1), |v| {
            v["allocations"][0]["handle"]["fd"] = json!(10);
            v["owner"]["pid"] = json!(4343);
        }),
    );
    let (exit, v) = audit_json(t.path(), &["--max-age", "100000d"]);
    assert!(!codes(&v).contains(&"KV111".to_string()), "{v:#}");
    assert_eq!(exit, 0, "{v:#}");
}

// ---- 4. One inventory, one node ------------------------------------------

#[test]
fn two_nodes_in_one_inventory_is_kv110_without_live() {
    for (field, value) in [
        ("hostname", json!("gpu-node-99")),
        ("boot_id", json!("0b7f3c2e-1d4a-4e5f-8a9b-7c6d5e4f3a21")),
    ] {
        let t = tempfile::tempdir().unwrap();
        let g = tp(2);
        put(t.path(), "rank-0.json", &g.bytes());
        put(
            t.path(),
            "rank-1.json",
            &with(&rank(&g, 1), |v| v["node"][field] = value.clone()),
        );
        let (exit, v) = audit_json(t.path(), &[]);
        assert_eq!(exit, 1, "{field}: {v:#}");
        assert!(has(&v, "KV110", "rank-1.json"), "{field}: {v:#}");
        assert!(v["groups"][0]["cause"].as_str().unwrap().contains("KV110"));
    }
    // Hostnames compare ignoring ASCII case.
    let t = tempfile::tempdir().unwrap();
    let g = tp(2);
    put(t.path(), "rank-0.json", &g.bytes());
    put(
        t.path(),
        "rank-1.json",
        &with(&rank(&g, 1), |v| {
            v["node"]["hostname"] = json!(testkit::HOSTNAME.to_ascii_uppercase())
        }),
    );
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 0, "{v:#}");
}

// ---- 5. Time -------------------------------------------------------------

#[test]
fn a_future_timestamp_cannot_dodge_max_age() {
    for created in [i64::MAX as u64, 4_102_444_800_000 /* 2100 */] {
        let t = tempfile::tempdir().unwrap();
        put(
            t.path(),
            "rank-0.json",
            &with(&tp(1), |v| v["created_unix_ms"] = json!(created)),
        );
        for age in ["3600", "60m", "1h", "1d", "3600s"] {
            let (exit, v) = audit_json(t.path(), &["--max-age", age]);
            assert_eq!(exit, 1, "{created} {age}: {v:#}");
            assert!(has(&v, "KV108", "rank-0.json"), "{v:#}");
        }
        // Without a maximum age it is shown as `future`, not rejected.
        let (exit, _) = audit_json(t.path(), &[]);
        assert_eq!(exit, 0);
        let out = kvcr().arg("audit").arg(t.path()).output().unwrap();
        assert!(String::from_utf8_lossy(&out.stdout).contains("future"));
    }
    // Within the 300 s slack a skewed clock is tolerated.
    let t = tempfile::tempdir().unwrap();
    let soon = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        + 60_000;
    put(
        t.path(),
        "rank-0.json",
        &with(&tp(1), |v| v["created_unix_ms"] = json!(soon)),
    );
    let (exit, v) = audit_json(t.path(), &["--max-age", "1h"]);
    assert_eq!(exit, 0, "{v:#}");
}

#[test]
fn max_age_units_and_bad_values() {
    let t = tempfile::tempdir().unwrap();
    put_group(t.path(), "", &tp(1));
    for bad in ["1.5h", "-1", "h", "10x", "", "99999999999999999999d"] {
        let out = kvcr()
            .arg("audit")
            .arg(t.path())
            .args(["--max-age", bad])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
    }
}

// ---- 6. Depth hides nothing unsafe ---------------------------------------

#[test]
fn unsafe_entries_below_the_depth_limit_are_still_rejected() {
    for depth in [9usize, 12, 40] {
        let t = tempfile::tempdir().unwrap();
        put_group(t.path(), "", &tp(1));
        let mut dir = t.path().to_path_buf();
        for i in 0..depth - 1 {
            dir.push(format!("d{i}"));
        }
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink("/etc/shadow", dir.join("rank-0.json")).unwrap();
        let (exit, v) = audit_json(t.path(), &[]);
        assert_eq!(exit, 1, "depth {depth}: {v:#}");
        let f = findings(&v);
        assert!(
            f.iter()
                .any(|(c, s, p)| c == "KV001" && s == "reject" && p.ends_with("rank-0.json")),
            "depth {depth}: {v:#}"
        );
        assert!(v.to_string().contains("/etc/shadow"), "names the target");
    }
    // A FIFO and a directory named like a descriptor, deep.
    let t = tempfile::tempdir().unwrap();
    put_group(t.path(), "", &tp(1));
    let deep = t.path().join("a/b/c/d/e/f/g/h/i/j");
    std::fs::create_dir_all(deep.join("rank-3.json")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        deep.join("rank-4.json"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1, "{v:#}");
    assert!(has(&v, "KV002", "rank-3.json"), "{v:#}");
    assert!(has(&v, "KV002", "rank-4.json"), "{v:#}");
}

// ---- 8. Other mounts are not entered -------------------------------------

#[test]
fn a_bind_mount_or_other_fs_below_the_root_is_kv003_and_not_entered() {
    if !can_unshare_mounts() {
        return;
    }
    let bin = crate::util::bin();
    for how in ["bind", "tmpfs"] {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("inv");
        let elsewhere = t.path().join("elsewhere");
        put_group(&root, "", &tp(2));
        std::fs::create_dir_all(root.join("mnt")).unwrap();
        // A second, valid-looking group outside: mounted in, it must not count.
        put_group(&elsewhere, "", &Desc::new("smuggled", 0, 1, 1));
        let mount = match how {
            "bind" => format!(
                "mount --bind '{}' '{}'",
                elsewhere.display(),
                root.join("mnt").display()
            ),
            _ => format!(
                "mount -t tmpfs none '{m}' && cp -r '{e}'/. '{m}'/",
                m = root.join("mnt").display(),
                e = elsewhere.display()
            ),
        };
        let out = crate::util::test_env(&mut std::process::Command::new("unshare"))
            .arg("-m")
            .arg("sh")
            .arg("-c")
            .arg(format!(
                "mount --make-rprivate / && {mount} && '{}' audit '{}' --format json",
                bin.display(),
                root.display()
            ))
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{how}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(out.status.code(), Some(1), "{how}: {v:#}");
        assert!(has(&v, "KV003", "mnt"), "{how}: {v:#}");
        assert!(
            !v.to_string().contains("smuggled"),
            "{how}: entered the mount: {v:#}"
        );
    }
}

// ---- 9. The ready file never lands inside the inventory ------------------

#[test]
fn ready_file_inside_the_inventory_is_refused_before_anything_is_written() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("inv");
    put_group(&root, "", &Desc::new("adv", 0, 1, 1));
    let deep = "a/b/c/d/e/f/g/h/i/j";
    std::fs::create_dir_all(root.join(deep)).unwrap();
    // A link outside that points back in.
    std::os::unix::fs::symlink(&root, t.path().join("link-in")).unwrap();
    let before = testkit::snapshot(&root);
    for ready in [
        root.join("ready.json"),
        root.join(deep).join("ready.json"),
        root.join("not-yet/ready.json"),
        t.path().join("link-in/ready.json"),
    ] {
        let out = kvcr()
            .args(["import", "--hold", "--ready-file"])
            .arg(&ready)
            .arg(&root)
            .env("KVCR_NODE_FACTS", fixtures_live("node-match.json"))
            .env("KVCR_IMPORT_BACKEND", "sim")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", ready.display());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("inside the inventory"), "{err}");
        assert_eq!(testkit::snapshot(&root), before, "{}", ready.display());
    }
}

// ---- 10/11. Bounded output and memory ------------------------------------

fn json_bytes(root: &Path, args: &[&str]) -> usize {
    let out = kvcr()
        .arg("audit")
        .arg(root)
        .args(["--format", "json"])
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    out.stdout.len()
}

/// N copies of one descriptor: each finding names at most 8 others, so the
/// report grows linearly, not quadratically.
#[test]
fn copies_of_one_descriptor_give_linear_output() {
    let sizes: Vec<usize> = [100usize, 400]
        .iter()
        .map(|&n| {
            let t = tempfile::tempdir().unwrap();
            let b = tp(1).bytes();
            for i in 0..n {
                put(t.path(), &format!("c{i:04}/rank-0.json"), &b);
            }
            let (_, v) = audit_json(t.path(), &[]);
            for r in v["groups"][0]["ranks"].as_array().unwrap() {
                for f in r["findings"].as_array().unwrap() {
                    let m = f["message"].as_str().unwrap();
                    assert!(m.matches("rank-0.json").count() <= 9, "{m}");
                }
            }
            assert!(v.to_string().contains(&format!("and {} more", n - 1 - 8)));
            json_bytes(t.path(), &[])
        })
        .collect();
    let per_copy = |i: usize, n: usize| sizes[i] as f64 / n as f64;
    // Linear: the size per copy does not grow with the number of copies.
    assert!(
        per_copy(1, 400) < per_copy(0, 100) * 1.3,
        "sizes {sizes:?} grow faster than linearly"
    );
}

/// One-rank groups declaring world_size 4096 print one MISSING row each.
#[test]
fn missing_rank_runs_are_one_table_row() {
    let t = tempfile::tempdir().unwrap();
    for gi in 0..20u32 {
        let mut d = Desc::new(&format!("wide-{gi}"), 0, 4096, 1);
        d.group = gi;
        put(t.path(), &format!("g{gi}/rank-0.json"), &d.bytes());
    }
    let out = kvcr().arg("audit").arg(t.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("1-4095"), "{text}");
    assert!(
        text.lines().count() < 20 * 15,
        "{} lines",
        text.lines().count()
    );
    assert!(text.len() < 200_000, "{} bytes", text.len());
}

/// Many groups missing rank 0 and many unusable files named rank-0.json:
/// the KV103 hint list is bounded too.
#[test]
fn missing_rank_hints_are_bounded() {
    let t = tempfile::tempdir().unwrap();
    for gi in 0..40u32 {
        let mut d = Desc::new(&format!("grp-{gi}"), 1, 2, 1);
        d.group = gi;
        put(t.path(), &format!("g{gi}/rank-1.json"), &d.bytes());
        put(t.path(), &format!("junk{gi}/rank-0.json"), b"not json");
    }
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1);
    for g in v["groups"].as_array().unwrap() {
        for f in g["findings"].as_array().unwrap() {
            let m = f["message"].as_str().unwrap();
            assert!(m.matches("junk").count() <= 8, "{m}");
        }
    }
}

// ---- 12/13. Merge judges from the data and escapes what it prints -------

#[test]
fn merge_refuses_hand_edited_reports() {
    let t = tempfile::tempdir().unwrap();
    let a = node_report(t.path(), "node-a", 0..2, "0-1");
    let b = node_report(t.path(), "node-b", 2..4, "2-3");
    let (exit, v, _) = merge_reports(t.path(), &[a.clone(), b.clone()]);
    assert_eq!(exit, 0, "the honest pair merges: {v:#}");

    type Edit = fn(&mut Value, &mut Value);
    let edits: Vec<(&str, Edit)> = vec![
        ("accept with a reject finding", |a, _| {
            a["groups"][0]["ranks"][0]["findings"] = json!([{"code": "KV104", "name": "geometry",
                "severity": "reject", "message": "forged", "path": "rank-0.json"}]);
        }),
        ("node group rejected for another reason", |a, _| {
            a["groups"][0]["verdict"] = json!("reject");
        }),
        ("rank marked reject without reason", |a, _| {
            a["groups"][0]["ranks"][1]["verdict"] = json!("reject");
        }),
        ("world_size 0", |a, b| {
            a["groups"][0]["world_size"] = json!(0);
            b["groups"][0]["world_size"] = json!(0);
        }),
        ("rank beyond world_size", |a, _| {
            a["groups"][0]["ranks"][1]["rank"] = json!(7);
        }),
        ("rank null", |a, _| {
            a["groups"][0]["ranks"][1]["rank"] = Value::Null;
        }),
        ("host null", |a, _| {
            a["host"] = Value::Null;
        }),
        ("host empty", |a, _| {
            a["host"] = json!("");
        }),
        ("hosts equal ignoring case", |a, b| {
            a["host"] = json!("Node-X");
            b["host"] = json!("node-x");
        }),
        ("no geometry", |a, _| {
            a["groups"][0].as_object_mut().unwrap().remove("geometry");
        }),
        ("no model", |a, _| {
            a["groups"][0]["model"] = Value::Null;
        }),
        ("rank outside local_ranks", |a, b| {
            // node-a claims rank 2 too, while saying it holds 0-1.
            let extra = a["groups"][0]["ranks"][1].clone();
            let mut extra = extra;
            extra["rank"] = json!(2);
            a["groups"][0]["ranks"].as_array_mut().unwrap().push(extra);
            b["groups"][0]["ranks"].as_array_mut().unwrap().remove(0);
        }),
    ];
    for (what, edit) in edits {
        let (mut a2, mut b2) = (a.clone(), b.clone());
        edit(&mut a2, &mut b2);
        let (exit, v, _) = merge_reports(t.path(), &[a2, b2]);
        assert!(exit != 0, "{what}: merged as accepted: {v:#}");
        if exit == 1 {
            assert_eq!(verdict(&v), "reject", "{what}");
        }
    }
}

#[test]
fn merge_escapes_text_from_reports() {
    let t = tempfile::tempdir().unwrap();
    let mut a = node_report(t.path(), "node-a", 0..2, "0-1");
    let b = node_report(t.path(), "node-b", 2..4, "2-3");
    a["groups"][0]["ranks"][0]["gpu_uuid"] = json!("\u{1b}]0;pwned\u{7}\u{1b}[2J");
    a["groups"][0]["ranks"][0]["path"] = json!("\u{1b}[31mred");
    let paths = write_reports(t.path(), &[a, b]);
    let out = kvcr().arg("merge").args(&paths).output().unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        !table.contains('\u{1b}'),
        "raw ESC reached the terminal: {table:?}"
    );
    assert!(!table.contains('\u{7}'));
}

// ---- 14. Ranks are Option<u64>, no in-band marker -------------------------

#[test]
fn the_largest_rank_name_is_shown_as_itself() {
    let t = tempfile::tempdir().unwrap();
    put_group(t.path(), "", &tp(1));
    let max = u64::MAX;
    put(
        t.path(),
        &format!("x/rank-{max}.json"),
        &with(&tp(1), |v| v["rank"] = json!(0)),
    );
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1);
    let ranks = v["groups"][0]["ranks"].as_array().unwrap();
    assert!(ranks.iter().any(|r| r["rank"] == json!(max)), "{v:#}");
    let out = kvcr().arg("audit").arg(t.path()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&max.to_string()), "{text}");
    // A rank past u64 in the name rejects (KV101); its slot falls back to
    // the content's rank, so the honest rank 0 is a duplicate too.
    let t = tempfile::tempdir().unwrap();
    put_group(t.path(), "", &tp(1));
    put(t.path(), "y/rank-99999999999999999999.json", &tp(1).bytes());
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1);
    assert!(
        has(&v, "KV101", "y/rank-99999999999999999999.json"),
        "{v:#}"
    );
    assert!(v.to_string().contains("does not fit in 64 bits"));
}
