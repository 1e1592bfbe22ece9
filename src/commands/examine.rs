//! `kvcr examine FILE`: one descriptor decoded and checked on its own
//! (`crate::io::examine`), printed as a table or the `kvcr.examine/v1`
//! document.

use crate::format::failure::Failure;
use crate::io::output::emit;
use crate::report::Format;
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args, Debug, Clone)]
pub struct ExamineArgs {
    /// A descriptor file (rank-<R>.json).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// `kvcr examine FILE`.
pub fn run(file: &Path, format: Format) -> Result<i32, Failure> {
    if format == Format::Prometheus {
        return Err(Failure::usage(
            "kvcr examine writes a table or JSON; --format prometheus is for kvcr audit",
            None,
        ));
    }
    let e = crate::io::examine::examine(file, crate::io::node::now_unix_ms())?;
    let status = e.exit_status;
    emit(|out| match format {
        Format::Json => crate::format::json::write(out, &e),
        Format::Table | Format::Prometheus => crate::report::examine::write_table(out, &e),
    })?;
    Ok(status)
}
