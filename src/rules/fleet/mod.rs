//! The rules across the nodes of one group (docs/format.md §10), pure: what
//! reports say in, typed breaches out. A TP×PP group can span nodes, each
//! node's report holding only its own ranks, and two judges apply these
//! rules to what the reports say:
//!
//! - `kvcr merge` ([`merge()`], `merge.rs`) judges per-node reports and
//!   writes each breach as a finding of the merged group;
//! - the import gate's fleet proof (`src/import/gate/fleet.rs`) judges a
//!   merged report again from its own data, never from its verdict fields,
//!   and refuses the import on the first breach.
//!
//! Each rule is decided here, once: a finding's severity from its code and
//! place ([`judged`]), a host's identity ([`host_key`]), one report per
//! host ([`hosts`]), a clean inventory ([`unclean`]), the clock slack
//! ([`beyond_slack`]), and each rank's own data, one rank per GPU and every
//! rank exactly once ([`judge_ranks`]). The callers only word the breaches
//! (a finding with its code, or a refusal) and decide their order; a rule
//! added here is a new [`RankBreach`] variant, which neither can leave out.

mod merge;

pub use merge::{merge, merged_at, oldest_input_age_ms, read_report, NodeReport};

use crate::format::descriptor::GpuUuid;
use crate::format::finding::{Code, Severity};
use crate::format::rankset::RankSet;
use crate::format::wire;
use std::collections::BTreeMap;
use uuid::Uuid;

/// How far in the future a report may be dated: the descriptors' clock
/// slack (docs/format.md §5.4), one rule for both.
pub use crate::rules::FUTURE_SLACK_MS;

/// The identity of a report's host (docs/format.md §10): hostnames are
/// DNS names, so ASCII case and one trailing dot (the root) do not make
/// another node; every other byte counts (a look-alike letter is another
/// name). Merge and the fleet gate compare hosts only through this.
pub fn host_key(h: &str) -> String {
    h.strip_suffix('.').unwrap_or(h).to_ascii_lowercase()
}

/// Whether a report proves a live audit: it says `live` and names the
/// boot it was audited in (a live claim without a boot id cannot be matched
/// to a node's boot, docs/format.md §10). `all_inputs_live` is this of
/// every input.
pub fn proves_live(r: &NodeReport) -> bool {
    r.live && r.boot_id.is_some()
}

/// Whether a moment `t` (ms) is beyond the clock slack after `clock`: a
/// report dated so against the merge's (or the gate's) clock, or a rank
/// created so after its report was written, cannot prove its age
/// (docs/format.md §5.4, §10.3).
pub fn beyond_slack(t: u64, clock: u64) -> bool {
    t > clock.saturating_add(FUTURE_SLACK_MS)
}

/// Whether a rank created at `created` (ms) is dated beyond the clock
/// slack after the report that lists it was written at `written`
/// (docs/format.md §10.3).
pub fn created_after(created: u64, written: u64) -> bool {
    beyond_slack(created, written)
}

/// Whether a report's rank `rank` was read from a file named for it: the
/// last component of `path` is `rank-<rank>.json` (docs/format.md §10.1),
/// by the audit's own name parser.
pub fn file_names_rank(path: &str, rank: Option<u64>) -> bool {
    let file = path.rsplit('/').next().unwrap_or_default();
    crate::format::names::parse_rank_name(std::ffi::OsStr::new(file)) == Some(rank)
}

/// Where a finding sits in a report: its severity is judged from its code
/// and its place (docs/format.md §5.2), never taken from the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    File,
    Group,
    Rank,
}

/// A report's finding as judged at its place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Judged {
    /// Its code; KV007 when the report's code is not one kvcr knows.
    pub code: Code,
    /// Whether the report's code is a known one, spelled as kvcr spells it.
    pub known: bool,
    pub severity: Severity,
}

/// The severity a finding of a report has at `place`, judged from its code
/// and place (docs/format.md §5.2, §10): notices exist only as KV010 on a
/// file, and on a group as a descriptor outside the current incarnation
/// (`"counted": false`, with its path, §10.1); a rank's own findings always
/// reject, and so does an unknown code (as KV007).
pub fn judged(f: &wire::Finding, place: Place) -> Judged {
    let (code, known) = match Code::parse(&f.code) {
        Some(c) if c.as_str() == f.code => (c, true),
        _ => (Code::KV007, false),
    };
    let may_be_notice = known
        && match place {
            Place::File => code == Code::KV010,
            Place::Group => f.path.is_some() && !f.counted,
            Place::Rank => false,
        };
    let severity = if may_be_notice && f.severity == wire::Severity::Notice {
        Severity::Notice
    } else {
        Severity::Reject
    };
    Judged {
        code,
        known,
        severity,
    }
}

/// Whether a report's finding rejects at `place` ([`judged`]).
pub fn rejects_at(f: &wire::Finding, place: Place) -> bool {
    judged(f, place).severity == Severity::Reject
}

/// A node's inventory is clean when none of its file-level findings
/// rejects: how many do, and the first. A node that is not clean proves
/// nothing about its groups.
pub fn unclean<'a>(
    findings: impl IntoIterator<Item = &'a wire::Finding>,
) -> (usize, Option<&'a wire::Finding>) {
    let mut n = 0;
    let mut first = None;
    for f in findings {
        if rejects_at(f, Place::File) {
            n += 1;
            first = first.or(Some(f));
        }
    }
    (n, first)
}

/// The reports' hosts, each report one node: those that name none (cannot
/// be told apart from another node's) and each host named by more than
/// one report, by [`host_key`].
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Hosts {
    /// Reports, by position, that name no host (or an empty one).
    pub nameless: Vec<usize>,
    /// Each host key that more than one report names, with those reports
    /// by position, in key order.
    pub shared: Vec<(String, Vec<usize>)>,
}

impl Hosts {
    /// Whether report `i` names the host of an earlier report.
    pub fn repeats(&self, i: usize) -> bool {
        self.shared.iter().any(|(_, s)| s[1..].contains(&i))
    }
}

/// One report per host: [`Hosts`] of the reports' `host` values, in order.
pub fn hosts<'a>(hosts: impl IntoIterator<Item = Option<&'a str>>) -> Hosts {
    let mut out = Hosts::default();
    let mut by_host: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, h) in hosts.into_iter().enumerate() {
        match h.filter(|h| !h.is_empty()) {
            Some(h) => by_host.entry(host_key(h)).or_default().push(i),
            None => out.nameless.push(i),
        }
    }
    out.shared = by_host.into_iter().filter(|(_, v)| v.len() > 1).collect();
    out
}

/// A report's own local ranks (`local_ranks` of its group), as written
/// and as read.
pub struct LocalRanks<'a> {
    pub text: &'a str,
    pub set: Result<RankSet, String>,
}

impl<'a> LocalRanks<'a> {
    pub fn parse(text: &'a str) -> LocalRanks<'a> {
        LocalRanks {
            text,
            set: RankSet::parse(text),
        }
    }
}

/// One rank as a report lists it, and what it is judged against.
pub struct RankFacts<'a> {
    pub rank: &'a wire::Rank,
    /// The report it comes from, by position (ranks of one report share it).
    pub source: usize,
    /// When that report was written, if known.
    pub written: Option<u64>,
    /// Its group's incarnation and epoch in that report.
    pub lifetime: (Option<Uuid>, Option<u64>),
    /// That report's own local ranks, if it names them.
    pub local: Option<&'a LocalRanks<'a>>,
}

/// A lifetime field of a rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LifetimeField {
    Incarnation,
    Epoch,
}

impl LifetimeField {
    pub fn as_str(self) -> &'static str {
        match self {
            LifetimeField::Incarnation => "incarnation",
            LifetimeField::Epoch => "epoch",
        }
    }
}

/// What rejects one rank, judged from its own data (docs/format.md §10.1,
/// §10.3), in the order [`judge_ranks`] lists them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RankBreach {
    /// Created beyond the clock slack after its report was written (KV108).
    CreatedAfter { created: u64, written: u64 },
    /// No valid GPU UUID (KV106).
    NoGpu,
    /// Its own incarnation or epoch is missing or not its group's (KV107);
    /// the values as text, `None` where missing.
    Lifetime {
        field: LifetimeField,
        mine: Option<String>,
        group: Option<String>,
    },
    /// Numbered `rank` but read from a file not named `rank-<rank>.json`
    /// (KV101).
    NotItsFile { rank: u64 },
    /// No rank number (KV101).
    NoNumber,
    /// Not below the world size (KV101).
    NotBelow { rank: u64, world_size: u64 },
    /// Outside its report's own local ranks (KV101).
    OutsideLocal { rank: u64 },
    /// Its report's local ranks cannot be read (KV101).
    UnreadableLocal,
    /// Its report rejects it.
    Rejected,
}

/// Every rank 0..world_size-1 exactly once.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Rank numbers listed more than once (by one report or several).
    pub repeated: Vec<u64>,
    /// Ranks below the world size no report lists; `None` without one.
    pub missing: Option<Vec<u64>>,
    /// Rank numbers listed that are not below the world size.
    pub beyond: Vec<u64>,
}

/// The ranks of one group across its reports, judged.
pub struct RanksJudged {
    /// Per rank, in the order given: what rejects it.
    pub breaches: Vec<Vec<RankBreach>>,
    /// Each GPU (16 UUID bytes) claimed by more than one rank, with those
    /// ranks by position, in GPU order (KV106).
    pub shared_gpus: Vec<(GpuUuid, Vec<usize>)>,
    /// Each rank number, with the reports (by `source`) that list it.
    pub seen: BTreeMap<u64, Vec<usize>>,
    pub coverage: Coverage,
}

/// Every rank judged from its own data against its group's lifetime, its
/// report's time and local ranks, and `world_size`; then one rank per GPU
/// and every rank exactly once across all of them.
pub fn judge_ranks(ranks: &[RankFacts], world_size: Option<u64>) -> RanksJudged {
    let mut seen: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    let mut by_gpu: BTreeMap<GpuUuid, Vec<usize>> = BTreeMap::new();
    let mut breaches = Vec::with_capacity(ranks.len());
    for (i, f) in ranks.iter().enumerate() {
        let r = f.rank;
        let mut out = Vec::new();
        if let (Some(c), Some(w)) = (r.created_unix_ms, f.written) {
            if created_after(c, w) {
                out.push(RankBreach::CreatedAfter {
                    created: c,
                    written: w,
                });
            }
        }
        match wire::gpu(r.gpu_uuid.as_deref()) {
            Some(g) => by_gpu.entry(g).or_default().push(i),
            None => out.push(RankBreach::NoGpu),
        }
        let (inc, epoch) = (wire::uuid(r.incarnation.as_deref()), r.epoch);
        let (group_inc, group_epoch) = f.lifetime;
        for (field, mine, group) in [
            (
                LifetimeField::Incarnation,
                inc.map(|u| u.to_string()),
                group_inc.map(|u| u.to_string()),
            ),
            (
                LifetimeField::Epoch,
                epoch.map(|e| e.to_string()),
                group_epoch.map(|e| e.to_string()),
            ),
        ] {
            if mine.is_none() || mine != group {
                out.push(RankBreach::Lifetime { field, mine, group });
            }
        }
        if let Some(n) = r.rank.filter(|_| !file_names_rank(&r.path, r.rank)) {
            out.push(RankBreach::NotItsFile { rank: n });
        }
        match r.rank {
            None => out.push(RankBreach::NoNumber),
            Some(n) => {
                seen.entry(n).or_default().push(f.source);
                if let Some(ws) = world_size.filter(|&ws| n >= ws) {
                    out.push(RankBreach::NotBelow {
                        rank: n,
                        world_size: ws,
                    });
                }
                match f.local.map(|l| &l.set) {
                    Some(Ok(set)) if !set.contains(n) => {
                        out.push(RankBreach::OutsideLocal { rank: n })
                    }
                    Some(Err(_)) => out.push(RankBreach::UnreadableLocal),
                    _ => {}
                }
            }
        }
        if r.verdict == wire::Verdict::Reject {
            out.push(RankBreach::Rejected);
        }
        breaches.push(out);
    }
    let coverage = Coverage {
        repeated: seen
            .iter()
            .filter(|(_, s)| s.len() > 1)
            .map(|(n, _)| *n)
            .collect(),
        missing: world_size.map(|ws| {
            (0..ws.min(crate::format::descriptor::MAX_WORLD_SIZE))
                .filter(|r| !seen.contains_key(r))
                .collect()
        }),
        beyond: world_size
            .map(|ws| seen.range(ws..).map(|(n, _)| *n).collect())
            .unwrap_or_default(),
    };
    RanksJudged {
        breaches,
        shared_gpus: by_gpu.into_iter().filter(|(_, v)| v.len() > 1).collect(),
        seen,
        coverage,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(
        code: &str,
        severity: wire::Severity,
        path: Option<&str>,
        counted: bool,
    ) -> wire::Finding {
        wire::Finding {
            code: code.into(),
            name: "x".into(),
            severity,
            message: "m".into(),
            path: path.map(str::to_string),
            expected: None,
            found: None,
            counted,
        }
    }

    /// Notices only where the rule allows them; an unknown or misspelt
    /// code rejects as KV007 everywhere.
    #[test]
    fn severity_is_judged_from_the_code_and_the_place() {
        use wire::Severity::{Notice, Reject};
        let notice = |code, path, counted| finding(code, Notice, path, counted);
        let sev = |f: &wire::Finding, p| judged(f, p).severity;
        assert_eq!(
            sev(&notice("KV010", None, true), Place::File),
            Severity::Notice
        );
        assert_eq!(
            sev(&notice("KV003", None, true), Place::File),
            Severity::Reject
        );
        let outside = notice("KV108", Some("old/rank-0.json"), false);
        assert_eq!(sev(&outside, Place::Group), Severity::Notice);
        assert_eq!(sev(&outside, Place::Rank), Severity::Reject);
        assert_eq!(
            sev(&notice("KV108", None, false), Place::Group),
            Severity::Reject
        );
        assert_eq!(
            sev(&notice("KV108", Some("p"), true), Place::Group),
            Severity::Reject
        );
        for bad in ["KV999", "kv108", "KV10"] {
            let j = judged(&notice(bad, Some("p"), false), Place::Group);
            assert_eq!(
                (j.code, j.known, j.severity),
                (Code::KV007, false, Severity::Reject)
            );
        }
        let j = judged(&finding("KV104", Reject, None, true), Place::Group);
        assert_eq!(
            (j.code, j.known, j.severity),
            (Code::KV104, true, Severity::Reject)
        );
        let files = [
            notice("KV010", None, true),
            finding("KV001", Reject, None, true),
            finding("KV009", Reject, None, true),
        ];
        let (n, first) = unclean(&files);
        assert_eq!((n, first.map(|f| f.code.as_str())), (2, Some("KV001")));
    }

    /// One node per host key; a missing or empty host is nameless.
    #[test]
    fn hosts_compare_by_key_and_name_each_repeat() {
        let h = hosts([
            Some("gpu-node-17"),
            None,
            Some("GPU-NODE-17."),
            Some(""),
            Some("gpu-node-18"),
            Some("gpu-node-17"),
        ]);
        assert_eq!(h.nameless, [1, 3]);
        assert_eq!(h.shared, [("gpu-node-17".to_string(), vec![0, 2, 5])]);
        assert!(!h.repeats(0) && h.repeats(2) && h.repeats(5) && !h.repeats(4));
    }

    fn rank(n: Option<u64>, path: &str, gpu: Option<&str>) -> wire::Rank {
        wire::Rank {
            rank: n,
            path: path.into(),
            gpu_uuid: gpu.map(str::to_string),
            verdict: wire::Verdict::Accept,
            findings: Vec::new(),
            not_checked: Vec::new(),
            report: None,
            incarnation: Some("3f2b8c1e-7d4a-4b6e-9c2f-1a5d8e7b4c90".into()),
            epoch: Some(1),
            created_unix_ms: Some(1_000),
            age_ms: None,
            owner_pid: None,
        }
    }

    /// Each rank's own data, one rank per GPU (16 bytes, whatever the
    /// prefix) and every rank once, decided in one place for both callers.
    #[test]
    fn ranks_are_judged_by_their_own_data_and_across_reports() {
        let gpu = |i: u32| format!("GPU-6a1f0c2e-0000-4000-8000-00000000000{i}");
        let inc = wire::uuid(Some("3f2b8c1e-7d4a-4b6e-9c2f-1a5d8e7b4c90"));
        let mut rs = [
            rank(Some(0), "rank-0.json", Some(&gpu(0))),
            rank(
                Some(1),
                "a/rank-1.json",
                Some(&gpu(0).replace("GPU-", "MIG-")),
            ),
            rank(Some(1), "rank-2.json", None),
            rank(Some(5), "rank-5.json", Some(&gpu(5))),
            rank(None, "rank-x.json", Some(&gpu(6))),
        ];
        rs[0].epoch = Some(2);
        rs[1].created_unix_ms = Some(1_000 + FUTURE_SLACK_MS + 1);
        rs[3].verdict = wire::Verdict::Reject;
        let local = LocalRanks::parse("0-1");
        let facts: Vec<RankFacts> = rs
            .iter()
            .enumerate()
            .map(|(i, r)| RankFacts {
                rank: r,
                source: i.min(1),
                written: Some(1_000),
                lifetime: (inc, Some(1)),
                local: (i == 3).then_some(&local),
            })
            .collect();
        let j = judge_ranks(&facts, Some(4));
        assert_eq!(
            j.breaches[0],
            [RankBreach::Lifetime {
                field: LifetimeField::Epoch,
                mine: Some("2".into()),
                group: Some("1".into()),
            }]
        );
        assert_eq!(
            j.breaches[1],
            [RankBreach::CreatedAfter {
                created: 1_000 + FUTURE_SLACK_MS + 1,
                written: 1_000
            }]
        );
        assert_eq!(
            j.breaches[2],
            [RankBreach::NoGpu, RankBreach::NotItsFile { rank: 1 }]
        );
        assert_eq!(
            j.breaches[3],
            [
                RankBreach::NotBelow {
                    rank: 5,
                    world_size: 4
                },
                RankBreach::OutsideLocal { rank: 5 },
                RankBreach::Rejected
            ]
        );
        assert_eq!(j.breaches[4], [RankBreach::NoNumber]);
        assert_eq!(j.shared_gpus.len(), 1);
        assert_eq!(j.shared_gpus[0].1, [0, 1]);
        assert_eq!(j.seen[&1], [1, 1]);
        assert_eq!(
            j.coverage,
            Coverage {
                repeated: vec![1],
                missing: Some(vec![2, 3]),
                beyond: vec![5],
            }
        );
        // Without a world size nothing is missing or beyond it.
        let j = judge_ranks(&facts, None);
        assert_eq!(j.coverage.missing, None);
        assert!(j.coverage.beyond.is_empty());
        // Without its report's time, a rank's creation is not dated.
        let undated: Vec<RankFacts> = facts
            .iter()
            .map(|f| RankFacts {
                written: None,
                local: None,
                ..*f
            })
            .collect();
        assert!(judge_ranks(&undated, Some(4)).breaches[1].is_empty());
    }
}
