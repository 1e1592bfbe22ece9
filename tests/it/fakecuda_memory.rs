//! docs/format.md §8.10 through the real binary and the fake driver: one
//! exported segment carved into allocations imports with one
//! reference-counted open (the fake follows the driver's documented
//! semantics: a handle already open in the context answers the existing
//! pointer and counts a reference), and one memory at overlapping ranges,
//! seen only by the driver (one IPC pointer for two handles) or the kernel
//! (two fds of one file), stops at `verify-distinct`: exit 3, everything
//! released in reverse.

use crate::fakecuda::{alloc, built, pidfd_works, Alloc, Run, Scenario, MIB};

fn opens(r: &Run, sym: &str) -> Vec<String> {
    r.log
        .calls
        .iter()
        .filter(|c| c.1 == sym && c.2 == 0)
        .map(|c| c.3.clone())
        .collect()
}

fn carved(kind: &'static str, second_offset: u64, same: bool) -> Vec<Alloc> {
    let first = Alloc {
        alloc_size: 4 * MIB,
        ..alloc(kind, 0)
    };
    let second = Alloc {
        offset_bytes: second_offset,
        handle_of: (!same).then_some(0),
        same_memory_as: same.then_some(0),
        ..first.clone()
    };
    vec![first, second]
}

#[test]
fn one_ipc_segment_at_disjoint_ranges_shares_one_counted_open() {
    let Some(b) = built() else { return };
    let s = Scenario::new(b, 1, 1, |_| carved("cuda_ipc", 2 * MIB, false));
    let r = s.import("seg", &[], &[]);
    assert_eq!(r.code, 0, "{}", r.why());
    assert_eq!(r.report()["result"], "imported");
    r.assert_clean_reverse();
    assert!(r.log.held.is_empty(), "{:?}", r.log.held);
    let o = opens(&r, "cuIpcOpenMemHandle_v2");
    assert_eq!(o.len(), 2, "{o:?}");
    let ptr = |d: &str| d.split_whitespace().next().unwrap().to_string();
    assert_eq!(ptr(&o[0]), ptr(&o[1]), "one pointer: {o:?}");
    assert!(o[1].ends_with("refs=2"), "{o:?}");
    // Two references, two closes: none refused as "not held" (the bug
    // was exit 4 and a leaked reference here).
    assert_eq!(opens(&r, "cuIpcCloseMemHandle").len(), 2);
    assert_eq!(r.report()["released"], 3);
}

#[test]
fn one_vmm_handle_at_disjoint_ranges_imports() {
    let Some(b) = built() else { return };
    for kind in ["fabric", "posix_fd"] {
        let s = Scenario::new(b, 1, 1, |_| carved(kind, 2 * MIB, false));
        let r = s.import("seg", &[], &[]);
        assert_eq!(r.code, 0, "{kind}: {}", r.why());
        r.assert_clean_reverse();
        assert!(r.log.held.is_empty(), "{kind}: {:?}", r.log.held);
        assert_eq!(opens(&r, "cuMemImportFromShareableHandle").len(), 2);
        assert_eq!(opens(&r, "cuMemRelease").len(), 2);
    }
}

#[test]
fn two_ipc_handles_of_one_allocation_at_overlapping_ranges_stop_at_verify_distinct() {
    let Some(b) = built() else { return };
    // Different handle bytes (the audit cannot see it); one pointer.
    for offset in [0, MIB / 2, MIB - 1] {
        let s = Scenario::new(b, 1, 1, |_| carved("cuda_ipc", offset, true));
        let r = s.import("alias", &[], &[]);
        assert_eq!(r.code, 3, "{offset}: {}", r.why());
        assert_eq!(r.report()["result"], "failed");
        let f = &r.report()["failure"];
        assert_eq!(f["step"], "verify-distinct", "{}", r.why());
        assert_eq!(f["rank"], 0);
        assert_eq!(f["allocation"], "kv-1");
        let m = r.failure_message();
        assert!(
            m.contains("IPC pointer") && m.contains("\"kv-0\"") && m.contains("overlap"),
            "{m}"
        );
        r.assert_clean_reverse();
        assert!(r.log.held.is_empty(), "{:?}", r.log.held);
    }
    // The same two handles at disjoint ranges import.
    let s = Scenario::new(b, 1, 1, |_| carved("cuda_ipc", MIB, true));
    let r = s.import("alias-disjoint", &[], &[]);
    assert_eq!(r.code, 0, "{}", r.why());
    r.assert_clean_reverse();
}

#[test]
fn two_fds_of_one_file_at_overlapping_ranges_stop_at_verify_distinct() {
    let Some(b) = built() else { return };
    if !pidfd_works(b) {
        return;
    }
    let s = Scenario::new(b, 1, 1, |_| carved("posix_fd", MIB / 2, true));
    let r = s.import("dup", &[], &[]);
    assert_eq!(r.code, 3, "{}", r.why());
    let f = &r.report()["failure"];
    assert_eq!(f["step"], "verify-distinct", "{}", r.why());
    assert_eq!(f["allocation"], "kv-1");
    assert!(
        r.failure_message().contains("the open file of owner"),
        "{}",
        r.why()
    );
    r.assert_clean_reverse();
    assert!(r.log.held.is_empty(), "{:?}", r.log.held);
    // Stopped before any reservation for kv-1: one import each, one reserve.
    assert_eq!(
        r.log
            .calls
            .iter()
            .filter(|c| c.1 == "cuMemAddressReserve")
            .count(),
        1
    );
    // Disjoint ranges of the two fds import.
    let s = Scenario::new(b, 1, 1, |_| carved("posix_fd", MIB, true));
    let r = s.import("dup-disjoint", &[], &[]);
    assert_eq!(r.code, 0, "{}", r.why());
    r.assert_clean_reverse();
}
