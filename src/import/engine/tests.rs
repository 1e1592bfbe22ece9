//! The import engine against the simulator: every failure position, every
//! interrupt position, failed releases, verification, and the command core
//! (refusal, selection, dry run, trial, hold) on inventories built in temp
//! directories and judged against a described node.

use super::*;
use crate::commands::args::InventoryArgs;
use crate::format::descriptor::{Allocation, GpuUuid, Handle, Owner};
use crate::format::failure::Failure;
use crate::import::engine::sim::{Faults, SimBackend, SimEvent};
use crate::import::report::{ImportReport, Mode, ResultKind};
use crate::import::run::print;
use crate::import::run::steps::{self, Action, Done, Gpu, Request};
use crate::io::node::{Fact, FakeProbe, Gpus};
use crate::service::audit::Inventory;
use crate::testkit::{self, put_group, Desc, BOOT_ID, HOSTNAME};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

const RANKS: u64 = 4;
const ALLOCS: usize = 3;

fn gpu(rank: u64) -> GpuUuid {
    GpuUuid::parse(&testkit::gpu(0, rank)).unwrap()
}

fn handle(kind: &str, rank: u64, i: usize) -> Handle {
    match kind {
        "cuda_ipc" => Handle::CudaIpc([rank as u8 ^ i as u8; 64]),
        "posix_fd" => Handle::PosixFd(10 + i as i32),
        _ => Handle::Fabric([(rank * 16 + i as u64) as u8; 64]),
    }
}

/// A 4-rank × 3-allocation plan; `kinds(rank, i)` picks each handle kind.
fn plan_with(kinds: impl Fn(u64, usize) -> &'static str) -> Plan {
    Plan {
        engine_id: crate::format::descriptor::EngineId::parse("llama3-70b-a").unwrap(),
        incarnation: None,
        epoch: Some(1),
        ranks: (0..RANKS)
            .map(|rank| PlannedRank {
                rank,
                gpu: gpu(rank),
                path: format!("rank-{rank}.json"),
                owner: Owner {
                    pid: 4242,
                    start_ticks: 123456,
                },
                allocations: (0..ALLOCS)
                    .map(|i| Allocation {
                        id: format!("kv-{i}"),
                        size_bytes: 3 << 20,
                        offset_bytes: 0,
                        handle: handle(kinds(rank, i), rank, i),
                        content: None,
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn fabric_plan() -> Plan {
    plan_with(|_, _| "fabric")
}

fn mixed_plan() -> Plan {
    plan_with(|rank, i| ["fabric", "cuda_ipc", "posix_fd"][(rank as usize + i) % 3])
}

/// Backend calls a clean import of `plan` makes.
fn steps_of(plan: &Plan) -> usize {
    plan.ranks
        .iter()
        .map(|r| {
            1 + r
                .allocations
                .iter()
                .map(|a| match a.handle {
                    Handle::CudaIpc(_) => 2,
                    _ => 5,
                })
                .sum::<usize>()
        })
        .sum()
}

/// docs/format.md §6 for an outcome whose ledger was dealt with: 0
/// imported, 3 failed and released, 130 interrupted and released, 4
/// whenever a release failed.
fn status(out: &Outcome) -> i32 {
    match out {
        Outcome::Imported { .. } => crate::format::exit::OK,
        Outcome::Failed { release, .. } | Outcome::Interrupted { release, .. }
            if !release.is_clean() =>
        {
            crate::format::exit::RELEASE_FAILED
        }
        Outcome::Failed { .. } => crate::format::exit::IMPORT_FAILED,
        Outcome::Interrupted { .. } => crate::format::exit::INTERRUPTED,
    }
}

fn never() -> bool {
    false
}

fn run(plan: &Plan, sim: &mut SimBackend) -> (Outcome, Ledger) {
    let mut ledger = Ledger::new();
    let flag = sim.faults.flag.clone();
    let interrupted = move || flag.load(Ordering::SeqCst);
    let out = execute(plan, sim, &mut ledger, &interrupted, &mut |_| {});
    (out, ledger)
}

/// Everything acquired was released, exactly in reverse order.
fn assert_released_in_reverse(sim: &SimBackend) {
    let mut acquired = sim.acquired();
    acquired.reverse();
    assert_eq!(sim.released(), acquired, "release order");
    assert!(sim.held().is_empty(), "still held: {:?}", sim.held());
}

#[test]
fn trial_imports_everything_and_releases_in_reverse() {
    for plan in [fabric_plan(), mixed_plan()] {
        let mut sim = SimBackend::new();
        let (out, mut ledger) = run(&plan, &mut sim);
        let Outcome::Imported { ranks } = &out else {
            panic!("{out:?}")
        };
        assert_eq!(status(&out), 0);
        assert_eq!(ranks.len(), 4);
        assert!(ranks
            .iter()
            .all(|r| r.allocations == 3 && r.bytes == 9 << 20));
        assert_eq!(ledger.len(), sim.acquired().len());
        assert!(
            sim.released().is_empty(),
            "nothing released before the caller asks"
        );
        // Each rank on its own device, found by UUID.
        let devices: BTreeSet<i32> = ranks.iter().map(|r| r.device).collect();
        assert_eq!(devices.len(), 4);
        let rel = ledger.release_all(&mut sim);
        assert!(rel.is_clean() && ledger.is_empty());
        assert_released_in_reverse(&sim);
    }
    // The fabric plan: per rank a context, then import+reserve+map per allocation.
    assert_eq!(steps_of(&fabric_plan()), 64);
}

#[test]
fn a_failure_at_every_step_position_releases_exactly_what_was_taken() {
    for plan in [fabric_plan(), mixed_plan()] {
        let total = steps_of(&plan);
        for n in 1..=total {
            let mut sim = SimBackend::with_faults(Faults::fail_nth_step(n));
            let (out, ledger) = run(&plan, &mut sim);
            assert_eq!(status(&out), crate::format::exit::IMPORT_FAILED, "step {n}");
            let Outcome::Failed {
                failure, release, ..
            } = &out
            else {
                panic!("step {n}: {out:?}")
            };
            // The failed step is the one reported.
            let failed = sim
                .log
                .iter()
                .find_map(|e| match e {
                    SimEvent::Fail { step, .. } => Some(*step),
                    _ => None,
                })
                .unwrap();
            assert_eq!(failure.step, failed, "step {n}");
            assert!(failure.error.message.contains("injected"), "{failure}");
            if failed == Step::Device {
                assert_eq!(failure.allocation, None);
            } else {
                assert!(failure.allocation.is_some());
            }
            assert!(ledger.is_empty());
            assert!(release.is_clean());
            assert_eq!(release.released.len(), sim.acquired().len());
            assert_released_in_reverse(&sim);
        }
    }
}

#[test]
fn a_failure_at_each_named_step_reports_rank_allocation_and_step() {
    let plan = fabric_plan();
    // Per rank: 1 device call; per allocation one call of each other step.
    for step in Step::BACKEND {
        let per_step = if step == Step::Device { 4 } else { 12 };
        for nth in 1..=per_step {
            let mut sim = SimBackend::with_faults(Faults::fail_at(step, nth));
            let (out, _) = run(&plan, &mut sim);
            let Outcome::Failed { failure, ranks, .. } = &out else {
                panic!("{step}@{nth}: {out:?}")
            };
            assert_eq!(failure.step, step);
            let (rank, alloc) = if step == Step::Device {
                (nth as u64 - 1, None)
            } else {
                (
                    ((nth - 1) / ALLOCS) as u64,
                    Some(format!("kv-{}", (nth - 1) % ALLOCS)),
                )
            };
            assert_eq!((failure.rank, failure.allocation.clone()), (rank, alloc));
            assert_eq!(
                ranks.len() as u64,
                rank,
                "ranks completed before the failure"
            );
            assert_released_in_reverse(&sim);
        }
    }
}

#[test]
fn a_failure_at_map_leaves_import_and_reserve_to_release() {
    let plan = fabric_plan();
    let mut sim = SimBackend::with_faults(Faults::fail_at(Step::Map, 1));
    let (out, _) = run(&plan, &mut sim);
    assert_eq!(status(&out), 3);
    let kinds: Vec<&str> = sim.released().iter().map(Resource::kind).collect();
    assert_eq!(kinds, ["reservation", "imported-handle", "context"]);
}

#[test]
fn an_interrupt_at_every_position_releases_and_exits_130() {
    for plan in [fabric_plan(), mixed_plan()] {
        let mut clean = SimBackend::new();
        let _ = run(&plan, &mut clean);
        let acquisitions = clean.acquired().len();
        for k in 1..acquisitions {
            let mut sim = SimBackend::with_faults(Faults::interrupt_after(k));
            let (out, _) = run(&plan, &mut sim);
            assert_eq!(status(&out), crate::format::exit::INTERRUPTED, "after {k}");
            let Outcome::Interrupted { at, release, .. } = &out else {
                panic!("{out:?}")
            };
            assert!(at.error.message.contains("interrupted"));
            assert_eq!(sim.acquired().len(), k, "nothing taken after the signal");
            assert_eq!(release.released.len(), k);
            assert_released_in_reverse(&sim);
        }
    }
    // Interrupted before the first step: nothing taken, still 130.
    let mut sim = SimBackend::new();
    let mut ledger = Ledger::new();
    let out = execute(&fabric_plan(), &mut sim, &mut ledger, &|| true, &mut |_| {});
    assert_eq!(status(&out), 130);
    assert!(sim.log.is_empty());
}

#[test]
fn a_failed_release_lists_what_remains_and_exits_4() {
    let plan = fabric_plan();
    // Fail at the 2nd map (rank 0, kv-1): taken so far: ctx, kv-0 ×3, kv-1 import+reserve.
    let mut faults = Faults::fail_at(Step::Map, 2);
    faults.fail_release = Some(1); // the first release: kv-1's reservation
    let mut sim = SimBackend::with_faults(faults);
    let (out, _) = run(&plan, &mut sim);
    assert_eq!(status(&out), crate::format::exit::RELEASE_FAILED);
    let Outcome::Failed {
        failure, release, ..
    } = &out
    else {
        panic!("{out:?}")
    };
    assert_eq!(failure.step, Step::Map);
    assert_eq!(release.failed.len(), 1);
    assert!(release.failed[0]
        .error
        .message
        .contains("injected release failure"));
    let remaining: Vec<(&str, Option<&str>)> = release
        .remaining
        .iter()
        .map(|e| (e.resource.kind(), e.allocation.as_deref()))
        .collect();
    // The failed reservation, and the context of its device (kept, so
    // releasing it cannot tear down what is reported as held).
    assert_eq!(
        remaining,
        [("context", None), ("reservation", Some("kv-1"))]
    );
    // Everything else was released, still in reverse order.
    let released: Vec<Resource> = release.released.iter().map(|e| e.resource).collect();
    assert_eq!(released, sim.released());
    assert_eq!(released.len(), sim.acquired().len() - 2);
    assert_eq!(sim.held().len(), 2);
}

#[test]
fn a_reservation_stays_while_a_mapping_inside_it_could_not_be_unmapped() {
    let plan = fabric_plan();
    // Fail at the 2nd set-access (rank 0, kv-1): kv-1's mapping is the last
    // acquisition and the first release; make that unmap fail.
    let mut faults = Faults::fail_at(Step::SetAccess, 2);
    faults.fail_release = Some(1);
    let mut sim = SimBackend::with_faults(faults);
    let (out, _) = run(&plan, &mut sim);
    assert_eq!(status(&out), crate::format::exit::RELEASE_FAILED);
    let Outcome::Failed { release, .. } = &out else {
        panic!("{out:?}")
    };
    let remaining: Vec<(&str, Option<&str>)> = release
        .remaining
        .iter()
        .map(|e| (e.resource.kind(), e.allocation.as_deref()))
        .collect();
    // cuMemAddressFree on a range that is still mapped is invalid: the
    // reservation around the failed mapping is kept and reported.
    assert_eq!(
        remaining,
        [
            ("context", None),
            ("reservation", Some("kv-1")),
            ("mapping", Some("kv-1"))
        ]
    );
    assert!(!release
        .released
        .iter()
        .any(|e| matches!(e.resource, Resource::Reservation { .. })
            && e.allocation.as_deref() == Some("kv-1")));
}

#[test]
fn verify_catches_a_short_mapping_and_a_wrong_device() {
    let plan = mixed_plan();
    let mut sim = SimBackend::new();
    sim.lie_size = Some(1 << 20);
    let (out, _) = run(&plan, &mut sim);
    let Outcome::Failed { failure, .. } = &out else {
        panic!("{out:?}")
    };
    assert_eq!((failure.step, failure.rank), (Step::Verify, 0));
    assert!(
        failure.error.message.contains("covers"),
        "{}",
        failure.error.message
    );
    assert_released_in_reverse(&sim);

    let mut sim = SimBackend::new();
    sim.lie_device = true;
    let (out, _) = run(&plan, &mut sim);
    let Outcome::Failed { failure, .. } = &out else {
        panic!("{out:?}")
    };
    assert_eq!(failure.step, Step::Verify);
    assert!(
        failure.error.message.contains("resides on device"),
        "{}",
        failure.error.message
    );
    assert_released_in_reverse(&sim);
}

#[test]
fn mapping_checks() {
    let m = Resource::Mapping {
        device: 1,
        ptr: 0x1000,
        size: 0x2000,
    };
    let at = |base, size, device| Mapped {
        base,
        size,
        device: Some(device),
        end_device: Some(device),
    };
    assert!(check_mapping(&m, &at(0x1000, 0x2000, 1), Device(1), 0, 0x2000).is_ok());
    assert!(check_mapping(&m, &at(0x1000, 0x2000, 1), Device(1), 0, 0x2001).is_err());
    assert!(check_mapping(&m, &at(0x1000, 0x2000, 0), Device(1), 0, 1).is_err());
    // offset_bytes counts: offset + size must fit.
    assert!(check_mapping(&m, &at(0x1000, 0x2000, 1), Device(1), 0x1000, 0x1000).is_ok());
    assert!(check_mapping(&m, &at(0x1000, 0x2000, 1), Device(1), 0x1000, 0x1001).is_err());
    assert!(check_mapping(&m, &at(0x1000, 0x2000, 1), Device(1), u64::MAX, u64::MAX).is_err());
    // The last byte on another device fails even when the first is right.
    let split = Mapped {
        end_device: Some(2),
        ..at(0x1000, 0x2000, 1)
    };
    let e = check_mapping(&m, &split, Device(1), 0, 0x2000).unwrap_err();
    assert!(e.message.contains("last byte"), "{e}");
    // A device not asked is never taken for the planned one (it was -1).
    let unasked = Mapped {
        end_device: None,
        ..at(0x1000, 0x2000, 1)
    };
    let e = check_mapping(&m, &unasked, Device(1), 0, 0x2000).unwrap_err();
    assert!(
        e.message.contains("last byte") && e.message.contains("not asked"),
        "{e}"
    );
    // An IPC pointer inside a larger range: covered from the pointer on.
    let ipc = Resource::IpcMapping {
        device: 0,
        ptr: 0x1800,
    };
    assert!(check_mapping(&ipc, &at(0x1000, 0x1000, 0), Device(0), 0, 0x800).is_ok());
    assert!(check_mapping(&ipc, &at(0x1000, 0x1000, 0), Device(0), 0, 0x801).is_err());
    assert!(check_mapping(&ipc, &at(0x2000, 0x1000, 0), Device(0), 0, 1).is_err());
    assert!(check_mapping(&ipc, &at(u64::MAX, 2, 0), Device(0), 0, 1).is_err());
    assert!(check_mapping(
        &Resource::Context { device: 0 },
        &at(0, 1, 0),
        Device(0),
        0,
        1
    )
    .is_err());
}

// ---- The command core on real inventories ----

/// Writes a 4-rank × 3-allocation group with private modes (live mode
/// rejects handle bytes readable by others).
fn inventory(dir: &Path, engine: &str, handle_kind: &'static str, group: u32) {
    let mut d = Desc::new(engine, 0, RANKS, 1);
    d.allocations = ALLOCS;
    d.handle_kind = handle_kind;
    d.group = group;
    let sub = engine.replace('/', "_");
    put_group(dir, &sub, &d);
    private(dir);
}

fn private(dir: &Path) {
    for e in walkdir::WalkDir::new(dir) {
        let e = e.unwrap();
        let mode = if e.file_type().is_dir() { 0o700 } else { 0o600 };
        std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

/// The node the testkit descriptors describe: owner alive, GPUs present.
fn node() -> FakeProbe {
    let all: BTreeSet<GpuUuid> = (0..2)
        .flat_map(|g| (0..RANKS).map(move |r| GpuUuid::parse(&testkit::gpu(g, r)).unwrap()))
        .collect();
    FakeProbe {
        boot_id: Fact::Known(BOOT_ID.parse().unwrap()),
        hostname: Fact::Known(HOSTNAME.to_string()),
        processes: BTreeMap::from([(4242, 123456)]),
        processes_unreadable: None,
        gpus: Fact::Known(Gpus {
            visible: all.clone(),
            on_node: Some(all),
            source: "test".into(),
            unreadable: Vec::new(),
        }),
    }
}

/// The inventory arguments, with the declared profile an import requires
/// (docs/format.md §8.9) of the group imported, written beside the
/// descriptors (a stray file: a notice only).
fn args(root: &Path, engine: Option<&str>) -> Inventory {
    let e = engine.unwrap_or("llama3-70b-a");
    let mut d = Desc::new(e, 0, RANKS, 1);
    d.group = u32::from(e == "mixtral-b");
    let profile = root.join(format!("profile-{e}.json"));
    testkit::put_profile(&profile, &d);
    crate::commands::settings::inventory(&InventoryArgs {
        root: Some(root.to_path_buf()),
        profile: Some(profile),
        profile_from_env: false,
        engine: engine.map(|e| crate::format::descriptor::EngineId::parse(e).unwrap()),
        min_epoch: None,
        max_age: None,
        local_ranks: None,
        incarnation: None,
        producer_user: None,
    })
    .unwrap()
}

fn core(
    inv: &Inventory,
    mode: Mode,
    ready: Option<&Path>,
    sim: Option<&mut SimBackend>,
    interrupted: &dyn Fn() -> bool,
) -> Result<Done, Failure> {
    let probe = node();
    let req = Request {
        inventory: inv,
        fleet_report: None,
        max_report_age_s: 300,
        probe: &probe,
        interrupted,
        progress: false,
    };
    let none = || Some("no driver in the library's tests".to_string());
    let open = || -> Result<Box<dyn Backend>, Failure> {
        Err(Failure::usage("no driver in the library's tests", None))
    };
    let gpu = match sim {
        Some(s) => Gpu::Open(s),
        None => Gpu::Connect(&open),
    };
    let mut on_ready = |_: &ImportReport| {};
    let run = match mode {
        Mode::DryRun | Mode::Gate => Action::DryRun { driver: &none },
        Mode::Trial => Action::Trial { gpu },
        Mode::Hold => Action::Hold {
            gpu,
            ready_file: ready,
            poll: Duration::from_millis(1),
            on_ready: &mut on_ready,
        },
    };
    steps::import(&req, run)
}

#[test]
fn trial_through_the_command_core() {
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "fabric", 0);
    let mut sim = SimBackend::new();
    let done = core(
        &args(dir.path(), None),
        Mode::Trial,
        None,
        Some(&mut sim),
        &never,
    )
    .unwrap();
    let r = &done.report;
    assert_eq!((r.result, r.status()), (ResultKind::Imported, 0));
    assert_eq!(r.backend, "sim");
    assert_eq!(r.ranks.len(), 4);
    assert!(r.ranks.iter().all(|x| x.device.is_some() && x.ms.is_some()));
    assert_eq!(r.released, Some(sim.acquired().len()));
    assert_released_in_reverse(&sim);
    let json = serde_json::to_value(r).unwrap();
    assert_eq!(json["schema"], "kvcr.import-report/v1");
    assert_eq!(json["mode"], "trial");
    assert_eq!(json["result"], "imported");
    assert_eq!(json["ranks"][3]["gpu_uuid"], testkit::gpu(0, 3));
    assert!(json.get("failure").is_none() && json.get("remaining").is_none());
}

#[test]
fn a_rejected_group_never_reaches_the_backend() {
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "fabric", 0);
    std::fs::remove_file(dir.path().join("llama3-70b-a/rank-2.json")).unwrap();
    let mut sim = SimBackend::new();
    let done = core(
        &args(dir.path(), None),
        Mode::Trial,
        None,
        Some(&mut sim),
        &never,
    )
    .unwrap();
    assert_eq!(
        (done.report.result, done.report.status()),
        (ResultKind::Rejected, 1)
    );
    assert!(sim.log.is_empty(), "backend was called: {:?}", sim.log);
    let audit = done.report.audit.as_ref().unwrap();
    assert!(audit
        .findings
        .iter()
        .any(|f| f.code == crate::format::finding::Code::KV103));
    assert!(done.audit.is_some(), "the table prints the live audit");

    // Live facts reject too: the owner is gone.
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "fabric", 0);
    let probe = FakeProbe {
        processes: BTreeMap::new(),
        ..node()
    };
    let mut sim = SimBackend::new();
    let inv = args(dir.path(), None);
    let req = Request {
        inventory: &inv,
        fleet_report: None,
        max_report_age_s: 300,
        probe: &probe,
        interrupted: &never,
        progress: false,
    };
    let run = Action::Trial {
        gpu: Gpu::Open(&mut sim),
    };
    let done = steps::import(&req, run).unwrap();
    assert_eq!(done.report.status(), 1);
    assert!(sim.log.is_empty());

    // A rejecting file-level finding (a torn write) refuses as well.
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "fabric", 0);
    std::fs::write(dir.path().join(".rank-9.json.x1.tmp"), b"{").unwrap();
    private(dir.path());
    let mut sim = SimBackend::new();
    let done = core(
        &args(dir.path(), None),
        Mode::Trial,
        None,
        Some(&mut sim),
        &never,
    )
    .unwrap();
    assert_eq!(done.report.status(), 1);
    assert_eq!(done.report.files.len(), 1);
    assert!(sim.log.is_empty());

    // No descriptor at all.
    let empty = tempfile::tempdir().unwrap();
    let mut sim = SimBackend::new();
    let done = core(
        &args(empty.path(), None),
        Mode::Trial,
        None,
        Some(&mut sim),
        &never,
    )
    .unwrap();
    assert_eq!(done.report.status(), 1);
    assert!(sim.log.is_empty());
}

#[test]
fn selection_needs_engine_when_several_groups() {
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "fabric", 0);
    inventory(dir.path(), "mixtral-b", "posix_fd", 1);
    let mut sim = SimBackend::new();
    let err = core(
        &args(dir.path(), None),
        Mode::Trial,
        None,
        Some(&mut sim),
        &never,
    )
    .err()
    .unwrap();
    assert_eq!(err.status, crate::format::exit::USAGE);
    assert!(err.message.contains("2 groups"), "{}", err.message);
    assert!(err.hint.unwrap().contains("--engine"));
    assert!(sim.log.is_empty());

    let done = core(
        &args(dir.path(), Some("mixtral-b")),
        Mode::Trial,
        None,
        Some(&mut sim),
        &never,
    )
    .unwrap();
    assert_eq!(done.report.status(), 0);
    assert_eq!(done.report.engine_id.as_deref(), Some("mixtral-b"));

    // An --engine that names no group, with a profile declaring that group:
    // the declared group is missing (rejected, exit 1), nothing imported.
    // (Without a profile it is a usage error listing the groups present:
    // tests/it/audit/headline.rs.)
    let mut sim = SimBackend::new();
    let done = core(
        &args(dir.path(), Some("nope")),
        Mode::Trial,
        None,
        Some(&mut sim),
        &never,
    )
    .unwrap();
    assert_eq!(done.report.status(), crate::format::exit::REJECTED);
    assert!(sim.log.is_empty());
}

#[test]
fn dry_run_plans_without_a_backend() {
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "posix_fd", 0);
    let done = core(&args(dir.path(), None), Mode::DryRun, None, None, &never).unwrap();
    let r = &done.report;
    // The plan lists what would refuse the real import: here, no driver,
    // and exits as that import would (§8.7).
    let gates: Vec<_> = r.refusals.iter().map(|x| (x.check, x.status)).collect();
    assert_eq!(gates, [(crate::import::report::Check::Driver, 2)]);
    assert_eq!(
        (r.result, r.status(), r.backend),
        (ResultKind::Planned, 2, "none")
    );
    assert_eq!(r.ranks.len(), 4);
    assert!(r.ranks.iter().all(|x| x.device.is_none() && x.ms.is_none()));
    assert_eq!(r.ranks[1].items.len(), 3);
    assert_eq!(r.ranks[1].items[0].kind, "posix_fd");
    assert_eq!(r.ranks[1].gpu_uuid, testkit::gpu(0, 1));
    let mut out = Vec::new();
    let p = crate::print::Printer::decide(
        crate::print::Format::Table,
        crate::print::ColorChoice::Never,
        false,
        true,
        &|_| None,
        false,
        false,
    );
    print::write_table(&mut out, &p, r).unwrap();
    print::write_result(&mut out, r).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("plan for llama3-70b-a"), "{text}");
    assert!(text.contains(&testkit::gpu(0, 3)), "{text}");
    assert!(text.contains("posix_fd×3"), "{text}");
    assert!(text.contains("nothing imported (dry run)"), "{text}");
}

/// Records whether the ready file existed at each simulator event.
fn watch(sim: &mut SimBackend, path: PathBuf) -> Rc<RefCell<Vec<(String, bool)>>> {
    let seen = Rc::new(RefCell::new(Vec::new()));
    let s = seen.clone();
    sim.on_event(move |e| {
        let op = match e {
            SimEvent::Acquire { .. } => "acquire",
            SimEvent::Release { .. } => "release",
            SimEvent::Call { .. } => "call",
            _ => "other",
        };
        s.borrow_mut().push((op.to_string(), path.exists()));
    });
    seen
}

#[test]
fn hold_writes_the_ready_file_only_after_the_last_rank_and_removes_it_first() {
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "fabric", 0);
    let out = tempfile::tempdir().unwrap();
    let ready = out.path().join("ready.json");
    let mut sim = SimBackend::new();
    let seen = watch(&mut sim, ready.clone());
    // The "supervisor" signals as soon as it sees the ready file.
    let ready_seen = RefCell::new(None::<serde_json::Value>);
    let signal = || {
        if let Ok(b) = std::fs::read(&ready) {
            *ready_seen.borrow_mut() = Some(serde_json::from_slice(&b).unwrap());
            true
        } else {
            false
        }
    };
    let done = core(
        &args(dir.path(), None),
        Mode::Hold,
        Some(&ready),
        Some(&mut sim),
        &signal,
    )
    .unwrap();
    assert_eq!(
        (done.report.result, done.report.status()),
        (ResultKind::Imported, 0)
    );
    let seen = seen.borrow();
    let acquires = seen.iter().filter(|(op, _)| op != "release");
    assert!(acquires.clone().count() > 40);
    assert!(
        acquires.clone().all(|(_, exists)| !exists),
        "ready file before the last rank"
    );
    assert!(
        seen.iter()
            .filter(|(op, _)| op == "release")
            .all(|(_, e)| !e),
        "removed before release"
    );
    assert!(!ready.exists());
    assert_eq!(
        std::fs::read_dir(out.path()).unwrap().count(),
        0,
        "no staging leftovers"
    );
    let doc = ready_seen.borrow().clone().expect("ready file was read");
    assert_eq!(doc["schema"], "kvcr.import-ready/v1");
    assert_eq!(doc["engine_id"], "llama3-70b-a");
    assert_eq!(doc["pid"], std::process::id());
    assert_eq!(doc["ranks"].as_array().unwrap().len(), 4);
    assert_released_in_reverse(&sim);
}

#[test]
fn hold_interrupted_mid_import_never_writes_the_ready_file() {
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "fabric", 0);
    let out = tempfile::tempdir().unwrap();
    let ready = out.path().join("ready.json");
    let mut sim = SimBackend::with_faults(Faults::interrupt_after(20));
    let seen = watch(&mut sim, ready.clone());
    let flag = sim.faults.flag.clone();
    let interrupted = move || flag.load(Ordering::SeqCst);
    let done = core(
        &args(dir.path(), None),
        Mode::Hold,
        Some(&ready),
        Some(&mut sim),
        &interrupted,
    )
    .unwrap();
    let r = &done.report;
    assert_eq!((r.result, r.status()), (ResultKind::Interrupted, 130));
    assert_eq!(r.released, Some(20));
    assert!(seen.borrow().iter().all(|(_, e)| !e));
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
    assert_released_in_reverse(&sim);
}

#[test]
fn hold_that_cannot_publish_the_ready_file_fails_and_releases() {
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "fabric", 0);
    let out = tempfile::tempdir().unwrap();
    let sub = out.path().join("run");
    std::fs::create_dir(&sub).unwrap();
    let ready = sub.join("ready.json");
    let mut sim = SimBackend::new();
    let gone = sub.clone();
    // The directory vanishes during the import: the rename must fail.
    sim.on_event(move |_| {
        let _ = std::fs::remove_dir_all(&gone);
    });
    let done = core(
        &args(dir.path(), None),
        Mode::Hold,
        Some(&ready),
        Some(&mut sim),
        &never,
    )
    .unwrap();
    let r = &done.report;
    assert_eq!((r.result, r.status()), (ResultKind::Failed, 3));
    assert_eq!(r.failure.as_ref().unwrap().step, Step::ReadyFile);
    assert_released_in_reverse(&sim);
}

#[test]
fn a_failed_trial_release_exits_4_with_what_remains() {
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "fabric", 0);
    let mut sim = SimBackend::with_faults(Faults::fail_release(3));
    let done = core(
        &args(dir.path(), None),
        Mode::Trial,
        None,
        Some(&mut sim),
        &never,
    )
    .unwrap();
    let r = &done.report;
    assert_eq!((r.result, r.status()), (ResultKind::ReleaseFailed, 4));
    let f = r.failure.as_ref().unwrap();
    assert_eq!((f.step, f.rank), (Step::Release, 3));
    assert_eq!(r.remaining.len(), 2, "{:?}", r.remaining);
    assert!(r.remaining.iter().any(|x| x.error.is_some()));
    let json = serde_json::to_value(r).unwrap();
    assert_eq!(json["result"], "release-failed");
    assert_eq!(json["remaining"][1]["resource"]["kind"], "imported-handle");
    assert_eq!(json["remaining"][1]["release_call"], "cuMemRelease");
    let mut text = Vec::new();
    print::write_result(&mut text, r).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("2 remain held"), "{text}");
}

#[test]
fn a_failed_import_through_the_command_core_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "fabric", 0);
    let mut sim = SimBackend::with_faults(Faults::fail_at(Step::Map, 5));
    let done = core(
        &args(dir.path(), None),
        Mode::Trial,
        None,
        Some(&mut sim),
        &never,
    )
    .unwrap();
    let r = &done.report;
    assert_eq!((r.result, r.status()), (ResultKind::Failed, 3));
    let f = r.failure.as_ref().unwrap();
    assert_eq!(
        (f.rank, f.allocation.as_deref(), f.step),
        (1, Some("kv-1"), Step::Map)
    );
    assert_eq!(r.ranks.len(), 1, "rank 0 completed before the failure");
    assert!(r.remaining.is_empty());
    let mut text = Vec::new();
    print::write_result(&mut text, r).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.contains("FAILED: rank 1, allocation \"kv-1\", step map"),
        "{text}"
    );
    assert!(text.contains("nothing remains held"), "{text}");
    assert_released_in_reverse(&sim);
}

#[test]
fn a_failure_in_rank_0_reports_no_imported_rank() {
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "fabric", 0);
    let mut sim = SimBackend::with_faults(Faults::fail_at(Step::Import, 2));
    let done = core(
        &args(dir.path(), None),
        Mode::Trial,
        None,
        Some(&mut sim),
        &never,
    )
    .unwrap();
    let r = &done.report;
    assert_eq!((r.result, r.status()), (ResultKind::Failed, 3));
    assert!(r.ranks.is_empty(), "{:?}", r.ranks);
    assert_eq!(r.released, Some(4), "ctx + kv-0 import/reserve/map");
    assert_released_in_reverse(&sim);
}

#[test]
fn offset_bytes_widens_the_reservation_and_the_verified_range() {
    // 3 MiB at offset 3 MiB: 6 MiB reserved and mapped (SIM_GRANULARITY 2 MiB).
    let mut plan = fabric_plan();
    plan.ranks.truncate(1);
    plan.ranks[0].allocations.truncate(1);
    plan.ranks[0].allocations[0].offset_bytes = 3 << 20;
    let mut sim = SimBackend::new();
    let (out, mut ledger) = run(&plan, &mut sim);
    assert!(matches!(out, Outcome::Imported { .. }), "{out:?}");
    let sizes: Vec<u64> = sim
        .acquired()
        .iter()
        .filter_map(|r| match *r {
            Resource::Reservation { size, .. } | Resource::Mapping { size, .. } => Some(size),
            _ => None,
        })
        .collect();
    assert_eq!(sizes, [6 << 20, 6 << 20]);
    ledger.release_all(&mut sim);
    assert_released_in_reverse(&sim);
    // A mapping that covers only the size (the offset ignored) fails verify.
    let mut sim = SimBackend::new();
    sim.lie_size = Some(4 << 20);
    let (out, _) = run(&plan, &mut sim);
    let Outcome::Failed { failure, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!(failure.step, Step::Verify);
    assert!(
        failure.error.message.contains("offset_bytes 3145728"),
        "{}",
        failure.error.message
    );
    assert_released_in_reverse(&sim);
}
