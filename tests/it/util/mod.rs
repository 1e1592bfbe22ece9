//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod fleet;
pub mod samples;

use assert_cmd::Command;
use serde_json::Value;
use std::path::Path;

/// A kvcr command with a deterministic environment.
pub fn kvcr() -> Command {
    let mut c = Command::cargo_bin("kvcr").unwrap();
    c.env_remove("KVCR_INVENTORY")
        .env_remove("KVCR_PROFILE")
        .env_remove("NO_COLOR")
        .env_remove("CUDA_VISIBLE_DEVICES")
        .env("TERM", "dumb");
    c
}

/// Runs `kvcr audit ROOT --format json ARGS`, returning (exit, report).
pub fn audit_json(root: &Path, args: &[&str]) -> (i32, Value) {
    let out = kvcr()
        .arg("audit")
        .arg(root)
        .args(["--format", "json"])
        .args(args)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).expect("utf-8 stdout");
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "not one JSON document ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

/// Every finding anywhere in a report, as (code, severity, path).
pub fn findings(v: &Value) -> Vec<(String, String, String)> {
    fn walk(v: &Value, out: &mut Vec<(String, String, String)>) {
        match v {
            Value::Object(o) => {
                if let (Some(Value::String(c)), Some(Value::String(s))) =
                    (o.get("code"), o.get("severity"))
                {
                    let p = o
                        .get("path")
                        .and_then(|p| p.as_str())
                        .unwrap_or("")
                        .to_string();
                    out.push((c.clone(), s.clone(), p));
                }
                o.values().for_each(|x| walk(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, &mut out);
    out
}

pub fn has(v: &Value, code: &str, path_part: &str) -> bool {
    findings(v)
        .iter()
        .any(|(c, s, p)| c == code && s == "reject" && p.contains(path_part))
}

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}
