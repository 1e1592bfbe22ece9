//! A finding's message carries its numbers as typed values and only the
//! printers write them (issue #23): the verdict core's tests read KV108's
//! age and maximum age, and KV107's seal times, as numbers, and every
//! printer (JSON, table, headline, the import report) writes the
//! same text through the one renderer.

use crate::util::fleet::private;
use crate::util::kvcr;
use crate::util::testkit::{self, Desc, CREATED_UNIX_MS, INCARNATION_B};
use kvcr::finding::{Code, Finding, Message, Part};
use kvcr::internals::report::render;
use kvcr::internals::verdict::{self, Context, Expectations, Judgement, Verdict};
use serde_json::Value;
use std::path::Path;

const MAX_S: u64 = 3600;
/// The clock slack of docs/format.md §5.4 (300 s).
const SLACK_MS: u64 = 300_000;
const DAY_MS: u64 = 86_400_000;

/// collect → judge, offline, at `now_ms`, with `--max-age MAX_S`.
fn judge_at(root: &Path, now_ms: u64, max_age_s: Option<u64>) -> Judgement {
    let opts = kvcr::internals::pipeline::Options {
        threads: 1,
        keep_allocations: false,
    };
    let (cands, files) = kvcr::internals::audit::collect(root, false, &opts).unwrap();
    let expect = Expectations {
        max_age_s,
        ..Default::default()
    };
    let ctx = Context {
        now_unix_ms: now_ms,
        node: None,
        expect: &expect,
    };
    verdict::judge(cands, files, &ctx)
}

/// A tp=2 group sealed at `CREATED_UNIX_MS + created_offset_ms`.
fn group(created_offset_ms: u64) -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let d = Desc::new("typed-a", 0, 2, 1);
    for rank in 0..2 {
        let mut r = d.clone();
        r.rank = rank;
        let bytes = r.bytes_with(|v| {
            v["created_unix_ms"] = (CREATED_UNIX_MS + created_offset_ms).into();
        });
        testkit::put(t.path(), &format!("rank-{rank}.json"), &bytes);
    }
    t
}

fn kv108s(j: &Judgement) -> Vec<&Finding> {
    j.groups
        .iter()
        .flat_map(|g| g.ranks.iter().flat_map(|r| &r.findings))
        .filter(|f| f.code == Code::KV108)
        .collect()
}

#[test]
fn a_stale_rank_carries_its_age_and_the_maximum_age_as_milliseconds() {
    let inv = group(0);
    let age = 3 * DAY_MS + 4 * 3_600_000 + 1_234;
    let j = judge_at(inv.path(), CREATED_UNIX_MS + age, Some(MAX_S));
    assert_eq!(j.groups[0].verdict, Verdict::Reject);
    let found = kv108s(&j);
    assert_eq!(found.len(), 2, "{found:#?}");
    for (f, r) in found.iter().zip(&j.groups[0].ranks) {
        assert_eq!(
            f.message.parts(),
            [
                Part::Text("sealed ".into()),
                Part::DurationMs(age),
                Part::Text(" ago, older than the maximum age of ".into()),
                Part::DurationMs(MAX_S * 1000),
            ]
        );
        assert_eq!(f.message.durations_ms(), [age, MAX_S * 1000]);
        // The rank's own age is the number the message carries.
        assert_eq!(r.age_ms, Some(age));
        assert_eq!(f.expected.as_deref(), Some("age ≤ 3600 s"));
        assert_eq!(f.found.as_deref(), Some("age 273601 s"));
        // Only a printer writes the numbers; the text is not the message.
        assert_eq!(f.message.as_text(), None);
        let text = render(&f.message);
        assert_eq!(
            text,
            "sealed 3d 4h ago, older than the maximum age of 1h 0m"
        );
        assert!(f.message != text);
    }
}

#[test]
fn one_millisecond_past_the_maximum_is_stale_though_both_print_alike() {
    let inv = group(0);
    let max_ms = MAX_S * 1000;
    // Exactly the maximum age: fresh.
    let j = judge_at(inv.path(), CREATED_UNIX_MS + max_ms, Some(MAX_S));
    assert_eq!(j.groups[0].verdict, Verdict::Accept, "{:#?}", kv108s(&j));
    // One millisecond more: stale. The coarse text cannot tell the two
    // apart ("1h 0m" both); the numbers do.
    let j = judge_at(inv.path(), CREATED_UNIX_MS + max_ms + 1, Some(MAX_S));
    let f = kv108s(&j);
    assert_eq!(f.len(), 2);
    assert_eq!(f[0].message.durations_ms(), [max_ms + 1, max_ms]);
    assert_eq!(
        render(&f[0].message),
        "sealed 1h 0m ago, older than the maximum age of 1h 0m"
    );
    assert_eq!(f[0].found.as_deref(), Some("age 3600 s"));
    // No maximum age: never stale, however old.
    let j = judge_at(inv.path(), CREATED_UNIX_MS + 400 * DAY_MS, None);
    assert!(kv108s(&j).is_empty());
}

#[test]
fn a_future_date_carries_only_the_maximum_age() {
    let slack = SLACK_MS;
    let inv = group(slack + 1);
    let j = judge_at(inv.path(), CREATED_UNIX_MS, Some(MAX_S));
    let f = kv108s(&j);
    assert_eq!(f.len(), 2, "{f:#?}");
    assert_eq!(f[0].message.durations_ms(), [MAX_S * 1000]);
    assert!(f[0]
        .message
        .starts_with("dated in the future (created_unix_ms "));
    assert_eq!(
        render(&f[0].message),
        format!(
            "dated in the future (created_unix_ms {}), beyond the 300 s clock slack: \
             its age cannot be proven against the maximum age of 1h 0m",
            CREATED_UNIX_MS + slack + 1
        )
    );
    // The rank has no age to report.
    assert_eq!(j.groups[0].ranks[0].age_ms, None);
    // Within the slack: fresh.
    let inv = group(slack);
    let j = judge_at(inv.path(), CREATED_UNIX_MS, Some(MAX_S));
    assert_eq!(j.groups[0].verdict, Verdict::Accept, "{:#?}", kv108s(&j));
}

#[test]
fn the_largest_maximum_age_saturates_and_still_prints() {
    // --max-age beyond u64::MAX ms saturates: nothing is older, and a
    // future date names the saturated maximum, which the printer writes.
    let inv = group(DAY_MS);
    let j = judge_at(inv.path(), CREATED_UNIX_MS, Some(u64::MAX));
    let f = kv108s(&j);
    assert_eq!(f.len(), 2, "{f:#?}");
    assert_eq!(f[0].message.durations_ms(), [u64::MAX]);
    assert!(render(&f[0].message).ends_with("the maximum age of 213503982334d 14h"));
    let inv = group(0);
    let j = judge_at(inv.path(), u64::MAX, Some(u64::MAX / 1000));
    assert!(kv108s(&j).is_empty(), "{:#?}", kv108s(&j));
}

#[test]
fn tied_incarnations_carry_their_seal_times_as_moments() {
    let t = tempfile::tempdir().unwrap();
    let a = Desc::new("typed-tie", 0, 1, 1);
    let mut b = a.clone();
    b.incarnation = INCARNATION_B.to_string();
    testkit::put(t.path(), "a/rank-0.json", &a.bytes());
    testkit::put(
        t.path(),
        "b/rank-0.json",
        &b.bytes_with(|v| v["created_unix_ms"] = (CREATED_UNIX_MS + 61_000).into()),
    );
    let j = judge_at(t.path(), CREATED_UNIX_MS + 120_000, None);
    let g = &j.groups[0];
    let tie: Vec<&Finding> = g
        .findings
        .iter()
        .filter(|f| f.code == Code::KV107)
        .collect();
    assert_eq!(tie.len(), 1, "{:#?}", g.findings);
    let moments: Vec<u64> = tie[0]
        .message
        .parts()
        .iter()
        .filter_map(|p| match p {
            Part::UnixMs(ms) => Some(*ms),
            _ => None,
        })
        .collect();
    // In incarnation order (A sorts before B), each its earliest seal.
    assert_eq!(moments, [CREATED_UNIX_MS, CREATED_UNIX_MS + 61_000]);
    assert!(tie[0].message.durations_ms().is_empty());
    assert_eq!(
        render(&tie[0].message),
        format!(
            "incarnations {} (owner pid 4242, created 2025-11-30 00:00:00 UTC) and {} \
             (owner pid 4242, created 2025-11-30 00:01:01 UTC) tie on the highest epoch 1; \
             cannot tell which owner lifetime is current",
            testkit::INCARNATION_A,
            INCARNATION_B
        )
    );
}

/// A tp=2 group sealed `ago_ms` before now, private, on disk.
fn aged_inventory(ago_ms: u64) -> tempfile::TempDir {
    let now = kvcr::internals::node::now_unix_ms();
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

/// The verdict core (src/verdict/, the descriptor checks, the finding
/// vocabulary, the pipeline) formats no number in operator units: it puts
/// the number in the message and a printer writes it. The layering test
/// already keeps the core from naming `report::render`; the text helpers
/// sit below it, so this check names them.
#[test]
fn the_core_calls_no_number_formatter() {
    let src = crate::util::repo().join("src");
    let mut files = vec![src.join("finding.rs"), src.join("pipeline.rs")];
    for dir in ["verdict", "descriptor"] {
        for e in std::fs::read_dir(src.join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "rs") {
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
