//! The import engine against the simulator: every failure position, every
//! interrupt position, failed releases, verification. The run of
//! `kvcr import` that drives it is tested beside it, in
//! `crate::import::run`'s tests.

use super::execute::check_mapping;
use super::*;
use crate::format::descriptor::{Allocation, GpuUuid, Handle, Owner};
use crate::import::engine::sim::{Faults, SimBackend, SimEvent};
use crate::testkit;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

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

fn run(plan: &Plan, sim: &mut SimBackend) -> (Outcome, Ledger) {
    let mut ledger = Ledger::new();
    let flag = sim.faults.flag.clone();
    let interrupted = move || flag.load(Ordering::SeqCst);
    let out = execute(plan, sim, &mut ledger, &interrupted, &mut |_| {});
    (out, ledger)
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
        sim.assert_released_in_reverse();
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
            sim.assert_released_in_reverse();
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
            sim.assert_released_in_reverse();
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
            sim.assert_released_in_reverse();
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
    sim.assert_released_in_reverse();

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
    sim.assert_released_in_reverse();
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
    sim.assert_released_in_reverse();
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
    sim.assert_released_in_reverse();
}
