//! The read-only opens (docs/format.md §14.7): by fd beneath a held
//! directory, never following a link, the opened inode checked against
//! the one listed; `pread` in chunks.

use super::*;

/// A file or directory that could not be opened or read: the run cannot
/// judge it (exit 2).
#[derive(Debug)]
pub struct ReadError {
    pub path: PathBuf,
    pub what: String,
    pub denied: bool,
}

impl ReadError {
    pub(super) fn new(path: &Path, what: impl Into<String>, e: Errno) -> ReadError {
        ReadError {
            path: path.to_path_buf(),
            what: format!("{}: {}", what.into(), std::io::Error::from(e)),
            denied: matches!(e, Errno::ACCESS | Errno::PERM),
        }
    }
}

/// A file's identity as `/proc/locks` writes it: (device major, minor,
/// inode).
pub type Key = (u32, u32, u64);

pub(super) fn key_of(st: &rustix::fs::Stat) -> Key {
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
        match rustix::io::retry_on_intr(|| {
            rustix::fs::statat(&*self.dir, &self.name, AtFlags::SYMLINK_NOFOLLOW)
        }) {
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

pub(super) fn statx_at(dir: BorrowedFd<'_>, name: &OsStr) -> Result<rustix::fs::Stat, Refused> {
    rustix::io::retry_on_intr(|| rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW))
        .map_err(|e| Refused::Os("cannot stat", e))
}

pub(super) fn same(expect: Option<Key>, st: &rustix::fs::Stat) -> Result<(), Refused> {
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
    let path_fd = rustix::io::retry_on_intr(|| {
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

pub(super) fn size_of(fd: &OwnedFd) -> Result<u64, Errno> {
    rustix::fs::fstat(fd).map(|st| st.st_size as u64)
}

/// Reads up to `buf.len()` bytes at `off`; fewer only at the end of file.
pub(super) fn pread_full(fd: &OwnedFd, buf: &mut [u8], off: u64) -> Result<usize, Errno> {
    let mut n = 0;
    while n < buf.len() {
        match rustix::io::retry_on_intr(|| rustix::io::pread(fd, &mut buf[n..], off + n as u64))? {
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
