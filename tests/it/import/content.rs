//! docs/format.md §3.6 and §8.4 through the real binary and the fake
//! driver: the content check (good and bad, every handle kind, reads only
//! through kvcr's own mapping), `require_content` at the gate, the driver's
//! word on where VMM memory lives, and the access flags it granted.

use crate::import::fakecuda::{alloc, built, calls, Alloc, Run, Scenario, MIB};
use serde_json::Value;

fn with_content(kind: &'static str, good: bool) -> Alloc {
    Alloc {
        offset_bytes: if kind == "cuda_ipc" { 4096 } else { MIB / 2 },
        content: Some((4096, 16, good)),
        ..alloc(kind, 0)
    }
}

fn items(r: &Run) -> Vec<Value> {
    r.report()["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|x| x["items"].as_array().unwrap().clone())
        .collect()
}

#[test]
fn matching_content_is_verified_for_every_kind() {
    let Some(b) = built() else { return };
    let s = Scenario::new(b, 2, 2, |r| {
        let mut v = vec![
            with_content("cuda_ipc", true),
            with_content("fabric", true),
            with_content("posix_fd", true),
            alloc("fabric", 0),
        ];
        for a in &mut v {
            a.mem_dev = r;
        }
        v
    });
    let r = s.import("good", &[], &[]);
    assert_eq!(r.code, 0, "{}", r.why());
    r.assert_clean_reverse();
    assert!(r.log.held.is_empty());
    let it = items(&r);
    assert_eq!(it.len(), 8);
    for (i, x) in it.iter().enumerate() {
        let want = if i % 4 == 3 { "none" } else { "verified" };
        assert_eq!(x["content"], want, "{x}");
    }
    // 16 pages of 4096 bytes per checked allocation, nothing else read.
    let reads = calls(&r, "cuMemcpyDtoH_v2");
    assert_eq!(reads.len(), 2 * 3 * 16, "{reads:?}");
    assert!(reads.iter().all(|d| d.contains("n=4096")), "{reads:?}");
    // The first and the last page of [offset, offset + size) are sampled.
    assert!(reads.iter().any(|d| d.ends_with("off=4096")), "{reads:?}");
    assert!(
        reads
            .iter()
            .any(|d| d.ends_with(&format!("off={}", 4096 + MIB - 4096))),
        "{reads:?}"
    );
    // A dry run plans the checks and reads nothing.
    let d = s.import("dry", &[], &["--dry-run"]);
    assert_eq!(d.code, 0, "{}", d.why());
    assert!(items(&d).iter().take(3).all(|x| x["content"] == "planned"));
    assert!(calls(&d, "cuMemcpyDtoH_v2").is_empty());
}

#[test]
fn other_bytes_stop_at_verify_content_naming_rank_and_allocation() {
    let Some(b) = built() else { return };
    for kind in ["cuda_ipc", "fabric", "posix_fd"] {
        // Rank 1's second allocation is the wrong memory.
        let s = Scenario::new(b, 2, 2, |r| {
            let mut v = vec![with_content(kind, true), with_content(kind, r == 0)];
            for a in &mut v {
                a.mem_dev = r;
            }
            v
        });
        let r = s.import("bad", &[], &[]);
        assert_eq!(r.code, 3, "{kind}: {}", r.why());
        assert_eq!(r.report()["result"], "failed");
        let f = &r.report()["failure"];
        assert_eq!(f["step"], "verify-content", "{kind}: {}", r.why());
        assert_eq!(
            (f["rank"].as_u64(), f["allocation"].as_str()),
            (Some(1), Some("kv-1"))
        );
        let m = r.failure_message();
        assert!(
            m.contains("content mismatch") && m.contains("16 sampled ranges"),
            "{m}"
        );
        r.assert_clean_reverse();
        assert!(r.log.held.is_empty(), "{kind}: {:?}", r.log.held);
        // Reads stopped with the mismatch: ranks 0 (2 × 16) and 1 (2 × 16).
        assert_eq!(calls(&r, "cuMemcpyDtoH_v2").len(), 64, "{kind}");
    }
}

#[test]
fn a_failed_read_is_verify_content_with_the_driver_status() {
    let Some(b) = built() else { return };
    let s = Scenario::new(b, 1, 1, |_| vec![with_content("fabric", true)]);
    let r = s.import(
        "readfail",
        &[("FAKECUDA_FAIL", "cuMemcpyDtoH_v2:5:919".into())],
        &[],
    );
    assert_eq!(r.code, 3, "{}", r.why());
    let f = &r.report()["failure"];
    assert_eq!(f["step"], "verify-content");
    assert_eq!(f["driver"]["call"], "cuMemcpyDtoH_v2");
    assert_eq!(f["driver"]["status"], 919);
    r.assert_clean_reverse();
    assert!(r.log.held.is_empty());
}

#[test]
fn require_content_refuses_before_any_gpu_call() {
    let Some(b) = built() else { return };
    let s = Scenario::new(b, 1, 1, |_| {
        vec![
            with_content("fabric", true),
            alloc("cuda_ipc", 0),
            alloc("fabric", 0),
        ]
    });
    let pp = s.dir.path().join("profile.json");
    let mut p: Value = serde_json::from_slice(&std::fs::read(&pp).unwrap()).unwrap();
    p["require_content"] = Value::Bool(true);
    let strict = s.dir.path().join("strict-profile.json");
    std::fs::write(&strict, serde_json::to_vec(&p).unwrap()).unwrap();
    let env = [("KVCR_PROFILE", strict.display().to_string())];
    let r = s.import("required", &env, &[]);
    assert_eq!(r.code, 1, "{}", r.why());
    let refusals = r.report()["refusals"].to_string();
    assert!(
        refusals.contains("\"content\"")
            && refusals.contains("2 of 3 allocations have none")
            && refusals.contains("rank 0 allocation kv-1"),
        "{refusals}"
    );
    assert!(r.log.acquired.is_empty(), "{:?}", r.log.acquired);
    assert!(calls(&r, "cuDevicePrimaryCtxRetain").is_empty());
    // The dry run lists it with its exit status, and exits with it, as the
    // real import would (docs/format.md §8.7).
    let d = s.import("required-dry", &env, &["--dry-run"]);
    assert_eq!(d.code, 1, "{}", d.why());
    assert!(
        d.report()["refusals"].to_string().contains("\"status\":1"),
        "{}",
        d.why()
    );
    // Without the requirement the same group imports.
    let ok = s.import("not-required", &[], &[]);
    assert_eq!(ok.code, 0, "{}", ok.why());
    // With content everywhere the requirement is met.
    let s = Scenario::new(b, 1, 1, |_| vec![with_content("posix_fd", true)]);
    std::fs::write(&strict, serde_json::to_vec(&p).unwrap()).unwrap();
    let r = s.import(
        "all",
        &[("KVCR_PROFILE", strict.display().to_string())],
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.why());
}

#[test]
fn vmm_memory_elsewhere_stops_at_verify_location() {
    let Some(b) = built() else { return };
    for kind in ["fabric", "posix_fd"] {
        let s = Scenario::new(b, 2, 1, |_| vec![alloc("cuda_ipc", 0), alloc(kind, 0)]);
        for (var, val, says) in [
            ("FAKECUDA_LOCATION", "2:0", "location type 2 (host)"),
            (
                "FAKECUDA_LOCATION",
                "3:0",
                "location type 3 (host NUMA node)",
            ),
            ("FAKECUDA_LOCATION", "0:0", "location type 0 (invalid)"),
            (
                "FAKECUDA_LOCATION",
                "1:1",
                "id 1, the plan put it on device 0",
            ),
            (
                "FAKECUDA_LOCATION",
                "77:0",
                "location type 77 (unknown to this build; CUDA 13.x",
            ),
            // CU_MEM_LOCATION_TYPE_INVISIBLE, id CU_DEVICE_INVALID (-2).
            (
                "FAKECUDA_LOCATION",
                "5:-2",
                "location type 5 (CU_MEM_LOCATION_TYPE_INVISIBLE",
            ),
            // A 13.x locality-domain location: a device id byte and a
            // domain byte in the id union, never read as the device.
            ("FAKECUDA_LOCATION", "9:256", "id 256 (bytes 0x00000100)"),
            ("FAKECUDA_ALLOC_TYPE", "0", "allocation type 0"),
            ("FAKECUDA_ALLOC_TYPE", "2", "allocation type 2"),
        ] {
            let r = s.import("loc", &[(var, val.into())], &[]);
            let ctx = format!("{kind} {var}={val}: {}", r.why());
            assert_eq!(r.code, 3, "{ctx}");
            assert_eq!(r.report()["failure"]["step"], "verify-location", "{ctx}");
            assert_eq!(r.report()["failure"]["allocation"], "kv-1", "{ctx}");
            assert!(r.failure_message().contains(says), "{ctx}");
            r.assert_clean_reverse();
            assert!(r.log.held.is_empty(), "{ctx}");
            // Stopped before any reservation.
            assert!(calls(&r, "cuMemAddressReserve").is_empty(), "{ctx}");
        }
    }
}

#[test]
fn access_flags_other_than_asked_are_exit_3() {
    let Some(b) = built() else { return };
    let s = Scenario::new(b, 1, 1, |_| vec![alloc("fabric", 0)]);
    for (flags, args, asked) in [
        ("3", &[][..], "kvcr asked for 1 (PROT_READ)"),
        ("0", &[][..], "kvcr asked for 1 (PROT_READ)"),
        ("2", &[][..], "flags 2 (unknown to this build)"),
        (
            "1",
            &["--map-read-write"][..],
            "kvcr asked for 3 (PROT_READWRITE)",
        ),
    ] {
        let r = s.import("access", &[("FAKECUDA_ACCESS", flags.into())], args);
        let ctx = format!("{flags} {args:?}: {}", r.why());
        assert_eq!(r.code, 3, "{ctx}");
        assert_eq!(r.report()["failure"]["step"], "set-access", "{ctx}");
        assert!(
            r.failure_message().contains("cuMemGetAccess reports"),
            "{ctx}"
        );
        assert!(r.failure_message().contains(asked), "{ctx}");
        r.assert_clean_reverse();
        assert!(r.log.held.is_empty(), "{ctx}");
    }
    // What was asked is what the fake reports: both modes import.
    for args in [&[][..], &["--map-read-write"][..]] {
        let r = s.import("access-ok", &[], args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.why());
        let got = calls(&r, "cuMemGetAccess");
        let want = if args.is_empty() {
            "flags=1"
        } else {
            "flags=3"
        };
        assert!(got.len() == 1 && got[0].ends_with(want), "{got:?}");
    }
}
