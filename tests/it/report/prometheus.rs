//! `kvcr audit --format prometheus` / `--textfile`: the output is parsed
//! with a real exposition-format parser (prometheus-parse) and every value
//! is checked against the JSON report of the same fixture.

use crate::util::{audit_json, findings, kvcr};
use prometheus_parse::{Sample, Scrape, Value as PValue};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
        .join("inventory")
}

fn parse(text: &str) -> Scrape {
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("valid exposition format")
}

fn value(s: &Sample) -> f64 {
    match s.value {
        PValue::Gauge(v) => v,
        ref other => panic!("{} is not a gauge: {other:?}", s.metric),
    }
}

/// Samples of one metric as label set → value.
fn series(scrape: &Scrape, metric: &str) -> BTreeMap<Vec<(String, String)>, f64> {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric)
        .map(|s| {
            let mut labels: Vec<(String, String)> = s
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            labels.sort();
            (labels, value(s))
        })
        .collect()
}

fn one(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut want: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    want.sort();
    series(scrape, metric).get(&want).copied()
}

fn prometheus(root: &Path) -> (i32, String) {
    let out = kvcr()
        .arg("audit")
        .arg(root)
        .args(["--format", "prometheus"])
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
    )
}

fn check_against_json(name: &str) {
    let root = fixture(name);
    let (jcode, report) = audit_json(&root, &[]);
    let (pcode, text) = prometheus(&root);
    assert_eq!(jcode, pcode, "{name}: same exit status");
    let s = parse(&text);
    // Conventions: every family is a documented gauge; no _total on gauges.
    for sample in &s.samples {
        assert!(sample.metric.starts_with("kvcr_"), "{}", sample.metric);
        assert!(!sample.metric.ends_with("_total"), "{}", sample.metric);
        assert!(
            s.docs.contains_key(&sample.metric),
            "no HELP for {}",
            sample.metric
        );
    }
    assert_eq!(one(&s, "kvcr_audit_success", &[]), Some(1.0));
    assert_eq!(
        one(&s, "kvcr_audit_exit_status", &[]),
        Some(f64::from(jcode))
    );
    assert_eq!(
        one(&s, "kvcr_audit_live", &[]),
        Some(if report["live"] == true { 1.0 } else { 0.0 })
    );
    let took = one(&s, "kvcr_audit_duration_seconds", &[]).expect("duration");
    assert!((0.0..60.0).contains(&took), "{took}");
    let sum = &report["summary"];
    assert_eq!(
        one(&s, "kvcr_groups", &[("verdict", "accept")]),
        sum["accepted"].as_f64()
    );
    assert_eq!(
        one(&s, "kvcr_groups", &[("verdict", "reject")]),
        sum["rejected"].as_f64()
    );
    assert_eq!(
        one(&s, "kvcr_descriptors", &[]),
        sum["descriptors"].as_f64()
    );
    assert_eq!(
        one(&s, "kvcr_files_rejected", &[]),
        sum["files_rejected"].as_f64()
    );
    // Findings by code and severity, over the whole report.
    let mut want: BTreeMap<(String, String), f64> = BTreeMap::new();
    for (code, sev, _) in findings(&report) {
        *want.entry((code, sev)).or_default() += 1.0;
    }
    let got: BTreeMap<(String, String), f64> = s
        .samples
        .iter()
        .filter(|x| x.metric == "kvcr_findings")
        .map(|x| {
            (
                (
                    x.labels.get("code").unwrap().to_string(),
                    x.labels.get("severity").unwrap().to_string(),
                ),
                value(x),
            )
        })
        .collect();
    assert_eq!(got, want, "{name}: kvcr_findings");
    let groups = report["groups"].as_array().unwrap();
    assert_eq!(
        series(&s, "kvcr_group_accepted").len(),
        groups.len(),
        "{name}: one series per group"
    );
    for g in groups {
        let e = g["engine_id"].as_str().unwrap();
        let l = [("engine_id", e)];
        let accepted = if g["verdict"] == "accept" { 1.0 } else { 0.0 };
        assert_eq!(
            one(&s, "kvcr_group_accepted", &l),
            Some(accepted),
            "{name} {e}"
        );
        let ranks = g["ranks"].as_array().unwrap();
        let present: BTreeSet<u64> = ranks.iter().map(|r| r["rank"].as_u64().unwrap()).collect();
        assert_eq!(
            one(&s, "kvcr_group_ranks_present", &l),
            Some(present.len() as f64)
        );
        assert_eq!(
            one(&s, "kvcr_group_ranks_expected", &l),
            g["world_size"].as_f64()
        );
        assert_eq!(one(&s, "kvcr_group_epoch", &l), g["epoch"].as_f64());
        // The oldest current descriptor, from the files the JSON names.
        let created = ranks
            .iter()
            .filter_map(|r| {
                let bytes = std::fs::read(root.join(r["path"].as_str()?)).ok()?;
                let v: Value = serde_json::from_slice(&bytes).ok()?;
                v["created_unix_ms"].as_u64()
            })
            .min();
        let age = one(&s, "kvcr_group_oldest_descriptor_age_seconds", &l);
        match created {
            Some(c) => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_millis() as f64;
                let expect = (now - c as f64) / 1000.0;
                let age = age.expect("an age when a descriptor parsed");
                assert!(
                    (age - expect).abs() < 120.0,
                    "{name}: age {age} vs {expect}"
                );
            }
            None => assert_eq!(age, None),
        }
        let mut gwant: BTreeMap<(String, String), f64> = BTreeMap::new();
        for (code, sev, _) in findings(&g["findings"])
            .into_iter()
            .chain(ranks.iter().flat_map(|r| findings(&r["findings"])))
        {
            *gwant.entry((code, sev)).or_default() += 1.0;
        }
        let ggot: BTreeMap<(String, String), f64> = s
            .samples
            .iter()
            .filter(|x| x.metric == "kvcr_group_findings" && x.labels.get("engine_id") == Some(e))
            .map(|x| {
                (
                    (
                        x.labels.get("code").unwrap().to_string(),
                        x.labels.get("severity").unwrap().to_string(),
                    ),
                    value(x),
                )
            })
            .collect();
        assert_eq!(ggot, gwant, "{name} {e}: kvcr_group_findings");
    }
}

#[test]
fn metrics_agree_with_the_json_report() {
    for name in [
        "accept-tp4",
        "accept-two-groups",
        "accept-superseded",
        "kv104-geometry",
        "kv103-missing-rank",
        "kv102-duplicate-rank",
        "kv001-symlink",
        "kv009-torn",
        "kv010-stray",
        "empty",
    ] {
        check_against_json(name);
    }
}

#[test]
fn textfile_is_written_atomically_and_never_inside_the_inventory() {
    let dir = tempfile::tempdir().unwrap();
    let prom = dir.path().join("kvcr.prom");
    let root = fixture("kv103-missing-rank");
    let out = kvcr()
        .arg("audit")
        .arg(&root)
        .arg("--textfile")
        .arg(&prom)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    // stdout still carries the chosen format.
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = parse(&std::fs::read_to_string(&prom).unwrap());
    assert_eq!(
        one(&s, "kvcr_group_accepted", &[("engine_id", "llama3-70b-a")]),
        Some(0.0)
    );
    assert_eq!(
        one(
            &s,
            "kvcr_group_ranks_present",
            &[("engine_id", "llama3-70b-a")]
        ),
        Some(3.0)
    );
    assert_eq!(report["groups"][0]["ranks"].as_array().unwrap().len(), 3);
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["kvcr.prom"], "no staging file left");

    // Inside the inventory: exit 2, nothing written, no report.
    let inv = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(fixture("accept-tp4")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), inv.path().join(e.file_name())).unwrap();
    }
    std::fs::create_dir(inv.path().join("sub")).unwrap();
    let before = crate::util::testkit::snapshot(inv.path());
    for target in ["kvcr.prom", "sub/kvcr.prom"] {
        let out = kvcr()
            .arg("audit")
            .arg(inv.path())
            .arg("--textfile")
            .arg(inv.path().join(target))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{target}");
        assert!(out.stdout.is_empty());
        assert!(String::from_utf8_lossy(&out.stderr).contains("inside the inventory"));
    }
    assert_eq!(crate::util::testkit::snapshot(inv.path()), before);
}

#[test]
fn import_refuses_the_prometheus_format() {
    let out = kvcr()
        .arg("import")
        .arg(fixture("accept-tp4"))
        .args(["--dry-run", "--format", "prometheus"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("prometheus"));
}
