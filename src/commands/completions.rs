//! `kvcr completions SHELL`: a completion script generated from the same
//! clap definitions as the help.

use crate::format::failure::Failure;
use crate::io::output::emit;
use clap::Args;

#[derive(Args, Debug, Clone)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

/// `kvcr completions`, for the command line `cli` (the whole definition).
pub fn run(a: &CompletionsArgs, mut cli: clap::Command) -> Result<i32, Failure> {
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut cli, "kvcr", &mut script);
    emit(|out| out.write_all(&script))?;
    Ok(crate::format::exit::OK)
}
