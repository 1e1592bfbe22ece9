//! The `kvcr import` flow (docs/format.md §8): live audit → select → gate →
//! plan → dry run, trial or hold → the report and its exit status.
//!
//! Nothing process-wide happens here (the environment, signal handlers and
//! stdout are [`super::setup`]'s): tests drive [`import`] with a described
//! node, a simulated backend and an interrupt closure.

use super::gate::{self, Gate, Refusal};
use super::plan::{self, Plan};
use super::ready::{ready_content, ReadyFile};
use super::report::{
    first_release_failure, rank_rows, rejecting_files, remaining_rows, Mode, Report, ResultKind,
};
use super::{
    execute, Backend, Cause, Event, Ledger, Outcome, RankResult, ReleaseReport, Step, StepFailure,
};
use crate::audit::{self, AuditRun, Audited};
use crate::descriptor::Descriptor;
use crate::error::Failure;
use crate::node::NodeProbe;
use crate::settings::Inventory;
use crate::verdict::{GroupVerdict, Verdict};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// One import: what to audit and prove, and the process-wide facts.
pub struct Request<'a> {
    pub inventory: &'a Inventory,
    /// `--fleet-report`: proof of the whole group for a local part.
    pub fleet_report: Option<&'a Path>,
    /// `--max-report-age`, seconds.
    pub max_report_age_s: u64,
    pub probe: &'a dyn NodeProbe,
    /// Asked before every step and while holding.
    pub interrupted: &'a dyn Fn() -> bool,
    /// Show a progress bar on stderr.
    pub progress: bool,
}

/// Where the GPU side comes from. The driver is the third answer of the
/// import (docs/format.md §8.9): it is opened only once the audit has
/// accepted the group, so a rejected group is exit 1 on a node without one.
pub enum Gpu<'a> {
    /// A backend already open (the library's own tests).
    #[cfg(test)]
    Open(&'a mut dyn Backend),
    /// Opened when the import gets that far; an error is exit 2 (no
    /// driver, the stub).
    Connect(&'a dyn Fn() -> Result<Box<dyn Backend>, Failure>),
}

/// What to do with an accepted group, each mode with what it needs.
pub enum Action<'a> {
    /// Audit and plan; no CUDA call. `driver` says why no usable driver is
    /// present, if so (the plan lists it).
    DryRun {
        driver: &'a dyn Fn() -> Option<String>,
    },
    /// Import, verify, release in reverse.
    Trial { gpu: Gpu<'a> },
    /// Import, verify, publish the ready file, wait for the interrupt
    /// (asked every `poll`), release. `on_ready` is called once every rank
    /// is imported and the ready file published.
    Hold {
        gpu: Gpu<'a>,
        ready_file: Option<&'a Path>,
        poll: Duration,
        on_ready: &'a mut dyn FnMut(&Report),
    },
}

impl Action<'_> {
    pub fn mode(&self) -> Mode {
        match self {
            Action::DryRun { .. } => Mode::DryRun,
            Action::Trial { .. } => Mode::Trial,
            Action::Hold { .. } => Mode::Hold,
        }
    }
}

/// What [`import`] hands back for printing.
pub struct Done {
    pub report: Report,
    /// The live audit, when the import was refused (the table prints it).
    pub audit: Option<AuditRun>,
}

impl Done {
    fn of(report: Report, audit: Option<AuditRun>) -> Done {
        Done { report, audit }
    }
}

/// The whole `kvcr import` for one request.
pub fn import(req: &Request, run: Action) -> Result<Done, Failure> {
    let mode = run.mode();
    // 1. Usage errors (exit 2): a bad ready file, then the declared profile.
    let mut ready = prepare_ready_file(req, &run)?;
    let mut refusals = profile_gate(req, mode)?;

    // 2. The live audit, one group: a rejection on facts that were checked is exit 1.
    // Not strict here: facts not checked are the gate's fourth answer, after the driver.
    let Audited {
        run: audited,
        descriptors,
    } = audit::audit(req.inventory, Some(req.probe), req.progress, true, false)?;
    let mut report = Report::before_gate(&audited.meta, &audited.root, mode);
    let (group, plan) = match gate_group(
        req,
        mode,
        &audited,
        &descriptors,
        &mut report,
        &mut refusals,
    )? {
        Gated::Go { group, plan } => (group, plan),
        Gated::Refused { audit: true } => return Ok(Done::of(report, Some(audited))),
        Gated::Refused { audit: false } => return Ok(Done::of(report, None)),
    };
    let not_checked = gate::not_checked(group);
    let (gpu, mut hold) = match run {
        Action::DryRun { driver } => {
            // The plan lists what would still refuse the real import, in
            // the order it would; the first one is the exit status.
            refusals.extend(driver().map(|why| Refusal::new(Gate::Driver, why)));
            refusals.extend(not_checked);
            refusals.sort_by_key(|r| r.gate);
            report.refusals = refusals;
            report.result = ResultKind::Planned;
            report.ranks = rank_rows(&plan, None);
            report.plan = super::readiness::ImportPlan::new(
                super::readiness::origin(&audited),
                group,
                &plan,
                &descriptors,
            )
            .ok();
            return Ok(Done::of(report, None));
        }
        Action::Trial { gpu } => (gpu, None),
        Action::Hold {
            gpu,
            poll,
            on_ready,
            ..
        } => (gpu, Some((poll, on_ready))),
    };

    // 3. The driver (exit 2), only now: a rejected group never needed one.
    let mut opened;
    let backend: &mut dyn Backend = match gpu {
        #[cfg(test)]
        Gpu::Open(b) => b,
        Gpu::Connect(open) => {
            opened = open()?;
            opened.as_mut()
        }
    };

    // 4. Facts that could not be checked (exit 1), before any GPU call.
    if let Some(r) = not_checked {
        report.audit = Some(group.clone());
        report.refusals.push(r);
        return Ok(Done::of(report, None));
    }
    report.backend = backend.name();

    // 3–5. Import everything, all or nothing.
    let mut ledger = Ledger::new();
    let outcome = execute_with_progress(req, &plan, backend, &mut ledger);
    match outcome {
        Outcome::Imported { ranks } => {
            let end = Imported {
                req,
                mode,
                plan: &plan,
                ranks: &ranks,
            };
            end.finish(&mut report, &mut ready, hold.as_mut(), ledger, backend);
        }
        Outcome::Failed {
            failure: at,
            ranks,
            release,
        }
        | Outcome::Interrupted { at, ranks, release } => {
            not_imported(&mut report, &plan, at, &ranks, &release)
        }
    }
    Ok(Done::of(report, None))
}

/// How far the gates before the driver let the import go.
enum Gated<'a> {
    /// The group, accepted, and the plan of its import.
    Go { group: &'a GroupVerdict, plan: Plan },
    /// Refused: the report says why; `audit` when the table prints the
    /// live audit with it.
    Refused { audit: bool },
}

/// The gates before the driver (docs/format.md §8.9): select the group, the
/// audit's verdict, the fleet report for a local part, the plan and the
/// profile's required content. A dry run collects the refusals the real
/// import would stop at (`refusals`) and goes on.
fn gate_group<'a>(
    req: &Request,
    mode: Mode,
    audited: &'a AuditRun,
    descriptors: &BTreeMap<Vec<u8>, Descriptor>,
    report: &mut Report,
    refusals: &mut Vec<Refusal>,
) -> Result<Gated<'a>, Failure> {
    let judgement = &audited.judgement;
    // A dry run of a refused group still says that the real import would
    // have stopped at the profile first (exit 2).
    let profile_refusal = refusals.clone();
    let Some(group) = plan::select(&judgement.groups, req.inventory.expect.engine.as_deref())?
    else {
        report.files = rejecting_files(&judgement.files);
        report.refusals = profile_refusal;
        return Ok(Gated::Refused { audit: true });
    };
    report.engine_id = Some(group.engine_id.clone());
    report.incarnation = group.incarnation;
    report.epoch = group.epoch;
    let files = rejecting_files(&judgement.files);
    if group.verdict == Verdict::Reject || !files.is_empty() {
        // Refused before any GPU call.
        report.audit = Some(group.clone());
        report.files = files;
        report.refusals = profile_refusal;
        return Ok(Gated::Refused { audit: true });
    }
    // A local part needs proof of the whole group (exit 1).
    let fleet = gate::Fleet {
        report: req.fleet_report,
        max_age_s: req.max_report_age_s,
        now_ms: audited.now_ms,
    };
    if let Some(r) = gate::fleet(&fleet, group, audited.node.as_ref()) {
        if mode != Mode::DryRun {
            report.refusals.push(r);
            return Ok(Gated::Refused { audit: false });
        }
        refusals.push(r);
    }

    // Plan from the very descriptors the audit judged.
    let plan = Plan::from_group(group, descriptors).map_err(|e| {
        Failure::internal(
            format!("internal error while planning: {e}"),
            Some("nothing was imported; please report this".into()),
        )
    })?;
    // The profile's require_content (exit 1), before any GPU call.
    if let Some(r) = gate::content(req.inventory.expect.profile.as_ref(), &plan) {
        if mode != Mode::DryRun {
            report.refusals.push(r);
            return Ok(Gated::Refused { audit: false });
        }
        refusals.push(r);
    }
    Ok(Gated::Go { group, plan })
}

/// A step failed or was interrupted; the ledger was released in reverse.
fn not_imported(
    report: &mut Report,
    plan: &Plan,
    at: StepFailure,
    ranks: &[RankResult],
    release: &ReleaseReport,
) {
    report.ranks = rank_rows(plan, Some(ranks));
    report.result = match at.cause {
        _ if !release.is_clean() => ResultKind::ReleaseFailed,
        Cause::Failed => ResultKind::Failed,
        Cause::Interrupted => ResultKind::Interrupted,
    };
    report.failure = Some(at);
    report.released = Some(release.released.len());
    report.remaining = remaining_rows(release);
}

/// A hold's ready file is prepared before anything else, so a bad path is
/// a usage error and not a failed import.
fn prepare_ready_file(req: &Request, run: &Action) -> Result<Option<ReadyFile>, Failure> {
    let Action::Hold {
        ready_file: Some(p),
        ..
    } = run
    else {
        return Ok(None);
    };
    audit::refuse_inside_inventory(req.inventory, p, "--ready-file")?;
    let ready = ReadyFile::prepare(p).map_err(|e| {
        Failure::usage(
            format!("cannot prepare --ready-file {}: {e}", p.display()),
            Some("choose a path in an existing, writable directory that does not exist yet".into()),
        )
    })?;
    Ok(Some(ready))
}

/// The declared profile: a usage error (exit 2) for a real import, the
/// first refusal listed by a dry run.
fn profile_gate(req: &Request, mode: Mode) -> Result<Vec<Refusal>, Failure> {
    let mut refusals = Vec::new();
    if let Some(r) = gate::profile(req.inventory.expect.profile.as_ref()) {
        if mode != Mode::DryRun {
            return Err(Failure::usage(
                r.message,
                Some(
                    "write the profile the group was deployed with (docs/format.md §4; `kvcr \
                    schema profile`), or plan without one: kvcr import --dry-run"
                        .into(),
                ),
            ));
        }
        refusals.push(r);
    }
    Ok(refusals)
}

/// The plan executed, all or nothing, with a progress bar when asked for.
fn execute_with_progress(
    req: &Request,
    plan: &Plan,
    backend: &mut dyn Backend,
    ledger: &mut Ledger,
) -> Outcome {
    let bar = progress_bar(req.progress, plan.allocations());
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
    let outcome = execute(plan, backend, ledger, req.interrupted, &mut on_event);
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    outcome
}

/// A hold's wait: how often the interrupt is asked, and what is told once
/// the group is ready.
type Hold<'a> = (Duration, &'a mut dyn FnMut(&Report));

/// Every rank imported: the hold (ready file, wait), then the release.
struct Imported<'r> {
    req: &'r Request<'r>,
    mode: Mode,
    plan: &'r Plan,
    ranks: &'r [RankResult],
}

impl Imported<'_> {
    fn finish(
        &self,
        report: &mut Report,
        ready: &mut Option<ReadyFile>,
        hold: Option<&mut Hold>,
        mut ledger: Ledger,
        backend: &mut dyn Backend,
    ) {
        let (req, plan, ranks) = (self.req, self.plan, self.ranks);
        report.ranks = rank_rows(plan, Some(ranks));
        // Whole-import steps (ready file, release) are named after the last
        // rank imported; a plan of an accepted group is never empty (world
        // size ≥ 1; local ranks outside it are KV101), so 0 is never used.
        let last = ranks.last().map(|r| r.rank).unwrap_or(0);
        // A signal that arrived during the last step still interrupts.
        let mut stop: Option<StepFailure> = (req.interrupted)().then(|| StepFailure {
            rank: last,
            allocation: None,
            step: if self.mode == Mode::Hold {
                Step::ReadyFile
            } else {
                Step::Release
            },
            cause: Cause::Interrupted,
            error: "interrupted by a signal after every rank was imported".into(),
        });
        let mut failed = None;
        if let (None, Some((poll, on_ready))) = (&stop, hold) {
            failed = self.hold(report, ready, *poll, &mut **on_ready, last);
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

    /// Publishes the ready file, tells `on_ready` and waits for the
    /// interrupt; a ready file that cannot be published is the failure.
    fn hold(
        &self,
        report: &mut Report,
        ready: &mut Option<ReadyFile>,
        poll: Duration,
        on_ready: &mut dyn FnMut(&Report),
        last: u64,
    ) -> Option<StepFailure> {
        let mut failed = None;
        if let Some(rf) = ready.as_mut() {
            if let Err(e) = rf.publish(&ready_content(self.plan, self.ranks, report.backend)) {
                failed = Some(StepFailure {
                    rank: last,
                    allocation: None,
                    step: Step::ReadyFile,
                    cause: Cause::Failed,
                    error: format!("cannot publish {}: {e}", rf.path().display()).into(),
                });
            }
        }
        // A signal from here on (the supervisor reacting to the
        // file, say) is the normal end of a hold: exit 0.
        if failed.is_none() {
            report.result = ResultKind::Imported;
            on_ready(report);
            while !(self.req.interrupted)() {
                std::thread::sleep(poll);
            }
        }
        failed
    }
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
