//! `kvcr schema WHICH`: the JSON Schema of one of kvcr's documents.

use crate::format::failure::Failure;
use crate::io::output::emit;
use clap::Args;

#[derive(Args, Debug, Clone)]
pub struct SchemaArgs {
    /// Which document: the audit report, a rank-<R>.json descriptor, a deployment profile, the import report, the ready file, the error document, the import plan, the GMS report, the offload report or the pools report.
    #[arg(value_enum, value_name = "WHICH")]
    pub which: crate::format::ids::Kind,
}

/// `kvcr schema`.
pub fn run(a: &SchemaArgs) -> Result<i32, Failure> {
    emit(|out| out.write_all(a.which.text().as_bytes()))?;
    Ok(crate::format::exit::OK)
}
