//! The fds a `posix_fd` import keeps (docs/format.md §8.6): one duplicate
//! of the owner's fd per allocation while it is imported, and for a hold a
//! second one, the hand-over socket's copy. The soft `RLIMIT_NOFILE` (1024
//! by default) is raised to the hard limit first, then the budget is
//! counted before the driver is loaded: an import that cannot fit is
//! refused (exit 2) naming both numbers, never half-imported.

use crate::format::descriptor::Handle;
use crate::format::failure::Failure;
use crate::import::plan::Plan;
use rustix::process::{getrlimit, setrlimit, Resource};

/// The fds kept besides kvcr's per-allocation ones: the driver's own, the
/// import log, the ready file's directory and staging file, the socket and
/// a connection, stdio.
pub const HEADROOM: u64 = 64;

/// The fds kvcr keeps per `posix_fd` allocation: the duplicate it took,
/// and in a hold the hand-over's copy.
pub fn per_allocation(hold: bool) -> u64 {
    if hold {
        2
    } else {
        1
    }
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; the soft limit in
/// force afterwards (`None`: unlimited) and the hard one.
pub fn raise_nofile() -> (Option<u64>, Option<u64>) {
    let mut l = getrlimit(Resource::Nofile);
    if l.current != l.maximum {
        let want = rustix::process::Rlimit {
            current: l.maximum,
            maximum: l.maximum,
        };
        if setrlimit(Resource::Nofile, want).is_ok() {
            l = getrlimit(Resource::Nofile);
        }
    }
    (l.current, l.maximum)
}

/// The fds this process has open now (`self/fd` of the trusted `/proc`),
/// when it can tell.
fn open_now() -> Option<u64> {
    crate::io::procfs::ProcFs::system().open_fds()
}

/// Whether `posix` allocations fit: `open` fds already open, the soft limit
/// `soft` (`None`: unlimited), the hard one for the message.
pub fn judge(
    posix: u64,
    hold: bool,
    open: u64,
    soft: Option<u64>,
    hard: Option<u64>,
) -> Result<(), String> {
    let Some(soft) = soft else { return Ok(()) };
    let need = posix.saturating_mul(per_allocation(hold));
    let total = open.saturating_add(need).saturating_add(HEADROOM);
    if total <= soft {
        return Ok(());
    }
    let hard = hard.map_or("unlimited".to_string(), |h| h.to_string());
    Err(format!(
        "the import needs {total} open files and RLIMIT_NOFILE allows {soft} (hard limit \
         {hard}): {posix} posix_fd allocation{} × {} fd{} kvcr keeps{} = {need}, with {open} \
         already open and {HEADROOM} kept for the driver and kvcr's own files",
        if posix == 1 { "" } else { "s" },
        per_allocation(hold),
        if hold { "s" } else { "" },
        if hold {
            " (its duplicate of the owner's fd and the hand-over's copy)"
        } else {
            " (its duplicate of the owner's fd)"
        },
    ))
}

/// How many `posix_fd` allocations `plan` has.
fn posix_fd_allocations(plan: &Plan) -> u64 {
    plan.ranks
        .iter()
        .flat_map(|pr| &pr.allocations)
        .filter(|a| matches!(a.handle, Handle::PosixFd(_)))
        .count() as u64
}

/// The dry run's prediction for a trial of `plan` (docs/format.md §8.7):
/// why its fds would not fit even with the soft limit raised to the hard
/// one, as [`check`] would raise it; nothing is changed.
pub fn predict(plan: &Plan) -> Option<String> {
    let posix = posix_fd_allocations(plan);
    if posix == 0 {
        return None;
    }
    let hard = getrlimit(Resource::Nofile).maximum;
    let open = open_now().unwrap_or(HEADROOM / 4);
    judge(posix, false, open, hard, hard).err()
}

/// Raises the soft limit and counts the budget of `plan` (exit 2 when it
/// cannot fit).
pub fn check(plan: &Plan, hold: bool) -> Result<(), Failure> {
    let posix = posix_fd_allocations(plan);
    if posix == 0 {
        return Ok(());
    }
    let (soft, hard) = raise_nofile();
    let open = open_now().unwrap_or(HEADROOM / 4);
    judge(posix, hold, open, soft, hard).map_err(|m| {
        Failure::usage(
            m,
            Some(
                "raise the hard limit (ulimit -Hn as root, LimitNOFILE= in kvcr-hold.service) or \
                 import fewer allocations at once"
                    .into(),
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_names_both_numbers() {
        assert!(judge(100, true, 10, Some(1024), Some(4096)).is_ok());
        assert!(judge(1_000_000, true, 10, None, None).is_ok());
        let e = judge(500, true, 10, Some(1024), Some(1024)).unwrap_err();
        // 500 × 2 + 10 + 64 = 1074 > 1024.
        assert!(
            e.contains("needs 1074 open files and RLIMIT_NOFILE allows 1024 (hard limit 1024)"),
            "{e}"
        );
        assert!(e.contains("500 posix_fd allocations × 2 fds"), "{e}");
        // A trial keeps one per allocation: 500 + 10 + 64 fits.
        assert!(judge(500, false, 10, Some(1024), Some(1024)).is_ok());
    }

    #[test]
    #[allow(unsafe_code)] // fork/_exit/waitpid: a child keeps this binary's limit as it was
    fn the_soft_limit_is_raised_to_the_hard_one_in_a_child() {
        // In a child, so this test binary's own limit is left as it was.
        // SAFETY: fork in a test; the child only calls async-signal-safe
        // functions (getrlimit/setrlimit are syscalls) and _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let l = getrlimit(Resource::Nofile);
            let low = rustix::process::Rlimit {
                current: Some(32),
                maximum: l.maximum,
            };
            let ok = setrlimit(Resource::Nofile, low).is_ok()
                && getrlimit(Resource::Nofile).current == Some(32)
                && raise_nofile().0 == l.maximum;
            // SAFETY: ends the forked child without running the parent's
            // destructors or atexit handlers.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    }
}
