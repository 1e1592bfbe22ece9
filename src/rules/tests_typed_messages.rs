//! A finding's message carries its numbers as typed values and only the
//! printers write them (issue #23), at the library level: the verdict
//! core's KV108 age and maximum age, and KV107's seal times, are numbers,
//! written by the one renderer. The printers' end is
//! tests/it/audit/typed_messages.rs.

use crate::format::finding::{Code, Finding, Part};
use crate::format::message::render;
use crate::rules::{self, Context, Expectations, Judgement, Verdict};
use crate::testkit::{self, Desc, CREATED_UNIX_MS, INCARNATION_B};
use std::path::Path;

const MAX_S: u64 = 3600;
/// The clock slack of docs/format.md §5.4 (300 s).
const SLACK_MS: u64 = 300_000;
const DAY_MS: u64 = 86_400_000;

/// collect → judge, offline, at `now_ms`, with `--max-age MAX_S`.
fn judge_at(root: &Path, now_ms: u64, max_age_s: Option<u64>) -> Judgement {
    let opts = crate::io::pipeline::Options {
        threads: 1,
        keep_allocations: false,
        producer_uid: None,
    };
    let (cands, files) = crate::service::audit::collect(root, false, &opts).unwrap();
    let expect = Expectations {
        max_age_s,
        ..Default::default()
    };
    let ctx = Context {
        now_unix_ms: now_ms,
        node: None,
        expect: &expect,
        invocation: &Default::default(),
    };
    rules::judge(cands, files, &ctx)
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
