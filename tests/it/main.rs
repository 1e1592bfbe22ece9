//! kvcr's integration tests: one test binary (linking the crate once, not
//! once per file), a folder per subject (`cargo test --test it fleet::`),
//! a file per part of it.
//! Shared helpers, and the one environment every kvcr command starts from,
//! are in [`util`]. The tests run as threads of one process: a test must not
//! change process-wide state (environment, current directory, signal
//! dispositions, inheritable file descriptors); see `util`.

mod util;

mod audit;
mod cli;
mod fleet;
mod gms;
mod import;
mod library;
mod offload;
mod producer;
mod project;
mod report;
