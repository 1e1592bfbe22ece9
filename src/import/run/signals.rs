//! SIGINT/SIGTERM → a flag the import checks between steps (docs/format.md §8.5).
//!
//! The handlers are installed only while an import holds GPU resources and
//! the previous dispositions are restored afterwards. The handler does one
//! async-signal-safe thing: an atomic store. Repeated signals only set the
//! flag again; they never cut a release short.

// Calls the C library, the kernel or the CUDA driver through raw pointers:
// one of the files allowed unsafe code (Cargo.toml [lints]); every block
// says why it is sound.
#![allow(unsafe_code)]

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// True once SIGINT or SIGTERM arrived since [`install`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// The installed handlers; dropping it restores the previous dispositions.
pub struct Guard {
    old: Vec<(libc::c_int, libc::sigaction)>,
}

/// SIGINT and SIGTERM (docs/format.md §8), and SIGHUP/SIGQUIT too: a closed terminal
/// or a quit key must not kill a hold and leave its ready file behind.
const SIGNALS: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// Clears the flag and installs the handlers (SA_RESTART, so the driver's
/// own system calls are not cut short by EINTR).
pub fn install() -> io::Result<Guard> {
    INTERRUPTED.store(false, Ordering::SeqCst);
    let mut guard = Guard { old: Vec::new() };
    for sig in SIGNALS {
        // SAFETY: a zeroed sigaction is a valid "no handler, empty mask" value.
        let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
        act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        act.sa_flags = libc::SA_RESTART;
        // SAFETY: sa_mask is a valid sigset_t owned by `act`.
        unsafe { libc::sigemptyset(&mut act.sa_mask) };
        // SAFETY: as above; `old` receives the previous disposition.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: both pointers are valid for the call; the handler only
        // performs atomic stores, which are async-signal-safe.
        let rc = unsafe { libc::sigaction(sig, &act, &mut old) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        guard.old.push((sig, old));
    }
    Ok(guard)
}

impl Drop for Guard {
    fn drop(&mut self) {
        for (sig, old) in self.old.drain(..).rev() {
            // SAFETY: `old` is the disposition sigaction returned for `sig`.
            unsafe { libc::sigaction(sig, &old, std::ptr::null_mut()) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The only unit test that touches signal dispositions (the command's
    /// tests run kvcr as a child process), so it cannot race another test.
    #[test]
    fn sigterm_sets_the_flag_and_the_old_disposition_comes_back() {
        let guard = install().unwrap();
        assert!(!interrupted());
        // SAFETY: raise() delivers SIGTERM to this thread; our handler is installed.
        assert_eq!(unsafe { libc::raise(libc::SIGTERM) }, 0);
        assert!(interrupted());
        drop(guard);
        // SAFETY: querying the current disposition only.
        let mut now: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a null new action only reads the current one into `now`.
        unsafe { libc::sigaction(libc::SIGTERM, std::ptr::null(), &mut now) };
        assert_eq!(now.sa_sigaction, libc::SIG_DFL);
    }
}
