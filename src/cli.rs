//! Command-line definitions (docs/format.md §7). They also feed the man pages and the
//! shell completions.

use crate::report::{ColorChoice, Format};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "kvcr",
    version,
    long_version = crate::version::LONG_VERSION,
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

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Read-only audit of a retained inventory: per-rank verdicts (docs/format.md §5).
    Audit(AuditArgs),
    /// All-or-nothing GPU import of one group, for operator recovery (docs/format.md §8).
    Import(ImportArgs),
    /// What a finding code means and what to do; no CODE lists them all.
    Explain(ExplainArgs),
    /// Merge per-node audit reports (--format json) into verdicts for groups spanning nodes.
    Merge(MergeArgs),
    /// Print a deployment profile derived from the live audit of an accepted group.
    ///
    /// Runs the live, strict audit (as import does); for an accepted group
    /// prints on stdout a complete kvcr.profile/v1 that `kvcr import
    /// --profile` accepts, marked "derived" (from what, when, and that it
    /// must be reviewed). A rejected group prints nothing on stdout and
    /// exits 1 naming why. A bootstrap: in production the deployer writes
    /// the profile from the engine's configuration (docs/format.md §4.1).
    Profile(ProfileArgs),
    /// Decode and check one descriptor file on its own (like mdadm --examine).
    ///
    /// Prints its fields, the digest status, the bytes the geometry needs
    /// against the bytes allocated and the handle kinds, with every finding
    /// the file earns by itself. Exit 0 when it passes its own checks, 1
    /// when not, 2 when it cannot be read as a regular file.
    Examine(ExamineArgs),
    /// Print a shell completion script: source <(kvcr completions bash).
    ///
    /// The script completes subcommands, flags and their values (formats,
    /// colour choices, shells, schema names); it is generated from the same
    /// definitions as the help, so it never lags behind the binary.
    Completions(CompletionsArgs),
    /// Print the JSON Schema (draft 2020-12) of a report, a descriptor, a profile, the ready file or the error document.
    ///
    /// "report" is what kvcr audit --format json writes (docs/json.md,
    /// field by field), "descriptor" what an owner writes as rank-<R>.json,
    /// "profile" what --profile reads, "import-report" what kvcr import
    /// --format json writes, "ready" what --ready-file receives, "error" what
    /// any --format json prints when the run could not happen (exit 2). kvcr checks more than a schema can
    /// say (duplicate keys, numbers written as 1.0, the digest, tp × pp);
    /// each schema's description lists those rules.
    Schema(SchemaArgs),
    /// Write the canonical digest into descriptor files edited by hand (docs/format.md §3.5).
    ///
    /// Each FILE must be a regular file (never a symlink) of at most 1 MiB
    /// holding strict JSON that is a valid descriptor apart from its
    /// digest. Every file is checked before any is written; if one is
    /// refused, none is touched. Each is rewritten atomically (a staging
    /// file in the same directory, fsync, rename, directory fsync),
    /// keeping its mode, owner and member order. Exit 0 when every file is
    /// sealed, 1 when a file is refused, 2 when a file cannot be read or
    /// written (docs/format.md §6.1).
    Seal(SealArgs),
    /// Print the canonical digest (sha256:...) of a descriptor file (docs/format.md §3.2).
    ///
    /// The digest is SHA-256 over the canonical form of the JSON object
    /// without its digest member: what the file's digest must be. Exit 1
    /// when the file is refused (a symlink, over 1 MiB, not strict JSON), 2
    /// when it cannot be read.
    Digest(DigestArgs),
}

#[derive(Args, Debug, Clone)]
pub struct SealArgs {
    /// Descriptor files to seal (rank-<R>.json).
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Print nothing on success; refusals still go to stderr.
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Args, Debug, Clone)]
pub struct DigestArgs {
    /// The descriptor (or any JSON object) file.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

#[derive(Args, Debug, Clone)]
pub struct ProfileArgs {
    /// Inventory root directory (default: $KVCR_INVENTORY, else /var/lib/kvcr/inventory).
    #[arg(value_name = "ROOT", env = "KVCR_INVENTORY")]
    pub root: Option<PathBuf>,
    /// The group to derive the profile of (required when the inventory holds several).
    #[arg(long, value_name = "ID", value_parser = parse_engine_id)]
    pub engine: Option<crate::descriptor::EngineId>,
    /// Pin the current owner lifetime of the group that has this incarnation.
    #[arg(long, value_name = "UUID")]
    pub incarnation: Option<uuid::Uuid>,
    #[arg(long, value_name = "USER", value_parser = parse_user, help = PRODUCER_USER_HELP)]
    pub producer_user: Option<u32>,
}

/// `--producer-user` (audit, import, profile): one text for every command.
const PRODUCER_USER_HELP: &str = "The producer's user (a name or a uid): files and directories it \
    owns are trusted like root's and the invoking user's, for a root audit of a sidecar that \
    runs as its own user (default: $KVCR_PRODUCER_USER; docs/format.md §2.4)";

fn parse_user(s: &str) -> Result<u32, String> {
    crate::inventory::parse_user(s)
}

#[derive(Args, Debug, Clone)]
pub struct MergeArgs {
    /// Per-node reports written by `kvcr audit --live --local-ranks ... --format json`.
    #[arg(value_name = "REPORT.json", required = true)]
    pub reports: Vec<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Options shared by every command that reads an inventory.
#[derive(Args, Debug, Clone)]
pub struct InventoryArgs {
    /// Inventory root directory (default: $KVCR_INVENTORY, else /var/lib/kvcr/inventory).
    #[arg(value_name = "ROOT", env = "KVCR_INVENTORY")]
    pub root: Option<PathBuf>,
    /// Deployment profile (kvcr.profile/v1) declaring what the group should be
    /// (default: $KVCR_PROFILE); import requires one (docs/format.md §8.9).
    #[arg(long, value_name = "FILE", env = "KVCR_PROFILE")]
    pub profile: Option<PathBuf>,
    /// True when `profile` came from `$KVCR_PROFILE`, not `--profile`
    /// (set by [`parse`] from clap's value source; the report says so).
    #[arg(skip)]
    pub profile_from_env: bool,
    /// Limit the run to the group with this engine_id.
    #[arg(long, value_name = "ID", value_parser = parse_engine_id)]
    pub engine: Option<crate::descriptor::EngineId>,
    /// Reject current descriptors whose epoch is below N (overrides the profile).
    #[arg(long, value_name = "N", value_parser = parse_min_epoch)]
    pub min_epoch: Option<u64>,
    /// Reject descriptors sealed more than this long ago (overrides the profile):
    /// plain seconds, or a number with s, m, h or d (90s, 15m, 2h, 1d).
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    pub max_age: Option<u64>,
    /// The ranks this node holds of a group spanning nodes, e.g. 0-7 or 0-3,8-11
    /// (overrides the profile); other ranks are expected elsewhere.
    #[arg(long, value_name = "RANKS", value_parser = parse_ranks)]
    pub local_ranks: Option<crate::rankset::RankSet>,
    /// Pin the current owner lifetime of the group that has this incarnation
    /// (overrides the profile's incarnation); its other incarnations are notices.
    #[arg(long, value_name = "UUID")]
    pub incarnation: Option<uuid::Uuid>,
    #[arg(long, value_name = "USER", value_parser = parse_user, help = PRODUCER_USER_HELP)]
    pub producer_user: Option<u32>,
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
/// ESC, U+202E or any character [`crate::text::is_dangerous`]
/// names (docs/format.md §9.6).
pub fn print_error(e: &clap::Error) -> i32 {
    use std::io::Write;
    // Rendered with clap's ANSI styles (none: [`parse`] sets plain styles)
    // and the arguments exactly as given; `to_string` would drop
    // some control characters silently instead of showing them.
    let text = e.render().ansi().to_string();
    let mut safe = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            safe.push('\n');
        }
        safe.push_str(&crate::text::terminal(line));
    }
    let _ = if e.use_stderr() {
        std::io::stderr().lock().write_all(safe.as_bytes())
    } else {
        std::io::stdout().lock().write_all(safe.as_bytes())
    };
    e.exit_code()
}

/// The docs/format.md §3 engine_id rule: 1-128 characters of `[A-Za-z0-9._:/-]`.
pub(crate) fn parse_engine_id(s: &str) -> Result<crate::descriptor::EngineId, String> {
    crate::descriptor::EngineId::parse(s).map_err(str::to_string)
}

/// `--max-age`: plain seconds or a number with the unit s, m, h or d, in seconds.
pub fn parse_age(s: &str) -> Result<u64, String> {
    let bad = || {
        format!("{s:?} is not an age: use seconds (300) or a number with s, m, h or d (5m, 2h, 1d)")
    };
    let (digits, mult) = match s.as_bytes().last() {
        Some(b's') => (&s[..s.len() - 1], 1),
        Some(b'm') => (&s[..s.len() - 1], 60),
        Some(b'h') => (&s[..s.len() - 1], 3600),
        Some(b'd') => (&s[..s.len() - 1], 86400),
        _ => (s, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .filter(|&n| n <= I63_MAX)
        .ok_or_else(bad)
}

/// The largest `--min-epoch` and `--max-age` (in seconds): the profile's
/// bound for `min_epoch` and `max_age_s` (docs/format.md §5.4: one rule for
/// both, 0 included).
const I63_MAX: u64 = i64::MAX as u64;

fn parse_min_epoch(s: &str) -> Result<u64, String> {
    s.parse::<u64>()
        .ok()
        .filter(|&n| n <= I63_MAX)
        .ok_or_else(|| format!("{s:?} is not an epoch: an integer from 0 to {I63_MAX}"))
}

fn parse_ranks(s: &str) -> Result<crate::rankset::RankSet, String> {
    crate::rankset::RankSet::parse(s)
}

#[derive(Args, Debug, Clone)]
pub struct OutputArgs {
    /// Output format (json: exactly one document on stdout).
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Colour: auto follows the terminal, NO_COLOR and TERM=dumb.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    /// Print nothing; the exit status still tells.
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Show every check per rank, including facts not checked.
    #[arg(short, long)]
    pub verbose: bool,
}

#[derive(Args, Debug, Clone)]
pub struct AuditArgs {
    #[command(flatten)]
    pub inventory: InventoryArgs,
    /// Also check against this node: boot id, hostname, owner and writer processes, GPUs present.
    #[arg(long)]
    pub live: bool,
    /// With --live: a fact that could not be read (boot id, hostname, owner,
    /// writer, GPU) rejects its rank, as it refuses an import (docs/format.md §8.9).
    #[arg(long, requires = "live")]
    pub strict: bool,
    /// Also write the Prometheus metrics (docs/format.md §9.5) to PATH, atomically, for
    /// node-exporter's textfile collector; PATH may not lie inside the inventory.
    #[arg(long, value_name = "PATH")]
    pub textfile: Option<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
}

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

#[derive(Args, Debug, Clone)]
pub struct ExamineArgs {
    /// A descriptor file (rank-<R>.json).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Args, Debug, Clone)]
pub struct ExplainArgs {
    /// A finding code (KV104), its number (104) or its name (geometry).
    #[arg(value_name = "CODE")]
    pub code: Option<String>,
}

#[derive(Args, Debug, Clone)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug, Clone)]
pub struct SchemaArgs {
    /// Which document: the audit report, a rank-<R>.json descriptor, a deployment profile, the import report, the ready file or the error document.
    #[arg(value_enum, value_name = "WHICH")]
    pub which: crate::ids::Kind,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_take_units() {
        assert_eq!(parse_age("90"), Ok(90));
        assert_eq!(parse_age("15m"), Ok(900));
        assert_eq!(parse_age("2h"), Ok(7200));
        assert_eq!(parse_age("1d"), Ok(86400));
        assert!(parse_age("1.5h").is_err());
        assert!(parse_age("-1").is_err());
    }
}
