//! `kvcr import`: audit → gate → plan → engine, driven from here
//! ([`steps`]), with the signal flag ([`signals`]), the hold's ready file
//! ([`ready_file`]), the import log ([`log`]), the import report
//! ([`crate::import::report`]) and its printing ([`mod@print`]); [`setup`] makes the probe,
//! the backend and the signal handlers; [`fd_budget`] raises
//! `RLIMIT_NOFILE` and counts the fds a `posix_fd` import keeps.

pub mod fd_budget;
pub mod handover;
pub mod log;
pub mod print;
pub mod ready_file;
pub mod setup;
pub mod signals;
pub mod steps;

#[cfg(test)]
mod tests;
