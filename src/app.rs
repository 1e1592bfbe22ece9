//! The dispatcher: a parsed command line in, an exit status out. Each
//! command's arguments are resolved into settings ([`crate::settings`])
//! and handed to the command; a [`Failure`] is printed here, once.

use crate::cli::{Cli, Command};
use crate::error::Failure;
use crate::finding::Code;
use crate::report::{self, emit, explain};
use crate::settings;
use std::io::{self, Write};

/// Runs a parsed command line and returns the exit status.
pub fn run(cli: Cli) -> i32 {
    let text = |t: &[u8]| emit(|out| out.write_all(t)).map(|()| crate::exit::OK);
    let r = match &cli.command {
        Command::Audit(a) => crate::audit::run_args(a),
        Command::Import(a) => {
            settings::Import::resolve(a).and_then(|s| crate::import::setup::run(&s))
        }
        Command::Merge(a) => crate::audit::run_merge(&a.reports, &settings::printer(&a.output)),
        Command::Examine(a) => crate::examine::run(&a.file, a.format),
        Command::Explain(a) => match a.code.as_deref().map(|c| (c, Code::parse(c))) {
            None => text(explain::render_list().as_bytes()),
            Some((_, Some(code))) => text(explain::render(code).as_bytes()),
            Some((c, None)) => Err(Failure::usage(
                format!("unknown finding code {:?}", report::sanitize::terminal(c)),
                Some("run `kvcr explain` to list every code".to_string()),
            )),
        },
        Command::Completions(a) => {
            use clap::CommandFactory;
            let mut script = Vec::new();
            clap_complete::generate(a.shell, &mut Cli::command(), "kvcr", &mut script);
            text(&script)
        }
        Command::Schema(a) => text(a.which.text().as_bytes()),
        Command::Seal(a) => crate::seal::seal(&a.files, a.quiet),
        Command::Digest(a) => crate::seal::digest(&a.file),
    };
    r.unwrap_or_else(|f| {
        let mut err = io::stderr().lock();
        let _ = writeln!(
            err,
            "kvcr: error: {}",
            report::sanitize::terminal(&f.message)
        );
        if let Some(h) = f.hint {
            let _ = writeln!(err, "  hint: {h}");
        }
        f.status
    })
}
