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

// ---- item 6: permission denied is exit 2 with a hint, never a verdict ----

/// `kvcr ARGS` as uid/gid 65534 (nobody), from a copy of the binary
/// nobody can reach; `None` when this test cannot switch users (not root).
fn as_nobody(args: &[&std::ffi::OsStr]) -> Option<std::process::Output> {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    if !crate::util::is_root() {
        return None;
    }
    let bin_dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(bin_dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = bin_dir.path().join("kvcr");
    std::fs::copy(crate::util::bin(), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = std::process::Command::new(&bin);
    crate::util::test_env(&mut cmd)
        .uid(65534)
        .gid(65534)
        .args(args);
    // Another test's child may hold the copy's write fd until it execs.
    for _ in 0..100 {
        match cmd.output() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            r => return r.ok(),
        }
    }
    None
}

/// A root-owned group of 2 under a directory nobody can traverse to.
fn reachable_inventory() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    put_group(&t.path().join("inv"), "", &Desc::new("denied", 0, 2, 1));
    std::fs::set_permissions(t.path().join("inv"), std::fs::Permissions::from_mode(0o755)).unwrap();
    t
}

#[test]
fn permission_denied_anywhere_in_the_walk_is_exit_2_with_a_hint() {
    use std::os::unix::fs::PermissionsExt;
    let mode =
        |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    // (what to make unreadable, the path the message names)
    type Spoil = Box<dyn Fn(&Path)>;
    let cases: Vec<(&str, Spoil, &str)> = vec![
        (
            "the root",
            Box::new(move |inv: &Path| mode(inv, 0o700)),
            "cannot open inventory root",
        ),
        (
            "a directory",
            Box::new(move |inv: &Path| {
                std::fs::create_dir(inv.join("old")).unwrap();
                std::fs::copy(inv.join("rank-0.json"), inv.join("old/rank-0.json")).unwrap();
                mode(&inv.join("old"), 0o700);
            }),
            "old: cannot list",
        ),
        (
            "a descriptor",
            Box::new(move |inv: &Path| mode(&inv.join("rank-1.json"), 0o600)),
            "rank-1.json: cannot open",
        ),
    ];
    for (what, spoil, named) in cases {
        let t = reachable_inventory();
        let inv = t.path().join("inv");
        spoil(&inv);
        for format in ["table", "json"] {
            let args: Vec<&std::ffi::OsStr> = vec![
                "audit".as_ref(),
                inv.as_os_str(),
                "--format".as_ref(),
                format.as_ref(),
            ];
            let Some(out) = as_nobody(&args) else {
                crate::util::missing("needs root to run kvcr as nobody");
                return;
            };
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{what} ({format}): {stderr}");
            assert!(stderr.contains(named), "{what}: {stderr}");
            assert!(
                stderr.contains("hint: run kvcr as root or as the inventory owner's user (uid 0"),
                "{what}: {stderr}"
            );
            assert!(!stderr.contains("KV005"), "{what}: {stderr}");
            if format == "json" {
                let v: Value = serde_json::from_slice(&out.stdout).unwrap();
                assert_eq!(v["schema"], "kvcr.error/v1");
                assert_eq!(v["code"], "permission-denied", "{what}: {v:#}");
                assert_eq!(v["exit_status"], 2);
                assert!(v["message"].as_str().unwrap().contains(named), "{v:#}");
            } else {
                assert!(out.stdout.is_empty(), "{what}: no verdict is printed");
            }
        }
        // The import answers the same way, before any verdict.
        let args: Vec<&std::ffi::OsStr> =
            vec!["import".as_ref(), inv.as_os_str(), "--dry-run".as_ref()];
        let out = as_nobody(&args).unwrap();
        assert_eq!(out.status.code(), Some(2), "{what}: import");
    }
}

// ---- item 7: --format json always prints exactly one document -----------

fn one_document(out: &std::process::Output) -> Value {
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    let mut docs = serde_json::Deserializer::from_str(&text).into_iter::<Value>();
    let first = docs
        .next()
        .unwrap_or_else(|| {
            panic!(
                "no JSON document on stdout; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
        .unwrap();
    assert!(docs.next().is_none(), "more than one document: {text}");
    first
}

#[test]
fn every_exit_2_with_format_json_prints_the_error_document() {
    let schema: Value = serde_json::from_str(kvcr_audit::schema::Kind::Error.text()).unwrap();
    let check = jsonschema::draft202012::new(&schema).unwrap();
    let n = Node::new();
    let inv = n.inv();
    let inv = inv.to_str().unwrap();
    let bad_profile = n.path("bad-profile.json");
    std::fs::write(&bad_profile, b"{").unwrap();
    let bad_profile = bad_profile.to_str().unwrap();
    // (command line, code, a word the message carries)
    let cases: Vec<(Vec<&str>, &str, &str)> = vec![
        (
            vec!["audit", "/nonexistent/kvcr", "--format", "json"],
            "cannot-run",
            "/nonexistent/kvcr",
        ),
        (
            vec!["audit", inv, "--format", "json", "--bogus"],
            "usage",
            "--bogus",
        ),
        (
            vec!["audit", inv, "--format=json", "--max-age", "soon"],
            "usage",
            "soon",
        ),
        (
            vec!["audit", inv, "--format", "json", "--profile", bad_profile],
            "cannot-run",
            "bad-profile.json",
        ),
        (
            vec!["audit", inv, "--format", "json", "--engine", "nope"],
            "cannot-run",
            "nope",
        ),
        (
            vec!["import", inv, "--format", "json"],
            "cannot-run",
            "no deployment profile",
        ),
        (
            vec!["merge", "/nonexistent/a.json", "--format", "json"],
            "cannot-run",
            "a.json",
        ),
        (
            vec!["examine", "/nonexistent/rank-0.json", "--format", "json"],
            "cannot-run",
            "rank-0.json",
        ),
        (
            vec!["audit", "--format", "json"],
            "cannot-run",
            "/var/lib/kvcr/inventory",
        ),
    ];
    for (args, code, word) in cases {
        let out = kvcr().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let v = one_document(&out);
        let errs: Vec<String> = check.iter_errors(&v).map(|e| e.to_string()).collect();
        assert!(errs.is_empty(), "{args:?}: {errs:?}\n{v:#}");
        assert_eq!(v["code"], code, "{args:?}: {v:#}");
        assert_eq!(v["exit_status"], 2);
        assert_eq!(v["command"], args[0], "{v:#}");
        assert!(
            v["message"].as_str().unwrap().contains(word),
            "{args:?}: {v:#}"
        );
        // A person still reads it on stderr.
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("error"),
            "{args:?}"
        );
    }
    // --quiet still prints nothing; --help still prints help.
    let out = kvcr()
        .args(["audit", "/nonexistent/kvcr", "--format", "json", "-q"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let out = kvcr()
        .args(["audit", "--help", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Usage"));
    // `kvcr schema error` prints the schema the document follows.
    let out = kvcr().args(["schema", "error"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["properties"]["schema"]["const"], "kvcr.error/v1");
}

#[test]
fn exits_0_and_1_with_format_json_print_one_report() {
    let n = Node::new();
    let inv = n.inv();
    let (status, v) = n.audit_json(&[]);
    assert_eq!(status, 0);
    assert_eq!(v["schema"], "kvcr.audit-report/v1");
    std::fs::remove_file(inv.join("rank-0.json")).unwrap();
    let out = kvcr()
        .args([
            "audit".as_ref(),
            inv.as_os_str(),
            "--format".as_ref(),
            "json".as_ref(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = one_document(&out);
    assert_eq!(v["schema"], "kvcr.audit-report/v1");
}

// ---- item 8: an empty inventory is nothing retained, not a rejection ----

#[test]
fn an_empty_inventory_exits_0_with_cause_empty_and_says_so() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("README"), b"nothing retained\n").unwrap();
    let root = t.path().as_os_str();
    let out = kvcr()
        .args(["audit".as_ref(), root, "--format".as_ref(), "json".as_ref()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v = one_document(&out);
    assert_eq!(v["exit_status"], 0);
    assert!(v["cause"].as_str().unwrap().starts_with("empty: "), "{v:#}");
    assert_eq!(v["groups"], json!([]));
    let out = kvcr().args(["audit".as_ref(), root]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("empty: no descriptor"), "{table}");
    assert!(table.contains("exit 0"), "{table}");
    // Truly empty too; a live audit is the same.
    let t2 = tempfile::tempdir().unwrap();
    let out = kvcr()
        .args([
            "audit".as_ref(),
            t2.path().as_os_str(),
            "--live".as_ref(),
            "--format".as_ref(),
            "json".as_ref(),
        ])
        .env(
            "KVCR_NODE_FACTS",
            crate::util::fixtures_live("node-match.json"),
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    // But a group the operator names must be there (KV103, exit 1) ...
    let n = Node::new();
    let profile = n.path("profile.json");
    let out = kvcr()
        .args([
            "audit".as_ref(),
            t.path().as_os_str(),
            "--profile".as_ref(),
            profile.as_os_str(),
            "--format".as_ref(),
            "json".as_ref(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = one_document(&out);
    assert!(
        v["cause"].as_str().unwrap().starts_with("rejected: "),
        "{v:#}"
    );
    // ... a rejecting file is not "empty" ...
    std::os::unix::fs::symlink("/etc/hostname", t.path().join("rank-0.json")).unwrap();
    let out = kvcr()
        .args(["audit".as_ref(), root, "--format".as_ref(), "json".as_ref()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = one_document(&out);
    let cause = v["cause"].as_str().unwrap();
    assert!(
        cause.starts_with("rejected: ") && cause.contains("rank-0.json"),
        "{cause}"
    );
    // ... and there is nothing to import from an empty inventory (exit 1).
    let (status, out, _) = n.run(&[
        "import",
        t2.path().to_str().unwrap(),
        "--profile",
        profile.to_str().unwrap(),
    ]);
    assert_eq!(status, 1, "{out}");
}

#[test]
fn the_top_level_cause_names_why_a_run_exits_1() {
    let n = Node::new();
    std::fs::remove_file(n.inv().join("rank-2.json")).unwrap();
    let (status, v) = n.audit_json(&[]);
    assert_eq!(status, 1);
    let cause = v["cause"].as_str().unwrap();
    assert!(
        cause.starts_with("rejected: group ops: ") && cause.contains("KV103"),
        "{cause}"
    );
    let (status, v) = Node::new().audit_json(&[]);
    assert_eq!(status, 0);
    assert!(
        v["cause"].as_str().unwrap().starts_with("accepted: "),
        "{v:#}"
    );
}

// ---- item 5: when a rank has more than one row, each row names its file --

#[test]
fn duplicate_and_lookalike_rows_each_name_their_file() {
    let n = Node::new();
    std::fs::create_dir(n.inv().join("copy")).unwrap();
    std::fs::copy(
        n.inv().join("rank-1.json"),
        n.inv().join("copy/rank-1.json"),
    )
    .unwrap();
    let (status, table) = n.audit(&[]);
    assert_eq!(status, 1);
    let rows: Vec<&str> = table
        .lines()
        .filter(|l| l.trim_start().starts_with("1 ") && l.contains("REJECT"))
        .collect();
    assert_eq!(rows.len(), 2, "{table}");
    assert!(
        rows.iter()
            .any(|r| r.contains("REJECT   copy/rank-1.json: KV102")),
        "{table}"
    );
    assert!(
        rows.iter()
            .any(|r| r.contains("REJECT   rank-1.json: KV102")),
        "{table}"
    );
    // KV102's message names "this one" by its path.
    let (_, v) = n.audit_json(&[]);
    let msgs: Vec<String> = v["groups"][0]["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["findings"].as_array().unwrap().clone())
        .filter(|f| f["code"] == "KV102")
        .map(|f| f["message"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(msgs.len(), 2);
    assert!(
        msgs.iter()
            .any(|m| m.contains("copy/rank-1.json (this one) and rank-1.json")),
        "{msgs:?}"
    );
    assert!(
        msgs.iter()
            .any(|m| m.contains(": rank-1.json (this one) and copy/rank-1.json")),
        "{msgs:?}"
    );

    // Six broken copies of one rank: six rows, six different paths.
    let n = Node::new();
    for i in 0..6 {
        let d = n.inv().join(format!("bad{i}"));
        std::fs::create_dir(&d).unwrap();
        let bytes = std::fs::read(n.inv().join("rank-0.json")).unwrap();
        let mut s = String::from_utf8(bytes).unwrap();
        s = s.replacen("\"digest\"", "\"digest_\"", 1);
        std::fs::write(d.join("rank-0.json"), s).unwrap();
    }
    let (status, table) = n.audit(&[]);
    assert_eq!(status, 1);
    let zero: Vec<&str> = table
        .lines()
        .filter(|l| l.trim_start().starts_with("0 ") && l.contains("REJECT"))
        .collect();
    assert_eq!(zero.len(), 7, "{table}");
    let named: std::collections::BTreeSet<String> = zero
        .iter()
        .map(|l| {
            l.split("REJECT")
                .nth(1)
                .unwrap()
                .trim()
                .split(':')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(named.len(), 7, "each row names another file:\n{table}");
}

// ---- item 4: a partial multi-node view suggests --local-ranks and merge --

#[test]
fn half_a_group_on_this_node_suggests_local_ranks_and_merge() {
    let t = tempfile::tempdir().unwrap();
    for r in 0..8 {
        crate::util::testkit::put(
            t.path(),
            &format!("rank-{r}.json"),
            &Desc::new("tp16", r, 16, 1).bytes(),
        );
    }
    let out = kvcr().arg("audit").arg(t.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let table = String::from_utf8(out.stdout).unwrap();
    let (_, cause, action) = header(&table);
    assert!(cause.contains("KV103"), "{table}");
    assert!(action.contains("--local-ranks 0-7"), "{table}");
    assert!(action.contains("kvcr merge"), "{table}");
    assert!(action.contains("ranks 8-15 live on other nodes"), "{table}");
    // The suggested audit does what it says: the local part is accepted.
    let out = kvcr()
        .arg("audit")
        .arg(t.path())
        .args(["--local-ranks", "0-7"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    // Something else wrong, or a gap in the middle: the usual advice.
    std::fs::remove_file(t.path().join("rank-3.json")).unwrap();
    let out = kvcr().arg("audit").arg(t.path()).output().unwrap();
    let table = String::from_utf8(out.stdout).unwrap();
    let (_, _, action) = header(&table);
    assert!(!action.contains("--local-ranks"), "{table}");
    assert!(action.contains("empty cache"), "{table}");
}

// ---- item 12: `kvcr profile` derives the profile import requires --------

#[test]
fn kvcr_profile_prints_a_derived_profile_that_import_accepts() {
    let n = Node::new();
    let inv = n.inv();
    let (status, out, err) = n.run(&["profile", inv.to_str().unwrap()]);
    assert_eq!(status, 0, "{err}");
    let p: Value = serde_json::from_str(&out).expect("one JSON document");
    // Valid against `kvcr schema profile`, complete for import, marked derived.
    let schema: Value = serde_json::from_str(kvcr_audit::schema::Kind::Profile.text()).unwrap();
    let v = jsonschema::draft202012::new(&schema).unwrap();
    assert!(v.is_valid(&p), "{p:#}");
    let parsed = kvcr_audit::profile::parse_profile(out.as_bytes()).unwrap();
    assert!(parsed.missing_for_import().is_empty(), "{p:#}");
    let d = parsed.derived.expect("marked derived");
    assert!(
        d.from.contains(inv.to_str().unwrap()) && d.from.contains(HOSTNAME),
        "{}",
        d.from
    );
    assert!(d.review.contains("review"), "{}", d.review);
    assert!(d.generated_unix_ms > 0);
    assert_eq!(p["engine_id"], "ops");
    assert_eq!(p["gpus"].as_array().unwrap().len(), 4);
    assert_eq!(p["gpus"][2], testkit::gpu(0, 2));
    assert!(
        p.get("incarnation").is_none(),
        "a lifetime is not a deployment fact"
    );
    assert!(err.contains("review it before use"), "{err}");
    // The derived profile is what import needs: the import goes through.
    std::fs::write(n.path("derived.json"), &out).unwrap();
    let derived = n.path("derived.json");
    let (status, out, err) = n.run(&[
        "import",
        inv.to_str().unwrap(),
        "--profile",
        derived.to_str().unwrap(),
    ]);
    assert_eq!(status, 0, "{out}{err}");
    // And a deployer's profile against another layout still disagrees:
    // the derived one did not weaken any check.
    let mut other = p.clone();
    other["gpus"][0] = json!(testkit::gpu(1, 0));
    std::fs::write(n.path("other.json"), other.to_string()).unwrap();
    let other = n.path("other.json");
    let (status, _, _) = n.run(&[
        "import",
        inv.to_str().unwrap(),
        "--profile",
        other.to_str().unwrap(),
    ]);
    assert_eq!(status, 1);
}

#[test]
fn kvcr_profile_of_a_rejected_group_prints_nothing_and_exits_1() {
    let n = Node::new();
    let inv = n.inv();
    std::fs::remove_file(inv.join("rank-3.json")).unwrap();
    let (status, out, err) = n.run(&["profile", inv.to_str().unwrap()]);
    assert_eq!(status, 1, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("no profile derived: group ops rejected") && err.contains("KV103"),
        "{err}"
    );
    // Facts that cannot be checked reject too: the audit is strict, as import.
    let n = Node::new();
    let unknown = crate::util::fixtures_live("node-unknown.json");
    let out = kvcr()
        .args(["profile".as_ref(), n.inv().as_os_str()])
        .env("KVCR_NODE_FACTS", unknown)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--strict"),
        "{out:?}"
    );
    // An empty inventory has no group to describe.
    let t = tempfile::tempdir().unwrap();
    let out = kvcr()
        .args(["profile".as_ref(), t.path().as_os_str()])
        .env("KVCR_NODE_FACTS", n.path("facts.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("empty"),
        "{out:?}"
    );
}

#[test]
fn the_profile_reader_accepts_derived_and_checks_its_members() {
    let d = Desc::new("ops", 0, 4, 1);
    let mut p = testkit::profile(&d);
    p["derived"] = json!({"from": "hand", "generated_unix_ms": 1, "review": "check it"});
    assert!(kvcr_audit::profile::parse_profile(p.to_string().as_bytes()).is_ok());
    p["derived"] = Value::Null;
    assert!(kvcr_audit::profile::parse_profile(p.to_string().as_bytes())
        .unwrap()
        .derived
        .is_none());
    for bad in [
        json!({"from": "x", "generated_unix_ms": 1}),
        json!({"from": "x", "generated_unix_ms": 1, "review": "r", "extra": 1}),
        json!({"from": "", "generated_unix_ms": 1, "review": "r"}),
        json!({"from": "x", "generated_unix_ms": -1, "review": "r"}),
        json!("derived"),
    ] {
        p["derived"] = bad.clone();
        let e = kvcr_audit::profile::parse_profile(p.to_string().as_bytes()).unwrap_err();
        assert!(e.to_string().contains("derived"), "{bad}: {e}");
    }
}

// ---- item 16: the smaller things an operator trips over ------------------

#[test]
fn explain_takes_the_bare_number() {
    for (arg, code) in [
        ("103", "KV103"),
        ("9", "KV009"),
        ("009", "KV009"),
        ("kv104", "KV104"),
    ] {
        let out = kvcr().args(["explain", arg]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{arg}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.starts_with(code), "{arg}: {text}");
    }
    for arg in ["999", "0", "1030", "-103", "10 3"] {
        let out = kvcr().args(["explain", arg]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{arg}");
    }
}

#[test]
fn import_help_offers_only_the_formats_import_writes() {
    let out = kvcr().args(["import", "--help"]).output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("[possible values: table, json]"), "{help}");
    assert!(!help.contains("prometheus"), "{help}");
    let out = kvcr()
        .args(["import", "/tmp", "--format", "prometheus"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let bash = std::fs::read_to_string(crate::util::repo().join("completions/kvcr.bash")).unwrap();
    let import = bash
        .split("kvcr__subcmd__import)")
        .nth(1)
        .and_then(|s| s.split("kvcr__subcmd__").next())
        .unwrap_or_default()
        .to_string();
    assert!(
        !import.is_empty() && !import.contains("prometheus"),
        "{import}"
    );
    // The audit still offers and writes it.
    let out = kvcr().args(["audit", "--help"]).output().unwrap();
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .contains("prometheus"));
}

#[test]
fn without_root_or_kvcr_inventory_the_packaged_default_is_used() {
    if std::path::Path::new("/var/lib/kvcr/inventory").exists() {
        crate::util::skip_fact("this machine has /var/lib/kvcr/inventory; kvcr would audit it");
        return;
    }
    let out = kvcr().args(["audit"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("inventory root /var/lib/kvcr/inventory does not exist"),
        "{err}"
    );
    assert!(err.contains("pass ROOT or set KVCR_INVENTORY"), "{err}");
    // $KVCR_INVENTORY still wins over the default, and ROOT over both.
    let n = Node::new();
    let out = kvcr()
        .arg("audit")
        .env("KVCR_INVENTORY", n.inv())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let out = kvcr()
        .arg("audit")
        .arg(n.inv())
        .env("KVCR_INVENTORY", "/nonexistent/kvcr")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn processes_null_in_a_facts_file_means_could_not_be_read() {
    let n = Node::new();
    for null in [true, false] {
        let mut facts: Value =
            serde_json::from_slice(&std::fs::read(n.path("facts.json")).unwrap()).unwrap();
        if null {
            facts["processes"] = Value::Null;
        } else {
            facts.as_object_mut().unwrap().remove("processes");
        }
        std::fs::write(n.path("facts.json"), facts.to_string()).unwrap();
        let (status, v) = n.audit_json(&[]);
        // Not "owner gone" (KV108): the owner could not be looked up.
        assert_eq!(status, 0, "null={null}: {v:#}");
        let nc = v["groups"][0]["ranks"][0]["not_checked"].to_string();
        assert!(nc.contains("owner"), "null={null}: {nc}");
        assert!(
            !crate::util::codes(&v).contains(&"KV108".to_string()),
            "{v:#}"
        );
        // And the import refuses it as a fact not checked (exit 1).
        let (status, out, _) = n.import(&["--format", "json"]);
        assert_eq!(status, 1);
        let r: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(r["refusals"][0]["gate"], "not-checked", "{r:#}");
    }
}

#[test]
fn a_file_no_group_claims_rejects_every_group_and_each_import_names_it() {
    // Two groups, one torn write that could be either's: neither may be
    // imported, and each import says which file stops it.
    let n = Node::new();
    let mut b = Desc::new("other", 0, 2, 1);
    b.group = 1;
    put_group(&n.inv().join("b"), "", &b);
    private(&n.inv());
    put(&n.inv(), ".rank-1.json.Zq.tmp", b"");
    // This node has the second group's GPUs too.
    let mut facts: Value =
        serde_json::from_slice(&std::fs::read(n.path("facts.json")).unwrap()).unwrap();
    for list in ["visible", "on_node"] {
        let l = facts["gpus"][list].as_array_mut().unwrap();
        l.extend([json!(testkit::gpu(1, 0)), json!(testkit::gpu(1, 1))]);
    }
    std::fs::write(n.path("facts.json"), facts.to_string()).unwrap();
    let (status, v) = n.audit_json(&[]);
    assert_eq!(status, 1);
    for g in v["groups"].as_array().unwrap() {
        assert_eq!(g["verdict"], "reject", "{g:#}");
        assert!(
            g["cause"].as_str().unwrap().contains(".rank-1.json.Zq.tmp"),
            "{g:#}"
        );
    }
    assert!(
        v["cause"]
            .as_str()
            .unwrap()
            .starts_with("rejected: 2 of 2 groups"),
        "{v:#}"
    );
    let (status, out, err) = n.import(&["--engine", "ops"]);
    assert_eq!(status, 1, "{out}{err}");
    assert!(
        out.contains("import refused") && out.contains(".rank-1.json.Zq.tmp"),
        "{out}"
    );
    // Removing the leftover is the whole fix.
    std::fs::remove_file(n.inv().join(".rank-1.json.Zq.tmp")).unwrap();
    let (status, v) = n.audit_json(&["--engine", "ops"]);
    assert_eq!(status, 0, "{v:#}");
}
