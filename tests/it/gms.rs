//! `kvcr gms` (docs/format.md §14) on artifacts the test kit writes: every
//! condition with its code, verdict, headline and exit status; healthy
//! artifacts ok; discovery from GMS's own variables; exit 2 for what cannot
//! be judged; and never a side effect: the bytes, size, mode and times of
//! every file unchanged, nothing created, no lock ever taken on a lease
//! ring (a process holding one is never blocked), a cohort probe released
//! at once. Cohort tests hold real flocks from child processes (this test
//! binary, re-run as [`lock_holder`]).

use crate::util::testkit::gms as kit;
use crate::util::{is_root, kvcr, kvcr_std};
use kvcr_audit::finding::Code;
use serde_json::Value;
use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Every GMS variable kvcr reads, pointed at `dir` (so no run looks at
/// this machine's /dev/shm, /shared or /tmp).
fn gms_env(dir: &Path) -> Vec<(String, OsString)> {
    let p = |n: &str| dir.join(n).into_os_string();
    vec![
        ("GMS_KV_LEASE_SHM_DIR".into(), p("shm")),
        ("FAILOVER_LOCK_PATH".into(), p("failover.lock")),
        ("DYN_KV_RECOVERY_PATH".into(), p("kv-recovery.mmap")),
    ]
}

/// `kvcr gms ARGS --format json --interval-ms 1`: (exit, document).
fn gms(args: &[&OsStr], env: &[(String, OsString)]) -> (i32, Value) {
    let mut c = kvcr();
    c.arg("gms")
        .args(args)
        .args(["--format", "json", "--interval-ms", "1"]);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "not one JSON document ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap(), v)
}

fn schema() -> jsonschema::Validator {
    let s: Value = serde_json::from_str(kvcr_audit::schema::Kind::GmsReport.text()).unwrap();
    jsonschema::draft202012::new(&s).unwrap()
}

/// The document validates against `schemas/gms-report.schema.json`, and
/// its exit status is the process's.
fn checked(status: i32, v: &Value) {
    let errors: Vec<String> = schema().iter_errors(v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:#?}\n{v:#}");
    assert_eq!(v["exit_status"], status, "{v:#}");
}

/// One artifact's (verdict, cause_code, cause, action, finding codes).
fn one(v: &Value) -> &Value {
    let a = v["artifacts"].as_array().unwrap();
    assert_eq!(a.len(), 1, "{v:#}");
    &a[0]
}

fn codes(a: &Value) -> Vec<(String, String)> {
    a["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["code"].as_str().unwrap().to_string(),
                f["severity"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The audit's headline conventions: the cause names the code, the action
/// is `kvcr explain CODE`'s, ending with where to read more.
fn headline_is(a: &Value, code: &str) {
    assert_eq!(a["cause_code"], code, "{a:#}");
    let cause = a["cause"].as_str().unwrap();
    assert!(cause.ends_with(&format!("({code})")), "{cause}");
    let action = a["action"].as_str().unwrap();
    let explained = crate::cli::explain::action(Code::parse(code).unwrap());
    assert_eq!(action, format!("{explained}; see `kvcr explain {code}`"));
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// The owner hash of this test process under GMS's default owner id: a
/// live owner for `--live`.
fn live_owner() -> u64 {
    kit::owner_hash(&format!("vllm-{}-0", std::process::id()))
}

#[test]
fn a_healthy_lease_ring_is_ok_offline_and_live() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "ring",
        &kit::Lease::valid(32, live_owner()).bytes(),
    );
    // A user of the ring in this PID namespace (this test process), so
    // its pids are this namespace's (docs/format.md §14.2).
    let _user = std::fs::File::open(&p).unwrap();
    for live in [false, true] {
        let mut args = vec![p.as_os_str()];
        if live {
            args.push(OsStr::new("--live"));
        }
        let (status, v) = gms(&args, &[]);
        checked(status, &v);
        assert_eq!(status, 0, "{v:#}");
        let a = one(&v);
        assert_eq!(
            (a["kind"].as_str(), a["verdict"].as_str()),
            (Some("lease"), Some("ok"))
        );
        assert_eq!(codes(a), []);
        assert_eq!(a["cause_code"], Value::Null);
        assert!(a["cause"]
            .as_str()
            .unwrap()
            .starts_with("a consistent lease ring: 32 blocks"));
        assert_eq!(a["action"], "nothing to do");
        let l = &a["lease"];
        assert_eq!(l["records"]["leased"], 3);
        assert_eq!(l["free_count"], 27);
        if live {
            assert_eq!(l["owners"][0]["live"]["pid"], std::process::id());
            assert_eq!(l["owners"][0]["live"]["engine"], "vllm");
        } else {
            assert_eq!(l["owners"], Value::Null);
        }
        assert!(v["cause"].as_str().unwrap().starts_with("ok: 1 artifact"));
    }
}

/// Every lease mutation (the recipe's, and the other conditions) earns its
/// code, verdict, headline and exit status. The byte-swapped magic is no
/// lease ring by content: it is judged where GMS puts its rings.
#[test]
fn every_lease_mutation_earns_its_code() {
    let dir = tempfile::tempdir().unwrap();
    let base = kit::Lease::valid(16, live_owner());
    for m in kit::LeaseMutation::ALL {
        let sub = dir.path().join(format!("{m:?}"));
        std::fs::create_dir(&sub).unwrap();
        let bytes = m.apply(&base).bytes();
        let (status, v) = if m == kit::LeaseMutation::MagicByteSwapped {
            let shm = sub.join("shm");
            std::fs::create_dir(&shm).unwrap();
            write(&shm, &kit::lease_file_name("vllm:gpu0:kv"), &bytes);
            gms(&[], &gms_env(&sub))
        } else {
            let p = write(&sub, "ring.shm", &bytes);
            let _user = std::fs::File::open(&p).unwrap();
            gms(&[p.as_os_str(), OsStr::new("--live")], &[])
        };
        checked(status, &v);
        let a = one(&v);
        let code = m.code();
        if code == "KV207" {
            assert_eq!(
                (status, a["verdict"].as_str()),
                (0, Some("ok")),
                "{m:?} {v:#}"
            );
            assert_eq!(codes(a), [(code.to_string(), "notice".to_string())]);
            continue;
        }
        assert_eq!(status, 1, "{m:?} {v:#}");
        assert_eq!(a["verdict"], "reject");
        headline_is(a, code);
        let rejects: Vec<String> = codes(a)
            .into_iter()
            .filter(|(_, s)| s == "reject")
            .map(|(c, _)| c)
            .collect();
        assert_eq!(rejects, [code], "{m:?}: only its own code rejects");
    }
}

#[test]
fn a_byte_swapped_or_foreign_file_named_is_no_gms_artifact() {
    let dir = tempfile::tempdir().unwrap();
    let swapped = kit::LeaseMutation::MagicByteSwapped.apply(&kit::Lease::valid(8, 1));
    let magic = kit::RecoveryMutation::WrongMagic.apply(&kit::Recovery::valid(8));
    for (name, bytes) in [
        ("swapped.shm", swapped.bytes()),
        ("kv-recovery.mmap", magic.bytes()),
        ("notes.txt", b"hello".to_vec()),
        ("empty", Vec::new()),
    ] {
        let p = write(dir.path(), name, &bytes);
        let out = kvcr().arg("gms").arg(&p).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.contains(&format!("{}: is no GMS artifact", p.display())),
            "{err}"
        );
        assert!(out.stdout.is_empty());
        // With --format json: the error document.
        let (status, v) = gms(&[p.as_os_str()], &[]);
        assert_eq!((status, v["schema"].as_str()), (2, Some("kvcr.error/v1")));
    }
    // Inside a directory, strangers are left alone.
    let (status, v) = gms(&[dir.path().as_os_str()], &[]);
    checked(status, &v);
    assert_eq!((status, v["artifacts"].as_array().unwrap().len()), (0, 0));
    assert!(v["cause"].as_str().unwrap().starts_with("empty: "));
}

#[test]
fn a_missing_path_a_symlink_or_an_unreadable_file_is_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let out = kvcr().arg("gms").arg(&missing).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope: does not exist"));
    let ring = write(dir.path(), "ring", &kit::Lease::valid(8, 1).bytes());
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&ring, &link).unwrap();
    let out = kvcr().arg("gms").arg(&link).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a symbolic link"));
    if !is_root() {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&ring, std::fs::Permissions::from_mode(0o000)).unwrap();
        let out = kvcr().arg("gms").arg(&ring).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("run kvcr as root"));
    }
}

#[test]
fn a_healthy_recovery_file_is_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let r = kit::Recovery::valid(8);
    let p = write(dir.path(), "meta", &r.bytes());
    let (status, v) = gms(&[p.as_os_str()], &[]);
    checked(status, &v);
    let a = one(&v);
    assert_eq!((status, a["verdict"].as_str()), (0, Some("ok")));
    assert_eq!(codes(a), [("KV229".to_string(), "notice".to_string())]);
    let rec = &a["recovery"];
    assert_eq!(rec["outcome"], "RECOVERED");
    assert_eq!(
        (rec["epoch"].as_u64(), rec["commit"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(rec["records"]["valid"], 3);
    assert_eq!(rec["binding_checked"], false);
    let hex: String = r.binding.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(rec["binding"], hex.as_str());
    let (status, v) = gms(
        &[
            p.as_os_str(),
            "--binding".as_ref(),
            hex.as_ref(),
            "--num-blocks".as_ref(),
            "8".as_ref(),
        ],
        &[],
    );
    checked(status, &v);
    let a = one(&v);
    assert_eq!((status, codes(a)), (0, vec![]));
    assert_eq!(a["recovery"]["binding_checked"], true);
    assert_eq!(a["recovery"]["num_blocks_from"], "--num-blocks");
}

/// Every mutation of the recovery metadata's generator recipe: FRESH, with
/// its own code as the reason. The binding mutations are checked against
/// `--binding` of the healthy pool; the wrong magic where GMS keeps the
/// file (`$DYN_KV_RECOVERY_PATH`).
#[test]
fn every_recovery_mutation_starts_fresh_with_its_code() {
    let dir = tempfile::tempdir().unwrap();
    let base = kit::Recovery::valid(8);
    let hex: String = base.binding.iter().map(|b| format!("{b:02x}")).collect();
    for m in kit::RecoveryMutation::ALL {
        let sub = dir.path().join(format!("{m:?}"));
        std::fs::create_dir(&sub).unwrap();
        let bytes = m.apply(&base).bytes();
        let (status, v) = if m == kit::RecoveryMutation::WrongMagic {
            write(&sub, "kv-recovery.mmap", &bytes);
            gms(&["--binding".as_ref(), hex.as_ref()], &gms_env(&sub))
        } else {
            let p = write(&sub, "meta", &bytes);
            gms(&[p.as_os_str(), "--binding".as_ref(), hex.as_ref()], &[])
        };
        checked(status, &v);
        let a = one(&v);
        assert_eq!(
            (status, a["verdict"].as_str()),
            (1, Some("reject")),
            "{m:?}"
        );
        assert_eq!(a["kind"], "recovery");
        assert_eq!(a["recovery"]["outcome"], "FRESH", "{m:?}");
        headline_is(a, m.code());
        assert_eq!(
            a["recovery"]["reason"], a["findings"][0]["message"],
            "{m:?}"
        );
    }
}

#[test]
fn superseded_formats_are_recognised_and_their_sentinels_listed_never_consumed() {
    let dir = tempfile::tempdir().unwrap();
    let store = write(dir.path(), "index", &kit::dynkvix1(4));
    let rank = write(dir.path(), "index.rank0", b"\x01");
    write(dir.path(), "index.status.jsonl", b"{\"adopted\": true}\n");
    write(
        dir.path(),
        "snap",
        &kit::gmskvix(2, "h0|h1", &[b"abc", b"defg"]),
    );
    write(dir.path(), "snap.gen", &kit::gmskvgn1("h0|h1", 8));
    write(dir.path(), "old", &kit::gmskvix(1, "h0", &[b"abc"]));
    let mut short = kit::dynkvix1(4);
    short.truncate(4096 + 64 * 3);
    write(dir.path(), "short", &short);
    let (status, v) = gms(&[dir.path().as_os_str()], &[]);
    checked(status, &v);
    assert_eq!(status, 1);
    let arts = v["artifacts"].as_array().unwrap();
    let by = |name: &str| {
        arts.iter()
            .find(|a| a["path"].as_str().unwrap().ends_with(&format!("/{name}")))
            .unwrap_or_else(|| panic!("{name}: {v:#}"))
    };
    for (name, format) in [
        ("index", "DYNKVIX1"),
        ("snap", "GMSKVIX2"),
        ("snap.gen", "GMSKVGN1"),
        ("old", "GMSKVIX1"),
    ] {
        let a = by(name);
        assert_eq!(a["kind"], "superseded");
        assert_eq!(a["superseded"]["format"], format);
        assert_eq!(
            codes(a),
            [("KV241".to_string(), "reject".to_string())],
            "{name}"
        );
        headline_is(a, "KV241");
    }
    assert_eq!(
        by("index")["superseded"]["beside"],
        serde_json::json!(["index.rank0", "index.status.jsonl"])
    );
    assert_eq!(
        by("snap")["superseded"]["beside"],
        serde_json::json!(["snap.gen"])
    );
    assert_eq!(by("short")["cause_code"], "KV241");
    assert!(codes(by("short")).contains(&("KV242".to_string(), "reject".to_string())));
    assert_eq!(
        arts.len(),
        5,
        "the .rank0 and .status.jsonl are no artifacts"
    );
    // GMS consumes `.rank<R>` by unlinking it: kvcr never does.
    assert_eq!(std::fs::read(&rank).unwrap(), b"\x01");
    assert!(store.exists());
}

/// A lock held by a child process of this test: the child is this test
/// binary re-run as [`lock_holder`].
struct Held {
    child: Child,
    /// The process that holds the lock now (the child, or its own child
    /// when the lock was handed on).
    pid: u32,
    grandchild: Option<u32>,
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(g) = self.grandchild {
            // SAFETY: kill(2) on a process this test started; no memory.
            unsafe { libc::kill(g as i32, libc::SIGKILL) };
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a child that takes `flock(mode)` on `path` and holds it until
/// it is killed; with `hand_on`, the child passes its descriptor to a
/// process of its own (`sleep`) and exits: a forked child keeps the lock
/// after the process that took it has gone.
fn hold(path: &Path, exclusive: bool, hand_on: bool) -> Held {
    let mut c = std::process::Command::new(std::env::current_exe().unwrap());
    c.args([
        "gms::lock_holder",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
        "-q",
    ])
    .env("KVCR_TEST_LOCK", path)
    .env("KVCR_TEST_LOCK_MODE", if exclusive { "ex" } else { "sh" })
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    if hand_on {
        c.env("KVCR_TEST_LOCK_HAND_ON", "1");
    }
    // Held from the start, so a failure below still kills and reaps it.
    let mut held = Held {
        child: c.spawn().unwrap(),
        pid: 0,
        grandchild: None,
    };
    let mut lines = BufReader::new(held.child.stdout.take().unwrap()).lines();
    let t = Instant::now();
    loop {
        let line = lines.next().expect("the holder ended").unwrap();
        if let Some(rest) = line.strip_prefix("locked ") {
            held.pid = rest.trim().parse().unwrap();
            held.grandchild = (held.pid != held.child.id()).then_some(held.pid);
            return held;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "no lock taken");
    }
}

/// Not a test: the child process of [`hold`]. It takes the lock, says
/// `locked PID` (the holder's pid) and waits until its stdin closes.
#[test]
#[ignore = "the lock holder the cohort tests start as a child process"]
fn lock_holder() {
    use rustix::fs::{flock, FlockOperation, Mode, OFlags};
    let Some(path) = std::env::var_os("KVCR_TEST_LOCK") else {
        return;
    };
    let fd = rustix::fs::open(&path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).unwrap();
    let op = match std::env::var("KVCR_TEST_LOCK_MODE").as_deref() {
        Ok("ex") => FlockOperation::LockExclusive,
        _ => FlockOperation::LockShared,
    };
    flock(&fd, op).unwrap();
    if std::env::var_os("KVCR_TEST_LOCK_HAND_ON").is_some() {
        // Hand the descriptor on (not close-on-exec in the child), then go.
        let flags = rustix::io::fcntl_getfd(&fd).unwrap();
        rustix::io::fcntl_setfd(&fd, flags - rustix::io::FdFlags::CLOEXEC).unwrap();
        let sleeper = std::process::Command::new("sleep")
            .arg("60")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        println!("locked {}", sleeper.id());
        std::process::exit(0);
    }
    println!("locked {}", std::process::id());
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
}

fn cohort_of(v: &Value) -> &Value {
    let a = one(v);
    assert_eq!(a["kind"], "cohort", "{v:#}");
    a
}

/// The state `test_retired_cohort_rejects_late_writer_and_can_be_fenced_again`
/// (the vLLM cohort test file) fences: a retired predecessor with no writer
/// left is fenced; the active cohort's writers (a shared lock a child holds)
/// and its leader (an exclusive one) do not matter.
#[test]
fn a_retired_predecessor_without_writers_is_fenced() {
    let dir = tempfile::tempdir().unwrap();
    let d = kit::cohort_dir(dir.path(), "failover.lock.vllm-writers");
    let (pred, active) = kit::vllm_healthy(&d);
    let _writer = hold(&d.join(&active), false, false);
    let _leader = hold(&d.join(format!("{active}.leader")), true, false);
    let (status, v) = gms(&[], &gms_env(dir.path()));
    checked(status, &v);
    assert_eq!(status, 0, "{v:#}");
    let a = cohort_of(&v);
    assert_eq!(a["verdict"], "ok");
    let c = &a["cohort"];
    assert_eq!(
        (c["flavour"].as_str(), c["active"].as_str()),
        (Some("vllm"), Some(active.as_str()))
    );
    assert_eq!(c["predecessor"], pred.as_str());
    let row = |id: &str| {
        c["cohorts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(row(&active)["lock"]["state"], "held");
    assert_eq!(row(&active)["leader"]["state"], "held");
    assert_eq!(row(&pred)["lock"]["state"], "free");
    assert_eq!(row(&pred)["state"], "retired");
    assert!(a["cause"].as_str().unwrap().contains("is fenced"));
    // The discovery said where it looked.
    let looked: Vec<&str> = v["looked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["what"].as_str().unwrap())
        .collect();
    assert!(looked.contains(&"a writer-cohort directory"), "{looked:?}");
}

/// As `test_takeover_waits_for_orphaned_engine_core_writer` (the vLLM
/// cohort test file): a writer of the predecessor that still holds its
/// guard is not fenced, however long ago the tombstone was written. Also
/// when the guard was handed to a child (`writer_lifecycle.py`: "the
/// separate writer guard remains inherited") and the process that took it
/// has gone: the kernel's lock table still lists the lock, and the holder
/// is found through its descriptors.
#[test]
fn an_orphaned_writer_of_the_predecessor_is_not_fenced() {
    for hand_on in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let d = kit::cohort_dir(dir.path(), "failover.lock.vllm-writers");
        let (pred, _) = kit::vllm_healthy(&d);
        let orphan = hold(&d.join(&pred), false, hand_on);
        let (status, v) = gms(&[d.as_os_str()], &[]);
        checked(status, &v);
        let a = cohort_of(&v);
        assert_eq!(
            (status, a["verdict"].as_str()),
            (1, Some("reject")),
            "{v:#}"
        );
        headline_is(a, "KV232");
        assert!(
            a["cause"]
                .as_str()
                .unwrap()
                .contains(&format!("pid {}", orphan.pid)),
            "{hand_on}: {a:#}"
        );
        assert_eq!(a["findings"][0]["path"], pred.as_str());
    }
}

#[test]
fn an_unretired_predecessor_and_a_writer_of_an_older_cohort_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let d = kit::cohort_dir(dir.path(), "w");
    let (pred, _) = kit::vllm_healthy(&d);
    std::fs::write(d.join(&pred), b"").unwrap();
    let (status, v) = gms(&[d.as_os_str()], &[]);
    checked(status, &v);
    assert_eq!(status, 1);
    headline_is(cohort_of(&v), "KV231");
    // An older, retired cohort (not the predecessor) with a writer.
    let dir = tempfile::tempdir().unwrap();
    let d = kit::cohort_dir(dir.path(), "w");
    kit::vllm_healthy(&d);
    let old = kit::cohort_id(9);
    kit::put(&d, &old, b"R");
    let _w = hold(&d.join(&old), false, false);
    let (status, v) = gms(&[d.as_os_str()], &[]);
    checked(status, &v);
    let a = cohort_of(&v);
    assert_eq!(status, 1);
    headline_is(a, "KV232");
    assert!(a["cause"].as_str().unwrap().contains("an older cohort"));
}

/// As `test_stale_joining_marker_rejected_even_with_surviving_writers`
/// (the vLLM cohort test file): a joining marker naming a retired cohort is
/// stale, while the active cohort's writers survive (a notice: joiners
/// refuse it); staging files and broken markers are findings.
#[test]
fn a_stale_joining_marker_staging_files_and_broken_markers() {
    let dir = tempfile::tempdir().unwrap();
    let d = kit::cohort_dir(dir.path(), "w");
    let (pred, active) = kit::vllm_healthy(&d);
    std::fs::write(d.join(kit::joining_name("0")), pred.as_bytes()).unwrap();
    let _w = hold(&d.join(&active), false, false);
    let (status, v) = gms(&[d.as_os_str()], &[]);
    checked(status, &v);
    let a = cohort_of(&v);
    assert_eq!(
        (status, codes(a)),
        (0, vec![("KV236".into(), "notice".into())])
    );
    for (name, code) in [
        (format!("{active}.{}.active", kit::cohort_id(7)), "KV233"),
        (
            format!("{active}.predecessor.{}.pending", kit::cohort_id(7)),
            "KV233",
        ),
        (format!("{}.{active}", kit::joining_name("0")), "KV233"),
    ] {
        let p = kit::put(&d, &name, active.as_bytes());
        let (status, v) = gms(&[d.as_os_str()], &[]);
        checked(status, &v);
        let a = cohort_of(&v);
        assert_eq!(status, 1, "{name}");
        headline_is(a, code);
        std::fs::remove_file(p).unwrap();
    }
    std::fs::write(d.join("active"), b"garbage").unwrap();
    let (status, v) = gms(&[d.as_os_str()], &[]);
    checked(status, &v);
    assert_eq!(status, 1);
    headline_is(cohort_of(&v), "KV234");
}

/// SGLang (`.writers`, no tombstone): an older cohort whose writer still
/// holds its guard is not fenced; a healthy directory is ok.
#[test]
fn sglang_cohorts_are_fenced_by_their_locks() {
    let dir = tempfile::tempdir().unwrap();
    let d = kit::cohort_dir(dir.path(), "failover.lock.writers");
    let (old, active) = kit::sglang_healthy(&d);
    let _a = hold(&d.join(&active), false, false);
    let (status, v) = gms(&[], &gms_env(dir.path()));
    checked(status, &v);
    let a = cohort_of(&v);
    assert_eq!(
        (status, a["cohort"]["flavour"].as_str()),
        (0, Some("sglang")),
        "{v:#}"
    );
    let _o = hold(&d.join(&old), false, false);
    let (status, v) = gms(&[], &gms_env(dir.path()));
    checked(status, &v);
    assert_eq!(status, 1);
    headline_is(cohort_of(&v), "KV232");
}

#[test]
fn discovery_reads_gmss_variables_and_says_where_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let env = gms_env(dir.path());
    let (status, v) = gms(&[], &env);
    checked(status, &v);
    assert_eq!(status, 0);
    assert!(v["cause"]
        .as_str()
        .unwrap()
        .starts_with("empty: no GMS artifact where GMS puts them"));
    let looked = v["looked"].as_array().unwrap();
    let paths: Vec<&str> = looked.iter().map(|l| l["path"].as_str().unwrap()).collect();
    let p = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
    assert_eq!(
        paths,
        [
            p("shm"),
            p("failover.lock.vllm-writers"),
            p("failover.lock.writers"),
            p("kv-recovery.mmap")
        ]
    );
    assert!(looked.iter().all(|l| l["present"] == false));
    let text = kvcr()
        .arg("gms")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    assert_eq!(text.status.code(), Some(0));
    let out = String::from_utf8(text.stdout).unwrap();
    assert!(out.contains("looked where GMS puts its artifacts"), "{out}");
    // Found: rings by their name pattern (a stranger in the directory is
    // not one), the recovery file, an explicit per-engine ring path.
    std::fs::create_dir(dir.path().join("shm")).unwrap();
    let name = kit::lease_file_name("vllm:gpu1:kv");
    write(
        &dir.path().join("shm"),
        &name,
        &kit::Lease::valid(8, 1).bytes(),
    );
    write(&dir.path().join("shm"), "other.shm", b"x");
    write(
        dir.path(),
        "kv-recovery.mmap",
        &kit::Recovery::valid(8).bytes(),
    );
    let own = write(dir.path(), "sglang.ring", &kit::Lease::valid(8, 1).bytes());
    let mut env = env;
    env.push((
        "GMS_SGLANG_KV_LEASE_SHM_PATH".into(),
        own.clone().into_os_string(),
    ));
    let (status, v) = gms(&[], &env);
    checked(status, &v);
    assert_eq!(status, 0, "{v:#}");
    let arts = v["artifacts"].as_array().unwrap();
    let kinds: Vec<(&str, &str)> = arts
        .iter()
        .map(|a| (a["kind"].as_str().unwrap(), a["path"].as_str().unwrap()))
        .collect();
    let ring = dir.path().join("shm").join(&name);
    assert_eq!(
        kinds,
        [
            ("lease", ring.to_str().unwrap()),
            ("lease", own.to_str().unwrap()),
            ("recovery", p("kv-recovery.mmap").as_str()),
        ]
    );
    assert_eq!(arts[0]["lease"]["namespace"], "vllm:gpu1:kv");
    assert_eq!(arts[1]["lease"]["namespace"], Value::Null);
}

/// As `test_read_kv_lease_namespace_total_blocks_is_read_only`
/// (`tests/test_kv_lease_shm_client.py` @ 12860c91): reading where a ring
/// would be never creates it, nor its directory, nor any other artifact.
#[test]
fn reading_where_an_artifact_would_be_never_creates_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut env = gms_env(dir.path());
    let ring = dir.path().join("own").join("ring.shm");
    env.push((
        "GMS_VLLM_KV_LEASE_SHM_PATH".into(),
        ring.clone().into_os_string(),
    ));
    env.push((
        "GMS_KV_INDEX_PATH".into(),
        dir.path().join("idx").into_os_string(),
    ));
    for live in [false, true] {
        let args: Vec<&OsStr> = if live {
            vec!["--live".as_ref()]
        } else {
            vec![]
        };
        let (status, v) = gms(&args, &env);
        checked(status, &v);
        assert_eq!(status, 0);
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// What a file is, for "nothing changed": its bytes, size, mode, owner,
/// inode and times (atime too: kvcr reads with O_NOATIME where allowed,
/// which the owner of a file is).
fn stat_all(root: &Path) -> Vec<(PathBuf, Vec<u8>, [i64; 9])> {
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(root).sort_by_file_name() {
        let e = e.unwrap();
        let bytes = if e.file_type().is_file() {
            std::fs::read(e.path()).unwrap()
        } else {
            Vec::new()
        };
        let m = std::fs::symlink_metadata(e.path()).unwrap();
        out.push((
            e.path().to_path_buf(),
            bytes,
            [
                m.size() as i64,
                i64::from(m.mode()),
                i64::from(m.uid()),
                m.ino() as i64,
                m.atime() * 1_000_000_000 + m.atime_nsec(),
                m.mtime() * 1_000_000_000 + m.mtime_nsec(),
                m.ctime() * 1_000_000_000 + m.ctime_nsec(),
                m.nlink() as i64,
                m.dev() as i64,
            ],
        ));
    }
    out
}

/// Never a side effect: after runs over every kind of artifact (offline,
/// live, table, JSON, discovery), every file's bytes, size, mode and times
/// are unchanged and nothing was created or removed (GMS consumes
/// `.rank<R>` answers by unlinking them: kvcr must not).
#[test]
fn nothing_is_ever_modified_or_created() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir(root.join("shm")).unwrap();
    let shm = root.join("shm");
    write(
        &shm,
        &kit::lease_file_name("vllm:gpu0:kv"),
        &kit::Lease::valid(16, 5).bytes(),
    );
    let torn = kit::LeaseMutation::Transition.apply(&kit::Lease::valid(16, 5));
    write(&shm, &kit::lease_file_name("vllm:gpu1:kv"), &torn.bytes());
    let swapped = kit::LeaseMutation::MagicByteSwapped.apply(&kit::Lease::valid(8, 5));
    write(
        &shm,
        &kit::lease_file_name("vllm:gpu2:kv"),
        &swapped.bytes(),
    );
    write(root, "kv-recovery.mmap", &kit::Recovery::valid(8).bytes());
    let d = kit::cohort_dir(root, "failover.lock.vllm-writers");
    let (_, active) = kit::vllm_healthy(&d);
    let s = kit::cohort_dir(root, "failover.lock.writers");
    kit::sglang_healthy(&s);
    let idx = root.join("idx");
    std::fs::create_dir(&idx).unwrap();
    write(&idx, "index", &kit::dynkvix1(4));
    write(&idx, "index.rank0", b"\x01");
    write(&idx, "index.rank1", b"\x00");
    write(&idx, "index.status.jsonl", b"{}\n");
    let _writer = hold(&d.join(&active), false, false);
    // The test's own reads settle the access times (relatime); on a mount
    // where every read moves them (strictatime) they are not compared.
    let settle = stat_all(root);
    let before = stat_all(root);
    let atimes = settle == before;
    let mut env = gms_env(root);
    env.push((
        "GMS_KV_INDEX_PATH".into(),
        idx.join("index").into_os_string(),
    ));
    for args in [
        vec![],
        vec![OsStr::new("--live")],
        vec![root.as_os_str()],
        vec![
            shm.as_os_str(),
            d.as_os_str(),
            s.as_os_str(),
            idx.as_os_str(),
        ],
    ] {
        let (status, v) = gms(&args, &env);
        checked(status, &v);
        assert!(!v["artifacts"].as_array().unwrap().is_empty());
        let mut c = kvcr();
        c.arg("gms").args(&args).args(["--interval-ms", "1"]);
        for (k, v) in &env {
            c.env(k, v);
        }
        assert_eq!(c.output().unwrap().status.code(), Some(status));
    }
    let mut after = stat_all(root);
    assert_eq!(before.len(), after.len(), "entries created or removed");
    for (b, a) in before.iter().zip(after.iter_mut()) {
        if !atimes {
            a.2[4] = b.2[4];
        }
        assert_eq!(b, a, "{} changed", b.0.display());
    }
}

/// No lock is ever taken on a lease ring, and a process holding one is
/// never blocked or refused while kvcr runs: this test holds LOCK_SH on
/// the ring and, all through a run with a long interval between its reads,
/// converts it to LOCK_EX | LOCK_NB and back, which the kernel grants only
/// while no other process holds any lock on the ring.
#[test]
fn a_lease_ring_is_never_locked() {
    use rustix::fs::{flock, FlockOperation, Mode, OFlags};
    let dir = tempfile::tempdir().unwrap();
    let ring = write(dir.path(), "ring", &kit::Lease::valid(64, 1).bytes());
    let fd = rustix::fs::open(&ring, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).unwrap();
    flock(&fd, FlockOperation::LockShared).unwrap();
    let mut child = kvcr_std()
        .arg("gms")
        .arg(&ring)
        .args(["--interval-ms", "400", "--format", "json"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (mut granted, mut refused) = (0u32, 0u32);
    while child.try_wait().unwrap().is_none() {
        match flock(&fd, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => granted += 1,
            Err(_) => refused += 1,
        }
        flock(&fd, FlockOperation::LockShared).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert_eq!(
        refused, 0,
        "kvcr held a lock on the ring ({granted} granted)"
    );
    assert!(granted > 20, "the run was sampled {granted} times");
}

/// The cohort probe (where the kernel's table lists no lock) is taken and
/// released at once: during the interval between the two reads kvcr holds
/// no lock, so a successor can take LOCK_EX | LOCK_NB on every cohort file.
#[test]
fn the_cohort_probe_is_released_at_once() {
    use rustix::fs::{flock, FlockOperation, Mode, OFlags};
    let dir = tempfile::tempdir().unwrap();
    let d = kit::cohort_dir(dir.path(), "w");
    let (pred, active) = kit::vllm_healthy(&d);
    let mut child = kvcr_std()
        .arg("gms")
        .arg(&d)
        .args(["--interval-ms", "600"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(250));
    for name in [pred.clone(), active.clone(), format!("{active}.leader")] {
        let fd = rustix::fs::open(
            d.join(&name),
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .unwrap();
        flock(&fd, FlockOperation::NonBlockingLockExclusive)
            .unwrap_or_else(|e| panic!("{name} still locked by kvcr: {e}"));
        flock(&fd, FlockOperation::Unlock).unwrap();
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "the run ended before the check"
    );
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[test]
fn the_table_names_each_artifact_with_its_headline() {
    let dir = tempfile::tempdir().unwrap();
    let torn = kit::LeaseMutation::Transition.apply(&kit::Lease::valid(16, 5));
    write(dir.path(), "a.shm", &torn.bytes());
    let out = kvcr()
        .arg("gms")
        .arg(dir.path())
        .args(["--interval-ms", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("a.shm  REJECTED"), "{text}");
    assert!(
        text.contains("  cause:  1 block (5) in TRANSITION"),
        "{text}"
    );
    assert!(text.contains("see `kvcr explain KV205`"), "{text}");
    assert!(text.contains("1 artifact: 0 ok, 1 rejected"), "{text}");
    assert!(text.trim_end().ends_with("exit 1"), "{text}");
}

#[test]
fn an_interval_out_of_range_is_a_usage_error() {
    let out = kvcr()
        .args(["gms", "--interval-ms", "60001"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = kvcr().args(["gms", "--binding", "abc"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("64 hex digits"));
}

/// The audit names a GMS artifact met inside an inventory in its stray
/// notice, pointing at `kvcr gms`, by name only (docs/format.md §14.9).
#[test]
fn the_audit_names_gms_artifacts_in_an_inventory() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        &kit::lease_file_name("vllm:gpu0:kv"),
        &kit::Lease::valid(8, 1).bytes(),
    );
    write(root, "kv-recovery.mmap", &kit::Recovery::valid(8).bytes());
    let d = kit::cohort_dir(root, "failover.lock.vllm-writers");
    kit::vllm_healthy(&d);
    write(root, "notes.txt", b"x");
    let (status, v) = crate::util::audit_json(root, &[]);
    assert_eq!(status, 0, "strays are notices: {v:#}");
    let files = v["files"].as_array().unwrap();
    let message = |suffix: &str| {
        files
            .iter()
            .find(|f| f["path"].as_str().unwrap().ends_with(suffix))
            .unwrap_or_else(|| panic!("{suffix}: {v:#}"))["findings"][0]["message"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        message(".shm"),
        "unexpected file; not read (named as a GMS lease ring: check it with `kvcr gms`, \
         docs/format.md §14)"
    );
    assert!(message("kv-recovery.mmap").contains("named as GMS recovery metadata"));
    assert!(message("/active").contains("a file of a GMS writer-cohort directory"));
    assert_eq!(message("notes.txt"), "unexpected file; not read");
}

/// `kvcr_audit::api::gms` returns the document the command line prints (the
/// clock aside), with the same exit status; a bad path is a usage error.
#[test]
fn the_library_returns_the_command_lines_document() {
    let dir = tempfile::tempdir().unwrap();
    let torn = kit::LeaseMutation::Transition.apply(&kit::Lease::valid(16, 5));
    let p = write(dir.path(), "ring", &torn.bytes());
    let r = write(dir.path(), "meta", &kit::Recovery::valid(8).bytes());
    let o = kvcr_audit::api::GmsOptions {
        interval_ms: Some(1),
        num_blocks: Some(8),
        ..Default::default()
    };
    let doc = kvcr_audit::api::gms(&[p.clone(), r.clone()], &o).unwrap();
    let (status, cli) = gms(
        &[
            p.as_os_str(),
            r.as_os_str(),
            "--num-blocks".as_ref(),
            "8".as_ref(),
        ],
        &[],
    );
    let mut lib: Value = serde_json::from_str(doc.as_json()).unwrap();
    checked(doc.exit_status(), &lib);
    assert_eq!((doc.exit_status(), status), (1, 1));
    let mut cli = cli;
    lib["generated_unix_ms"] = Value::Null;
    cli["generated_unix_ms"] = Value::Null;
    assert_eq!(lib, cli);
    let e = kvcr_audit::api::gms(&[dir.path().join("nope")], &o).unwrap_err();
    assert_eq!(e.exit_status(), 2);
    assert!(e.to_string().contains("does not exist"), "{e}");
    let far = kvcr_audit::api::GmsOptions {
        interval_ms: Some(60_001),
        ..Default::default()
    };
    assert_eq!(
        kvcr_audit::api::gms(&[p], &far).unwrap_err().exit_status(),
        2
    );
    assert!(kvcr_audit::api::parse_binding("xyz").is_err());
}

/// A ring's pids are its writers' PID namespace's (GMS runs per
/// container): with no process of this namespace having the ring open or
/// mapped, an owner pid that runs here is not "alive", a barrier holder's
/// pid that runs here is not "a recovery in progress", and one that does
/// not run is not "gone": both are not checked, with the reason
/// (docs/format.md §14.2).
#[test]
fn live_pids_of_a_ring_no_process_here_uses_are_not_checked() {
    let dir = tempfile::tempdir().unwrap();
    let mut ring = kit::Lease::valid(16, live_owner());
    let p = write(dir.path(), "owned.shm", &ring.bytes());
    let (status, v) = gms(&[p.as_os_str(), OsStr::new("--live")], &[]);
    checked(status, &v);
    assert_eq!(status, 0, "{v:#}");
    let a = one(&v);
    assert_eq!(codes(a), [("KV213".to_string(), "notice".to_string())]);
    let why = a["lease"]["owners_not_checked"].as_str().unwrap();
    assert!(why.contains("PID namespace"), "{why}");
    assert_eq!(a["lease"]["owners"][0]["live"], Value::Null, "{a:#}");
    assert!(a["cause"].as_str().unwrap().contains("owners not checked"));
    assert!(a["findings"][0]["message"]
        .as_str()
        .unwrap()
        .contains("not checked"));
    // The barrier held by this test's own pid (which runs here): still the
    // reject a barrier is, never the notice "a recovery in progress".
    ring.active_mutations = u64::MAX;
    ring.recovery_owner_pid = u64::from(std::process::id());
    let p = write(dir.path(), "barrier.shm", &ring.bytes());
    let (status, v) = gms(&[p.as_os_str(), OsStr::new("--live")], &[]);
    checked(status, &v);
    assert_eq!(status, 1, "{v:#}");
    let a = one(&v);
    headline_is(a, "KV210");
    let cause = a["cause"].as_str().unwrap();
    assert!(cause.contains("is not checked"), "{cause}");
    assert!(!cause.contains("in progress"), "{cause}");
    // Held open here, the same pid runs: a recovery in progress.
    let _user = std::fs::File::open(&p).unwrap();
    let (status, v) = gms(&[p.as_os_str(), OsStr::new("--live")], &[]);
    checked(status, &v);
    assert_eq!(status, 0, "{v:#}");
    assert!(codes(one(&v)).contains(&("KV210".to_string(), "notice".to_string())));
}

/// A ring used from another PID namespace (a process started by
/// `unshare --pid --fork` holding it open): its pids are that namespace's,
/// so none is judged against this one's processes.
#[test]
fn live_pids_of_a_ring_used_from_another_pid_namespace_are_not_checked() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "ring.shm",
        &kit::Lease::valid(16, live_owner()).bytes(),
    );
    let _user = std::fs::File::open(&p).unwrap();
    let child = std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "--pid", "--fork", "sh", "-c"])
        .arg("exec 3<\"$0\"; echo ready; exec sleep 30 <&3")
        .arg(&p)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        crate::util::missing("needs unshare (util-linux)");
        return;
    };
    let mut line = String::new();
    let _ = BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
    if line.trim() != "ready" {
        let _ = child.kill();
        let _ = child.wait();
        crate::util::skip_fact("user and PID namespaces cannot be made here");
        return;
    }
    let (status, v) = gms(&[p.as_os_str(), OsStr::new("--live")], &[]);
    let _ = child.kill();
    let _ = child.wait();
    checked(status, &v);
    let a = one(&v);
    let why = a["lease"]["owners_not_checked"].as_str().unwrap_or("");
    assert!(why.contains("another PID namespace"), "{a:#}");
    assert_eq!(codes(a), [("KV213".to_string(), "notice".to_string())]);
}

/// A directory with more entries than kvcr reads of one (65,536) is never
/// judged as if it were complete: exit 2 naming the directory and the cap
/// (docs/format.md §14.1), where a truncated listing would have dropped
/// the entries past the cap (here, the lease ring that sorts last).
#[test]
fn a_directory_larger_than_the_entry_cap_is_exit_2_never_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big");
    std::fs::create_dir(&big).unwrap();
    for i in 0..65_536u32 {
        std::fs::File::create(big.join(format!("f{i:05}"))).unwrap();
    }
    write(&big, "zz-ring.shm", &kit::Lease::valid(8, 1).bytes());
    let out = kvcr()
        .arg("gms")
        .arg(&big)
        .args(["--interval-ms", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("big: holds more than 65536 entries"), "{err}");
}

/// A cohort file or marker this user cannot read (EACCES) is "could not be
/// read", a KV235 notice naming the file and the errno, and evidence of
/// nothing: the predecessor is not taken for open (KV231), the active
/// marker not for broken (KV234), the lock not for free (docs/format.md
/// §14.3).
#[test]
fn an_unreadable_cohort_file_or_marker_is_not_checked_never_open_or_free() {
    use std::os::unix::fs::PermissionsExt;
    if is_root() {
        crate::util::skip_fact("root reads a mode-000 file");
        return;
    }
    for unreadable in ["predecessor", "active"] {
        let dir = tempfile::tempdir().unwrap();
        let d = kit::cohort_dir(dir.path(), "w.vllm-writers");
        let (pred, _) = kit::vllm_healthy(&d);
        let name = if unreadable == "active" {
            "active".to_string()
        } else {
            pred.clone()
        };
        std::fs::set_permissions(d.join(&name), std::fs::Permissions::from_mode(0o000)).unwrap();
        let (status, v) = gms(&[d.as_os_str()], &[]);
        checked(status, &v);
        assert_eq!(status, 0, "{unreadable}: {v:#}");
        let a = cohort_of(&v);
        assert_eq!(a["verdict"], "ok");
        let f: Vec<&Value> = a["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["path"] == name.as_str())
            .collect();
        assert_eq!(f.len(), 1, "{unreadable}: {a:#}");
        assert_eq!(
            (f[0]["code"].as_str(), f[0]["severity"].as_str()),
            (Some("KV235"), Some("notice"))
        );
        let m = f[0]["message"].as_str().unwrap();
        assert!(m.contains(&name) && m.contains("Permission denied"), "{m}");
        assert!(
            !codes(a).iter().any(|(c, _)| c == "KV231" || c == "KV234"),
            "{a:#}"
        );
        if unreadable == "predecessor" {
            let row = a["cohort"]["cohorts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|k| k["id"] == pred.as_str())
                .unwrap();
            assert_eq!(row["state"], "unreadable");
            assert_eq!(row["lock"]["state"], "not-checked");
        }
    }
}
