//! The command line (docs/format.md §7): the clap definition (the
//! subcommands and their arguments are `crate::commands`), parsing, the
//! dispatch, and the printing of a run that failed. It also feeds the man
//! pages and the shell completions.

use crate::commands::{self, Command};
use crate::format::failure::Failure;
use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    name = "kvcr",
    version,
    long_version = crate::format::version::LONG_VERSION,
    about = "Audit and import retained KV-cache GPU memory after an inference engine dies",
    long_about = "kvcr checks the retained inventory a KV-cache owner leaves behind (one \
descriptor per tensor-parallel rank) and imports a rank group's GPU memory all-or-nothing. \
Importing the wrong memory is silent corruption, so every doubt is a rejection.",
    after_help = "Exit status: 0 accepted/imported, 1 rejected (nothing imported), 2 usage or \
cannot run, 3 import failed and released, 4 release failed, 70 internal error, 130 interrupted.\n\
Run `kvcr explain` for the finding codes."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The `kvcr` command: parses `std::env::args_os()`, runs the subcommand
/// and returns its exit status.
pub fn main() -> i32 {
    match parse() {
        Ok(cli) => run(cli),
        Err(e) => parse_error(e),
    }
}

/// The command-line definition, for rendering man pages and completions.
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// Parses this process's command line, noting where each value with an
/// environment default came from.
pub fn parse() -> Result<Cli, clap::Error> {
    use clap::{CommandFactory, FromArgMatches};
    // Plain styles: error texts are sanitised before printing, and clap's
    // own ANSI styles would be escaped along with the user's.
    let matches = Cli::command()
        .styles(clap::builder::Styles::plain())
        .try_get_matches()?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    if let Some((_, sub)) = matches.subcommand() {
        let from_env = |id: &str| {
            sub.try_get_raw(id).ok().flatten().is_some()
                && sub.value_source(id) == Some(clap::parser::ValueSource::EnvVariable)
        };
        match &mut cli.command {
            Command::Audit(a) => a.inventory.profile_from_env = from_env("profile"),
            Command::Import(a) => a.inventory.profile_from_env = from_env("profile"),
            _ => {}
        }
    }
    Ok(cli)
}

/// Prints a command-line error (or `--help`, `--version`) and returns its
/// exit status. The text goes through the terminal sanitizer line by line:
/// clap quotes the arguments it could not use, and an argument may hold
/// ESC, U+202E or any character [`crate::format::text::is_dangerous`]
/// names (docs/format.md §9.6).
pub fn print_error(e: &clap::Error) -> i32 {
    // Rendered with clap's ANSI styles (none: [`parse`] sets plain styles)
    // and the arguments exactly as given; `to_string` would drop
    // some control characters silently instead of showing them.
    let text = e.render().ansi().to_string();
    let mut safe = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            safe.push('\n');
        }
        safe.push_str(&crate::format::text::terminal(line));
    }
    if e.use_stderr() {
        crate::io::output::to_stderr(|w| w.write_all(safe.as_bytes()));
    } else {
        crate::io::output::to_stdout(safe.as_bytes());
    }
    e.exit_code()
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
        let mut f = crate::format::failure::Failure::usage(message, Some(hint))
            .of_kind(crate::format::failure::Kind::Usage);
        f.status = status;
        print_error_document(&f, command);
    }
    print_error(&e);
    status
}

/// Prints the `kvcr.error/v1` document of a run that could not happen on
/// stdout, for a command asked for `--format json` that wrote nothing there
/// yet: such a command prints exactly one JSON document whatever its exit.
pub fn print_error_document(f: &Failure, command: Option<&str>) {
    let doc = f.document(command, crate::io::node::now_unix_ms());
    let _ = crate::io::output::emit(|out| crate::format::json::write(out, &doc));
}

/// Runs a parsed command line and returns the exit status; a [`Failure`]
/// is printed here, once.
pub fn run(cli: Cli) -> i32 {
    let (name, json) = cli.command.json_output();
    commands::settings::install_proc_root();
    if cli.command.reads_files() {
        // The `/proc` test hook changes what every file is opened through
        // (docs/format.md §11): announced before the command runs, by the
        // command line, never by the library.
        if let Some(n) = crate::io::procfs::ProcFs::system().note() {
            crate::io::output::print_note(n);
        }
    }
    commands::run(&cli.command, command).unwrap_or_else(|f| {
        if json && !crate::io::output::emitted() {
            print_error_document(&f, Some(name));
        }
        crate::io::output::to_stderr(|err| {
            writeln!(
                err,
                "kvcr: error: {}",
                crate::format::text::terminal(&f.message)
            )?;
            match &f.hint {
                Some(h) => writeln!(err, "  hint: {h}"),
                None => Ok(()),
            }
        });
        f.status
    })
}
