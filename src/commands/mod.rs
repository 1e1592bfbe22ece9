//! The subcommands: one file each, its clap arguments beside its run
//! function (`kvcr merge` is `merge.rs`), the argument groups they share
//! ([`args`]) and [`settings`], where arguments, environment and profile
//! are resolved once. [`run`] dispatches.

// The clap help texts here are the doc comments, shown to operators as
// written: `rank-<R>.json` is a file name there, not an HTML tag.
#![allow(rustdoc::invalid_html_tags)]

pub mod args;
pub mod audit;
pub mod completions;
pub mod examine;
pub mod explain;
pub mod gms;
pub mod import;
pub mod merge;
pub mod offload;
pub mod pools;
pub mod profile;
pub mod schema;
pub mod seal;
pub mod settings;

use crate::format::failure::Failure;
use crate::print::Format;

/// The subcommands, each with its arguments (in its own file below).
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Read-only audit of a retained inventory: per-rank verdicts (docs/format.md §5).
    Audit(audit::AuditArgs),
    /// All-or-nothing GPU import of one group, for operator recovery (docs/format.md §8).
    Import(import::ImportArgs),
    /// What a finding code means and what to do; no CODE lists them all.
    Explain(explain::ExplainArgs),
    /// Merge per-node audit reports (--format json) into verdicts for groups spanning nodes.
    Merge(merge::MergeArgs),
    /// Print a deployment profile derived from the live audit of an accepted group.
    ///
    /// Runs the live, strict audit (as import does); for an accepted group
    /// prints on stdout a complete kvcr.profile/v1 that `kvcr import
    /// --profile` accepts, marked "derived" (from what, when, and that it
    /// must be reviewed). A rejected group prints nothing on stdout and
    /// exits 1 naming why. A bootstrap: in production the deployer writes
    /// the profile from the engine's configuration (docs/format.md §4.1).
    Profile(profile::ProfileArgs),
    /// Read-only check of what Dynamo's GPU Memory Service left on this node (docs/format.md §14).
    ///
    /// Lease rings (gms-kv-lease-*.shm), writer-cohort directories
    /// (*.vllm-writers, *.writers), recovery metadata (DYNKV001) and files of
    /// superseded formats: each artifact's verdict, cause and action, then
    /// its facts. With no PATH, looks where GMS puts them (its own
    /// environment variables and defaults) and says where it looked. Reads
    /// twice, --interval-ms apart: a condition a healthy artifact shows for
    /// a moment rejects only when both reads show it. Never writes, never
    /// locks a lease ring. Exit 0 when every artifact is ok (or none is
    /// found), 1 when one is rejected, 2 when a PATH is missing, unreadable
    /// or no GMS artifact.
    Gms(gms::GmsArgs),
    /// Read-only check of NVIDIA KVCR's pool files: journal, handback, slots, liveness (docs/format.md §16).
    ///
    /// Per pool file (kvcr-pool_<i>-<generation>): identity, the journal's
    /// invalid flag, cursors and pending frames (never the pool's content),
    /// the handback region and its digest, the slots records name, what
    /// KVCR itself would do, and with --live who holds it. Per pool
    /// directory: every pool_0 … pool_{N-1} once, equal mapping sizes, one
    /// generation each. Never locks, writes, maps or connects. Exit 0 when
    /// nothing is rejected, 1 when something is, 2 when a PATH is missing
    /// or unreadable.
    Pools(pools::PoolsArgs),
    /// Read-only check of the disk offload tiers vLLM, llm-d and LMCache leave on a node (docs/format.md §15).
    ///
    /// Per set (a vLLM or llm-d namespace, an LMCache identity group): the
    /// producer, its identity, the ranks expected and present, blocks
    /// complete, incomplete and damaged (short, long, misaligned), staging
    /// files, foreign names, symlinks and special files, and a verdict with
    /// its cause and next step. Reads metadata only (one statx per entry)
    /// and config.json; never writes, follows a link or changes an access
    /// time. Exit 0 when no set is rejected, 1 when one is, 2 when a PATH
    /// is missing or a directory cannot be listed whole.
    Offload(offload::OffloadArgs),
    /// Decode and check one descriptor file on its own (like mdadm --examine).
    ///
    /// Prints its fields, the digest status, the bytes the geometry needs
    /// against the bytes allocated and the handle kinds, with every finding
    /// the file earns by itself. Exit 0 when it passes its own checks, 1
    /// when not, 2 when it cannot be read as a regular file.
    Examine(examine::ExamineArgs),
    /// Print a shell completion script: source <(kvcr completions bash).
    ///
    /// The script completes subcommands, flags and their values (formats,
    /// colour choices, shells, schema names); it is generated from the same
    /// definitions as the help, so it never lags behind the binary.
    Completions(completions::CompletionsArgs),
    /// Print the JSON Schema (draft 2020-12) of a report, a descriptor, a profile, the ready file, the error document, the GMS, offload or pools report.
    ///
    /// "report" is what kvcr audit --format json writes (docs/json.md,
    /// field by field), "descriptor" what an owner writes as rank-<R>.json,
    /// "profile" what --profile reads, "import-report" what kvcr import
    /// --format json writes, "ready" what --ready-file receives, "error" what
    /// any --format json prints when the run could not happen (exit 2),
    /// "gms-report" what kvcr gms --format json writes, "offload-report"
    /// what kvcr offload --format json writes, "pools-report" what kvcr
    /// pools --format json writes. kvcr checks more than a schema can
    /// say (duplicate keys, numbers written as 1.0, the digest, tp × pp);
    /// each schema's description lists those rules.
    Schema(schema::SchemaArgs),
    /// Write the canonical digest into descriptor files written without one (docs/format.md §3.5).
    ///
    /// Each FILE must be a regular file (never a symlink) of at most 1 MiB
    /// holding strict JSON that is a valid descriptor apart from its
    /// digest. A FILE that already carries a digest that does not match its
    /// content was edited or damaged after sealing: it is refused (KV008,
    /// naming both digests) unless --reseal-edited, and then the output says
    /// what was overridden. Every file is checked before any is written; if
    /// one is refused, none is touched. Each is rewritten atomically (a staging
    /// file in the same directory, fsync, rename, directory fsync),
    /// keeping its mode, owner and member order. Exit 0 when every file is
    /// sealed, 1 when a file is refused, 2 when a file cannot be read or
    /// written (docs/format.md §6.1).
    Seal(seal::SealArgs),
    /// Print the canonical digest (sha256:...) of a descriptor file (docs/format.md §3.2).
    ///
    /// The digest is SHA-256 over the canonical form of the JSON object
    /// without its digest member: what the file's digest must be. Exit 1
    /// when the file is refused (a symlink, over 1 MiB, not strict JSON), 2
    /// when it cannot be read.
    Digest(seal::DigestArgs),
}

impl Command {
    /// The subcommand's name, and whether it was asked for one JSON
    /// document on stdout (`--format json`, not `--quiet`).
    pub fn json_output(&self) -> (&'static str, bool) {
        let json = |o: &args::OutputArgs| o.format == Format::Json && !o.quiet;
        match self {
            Command::Audit(a) => ("audit", json(&a.output)),
            Command::Import(a) => ("import", json(&a.output.output())),
            Command::Merge(a) => ("merge", json(&a.output)),
            Command::Profile(_) => ("profile", false),
            Command::Examine(a) => ("examine", a.format == examine::ExamineFormat::Json),
            Command::Gms(a) => ("gms", a.format == gms::GmsFormat::Json),
            Command::Pools(a) => ("pools", a.format == pools::PoolsFormat::Json),
            Command::Offload(a) => ("offload", a.format == offload::OffloadFormat::Json),
            Command::Explain(_) => ("explain", false),
            Command::Completions(_) => ("completions", false),
            Command::Schema(_) => ("schema", false),
            Command::Seal(_) => ("seal", false),
            Command::Digest(_) => ("digest", false),
        }
    }

    /// Whether the command opens files or reads `/proc` (through
    /// [`crate::io::procfs::ProcFs::system`]); `explain`, `completions`
    /// and `schema` print built-in text only.
    pub fn reads_files(&self) -> bool {
        !matches!(
            self,
            Command::Explain(_) | Command::Completions(_) | Command::Schema(_)
        )
    }
}

/// Runs one subcommand; `cli` is the whole command-line definition (for
/// `kvcr completions`).
pub fn run(command: &Command, cli: impl FnOnce() -> clap::Command) -> Result<i32, Failure> {
    match command {
        Command::Audit(a) => audit::run(a),
        Command::Import(a) => import::run(a),
        Command::Merge(a) => merge::run(&a.reports, &settings::printer(&a.output)),
        Command::Profile(a) => settings::inventory_for_profile(a).and_then(|i| profile::run(&i)),
        Command::Examine(a) => examine::run(&a.file, a.format),
        Command::Gms(a) => gms::run(a),
        Command::Pools(a) => pools::run(a),
        Command::Offload(a) => offload::run(a),
        Command::Explain(a) => explain::run(a),
        Command::Completions(a) => completions::run(a, cli()),
        Command::Schema(a) => schema::run(a),
        Command::Seal(a) => seal::seal(a),
        Command::Digest(a) => seal::digest(&a.file),
    }
}
