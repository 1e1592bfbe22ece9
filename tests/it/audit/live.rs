//! Live mode through the command (docs/format.md §11, issue #3): a described
//! node (`KVCR_NODE_FACTS`) and the real probe on this machine with child
//! processes. The rules themselves are judged at the library level inside
//! the crate (src/service/tests_live.rs).

use crate::util::testkit::{put_ranks, Desc, BOOT_ID, HOSTNAME};
use crate::util::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const OWNER_TICKS: u64 = 123456;
const WRITER_TICKS: u64 = 120000;

fn tp2() -> Desc {
    Desc::new("live-a", 0, 2, 1)
}

/// An inventory of one tp=2 group, mode 0600, edited by `edit`.
fn inventory(edit: impl Fn(&mut Value)) -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    put_ranks(t.path(), &tp2(), 0o600, edit);
    t
}

fn not_quiesced(v: &mut Value) {
    v["writer"]["quiesced"] = json!(false);
}

// ------------------------------------------------------- CLI, KVCR_NODE_FACTS

fn facts_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/live")
        .join(name)
}

fn audit_with_facts(root: &Path, facts: &Path, args: &[&str]) -> (i32, String, String) {
    let out = kvcr()
        .env("KVCR_NODE_FACTS", facts)
        .arg("audit")
        .arg(root)
        .args(args)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn node_match_fixture_describes_the_testkit_node() {
    // fixtures/live/node-match.json is hand-kept; this catches drift from
    // testkit (GPU UUIDs, boot id, hostname, owner).
    let v: Value =
        serde_json::from_slice(&std::fs::read(facts_fixture("node-match.json")).unwrap()).unwrap();
    let want: Vec<String> = (0..4)
        .map(|r| testkit::gpu(0, r))
        .chain((0..2).map(|r| testkit::gpu(1, r)))
        .collect();
    assert_eq!(
        v["gpus"]["visible"],
        json!(want),
        "update fixtures/live/node-match.json"
    );
    assert_eq!(
        v["gpus"]["on_node"],
        json!(want),
        "update fixtures/live/node-match.json"
    );
    assert_eq!(v["boot_id"], BOOT_ID);
    assert_eq!(v["hostname"], HOSTNAME);
    let d = Desc::new("x", 0, 1, 1).value();
    assert_eq!(
        v["processes"][d["owner"]["pid"].to_string()],
        d["owner"]["start_ticks"]
    );
    assert!(v["processes"].get(d["writer"]["pid"].to_string()).is_none());
}

#[test]
fn cli_node_match_fixture_accepts() {
    let t = tempfile::tempdir().unwrap();
    put_ranks(t.path(), &Desc::new("llama3-70b-a", 0, 4, 1), 0o600, |_| {});
    let (code, out, err) = audit_with_facts(
        t.path(),
        &facts_fixture("node-match.json"),
        &["--live", "--format", "json"],
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["live"], true);
    assert!(
        err.contains("KVCR_NODE_FACTS"),
        "the hook announces itself: {err}"
    );
    for r in v["groups"][0]["ranks"].as_array().unwrap() {
        assert_eq!(r["verdict"], "accept");
        assert_eq!(r["not_checked"], json!([]));
    }
}

#[test]
fn cli_not_checked_in_json_and_verbose_table() {
    let inv = inventory(|_| {});
    let facts = facts_fixture("node-unknown.json");
    let (code, out, _) = audit_with_facts(inv.path(), &facts, &["--live", "--format", "json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(code, 0, "not checked never rejects: {v:#}");
    for r in v["groups"][0]["ranks"].as_array().unwrap() {
        let nc: Vec<&str> = r["not_checked"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        assert!(nc.iter().any(|s| s.starts_with("boot_id: ")), "{nc:?}");
        assert!(nc.iter().any(|s| s.starts_with("hostname: ")), "{nc:?}");
        assert!(nc.contains(&"owner: procfs unreadable (fixture)"), "{nc:?}");
        assert!(nc.iter().any(|s| s.starts_with("gpu-present: ")), "{nc:?}");
    }
    let (code, table, _) =
        audit_with_facts(inv.path(), &facts, &["--live", "-v", "--format", "table"]);
    assert_eq!(code, 0);
    assert!(table.contains("gpu-present: not checked"), "{table}");
    assert!(table.contains("owner: not checked"), "{table}");
    // Without -v the table stays short, but the header and the summary
    // line say how many facts were not checked.
    let (_, table, _) = audit_with_facts(inv.path(), &facts, &["--live", "--format", "table"]);
    assert!(!table.contains("gpu-present: not checked"), "{table}");
    assert!(table.contains("; live, 8 facts not checked"), "{table}");
    assert!(table.contains("· 8 facts not checked ·"), "{table}");
}

#[test]
fn cli_findings_through_facts_file() {
    let inv = inventory(not_quiesced);
    let t = tempfile::tempdir().unwrap();
    let facts = t.path().join("facts.json");
    std::fs::write(
        &facts,
        json!({
            "boot_id": BOOT_ID, "hostname": HOSTNAME,
            "processes": {"4242": OWNER_TICKS, "4100": WRITER_TICKS},
            "gpus": {"visible": [testkit::gpu(0, 0)], "on_node": [testkit::gpu(0, 0)]}
        })
        .to_string(),
    )
    .unwrap();
    let (code, out, _) = audit_with_facts(inv.path(), &facts, &["--live", "--format", "json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(code, 1);
    assert!(
        has(&v, "KV109", "rank-0.json") && has(&v, "KV109", "rank-1.json"),
        "{v:#}"
    );
    assert!(
        has(&v, "KV106", "rank-1.json") && !has(&v, "KV106", "rank-0.json"),
        "{v:#}"
    );
}

#[test]
fn cli_bad_facts_file_is_a_usage_error() {
    let inv = inventory(|_| {});
    let t = tempfile::tempdir().unwrap();
    let bad = t.path().join("facts.json");
    std::fs::write(&bad, r#"{"boot_id": "not-a-uuid"}"#).unwrap();
    for facts in [bad, t.path().join("missing.json")] {
        let (code, out, err) =
            audit_with_facts(inv.path(), &facts, &["--live", "--format", "json"]);
        assert_eq!(code, 2, "{out}\n{err}");
        // --format json: the one document on stdout is the error document.
        let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(doc["schema"], "kvcr.error/v1", "{out}");
        assert!(err.contains("KVCR_NODE_FACTS="), "{err}");
    }
}

#[test]
fn without_live_nothing_of_the_node_is_read() {
    // Dead owner, running unquiesced writer, another boot, another host,
    // absent GPU, readable handle bytes: all live-only, all ignored.
    let t = tempfile::tempdir().unwrap();
    put_ranks(t.path(), &tp2(), 0o644, |v| {
        v["owner"]["pid"] = json!(i32::MAX);
        v["writer"]["pid"] = json!(std::process::id());
        v["writer"]["quiesced"] = json!(false);
        v["node"]["boot_id"] = json!("0b5e2a3c-1111-4222-8333-444455556666");
        v["node"]["hostname"] = json!("elsewhere");
        let rank = v["rank"].as_u64().unwrap();
        v["gpu_uuid"] = json!(format!("GPU-00000000-0000-4000-8000-{:012x}", rank + 100));
    });
    // The probe is never built: even a facts file that does not exist is
    // not an error without --live.
    let (code, out, err) = audit_with_facts(
        t.path(),
        Path::new("/nonexistent/kvcr-node-facts.json"),
        &["--format", "json"],
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(code, 0, "{v:#}\n{err}");
    assert_eq!(v["live"], false);
    assert!(findings(&v).is_empty(), "{v:#}");
    for r in v["groups"][0]["ranks"].as_array().unwrap() {
        assert_eq!(r["not_checked"], json!([]));
    }
    assert!(!err.contains("KVCR_NODE_FACTS"), "{err}");
}

// ------------------------------------------------------------- real probe

/// A child process killed and reaped when dropped.
struct Child(std::process::Child);

impl Child {
    fn sleep() -> Child {
        Child(
            std::process::Command::new("sleep")
                .arg("300")
                .spawn()
                .expect("spawn sleep"),
        )
    }
    fn pid(&self) -> i32 {
        self.0.id() as i32
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn this_node() -> (String, String) {
    let host = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    (host, boot.trim().to_string())
}

fn real_audit(root: &Path) -> (i32, Value) {
    let out = kvcr()
        .arg("audit")
        .arg(root)
        .args(["--live", "--format", "json"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

fn start_ticks(pid: i32) -> u64 {
    kvcr_audit::api::proc_start_ticks(pid).unwrap_or_else(|e| panic!("start_ticks({pid}): {e:?}"))
}

#[test]
fn real_probe_child_as_live_owner_and_running_writer() {
    let (host, boot) = this_node();
    let owner = Child::sleep();
    let writer = Child::sleep();
    let (op, ot) = (owner.pid(), start_ticks(owner.pid()));
    let (wp, wt) = (writer.pid(), start_ticks(writer.pid()));
    let here = |v: &mut Value| {
        v["node"]["hostname"] = json!(host);
        v["node"]["boot_id"] = json!(boot);
        v["owner"] = json!({"pid": op, "start_ticks": ot});
    };

    // Live owner, quiesced writer: no KV108/KV109/KV110 from this node.
    let inv = tempfile::tempdir().unwrap();
    put_ranks(inv.path(), &tp2(), 0o600, |v| {
        here(v);
        v["writer"] = json!({"pid": wp, "start_ticks": wt, "quiesced": true});
    });
    let (code, v) = real_audit(inv.path());
    assert_eq!(v["live"], true);
    for c in ["KV108", "KV109", "KV110", "KV003"] {
        assert!(!findings(&v).iter().any(|f| f.0 == c), "{c} in {v:#}");
    }
    let ranks = v["groups"][0]["ranks"].as_array().unwrap();
    let gpus_unknown = ranks.iter().all(|r| {
        r["not_checked"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().starts_with("gpu-present: "))
    });
    if gpus_unknown {
        // CI: no NVIDIA driver, so the GPU is not checked and nothing rejects.
        assert_eq!(code, 0, "{v:#}");
    }

    // The same writer, still running and not quiesced: KV109.
    let inv2 = tempfile::tempdir().unwrap();
    put_ranks(inv2.path(), &tp2(), 0o600, |v| {
        here(v);
        v["writer"] = json!({"pid": wp, "start_ticks": wt, "quiesced": false});
    });
    let (code, v) = real_audit(inv2.path());
    assert_eq!(code, 1);
    assert!(
        has(&v, "KV109", "rank-0.json") && has(&v, "KV109", "rank-1.json"),
        "{v:#}"
    );
    assert!(!findings(&v).iter().any(|f| f.0 == "KV108"), "{v:#}");

    // A start time that is not the child's: its pid was "reused".
    let inv3 = tempfile::tempdir().unwrap();
    put_ranks(inv3.path(), &tp2(), 0o600, |v| {
        here(v);
        v["owner"]["start_ticks"] = json!(ot + 1);
    });
    let (_, v) = real_audit(inv3.path());
    assert!(has(&v, "KV108", "rank-0.json"), "{v:#}");
    let msg = v["groups"][0]["ranks"][0]["findings"][0]["message"]
        .as_str()
        .unwrap();
    assert!(msg.contains("PID reused"), "{msg}");

    // Owner and writer end: the owner is gone (KV108), the writer no longer
    // runs (no KV109).
    let (op2, wp2) = (owner.pid(), writer.pid());
    drop(owner);
    drop(writer);
    assert!(
        kvcr_audit::api::proc_start_ticks(op2).is_err(),
        "owner {op2} still runs"
    );
    assert!(
        kvcr_audit::api::proc_start_ticks(wp2).is_err(),
        "writer {wp2} still runs"
    );
    let (code, v) = real_audit(inv2.path());
    assert_eq!(code, 1);
    assert!(has(&v, "KV108", "rank-0.json"), "{v:#}");
    assert!(!findings(&v).iter().any(|f| f.0 == "KV109"), "{v:#}");
    let msg = v["groups"][0]["ranks"][0]["findings"][0]["message"]
        .as_str()
        .unwrap();
    assert!(msg.contains("is gone; its memory went with it"), "{msg}");
}

#[test]
fn real_probe_other_boot_is_kv108() {
    let (host, _) = this_node();
    let inv = inventory(|v| {
        v["node"]["hostname"] = json!(host);
        v["node"]["boot_id"] = json!("0b5e2a3c-1111-4222-8333-444455556666");
    });
    let (code, v) = real_audit(inv.path());
    assert_eq!(code, 1);
    assert!(has(&v, "KV108", "rank-0.json"), "{v:#}");
    let msg = v["groups"][0]["ranks"][0]["findings"][0]["message"]
        .as_str()
        .unwrap();
    assert!(
        msg.starts_with("node rebooted since this descriptor was written"),
        "{msg}"
    );
}

/// Issue #31 §4: the table's first line, as docs/live.md quotes it, is what
/// kvcr prints: live with facts not checked, live strict, and offline.
#[test]
fn docs_live_quotes_the_first_line_as_printed() {
    let doc = std::fs::read_to_string(repo().join("docs/live.md")).unwrap();
    let doc = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    let inv = inventory(|_| {});
    let first = |facts: &str, args: &[&str]| {
        let (_, table, _) = audit_with_facts(inv.path(), &facts_fixture(facts), args);
        table.lines().next().unwrap().to_string()
    };
    let root = inv.path().display().to_string();
    let unknown = first("node-unknown.json", &["--live"]);
    let strict = first("node-match.json", &["--live", "--strict"]);
    let offline = first("node-match.json", &[]);
    for (line, quoted) in [
        (
            &unknown,
            "(live: checked against this node; 8 facts not checked, -v lists them)",
        ),
        (&strict, "(live: checked against this node (strict))"),
        (&offline, "(offline: node not checked; add --live)"),
    ] {
        let printed = line
            .strip_prefix(&format!("inventory {root}"))
            .unwrap_or_else(|| panic!("{line}"))
            .trim();
        assert_eq!(printed, quoted);
        assert!(
            doc.contains(&format!("`{quoted}`")),
            "docs/live.md lacks `{quoted}`"
        );
    }
    assert!(doc.contains("`; 8 facts not checked, -v lists them`"));
}
