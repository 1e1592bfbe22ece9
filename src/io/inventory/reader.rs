//! Reading one descriptor the walk listed: opened race-free beneath the
//! root fd, checked against the listing's inode, read into a reused buffer.
//!
//! [`InventoryRoot::walk`](super::InventoryRoot::walk) hands each descriptor
//! out as a [`ReadJob`]; a [`Reader`] (one per thread, each with its own
//! buffer) opens and reads it.

use super::open::{self, FileId};
use super::perms::{findings_of, permission_issues, Owners};
use super::{Entry, EntryKind};
use crate::format::descriptor::MAX_FILE_BYTES;
use crate::format::finding::{Code, Finding};
use crate::format::names::display_path;
use rustix::fs::Stat;
use std::fs::File;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};

/// A descriptor listed by [`InventoryRoot::walk`](super::InventoryRoot::walk),
/// to be opened and read by a [`Reader`], on any thread. It carries
/// everything the walk knew, so the entry a reader makes of it is the one a
/// sequential walk would make.
#[derive(Debug)]
pub struct ReadJob {
    pub(super) rel: PathBuf,
    pub(super) kind: EntryKind,
    pub(super) at: String,
    /// The inode number in the directory listing (`d_ino`).
    pub(super) listed_ino: u64,
    /// KV003 inherited from unsafe directories above; they follow the
    /// descriptor's own findings.
    pub(super) inherited: Vec<Finding>,
}

/// KV002 for a descriptor whose inode has more than one name (docs/format.md
/// §2.5): the same rule `kvcr seal` refuses it by, and `kvcr examine`
/// reports. The link count is taken
/// from the open fd, so it is the count of the file that is read.
pub(crate) fn hard_links(nlink: u64, at: &str) -> Option<Finding> {
    (nlink > 1).then(|| {
        Finding::reject(
            Code::KV002,
            format!(
                "has {nlink} hard links: another name, perhaps outside the inventory, \
                 reaches the same file"
            ),
        )
        .at(at)
        .values("1 link", format!("{nlink} links"))
    })
}

/// KV004 for a descriptor of `size` bytes, over the limit: rejected
/// unread (the reader's rule, and the in-memory route's,
/// `crate::io::pipeline::collect_in_memory`).
pub(crate) fn too_large(size: u64, at: &str) -> Option<Finding> {
    (size > MAX_FILE_BYTES).then(|| {
        Finding::reject(
            Code::KV004,
            format!("larger than {MAX_FILE_BYTES} bytes; rejected unread"),
        )
        .at(at)
        .values(format!("≤ {MAX_FILE_BYTES} bytes"), format!("{size} bytes"))
    })
}

/// Opens and reads descriptors listed by
/// [`InventoryRoot::walk`](super::InventoryRoot::walk). Each
/// thread has its own; the buffer is reused from one file to the next.
pub struct Reader<'a> {
    root_fd: BorrowedFd<'a>,
    root_dev: u64,
    owners: Owners,
    buf: Vec<u8>,
    /// `/proc/self/fd` of this process (or why it is not trusted), taken
    /// once per reader ([`crate::io::safe_file::reopen_through`]).
    fd_dir: Result<BorrowedFd<'static>, String>,
}

fn entry(rel_path: PathBuf, kind: EntryKind, findings: Vec<Finding>, mode: Option<u32>) -> Entry {
    Entry {
        rel_path,
        kind,
        findings,
        mode,
    }
}

impl<'a> Reader<'a> {
    /// A reader of descriptors beneath `root_fd` (the root's device
    /// `root_dev`), judging ownership against `owners`.
    pub(super) fn new(root_fd: BorrowedFd<'a>, root_dev: u64, owners: Owners) -> Reader<'a> {
        Reader {
            root_fd,
            root_dev,
            owners,
            buf: Vec::new(),
            fd_dir: crate::io::procfs::ProcFs::system().fd_dir(),
        }
    }

    /// Opens (race-free) and reads the descriptor of `job`. Returns its entry
    /// with every finding, and its bytes when it was read completely.
    #[cfg(test)]
    pub fn read(&mut self, job: ReadJob) -> (Entry, Option<&[u8]>) {
        let (entry, _, bytes) = self.read_shown(job);
        (entry, bytes)
    }

    /// `Reader::read` (test code), also handing back the path in words the walk made
    /// (`display_path` of the entry's path), so the caller need not make it
    /// again.
    pub fn read_shown(&mut self, job: ReadJob) -> (Entry, String, Option<&[u8]>) {
        let ReadJob {
            rel,
            kind,
            at,
            listed_ino,
            inherited,
        } = job;
        let (mut entry, ok) = self.read_descriptor(rel, kind, listed_ino, &at);
        entry.findings.extend(inherited);
        (entry, at, if ok { Some(&self.buf[..]) } else { None })
    }

    /// Opens the file at `rel` and checks it is still the one listed: the
    /// listing's inode number is enough when it matches on the root's
    /// device; otherwise (another mount below the root, a swap) the
    /// identity is taken from an lstat, as a listing with metadata would.
    fn open(&self, rel: &Path, listed_ino: u64) -> Result<(File, Stat), Box<Finding>> {
        let fd_dir = self.fd_dir.as_ref().map(|d| *d);
        let (file, md) =
            open::open_regular_through(self.root_fd, rel, open::Strategy::Auto, fd_dir)?;
        if md.st_ino == listed_ino && md.st_dev == self.root_dev {
            return Ok((file, md));
        }
        let at = display_path(rel);
        if md.st_dev != self.root_dev {
            // openat2 refuses mounts (RESOLVE_NO_XDEV); this catches the
            // per-component fallback.
            return Err(open::other_mount(&at));
        }
        let st = rustix::fs::statat(self.root_fd, rel, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| {
                let e = std::io::Error::from(e);
                Box::new(
                    Finding::reject(Code::KV005, format!("cannot stat: {e}"))
                        .at(&at)
                        .denied_if(&e),
                )
            })?;
        let listed = FileId {
            dev: st.st_dev,
            ino: st.st_ino,
        };
        open::check_same(&at, listed, &md)?;
        Ok((file, md))
    }

    /// Opens (race-free) and reads one descriptor. Returns the entry and
    /// whether `self.buf` holds its complete bytes.
    fn read_descriptor(
        &mut self,
        rel: PathBuf,
        kind: EntryKind,
        listed_ino: u64,
        at: &str,
    ) -> (Entry, bool) {
        let (mut file, md) = match self.open(&rel, listed_ino) {
            Ok(x) => x,
            Err(f) => return (entry(rel, kind, vec![*f], None), false),
        };
        let mode = md.st_mode;
        let size = md.st_size as u64;
        let mut findings: Vec<Finding> = findings_of(&permission_issues(
            mode,
            md.st_uid,
            self.owners,
            "descriptor",
            at,
        ))
        .collect();
        // st_nlink is narrower than u64 on some architectures.
        #[allow(clippy::unnecessary_cast)]
        let nlink = md.st_nlink as u64;
        if let Some(f) = hard_links(nlink, at) {
            findings.push(f);
        }
        if let Some(f) = too_large(size, at) {
            findings.push(f);
            return (entry(rel, kind, findings, Some(mode)), false);
        }
        if let Err(e) = open::read_sized(&mut file, &mut self.buf, size) {
            findings.push(
                Finding::reject(Code::KV005, format!("cannot read: {e}"))
                    .at(at)
                    .denied_if(&e),
            );
            return (entry(rel, kind, findings, Some(mode)), false);
        }
        if self.buf.len() as u64 > MAX_FILE_BYTES {
            findings.push(
                Finding::reject(
                    Code::KV004,
                    format!("grew past {MAX_FILE_BYTES} bytes while being read"),
                )
                .at(at)
                .values(
                    format!("≤ {MAX_FILE_BYTES} bytes"),
                    format!("more than {MAX_FILE_BYTES} bytes"),
                ),
            );
            return (entry(rel, kind, findings, Some(mode)), false);
        }
        (entry(rel, kind, findings, Some(mode)), true)
    }
}
