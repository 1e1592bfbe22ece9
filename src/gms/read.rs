//! Everything the GMS reader does to the system (docs/format.md §14.7):
//! where GMS puts its artifacts, read-only opens, the two reads, the
//! kernel's lock table, the cohort probe and the processes `--live` asks
//! about. Nothing here judges (that is `crate::gms::rules`).
//!
//! Every file is opened `O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK |
//! O_NOCTTY`, with `O_NOATIME` where the kernel allows it (the file's
//! owner, or CAP_FOWNER), and read with `pread`: nothing is ever created,
//! written, truncated, renamed or unlinked. No lock is ever taken on a
//! lease ring or on recovery metadata. On a cohort file whose lock the
//! kernel's table does not list, one non-blocking probe (exclusive on a
//! cohort file, shared on a `.leader`, as GMS's own liveness probe) is
//! taken and released at once.

use crate::gms::format::{self as format, Magic, Superseded};
use crate::gms::rules::{
    CohortEntry, CohortRead, Holder, LeaseLive, LeaseRead, LeaseScan, Lock, OwnerId, RecoveryRead,
    RecoveryScan, SupersededRead,
};
use crate::io::procfs::ProcFs;
use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags};
use rustix::io::Errno;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

fn retry<T>(mut f: impl FnMut() -> Result<T, Errno>) -> Result<T, Errno> {
    loop {
        match f() {
            Err(Errno::INTR) => continue,
            r => return r,
        }
    }
}

/// Opens `name` beneath `dir` (or `name` itself when `dir` is `None`)
/// read-only, without following a symlink, with `O_NOATIME` when allowed.
fn open_ro(dir: Option<BorrowedFd<'_>>, name: &Path, extra: OFlags) -> Result<OwnedFd, Errno> {
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

/// A file's identity as `/proc/locks` writes it: (device major, minor,
/// inode).
pub type Key = (u32, u32, u64);

fn key_of(st: &rustix::fs::Stat) -> Key {
    (
        rustix::fs::major(st.st_dev),
        rustix::fs::minor(st.st_dev),
        st.st_ino,
    )
}

/// Where a file is: a directory kvcr holds open and a name beneath it
/// (bytes), and the path it is shown by. Every open below the directory
/// goes relative to its descriptor, so a directory swapped for a symlink
/// after kvcr opened it is never followed (docs/format.md §14.7).
#[derive(Clone, Debug)]
pub struct Loc {
    pub dir: Arc<OwnedFd>,
    pub name: OsString,
    pub path: PathBuf,
}

impl Loc {
    /// The entry `name` of the directory `dir`, shown as `shown/name`.
    pub fn below(dir: &Arc<OwnedFd>, shown: &Path, name: &OsStr) -> Loc {
        Loc {
            dir: dir.clone(),
            name: name.to_os_string(),
            path: shown.join(name),
        }
    }

    /// What the entry is, from its `statx` beneath the directory (a
    /// symlink is not followed; nothing is opened): `None` when it does
    /// not exist.
    pub fn stat(&self) -> Result<Option<rustix::fs::Stat>, ReadError> {
        match retry(|| rustix::fs::statat(&*self.dir, &self.name, AtFlags::SYMLINK_NOFOLLOW)) {
            Ok(st) => Ok(Some(st)),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(ReadError::new(&self.path, "cannot stat", e)),
        }
    }

    /// Opens the regular file for reading (docs/format.md §14.7): refused
    /// from its `statx` before any open when it is anything else (a FIFO
    /// or a device is never opened), then named by an `O_PATH` descriptor
    /// (which opens nothing), checked to be that same regular file, and
    /// reopened for reading through the trusted `/proc`. `expect` is the
    /// identity its listing saw: another file there now was swapped in.
    pub fn open(&self, expect: Option<Key>) -> Result<Opened, ReadError> {
        open_regular_at(self.dir.as_fd(), &self.name, expect).map_err(|r| r.at(&self.path))
    }

    /// Opens the directory (a writer-cohort directory below a listed one),
    /// refused from its `statx` when it is anything else.
    pub fn open_dir(&self, expect: Option<Key>) -> Result<OwnedFd, ReadError> {
        open_dir_at(self.dir.as_fd(), &self.name, expect).map_err(|r| r.at(&self.path))
    }
}

/// Why an entry beneath a directory was not opened.
#[derive(Debug)]
pub enum Refused {
    /// The kernel's answer.
    Os(&'static str, Errno),
    /// Not what was wanted: what it is, in words; never opened.
    Type(&'static str, &'static str),
    /// Another file than the one listed (swapped in since).
    Replaced(Key, Key),
}

impl Refused {
    pub fn at(self, path: &Path) -> ReadError {
        match self {
            Refused::Os(what, e) => ReadError::new(path, what, e),
            Refused::Type(want, is) => ReadError {
                path: path.to_path_buf(),
                what: format!("is a {is}, not a {want}: not opened"),
                denied: false,
            },
            Refused::Replaced(a, b) => ReadError {
                path: path.to_path_buf(),
                what: format!(
                    "was replaced while kvcr read it (listed as {}:{} inode {}, now {}:{} inode \
                     {}): not read; run kvcr again",
                    a.0, a.1, a.2, b.0, b.1, b.2
                ),
                denied: false,
            },
        }
    }
}

/// Words for a file type.
pub fn type_words(t: FileType) -> &'static str {
    match t {
        FileType::RegularFile => "regular file",
        FileType::Directory => "directory",
        FileType::Symlink => "symbolic link (kvcr follows none)",
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Unknown => "file of an unknown type",
    }
}

fn statx_at(dir: BorrowedFd<'_>, name: &OsStr) -> Result<rustix::fs::Stat, Refused> {
    retry(|| rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW))
        .map_err(|e| Refused::Os("cannot stat", e))
}

fn same(expect: Option<Key>, st: &rustix::fs::Stat) -> Result<(), Refused> {
    match expect {
        Some(k) if k != key_of(st) => Err(Refused::Replaced(k, key_of(st))),
        _ => Ok(()),
    }
}

/// [`Loc::open`] beneath an open directory.
pub fn open_regular_at(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    expect: Option<Key>,
) -> Result<Opened, Refused> {
    let want = FileType::RegularFile;
    let st = statx_at(dir, name)?;
    let ty = FileType::from_raw_mode(st.st_mode);
    if ty != want {
        return Err(Refused::Type(type_words(want), type_words(ty)));
    }
    same(expect, &st)?;
    let key = key_of(&st);
    let path_fd = retry(|| {
        rustix::fs::openat(
            dir,
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
    })
    .map_err(|e| Refused::Os("cannot open", e))?;
    let st = rustix::fs::fstat(&path_fd).map_err(|e| Refused::Os("cannot stat", e))?;
    let ty = FileType::from_raw_mode(st.st_mode);
    if ty != want {
        return Err(Refused::Type(type_words(want), type_words(ty)));
    }
    same(Some(key), &st)?;
    let fd = match crate::io::safe_file::reopen_for_reading(&path_fd) {
        Ok(f) => OwnedFd::from(f),
        // A `/proc` that is not procfs (the test hook) cannot reopen the
        // O_PATH descriptor: the name is opened beneath the same directory
        // instead, without following, and checked to be the same file.
        Err(_) if ProcFs::system().untrusted().is_some() => {
            open_ro(Some(dir), Path::new(name), OFlags::empty())
                .map_err(|e| Refused::Os("cannot open", e))?
        }
        Err(e) => {
            return Err(Refused::Os(
                "cannot open",
                e.raw_os_error().map_or(Errno::IO, Errno::from_raw_os_error),
            ))
        }
    };
    let st = rustix::fs::fstat(&fd).map_err(|e| Refused::Os("cannot stat", e))?;
    let ty = FileType::from_raw_mode(st.st_mode);
    if ty != want {
        return Err(Refused::Type(type_words(want), type_words(ty)));
    }
    same(Some(key), &st)?;
    Ok(Opened { fd, key })
}

/// [`Loc::open_dir`] beneath an open directory: `O_DIRECTORY` refuses
/// anything but a directory before it is opened.
pub fn open_dir_at(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    expect: Option<Key>,
) -> Result<OwnedFd, Refused> {
    let want = FileType::Directory;
    let st = statx_at(dir, name)?;
    let ty = FileType::from_raw_mode(st.st_mode);
    if ty != want {
        return Err(Refused::Type(type_words(want), type_words(ty)));
    }
    same(expect, &st)?;
    let listed = key_of(&st);
    let fd = open_ro(Some(dir), Path::new(name), OFlags::DIRECTORY).map_err(|e| match e {
        Errno::LOOP | Errno::NOTDIR => {
            Refused::Type(type_words(want), type_words(FileType::Symlink))
        }
        e => Refused::Os("cannot open the directory", e),
    })?;
    let st = rustix::fs::fstat(&fd).map_err(|e| Refused::Os("cannot stat", e))?;
    same(Some(listed), &st)?;
    Ok(fd)
}

/// An open regular file, and its identity.
pub struct Opened {
    pub fd: OwnedFd,
    pub key: Key,
}

/// Opens a regular file named by its path: its directory by path, the
/// name beneath it (tests).
#[cfg(test)]
pub fn open_file(path: &Path) -> Result<Opened, ReadError> {
    let dir = Arc::new(open_dir(path.parent().unwrap_or(Path::new(".")))?);
    Loc::below(&dir, Path::new(""), path.file_name().unwrap_or_default()).open(None)
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
    ask: &crate::gms::rules::RecoveryAsk,
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
    let Some(n) = crate::gms::rules::recovery_blocks(size, ask) else {
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
pub fn read_superseded(o: &Opened, s: Superseded, at: &Loc) -> Result<SupersededRead, Errno> {
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
        beside: beside(at, s),
    })
}

/// The files beside a superseded file that belong to it, by name only
/// (bytes, listed beneath the directory it was read in; shown escaped): a
/// DYNKVIX1 store's `.rank<R>` answers, `.status.jsonl` and `.tmp`; a
/// snapshot's `.gen`, `.del` and `.tmp`.
fn beside(at: &Loc, s: Superseded) -> Vec<String> {
    let Ok(d) = open_ro(Some(at.dir.as_fd()), Path::new("."), OFlags::DIRECTORY) else {
        return Vec::new();
    };
    let Ok(entries) = list(&d) else {
        return Vec::new();
    };
    let mut prefix = at.name.as_bytes().to_vec();
    prefix.push(b'.');
    let mut out: Vec<Vec<u8>> = entries
        .into_iter()
        .map(OsString::into_vec)
        .filter(|n| {
            n.strip_prefix(prefix.as_slice())
                .is_some_and(|rest| match s {
                    Superseded::Dynkvix1 => {
                        rest == b"status.jsonl"
                            || rest == b"tmp"
                            || rest
                                .strip_prefix(b"rank")
                                .is_some_and(|r| !r.is_empty() && r.iter().all(u8::is_ascii_digit))
                    }
                    Superseded::Gmskvix1 | Superseded::Gmskvix2 => {
                        matches!(rest, b"gen" | b"del" | b"tmp")
                    }
                    Superseded::Gmskvgn1 => rest == b"tmp",
                })
        })
        .collect();
    out.sort();
    out.iter()
        .map(|n| crate::format::names::display_bytes(n))
        .collect()
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
        // O_NOFOLLOW|O_DIRECTORY on a symlink is ENOTDIR on Linux.
        Errno::LOOP | Errno::NOTDIR
            if e == Errno::LOOP
                || rustix::fs::lstat(path)
                    .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink) =>
        {
            ReadError {
                path: path.to_path_buf(),
                what: "is a symbolic link (kvcr follows none)".into(),
                denied: false,
            }
        }
        e => ReadError::new(path, "cannot open the directory", e),
    })
}

/// One entry of a directory, from its `statx` beneath the directory
/// (nothing opened, no symlink followed).
#[derive(Clone, Debug)]
pub struct Entry {
    /// The name as the directory holds it: bytes, not necessarily UTF-8.
    pub name: OsString,
    pub ty: FileType,
    pub size: u64,
    pub mtime_ns: i128,
    pub key: Key,
}

/// A directory's entries, every name kept as bytes (one that is not UTF-8
/// is an entry like any other: judged by content, counted in the shape
/// test and the cap), sorted by name.
pub fn entries(dir: &OwnedFd) -> Result<Vec<Entry>, ListError> {
    let mut out = Vec::new();
    for name in list(dir)? {
        let st = match retry(|| rustix::fs::statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW)) {
            Ok(st) => st,
            Err(Errno::NOENT) => continue,
            Err(e) => return Err(e.into()),
        };
        let mtime_ns = i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec);
        out.push(Entry {
            name,
            ty: FileType::from_raw_mode(st.st_mode),
            size: st.st_size as u64,
            mtime_ns,
            key: key_of(&st),
        });
    }
    out.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    Ok(out)
}

/// Whether a directory's entries have a writer-cohort directory's shape.
pub fn is_cohort_dir(entries: &[Entry]) -> bool {
    let shape: Vec<(format::CohortName, bool)> = entries
        .iter()
        .map(|e| {
            (
                format::cohort_name_of(e.name.as_bytes()),
                e.ty == FileType::RegularFile,
            )
        })
        .collect();
    format::is_cohort_shape(&shape)
}

/// One read of a cohort directory: every entry, the markers' content, the
/// cohort files' first byte and the lock of every cohort and `.leader`
/// file.
pub fn read_cohort(dir: &OwnedFd, path: &Path, locks: &LockTable) -> Result<CohortRead, ReadError> {
    let list = entries(dir).map_err(|e| e.at(path))?;
    let mut out = Vec::new();
    for Entry {
        name,
        ty,
        size,
        mtime_ns,
        key,
    } in list
    {
        use format::CohortName;
        let regular = ty == FileType::RegularFile;
        let kind = format::cohort_name_of(name.as_bytes());
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
            // Dir-relative, refused from its statx when no longer the
            // regular file listed (docs/format.md §14.7).
            let fd = match open_regular_at(dir.as_fd(), &name, Some(key)) {
                Ok(o) => Some(o.fd),
                Err(Refused::Os(_, Errno::NOENT)) => continue,
                Err(Refused::Os(what, err)) => {
                    e.unreadable = Some(format!("{what}: {}", std::io::Error::from(err)));
                    None
                }
                Err(r @ (Refused::Type(..) | Refused::Replaced(..))) => {
                    e.unreadable = Some(r.at(Path::new(&name)).what);
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
        let Some(crate::io::node::proc::Stat { state, flags, .. }) =
            crate::io::node::proc::parse_stat(&stat)
        else {
            continue;
        };
        if matches!(state, 'Z' | 'X' | 'x') {
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
/// PID namespace, and at least one does (`namespace`, the ring's answer
/// of [`ring_namespaces`]); otherwise nothing is judged alive or gone,
/// and `not_checked` says why.
pub fn ring_live(
    base: &LeaseLive,
    namespace: &Result<(), String>,
    recovery_pid: Option<u64>,
) -> LeaseLive {
    let mut live = base.clone();
    if live.not_checked.is_some() {
        return live;
    }
    match namespace {
        Err(why) => {
            live.not_checked = Some(why.clone());
            live.owners.clear();
        }
        Ok(()) => {
            live.recovery_owner_alive = recovery_pid
                .and_then(|p| i32::try_from(p).ok())
                .map(|p| p > 0 && process_state(ProcFs::system(), p).0)
        }
    }
    live
}

/// The (device, inode) pair one line of `/proc/<pid>/maps` maps
/// (`start-end perms offset MAJ:MIN inode path`, MAJ:MIN in hex); `None`
/// for an anonymous mapping or a line that does not parse.
pub fn parse_maps_line(line: &[u8]) -> Option<Key> {
    let mut f = line
        .split(|b| b.is_ascii_whitespace())
        .filter(|x| !x.is_empty());
    let dev = std::str::from_utf8(f.nth(3)?).ok()?;
    let ino = std::str::from_utf8(f.next()?).ok()?;
    let (maj, min) = dev.split_once(':')?;
    let key = (
        u32::from_str_radix(maj, 16).ok()?,
        u32::from_str_radix(min, 16).ok()?,
        ino.parse::<u64>().ok()?,
    );
    (key.2 != 0).then_some(key)
}

/// How long one `/proc/<pid>/maps` is read before it is given up as "not
/// read whole" (a table of a million mappings reads in well under this).
pub const MAPS_SECONDS: u64 = 10;

/// Which of `keys` `pid` maps, from its whole `/proc/<pid>/maps`
/// (streamed: no length cuts it short). `Ok(None)`: the table cannot be
/// read (the process is gone, or this user may not read it: not counted);
/// `Err` says why it was not read whole (then whether it maps a ring is
/// not checked, never "not mapped").
pub fn maps(
    proc: &ProcFs,
    pid: i32,
    keys: &BTreeSet<Key>,
) -> Result<Option<BTreeSet<Key>>, String> {
    let rel = format!("{pid}/maps");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(MAPS_SECONDS);
    let mut found = BTreeSet::new();
    match proc.read_lines(&rel, deadline, |l| {
        if let Some(k) = parse_maps_line(l).filter(|k| keys.contains(k)) {
            found.insert(k);
        }
    }) {
        Ok(true) => Ok(Some(found)),
        Ok(false) => Err(format!(
            "pid {pid}'s memory map ({}) could not be read whole within {MAPS_SECONDS} s, so \
             whether it maps the ring is not checked",
            proc.display(&rel)
        )),
        Err(Err(why)) => Err(why),
        Err(Ok(_)) => Ok(None),
    }
}

/// Which of `keys` `pid` has open (a descriptor) or mapped (its whole
/// memory map, [`maps`]); `Err` when that cannot be told.
fn uses(
    proc: &ProcFs,
    root: BorrowedFd<'_>,
    pid: i32,
    keys: &BTreeSet<Key>,
) -> Result<BTreeSet<Key>, String> {
    let mut used = maps(proc, pid, keys)?.unwrap_or_default();
    let dir = format!("{pid}/fd");
    if let Ok(fds) =
        open_ro(Some(root), Path::new(&dir), OFlags::DIRECTORY).and_then(|d| list_proc(&d))
    {
        for fd in fds {
            let link = format!("{pid}/fd/{}", fd.to_string_lossy());
            if let Ok(st) = rustix::fs::statat(root, link.as_str(), AtFlags::empty()) {
                if keys.contains(&key_of(&st)) {
                    used.insert(key_of(&st));
                }
            }
        }
    }
    Ok(used)
}

/// Whether the pids each ring records are this PID namespace's, for every
/// ring at once (each process's tables are read once per run, not once per
/// ring): `Ok` for a ring when some other process of this namespace has it
/// open or mapped and none of another namespace does (processes whose
/// tables this user cannot read are not counted); `Err` says why it cannot
/// be told. A process whose memory map cannot be read whole leaves every
/// ring not checked: it may map any of them.
pub fn ring_namespaces(keys: &BTreeSet<Key>) -> BTreeMap<Key, Result<(), String>> {
    let proc = ProcFs::system();
    let all = |why: String| keys.iter().map(|k| (*k, Err(why.clone()))).collect();
    let root = match proc.root() {
        Ok(r) => r,
        Err(why) => return all(why),
    };
    let ns = |rel: &str| {
        retry(|| rustix::fs::statat(root, rel, AtFlags::empty()))
            .map(|st| st.st_ino)
            .map_err(std::io::Error::from)
    };
    let ours = match ns("self/ns/pid") {
        Ok(n) => n,
        Err(e) => {
            return all(format!(
                "this process's PID namespace cannot be read ({}: {e})",
                proc.display("self/ns/pid")
            ))
        }
    };
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let mut users: BTreeMap<Key, usize> = BTreeMap::new();
    let mut why: BTreeMap<Key, String> = BTreeMap::new();
    for pid in pids(proc) {
        if pid == me || why.len() == keys.len() {
            continue;
        }
        let used = match uses(proc, root, pid, keys) {
            Ok(u) => u,
            Err(w) => {
                for k in keys {
                    why.entry(*k).or_insert_with(|| w.clone());
                }
                continue;
            }
        };
        if used.is_empty() {
            continue;
        }
        let reason = match ns(&format!("{pid}/ns/pid")) {
            Ok(n) if n == ours => {
                for k in &used {
                    *users.entry(*k).or_default() += 1;
                }
                continue;
            }
            Ok(n) => format!(
                "pid {pid}, which has the ring open or mapped, runs in another PID namespace \
                 (pid:[{n}]; kvcr runs in pid:[{ours}]), so the pids the ring records may be \
                 that namespace's"
            ),
            Err(e) => format!(
                "the PID namespace of pid {pid}, which has the ring open or mapped, cannot be \
                 read ({e})"
            ),
        };
        for k in used {
            why.entry(k).or_insert_with(|| reason.clone());
        }
    }
    keys.iter()
        .map(|k| {
            let verdict = match why.remove(k) {
                Some(w) => Err(w),
                None if users.get(k).copied().unwrap_or(0) == 0 => Err(
                    "no process of kvcr's PID namespace has the ring open or mapped, so whose \
                     PID namespace the pids it records belong to cannot be told (GMS may run \
                     in another container)"
                        .to_string(),
                ),
                None => Ok(()),
            };
            (*k, verdict)
        })
        .collect()
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

/// What a directory of lease rings holds: its `gms-kv-lease-*.shm`
/// regular files, by name (bytes, as GMS's glob matches them).
pub fn lease_files(entries: &[Entry]) -> impl Iterator<Item = &Entry> {
    entries
        .iter()
        .filter(|e| e.ty == FileType::RegularFile && format::is_lease_file_name(e.name.as_bytes()))
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

    /// A maps line names (major, minor, inode) in hex:hex and decimal; an
    /// anonymous mapping (inode 0) or a line that does not parse is none.
    #[test]
    fn a_maps_line_parses_as_the_kernel_writes_it() {
        let l = b"7f12a000-7f12b000 r--s 00000000 fe:01 10010796    /dev/shm/a b";
        assert_eq!(parse_maps_line(l), Some((0xfe, 1, 10_010_796)));
        assert_eq!(parse_maps_line(b"7f-80 rw-p 00000000 00:00 0 "), None);
        assert_eq!(parse_maps_line(b"garbage"), None);
        assert_eq!(parse_maps_line(b""), None);
    }

    /// `/proc/self/maps` streamed: every line handed over, the last one
    /// without a newline too, whatever the length; a deadline already
    /// passed is "not read whole", never a partial table taken for whole.
    #[test]
    fn a_proc_table_is_streamed_whole_or_said_not_whole() {
        let proc = ProcFs::system();
        if proc.untrusted().is_some() {
            return;
        }
        let later = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let mut lines = 0usize;
        let whole = proc.read_lines("self/maps", later, |_| lines += 1).unwrap();
        assert!(whole && lines > 3, "{lines}");
        let past = std::time::Instant::now();
        let mut none = 0usize;
        assert!(!proc.read_lines("self/maps", past, |_| none += 1).unwrap());
        assert_eq!(none, 0);
    }

    /// An entry is classified from its statx before any open: a FIFO is
    /// refused without being opened (an open of a FIFO for reading without
    /// O_NONBLOCK would block; with it, it would still be an open), a
    /// directory is no file, a file swapped since its listing is refused.
    #[test]
    fn only_the_regular_file_listed_is_opened() {
        let dir = tempfile::tempdir().unwrap();
        let d = open_dir(dir.path()).unwrap();
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        match open_regular_at(d.as_fd(), OsStr::new("fifo"), None) {
            Err(Refused::Type(_, "FIFO")) => {}
            r => panic!("{:?}", r.map(|o| o.key)),
        }
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        assert!(matches!(
            open_regular_at(d.as_fd(), OsStr::new("sub"), None),
            Err(Refused::Type(_, "directory"))
        ));
        std::fs::write(dir.path().join("a"), b"x").unwrap();
        let first = open_regular_at(d.as_fd(), OsStr::new("a"), None).unwrap();
        // Renamed away (still alive: its inode cannot be reused), and a
        // new file under the name.
        std::fs::rename(dir.path().join("a"), dir.path().join("a.old")).unwrap();
        std::fs::write(dir.path().join("a"), b"y").unwrap();
        assert!(matches!(
            open_regular_at(d.as_fd(), OsStr::new("a"), Some(first.key)),
            Err(Refused::Replaced(..))
        ));
        assert!(matches!(
            open_dir_at(d.as_fd(), OsStr::new("fifo"), None),
            Err(Refused::Type("directory", "FIFO"))
        ));
    }

    /// GMS's `_user_space_dead`: field 9 of the task's stat (after the
    /// command's closing parenthesis, index 6), PF_EXITING 0x4, read by the
    /// one stat parser (`crate::io::node::proc::parse_stat`); SIGKILL
    /// pending in SigPnd or ShdPnd.
    #[test]
    fn task_stat_and_status_parse() {
        use crate::io::node::proc::parse_stat;
        let tail = " 0 0 0 0 0 0 0 0 0 0 0 0 7 0 0";
        let stat = format!("123 (a) b) c) S 1 123 123 0 -1 4194560{tail}");
        let s = parse_stat(stat.as_bytes()).unwrap();
        assert_eq!((s.state, s.flags, s.start_ticks), ('S', 4194560, 7));
        let exiting = format!("9 (x) D 1 9 9 0 -1 4194564{tail}");
        assert_eq!(
            parse_stat(exiting.as_bytes()).map(|s| s.flags & PF_EXITING),
            Some(4)
        );
        assert_eq!(parse_stat(b"no parenthesis"), None);
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
