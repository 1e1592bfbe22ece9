//! The posix_fd path without a GPU: a child process holds a memfd; kvcr's
//! helper takes a duplicate with pidfd_open + pidfd_getfd (after checking
//! the child's start time) and reads the same bytes. Skipped, with a
//! message, where the kernel or sandbox refuses the calls.

// Forks a child with a pre_exec hook (one of the files allowed unsafe code,
// Cargo.toml [lints]).
#![allow(unsafe_code)]

use crate::import::engine::pidfd::{proc_start_ticks, take_fd, PidfdError};
use rustix::fs::{memfd_create, MemfdFlags};
use rustix::io::{pread, write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

const CONTENT: &[u8] = b"kv-cache bytes held by the owner \x00\x01\x02\xff";

/// A child (`sleep`) that inherited a memfd holding CONTENT, and the fd
/// number it has there. Our own copy is closed before returning, so the
/// only open file is the child's.
fn owner_with_memfd() -> (Child, i32) {
    // CLOEXEC here, so that no child another test forks meanwhile inherits
    // it; this child clears the flag after fork and so inherits it at the
    // same number.
    let fd: OwnedFd = memfd_create("kvcr-test", MemfdFlags::CLOEXEC).unwrap();
    assert_eq!(write(&fd, CONTENT).unwrap(), CONTENT.len());
    let n = fd.as_raw_fd();
    let mut cmd = Command::new("sleep");
    cmd.arg("60").stdin(Stdio::null());
    // SAFETY: between fork and exec the closure only calls fcntl(2), which
    // is async-signal-safe, on a descriptor this process owns.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(n, libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().expect("spawn sleep");
    drop(fd);
    (child, n)
}

struct Reap(Child);
impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn takes_a_duplicate_of_the_owners_memfd_and_reads_the_same_bytes() {
    let (child, fd) = owner_with_memfd();
    let child = Reap(child);
    let pid = child.0.id() as i32;
    // Wait until the child has exec'd, so its start time is final.
    let ticks = proc_start_ticks(pid).unwrap().expect("child runs");
    let dup = match take_fd(pid, fd, ticks, &proc_start_ticks) {
        Ok(d) => d,
        Err(e) if e.is_refused() => {
            eprintln!("skipped: the kernel refuses pidfd_open/pidfd_getfd here: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let mut buf = vec![0u8; CONTENT.len()];
    assert_eq!(pread(&dup, &mut buf, 0).unwrap(), CONTENT.len());
    assert_eq!(buf, CONTENT);
    // (The duplicate's number may equal the owner's: the tests share one
    // process whose other threads open and close descriptors, so a number
    // compare proves nothing; the bytes read above do.)
    drop(dup); // kvcr closes its duplicate after the import

    // A start time that does not match (a reused PID) is refused.
    match take_fd(pid, fd, ticks + 1, &proc_start_ticks) {
        Err(PidfdError::Reused { found, .. }) => assert_eq!(found, ticks),
        other => panic!("{other:?}"),
    }
    // An fd the owner does not have.
    match take_fd(pid, 999, ticks, &proc_start_ticks) {
        Err(PidfdError::NoSuchFd { fd: 999, .. }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_gone_owner_is_refused() {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id() as i32;
    child.wait().unwrap();
    match take_fd(pid, 3, 1, &proc_start_ticks) {
        // (or, should the pid be reused at once, a start-time mismatch)
        Err(PidfdError::Gone { .. } | PidfdError::Reused { .. }) => {}
        Err(e) if e.is_refused() => eprintln!("skipped: {e}"),
        other => panic!("{other:?}"),
    }
}
