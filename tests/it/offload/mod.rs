//! `kvcr offload` (docs/format.md §15) on trees written the way each
//! producer writes them (the offload reference's layouts, [`kit`]): every
//! code with its verdict, headline and exit status, the report's schema,
//! the printers, and the side-effect rules under strace.

mod crafted;
mod family;
mod fixtures;
mod flat;
pub mod gds;
pub mod kit;
mod nested;
mod output;
mod real;
mod real_lmsg;
mod sglang;
mod side_effects;
mod walk;

use crate::util::kvcr;
use serde_json::Value;
use std::path::Path;

/// `kvcr offload ARGS --format json --progress never`: (exit, document),
/// the document checked against `schemas/offload-report.schema.json`.
pub fn offload(paths: &[&Path], args: &[&str]) -> (i32, Value) {
    let out = kvcr()
        .arg("offload")
        .args(paths)
        .args(args)
        .args(["--format", "json", "--progress", "never"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "not one JSON document ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let status = out.status.code().unwrap();
    let s: Value = serde_json::from_str(kvcr_audit::schema::Kind::OffloadReport.text()).unwrap();
    let validator = jsonschema::draft202012::new(&s).unwrap();
    let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "schema: {errors:?}\n{v:#}");
    assert_eq!(v["exit_status"], status, "{v:#}");
    (status, v)
}

/// A fixture case's `args` (cases.json, real/expect.json).
pub fn args_of(c: &Value) -> Vec<&str> {
    c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect()
}

/// The one set of `v` whose producer is `producer`.
pub fn set<'a>(v: &'a Value, producer: &str) -> &'a Value {
    let sets: Vec<&Value> = v["sets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["producer"] == producer)
        .collect();
    assert_eq!(sets.len(), 1, "one {producer} set in {v:#}");
    sets[0]
}

/// The codes of a set's findings with their severities.
pub fn codes(s: &Value) -> Vec<(String, String)> {
    s["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["code"].as_str().unwrap().to_string(),
                f["severity"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The set has `code` with `severity`; its verdict and headline follow:
/// a reject code that is the first in code order is its cause.
#[track_caller]
pub fn assert_code(s: &Value, code: &str, severity: &str) {
    let c = codes(s);
    assert!(
        c.contains(&(code.to_string(), severity.to_string())),
        "{code} {severity} not in {c:?}\n{s:#}"
    );
    let rejected = c.iter().any(|(_, sev)| sev == "reject");
    assert_eq!(s["verdict"], if rejected { "reject" } else { "ok" });
    if rejected {
        let first = c
            .iter()
            .filter(|(_, sev)| sev == "reject")
            .map(|(c, _)| c.clone())
            .min()
            .unwrap();
        assert_eq!(s["cause_code"], first.as_str());
        assert!(s["cause"]
            .as_str()
            .unwrap()
            .ends_with(&format!("({first})")));
        assert!(s["action"]
            .as_str()
            .unwrap()
            .contains(&format!("kvcr explain {first}")));
    } else {
        assert!(s["cause_code"].is_null());
    }
}
