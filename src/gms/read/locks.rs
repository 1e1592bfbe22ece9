//! The kernel's lock table (`/proc/locks`) and the cohort probe.

use super::*;

/// The kernel's lock table and what kvcr could learn of the holders, read
/// once per read of the cohort directories.
pub struct LockTable {
    /// `None` when `/proc/locks` cannot be read (then every lock is probed).
    pub(super) locks: Option<Vec<KernelLock>>,
    /// Whether `locks` is the whole table (`/proc/locks` was not longer
    /// than [`LOCKS_BYTES`]): a lock it does not list is then not held by a
    /// process of this PID namespace.
    pub(super) complete: bool,
    /// (dev major, minor, ino) → pids whose descriptor table holds a lock
    /// on it (from `/proc/<pid>/fdinfo`), for the inodes the table lists.
    pub(super) fd_holders: BTreeMap<(u32, u32, u64), BTreeSet<i32>>,
    /// Pids whose descriptor table could not be read.
    pub(super) unreadable: BTreeSet<i32>,
    pub(super) proc: &'static ProcFs,
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
    pub(super) fn scan_fds(&mut self, wanted: &BTreeSet<(u32, u32, u64)>) {
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
                let held = crate::io::locks::fd_holds_lock(self.proc, root, pid, &fd, wanted);
                if let Some(key) = held {
                    self.fd_holders.entry(key).or_default().insert(pid);
                }
            }
        }
    }

    /// The kernel's granted locks on one inode.
    pub(super) fn on(&self, key: (u32, u32, u64)) -> Option<Vec<KernelLock>> {
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
pub(super) fn lock_of(fd: &OwnedFd, table: &LockTable, probe: FlockOperation) -> Lock {
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
        _ => match rustix::io::retry_on_intr(|| rustix::fs::flock(fd, probe)) {
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
