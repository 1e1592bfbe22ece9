//! The import engine on one memory behind several allocations
//! (docs/format.md §8.10): disjoint ranges of one exported segment share a
//! reference-counted open; overlapping ranges, or one memory in two ranks,
//! stop at `verify-distinct` with everything released in reverse.

use super::*;
use crate::format::descriptor::{Allocation, GpuUuid, Handle, Owner};
use crate::import::engine::sim::SimBackend;
use crate::testkit;

fn rank(r: u64, allocs: Vec<(u64, u64, Handle)>) -> PlannedRank {
    PlannedRank {
        rank: r,
        gpu: GpuUuid::parse(&testkit::gpu(0, r)).unwrap(),
        path: format!("rank-{r}.json"),
        owner: Owner {
            pid: 4242,
            start_ticks: 1,
        },
        allocations: allocs
            .into_iter()
            .enumerate()
            .map(|(i, (offset_bytes, size_bytes, handle))| Allocation {
                id: format!("kv-{i}"),
                size_bytes,
                offset_bytes,
                handle,
                content: None,
            })
            .collect(),
    }
}

fn plan(ranks: Vec<PlannedRank>) -> Plan {
    Plan {
        engine_id: crate::format::descriptor::EngineId::parse("e").unwrap(),
        incarnation: None,
        epoch: Some(1),
        ranks,
    }
}

fn run(p: &Plan, sim: &mut SimBackend) -> Outcome {
    let mut ledger = Ledger::new();
    let out = execute(p, sim, &mut ledger, &|| false, &mut |_| {});
    assert!(ledger.is_empty() || matches!(out, Outcome::Imported { .. }));
    if matches!(out, Outcome::Imported { .. }) {
        let rep = ledger.release_all(sim);
        assert!(rep.is_clean(), "{rep:?}");
    }
    out
}

const SEG: [u8; 64] = [7; 64];
const MIB: u64 = 1 << 20;

#[test]
fn disjoint_ranges_of_one_segment_share_one_counted_open() {
    let p = plan(vec![rank(
        0,
        vec![
            (0, MIB, Handle::CudaIpc(SEG)),
            (MIB, MIB, Handle::CudaIpc(SEG)),
            (2 * MIB, 4096, Handle::CudaIpc(SEG)),
        ],
    )]);
    let mut sim = SimBackend::new();
    let out = run(&p, &mut sim);
    assert!(matches!(out, Outcome::Imported { .. }), "{out:?}");
    // One pointer, three references, three releases, none left.
    let acquired = sim.acquired();
    let ipc: Vec<_> = acquired
        .iter()
        .filter(|r| matches!(r, Resource::IpcMapping { .. }))
        .collect();
    assert_eq!(ipc.len(), 3);
    assert!(ipc.iter().all(|r| r == &ipc[0]));
    assert_eq!(
        sim.released()
            .iter()
            .filter(|r| matches!(r, Resource::IpcMapping { .. }))
            .count(),
        3
    );
    assert!(sim.held().is_empty());
}

#[test]
fn overlapping_ranges_of_one_memory_stop_at_verify_distinct() {
    // Overlap by one byte, containment, and equal ranges.
    for (a, b) in [
        ((0, MIB), (MIB - 1, MIB)),
        ((0, 4 * MIB), (MIB, 4096)),
        ((MIB, MIB), (MIB, MIB)),
        ((MIB, MIB), (0, MIB + 1)),
    ] {
        let p = plan(vec![rank(
            0,
            vec![
                (a.0, a.1, Handle::CudaIpc(SEG)),
                (b.0, b.1, Handle::CudaIpc(SEG)),
            ],
        )]);
        let mut sim = SimBackend::new();
        let Outcome::Failed {
            failure, release, ..
        } = run(&p, &mut sim)
        else {
            panic!("{a:?} {b:?} imported");
        };
        assert_eq!(failure.step, Step::VerifyDistinct);
        assert_eq!(failure.allocation.as_deref(), Some("kv-1"));
        assert!(failure.error.message.contains("overlap"), "{failure}");
        assert!(
            failure.error.message.contains("\"kv-0\""),
            "{}",
            failure.error.message
        );
        assert!(release.is_clean());
        // Both references (and the context) released, in reverse.
        let mut want = sim.acquired();
        want.reverse();
        assert_eq!(sim.released(), want);
        assert!(sim.held().is_empty());
    }
    // Adjacent ranges do not overlap.
    let p = plan(vec![rank(
        0,
        vec![
            (MIB, MIB, Handle::CudaIpc(SEG)),
            (0, MIB, Handle::CudaIpc(SEG)),
        ],
    )]);
    assert!(matches!(
        run(&p, &mut SimBackend::new()),
        Outcome::Imported { .. }
    ));
}

#[test]
fn distinct_rule() {
    let ipc = Some(MemoryId::IpcPointer { device: 0, ptr: 1 });
    let mut d = Distinct::default();
    d.admit(ipc, 0, "a", 0, 10).unwrap();
    d.admit(ipc, 0, "b", 10, 10).unwrap();
    // Another memory at the same range: fine.
    d.admit(Some(MemoryId::File { dev: 1, ino: 2 }), 0, "c", 0, 10)
        .unwrap();
    // No identity: nothing to compare.
    d.admit(None, 0, "d", 0, 10).unwrap();
    d.admit(None, 0, "e", 0, 10).unwrap();
    let e = d.admit(ipc, 0, "f", 19, 1).unwrap_err();
    assert!(
        e.message.contains("\"b\"") && e.message.contains("[19, 20)"),
        "{e}"
    );
    // One memory in two ranks, even at a disjoint range.
    let e = d.admit(ipc, 1, "a", 100, 10).unwrap_err();
    assert!(e.message.contains("of rank 0"), "{e}");
    // Ranges that reach u64::MAX do not wrap.
    let mut d = Distinct::default();
    d.admit(ipc, 0, "a", u64::MAX - 10, 5).unwrap();
    assert!(d.admit(ipc, 0, "b", u64::MAX - 5, 5).is_ok());
    assert!(d.admit(ipc, 0, "c", u64::MAX - 6, 1).is_err());
    assert!(d.admit(ipc, 0, "d", u64::MAX - 1, 1).is_err());
}

#[test]
fn one_memory_in_two_ranks_stops_at_verify_distinct() {
    // The sim answers the same pointer only on one device, so across ranks
    // this is the VMM handle case: the driver hands one handle to two ranks.
    let mut d = Distinct::default();
    let h = Some(MemoryId::VmmHandle {
        device: 0,
        handle: 9,
    });
    d.admit(h, 0, "kv-0", 0, MIB).unwrap();
    let e = d.admit(h, 3, "kv-2", MIB, MIB).unwrap_err();
    assert!(
        e.message.contains("one memory cannot back two ranks"),
        "{e}"
    );
}
