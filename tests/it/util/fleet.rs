//! Fleet helpers: per-node live reports and their merge (adversarial,
//! group_and_merge_rules), and a two-node fleet of one TP=4 group, audited live on
//! each "node" (facts files) and merged by kvcr, for the attack suites that
//! forge fleet reports (fleet_gate_and_operator_files, blame_and_file_kinds).

use super::{fixtures_live, kvcr};
use crate::util::testkit::{self, put, Desc, BOOT_ID, HOSTNAME};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub const FACTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/live/node-match.json");
pub const OTHER_BOOT: &str = "0b7f3c2e-1d4a-4e5f-8a9b-7c6d5e4f3a21";

/// One node's live report (`--local-ranks LOCAL`) of ranks RANKS of a TP=4
/// group "fleet" (posix_fd: no handle bytes, so 0644 files are not KV003),
/// audited under fixtures/live/node-match.json and marked as from HOST.
pub fn node_report(dir: &Path, host: &str, ranks: std::ops::Range<u64>, local: &str) -> Value {
    let inv = dir.join(host);
    for r in ranks {
        let mut d = Desc::new("fleet", r, 4, 1);
        d.handle_kind = "posix_fd";
        put(&inv, &format!("rank-{r}.json"), &d.bytes());
    }
    let out = kvcr()
        .arg("audit")
        .arg(&inv)
        .args(["--live", "--format", "json", "--local-ranks", local])
        .env("KVCR_NODE_FACTS", fixtures_live("node-match.json"))
        .output()
        .unwrap();
    let mut v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["host"] = json!(host);
    v
}

/// REPORTS written into DIR as report-N.json; their paths.
pub fn write_reports(dir: &Path, reports: &[Value]) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for (i, r) in reports.iter().enumerate() {
        let p = dir.join(format!("report-{i}.json"));
        std::fs::write(&p, serde_json::to_vec(r).unwrap()).unwrap();
        paths.push(p);
    }
    paths
}

/// `kvcr merge --format json` of REPORTS (written into DIR): (exit, merged
/// report or null, stdout length).
pub fn merge_reports(dir: &Path, reports: &[Value]) -> (i32, Value, usize) {
    let paths = write_reports(dir, reports);
    let out = kvcr()
        .arg("merge")
        .args(&paths)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), v, out.stdout.len())
}

/// Owner-private modes (0700 dirs, 0600 files), as an owner writes them.
pub fn private(dir: &Path) {
    for e in walkdir::WalkDir::new(dir) {
        let e = e.unwrap();
        let mode = if e.file_type().is_dir() { 0o700 } else { 0o600 };
        std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

/// Two nodes of one TP=4 group: this one (gpu-node-17) holds ranks 0-1,
/// gpu-node-18 ranks 2-3. Each audited live, the reports merged by kvcr.
pub struct Fleet {
    pub dir: tempfile::TempDir,
}

impl Fleet {
    pub fn new() -> Fleet {
        Fleet::with_facts_b(|_| {})
    }
    /// As [`Fleet::new`], with node b's facts edited before its audit.
    pub fn with_facts_b(edit_b: impl Fn(&mut Value)) -> Fleet {
        let dir = tempfile::tempdir().unwrap();
        let gpus: Vec<String> = (0..4).map(|r| testkit::gpu(0, r)).collect();
        let mut names = Vec::new();
        for (node, host, boot, ranks) in [
            ("a", HOSTNAME, BOOT_ID, 0..2u64),
            ("b", "gpu-node-18", OTHER_BOOT, 2..4),
        ] {
            let inv = dir.path().join(node);
            for r in ranks.clone() {
                let mut v = Desc::new("llama3-70b-a", r, 4, 1).value();
                v["node"] = json!({"hostname": host, "boot_id": boot});
                testkit::seal(&mut v);
                testkit::put(&inv, &format!("rank-{r}.json"), &testkit::to_bytes(&v));
            }
            private(&inv);
            let mut facts = json!({"boot_id": boot, "hostname": host, "processes": {"4242": 123456},
                "gpus": {"visible": gpus, "on_node": gpus, "source": "test"}});
            if node == "b" {
                edit_b(&mut facts);
            }
            let fpath = dir.path().join(format!("facts-{node}.json"));
            std::fs::write(&fpath, facts.to_string()).unwrap();
            let local = format!("{}-{}", ranks.start, ranks.end - 1);
            let out = kvcr()
                .arg("audit")
                .arg(&inv)
                .args(["--live", "--local-ranks", &local, "--format", "json"])
                .env("KVCR_NODE_FACTS", &fpath)
                .output()
                .unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&out.stdout)
            );
            let name = dir.path().join(format!("node-{node}.json"));
            std::fs::write(&name, &out.stdout).unwrap();
            names.push(name);
        }
        let out = kvcr()
            .arg("merge")
            .args(&names)
            .args(["--format", "json"])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        std::fs::write(dir.path().join("fleet.json"), &out.stdout).unwrap();
        testkit::put_profile(
            &dir.path().join("profile.json"),
            &Desc::new("llama3-70b-a", 0, 4, 1),
        );
        Fleet { dir }
    }
    pub fn fleet(&self) -> Value {
        serde_json::from_slice(&std::fs::read(self.dir.path().join("fleet.json")).unwrap()).unwrap()
    }
    pub fn node_report(&self, node: &str) -> Value {
        let p = self.dir.path().join(format!("node-{node}.json"));
        serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
    }
    /// `kvcr import A --local-ranks 0-1 [--fleet-report F] ARGS` with the
    /// sim backend.
    pub fn import(&self, fleet: Option<&Value>, args: &[&str]) -> (i32, Value) {
        let mut c = kvcr();
        c.arg("import")
            .arg(self.dir.path().join("a"))
            .args(["--local-ranks", "0-1", "--format", "json"])
            .args(args)
            .env("KVCR_NODE_FACTS", self.dir.path().join("facts-a.json"))
            .env("KVCR_PROFILE", self.dir.path().join("profile.json"))
            .env("KVCR_IMPORT_BACKEND", "sim");
        if let Some(f) = fleet {
            let p = self.dir.path().join("given.json");
            std::fs::write(&p, f.to_string()).unwrap();
            c.arg("--fleet-report").arg(p);
        }
        let out = c.output().unwrap();
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code().unwrap(), v)
    }
    /// Refused with exit 1 by the fleet gate, with a message containing `why`.
    pub fn refused(&self, fleet: Option<&Value>, args: &[&str], why: &str) {
        let (code, v) = self.import(fleet, args);
        assert_eq!(code, 1, "{why}: {v:#}");
        assert_eq!(v["result"], "rejected", "{why}");
        assert_eq!(v["refusals"][0]["gate"], "fleet-report", "{why}: {v:#}");
        let msg = v["refusals"][0]["message"].as_str().unwrap();
        assert!(msg.contains(why), "{why}: {msg}");
        assert!(v["ranks"].as_array().unwrap().is_empty());
    }
    /// A forged fleet report must be refused by the fleet gate (exit 1,
    /// nothing imported). The unforged one imports (checked first, so a
    /// failure here is about the forgery, not the set-up).
    pub fn must_refuse(&self, what: &str, edit: impl FnOnce(&mut Value)) {
        let base = self.fleet();
        let (code, v) = self.import(Some(&base), &[]);
        assert_eq!(code, 0, "set-up: the genuine fleet report imports: {v:#}");
        let mut forged = base;
        edit(&mut forged);
        let (code, v) = self.import(Some(&forged), &[]);
        assert_eq!(
            (code, v["result"].as_str()),
            (1, Some("rejected")),
            "{what}: the fleet gate accepted a forged report and the import proceeded: {v:#}"
        );
        assert_eq!(v["refusals"][0]["gate"], "fleet-report", "{what}: {v:#}");
    }
}

/// What `kvcr merge` printed and its exit status.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// stdout as one JSON document.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}\n{}", self.stdout, self.stderr))
    }
}

/// `kvcr merge PATHS… --format FORMAT`.
pub fn merge_paths(paths: &[PathBuf], format: &str) -> Run {
    let out = kvcr()
        .arg("merge")
        .args(paths)
        .args(["--format", format])
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Rejected (exit 1), `code` among the findings and in the headline.
pub fn rejected_with(r: &Run, code: &str) -> Value {
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["groups"][0]["verdict"], "reject", "{v:#}");
    assert_eq!(v["exit_status"], 1);
    assert!(
        super::codes(&v).iter().any(|c| c == code),
        "{code} missing: {:?}\n{v:#}",
        super::codes(&v)
    );
    assert!(
        v["groups"][0]["cause"].as_str().unwrap().contains(code),
        "headline names {code}: {v:#}"
    );
    v
}

/// Refused whole (exit 2, nothing judged), the error naming the file and
/// `what` (a field path or a reason).
pub fn refused(r: &Run, file: &str, what: &str) {
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    // Nothing is judged: with --format json stdout carries only the
    // kvcr.error/v1 document (docs/json.md), otherwise nothing.
    if !r.stdout.is_empty() {
        let v: Value = serde_json::from_str(&r.stdout).expect("one JSON document");
        assert_eq!(v["schema"], "kvcr.error/v1", "nothing judged: {}", r.stdout);
        assert_eq!(v["exit_status"], 2);
    }
    assert!(r.stderr.contains(file), "names the file: {}", r.stderr);
    assert!(r.stderr.contains(what), "names {what}: {}", r.stderr);
}
