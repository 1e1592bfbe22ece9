//! Driver facts through the real binary and the fake driver (issue #27
//! item 4): the granularity comes from the imported allocation's own
//! properties; a refused context on an exclusive-process GPU is named as
//! such, and a hold there warns that it keeps the engine out; the toolkit's
//! stub is recognised before missing entry points are; MIG devices the plan
//! cannot use in one process are refused before any import, and CUDA IPC
//! imports within one MIG instance and is refused by the driver across
//! instances.

use crate::import::fakecuda::{alloc, build_variant, built, calls, gpu, Alloc, Scenario, MIB};

#[test]
fn the_granularity_is_the_imported_allocations_own() {
    let Some(b) = built() else { return };
    // The fake reports the allocation compressible, whose granularity is
    // twice the device's plain 2 MiB: a prop built for the device would
    // reserve 2 MiB, the allocation's own properties 4 MiB.
    let s = Scenario::new(b, 1, 1, |_| {
        vec![Alloc {
            alloc_size: 4 * MIB,
            ..alloc("fabric", 0)
        }]
    });
    let r = s.import(
        "compressible",
        &[("FAKECUDA_COMPRESSIBLE", "1".into())],
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.why());
    r.assert_clean_reverse();
    let g = calls(&r, "cuMemGetAllocationGranularity");
    assert!(g.len() == 1 && g[0].contains("compression=1"), "{g:?}");
    let reserve = calls(&r, "cuMemAddressReserve");
    assert!(
        reserve[0].ends_with(&format!("size={}", 4 * MIB)),
        "{reserve:?}"
    );
}

#[test]
fn an_exclusive_process_gpu_is_named_and_a_hold_there_warns() {
    let Some(b) = built() else { return };
    let s = Scenario::new(b, 1, 1, |_| vec![alloc("fabric", 0)]);
    let busy = [
        ("FAKECUDA_COMPUTE_MODE", "3".to_string()),
        ("FAKECUDA_FAIL", "cuDevicePrimaryCtxRetain:1:46".to_string()),
    ];
    let r = s.import("exclusive", &busy, &[]);
    assert_eq!(r.code, 3, "{}", r.why());
    assert_eq!(r.report()["failure"]["step"], "device");
    let m = r.failure_message();
    assert!(
        m.contains("CUDA_ERROR_DEVICE_UNAVAILABLE (46)")
            && m.contains("exclusive-process compute mode")
            && m.contains("another one has"),
        "{m}"
    );
    // Prohibited is named too; the default mode adds nothing.
    let r = s.import(
        "prohibited",
        &[
            ("FAKECUDA_COMPUTE_MODE", "2".to_string()),
            ("FAKECUDA_FAIL", "cuDevicePrimaryCtxRetain:1:46".to_string()),
        ],
        &[],
    );
    assert!(
        r.failure_message().contains("CU_COMPUTEMODE_PROHIBITED"),
        "{}",
        r.why()
    );
    let r = s.import(
        "default",
        &[("FAKECUDA_FAIL", "cuDevicePrimaryCtxRetain:1:46".to_string())],
        &[],
    );
    assert!(!r.failure_message().contains("compute mode"), "{}", r.why());
    // kvcr alone on an exclusive-process GPU: the hold works, and says
    // that while it holds the engine cannot have a context there.
    let held = s.start_hold("hold", &[("FAKECUDA_COMPUTE_MODE", "3".to_string())]);
    let r = held.release();
    assert_eq!(r.code, 0, "{}", r.why());
    let w = r.report()["warnings"].to_string();
    assert!(
        w.contains("device 0 is in exclusive-process compute mode") && w.contains("the engine"),
        "{w}"
    );
}

#[test]
fn the_toolkit_stub_is_named_before_missing_entry_points() {
    let Some(b) = built() else { return };
    // A stub that also lacks entry points kvcr needs.
    let dir = build_variant(&["FAKECUDA_OLD_DRIVER", "FAKECUDA_AS_STUB"]);
    let s = Scenario::new(b, 1, 1, |_| vec![alloc("fabric", 0)]);
    let r = s.import(
        "stub-old",
        &[("LD_LIBRARY_PATH", dir.path().display().to_string())],
        &[],
    );
    assert_eq!(r.code, 2, "{}", r.why());
    assert!(
        r.stderr.contains("the CUDA toolkit's stub, not the driver")
            && !r.stderr.contains("too old"),
        "{}",
        r.stderr
    );
}

fn mig(i: usize) -> String {
    gpu(i).replacen("GPU-", "MIG-", 1)
}

#[test]
fn mig_devices_the_driver_cannot_serve_in_one_process_are_refused() {
    let Some(b) = built() else { return };
    // An older driver's v1 names the parent GPU: the probe calls the
    // device MIG (no /proc/driver/nvidia here).
    let one = [
        ("FAKECUDA_GPUS", format!("{}@{}", mig(0), gpu(9))),
        ("FAKECUDA_V1_PHYSICAL", "1".to_string()),
    ];
    // CUDA IPC within one GPU instance works (the MIG user guide allows it
    // between processes on one instance): imported and released.
    let s = Scenario::new(b, 1, 1, |_| vec![alloc("fabric", 0), alloc("cuda_ipc", 0)]);
    let r = s.import("mig-ipc", &one, &[]);
    assert_eq!(r.code, 0, "{}", r.why());
    r.assert_clean_reverse();
    assert!(r.log.held.is_empty());
    // Across instances: a handle exported on instance 1, named by the
    // descriptor as instance 0's, is refused by the driver at import.
    let across = [
        (
            "FAKECUDA_GPUS",
            format!("{}@{},{}@{}", mig(0), gpu(9), mig(1), gpu(9)),
        ),
        ("FAKECUDA_V1_PHYSICAL", "1".to_string()),
    ];
    let s = Scenario::new(b, 2, 1, |_| vec![alloc("cuda_ipc", 1)]);
    let r = s.import("mig-ipc-across", &across, &[]);
    assert_eq!(r.code, 3, "{}", r.why());
    let f = &r.report()["failure"];
    assert_eq!(f["step"], "import", "{}", r.why());
    assert_eq!(f["driver"]["status"], 801, "{}", r.why());
    r.assert_clean_reverse();
    // Two MIG devices in one plan.
    let two = [
        (
            "FAKECUDA_GPUS",
            format!("{}@{},{}@{}", mig(0), gpu(9), mig(1), gpu(9)),
        ),
        ("FAKECUDA_V1_PHYSICAL", "1".to_string()),
    ];
    let s = Scenario::new(b, 2, 2, |r| vec![alloc("fabric", r)]);
    let r = s.import("mig-two", &two, &[]);
    assert_eq!(r.code, 3, "{}", r.why());
    assert_eq!(r.report()["failure"]["rank"], 1);
    assert!(
        r.failure_message()
            .contains("two MIG devices in one process"),
        "{}",
        r.why()
    );
    assert!(r.log.acquired.is_empty());
    // The same plan on GPUs the probe cannot call MIG imports.
    let r = s.import("gpus", &[], &[]);
    assert_eq!(r.code, 0, "{}", r.why());
}
