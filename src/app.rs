//! The dispatcher: a parsed command line in, an exit status out. Each
//! command's arguments are resolved into settings ([`crate::settings`])
//! and handed to the command; a [`Failure`] is printed here, once.

use crate::cli::{Cli, Command};
use crate::error::Failure;
use crate::finding::Code;
use crate::report::{self, emit, explain};
use crate::settings;
use std::io::{self, Write};

/// The subcommand's name, and whether it was asked for one JSON document
/// on stdout (`--format json`, not `--quiet`).
fn json_output(cli: &Cli) -> (&'static str, bool) {
    let json = |o: &crate::cli::OutputArgs| o.format == report::Format::Json && !o.quiet;
    match &cli.command {
        Command::Audit(a) => ("audit", json(&a.output)),
        Command::Import(a) => ("import", json(&a.output.output())),
        Command::Merge(a) => ("merge", json(&a.output)),
        Command::Profile(_) => ("profile", false),
        Command::Examine(a) => ("examine", a.format == report::Format::Json),
        Command::Explain(_) => ("explain", false),
        Command::Completions(_) => ("completions", false),
        Command::Schema(_) => ("schema", false),
        Command::Seal(_) => ("seal", false),
        Command::Digest(_) => ("digest", false),
    }
}

/// Whether the command opens files or reads `/proc` (through
/// [`crate::node::proc::ProcFs::system`]); `explain`, `completions` and
/// `schema` print built-in text only.
fn reads_files(command: &Command) -> bool {
    !matches!(
        command,
        Command::Explain(_) | Command::Completions(_) | Command::Schema(_)
    )
}

/// Prints the `kvcr.error/v1` document of a run that could not happen on
/// stdout, for a command asked for `--format json` that wrote nothing there
/// yet: such a command prints exactly one JSON document whatever its exit.
pub fn print_error_document(f: &Failure, command: Option<&str>) {
    let doc = f.document(command, crate::node::now_unix_ms());
    let _ = emit(|out| report::json::write(out, &doc));
}

/// Runs a parsed command line and returns the exit status.
pub fn run(cli: Cli) -> i32 {
    let (name, json) = json_output(&cli);
    if reads_files(&cli.command) {
        // The `/proc` test hook changes what every file is opened through
        // (docs/format.md §11): announced before the command runs, by the
        // command line, never by the library.
        if let Some(n) = crate::node::proc::ProcFs::system().note() {
            crate::audit::print_note(n);
        }
    }
    let text = |t: &[u8]| emit(|out| out.write_all(t)).map(|()| crate::exit::OK);
    let r = match &cli.command {
        Command::Audit(a) => crate::audit::run_args(a),
        Command::Import(a) => {
            settings::Import::resolve(a).and_then(|s| crate::import::setup::run(&s))
        }
        Command::Merge(a) => crate::audit::run_merge(&a.reports, &settings::printer(&a.output)),
        Command::Profile(a) => {
            settings::Inventory::for_profile(a).and_then(|inv| crate::derive::run(&inv))
        }
        Command::Examine(a) => crate::examine::run(&a.file, a.format),
        Command::Explain(a) => match a.code.as_deref().map(|c| (c, Code::parse(c))) {
            None => text(explain::render_list().as_bytes()),
            Some((_, Some(code))) => text(explain::render(code).as_bytes()),
            Some((c, None)) => Err(Failure::usage(
                format!("unknown finding code {:?}", crate::text::terminal(c)),
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
        if json && !report::emitted() {
            print_error_document(&f, Some(name));
        }
        let mut err = io::stderr().lock();
        let _ = writeln!(err, "kvcr: error: {}", crate::text::terminal(&f.message));
        if let Some(h) = f.hint {
            let _ = writeln!(err, "  hint: {h}");
        }
        f.status
    })
}
