//! `kvcr examine FILE`: one descriptor decoded and checked on its own.

use crate::util::kvcr;
use serde_json::Value;

const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures");

fn examine(rel: &str, json: bool) -> (i32, String, String) {
    let mut c = kvcr();
    c.arg("examine").arg(format!("{FIX}/{rel}"));
    if json {
        c.args(["--format", "json"]);
    }
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_good_descriptor_passes_and_shows_its_fields() {
    let (code, text, _) = examine("accept-tp4/inventory/rank-1.json", false);
    assert_eq!(code, 0, "{text}");
    for want in [
        "verdict      passes its own checks",
        "digest       ok",
        "rank         1 (file name: 1)",
        "bytes        1342177280 allocated ≥ 1342177280 needed",
        "allocations  2  fabric ×2",
        "created      2025-11-30 00:00:00 UTC",
    ] {
        assert!(text.contains(want), "lacks {want:?}:\n{text}");
    }
    assert!(!text.lines().any(|l| l.ends_with(' ')), "{text}");
}

#[test]
fn own_findings_reject_and_group_findings_do_not() {
    // Too small for its geometry: KV104, by itself.
    let (code, v, _) = examine("kv104-geometry/inventory/rank-2.json", true);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&v).unwrap();
    assert_eq!(v["bytes_needed"], 1342177280u64);
    assert_eq!(v["bytes_allocated"], 671092736u64);
    assert_eq!(v["findings"][0]["code"], "KV104", "{v:#}");
    assert_eq!(v["exit_status"], 1);
    // Edited after sealing: the digest says so.
    let (code, v, _) = examine("kv008-digest/inventory/rank-1.json", true);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&v).unwrap();
    assert_eq!(v["digest"], "mismatch", "{v:#}");
    // Name and content disagree: KV101.
    let (code, text, _) = examine("kv101-wrong-rank/inventory/a/rank-1.json", false);
    assert_eq!(code, 1);
    assert!(
        text.contains("reject: KV101 file name says rank 1"),
        "{text}"
    );
    // Malformed JSON: KV006, nothing decoded.
    let (code, text, _) = examine("kv006-malformed/inventory/rank-1.json", false);
    assert_eq!(code, 1);
    assert!(text.contains("KV006"), "{text}");
    // A GPU clash needs the other rank: alone, each file passes.
    let (code, text, _) = examine("kv106-gpu-uuid/inventory/rank-1.json", false);
    assert_eq!(code, 0, "{text}");
    assert!(!text.contains("KV103"), "{text}");
}

#[test]
fn unreadable_paths_are_exit_2() {
    for rel in [
        "kv001-symlink/inventory/rank-1.json",
        "kv002-not-regular/inventory/rank-1.json",
        "no/such/file.json",
    ] {
        let (code, out, err) = examine(rel, false);
        assert_eq!(code, 2, "{rel}: {out}");
        assert!(
            out.is_empty() && err.contains("kvcr: error: "),
            "{rel}: {err}"
        );
    }
}
