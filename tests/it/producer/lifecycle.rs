//! The producer's lifecycle of docs/format.md §3.5, played as an owner
//! would: one incarnation per lifetime, an epoch that grows across restarts,
//! one directory per incarnation, `quiesced`, and what a producer that gets
//! it wrong sees (issue #21 item 14).

use crate::util::fleet::private;
use crate::util::testkit::{put_group, Desc, BOOT_ID, HOSTNAME, INCARNATION_A, INCARNATION_B};
use crate::util::{audit_json, findings};
use serde_json::{json, Value};
use std::path::Path;

const ENGINE: &str = "org/llama3-70b";

fn lifetime(root: &Path, incarnation: &str, epoch: u64, ranks: u64) {
    let mut d = Desc::new(ENGINE, 0, 4, 1);
    d.incarnation = incarnation.to_string();
    d.epoch = epoch;
    // ROOT/<engine_id>/<incarnation>/rank-<R>.json, as §3.5 recommends.
    let sub = format!("{ENGINE}/{incarnation}");
    put_group(root, &sub, &d);
    for r in ranks..4 {
        std::fs::remove_file(root.join(&sub).join(format!("rank-{r}.json"))).unwrap();
    }
}

fn codes_with(report: &Value, code: &str, severity: &str) -> usize {
    findings(report)
        .iter()
        .filter(|(c, s, _)| c == code && s == severity)
        .count()
}

#[test]
fn a_restart_with_a_grown_epoch_is_accepted_and_the_old_lifetime_is_a_notice() {
    let inv = tempfile::tempdir().unwrap();
    lifetime(inv.path(), INCARNATION_A, 1, 4);
    lifetime(inv.path(), INCARNATION_B, 2, 4);
    let (code, r) = audit_json(inv.path(), &[]);
    assert_eq!(code, 0, "{r:#}");
    let g = &r["groups"][0];
    assert_eq!(g["incarnation"], INCARNATION_B);
    assert_eq!(g["epoch"], 2);
    assert_eq!(codes_with(&r, "KV108", "notice"), 4, "{r:#}");
}

#[test]
fn a_producer_reusing_epoch_1_gets_a_kv107_tie() {
    let inv = tempfile::tempdir().unwrap();
    lifetime(inv.path(), INCARNATION_A, 1, 4);
    lifetime(inv.path(), INCARNATION_B, 1, 4);
    let (code, r) = audit_json(inv.path(), &[]);
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(r["groups"][0]["verdict"], "reject");
    assert!(codes_with(&r, "KV107", "reject") >= 1, "{r:#}");
    // Deleting the previous lifetime's directory ends the tie.
    std::fs::remove_dir_all(inv.path().join(ENGINE).join(INCARNATION_A)).unwrap();
    let (code, r) = audit_json(inv.path(), &[]);
    assert_eq!(code, 0, "{r:#}");
}

#[test]
fn an_epoch_that_goes_backwards_leaves_the_old_lifetime_current() {
    let inv = tempfile::tempdir().unwrap();
    lifetime(inv.path(), INCARNATION_A, 5, 4);
    lifetime(inv.path(), INCARNATION_B, 3, 4);
    let (_, r) = audit_json(inv.path(), &[]);
    let g = &r["groups"][0];
    assert_eq!(g["incarnation"], INCARNATION_A, "{r:#}");
    // The new lifetime's descriptors never count.
    let superseded: Vec<String> = findings(&r)
        .into_iter()
        .filter(|(c, s, p)| c == "KV108" && s == "notice" && p.contains(INCARNATION_B))
        .map(|(_, _, p)| p)
        .collect();
    assert_eq!(superseded.len(), 4, "{r:#}");
}

#[test]
fn a_half_written_new_lifetime_is_rejected_without_falling_back() {
    let inv = tempfile::tempdir().unwrap();
    lifetime(inv.path(), INCARNATION_A, 1, 4);
    lifetime(inv.path(), INCARNATION_B, 2, 2);
    let (code, r) = audit_json(inv.path(), &[]);
    assert_eq!(code, 1);
    assert_eq!(r["groups"][0]["incarnation"], INCARNATION_B);
    assert!(codes_with(&r, "KV103", "reject") >= 1, "{r:#}");
}

/// `quiesced: false` with the writer still running is KV109 (live); the
/// same descriptors once the writer is gone are accepted.
#[test]
fn quiesced_false_rejects_only_while_the_writer_runs() {
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("inv");
    let mut d = Desc::new(ENGINE, 0, 2, 1);
    d.incarnation = INCARNATION_B.to_string();
    for r in 0..2 {
        d.rank = r;
        let bytes = d.bytes_with(|v| v["writer"]["quiesced"] = json!(false));
        crate::util::testkit::put(
            &inv,
            &format!("{ENGINE}/{INCARNATION_B}/rank-{r}.json"),
            &bytes,
        );
    }
    private(&inv);
    let gpus: Vec<String> = (0..2).map(|r| crate::util::testkit::gpu(0, r)).collect();
    for (writer_runs, want) in [(true, 1), (false, 0)] {
        let mut procs = json!({"4242": 123456});
        if writer_runs {
            procs["4100"] = json!(120000);
        }
        let facts = dir.path().join("facts.json");
        std::fs::write(
            &facts,
            json!({"boot_id": BOOT_ID, "hostname": HOSTNAME, "processes": procs,
                   "processes_unreadable": null,
                   "gpus": {"visible": gpus, "on_node": gpus, "source": "test"}})
            .to_string(),
        )
        .unwrap();
        let out = crate::util::kvcr()
            .arg("audit")
            .arg(&inv)
            .args(["--live", "--format", "json"])
            .env("KVCR_NODE_FACTS", &facts)
            .output()
            .unwrap();
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            out.status.code(),
            Some(want),
            "writer runs: {writer_runs}: {r:#}"
        );
        assert_eq!(codes_with(&r, "KV109", "reject") > 0, writer_runs, "{r:#}");
    }
}
