//! `kvcr examine FILE`: one descriptor decoded and checked on its own
//! (`crate::service::examine`), printed as a table or the `kvcr.examine/v1`
//! document.

use crate::format::failure::Failure;
use crate::io::output::emit;
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args, Debug, Clone)]
pub struct ExamineArgs {
    /// A descriptor file (rank-<R>.json).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ExamineFormat::Table)]
    pub format: ExamineFormat,
}

/// The formats `kvcr examine` writes: a table or the `kvcr.examine/v1`
/// document. No Prometheus text (that is the audit's, of a whole
/// inventory), so `--help`, the man page and the completions never offer
/// what examine would refuse, and clap refuses it as any unknown value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExamineFormat {
    Table,
    Json,
}

/// `kvcr examine FILE`.
pub fn run(file: &Path, format: ExamineFormat) -> Result<i32, Failure> {
    let e = crate::service::examine::examine(file, crate::io::node::now_unix_ms())?;
    let status = e.exit_status;
    emit(|out| match format {
        ExamineFormat::Json => crate::format::json::write(out, &e),
        ExamineFormat::Table => crate::print::examine::write_table(out, &e),
    })?;
    Ok(status)
}
