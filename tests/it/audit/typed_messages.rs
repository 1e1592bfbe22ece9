//! A finding's message carries its numbers as typed values and only the
//! printers write them (issue #23): every printer (JSON, table, headline,
//! the import report) writes the same text through the one renderer, and
//! the verdict core calls no formatter. The core's typed numbers are
//! checked inside the crate (src/rules/tests_typed_messages.rs).

use crate::util::fleet::private;
use crate::util::kvcr;
use crate::util::testkit::{self, Desc};
use kvcr_audit::api::message_text as render;
use kvcr_audit::finding::Message;
use serde_json::Value;

const DAY_MS: u64 = 86_400_000;

/// The wall clock, in Unix milliseconds.
fn now_unix_ms() -> u64 {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    d.unwrap().as_millis() as u64
}

/// A tp=2 group sealed `ago_ms` before now, private, on disk.
fn aged_inventory(ago_ms: u64) -> tempfile::TempDir {
    let now = now_unix_ms();
    let t = tempfile::tempdir().unwrap();
    let inv = t.path().join("inventory");
    let d = Desc::new("typed-cli", 0, 2, 1);
    for rank in 0..2 {
        let mut r = d.clone();
        r.rank = rank;
        let bytes = r.bytes_with(|v| v["created_unix_ms"] = (now - ago_ms).into());
        testkit::put(&inv, &format!("rank-{rank}.json"), &bytes);
    }
    private(t.path());
    t
}

/// The text every printer writes for a rank sealed 3 days ago under
/// `--max-age 60` (a test run takes well under the hour that would change
/// "3d 0h").
const STALE: &str = "sealed 3d 0h ago, older than the maximum age of 1m 0s";

fn messages(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            if let (Some(Value::String(c)), Some(Value::String(m))) =
                (o.get("code"), o.get("message"))
            {
                if c == "KV108" {
                    out.push(m.clone());
                }
            }
            o.values().for_each(|x| messages(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| messages(x, out)),
        _ => {}
    }
}

#[test]
fn every_printer_writes_the_same_age() {
    let t = aged_inventory(3 * DAY_MS);
    let inv = t.path().join("inventory");
    // The audit report (JSON): the message, the headline, the rank's age.
    let out = kvcr()
        .args(["audit", "--max-age", "60", "--format", "json"])
        .arg(&inv)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut m = Vec::new();
    messages(&v, &mut m);
    assert_eq!(m, [STALE, STALE], "{v:#}");
    let g = &v["groups"][0];
    assert!(g["cause"].as_str().unwrap().contains(STALE), "{g:#}");
    let age_s = g["ranks"][0]["age_ms"].as_u64().unwrap() / 1000;
    assert_eq!(
        g["ranks"][0]["findings"][0]["found"].as_str(),
        Some(format!("age {age_s} s").as_str())
    );
    // The table.
    let out = kvcr()
        .args([
            "audit",
            "--max-age",
            "60",
            "--format",
            "table",
            "--color",
            "never",
        ])
        .arg(&inv)
        .output()
        .unwrap();
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains(STALE), "{table}");
    // The import report (a dry run refused by the audit).
    let out = kvcr()
        .args(["import", "--dry-run", "--max-age", "60", "--format", "json"])
        .arg(&inv)
        .env(
            "KVCR_NODE_FACTS",
            crate::util::repo().join("fixtures/live/node-match.json"),
        )
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut m = Vec::new();
    messages(&v["audit"], &mut m);
    assert_eq!(m, [STALE, STALE], "{v:#}");
    // The import report as text: the audit's cause.
    let out = kvcr()
        .args(["import", "--dry-run", "--max-age", "60"])
        .arg(&inv)
        .env(
            "KVCR_NODE_FACTS",
            crate::util::repo().join("fixtures/live/node-match.json"),
        )
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(STALE), "{text}");
}

#[test]
fn a_message_of_text_only_is_its_text() {
    let m = Message::from("owner pid 4242 is gone");
    assert_eq!(m.as_text(), Some("owner pid 4242 is gone"));
    assert!(m == "owner pid 4242 is gone");
    assert_eq!(render(&m), "owner pid 4242 is gone");
}

/// The lines of `text` before its unit tests that call one of the
/// operator-unit formatters (comments aside).
fn formatting(text: &str) -> Vec<String> {
    const FORMATTERS: [&str; 4] = [
        "human_duration_ms",
        "human_bytes",
        "timefmt::",
        "report::render",
    ];
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    code.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .filter(|l| FORMATTERS.iter().any(|f| l.contains(f)))
        .map(str::to_string)
        .collect()
}

/// The verdict core (src/rules/, the descriptor checks, the finding
/// vocabulary, the pipeline) formats no number in operator units: it puts
/// the number in the message and a printer writes it. The layering test
/// already keeps the core from naming `report::render`; the text helpers
/// sit below it, so this check names them.
#[test]
fn the_core_calls_no_number_formatter() {
    let src = crate::util::repo().join("src");
    let mut files = vec![src.join("format/finding.rs"), src.join("io/pipeline.rs")];
    for dir in ["rules", "format/descriptor"] {
        for e in std::fs::read_dir(src.join(dir)).unwrap() {
            let p = e.unwrap().path();
            // Unit-test modules (`tests_*.rs`) are test code, as in the
            // layering test.
            let test = p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("tests_"));
            if p.extension().is_some_and(|x| x == "rs") && !test {
                files.push(p);
            }
        }
    }
    assert!(files.len() > 10, "{files:?}");
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        assert_eq!(formatting(&text), Vec::<String>::new(), "{}", f.display());
    }
}

#[test]
fn the_formatter_check_sees_a_call() {
    assert_eq!(
        formatting(
            "// human_bytes(1)\nlet s = crate::text::human_duration_ms(5);\n\
             #[cfg(test)]\nmod tests { fn f() { human_bytes(1); } }\n"
        ),
        vec!["let s = crate::text::human_duration_ms(5);".to_string()]
    );
    assert_eq!(formatting("x(crate::timefmt::utc(ms))").len(), 1);
}
