//! The printers (docs/format.md §15.5): the table's headline and list, the
//! Prometheus text, discovery without a PATH, and `kvcr explain` for every
//! offload code.

use super::kit::{block_path, full, hash, llmd_fields};
use crate::util::kvcr;
use std::path::Path;

fn table(paths: &[&Path], args: &[&str]) -> (i32, String) {
    let out = kvcr()
        .arg("offload")
        .args(paths)
        .args(args)
        .args(["--progress", "never"])
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
    )
}

#[test]
fn the_table_names_the_cause_action_and_listed_blocks() {
    let d = tempfile::tempdir().unwrap();
    let base = full(d.path(), &llmd_fields("m", 2), &[0, 1], 5, 4096);
    for i in 0..3 {
        std::fs::remove_file(block_path(&base, 1, &hash(i), 0)).unwrap();
    }
    let (st, t) = table(&[d.path()], &["--list", "2"]);
    assert_eq!(st, 1);
    assert!(t.contains("REJECT  llmd"), "{t}");
    assert!(
        t.contains("cause:    3 blocks of 5 missing on some rank (rank 1: 3)"),
        "{t}"
    );
    assert!(t.contains("kvcr explain KV303"), "{t}");
    assert!(t.contains("incomplete or damaged blocks (2 of 3):"), "{t}");
    assert!(t.contains("present on ranks 0, missing on 1"), "{t}");
    assert!(t.trim_end().ends_with("exit status 1"), "{t}");
    let (_, t) = table(&[d.path()], &["--list", "0"]);
    assert!(!t.contains("incomplete or damaged blocks"));
}

#[test]
fn prometheus_text_per_set() {
    let d = tempfile::tempdir().unwrap();
    let base = full(d.path(), &llmd_fields("m", 2), &[0, 1], 4, 4096);
    std::fs::remove_file(block_path(&base, 1, &hash(0), 0)).unwrap();
    let (st, t) = table(&[d.path()], &["--format", "prometheus"]);
    assert_eq!(st, 1);
    let lines: Vec<String> = t.lines().map(str::to_string).collect();
    let parsed = prometheus_parse::Scrape::parse(lines.into_iter().map(Ok)).unwrap();
    let get = |name: &str, state: Option<&str>| {
        parsed
            .samples
            .iter()
            .find(|s| s.metric == name && state.is_none_or(|st| s.labels.get("state") == Some(st)))
            .map(|s| match s.value {
                prometheus_parse::Value::Gauge(v) => v,
                _ => f64::NAN,
            })
            .unwrap()
    };
    assert_eq!(get("kvcr_offload_blocks", Some("complete")), 3.0);
    assert_eq!(get("kvcr_offload_blocks", Some("incomplete")), 1.0);
    assert_eq!(get("kvcr_offload_set_ok", None), 0.0);
    assert_eq!(get("kvcr_offload_bytes", None), 7.0 * 4096.0);
    assert_eq!(get("kvcr_offload_exit_status", None), 1.0);
    let s = parsed
        .samples
        .iter()
        .find(|s| s.metric == "kvcr_offload_set_ok")
        .unwrap();
    assert_eq!(s.labels.get("producer"), Some("llmd"));
    assert_eq!(s.labels.get("path"), Some(&*base.display().to_string()));
}

#[test]
fn without_a_path_it_says_where_it_looked() {
    let d = tempfile::tempdir().unwrap();
    let out = kvcr()
        .args(["offload", "--format", "json", "--progress", "never"])
        .env("SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR", d.path())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let looked = v["looked_in"].as_array().unwrap();
    assert_eq!(looked[0]["path"], "/tmp/shared-kv");
    assert_eq!(looked[0]["producer"], "llmd");
    assert_eq!(looked[1]["path"], d.path().display().to_string());
    assert_eq!(looked[1]["present"], true);
    assert!(v["not_looked"].as_str().unwrap().contains("root_dir"));
}

#[test]
fn every_offload_code_is_explained() {
    for n in 301..=323 {
        let out = kvcr()
            .args(["explain", &format!("KV{n}")])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "KV{n}");
        let t = String::from_utf8(out.stdout).unwrap();
        assert!(t.contains("meaning:") && t.contains("action:"), "{t}");
    }
    let out = kvcr().arg("explain").output().unwrap();
    let t = String::from_utf8(out.stdout).unwrap();
    assert!(
        t.contains("Offload tiers (kvcr offload, docs/format.md §15):"),
        "{t}"
    );
}

#[test]
fn progress_is_drawn_on_stderr_only_when_asked_and_never_in_json() {
    let d = tempfile::tempdir().unwrap();
    full(d.path(), &llmd_fields("m", 2), &[0, 1], 2, 16);
    let out = kvcr()
        .arg("offload")
        .arg(d.path())
        .args(["--format", "json", "--progress", "always"])
        .output()
        .unwrap();
    // The document is one JSON value whatever the spinner drew.
    let _: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let out = kvcr()
        .arg("offload")
        .arg(d.path())
        .args(["--format", "json"])
        .output()
        .unwrap();
    // Not a terminal, not forced: nothing on stderr.
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
