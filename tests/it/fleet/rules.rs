//! Rules that hold across groups and across nodes' reports: one handle backs
//! one group (KV111), one inventory is one node's (KV110 across groups),
//! merge judges identity fields, severities and group shape from the data
//! and stays linear in its inputs, inherited KV003 stays bounded, a ready
//! file never lands inside the inventory through an alias, and a local part
//! is never imported without proof of the whole group.
//!
//! Each test was a defect found by an attack on the issue #11 fix (commit
//! 2b268cd), fixed since. Its name states the guarantee; its doc comment
//! records what kvcr did then ("Should be:" is what it does now).

use crate::util::fleet::{merge_reports, node_report};
use crate::util::testkit::{put, put_group, Desc};
use crate::util::{audit_json, can_unshare_mounts, findings, fixtures_live, kvcr};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn with(d: &Desc, f: impl FnOnce(&mut Value)) -> Vec<u8> {
    d.bytes_with(f)
}

fn verdict_of<'a>(v: &'a Value, engine: &str) -> &'a str {
    v["groups"]
        .as_array()
        .and_then(|gs| gs.iter().find(|g| g["engine_id"] == json!(engine)))
        .and_then(|g| g["verdict"].as_str())
        .unwrap_or("?")
}

// ---- (c) Inherited KV003 is unbounded: output cubic in depth -------------

/// Creates `depth` nested directories, each named `name` and mode 0777,
/// below `root`; returns the deepest.
fn unsafe_chain(root: &Path, name: &str, depth: usize) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let mut dir = root.to_path_buf();
    for _ in 0..depth {
        dir.push(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    dir
}

/// A chain of D world-writable directories, each named `rank-1.json`: every
/// one is a KV002 entry that inherits one KV003 per unsafe directory above
/// it, each naming that directory's (long) path: D²/2 findings and O(D³)
/// bytes from D directories (D = 200: 54 MB of JSON, 98 MB of table and
/// 525 MB RSS). Same with N symlinks named rank-K.json at the bottom (N×D).
/// Should be: bounded (§9.3), e.g. inherit the nearest unsafe directory and
/// count the rest ("and N more").
#[test]
fn inherited_kv003_is_bounded_for_deep_unsafe_chains() {
    let t = tempfile::tempdir().unwrap();
    put_group(t.path(), "", &Desc::new("adv", 0, 1, 1));
    let depth = 60;
    let bottom = unsafe_chain(t.path(), "rank-1.json", depth);
    for k in 0..40 {
        std::os::unix::fs::symlink("/etc/passwd", bottom.join(format!("rank-{}.json", k + 2)))
            .unwrap();
    }
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1);
    let per_entry_max = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["findings"].as_array().unwrap().len())
        .max()
        .unwrap();
    let total = findings(&v).len();
    // 60 dirs + 40 links: a linear report has a few findings per entry.
    assert!(
        per_entry_max <= 12,
        "one entry carries {per_entry_max} findings (one KV003 per unsafe directory above it)"
    );
    assert!(
        total <= 12 * (depth + 40),
        "{total} findings for {} entries",
        depth + 40
    );
}

// ---- (a) The same memory imported under two engine_ids -------------------

/// Group `beta` is a copy of group `alpha` (same handle bytes, same GPUs)
/// that declares another model. Both are accepted (exit 0) and
/// `import --dry-run --engine beta` plans alpha's memory as beta's KV cache:
/// silent corruption. KV111's rationale (§3.4) holds across groups: one
/// handle backs one allocation of one group. Should be: both rejected
/// (KV111 naming the other group).
/// Among many groups, one handle shared by two far apart is still found:
/// the pass that finds suspect handles packs each group's index into the
/// low bits of the handle's fingerprint (src/rules/across.rs), and with 300
/// groups those are nine bits; the other groups stay accepted.
#[test]
fn one_handle_shared_by_two_of_many_groups_is_found() {
    let t = tempfile::tempdir().unwrap();
    let groups = 300;
    for g in 0..groups {
        let mut d = Desc::new(&format!("eng-{g:03}"), 0, 1, 1);
        d.group = g;
        put_group(t.path(), &format!("g{g:03}"), &d);
    }
    // Group 250's one rank carries group 5's allocations.
    let mut five = Desc::new("eng-005", 0, 1, 1);
    five.group = 5;
    let borrowed = five.value()["allocations"].clone();
    let mut d = Desc::new("eng-250", 0, 1, 1);
    d.group = 250;
    put(
        t.path(),
        "g250/rank-0.json",
        &with(&d, |v| v["allocations"] = borrowed),
    );
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1);
    assert_eq!(verdict_of(&v, "eng-250"), "reject", "{v:#}");
    assert_eq!(verdict_of(&v, "eng-005"), "reject", "{v:#}");
    let accepted = v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["verdict"] == "accept")
        .count();
    assert_eq!(accepted, groups as usize - 2);
}

#[test]
fn one_handle_in_two_groups_is_rejected() {
    for kind in ["fabric", "cuda_ipc", "posix_fd"] {
        let t = tempfile::tempdir().unwrap();
        let mut a = Desc::new("alpha", 0, 2, 1);
        a.handle_kind = kind;
        put_group(t.path(), "a", &a);
        for r in 0..2 {
            let mut b = a.clone();
            b.engine_id = "beta".into();
            b.rank = r;
            // Alpha's very handle bytes (or fds), under another engine_id.
            let mut ar = a.clone();
            ar.rank = r;
            let alpha_allocs = ar.value()["allocations"].clone();
            put(
                t.path(),
                &format!("b/rank-{r}.json"),
                &with(&b, |v| {
                    v["model"]["name"] = json!("other/model-7b");
                    v["allocations"] = alpha_allocs;
                }),
            );
        }
        let (exit, v) = audit_json(t.path(), &[]);
        assert_eq!(verdict_of(&v, "beta"), "reject", "{kind}: {v:#}");
        assert_eq!(exit, 1, "{kind}");
        // 0600 so the live KV003 exposure check is not what rejects.
        for e in walkdir::WalkDir::new(t.path()) {
            let e = e.unwrap();
            if e.file_type().is_file() {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
            }
        }
        let out = kvcr()
            .args([
                "import",
                "--dry-run",
                "--engine",
                "beta",
                "--format",
                "json",
            ])
            .arg(t.path())
            .env("KVCR_NODE_FACTS", fixtures_live("node-match.json"))
            .output()
            .unwrap();
        // No profile: the real import answers 2 first (§8.7); the audit
        // still refuses beta, so nothing is planned.
        let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(plan["result"], "rejected", "{kind}: beta was planned");
        assert_eq!(out.status.code(), Some(2), "{kind}");
    }
}

// ---- (f) Merge: hand-edited reports beyond tests/it/audit/adversarial.rs ----------

fn honest_pair(dir: &Path) -> (Value, Value) {
    (
        node_report(dir, "node-a", 0..2, "0-1"),
        node_report(dir, "node-b", 2..4, "2-3"),
    )
}

type Edit = fn(&mut Value, &mut Value);

fn assert_all_refused(dir: &Path, a: &Value, b: &Value, edits: Vec<(&str, Edit)>) {
    let (exit, v, _) = merge_reports(dir, &[a.clone(), b.clone()]);
    assert_eq!(exit, 0, "the honest pair merges: {v:#}");
    let mut accepted = Vec::new();
    for (what, edit) in edits {
        let (mut a2, mut b2) = (a.clone(), b.clone());
        edit(&mut a2, &mut b2);
        let (exit, v, _) = merge_reports(dir, &[a2, b2]);
        if exit == 0 || verdict_of(&v, "fleet") == "accept" {
            accepted.push(what);
        }
    }
    assert!(accepted.is_empty(), "merged as accepted: {accepted:?}");
}

/// `agree` skips a report whose incarnation / epoch / world_size / tp / pp
/// is null, so those fields are never compared for it; with both nulled the
/// merged group has no incarnation at all and is still accepted (exit 0).
/// A node group with an accepted rank always carries them. Should be:
/// reject, like a missing geometry or model (§10).
#[test]
fn merge_refuses_reports_without_identity_fields() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = honest_pair(t.path());
    assert_all_refused(
        t.path(),
        &a,
        &b,
        vec![
            ("b incarnation null", |_, b| {
                b["groups"][0]["incarnation"] = Value::Null
            }),
            ("b epoch null", |_, b| b["groups"][0]["epoch"] = Value::Null),
            ("both incarnation and epoch null", |a, b| {
                for x in [a, b] {
                    x["groups"][0]["incarnation"] = Value::Null;
                    x["groups"][0]["epoch"] = Value::Null;
                }
            }),
            ("b world_size null", |_, b| {
                b["groups"][0]["world_size"] = Value::Null
            }),
            ("b tp and pp null", |_, b| {
                b["groups"][0]["tp"] = Value::Null;
                b["groups"][0]["pp"] = Value::Null;
            }),
        ],
    );
}

/// Merge takes a finding's severity from the report: a rank-level KV104,
/// a group-level KV111 (shown in the merged findings, verdict still
/// accept!) or an unknown code, all marked "notice", are accepted. Only
/// KV010 and the findings on descriptors outside the current incarnation
/// are ever notices (§5); a rank's own findings never are. Should be:
/// severity judged from the code (and where it sits), not from the report.
#[test]
fn merge_judges_severity_from_the_code() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = honest_pair(t.path());
    assert_all_refused(
        t.path(),
        &a,
        &b,
        vec![
            ("rank KV104 as notice", |a, _| {
                a["groups"][0]["ranks"][0]["findings"] = json!([{
                    "code": "KV104", "name": "geometry",
                    "severity": "notice", "message": "forged", "path": "rank-0.json"}]);
            }),
            ("group KV111 as notice", |a, _| {
                a["groups"][0]["findings"] = json!([{"code": "KV111", "name": "handle-reuse",
                    "severity": "notice", "message": "forged", "path": "rank-0.json"}]);
            }),
            ("unknown code as notice", |a, _| {
                a["groups"][0]["ranks"][0]["findings"] =
                    json!([{"code": "KV999", "severity": "notice", "message": "?"}]);
            }),
        ],
    );
}

/// The group's own shape is not validated: tp × pp ≠ world_size (KV101),
/// geometry.num_layers 0 (out of range, KV007), epoch ≥ 2^63, and an
/// accepted rank with gpu_uuid null are all merged as accepted. Should be:
/// the same field rules as a descriptor (§3, §10 "judges from the data").
#[test]
fn merge_validates_the_group_shape() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = honest_pair(t.path());
    assert_all_refused(
        t.path(),
        &a,
        &b,
        vec![
            ("tp × pp ≠ world_size", |a, b| {
                for x in [a, b] {
                    x["groups"][0]["tp"] = json!(3);
                }
            }),
            ("num_layers 0", |a, b| {
                for x in [a, b] {
                    x["groups"][0]["geometry"]["num_layers"] = json!(0);
                }
            }),
            ("epoch 2^64-1", |a, b| {
                for x in [a, b] {
                    x["groups"][0]["epoch"] = json!(u64::MAX);
                }
            }),
            ("accepted rank without a GPU", |_, b| {
                b["groups"][0]["ranks"][0]["gpu_uuid"] = Value::Null;
            }),
        ],
    );
}

/// One report carrying the same engine_id twice: node-a's report holds a
/// second group entry with node-b's ranks 2-3 (here on node-a's own GPUs of
/// ranks 0-1), and node-b's report holds nothing. Merged as accepted: the
/// two halves were never checked against each other (KV106/KV111 within one
/// node), and node-a is taken as the source of ranks it never audited
/// together. A kvcr audit never writes one engine twice. Should be: reject
/// (or refuse the report, exit 2).
#[test]
fn merge_refuses_one_engine_twice_in_a_report() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = honest_pair(t.path());
    let mut a2 = a.clone();
    let mut second = b["groups"][0].clone();
    // Ranks 2-3 claim node-a's GPUs of ranks 0-1.
    for i in 0..2 {
        second["ranks"][i]["gpu_uuid"] = a["groups"][0]["ranks"][i]["gpu_uuid"].clone();
    }
    a2["groups"].as_array_mut().unwrap().push(second);
    let (exit, v, _) = merge_reports(t.path(), &[a2.clone()]);
    assert!(
        exit != 0 && verdict_of(&v, "fleet") != "accept",
        "one report, one host, two group entries merged: {v:#}"
    );
    let mut b2 = b.clone();
    b2["groups"] = json!([]);
    let (exit, v, _) = merge_reports(t.path(), &[a2, b2]);
    assert!(exit != 0 && verdict_of(&v, "fleet") != "accept", "{v:#}");
}

// ---- (c) Merge amplifiers ------------------------------------------------

/// N reports (distinct hosts) that each report ranks 0-1: every rank's KV102
/// names every report ("rank 0 is reported by r0 and r1 and ... rN"), so
/// the JSON is O(N²) (100 reports: 1.2 MB, 400: 19 MB). Likewise N reports
/// from one host with N distinct groups: the duplicate-host finding, which
/// names all N reports, is copied into each of the N groups (100: 0.96 MB,
/// 400: 13.9 MB). Should be: at most 8 names per finding (§9.3).
#[test]
fn merge_output_is_linear_in_the_number_of_reports() {
    let t = tempfile::tempdir().unwrap();
    let a = node_report(t.path(), "node-a", 0..2, "0-1");
    for same_host in [false, true] {
        let sizes: Vec<usize> = [50usize, 200]
            .iter()
            .map(|&n| {
                let reports: Vec<Value> = (0..n)
                    .map(|i| {
                        let mut r = a.clone();
                        if same_host {
                            r["groups"][0]["engine_id"] = json!(format!("g{i}"));
                        } else {
                            r["host"] = json!(format!("h{i}"));
                        }
                        r
                    })
                    .collect();
                let (exit, v, len) = merge_reports(t.path(), &reports);
                assert_eq!(exit, 1);
                for g in v["groups"].as_array().unwrap() {
                    for f in g["findings"].as_array().unwrap().iter().chain(
                        g["ranks"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .flat_map(|r| r["findings"].as_array().unwrap().iter()),
                    ) {
                        let m = f["message"].as_str().unwrap();
                        assert!(
                            m.matches("report-").count() <= 9,
                            "same_host {same_host}: a finding names {} reports",
                            m.matches("report-").count()
                        );
                    }
                }
                len
            })
            .collect();
        let per = |i: usize, n: usize| sizes[i] as f64 / n as f64;
        assert!(
            per(1, 200) < per(0, 50) * 1.5,
            "same_host {same_host}: sizes {sizes:?} grow faster than linearly"
        );
    }
}

/// `local_ranks` is expanded rank by rank into a BTreeSet: a report whose
/// local_ranks is "0-4095" repeated 20,000 times (140 kB) takes ~33 s of
/// CPU in `kvcr merge` (82 M set insertions), for one report; the same
/// parser reads a profile's local_ranks and --local-ranks. Should be:
/// linear in the text (ranges kept as ranges, or duplicates refused).
#[test]
fn merge_local_ranks_cost_is_linear_in_its_text() {
    let t = tempfile::tempdir().unwrap();
    let mut a = node_report(t.path(), "node-a", 0..2, "0-1");
    a["groups"][0]["local_ranks"] = json!(vec!["0-4095"; 20_000].join(","));
    let p = t.path().join("r.json");
    std::fs::write(&p, serde_json::to_vec(&a).unwrap()).unwrap();
    let start = std::time::Instant::now();
    let out = kvcr()
        .arg("merge")
        .arg(&p)
        .args(["--format", "json"])
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    let took = start.elapsed();
    assert!(out.status.code().is_some());
    assert!(
        took < std::time::Duration::from_secs(8),
        "merge of one 140 kB report took {took:?}"
    );
}

// ---- (b) The ready file lands inside the inventory through an alias ------

/// `refuse_inside_inventory` compares canonical path strings, so a bind
/// mount of (a directory of) the inventory at another path is not seen:
/// `import --hold --ready-file ALIAS/ready.json` holds (exit 0 after
/// SIGTERM) and publishes ready.json inside the inventory at depth 10
/// (or, with ALIAS = the root, leaves its staging file there, which its own
/// audit then calls a torn write). Bind-mounted inventories are common in
/// containers (hostPath). Should be: exit 2, decided by (st_dev, st_ino) of
/// the ready file's directory and its ancestors, not by path text (§8.8,
/// §8.9).
#[test]
fn ready_file_through_a_bind_mount_alias_is_refused() {
    if !can_unshare_mounts() {
        return;
    }
    let bin = crate::util::bin();
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("inv");
    let mut d = Desc::new("adv", 0, 1, 1);
    d.handle_kind = "posix_fd";
    put(&root, "rank-0.json", &d.bytes());
    let deep = root.join("a/b/c/d/e/f/g/h/i");
    std::fs::create_dir_all(&deep).unwrap();
    let alias = t.path().join("alias");
    std::fs::create_dir(&alias).unwrap();
    for (target, what) in [(&deep, "deep"), (&root, "root")] {
        let out = crate::util::test_env(&mut std::process::Command::new("unshare"))
            .arg("-m")
            .arg("sh")
            .arg("-c")
            .arg(format!(
                "mount --make-rprivate / && mount --bind '{target}' '{alias}' && \
                 timeout -s TERM 4 '{bin}' import --hold \
                 --ready-file '{alias}/ready.json' '{root}'",
                target = target.display(),
                alias = alias.display(),
                bin = bin.display(),
                root = root.display(),
            ))
            .env("KVCR_NODE_FACTS", fixtures_live("node-match.json"))
            .env("KVCR_IMPORT_BACKEND", "sim")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: not refused: {err}");
        assert!(err.contains("inside the inventory"), "{what}: {err}");
    }
}

// ---- (a) Partial group imported (overlaps issue #12, §8.9) --------------

/// `kvcr import --local-ranks 0 ROOT` on an inventory holding only rank 0 of
/// a TP=4 group imports that one rank (sim backend: result "imported",
/// exit 0), with no `--fleet-report` and no profile. §1: no partial group
/// is ever accepted; §8.9: a local part only with a merge report that
/// accepts the whole group (exit 1 otherwise), and import without the
/// declared profile is exit 2. Should be: refused before any GPU call.
#[test]
fn a_local_part_is_not_imported_without_proof_of_the_whole_group() {
    let t = tempfile::tempdir().unwrap();
    let mut d = Desc::new("adv", 0, 4, 1);
    d.handle_kind = "posix_fd";
    let inv = t.path().join("inv");
    put(&inv, "rank-0.json", &d.bytes());
    // With the declared profile, so the refusal is the missing fleet proof.
    let profile = t.path().join("profile.json");
    crate::util::testkit::put_profile(&profile, &d);
    let out = kvcr()
        .args(["import", "--local-ranks", "0", "--format", "json"])
        .arg(&inv)
        .arg("--profile")
        .arg(&profile)
        .env("KVCR_NODE_FACTS", fixtures_live("node-match.json"))
        .env("KVCR_IMPORT_BACKEND", "sim")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_ne!(v["result"], json!("imported"), "{v:#}");
    assert_ne!(out.status.code(), Some(0), "{v:#}");
    assert_eq!(out.status.code(), Some(1), "{v:#}");
    assert_eq!(v["refusals"][0]["gate"], json!("fleet-report"), "{v:#}");
}

/// Two nodes audited without `--local-ranks`: each node's report REJECTS
/// the group (KV103 for the other node's ranks), and merge accepts it
/// (exit 0), because it drops every node KV103 and then sees a reject
/// verdict that "has a reason". Without local_ranks merge also cannot check
/// which ranks a node was meant to hold. §10: a node group rejected for
/// any reason rejects (or refuses) the merge. Should be: exit 1 (or 2,
/// "audit each node with --local-ranks").
#[test]
fn merge_refuses_node_reports_that_rejected_the_group() {
    let t = tempfile::tempdir().unwrap();
    let whole = |host: &str, ranks: std::ops::Range<u64>| {
        let inv = t.path().join(host);
        for r in ranks {
            let mut d = Desc::new("fleet", r, 4, 1);
            d.handle_kind = "posix_fd";
            put(&inv, &format!("rank-{r}.json"), &d.bytes());
        }
        let out = kvcr()
            .arg("audit")
            .arg(&inv)
            .args(["--live", "--format", "json"])
            .env("KVCR_NODE_FACTS", fixtures_live("node-match.json"))
            .output()
            .unwrap();
        let mut v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["host"] = json!(host);
        assert_eq!(v["groups"][0]["verdict"], json!("reject"));
        v
    };
    let a = whole("node-a", 0..2);
    let b = whole("node-b", 2..4);
    let (exit, v, _) = merge_reports(t.path(), &[a, b]);
    assert!(
        exit != 0 && verdict_of(&v, "fleet") != "accept",
        "both nodes rejected the group, the merge accepts it: {v:#}"
    );
}

/// One inventory, two nodes, split by group: group `alpha` from gpu-node-17
/// and group `beta` (whose every rank names gpu-node-99, or another boot)
/// are both accepted by an offline audit (exit 0). KV110 is checked only
/// within a group, while §3.4's reason is "one inventory is one node's".
/// Should be: KV110 across the inventory (at least for the odd group).
#[test]
fn two_nodes_in_one_inventory_split_by_group_is_kv110() {
    for (field, value) in [
        ("hostname", json!("gpu-node-99")),
        ("boot_id", json!("0b7f3c2e-1d4a-4e5f-8a9b-7c6d5e4f3a21")),
    ] {
        let t = tempfile::tempdir().unwrap();
        put_group(t.path(), "a", &Desc::new("alpha", 0, 2, 1));
        for r in 0..2 {
            let mut b = Desc::new("beta", r, 2, 1);
            b.group = 1;
            put(
                t.path(),
                &format!("b/rank-{r}.json"),
                &with(&b, |v| v["node"][field] = value.clone()),
            );
        }
        let (exit, v) = audit_json(t.path(), &[]);
        assert_eq!(exit, 1, "{field}: {v:#}");
    }
}
