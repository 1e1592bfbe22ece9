//! Runs `kvcr audit --format json` on every fixture and compares the report
//! with the committed `expected.json` (root path and clock-dependent ages
//! normalised), then checks the exit status and the codes the case names.
//! `KVCR_BLESS=1 cargo test --test it audit::fixtures::` rewrites the expected reports.

use crate::util::{codes, kvcr, repo};
use kvcr_audit::api::message_text as render;
use kvcr_audit::finding::Message;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixtures_dir() -> PathBuf {
    repo().join("fixtures")
}

/// Replaces the resolved root and the clock-dependent age with stable
/// tokens. The golden files cannot hold an age (the fixtures are sealed at
/// a fixed time, the audit runs now), so the scrub stays, but it reads the
/// typed value: every rank carries its age as `age_ms`, and only the exact
/// renderings of those ages become `<AGE>` (`sealed <AGE> ago` in a
/// message or a headline, `age <AGE> s` in a `found`). A message whose age
/// disagreed with its rank's `age_ms` would stay as written and fail.
fn normalise(mut v: Value, root: &str) -> Value {
    fn ages(v: &Value, out: &mut Vec<u64>) {
        match v {
            Value::Object(o) => {
                if let Some(ms) = o.get("age_ms").and_then(Value::as_u64) {
                    out.push(ms);
                }
                o.values().for_each(|x| ages(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| ages(x, out)),
            _ => {}
        }
    }
    fn walk(v: &mut Value, root: &str, ages: &[(String, String)]) {
        match v {
            Value::String(s) => {
                if s.contains(root) {
                    *s = s.replace(root, "<ROOT>");
                }
                for (sealed, found) in ages {
                    if s.contains(sealed.as_str()) {
                        *s = s.replace(sealed.as_str(), "sealed <AGE> ago");
                    }
                    if s == found {
                        *s = "age <AGE> s".into();
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| walk(x, root, ages)),
            Value::Object(o) => o.values_mut().for_each(|x| walk(x, root, ages)),
            _ => {}
        }
    }
    let mut ms = Vec::new();
    ages(&v, &mut ms);
    let ages: Vec<(String, String)> = ms
        .into_iter()
        .map(|ms| {
            let age = Message::new().duration_ms(ms);
            (
                format!("sealed {} ago", render(&age)),
                format!("age {} s", ms / 1000),
            )
        })
        .collect();
    walk(&mut v, root, &ages);
    if v.get("host").is_some_and(|h| h.is_string()) {
        v["host"] = Value::String("<HOST>".into());
    }
    // The clock (generated_unix_ms, age_ms) and the version move on their own.
    let mut v = crate::util::testkit::without_clock(v);
    if v.get("kvcr_version").is_some_and(|h| h.is_string()) {
        v["kvcr_version"] = Value::String("<VERSION>".into());
    }
    v
}

fn run_case(dir: &Path) -> Result<(), String> {
    let case: Value =
        serde_json::from_slice(&std::fs::read(dir.join("case.json")).unwrap()).unwrap();
    let args: Vec<String> = case["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let before = crate::util::testkit::snapshot(&dir.join("inventory"));
    let out = kvcr()
        .current_dir(dir)
        .args(["audit", "inventory", "--format", "json"])
        .args(&args)
        .output()
        .unwrap();
    let after = crate::util::testkit::snapshot(&dir.join("inventory"));
    if before != after {
        return Err("the inventory changed during the audit".into());
    }
    let stdout = String::from_utf8(out.stdout).map_err(|e| e.to_string())?;
    let report: Value = serde_json::from_str(&stdout)
        .map_err(|e| format!("not one JSON document: {e}\n{stdout}"))?;
    let root = std::fs::canonicalize(dir.join("inventory")).unwrap();
    let report = normalise(report, &root.display().to_string());

    let want_exit = case["exit"].as_i64().unwrap() as i32;
    let got_exit = out.status.code().unwrap_or(-1);
    if got_exit != want_exit {
        return Err(format!("exit {got_exit}, expected {want_exit}\n{stdout}"));
    }
    let codes = codes(&report);
    for c in case["codes"].as_array().unwrap() {
        let c = c.as_str().unwrap();
        if !codes.iter().any(|x| x == c) {
            return Err(format!("code {c} missing from the report; found {codes:?}"));
        }
    }
    // Exit 0 exactly when every group is accepted and no file rejects
    // (an empty inventory too: nothing retained, docs/format.md §6).
    let all_accept = report["groups"]
        .as_array()
        .unwrap()
        .iter()
        .all(|g| g["verdict"] == "accept");
    if (got_exit == 0) != (all_accept && report["summary"]["files_rejected"] == 0) {
        return Err("exit status disagrees with the group verdicts".into());
    }

    let expected_path = dir.join("expected.json");
    if std::env::var_os("KVCR_BLESS").is_some() {
        let mut text = serde_json::to_string_pretty(&report).unwrap();
        text.push('\n');
        std::fs::write(&expected_path, text).unwrap();
        return Ok(());
    }
    let expected: Value = serde_json::from_slice(
        &std::fs::read(&expected_path).map_err(|e| format!("{}: {e}", expected_path.display()))?,
    )
    .unwrap();
    if expected != report {
        return Err(format!(
            "report differs from expected.json\n--- got ---\n{}",
            serde_json::to_string_pretty(&report).unwrap()
        ));
    }
    Ok(())
}

#[test]
fn every_fixture_matches_its_expected_report() {
    let mut failures = Vec::new();
    let mut n = 0;
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("case.json").exists())
        .collect();
    dirs.sort();
    for dir in dirs {
        n += 1;
        if let Err(e) = run_case(&dir) {
            failures.push(format!("{}: {e}", dir.display()));
        }
    }
    assert!(n >= 20, "expected the fixture set, found {n} cases");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_non_live_code_has_a_fixture_or_runtime_case() {
    // Codes that git cannot hold are built at run time in tests/it/audit/hostile.rs.
    let runtime = ["KV003", "KV004", "KV005"];
    let mut covered: Vec<String> = runtime.iter().map(|s| s.to_string()).collect();
    for e in std::fs::read_dir(fixtures_dir()).unwrap() {
        let p = e.unwrap().path().join("case.json");
        if let Ok(b) = std::fs::read(&p) {
            let v: Value = serde_json::from_slice(&b).unwrap();
            for c in v["codes"].as_array().unwrap() {
                covered.push(c.as_str().unwrap().to_string());
            }
        }
    }
    // The GMS reader's codes are covered on generated artifacts (tests/it/gms.rs).
    for code in kvcr_audit::finding::Code::ALL
        .into_iter()
        .filter(|c| c.family() == kvcr_audit::finding::Family::Inventory)
    {
        let live_only = matches!(code.as_str(), "KV109" | "KV110");
        if !live_only {
            assert!(
                covered.iter().any(|c| c == code.as_str()),
                "no fixture produces {code}"
            );
        }
    }
}
