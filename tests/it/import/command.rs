//! `kvcr import` end to end through the binary (docs/format.md §6, §8), without a GPU:
//! the node is described with `KVCR_NODE_FACTS` and the GPU side is the
//! test-only simulated backend (`KVCR_IMPORT_BACKEND=sim:...`), whose event
//! log shows every acquire and release. Also: dry run on a shipped fixture,
//! no driver → exit 2, and real SIGINT/SIGTERM.

use crate::util::fleet::{private, Fleet, OTHER_BOOT};
use crate::util::testkit::{self, put_group, Desc, BOOT_ID, HOSTNAME};
use crate::util::{kvcr, kvcr_std, signal, wait_for};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/accept-tp4/inventory");
const FIXTURE_FACTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/live/node-match.json");

struct Case {
    dir: tempfile::TempDir,
}

/// Validates `doc` against `kvcr schema WHICH` and checks the §9.4
/// metadata: `exit_status` is the process's own.
fn valid(kind: kvcr_audit::schema::Kind, doc: &Value, code: Option<i32>) {
    let schema: Value = serde_json::from_str(kind.text()).unwrap();
    let v = jsonschema::draft202012::new(&schema).unwrap();
    let errs: Vec<String> = v
        .iter_errors(doc)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errs.is_empty(), "{kind:?}: {errs:?}\n{doc:#}");
    if let Some(code) = code {
        assert_eq!(doc["exit_status"], code, "{doc:#}");
        assert_eq!(doc["kvcr_version"], env!("CARGO_PKG_VERSION"));
    }
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
        valid(
            kvcr_audit::schema::Kind::ImportReport,
            &v,
            out.status.code(),
        );
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

/// True when this machine can load libcuda as kvcr's driver check does
/// (`libcuda.so.1`, else `libcuda.so`): these tests are for a node without.
fn driver_present() -> bool {
    [c"libcuda.so.1", c"libcuda.so"].iter().any(|name| {
        // SAFETY: dlopen of a NUL-terminated name, and dlclose of the handle
        // it returned.
        unsafe {
            let h = libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
            !h.is_null() && {
                libc::dlclose(h);
                true
            }
        }
    })
}

/// The wall clock, in Unix milliseconds.
fn now_unix_ms() -> u64 {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    d.unwrap().as_millis() as u64
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
    kvcr_std()
        .arg("import")
        .arg(c.inv())
        .args(["--format", "json"])
        .args(args)
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

fn finish(child: Child) -> (i32, Value, String) {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not one JSON document ({e}): {stdout}\nstderr: {stderr}"));
    valid(
        kvcr_audit::schema::Kind::ImportReport,
        &v,
        out.status.code(),
    );
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
    assert_eq!(
        doc["backend"], "sim",
        "a simulated hold says so (#19 item 11): {doc}"
    );
    valid(kvcr_audit::schema::Kind::Ready, &doc, None);
    assert_eq!(doc["pid"], child.id());
    // Its start time too, so a stale file's pid, reused, is not taken for the holder.
    assert!(doc["start_ticks"].as_u64().is_some_and(|t| t > 0), "{doc}");
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
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // No profile: the real import would exit 2 (§8.7).
    assert_eq!(out.status.code(), Some(2), "{v}");
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
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("plan for llama3-70b-a"), "{text}");
    assert!(text.contains("nothing imported (dry run)"), "{text}");
}

#[test]
fn dry_run_on_the_shipped_fixture_as_checked_out() {
    // Straight from the checkout: git gives the files mode 0644, and live
    // mode refuses handle bytes readable by others (KV003), so the dry run
    // prints the refusal; a checkout with private modes plans. Either way
    // it exits 2, as the real import without a profile would (§8.7): one
    // JSON document, no CUDA.
    let out = kvcr()
        .args(["import", "--dry-run", "--format", "json", FIXTURE])
        .env("KVCR_NODE_FACTS", FIXTURE_FACTS)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(2), "{v}");
    assert_eq!(v["refusals"][0]["gate"], "profile", "{v}");
    match v["result"].as_str() {
        Some("planned") => {}
        Some("rejected") => {
            assert!(v["audit"]["ranks"].to_string().contains("KV003"), "{v}");
        }
        other => panic!("{other:?}: {v}"),
    }
    // And on this machine's own facts (a different node): refused, and
    // without a profile exit 2, as the real import (§8.7).
    let out = kvcr()
        .args(["import", "--dry-run", FIXTURE])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn import_without_a_driver_exits_2_naming_the_driver() {
    if driver_present() {
        crate::util::skip_fact("libcuda is present on this machine");
        return;
    }
    let c = Case::new();
    let out = kvcr()
        .arg("import")
        .arg(c.inv())
        .env("KVCR_NODE_FACTS", c.facts())
        .env("KVCR_PROFILE", c.profile())
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

// ---- The gate (docs/format.md §8.9) ----

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn no_profile_or_an_incomplete_one_is_exit_2_naming_what_is_missing() {
    let c = Case::new();
    let out = kvcr()
        .arg("import")
        .arg(c.inv())
        .env("KVCR_NODE_FACTS", c.facts())
        .env(
            "KVCR_IMPORT_BACKEND",
            format!("sim:log={}", c.log().display()),
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(out.stdout.is_empty());
    let err = stderr_of(&out);
    assert!(err.contains("no deployment profile"), "{err}");
    assert!(err.contains("--profile FILE or $KVCR_PROFILE"), "{err}");
    // A profile that leaves out gpus (and pp) names exactly those.
    let mut p: Value = serde_json::from_slice(&std::fs::read(c.profile()).unwrap()).unwrap();
    p.as_object_mut().unwrap().remove("gpus");
    p.as_object_mut().unwrap().remove("pp");
    let partial = c.dir.path().join("partial.json");
    std::fs::write(&partial, p.to_string()).unwrap();
    let out = kvcr()
        .arg("import")
        .arg(c.inv())
        .arg("--profile")
        .arg(&partial)
        .env("KVCR_NODE_FACTS", c.facts())
        .env(
            "KVCR_IMPORT_BACKEND",
            format!("sim:log={}", c.log().display()),
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    assert!(err.contains("does not declare pp, gpus"), "{err}");
    assert!(c.events().is_empty(), "the backend was opened");
}

#[test]
fn dry_run_without_a_profile_plans_and_says_the_import_would_be_refused() {
    let c = Case::new();
    let dry = |inv: &Path| {
        kvcr()
            .args(["import", "--dry-run"])
            .arg(inv)
            .env("KVCR_NODE_FACTS", c.facts())
            .env("KVCR_IMPORT_BACKEND", "sim")
            .output()
            .unwrap()
    };
    let out = dry(&c.inv());
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("nothing imported (dry run)"), "{text}");
    assert!(
        text.contains("the real import would be refused (exit 2):"),
        "{text}"
    );
    assert!(text.contains("(exit 2) no deployment profile"), "{text}");
    // JSON: the refusal is listed; the sim backend counts as a driver.
    let out = kvcr()
        .args(["import", "--dry-run", "--format", "json"])
        .arg(c.inv())
        .env("KVCR_NODE_FACTS", c.facts())
        .env("KVCR_IMPORT_BACKEND", "sim")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"], "planned");
    let gates: Vec<&str> = v["refusals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["gate"].as_str().unwrap())
        .collect();
    assert_eq!(gates, ["profile"], "{v}");
    assert_eq!(
        v["strict"], false,
        "a dry run lists unchecked facts, it does not refuse"
    );
    // A rejected group without a profile: the real import answers the
    // profile first (exit 2), and the dry run says both.
    std::fs::remove_file(c.inv().join("rank-1.json")).unwrap();
    let out = dry(&c.inv());
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("the import would be refused: group"),
        "{text}"
    );
    assert!(
        text.contains("(exit 2, answered first) no deployment profile"),
        "{text}"
    );
}

/// Node facts that could not be read: the audit lists them (exit 0), the
/// strict audit rejects on them, and the import refuses naming them.
#[test]
fn facts_not_checked_refuse_the_import_and_the_strict_audit() {
    let c = Case::new();
    let unknown = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/live/node-unknown.json"
    );
    let out = kvcr()
        .arg("import")
        .arg(c.inv())
        .args(["--format", "json"])
        .env("KVCR_NODE_FACTS", unknown)
        .env("KVCR_PROFILE", c.profile())
        .env(
            "KVCR_IMPORT_BACKEND",
            format!("sim:log={}", c.log().display()),
        )
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{v}");
    assert_eq!(v["result"], "rejected");
    assert_eq!(v["refusals"][0]["gate"], "not-checked");
    assert_eq!(v["strict"], true);
    let msg = v["refusals"][0]["message"].as_str().unwrap();
    for fact in [
        "rank 0: hostname",
        "rank 0: boot_id",
        "rank 0: owner",
        "gpu-present",
    ] {
        assert!(msg.contains(fact), "{fact}: {msg}");
    }
    assert!(msg.contains("and 8 more"), "bounded: {msg}");
    assert!(
        c.events().iter().all(|e| e.0 != "acquire"),
        "a GPU call was made"
    );

    let audit = |extra: &[&str]| {
        let out = kvcr()
            .arg("audit")
            .arg(c.inv())
            .args(["--live", "--format", "json"])
            .args(extra)
            .env("KVCR_NODE_FACTS", unknown)
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.code().unwrap(), v)
    };
    let (code, v) = audit(&[]);
    assert_eq!(code, 0, "not strict: listed, not rejected");
    assert_eq!(v["strict"], false);
    assert_eq!(v["live"], true);
    assert_eq!(
        v["groups"][0]["ranks"][0]["not_checked"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    let (code, v) = audit(&["--strict"]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["strict"], true);
    let f = &v["groups"][0]["ranks"][0]["findings"];
    let codes: Vec<(&str, &str)> = f
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["code"].as_str().unwrap(), f["message"].as_str().unwrap()))
        .collect();
    assert!(
        codes.iter().any(|(c, m)| *c == "KV110"
            && m.starts_with("not checked: hostname")
            && m.ends_with("(--strict)")),
        "{codes:?}"
    );
    assert!(codes
        .iter()
        .any(|(c, m)| *c == "KV106" && m.starts_with("not checked: gpu-present")));
    // --strict only means something against this node.
    let out = kvcr()
        .args(["audit", "--strict"])
        .arg(c.inv())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// The order of answers: the audit before the driver, the driver before
/// facts not checked.
#[test]
fn without_a_driver_a_rejected_group_is_1_and_unchecked_facts_are_2() {
    if driver_present() {
        crate::util::skip_fact("libcuda is present on this machine");
        return;
    }
    let c = Case::new();
    let real = |facts: &Path| {
        kvcr()
            .arg("import")
            .arg(c.inv())
            .env("KVCR_NODE_FACTS", facts)
            .env("KVCR_PROFILE", c.profile())
            .output()
            .unwrap()
    };
    // Facts not checked come after the driver: exit 2, the driver named.
    let unknown = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/live/node-unknown.json"
    ));
    let out = real(unknown);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_of(&out).contains("no NVIDIA driver"),
        "{}",
        stderr_of(&out)
    );
    // A rejected group is exit 1 even without a driver.
    std::fs::remove_file(c.inv().join("rank-2.json")).unwrap();
    let out = real(&c.facts());
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("import refused, nothing imported"), "{text}");
    // The dry run lists the missing driver among what would refuse.
    let c = Case::new();
    let out = kvcr()
        .args(["import", "--dry-run", "--format", "json"])
        .arg(c.inv())
        .env("KVCR_NODE_FACTS", c.facts())
        .output()
        .unwrap();
    // No profile and no driver: the real import would exit 2 (§8.7).
    assert_eq!(out.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let gates: Vec<&str> = v["refusals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["gate"].as_str().unwrap())
        .collect();
    assert_eq!(gates, ["profile", "driver"], "{v}");
}

#[test]
fn a_stale_ready_file_names_its_holder_and_whether_it_runs() {
    let c = Case::new();
    let hold = || {
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
        assert_eq!(out.status.code(), Some(2));
        stderr_of(&out)
    };
    // Left by a process that is gone (above every default pid_max).
    std::fs::write(
        c.ready(),
        r#"{"schema": "kvcr.import-ready/v1", "pid": 4194305}"#,
    )
    .unwrap();
    let err = hold();
    assert!(
        err.contains(
            "left by pid 4194305, which is gone: remove the file after checking nothing \
            holds the group"
        ),
        "{err}"
    );
    // Held by a process that still runs: this test.
    let me = std::process::id();
    std::fs::write(c.ready(), format!(r#"{{"pid": {me}}}"#)).unwrap();
    let err = hold();
    assert!(
        err.contains(&format!("held by pid {me}, still running")),
        "{err}"
    );
    assert!(c.events().is_empty());
}

#[test]
fn a_local_part_imports_with_a_fresh_fleet_report_of_the_whole_group() {
    let f = Fleet::new();
    let fleet = f.fleet();
    assert_eq!(fleet["all_inputs_live"], true);
    assert_eq!(fleet["inputs"][0]["host"], HOSTNAME);
    assert_eq!(fleet["inputs"][0]["boot_id"], BOOT_ID);
    let (code, v) = f.import(Some(&fleet), &[]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["result"], "imported");
    let ranks: Vec<u64> = v["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rank"].as_u64().unwrap())
        .collect();
    assert_eq!(ranks, [0, 1]);
    // Without one: refused, and the dry run lists it with the real
    // import's status (exit 1, §8.7).
    f.refused(None, &[], "import requires --fleet-report FILE");
    let (code, v) = f.import(None, &["--dry-run"]);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(v["refusals"][0]["gate"], "fleet-report");
}

#[test]
fn a_fleet_report_that_does_not_prove_this_part_refuses_the_import() {
    let f = Fleet::new();
    let base = f.fleet();
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut v = base.clone();
        edit(&mut v);
        v
    };
    let now = now_unix_ms();
    let old = with(&|v| {
        for i in v["inputs"].as_array_mut().unwrap() {
            i["generated_unix_ms"] = json!(now - 600_000);
        }
    });
    f.refused(Some(&old), &[], "is too old");
    // --max-report-age takes the units of --max-age.
    assert_eq!(f.import(Some(&old), &["--max-report-age", "1h"]).0, 0);
    f.refused(
        Some(&old),
        &["--max-report-age", "5m"],
        "more than --max-report-age 300 s",
    );
    f.refused(
        Some(&with(&|v| v["inputs"][0]["host"] = json!("gpu-node-99"))),
        &[],
        "names no input from this host gpu-node-17",
    );
    f.refused(
        Some(&with(&|v| v["inputs"][0]["boot_id"] = json!(OTHER_BOOT))),
        &[],
        "rebooted since?",
    );
    f.refused(
        Some(&with(&|v| v["all_inputs_live"] = json!(false))),
        &[],
        "not built only from live reports",
    );
    f.refused(
        Some(&with(&|v| {
            v["groups"][0]["incarnation"] = json!(testkit::INCARNATION_B)
        })),
        &[],
        "with incarnation 9a7e6d5c",
    );
    f.refused(
        Some(&with(&|v| v["groups"][0]["epoch"] = json!(2))),
        &[],
        "with epoch 2, this node holds epoch 1",
    );
    f.refused(
        Some(&with(&|v| {
            v["groups"][0]["verdict"] = json!("reject");
            v["groups"][0]["cause"] = json!("rank 3 missing (KV103)");
        })),
        &[],
        "rejects group llama3-70b-a: rank 3 missing (KV103)",
    );
    // The verdict field alone proves nothing: the ranks are looked at.
    f.refused(
        Some(&with(&|v| {
            v["groups"][0]["ranks"].as_array_mut().unwrap().pop();
        })),
        &[],
        "does not hold every rank of group llama3-70b-a exactly once (missing 3",
    );
    f.refused(
        Some(&with(&|v| {
            v["groups"][0]["ranks"][2]["verdict"] = json!("reject")
        })),
        &[],
        "accepts group llama3-70b-a but rejects its rank 2",
    );
    // Rank 1 attributed to the other node: not exactly this node's ranks.
    let other = base["inputs"][1]["report"].clone();
    f.refused(
        Some(&with(&|v| {
            v["groups"][0]["ranks"][1]["report"] = other.clone()
        })),
        &[],
        "names ranks 0 from this node",
    );
    // An audit report of one node is not a merge report.
    let node_a: Value =
        serde_json::from_slice(&std::fs::read(f.dir.path().join("node-a.json")).unwrap()).unwrap();
    f.refused(Some(&node_a), &[], "is not a kvcr merge report");
    // A fleet report that cannot be read is missing proof too: exit 1.
    let (code, v) = f.import(None, &["--fleet-report", "/nonexistent/fleet.json"]);
    assert_eq!(code, 1, "{v:#}");
    let msg = v["refusals"][0]["message"].as_str().unwrap();
    assert!(
        msg.contains("cannot read --fleet-report /nonexistent/fleet.json"),
        "{msg}"
    );
}

/// The plan table, like the audit's, has no trailing spaces (piped into
/// files and diffs), and the README's dry-run command runs as written.
#[test]
fn the_plan_table_has_no_trailing_spaces() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/accept-posix-fd");
    let out = kvcr()
        .arg("import")
        .arg("--dry-run")
        .arg("--profile")
        .arg(root.join("profile.json"))
        .arg(root.join("inventory"))
        .env(
            "KVCR_NODE_FACTS",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/live/node-match.json"),
        )
        // The sim backend counts as a driver: nothing refuses, exit 0.
        .env("KVCR_IMPORT_BACKEND", "sim")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("planned: 2 ranks"), "{text}");
    for line in text.lines() {
        assert_eq!(line, line.trim_end(), "trailing spaces: {line:?}");
    }
}
