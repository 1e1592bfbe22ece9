//! kvcr's integration tests: one test binary (linking the crate once, not
//! once per file), a folder per subject (`cargo test --test it fleet::`),
//! a file per part of it.
//! Shared helpers, and the one environment every kvcr command starts from,
//! are in [`util`]. The tests run as threads of one process: a test must not
//! change process-wide state (environment, current directory, signal
//! dispositions, inheritable file descriptors); see `util`.

// A program of the project's tests and benchmarks, not the shipped crate: it
// prints its results, reads its own files by path and, where it drives the
// driver or the kernel, calls them directly; the crate's rules (Cargo.toml
// [lints], clippy.toml) hold for src/ alone.
#![allow(
    unsafe_code,
    clippy::undocumented_unsafe_blocks,
    clippy::disallowed_methods,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod util;

mod audit;
mod cli;
mod fleet;
mod gms;
mod import;
mod library;
mod offload;
mod pools;
mod producer;
mod project;
mod report;
