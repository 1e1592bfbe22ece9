//! kvcr: audit and all-or-nothing import of retained KV-cache inventories.
//!
//! Data flows one way: `inventory` (walk, open beneath the root) →
//! [`descriptor`] (read and parse) → `node` facts → `verdict` (pure: facts
//! in, verdicts out) → `report` (table, JSON, Prometheus); `import` plans an
//! accepted group and runs it through its ledger and a backend. README.md's
//! "Architecture" section maps every module.
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

#[deny(missing_docs)]
pub mod api;
pub(crate) mod app;
pub(crate) mod audit;
pub(crate) mod cli;
pub mod content;
pub(crate) mod cuda_ffi;
pub(crate) mod derive;
pub mod descriptor;
pub(crate) mod error;
pub(crate) mod examine;
pub mod exit;
pub mod finding;
pub(crate) mod gms;
pub(crate) mod ids;
pub(crate) mod import;
pub(crate) mod import_spec;
pub(crate) mod input;
pub(crate) mod inventory;
pub(crate) mod merge;
pub(crate) mod node;
pub(crate) mod pipeline;
pub mod profile;
pub mod rankset;
pub(crate) mod report;
pub mod schema;
pub(crate) mod seal;
pub(crate) mod settings;
pub(crate) mod text;
pub(crate) mod timefmt;
pub(crate) mod verdict;
pub(crate) mod version;
pub mod writer;

pub use version::VERSION;

// The test builders are the dev-only crate crates/kvcr-testkit (a
// dev-dependency); the unit tests name it `crate::testkit`.
#[cfg(test)]
use kvcr_testkit as testkit;
#[cfg(test)]
mod tests_pipeline;
#[cfg(test)]
mod tests_typed_messages;

/// The `kvcr` command: parses `std::env::args_os()`, runs the subcommand and
/// returns its exit status (src/main.rs exits with it).
pub fn run() -> i32 {
    match cli::parse() {
        Ok(cli) => app::run(cli),
        Err(e) => parse_error(e),
    }
}

/// A command line clap refused: printed as clap prints it, and, when it
/// asked for `--format json`, also as the `kvcr.error/v1` document on
/// stdout (a script reading stdout always gets one document).
fn parse_error(e: clap::Error) -> i32 {
    use clap::error::ErrorKind;
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let json = args.iter().enumerate().any(|(i, a)| {
        a == "--format=json" || (a == "--format" && args.get(i + 1).is_some_and(|v| v == "json"))
    });
    let status = e.exit_code();
    let shown = matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    if json && !shown {
        let command = args
            .first()
            .and_then(|a| a.to_str())
            .filter(|a| command().get_subcommands().any(|s| s.get_name() == *a));
        let text = e.render().to_string();
        let message = text
            .lines()
            .next()
            .unwrap_or_default()
            .trim_start_matches("error: ")
            .to_string();
        let hint = match command {
            Some(c) => format!("run `kvcr {c} --help`"),
            None => "run `kvcr --help`".to_string(),
        };
        let mut f = error::Failure::usage(message, Some(hint)).of_kind(error::Kind::Usage);
        f.status = status;
        app::print_error_document(&f, command);
    }
    cli::print_error(&e);
    status
}

/// The command-line definition, for rendering man pages and completions.
pub fn command() -> clap::Command {
    <cli::Cli as clap::CommandFactory>::command()
}

/// Terminal safety (docs/format.md §9.6): the rule by which kvcr escapes
/// untrusted text (file names, descriptor strings, text read from reports)
/// before it reaches a terminal, and the JSON writer every kvcr document goes
/// through, which escapes the same characters as `\uXXXX`. A program that
/// shows what kvcr shows (an engine logging a descriptor's `engine_id`, a
/// dashboard printing a report) prints it the same way with these.
#[deny(missing_docs)]
pub mod display {
    pub use crate::report::json::write as write_json;
    pub use crate::text::{is_dangerous, terminal};
}
