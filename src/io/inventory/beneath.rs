//! Looking a listed entry up again through directories held open beneath
//! the root.
//!
//! walkdir lists a directory by its path. A directory swapped for a symlink
//! between being listed in its parent and being read is read *through* the
//! symlink, so the names it yields may be those of a directory outside the
//! root. Every entry the walk reports without opening it is therefore
//! looked up again in its parent directory, opened beneath the root fd
//! without following any symlink ([`open::open_beneath`]): an entry that is
//! not there is not beneath the root, and nothing of it is reported.

use super::open::{self, OpenError};
use rustix::fs::{AtFlags, Stat};
use rustix::io::Errno;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Most directory fds held at once.
const MAX_HELD: usize = 16;

/// What is at a listed path now, seen through its parent held beneath the root.
pub(super) enum Now {
    /// The entry, lstat'ed relative to its parent directory fd.
    Here(Stat),
    /// No such entry beneath the root (removed since, or listed through a
    /// symlink that was swapped in for its directory).
    Gone,
    /// The entry's own lstat failed.
    Failed(Errno),
    /// Its parent directory could not be opened beneath the root (a symlink
    /// now, or another error): nothing listed in it can be trusted.
    ParentFailed(OpenError),
}

/// The chain of directories of the current walk position, opened beneath
/// the root (walk order is pre-order, so this stays as deep as the walk).
pub(super) struct Beneath<'a> {
    root_fd: BorrowedFd<'a>,
    open: Vec<(PathBuf, OwnedFd)>,
}

impl<'a> Beneath<'a> {
    pub(super) fn new(root_fd: BorrowedFd<'a>) -> Self {
        Beneath {
            root_fd,
            open: Vec::new(),
        }
    }

    /// The mount id of the entry at `rel`, looked up through the parent
    /// directory held by the last [`Beneath::stat`] of `rel`.
    pub(super) fn mount_id(&self, rel: &Path) -> Option<u64> {
        let name = rel.file_name()?;
        let parent = rel.parent().unwrap_or(Path::new(""));
        let dir = if parent.as_os_str().is_empty() {
            self.root_fd
        } else {
            match self.open.last() {
                Some((p, fd)) if p == parent => fd.as_fd(),
                _ => return None,
            }
        };
        open::mount_id(dir, Some(name))
    }

    /// The entry at `rel` (relative to the root, at least one component).
    pub(super) fn stat(&mut self, rel: &Path) -> Now {
        let Some(name) = rel.file_name() else {
            return Now::Failed(Errno::INVAL);
        };
        let parent = rel.parent().unwrap_or(Path::new(""));
        let dir = if parent.as_os_str().is_empty() {
            self.root_fd
        } else {
            while self
                .open
                .last()
                .is_some_and(|(p, _)| !parent.starts_with(p))
            {
                self.open.pop();
            }
            if self.open.last().is_none_or(|(p, _)| p != parent) {
                match open::open_beneath(self.root_fd, parent, true) {
                    Ok(fd) => {
                        // Only the last is used for lookups: a very deep
                        // tree must not hold one fd per level.
                        if self.open.len() >= MAX_HELD {
                            self.open.remove(0);
                        }
                        self.open.push((parent.to_path_buf(), fd))
                    }
                    Err(e) => return Now::ParentFailed(e),
                }
            }
            match self.open.last() {
                Some((_, fd)) => fd.as_fd(),
                None => return Now::Failed(Errno::INVAL),
            }
        };
        match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Now::Here(st),
            Err(Errno::NOENT) => Now::Gone,
            Err(e) => Now::Failed(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st_ino(p: &Path) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(p).unwrap().ino()
    }

    #[test]
    fn entries_are_looked_up_beneath_the_root_only() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        let outside = t.path().join("outside");
        std::fs::create_dir_all(root.join("g")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("g/stray.txt"), b"x").unwrap();
        std::fs::write(root.join("top.txt"), b"x").unwrap();
        std::fs::write(outside.join("outside-only.txt"), b"x").unwrap();
        let root_fd = open::open_root(&root).unwrap();
        let mut b = Beneath::new(root_fd.as_fd());

        match b.stat(Path::new("g/stray.txt")) {
            Now::Here(st) => assert_eq!(st.st_ino, st_ino(&root.join("g/stray.txt"))),
            _ => panic!("not found beneath the root"),
        }
        assert!(matches!(b.stat(Path::new("top.txt")), Now::Here(_)));
        // A name that exists only where a swapped-in symlink would lead.
        assert!(matches!(b.stat(Path::new("g/outside-only.txt")), Now::Gone));

        // The directory is swapped for a symlink to the outside: the held
        // fd still sees the real one; a fresh lookup refuses the link.
        std::fs::rename(root.join("g"), t.path().join("parked")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("g")).unwrap();
        assert!(matches!(b.stat(Path::new("g/outside-only.txt")), Now::Gone));
        let mut fresh = Beneath::new(root_fd.as_fd());
        assert!(matches!(
            fresh.stat(Path::new("g/outside-only.txt")),
            Now::ParentFailed(OpenError::Symlink)
        ));
        // The link itself is reported as what it is.
        match fresh.stat(Path::new("g")) {
            Now::Here(st) => assert_eq!(open::mode_type_name(st.st_mode), "symlink"),
            _ => panic!(),
        }
    }

    #[test]
    fn the_chain_follows_pre_order() {
        let t = tempfile::tempdir().unwrap();
        for d in ["a/b/c", "a/d", "e"] {
            std::fs::create_dir_all(t.path().join(d)).unwrap();
            std::fs::write(t.path().join(d).join("f"), b"").unwrap();
        }
        let root_fd = open::open_root(t.path()).unwrap();
        let mut b = Beneath::new(root_fd.as_fd());
        for rel in ["a/b", "a/b/c/f", "a/b/c", "a/d/f", "a/b/c/f", "e/f", "a"] {
            assert!(matches!(b.stat(Path::new(rel)), Now::Here(_)), "{rel}");
            assert!(b.open.len() <= 3);
        }
        assert!(matches!(b.stat(Path::new("zz")), Now::Gone));
        assert!(matches!(
            b.stat(Path::new("a/zz/f")),
            Now::ParentFailed(OpenError::Os(Errno::NOENT))
        ));
    }
}
