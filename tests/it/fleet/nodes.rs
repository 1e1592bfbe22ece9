//! Groups that span nodes: `--local-ranks` on each node, then `kvcr merge`.
//! Separate nodes are simulated by separate inventories; the `host` member of
//! each report is what tells nodes apart, so tests set it per "node" (the
//! launcher test uses real UTS namespaces where the kernel allows).

use crate::util::testkit::{put, Desc, INCARNATION_B};
use crate::util::*;
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

/// The wall clock, in Unix milliseconds.
fn now_unix_ms() -> u64 {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    d.unwrap().as_millis() as u64
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

/// The code block after `<!-- recipe: NAME -->` in docs/runbook.md
/// ("6. Groups that span nodes"), verbatim.
fn runbook_recipe(name: &str) -> String {
    let runbook =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/runbook.md")).unwrap();
    let marker = format!("<!-- recipe: {name} -->");
    let after = runbook
        .split_once(&marker)
        .unwrap_or_else(|| panic!("docs/runbook.md has no {marker}"))
        .1;
    let body = after
        .trim_start()
        .strip_prefix("```sh\n")
        .expect("a ```sh block follows");
    body.split_once("\n```").unwrap().0.to_string() + "\n"
}

fn have(cmd: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {cmd} >/dev/null")])
        .status()
        .is_ok_and(|s| s.success())
}

/// (pid, start_ticks) of this test process: an owner that is alive.
fn live_owner() -> (u32, u64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = stat.rsplit_once(')').unwrap().1;
    let ticks = after.split_whitespace().nth(19).unwrap().parse().unwrap();
    (std::process::id(), ticks)
}

/// A fleet of "nodes" on this machine: `nodes/NAME/inventory` holds ranks
/// written on node NAME (its hostname, this kernel's boot id, a live owner),
/// `nodes/NAME/profile.json` names its local_ranks, and `kvcr-node NAME
/// CMD...` runs CMD as that node: in its own UTS namespace (hostname NAME)
/// and mount namespace, with `nodes/NAME` bound over `node/` so the
/// inventory has the same path (`node/inventory`) on every node.
struct Machines {
    _t: tempfile::TempDir,
    base: PathBuf,
    bin: PathBuf,
}

fn machines(names: &[&str]) -> Option<Machines> {
    machines_sized(names, 8)
}

/// [`machines`] with `per_node` ranks on each node (tp `per_node`, one
/// pipeline stage per node).
fn machines_sized(names: &[&str], per_node: u64) -> Option<Machines> {
    let ok = std::process::Command::new("unshare")
        .args(["-u", "-m", "--propagation", "private", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        if !crate::util::is_root() {
            crate::util::missing("needs root (or user namespaces) for unshare -u -m");
        } else {
            crate::util::skip_fact("unshare -u -m is refused here");
        }
        return None;
    }
    let t = tempfile::tempdir().unwrap();
    let base = t.path().to_path_buf();
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let (pid, ticks) = live_owner();
    for (i, name) in names.iter().enumerate() {
        let dir = base.join("nodes").join(name);
        let ranks = (i as u64 * per_node)..(i as u64 * per_node + per_node);
        for rank in ranks.clone() {
            let mut d = Desc::new("llama3-405b-fleet", rank, per_node, names.len() as u64);
            d.handle_kind = "posix_fd";
            d.group = (i % 2) as u32;
            let mut v = d.value();
            v["node"] = serde_json::json!({"hostname": name, "boot_id": boot_id.trim()});
            v["owner"] = serde_json::json!({"pid": pid, "start_ticks": ticks});
            v["created_unix_ms"] = now_unix_ms().into();
            crate::util::testkit::seal(&mut v);
            put(
                &dir.join("inventory"),
                &format!("rank-{rank}.json"),
                &crate::util::testkit::to_bytes(&v),
            );
        }
        let profile = serde_json::json!({"schema": "kvcr.profile/v1",
            "engine_id": "llama3-405b-fleet",
            "local_ranks": format!("{}-{}", ranks.start, ranks.end - 1)});
        put(&dir, "profile.json", &serde_json::to_vec(&profile).unwrap());
    }
    std::fs::create_dir_all(base.join("node")).unwrap();
    let bin = base.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(crate::util::bin(), bin.join("kvcr")).unwrap();
    let script = |name: &str, body: &str| {
        let p = bin.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    };
    script(
        "kvcr-node",
        r#"n=$1; shift
exec unshare -u -m --propagation private sh -c 'mount --bind "$KVCR_FLEET/nodes/$0" "$KVCR_FLEET/node" && hostname "$0" && exec "$@"' "$n" "$@""#,
    );
    // The real pdsh; its exec module stands in for ssh: pdsh expands the host
    // list, fans out and substitutes %h; each host is a kvcr-node.
    script(
        "pdsh",
        r#"while getopts w: o; do case $o in w) hosts=$OPTARG;; esac; done
shift $((OPTIND-1))
PDSH_RCMD_TYPE=exec exec /usr/bin/pdsh -w "$hosts" kvcr-node %h sh -c "$*""#,
    );
    // Stand-in for `kubectl exec [-n NS] POD [-c C] -- CMD...`: the pod is a
    // kvcr-node named after it (a pod's hostname is its name).
    script(
        "kubectl",
        r#"[ "$1" = exec ] || exit 64; shift; pod=
while [ $# -gt 0 ] && [ "$1" != -- ]; do case $1 in -n|-c) shift 2;; *) pod=$1; shift;; esac; done
shift; exec kvcr-node "$pod" "$@""#,
    );
    // Stand-in for srun when no Slurm cluster runs: one task per node,
    // SLURM_NNODES, SLURM_NODEID and SLURMD_NODENAME set, options ignored.
    script(
        "srun-standin",
        r#"while [ $# -gt 0 ]; do case $1 in -*) shift;; *) break;; esac; done
nn=$(echo $KVCR_SRUN_NODES | wc -w)
i=0; rc=0; for n in $KVCR_SRUN_NODES; do SLURM_NNODES=$nn SLURM_NODEID=$i SLURMD_NODENAME=$n kvcr-node $n "$@" || rc=$?; i=$((i+1)); done; exit $rc"#,
    );
    Some(Machines { _t: t, base, bin })
}

/// Runs a docs/runbook.md recipe with `bin` first on PATH; returns (status, stdout+stderr, reports dir).
fn run_recipe(m: &Machines, name: &str, env: &[(&str, String)]) -> (i32, String, PathBuf) {
    run_recipe_in(m, name, env, &[])
}

/// [`run_recipe`] under `launcher` (`salloc -N2`: the recipe runs inside an allocation).
fn run_recipe_in(
    m: &Machines,
    name: &str,
    env: &[(&str, String)],
    launcher: &[&str],
) -> (i32, String, PathBuf) {
    let run = m.base.join(format!("run-{name}"));
    std::fs::create_dir_all(&run).unwrap();
    let path = format!(
        "{}:{}",
        m.bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut c = match launcher.split_first() {
        Some((first, rest)) => {
            let mut c = std::process::Command::new(first);
            c.args(rest).arg("sh");
            c
        }
        None => std::process::Command::new("sh"),
    };
    test_env(&mut c)
        .args(["-c", &runbook_recipe(name)])
        .current_dir(&run)
        .env("PATH", path)
        .env("KVCR_FLEET", &m.base)
        .env("ROOT", m.base.join("node/inventory"))
        .env("PROFILE", m.base.join("node/profile.json"))
        .env("REPORTS", run.join("reports"))
        .env("COLUMNS", "200");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text, run.join("reports"))
}

fn assert_merged(name: &str, code: i32, text: &str, reports: &Path, nodes: usize) {
    assert_merged_ranks(name, code, text, reports, nodes, nodes * 8)
}

fn assert_merged_ranks(
    name: &str,
    code: i32,
    text: &str,
    reports: &Path,
    nodes: usize,
    ranks: usize,
) {
    assert_eq!(code, 0, "{name}: {text}");
    assert!(text.contains("ACCEPTED"), "{name}: {text}");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(reports)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    assert_eq!(paths.len(), nodes, "{name}: {paths:?}");
    for p in &paths {
        let v: Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
        assert_eq!(v["live"], true, "{name}: {}", p.display());
        assert_eq!(v["node_facts_source"], "proc");
        assert_eq!(v["groups"][0]["verdict"], "accept", "{name}: {v:#}");
    }
    let refs: Vec<&Path> = paths.iter().map(|p| p.as_path()).collect();
    let (exit, v) = merge(&refs);
    assert_eq!(exit, 0, "{name}: {v:#}");
    assert_eq!(v["all_inputs_live"], true);
    assert_eq!(v["groups"][0]["ranks"].as_array().unwrap().len(), ranks);
}

#[test]
fn runbook_pdsh_recipe_runs_verbatim_on_real_pdsh() {
    if !have("/usr/bin/pdsh") {
        crate::util::missing("needs pdsh (apt-get install pdsh; .ci/run installs it)");
        return;
    }
    let Some(m) = machines(&["node-0", "node-1"]) else {
        return;
    };
    let (code, text, reports) = run_recipe(&m, "pdsh", &[]);
    assert_merged("pdsh", code, &text, &reports, 2);
    assert!(
        text.contains("all 16 ranks present once across 2 reports"),
        "{text}"
    );
}

#[test]
fn runbook_kubectl_recipe_runs_verbatim_with_a_kubectl_stand_in() {
    let Some(m) = machines(&["engine-0", "engine-1"]) else {
        return;
    };
    let (code, text, reports) = run_recipe(&m, "kubectl", &[]);
    assert_merged("kubectl", code, &text, &reports, 2);
    // Reports are named after the pods, and each pod's host is its name.
    for pod in ["engine-0", "engine-1"] {
        let v: Value = serde_json::from_slice(
            &std::fs::read(reports.join(format!("report.{pod}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(v["host"], pod);
    }
}

#[test]
fn runbook_slurm_recipe_runs_verbatim() {
    let nodes = ["node-0", "node-1"];
    let Some(m) = machines(&nodes) else { return };
    if let Some(cluster) = slurm::Cluster::start(&m, &nodes) {
        // A real two-node cluster: srun from slurm-client; each slurmd runs
        // in its node's UTS and mount namespace, and so do the tasks it starts.
        let (code, text, reports) = run_recipe_in(
            &m,
            "slurm",
            &cluster.env(),
            &["timeout", "60", "salloc", "-N2", "--time=2", "--quiet"],
        );
        assert_merged("slurm", code, &text, &reports, 2);
        // Named by slurmd's SLURMD_NODENAME: the tasks ran under slurmd.
        for n in nodes {
            assert!(reports.join(format!("report.{n}.json")).exists(), "{text}");
        }
        return;
    }
    std::fs::rename(m.bin.join("srun-standin"), m.bin.join("srun")).unwrap();
    let (code, text, reports) = run_recipe(&m, "slurm", &[("KVCR_SRUN_NODES", nodes.join(" "))]);
    assert_merged("slurm (stand-in)", code, &text, &reports, 2);
}

/// The nodes' profiles without `local_ranks`: each node's part then comes
/// from `WORLD_SIZE` alone.
fn drop_local_ranks(m: &Machines, names: &[&str]) {
    for n in names {
        let p = m.base.join("nodes").join(n).join("profile.json");
        let mut v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        v.as_object_mut().unwrap().remove("local_ranks");
        std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
    }
}

/// Issue #31 §4: the recipes hard-code no ranks per node. With profiles
/// that name no `local_ranks`, `WORLD_SIZE` gives each node an equal share
/// in node order: 3 ranks on each of 2 pods (a recipe that assumed 8 per
/// node would name ranks no pod has), and a world size that does not
/// divide stops the recipe (exit 2) before any report is merged.
#[test]
fn runbook_kubectl_recipe_derives_the_ranks_from_the_world_size() {
    let pods = ["engine-0", "engine-1"];
    let Some(m) = machines_sized(&pods, 3) else {
        return;
    };
    drop_local_ranks(&m, &pods);
    let (code, text, reports) = run_recipe(&m, "kubectl", &[("WORLD_SIZE", "6".into())]);
    assert_merged_ranks("kubectl WORLD_SIZE=6", code, &text, &reports, 2, 6);
    let v: Value =
        serde_json::from_slice(&std::fs::read(reports.join("report.engine-1.json")).unwrap())
            .unwrap();
    assert_eq!(v["groups"][0]["local_ranks"], "3-5", "{v:#}");
    let (code, text, _) = run_recipe(&m, "kubectl", &[("WORLD_SIZE", "7".into())]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("WORLD_SIZE 7 is not a multiple of 2 pods"),
        "{text}"
    );
}

#[test]
fn runbook_slurm_recipe_derives_the_ranks_from_the_world_size() {
    let nodes = ["node-0", "node-1"];
    let Some(m) = machines_sized(&nodes, 3) else {
        return;
    };
    drop_local_ranks(&m, &nodes);
    std::fs::rename(m.bin.join("srun-standin"), m.bin.join("srun")).unwrap();
    let env = [
        ("KVCR_SRUN_NODES", nodes.join(" ")),
        ("WORLD_SIZE", "6".to_string()),
    ];
    let (code, text, reports) = run_recipe(&m, "slurm", &env);
    assert_merged_ranks("slurm WORLD_SIZE=6", code, &text, &reports, 2, 6);
    let env = [
        ("KVCR_SRUN_NODES", nodes.join(" ")),
        ("WORLD_SIZE", "7".to_string()),
    ];
    let (code, text, _) = run_recipe(&m, "slurm", &env);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("WORLD_SIZE 7 is not a multiple of 2 nodes"),
        "{text}"
    );
}

mod slurm {
    //! A Slurm cluster from Debian's slurmctld, slurmd and munge, started for
    //! one test in a scratch directory (own munge socket and key, free
    //! ports, own state) and stopped when dropped: slurmctld on this host,
    //! one slurmd per node, each in that node's UTS and mount namespace
    //! (hostname NODE, `nodes/NODE` bound over `node/`). `None`, with a
    //! note on stderr, where the binaries are missing, the test does not run
    //! as root (the daemons run as root here), or the nodes do not come up
    //! within 15 s.
    use std::path::Path;
    use std::process::Command;
    use std::time::{Duration, Instant};

    pub struct Cluster {
        dir: tempfile::TempDir,
        nodes: Vec<String>,
    }

    fn skip(why: &str) -> Option<Cluster> {
        crate::util::skip_fact(&format!(
            "real Slurm: {why}; the Slurm recipe runs with an srun stand-in"
        ));
        None
    }

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    fn pid_in(path: &Path) -> Option<i32> {
        std::fs::read_to_string(path).ok()?.trim().parse().ok()
    }

    impl Cluster {
        pub fn start(m: &super::Machines, nodes: &[&str]) -> Option<Cluster> {
            let bins = [
                "/usr/sbin/munged",
                "/usr/sbin/slurmctld",
                "/usr/sbin/slurmd",
                "/usr/bin/srun",
                "/usr/bin/sinfo",
            ];
            if let Some(b) = bins.iter().find(|b| !Path::new(b).exists()) {
                crate::util::missing(&format!(
                    "needs {b} (apt-get install munge slurmctld slurmd slurm-client)"
                ));
                return skip("not installed");
            }
            if !super::is_root() {
                crate::util::missing("needs root to run Slurm's daemons");
                return skip("not root");
            }
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path().to_path_buf();
            let p = |n: &str| d.join(n).display().to_string();
            std::fs::create_dir_all(d.join("state")).unwrap();
            std::fs::create_dir_all(d.join("log")).unwrap();
            for n in nodes {
                std::fs::create_dir_all(d.join(format!("spool-{n}"))).unwrap();
            }
            let key = d.join("munge.key");
            std::fs::write(
                &key,
                (0..1024).map(|i| (i * 7 + 13) as u8).collect::<Vec<u8>>(),
            )
            .unwrap();
            std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                .unwrap();
            let cluster = Cluster {
                dir,
                nodes: nodes.iter().map(|n| n.to_string()).collect(),
            };
            let st = Command::new("/usr/sbin/munged")
                .args([
                    "--force",
                    &format!("--key-file={}", p("munge.key")),
                    &format!("--socket={}", p("munge.sock")),
                    &format!("--pid-file={}", p("munged.pid")),
                    &format!("--log-file={}", p("log/munged.log")),
                    &format!("--seed-file={}", p("munge.seed")),
                ])
                .status();
            if !st.is_ok_and(|s| s.success()) {
                return skip("munged did not start");
            }
            let host = rustix::system::uname()
                .nodename()
                .to_string_lossy()
                .into_owned();
            let mut conf = format!(
                "ClusterName=kvcrtest\nSlurmctldHost={host}(127.0.0.1)\nSlurmUser=root\n\
                 SlurmdUser=root\n\
                 SlurmctldPort={}\nAuthType=auth/munge\nAuthInfo=socket={}\nCredType=cred/munge\n\
                 StateSaveLocation={}\nSlurmdSpoolDir={}\nSlurmctldPidFile={}\nSlurmdPidFile={}\n\
                 SlurmctldLogFile={}\nSlurmdLogFile={}\nProctrackType=proctrack/linuxproc\n\
                 TaskPlugin=task/none\n\
                 SelectType=select/linear\nMpiDefault=none\nReturnToService=2\n\
                 SwitchType=switch/none\n\
                 JobAcctGatherType=jobacct_gather/none\n\
                 AccountingStorageType=accounting_storage/none\n",
                free_port(),
                p("munge.sock"),
                p("state"),
                p("spool-%n"),
                p("slurmctld.pid"),
                p("slurmd-%n.pid"),
                p("log/slurmctld.log"),
                p("log/slurmd-%n.log"),
            );
            for n in nodes {
                conf.push_str(&format!(
                    "NodeName={n} NodeAddr=127.0.0.1 Port={} CPUs=1 State=UNKNOWN\n",
                    free_port()
                ));
            }
            conf.push_str(&format!(
                "PartitionName=kvcr Nodes={} Default=YES MaxTime=5 State=UP\n",
                nodes.join(",")
            ));
            let conf_path = d.join("slurm.conf");
            std::fs::write(&conf_path, conf).unwrap();
            let ok = Command::new("/usr/sbin/slurmctld")
                .arg("-f")
                .arg(&conf_path)
                .status();
            if !ok.is_ok_and(|s| s.success()) {
                return skip("slurmctld did not start");
            }
            let fleet = m.base.display().to_string();
            for n in nodes {
                // slurmd forks into the background inside the node's namespaces.
                let ok = Command::new("unshare")
                    .args([
                        "-u",
                        "-m",
                        "--propagation",
                        "private",
                        "sh",
                        "-c",
                        concat!(
                            r#"mount --bind "$1/nodes/$2" "$1/node" && hostname "$2" "#,
                            r#"&& exec /usr/sbin/slurmd -f "$3" -N "$2""#
                        ),
                        "sh",
                        &fleet,
                        n,
                        &conf_path.display().to_string(),
                    ])
                    .status();
                if !ok.is_ok_and(|s| s.success()) {
                    return skip(&format!("slurmd for {n} did not start"));
                }
            }
            let until = Instant::now() + Duration::from_secs(15);
            loop {
                let out = Command::new("/usr/bin/sinfo")
                    .args(["-h", "-o", "%t %D"])
                    .env("SLURM_CONF", &conf_path)
                    .output();
                if out.is_ok_and(|o| {
                    String::from_utf8_lossy(&o.stdout).trim() == format!("idle {}", nodes.len())
                }) {
                    return Some(cluster);
                }
                if Instant::now() > until {
                    return skip("the nodes did not become idle within 15 s");
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }

        /// What the recipe needs besides PATH: the cluster's configuration.
        pub fn env(&self) -> Vec<(&'static str, String)> {
            vec![(
                "SLURM_CONF",
                self.dir.path().join("slurm.conf").display().to_string(),
            )]
        }
    }

    impl Drop for Cluster {
        fn drop(&mut self) {
            // Stop exactly the daemons this test started, by their pid files.
            let mut files: Vec<String> = self
                .nodes
                .iter()
                .map(|n| format!("slurmd-{n}.pid"))
                .collect();
            files.extend(["slurmctld.pid".to_string(), "munged.pid".to_string()]);
            for f in files {
                if let Some(pid) = pid_in(&self.dir.path().join(f)) {
                    unsafe { libc::kill(pid, libc::SIGTERM) };
                    let until = Instant::now() + Duration::from_secs(5);
                    while unsafe { libc::kill(pid, 0) } == 0 && Instant::now() < until {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
        }
    }
}
