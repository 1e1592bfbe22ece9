//! Race-free, read-only opening beneath a held root directory fd.
//!
//! Every open goes through [`open_beneath`]: `openat2` with
//! `RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`, or, where
//! `openat2` is unavailable (old kernel, seccomp), one `openat` per path
//! component with `O_NOFOLLOW`. No symlink is ever followed; a symlink met at
//! open time is reported as [`OpenError::Symlink`].

use crate::format::descriptor::MAX_FILE_BYTES;
use crate::format::finding::{Code, Finding};
use crate::format::names::display_path;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags, Stat};
use rustix::io::Errno;
use std::fs::{File, Metadata};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path};
use std::sync::atomic::{AtomicU8, Ordering};

/// How [`open_beneath_with`] resolves a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// `openat2` when the kernel allows it, else the per-component walk.
    Auto,
    /// Only `openat2` (errors as the kernel reports them; tests).
    #[cfg(test)]
    Openat2,
    /// Only the per-component `openat` walk (tests of the fallback).
    #[cfg(test)]
    PerComponent,
}

/// Why an open beneath the root failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenError {
    /// A component of the path (or the leaf) is a symlink: never followed.
    Symlink,
    /// Any other OS error.
    Os(Errno),
}

/// The identity of a listed file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

impl FileId {
    pub fn of(md: &Metadata) -> FileId {
        FileId {
            dev: md.dev(),
            ino: md.ino(),
        }
    }
}

impl std::fmt::Display for FileId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "device {} inode {}", self.dev, self.ino)
    }
}

const OPENAT2_UNKNOWN: u8 = 0;
const OPENAT2_OK: u8 = 1;
const OPENAT2_UNAVAILABLE: u8 = 2;
static OPENAT2: AtomicU8 = AtomicU8::new(OPENAT2_UNKNOWN);

fn leaf_flags(want_dir: bool) -> OFlags {
    let mut f =
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NOCTTY;
    if want_dir {
        f |= OFlags::DIRECTORY;
    }
    f
}

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Opens the root directory itself (already resolved: no symlink expected,
/// and `O_NOFOLLOW` refuses one swapped in since).
pub fn open_root(path: &Path) -> std::io::Result<File> {
    let fd = rustix::fs::open(path, dir_flags() | OFlags::NONBLOCK, Mode::empty())?;
    Ok(File::from(fd))
}

/// Opens `rel` (relative, only normal components) read-only beneath `dir`,
/// never following a symlink. `want_dir` adds `O_DIRECTORY`.
pub fn open_beneath(dir: BorrowedFd<'_>, rel: &Path, want_dir: bool) -> Result<OwnedFd, OpenError> {
    open_beneath_with(dir, rel, want_dir, Strategy::Auto)
}

/// [`open_beneath`] with an explicit resolution strategy (for tests).
pub fn open_beneath_with(
    dir: BorrowedFd<'_>,
    rel: &Path,
    want_dir: bool,
    strategy: Strategy,
) -> Result<OwnedFd, OpenError> {
    open_beneath_flags(dir, rel, leaf_flags(want_dir), strategy)
}

/// An `O_PATH` fd for `rel` beneath `dir`: it names the inode without
/// opening it (a FIFO or device is not opened, no driver code runs), so the
/// type can be checked on the fd before anything is opened for reading.
pub fn open_path_beneath(
    dir: BorrowedFd<'_>,
    rel: &Path,
    strategy: Strategy,
) -> Result<OwnedFd, OpenError> {
    open_beneath_flags(
        dir,
        rel,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        strategy,
    )
}

fn open_beneath_flags(
    dir: BorrowedFd<'_>,
    rel: &Path,
    leaf: OFlags,
    strategy: Strategy,
) -> Result<OwnedFd, OpenError> {
    if rel.as_os_str().is_empty() || rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(OpenError::Os(Errno::INVAL));
    }
    let use_openat2 = match strategy {
        #[cfg(test)]
        Strategy::Openat2 => true,
        #[cfg(test)]
        Strategy::PerComponent => false,
        Strategy::Auto => OPENAT2.load(Ordering::Relaxed) != OPENAT2_UNAVAILABLE,
    };
    if use_openat2 {
        match openat2_beneath(dir, rel, leaf) {
            Err(OpenError::Os(Errno::NOSYS | Errno::PERM)) if strategy == Strategy::Auto => {
                // Not available here (old kernel or a seccomp filter):
                // remember and use the per-component walk from now on.
                OPENAT2.store(OPENAT2_UNAVAILABLE, Ordering::Relaxed);
            }
            Err(OpenError::Os(Errno::NOTDIR)) => {
                return Err(diagnose(dir, rel));
            }
            other => {
                if other.is_ok() {
                    OPENAT2.store(OPENAT2_OK, Ordering::Relaxed);
                }
                return other;
            }
        }
    }
    per_component(dir, rel, leaf)
}

fn openat2_beneath(dir: BorrowedFd<'_>, rel: &Path, leaf: OFlags) -> Result<OwnedFd, OpenError> {
    // NO_XDEV: nothing on another mount (a bind mount below the root) is
    // ever opened; the walk reports such a mount point as KV003.
    let resolve = ResolveFlags::NO_SYMLINKS
        | ResolveFlags::BENEATH
        | ResolveFlags::NO_MAGICLINKS
        | ResolveFlags::NO_XDEV;
    let mut tries = 0;
    loop {
        let open = || rustix::fs::openat2(dir, rel, leaf, Mode::empty(), resolve);
        match rustix::io::retry_on_intr(open) {
            Ok(fd) => return Ok(fd),
            Err(Errno::LOOP) => return Err(OpenError::Symlink),
            // EAGAIN: a concurrent rename raced the resolution; retry a little.
            Err(Errno::AGAIN) if tries < 8 => tries += 1,
            Err(e) => return Err(OpenError::Os(e)),
        }
    }
}

fn per_component(dir: BorrowedFd<'_>, rel: &Path, leaf_fl: OFlags) -> Result<OwnedFd, OpenError> {
    let comps: Vec<&std::ffi::OsStr> = rel.iter().collect();
    let (leaf, parents) = comps.split_last().ok_or(OpenError::Os(Errno::INVAL))?;
    let mut held: Option<OwnedFd> = None;
    for comp in parents {
        let cur = held.as_ref().map_or(dir, |fd| fd.as_fd());
        let next = match openat_retry(cur, comp, dir_flags()) {
            Ok(fd) => fd,
            Err(Errno::LOOP) => return Err(OpenError::Symlink),
            // O_NOFOLLOW|O_DIRECTORY on a symlink yields ENOTDIR on Linux.
            Err(Errno::NOTDIR) if is_symlink_at(cur, comp) => return Err(OpenError::Symlink),
            Err(e) => return Err(OpenError::Os(e)),
        };
        held = Some(next);
    }
    let cur = held.as_ref().map_or(dir, |fd| fd.as_fd());
    match openat_retry(cur, leaf, leaf_fl) {
        Ok(fd) => Ok(fd),
        Err(Errno::LOOP) => Err(OpenError::Symlink),
        Err(Errno::NOTDIR) if is_symlink_at(cur, leaf) => Err(OpenError::Symlink),
        Err(e) => Err(OpenError::Os(e)),
    }
}

fn openat_retry(
    dir: BorrowedFd<'_>,
    name: &std::ffi::OsStr,
    flags: OFlags,
) -> Result<OwnedFd, Errno> {
    rustix::io::retry_on_intr(|| rustix::fs::openat(dir, name, flags, Mode::empty()))
}

fn is_symlink_at(dir: BorrowedFd<'_>, name: &std::ffi::OsStr) -> bool {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .map(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
        .unwrap_or(false)
}

/// After ENOTDIR from `openat2`: was it a symlink (swapped in) on the way?
fn diagnose(dir: BorrowedFd<'_>, rel: &Path) -> OpenError {
    // Walk the prefixes without following anything; stop at the first symlink.
    let mut prefix = std::path::PathBuf::new();
    for comp in rel.iter() {
        prefix.push(comp);
        match rustix::fs::statat(dir, &prefix, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                return OpenError::Symlink;
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    OpenError::Os(Errno::NOTDIR)
}

/// The target of the symlink at `rel` beneath `dir`, read through its parent
/// directory opened without following anything.
pub fn readlink_beneath(dir: BorrowedFd<'_>, rel: &Path) -> Result<Vec<u8>, OpenError> {
    let leaf = rel.file_name().ok_or(OpenError::Os(Errno::INVAL))?;
    let parent = rel.parent().filter(|p| !p.as_os_str().is_empty());
    let held = match parent {
        Some(p) => Some(open_beneath(dir, p, true)?),
        None => None,
    };
    let cur = held.as_ref().map_or(dir, |fd| fd.as_fd());
    rustix::fs::readlinkat(cur, leaf, Vec::new())
        .map(|c| c.into_bytes())
        .map_err(OpenError::Os)
}

/// `"symlink to <target>"`, or `"symlink"` when the target cannot be read.
pub fn symlink_description(dir: BorrowedFd<'_>, rel: &Path) -> String {
    match readlink_beneath(dir, rel) {
        Ok(t) => format!("symlink to {}", crate::format::names::display_bytes(&t)),
        Err(_) => "symlink".to_string(),
    }
}

/// Words for the file type in a raw `st_mode`.
pub(super) fn mode_type_name(mode: u32) -> &'static str {
    use rustix::fs::FileType;
    match FileType::from_raw_mode(mode as _) {
        FileType::RegularFile => "regular file",
        FileType::Directory => "directory",
        FileType::Symlink => "symlink",
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Unknown => "unknown file type",
    }
}

/// The mount id of `name` beneath `dir` (or of `dir` itself), where the
/// kernel reports one (statx `STATX_MNT_ID`, Linux 5.8+).
pub(super) fn mount_id(dir: BorrowedFd<'_>, name: Option<&std::ffi::OsStr>) -> Option<u64> {
    use rustix::fs::{AtFlags, StatxFlags};
    let (path, flags) = match name {
        Some(n) => (n, AtFlags::SYMLINK_NOFOLLOW),
        None => (std::ffi::OsStr::new(""), AtFlags::EMPTY_PATH),
    };
    let sx = rustix::fs::statx(dir, path, flags, StatxFlags::MNT_ID).ok()?;
    (sx.stx_mask & StatxFlags::MNT_ID.bits() != 0).then_some(sx.stx_mnt_id)
}

/// Words for a file type in findings.
pub fn type_name(ft: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_file() {
        "regular file"
    } else if ft.is_dir() {
        "directory"
    } else if ft.is_symlink() {
        "symlink"
    } else if ft.is_fifo() {
        "FIFO"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_char_device() {
        "character device"
    } else if ft.is_block_device() {
        "block device"
    } else {
        "unknown file type"
    }
}

/// Opens the descriptor listed at `rel` (with identity `listed`) beneath the
/// root fd with an explicit resolution strategy and checks, on the open fd,
/// that it is still that regular file: [`open_regular`] then
/// [`check_same`], as the reader does (tests drive each strategy).
#[cfg(test)]
pub fn open_listed_with(
    root: BorrowedFd<'_>,
    rel: &Path,
    listed: FileId,
    strategy: Strategy,
) -> Result<(File, Stat), Box<Finding>> {
    let (file, md) = open_regular(root, rel, strategy)?;
    check_same(&display_path(rel), listed, &md)?;
    Ok((file, md))
}

/// Opens `rel` beneath the root fd and checks, on the open fd, that it is
/// a regular file (KV001, KV002, KV005 otherwise); the caller checks that it
/// is the file it listed ([`check_same`]). The reader calls
/// [`open_regular_through`] with the `self/fd` it holds.
#[cfg(test)]
pub fn open_regular(
    root: BorrowedFd<'_>,
    rel: &Path,
    strategy: Strategy,
) -> Result<(File, Stat), Box<Finding>> {
    let proc = crate::io::procfs::ProcFs::system();
    open_regular_through(root, rel, strategy, proc.fd_dir().as_ref().map(|d| *d))
}

/// `open_regular` (the test-only form), reopening through `fd_dir`
/// ([`crate::io::safe_file::reopen_through`]).
pub fn open_regular_through(
    root: BorrowedFd<'_>,
    rel: &Path,
    strategy: Strategy,
    fd_dir: Result<BorrowedFd<'_>, &String>,
) -> Result<(File, Stat), Box<Finding>> {
    // The path in words only for a finding (none on the way of a file
    // that opens): no allocation per file.
    let at = || display_path(rel);
    let kv005 = |what: &str, e: std::io::Error| {
        Box::new(
            Finding::reject(Code::KV005, format!("{what}: {e}"))
                .at(at())
                .denied_if(&e),
        )
    };
    // 1. Classify through an O_PATH fd: nothing is opened yet.
    let path_fd = match open_path_beneath(root, rel, strategy) {
        Ok(fd) => fd,
        Err(OpenError::Symlink) => {
            return Err(swapped_symlink(root, rel, &at()));
        }
        Err(OpenError::Os(Errno::XDEV)) => {
            return Err(other_mount(&at()));
        }
        Err(OpenError::Os(e)) => return Err(kv005("cannot open", e.into())),
    };
    let st = rustix::fs::fstat(&path_fd).map_err(|e| kv005("cannot stat", e.into()))?;
    let ft = FileType::from_raw_mode(st.st_mode);
    if ft == FileType::Symlink {
        // O_PATH|O_NOFOLLOW names a symlink leaf itself: never followed.
        return Err(swapped_symlink(root, rel, &at()));
    }
    if ft != FileType::RegularFile {
        let what = mode_type_name(st.st_mode);
        return Err(Box::new(
            Finding::reject(
                Code::KV002,
                format!("not a regular file (a {what} was swapped in while auditing); not opened"),
            )
            .at(at())
            .values("regular file", what),
        ));
    }
    // 2. Open for reading exactly the inode just classified, through the
    // fd's magic link: a rename racing this step cannot swap in a device,
    // and the O_PATH fd's stat describes the file opened (no second fstat).
    let file = crate::io::safe_file::reopen_through(fd_dir, &path_fd)
        .map_err(|e| kv005("cannot open", e))?;
    Ok((file, st))
}

/// KV001 for a descriptor found to be a symlink at open time.
fn swapped_symlink(root: BorrowedFd<'_>, rel: &Path, at: &str) -> Box<Finding> {
    Box::new(
        Finding::reject(
            Code::KV001,
            "replaced by a symlink while auditing; not followed",
        )
        .at(at)
        .values("regular file", symlink_description(root, rel)),
    )
}

/// KV003 for a descriptor on another mount than the root's (never read).
pub(crate) fn other_mount(at: &str) -> Box<Finding> {
    Box::new(
        Finding::reject(
            Code::KV003,
            "on another mount than the inventory root (a bind mount?); not read",
        )
        .at(at)
        .values("the inventory root's mount", "another mount"),
    )
}

/// KV005 when the opened file (`md`) is not the one `listed`.
pub fn check_same(at: &str, listed: FileId, st: &Stat) -> Result<(), Box<Finding>> {
    let now = FileId {
        dev: st.st_dev,
        ino: st.st_ino,
    };
    if now != listed {
        return Err(Box::new(
            Finding::reject(
                Code::KV005,
                "changed while auditing (replaced after it was listed)",
            )
            .at(at)
            .values(listed, now),
        ));
    }
    Ok(())
}

/// Reads at most `MAX_FILE_BYTES + 1` bytes of `file` into `buf` (cleared
/// first). The caller checks `buf.len() > MAX_FILE_BYTES`. The reference
/// [`read_sized`] is tested against.
#[cfg(test)]
pub fn read_capped(file: &mut File, buf: &mut Vec<u8>) -> std::io::Result<()> {
    use std::io::Read;
    buf.clear();
    file.take(MAX_FILE_BYTES + 1).read_to_end(buf)?;
    Ok(())
}

/// `read_capped` for a regular file whose size `size` was just taken from
/// its open fd: one `read(2)` in the common case instead of two
/// ([`crate::io::safe_file::read_sized`], the rule every file kvcr reads
/// whole keeps).
pub fn read_sized(file: &mut File, buf: &mut Vec<u8>, size: u64) -> std::io::Result<()> {
    crate::io::safe_file::read_sized(file, buf, size, MAX_FILE_BYTES + 1)
}
