//! Rules of the verdict core pinned at their edges, where a wrong rule (a
//! mutation pass over `src/rules/`, docs/testing.md) went unnoticed by the
//! end-to-end tests: the core is called directly, so the clock and the
//! candidates are exact.

use crate::format::descriptor::parse_descriptor;
use crate::rules::{judge, Candidate, Context, Expectations, Judgement, FUTURE_SLACK_MS};
use crate::testkit::{self, Desc};

/// One candidate per rank of a tp-`tp` group, each parsed from `edit`ed
/// testkit bytes, as the inventory reader would pass them.
fn group(tp: u64, edit: impl Fn(&mut Desc)) -> Vec<Candidate> {
    (0..tp)
        .map(|rank| {
            let mut d = Desc::new("unit", rank, tp, 1);
            edit(&mut d);
            candidate(&format!("rank-{rank}.json"), Some(rank), &d.bytes())
        })
        .collect()
}

fn candidate(path: &str, name_rank: Option<u64>, bytes: &[u8]) -> Candidate {
    let p = parse_descriptor(bytes);
    Candidate {
        path: path.to_string(),
        raw_path: path.as_bytes().to_vec(),
        name_rank,
        mode: Some(0o600),
        ident: p.ident,
        descriptor: p.descriptor,
        findings: p
            .findings
            .into_iter()
            .map(|f| f.at(path.to_string()))
            .collect(),
    }
}

fn run(cands: Vec<Candidate>, now_unix_ms: u64, expect: &Expectations) -> Judgement {
    let ctx = Context {
        now_unix_ms,
        node: None,
        expect,
        invocation: &Default::default(),
    };
    judge(cands, Vec::new(), &ctx)
}

/// Every (code, message) on every rank of the first group.
fn rank_findings(j: &Judgement) -> Vec<(&'static str, String)> {
    j.groups[0]
        .ranks
        .iter()
        .flat_map(|r| {
            r.findings
                .iter()
                .map(|f| (f.code.as_str(), crate::format::message::render(&f.message)))
        })
        .collect()
}

/// docs/format.md §5.4: with a maximum age, a descriptor dated *more than*
/// the clock slack in the future is KV108; one dated exactly the slack
/// ahead is within it (age 0), and accepted.
#[test]
fn a_descriptor_exactly_the_clock_slack_ahead_is_within_it() {
    let expect = Expectations {
        max_age_s: Some(3600),
        ..Expectations::default()
    };
    let at = testkit::CREATED_UNIX_MS;
    let j = run(group(2, |_| {}), at - FUTURE_SLACK_MS, &expect);
    assert!(rank_findings(&j).is_empty(), "{:?}", rank_findings(&j));
    assert_eq!(j.exit_status(), 0);

    let j = run(group(2, |_| {}), at - FUTURE_SLACK_MS - 1, &expect);
    let f = rank_findings(&j);
    assert_eq!(f.len(), 2, "{f:?}");
    for (code, msg) in &f {
        assert_eq!(*code, "KV108");
        assert!(msg.starts_with("dated in the future"), "{msg}");
    }
    assert_eq!(j.exit_status(), 1);
}

/// docs/format.md §5.4: KV108 for a descriptor *older than* the maximum
/// age; one exactly that old is still accepted.
#[test]
fn a_descriptor_exactly_the_maximum_age_old_is_not_stale() {
    let expect = Expectations {
        max_age_s: Some(60),
        ..Expectations::default()
    };
    let at = testkit::CREATED_UNIX_MS;
    let j = run(group(2, |_| {}), at + 60_000, &expect);
    assert!(rank_findings(&j).is_empty(), "{:?}", rank_findings(&j));
    assert_eq!(j.exit_status(), 0);

    let j = run(group(2, |_| {}), at + 60_001, &expect);
    let f = rank_findings(&j);
    assert_eq!(f.len(), 2, "{f:?}");
    for (code, msg) in &f {
        assert_eq!(*code, "KV108");
        assert!(msg.contains("older than the maximum age"), "{msg}");
    }
    assert_eq!(j.exit_status(), 1);
}

/// A clean row records exactly `ROW_CHECKS` checks (the room its list is
/// given), each once.
#[test]
fn a_clean_row_records_row_checks_checks() {
    let at = testkit::CREATED_UNIX_MS;
    let j = run(group(2, |_| {}), at + 60_000, &Expectations::default());
    for r in &j.groups[0].ranks {
        let mut names: Vec<&str> = r.checks.iter().map(|c| c.name).collect();
        assert_eq!(names.len(), crate::rules::ROW_CHECKS, "{names:?}");
        names.sort();
        names.dedup();
        assert_eq!(names.len(), crate::rules::ROW_CHECKS, "{names:?}");
    }
}

/// Candidates go to their groups a run at a time (at most 64 together):
/// a group larger than a run, and groups whose files are found
/// interleaved, are judged exactly as when each group's files come
/// together, every rank in its group once.
#[test]
fn groups_found_interleaved_or_longer_than_a_run_judge_alike() {
    let big = 70;
    let mut a: Vec<Candidate> = group(big, |_| {});
    let b: Vec<Candidate> = (0..2)
        .map(|rank| {
            let d = Desc::new("other", rank, 2, 1);
            candidate(&format!("o/rank-{rank}.json"), Some(rank), &d.bytes())
        })
        .collect();
    let together: Vec<Candidate> = a.iter().chain(&b).cloned().collect();
    // Interleaved: one of b's files inside a's run, the other in front.
    a.insert(30, b[1].clone());
    a.insert(0, b[0].clone());
    let at = testkit::CREATED_UNIX_MS + 60_000;
    let (x, y) = (
        run(together, at, &Expectations::default()),
        run(a, at, &Expectations::default()),
    );
    let show = |j: &Judgement| {
        j.groups
            .iter()
            .map(|g| {
                let ranks: Vec<(Option<u64>, String, bool)> = g
                    .ranks
                    .iter()
                    .map(|r| (r.rank, r.path.clone(), r.findings.is_empty()))
                    .collect();
                (g.engine_id.to_string(), g.verdict, g.cause.clone(), ranks)
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(show(&x), show(&y));
    assert_eq!(x.groups.len(), 2);
    assert_eq!(
        x.groups[1].ranks.len(),
        big as usize,
        "{}",
        x.groups[1].cause
    );
    assert_eq!(x.groups[0].ranks.len(), 2);
    assert_eq!(x.summary.descriptors, big as usize + 2);
    assert_eq!(x.exit_status(), 0, "{}", x.cause);
}
