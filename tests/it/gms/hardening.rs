//! `kvcr gms` against someone who can write next to the artifacts
//! (docs/format.md §14.7): a searched directory swapped for a symlink
//! while kvcr reads it, a FIFO or a device where an artifact is expected, a
//! process whose memory map is longer than a MiB, names that are not
//! UTF-8, more artifacts than descriptors, a huge sparse ring, and GMS's
//! variables given to the library rather than read from its environment.
//!
//! What kvcr opens is checked by the kernel, not by its output: an
//! inotify watch on the attacker's directory reports every open of it or
//! of anything in it (IN_OPEN; `O_PATH` opens nothing and reports
//! nothing), so "never opened" is a fact of the run, not a guess.

use super::{checked, gms, headline_is, live_owner, one, write};
use crate::util::testkit::gms as kit;
use crate::util::{kvcr, kvcr_std};
use serde_json::Value;
use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// GMS's variables for a run that looks where GMS keeps its rings: the
/// rings in `shm`, no cohort directory and no recovery metadata (under
/// `none`, which does not exist).
fn shm_env(shm: &Path, none: &Path) -> Vec<(String, OsString)> {
    vec![
        ("GMS_KV_LEASE_SHM_DIR".to_string(), shm.into()),
        ("FAILOVER_LOCK_PATH".to_string(), none.join("lock").into()),
        ("DYN_KV_RECOVERY_PATH".to_string(), none.join("r").into()),
    ]
}

/// An inotify watch on a directory: every open of it or of an entry in it.
struct Opens(OwnedFd);

impl Opens {
    fn watch(dir: &Path) -> Opens {
        use rustix::fs::inotify;
        let fd =
            inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC).unwrap();
        inotify::add_watch(
            &fd,
            dir,
            inotify::WatchFlags::OPEN | inotify::WatchFlags::ACCESS,
        )
        .unwrap();
        Opens(fd)
    }

    /// The names opened or read since the watch began ("." for the
    /// directory itself).
    fn seen(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 8192];
        let mut r = rustix::fs::inotify::Reader::new(&self.0, &mut buf);
        loop {
            match r.next() {
                Ok(e) => out.push(
                    e.file_name()
                        .map_or(".".to_string(), |n| n.to_string_lossy().into_owned()),
                ),
                Err(rustix::io::Errno::AGAIN) => return out,
                Err(e) => panic!("inotify: {e}"),
            }
        }
    }
}

/// Swaps `a` and `b` (`renameat2(RENAME_EXCHANGE)`) as fast as it can until
/// dropped; the thread is joined on drop, so the swaps end with the test.
struct Swapper {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Swapper {
    fn start(a: &Path, b: &Path) -> Swapper {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (a, b, s) = (a.to_path_buf(), b.to_path_buf(), stop.clone());
        let thread = std::thread::spawn(move || {
            let cwd = rustix::fs::CWD;
            let mut n = 0u64;
            while !s.load(std::sync::atomic::Ordering::Relaxed) {
                rustix::fs::renameat_with(cwd, &a, cwd, &b, rustix::fs::RenameFlags::EXCHANGE)
                    .expect("RENAME_EXCHANGE");
                n += 1;
                // A pause, so that many runs get past their own first open
                // of the directory and race their listing and the opens
                // below it (each spans many swaps).
                std::thread::sleep(Duration::from_micros(100));
            }
            n
        });
        Swapper {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops the swaps and says how many there were.
    fn stop(mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// How many runs each race makes (each run's window spans its whole
/// listing and every open: with the old by-path opens the first run or two
/// already opened the attacker's files).
const RACE_RUNS: usize = 12;

/// Runs kvcr `RACE_RUNS` times while `real` (a directory under `root`) is
/// swapped with a symlink to `evil` (outside it): no run opens anything of
/// `evil` (the kernel's word), none judges the attacker's broken rings
/// (exit 1), and a run that met the symlink says so (exit 2).
fn race(root: &Path, real: &Path, evil: &Path, args: &[&OsStr], env: &[(String, OsString)]) {
    let link = root.join("link");
    std::os::unix::fs::symlink(evil, &link).unwrap();
    let opens = Opens::watch(evil);
    let swapper = Swapper::start(real, &link);
    let mut exits = Vec::new();
    for _ in 0..RACE_RUNS {
        let mut c = kvcr();
        c.arg("gms").args(args).args(["--interval-ms", "0"]);
        for (k, v) in env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        let status = out.status.code().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            status == 0 || status == 2,
            "exit {status}: the attacker's rings were judged?\n{}\n{err}",
            String::from_utf8_lossy(&out.stdout)
        );
        if status == 2 {
            assert!(
                // Met as a symlink, or swapped between kvcr's lstat
                // and its O_DIRECTORY|O_NOFOLLOW open.
                err.contains("symbolic link")
                    || err.contains("was replaced")
                    || err.contains("Not a directory"),
                "{err}"
            );
        }
        exits.push(status);
    }
    let swaps = swapper.stop();
    assert!(
        exits.contains(&0),
        "no run got past its first open of the directory: the race was not run ({exits:?})"
    );
    let seen = opens.seen();
    assert!(
        seen.is_empty(),
        "kvcr opened the attacker's directory or files ({} events, {swaps} swaps, exits \
         {exits:?}): {:?}",
        seen.len(),
        &seen[..seen.len().min(8)]
    );
    assert!(swaps > 0);
}

/// `n` rings, healthy in `real`, broken (a torn record) in `evil`, under
/// the same names.
fn rings(real: &Path, evil: &Path, n: usize) {
    std::fs::create_dir_all(real).unwrap();
    std::fs::create_dir_all(evil).unwrap();
    let good = kit::Lease::valid(8, 1).bytes();
    let bad = kit::LeaseMutation::RECIPE[0]
        .apply(&kit::Lease::valid(8, 1))
        .bytes();
    for i in 0..n {
        let name = kit::lease_file_name(&format!("ns{i}"));
        std::fs::write(real.join(&name), &good).unwrap();
        std::fs::write(evil.join(&name), &bad).unwrap();
    }
}

/// A searched directory swapped for a symlink between kvcr's listing and
/// its opens (docs/format.md §14.7): every open below it goes relative to
/// the descriptor kvcr listed, so the attacker's files are never opened,
/// whether the directory was named, holds writer-cohort directories, or
/// is where GMS keeps its lease rings.
#[test]
fn a_searched_directory_swapped_for_a_symlink_is_never_followed() {
    // A PATH of lease rings.
    let t = tempfile::tempdir().unwrap();
    let (real, evil) = (t.path().join("rings"), t.path().join("evil"));
    rings(&real, &evil, 300);
    race(t.path(), &real, &evil, &[real.as_os_str()], &[]);

    // A PATH holding writer-cohort directories (subdirectories).
    let t = tempfile::tempdir().unwrap();
    let (real, evil) = (t.path().join("shared"), t.path().join("evil"));
    for d in [&real, &evil] {
        std::fs::create_dir(d).unwrap();
        for i in 0..40 {
            let c = kit::cohort_dir(d, &format!("w{i:02}.vllm-writers"));
            kit::vllm_healthy(&c);
        }
    }
    race(t.path(), &real, &evil, &[real.as_os_str()], &[]);

    // Discovery: the directory GMS keeps its rings in.
    let t = tempfile::tempdir().unwrap();
    let (real, evil) = (t.path().join("shm"), t.path().join("evil"));
    rings(&real, &evil, 300);
    let env = shm_env(&real, &t.path().join("none"));
    race(t.path(), &real, &evil, &[], &env);
}

/// A FIFO or a device where an artifact is expected is refused from its
/// `statx`, never opened (opening some devices has an effect): named by
/// `$GMS_KV_LEASE_SHM_PATH` (exit 2, naming what it is), or listed in a
/// directory kvcr searches (skipped).
#[test]
fn a_fifo_or_a_device_is_refused_before_any_open() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("d");
    std::fs::create_dir(&d).unwrap();
    let fifo = d.join(kit::lease_file_name("fifo"));
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let mut specials = vec![(fifo, "FIFO")];
    // /dev/null's numbers, where this user may make a device node.
    let dev = d.join(kit::lease_file_name("dev"));
    if rustix::fs::mknodat(
        rustix::fs::CWD,
        &dev,
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o644),
        rustix::fs::makedev(1, 3),
    )
    .is_ok()
    {
        specials.push((dev, "character device"));
    } else {
        crate::util::skip_fact("no device node can be made here: the FIFO only");
    }
    let ok = kit::lease_file_name("ok");
    write(&d, &ok, &kit::Lease::valid(8, 1).bytes());
    let opens = Opens::watch(&d);
    for (p, what) in &specials {
        let out = kvcr()
            .arg("gms")
            .args(["--interval-ms", "0"])
            .env("GMS_KV_LEASE_SHM_PATH", p)
            .env("FAILOVER_LOCK_PATH", t.path().join("none/lock"))
            .env("DYN_KV_RECOVERY_PATH", t.path().join("none/r"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&format!("is a {what}, not a regular file: not opened")),
            "{err}"
        );
    }
    // Listed in a directory: the regular ring is judged, the rest skipped.
    let (status, v) = gms(&[d.as_os_str()], &[]);
    checked(status, &v);
    assert_eq!(status, 0, "{v:#}");
    assert_eq!(v["artifacts"].as_array().unwrap().len(), 1, "{v:#}");
    let env = shm_env(&d, &t.path().join("none"));
    let (status, v) = gms(&[], &env);
    checked(status, &v);
    assert_eq!(status, 0, "{v:#}");
    assert_eq!(v["artifacts"].as_array().unwrap().len(), 1, "{v:#}");
    let seen: Vec<String> = opens
        .seen()
        .into_iter()
        .filter(|n| *n != ok && n != ".")
        .collect();
    assert_eq!(seen, Vec::<String>::new(), "a special file was opened");
}

/// Names are bytes (docs/format.md §14.1): an entry whose name is not
/// UTF-8 is judged by content like any other, shown escaped (§9.6), and
/// counts in a writer-cohort directory's shape, wherever a listing is
/// read: a PATH, where GMS keeps its rings, a cohort directory, the files
/// beside a superseded one.
#[test]
fn names_that_are_not_utf8_are_judged_counted_and_shown_escaped() {
    let t = tempfile::tempdir().unwrap();
    let name = |b: &[u8]| OsStr::from_bytes(b).to_os_string();
    let broken = kit::LeaseMutation::RECIPE[0]
        .apply(&kit::Lease::valid(8, 1))
        .bytes();
    // A PATH: a broken ring named \xff\xfe beside a healthy one.
    let d = t.path().join("d");
    std::fs::create_dir(&d).unwrap();
    write(&d, "ok.shm", &kit::Lease::valid(8, 1).bytes());
    std::fs::write(d.join(name(b"\xff\xfe")), &broken).unwrap();
    let (status, v) = gms(&[d.as_os_str()], &[]);
    checked(status, &v);
    assert_eq!(status, 1, "{v:#}");
    let arts = v["artifacts"].as_array().unwrap();
    assert_eq!(arts.len(), 2, "{v:#}");
    let shown = format!("{}/\\xff\\xfe", d.display());
    let bad = arts.iter().find(|a| a["path"] == shown.as_str()).unwrap();
    assert_eq!(bad["verdict"], "reject", "{bad:#}");
    // The table names it escaped too.
    let out = kvcr()
        .arg("gms")
        .arg(&d)
        .args(["--interval-ms", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).expect("the table is UTF-8");
    assert!(text.contains("\\xff\\xfe"), "{text}");

    // Where GMS keeps its rings: GMS's glob matches the bytes.
    let shm = t.path().join("shm");
    std::fs::create_dir(&shm).unwrap();
    std::fs::write(shm.join(name(b"gms-kv-lease-\xff.shm")), &broken).unwrap();
    let env = shm_env(&shm, &t.path().join("none"));
    let (status, v) = gms(&[], &env);
    checked(status, &v);
    assert_eq!(status, 1, "{v:#}");
    assert_eq!(
        one(&v)["path"],
        format!("{}/gms-kv-lease-\\xff.shm", shm.display())
    );

    // A cohort directory's shape: cohort files alone are a boot that has
    // not fenced yet; beside a stranger (whatever its name) they are not.
    let c = t.path().join("c");
    std::fs::create_dir(&c).unwrap();
    write(&c, &kit::cohort_id(1), b"");
    let (status, v) = gms(&[t.path().join("c").as_os_str()], &[]);
    checked(status, &v);
    assert_eq!(v["artifacts"].as_array().unwrap().len(), 1, "{v:#}");
    std::fs::write(c.join(name(b"\xff")), b"").unwrap();
    let (status, v) = gms(&[c.as_os_str()], &[]);
    checked(status, &v);
    assert_eq!(
        v["artifacts"].as_array().unwrap().len(),
        0,
        "a stranger makes it no cohort directory: {v:#}"
    );

    // The files beside a superseded store whose name is not UTF-8.
    let s = t.path().join("s");
    std::fs::create_dir(&s).unwrap();
    std::fs::write(s.join(name(b"idx\xff")), kit::dynkvix1(4)).unwrap();
    std::fs::write(s.join(name(b"idx\xff.tmp")), b"").unwrap();
    let (status, v) = gms(&[s.as_os_str()], &[]);
    checked(status, &v);
    let a = one(&v);
    assert_eq!(
        a["superseded"]["beside"],
        serde_json::json!(["idx\\xff.tmp"]),
        "{a:#}"
    );
}

/// The child of [`maps_longer_than_a_mib_are_read_whole`], run in its own
/// user and PID namespace: maps the ring (and closes it), then some 40,000
/// one-page mappings of alternating protection just below it (so none
/// merges), says where the ring's line is in its own `/proc/self/maps`,
/// and waits until its stdin closes.
#[test]
#[ignore = "a child of maps_longer_than_a_mib_are_read_whole"]
fn maps_holder() {
    use std::io::Read;
    let Some(ring) = std::env::var_os("KVCR_TEST_MAPS_RING") else {
        return;
    };
    let f = std::fs::File::open(&ring).unwrap();
    let len = f.metadata().unwrap().len() as usize;
    let page = 4096usize;
    // SAFETY: mmap/mprotect of fresh mappings this process owns; nothing
    // is read or written through them.
    let key = unsafe {
        let at = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            std::os::fd::AsRawFd::as_raw_fd(&f),
            0,
        );
        assert_ne!(at, libc::MAP_FAILED);
        let pages = 40_000usize;
        let below = libc::mmap(
            (at as usize - pages * page - page) as *mut libc::c_void,
            pages * page,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        );
        assert_ne!(below, libc::MAP_FAILED);
        for i in (0..pages).step_by(2) {
            assert_eq!(
                libc::mprotect(
                    (below as usize + i * page) as *mut libc::c_void,
                    page,
                    libc::PROT_NONE
                ),
                0
            );
        }
        at as usize
    };
    drop(f);
    let maps = std::fs::read("/proc/self/maps").unwrap();
    let want = format!("{key:x}-");
    let offset = maps
        .split(|&b| b == b'\n')
        .scan(0usize, |off, l| {
            let here = *off;
            *off += l.len() + 1;
            Some((here, l))
        })
        .find(|(_, l)| l.starts_with(want.as_bytes()))
        .map(|(o, _)| o)
        .expect("the ring's line");
    println!("ready {offset} {}", maps.len());
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest);
}

/// `--live` reads a process's `/proc/PID/maps` whole (docs/format.md
/// §14.2): a ring mapped (not open) by a process of another PID namespace
/// whose map table is longer than a MiB, with the ring's line past the
/// first MiB, is still seen, so the pids the ring records are not compared
/// with this namespace's: a held barrier whose recorded pid runs here is
/// the reject it is (KV210), never "a recovery in progress".
#[test]
fn maps_longer_than_a_mib_are_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut ring = kit::Lease::valid(16, live_owner());
    ring.active_mutations = u64::MAX;
    ring.recovery_owner_pid = u64::from(std::process::id());
    let p = write(dir.path(), "ring.shm", &ring.bytes());
    // A user of the ring in this namespace (this test).
    let _user = std::fs::File::open(&p).unwrap();
    let child = std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "--pid", "--fork"])
        .arg(std::env::current_exe().unwrap())
        .args([
            "gms::hardening::maps_holder",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .env("KVCR_TEST_MAPS_RING", &p)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        crate::util::missing("needs unshare (util-linux)");
        return;
    };
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = lines.find_map(|l| {
        l.ok()?.strip_prefix("ready ").map(|r| {
            r.split(' ')
                .map(|x| x.parse::<usize>().unwrap())
                .collect::<Vec<_>>()
        })
    });
    let Some(ready) = ready else {
        let _ = child.kill();
        let _ = child.wait();
        crate::util::skip_fact("user and PID namespaces cannot be made here");
        return;
    };
    let (offset, total) = (ready[0], ready[1]);
    assert!(
        offset > (1 << 20) && total > (1 << 20),
        "the ring's line is at byte {offset} of {total}: not past the first MiB"
    );
    let (status, v) = gms(&[p.as_os_str(), OsStr::new("--live")], &[]);
    drop(child.stdin.take());
    let _ = child.kill();
    let _ = child.wait();
    checked(status, &v);
    let a = one(&v);
    assert_eq!(status, 1, "{a:#}");
    headline_is(a, "KV210");
    let why = a["lease"]["owners_not_checked"].as_str().unwrap_or("");
    assert!(why.contains("another PID namespace"), "{a:#}");
    assert!(
        !a["cause"].as_str().unwrap().contains("in progress"),
        "{a:#}"
    );
}

/// Runs kvcr with at most `nofile` descriptors (RLIMIT_NOFILE, set in the
/// child before it runs).
fn gms_with_nofile(
    nofile: u64,
    args: &[&OsStr],
    env: &[(String, OsString)],
) -> (i32, Value, String) {
    use std::os::unix::process::CommandExt;
    let mut c = kvcr_std();
    c.arg("gms")
        .args(args)
        .args(["--format", "json", "--interval-ms", "0"]);
    for (k, v) in env {
        c.env(k, v);
    }
    // SAFETY: setrlimit is async-signal-safe; nothing else runs in the
    // forked child before exec.
    unsafe {
        c.pre_exec(move || {
            let l = libc::rlimit {
                rlim_cur: nofile,
                rlim_max: nofile,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &l) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap(), v, err)
}

/// Artifacts are opened and closed one at a time (docs/format.md §14.7):
/// 400 lease rings in one directory are judged under `ulimit -n 64`,
/// named as the directory, as 400 files (a shell's glob), or found where
/// GMS keeps them.
#[test]
fn four_hundred_rings_are_read_under_ulimit_n_64() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("shm");
    std::fs::create_dir(&d).unwrap();
    let ring = kit::Lease::valid(8, 1).bytes();
    let mut files = Vec::new();
    for i in 0..400 {
        files.push(write(&d, &kit::lease_file_name(&format!("n{i}")), &ring));
    }
    let env = shm_env(&d, &t.path().join("none"));
    let globbed: Vec<&OsStr> = files.iter().map(|p| p.as_os_str()).collect();
    for (what, args, env) in [
        ("the directory", vec![d.as_os_str()], &[][..]),
        ("400 files", globbed, &[][..]),
        ("discovery", vec![], &env[..]),
    ] {
        let (status, v, err) = gms_with_nofile(64, &args, env);
        assert_eq!(status, 0, "{what}: {err}");
        checked(status, &v);
        assert_eq!(v["artifacts"].as_array().unwrap().len(), 400, "{what}");
    }
}

/// Not a test: run by [`a_huge_sparse_ring_is_judged_from_its_layout`] as a
/// fresh, small process, so that kvcr's maximum RSS is its own. (A child
/// started straight from the test binary counts the memory of the whole
/// test process in its `ru_maxrss`: the kernel carries the high-water
/// mark of the address space a `vfork`ed child execs from.) Runs kvcr on
/// the ring, reaps it with `wait4`, and prints `ran STATUS MILLIS KIB`
/// and then kvcr's stdout.
#[test]
#[ignore = "a child of a_huge_sparse_ring_is_judged_from_its_layout"]
fn sparse_ring_runner() {
    let Some(ring) = std::env::var_os("KVCR_TEST_SPARSE_RING") else {
        return;
    };
    let start = Instant::now();
    // Reaped by wait4 below, which also gives its maximum RSS.
    #[allow(clippy::zombie_processes)]
    let child = kvcr_std()
        .arg("gms")
        .arg(&ring)
        .args(["--format", "json", "--interval-ms", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let stdout = child.stdout.unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut BufReader::new(stdout), &mut s).unwrap();
        s
    });
    let mut status = 0;
    // SAFETY: wait4 on the child this process spawned, reaped only here.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid);
    let took = start.elapsed().as_millis();
    let text = reader.join().unwrap();
    println!(
        "ran {} {took} {}",
        libc::WEXITSTATUS(status),
        usage.ru_maxrss
    );
    println!("{}", text.replace('\n', " "));
}

/// A huge sparse ring stays bounded by its layout: an 8 GiB file whose
/// header says 16 records is judged from its header and 16 records (KV203:
/// larger than its layout), never read to its end: in well under the
/// bounds here (about 10 ms and 11 MB on a quiet machine; the bounds leave
/// room for a loaded one), where reading it would take minutes.
#[test]
fn a_huge_sparse_ring_is_judged_from_its_layout() {
    let t = tempfile::tempdir().unwrap();
    let p = write(t.path(), "big.shm", &kit::Lease::valid(16, 1).bytes());
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    if f.set_len(8 << 30).is_err() {
        crate::util::skip_fact("this file system holds no 8 GiB sparse file");
        return;
    }
    drop(f);
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "gms::hardening::sparse_ring_runner",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .env("KVCR_TEST_SPARSE_RING", &p)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines().skip_while(|l| !l.starts_with("ran "));
    let ran: Vec<i64> = lines
        .next()
        .unwrap_or_else(|| panic!("the runner said nothing: {text}"))
        .split(' ')
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    let v: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    let (code, took_ms, rss_kib) = (ran[0] as i32, ran[1], ran[2]);
    checked(code, &v);
    assert_eq!(code, 1);
    headline_is(one(&v), "KV203");
    assert!(took_ms < 10_000, "took {took_ms} ms");
    assert!(rss_kib < 64 * 1024, "max RSS {rss_kib} KiB");
}

/// Run by [`the_library_takes_gmss_variables_as_an_option`] in a child
/// whose own environment points GMS's variables at a broken ring: the
/// library looks only where its options say.
#[test]
#[ignore = "a child of the_library_takes_gmss_variables_as_an_option"]
fn child_gms_with_a_hostile_environment() {
    let Some(good) = std::env::var_os("KVCR_TEST_GMS_DIR") else {
        return;
    };
    assert!(
        std::env::var_os("GMS_KV_LEASE_SHM_DIR").is_some(),
        "set by the parent"
    );
    let good = PathBuf::from(good);
    let mut o = kvcr_audit::api::GmsOptions {
        interval_ms: Some(0),
        ..Default::default()
    };
    for (k, v) in [
        ("GMS_KV_LEASE_SHM_DIR", good.join("shm")),
        ("FAILOVER_LOCK_PATH", good.join("none/lock")),
        ("DYN_KV_RECOVERY_PATH", good.join("none/r")),
    ] {
        o.env.insert(k.into(), v.into());
    }
    let d = kvcr_audit::api::gms(&[], &o).unwrap();
    let v: Value = serde_json::from_str(d.as_json()).unwrap();
    assert_eq!(v["exit_status"], 0, "{v:#}");
    assert_eq!(v["artifacts"].as_array().unwrap().len(), 1, "{v:#}");
    let looked = v["looked"].as_array().unwrap();
    assert!(
        looked
            .iter()
            .any(|l| l["path"] == good.join("shm").to_str().unwrap()),
        "{v:#}"
    );
    println!("child-ran-to-the-end");
}

/// GMS's variables are an option of the library call (docs/format.md
/// §14.1): the caller's environment is never read.
#[test]
fn the_library_takes_gmss_variables_as_an_option() {
    let t = tempfile::tempdir().unwrap();
    let good = t.path().join("good");
    let evil = t.path().join("evil");
    std::fs::create_dir_all(good.join("shm")).unwrap();
    std::fs::create_dir_all(&evil).unwrap();
    write(
        &good.join("shm"),
        &kit::lease_file_name("a"),
        &kit::Lease::valid(8, 1).bytes(),
    );
    let broken = kit::LeaseMutation::RECIPE[0]
        .apply(&kit::Lease::valid(8, 1))
        .bytes();
    write(&evil, &kit::lease_file_name("b"), &broken);
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "gms::hardening::child_gms_with_a_hostile_environment",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("KVCR_TEST_GMS_DIR", &good)
        .env("GMS_KV_LEASE_SHM_DIR", &evil)
        .env("FAILOVER_LOCK_PATH", evil.join("lock"))
        .env("DYN_KV_RECOVERY_PATH", evil.join("r"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("child-ran-to-the-end"), "{stdout}");
}

/// The open calls (`open`, `openat`, `openat2`) of one kvcr run, as
/// `strace -f` writes them; `None` when strace is not installed (a
/// failure under KVCR_TEST_REQUIRE=1).
fn opens_of(args: &[&OsStr], env: &[(String, OsString)]) -> Option<(i32, Vec<String>)> {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("strace.log");
    let mut c = std::process::Command::new("strace");
    crate::util::test_env(&mut c);
    c.args(["-f", "-qq", "-e", "trace=open,openat,openat2", "-o"])
        .arg(&log)
        .arg(crate::util::bin())
        .arg("gms")
        .args(args)
        .args(["--interval-ms", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let Ok(status) = c.status() else {
        crate::util::missing("needs strace");
        return None;
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    if text.is_empty() {
        crate::util::skip_fact("strace cannot trace here (ptrace refused)");
        return None;
    }
    Some((
        status.code().unwrap_or(-1),
        text.lines().map(str::to_string).collect(),
    ))
}

/// By its system calls: once kvcr has opened a directory it reads
/// beneath, no open names a path inside it; every open below it is
/// relative to its descriptor (docs/format.md §14.7): a PATH's rings and
/// cohort subdirectories, a superseded store's neighbours, discovery's
/// lease rings, and the files of a PATH named one by one.
#[test]
fn every_open_below_a_directory_is_relative_to_its_descriptor() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("d");
    std::fs::create_dir(&d).unwrap();
    let ring = kit::Lease::valid(8, 1).bytes();
    let mut files = Vec::new();
    for i in 0..4 {
        files.push(write(&d, &kit::lease_file_name(&format!("s{i}")), &ring));
    }
    let c = kit::cohort_dir(&d, "w.vllm-writers");
    kit::vllm_healthy(&c);
    write(&d, "index", &kit::dynkvix1(4));
    write(&d, "index.tmp", b"");
    let env = [
        ("GMS_KV_LEASE_SHM_DIR".to_string(), d.clone().into()),
        (
            "FAILOVER_LOCK_PATH".to_string(),
            d.join("w").into_os_string(),
        ),
        (
            "DYN_KV_RECOVERY_PATH".to_string(),
            t.path().join("none/r").into(),
        ),
    ];
    let named: Vec<&OsStr> = files.iter().map(|p| p.as_os_str()).collect();
    let inside = format!("\"{}/", d.display());
    // The PATH holds the superseded store (a reject, exit 1); 2 would be
    // a run that could not read something.
    for (what, args, env, want) in [
        ("a PATH", vec![d.as_os_str()], &[][..], 1),
        ("files named", named, &[][..], 0),
        ("discovery", vec![], &env[..], 0),
    ] {
        let Some((status, calls)) = opens_of(&args, env) else {
            return;
        };
        assert_eq!(status, want, "{what}: {calls:#?}");
        let by_path: Vec<&String> = calls.iter().filter(|l| l.contains(&inside)).collect();
        assert!(
            by_path.is_empty(),
            "{what}: opened by a path inside the directory: {by_path:#?}"
        );
        // The run did open the artifacts (relative to a directory fd).
        assert!(
            calls
                .iter()
                .any(|l| l.contains("gms-kv-lease-") && !l.contains("AT_FDCWD")),
            "{what}: {calls:#?}"
        );
    }
}

/// `--live` reads every process's tables once per run, for every ring at
/// once, and still answers per ring: of two rings in one run with a
/// barrier held by this test's pid, the one this test has open is "a
/// recovery in progress" (a notice), the one no process here uses is not
/// checked (KV210, a reject).
#[test]
fn live_answers_per_ring_from_one_pass_over_proc() {
    let dir = tempfile::tempdir().unwrap();
    let mut ring = kit::Lease::valid(16, live_owner());
    ring.active_mutations = u64::MAX;
    ring.recovery_owner_pid = u64::from(std::process::id());
    let used = write(dir.path(), "used.shm", &ring.bytes());
    write(dir.path(), "unused.shm", &ring.bytes());
    let _user = std::fs::File::open(&used).unwrap();
    let (status, v) = gms(&[dir.path().as_os_str(), OsStr::new("--live")], &[]);
    checked(status, &v);
    assert_eq!(status, 1, "{v:#}");
    let arts = v["artifacts"].as_array().unwrap();
    let by = |n: &str| {
        arts.iter()
            .find(|a| a["path"].as_str().unwrap().ends_with(n))
            .unwrap()
    };
    assert_eq!(by("/used.shm")["verdict"], "ok", "{v:#}");
    assert!(
        by("/used.shm")["lease"]["owners_not_checked"].is_null(),
        "{v:#}"
    );
    let unused = by("/unused.shm");
    headline_is(unused, "KV210");
    let why = unused["lease"]["owners_not_checked"].as_str().unwrap();
    assert!(why.contains("no process of kvcr's PID namespace"), "{why}");
}
