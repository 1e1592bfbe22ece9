//! The `kvcr gms` subcommand: its arguments resolved into [`super::Options`],
//! the run, and the one print (docs/format.md §14).

use super::{Options, Run};
use crate::cli::{GmsArgs, GmsFormat};
use crate::error::Failure;
use crate::report::emit;

/// The options a command line asks for.
pub fn options(a: &GmsArgs) -> Options {
    Options {
        paths: a.paths.clone(),
        live: a.live,
        ask: super::rules::RecoveryAsk {
            num_blocks: a.num_blocks,
            binding: a.binding,
        },
        interval_ms: a.interval_ms,
    }
}

/// Runs `kvcr gms` and prints its report; returns the exit status.
pub fn run(a: &GmsArgs) -> Result<i32, Failure> {
    let run: Run = super::run(&options(a), &super::process_env)?;
    let status = run.exit_status();
    match a.format {
        GmsFormat::Table => {
            let text = super::report::table(&run);
            emit(|out| out.write_all(text.as_bytes()))?;
        }
        GmsFormat::Json => {
            let doc =
                super::report::document(&run, crate::node::now_unix_ms(), &crate::node::hostname());
            emit(|out| crate::report::json::write(out, &doc))?;
        }
    }
    Ok(status)
}
