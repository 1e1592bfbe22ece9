//! Printers: the table, the JSON document, Prometheus text, the group
//! headline (cause and action, picked by causal order in `headline.rs`),
//! `explain` texts (terminal sanitising lives in `crate::format::text`). The verdict core judges and
//! words each finding; this module never judges.

pub mod explain;
pub mod headline;
pub mod prometheus;
pub mod table;

use crate::format::failure::Failure;
use std::io::{self, IsTerminal, Write};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
    /// Prometheus text exposition format (audit only; docs/format.md §9.5).
    Prometheus,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verbosity {
    Quiet,
    Normal,
    Verbose,
}

/// Every output decision, made once at start-up and passed down.
#[derive(Clone, Copy, Debug)]
pub struct Printer {
    pub format: Format,
    pub color: bool,
    pub verbosity: Verbosity,
    /// Progress bars on stderr (only when stderr is a terminal, never for
    /// JSON or quiet runs).
    pub progress: bool,
    /// Table width: the terminal's columns when stdout is a terminal;
    /// `None` (no wrapping) for a pipe or a file.
    pub width: Option<u16>,
}

impl Printer {
    /// Decides colour and progress from the flags and the environment:
    /// colour never when NO_COLOR is set, TERM=dumb, or stdout is not a
    /// terminal, unless `--color always`.
    pub fn decide(
        format: Format,
        color: ColorChoice,
        quiet: bool,
        verbose: bool,
        env: &dyn Fn(&str) -> Option<String>,
        stdout_tty: bool,
        stderr_tty: bool,
    ) -> Printer {
        let no_color = env("NO_COLOR").is_some_and(|v| !v.is_empty());
        let dumb = env("TERM").as_deref() == Some("dumb");
        let color = match color {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => stdout_tty && !no_color && !dumb,
        } && format == Format::Table;
        let verbosity = if quiet {
            Verbosity::Quiet
        } else if verbose {
            Verbosity::Verbose
        } else {
            Verbosity::Normal
        };
        Printer {
            format,
            color,
            verbosity,
            progress: stderr_tty && !dumb && !quiet && format == Format::Table,
            width: None,
        }
    }

    /// The same decisions with tables wrapped to `width` columns.
    pub fn with_width(self, width: Option<u16>) -> Printer {
        Printer { width, ..self }
    }

    pub fn from_env(format: Format, color: ColorChoice, quiet: bool, verbose: bool) -> Printer {
        let stdout_tty = std::io::stdout().is_terminal();
        Printer::decide(
            format,
            color,
            quiet,
            verbose,
            &|k| std::env::var(k).ok(),
            stdout_tty,
            std::io::stderr().is_terminal(),
        )
        .with_width(if stdout_tty {
            terminal_width()
        } else {
            columns_env(std::env::var("COLUMNS").ok().as_deref())
        })
    }
}

/// Set once anything was written to stdout by [`emit`]: a failure after
/// that prints no second (error) document.
static EMITTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether [`emit`] has written to stdout in this process.
pub fn emitted() -> bool {
    EMITTED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Writes to stdout; a closed pipe (`kvcr audit | head -1`) ends quietly.
pub fn emit(f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<(), Failure> {
    EMITTED.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut lock = io::BufWriter::new(io::stdout().lock());
    match f(&mut lock).and_then(|_| lock.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(Failure::new(
            crate::format::exit::USAGE,
            format!("cannot write the report: {e}"),
        )),
        _ => Ok(()),
    }
}

/// `COLUMNS` for output that is not a terminal: a table written to a pipe
/// or a file wraps only when asked to (COLUMNS=80 kvcr audit ... | less).
fn columns_env(v: Option<&str>) -> Option<u16> {
    v.and_then(|s| s.trim().parse::<u16>().ok())
        .filter(|&c| c >= 20)
}

/// Columns of the terminal on stdout; `None` when it cannot be told.
fn terminal_width() -> Option<u16> {
    rustix::termios::tcgetwinsize(std::io::stdout())
        .ok()
        .map(|w| w.ws_col)
        .filter(|&c| c > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn colour_decision() {
        let p = |c, e: &dyn Fn(&str) -> Option<String>, tty| {
            Printer::decide(Format::Table, c, false, false, e, tty, tty).color
        };
        assert!(p(ColorChoice::Auto, &env(&[]), true));
        assert!(!p(ColorChoice::Auto, &env(&[]), false));
        assert!(!p(ColorChoice::Auto, &env(&[("NO_COLOR", "1")]), true));
        assert!(!p(ColorChoice::Auto, &env(&[("TERM", "dumb")]), true));
        assert!(p(ColorChoice::Always, &env(&[("NO_COLOR", "1")]), false));
        assert!(!p(ColorChoice::Never, &env(&[]), true));
        let json = Printer::decide(
            Format::Json,
            ColorChoice::Always,
            false,
            false,
            &env(&[]),
            true,
            true,
        );
        assert!(!json.color && !json.progress);
        let quiet = Printer::decide(
            Format::Table,
            ColorChoice::Auto,
            true,
            false,
            &env(&[]),
            true,
            true,
        );
        assert!(!quiet.progress && quiet.verbosity == Verbosity::Quiet);
    }
}

#[cfg(test)]
mod tests_code_table;
