//! Helpers shared by the integration tests, and the one environment every
//! kvcr command a test starts begins from.
//!
//! All suites are threads of one process (`cargo test` runs them in
//! parallel), so a test must not change process-wide state: no
//! `std::env::set_var` (give the child its environment instead, on top of
//! [`test_env`]), no `set_current_dir` (use `Command::current_dir`), and no
//! inheritable file descriptor (create it `CLOEXEC`; clear the flag in the
//! one child that should inherit it), because any test's child may be forked
//! while it is open.
#![allow(dead_code)]

pub mod fleet;
pub mod samples;
pub use kvcr_testkit as testkit;
pub use xtask::man;

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Every environment variable the kvcr binary reads at run time (src/:
/// clap's `env = ...` for ROOT and --profile, the node-facts and backend
/// test hooks, the thread count, the printer's colour/width inputs and the
/// CUDA driver's device mask). Removed from every command [`test_env`]
/// prepares, so the shell `cargo test` runs in cannot change a result; a
/// test that wants one sets it on top.
pub const KVCR_READS: &[&str] = &[
    "KVCR_INVENTORY",
    "KVCR_PROFILE",
    "KVCR_NODE_FACTS",
    "KVCR_PROC_ROOT",
    "KVCR_IMPORT_BACKEND",
    "KVCR_THREADS",
    "NO_COLOR",
    "TERM",
    "COLUMNS",
    "CUDA_VISIBLE_DEVICES",
    "KVCR_IMPORT_LOG",
    "KVCR_JOURNAL_SOCKET",
    "KVCR_PRODUCER_USER",
    // Where `kvcr gms` looks (GMS's own variables, docs/format.md §14.1).
    "GMS_KV_LEASE_SHM_DIR",
    "GMS_KV_LEASE_SHM_PATH",
    "GMS_VLLM_KV_LEASE_SHM_DIR",
    "GMS_VLLM_KV_LEASE_SHM_PATH",
    "GMS_SGLANG_KV_LEASE_SHM_DIR",
    "GMS_SGLANG_KV_LEASE_SHM_PATH",
    "GMS_TRTLLM_KV_LEASE_SHM_DIR",
    "GMS_TRTLLM_KV_LEASE_SHM_PATH",
    "FAILOVER_LOCK_PATH",
    "DYN_KV_RECOVERY_PATH",
    "GMS_SOCKET_DIR",
    "GMS_KV_INDEX_PATH",
];

/// Where the import log of every command [`test_env`] prepares goes: a
/// shared file under the temp directory, never /var/log/kvcr (appends of
/// one line are atomic, so parallel tests may share it). A test that
/// checks the log sets its own path on top.
pub fn test_import_log() -> PathBuf {
    std::env::temp_dir().join("kvcr-tests").join("import.jsonl")
}

/// The journal socket of every command [`test_env`] prepares: one that does
/// not exist, so no test sends records to the journal of the machine.
pub const TEST_JOURNAL_SOCKET: &str = "/nonexistent/kvcr-tests/journal.socket";

/// Set in every command [`test_env`] prepares: no colour, no progress bar.
pub const FIXED: &[(&str, &str)] = &[("TERM", "dumb")];

/// How long any one kvcr run may take before the test fails (a hang guard,
/// not a performance check: the whole suite shares the machine's cores).
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// The kvcr binary under test.
pub fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kvcr"))
}

/// The repository (fixtures/, docs/, README.md).
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `fixtures/live/NAME`: the node-facts files.
pub fn fixtures_live(name: &str) -> PathBuf {
    repo().join("fixtures/live").join(name)
}

/// The test environment: removes [`KVCR_READS`] and sets [`FIXED`]. For
/// kvcr itself ([`kvcr`], [`kvcr_std`]) and for a command that runs kvcr
/// (sh, script, a README recipe). Everything else is inherited (PATH, HOME).
pub fn test_env(c: &mut std::process::Command) -> &mut std::process::Command {
    for k in KVCR_READS {
        c.env_remove(k);
    }
    for (k, v) in FIXED {
        c.env(k, v);
    }
    c.env("KVCR_IMPORT_LOG", test_import_log());
    c.env("KVCR_JOURNAL_SOCKET", TEST_JOURNAL_SOCKET);
    c
}

/// A kvcr command (std) in the test environment, for a test that spawns it
/// (signals, a --hold owner) or wires its stdio itself.
pub fn kvcr_std() -> std::process::Command {
    let mut c = std::process::Command::new(bin());
    test_env(&mut c);
    c
}

/// A kvcr command in the test environment, with the [`TIMEOUT`].
pub fn kvcr() -> Command {
    let mut c = Command::from_std(kvcr_std());
    c.timeout(TIMEOUT);
    c
}

/// Runs `kvcr audit ROOT --format json ARGS`, returning (exit, report).
pub fn audit_json(root: &Path, args: &[&str]) -> (i32, Value) {
    let out = kvcr()
        .arg("audit")
        .arg(root)
        .args(["--format", "json"])
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).expect("utf-8 stdout");
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "not one JSON document ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

/// Every finding anywhere in a report, as (code, severity, path).
pub fn findings(v: &Value) -> Vec<(String, String, String)> {
    fn walk(v: &Value, out: &mut Vec<(String, String, String)>) {
        match v {
            Value::Object(o) => {
                if let (Some(Value::String(c)), Some(Value::String(s))) =
                    (o.get("code"), o.get("severity"))
                {
                    let p = o
                        .get("path")
                        .and_then(|p| p.as_str())
                        .unwrap_or("")
                        .to_string();
                    out.push((c.clone(), s.clone(), p));
                }
                o.values().for_each(|x| walk(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, &mut out);
    out
}

/// The code of every finding anywhere in a report.
pub fn codes(v: &Value) -> Vec<String> {
    findings(v).into_iter().map(|(c, _, _)| c).collect()
}

pub fn has(v: &Value, code: &str, path_part: &str) -> bool {
    findings(v)
        .iter()
        .any(|(c, s, p)| c == code && s == "reject" && p.contains(path_part))
}

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Polls `cond` every 10 ms until it holds; fails the test after 60 s.
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends `sig` to our own child.
pub fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on our own child's pid; no memory is involved.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

/// Runs kvcr with `args`/`envs`, waits `secs`; returns whether it ended by
/// itself, and whether it then ended on SIGTERM within 3 s. Always reaped.
pub fn ends_by_itself(
    args: &[&std::ffi::OsStr],
    envs: &[(&str, &std::ffi::OsStr)],
    secs: u64,
) -> (bool, bool) {
    let mut c = kvcr_std();
    c.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in envs {
        c.env(k, v);
    }
    let mut child = c.spawn().unwrap();
    let wait = |child: &mut Child, secs: u64| {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(secs) {
            if child.try_wait().unwrap().is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    };
    if wait(&mut child, secs) {
        return (true, true);
    }
    signal(&child, libc::SIGTERM);
    let on_term = wait(&mut child, 3);
    let _ = child.kill();
    let _ = child.wait();
    (false, on_term)
}

/// Whether this test may make mount namespaces (`unshare -m`: root, and a
/// sandbox that allows it).
pub fn can_unshare_mounts() -> bool {
    is_root()
        && std::process::Command::new("unshare")
            .args(["-m", "true"])
            .status()
            .is_ok_and(|s| s.success())
}
