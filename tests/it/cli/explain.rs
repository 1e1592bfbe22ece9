//! `kvcr explain`: every code documented, lookups by code or name, unknown
//! codes are usage errors.

use crate::util::kvcr;
use kvcr_audit::finding::Code;

/// One part of what `kvcr explain CODE` prints: the text after `part:`
/// (`meaning`, `checked`, `action`, `live`), if the part is there.
pub fn explained(code: Code, part: &str) -> Option<String> {
    let out = kvcr().args(["explain", code.as_str()]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{code}");
    let text = String::from_utf8(out.stdout).unwrap();
    let label = format!("{part}:");
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix(label.as_str()))
        .map(|rest| rest.trim().to_string())
}

/// The safe next step `kvcr explain CODE` gives, as group headers use it.
pub fn action(code: Code) -> String {
    explained(code, "action").unwrap_or_else(|| panic!("{code}: no action"))
}

#[test]
fn every_code_explains_meaning_check_and_action() {
    for code in Code::ALL {
        let out = kvcr().args(["explain", code.as_str()]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{code}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.starts_with(&format!("{code} {}", code.name())),
            "{text}"
        );
        for part in ["meaning:", "checked:", "action:"] {
            assert!(text.contains(part), "{code} lacks {part}");
        }
        let len = |part| explained(code, part).map_or(0, |t| t.len());
        assert!(
            len("meaning") > 40 && len("checked") > 20 && len("action") > 15,
            "{code}"
        );
    }
}

#[test]
fn list_names_every_code_and_lookup_by_name_works() {
    let out = kvcr().arg("explain").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    for code in Code::ALL {
        assert!(
            text.contains(code.as_str()) && text.contains(code.name()),
            "{code}"
        );
    }
    let by_name = kvcr().args(["explain", "geometry"]).output().unwrap();
    assert!(String::from_utf8(by_name.stdout)
        .unwrap()
        .starts_with("KV104 geometry"));
    let lower = kvcr().args(["explain", "kv103"]).output().unwrap();
    assert!(String::from_utf8(lower.stdout)
        .unwrap()
        .starts_with("KV103"));
}

#[test]
fn unknown_code_is_a_usage_error() {
    let out = kvcr().args(["explain", "KV999"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("KV999"));
    let out = kvcr().args(["explain", "\x1b[31mX"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!out.stderr.contains(&0x1b), "escape reached the terminal");
}

#[test]
fn live_codes_say_so() {
    for code in [Code::KV109, Code::KV110] {
        assert!(
            explained(code, "live").is_some_and(|t| !t.is_empty()),
            "{code}"
        );
    }
}

/// Issue #31 §4: a torn or malformed descriptor is the producer's to fix,
/// and the fix `kvcr explain` names is the atomic write of docs/format.md
/// §3.5: a staging file, fsync, rename.
#[test]
fn kv006_and_kv009_name_the_atomic_write() {
    for code in [Code::KV006, Code::KV009] {
        let meaning = explained(code, "meaning").unwrap();
        for step in ["staging file", "fsync", "rename", "§3.5"] {
            assert!(meaning.contains(step), "{code} lacks {step:?}: {meaning}");
        }
        let at = |w: &str| meaning.find(w).unwrap();
        assert!(at("staging file") < at("fsync") && at("fsync") < at("rename"));
    }
}
