//! Taking a duplicate of the owner's POSIX fd (docs/format.md §3.3 `posix_fd`, §8.3).
//!
//! `pidfd_open(owner.pid)` pins the process; only then is its start time
//! compared with the descriptor's `owner.start_ticks`. A PID that was reused
//! before `pidfd_open` shows a different start time and is refused; a
//! process that dies after it makes `pidfd_getfd` fail with ESRCH, because
//! the pidfd keeps referring to the process it was opened on. The duplicate
//! is an [`OwnedFd`]: the caller drops it (closes it) after the import.

// Calls the C library, the kernel or the CUDA driver through raw pointers:
// one of the files allowed unsafe code (Cargo.toml [lints]); every block
// says why it is sound.
#![allow(unsafe_code)]

use rustix::fd::OwnedFd;
use rustix::io::Errno;
use rustix::process::{pidfd_getfd, pidfd_open, Pid, PidfdFlags, PidfdGetfdFlags};
use std::io;

/// Why the owner's fd could not be taken.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PidfdError {
    #[error("owner pid {pid} is not a valid process id")]
    BadPid { pid: i32 },
    #[error("owner process {pid} is gone")]
    Gone { pid: i32 },
    #[error(
        "owner pid {pid} now belongs to another process (start time {found}, descriptor says \
        {expected})"
    )]
    Reused { pid: i32, expected: u64, found: u64 },
    #[error("cannot read the start time of owner pid {pid}: {message}")]
    StartTime { pid: i32, message: String },
    #[error("the kernel refuses {call} ({errno}): {why}")]
    Refused {
        call: &'static str,
        errno: String,
        why: String,
    },
    #[error("fd {fd} is not open in owner process {pid}")]
    NoSuchFd { pid: i32, fd: i32 },
    #[error("{call} on owner pid {pid} failed: {errno}")]
    Other {
        call: &'static str,
        pid: i32,
        errno: String,
    },
}

/// Reads a process's start time: `Ok(None)` when there is no such process.
pub type StartTicks<'a> = &'a dyn Fn(i32) -> io::Result<Option<u64>>;

/// Takes a duplicate of `fd` from process `pid`, which must still be the
/// process that started at `start_ticks`.
pub fn take_fd(
    pid: i32,
    fd: i32,
    start_ticks: u64,
    read_start: StartTicks,
) -> Result<OwnedFd, PidfdError> {
    let p = Pid::from_raw(pid).ok_or(PidfdError::BadPid { pid })?;
    let pidfd = pidfd_open(p, PidfdFlags::empty()).map_err(|e| match e {
        Errno::SRCH => PidfdError::Gone { pid },
        e => refused("pidfd_open", e).unwrap_or(PidfdError::Other {
            call: "pidfd_open",
            pid,
            errno: e.to_string(),
        }),
    })?;
    // The pidfd refers to one process: if the start time read now matches,
    // it is the owner, and should that process die before pidfd_getfd the
    // call fails through the pidfd instead of reaching a newcomer.
    match read_start(pid) {
        Ok(Some(t)) if t == start_ticks => {}
        Ok(Some(found)) => {
            return Err(PidfdError::Reused {
                pid,
                expected: start_ticks,
                found,
            })
        }
        Ok(None) => return Err(PidfdError::Gone { pid }),
        Err(e) => {
            return Err(PidfdError::StartTime {
                pid,
                message: e.to_string(),
            })
        }
    }
    pidfd_getfd(&pidfd, fd, PidfdGetfdFlags::empty()).map_err(|e| match e {
        Errno::SRCH => PidfdError::Gone { pid },
        Errno::BADF => PidfdError::NoSuchFd { pid, fd },
        e => refused("pidfd_getfd", e).unwrap_or(PidfdError::Other {
            call: "pidfd_getfd",
            pid,
            errno: e.to_string(),
        }),
    })
}

/// The real uid of owner `pid` (`/proc/PID/status`), read while it is
/// still the process that started at `start_ticks`: the start time is
/// compared after the read, so the uid of a newcomer under a reused pid is
/// never taken for the owner's. `None` when it cannot be told.
pub fn owner_uid(pid: i32, start_ticks: u64, read_start: StartTicks) -> Option<u32> {
    let status = crate::io::procfs::ProcFs::system()
        .read(&format!("{pid}/status"))
        .ok()?;
    let uid = parse_real_uid(&status)?;
    matches!(read_start(pid), Ok(Some(t)) if t == start_ticks).then_some(uid)
}

/// The real uid (first field of `Uid:`) of a `/proc/PID/status` text.
fn parse_real_uid(status: &[u8]) -> Option<u32> {
    let text = String::from_utf8_lossy(status);
    let line = text.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Errors that mean "this kernel or this sandbox does not allow it".
fn refused(call: &'static str, e: Errno) -> Option<PidfdError> {
    let why = match e {
        Errno::NOSYS => "the kernel is older than 5.6 or a seccomp filter blocks the call",
        Errno::PERM | Errno::ACCESS => {
            "ptrace access to the owner is denied: run kvcr as the owner's user with \
             kernel.yama.ptrace_scope=0, or with CAP_SYS_PTRACE (e.g. as root)"
        }
        _ => return None,
    };
    Some(PidfdError::Refused {
        call,
        errno: e.to_string(),
        why: why.to_string(),
    })
}

impl PidfdError {
    /// True when the kernel or sandbox refuses the calls themselves (tests
    /// skip on it).
    #[cfg(test)]
    pub fn is_refused(&self) -> bool {
        matches!(self, PidfdError::Refused { .. })
    }
}

/// Field 22 (`starttime`) of `/proc/<pid>/stat`; `Ok(None)` when there is
/// no such process.
/// Read through the checked procfs root: a `/proc` that is not procfs is an
/// error, never a start time.
pub fn proc_start_ticks(pid: i32) -> io::Result<Option<u64>> {
    let proc = crate::io::procfs::ProcFs::system();
    let rel = format!("{pid}/stat");
    match proc.read(&rel) {
        Ok(bytes) => parse_start_ticks(&bytes).map(Some).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unparseable {}", proc.display(&rel)),
            )
        }),
        Err(Ok(rustix::io::Errno::NOENT | rustix::io::Errno::SRCH)) => Ok(None),
        Err(Ok(e)) => Err(e.into()),
        Err(Err(why)) => Err(io::Error::other(why)),
    }
}

/// Parses `starttime` from a stat line. The command name (field 2) may hold
/// spaces and parentheses, so fields are counted after its last `)`.
pub fn parse_start_ticks(stat: &[u8]) -> Option<u64> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    // After ")": field 3 (state) is the first; starttime is field 22.
    rest.split_ascii_whitespace().nth(22 - 3)?.parse().ok()
}

/// `kcmp(pid, pid, KCMP_FILE, a, b)`: whether the fds `a` and `b` of
/// process `pid` are one open file (two fds of one VMM export are one
/// memory). `None` when the kernel cannot say (no kcmp, or not permitted):
/// then they are not known to be the same, and the driver's own answers
/// stand. kcmp answers 0 for equal, 1 and 2 for an ordering, and 3 for "not
/// equal, no ordering available": all but 0 are "different".
pub fn same_open_file(pid: i32, a: i32, b: i32) -> Option<bool> {
    const KCMP_FILE: libc::c_long = 0;
    // SAFETY: kcmp only compares kernel objects of a process; every argument
    // is an integer and nothing is written to our memory.
    let r = unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            libc::c_long::from(pid),
            libc::c_long::from(pid),
            KCMP_FILE,
            libc::c_long::from(a),
            libc::c_long::from(b),
        )
    };
    kcmp_answer(r)
}

/// What a `kcmp` return value says: 0 equal, 1–3 different, else unknown.
fn kcmp_answer(r: libc::c_long) -> Option<bool> {
    match r {
        0 => Some(true),
        1..=3 => Some(false),
        _ => None,
    }
}

/// Whether two fds of this process are one open file ([`same_open_file`]
/// on our own pid: no ptrace access to anyone else is needed).
pub fn same_file_here(
    a: std::os::fd::BorrowedFd<'_>,
    b: std::os::fd::BorrowedFd<'_>,
) -> Option<bool> {
    use std::os::fd::AsRawFd;
    same_open_file(std::process::id() as i32, a.as_raw_fd(), b.as_raw_fd())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_ticks_after_the_last_paren() {
        let line = b"4242 (evil) 1 2 3) S 1 4242 4242 0 -1 4194560 1 0 0 0 5 6 0 0 20 0 1 0 \
            123456 1000 10 18446744073709551615\n";
        assert_eq!(parse_start_ticks(line), Some(123456));
        assert_eq!(parse_start_ticks(b"1 (x) S 1"), None);
        assert_eq!(parse_start_ticks(b"garbage"), None);
    }

    #[test]
    fn own_start_ticks_are_readable() {
        let me = std::process::id() as i32;
        assert!(proc_start_ticks(me).unwrap().is_some());
        assert_eq!(proc_start_ticks(i32::MAX).unwrap(), None);
    }

    #[test]
    fn an_owners_uid_is_its_real_uid_while_its_start_time_matches() {
        let me = std::process::id() as i32;
        let ticks = proc_start_ticks(me).unwrap().unwrap();
        let uid = rustix::process::getuid().as_raw();
        assert_eq!(owner_uid(me, ticks, &proc_start_ticks), Some(uid));
        // Another start time: a newcomer under the pid, whose uid is not
        // the owner's.
        assert_eq!(owner_uid(me, ticks + 1, &proc_start_ticks), None);
        assert_eq!(owner_uid(i32::MAX, 1, &proc_start_ticks), None);
        assert_eq!(
            parse_real_uid(b"Name:\tx\nUid:\t1000\t0\t0\t0\n"),
            Some(1000)
        );
        assert_eq!(parse_real_uid(b"Name:\tx\n"), None);
    }

    #[test]
    fn reused_pid_is_refused_before_getfd() {
        let me = std::process::id() as i32;
        let r = take_fd(me, 0, 1, &|_| Ok(Some(2)));
        match r {
            Err(PidfdError::Reused {
                expected: 1,
                found: 2,
                ..
            }) => {}
            Err(e) if e.is_refused() => eprintln!("skipped: {e}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            take_fd(0, 0, 1, &|_| Ok(Some(1))).unwrap_err(),
            PidfdError::BadPid { pid: 0 }
        );
    }
}

#[cfg(test)]
mod kcmp_tests {
    use super::same_open_file;
    use std::os::fd::AsRawFd;

    #[test]
    fn two_fds_of_one_open_file_are_the_same() {
        let me = std::process::id() as i32;
        let a = tempfile::tempfile().unwrap();
        let dup = a.try_clone().unwrap();
        let other = tempfile::tempfile().unwrap();
        match same_open_file(me, a.as_raw_fd(), dup.as_raw_fd()) {
            // The kernel cannot say here (no kcmp, or not permitted).
            None => eprintln!("skipped: kcmp unavailable"),
            Some(same) => {
                assert!(same);
                assert_eq!(
                    same_open_file(me, a.as_raw_fd(), other.as_raw_fd()),
                    Some(false)
                );
            }
        }
        // A closed fd: the kernel cannot say, never "the same".
        assert_ne!(same_open_file(me, a.as_raw_fd(), 1_000_000), Some(true));
    }

    #[test]
    fn every_kcmp_answer_but_0_is_different() {
        assert_eq!(super::kcmp_answer(0), Some(true));
        for r in [1, 2, 3] {
            assert_eq!(super::kcmp_answer(r), Some(false), "{r}");
        }
        for r in [-1, 4, 99] {
            assert_eq!(super::kcmp_answer(r), None, "{r}");
        }
    }
}
