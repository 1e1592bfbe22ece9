//! The one read-only open of an artifact another program wrote and kvcr
//! must not disturb (the GMS reader's, and any reader family's): never
//! following a symlink, never blocking, never becoming the controlling
//! terminal, with `O_NOATIME` where the kernel allows it (the file's owner,
//! or CAP_FOWNER).

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::Path;

/// The flags every read-only open takes.
pub fn flags() -> OFlags {
    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY
}

/// Opens `name` beneath `dir` (or `name` itself when `dir` is `None`)
/// read-only, without following a symlink, with `O_NOATIME` when allowed.
pub fn open_ro(dir: Option<BorrowedFd<'_>>, name: &Path, extra: OFlags) -> Result<OwnedFd, Errno> {
    let open = |f: OFlags| {
        rustix::io::retry_on_intr(|| match dir {
            Some(d) => rustix::fs::openat(d, name, f, Mode::empty()),
            None => rustix::fs::open(name, f, Mode::empty()),
        })
    };
    match open(flags() | extra | OFlags::NOATIME) {
        Err(Errno::PERM) => open(flags() | extra),
        r => r,
    }
}
