//! Listing a directory (bounded) and reading a writer-cohort directory.

use super::*;

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
pub(super) const PROC_ENTRY_CAP: usize = 1 << 22;

/// The names in a directory (at most [`ENTRY_CAP`]: more is an error,
/// never a silent truncation), `.` and `..` aside.
pub(super) fn list(dir: &OwnedFd) -> Result<Vec<OsString>, ListError> {
    list_at_most(dir, ENTRY_CAP)
}

pub(super) fn list_at_most(dir: &OwnedFd, cap: usize) -> Result<Vec<OsString>, ListError> {
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
pub(super) fn list_proc(dir: &OwnedFd) -> Result<Vec<OsString>, Errno> {
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
        let st = match rustix::io::retry_on_intr(|| {
            rustix::fs::statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW)
        }) {
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
