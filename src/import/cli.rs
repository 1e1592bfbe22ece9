//! `kvcr import` (docs/format.md §8): live audit → select → plan → dry-run, trial or
//! hold → report and exit status.
//!
//! [`import`] is the whole command minus the process-wide parts (the
//! environment, the signal handlers, stdout): tests drive it with a node
//! description, a simulated backend and an interrupt closure. [`run`] wires
//! it to the real node probe, the CUDA backend (or the test-only backend of
//! `KVCR_IMPORT_BACKEND`), SIGINT/SIGTERM and the printers.

use super::cuda::{CudaBackend, DriverError};
use super::gate::{self, Gate, Refusal};
use super::plan::{self, Audited, PlannedAllocation};
use super::ready::ReadyFile;
use super::sim::{BackendSpec, Injected};
use super::{
    execute, human_bytes, signals, Backend, Event, Ledger, Outcome, Plan, RankResult,
    ReleaseReport, Resource, Step, StepFailure,
};
use crate::app::{self, AuditRun, Failure};
use crate::cli::{ImportArgs, InventoryArgs};
use crate::exit;
use crate::finding::Finding;
use crate::node::{self, NodeProbe};
use crate::report::sanitize::terminal;
use crate::report::{self, Format, Printer, Verbosity};
use crate::verdict::{FileVerdict, GroupVerdict, Verdict};
use serde::Serialize;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;
use uuid::Uuid;

pub const REPORT_SCHEMA: &str = "kvcr.import-report/v1";
pub const READY_SCHEMA: &str = "kvcr.import-ready/v1";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Audit and plan; no CUDA call.
    DryRun,
    /// Import, verify, release in reverse (the default).
    Trial,
    /// Import, verify, publish the ready file, wait for SIGINT/SIGTERM, release.
    Hold,
}

impl Mode {
    pub fn of(a: &ImportArgs) -> Mode {
        if a.dry_run {
            Mode::DryRun
        } else if a.hold {
            Mode::Hold
        } else {
            Mode::Trial
        }
    }
}

/// The `result` of an import report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResultKind {
    /// Dry run: the plan was printed (exit 0).
    Planned,
    /// The audit refused the group, or no descriptor was found (exit 1).
    Rejected,
    /// Every rank imported and verified, then released: right away (trial)
    /// or on SIGINT/SIGTERM (hold) (exit 0).
    Imported,
    /// A step failed; everything taken was released (exit 3).
    Failed,
    /// SIGINT/SIGTERM during the import; everything taken was released (exit 130).
    Interrupted,
    /// Releasing failed; `remaining` lists what is still held (exit 4).
    ReleaseFailed,
}

impl ResultKind {
    pub fn status(self) -> i32 {
        match self {
            ResultKind::Planned | ResultKind::Imported => exit::OK,
            ResultKind::Rejected => exit::REJECTED,
            ResultKind::Failed => exit::IMPORT_FAILED,
            ResultKind::Interrupted => exit::INTERRUPTED,
            ResultKind::ReleaseFailed => exit::RELEASE_FAILED,
        }
    }
}

/// One rank in the report.
#[derive(Clone, Debug, Serialize)]
pub struct RankRow {
    pub rank: u64,
    pub gpu_uuid: String,
    pub path: String,
    /// The device ordinal the backend found by UUID (not in a dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<i32>,
    pub allocations: usize,
    pub bytes: u128,
    /// Time to import the rank (not in a dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ms: Option<u64>,
    /// The planned allocations (id, handle kind, size).
    pub items: Vec<PlannedAllocation>,
}

/// A resource still held after a failed release.
#[derive(Clone, Debug, Serialize)]
pub struct RemainingRow {
    pub rank: u64,
    pub allocation: Option<String>,
    pub resource: Resource,
    /// The call that should have released it.
    pub release_call: &'static str,
    /// The driver's answer, when the release was attempted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The driver call and its status, when a driver call refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<super::DriverCall>,
}

/// The `kvcr import` report (`--format json` prints it as one document).
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub schema: &'static str,
    /// Report metadata (docs/format.md §9.4); `exit_status` is the import's.
    #[serde(flatten)]
    pub meta: report::json::Meta,
    pub root: String,
    pub engine_id: Option<String>,
    pub mode: Mode,
    /// "cuda", "sim" (test-only) or "none" (dry run, or refused before a backend was used).
    pub backend: &'static str,
    pub result: ResultKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    /// Dry run: every planned rank. Otherwise: the ranks fully imported
    /// (before a failure, only those that completed).
    pub ranks: Vec<RankRow>,
    /// Which rank, allocation and step failed or was interrupted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<StepFailure>,
    /// How many ledger entries were released (reverse order).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub released: Option<usize>,
    /// What is still held after a failed release (exit 4).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub remaining: Vec<RemainingRow>,
    /// The group's audit verdict when the import was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit: Option<GroupVerdict>,
    /// Rejecting file-level findings that refused the import.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FileVerdict>,
    /// What refused the import (exit 1: the fleet report, facts not
    /// checked); in a dry run, everything that would refuse the real import.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refusals: Vec<Refusal>,
    /// Things that went wrong without changing the result (e.g. the ready
    /// file could not be removed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Report {
    pub fn status(&self) -> i32 {
        self.result.status()
    }
}

/// Where the GPU side comes from. The driver is the third answer of the
/// import (docs/format.md §8.9): it is looked at only once the audit has
/// accepted the group, so a rejected group is exit 1 on a node without one.
pub enum Gpu<'a> {
    /// A backend already open (the library's own tests).
    Open(&'a mut dyn Backend),
    /// Opened when the import gets that far.
    Connect {
        /// Why no usable driver is present, if so (the dry run lists it);
        /// imports nothing.
        check: &'a dyn Fn() -> Option<String>,
        /// Opens the backend; an error is exit 2 (no driver, the stub).
        open: &'a dyn Fn() -> Result<Box<dyn Backend>, Failure>,
    },
}

/// What one `kvcr import` needs besides its arguments.
pub struct Deps<'a> {
    pub probe: &'a dyn NodeProbe,
    pub gpu: Gpu<'a>,
    /// Asked before every step and while holding.
    pub interrupted: &'a dyn Fn() -> bool,
    /// Show a progress bar on stderr.
    pub progress: bool,
    /// How often a hold checks for the signal.
    pub poll: Duration,
}

/// What [`import`] hands back for printing.
pub struct Done {
    pub report: Report,
    /// The live audit, when the import was refused (the table prints it).
    pub audit: Option<AuditRun>,
}

/// The import settings, resolved once from the arguments and the
/// environment before any work starts.
pub struct Request<'a> {
    pub inventory: &'a InventoryArgs,
    pub mode: Mode,
    pub ready_file: Option<&'a Path>,
    /// `--fleet-report`: proof of the whole group for a local part.
    pub fleet_report: Option<&'a Path>,
    /// `--max-report-age`, seconds.
    pub max_report_age_s: u64,
}

impl<'a> Request<'a> {
    pub fn of(a: &'a ImportArgs) -> Request<'a> {
        Request {
            inventory: &a.inventory,
            mode: Mode::of(a),
            ready_file: a.ready_file.as_deref(),
            fleet_report: a.fleet_report.as_deref(),
            max_report_age_s: a.max_report_age,
        }
    }
}

/// Rows for every planned rank (`done` is `None`: a dry run), or for the
/// ranks in `done` only.
fn rank_rows(plan: &Plan, done: Option<&[RankResult]>) -> Vec<RankRow> {
    plan.ranks
        .iter()
        .filter_map(|pr| {
            let r = done.and_then(|d| d.iter().find(|r| r.rank == pr.rank));
            if r.is_none() && done.is_some() {
                return None;
            }
            Some(RankRow {
                rank: pr.rank,
                gpu_uuid: pr.gpu.to_string(),
                path: pr.path.clone(),
                device: r.map(|r| r.device),
                allocations: pr.allocations.len(),
                bytes: pr.bytes(),
                ms: r.map(|r| r.ms),
                items: pr.planned_allocations(),
            })
        })
        .collect()
}

fn remaining_rows(rel: &ReleaseReport) -> Vec<RemainingRow> {
    rel.remaining
        .iter()
        .map(|e| RemainingRow {
            rank: e.rank,
            allocation: e.allocation.clone(),
            resource: e.resource,
            release_call: e.resource.release_call(),
            error: rel
                .failed
                .iter()
                .find(|f| f.entry.seq == e.seq)
                .map(|f| f.message.clone()),
            driver: rel
                .failed
                .iter()
                .find(|f| f.entry.seq == e.seq)
                .and_then(|f| f.driver),
        })
        .collect()
}

fn first_release_failure(rel: &ReleaseReport) -> Option<StepFailure> {
    rel.failed.first().map(|f| StepFailure {
        rank: f.entry.rank,
        allocation: f.entry.allocation.clone(),
        step: Step::Release,
        message: format!(
            "{} of {}: {}",
            f.entry.resource.release_call(),
            f.entry.resource,
            f.message
        ),
        driver: f.driver,
    })
}

/// The content of the ready file.
#[derive(Serialize)]
struct ReadyDoc<'a> {
    schema: &'static str,
    engine_id: &'a str,
    incarnation: Option<Uuid>,
    epoch: Option<u64>,
    /// The holding kvcr process: signal it to release.
    pid: u32,
    /// Its start time (field 22 of /proc/PID/stat), so a reused pid is not
    /// taken for the holder.
    #[serde(skip_serializing_if = "Option::is_none")]
    start_ticks: Option<u64>,
    ranks: Vec<ReadyRank<'a>>,
}

#[derive(Serialize)]
struct ReadyRank<'a> {
    rank: u64,
    gpu_uuid: &'a str,
    device: i32,
    allocations: usize,
    bytes: u128,
}

fn ready_content(plan: &Plan, ranks: &[RankResult]) -> Vec<u8> {
    let doc = ReadyDoc {
        schema: READY_SCHEMA,
        engine_id: &plan.engine_id,
        incarnation: plan.incarnation,
        epoch: plan.epoch,
        pid: std::process::id(),
        start_ticks: crate::node::proc::start_ticks(std::process::id() as i32)
            .known()
            .copied()
            .flatten(),
        ranks: ranks
            .iter()
            .map(|r| ReadyRank {
                rank: r.rank,
                gpu_uuid: &r.gpu_uuid,
                device: r.device,
                allocations: r.allocations,
                bytes: r.bytes,
            })
            .collect(),
    };
    let mut v = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    v.push(b'\n');
    v
}

fn progress_bar(enabled: bool, total: usize) -> Option<indicatif::ProgressBar> {
    enabled.then(|| {
        let b = indicatif::ProgressBar::with_draw_target(
            Some(total as u64),
            indicatif::ProgressDrawTarget::stderr(),
        );
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{spinner} importing [{bar:30}] {pos}/{len} allocations  {msg}",
        ) {
            b.set_style(style.progress_chars("=> "));
        }
        b
    })
}

/// The whole `kvcr import` for one request. `on_ready` is called once a
/// hold has imported every rank and published the ready file, before it
/// waits for the signal.
pub fn import(
    req: &Request,
    deps: Deps,
    on_ready: &mut dyn FnMut(&Report),
) -> Result<Done, Failure> {
    // 1. Usage errors (exit 2): a bad ready file, then the declared profile.
    // A hold's ready file is prepared before anything else, so a bad path is
    // a usage error and not a failed import.
    if let Some(p) = req.ready_file {
        app::refuse_inside_inventory(req.inventory, p, "--ready-file")?;
    }
    let mut ready = match (req.mode, req.ready_file) {
        (Mode::Hold, Some(p)) => Some(ReadyFile::prepare(p).map_err(|e| {
            Failure::usage(
                format!("cannot prepare --ready-file {}: {e}", p.display()),
                Some(
                    "choose a path in an existing, writable directory that does not exist yet"
                        .into(),
                ),
            )
        })?),
        _ => None,
    };
    let expect = app::expectations(req.inventory)?;
    let mut refusals = Vec::new();
    if let Some(r) = gate::profile(expect.profile.as_ref()) {
        if req.mode != Mode::DryRun {
            return Err(Failure::usage(
                r.message,
                Some("write the profile the group was deployed with (docs/format.md §4; `kvcr schema profile`), or plan without one: kvcr import --dry-run".into()),
            ));
        }
        refusals.push(r);
    }

    // 2. The live audit, one group: a rejection on facts that were checked is exit 1.
    let Audited { run, descriptors } = plan::audit_live(req.inventory, deps.probe, deps.progress)?;
    // `strict` (in the metadata) is true for a real import, which refuses
    // facts not checked; false for a dry run, which only lists them
    // (docs/format.md §8.9).
    let mut meta = run.meta.clone();
    meta.strict = req.mode != Mode::DryRun;
    let mut report = Report {
        schema: REPORT_SCHEMA,
        meta,
        root: run.root.clone(),
        engine_id: None,
        mode: req.mode,
        backend: "none",
        result: ResultKind::Rejected,
        incarnation: None,
        epoch: None,
        ranks: Vec::new(),
        failure: None,
        released: None,
        remaining: Vec::new(),
        audit: None,
        files: Vec::new(),
        refusals: Vec::new(),
        warnings: Vec::new(),
    };
    let judgement = &run.judgement;
    let Some(group) = plan::select(&judgement.groups, req.inventory.engine.as_deref())? else {
        report.files = rejecting_files(&judgement.files);
        return Ok(Done {
            report,
            audit: Some(run),
        });
    };
    report.engine_id = Some(group.engine_id.clone());
    report.incarnation = group.incarnation;
    report.epoch = group.epoch;
    let files = rejecting_files(&judgement.files);
    if group.verdict == Verdict::Reject || !files.is_empty() {
        // Refused before any GPU call.
        report.audit = Some(group.clone());
        report.files = files;
        return Ok(Done {
            report,
            audit: Some(run),
        });
    }
    // A local part needs proof of the whole group (exit 1).
    let fleet = gate::Fleet {
        report: req.fleet_report,
        max_age_s: req.max_report_age_s,
        now_ms: run.now_ms,
    };
    if let Some(r) = gate::fleet(&fleet, group, run.node.as_ref()) {
        if req.mode != Mode::DryRun {
            report.refusals.push(r);
            return Ok(Done {
                report,
                audit: None,
            });
        }
        refusals.push(r);
    }

    // Plan from the very descriptors the audit judged.
    let plan = Plan::from_group(group, &descriptors).map_err(|e| Failure {
        status: exit::USAGE,
        message: format!("internal error while planning: {e}"),
        hint: Some("nothing was imported; please report this".into()),
    })?;
    let not_checked = gate::not_checked(group);
    if req.mode == Mode::DryRun {
        // The audit's verdict is the exit status; the plan lists what
        // would still refuse the real import, in the order it would.
        if let Gpu::Connect { check, .. } = &deps.gpu {
            if let Some(why) = check() {
                refusals.push(Refusal::new(Gate::Driver, why));
            }
        }
        refusals.extend(not_checked);
        refusals.sort_by_key(|r| r.gate);
        report.refusals = refusals;
        report.result = ResultKind::Planned;
        report.ranks = rank_rows(&plan, None);
        return Ok(Done {
            report,
            audit: None,
        });
    }

    // 3. The driver (exit 2), only now: a rejected group never needed one.
    let mut opened;
    let backend: &mut dyn Backend = match deps.gpu {
        Gpu::Open(b) => b,
        Gpu::Connect { open, .. } => {
            opened = open()?;
            opened.as_mut()
        }
    };

    // 4. Facts that could not be checked (exit 1), before any GPU call.
    if let Some(r) = not_checked {
        report.audit = Some(group.clone());
        report.refusals.push(r);
        return Ok(Done {
            report,
            audit: None,
        });
    }
    report.backend = backend.name();

    // 3–5. Import everything, all or nothing.
    let mut ledger = Ledger::new();
    let bar = progress_bar(deps.progress, plan.allocations());
    let mut on_event = |e: Event| {
        if let Some(b) = &bar {
            match e {
                Event::RankStarted { rank, gpu, .. } => {
                    b.set_message(format!("rank {rank} → {gpu}"))
                }
                Event::AllocationDone { .. } => b.inc(1),
                Event::RankDone { .. } => {}
            }
        }
    };
    let outcome = execute(&plan, backend, &mut ledger, deps.interrupted, &mut on_event);
    if let Some(b) = &bar {
        b.finish_and_clear();
    }

    match outcome {
        Outcome::Imported { ranks } => {
            report.ranks = rank_rows(&plan, Some(&ranks));
            let last = ranks.last().map(|r| r.rank).unwrap_or(0);
            // A signal that arrived during the last step still interrupts.
            let mut stop: Option<StepFailure> = (deps.interrupted)().then(|| StepFailure {
                rank: last,
                allocation: None,
                step: if req.mode == Mode::Hold {
                    Step::ReadyFile
                } else {
                    Step::Release
                },
                message: "interrupted by a signal after every rank was imported".into(),
                driver: None,
            });
            let mut failed = None;
            if stop.is_none() && req.mode == Mode::Hold {
                if let Some(rf) = ready.as_mut() {
                    if let Err(e) = rf.publish(&ready_content(&plan, &ranks)) {
                        failed = Some(StepFailure {
                            rank: last,
                            allocation: None,
                            step: Step::ReadyFile,
                            message: format!("cannot publish {}: {e}", rf.path().display()),
                            driver: None,
                        });
                    }
                }
                // A signal from here on (the supervisor reacting to the
                // file, say) is the normal end of a hold: exit 0.
                if failed.is_none() {
                    report.result = ResultKind::Imported;
                    on_ready(&report);
                    while !(deps.interrupted)() {
                        std::thread::sleep(deps.poll);
                    }
                }
            }
            // The ready file goes before the memory does.
            if let Some(mut rf) = ready.take() {
                if let Err(e) = rf.remove() {
                    report.warnings.push(format!(
                        "cannot remove ready file {}: {e}",
                        rf.path().display()
                    ));
                }
            }
            let rel = ledger.release_all(backend);
            report.released = Some(rel.released.len());
            report.remaining = remaining_rows(&rel);
            report.result = if !rel.is_clean() {
                ResultKind::ReleaseFailed
            } else if failed.is_some() {
                ResultKind::Failed
            } else if stop.is_some() {
                ResultKind::Interrupted
            } else {
                ResultKind::Imported
            };
            report.failure = failed
                .or(stop.take())
                .or_else(|| first_release_failure(&rel));
        }
        Outcome::Failed {
            failure,
            ranks,
            release,
        } => {
            report.ranks = rank_rows(&plan, Some(&ranks));
            report.result = if release.is_clean() {
                ResultKind::Failed
            } else {
                ResultKind::ReleaseFailed
            };
            report.failure = Some(failure);
            report.released = Some(release.released.len());
            report.remaining = remaining_rows(&release);
        }
        Outcome::Interrupted { at, ranks, release } => {
            report.ranks = rank_rows(&plan, Some(&ranks));
            report.result = if release.is_clean() {
                ResultKind::Interrupted
            } else {
                ResultKind::ReleaseFailed
            };
            report.failure = Some(at);
            report.released = Some(release.released.len());
            report.remaining = remaining_rows(&release);
        }
    }
    Ok(Done {
        report,
        audit: None,
    })
}

fn rejecting_files(files: &[FileVerdict]) -> Vec<FileVerdict> {
    files
        .iter()
        .filter(|f| f.findings.iter().any(Finding::is_reject))
        .cloned()
        .collect()
}

/// Builds the backend `KVCR_IMPORT_BACKEND` asks for (CUDA by default;
/// VMM mappings read-only unless `read_write`).
fn make_backend(spec: &BackendSpec, read_write: bool) -> Result<Box<dyn Backend>, Failure> {
    if spec.sim {
        let b = spec.build_sim().map_err(|e| {
            Failure::usage(
                format!("{}: cannot open the sim log: {e}", BackendSpec::ENV),
                None,
            )
        })?;
        return Ok(Box::new(b));
    }
    let cuda = CudaBackend::new().map_err(|e| Failure {
        status: exit::USAGE,
        message: e.to_string(),
        hint: Some(match e {
            DriverError::NotFound => "install the NVIDIA driver (libcuda.so.1) on this node, or run `kvcr import --dry-run` to audit and plan without one".into(),
            DriverError::TooOld { .. } => "upgrade the NVIDIA driver, or run `kvcr import --dry-run` to audit and plan without one".into(),
            DriverError::Stub(_) => "remove the CUDA toolkit's stubs directory (…/lib64/stubs) from LD_LIBRARY_PATH, or install the NVIDIA driver; `kvcr import --dry-run` audits and plans without one".into(),
        }),
    })?
    .read_write(read_write);
    if spec.is_plain_cuda() {
        Ok(Box::new(cuda))
    } else {
        Ok(Box::new(Injected {
            inner: cuda,
            faults: spec.faults.clone(),
        }))
    }
}

/// `kvcr import`.
pub fn run(a: &ImportArgs) -> Result<i32, Failure> {
    if a.output.format == Format::Prometheus {
        return Err(Failure::usage(
            "--format prometheus is for kvcr audit",
            Some("use --format table or --format json with kvcr import".to_string()),
        ));
    }
    let p = Printer::from_env(
        a.output.format,
        a.output.color,
        a.output.quiet,
        a.output.verbose,
    );
    let spec = match std::env::var(BackendSpec::ENV) {
        Ok(s) if !s.is_empty() => BackendSpec::parse(&s).map_err(|e| {
            Failure::usage(
                format!("{}={s:?}: {e}", BackendSpec::ENV),
                Some("unset it: it exists for kvcr's own tests".into()),
            )
        })?,
        _ => BackendSpec::default(),
    };
    let req = Request::of(a);
    let mode = req.mode;
    let probe = node::real_probe().map_err(|e| Failure::usage(e, None))?;
    let flag = spec.flag();
    let interrupted = move || signals::interrupted() || flag.load(Ordering::SeqCst);
    let _signals = match mode {
        Mode::DryRun => None,
        _ => Some(signals::install().map_err(|e| {
            Failure::usage(format!("cannot install SIGINT/SIGTERM handlers: {e}"), None)
        })?),
    };
    let quiet = p.verbosity == Verbosity::Quiet;
    let check = || {
        if spec.sim {
            return None;
        }
        CudaBackend::new().err().map(|e| e.to_string())
    };
    let open = || {
        let b = make_backend(&spec, a.map_read_write)?;
        if spec.sim && !quiet {
            eprintln!(
                "kvcr: warning: {} selects the simulated backend: no GPU memory is imported",
                BackendSpec::ENV
            );
        }
        Ok(b)
    };
    let deps = Deps {
        probe: probe.as_ref(),
        gpu: Gpu::Connect {
            check: &check,
            open: &open,
        },
        interrupted: &interrupted,
        progress: p.progress,
        poll: Duration::from_millis(50),
    };
    let mut on_ready = |r: &Report| {
        if p.verbosity == Verbosity::Quiet {
            return;
        }
        if p.format == Format::Table {
            let _ = app::emit(|out| write_table(out, &p, r));
        }
        eprintln!(
            "kvcr: holding {} ranks of {}; send SIGINT or SIGTERM (kill -TERM {}) to release",
            r.ranks.len(),
            terminal(r.engine_id.as_deref().unwrap_or("?")),
            std::process::id()
        );
    };
    let done = import(&req, deps, &mut on_ready)?;
    let status = done.report.status();
    if p.verbosity != Verbosity::Quiet {
        match p.format {
            Format::Json => {
                let mut r = done.report.clone();
                r.meta.exit_status = r.status();
                app::emit(|out| report::json::write(out, &r))?
            }
            Format::Prometheus => unreachable!("refused at the start of run"),
            Format::Table => {
                if let Some(run) = &done.audit {
                    app::emit(|out| app::print_audit(out, &p, run))?;
                }
                let held_already = mode == Mode::Hold && done.report.result == ResultKind::Imported;
                app::emit(|out| {
                    if !held_already {
                        write_table(out, &p, &done.report)?;
                    }
                    write_result(out, &done.report)
                })?;
            }
        }
    }
    Ok(status)
}

/// The per-rank table: the plan (dry run) or what was imported.
pub fn write_table(out: &mut dyn Write, p: &Printer, r: &Report) -> io::Result<()> {
    use comfy_table::{presets, Attribute, Cell, ContentArrangement, Table};
    let engine = r.engine_id.as_deref().unwrap_or("-");
    let mut head = format!(
        "{} {}  [{}",
        match r.mode {
            Mode::DryRun => "plan for",
            _ => "import of",
        },
        terminal(engine),
        match r.mode {
            Mode::DryRun => "dry run",
            Mode::Trial => "trial",
            Mode::Hold => "hold",
        }
    );
    if r.backend != "none" {
        head.push_str(&format!(", {} backend", r.backend));
    }
    head.push(']');
    if let Some(i) = r.incarnation {
        head.push_str(&format!("  incarnation {}", &i.to_string()[..8]));
    }
    if let Some(e) = r.epoch {
        head.push_str(&format!(" epoch {e}"));
    }
    writeln!(out, "{head}")?;
    if r.ranks.is_empty() {
        return Ok(());
    }
    let dry = r.mode == Mode::DryRun;
    let mut t = Table::new();
    t.load_style(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Dynamic);
    let mut header = vec!["rank", "gpu"];
    if !dry {
        header.push("device");
    }
    header.extend(["allocations", "bytes"]);
    header.push(if dry { "descriptor" } else { "time" });
    t.set_header(header.iter().map(|h| {
        let c = Cell::new(h);
        if p.color {
            c.add_attribute(Attribute::Bold)
        } else {
            c
        }
    }));
    if !p.color {
        t.force_no_tty();
    }
    for row in &r.ranks {
        let kinds = {
            let mut counts = std::collections::BTreeMap::<&str, usize>::new();
            for a in &row.items {
                *counts.entry(a.kind).or_default() += 1;
            }
            counts
                .iter()
                .map(|(k, n)| format!("{k}×{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut alloc = format!("{} ({kinds})", row.allocations);
        if p.verbosity == Verbosity::Verbose {
            for a in &row.items {
                alloc.push_str(&format!(
                    "\n  {} {} {}",
                    terminal(&a.id),
                    a.kind,
                    human_bytes(a.size_bytes as u128)
                ));
            }
        }
        let mut cells = vec![row.rank.to_string(), row.gpu_uuid.clone()];
        if !dry {
            cells.push(row.device.map(|d| d.to_string()).unwrap_or_default());
        }
        cells.push(alloc);
        cells.push(human_bytes(row.bytes));
        cells.push(if dry {
            terminal(&row.path).into_owned()
        } else {
            row.ms.map(report::human_duration_ms).unwrap_or_default()
        });
        t.add_row(cells);
    }
    // comfy-table pads the last column; no line ends in spaces.
    for line in t.to_string().lines() {
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// The closing lines: what happened and what is left.
pub fn write_result(out: &mut dyn Write, r: &Report) -> io::Result<()> {
    let allocs: usize = r.ranks.iter().map(|x| x.allocations).sum();
    let bytes: u128 = r.ranks.iter().map(|x| x.bytes).sum();
    let released = r.released.unwrap_or(0);
    match r.result {
        ResultKind::Planned => {
            writeln!(
                out,
                "planned: {} ranks, {allocs} allocations, {}; nothing imported (dry run)",
                r.ranks.len(),
                human_bytes(bytes)
            )?;
            if !r.refusals.is_empty() {
                writeln!(out, "the real import would be refused:")?;
                for x in &r.refusals {
                    writeln!(out, "  - (exit {}) {}", x.status, terminal(&x.message))?;
                }
            }
        }
        ResultKind::Rejected => {
            let why = match (&r.audit, r.refusals.first()) {
                (_, Some(x)) => terminal(&x.message).into_owned(),
                (Some(g), None) => format!("group {} rejected: {}", terminal(&g.engine_id), terminal(&g.cause)),
                (None, None) if !r.files.is_empty() => format!(
                    "{} file(s) in the inventory carry rejecting findings",
                    r.files.len()
                ),
                (None, None) => "no descriptor found".into(),
            };
            writeln!(out, "import refused, nothing imported: {why}")?;
            if r.refusals.is_empty() && r.audit.is_some() && !r.files.is_empty() {
                writeln!(
                    out,
                    "  also: {} file(s) in the inventory carry rejecting findings",
                    r.files.len()
                )?;
            }
        }
        ResultKind::Imported => writeln!(
            out,
            "imported and verified {} ranks ({allocs} allocations, {}), then released all {released} resources in reverse order{}",
            r.ranks.len(),
            human_bytes(bytes),
            if r.mode == Mode::Hold { " on signal" } else { " (trial)" }
        )?,
        ResultKind::Failed | ResultKind::Interrupted | ResultKind::ReleaseFailed => {
            if let Some(f) = &r.failure {
                let verb = if r.result == ResultKind::Interrupted
                    || f.message.starts_with("interrupted")
                {
                    "INTERRUPTED"
                } else if f.step == Step::Release {
                    "RELEASE FAILED"
                } else {
                    "FAILED"
                };
                writeln!(out, "{verb}: {}", terminal(&f.to_string()))?;
            }
            if r.remaining.is_empty() {
                writeln!(
                    out,
                    "released all {released} resources taken, in reverse order; nothing remains held"
                )?;
            } else {
                writeln!(
                    out,
                    "release failed: released {released} resources in reverse order; {} remain held by this process:",
                    r.remaining.len()
                )?;
                for x in &r.remaining {
                    let alloc = x
                        .allocation
                        .as_deref()
                        .map(|a| format!(" allocation {:?}", terminal(a)))
                        .unwrap_or_default();
                    writeln!(
                        out,
                        "  rank {}{alloc}: {} ({}){}",
                        x.rank,
                        x.resource,
                        x.release_call,
                        x.error
                            .as_deref()
                            .map(|e| format!(": {}", terminal(e)))
                            .unwrap_or_default()
                    )?;
                }
            }
        }
    }
    for w in &r.warnings {
        writeln!(out, "warning: {}", terminal(w))?;
    }
    Ok(())
}
