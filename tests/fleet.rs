//! Groups that span nodes: `--local-ranks` on each node, then `kvcr merge`.
//! Separate nodes are simulated by separate inventories; the `host` member of
//! each report is what tells nodes apart, so tests set it per "node" (the
//! launcher test uses real UTS namespaces where the kernel allows).

mod common;
use common::*;
use kvcr::testkit::{put, Desc, INCARNATION_B};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Writes ranks `ranks` of a tp=8 × pp=2 group into `dir`.
fn node_inventory(dir: &Path, ranks: std::ops::Range<u64>, f: impl Fn(&mut Desc)) {
    for rank in ranks {
        let mut d = Desc::new("llama3-405b-fleet", rank, 8, 2);
        f(&mut d);
        put(dir, &format!("rank-{rank}.json"), &d.bytes());
    }
}

/// Audits one node's inventory and saves its report with `host` set.
fn node_report(dir: &Path, local: &str, host: &str, out: &Path) -> (i32, PathBuf) {
    let (exit, mut v) = audit_json(dir, &["--local-ranks", local]);
    v["host"] = Value::String(host.to_string());
    let path = out.join(format!("report.{host}.json"));
    std::fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    (exit, path)
}

fn merge(paths: &[&Path]) -> (i32, Value) {
    let out = kvcr()
        .arg("merge")
        .args(paths)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap(), v)
}

struct Fleet {
    _t: tempfile::TempDir,
    a: PathBuf,
    b: PathBuf,
    out: PathBuf,
}

fn fleet() -> Fleet {
    let t = tempfile::tempdir().unwrap();
    let (a, b, out) = (
        t.path().join("node-a"),
        t.path().join("node-b"),
        t.path().join("out"),
    );
    std::fs::create_dir_all(&out).unwrap();
    Fleet { a, b, out, _t: t }
}

#[test]
fn local_part_is_accepted_and_foreign_ranks_are_findings() {
    let f = fleet();
    node_inventory(&f.a, 0..8, |_| {});
    let (exit, v) = audit_json(&f.a, &["--local-ranks", "0-7"]);
    assert_eq!(exit, 0, "{v:#}");
    let g = &v["groups"][0];
    assert_eq!(g["verdict"], "accept");
    assert_eq!(g["local_ranks"], "0-7");
    assert!(g["cause"]
        .as_str()
        .unwrap()
        .starts_with("local part accepted"));
    // Without --local-ranks the same node sees ranks 8-15 as missing.
    let (exit, v) = audit_json(&f.a, &[]);
    assert_eq!(exit, 1);
    assert!(has(&v, "KV103", ""), "{v:#}");
    // A descriptor for a rank outside the list is a finding.
    node_inventory(&f.a, 9..10, |_| {});
    let (exit, v) = audit_json(&f.a, &["--local-ranks", "0-7"]);
    assert_eq!(exit, 1);
    assert!(has(&v, "KV101", "rank-9.json"), "{v:#}");
    // Bad lists are usage errors.
    let out = kvcr()
        .arg("audit")
        .arg(&f.a)
        .args(["--local-ranks", "7-0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn merge_complete_over_two_nodes() {
    let f = fleet();
    node_inventory(&f.a, 0..8, |_| {});
    node_inventory(&f.b, 8..16, |d| d.group = 1);
    let (ea, ra) = node_report(&f.a, "0-7", "node-a", &f.out);
    let (eb, rb) = node_report(&f.b, "8-15", "node-b", &f.out);
    assert_eq!((ea, eb), (0, 0));
    let (exit, v) = merge(&[&ra, &rb]);
    assert_eq!(exit, 0, "{v:#}");
    let g = &v["groups"][0];
    assert_eq!(g["verdict"], "accept");
    assert_eq!(g["ranks"].as_array().unwrap().len(), 16);
    assert!(g["ranks"][9]["report"]
        .as_str()
        .unwrap()
        .ends_with("report.node-b.json"));
    assert_eq!(v["reports"].as_array().unwrap().len(), 2);
}

#[test]
fn merge_rank_missing_on_one_node() {
    let f = fleet();
    node_inventory(&f.a, 0..8, |_| {});
    node_inventory(&f.b, 8..15, |d| d.group = 1);
    let (_, ra) = node_report(&f.a, "0-7", "node-a", &f.out);
    let (eb, rb) = node_report(&f.b, "8-15", "node-b", &f.out);
    assert_eq!(eb, 1, "node b misses rank 15 locally");
    let (exit, v) = merge(&[&ra, &rb]);
    assert_eq!(exit, 1);
    let g = &v["groups"][0];
    assert!(findings(g).iter().any(|(c, _, _)| c == "KV103"), "{g:#}");
    assert!(g["cause"].as_str().unwrap().contains("15"), "{g:#}");
}

#[test]
fn merge_rank_on_both_nodes() {
    let f = fleet();
    node_inventory(&f.a, 0..9, |_| {});
    node_inventory(&f.b, 8..16, |d| d.group = 1);
    let (_, ra) = node_report(&f.a, "0-8", "node-a", &f.out);
    let (_, rb) = node_report(&f.b, "8-15", "node-b", &f.out);
    let (exit, v) = merge(&[&ra, &rb]);
    assert_eq!(exit, 1);
    let text = v.to_string();
    assert!(has(&v, "KV102", "rank-8.json"), "{v:#}");
    assert!(text.contains("report.node-a.json") && text.contains("report.node-b.json"));
}

#[test]
fn merge_geometry_and_incarnation_disagree() {
    let f = fleet();
    node_inventory(&f.a, 0..8, |_| {});
    // Node b: same group, other incarnation with the same epoch.
    node_inventory(&f.b, 8..16, |d| {
        d.group = 1;
        d.incarnation = INCARNATION_B.into();
    });
    let (_, ra) = node_report(&f.a, "0-7", "node-a", &f.out);
    let (_, rb) = node_report(&f.b, "8-15", "node-b", &f.out);
    let (exit, v) = merge(&[&ra, &rb]);
    assert_eq!(exit, 1);
    assert!(
        findings(&v)
            .iter()
            .any(|(c, s, _)| c == "KV107" && s == "reject"),
        "{v:#}"
    );

    // Geometry: edit node b's report as if its ranks had half the blocks.
    let f2 = fleet();
    node_inventory(&f2.a, 0..8, |_| {});
    node_inventory(&f2.b, 8..16, |d| d.group = 1);
    let (_, ra) = node_report(&f2.a, "0-7", "node-a", &f2.out);
    let (_, rb) = node_report(&f2.b, "8-15", "node-b", &f2.out);
    let mut vb: Value = serde_json::from_slice(&std::fs::read(&rb).unwrap()).unwrap();
    vb["groups"][0]["geometry"]["num_blocks"] = 512.into();
    std::fs::write(&rb, serde_json::to_vec(&vb).unwrap()).unwrap();
    let (exit, v) = merge(&[&ra, &rb]);
    assert_eq!(exit, 1);
    let g = &v["groups"][0];
    let msg = g["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "KV104")
        .expect("KV104");
    assert!(
        msg["message"]
            .as_str()
            .unwrap()
            .contains("report.node-b.json"),
        "{msg:#}"
    );
}

#[test]
fn merge_two_reports_from_one_node() {
    let f = fleet();
    node_inventory(&f.a, 0..8, |_| {});
    node_inventory(&f.b, 8..16, |d| d.group = 1);
    let (_, ra) = node_report(&f.a, "0-7", "node-a", &f.out);
    let (_, rb) = node_report(&f.b, "8-15", "node-a", &f.out.join("..")); // same host
    let (exit, v) = merge(&[&ra, &rb]);
    assert_eq!(exit, 1);
    assert!(findings(&v).iter().any(|(c, _, _)| c == "KV102"), "{v:#}");
}

#[test]
fn merge_refuses_foreign_json() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("other.json");
    std::fs::write(&p, br#"{"schema": "something-else/v1", "groups": []}"#).unwrap();
    let out = kvcr().arg("merge").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("other.json"));
    std::fs::write(&p, b"[1, 2").unwrap();
    assert_eq!(
        kvcr().arg("merge").arg(&p).output().unwrap().status.code(),
        Some(2)
    );
    std::fs::write(&p, br#"{"kind": "List", "items": []}"#).unwrap();
    assert_eq!(
        kvcr().arg("merge").arg(&p).output().unwrap().status.code(),
        Some(2)
    );
}

/// The README's launcher recipes, run through stand-ins for srun, pdsh and
/// kubectl: each "node" runs in its own UTS namespace (its own hostname)
/// with its own inventory.
#[test]
fn launcher_recipes_with_local_stand_ins() {
    let probe = std::process::Command::new("unshare")
        .args(["--uts", "true"])
        .status();
    if !matches!(probe, Ok(s) if s.success()) {
        eprintln!("SKIP launcher_recipes_with_local_stand_ins: unshare --uts not permitted here");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let base = t.path();
    node_inventory(&base.join("inv/node-a"), 0..8, |_| {});
    node_inventory(&base.join("inv/node-b"), 8..16, |d| d.group = 1);
    for (node, ranks) in [("node-a", "0-7"), ("node-b", "8-15")] {
        let profile = serde_json::json!({"schema": "kvcr.profile/v1", "engine_id": "llama3-405b-fleet", "local_ranks": ranks});
        put(
            &base.join("etc").join(node),
            "profile.json",
            &serde_json::to_vec(&profile).unwrap(),
        );
    }
    let bin = base.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let kvcr_bin = assert_cmd::cargo::cargo_bin("kvcr");
    std::os::unix::fs::symlink(&kvcr_bin, bin.join("kvcr")).unwrap();
    // Each stand-in runs its command once per node, in a UTS namespace named
    // after the node, with that node's inventory and Slurm/pdsh variables.
    let node_runner = r#"
run_on_node() { # NODE ID COMMAND...
  n=$1; id=$2; shift 2
  KVCR_INVENTORY="$KVCR_FLEET/inv/$n" KVCR_ETC="$KVCR_FLEET/etc/$n" SLURMD_NODENAME="$n" SLURM_NODEID="$id" \
    unshare --uts sh -c 'hostname "$0" && exec "$@"' "$n" "$@"
}
"#;
    let scripts = [
        // srun --ntasks-per-node=1 CMD...
        ("srun", "shift; i=0; for n in node-a node-b; do run_on_node $n $i \"$@\"; i=$((i+1)); done"),
        // pdsh -w HOSTS CMDSTRING (the command line is a shell string)
        ("pdsh", "shift 2; i=0; for n in node-a node-b; do run_on_node $n $i sh -c \"$*\"; i=$((i+1)); done"),
        // kubectl exec POD -- CMD...
        ("kubectl", "pod=$2; shift 3; n=${pod#kvcr-}; i=0; [ $n = node-b ] && i=1; run_on_node $n $i \"$@\""),
    ];
    for (name, body) in scripts {
        let p = bin.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{node_runner}\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let recipes = [
        // Slurm: one task per node, reports named after the node.
        "srun --ntasks-per-node=1 sh -c 'kvcr audit --local-ranks $((SLURM_NODEID*8))-$((SLURM_NODEID*8+7)) --format json > report.$SLURMD_NODENAME.json'",
        // pdsh: one command for every node; each node's profile names its
        // local_ranks (/etc/kvcr on a real node, $KVCR_ETC in the stand-in).
        "pdsh -w node-[a-b] 'kvcr audit --profile $KVCR_ETC/profile.json --format json > report.$(hostname).json'",
        // Kubernetes: kubectl exec per pod.
        "for pod in kvcr-node-a kvcr-node-b; do i=0; [ $pod = kvcr-node-b ] && i=1; kubectl exec $pod -- sh -c \"kvcr audit --local-ranks $((i*8))-$((i*8+7)) --format json\" > report.$pod.json; done",
    ];
    for (i, recipe) in recipes.iter().enumerate() {
        let dir = base.join(format!("run{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let st = std::process::Command::new("sh")
            .args(["-c", recipe])
            .current_dir(&dir)
            .env("PATH", &path)
            .env("KVCR_FLEET", base)
            .env_remove("KVCR_INVENTORY")
            .status()
            .unwrap();
        assert!(st.success(), "recipe {i} failed");
        let mut reports: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        reports.sort();
        assert_eq!(reports.len(), 2, "recipe {i}: {reports:?}");
        let refs: Vec<&Path> = reports.iter().map(|p| p.as_path()).collect();
        let (exit, v) = merge(&refs);
        assert_eq!(exit, 0, "recipe {i}: {v:#}");
        assert_eq!(v["groups"][0]["ranks"].as_array().unwrap().len(), 16);
    }
}
