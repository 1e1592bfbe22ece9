//! `kvcr explain`: every code documented, lookups by code or name, unknown
//! codes are usage errors.

use crate::util::kvcr;
use kvcr::finding::Code;

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
        let e = kvcr::internals::report::explain::explain(code);
        assert!(
            e.meaning.len() > 40 && e.checked.len() > 20 && e.action.len() > 15,
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
        assert!(!kvcr::internals::report::explain::explain(code)
            .live
            .is_empty());
    }
}
