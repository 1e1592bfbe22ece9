//! Symlink races (issue #5): while kvcr audits in a loop, another thread
//! keeps swapping
//! (a) a descriptor with a symlink to a descriptor outside the root, and
//! (b) a whole group directory with a symlink to a directory outside it.
//! The outside descriptors carry a unique engine_id that must never appear
//! in any report; outside-only file names must never appear either (that
//! would mean a directory was listed through a symlink). Every run must end
//! with status 0 or 1 and one JSON document, never a panic.
//!
//! Bounded: by default at most 200 audits or 5 seconds per test.
//! `KVCR_RACE_ITERS=N` and `KVCR_RACE_SECS=S` run longer.

use crate::util::testkit::{put_group, Desc};
use crate::util::*;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

struct Layout {
    _base: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
    stage: PathBuf,
    secret: String,
    /// A file name that exists only outside the root.
    outside_only: String,
    inside_rank1: Vec<u8>,
}

/// base/root/g/rank-{0,1}.json   group race-g (swapped file: g/rank-1.json)
/// base/root/h/rank-{0,1}.json   group race-h (swapped directory: h)
/// base/outside/rank-{0,1}.json  the secret group, plus an outside-only name
/// base/stage/                   where swaps are prepared (same filesystem)
fn layout() -> Layout {
    let base = tempfile::tempdir().unwrap();
    let root = base.path().join("root");
    let outside = base.path().join("outside");
    let stage = base.path().join("stage");
    std::fs::create_dir_all(&stage).unwrap();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let secret = format!("outside-secret-{}-{nanos}", std::process::id());
    let outside_only = format!("outside-only-name-{nanos}.txt");
    put_group(&root, "g", &Desc::new("race-g", 0, 2, 1));
    let mut h = Desc::new("race-h", 0, 2, 1);
    h.group = 1;
    put_group(&root, "h", &h);
    let mut s = Desc::new(&secret, 0, 2, 1);
    s.group = 2;
    put_group(&outside, "", &s);
    std::fs::write(outside.join(&outside_only), b"x").unwrap();
    let inside_rank1 = std::fs::read(root.join("g/rank-1.json")).unwrap();
    Layout {
        _base: base,
        root,
        outside,
        stage,
        secret,
        outside_only,
        inside_rank1,
    }
}

/// Exchanges two paths atomically (renameat2 RENAME_EXCHANGE); false when
/// the filesystem cannot.
fn exchange(a: &Path, b: &Path) -> bool {
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        a,
        rustix::fs::CWD,
        b,
        rustix::fs::RenameFlags::EXCHANGE,
    )
    .is_ok()
}

/// Swaps until `stop`; counts swaps. Every state it leaves between two
/// swaps is one an attacker could leave, and it always restores the
/// original layout before returning.
fn swapper(l: &Layout, stop: &AtomicBool, swaps: &AtomicU64) {
    let file = l.root.join("g/rank-1.json");
    let dir = l.root.join("h");
    let file_link = l.stage.join("f.link");
    let file_real = l.stage.join("f.real");
    let dir_link = l.stage.join("h.link");
    let dir_parked = l.stage.join("h.parked");
    let use_exchange = {
        let _ = std::fs::remove_file(&dir_link);
        std::os::unix::fs::symlink(&l.outside, &dir_link).unwrap();
        // Probe: exchange twice leaves everything as it was.
        let ok = exchange(&dir_link, &dir) && exchange(&dir_link, &dir);
        std::fs::remove_file(&dir_link).unwrap();
        ok
    };
    let mut n: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        // (a) the descriptor becomes a symlink to the outside one (atomic
        // rename over it, or remove + symlink), then a regular file again.
        let _ = std::fs::remove_file(&file_link);
        std::os::unix::fs::symlink(l.outside.join("rank-1.json"), &file_link).unwrap();
        if n.is_multiple_of(2) {
            std::fs::rename(&file_link, &file).unwrap();
        } else {
            std::fs::remove_file(&file).unwrap();
            std::fs::rename(&file_link, &file).unwrap();
        }
        std::thread::yield_now();
        std::fs::write(&file_real, &l.inside_rank1).unwrap();
        std::fs::rename(&file_real, &file).unwrap();

        // (b) the group directory becomes a symlink to the outside directory.
        std::os::unix::fs::symlink(&l.outside, &dir_link).unwrap();
        if use_exchange && !n.is_multiple_of(3) {
            assert!(exchange(&dir_link, &dir));
            std::thread::yield_now();
            assert!(exchange(&dir_link, &dir));
            std::fs::remove_file(&dir_link).unwrap();
        } else {
            std::fs::rename(&dir, &dir_parked).unwrap();
            std::fs::rename(&dir_link, &dir).unwrap();
            std::thread::yield_now();
            std::fs::remove_file(&dir).unwrap();
            std::fs::rename(&dir_parked, &dir).unwrap();
        }
        swaps.fetch_add(1, Ordering::Relaxed);
    }
}

struct Stats {
    audits: u64,
    swaps: u64,
    saw_kv001: u64,
    exits: [u64; 2],
}

/// Runs `audit` in a loop against a swapping inventory.
fn race(mut audit: impl FnMut(&Layout) -> Result<(i32, bool), String>) -> Stats {
    let l = Arc::new(layout());
    // Before any swap: both groups accepted.
    let (exit, r) = audit_json(&l.root, &[]);
    assert_eq!(exit, 0, "{r:#}");

    let iters = env_u64("KVCR_RACE_ITERS", 200);
    let deadline = Instant::now() + Duration::from_secs(env_u64("KVCR_RACE_SECS", 5));
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let t = {
        let (l, stop, swaps) = (l.clone(), stop.clone(), swaps.clone());
        std::thread::spawn(move || swapper(&l, &stop, &swaps))
    };
    let mut stats = Stats {
        audits: 0,
        swaps: 0,
        saw_kv001: 0,
        exits: [0, 0],
    };
    let mut failure = None;
    // The budget of audits and seconds, then on until one audit has seen a
    // swapped inventory (a rejection: the inventory as laid out is
    // accepted), for at most `OBSERVE_SECS` more: a race no audit saw
    // proves nothing, and fails below.
    let observe_by = deadline + Duration::from_secs(OBSERVE_SECS);
    while (stats.audits < iters && Instant::now() < deadline)
        || (stats.exits[1] == 0 && failure.is_none() && Instant::now() < observe_by)
    {
        stats.audits += 1;
        match audit(&l) {
            Ok((code, kv001)) if code == 0 || code == 1 => {
                stats.exits[code as usize] += 1;
                stats.saw_kv001 += u64::from(kv001);
            }
            Ok((code, _)) => {
                failure = Some(format!("exit status {code}"));
                break;
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    t.join().expect("swapper thread");
    stats.swaps = swaps.load(Ordering::Relaxed);
    if let Some(f) = failure {
        panic!("after {} audits: {f}", stats.audits);
    }
    // Restored: accepted again.
    let (exit, r) = audit_json(&l.root, &[]);
    assert_eq!(exit, 0, "{r:#}");
    eprintln!(
        "race: {} audits ({} exit 0, {} exit 1, {} with KV001), {} swaps",
        stats.audits, stats.exits[0], stats.exits[1], stats.saw_kv001, stats.swaps
    );
    assert!(
        stats.swaps > 0 && stats.exits[1] > 0,
        "no audit saw a swapped inventory ({} audits, {} swaps): the race was not run",
        stats.audits,
        stats.swaps
    );
    stats
}

/// How much longer a race goes on, past its budget, until one audit has
/// seen the swap it races.
const OBSERVE_SECS: u64 = 60;

/// Checks one report for the secrets; returns whether it saw a KV001.
fn check_report(l: &Layout, text: &str) -> Result<bool, String> {
    if text.contains(&l.secret) {
        return Err(format!("outside engine_id in the report:\n{text}"));
    }
    if text.contains(&l.outside_only) {
        return Err(format!(
            "outside-only file name in the report \
             (a directory was listed through a symlink):\n{text}"
        ));
    }
    Ok(text.contains("KV001"))
}

#[test]
fn swapped_symlinks_never_leak_outside_content_into_reports() {
    let stats = race(|l| {
        let (code, text) = run(&l.root, &["--format", "json"])?;
        serde_json::from_str::<serde_json::Value>(&text)
            .map_err(|e| format!("not one JSON document ({e}), exit {code}:\n{text}"))?;
        Ok((code, check_report(l, &text)?))
    });
    assert!(stats.audits > 0 && stats.swaps > 0);
}

#[test]
fn swapped_symlinks_never_leak_into_the_table() {
    let stats = race(|l| {
        let (code, text) = run(&l.root, &["--format", "table", "--color", "never", "-v"])?;
        Ok((code, check_report(l, &text)?))
    });
    assert!(stats.audits > 0 && stats.swaps > 0);
}

/// `kvcr audit ROOT ARGS`: (status, stdout); a panic is an error.
fn run(root: &Path, args: &[&str]) -> Result<(i32, String), String> {
    let out = kvcr()
        .arg("audit")
        .arg(root)
        .args(args)
        .timeout(Duration::from_secs(60))
        .output()
        .map_err(|e| e.to_string())?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("panicked") {
        return Err(format!("panic: {stderr}"));
    }
    let code = out.status.code().unwrap_or(-1);
    let stdout = String::from_utf8(out.stdout).map_err(|e| e.to_string())?;
    Ok((code, stdout))
}

/// docs/format.md §2.3: a descriptor swapped for a device
/// (renameat2 RENAME_EXCHANGE) between listing and opening is never opened.
/// An inotify watch on the device node records every open of it; O_PATH
/// opens (the classification) do not count as opens and generate none.
#[test]
fn a_device_swapped_in_is_never_opened() {
    if !is_root() {
        crate::util::missing("needs root to create a device node");
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let root = base.path().join("root");
    put_group(&root, "", &Desc::new("race-dev", 0, 1, 1));
    let rank0 = root.join("rank-0.json");
    let dev = root.join("dev-null");
    // /dev/null's numbers: harmless even if it were opened.
    if rustix::fs::mknodat(
        rustix::fs::CWD,
        &dev,
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o600),
        rustix::fs::makedev(1, 3),
    )
    .is_err()
    {
        crate::util::skip_fact("mknod is refused here");
        return;
    }
    let ino = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    assert!(ino >= 0);
    let c = std::ffi::CString::new(dev.as_os_str().as_encoded_bytes()).unwrap();
    assert!(unsafe { libc::inotify_add_watch(ino, c.as_ptr(), libc::IN_OPEN) } >= 0);

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let t = {
        let (stop, swaps, a, b) = (stop.clone(), swaps.clone(), rank0.clone(), dev.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if exchange(&a, &b) {
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let iters = env_u64("KVCR_RACE_ITERS", 300);
    let deadline = Instant::now() + Duration::from_secs(env_u64("KVCR_RACE_SECS", 5));
    let opts = kvcr_audit::api::AuditOptions::default();
    let (mut runs, mut swapped_seen) = (0u64, 0u64);
    let observe_by = deadline + Duration::from_secs(OBSERVE_SECS);
    while (runs < iters && Instant::now() < deadline)
        || (swapped_seen == 0 && Instant::now() < observe_by)
    {
        let doc = kvcr_audit::api::audit(&root, &opts).unwrap();
        let report: serde_json::Value = serde_json::from_str(doc.as_json()).unwrap();
        // The device showed up under the descriptor's name at least once.
        if report["files"].as_array().unwrap().iter().any(|f| {
            f["path"] == "rank-0.json"
                && f["findings"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|x| x["code"] == "KV002" || x["code"] == "KV005")
        }) {
            swapped_seen += 1;
        }
        runs += 1;
    }
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
    let mut buf = [0u8; 4096];
    let n = unsafe { libc::read(ino, buf.as_mut_ptr().cast(), buf.len()) };
    unsafe { libc::close(ino) };
    assert!(
        swaps.load(Ordering::Relaxed) > 0,
        "the swapper never swapped"
    );
    assert!(
        swapped_seen > 0,
        "no audit saw the device in {runs} audits: the race was not run"
    );
    assert!(
        n <= 0,
        "the device node was opened during {runs} audits ({n} bytes of inotify events)"
    );
    eprintln!(
        "{runs} audits, {} swaps, {swapped_seen} saw the device; never opened",
        swaps.load(Ordering::Relaxed)
    );
}
