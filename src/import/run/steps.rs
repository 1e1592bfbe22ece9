//! The `kvcr import` flow (docs/format.md §8): the gates before the driver
//! ([`crate::import::gate::order`], shared with the readiness gate) → dry run, or the
//! driver, facts not checked, trial or hold → the report and its exit status.
//!
//! Nothing process-wide happens here (the environment, signal handlers and
//! stdout are [`crate::import::run::setup`]'s): tests drive [`import`] with a described
//! node, a simulated backend and an interrupt closure.

use crate::format::descriptor::{Allocation, Handle};
use crate::format::failure::Failure;
use crate::import::engine::{
    execute, Backend, Cause, Event, Ledger, Outcome, RankResult, ReleaseReport, StepFailure,
};
use crate::import::gate::checks;
use crate::import::gate::order::{self, Answer, Decision, Inputs};
use crate::import::plan::select::{Plan, PlannedRank};
use crate::import::report::{
    first_release_failure, rank_rows, remaining_rows, ImportReport, Mode, ResultKind,
};
use crate::import::report::{Check, Refusal};
use crate::import::run::handover::{self, HandOver};
use crate::import::run::ready_file::{ready_content, ReadyFile};
use crate::import::spec::Step;
use crate::io::node::NodeProbe;
use crate::print::audit::AuditRun;
use crate::service::audit::Inventory;
use rustix::fd::{AsRawFd, BorrowedFd, OwnedFd};
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
        on_ready: &'a mut dyn FnMut(&ImportReport),
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
    pub report: ImportReport,
    /// The live audit, when the import was refused (the table prints it).
    pub audit: Option<AuditRun>,
}

impl Done {
    fn of(report: ImportReport, audit: Option<AuditRun>) -> Done {
        Done { report, audit }
    }
}

/// The whole `kvcr import` for one request.
pub fn import(req: &Request, run: Action) -> Result<Done, Failure> {
    let mode = run.mode();
    // 1. Usage errors (exit 2): a bad ready file first.
    let mut ready = prepare_ready_file(req, &run)?;

    // 2. The gates before the driver, in the order of answers: the profile
    // (exit 2), the live audit's rejections, the fleet proof, the plan and
    // its required content (exit 1). A dry run collects their refusals.
    let gates = Inputs {
        inventory: req.inventory,
        fleet_report: req.fleet_report,
        max_report_age_s: req.max_report_age_s,
        probe: req.probe,
        progress: req.progress,
    };
    let Answer {
        audited,
        descriptors,
        mut report,
        mut refusals,
        gated,
    } = order::before_driver(&gates, mode)?;
    let (group, plan) = match gated {
        Decision::Go { group, plan } => (&audited.judgement.groups[group], plan),
        Decision::Refused { audit: true } => return Ok(Done::of(report, Some(audited))),
        Decision::Refused { audit: false } => return Ok(Done::of(report, None)),
    };
    // A hold keeps only what it can hand on (docs/format.md §8.6): usage
    // errors (exit 2) once the plan's handle kinds are known.
    let mut hand_over = match &run {
        Action::Hold { .. } => hold_plan(&plan, ready.as_ref())?,
        _ => None,
    };
    // The fds a posix_fd import keeps, counted before the driver (exit 2).
    if !matches!(run, Action::DryRun { .. }) {
        super::fd_budget::check(&plan, matches!(run, Action::Hold { .. }))?;
    }
    let (gpu, mut hold) = match run {
        Action::DryRun { driver } => {
            // The plan lists what would still refuse the real import, in
            // the order it would; the first one is the exit status.
            refusals.extend(
                super::fd_budget::predict(&plan).map(|why| Refusal::new(Check::OpenFiles, why)),
            );
            refusals.extend(driver().map(|why| Refusal::new(Check::Driver, why)));
            refusals.extend(checks::not_checked(group));
            refusals.sort_by_key(|r| r.check);
            report.refusals = refusals;
            report.result = ResultKind::Planned;
            report.ranks = rank_rows(&plan, None);
            report.plan = crate::import::gate::readiness::ImportPlan::new(
                crate::import::gate::readiness::origin(&audited),
                group,
                plan,
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
    if order::not_checked(&mut report, group) {
        return Ok(Done::of(report, None));
    }
    report.backend = backend.name();
    // MIG: what the driver cannot do, refused before the first import.
    if let crate::io::node::Fact::Known(gpus) = req.probe.gpus() {
        if let Some(at) = mig_refusal(&plan, &gpus) {
            not_imported(&mut report, &plan, at, &[], &ReleaseReport::default());
            return Ok(Done::of(report, None));
        }
    }

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
            let kept = Kept {
                ready: &mut ready,
                hand_over: &mut hand_over,
            };
            end.finish(&mut report, kept, hold.as_mut(), ledger, backend);
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

/// A step failed or was interrupted; the ledger was released in reverse.
fn not_imported(
    report: &mut ImportReport,
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

/// What `--hold` can keep for a new engine, per handle kind (docs/format.md
/// §8.6): `fabric` stays importable by its handle while kvcr's reference
/// lives; `posix_fd` is handed over on the socket beside the ready file
/// (bound here, so a bad path is a usage error); `cuda_ipc` is refused.
fn hold_plan(plan: &Plan, ready_file: Option<&ReadyFile>) -> Result<Option<HandOver>, Failure> {
    let named = |want: fn(&Handle) -> bool| -> Vec<String> {
        plan.ranks
            .iter()
            .flat_map(|pr| {
                pr.allocations
                    .iter()
                    .filter(move |a| want(&a.handle))
                    .map(move |a| format!("rank {} {:?}", pr.rank, a.id))
            })
            .collect()
    };
    let few = |v: Vec<String>| -> String {
        let n = v.len();
        let mut s = v.into_iter().take(4).collect::<Vec<_>>().join(", ");
        if n > 4 {
            s.push_str(&format!(" and {} more", n - 4));
        }
        s
    };
    let ipc = named(|h| matches!(h, Handle::CudaIpc(_)));
    if !ipc.is_empty() {
        return Err(Failure::usage(
            format!(
                "--hold cannot keep cuda_ipc memory ({}): it belongs to the exporter and dies \
                 with it, and an exporter that frees it while kvcr still maps it is undefined \
                 behaviour, so a hold would keep nothing an engine could use",
                few(ipc)
            ),
            Some(
                "run the import without --hold (a trial proves the handles import); an engine \
                 opens cuda_ipc handles itself while their owner runs"
                    .into(),
            ),
        ));
    }
    let posix = named(|h| matches!(h, Handle::PosixFd(_)));
    if posix.is_empty() {
        return Ok(None);
    }
    let Some(ready) = ready_file else {
        return Err(Failure::usage(
            format!(
                "--hold of posix_fd allocations ({}) needs --ready-file: the ready file names \
                 the socket an engine takes their fds from, and without it a hold would keep \
                 memory no engine can reach",
                few(posix)
            ),
            Some("add --ready-file PATH".into()),
        ));
    };
    HandOver::prepare(ready.output()).map(Some).map_err(|e| {
        Failure::usage(
            format!(
                "cannot prepare the hand-over socket of --ready-file {}: {e}",
                ready.path().display()
            ),
            Some("choose a --ready-file path whose PATH.sock is free and short enough".into()),
        )
    })
}

/// MIG devices (as the node probe names them) in a plan that cannot work
/// there: with CUDA 11 and 12 one process enumerates a single MIG device,
/// so ranks on two MIG devices (two GPU instances) cannot be imported by
/// one kvcr. Legacy CUDA IPC is not refused: the MIG user guide allows it
/// between processes on one GPU instance and forbids it only across
/// instances, and kvcr opens a `cuda_ipc` handle on the very device the
/// descriptor names, the exporter's instance; a handle exported on another
/// instance is refused by the driver at step `import` (exit 3). Exit 3 at
/// step `device` of the rank that needs a second MIG device, before any
/// GPU call of the import.
pub(crate) fn mig_refusal(plan: &Plan, gpus: &crate::rules::facts::Gpus) -> Option<StepFailure> {
    use crate::format::descriptor::GpuKind;
    let is_mig = |g: &crate::format::descriptor::GpuUuid| {
        gpus.visible
            .iter()
            .any(|v| v.uuid == g.uuid && v.kind == GpuKind::Mig)
    };
    let mut first: Option<(u64, &crate::format::descriptor::GpuUuid)> = None;
    for pr in plan.ranks.iter().filter(|pr| is_mig(&pr.gpu)) {
        match first {
            None => first = Some((pr.rank, &pr.gpu)),
            Some((r, g)) if g.uuid != pr.gpu.uuid => {
                return Some(StepFailure {
                    rank: pr.rank,
                    allocation: None,
                    step: Step::Device,
                    cause: Cause::Failed,
                    error: format!(
                        "the plan needs two MIG devices in one process ({g} for rank {r}, {} for \
                         rank {}), and a CUDA process uses a single MIG device: import each MIG \
                         device's ranks in a kvcr of its own (CUDA_VISIBLE_DEVICES naming that \
                         device)",
                        pr.gpu, pr.rank
                    )
                    .into(),
                })
            }
            Some(_) => {}
        }
    }
    None
}

/// What a hold publishes and removes before the memory goes.
struct Kept<'a> {
    ready: &'a mut Option<ReadyFile>,
    hand_over: &'a mut Option<HandOver>,
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
    let hint = "choose a path in an existing, writable directory that does not exist yet";
    let out = crate::io::output::OutputFile::resolve(
        req.inventory.root.as_deref(),
        p,
        "--ready-file",
        false,
    )
    .map_err(|u| match u {
        crate::io::output::Unusable::Inside(f) => f,
        crate::io::output::Unusable::Other(why) => Failure::usage(
            format!("cannot prepare --ready-file {}: {why}", p.display()),
            Some(hint.into()),
        ),
    })?;
    let ready = ReadyFile::prepare(out).map_err(|e| {
        Failure::usage(
            format!("cannot prepare --ready-file {}: {e}", p.display()),
            Some(hint.into()),
        )
    })?;
    Ok(Some(ready))
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
                Event::AllocationDone => b.inc(1),
                Event::RankDone => {}
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
type Hold<'a> = (Duration, &'a mut dyn FnMut(&ImportReport));

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
        report: &mut ImportReport,
        kept: Kept,
        hold: Option<&mut Hold>,
        mut ledger: Ledger,
        backend: &mut dyn Backend,
    ) {
        let Kept { ready, hand_over } = kept;
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
            let loaded = match hand_over.as_mut() {
                Some(h) => load_hand_over(h, plan, &ledger, backend),
                None => Ok(()),
            };
            match loaded {
                Ok(()) => {
                    report.warnings.extend(backend.hold_warnings());
                    let wait = Wait {
                        poll: *poll,
                        on_ready: &mut **on_ready,
                        last,
                    };
                    failed = self.hold(report, ready, hand_over.as_mut(), wait);
                }
                Err(f) => {
                    failed = Some(StepFailure {
                        rank: f.rank,
                        allocation: Some(f.allocation),
                        step: Step::ReadyFile,
                        cause: Cause::Failed,
                        error: f.message.into(),
                    })
                }
            }
        }
        // The ready file goes before the memory does, and the hand-over
        // socket (with kvcr's copies of the fds) with it.
        if let Some(mut rf) = ready.take() {
            if let Err(e) = rf.remove() {
                report.warnings.push(format!(
                    "cannot remove ready file {}: {e}",
                    rf.path().display()
                ));
            }
        }
        drop(hand_over.take());
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
    /// interrupt, handing the `posix_fd` fds to every engine that asks; a
    /// ready file that cannot be published is the failure.
    fn hold(
        &self,
        report: &mut ImportReport,
        ready: &mut Option<ReadyFile>,
        mut hand_over: Option<&mut HandOver>,
        wait: Wait,
    ) -> Option<StepFailure> {
        let Wait {
            poll,
            on_ready,
            last,
        } = wait;
        let mut failed = None;
        if let Some(rf) = ready.as_mut() {
            let content =
                ready_content(self.plan, self.ranks, report.backend, hand_over.as_deref());
            if let Err(e) = rf.publish(&content) {
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
                match hand_over.as_deref_mut() {
                    Some(h) => {
                        for w in h.serve(poll) {
                            if report.warnings.len() < 16 {
                                report.warnings.push(w);
                            }
                        }
                    }
                    None => std::thread::sleep(poll),
                }
            }
        }
        failed
    }
}

/// How a hold waits: how often the interrupt is asked, what is told once
/// the group is ready, and the rank whole-import steps are named after.
struct Wait<'a> {
    poll: Duration,
    on_ready: &'a mut dyn FnMut(&ImportReport),
    last: u64,
}

/// The hand-over's messages, in the order the ready file names them: for
/// each `posix_fd` allocation a copy of the fd the backend took for it,
/// and the owners' uids the backend read while their start times matched.
/// An fd kvcr does not hold, or cannot duplicate, fails the hold naming the
/// allocation: the socket would send a message without the fd the ready
/// file promises.
fn load_hand_over(
    h: &mut HandOver,
    plan: &Plan,
    ledger: &Ledger,
    backend: &dyn Backend,
) -> Result<(), HandOverFailure> {
    let held = |pr: &PlannedRank, a: &Allocation| {
        ledger
            .entries()
            .iter()
            .find(|e| {
                e.rank == pr.rank
                    && e.allocation.as_deref() == Some(a.id.as_str())
                    && matches!(e.resource, crate::import::engine::Resource::Imported { .. })
            })
            .and_then(|e| backend.held_fd(&e.resource))
    };
    let items = hand_over_items(plan, &held, &|fd| fd.try_clone_to_owned())?;
    h.load(items, backend.owner_uids());
    Ok(())
}

/// Why the hand-over could not be loaded: the allocation, and why.
#[derive(Debug)]
pub(crate) struct HandOverFailure {
    pub(crate) rank: u64,
    pub(crate) allocation: String,
    pub(crate) message: String,
}

/// The hand-over's messages (see [`load_hand_over`]): `held` finds the fd
/// kvcr holds for an allocation, `dup` duplicates it for the socket.
pub(crate) fn hand_over_items<'f>(
    plan: &Plan,
    held: &dyn Fn(&PlannedRank, &Allocation) -> Option<BorrowedFd<'f>>,
    dup: &dyn Fn(BorrowedFd<'f>) -> std::io::Result<OwnedFd>,
) -> Result<Vec<handover::Item>, HandOverFailure> {
    let list: Vec<_> = crate::import::run::ready_file::handed_over(plan).collect();
    let of = list.len();
    let mut items = Vec::with_capacity(of);
    for (index, (pr, a)) in list.into_iter().enumerate() {
        let fail = |message: String| HandOverFailure {
            rank: pr.rank,
            allocation: a.id.clone(),
            message,
        };
        let fd = held(pr, a).ok_or_else(|| {
            fail(format!(
                "kvcr holds no fd for posix_fd allocation {:?} of rank {} to hand over",
                a.id, pr.rank
            ))
        })?;
        let copy = dup(fd).map_err(|e| {
            fail(format!(
                "cannot duplicate kvcr's fd {} of posix_fd allocation {:?} of rank {} for the \
                 hand-over socket: {e}",
                fd.as_raw_fd(),
                a.id,
                pr.rank
            ))
        })?;
        items.push(handover::Item {
            message: crate::import::run::ready_file::hand_over_message(pr, a, index, of),
            fd: Some(copy),
        });
    }
    Ok(items)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::descriptor::{GpuUuid, Owner};
    use std::os::fd::AsFd;

    fn plan() -> Plan {
        let a = |id: &str, handle| Allocation {
            id: id.into(),
            size_bytes: 1 << 20,
            offset_bytes: 0,
            handle,
            content: None,
        };
        Plan {
            engine_id: crate::format::descriptor::EngineId::parse("e").unwrap(),
            incarnation: None,
            epoch: Some(1),
            ranks: vec![PlannedRank {
                rank: 3,
                gpu: GpuUuid::parse(&crate::testkit::gpu(0, 3)).unwrap(),
                path: "rank-3.json".into(),
                owner: Owner {
                    pid: 4242,
                    start_ticks: 1,
                },
                allocations: vec![
                    a("kv-0", Handle::PosixFd(10)),
                    a("kv-1", Handle::Fabric([1; 64])),
                    a("kv-2", Handle::PosixFd(11)),
                ],
            }],
        }
    }

    #[test]
    fn every_posix_fd_allocation_is_handed_over_with_its_fd() {
        let f = tempfile::tempfile().unwrap();
        let held = |_: &PlannedRank, _: &Allocation| Some(f.as_fd());
        let items = hand_over_items(&plan(), &held, &|fd| fd.try_clone_to_owned()).unwrap();
        assert_eq!(items.len(), 2);
        assert!(items.iter().all(|i| i.fd.is_some()));
        let m: serde_json::Value = serde_json::from_slice(&items[1].message).unwrap();
        assert_eq!(
            (&m["allocation"], &m["index"], &m["of"]),
            (&"kv-2".into(), &1.into(), &2.into())
        );
    }

    #[test]
    fn a_failed_duplicate_fails_the_hand_over_naming_the_allocation() {
        // The duplicate for the socket fails (EMFILE, as at RLIMIT_NOFILE):
        // never a message without the fd the ready file promises.
        let f = tempfile::tempfile().unwrap();
        let held = |_: &PlannedRank, _: &Allocation| Some(f.as_fd());
        let calls = std::cell::Cell::new(0);
        let dup = |fd: BorrowedFd<'_>| {
            calls.set(calls.get() + 1);
            if calls.get() == 2 {
                Err(std::io::Error::from_raw_os_error(libc::EMFILE))
            } else {
                fd.try_clone_to_owned()
            }
        };
        let e = hand_over_items(&plan(), &held, &dup).unwrap_err();
        assert_eq!((e.rank, e.allocation.as_str()), (3, "kv-2"));
        assert!(
            e.message.contains("cannot duplicate kvcr's fd")
                && e.message.contains("\"kv-2\"")
                && e.message.contains("Too many open files"),
            "{}",
            e.message
        );
        // No fd held for an allocation: named too.
        let none = |_: &PlannedRank, a: &Allocation| (a.id != "kv-0").then(|| f.as_fd());
        let e = hand_over_items(&plan(), &none, &|fd| fd.try_clone_to_owned()).unwrap_err();
        assert_eq!(e.allocation, "kv-0");
        assert!(e.message.contains("holds no fd"), "{}", e.message);
    }
}
