//! `kvcr import [ROOT]` (docs/format.md §8): the all-or-nothing import of
//! one group, run by `crate::import::run`.

use super::args::{InventoryArgs, OutputArgs};
use super::settings;
use crate::format::failure::Failure;
use crate::format::timefmt::parse_age;
use crate::import::run::setup::Import;
use crate::import::spec::{BackendSpec, Mode, Target};
use crate::print::{ColorChoice, Format};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
pub struct ImportArgs {
    #[command(flatten)]
    pub inventory: InventoryArgs,
    /// Audit and print the plan (rank → GPU → allocations) without any CUDA call.
    #[arg(long, conflicts_with = "hold")]
    pub dry_run: bool,
    /// Keep the group imported until SIGINT/SIGTERM (default: trial import, then release).
    #[arg(long)]
    pub hold: bool,
    /// With --hold: write this file atomically once every rank is imported; removed on release.
    #[arg(long, value_name = "PATH", requires = "hold")]
    pub ready_file: Option<PathBuf>,
    /// Map VMM memory (fabric, posix_fd) read-write instead of read-only, for a driver that refuses read-only access. kvcr never writes GPU memory.
    #[arg(long, conflicts_with = "dry_run")]
    pub map_read_write: bool,
    /// With --local-ranks: a `kvcr merge --format json` report, built from live
    /// reports, that accepts the whole group and names this host and boot id
    /// for exactly these ranks (docs/format.md §8.9).
    #[arg(long, value_name = "FILE")]
    pub fleet_report: Option<PathBuf>,
    /// The oldest --fleet-report input accepted: plain seconds, or a number
    /// with s, m, h or d (default 300 s).
    #[arg(long, value_name = "AGE", value_parser = parse_age, default_value = "300")]
    pub max_report_age: u64,
    #[command(flatten)]
    pub output: ImportOutputArgs,
}

/// The formats `kvcr import` writes: no Prometheus text (that is the
/// audit's), so `--help` and the completions never offer it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ImportFormat {
    Table,
    Json,
}

/// [`OutputArgs`] for `kvcr import`: the same flags, table or JSON only.
#[derive(Args, Debug, Clone)]
pub struct ImportOutputArgs {
    /// Output format (json: exactly one document on stdout).
    #[arg(long, value_enum, default_value_t = ImportFormat::Table)]
    pub format: ImportFormat,
    /// Colour: auto follows the terminal, NO_COLOR and TERM=dumb.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    /// Print nothing; the exit status still tells.
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Show every allocation of each rank (and, when refused, every check per rank).
    #[arg(short, long)]
    pub verbose: bool,
}

impl ImportOutputArgs {
    /// The same choices as the shared output flags.
    pub fn output(&self) -> OutputArgs {
        OutputArgs {
            format: match self.format {
                ImportFormat::Table => Format::Table,
                ImportFormat::Json => Format::Json,
            },
            color: self.color,
            quiet: self.quiet,
            verbose: self.verbose,
        }
    }
}

/// `kvcr import`'s settings: its flags, the profile, and the test-only
/// `KVCR_IMPORT_BACKEND` and `KVCR_IMPORT_LOG`.
pub fn resolve(a: &ImportArgs) -> Result<Import, Failure> {
    let printer = settings::printer(&a.output.output());
    let backend = match settings::env_text(BackendSpec::ENV) {
        Some(s) => BackendSpec::parse(&s).map_err(|e| {
            Failure::usage(
                format!("{}={s:?}: {e}", BackendSpec::ENV),
                Some("unset it: it exists for kvcr's own tests".into()),
            )
        })?,
        None => BackendSpec::default(),
    };
    Ok(Import {
        inventory: settings::inventory(&a.inventory)?,
        printer,
        mode: if a.dry_run {
            Mode::DryRun
        } else if a.hold {
            Mode::Hold
        } else {
            Mode::Trial
        },
        ready_file: a.ready_file.clone(),
        fleet_report: a.fleet_report.clone(),
        max_report_age_s: a.max_report_age,
        map_read_write: a.map_read_write,
        backend,
        import_log: Target::new(
            settings::env_path(crate::import::spec::ENV),
            settings::env_path(crate::import::spec::JOURNAL_ENV),
        ),
    })
}

/// `kvcr import`.
pub fn run(a: &ImportArgs) -> Result<i32, Failure> {
    resolve(a).and_then(|s| crate::import::run::setup::run(&s))
}
