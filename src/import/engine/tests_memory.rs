//! The import engine on one memory behind several allocations
//! (docs/format.md §8.10): disjoint ranges of one exported segment share a
//! reference-counted open; overlapping ranges, or one memory in two ranks,
//! stop at `verify-distinct` with everything released in reverse.

use super::*;
use crate::format::descriptor::{Allocation, GpuUuid, Handle, Owner};
use crate::import::engine::distinct::Evidence;
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

fn known(m: MemoryId) -> Vec<Identity> {
    vec![Identity::Known(m)]
}

#[test]
fn distinct_rule() {
    let ipc = MemoryId::IpcPointer { device: 0, ptr: 1 };
    let mut d = Distinct::default();
    d.admit(0, "a", 0, 10, known(ipc)).unwrap();
    d.admit(0, "b", 10, 10, known(ipc)).unwrap();
    // Another memory at the same range: fine.
    d.admit(0, "c", 0, 10, known(MemoryId::File { dev: 1, ino: 2 }))
        .unwrap();
    // No identity: nothing to compare.
    d.admit(0, "d", 0, 10, vec![]).unwrap();
    let na = Identity::NotAvailable(IdentityKind::OwnerFile, "no kcmp".into());
    d.admit(0, "e", 0, 10, vec![na]).unwrap();
    let e = d.admit(0, "f", 19, 1, known(ipc)).unwrap_err();
    assert!(
        e.message.contains("\"b\"") && e.message.contains("[19, 20)"),
        "{e}"
    );
    // One memory in two ranks, even at a disjoint range.
    let e = d.admit(1, "a", 100, 10, known(ipc)).unwrap_err();
    assert!(e.message.contains("of rank 0"), "{e}");
    // Ranges that reach u64::MAX do not wrap.
    let mut d = Distinct::default();
    d.admit(0, "a", u64::MAX - 10, 5, known(ipc)).unwrap();
    assert!(d.admit(0, "b", u64::MAX - 5, 5, known(ipc)).is_ok());
    assert!(d.admit(0, "c", u64::MAX - 6, 1, known(ipc)).is_err());
    assert!(d.admit(0, "d", u64::MAX - 1, 1, known(ipc)).is_err());
}

#[test]
fn one_memory_in_two_ranks_stops_at_verify_distinct() {
    // The driver hands one handle to two ranks.
    let mut d = Distinct::default();
    let h = MemoryId::VmmHandle {
        device: 0,
        handle: 9,
    };
    d.admit(0, "kv-0", 0, MIB, known(h)).unwrap();
    let e = d.admit(3, "kv-2", MIB, MIB, known(h)).unwrap_err();
    assert!(
        e.message.contains("one memory cannot back two ranks"),
        "{e}"
    );
    // The device is not compared: a handle is process-wide.
    let mut d = Distinct::default();
    d.admit(0, "kv-0", 0, MIB, known(h)).unwrap();
    let h1 = MemoryId::VmmHandle {
        device: 1,
        handle: 9,
    };
    assert!(d.admit(1, "kv-0", 0, MIB, known(h1)).is_err());
}

#[test]
fn any_one_shared_identity_is_one_memory() {
    // Different handles and different files (two exports of one
    // allocation, as the driver gives them), one block id once mapped.
    let mut d = Distinct::default();
    let ids = |h: u64, fd: i32| {
        vec![
            Identity::Known(MemoryId::VmmHandle {
                device: 0,
                handle: h,
            }),
            Identity::Known(MemoryId::OwnerFile { pid: 7, fd }),
        ]
    };
    d.admit(0, "kv-0", 0, MIB, ids(1, 10)).unwrap();
    d.admit(0, "kv-1", 0, MIB, ids(2, 11)).unwrap();
    let block = || known(MemoryId::BlockId { id: 0xb10c });
    d.extend(0, "kv-0", block()).unwrap();
    // A block id is compared once every allocation is mapped.
    d.extend(0, "kv-1", block()).unwrap();
    let e = d.settle().unwrap_err();
    assert_eq!((e.rank, e.allocation.as_str()), (0, "kv-1"));
    assert!(
        e.error.message.contains("MEMORY_BLOCK_ID 0xb10c") && e.error.message.contains("\"kv-0\""),
        "{e:?}"
    );
    // Unanswered block ids are evidence neither way: both import.
    let mut d = Distinct::default();
    d.admit(0, "kv-0", 0, MIB, ids(1, 10)).unwrap();
    d.admit(0, "kv-1", 0, MIB, ids(2, 11)).unwrap();
    let none = || {
        vec![Identity::NotAvailable(
            IdentityKind::MemoryBlockId,
            "CUDA_ERROR_INVALID_VALUE (1)".into(),
        )]
    };
    d.extend(0, "kv-0", none()).unwrap();
    d.extend(0, "kv-1", none()).unwrap();
    let c = d.compared(0, "kv-1");
    let names: Vec<(IdentityKind, bool)> = c.iter().map(|c| (c.identity, c.compared)).collect();
    assert_eq!(
        names,
        [
            (IdentityKind::Handle, true),
            (IdentityKind::OwnerFile, true),
            (IdentityKind::MemoryBlockId, false)
        ]
    );
    assert_eq!(c[2].why.as_deref(), Some("CUDA_ERROR_INVALID_VALUE (1)"));
    // An identity of one kind never matches one of another.
    let mut d = Distinct::default();
    d.admit(0, "a", 0, MIB, known(MemoryId::BlockId { id: 5 }))
        .unwrap();
    d.admit(
        0,
        "b",
        0,
        MIB,
        known(MemoryId::VmmHandle {
            device: 0,
            handle: 5,
        }),
    )
    .unwrap();
}

#[test]
fn a_repeated_handle_keeps_its_first_identity() {
    // The driver answers the same handle for a second import: the first
    // allocation's file identity is not replaced by the second's, and the
    // handle alone shows the overlap.
    let h = MemoryId::VmmHandle {
        device: 0,
        handle: 0xa110c,
    };
    let mut d = Distinct::default();
    d.admit(
        0,
        "kv-0",
        0,
        MIB,
        vec![
            Identity::Known(h),
            Identity::Known(MemoryId::OwnerFile { pid: 7, fd: 10 }),
        ],
    )
    .unwrap();
    let e = d
        .admit(
            0,
            "kv-1",
            MIB / 2,
            MIB,
            vec![
                Identity::Known(h),
                Identity::Known(MemoryId::OwnerFile { pid: 7, fd: 11 }),
            ],
        )
        .unwrap_err();
    assert!(e.message.contains("imported handle 0xa110c"), "{e}");
    // A third import of another file at a disjoint range still meets the
    // first one's file identity, which was kept.
    let mut d = Distinct::default();
    let f10 = MemoryId::OwnerFile { pid: 7, fd: 10 };
    d.admit(
        0,
        "kv-0",
        0,
        MIB,
        vec![Identity::Known(h), Identity::Known(f10)],
    )
    .unwrap();
    d.admit(0, "kv-1", MIB, MIB, vec![Identity::Known(h)])
        .unwrap();
    let e = d.admit(0, "kv-2", 0, 1, known(f10)).unwrap_err();
    assert!(e.message.contains("\"kv-0\""), "{e}");
}

#[test]
fn overlapping_mapped_ranges_are_one_memory() {
    let r = |base: u64, size: u64| MemoryId::Range {
        device: 0,
        base,
        size,
    };
    assert!(r(0x1000, 0x1000).matches(&r(0x1fff, 1)));
    assert!(!r(0x1000, 0x1000).matches(&r(0x2000, 1)));
    assert!(!r(0x1000, 0).matches(&r(0x1000, 1)));
    assert!(r(u64::MAX - 1, 2).matches(&r(u64::MAX, 1)));
}

#[test]
fn the_same_block_id_for_two_memories_stops_at_verify_distinct_mapped() {
    // Two different fabric handles; the driver says one physical
    // allocation once they are mapped.
    let p = plan(vec![rank(
        0,
        vec![
            (0, MIB, Handle::Fabric([1; 64])),
            (0, MIB, Handle::Fabric([2; 64])),
        ],
    )]);
    let mut sim = SimBackend::new();
    sim.same_block = true;
    let Outcome::Failed {
        failure, release, ..
    } = run(&p, &mut sim)
    else {
        panic!("imported");
    };
    assert_eq!(failure.step, Step::VerifyDistinctMapped);
    assert_eq!(failure.allocation.as_deref(), Some("kv-1"));
    assert!(
        failure.error.message.contains("MEMORY_BLOCK_ID"),
        "{failure}"
    );
    assert!(release.is_clean());
    let mut want = sim.acquired();
    want.reverse();
    assert_eq!(sim.released(), want);
    // With no block id the same plan imports, and says what it compared.
    let mut sim = SimBackend::new();
    sim.no_block = true;
    let mut ledger = Ledger::new();
    let Outcome::Imported { ranks } = execute(&p, &mut sim, &mut ledger, &|| false, &mut |_| {})
    else {
        panic!("not imported");
    };
    let c = &ranks[0].distinct[1];
    assert_eq!(c.len(), 2, "{c:?}");
    assert_eq!((c[0].identity, c[0].compared), (IdentityKind::Handle, true));
    assert_eq!(
        (c[1].identity, c[1].compared),
        (IdentityKind::MemoryBlockId, false)
    );
    assert!(ledger.release_all(&mut sim).is_clean());
}

/// Two allocations of rank `r` on device `dev`, VMM handles `h` and `h + 1`.
fn two_vmm(d: &mut Distinct, r: u64, dev: i32, h: u64) {
    for (i, h) in [h, h + 1].into_iter().enumerate() {
        let handle = known(MemoryId::VmmHandle {
            device: dev,
            handle: h,
        });
        d.admit(r, &format!("kv-{i}"), 0, MIB, handle).unwrap();
    }
}

fn block_evidence(d: &Distinct, r: u64, id: &str) -> (bool, Evidence, Option<String>) {
    let c = d.compared(r, id);
    let b = c
        .iter()
        .find(|c| c.identity == IdentityKind::MemoryBlockId)
        .expect("a block id entry");
    (b.compared, b.evidence, b.why.clone())
}

#[test]
fn a_block_id_of_zero_is_not_an_answer() {
    // Two allocations at overlapping ranges, both answered 0: nothing shown.
    let mut d = Distinct::default();
    two_vmm(&mut d, 0, 0, 10);
    for id in ["kv-0", "kv-1"] {
        d.extend(0, id, known(MemoryId::BlockId { id: 0 })).unwrap();
    }
    d.settle().unwrap();
    let (compared, evidence, why) = block_evidence(&d, 0, "kv-1");
    assert!(!compared);
    assert_eq!(evidence, Evidence::NotAvailable);
    assert!(why.unwrap().contains("answered MEMORY_BLOCK_ID 0"));
}

#[test]
fn one_block_id_for_memory_on_two_devices_is_not_comparable() {
    // A driver answering a constant: rank 0's allocations on device 0 and
    // rank 1's on device 1 all get 0xc0de. Nothing is refused on it, and
    // every allocation's block id says why it decided nothing; the
    // overlapping pair of rank 0 is not refused on it either.
    let mut d = Distinct::default();
    two_vmm(&mut d, 0, 0, 10);
    two_vmm(&mut d, 1, 1, 20);
    for (r, id) in [(0, "kv-0"), (0, "kv-1"), (1, "kv-0"), (1, "kv-1")] {
        d.extend(r, id, known(MemoryId::BlockId { id: 0xc0de }))
            .unwrap();
    }
    d.settle().unwrap();
    for (r, id) in [(0, "kv-0"), (0, "kv-1"), (1, "kv-0"), (1, "kv-1")] {
        let (compared, evidence, why) = block_evidence(&d, r, id);
        assert!(!compared, "{r} {id}");
        assert_eq!(evidence, Evidence::NotComparable, "{r} {id}");
        let why = why.unwrap();
        assert!(
            why.contains("0xc0de") && why.contains("two devices (0 and 1"),
            "{why}"
        );
    }
    // The handles were still compared, and say what they can show.
    let c = d.compared(0, "kv-1");
    assert_eq!(
        (c[0].identity, c[0].evidence),
        (IdentityKind::Handle, Evidence::SameOnly)
    );
}

#[test]
fn one_block_id_for_ipc_ranges_of_two_sizes_is_not_comparable() {
    let mut d = Distinct::default();
    for (i, (ptr, size)) in [(0x1000u64, MIB), (0x9000_0000, 2 * MIB)]
        .into_iter()
        .enumerate()
    {
        let id = format!("kv-{i}");
        d.admit(
            0,
            &id,
            0,
            MIB,
            known(MemoryId::IpcPointer { device: 0, ptr }),
        )
        .unwrap();
        let ids = vec![
            Identity::Known(MemoryId::BlockId { id: 7 }),
            Identity::Known(MemoryId::Range {
                device: 0,
                base: ptr,
                size,
            }),
        ];
        d.extend(0, &id, ids).unwrap();
    }
    d.settle().unwrap();
    let (compared, evidence, why) = block_evidence(&d, 0, "kv-0");
    assert!(!compared);
    assert_eq!(evidence, Evidence::NotComparable);
    assert!(why.unwrap().contains("two sizes"));
}

#[test]
fn per_import_block_ids_are_compared_but_say_what_they_rest_on() {
    // Distinct ids: accepted, and the evidence says it rests on block ids
    // (which a driver answering per import would give too).
    let mut d = Distinct::default();
    two_vmm(&mut d, 0, 0, 10);
    d.extend(0, "kv-0", known(MemoryId::BlockId { id: 1 }))
        .unwrap();
    d.extend(0, "kv-1", known(MemoryId::BlockId { id: 2 }))
        .unwrap();
    d.settle().unwrap();
    assert_eq!(
        block_evidence(&d, 0, "kv-1"),
        (true, Evidence::BlockId, None)
    );
    // One id on one device at overlapping ranges, nothing to prove them
    // distinct: one memory twice, refused naming the later allocation.
    let mut d = Distinct::default();
    two_vmm(&mut d, 0, 0, 10);
    d.extend(0, "kv-0", known(MemoryId::BlockId { id: 3 }))
        .unwrap();
    d.extend(0, "kv-1", known(MemoryId::BlockId { id: 3 }))
        .unwrap();
    let e = d.settle().unwrap_err();
    assert_eq!(e.allocation, "kv-1");
    assert!(e.error.message.contains("overlap"), "{e:?}");
}
