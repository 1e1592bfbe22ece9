//! Report samples for the JSON format tests: every committed expected.json,
//! and fresh reports from runs that cover what fixtures do not (live mode
//! with facts not checked, `kvcr merge`, -v).
#![allow(dead_code)]

use super::{kvcr, repo};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Fixture case directories (those with a case.json), sorted.
pub fn cases() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(repo().join("fixtures"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("case.json").exists())
        .collect();
    dirs.sort();
    dirs
}

fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Every committed `fixtures/*/expected.json`.
pub fn expected_reports() -> Vec<(String, Value)> {
    let out: Vec<(String, Value)> = cases()
        .into_iter()
        .map(|d| d.join("expected.json"))
        .filter(|p| p.exists())
        .map(|p| (p.display().to_string(), read_json(&p)))
        .collect();
    assert!(
        out.len() >= 20,
        "expected the fixture set, found {}",
        out.len()
    );
    out
}

/// Runs kvcr with `args`, returning stdout parsed as one JSON document.
pub fn run_json(dir: &Path, args: &[&str], env: &[(&str, &Path)]) -> Value {
    let mut c = kvcr();
    c.current_dir(dir).args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let code = out.status.code();
    assert!(
        matches!(code, Some(0) | Some(1)),
        "kvcr {args:?}: exit {code:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "kvcr {args:?}: not one JSON document ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Fresh reports: every fixture case audited now (with its case.json
/// arguments, plain and with -v), live runs against described nodes, and a
/// merge of two per-node reports.
pub fn fresh_reports() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for dir in cases() {
        let case = read_json(&dir.join("case.json"));
        let mut args: Vec<&str> = vec!["audit", "inventory", "--format", "json"];
        args.extend(
            case["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap()),
        );
        out.push((
            format!("audit {}", dir.display()),
            run_json(&dir, &args, &[]),
        ));
        args.push("-v");
        out.push((
            format!("audit -v {}", dir.display()),
            run_json(&dir, &args, &[]),
        ));
    }
    let tp4 = repo().join("fixtures/accept-tp4");
    for facts in ["node-unknown.json", "node-match.json"] {
        let f = repo().join("fixtures/live").join(facts);
        let v = run_json(
            &tp4,
            &["audit", "inventory", "--live", "--format", "json"],
            &[("KVCR_NODE_FACTS", &f)],
        );
        out.push((format!("audit --live with {facts}"), v));
    }
    // Two "nodes" holding half of accept-tp4 each, then merged.
    let t = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for (ranks, host) in [("0-1", "node-a"), ("2-3", "node-b")] {
        let mut v = run_json(
            &tp4,
            &[
                "audit",
                "inventory",
                "--format",
                "json",
                "--local-ranks",
                ranks,
            ],
            &[],
        );
        v["host"] = Value::String(host.into());
        let p = t.path().join(format!("{host}.json"));
        std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
        out.push((format!("audit --local-ranks {ranks}"), v));
        paths.push(p.display().to_string());
    }
    let mut args = vec!["merge", "--format", "json"];
    args.extend(paths.iter().map(String::as_str));
    let merged = run_json(t.path(), &args, &[]);
    assert!(merged["reports"].is_array(), "{merged:#}");
    out.push(("merge".to_string(), merged));
    out
}
