//! docs/format.md §8.10 through the real binary and the fake driver: one
//! exported segment carved into allocations imports with one
//! reference-counted open (the fake follows the driver's documented
//! semantics: a handle already open in the context answers the existing
//! pointer and counts a reference), and one memory at overlapping ranges,
//! seen only by the driver (one IPC pointer for two handles, one handle
//! for two imports, one MEMORY_BLOCK_ID for two mappings) or the kernel
//! (two fds of one file), stops at `verify-distinct` or, for what only a
//! mapping shows, `verify-distinct-mapped`: exit 3, everything released in
//! reverse. Two exports of one allocation, each a distinct file whose
//! identity says nothing (the driver's shape), are refused in every mode
//! in which the driver answers an identity; where it answers none the
//! report says so.

use crate::import::fakecuda::{alloc, built, pidfd_works, Alloc, Run, Scenario, MIB};
use serde_json::Value;

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

/// Rank 0: allocation kv-0, and kv-1 a second export of kv-0's allocation
/// at `offset` (the owner exports twice: two distinct files).
fn exported_twice(offset: u64) -> Vec<Alloc> {
    let first = Alloc {
        alloc_size: 4 * MIB,
        ..alloc("posix_fd", 0)
    };
    let second = Alloc {
        offset_bytes: offset,
        export_of: Some((0, 0)),
        ..first.clone()
    };
    vec![first, second]
}

/// The `distinct` list of an imported allocation: (identity, compared).
fn compared(item: &Value) -> Vec<(String, bool)> {
    item["distinct"]
        .as_array()
        .unwrap_or_else(|| panic!("no distinct in {item}"))
        .iter()
        .map(|c| {
            (
                c["identity"].as_str().unwrap().to_string(),
                c["compared"].as_bool().unwrap(),
            )
        })
        .collect()
}

#[test]
fn two_exports_of_one_allocation_are_refused_in_every_mode_the_driver_answers() {
    let Some(b) = built() else { return };
    if !pidfd_works(b) {
        return;
    }
    let s = Scenario::new(b, 1, 1, |_| exported_twice(MIB / 2));
    let mode = |reimport: &str, block: bool| {
        let mut env = vec![("FAKECUDA_REIMPORT", reimport.to_string())];
        if !block {
            env.push(("FAKECUDA_NO_BLOCK_ID", "1".to_string()));
        }
        env
    };
    // A new handle per import (the default): the files differ, the
    // handles differ; the driver's MEMORY_BLOCK_ID shows it once mapped.
    // The same handle again: verify-distinct, before anything is mapped.
    for (reimport, block, step, says) in [
        ("new", true, "verify-distinct-mapped", "MEMORY_BLOCK_ID"),
        ("same", true, "verify-distinct", "imported handle"),
        ("same", false, "verify-distinct", "imported handle"),
    ] {
        let r = s.import("twice", &mode(reimport, block), &[]);
        let ctx = format!("{reimport} block={block}: {}", r.why());
        assert_eq!(r.code, 3, "{ctx}");
        let f = &r.report()["failure"];
        assert_eq!(f["step"], step, "{ctx}");
        assert_eq!(f["allocation"], "kv-1", "{ctx}");
        let m = r.failure_message();
        assert!(
            m.contains(says) && m.contains("\"kv-0\"") && m.contains("overlap"),
            "{ctx}"
        );
        r.assert_clean_reverse();
        assert!(r.log.held.is_empty(), "{ctx}");
    }
    // The handle identity alone caught it: no reservation for kv-1.
    let r = s.import("twice-same", &mode("same", true), &[]);
    let reserves = r.log.calls.iter().filter(|c| c.1 == "cuMemAddressReserve");
    assert_eq!(reserves.count(), 1, "{}", r.why());
    // A driver that answers neither: nothing can show it. The import goes
    // on, and the report says which identity was not available.
    let r = s.import("twice-blind", &mode("new", false), &[]);
    assert_eq!(r.code, 0, "{}", r.why());
    r.assert_clean_reverse();
    for item in r.report()["ranks"][0]["items"].as_array().unwrap() {
        assert_eq!(
            compared(item),
            [
                ("handle".to_string(), true),
                ("owner-file".to_string(), true),
                ("memory-block-id".to_string(), false)
            ],
            "{item}"
        );
        let why = item["distinct"][2]["why"].as_str().unwrap();
        assert!(why.contains("CUDA_ERROR_INVALID_VALUE (1)"), "{why}");
    }
    // At disjoint ranges two exports of one allocation are one segment
    // carved in two: imported in every mode.
    let s = Scenario::new(b, 1, 1, |_| exported_twice(2 * MIB));
    for (reimport, block) in [("new", true), ("same", true), ("new", false)] {
        let r = s.import("twice-disjoint", &mode(reimport, block), &[]);
        assert_eq!(r.code, 0, "{reimport} {block}: {}", r.why());
        r.assert_clean_reverse();
        assert!(r.log.held.is_empty());
    }
}

#[test]
fn one_allocation_exported_to_two_ranks_is_refused() {
    let Some(b) = built() else { return };
    if !pidfd_works(b) {
        return;
    }
    // Rank 1's allocation is a second export of rank 0's (on device 0).
    let s = Scenario::new(b, 2, 2, |r| match r {
        0 => vec![alloc("posix_fd", 0)],
        _ => vec![Alloc {
            export_of: Some((0, 0)),
            ..alloc("posix_fd", 0)
        }],
    });
    // The driver answers the handle it gave rank 0: verify-distinct.
    let r = s.import("ranks-same", &[("FAKECUDA_REIMPORT", "same".into())], &[]);
    assert_eq!(r.code, 3, "{}", r.why());
    assert_eq!(r.report()["failure"]["step"], "verify-distinct");
    assert_eq!(r.report()["failure"]["rank"], 1);
    assert!(
        r.failure_message()
            .contains("one memory cannot back two ranks"),
        "{}",
        r.why()
    );
    r.assert_clean_reverse();
    // A new handle: the allocation's own location shows it is not rank 1's.
    let r = s.import("ranks-new", &[], &[]);
    assert_eq!(r.code, 3, "{}", r.why());
    assert_eq!(r.report()["failure"]["step"], "verify-location");
    r.assert_clean_reverse();
    assert!(r.log.held.is_empty());
}

#[test]
fn the_report_says_which_identities_each_allocation_was_compared_on() {
    let Some(b) = built() else { return };
    let s = Scenario::new(b, 1, 1, |_| {
        vec![
            alloc("cuda_ipc", 0),
            alloc("fabric", 0),
            alloc(if pidfd_works(b) { "posix_fd" } else { "fabric" }, 0),
        ]
    });
    let r = s.import("identities", &[], &[]);
    assert_eq!(r.code, 0, "{}", r.why());
    let items = r.report()["ranks"][0]["items"].as_array().unwrap().clone();
    let want = |kind: &str| -> Vec<(String, bool)> {
        let names: &[&str] = match kind {
            "cuda_ipc" => &["handle", "memory-block-id", "mapped-range"],
            "fabric" => &["handle", "memory-block-id"],
            _ => &["handle", "owner-file", "memory-block-id"],
        };
        names.iter().map(|n| (n.to_string(), true)).collect()
    };
    for item in &items {
        assert_eq!(
            compared(item),
            want(item["kind"].as_str().unwrap()),
            "{item}"
        );
    }
    // A dry run plans; it compares nothing.
    let r = s.import("identities-dry", &[], &["--dry-run"]);
    assert_eq!(r.code, 0, "{}", r.why());
    let item = &r.report()["ranks"][0]["items"][0];
    assert!(item.get("distinct").is_none(), "{item}");
}

/// The `distinct` entry of identity `id` in an imported allocation:
/// (compared, evidence, why).
fn entry(item: &Value, id: &str) -> (bool, String, String) {
    let e = item["distinct"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["identity"] == id)
        .unwrap_or_else(|| panic!("no {id} in {item}"))
        .clone();
    (
        e["compared"].as_bool().unwrap(),
        e["evidence"].as_str().unwrap().to_string(),
        e["why"].as_str().unwrap_or("").to_string(),
    )
}

#[test]
fn every_block_id_answer_the_driver_may_give() {
    let Some(b) = built() else { return };
    let kind = if pidfd_works(b) { "posix_fd" } else { "fabric" };
    // Two ranks on two GPUs, two distinct allocations each at offset 0
    // (their ranges overlap, so one id for a rank's two would refuse them
    // were nothing there to prove the ids worthless).
    let s = Scenario::new(b, 2, 2, |r| vec![alloc(kind, r), alloc(kind, r)]);
    let items = |r: &Run| -> Vec<Value> {
        let ranks = r.report()["ranks"].as_array().unwrap().clone();
        ranks
            .iter()
            .flat_map(|k| k["items"].as_array().unwrap().clone())
            .collect()
    };
    for (mode, compared, evidence, why) in [
        // Per allocation, as documented: compared, and it says so.
        ("allocation", true, "block-id", ""),
        // Per import: different ids too; the evidence says what it rests
        // on, never "shown distinct".
        ("import", true, "block-id", ""),
        // One id for memory on two GPUs: not comparable, decides nothing.
        ("constant", false, "not-comparable", "two devices (0 and 1"),
        // 0 names nothing; absent is a driver that predates the attribute.
        ("zero", false, "not-available", "MEMORY_BLOCK_ID 0"),
        (
            "absent",
            false,
            "not-available",
            "CUDA_ERROR_INVALID_VALUE (1)",
        ),
    ] {
        let r = s.import(mode, &[("FAKECUDA_BLOCK_ID", mode.to_string())], &[]);
        assert_eq!(r.code, 0, "{mode}: {}", r.why());
        r.assert_clean_reverse();
        let all = items(&r);
        assert_eq!(all.len(), 4, "{mode}");
        for item in &all {
            let (c, e, w) = entry(item, "memory-block-id");
            assert_eq!((c, e.as_str()), (compared, evidence), "{mode}: {item}");
            assert!(w.contains(why), "{mode}: {w}");
            // The handle is compared and can only show one memory.
            assert_eq!(entry(item, "handle").1, "same-only", "{mode}: {item}");
        }
    }
    // One memory twice (two exports, overlapping) on one GPU: shown where
    // the ids are per allocation; per import nothing can show it, and the
    // report's evidence says the block ids are all there is.
    if kind == "posix_fd" {
        let s = Scenario::new(b, 1, 1, |_| exported_twice(MIB / 2));
        let r = s.import(
            "twice-alloc",
            &[("FAKECUDA_BLOCK_ID", "allocation".into())],
            &[],
        );
        assert_eq!(r.code, 3, "{}", r.why());
        assert_eq!(r.report()["failure"]["step"], "verify-distinct-mapped");
        r.assert_clean_reverse();
        let r = s.import(
            "twice-import",
            &[("FAKECUDA_BLOCK_ID", "import".into())],
            &[],
        );
        assert_eq!(r.code, 0, "{}", r.why());
        for item in &items(&r) {
            assert_eq!(entry(item, "memory-block-id").1, "block-id", "{item}");
        }
    }
}

#[test]
fn access_is_per_mapping_and_device() {
    let Some(b) = built() else { return };
    // kvcr grants its planned device access to every mapping and reads
    // through it there: rank 1's memory on device 1 imports, read back
    // through device 1's access (a read from another device would be a
    // violation in the fake's log).
    let s = Scenario::new(b, 2, 2, |r| {
        vec![Alloc {
            content: Some((4096, 2, true)),
            ..alloc("fabric", r)
        }]
    });
    let r = s.import("access", &[], &[]);
    assert_eq!(r.code, 0, "{}", r.why());
    r.assert_clean_reverse();
    let sets = crate::import::fakecuda::calls(&r, "cuMemSetAccess");
    assert!(sets.iter().any(|c| c.contains("dev=1")), "{sets:?}");
}
