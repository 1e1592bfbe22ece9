//! Printers: the table, the JSON document, Prometheus text, the examine
//! and GMS documents (terminal sanitising lives in `crate::format::text`).
//! The verdict core judges, words each finding and writes each group's
//! cause and action (`crate::rules::cause`); this module never judges.

pub mod audit;
pub mod examine;
pub mod json;
pub mod prometheus;
pub mod table;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
    /// Prometheus text exposition format (audit and merge; docs/format.md §9.5).
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
