//! kvcr: audit and all-or-nothing import of retained KV-cache inventories.
//!
//! The folders are the layers, lowest first: `format` (what docs/format.md
//! defines: types and strict readers) → `rules` (the verdict core: facts
//! in, finished verdicts out) → `io` (the inventory walk, node probes, the
//! CUDA FFI, the trusted `/proc`) → `print` (printers) → `service` (the
//! audit and examine runs) → `gms`, `pools`, `offload` (the reader families:
//! each its own format, rules, reads, printer and run) → `import` (gate → plan → engine, driven by its
//! command) → [`api`] (the library) → `commands`
//! (one file per subcommand) → `cli`. README.md's "Architecture" section
//! says what each holds.
//!
//! # Public surface
//!
//! The library is the `kvcr` binary's engine; what it exports on purpose:
//!
//! - [`api`]: the library API (audit, examine, seal, digest, write, the
//!   readiness gate and its import plan), the one the Python package uses
//!   (docs/format.md §13, docs/python.md);
//! - [`descriptor`]: the strict descriptor reader ([`descriptor::parse_descriptor`]),
//!   its types and the canonical digest;
//! - [`profile`]: the deployment-profile reader;
//! - [`writer`]: seal, digest and write descriptors (for sidecars in Rust);
//! - [`content`]: the content check's sampling rule and digest (docs/format.md §3.6);
//! - [`display`]: the terminal-safety rule (docs/format.md §9.6) and the
//!   JSON writer of every kvcr document;
//! - [`finding`]: finding codes and findings; [`exit`]: exit statuses;
//!   [`rankset`]: rank lists (`0-3,8-11`, a profile's `local_ranks`);
//!   [`schema`]: the JSON Schemas of kvcr's documents; [`VERSION`];
//! - [`run`] and [`command`]: the command line itself (src/main.rs, man
//!   pages and completions).
//!
//! Everything else is `pub(crate)`, so the compiler reports what nothing
//! uses: the integration tests, fuzz targets, benchmarks and examples use
//! only the items above, and what tests the engine's inner parts lives
//! inside the crate (the `tests_*` modules). docs/format.md §13 says how
//! the public surface is versioned.

// Unit tests build their own files and print what they measured: the
// rules of clippy.toml and the print lints hold for the crate's code, which
// the library target (not cfg(test)) is checked as.
#![cfg_attr(
    test,
    allow(clippy::disallowed_methods, clippy::print_stdout, clippy::print_stderr)
)]

#[deny(missing_docs)]
pub mod api;
pub(crate) mod cli;
pub(crate) mod commands;
pub(crate) mod format;
pub(crate) mod gms;
pub(crate) mod import;
pub(crate) mod io;
pub(crate) mod offload;
pub(crate) mod pools;
pub(crate) mod print;
pub(crate) mod rules;
pub(crate) mod service;

pub use api::writer;
pub use format::version::VERSION;
pub use format::{content, descriptor, exit, finding, profile, rankset, schema};

// The test builders are the dev-only crate crates/kvcr-testkit (a
// dev-dependency); the unit tests name it `crate::testkit`.
#[cfg(test)]
use kvcr_testkit as testkit;

/// The `kvcr` command: parses `std::env::args_os()`, runs the subcommand and
/// returns its exit status (src/main.rs exits with it). Made for a process
/// that exits next: `kvcr audit` leaves its judgement's memory to the exit
/// instead of freeing it row by row. A program that audits repeatedly calls
/// [`api`] instead, which frees what it made.
pub fn run() -> i32 {
    cli::main()
}

/// The command-line definition, for rendering man pages and completions.
pub fn command() -> clap::Command {
    cli::command()
}

/// Terminal safety (docs/format.md §9.6): the rule by which kvcr escapes
/// untrusted text (file names, descriptor strings, text read from reports)
/// before it reaches a terminal, and the JSON writer every kvcr document goes
/// through, which escapes the same characters as `\uXXXX`. A program that
/// shows what kvcr shows (an engine logging a descriptor's `engine_id`, a
/// dashboard printing a report) prints it the same way with these.
#[deny(missing_docs)]
pub mod display {
    pub use crate::format::json::write as write_json;
    pub use crate::format::text::{is_dangerous, terminal};
}
