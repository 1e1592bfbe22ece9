//! Exit statuses (docs/format.md §6). Scripts depend on these numbers; the man page and
//! docs/runbook.md (what to do on each) list them again.

/// Every group in scope accepted (audit); import done (import).
pub const OK: i32 = 0;
/// A group rejected, a rejecting file-level finding, or no descriptor found.
pub const REJECTED: i32 = 1;
/// Usage error, or the run could not happen (root missing, bad profile, no driver).
pub const USAGE: i32 = 2;
/// Import failed on the GPU and everything it took was released.
pub const IMPORT_FAILED: i32 = 3;
/// Import failed and releasing what it took also failed.
pub const RELEASE_FAILED: i32 = 4;
/// An internal error: kvcr broke one of its own invariants (a bug, never the
/// operator's input). `EX_SOFTWARE` of sysexits(3), so it is never read as a
/// usage error (2). Nothing was imported or written.
pub const INTERNAL: i32 = 70;
/// Interrupted (SIGINT/SIGTERM); everything taken was released first.
pub const INTERRUPTED: i32 = 130;
