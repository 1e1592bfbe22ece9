//! The import log (issue #21 item 15, docs/import.md "The import log"):
//! every import and hold, never a dry run, appends one JSON line to
//! `$KVCR_IMPORT_LOG` and sends it to the journal when one listens; a log
//! that cannot be written is a warning and changes nothing else.

use crate::util::fleet::private;
use crate::util::testkit::{self, put_group, Desc, BOOT_ID, HOSTNAME};
use crate::util::{kvcr, kvcr_std, signal, wait_for};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// A 4-rank group, private modes, node facts that match it, its profile.
struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    fn new() -> Case {
        let dir = tempfile::tempdir().unwrap();
        let d = Desc::new("llama3-70b-a", 0, 4, 1);
        put_group(&dir.path().join("inv"), "", &d);
        private(&dir.path().join("inv"));
        let gpus: Vec<String> = (0..4).map(|r| testkit::gpu(0, r)).collect();
        std::fs::write(
            dir.path().join("facts.json"),
            json!({"boot_id": BOOT_ID, "hostname": HOSTNAME, "processes": {"4242": 123456},
                   "processes_unreadable": null,
                   "gpus": {"visible": gpus, "on_node": gpus, "source": "test"}})
            .to_string(),
        )
        .unwrap();
        testkit::put_profile(&dir.path().join("profile.json"), &d);
        Case { dir }
    }
    fn p(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
    /// The default log of this case: in a directory that does not exist yet.
    fn log(&self) -> PathBuf {
        self.p("var/log/kvcr/import.jsonl")
    }
    fn cmd(&self, sim: &str, log: &Path, args: &[&str]) -> std::process::Command {
        let mut c = kvcr_std();
        c.arg("import")
            .arg(self.p("inv"))
            .args(["--format", "json"])
            .args(args)
            .env("KVCR_NODE_FACTS", self.p("facts.json"))
            .env("KVCR_PROFILE", self.p("profile.json"))
            .env(
                "KVCR_IMPORT_BACKEND",
                format!("sim:{sim}log={}", self.p("sim.log").display()),
            )
            .env("KVCR_IMPORT_LOG", log);
        c
    }
    fn import(&self, sim: &str, log: &Path, args: &[&str]) -> (i32, Value, String) {
        let mut c = assert_cmd::Command::from_std(self.cmd(sim, log, args));
        c.timeout(Duration::from_secs(60));
        let out = c.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (out.status.code().unwrap_or(-1), v, stderr)
    }
    /// (acquired, released) in the sim's event log.
    fn sim_counts(&self) -> (usize, usize) {
        let text = std::fs::read_to_string(self.p("sim.log")).unwrap_or_default();
        let ops: Vec<String> = text
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["op"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        (
            ops.iter().filter(|o| *o == "acquire").count(),
            ops.iter().filter(|o| *o == "release").count(),
        )
    }
}

fn lines(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn a_trial_import_appends_one_record_and_says_where() {
    let c = Case::new();
    let log = c.log();
    let (code, report, stderr) = c.import("", &log, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(&format!("kvcr: import recorded in {}", log.display())),
        "{stderr}"
    );
    let recs = lines(&log);
    assert_eq!(recs.len(), 1);
    let r = &recs[0];
    assert_eq!(r["schema"], "kvcr.import-log/v1");
    assert_eq!(r["host"], HOSTNAME);
    assert_eq!(r["boot_id"], BOOT_ID);
    assert_eq!(r["engine_id"], "llama3-70b-a");
    assert_eq!(r["incarnation"], report["incarnation"]);
    assert_eq!(r["epoch"], 1);
    assert_eq!(r["mode"], "trial");
    assert_eq!(r["backend"], "sim");
    assert_eq!(r["result"], "imported");
    assert_eq!(r["exit_status"], 0);
    assert_eq!(r["plan"]["ranks"], 4);
    assert_eq!(r["plan"]["allocations"], 8);
    let (acquired, released) = c.sim_counts();
    assert!(acquired > 0);
    assert_eq!(r["released"], released as u64);
    assert_eq!(r["remaining"], json!([]));
    assert!(r["unix_ms"].as_u64().unwrap() > 1_700_000_000_000);
    // RFC 3339, UTC, and the same instant as unix_ms.
    let t = r["time"].as_str().unwrap();
    assert!(
        t.len() == 24 && t.ends_with('Z') && &t[10..11] == "T",
        "{t}"
    );
    let ms = r["unix_ms"].as_u64().unwrap();
    assert_eq!(&t[20..23], format!("{:03}", ms % 1000));
    assert!(r["pid"].as_u64().unwrap() > 0);
    // Created with its directory: 0700 and 0600.
    assert_eq!(mode(log.parent().unwrap()), 0o700);
    assert_eq!(mode(&log), 0o600);
    // A second import appends; the first line is kept as it was.
    let first = std::fs::read(&log).unwrap();
    let (code, _, _) = c.import("", &log, &[]);
    assert_eq!(code, 0);
    let after = std::fs::read(&log).unwrap();
    assert!(after.starts_with(&first));
    assert_eq!(lines(&log).len(), 2);
}

#[test]
fn a_dry_run_writes_no_record() {
    let c = Case::new();
    let log = c.log();
    let (code, _, stderr) = c.import("", &log, &["--dry-run"]);
    assert!(code == 0 || code == 2, "{code}: {stderr}");
    assert!(!log.exists());
    assert!(!log.parent().unwrap().exists());
    assert!(!stderr.contains("import recorded"), "{stderr}");
    assert!(!stderr.contains("import log was not written"), "{stderr}");
    assert!(!stderr.contains("journal"), "{stderr}");
}

#[test]
fn rejected_and_failed_imports_are_recorded_with_their_result() {
    let c = Case::new();
    let log = c.log();
    // A GPU step fails: everything taken is released, exit 3.
    let (code, _, stderr) = c.import("fail=map@2,", &log, &[]);
    assert_eq!(code, 3, "{stderr}");
    let r = lines(&log).pop().unwrap();
    assert_eq!(r["result"], "failed");
    assert_eq!(r["exit_status"], 3);
    assert_eq!(r["failure"]["step"], "map");
    let (acquired, released) = c.sim_counts();
    assert_eq!(acquired, released);
    assert_eq!(r["released"], released as u64);
    // The group rejected (rank 3 gone): exit 1, recorded too.
    std::fs::remove_file(c.p("inv/rank-3.json")).unwrap();
    let (code, _, _) = c.import("", &log, &[]);
    assert_eq!(code, 1);
    let r = lines(&log).pop().unwrap();
    assert_eq!(r["result"], "rejected");
    assert_eq!(r["exit_status"], 1);
    assert_eq!(r["backend"], "none");
    assert_eq!(lines(&log).len(), 2);
}

/// A hold leaves a record when it is held (so a hold later killed with
/// SIGKILL still left a trace) and one when it ends.
#[test]
fn a_hold_is_recorded_when_held_and_when_released() {
    let c = Case::new();
    let log = c.log();
    let ready = c.p("ready.json");
    let child = c
        .cmd(
            "",
            &log,
            &["--hold", "--ready-file", ready.to_str().unwrap()],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the ready file", || ready.exists());
    wait_for("the holding record", || {
        log.exists() && !lines(&log).is_empty()
    });
    let held = lines(&log);
    assert_eq!(held.len(), 1);
    assert_eq!(held[0]["result"], "holding");
    assert_eq!(held[0]["mode"], "hold");
    assert_eq!(held[0]["exit_status"], Value::Null);
    assert_eq!(held[0]["pid"], child.id());
    assert_eq!(held[0]["plan"]["ranks"], 4);
    signal(&child, libc::SIGTERM);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let recs = lines(&log);
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[1]["result"], "imported");
    assert_eq!(recs[1]["exit_status"], 0);
    assert_eq!(recs[1]["pid"], recs[0]["pid"]);
    assert!(recs[1]["released"].as_u64().unwrap() > 0);
}

/// A log that cannot be written: the import runs, releases everything and
/// exits as it would; stderr warns, naming the file.
#[test]
fn a_log_that_cannot_be_written_is_only_a_warning() {
    let c = Case::new();
    std::fs::write(c.p("a-file"), b"x").unwrap();
    std::fs::create_dir(c.p("a-dir")).unwrap();
    std::os::unix::fs::symlink(c.p("elsewhere.jsonl"), c.p("a-link")).unwrap();
    let fifo = c.p("a-fifo");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    for bad in ["a-file/import.jsonl", "a-dir", "a-link", "a-fifo"] {
        let _ = std::fs::remove_file(c.p("sim.log"));
        let (code, report, stderr) = c.import("", &c.p(bad), &[]);
        assert_eq!(code, 0, "{bad}: {stderr}");
        assert_eq!(report["result"], "imported");
        assert!(
            stderr.contains("kvcr: warning: the import log was not written"),
            "{bad}: {stderr}"
        );
        assert!(
            stderr.contains(bad.split('/').next().unwrap()),
            "{bad}: {stderr}"
        );
        assert!(!stderr.contains("import recorded"), "{bad}: {stderr}");
        let (acquired, released) = c.sim_counts();
        assert!(acquired > 0 && acquired == released, "{bad}");
    }
    assert!(
        !c.p("elsewhere.jsonl").exists(),
        "never written through a symlink"
    );
    assert_eq!(std::fs::read(c.p("a-file")).unwrap(), b"x");
}

/// A log file with a second name (a hard link to a descriptor, say) is
/// never appended to; a directory alias of the inventory is refused.
#[test]
fn a_hard_linked_log_or_an_alias_of_the_inventory_is_never_written() {
    let c = Case::new();
    let before = testkit::snapshot(&c.p("inv"));
    std::fs::hard_link(c.p("inv/rank-0.json"), c.p("linked.jsonl")).unwrap();
    let (code, _, stderr) = c.import("", &c.p("linked.jsonl"), &[]);
    // The import itself is judged as usual (a hard-linked descriptor may be
    // refused by the audit); the log is never appended to either way.
    assert_ne!(code, 2, "{stderr}");
    assert!(stderr.contains("hard links"), "{stderr}");
    std::fs::remove_file(c.p("linked.jsonl")).unwrap();
    std::os::unix::fs::symlink(c.p("inv"), c.p("alias")).unwrap();
    let (code, _, stderr) = c.import("", &c.p("alias/import.jsonl"), &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("inside the inventory"), "{stderr}");
    assert_eq!(testkit::snapshot(&c.p("inv")), before);
}

#[test]
fn a_log_inside_the_inventory_is_refused_before_any_gpu_call() {
    let c = Case::new();
    std::fs::create_dir(c.p("inv/sub")).unwrap();
    private(&c.p("inv"));
    let before = testkit::snapshot(&c.p("inv"));
    for inside in [
        "inv/import.jsonl",
        "inv/sub/import.jsonl",
        "inv/new-dir/import.jsonl",
    ] {
        let (code, _, stderr) = c.import("", &c.p(inside), &[]);
        assert_eq!(code, 2, "{inside}: {stderr}");
        assert!(stderr.contains("KVCR_IMPORT_LOG"), "{stderr}");
        assert!(stderr.contains("inside the inventory"), "{stderr}");
        assert_eq!(c.sim_counts(), (0, 0), "nothing imported");
    }
    assert_eq!(testkit::snapshot(&c.p("inv")), before);
    // A dry run writes no log, so it is not refused.
    let (code, _, _) = c.import("", &c.p("inv/import.jsonl"), &["--dry-run"]);
    assert_ne!(code, 2);
    assert_eq!(testkit::snapshot(&c.p("inv")), before);
}

/// With a journal listening (a datagram socket standing in for
/// /run/systemd/journal/socket), the same record goes there, in the native
/// protocol's KEY=value form.
#[test]
fn the_record_goes_to_the_journal_when_one_listens() {
    let c = Case::new();
    let sock_path = c.p("journal.socket");
    let sock = std::os::unix::net::UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let log = c.log();
    let mut cmd = assert_cmd::Command::from_std(c.cmd("", &log, &[]));
    cmd.env("KVCR_JOURNAL_SOCKET", &sock_path);
    let out = cmd.timeout(Duration::from_secs(60)).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("and the journal"), "{stderr}");
    let mut buf = vec![0u8; 1 << 20];
    let n = sock.recv(&mut buf).unwrap();
    let text = String::from_utf8(buf[..n].to_vec()).unwrap();
    let fields: Vec<(&str, &str)> = text.lines().map(|l| l.split_once('=').unwrap()).collect();
    let get = |k: &str| fields.iter().find(|(f, _)| *f == k).map(|(_, v)| *v);
    assert_eq!(get("SYSLOG_IDENTIFIER"), Some("kvcr"));
    assert_eq!(get("PRIORITY"), Some("6"));
    assert!(get("MESSAGE").unwrap().contains("llama3-70b-a"), "{text}");
    let rec: Value = serde_json::from_str(get("KVCR_RECORD").unwrap()).unwrap();
    assert_eq!(rec, lines(&log)[0]);
    // A journal path that is not a socket: a warning, the import unchanged.
    let mut cmd = assert_cmd::Command::from_std(c.cmd("", &log, &[]));
    cmd.env("KVCR_JOURNAL_SOCKET", c.p("profile.json"));
    let out = cmd.timeout(Duration::from_secs(60)).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not sent to the journal"));
    assert_eq!(lines(&log).len(), 2);
}

/// Every kvcr a test starts logs into the shared temp file, never into
/// /var/log/kvcr (util::test_env).
#[test]
fn tests_never_write_the_system_log() {
    let c = Case::new();
    let out = kvcr()
        .arg("import")
        .arg(c.p("inv"))
        .env("KVCR_NODE_FACTS", c.p("facts.json"))
        .env("KVCR_PROFILE", c.p("profile.json"))
        .env("KVCR_IMPORT_BACKEND", "sim")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "import recorded in {}",
            crate::util::test_import_log().display()
        )),
        "{stderr}"
    );
}

/// Issue #30 §1: files kvcr writes more than once are resolved once. The
/// import log's directory is checked and held when the hold starts; swapped
/// for a symlink into the inventory while the group is held, the release
/// record still goes to the directory that was checked, and nothing lands
/// inside the inventory. The log file itself swapped for a symlink to a
/// descriptor is never followed (a warning; the hold still releases).
#[test]
fn a_log_swapped_for_a_symlink_during_a_hold_never_writes_inside_the_inventory() {
    let c = Case::new();
    let before = testkit::snapshot(&c.p("inv"));
    for swap_file in [false, true] {
        let logs = c.p("logs");
        std::fs::create_dir(&logs).unwrap();
        let log = logs.join("import.jsonl");
        let ready = c.p("ready.json");
        let child = c
            .cmd(
                "",
                &log,
                &["--hold", "--ready-file", ready.to_str().unwrap()],
            )
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for("the holding record", || {
            log.exists() && !lines(&log).is_empty()
        });
        let checked = c.p("logs-checked");
        if swap_file {
            std::fs::rename(&log, c.p("held.jsonl")).unwrap();
            std::os::unix::fs::symlink(c.p("inv/rank-0.json"), &log).unwrap();
        } else {
            std::fs::rename(&logs, &checked).unwrap();
            std::os::unix::fs::symlink(c.p("inv"), &logs).unwrap();
        }
        signal(&child, libc::SIGTERM);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert_eq!(
            testkit::snapshot(&c.p("inv")),
            before,
            "written inside: {stderr}"
        );
        if swap_file {
            assert!(
                stderr.contains("kvcr: warning: the import log was not written"),
                "{stderr}"
            );
            assert_eq!(
                lines(&c.p("held.jsonl")).len(),
                1,
                "only the holding record"
            );
            std::fs::remove_file(c.p("held.jsonl")).unwrap();
            std::fs::remove_file(&log).unwrap();
            std::fs::remove_dir(&logs).unwrap();
        } else {
            let recs = lines(&checked.join("import.jsonl"));
            assert_eq!(recs.len(), 2, "{stderr}");
            assert_eq!(recs[0]["result"], "holding");
            assert_eq!(recs[1]["result"], "imported");
            std::fs::remove_file(&logs).unwrap();
            std::fs::remove_dir_all(&checked).unwrap();
        }
        let (acquired, released) = c.sim_counts();
        assert!(acquired > 0 && acquired == released);
    }
}

/// The ready file's directory too: swapped for a symlink into the
/// inventory between the hold's start (the staging file is created) and
/// the moment every rank is imported, the ready file is published in the
/// directory that was checked, and removed from there at release.
#[test]
fn a_ready_file_directory_swapped_for_a_symlink_never_publishes_inside_the_inventory() {
    let c = Case::new();
    let before = testkit::snapshot(&c.p("inv"));
    let rdir = c.p("run");
    std::fs::create_dir(&rdir).unwrap();
    let ready = rdir.join("ready.json");
    let child = c
        .cmd(
            "delay-ms=200,",
            &c.log(),
            &["--hold", "--ready-file", ready.to_str().unwrap()],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let staged = || {
        std::fs::read_dir(&rdir)
            .map(|d| d.count() > 0)
            .unwrap_or(false)
    };
    wait_for("the staging file", staged);
    let checked = c.p("run-checked");
    std::fs::rename(&rdir, &checked).unwrap();
    std::os::unix::fs::symlink(c.p("inv"), &rdir).unwrap();
    wait_for("the ready file", || checked.join("ready.json").exists());
    assert_eq!(testkit::snapshot(&c.p("inv")), before, "published inside");
    signal(&child, libc::SIGTERM);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!checked.join("ready.json").exists(), "removed at release");
    assert_eq!(testkit::snapshot(&c.p("inv")), before);
    assert_eq!(
        std::fs::read_dir(&checked).unwrap().count(),
        0,
        "no staging left"
    );
}

/// A simulated import imported nothing: without a file named by
/// KVCR_IMPORT_LOG it appends no record to the system's import log (the
/// default, /var/log/kvcr/import.jsonl), and says so; the trial itself runs.
#[test]
fn a_simulated_import_never_appends_to_the_system_log() {
    let c = Case::new();
    let system = Path::new("/var/log/kvcr/import.jsonl");
    let before = std::fs::read(system).ok();
    let mut cmd = c.cmd("", &c.log(), &[]);
    cmd.env_remove("KVCR_IMPORT_LOG")
        .env_remove("KVCR_JOURNAL_SOCKET");
    let out = assert_cmd::Command::from_std(cmd)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let (acquired, released) = c.sim_counts();
    assert!(
        acquired > 0 && acquired == released,
        "{acquired} {released}"
    );
    assert!(!stderr.contains("import recorded"), "{stderr}");
    assert!(!stderr.contains("import log was not written"), "{stderr}");
    assert!(!stderr.contains("journal"), "{stderr}");
    assert!(
        stderr.contains(
            "no GPU memory is imported, and no record goes to the import log \
            (KVCR_IMPORT_LOG names a file to keep one)"
        ),
        "{stderr}"
    );
    assert_eq!(std::fs::read(system).ok(), before, "{}", system.display());
    assert!(!c.log().exists());
}
