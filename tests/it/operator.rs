//! What an operator meets (issue #21): the command, its output and its exit
//! status agree. Each test runs the binary the way an SRE or a monitor
//! does: the table header, the JSON report, the import's refusal, stdout
//! with `--format json` on every exit.

use crate::util::fleet::private;
use crate::util::kvcr;
use crate::util::testkit::{self, put_group, Desc, BOOT_ID, HOSTNAME};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A private 4-rank group "ops" (cuda_ipc), facts that match it (owner
/// alive, GPUs present) and its declared profile: what an import needs.
struct Node {
    dir: tempfile::TempDir,
}

impl Node {
    fn new() -> Node {
        let dir = tempfile::tempdir().unwrap();
        let d = Desc::new("ops", 0, 4, 1);
        put_group(&dir.path().join("inv"), "", &d);
        private(&dir.path().join("inv"));
        let gpus: Vec<String> = (0..4).map(|r| testkit::gpu(0, r)).collect();
        let facts = json!({
            "boot_id": BOOT_ID, "hostname": HOSTNAME,
            "processes": {"4242": 123456}, "processes_unreadable": null,
            "gpus": {"visible": gpus, "on_node": gpus, "source": "test"}
        });
        std::fs::write(dir.path().join("facts.json"), facts.to_string()).unwrap();
        testkit::put_profile(&dir.path().join("profile.json"), &d);
        Node { dir }
    }
    fn inv(&self) -> PathBuf {
        self.dir.path().join("inv")
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    /// `kvcr ARGS` on this node (its facts, the sim backend): (status, stdout, stderr).
    fn run(&self, args: &[&str]) -> (i32, String, String) {
        let out = kvcr()
            .args(args)
            .env("KVCR_NODE_FACTS", self.path("facts.json"))
            .env(
                "KVCR_IMPORT_BACKEND",
                format!("sim:log={}", self.path("sim.log").display()),
            )
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    }
    fn audit(&self, extra: &[&str]) -> (i32, String) {
        let inv = self.inv();
        let mut args = vec!["audit", inv.to_str().unwrap(), "--live"];
        args.extend(extra);
        let (status, out, _) = self.run(&args);
        (status, out)
    }
    fn audit_json(&self, extra: &[&str]) -> (i32, Value) {
        let mut args = extra.to_vec();
        args.extend(["--format", "json"]);
        let (status, out) = self.audit(&args);
        (
            status,
            serde_json::from_str(&out).expect("one JSON document"),
        )
    }
    fn import(&self, extra: &[&str]) -> (i32, String, String) {
        let inv = self.inv();
        let profile = self.path("profile.json");
        let mut args = vec![
            "import",
            inv.to_str().unwrap(),
            "--profile",
            profile.to_str().unwrap(),
        ];
        args.extend(extra);
        self.run(&args)
    }
}

/// The group header's verdict, cause and action lines of a table.
fn header(table: &str) -> (String, String, String) {
    let line = |prefix: &str| {
        table
            .lines()
            .find(|l| l.trim_start().starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{table}"))
            .to_string()
    };
    (line("group "), line("cause:"), line("action:"))
}

fn put(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::write(dir.join(name), bytes).unwrap();
}

// ---- item 1: the verdict, the exit status and the advice agree ----------

#[test]
fn a_staging_leftover_rejects_the_group_it_may_belong_to_and_the_import_names_it() {
    let n = Node::new();
    let (status, table) = n.audit(&[]);
    assert_eq!(status, 0, "{table}");
    put(&n.inv(), ".rank-3.json.abc.tmp", b"{");
    let (status, table) = n.audit(&[]);
    assert_eq!(status, 1, "{table}");
    let (group, cause, action) = header(&table);
    assert!(group.contains("REJECTED"), "{table}");
    assert!(
        cause.contains(".rank-3.json.abc.tmp") && cause.contains("KV009"),
        "{table}"
    );
    assert!(!action.contains("kvcr import"), "{table}");
    let (status, v) = n.audit_json(&[]);
    assert_eq!(status, 1);
    assert_eq!(v["exit_status"], 1);
    assert_eq!(v["groups"][0]["verdict"], "reject", "{v:#}");
    assert_eq!(v["groups"][0]["cause_code"], "KV009", "{v:#}");
    assert_eq!(v["summary"]["rejected"], 1);
    // The import refuses, naming the same file, never "all 4 ranks present".
    let (status, out, err) = n.import(&[]);
    assert_eq!(status, 1, "{out}{err}");
    let refusal = out
        .lines()
        .find(|l| l.starts_with("import refused"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(refusal.contains(".rank-3.json.abc.tmp"), "{refusal}");
    assert!(
        !refusal.contains("present, current and consistent"),
        "{refusal}"
    );
    assert!(
        !n.path("sim.log").exists()
            || std::fs::read_to_string(n.path("sim.log"))
                .unwrap()
                .is_empty()
    );
}

#[test]
fn a_stray_symlink_under_engine_rejects_the_group_and_names_the_link() {
    // §5.6: --engine limits the groups judged, not the file-level
    // findings; now the header says so too.
    let n = Node::new();
    std::fs::create_dir(n.inv().join("old")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", n.inv().join("old/notes")).unwrap();
    let (status, table) = n.audit(&["--engine", "ops"]);
    assert_eq!(status, 1, "{table}");
    let (group, cause, action) = header(&table);
    assert!(group.contains("REJECTED"), "{table}");
    assert!(
        cause.contains("notes") && cause.contains("KV001"),
        "{table}"
    );
    assert!(!action.contains("kvcr import"), "{table}");
}

#[test]
fn a_rejected_group_with_other_bad_files_counts_them_in_its_cause() {
    let n = Node::new();
    // rank 2 is broken (its own cause) and two files no group claims.
    put(&n.inv(), "rank-2.json", b"not json");
    put(&n.inv(), ".rank-9.json.a.tmp", b"");
    std::os::unix::fs::symlink("rank-0.json", n.inv().join("alias")).unwrap();
    let (status, v) = n.audit_json(&[]);
    assert_eq!(status, 1);
    let cause = v["groups"][0]["cause"].as_str().unwrap();
    assert!(cause.contains("rank 2"), "{cause}");
    assert!(
        cause.contains("2 rejecting files no group claims"),
        "{cause}"
    );
}

#[test]
fn accepted_means_exit_zero_and_an_import_that_goes_through() {
    // The converse: every header that says ACCEPTED and suggests an import
    // exits 0, and that import succeeds.
    let n = Node::new();
    put(&n.inv(), "README", b"notes");
    let (status, table) = n.audit(&["--profile", n.path("profile.json").to_str().unwrap()]);
    assert_eq!(status, 0, "{table}");
    let (group, _, action) = header(&table);
    assert!(group.contains("ACCEPTED"), "{table}");
    assert!(action.contains("kvcr import"), "{table}");
    let (status, out, err) = n.import(&[]);
    assert_eq!(status, 0, "{out}{err}");
}

// ---- item 2: a dry run exits as the real import would at the gate -------

impl Node {
    /// `kvcr import [--dry-run] ...` without the sim backend unless `sim`.
    fn import_with(&self, sim: bool, facts: &Path, args: &[&str]) -> i32 {
        let mut c = kvcr();
        c.arg("import").arg(self.inv()).args(args);
        c.env("KVCR_NODE_FACTS", facts);
        if sim {
            c.env(
                "KVCR_IMPORT_BACKEND",
                format!("sim:log={}", self.path("sim.log").display()),
            );
        }
        let out = c.output().unwrap();
        out.status.code().unwrap_or(-1)
    }
}

#[test]
fn a_dry_run_predicts_the_real_imports_exit_status() {
    let n = Node::new();
    let profile = n.path("profile.json");
    let profile = profile.to_str().unwrap();
    let facts = n.path("facts.json");
    let unknown = crate::util::fixtures_live("node-unknown.json");
    // (what, sim backend, facts, flags, the status both must have)
    let cases: Vec<(&str, bool, &Path, Vec<&str>, i32)> = vec![
        (
            "everything holds",
            true,
            &facts,
            vec!["--profile", profile],
            0,
        ),
        ("no profile", true, &facts, vec![], 2),
        ("no driver", false, &facts, vec!["--profile", profile], 2),
        (
            "facts not checked",
            true,
            &unknown,
            vec!["--profile", profile],
            1,
        ),
    ];
    for (what, sim, facts, flags, want) in &cases {
        let real = n.import_with(*sim, facts, flags);
        let mut dry_flags = flags.clone();
        dry_flags.push("--dry-run");
        let dry = n.import_with(*sim, facts, &dry_flags);
        assert_eq!((real, dry), (*want, *want), "{what}: real import, dry run");
    }
    // A rejected group: 1 with a profile, 2 without (the profile is answered first).
    std::fs::remove_file(n.inv().join("rank-2.json")).unwrap();
    for (flags, want) in [(vec!["--profile", profile], 1), (vec![], 2)] {
        let real = n.import_with(true, &facts, &flags);
        let mut dry_flags = flags.clone();
        dry_flags.push("--dry-run");
        let dry = n.import_with(true, &facts, &dry_flags);
        assert_eq!((real, dry), (want, want), "rejected group, {flags:?}");
    }
}

#[test]
fn a_dry_run_json_carries_the_predicted_status() {
    let n = Node::new();
    let inv = n.inv();
    let (status, out, _) = n.run(&[
        "import",
        inv.to_str().unwrap(),
        "--dry-run",
        "--format",
        "json",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(status, 2, "{v:#}");
    assert_eq!(v["exit_status"], 2);
    assert_eq!(v["result"], "planned");
    assert_eq!(v["refusals"][0]["gate"], "profile");
}
