//! Everything the GMS reader does to the system (docs/format.md §14.7):
//! where GMS puts its artifacts, read-only opens, the two reads, the
//! kernel's lock table, the cohort probe and the processes `--live` asks
//! about. Nothing here judges (that is `crate::rules::gms`).
//!
//! Every file is opened `O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK |
//! O_NOCTTY`, with `O_NOATIME` where the kernel allows it (the file's
//! owner, or CAP_FOWNER), and read with `pread`: nothing is ever created,
//! written, truncated, renamed or unlinked. No lock is ever taken on a
//! lease ring or on recovery metadata. On a cohort file whose lock the
//! kernel's table does not list, one non-blocking probe (exclusive on a
//! cohort file, shared on a `.leader`, as GMS's own liveness probe) is
//! taken and released at once.

use crate::format::gms::{self as format, Magic, Superseded};
use crate::io::procfs::ProcFs;
use crate::rules::gms::{
    CohortEntry, CohortRead, Holder, LeaseLive, LeaseRead, LeaseScan, Lock, OwnerId, RecoveryRead,
    RecoveryScan, SupersededRead,
};
use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags};
use rustix::io::Errno;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// Bytes read per `pread` while streaming records.
const CHUNK: usize = 1 << 16;
/// The most entries of one directory kvcr reads.
pub const ENTRY_CAP: usize = 65_536;
/// The most bytes of `/proc/locks` kvcr reads (a line is under 100 bytes:
/// some 170,000 locks); a longer table is read as incomplete.
pub const LOCKS_BYTES: u64 = 16 << 20;
/// The most bytes of a marker kvcr reads.
const MARKER_BYTES: usize = 64;

/// A file or directory that could not be opened or read: the run cannot
/// judge it (exit 2).
#[derive(Debug)]
pub struct ReadError {
    pub path: PathBuf,
    pub what: String,
    pub denied: bool,
}

impl ReadError {
    fn new(path: &Path, what: impl Into<String>, e: Errno) -> ReadError {
        ReadError {
            path: path.to_path_buf(),
            what: format!("{}: {}", what.into(), std::io::Error::from(e)),
            denied: matches!(e, Errno::ACCESS | Errno::PERM),
        }
    }
}

fn flags() -> OFlags {
    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY
}

/// Retries a system call interrupted by a signal.
pub fn retry<T>(mut f: impl FnMut() -> Result<T, Errno>) -> Result<T, Errno> {
    loop {
        match f() {
            Err(Errno::INTR) => continue,
            r => return r,
        }
    }
}

/// Opens `name` beneath `dir` (or `name` itself when `dir` is `None`)
/// read-only, without following a symlink, with `O_NOATIME` when allowed.
pub fn open_ro(dir: Option<BorrowedFd<'_>>, name: &Path, extra: OFlags) -> Result<OwnedFd, Errno> {
    let open = |f: OFlags| {
        retry(|| match dir {
            Some(d) => rustix::fs::openat(d, name, f, Mode::empty()),
            None => rustix::fs::open(name, f, Mode::empty()),
        })
    };
    match open(flags() | extra | OFlags::NOATIME) {
        Err(Errno::PERM) => open(flags() | extra),
        r => r,
    }
}

/// An open regular file.
pub struct Opened {
    pub fd: OwnedFd,
}

/// Opens a regular file for reading (a symlink, FIFO, device or directory
/// is refused without being read).
pub fn open_file(path: &Path) -> Result<Opened, ReadError> {
    let fd = open_ro(None, path, OFlags::empty()).map_err(|e| match e {
        Errno::LOOP => ReadError {
            path: path.to_path_buf(),
            what: "is a symbolic link (kvcr follows none)".into(),
            denied: false,
        },
        e => ReadError::new(path, "cannot open", e),
    })?;
    let st = rustix::fs::fstat(&fd).map_err(|e| ReadError::new(path, "cannot stat", e))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(ReadError {
            path: path.to_path_buf(),
            what: "is not a regular file".into(),
            denied: false,
        });
    }
    Ok(Opened { fd })
}

fn size_of(fd: &OwnedFd) -> Result<u64, Errno> {
    rustix::fs::fstat(fd).map(|st| st.st_size as u64)
}

/// Reads up to `buf.len()` bytes at `off`; fewer only at the end of file.
fn pread_full(fd: &OwnedFd, buf: &mut [u8], off: u64) -> Result<usize, Errno> {
    let mut n = 0;
    while n < buf.len() {
        match retry(|| rustix::io::pread(fd, &mut buf[n..], off + n as u64))? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// The first bytes of an open file (at most 16), to recognise it.
pub fn head(o: &Opened) -> Result<Vec<u8>, Errno> {
    let mut b = [0u8; 16];
    let n = pread_full(&o.fd, &mut b, 0)?;
    Ok(b[..n].to_vec())
}

// ---------------------------------------------------------------------------
// The reads
// ---------------------------------------------------------------------------

/// One read of a lease ring: the header, then (for the current layout,
/// when the file holds every record) every record, streamed.
pub fn read_lease(o: &Opened) -> Result<LeaseRead, Errno> {
    let size = size_of(&o.fd)?;
    let mut hb = [0u8; 64];
    if pread_full(&o.fd, &mut hb, 0)? < 64 {
        return Ok(LeaseRead {
            size,
            header: None,
            scan: None,
        });
    }
    let h = format::lease_header(&hb);
    let mut read = LeaseRead {
        size,
        header: Some(h),
        scan: None,
    };
    if !LeaseRead::decodable(&h) || size < h.expected_size() {
        return Ok(read);
    }
    let mut scan = LeaseScan::default();
    let mut digest = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    let total = u64::from(h.total_blocks);
    let mut block = 0u64;
    while block < total {
        let want = ((total - block) * 16).min(CHUNK as u64) as usize;
        let off = format::LEASE_HEADER + block * 16;
        let n = pread_full(&o.fd, &mut buf[..want], off)?;
        if n < want {
            // The file shrank while read: the second read's size tells.
            read.size = size_of(&o.fd)?;
            return Ok(read);
        }
        digest.update(&buf[..n]);
        for rec in buf[..n].chunks_exact(16) {
            scan.push(block, &format::lease_record(rec));
            block += 1;
        }
    }
    scan.digest = digest.finalize().into();
    read.scan = Some(scan);
    Ok(read)
}

/// One read of recovery metadata: the header, then (when a block count
/// fits the size) records 1..num_blocks-1, streamed.
pub fn read_recovery(
    o: &Opened,
    ask: &crate::rules::gms::RecoveryAsk,
) -> Result<RecoveryRead, Errno> {
    let size = size_of(&o.fd)?;
    let mut hb = [0u8; 80];
    if pread_full(&o.fd, &mut hb, 0)? < 80 {
        return Ok(RecoveryRead {
            size,
            header: None,
            scan: None,
        });
    }
    let mut read = RecoveryRead {
        size,
        header: Some(format::recovery_header(&hb)),
        scan: None,
    };
    let Some(n) = crate::rules::gms::recovery_blocks(size, ask) else {
        return Ok(read);
    };
    let mut scan = RecoveryScan {
        num_blocks: n,
        ..RecoveryScan::default()
    };
    let per = CHUNK / format::RECOVERY_RECORD as usize;
    let mut buf = vec![0u8; per * format::RECOVERY_RECORD as usize];
    let mut block = 1u64;
    while block < n {
        let count = (n - block).min(per as u64) as usize;
        let want = count * format::RECOVERY_RECORD as usize;
        let off = format::RECOVERY_HEADER + block * format::RECOVERY_RECORD;
        if pread_full(&o.fd, &mut buf[..want], off)? < want {
            read.size = size_of(&o.fd)?;
            return Ok(read);
        }
        for rec in buf[..want].chunks_exact(format::RECOVERY_RECORD as usize) {
            scan.push(block, &format::recovery_record(rec));
            block += 1;
        }
    }
    read.scan = Some(scan);
    Ok(read)
}

/// One read of a superseded file: its header, and for a snapshot every
/// record's length, to see whether they fill the file.
pub fn read_superseded(o: &Opened, s: Superseded, path: &Path) -> Result<SupersededRead, Errno> {
    let size = size_of(&o.fd)?;
    let mut head = [0u8; Superseded::HEAD];
    let n = pread_full(&o.fd, &mut head, 0)?;
    let head = &head[..n];
    let mut exact = false;
    let expected_size = format::superseded_expected_size(s, head);
    if let Some((lid, count)) = format::snapshot_header(head) {
        if let Some(mut walk) = format::SnapshotWalk::new(s, lid, count) {
            let mut buf = vec![0u8; CHUNK];
            let mut off = 14u64;
            loop {
                let k = pread_full(&o.fd, &mut buf, off)?;
                if k == 0 {
                    break;
                }
                walk.feed(&buf[..k]);
                off += k as u64;
                if walk.trailing > 0 {
                    break;
                }
            }
            exact = walk.exact();
        }
    }
    Ok(SupersededRead {
        format: s,
        size,
        expected_size,
        exact,
        beside: beside(path, s),
    })
}

/// The files beside a superseded file that belong to it, by name only:
/// a DYNKVIX1 store's `.rank<R>` answers, `.status.jsonl` and `.tmp`; a
/// snapshot's `.gen`, `.del` and `.tmp`.
fn beside(path: &Path, s: Superseded) -> Vec<String> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Vec::new();
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let prefix = format!("{}.", name.to_string_lossy());
    let Ok(d) = open_ro(None, dir, OFlags::DIRECTORY) else {
        return Vec::new();
    };
    let Ok(entries) = list(&d) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .into_iter()
        .filter_map(|n| n.into_string().ok())
        .filter(|n| {
            n.strip_prefix(&prefix).is_some_and(|rest| match s {
                Superseded::Dynkvix1 => {
                    rest == "status.jsonl"
                        || rest == "tmp"
                        || rest
                            .strip_prefix("rank")
                            .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()))
                }
                Superseded::Gmskvix1 | Superseded::Gmskvix2 => {
                    matches!(rest, "gen" | "del" | "tmp")
                }
                Superseded::Gmskvgn1 => rest == "tmp",
            })
        })
        .collect();
    out.sort();
    out
}

/// Why a directory was not listed whole.
#[derive(Debug)]
pub enum ListError {
    /// The kernel's answer.
    Sys(Errno),
    /// More entries than the cap (named): a directory kvcr cannot read
    /// whole is never judged as if it were complete.
    TooMany(usize),
}

impl From<Errno> for ListError {
    fn from(e: Errno) -> ListError {
        ListError::Sys(e)
    }
}

impl ListError {
    /// The error naming the directory, for the run (exit 2).
    pub fn at(self, path: &Path) -> ReadError {
        match self {
            ListError::Sys(e) => ReadError::new(path, "cannot list", e),
            ListError::TooMany(cap) => ReadError {
                path: path.to_path_buf(),
                what: format!(
                    "holds more than {cap} entries, the most kvcr reads of one directory: not \
                     judged, since a partial listing could hide an artifact, a cohort file or a \
                     marker"
                ),
                denied: false,
            },
        }
    }
}

/// The most entries of a `/proc` directory kvcr reads (the kernel's
/// PID_MAX_LIMIT, above any descriptor table's size too).
const PROC_ENTRY_CAP: usize = 1 << 22;

/// The names in a directory (at most [`ENTRY_CAP`]: more is an error,
/// never a silent truncation), `.` and `..` aside.
fn list(dir: &OwnedFd) -> Result<Vec<OsString>, ListError> {
    list_at_most(dir, ENTRY_CAP)
}

fn list_at_most(dir: &OwnedFd, cap: usize) -> Result<Vec<OsString>, ListError> {
    let mut d = rustix::fs::Dir::read_from(dir)?;
    let mut out = Vec::new();
    while let Some(e) = d.read() {
        let e = e?;
        let name = e.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        if out.len() >= cap {
            return Err(ListError::TooMany(cap));
        }
        out.push(OsString::from_vec(name.to_vec()));
    }
    Ok(out)
}

/// A `/proc` directory's names (every pid, every descriptor).
fn list_proc(dir: &OwnedFd) -> Result<Vec<OsString>, Errno> {
    list_at_most(dir, PROC_ENTRY_CAP).map_err(|e| match e {
        ListError::Sys(e) => e,
        ListError::TooMany(_) => Errno::NOMEM,
    })
}

/// Opens a directory read-only, without following a symlink.
pub fn open_dir(path: &Path) -> Result<OwnedFd, ReadError> {
    open_ro(None, path, OFlags::DIRECTORY).map_err(|e| match e {
        Errno::LOOP => ReadError {
            path: path.to_path_buf(),
            what: "is a symbolic link (kvcr follows none)".into(),
            denied: false,
        },
        e => ReadError::new(path, "cannot open the directory", e),
    })
}

/// A directory's entries: name, whether a regular file, size.
pub fn entries(dir: &OwnedFd) -> Result<Vec<(String, FileType, u64, i128)>, ListError> {
    let mut out = Vec::new();
    for name in list(dir)? {
        let Ok(name) = name.into_string() else {
            continue;
        };
        let st = match retry(|| rustix::fs::statat(dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)) {
            Ok(st) => st,
            Err(Errno::NOENT) => continue,
            Err(e) => return Err(e.into()),
        };
        let mtime = i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec);
        out.push((
            name,
            FileType::from_raw_mode(st.st_mode),
            st.st_size as u64,
            mtime,
        ));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Whether a directory's entries have a writer-cohort directory's shape.
pub fn is_cohort_dir(entries: &[(String, FileType, u64, i128)]) -> bool {
    let shape: Vec<(format::CohortName, bool)> = entries
        .iter()
        .map(|(n, t, ..)| (format::cohort_name(n), *t == FileType::RegularFile))
        .collect();
    format::is_cohort_shape(&shape)
}

/// One read of a cohort directory: every entry, the markers' content, the
/// cohort files' first byte and the lock of every cohort and `.leader`
/// file.
pub fn read_cohort(dir: &OwnedFd, path: &Path, locks: &LockTable) -> Result<CohortRead, ReadError> {
    let list = entries(dir).map_err(|e| e.at(path))?;
    let mut out = Vec::new();
    for (name, ty, size, mtime_ns) in list {
        use format::CohortName;
        let regular = ty == FileType::RegularFile;
        let kind = format::cohort_name(&name);
        let bytes = match kind {
            CohortName::Cohort(_) => 1,
            CohortName::Active | CohortName::Predecessor(_) | CohortName::Joining(_) => {
                MARKER_BYTES
            }
            _ => 0,
        };
        let mut e = CohortEntry {
            name: name.clone(),
            regular,
            size,
            mtime_ns,
            content: None,
            lock: None,
            unreadable: None,
        };
        if regular && (bytes > 0 || matches!(kind, CohortName::Leader(_))) {
            // A file that cannot be opened or read is "could not be read"
            // (KV235, naming it and the errno), never empty and never free.
            let fd = match open_ro(Some(dir.as_fd()), Path::new(&name), OFlags::empty()) {
                Ok(fd) => Some(fd),
                Err(Errno::NOENT) => continue,
                Err(err) => {
                    e.unreadable = Some(format!("cannot open: {}", std::io::Error::from(err)));
                    None
                }
            };
            if let Some(fd) = &fd {
                if bytes > 0 {
                    let mut b = vec![0u8; bytes];
                    match pread_full(fd, &mut b, 0) {
                        Ok(n) => {
                            b.truncate(n);
                            e.content = Some(b);
                        }
                        Err(err) => {
                            e.unreadable =
                                Some(format!("cannot read: {}", std::io::Error::from(err)))
                        }
                    }
                }
            }
            if matches!(kind, CohortName::Cohort(_) | CohortName::Leader(_)) {
                let probe = if matches!(kind, CohortName::Leader(_)) {
                    FlockOperation::NonBlockingLockShared
                } else {
                    FlockOperation::NonBlockingLockExclusive
                };
                e.lock = Some(match (&fd, &e.unreadable) {
                    (Some(fd), _) => lock_of(fd, locks, probe),
                    (None, why) => Lock::NotChecked(format!(
                        "the file {}",
                        why.as_deref().unwrap_or("cannot be opened")
                    )),
                });
            }
        }
        out.push(e);
    }
    Ok(CohortRead { entries: out })
}

// ---------------------------------------------------------------------------
// Locks and processes
// ---------------------------------------------------------------------------

/// One granted lock of `/proc/locks`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelLock {
    pub major: u32,
    pub minor: u32,
    pub ino: u64,
    /// The pid the kernel recorded (the process that took the lock; -1 for
    /// an open-file-description lock).
    pub pid: i32,
    pub exclusive: bool,
}

/// Parses `/proc/locks`: granted locks only (a line with `->` is a
/// waiter, which holds nothing). Lines that do not parse are skipped.
pub fn parse_locks(text: &str) -> Vec<KernelLock> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut f: Vec<&str> = line.split_whitespace().collect();
        if f.first().is_some_and(|t| t.ends_with(':')) {
            f.remove(0);
        }
        if f.first() == Some(&"->") || f.len() < 5 {
            continue;
        }
        // TYPE ADVISORY|MANDATORY|... READ|WRITE PID MAJ:MIN:INO START END
        let exclusive = match f[2] {
            "WRITE" => true,
            "READ" => false,
            _ => continue,
        };
        let Ok(pid) = f[3].parse::<i32>() else {
            continue;
        };
        let parts: Vec<&str> = f[4].split(':').collect();
        let [maj, min, ino] = parts.as_slice() else {
            continue;
        };
        let (Ok(major), Ok(minor), Ok(ino)) = (
            u32::from_str_radix(maj, 16),
            u32::from_str_radix(min, 16),
            ino.parse::<u64>(),
        ) else {
            continue;
        };
        out.push(KernelLock {
            major,
            minor,
            ino,
            pid,
            exclusive,
        });
    }
    out
}

/// The kernel's lock table and what kvcr could learn of the holders, read
/// once per read of the cohort directories.
pub struct LockTable {
    /// `None` when `/proc/locks` cannot be read (then every lock is probed).
    locks: Option<Vec<KernelLock>>,
    /// Whether `locks` is the whole table (`/proc/locks` was not longer
    /// than [`LOCKS_BYTES`]): a lock it does not list is then not held by a
    /// process of this PID namespace.
    complete: bool,
    /// (dev major, minor, ino) → pids whose descriptor table holds a lock
    /// on it (from `/proc/<pid>/fdinfo`), for the inodes the table lists.
    fd_holders: BTreeMap<(u32, u32, u64), BTreeSet<i32>>,
    /// Pids whose descriptor table could not be read.
    unreadable: BTreeSet<i32>,
    proc: &'static ProcFs,
}

impl LockTable {
    /// Reads `/proc/locks`, then, for the locks on `inodes` it lists, the
    /// descriptor tables of every process (which pids hold them).
    pub fn read(inodes: &BTreeSet<(u32, u32, u64)>) -> LockTable {
        let proc = ProcFs::system();
        let read = proc.read_limited("locks", LOCKS_BYTES).ok();
        let complete = read.as_ref().is_some_and(|(_, whole)| *whole);
        let locks = read.map(|(b, _)| parse_locks(&String::from_utf8_lossy(&b)));
        let mut table = LockTable {
            locks,
            complete,
            fd_holders: BTreeMap::new(),
            unreadable: BTreeSet::new(),
            proc,
        };
        let wanted: BTreeSet<(u32, u32, u64)> = table
            .locks
            .iter()
            .flatten()
            .map(|l| (l.major, l.minor, l.ino))
            .filter(|k| inodes.contains(k))
            .collect();
        if !wanted.is_empty() {
            table.scan_fds(&wanted);
        }
        table
    }

    /// Every process's descriptors: which hold a lock on a wanted inode.
    fn scan_fds(&mut self, wanted: &BTreeSet<(u32, u32, u64)>) {
        let Ok(root) = self.proc.root() else {
            return;
        };
        for pid in pids(self.proc) {
            let dir = format!("{pid}/fd");
            let fds = match open_ro(Some(root), Path::new(&dir), OFlags::DIRECTORY)
                .and_then(|d| list_proc(&d))
            {
                Ok(f) => f,
                Err(Errno::ACCESS | Errno::PERM) => {
                    self.unreadable.insert(pid);
                    continue;
                }
                Err(_) => continue,
            };
            for fd in fds {
                let fd = fd.to_string_lossy().into_owned();
                let link = format!("{pid}/fd/{fd}");
                let Ok(st) = rustix::fs::statat(root, link.as_str(), AtFlags::empty()) else {
                    continue;
                };
                let key = (
                    rustix::fs::major(st.st_dev),
                    rustix::fs::minor(st.st_dev),
                    st.st_ino,
                );
                if !wanted.contains(&key) {
                    continue;
                }
                let info = self.proc.read(&format!("{pid}/fdinfo/{fd}"));
                if info.is_ok_and(|b| b.split(|&c| c == b'\n').any(|l| l.starts_with(b"lock:"))) {
                    self.fd_holders.entry(key).or_default().insert(pid);
                }
            }
        }
    }

    /// The kernel's granted locks on one inode.
    fn on(&self, key: (u32, u32, u64)) -> Option<Vec<KernelLock>> {
        self.locks.as_ref().map(|ls| {
            ls.iter()
                .filter(|l| (l.major, l.minor, l.ino) == key)
                .copied()
                .collect()
        })
    }
}

/// The inode key of an open file, as `/proc/locks` writes it.
pub fn inode_key(fd: &OwnedFd) -> Option<(u32, u32, u64)> {
    rustix::fs::fstat(fd).ok().map(|st| {
        (
            rustix::fs::major(st.st_dev),
            rustix::fs::minor(st.st_dev),
            st.st_ino,
        )
    })
}

/// A cohort or leader file's lock: the kernel's table where it lists one,
/// else one non-blocking probe, released at once.
fn lock_of(fd: &OwnedFd, table: &LockTable, probe: FlockOperation) -> Lock {
    let Some(key) = inode_key(fd) else {
        return Lock::NotChecked("the file cannot be stat'ed".into());
    };
    match table.on(key) {
        Some(listed) if !listed.is_empty() => {
            let mut pids: BTreeSet<i32> = table.fd_holders.get(&key).cloned().unwrap_or_default();
            // A recorded pid counts when it runs and its descriptors could
            // not be read (kvcr cannot tell whether it still holds it).
            for l in &listed {
                if l.pid > 0 && table.unreadable.contains(&l.pid) {
                    pids.insert(l.pid);
                }
            }
            let exclusive = listed.iter().any(|l| l.exclusive);
            let mut holders: Vec<Holder> = pids
                .into_iter()
                .map(|pid| {
                    let (running, exiting) = process_state(table.proc, pid);
                    Holder {
                        pid,
                        exclusive,
                        running,
                        exiting,
                    }
                })
                .collect();
            if holders.is_empty() {
                // Listed, but no process could be named: the recorded pid
                // (gone, or reused by another process).
                if let Some(l) = listed.iter().find(|l| l.pid > 0) {
                    holders.push(Holder {
                        pid: l.pid,
                        exclusive,
                        running: false,
                        exiting: false,
                    });
                }
            }
            Lock::Held { holders }
        }
        _ => match retry(|| rustix::fs::flock(fd, probe)) {
            Ok(()) => {
                let _ = rustix::fs::flock(fd, FlockOperation::Unlock);
                Lock::Free
            }
            Err(Errno::WOULDBLOCK) => Lock::NotChecked(match (&table.locks, table.complete) {
                (None, _) => "held, and the kernel's lock table (/proc/locks) could not be read, \
                              so its holder cannot be named"
                    .into(),
                (Some(_), false) => format!(
                    "held, and the kernel's lock table (/proc/locks) is longer than the \
                     {LOCKS_BYTES} bytes kvcr reads: its holder may be listed past them"
                ),
                (Some(_), true) => "held by a process the kernel's lock table does not show \
                                    (outside this PID namespace)"
                    .into(),
            }),
            Err(e) => Lock::NotChecked(format!("the probe failed: {}", std::io::Error::from(e))),
        },
    }
}

/// Every pid in `/proc`.
fn pids(proc: &ProcFs) -> Vec<i32> {
    let Ok(root) = proc.root() else {
        return Vec::new();
    };
    let Ok(d) = open_ro(Some(root), Path::new("."), OFlags::DIRECTORY) else {
        return Vec::new();
    };
    let mut out: Vec<i32> = list_proc(&d)
        .unwrap_or_default()
        .iter()
        .filter_map(|n| std::str::from_utf8(n.as_bytes()).ok()?.parse().ok())
        .collect();
    out.sort_unstable();
    out
}

/// The kernel's PF_EXITING task flag.
const PF_EXITING: u64 = 0x4;
/// SIGKILL's bit in SigPnd/ShdPnd.
const SIGKILL_BIT: u64 = 1 << 8;

/// Whether `pid` runs, and whether every thread of it is exiting (never
/// returns to user space: PF_EXITING or a pending SIGKILL), as GMS's own
/// fence tells (`_user_space_dead`). A zombie thread does not run.
pub fn process_state(proc: &ProcFs, pid: i32) -> (bool, bool) {
    let Ok(root) = proc.root() else {
        return (false, false);
    };
    let tasks = match open_ro(
        Some(root),
        Path::new(&format!("{pid}/task")),
        OFlags::DIRECTORY,
    )
    .and_then(|d| list_proc(&d))
    {
        Ok(t) => t,
        Err(_) => return (false, false),
    };
    let mut running = false;
    let mut exiting = true;
    for tid in tasks {
        let tid = tid.to_string_lossy().into_owned();
        let Ok(stat) = proc.read(&format!("{pid}/task/{tid}/stat")) else {
            continue;
        };
        let Some((state, flags)) = parse_task_stat(&stat) else {
            continue;
        };
        if matches!(state, b'Z' | b'X' | b'x') {
            continue;
        }
        running = true;
        let status = proc
            .read(&format!("{pid}/task/{tid}/status"))
            .unwrap_or_default();
        if flags & PF_EXITING == 0 && !sigkill_pending(&status) {
            exiting = false;
        }
    }
    (running, running && exiting)
}

/// `/proc/<pid>/task/<tid>/stat`'s state (field 3) and flags (field 9).
pub fn parse_task_stat(stat: &[u8]) -> Option<(u8, u64)> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let state = *f.first()?.as_bytes().first()?;
    let flags = f.get(6)?.parse().ok()?;
    Some((state, flags))
}

/// Whether a task's status shows SIGKILL pending (SigPnd or ShdPnd).
pub fn sigkill_pending(status: &[u8]) -> bool {
    String::from_utf8_lossy(status).lines().any(|l| {
        (l.starts_with("SigPnd:") || l.starts_with("ShdPnd:"))
            && l.split_whitespace()
                .nth(1)
                .and_then(|v| u64::from_str_radix(v, 16).ok())
                .is_some_and(|v| v & SIGKILL_BIT != 0)
    })
}

/// What `--live` needs for the lease rings, for every ring: the live
/// process behind each owner hash the reads saw (under GMS's default owner
/// id, every engine name and every device). [`ring_live`] makes it one
/// ring's.
pub fn lease_live(wanted: &BTreeSet<u64>) -> LeaseLive {
    let proc = ProcFs::system();
    let mut live = LeaseLive::default();
    if let Some(why) = proc.untrusted() {
        live.not_checked = Some(why.to_string());
        return live;
    }
    live.devices = devices(proc);
    if !wanted.is_empty() {
        for pid in pids(proc) {
            let Ok(p) = u32::try_from(pid) else { continue };
            for engine in format::ENGINES {
                for device in 0..live.devices {
                    let h = format::owner_hash(&format::default_owner_id(engine, p, device));
                    if wanted.contains(&h) {
                        live.owners.insert(
                            h,
                            OwnerId {
                                engine,
                                pid: p,
                                device,
                            },
                        );
                    }
                }
            }
        }
    }
    live
}

/// One ring's `--live` facts (docs/format.md §14.2): the pids a ring
/// records (in its owner ids, `recovery_owner_pid`) are its writers' PID
/// namespace's, so they are compared with this namespace's processes only
/// when every other process that has the ring open or mapped runs in this
/// PID namespace, and at least one does; otherwise nothing is judged alive
/// or gone, and `not_checked` says why.
pub fn ring_live(base: &LeaseLive, ring: &Opened, recovery_pid: Option<u64>) -> LeaseLive {
    let mut live = base.clone();
    if live.not_checked.is_some() {
        return live;
    }
    let proc = ProcFs::system();
    let ns = inode_key(&ring.fd)
        .ok_or_else(|| "the ring cannot be stat'ed".to_string())
        .and_then(|key| ring_namespace(proc, key));
    match ns {
        Err(why) => {
            live.not_checked = Some(why);
            live.owners.clear();
        }
        Ok(()) => {
            live.recovery_owner_alive = recovery_pid
                .and_then(|p| i32::try_from(p).ok())
                .map(|p| p > 0 && process_state(proc, p).0)
        }
    }
    live
}

/// The (device, inode) pairs a process maps, from `/proc/<pid>/maps`
/// (`start-end perms offset MAJ:MIN inode path`, MAJ:MIN in hex).
pub fn parse_maps(text: &[u8]) -> BTreeSet<(u32, u32, u64)> {
    let mut out = BTreeSet::new();
    for line in String::from_utf8_lossy(text).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(dev), Some(ino)) = (f.get(3), f.get(4)) else {
            continue;
        };
        let Some((maj, min)) = dev.split_once(':') else {
            continue;
        };
        if let (Ok(a), Ok(b), Ok(i)) = (
            u32::from_str_radix(maj, 16),
            u32::from_str_radix(min, 16),
            ino.parse::<u64>(),
        ) {
            if i != 0 {
                out.insert((a, b, i));
            }
        }
    }
    out
}

/// Whether `pid` has the file `key` open (a descriptor) or mapped.
fn uses(proc: &ProcFs, root: BorrowedFd<'_>, pid: i32, key: (u32, u32, u64)) -> bool {
    if proc
        .read(&format!("{pid}/maps"))
        .is_ok_and(|m| parse_maps(&m).contains(&key))
    {
        return true;
    }
    let dir = format!("{pid}/fd");
    let Ok(fds) =
        open_ro(Some(root), Path::new(&dir), OFlags::DIRECTORY).and_then(|d| list_proc(&d))
    else {
        return false;
    };
    fds.iter().any(|fd| {
        let link = format!("{pid}/fd/{}", fd.to_string_lossy());
        rustix::fs::statat(root, link.as_str(), AtFlags::empty()).is_ok_and(|st| {
            (
                rustix::fs::major(st.st_dev),
                rustix::fs::minor(st.st_dev),
                st.st_ino,
            ) == key
        })
    })
}

/// Whether the pids a ring records are this PID namespace's: `Ok` when
/// some other process of this namespace has the ring open or mapped and
/// none of another namespace does (processes whose tables this user
/// cannot read are not counted); `Err` says why it cannot be told.
fn ring_namespace(proc: &ProcFs, key: (u32, u32, u64)) -> Result<(), String> {
    let root = proc.root()?;
    let ns = |rel: &str| {
        retry(|| rustix::fs::statat(root, rel, AtFlags::empty()))
            .map(|st| st.st_ino)
            .map_err(std::io::Error::from)
    };
    let ours = ns("self/ns/pid").map_err(|e| {
        format!(
            "this process's PID namespace cannot be read ({}: {e})",
            proc.display("self/ns/pid")
        )
    })?;
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let mut users = 0usize;
    for pid in pids(proc) {
        if pid == me || !uses(proc, root, pid, key) {
            continue;
        }
        match ns(&format!("{pid}/ns/pid")) {
            Ok(n) if n == ours => users += 1,
            Ok(n) => {
                return Err(format!(
                    "pid {pid}, which has the ring open or mapped, runs in another PID namespace \
                     (pid:[{n}]; kvcr runs in pid:[{ours}]), so the pids the ring records may be \
                     that namespace's"
                ))
            }
            Err(e) => {
                return Err(format!(
                    "the PID namespace of pid {pid}, which has the ring open or mapped, cannot \
                     be read ({e})"
                ))
            }
        }
    }
    if users == 0 {
        return Err(
            "no process of kvcr's PID namespace has the ring open or mapped, so whose \
                    PID namespace the pids it records belong to cannot be told (GMS may run in \
                    another container)"
                .to_string(),
        );
    }
    Ok(())
}

/// The devices a default owner id may name: the node's GPUs as
/// `/proc/driver/nvidia/gpus` lists them, at least 8 when it lists none.
fn devices(proc: &ProcFs) -> u32 {
    let n = proc
        .gpus_dir()
        .ok()
        .and_then(|d| crate::io::node::gpus::read_proc_gpus(&d).ok().flatten())
        .map_or(0, |g| g.len() as u32);
    n.max(8)
}

// ---------------------------------------------------------------------------
// Where GMS puts its artifacts
// ---------------------------------------------------------------------------

/// A place discovery looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    /// A directory of lease rings (`gms-kv-lease-*.shm`).
    LeaseDir(PathBuf),
    /// One lease ring (`GMS_<ENGINE>_KV_LEASE_SHM_PATH`).
    LeaseFile(PathBuf),
    /// A writer-cohort directory.
    CohortDir(PathBuf),
    /// Recovery metadata.
    Recovery(PathBuf),
    /// A superseded block index (`GMS_KV_INDEX_PATH`) and its `.gen`.
    Index(PathBuf),
}

impl Place {
    pub fn path(&self) -> &Path {
        match self {
            Place::LeaseDir(p)
            | Place::LeaseFile(p)
            | Place::CohortDir(p)
            | Place::Recovery(p)
            | Place::Index(p) => p,
        }
    }

    /// What is looked for there, for "where kvcr looked".
    pub fn what(&self) -> &'static str {
        match self {
            Place::LeaseDir(_) => "lease rings (gms-kv-lease-*.shm)",
            Place::LeaseFile(_) => "a lease ring",
            Place::CohortDir(_) => "a writer-cohort directory",
            Place::Recovery(_) => "recovery metadata",
            Place::Index(_) => "a superseded block index",
        }
    }
}

/// Where GMS would put its artifacts, from the environment as GMS reads it
/// (docs/format.md §14.1). `dev_shm_is_dir` and `tmp` stand for the
/// checks GMS makes itself (`/dev/shm` exists, else the temp directory).
pub fn places(env: &dyn Fn(&str) -> Option<OsString>, dev_shm_is_dir: bool) -> Vec<Place> {
    let mut out: Vec<Place> = Vec::new();
    let mut push = |p: Place| {
        if !out.contains(&p) {
            out.push(p);
        }
    };
    let set = |k: &str| env(k).filter(|v| !v.is_empty());
    for engine in format::ENGINES {
        let e = format::engine_env(engine);
        // GMS falls back from the per-engine variable to the generic one
        // only when the first is unset (`is None`); an empty value means
        // "none": no explicit path, the default directory.
        let explicit = match env(&format!("GMS_{e}_KV_LEASE_SHM_PATH")) {
            Some(v) => Some(v),
            None => env("GMS_KV_LEASE_SHM_PATH"),
        }
        .filter(|v| !v.is_empty());
        if let Some(p) = explicit {
            push(Place::LeaseFile(PathBuf::from(p)));
            continue;
        }
        let dir = env(&format!("GMS_{e}_KV_LEASE_SHM_DIR"))
            .or_else(|| env("GMS_KV_LEASE_SHM_DIR"))
            .filter(|v| !v.is_empty());
        let dir = dir.map(PathBuf::from).unwrap_or_else(|| {
            if dev_shm_is_dir {
                PathBuf::from("/dev/shm")
            } else {
                set("TMPDIR").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from)
            }
        });
        push(Place::LeaseDir(dir));
    }
    let lock = env("FAILOVER_LOCK_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(format::FAILOVER_LOCK_DEFAULT));
    for suffix in [format::VLLM_WRITERS, format::SGLANG_WRITERS] {
        let mut name = lock
            .file_name()
            .map(|n| n.to_os_string())
            .unwrap_or_default();
        name.push(suffix);
        push(Place::CohortDir(lock.with_file_name(name)));
    }
    let recovery = match env("DYN_KV_RECOVERY_PATH") {
        Some(p) => Some(PathBuf::from(p)).filter(|p| !p.as_os_str().is_empty()),
        None => Some(
            env("GMS_SOCKET_DIR")
                .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from)
                .join("kv-recovery.mmap"),
        ),
    };
    if let Some(p) = recovery {
        push(Place::Recovery(p));
    }
    if let Some(p) = set("GMS_KV_INDEX_PATH") {
        push(Place::Index(PathBuf::from(p)));
    }
    out
}

/// What a directory of lease rings holds: its `gms-kv-lease-*.shm` regular
/// files, by name.
pub fn lease_files(dir: &Path) -> Result<Vec<PathBuf>, ReadError> {
    let d = open_dir(dir)?;
    let list = entries(&d).map_err(|e| e.at(dir))?;
    Ok(list
        .into_iter()
        .filter(|(n, t, ..)| *t == FileType::RegularFile && format::is_lease_file_name(n))
        .map(|(n, ..)| dir.join(n))
        .collect())
}

/// What kind of entry a path is, without following a symlink.
pub fn lstat_kind(path: &Path) -> Result<Option<FileType>, ReadError> {
    match retry(|| rustix::fs::lstat(path)) {
        Ok(st) => Ok(Some(FileType::from_raw_mode(st.st_mode))),
        Err(Errno::NOENT | Errno::NOTDIR) => Ok(None),
        Err(e) => Err(ReadError::new(path, "cannot stat", e)),
    }
}

/// Recognises an open file by its first bytes.
pub fn recognise(o: &Opened) -> Result<Option<Magic>, Errno> {
    Ok(format::recognise(&head(o)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The format GMS's own fence parses (`_lock_owner_pids` in
    /// `process_lifecycle.py`): granted locks, waiters (`->`) skipped,
    /// MAJ:MIN in hex, the inode in decimal.
    #[test]
    fn proc_locks_parse_as_the_kernel_writes_them() {
        let text = "1: FLOCK  ADVISORY  READ 25774 fe:00:10010796 0 EOF\n\
                    1: -> FLOCK  ADVISORY  WRITE 25816 fe:00:10010796 0 EOF\n\
                    2: POSIX  ADVISORY  WRITE 23177 08:01:5521527 0 EOF\n\
                    3: OFDLCK ADVISORY  READ -1 fe:00:7 0 EOF\n\
                    garbage\n";
        let l = parse_locks(text);
        assert_eq!(l.len(), 3);
        assert_eq!(
            l[0],
            KernelLock {
                major: 0xfe,
                minor: 0,
                ino: 10010796,
                pid: 25774,
                exclusive: false
            }
        );
        assert_eq!((l[1].major, l[1].minor, l[1].exclusive), (8, 1, true));
        assert_eq!(l[2].pid, -1);
    }

    /// A table cut at kvcr's limit is incomplete: a lock it does not list,
    /// that a probe finds held, is "not checked" because of the limit,
    /// never "free" and never "outside this PID namespace".
    #[test]
    fn a_lock_table_longer_than_kvcr_reads_is_incomplete() {
        let proc = ProcFs::system();
        if proc.untrusted().is_some() {
            return;
        }
        let (head, whole) = proc.read_limited("self/status", 8).unwrap();
        assert_eq!((head.len(), whole), (8, false));
        let (_, whole) = proc.read_limited("self/status", 1 << 20).unwrap();
        assert!(whole);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cohort");
        std::fs::write(&p, b"").unwrap();
        let holder = open_file(&p).unwrap();
        rustix::fs::flock(&holder.fd, FlockOperation::NonBlockingLockShared).unwrap();
        let probed = open_file(&p).unwrap();
        let table = |complete| LockTable {
            locks: Some(Vec::new()),
            complete,
            fd_holders: BTreeMap::new(),
            unreadable: BTreeSet::new(),
            proc,
        };
        let probe = FlockOperation::NonBlockingLockExclusive;
        match lock_of(&probed.fd, &table(false), probe) {
            Lock::NotChecked(why) => assert!(why.contains("longer than"), "{why}"),
            l => panic!("{l:?}"),
        }
        match lock_of(&probed.fd, &table(true), probe) {
            Lock::NotChecked(why) => assert!(why.contains("PID namespace"), "{why}"),
            l => panic!("{l:?}"),
        }
        rustix::fs::flock(&holder.fd, FlockOperation::Unlock).unwrap();
        assert_eq!(lock_of(&probed.fd, &table(false), probe), Lock::Free);
    }

    /// GMS's `_user_space_dead`: field 9 of the task's stat (after the
    /// command's closing parenthesis, index 6), PF_EXITING 0x4; SIGKILL
    /// pending in SigPnd or ShdPnd.
    #[test]
    fn task_stat_and_status_parse() {
        let stat = b"123 (a) b) c) S 1 123 123 0 -1 4194560 0 0";
        assert_eq!(parse_task_stat(stat), Some((b'S', 4194560)));
        let exiting = b"9 (x) D 1 9 9 0 -1 4194564 0";
        assert_eq!(parse_task_stat(exiting).map(|s| s.1 & PF_EXITING), Some(4));
        assert_eq!(parse_task_stat(b"no parenthesis"), None);
        assert!(sigkill_pending(b"Name:\tx\nSigPnd:\t0000000000000100\n"));
        assert!(sigkill_pending(b"ShdPnd:\t0000000000000100\n"));
        assert!(!sigkill_pending(b"SigPnd:\t0000000000000002\nShdPnd:\t0\n"));
    }

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let v: Vec<(String, String)> = pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        move |k| {
            v.iter()
                .find(|(n, _)| n == k)
                .map(|(_, x)| OsString::from(x))
        }
    }

    /// `_kv_lease_shm_path` and `_kv_lease_shm_dir` (`kv_lease_client.py` @
    /// 12860c91), `_directory` (vLLM and SGLang `writer_lifecycle.py`), the
    /// vLLM recovery hook's `DYN_KV_RECOVERY_PATH` / `GMS_SOCKET_DIR` or
    /// `/tmp`.
    #[test]
    fn places_are_where_gms_puts_them() {
        let none = places(&env(&[]), true);
        assert_eq!(
            none,
            [
                Place::LeaseDir("/dev/shm".into()),
                Place::CohortDir("/shared/failover.lock.vllm-writers".into()),
                Place::CohortDir("/shared/failover.lock.writers".into()),
                Place::Recovery("/tmp/kv-recovery.mmap".into()),
            ]
        );
        assert_eq!(
            places(&env(&[("TMPDIR", "/t")]), false)[0],
            Place::LeaseDir("/t".into())
        );
        let dirs = places(
            &env(&[
                ("GMS_KV_LEASE_SHM_DIR", "/d"),
                ("GMS_SGLANG_KV_LEASE_SHM_DIR", "/s"),
                ("GMS_TRTLLM_KV_LEASE_SHM_DIR", ""),
                ("FAILOVER_LOCK_PATH", "/run/x/lock"),
                ("GMS_SOCKET_DIR", "/sock"),
                ("GMS_KV_INDEX_PATH", "/idx"),
            ]),
            true,
        );
        assert_eq!(
            dirs,
            [
                Place::LeaseDir("/d".into()),
                Place::LeaseDir("/s".into()),
                // An empty per-engine directory does not fall through.
                Place::LeaseDir("/dev/shm".into()),
                Place::CohortDir("/run/x/lock.vllm-writers".into()),
                Place::CohortDir("/run/x/lock.writers".into()),
                Place::Recovery("/sock/kv-recovery.mmap".into()),
                Place::Index("/idx".into()),
            ]
        );
        // An explicit path replaces the engine's directory; an empty
        // per-engine path does not fall through to the generic one.
        let paths = places(
            &env(&[
                ("GMS_VLLM_KV_LEASE_SHM_PATH", "/v.shm"),
                ("GMS_SGLANG_KV_LEASE_SHM_PATH", ""),
                ("GMS_KV_LEASE_SHM_PATH", "/g.shm"),
            ]),
            true,
        );
        assert_eq!(
            paths[..3],
            [
                Place::LeaseFile("/v.shm".into()),
                Place::LeaseDir("/dev/shm".into()),
                Place::LeaseFile("/g.shm".into()),
            ]
        );
        let explicit = places(&env(&[("DYN_KV_RECOVERY_PATH", "/r.mmap")]), true);
        assert!(explicit.contains(&Place::Recovery("/r.mmap".into())));
        let empty = places(&env(&[("DYN_KV_RECOVERY_PATH", "")]), true);
        assert!(!empty.iter().any(|p| matches!(p, Place::Recovery(_))));
    }
}
