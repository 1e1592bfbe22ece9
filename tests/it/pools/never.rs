//! Never disturb the Guard (docs/format.md §16.7), checked under strace:
//! no lock of any kind, no write, truncate, unlink, rename, chmod or mmap of
//! a pool file, its directory or a G3 file; no create of a missing G3 file;
//! no connect to the socket; every open of a pool `O_RDONLY|O_NOFOLLOW`,
//! read with `pread`. And the files are byte for byte, mode and time
//! unchanged afterwards.

use super::kit::{hold, snapshot, TERMS};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Runs `kvcr ARGS` under `strace -f -y`, returning the trace; `None`
/// (a skip, a failure under KVCR_TEST_REQUIRE) when strace cannot run.
fn traced(args: &[&str], out: &Path) -> Option<String> {
    let ok = std::process::Command::new("strace")
        .args(["-f", "-y", "-qq", "-s", "256", "-o"])
        .arg(out)
        .arg(crate::util::bin())
        .args(args)
        .env_remove("KVCR_PROC_ROOT")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output();
    match ok {
        Err(_) => {
            crate::util::missing("needs strace (apt-get install strace)");
            None
        }
        Ok(o) if !out.exists() || String::from_utf8_lossy(&o.stderr).contains("ptrace") => {
            crate::util::missing(&format!(
                "needs strace to trace (it said: {})",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
            None
        }
        Ok(_) => Some(std::fs::read_to_string(out).unwrap()),
    }
}

/// What must never be done to anything under `root`, as strace names the
/// system calls.
const FORBIDDEN: &[&str] = &[
    "flock(",
    "write(",
    "pwrite64(",
    "writev(",
    "ftruncate(",
    "truncate(",
    "fallocate(",
    "unlink(",
    "unlinkat(",
    "rename(",
    "renameat(",
    "renameat2(",
    "chmod(",
    "fchmod(",
    "fchmodat(",
    "utimensat(",
    "mmap(",
    "connect(",
    "bind(",
    "mkdir(",
    "mkdirat(",
    "sendto(",
    "sendmsg(",
    "kill(",
    "pidfd_open(",
];

fn facts(p: &Path) -> (Vec<u8>, u64, u32, i64, i64) {
    let m = std::fs::symlink_metadata(p).unwrap();
    let head = if m.is_file() {
        let mut b = std::fs::read(p).unwrap();
        b.truncate(8192);
        b
    } else {
        Vec::new()
    };
    (head, m.len(), m.mode(), m.mtime(), m.mtime_nsec())
}

#[test]
fn kvcr_pools_never_locks_writes_maps_creates_or_connects() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().canonicalize().unwrap();
    let dir = root.join("pd");
    let m = snapshot("service-killed-primary-publishing", &dir);
    let r = snapshot("released-then-service-killed", &root.join("pd2"));
    std::os::unix::fs::symlink(
        &m[0].path,
        dir.join(format!("kvcr-pool_9-{}", m[0].generation())),
    )
    .unwrap();
    let sock = root.join("s.sock");
    let _svc = hold(&[&m[0].path], false, Some(&sock));
    let _primary = hold(&[&m[1].path], false, None);
    let g3a = root.join("g3a");
    std::fs::write(&g3a, vec![0u8; 4096]).unwrap();
    let g3b = root.join("g3-missing");
    let before: Vec<_> = m.iter().chain(&r).map(|x| facts(&x.path)).collect();
    let g3s = format!("{},{}", g3a.display(), g3b.display());
    let mut args = vec![
        "pools",
        dir.to_str().unwrap(),
        "--live",
        "--socket-path",
        sock.to_str().unwrap(),
        "--g3-paths",
        &g3s,
        "--capacity-bytes-per-file",
        "16384",
        "--interval-ms",
        "1",
        "--format",
        "json",
    ];
    let r0 = r[0].path.to_str().unwrap().to_string();
    args.push(&r0);
    args.extend(TERMS);
    let Some(trace) = traced(&args, &root.join("trace")) else {
        return;
    };
    let root_s = root.to_str().unwrap();
    let mut pool_opens = 0;
    for line in trace.lines().filter(|l| l.contains(root_s)) {
        for f in FORBIDDEN {
            let call = line
                .split_once(' ')
                .map_or(line, |(_, rest)| rest)
                .trim_start();
            let Some(args) = call.strip_prefix(f) else {
                continue;
            };
            // `write(1, ...)` of the report names paths in its text: a
            // write's target is its first argument; any other forbidden
            // call naming a path under the root is a violation.
            let target = if f.starts_with("write") || f.starts_with("pwrite") {
                args.split(',').next().unwrap_or("")
            } else {
                args
            };
            assert!(!target.contains(root_s), "forbidden: {line}");
        }
        if line.contains("fcntl(") {
            assert!(
                !line.contains("F_SETLK") && !line.contains("F_OFD_SETLK"),
                "lock: {line}"
            );
        }
        if line.contains("openat(") && line.contains("kvcr-pool_") && !line.contains("/proc/") {
            let call = line.split_once("openat(").unwrap().1;
            assert!(
                call.contains("O_RDONLY") && call.contains("O_NOFOLLOW"),
                "{line}"
            );
            assert!(
                !call.contains("O_CREAT") && !call.contains("O_TRUNC"),
                "{line}"
            );
            pool_opens += 1;
        }
        if line.contains("g3-missing") {
            assert!(
                !line.contains("O_CREAT") && !line.contains("openat("),
                "{line}"
            );
        }
        if line.contains("s.sock") {
            assert!(
                !line.contains("connect(") && !line.contains("openat("),
                "{line}"
            );
        }
        // A pool's bytes are read with pread only.
        if line.contains("kvcr-pool_") && line.contains(" read(") {
            panic!("read(2) instead of pread: {line}");
        }
    }
    assert!(
        pool_opens >= 3,
        "the trace saw {pool_opens} pool opens:\n{trace}"
    );
    assert!(trace.contains("pread64("), "no pread");
    let after: Vec<_> = m.iter().chain(&r).map(|x| facts(&x.path)).collect();
    assert!(before == after, "a pool file changed");
    assert!(!g3b.exists(), "a missing G3 file was created");
    // The symlink was never followed.
    assert!(!trace
        .lines()
        .any(|l| l.contains("kvcr-pool_9-") && l.contains("openat(") && !l.contains("ELOOP")));
}
