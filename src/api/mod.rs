//! The library API: what the `kvcr` command does, callable in-process
//! (docs/format.md §13, docs/python.md). The Python package `kvcr_audit`
//! (`python/`) is built on this module alone.
//!
//! Every function runs the code the command line runs, never a copy of a
//! rule: [`audit`] is `kvcr audit --format json`, [`examine`] is
//! `kvcr examine --format json`, [`seal_json`] and [`digest_json`] are
//! `kvcr seal` and `kvcr digest` on JSON text, [`write_rank_json`] is the
//! writer of docs/format.md §3.5, [`gate`] is `kvcr import` up to (not
//! including) the driver check (§8.9), answering with the import plan,
//! [`gms`] is `kvcr gms --format json` (§14), [`pools`] is `kvcr pools
//! --format json` (§16), [`offload`] is `kvcr offload --format json` (§15).
//!
//! Documents (reports, plans) come back as the exact JSON text the command
//! prints ([`Document`]), so a caller parses them with the JSON library it
//! already has; integers are never rounded through a float. A caller that
//! builds its own objects asks [`audit_structured`] or [`gate_structured`]
//! instead: the same document as a [`Structured`] value to hand to any
//! serde serializer, with no text rendered and none to parse back (the
//! Python package builds its dicts so).
//!
//! A process forked after a call may call again: what is kept per process
//! (the `/proc` root and the `/proc/self/fd` directory files are reopened
//! through) is opened anew in the child, and the parent's is neither used
//! nor closed (docs/format.md §2.3, §13.1).
//!
//! A library, not a command line (docs/format.md §13.1): it reads no
//! environment variable (what the command takes from `KVCR_PROFILE`,
//! `KVCR_NODE_FACTS` and `KVCR_THREADS` are options here), prints nothing
//! (the notes the command prints on stderr come back in
//! [`Document::notes`]) and keeps no process-wide cache that a long-running
//! caller would see go stale (the GPU list is read afresh on every live
//! call).
//!
//! ```no_run
//! use kvcr_audit::api::{audit, AuditOptions};
//! let report = audit("/run/kv/inventory".as_ref(), &AuditOptions::default())?;
//! println!("exit status {}", report.exit_status());
//! # Ok::<(), kvcr_audit::api::Error>(())
//! ```
//!
//! Versioning: this module follows the crate's semantic version; the JSON
//! documents carry their own `schema` (`kvcr.audit-report/v1`,
//! `kvcr.examine/v1`, `kvcr.import-plan/v1`, `kvcr.import-report/v1`,
//! `kvcr.gms-report/v1`, `kvcr.offload-report/v1`).

use crate::format::descriptor::parse_descriptor;
use crate::format::failure::Failure;
use crate::format::finding::Code;
use crate::format::json;
use crate::format::rankset::RankSet;
use crate::service::audit::Inventory;
use std::fmt;
use std::path::{Path, PathBuf};

pub use crate::format::content::{digest_content, sampled_ranges, Content, ContentError};

/// Why a call did not give its answer. Each kind maps to the exit status the
/// command line gives the same input ([`Error::exit_status`]).
#[derive(Debug)]
pub enum Error {
    /// What the command line rejects before it runs, or a run that cannot
    /// happen (a missing root, a bad or missing profile, an unreadable file,
    /// a failed write): exit 2.
    Usage {
        /// What is wrong, naming the file or option and the values.
        message: String,
        /// What to do about it, when there is one thing to do.
        hint: Option<String>,
    },
    /// A descriptor that is not valid (exit 1): the finding code the audit
    /// gives it, the member's dotted path as the CLI prints it
    /// (`node.boot_id`, `allocations[0].size_bytes`; `None` when the problem
    /// is not one member's) and the message.
    Descriptor {
        /// The finding code (`KV006` malformed JSON, `KV007` schema, `KV004` too large).
        code: Code,
        /// The member's path, when one member is wrong.
        field: Option<String>,
        /// The whole problem, as `kvcr seal` words it.
        message: String,
    },
    /// The import gate refused the group (exit 1): `report` is the
    /// `kvcr.import-report/v1` document (mode `gate`) saying why.
    Refused {
        /// The first reason, one line.
        message: String,
        /// The import report as JSON text.
        report: Document,
    },
    /// Anything else the command line answers with exit 1 (a file refused
    /// by `kvcr seal`: a symlink, not a regular file, a process that is not
    /// running).
    Other {
        /// What is wrong.
        message: String,
        /// The command line's exit status for it.
        status: i32,
    },
}

impl Error {
    /// The exit status the command line gives the same input.
    pub fn exit_status(&self) -> i32 {
        match self {
            Error::Usage { .. } => crate::format::exit::USAGE,
            Error::Descriptor { .. } | Error::Refused { .. } => crate::format::exit::REJECTED,
            Error::Other { status, .. } => *status,
        }
    }

    fn usage(message: impl Into<String>) -> Error {
        Error::Usage {
            message: message.into(),
            hint: None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage { message, .. } | Error::Other { message, .. } => f.write_str(message),
            Error::Descriptor { code, message, .. } => write!(f, "{code} {message}"),
            Error::Refused { message, .. } => write!(f, "refused: {message}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<Failure> for Error {
    fn from(f: Failure) -> Error {
        if f.status == crate::format::exit::USAGE {
            Error::Usage {
                message: f.message,
                hint: f.hint,
            }
        } else {
            Error::Other {
                message: f.message,
                status: f.status,
            }
        }
    }
}

/// One JSON document exactly as the command line prints it (UTF-8, one
/// object, a trailing newline), with the exit status it stands for and the
/// notes the command would have printed on stderr.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Document {
    text: String,
    exit_status: i32,
    notes: Vec<String>,
}

impl Document {
    fn of<T: serde::Serialize>(value: &T, exit_status: i32) -> Result<Document, Error> {
        let mut out = Vec::new();
        crate::format::json::write(&mut out, value)
            .map_err(|e| Error::usage(format!("cannot render the document: {e}")))?;
        Ok(Document {
            text: String::from_utf8(out)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
            exit_status,
            notes: Vec::new(),
        })
    }

    fn with_notes(mut self, notes: Vec<String>) -> Document {
        self.notes = notes;
        self
    }

    /// What the operator is owed about where the facts came from, one line
    /// each, terminal-safe, without the command line's `kvcr: note: `
    /// prefix: that they come from a facts file and not from this node;
    /// that `/proc` is not procfs and nothing read from it is trusted. The
    /// command line prints these on stderr; the library prints nothing.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The JSON text.
    pub fn as_json(&self) -> &str {
        &self.text
    }

    /// The JSON text, owned.
    pub fn into_json(self) -> String {
        self.text
    }

    /// The exit status the command line gives for this document (an audit:
    /// 0 when every group in scope is accepted, 1 otherwise).
    pub fn exit_status(&self) -> i32 {
        self.exit_status
    }
}

/// The audit report (`kvcr.audit-report/v1`), as `kvcr audit --format json` prints it.
pub type Report = Document;

/// A document before it is rendered as text: what [`audit_structured`] and
/// [`gate_structured`] answer, for a caller that builds its own objects
/// from it (the Python package builds its dicts from it directly, with no
/// JSON text to render and parse back).
///
/// Its [`serde::Serialize`] is the document itself: the [`Document`]'s
/// JSON text is this value written by the one JSON writer (docs/format.md
/// §9.6), so any serializer sees the same keys, in the same order, with the
/// same values; [`Structured::to_document`] gives that text.
pub struct Structured {
    body: Body,
    exit_status: i32,
    notes: Vec<String>,
}

enum Body {
    Audit(Box<crate::report::audit::AuditRun>),
    Plan(Box<crate::import::plan::document::ImportPlan>),
}

impl fmt::Debug for Structured {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.body {
            Body::Audit(_) => "kvcr.audit-report/v1",
            Body::Plan(_) => "kvcr.import-plan/v1",
        };
        f.debug_struct("Structured")
            .field("schema", &kind)
            .field("exit_status", &self.exit_status)
            .field("notes", &self.notes)
            .finish_non_exhaustive()
    }
}

impl serde::Serialize for Structured {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.body {
            Body::Audit(run) => crate::report::json::printed(
                &run.root,
                &run.meta,
                run.merge.as_ref(),
                &run.judgement,
            )
            .serialize(s),
            Body::Plan(plan) => plan.serialize(s),
        }
    }
}

impl Structured {
    /// The exit status the command line gives for this document
    /// ([`Document::exit_status`]).
    pub fn exit_status(&self) -> i32 {
        self.exit_status
    }

    /// The notes the command would print on stderr ([`Document::notes`]).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The document as the command line prints it: the JSON text.
    pub fn to_document(&self) -> Result<Document, Error> {
        match &self.body {
            Body::Audit(run) => audit_document(run, self.notes.clone()),
            Body::Plan(_) => {
                Ok(Document::of(self, self.exit_status)?.with_notes(self.notes.clone()))
            }
        }
    }
}

/// A deployment profile: a file, as `--profile FILE` names it, or the JSON
/// text of one (a caller that holds the profile in memory). The library
/// never reads `$KVCR_PROFILE`: a caller that wants it passes it here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Profile {
    /// `--profile FILE`: the report's `options.profile` is the path,
    /// `options.profile_source` `"flag"`.
    Path(PathBuf),
    /// The profile's JSON text (docs/format.md §4): the report's
    /// `options.profile` is `null`, `options.profile_source` `"value"`.
    Json(Vec<u8>),
}

/// The options of `kvcr audit` (docs/format.md §7), each as its flag takes
/// it, and what the command takes from its environment.
#[derive(Clone, Debug, Default)]
pub struct AuditOptions {
    /// `--profile` (never `$KVCR_PROFILE`: the library reads no environment).
    pub profile: Option<Profile>,
    /// `--engine ID`.
    pub engine: Option<String>,
    /// `--live`.
    pub live: bool,
    /// `--strict` (needs `live`).
    pub strict: bool,
    /// `--local-ranks` ([`RankSet::parse`] reads `0-3,8`).
    pub local_ranks: Option<RankSet>,
    /// `--min-epoch N`.
    pub min_epoch: Option<u64>,
    /// `--max-age`, in seconds ([`parse_age`] reads `15m`).
    pub max_age_s: Option<u64>,
    /// `--incarnation UUID`.
    pub incarnation: Option<uuid::Uuid>,
    /// The node `live` judges against: `None` reads this machine (`/proc`,
    /// the CUDA driver); a facts file (docs/live.md) describes another
    /// node instead, as `KVCR_NODE_FACTS` does for the command line. The
    /// report's `node_facts_source` names it, and [`Document::notes`] says
    /// so.
    pub node_facts: Option<PathBuf>,
    /// Threads that read and parse the descriptors, the calling thread
    /// included (`KVCR_THREADS` for the command line): `None` (or 0) is the
    /// number of CPUs this process may run on; at most 64. The report does
    /// not depend on it.
    pub threads: Option<usize>,
    /// `--producer-user`, as a uid: files it owns are trusted like root's
    /// and this process's user's (docs/format.md §2.4).
    pub producer_uid: Option<u32>,
}

/// How the library's notes and messages name a facts file (`node_facts=PATH`).
const NODE_FACTS_NAMED: &str = "node_facts=";

/// A finding's message as every kvcr output writes it: its text, with the
/// numbers it carries (an age, a moment) in the operator's units. The
/// numbers themselves are the message's parts
/// ([`Message::parts`](crate::format::finding::Message::parts)).
///
/// ```
/// use kvcr_audit::finding::Message;
/// let m = Message::from("sealed ").duration_ms(90_000).text(" ago");
/// assert_eq!(kvcr_audit::api::message_text(&m), "sealed 1m 30s ago");
/// ```
pub fn message_text(m: &crate::format::finding::Message) -> String {
    crate::format::message::render(m)
}

/// `--max-age` and `--max-report-age`: plain seconds or a number with the
/// unit s, m, h or d, in seconds.
pub fn parse_age(s: &str) -> Result<u64, Error> {
    crate::format::timefmt::parse_age(s).map_err(|e| Error::usage(format!("max_age: {e}")))
}

/// The inventory the command line would judge with these options.
fn inventory(
    root: &Path,
    profile: Option<&Profile>,
    engine: Option<&str>,
    o: &AuditOptions,
) -> Result<Inventory, Error> {
    let engine = engine
        .map(|e| {
            crate::format::descriptor::EngineId::parse(e)
                .map_err(|m| Error::usage(format!("engine {e:?}: {m}")))
        })
        .transpose()?;
    use crate::service::audit::ProfileSource;
    let (path, loaded, source) = match profile {
        None => (None, None, None),
        Some(Profile::Path(p)) => (
            Some(p.clone()),
            Some(crate::service::audit::load_profile(
                p,
                &p.display().to_string(),
            )?),
            Some(ProfileSource::Flag),
        ),
        Some(Profile::Json(bytes)) => {
            let p = crate::format::profile::parse_profile(bytes).map_err(|e| Error::Usage {
                message: format!("bad profile: {e}"),
                hint: Some("see docs/format.md §4 for the format".into()),
            })?;
            (None, Some(p), Some(ProfileSource::Value))
        }
    };
    crate::service::audit::check_engine(loaded.as_ref(), engine.as_ref())?;
    Ok(Inventory {
        root: Some(root.to_path_buf()),
        profile_source: source,
        profile_path: path,
        expect: crate::rules::Expectations {
            engine,
            profile: loaded,
            min_epoch: o.min_epoch,
            max_age_s: o.max_age_s,
            local_ranks: o.local_ranks.clone(),
            incarnation: o.incarnation,
            strict: false,
        },
        threads: crate::io::pipeline::threads(o.threads),
        node_facts: o.node_facts.clone(),
        producer_uid: o.producer_uid,
    })
}

/// The node probe for a live call, and the notes it is owed (returned,
/// never printed).
fn probe(
    facts: Option<&Path>,
) -> Result<(Box<dyn crate::io::node::NodeProbe>, Vec<String>), Error> {
    crate::io::node::probe(facts, NODE_FACTS_NAMED).map_err(Error::usage)
}

/// Audits the inventory at `root`: the `kvcr.audit-report/v1` document
/// `kvcr audit ROOT --format json` prints with the same options, computed
/// by the same code (docs/format.md §5, §9.2). A rejected group is not an
/// error: the report says so, and [`Document::exit_status`] is 1.
pub fn audit(root: &Path, o: &AuditOptions) -> Result<Report, Error> {
    audit_structured(root, o)?.to_document()
}

/// [`audit`]'s report before it is rendered as text: the same run, for a
/// caller that builds its own objects from it ([`Structured`]).
pub fn audit_structured(root: &Path, o: &AuditOptions) -> Result<Structured, Error> {
    let (inv, probe, notes) = audit_inputs(root, o)?;
    let run = crate::service::audit::audit(&inv, probe.as_deref(), false, false, o.strict)?.run;
    Ok(Structured {
        exit_status: run.judgement.exit_status(),
        body: Body::Audit(Box::new(run)),
        notes,
    })
}

/// The inventory and, in live mode, the node probe of an audit with `o`
/// and the notes the probe is owed.
type AuditInputs = (
    Inventory,
    Option<Box<dyn crate::io::node::NodeProbe>>,
    Vec<String>,
);

fn audit_inputs(root: &Path, o: &AuditOptions) -> Result<AuditInputs, Error> {
    if o.strict && !o.live {
        return Err(Error::usage("strict requires live (--strict needs --live)"));
    }
    let inv = inventory(root, o.profile.as_ref(), o.engine.as_deref(), o)?;
    let (probe, notes) = match o.live {
        true => {
            let (p, n) = probe(inv.node_facts.as_deref())?;
            (Some(p), n)
        }
        false => (None, Vec::new()),
    };
    Ok((inv, probe, notes))
}

/// The report of `run`, as `kvcr audit --format json` prints it, with the
/// notes the command would print on stderr.
fn audit_document(
    run: &crate::report::audit::AuditRun,
    notes: Vec<String>,
) -> Result<Report, Error> {
    let mut out = Vec::new();
    let printer = crate::report::Printer {
        format: crate::report::Format::Json,
        color: false,
        verbosity: crate::report::Verbosity::Normal,
        progress: false,
        width: None,
    };
    crate::report::audit::print_audit(&mut out, &printer, run, None)
        .map_err(|e| Error::usage(format!("cannot render the report: {e}")))?;
    Ok(Document {
        // The writer writes UTF-8 (docs/format.md §9.6): no copy.
        text: String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        exit_status: run.judgement.exit_status(),
        notes,
    })
}

/// What [`gms`] is asked for: the options of `kvcr gms`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GmsOptions {
    /// `--live`: lease owners and a held recovery barrier's owner checked
    /// against this node's processes.
    pub live: bool,
    /// `--num-blocks`: the block count the engine will ask recovery
    /// metadata for.
    pub num_blocks: Option<u64>,
    /// `--binding`: the binding digest the engine will compute.
    pub binding: Option<[u8; 32]>,
    /// `--interval-ms` (0 to 60000; `None`: the default, 200).
    pub interval_ms: Option<u64>,
    /// The environment GMS's variables (`GMS_KV_LEASE_SHM_DIR`,
    /// `FAILOVER_LOCK_PATH`, `DYN_KV_RECOVERY_PATH`, …, docs/format.md
    /// §14.1) are read from when no path is given: what a GMS process on
    /// this node sees. The library never reads its own process's
    /// environment; `kvcr gms` passes its own (`std::env::vars_os()`), the
    /// Python package `os.environ`. Empty: none set, GMS's defaults.
    pub env: std::collections::BTreeMap<std::ffi::OsString, std::ffi::OsString>,
}

/// `--binding`'s text (64 hex digits) as the digest [`GmsOptions`] takes.
pub fn parse_binding(s: &str) -> Result<[u8; 32], Error> {
    crate::gms::format::parse_binding(s).map_err(Error::usage)
}

/// Reads what Dynamo's GPU Memory Service left on this node and judges
/// it: the `kvcr.gms-report/v1` document `kvcr gms PATH... --format json`
/// prints (docs/format.md §14). With no path, looks where GMS puts its
/// artifacts, from [`GmsOptions::env`] as GMS reads it. A path that
/// does not exist, cannot be read or is no GMS artifact is [`Error::Usage`].
pub fn gms(paths: &[PathBuf], o: &GmsOptions) -> Result<Document, Error> {
    use crate::gms::rules::{Options, RecoveryAsk, DEFAULT_INTERVAL_MS, MAX_INTERVAL_MS};
    let interval_ms = o.interval_ms.unwrap_or(DEFAULT_INTERVAL_MS);
    if interval_ms > MAX_INTERVAL_MS {
        return Err(Error::usage(format!(
            "interval_ms {interval_ms} is out of range: 0 to {MAX_INTERVAL_MS}"
        )));
    }
    let options = Options {
        paths: paths.to_vec(),
        live: o.live,
        ask: RecoveryAsk {
            num_blocks: o.num_blocks,
            binding: o.binding,
        },
        interval_ms,
        env: o.env.clone(),
    };
    let run = crate::gms::run::run(&options)?;
    let doc = crate::gms::print::document(
        &run,
        crate::io::node::now_unix_ms(),
        &crate::io::node::hostname(),
    );
    Document::of(&doc, run.exit_status())
}

/// What [`pools`] is asked for: the options of `kvcr pools`, named after
/// KVCR's own flags and configuration fields (docs/format.md §16.2); the
/// command line resolves the same struct.
pub use crate::pools::Asked as PoolsOptions;

/// Reads NVIDIA KVCR's pool files and judges them, read-only: the
/// `kvcr.pools-report/v1` document `kvcr pools PATH... --format json`
/// prints (docs/format.md §16). No path is [`Error::Usage`] (KVCR has no
/// default pool directory), as is a path that does not exist, cannot be
/// read or is no pool file.
pub fn pools(paths: &[PathBuf], o: &PoolsOptions) -> Result<Document, Error> {
    let options = crate::pools::resolve(paths, o)?;
    let run = crate::pools::run(&options, &|ms| {
        std::thread::sleep(std::time::Duration::from_millis(ms))
    })?;
    let doc = crate::pools::report::document(
        &run,
        crate::io::node::now_unix_ms(),
        &crate::io::node::hostname(),
    );
    Document::of(&doc, run.exit_status())
}

/// What [`offload`] is asked for: the options of `kvcr offload`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OffloadOptions {
    /// `--producer`: `auto` (or `None`), `vllm`, `llmd`, `lmcache`,
    /// `lmcache-mp` or `sglang`.
    pub producer: Option<String>,
    /// `--threads` (`None`: 1; the library starts no more threads than asked).
    pub threads: Option<usize>,
    /// `--kv-bytes-per-chunk` (vLLM).
    pub kv_bytes_per_chunk: Option<u64>,
    /// `--bytes-per-block` (llm-d): per group id, `None` for every group.
    pub bytes_per_block: Vec<(Option<u32>, u64)>,
    /// `--chunk-bytes` (LMCache).
    pub chunk_bytes: Option<u64>,
    /// `--page-bytes` (SGLang).
    pub page_bytes: Option<u64>,
    /// `--model` (SGLang): the served model names, repeatable.
    pub models: Vec<String>,
    /// Without paths: SGLang's storage directory as the command takes it
    /// from `SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR` (the library reads no
    /// environment variable).
    pub sglang_storage_dir: Option<PathBuf>,
}

/// Reads the disk offload tiers at `paths` (none: the engines' default
/// roots) and judges every set: the `kvcr.offload-report/v1` document
/// `kvcr offload PATH... --format json` prints (docs/format.md §15). A
/// path that is missing, a symlink or not a directory, or a directory that
/// cannot be listed whole, is [`Error::Usage`].
pub fn offload(paths: &[PathBuf], o: &OffloadOptions) -> Result<Document, Error> {
    use crate::offload::{Choice, Geometry, Options};
    let producer = match o.producer.as_deref().unwrap_or("auto") {
        "auto" => Choice::Auto,
        "vllm" => Choice::Vllm,
        "llmd" => Choice::Llmd,
        "lmcache" => Choice::Lmcache,
        "lmcache-mp" => Choice::LmcacheMp,
        "sglang" => Choice::Sglang,
        other => {
            return Err(Error::usage(format!(
                "producer {other:?} is not one of auto, vllm, llmd, lmcache, lmcache-mp, sglang"
            )))
        }
    };
    for (what, v) in [
        ("kv_bytes_per_chunk", o.kv_bytes_per_chunk),
        ("chunk_bytes", o.chunk_bytes),
        ("page_bytes", o.page_bytes),
    ] {
        if v == Some(0) {
            return Err(Error::usage(format!("{what} 0 is not a size")));
        }
    }
    if o.bytes_per_block.iter().any(|&(_, n)| n == 0) {
        return Err(Error::usage("bytes_per_block 0 is not a size"));
    }
    let options = Options {
        paths: paths.to_vec(),
        producer,
        geometry: Geometry {
            kv_bytes_per_chunk: o.kv_bytes_per_chunk,
            bytes_per_block: o.bytes_per_block.iter().copied().collect(),
            chunk_bytes: o.chunk_bytes,
            page_bytes: o.page_bytes,
        },
        threads: o.threads.unwrap_or(1).max(1),
        sglang_models: o.models.iter().map(|m| m.as_bytes().to_vec()).collect(),
    };
    let dir = o.sglang_storage_dir.clone();
    let env = move |k: &str| {
        (k == crate::offload::walk::SGLANG_ROOT_ENV)
            .then(|| dir.clone().map(PathBuf::into_os_string))
            .flatten()
    };
    let now_ms = crate::io::node::now_unix_ms();
    let run = crate::offload::run(&options, &env, None, (now_ms / 1000) as i64)?;
    let doc = crate::offload::print::document(&run, now_ms, &crate::io::node::hostname());
    Document::of(&doc, run.exit_status())
}

/// Decodes and checks one descriptor file on its own: the `kvcr.examine/v1`
/// document `kvcr examine FILE --format json` prints.
pub fn examine(path: &Path) -> Result<Document, Error> {
    let e = crate::service::examine::examine(path, crate::io::node::now_unix_ms())?;
    let status = e.exit_status;
    Document::of(&e, status)
}

/// The first problem of a descriptor the writer refused, as a typed error.
fn descriptor_error(text: &[u8], fallback: String) -> Error {
    // Parsed again, from the caller's own text (integers as written), only
    // to name the problem: the rule is the parser's.
    let out = parse_descriptor(text);
    let field = out
        .schema_errors
        .iter()
        .find(|e| e.field != "digest")
        .cloned();
    if let Some(e) = field {
        return Error::Descriptor {
            code: Code::KV007,
            message: e.message(),
            field: Some(e.field),
        };
    }
    let finding = out
        .findings
        .iter()
        .find(|f| f.code != Code::KV008 && !f.message.starts_with("digest"))
        .cloned()
        // A rule one descriptor breaks on its own (KV101, KV104, KV108...),
        // judged on the sealed bytes, as the writer judged them.
        .or_else(|| {
            let sealed = crate::api::writer::sealed_text_unchecked(text).ok()?;
            crate::api::writer::own_rejects(&sealed).into_iter().next()
        });
    match finding {
        Some(f) => Error::Descriptor {
            code: f.code,
            field: None,
            message: crate::format::message::render(&f.message),
        },
        None if fallback.contains("1 MiB") => Error::Descriptor {
            code: Code::KV004,
            field: None,
            message: fallback,
        },
        None => Error::Descriptor {
            code: Code::KV007,
            field: None,
            message: fallback,
        },
    }
}

/// Seals a descriptor given as JSON text, as `kvcr seal --reseal-edited`
/// seals a file (docs/format.md §3.2, §3.5, §6.1): strict JSON (KV006), then
/// every check the audit makes apart from the digest (KV007...), then the
/// digest set (kept in place when present, else appended). A `digest` the
/// text already carries is replaced whatever it is: the caller built this
/// value (the command, which seals files someone else may have edited,
/// refuses a mismatch unless told). Returns the sealed bytes: two-space
/// indented JSON with a trailing newline, byte for byte what `kvcr seal`
/// writes for the same content and member order.
pub fn seal_json(text: &[u8]) -> Result<Vec<u8>, Error> {
    if text.len() as u64 > crate::format::descriptor::MAX_FILE_BYTES {
        return Err(Error::Descriptor {
            code: Code::KV004,
            field: None,
            message: format!("{} bytes, over the 1 MiB limit", text.len()),
        });
    }
    // Strict first, as `kvcr seal`: serde_json would take the last of two equal keys.
    json::parse(text).map_err(|e| Error::Descriptor {
        code: Code::KV006,
        field: None,
        message: format!("malformed: {e}"),
    })?;
    crate::api::writer::seal_text(text).map_err(|e| match e {
        crate::api::writer::Error::Refused(m) => descriptor_error(text, m),
        io => Error::usage(io.to_string()),
    })
}

/// The canonical digest (`sha256:…`, docs/format.md §3.2) of a JSON object
/// given as text, without its `digest` member: `kvcr digest`.
pub fn digest_json(text: &[u8]) -> Result<String, Error> {
    crate::api::writer::digest_of_bytes(text).map_err(|e| Error::Descriptor {
        code: Code::KV006,
        field: None,
        message: e.to_string(),
    })
}

/// Validates, seals and writes a descriptor given as JSON text as
/// `root/[subdir/]rank-<R>.json`: [`write_rank_json_with`] against this
/// machine.
pub fn write_rank_json(root: &Path, text: &[u8], subdir: Option<&Path>) -> Result<PathBuf, Error> {
    let o = WriteOptions {
        subdir: subdir.map(Path::to_path_buf),
        node_facts: None,
    };
    write_rank_json_with(root, text, &o)
}

/// The names of a `subdir`: a relative path of plain names, read from its
/// bytes as given (`Path::components` would drop a `.` in the middle,
/// `a/./b`, or at the end, `a/.`, without a word); empty names (`a//b`,
/// `a/`) name nothing.
fn subdir_names(sub: &Path) -> Result<Vec<std::ffi::OsString>, Error> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = sub.as_os_str().as_bytes();
    let names: Vec<&[u8]> = bytes.split(|&b| b == b'/').collect();
    let plain = !bytes.starts_with(b"/")
        && names.iter().any(|n| !n.is_empty())
        && names.iter().all(|n| *n != b"." && *n != b"..");
    if !plain {
        return Err(Error::usage(format!(
            "subdir {}: a relative path of plain names below the root (no leading /, no . or \
             .. component)",
            crate::format::names::display_path(sub)
        )));
    }
    Ok(names
        .into_iter()
        .filter(|n| !n.is_empty())
        .map(|n| std::ffi::OsStr::from_bytes(n).to_os_string())
        .collect())
}

/// The options of [`write_rank_json_with`].
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    /// A relative path of plain names below the root, created (mode 0700,
    /// whatever the umask) where missing; no component of it may be a
    /// symlink, `.` or `..`.
    pub subdir: Option<PathBuf>,
    /// The node the descriptor is checked against: `None` reads this
    /// machine; a facts file (docs/live.md) describes another (tests), as
    /// [`AuditOptions::node_facts`].
    pub node_facts: Option<PathBuf>,
}

/// Validates, seals and writes a descriptor given as JSON text as
/// `root/[subdir/]rank-<R>.json`, exactly as docs/format.md §3.5 says: every
/// check `kvcr examine` makes ([`seal_json`]); then the node facts that
/// must already hold when it is written: this node's hostname (KV110) and
/// boot id (KV108), the owner process alive with its start ticks (KV108),
/// each refused as [`Error::Descriptor`] with the audit's code and the
/// member (`node.hostname`, `node.boot_id`, `owner`) — not the writer's
/// quiescence, not the GPUs; then an exclusive staging file (mode 0600),
/// fsync, rename over the old file, directory fsync. Returns the path
/// written.
pub fn write_rank_json_with(root: &Path, text: &[u8], o: &WriteOptions) -> Result<PathBuf, Error> {
    // The subdir's names first: a bad argument is answered before the
    // descriptor is judged.
    let names = match o.subdir.as_deref() {
        Some(sub) => subdir_names(sub)?,
        None => Vec::new(),
    };
    let sealed = seal_json(text)?;
    let mismatches =
        crate::api::writer::node_mismatches(&sealed, o.node_facts.as_deref(), NODE_FACTS_NAMED)
            .map_err(Error::usage)?;
    if let Some((member, f)) = mismatches.into_iter().next() {
        return Err(Error::Descriptor {
            code: f.code,
            field: Some(member.to_string()),
            message: format!(
                "{member}: {}; a descriptor must describe this node and a running owner \
                 when it is written",
                crate::format::message::render(&f.message)
            ),
        });
    }
    // seal_json checked the schema: rank is an integer below 4096.
    let rank = crate::format::descriptor::parse_descriptor(&sealed)
        .descriptor
        .map(|d| d.rank)
        .ok_or_else(|| Error::Other {
            message: "internal error: the sealed descriptor does not parse".to_string(),
            status: crate::format::exit::INTERNAL,
        })?;
    let meta = std::fs::metadata(root)
        .map_err(|e| Error::usage(format!("inventory root {}: {e}", root.display())))?;
    if !meta.is_dir() {
        return Err(Error::usage(format!(
            "inventory root {} is not a directory",
            root.display()
        )));
    }
    // Held open from the root down, each component opened with O_NOFOLLOW
    // below the one before: a directory swapped for a symlink at any moment
    // is refused, never followed (the checks and the write name one inode).
    use rustix::fs::{Mode, OFlags};
    let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut fd = rustix::fs::open(root, dir_flags, Mode::empty())
        .map_err(|e| Error::usage(format!("inventory root {}: {e}", root.display())))?;
    let mut dir = root.to_path_buf();
    for name in &names {
        let name = name.as_os_str();
        dir.push(name);
        let open = |fd: &rustix::fd::OwnedFd| {
            rustix::fs::openat(fd, name, dir_flags | OFlags::NOFOLLOW, Mode::empty())
        };
        let next = match open(&fd) {
            Err(rustix::io::Errno::NOENT) => {
                match rustix::fs::mkdirat(&fd, name, Mode::from_raw_mode(0o700)) {
                    // Created here: 0700 whatever the umask took away
                    // (§2.4). Through an O_PATH fd of the very
                    // directory (a umask of 0777 leaves nothing this
                    // user may open it with), then opened through it.
                    // The trusted /proc does both (`crate::io::procfs`).
                    Ok(()) => match rustix::fs::openat(
                        &fd,
                        name,
                        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    )
                    .map_err(std::io::Error::from)
                    .and_then(|p| {
                        let proc = crate::io::procfs::ProcFs::system();
                        proc.chmod(std::os::fd::AsFd::as_fd(&p), 0o700)?;
                        proc.reopen(std::os::fd::AsFd::as_fd(&p), dir_flags)
                    }) {
                        Ok(n) => Ok(n),
                        Err(e) => match e.raw_os_error() {
                            Some(n) => Err(rustix::io::Errno::from_raw_os_error(n)),
                            // A /proc that is not trusted: its words.
                            None => {
                                return Err(Error::usage(format!(
                                    "cannot open or create {}: {e}",
                                    dir.display()
                                )))
                            }
                        },
                    },
                    Err(rustix::io::Errno::EXIST) => open(&fd),
                    Err(e) => Err(e),
                }
            }
            other => other,
        };
        // O_NOFOLLOW | O_DIRECTORY on a symlink is ELOOP or ENOTDIR.
        let is_link = || {
            rustix::fs::statat(&fd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_symlink())
        };
        fd = match next {
            Ok(n) => n,
            Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) if is_link() => {
                return Err(Error::Other {
                    message: format!(
                        "{} is a symlink; descriptors are never written through one",
                        dir.display()
                    ),
                    status: crate::format::exit::REJECTED,
                })
            }
            Err(rustix::io::Errno::NOTDIR) => {
                return Err(Error::usage(format!(
                    "{} exists and is not a directory",
                    dir.display()
                )))
            }
            Err(e) => {
                return Err(Error::usage(format!(
                    "cannot open or create {}: {e}",
                    dir.display()
                )))
            }
        };
    }
    let name = format!("rank-{rank}.json");
    // Into the held directory, by its descriptor: nothing is resolved by
    // name again.
    crate::io::output::write_atomic_at(
        std::os::fd::AsFd::as_fd(&fd),
        &dir,
        std::ffi::OsStr::new(&name),
        &sealed,
        0o600,
        None,
    )
    .map_err(|e| {
        Error::usage(
            crate::api::writer::Error::Io {
                what: e.what,
                source: e.source,
            }
            .to_string(),
        )
    })?;
    drop(fd);
    Ok(dir.join(name))
}

/// The current epoch of group `engine` in the inventory at `root`: the
/// highest epoch any of its descriptors states (current, superseded or
/// rejected alike; one whose identity alone can be read counts too), or
/// `None` when the inventory holds none. A producer's first start takes the
/// larger of this and the epoch it persisted, plus one (docs/format.md
/// §3.5); an empty inventory and no state is the one case that starts at 1.
/// Reads the inventory as the audit does (no live facts).
pub fn current_epoch(root: &Path, engine: &str) -> Result<Option<u64>, Error> {
    let engine = crate::format::descriptor::EngineId::parse(engine)
        .map_err(|m| Error::usage(format!("engine {engine:?}: {m}")))?;
    let inv = Inventory {
        root: Some(root.to_path_buf()),
        threads: crate::io::pipeline::threads(None),
        ..Inventory::default()
    };
    let opts = crate::io::pipeline::Options {
        threads: inv.threads,
        keep_allocations: false,
        producer_uid: None,
    };
    let (cands, _files) = crate::service::audit::collect(&inv.root()?, false, &opts)?;
    Ok(crate::rules::highest_epoch(&cands, &engine))
}

/// The start time of process `pid` (field 22 of `/proc/<pid>/stat`, clock
/// ticks since boot), read the way the live audit reads it. An error when
/// there is no such process, or only its zombie.
pub fn proc_start_ticks(pid: i32) -> Result<u64, Error> {
    match crate::io::node::proc::start_ticks(pid) {
        crate::io::node::Fact::Known(Some(t)) => Ok(t),
        crate::io::node::Fact::Known(None) => Err(Error::Other {
            message: format!("no running process {pid}"),
            status: crate::format::exit::REJECTED,
        }),
        crate::io::node::Fact::NotChecked(why) => Err(Error::usage(format!(
            "cannot read the start time of process {pid}: {why}"
        ))),
    }
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`, without its newline),
/// read the way the live audit reads it.
pub fn boot_id() -> Result<uuid::Uuid, Error> {
    match crate::io::node::proc::boot_id() {
        crate::io::node::Fact::Known(u) => Ok(u),
        crate::io::node::Fact::NotChecked(why) => Err(Error::usage(why)),
    }
}

/// The options of the readiness gate: those of `kvcr import` that apply
/// before the driver.
#[derive(Clone, Debug)]
pub struct GateOptions {
    /// `--profile`: required (a missing or incomplete one is [`Error::Usage`]).
    pub profile: Option<Profile>,
    /// `--engine ID`.
    pub engine: Option<String>,
    /// `--local-ranks`.
    pub local_ranks: Option<RankSet>,
    /// `--fleet-report FILE`: the `kvcr merge` report proving the whole group.
    pub fleet_report: Option<PathBuf>,
    /// `--max-report-age`, seconds (default 300).
    pub max_report_age_s: u64,
    /// The node the gate judges against: `None` reads this machine; a
    /// facts file describes another (as [`AuditOptions::node_facts`]). On a
    /// machine without a GPU driver the GPUs cannot be checked, and the
    /// gate refuses (`not-checked`) unless a facts file lists them
    /// (docs/live.md).
    pub node_facts: Option<PathBuf>,
    /// As [`AuditOptions::threads`].
    pub threads: Option<usize>,
}

impl Default for GateOptions {
    fn default() -> GateOptions {
        GateOptions {
            profile: None,
            engine: None,
            local_ranks: None,
            fleet_report: None,
            max_report_age_s: 300,
            node_facts: None,
            threads: None,
        }
    }
}

/// The import plan (`kvcr.import-plan/v1`, docs/format.md §13.4).
pub type ImportPlan = Document;

/// The engine's readiness question: runs the import gate of `kvcr import`
/// in live, strict mode, in the documented order of answers (docs/format.md
/// §8.9), up to and not including the driver check, with no GPU call.
/// Returns the accepted group's import plan; a refusal is
/// [`Error::Refused`] with the import report, a missing or incomplete
/// profile [`Error::Usage`].
pub fn gate(root: &Path, o: &GateOptions) -> Result<ImportPlan, Error> {
    gate_structured(root, o)?.to_document()
}

/// [`gate`]'s plan before it is rendered as text ([`Structured`]); a
/// refusal is the same [`Error`] as [`gate`]'s.
pub fn gate_structured(root: &Path, o: &GateOptions) -> Result<Structured, Error> {
    let audit_options = AuditOptions {
        local_ranks: o.local_ranks.clone(),
        node_facts: o.node_facts.clone(),
        threads: o.threads,
        ..AuditOptions::default()
    };
    let inv = inventory(
        root,
        o.profile.as_ref(),
        o.engine.as_deref(),
        &audit_options,
    )?;
    let (probe, notes) = probe(inv.node_facts.as_deref())?;
    let req = crate::import::gate::order::Inputs {
        inventory: &inv,
        fleet_report: o.fleet_report.as_deref(),
        max_report_age_s: o.max_report_age_s,
        probe: probe.as_ref(),
        progress: false,
    };
    match crate::import::gate::readiness::ask(&req) {
        Ok(plan) => Ok(Structured {
            body: Body::Plan(Box::new(plan)),
            exit_status: crate::format::exit::OK,
            notes,
        }),
        Err(crate::import::gate::readiness::NotReady::Usage(f)) => Err(f.into()),
        Err(crate::import::gate::readiness::NotReady::Refused(report)) => {
            let message = first_reason(&report);
            Err(Error::Refused {
                message,
                report: Document::of(&report, crate::format::exit::REJECTED)?.with_notes(notes),
            })
        }
    }
}

/// One line saying why the gate refused.
fn first_reason(r: &crate::import::report::Report) -> String {
    if let Some(x) = r.refusals.first() {
        return x.message.clone();
    }
    if let Some(g) = &r.audit {
        return format!("group {}: {}", g.engine_id, g.cause);
    }
    if let Some(f) = r.files.first() {
        let code = f.findings.first().map(|x| x.code.as_str()).unwrap_or("");
        return format!("{code} {}: a rejecting finding in the inventory", f.path);
    }
    match &r.engine_id {
        Some(e) => format!("no descriptor of group {e}"),
        None => "no descriptor found".into(),
    }
}
pub mod writer;

/// Audits descriptor files given as bytes (docs/format.md §13.1): the
/// `kvcr.audit-report/v1` document `kvcr audit ROOT --format json` prints,
/// with the same options, for an inventory at `root` that holds exactly
/// `files` and nothing else, each a regular file of mode `0600` owned by
/// this user with one name, in directories of mode `0700` on the root's
/// mount (§2.3–§2.5: how the writer of §3.5 leaves them). The same walk
/// order, size limit, parser and verdict core judge them as [`audit`]
/// judges that inventory; only the disk is not read: nothing is opened
/// under `root`, which is the name the report gives the inventory. A
/// profile given as a path is read, and `live` asks this node (or
/// `KVCR_NODE_FACTS`) as [`audit`] does.
///
/// Each file is `(path, bytes)`, the path relative to `root`, of plain
/// names, naming a descriptor (`g0/rank-0.json`; §2.2, at most 8 levels
/// deep, no directory named like a descriptor or a staging leftover).
/// Anything else, or a path given twice, is [`Error::Usage`]: the checks of
/// the files themselves (links, modes, owners, stray and torn entries) are
/// [`audit`]'s, on a real inventory. For a producer's tests and for the fuzz
/// targets (fuzz/), which judge thousands of inventories a second this way;
/// tests/it/library/api.rs checks that both routes give the same report.
///
/// ```
/// use kvcr_audit::api::{audit_files, AuditOptions};
/// use std::path::Path;
/// let report = audit_files(
///     Path::new("/run/kv/inventory"),
///     &[(Path::new("g0/rank-0.json"), b"{}".as_slice())],
///     &AuditOptions::default(),
/// )?;
/// assert_eq!(report.exit_status(), 1); // "{}" is no descriptor (KV007)
/// # Ok::<(), kvcr_audit::api::Error>(())
/// ```
pub fn audit_files(
    root: &Path,
    files: &[(&Path, &[u8])],
    o: &AuditOptions,
) -> Result<Report, Error> {
    let (inv, probe, notes) = audit_inputs(root, o)?;
    let run = crate::service::audit::audit_in_memory(&inv, files, probe.as_deref(), o.strict)?.run;
    audit_document(&run, notes)
}
