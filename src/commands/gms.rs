//! `kvcr gms [PATH]...`: the read-only checker of what Dynamo's GPU Memory
//! Service leaves on a node (docs/format.md §14): its arguments resolved
//! into [`Options`], the service (`crate::gms::run`), and the one print
//! (`crate::gms::print`).

use super::settings;
use crate::format::failure::Failure;
use crate::gms::format::parse_binding;
use crate::gms::rules::{Options, RecoveryAsk, DEFAULT_INTERVAL_MS, MAX_INTERVAL_MS};
use crate::io::output::emit;
use clap::Args;
use std::path::PathBuf;

/// The formats `kvcr gms` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GmsFormat {
    Table,
    Json,
}

#[derive(Args, Debug, Clone)]
pub struct GmsArgs {
    /// Files or directories holding GMS artifacts (default: where GMS puts them).
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Also check this node's processes: lease owners under GMS's default
    /// owner id, and a held recovery barrier's owner.
    #[arg(long)]
    pub live: bool,
    /// The block count the engine will ask recovery metadata for (default:
    /// the one its size implies).
    #[arg(long, value_name = "N")]
    pub num_blocks: Option<u64>,
    /// The binding digest (64 hex digits) the engine will compute for its
    /// KV pool; without it the binding is not checked.
    #[arg(long, value_name = "HEX", value_parser = parse_binding)]
    pub binding: Option<[u8; 32]>,
    /// Milliseconds between the two reads (0 to 60000).
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_INTERVAL_MS,
          value_parser = clap::value_parser!(u64).range(0..=MAX_INTERVAL_MS))]
    pub interval_ms: u64,
    /// Output format (json: exactly one kvcr.gms-report/v1 document on stdout).
    #[arg(long, value_enum, default_value_t = GmsFormat::Table)]
    pub format: GmsFormat,
}

/// The options a command line asks for.
pub fn options(a: &GmsArgs) -> Options {
    Options {
        paths: a.paths.clone(),
        live: a.live,
        ask: RecoveryAsk {
            num_blocks: a.num_blocks,
            binding: a.binding,
        },
        interval_ms: a.interval_ms,
        // GMS's variables, as this command was started with them (the
        // library reads no environment: docs/format.md §13).
        env: settings::environment(),
    }
}

/// Runs `kvcr gms` and prints its report; returns the exit status.
pub fn run(a: &GmsArgs) -> Result<i32, Failure> {
    let run = crate::gms::run::run(&options(a))?;
    let status = run.exit_status();
    match a.format {
        GmsFormat::Table => {
            let text = crate::gms::print::table(&run);
            emit(|out| out.write_all(text.as_bytes()))?;
        }
        GmsFormat::Json => {
            let doc = crate::gms::print::document(
                &run,
                crate::io::node::now_unix_ms(),
                &crate::io::node::hostname(),
            );
            emit(|out| crate::format::json::write(out, &doc))?;
        }
    }
    Ok(status)
}
