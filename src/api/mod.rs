//! The library API: what the `kvcr` command does, callable in-process
//! (docs/format.md §13, docs/python.md). The Python package `kvcr`
//! (`python/`) is built on this module alone.
//!
//! Every function runs the code the command line runs, never a copy of a
//! rule: [`audit`] is `kvcr audit --format json`, [`examine`] is
//! `kvcr examine --format json`, [`seal_json`] and [`digest_json`] are
//! `kvcr seal` and `kvcr digest` on JSON text, [`write_rank_json`] is the
//! writer of docs/format.md §3.5, [`gate`] is `kvcr import` up to (not
//! including) the driver check (§8.9), answering with the import plan,
//! [`gms`] is `kvcr gms --format json` (§14).
//!
//! Documents (reports, plans) come back as the exact JSON text the command
//! prints ([`Document`]), so a caller parses them with the JSON library it
//! already has; integers are never rounded through a float.
//!
//! ```no_run
//! use kvcr::api::{audit, AuditOptions};
//! let report = audit("/run/kv/inventory".as_ref(), &AuditOptions::default())?;
//! println!("exit status {}", report.exit_status());
//! # Ok::<(), kvcr::api::Error>(())
//! ```
//!
//! Versioning: this module follows the crate's semantic version; the JSON
//! documents carry their own `schema` (`kvcr.audit-report/v1`,
//! `kvcr.examine/v1`, `kvcr.import-plan/v1`, `kvcr.import-report/v1`,
//! `kvcr.gms-report/v1`).

use crate::format::descriptor::parse_descriptor;
use crate::format::failure::Failure;
use crate::format::finding::Code;
use crate::format::json;
use crate::format::rankset::RankSet;
use crate::io::audit::Inventory;
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
/// object, a trailing newline), with the exit status it stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Document {
    text: String,
    exit_status: i32,
}

impl Document {
    fn of<T: serde::Serialize>(value: &T, exit_status: i32) -> Result<Document, Error> {
        let mut out = Vec::new();
        crate::format::json::write(&mut out, value)
            .map_err(|e| Error::usage(format!("cannot render the document: {e}")))?;
        Ok(Document {
            text: String::from_utf8_lossy(&out).into_owned(),
            exit_status,
        })
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

/// A deployment profile: a file, as `--profile FILE` names it, or the JSON
/// text of one (a caller that holds the profile in memory).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Profile {
    /// `--profile FILE`.
    Path(PathBuf),
    /// A file named by `$KVCR_PROFILE` ([`Profile::from_env`]): judged as
    /// [`Profile::Path`], and the report's `options.profile_source` is
    /// `"env"`, as on the command line.
    FromEnv(PathBuf),
    /// The profile's JSON text (docs/format.md §4); the report's
    /// `options.profile` is then `null`.
    Json(Vec<u8>),
}

impl Profile {
    /// `$KVCR_PROFILE` when set and not empty, as the command line reads it.
    pub fn from_env() -> Option<Profile> {
        std::env::var_os("KVCR_PROFILE")
            .filter(|p| !p.is_empty())
            .map(|p| Profile::FromEnv(PathBuf::from(p)))
    }
}

/// The options of `kvcr audit` (docs/format.md §7), each as its flag takes it.
#[derive(Clone, Debug, Default)]
pub struct AuditOptions {
    /// `--profile`. Not read from `$KVCR_PROFILE` here: see [`Profile::from_env`].
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
    /// `--producer-user`, as a uid: files it owns are trusted like root's
    /// and this process's user's (docs/format.md §2.4).
    pub producer_uid: Option<u32>,
}

/// A finding's message as every kvcr output writes it: its text, with the
/// numbers it carries (an age, a moment) in the operator's units. The
/// numbers themselves are the message's parts
/// ([`Message::parts`](crate::format::finding::Message::parts)).
///
/// ```
/// use kvcr::finding::Message;
/// let m = Message::from("sealed ").duration_ms(90_000).text(" ago");
/// assert_eq!(kvcr::api::message_text(&m), "sealed 1m 30s ago");
/// ```
pub fn message_text(m: &crate::format::finding::Message) -> String {
    crate::format::message::render(m)
}

/// `--max-age` and `--max-report-age`: plain seconds or a number with the
/// unit s, m, h or d, in seconds.
pub fn parse_age(s: &str) -> Result<u64, Error> {
    crate::format::timefmt::parse_age(s).map_err(|e| Error::usage(format!("max_age: {e}")))
}

/// `KVCR_NODE_FACTS` when set and not empty.
fn node_facts_from_env() -> Option<PathBuf> {
    std::env::var_os(crate::io::node::facts_file::ENV)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
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
    let from_env = matches!(profile, Some(Profile::FromEnv(_)));
    let (path, loaded) = match profile {
        None => (None, None),
        Some(Profile::Path(p) | Profile::FromEnv(p)) => {
            let shown = if from_env {
                format!("{} (from $KVCR_PROFILE)", p.display())
            } else {
                p.display().to_string()
            };
            (
                Some(p.clone()),
                Some(crate::io::audit::load_profile(p, &shown)?),
            )
        }
        Some(Profile::Json(bytes)) => {
            let p = crate::format::profile::parse_profile(bytes).map_err(|e| Error::Usage {
                message: format!("bad profile: {e}"),
                hint: Some("see docs/format.md §4 for the format".into()),
            })?;
            (None, Some(p))
        }
    };
    crate::io::audit::check_engine(loaded.as_ref(), engine.as_ref())?;
    Ok(Inventory {
        root: Some(root.to_path_buf()),
        profile_from_env: path.is_some() && from_env,
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
        threads: crate::io::pipeline::threads_from_env(),
        node_facts: node_facts_from_env(),
        producer_uid: o.producer_uid,
    })
}

/// Audits the inventory at `root`: the `kvcr.audit-report/v1` document
/// `kvcr audit ROOT --format json` prints with the same options, computed
/// by the same code (docs/format.md §5, §9.2). A rejected group is not an
/// error: the report says so, and [`Document::exit_status`] is 1.
pub fn audit(root: &Path, o: &AuditOptions) -> Result<Report, Error> {
    if o.strict && !o.live {
        return Err(Error::usage("strict requires live (--strict needs --live)"));
    }
    let inv = inventory(root, o.profile.as_ref(), o.engine.as_deref(), o)?;
    let probe = o
        .live
        .then(|| crate::io::audit::probe_node(inv.node_facts.as_deref()))
        .transpose()
        .map_err(Error::usage)?;
    let run = crate::io::audit::audit(&inv, probe.as_deref(), false, false, o.strict)?.run;
    let mut out = Vec::new();
    let printer = crate::report::Printer {
        format: crate::report::Format::Json,
        color: false,
        verbosity: crate::report::Verbosity::Normal,
        progress: false,
        width: None,
    };
    crate::report::audit::print_audit(&mut out, &printer, &run, None)
        .map_err(|e| Error::usage(format!("cannot render the report: {e}")))?;
    Ok(Document {
        text: String::from_utf8_lossy(&out).into_owned(),
        exit_status: run.judgement.exit_status(),
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
}

/// `--binding`'s text (64 hex digits) as the digest [`GmsOptions`] takes.
pub fn parse_binding(s: &str) -> Result<[u8; 32], Error> {
    crate::format::gms::parse_binding(s).map_err(Error::usage)
}

/// Reads what Dynamo's GPU Memory Service left on this node and judges
/// it: the `kvcr.gms-report/v1` document `kvcr gms PATH... --format json`
/// prints (docs/format.md §14). With no path, looks where GMS puts its
/// artifacts, from this process's environment as GMS reads it. A path that
/// does not exist, cannot be read or is no GMS artifact is [`Error::Usage`].
pub fn gms(paths: &[PathBuf], o: &GmsOptions) -> Result<Document, Error> {
    use crate::rules::gms::{Options, RecoveryAsk, DEFAULT_INTERVAL_MS, MAX_INTERVAL_MS};
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
    };
    let run = crate::io::gms::run(&options, &crate::io::gms::process_env)?;
    let doc = crate::report::gms::document(
        &run,
        crate::io::node::now_unix_ms(),
        &crate::io::node::hostname(),
    );
    Document::of(&doc, run.exit_status())
}

/// Decodes and checks one descriptor file on its own: the `kvcr.examine/v1`
/// document `kvcr examine FILE --format json` prints.
pub fn examine(path: &Path) -> Result<Document, Error> {
    let e = crate::io::examine::examine(path, crate::io::node::now_unix_ms())?;
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
        .find(|f| f.code != Code::KV008 && !f.message.starts_with("digest"));
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

/// Seals a descriptor given as JSON text, as `kvcr seal` seals a file
/// (docs/format.md §3.2, §3.5): strict JSON (KV006), then every check the
/// audit makes apart from the digest (KV007...), then the digest set (kept
/// in place when present, else appended). Returns the sealed bytes: two-space
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
/// `root/[subdir/]rank-<R>.json`, exactly as docs/format.md §3.5 says: an
/// exclusive staging file (mode 0600), fsync, rename over the old file,
/// directory fsync. `subdir` is a relative path of plain names, created
/// (mode 0700) where missing; no component of it may be a symlink, `.` or
/// `..`. Returns the path written.
pub fn write_rank_json(root: &Path, text: &[u8], subdir: Option<&Path>) -> Result<PathBuf, Error> {
    let sealed = seal_json(text)?;
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
    if let Some(sub) = subdir {
        for c in sub.components() {
            let std::path::Component::Normal(name) = c else {
                return Err(Error::usage(format!(
                    "subdir {}: only plain names below the root (no /, . or ..)",
                    sub.display()
                )));
            };
            dir.push(name);
            let open = |fd: &rustix::fd::OwnedFd| {
                rustix::fs::openat(fd, name, dir_flags | OFlags::NOFOLLOW, Mode::empty())
            };
            let next = match open(&fd) {
                Err(rustix::io::Errno::NOENT) => {
                    match rustix::fs::mkdirat(&fd, name, Mode::from_raw_mode(0o700)) {
                        Ok(()) | Err(rustix::io::Errno::EXIST) => open(&fd),
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
    }
    let name = format!("rank-{rank}.json");
    // The held directory, by its descriptor: nothing is resolved by name again.
    let held = PathBuf::from(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&fd)
    ));
    let shown = |m: String| m.replace(&held.display().to_string(), &dir.display().to_string());
    crate::api::writer::write_atomic(&held, std::ffi::OsStr::new(&name), &sealed, 0o600, None)
        .map_err(|e| match e {
            crate::api::writer::Error::Refused(m) => Error::Other {
                message: shown(m),
                status: crate::format::exit::REJECTED,
            },
            io => Error::usage(shown(io.to_string())),
        })?;
    drop(fd);
    Ok(dir.join(name))
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
}

impl Default for GateOptions {
    fn default() -> GateOptions {
        GateOptions {
            profile: None,
            engine: None,
            local_ranks: None,
            fleet_report: None,
            max_report_age_s: 300,
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
    let audit_options = AuditOptions {
        local_ranks: o.local_ranks.clone(),
        ..AuditOptions::default()
    };
    let inv = inventory(
        root,
        o.profile.as_ref(),
        o.engine.as_deref(),
        &audit_options,
    )?;
    let probe = crate::io::audit::probe_node(inv.node_facts.as_deref()).map_err(Error::usage)?;
    let req = crate::import::gate::order::Inputs {
        inventory: &inv,
        fleet_report: o.fleet_report.as_deref(),
        max_report_age_s: o.max_report_age_s,
        probe: probe.as_ref(),
        progress: false,
    };
    match crate::import::gate::readiness::ask(&req) {
        Ok(plan) => Document::of(&plan, crate::format::exit::OK),
        Err(crate::import::gate::readiness::NotReady::Usage(f)) => Err(f.into()),
        Err(crate::import::gate::readiness::NotReady::Refused(report)) => {
            let message = first_reason(&report);
            Err(Error::Refused {
                message,
                report: Document::of(&report, crate::format::exit::REJECTED)?,
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
