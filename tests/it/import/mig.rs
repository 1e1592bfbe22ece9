//! MIG through the fake driver: `cuDeviceGetUuid_v2` answers the MIG
//! instance's UUID and, as current CUDA documents, so does v1; older drivers
//! answered the physical GPU from v1 (`FAKECUDA_V1_PHYSICAL=1`). Decisions
//! compare the 16 bytes whatever the label; only the GPU/MIG label of a
//! visible device (and so the KV106 message) depends on v1, and only a v1
//! that differs from v2 makes it MIG (an equal one cannot tell).

use crate::import::fakecuda::{alloc, built, gpu, Scenario};
use serde_json::Value;

fn mig(i: usize) -> String {
    gpu(i).replacen("GPU-", "MIG-", 1)
}

#[test]
fn a_rank_imports_onto_a_mig_instance_by_its_16_bytes() {
    let Some(b) = built() else { return };
    // (cuda_ipc within one MIG instance imports, across instances the
    // driver refuses it: tests/it/import/driver.rs.)
    let s = Scenario::new(b, 1, 1, |_| vec![alloc("fabric", 0), alloc("fabric", 0)]);
    for v1_physical in ["0", "1"] {
        let env = [
            ("FAKECUDA_GPUS", format!("{}@{}", mig(0), gpu(9))),
            ("FAKECUDA_V1_PHYSICAL", v1_physical.to_string()),
        ];
        let r = s.import("mig", &env, &[]);
        assert_eq!(r.code, 0, "v1_physical={v1_physical}: {}", r.why());
        r.assert_clean_reverse();
        assert!(r.log.held.is_empty());
        assert_eq!(r.report()["ranks"][0]["device"], 0);
    }
}

#[test]
fn the_mig_label_comes_only_from_a_v1_that_differs() {
    let Some(b) = built() else { return };
    let s = Scenario::new(b, 2, 1, |_| vec![alloc("fabric", 0)]);
    let inv = s.inv();
    let audit = |v1_physical: &str| -> Value {
        let log = s.dir.path().join(format!("mig-{v1_physical}.log"));
        let out = s
            .command(
                &log,
                &[
                    // Rank 0's GPU is absent; one MIG instance of another GPU is visible.
                    ("FAKECUDA_GPUS", format!("{}@{}", mig(5), gpu(9))),
                    ("FAKECUDA_V1_PHYSICAL", v1_physical.to_string()),
                ],
                &["audit", "--live", inv.to_str().unwrap(), "--format", "json"],
            )
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let found = |v: &Value| v["groups"][0]["ranks"][0]["findings"][0]["found"].to_string();
    // Current CUDA: v1 = v2, which cannot tell, so the label stays GPU
    // (without /proc/driver/nvidia to say the UUID is no physical GPU).
    let v = audit("0");
    assert!(v.to_string().contains("KV106"), "{v:#}");
    assert!(found(&v).contains(&gpu(5)), "{}", found(&v));
    // An older driver's v1 names the parent: a MIG instance.
    let v = audit("1");
    assert!(found(&v).contains(&mig(5)), "{}", found(&v));
    // MIG is the reason rank 0's GPU is not visible: the finding says so,
    // in the table, the headline and the exit status as well.
    let f = &v["groups"][0]["ranks"][0]["findings"][0];
    assert_eq!(f["code"], "KV106");
    let m = f["message"].as_str().unwrap();
    assert!(
        m.contains("MIG: a CUDA process enumerates a single MIG device") && m.contains(&mig(5)),
        "{m}"
    );
    assert_eq!(v["groups"][0]["verdict"], "reject");
    assert!(v["cause"].as_str().unwrap().starts_with("rejected:"), "{v}");
    // With v1 = v2 nothing says MIG: no MIG reason is claimed.
    let v = audit("0");
    let m = v["groups"][0]["ranks"][0]["findings"][0]["message"].to_string();
    assert!(!m.contains("MIG:"), "{m}");
}
