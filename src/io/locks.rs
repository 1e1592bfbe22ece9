//! The kernel's lock table, `/proc/locks` (read through the trusted
//! `/proc`, `crate::io::procfs`): who holds a lock on which inode.

/// The most bytes of `/proc/locks` kvcr reads (a line is under 100 bytes:
/// some 170,000 locks); a longer table is read as incomplete.
pub const LOCKS_BYTES: u64 = 16 << 20;

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

/// The file `PID/fd/FD` (below the trusted `/proc` root `root`) names, as
/// (major, minor, inode), when it is one of `wanted` and the descriptor's
/// `fdinfo` shows a `lock:` line: the process holds a lock through that
/// descriptor (an open-file-description lock names no pid in /proc/locks).
/// The one check the GMS reader and `kvcr pools` both make.
pub fn fd_holds_lock(
    proc: &crate::io::procfs::ProcFs,
    root: std::os::fd::BorrowedFd<'_>,
    pid: impl std::fmt::Display,
    fd: &str,
    wanted: &std::collections::BTreeSet<(u32, u32, u64)>,
) -> Option<(u32, u32, u64)> {
    let link = format!("{pid}/fd/{fd}");
    let st = rustix::fs::statat(root, link.as_str(), rustix::fs::AtFlags::empty()).ok()?;
    let key = (
        rustix::fs::major(st.st_dev),
        rustix::fs::minor(st.st_dev),
        st.st_ino,
    );
    if !wanted.contains(&key) {
        return None;
    }
    let info = proc.read(&format!("{pid}/fdinfo/{fd}")).ok()?;
    info.split(|&c| c == b'\n')
        .any(|l| l.starts_with(b"lock:"))
        .then_some(key)
}
