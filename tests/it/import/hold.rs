//! `--hold` per handle kind (docs/format.md §8.6) through the real binary
//! and the fake driver with the driver's fd shape: `fabric` stays
//! importable by its handle while kvcr holds; `posix_fd` is handed over on
//! the socket the ready file names (the owner's fds may be gone); a hold of
//! `cuda_ipc` is refused saying why. The owner closes every fd it has and
//! exits, an engine obtains the memory from what the ready file names and
//! reads the owner's bytes, and the release gives the memory back (the
//! fake's `cuMemGetInfo` counts every physical allocation some reference
//! still keeps, in any process).

use crate::import::fakecuda::{alloc, built, parse_log, pidfd_works, Alloc, Scenario, MIB};
use crate::util::signal;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

const SEED: u8 = 0x5a;

/// Runs a gpu-proof-owner tool (`take`, `meminfo`, `read`) as a new
/// process with the scenario's driver environment; its JSON answer.
fn tool(s: &Scenario, args: &[&str]) -> (i32, Value) {
    let log = s.dir.path().join("tool.log");
    let b = built().unwrap();
    // The environment kvcr gets in this scenario, for another program.
    let c = s.command(&log, &[], &[]);
    let mut cmd = Command::new(&b.proof_owner);
    cmd.args(args).env_clear();
    for (k, v) in c.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    let out = cmd.output().unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

fn used(s: &Scenario) -> u64 {
    let (code, v) = tool(s, &["meminfo"]);
    assert_eq!(code, 0, "{v}");
    v["used"].as_u64().unwrap()
}

fn seeded(kind: &'static str) -> Alloc {
    Alloc {
        alloc_size: 4 * MIB,
        size_bytes: 2 * MIB,
        seed: Some(SEED),
        ..alloc(kind, 0)
    }
}

#[test]
fn the_owner_goes_and_an_engine_takes_the_memory_from_what_the_ready_file_names() {
    let Some(b) = built() else { return };
    if !pidfd_works(b) {
        return;
    }
    let mut s = Scenario::new(b, 1, 1, |_| {
        vec![
            seeded("posix_fd"),
            Alloc {
                offset_bytes: MIB,
                ..seeded("posix_fd")
            },
            seeded("fabric"),
        ]
    });
    let before = used(&s);
    assert_eq!(before, 3 * 4 * MIB, "the owner's three allocations");
    let held = s.start_hold("run", &[]);
    let ready = held.ready.clone();
    let doc: Value = serde_json::from_slice(&std::fs::read(&ready).unwrap()).unwrap();
    let socket = doc["hand_over"].as_str().unwrap().to_string();
    assert!(Path::new(&socket).is_absolute(), "{socket}");
    let canonical = ready.parent().unwrap().canonicalize().unwrap();
    assert_eq!(
        Path::new(&socket),
        canonical.join("ready.json.sock"),
        "{socket}"
    );

    // The ready file and the import plan agree on every allocation; a
    // posix_fd handle also names the owner its fd is a number in.
    let dry = s.import("plan", &[], &["--dry-run"]);
    let plan_rank = &dry.report()["plan"]["ranks"][0];
    let plan = &plan_rank["allocations"];
    let items = doc["ranks"][0]["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    for (item, p) in items.iter().zip(plan.as_array().unwrap()) {
        for k in ["id", "size_bytes", "offset_bytes"] {
            assert_eq!(item[k], p[k], "{k}: {item} vs {p}");
        }
        for k in ["kind", "fd", "hex"] {
            assert_eq!(item["handle"][k], p["handle"][k], "{k}: {item} vs {p}");
        }
        if item["handle"]["kind"] == "posix_fd" {
            assert_eq!(item["handle"]["pid"], plan_rank["owner"]["pid"], "{item}");
            assert_eq!(item["handle"]["pid"], s.owner.id(), "{item}");
            assert_ne!(item["handle"]["pid"], doc["pid"], "{item}");
            assert_eq!(
                item["handle"]["start_ticks"],
                plan_rank["owner"]["start_ticks"]
            );
        } else {
            assert!(item["handle"].get("pid").is_none(), "{item}");
        }
    }
    // obtain: the socket's message, and kvcr's own fd of it (a number in
    // kvcr's process, the ready file's pid: the fake's export file).
    for (k, item) in items[..2].iter().enumerate() {
        let o = &item["obtain"];
        assert_eq!(
            (&o["from"], &o["index"]),
            (&"hand-over".into(), &k.into()),
            "{o}"
        );
        let fd = o["fd"].as_i64().unwrap_or_else(|| panic!("no fd in {o}"));
        let link = std::fs::read_link(format!("/proc/{}/fd/{fd}", doc["pid"])).unwrap();
        assert_eq!(link, Path::new("/dev/null"), "{o}");
    }
    assert_ne!(items[0]["obtain"]["fd"], items[1]["obtain"]["fd"]);
    assert_eq!(items[2]["obtain"], serde_json::json!({"from": "handle"}));

    // The owner closes every fd it has, drops its handles and exits.
    signal(&s.owner, libc::SIGUSR1);
    let st = s.owner.wait().unwrap();
    assert!(st.success(), "{st:?}");
    // kvcr's references keep every allocation.
    assert_eq!(used(&s), before);

    // A new engine: the posix_fd allocations from the socket, their bytes
    // the owner's; the fabric one from its handle.
    let (code, got) = tool(&s, &["take", &socket, &SEED.to_string()]);
    assert_eq!(code, 0, "{got}");
    assert_eq!(got["received"], 2, "{got}");
    for (k, item) in got["items"].as_array().unwrap().iter().enumerate() {
        assert_eq!(item["read"], "same", "{item}");
        assert_eq!(item["fd_type"], "character device", "{item}");
        assert_eq!(item["message"]["index"], k);
        assert_eq!(item["message"]["of"], 2);
        assert_eq!(item["message"]["allocation"], items[k]["id"]);
        assert_eq!(item["message"]["offset_bytes"], items[k]["offset_bytes"]);
    }
    let hex = items[2]["handle"]["hex"].as_str().unwrap();
    let size = (2 * MIB).to_string();
    let (code, read) = tool(&s, &["read", "fabric", hex, &size, &SEED.to_string()]);
    assert_eq!((code, &read["read"]), (0, &Value::from("same")), "{read}");

    // Release: exit 0, the socket and the ready file gone, the memory back.
    let r = held.release();
    assert_eq!(r.code, 0, "{}", r.why());
    assert!(!ready.exists() && !Path::new(&socket).exists());
    r.assert_clean_reverse();
    assert!(r.log.held.is_empty());
    assert!(r.report()["warnings"].is_null(), "{}", r.why());
    assert_eq!(used(&s), 0, "no reference left anywhere");
    // Nothing keeps the fabric allocation now: it can no longer be imported.
    let (code, read) = tool(&s, &["read", "fabric", hex, &size, &SEED.to_string()]);
    assert_ne!(code, 0, "{read}");
    assert!(read["error"].as_str().unwrap().contains("(1)"), "{read}");
}

#[test]
fn the_owner_killed_while_held_leaves_an_engine_the_owners_bytes() {
    let Some(b) = built() else { return };
    if !pidfd_works(b) {
        return;
    }
    let mut s = Scenario::new(b, 1, 1, |_| vec![seeded("posix_fd")]);
    let before = used(&s);
    assert_eq!(before, 4 * MIB);
    let held = s.start_hold("killed", &[]);
    let doc: Value = serde_json::from_slice(&std::fs::read(&held.ready).unwrap()).unwrap();
    let socket = doc["hand_over"].as_str().unwrap().to_string();
    // Killed: no chance to close anything or drop a reference itself.
    signal(&s.owner, libc::SIGKILL);
    let st = s.owner.wait().unwrap();
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&st), Some(9));
    assert_eq!(used(&s), before, "kvcr's references keep the memory");
    // A fresh engine takes it from the socket and reads the owner's bytes.
    let (code, got) = tool(&s, &["take", &socket, &SEED.to_string()]);
    assert_eq!(code, 0, "{got}");
    assert_eq!(got["received"], 1, "{got}");
    assert_eq!(got["items"][0]["read"], "same", "{got}");
    let r = held.release();
    assert_eq!(r.code, 0, "{}", r.why());
    r.assert_clean_reverse();
    // Against the reading before the hold (the owner's allocation), the
    // memory came back: nothing keeps it any more.
    assert_eq!(used(&s), 0, "before the hold {before}, after the release 0");
}

#[test]
fn a_hold_refuses_what_it_cannot_serve_saying_why() {
    let Some(b) = built() else { return };
    let s = Scenario::new(b, 1, 1, |_| vec![alloc("fabric", 0), alloc("cuda_ipc", 0)]);
    let ready = s.dir.path().join("ready.json");
    let r = s.import(
        "ipc",
        &[],
        &["--hold", "--ready-file", ready.to_str().unwrap()],
    );
    assert_eq!(r.code, 2, "{}", r.why());
    assert!(
        r.stderr
            .contains("--hold cannot keep cuda_ipc memory (rank 0 \"kv-1\")")
            && r.stderr.contains("dies with it"),
        "{}",
        r.stderr
    );
    assert!(r.log.acquired.is_empty(), "no GPU call");
    assert!(!ready.exists());
    let left: Vec<_> = std::fs::read_dir(s.dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".ready.json"))
        .collect();
    assert!(left.is_empty(), "staging left: {left:?}");
    // posix_fd without a ready file: nothing would name the socket.
    if pidfd_works(b) {
        let s = Scenario::new(b, 1, 1, |_| vec![alloc("posix_fd", 0)]);
        let r = s.import("no-ready", &[], &["--hold"]);
        assert_eq!(r.code, 2, "{}", r.why());
        assert!(r.stderr.contains("needs --ready-file"), "{}", r.stderr);
        assert!(r.log.acquired.is_empty());
    }
}

#[test]
fn a_fabric_hold_keeps_everything_until_sigterm_then_releases_in_reverse() {
    let Some(b) = built() else { return };
    let s = Scenario::new(b, 2, 2, |r| vec![alloc("fabric", r), alloc("fabric", r)]);
    let held = s.start_hold("fabric", &[]);
    let ready = held.ready.clone();
    let doc: Value = serde_json::from_slice(&std::fs::read(&ready).unwrap()).unwrap();
    assert_eq!(doc["pid"], held.child.id());
    assert_eq!(doc["backend"], "cuda");
    assert!(
        doc.get("hand_over").is_none(),
        "no posix_fd, no socket: {doc}"
    );
    assert_eq!(doc["ranks"].as_array().unwrap().len(), 2);
    // Everything acquired, nothing released while held.
    let mid = parse_log(&std::fs::read_to_string(&held.log).unwrap());
    assert_eq!(mid.acquired.len(), 2 * 7);
    assert!(mid.released.is_empty());
    let r = held.release();
    assert_eq!(r.code, 0, "{}", r.why());
    assert!(!ready.exists());
    r.assert_clean_reverse();
    assert!(r.log.held.is_empty());
    assert_eq!(r.log.released.len(), 14);
}

/// `kvcr import ... --hold --ready-file DIR/TAG.json` under the shell's
/// `ulimit ULIMIT` (a child: the test's own limit is left alone).
fn hold_under_ulimit(s: &Scenario, tag: &str, ulimit: &str) -> (i32, String, Value) {
    let log = s.dir.path().join(format!("{tag}.log"));
    let ready = s.dir.path().join(format!("{tag}.json"));
    let c = s.hold_command(&log, &[], &ready);
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("ulimit {ulimit} || exit 99; exec \"$0\" \"$@\""))
        .arg(c.get_program())
        .args(c.get_args());
    for (k, v) in c.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A hold that starts is released as soon as its ready file is there.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if ready.exists() {
            signal(&child, libc::SIGTERM);
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{tag}: no ready file");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        doc,
    )
}

#[test]
fn the_fd_budget_is_counted_before_the_driver_and_the_soft_limit_raised() {
    let Some(b) = built() else { return };
    if !pidfd_works(b) {
        return;
    }
    let s = Scenario::new(b, 1, 1, |_| {
        vec![
            seeded("posix_fd"),
            Alloc {
                offset_bytes: MIB,
                ..seeded("posix_fd")
            },
        ]
    });
    // Soft and hard 40: 2 × 2 fds + those open + 64 cannot fit: exit 2
    // naming both numbers, before any GPU call.
    let (code, stderr, doc) = hold_under_ulimit(&s, "low", "-n 40");
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("RLIMIT_NOFILE allows 40 (hard limit 40)")
            && stderr.contains("2 posix_fd allocations × 2 fds"),
        "{stderr}"
    );
    assert_eq!(doc["code"], "cannot-run", "{doc}");
    let log = std::fs::read_to_string(s.dir.path().join("low.log")).unwrap_or_default();
    assert!(!log.contains("acquire"), "no GPU call: {log}");
    assert!(!s.dir.path().join("low.json.sock").exists());
    // The dry run predicts it (a trial: one fd per allocation), with the
    // limit as the real import would raise it, changing nothing.
    let log = s.dir.path().join("dry.log");
    let inv = s.inv();
    let c = s.command(
        &log,
        &[],
        &[
            "import",
            inv.to_str().unwrap(),
            "--format",
            "json",
            "--dry-run",
        ],
    );
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("ulimit -n 40 || exit 99; exec \"$0\" \"$@\"")
        .arg(c.get_program())
        .args(c.get_args());
    for (k, v) in c.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    let out = cmd.output().unwrap();
    let dry: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(2), "{dry}");
    let r = &dry["refusals"][0];
    assert_eq!(
        (&r["gate"], &r["status"]),
        (&"open-files".into(), &2.into()),
        "{dry}"
    );
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .contains("RLIMIT_NOFILE allows 40 (hard limit 40)"),
        "{dry}"
    );
    // Only the soft limit low: kvcr raises it to the hard one and holds.
    let hard: u64 = {
        let out = Command::new("sh")
            .args(["-c", "ulimit -H -n"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(u64::MAX)
    };
    if hard >= 1024 {
        let (code, stderr, doc) = hold_under_ulimit(&s, "soft", "-S -n 40");
        assert_eq!(code, 0, "{stderr}\n{doc}");
        assert_eq!(doc["result"], "imported", "{doc}");
    }
}
