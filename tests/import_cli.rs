//! `kvcr import` end to end through the binary (docs/format.md §6, §8), without a GPU:
//! the node is described with `KVCR_NODE_FACTS` and the GPU side is the
//! test-only simulated backend (`KVCR_IMPORT_BACKEND=sim:...`), whose event
//! log shows every acquire and release. Also: dry run on a shipped fixture,
//! no driver → exit 2, and real SIGINT/SIGTERM.

mod common;
use common::kvcr;
use kvcr::testkit::{self, put_group, Desc, BOOT_ID, HOSTNAME};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/accept-tp4/inventory");
const FIXTURE_FACTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/live/node-match.json");

struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    /// A 4-rank × 3-allocation group, private modes, and node facts that
    /// match it (owner alive, GPUs present).
    fn new() -> Case {
        let dir = tempfile::tempdir().unwrap();
        let mut d = Desc::new("llama3-70b-a", 0, 4, 1);
        d.allocations = 3;
        put_group(&dir.path().join("inv"), "", &d);
        private(&dir.path().join("inv"));
        let gpus: Vec<String> = (0..4).map(|r| testkit::gpu(0, r)).collect();
        let facts = json!({
            "boot_id": BOOT_ID, "hostname": HOSTNAME,
            "processes": {"4242": 123456}, "processes_unreadable": null,
            "gpus": {"visible": gpus, "on_node": gpus, "source": "test"}
        });
        std::fs::write(dir.path().join("facts.json"), facts.to_string()).unwrap();
        // Import requires the declared profile (docs/format.md §8.9).
        testkit::put_profile(&dir.path().join("profile.json"), &d);
        Case { dir }
    }
    fn profile(&self) -> PathBuf {
        self.dir.path().join("profile.json")
    }
    fn inv(&self) -> PathBuf {
        self.dir.path().join("inv")
    }
    fn facts(&self) -> PathBuf {
        self.dir.path().join("facts.json")
    }
    fn log(&self) -> PathBuf {
        self.dir.path().join("sim.log")
    }
    fn ready(&self) -> PathBuf {
        self.dir.path().join("ready.json")
    }
    /// `kvcr import INV --format json ARGS` with the sim backend.
    fn import(&self, sim_opts: &str, args: &[&str]) -> (i32, Value, String) {
        let spec = if sim_opts.is_empty() {
            format!("sim:log={}", self.log().display())
        } else {
            format!("sim:{sim_opts},log={}", self.log().display())
        };
        let out = kvcr()
            .arg("import")
            .arg(self.inv())
            .args(["--format", "json"])
            .args(args)
            .env("KVCR_NODE_FACTS", self.facts())
            .env("KVCR_PROFILE", self.profile())
            .env("KVCR_IMPORT_BACKEND", spec)
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let v: Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("not one JSON document ({e}): {stdout}\nstderr: {stderr}"));
        (out.status.code().unwrap_or(-1), v, stderr)
    }
    /// The sim log: (op, resource) per line.
    fn events(&self) -> Vec<(String, Value)> {
        std::fs::read_to_string(self.log())
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                (v["op"].as_str().unwrap().to_string(), v["resource"].clone())
            })
            .collect()
    }
    /// Every acquired resource was released, in exact reverse order.
    fn assert_released_in_reverse(&self) -> usize {
        let ev = self.events();
        let mut acquired: Vec<&Value> = ev
            .iter()
            .filter(|e| e.0 == "acquire")
            .map(|e| &e.1)
            .collect();
        let released: Vec<&Value> = ev
            .iter()
            .filter(|e| e.0 == "release")
            .map(|e| &e.1)
            .collect();
        acquired.reverse();
        assert_eq!(released, acquired, "release order");
        acquired.len()
    }
}

fn private(dir: &Path) {
    for e in walkdir::WalkDir::new(dir) {
        let e = e.unwrap();
        let mode = if e.file_type().is_dir() { 0o700 } else { 0o600 };
        std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

#[test]
fn trial_imports_verifies_and_releases_in_reverse() {
    let c = Case::new();
    let (code, v, stderr) = c.import("", &[]);
    assert_eq!(code, 0, "{v}\n{stderr}");
    assert_eq!(v["schema"], "kvcr.import-report/v1");
    assert_eq!(
        (v["mode"].as_str(), v["result"].as_str()),
        (Some("trial"), Some("imported"))
    );
    assert_eq!(v["backend"], "sim");
    assert_eq!(v["ranks"].as_array().unwrap().len(), 4);
    assert!(stderr.contains("simulated backend"), "{stderr}");
    let n = c.assert_released_in_reverse();
    assert_eq!(n, 4 * (1 + 3 * 3));
    assert_eq!(v["released"], n);
}

#[test]
fn injected_failure_exits_3_after_releasing_in_reverse() {
    let c = Case::new();
    let (code, v, _) = c.import("fail=map@5", &[]);
    assert_eq!(code, 3, "{v}");
    assert_eq!(v["result"], "failed");
    assert_eq!(v["failure"]["rank"], 1);
    assert_eq!(v["failure"]["allocation"], "kv-1");
    assert_eq!(v["failure"]["step"], "map");
    assert!(v.get("remaining").is_none());
    let n = c.assert_released_in_reverse();
    assert_eq!(v["released"], n);

    // The table says the same to a person.
    let out = kvcr()
        .arg("import")
        .arg(c.inv())
        .env("KVCR_NODE_FACTS", c.facts())
        .env("KVCR_PROFILE", c.profile())
        .env("KVCR_IMPORT_BACKEND", "sim:fail=verify@2")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("FAILED: rank 0, allocation \"kv-1\", step verify"),
        "{text}"
    );
    assert!(text.contains("nothing remains held"), "{text}");
}

#[test]
fn failed_release_exits_4_and_lists_what_remains() {
    let c = Case::new();
    let (code, v, _) = c.import("fail=reserve@2,fail-release=2", &[]);
    assert_eq!(code, 4, "{v}");
    assert_eq!(v["result"], "release-failed");
    assert_eq!(v["failure"]["step"], "reserve");
    let remaining = v["remaining"].as_array().unwrap();
    // Taken: ctx, kv-0 import/reserve/map, kv-1 import. Release #2 (kv-0's
    // mapping) fails: it remains, and so do the reservation around it
    // (cuMemAddressFree needs the range unmapped) and its device's context.
    let kinds: Vec<&str> = remaining
        .iter()
        .map(|r| r["resource"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["context", "reservation", "mapping"]);
    assert!(remaining[2]["error"].as_str().unwrap().contains("injected"));
    assert_eq!(remaining[2]["release_call"], "cuMemUnmap");
    assert_eq!(v["released"], 2);
}

#[test]
fn simulated_interrupt_exits_130_after_releasing() {
    let c = Case::new();
    let (code, v, _) = c.import("interrupt-after=6", &[]);
    assert_eq!(code, 130, "{v}");
    assert_eq!(v["result"], "interrupted");
    assert_eq!(c.assert_released_in_reverse(), 6);
}

fn spawn_import(c: &Case, sim_opts: &str, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_kvcr"))
        .arg("import")
        .arg(c.inv())
        .args(["--format", "json"])
        .args(args)
        .env_remove("KVCR_INVENTORY")
        .env("TERM", "dumb")
        .env("KVCR_NODE_FACTS", c.facts())
        .env("KVCR_PROFILE", c.profile())
        .env(
            "KVCR_IMPORT_BACKEND",
            format!("sim:{sim_opts}log={}", c.log().display()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on our own child's pid; no memory is involved.
    let rc = unsafe { libc::kill(child.id() as i32, sig) };
    assert_eq!(rc, 0);
}

fn finish(child: Child) -> (i32, Value, String) {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not one JSON document ({e}): {stdout}\nstderr: {stderr}"));
    (out.status.code().unwrap_or(-1), v, stderr)
}

#[test]
fn hold_writes_ready_file_after_the_last_rank_and_releases_on_sigterm() {
    let c = Case::new();
    let ready = c.ready();
    let child = spawn_import(
        &c,
        "delay-ms=5,",
        &["--hold", "--ready-file", ready.to_str().unwrap()],
    );
    wait_for("the ready file", || ready.exists());
    // Every rank was imported before the file appeared; nothing released yet.
    let ev = c.events();
    assert_eq!(ev.iter().filter(|e| e.0 == "acquire").count(), 40);
    assert!(ev.iter().all(|e| e.0 != "release"));
    let doc: Value = serde_json::from_slice(&std::fs::read(&ready).unwrap()).unwrap();
    assert_eq!(doc["schema"], "kvcr.import-ready/v1");
    assert_eq!(doc["pid"], child.id());
    assert_eq!(doc["ranks"].as_array().unwrap().len(), 4);
    signal(&child, libc::SIGTERM);
    let (code, v, stderr) = finish(child);
    assert_eq!(code, 0, "{v}\n{stderr}");
    assert_eq!(
        (v["mode"].as_str(), v["result"].as_str()),
        (Some("hold"), Some("imported"))
    );
    assert!(stderr.contains("holding 4 ranks"), "{stderr}");
    assert!(!ready.exists(), "ready file removed on release");
    assert_eq!(c.assert_released_in_reverse(), 40);
}

#[test]
fn sigint_mid_import_releases_in_reverse_and_exits_130() {
    let c = Case::new();
    let ready = c.ready();
    let child = spawn_import(
        &c,
        "delay-ms=100,",
        &["--hold", "--ready-file", ready.to_str().unwrap()],
    );
    wait_for("three acquisitions", || {
        c.events().iter().filter(|e| e.0 == "acquire").count() >= 3
    });
    signal(&child, libc::SIGINT);
    let (code, v, stderr) = finish(child);
    assert_eq!(code, 130, "{v}\n{stderr}");
    assert_eq!(v["result"], "interrupted");
    assert!(v["failure"]["message"]
        .as_str()
        .unwrap()
        .contains("interrupted"));
    let n = c.assert_released_in_reverse();
    assert!((3..40).contains(&n), "{n}");
    assert!(!ready.exists());
    let leftovers: Vec<_> = std::fs::read_dir(c.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn rejected_group_exits_1_before_any_backend_call() {
    let c = Case::new();
    std::fs::remove_file(c.inv().join("rank-3.json")).unwrap();
    let (code, v, _) = c.import("", &[]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["result"], "rejected");
    assert_eq!(v["audit"]["verdict"], "reject");
    assert!(v["audit"]["findings"].to_string().contains("KV103"));
    assert!(c.events().is_empty(), "the backend was called");

    // The table shows the live audit and the refusal.
    let out = kvcr()
        .arg("import")
        .arg(c.inv())
        .env("KVCR_NODE_FACTS", c.facts())
        .env("KVCR_PROFILE", c.profile())
        .env("KVCR_IMPORT_BACKEND", "sim")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("KV103"), "{text}");
    assert!(text.contains("import refused, nothing imported"), "{text}");
}

#[test]
fn two_groups_without_engine_is_a_usage_error() {
    let c = Case::new();
    let mut d = Desc::new("mixtral-b", 0, 2, 1);
    d.group = 1;
    put_group(&c.inv(), "b", &d);
    private(&c.inv());
    let out = kvcr()
        .arg("import")
        .arg(c.inv())
        .env("KVCR_NODE_FACTS", c.facts())
        .env("KVCR_PROFILE", c.profile())
        .env("KVCR_IMPORT_BACKEND", "sim")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--engine"), "{err}");
    let (code, v, _) = c.import("", &["--engine", "llama3-70b-a"]);
    assert_eq!(code, 0, "{v}");
}

#[test]
fn dry_run_prints_the_plan_without_cuda() {
    // A copy of the shipped fixture with private modes, on the node its
    // descriptors describe: a plan, exit 0, no driver needed.
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("inventory");
    std::fs::create_dir(&inv).unwrap();
    for e in std::fs::read_dir(FIXTURE).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), inv.join(e.file_name())).unwrap();
    }
    private(&inv);
    let out = kvcr()
        .args(["import", "--dry-run", "--format", "json"])
        .arg(&inv)
        .env("KVCR_NODE_FACTS", FIXTURE_FACTS)
        .env_remove("KVCR_IMPORT_BACKEND")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert_eq!(
        (v["mode"].as_str(), v["result"].as_str()),
        (Some("dry-run"), Some("planned"))
    );
    assert_eq!(v["backend"], "none");
    let ranks = v["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 4);
    assert!(ranks
        .iter()
        .all(|r| r["items"].as_array().unwrap().len() == 2));
    assert!(ranks[0]["gpu_uuid"].as_str().unwrap().starts_with("GPU-"));

    let out = kvcr()
        .args(["import", "--dry-run"])
        .arg(&inv)
        .env("KVCR_NODE_FACTS", FIXTURE_FACTS)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("plan for llama3-70b-a"), "{text}");
    assert!(text.contains("nothing imported (dry run)"), "{text}");
}

#[test]
fn dry_run_on_the_shipped_fixture_as_checked_out() {
    // Straight from the checkout: git gives the files mode 0644, and live
    // mode refuses handle bytes readable by others (KV003), so the dry run
    // prints the refusal and exits 1; a checkout with private modes plans
    // (exit 0). Either way: one JSON document, no CUDA, no usage error.
    let out = kvcr()
        .args(["import", "--dry-run", "--format", "json", FIXTURE])
        .env("KVCR_NODE_FACTS", FIXTURE_FACTS)
        .env_remove("KVCR_IMPORT_BACKEND")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    match out.status.code() {
        Some(0) => assert_eq!(v["result"], "planned"),
        Some(1) => {
            assert_eq!(v["result"], "rejected");
            assert!(v["audit"]["ranks"].to_string().contains("KV003"), "{v}");
        }
        other => panic!("{other:?}: {v}"),
    }
    // And on this machine's own facts (a different node): refused, exit 1.
    let out = kvcr()
        .args(["import", "--dry-run", FIXTURE])
        .env_remove("KVCR_NODE_FACTS")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn import_without_a_driver_exits_2_naming_the_driver() {
    if kvcr::import::cuda::driver_present() {
        eprintln!("skipped: libcuda is present on this machine");
        return;
    }
    let c = Case::new();
    let out = kvcr()
        .arg("import")
        .arg(c.inv())
        .env("KVCR_NODE_FACTS", c.facts())
        .env("KVCR_PROFILE", c.profile())
        .env_remove("KVCR_IMPORT_BACKEND")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no NVIDIA driver"), "{err}");
    assert!(err.contains("--dry-run"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_backend_spec_and_ready_file_are_usage_errors() {
    let c = Case::new();
    let out = kvcr()
        .arg("import")
        .arg(c.inv())
        .env("KVCR_NODE_FACTS", c.facts())
        .env("KVCR_PROFILE", c.profile())
        .env("KVCR_IMPORT_BACKEND", "sim:fail=teleport@1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    std::fs::write(c.ready(), "stale").unwrap();
    let (code, _, _) = {
        let out = kvcr()
            .arg("import")
            .arg(c.inv())
            .args(["--hold", "--ready-file"])
            .arg(c.ready())
            .env("KVCR_NODE_FACTS", c.facts())
            .env("KVCR_PROFILE", c.profile())
            .env(
                "KVCR_IMPORT_BACKEND",
                format!("sim:log={}", c.log().display()),
            )
            .output()
            .unwrap();
        (out.status.code(), (), ())
    };
    assert_eq!(code, Some(2));
    assert!(c.events().is_empty());
    assert_eq!(std::fs::read(c.ready()).unwrap(), b"stale");
}
