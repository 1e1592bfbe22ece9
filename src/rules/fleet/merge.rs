//! `kvcr merge`: per-node audit reports in, group verdicts over the whole
//! fleet out (a TP×PP group can span nodes; each node's inventory holds only
//! its own ranks). Pure: parsed reports in, a [`Judgement`] out. The rules
//! across nodes are [`super`]'s; this writes each breach as a finding.
//!
//! A merged group is accepted only if every rank 0..world_size-1 appears
//! exactly once across all reports and is accepted there, no node rejected
//! the group for another reason, and incarnation, epoch, world_size, tp, pp,
//! geometry and model agree across nodes.

use super::{
    hosts, judge_ranks, judged, unclean, LocalRanks, Place, RankBreach, RankFacts, RanksJudged,
    FUTURE_SLACK_MS,
};
use crate::format::descriptor::{EngineId, Geometry, Model};
use crate::format::finding::{Code, Finding, Subject};
use crate::format::wire::{self, Severity};
use crate::rules::{FileVerdict, GroupVerdict, Judgement, RankVerdict, Verdict};
use std::collections::BTreeMap;
use std::fmt::Display;
use uuid::Uuid;

/// One per-node report as read back: the typed wire layer.
pub type NodeReport = wire::AuditReport;
type NodeGroup = wire::Group;
type NodeFinding = wire::Finding;
/// One report's entry for a group: the report's name and the entry.
type Part = (String, NodeGroup);

/// Reads one report through the typed wire layer (strict: docs/format.md
/// §10.2); anything that is not a per-node kvcr audit report v1 is an error
/// naming the file and the field.
pub fn read_report(name: &str, r: impl std::io::Read) -> Result<NodeReport, String> {
    let name = crate::format::text::terminal(name);
    let report = wire::read(&name, r)?;
    if report.is_merged() {
        return Err(format!(
            "{name} is a merged report (it lists \"reports\" and \"inputs\"); merge takes the \
             per-node reports of `kvcr audit --format json`, so merge those again"
        ));
    }
    Ok(report)
}

/// A report's finding as the merge's own (its strings moved, not copied).
fn finding(name: &str, f: NodeFinding, place: Place) -> Finding {
    let super::Judged {
        code,
        known,
        severity,
    } = judged(&f, place);
    let message = if known {
        format!("[{name}] {}", f.message)
    } else {
        format!("[{name}] unknown finding code {:?}: {}", f.code, f.message)
    };
    Finding {
        code,
        name: code.name(),
        severity,
        message: message.into(),
        path: f.path,
        expected: f.expected,
        found: f.found,
        counted: f.counted || severity == crate::format::finding::Severity::Reject,
        // A report carries findings about its node's files.
        subject: Subject::Files,
    }
}

/// Compares one group field across nodes; a disagreement is one finding
/// naming every report and its value.
fn agree<T: PartialEq + Display + Clone>(
    out: &mut Vec<Finding>,
    code: Code,
    field: &str,
    values: &[(&str, Option<T>)],
) -> Option<T> {
    let known: Vec<(&str, &T)> = values
        .iter()
        .filter_map(|(n, v)| v.as_ref().map(|v| (*n, v)))
        .collect();
    let first = known.first()?;
    if known.iter().all(|(_, v)| *v == first.1) {
        return Some(first.1.clone());
    }
    let all: Vec<String> = known.iter().map(|(n, v)| format!("{n}: {v}")).collect();
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let list = [bounded(&refs)];
    out.push(
        Finding::reject(
            code,
            format!("{field} differs across nodes: {}", list.join("; ")),
        )
        .values(format!("one {field} on every node"), list.join("; ")),
    );
    None
}

struct Json<'a, T: serde::Serialize>(&'a T);
impl<T: serde::Serialize> Display for Json<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&serde_json::to_string(self.0).unwrap_or_default())
    }
}
impl<T: serde::Serialize> PartialEq for Json<'_, T> {
    fn eq(&self, o: &Self) -> bool {
        self.to_string() == o.to_string()
    }
}
impl<T: serde::Serialize> Clone for Json<'_, T> {
    fn clone(&self) -> Self {
        Json(self.0)
    }
}

/// When the merge is dated: its clock, or its newest input's when that is
/// ahead within the clock slack, so a merged report is never dated before
/// its inputs (docs/format.md §10.3). Inputs beyond the slack are findings
/// ([`merge`]) and do not move it.
pub fn merged_at(reports: &[(String, NodeReport)], now_ms: u64) -> u64 {
    reports
        .iter()
        .map(|(_, r)| r.generated_unix_ms)
        .filter(|&t| !super::beyond_slack(t, now_ms))
        .fold(now_ms, u64::max)
}

/// Age of the oldest input at `at` ([`merged_at`]); `None` when an input is
/// dated beyond the clock slack, whose age cannot be proven.
pub fn oldest_input_age_ms(reports: &[(String, NodeReport)], at: u64) -> Option<u64> {
    reports
        .iter()
        .map(|(_, r)| (r.generated_unix_ms <= at).then(|| at - r.generated_unix_ms))
        .collect::<Option<Vec<u64>>>()
        .and_then(|ages| ages.into_iter().max())
}

/// Merges per-node reports (name, report) into group verdicts, at the
/// merge's clock `now_ms`, finished with their causes and actions for the
/// merge invoked as `inv` ([`crate::rules::cause::fill`]).
pub fn merge(
    reports: Vec<(String, NodeReport)>,
    now_ms: u64,
    inv: &crate::rules::cause::Invocation,
) -> Judgement {
    let mut files = Vec::new();
    let mut global = Vec::new();

    // A report dated beyond the clock slack cannot prove its age: a
    // finding, never a fresh input (the descriptors' rule, §5.4).
    for (name, r) in &reports {
        if super::beyond_slack(r.generated_unix_ms, now_ms) {
            let ahead = r.generated_unix_ms - now_ms;
            global.push(
                Finding::reject(
                    Code::KV108,
                    format!(
                        "report {name} is dated {} s in the future (generated_unix_ms {}), beyond \
                         the {} s clock slack: its age cannot be proven",
                        ahead / 1000,
                        r.generated_unix_ms,
                        FUTURE_SLACK_MS / 1000
                    ),
                )
                .values(
                    format!("written at most {} s in the future", FUTURE_SLACK_MS / 1000),
                    format!("generated_unix_ms {}", r.generated_unix_ms),
                )
                .about(Subject::MergeInputs),
            );
        }
    }

    // Two reports from one node would count its ranks twice. Hostnames
    // compare ASCII case-insensitively; a report that names no host cannot
    // be told apart from another node's.
    let by_host = hosts(reports.iter().map(|(_, r)| r.host.as_deref()));
    for &i in &by_host.nameless {
        let name = &reports[i].0;
        global.push(
            Finding::reject(
                Code::KV110,
                format!("report {name} names no host: cannot tell which node it describes"),
            )
            .values("a non-empty host", "none"),
        );
    }
    for (host, shared) in &by_host.shared {
        let names: Vec<&str> = shared.iter().map(|&i| reports[i].0.as_str()).collect();
        global.push(
            Finding::reject(
                Code::KV102,
                format!(
                    "{} reports come from node {host:?} (hostnames compare ignoring ASCII case and \
                     a trailing dot): {}; each node must be audited once",
                    names.len(),
                    bounded(&names)
                ),
            )
            .values("one report per node", bounded(&names))
            .about(Subject::MergeInputs),
        );
    }

    // Per engine: each report's part of the group, and when that report
    // was written.
    let mut engines: BTreeMap<EngineId, (Vec<Part>, Vec<u64>)> = BTreeMap::new();
    // Per engine: findings about the reports its parts come from.
    let mut about: BTreeMap<String, Vec<Finding>> = BTreeMap::new();
    // Each report is consumed as it is judged: its strings move into the
    // merge's verdicts, so a large input is not held twice.
    for (name, r) in reports {
        // A node whose inventory is not clean (a rejecting file-level
        // finding: a symlink named like a rank, a torn write...) proves
        // nothing about its groups.
        let (unclean, first) = unclean(r.files.iter().flat_map(|f| &f.findings));
        let first_unclean = first.map(|f| (f.code.clone(), f.message.clone()));
        let NodeReport {
            files: node_files,
            groups: node_groups,
            generated_unix_ms: written,
            ..
        } = r;
        for f in node_files {
            files.push(FileVerdict {
                path: format!("{name}: {}", f.path),
                findings: f
                    .findings
                    .into_iter()
                    .map(|x| finding(&name, x, Place::File))
                    .collect(),
            });
        }
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for g in &node_groups {
            *seen.entry(g.engine_id.clone()).or_default() += 1;
        }
        for g in node_groups {
            // `read_report` checked every engine_id already; a report built
            // otherwise (the library's `merge`) is refused here, not trusted.
            let id = match EngineId::parse(&g.engine_id) {
                Ok(id) => id,
                Err(why) => {
                    files.push(FileVerdict {
                        path: format!("{name}: groups"),
                        findings: vec![Finding::reject(
                            Code::KV007,
                            format!("report {name} lists group {:?}: {why}", g.engine_id),
                        )
                        .values(EngineId::EXPECTED, format!("{:?}", g.engine_id))],
                    });
                    continue;
                }
            };
            let e = g.engine_id.as_str();
            let notes = about.entry(e.to_string()).or_default();
            notes.extend(report_notes(
                &name,
                e,
                first_unclean.as_ref(),
                unclean,
                seen[e],
            ));
            let (parts, times) = engines.entry(id).or_default();
            parts.push((name.clone(), g));
            times.push(written);
        }
    }
    let mut groups = Vec::new();
    for (engine, (parts, written)) in engines {
        let mut pre = global.clone();
        if let Some(mut notes) = about.remove(engine.as_str()) {
            notes.dedup();
            pre.extend(notes);
        }
        groups.push(merge_group(&engine, parts, &written, &pre));
    }
    for r in groups.iter_mut().flat_map(|g| g.ranks.iter_mut()) {
        r.age_ms = r.created_unix_ms.and_then(|c| now_ms.checked_sub(c));
    }
    let descriptors = groups.iter().map(|g| g.ranks.len()).sum();
    let mut j = Judgement::new(groups, files, descriptors);
    crate::rules::cause::fill(&mut j, inv);
    j
}

/// What is wrong with report `name` as a whole, noted on its group `e`: a
/// node whose inventory was not clean (`unclean` rejecting file-level
/// findings, the first of them), and a group listed `times` times.
fn report_notes(
    name: &str,
    e: &str,
    first_unclean: Option<&(String, String)>,
    unclean: usize,
    times: usize,
) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(first) = first_unclean {
        out.push(
            Finding::reject(
                Code::parse(&first.0).unwrap_or(Code::KV007),
                format!(
                    "report {name}'s inventory has {unclean} rejecting file-level \
                     finding{} (first: {} {}); a node that is not clean proves nothing",
                    if unclean == 1 { "" } else { "s" },
                    first.0,
                    first.1
                ),
            )
            .values("no rejecting file-level finding", unclean),
        );
    }
    if times > 1 {
        out.push(
            Finding::reject(
                Code::KV102,
                format!(
                    "report {name} lists group {e:?} {} times; an audit lists each group \
                     once",
                    times
                ),
            )
            .values("one entry per group", times),
        );
    }
    out
}

/// The group's identity as the nodes agree on it (docs/format.md §10):
/// `None` where the nodes disagree or a value is missing.
struct Agreed {
    incarnation: Option<Uuid>,
    epoch: Option<u64>,
    world_size: Option<u64>,
    tp: Option<u64>,
    pp: Option<u64>,
    geometry_ok: bool,
    model_ok: bool,
}

/// One group over its parts (each report's entry for it, and when that
/// report was `written`), after the findings about the reports (`global`).
fn merge_group(
    engine: &EngineId,
    mut parts: Vec<(String, NodeGroup)>,
    written: &[u64],
    global: &[Finding],
) -> GroupVerdict {
    let mut findings: Vec<Finding> = global.to_vec();
    let agreed = agree_identity(&mut findings, &parts);
    shape_rules(&mut findings, &agreed);
    let judged = judge_parts(&parts, written, agreed.world_size);
    created_after_findings(&mut parts, &judged);
    // Listed after the merge's own reasons, which say more.
    let node_rejects = carry_node_findings(&mut findings, &mut parts);

    let names: Vec<String> = parts.iter().map(|(n, _)| n.clone()).collect();
    let (model0, geometry0) = (parts[0].1.model.clone(), parts[0].1.geometry.clone());
    let RanksJudged {
        breaches,
        shared_gpus,
        seen,
        coverage,
    } = judged;
    let mut ranks = rank_verdicts(parts, &names, breaches);
    one_rank_per_gpu(&mut ranks, &shared_gpus);
    one_node_per_rank(&mut ranks, &seen, &names);
    let (missing, absent) = missing_ranks(agreed.world_size, coverage.missing, &names);
    findings.extend(absent);
    findings.extend(node_rejects);
    ranks.sort_by(|a, b| a.rank.cmp(&b.rank).then(a.report.cmp(&b.report)));
    let accepted = agreed.world_size.is_some()
        && agreed.geometry_ok
        && agreed.model_ok
        && missing.is_empty()
        && ranks.iter().all(|r| r.verdict == Verdict::Accept)
        && !findings.iter().any(Finding::is_reject);
    let verdict = if accepted {
        Verdict::Accept
    } else {
        Verdict::Reject
    };
    GroupVerdict {
        engine_id: engine.clone(),
        incarnation: agreed.incarnation,
        epoch: agreed.epoch,
        world_size: agreed.world_size,
        tp: agreed.tp,
        pp: agreed.pp,
        model: if agreed.model_ok { model0 } else { None },
        geometry: if agreed.geometry_ok { geometry0 } else { None },
        local_ranks: None,
        verdict,
        cause: String::new(),
        action: String::new(),
        cause_code: None,
        findings,
        ranks,
        missing,
    }
}

/// Incarnation, epoch, world_size, tp, pp, geometry and model must agree
/// across the nodes' reports of one group.
fn agree_identity(findings: &mut Vec<Finding>, parts: &[(String, NodeGroup)]) -> Agreed {
    let col = |f: fn(&NodeGroup) -> Option<u64>| -> Vec<(&str, Option<u64>)> {
        parts.iter().map(|(n, g)| (n.as_str(), f(g))).collect()
    };
    let incs: Vec<(&str, Option<Uuid>)> = parts
        .iter()
        .map(|(n, g)| (n.as_str(), wire::uuid(g.incarnation.as_deref())))
        .collect();
    let incarnation = agree(findings, Code::KV107, "incarnation", &incs);
    let epoch = agree(findings, Code::KV107, "epoch", &col(|g| g.epoch));
    let world_size = agree(findings, Code::KV104, "world_size", &col(|g| g.world_size));
    let tp = agree(findings, Code::KV104, "tp", &col(|g| g.tp));
    let pp = agree(findings, Code::KV104, "pp", &col(|g| g.pp));
    let geos: Vec<(&str, Option<Json<Geometry>>)> = parts
        .iter()
        .map(|(n, g)| (n.as_str(), g.geometry.as_ref().map(Json)))
        .collect();
    let geometry_ok = agree(findings, Code::KV104, "geometry", &geos).is_some();
    let models: Vec<(&str, Option<Json<Model>>)> = parts
        .iter()
        .map(|(n, g)| (n.as_str(), g.model.as_ref().map(Json)))
        .collect();
    let model_ok = agree(findings, Code::KV105, "model", &models).is_some();
    Agreed {
        incarnation,
        epoch,
        world_size,
        tp,
        pp,
        geometry_ok,
        model_ok,
    }
}

/// Judged from the ranks' own data (docs/format.md §10), never from a
/// report's verdict fields alone.
fn shape_rules(findings: &mut Vec<Finding>, agreed: &Agreed) {
    // tp × pp = world_size is a rule between fields (KV101 in the audit
    // too, a finding there, not a schema error): judged on the agreed values.
    if let (Some(ws), Some(tp), Some(pp)) = (agreed.world_size, agreed.tp, agreed.pp) {
        if tp.checked_mul(pp) != Some(ws) {
            findings.push(
                Finding::reject(
                    Code::KV101,
                    format!("world_size {ws} is not tp × pp = {tp} × {pp} in the reports"),
                )
                .values(
                    format!("world_size {ws}"),
                    format!("tp × pp = {}", tp.saturating_mul(pp)),
                ),
            );
        }
    }
    if agreed.world_size == Some(0) {
        findings.push(
            Finding::reject(Code::KV104, "world_size is 0 in the reports")
                .values("world_size ≥ 1", 0),
        );
    }
}

/// Each node's group-level findings carry over (its own findings taken out
/// of `parts`), with the reasons a node's report of the group is incomplete.
/// Returns the node rejections, listed after the merge's own reasons.
fn carry_node_findings(
    findings: &mut Vec<Finding>,
    parts: &mut [(String, NodeGroup)],
) -> Vec<Finding> {
    let mut node_rejects: Vec<Finding> = Vec::new();
    for (name, g) in parts.iter_mut() {
        if g.geometry.is_none() {
            findings.push(
                Finding::reject(
                    Code::KV104,
                    format!(
                        "report {name} carries no geometry for the group: the shape cannot be \
                     compared across nodes"
                    ),
                )
                .values("geometry", "none"),
            );
        }
        if g.model.is_none() {
            findings.push(
                Finding::reject(
                    Code::KV105,
                    format!(
                        "report {name} carries no model for the group: the model cannot be \
                     compared across nodes"
                    ),
                )
                .values("model", "none"),
            );
        }
        // Each node's own group-level rejections carry over, except KV103:
        // merge recomputes missing ranks over all nodes.
        let first_reject = g
            .findings
            .iter()
            .chain(g.ranks.iter().flat_map(|r| &r.findings))
            .find(|f| f.severity == Severity::Reject)
            .and_then(|f| Code::parse(&f.code))
            .unwrap_or(Code::KV007);
        for mut f in std::mem::take(&mut g.findings) {
            // Not counted means outside the current incarnation: a notice
            // naming one of the group's own ranks contradicts its report,
            // and counts (docs/format.md §10.1).
            if !f.counted
                && f.path
                    .as_deref()
                    .is_some_and(|p| g.ranks.iter().any(|r| r.path == p))
            {
                f.counted = true;
            }
            if f.code != "KV103" {
                findings.push(finding(name, f, Place::Group));
            }
        }
        // A node that rejected the group rejects the merge, whatever else
        // the report says.
        // A node that rejected the group rejects the merge, whatever the
        // reason (a node audited without --local-ranks that misses the
        // other nodes' ranks included: audit each node with --local-ranks).
        if g.verdict == wire::Verdict::Reject {
            let f = Finding::reject(
                first_reject,
                format!(
                    "report {name} rejects the group{}",
                    if g.local_ranks.is_none() {
                        " (audited without --local-ranks: audit each node with --local-ranks \
                         RANKS)"
                    } else {
                        ""
                    }
                ),
            )
            .values("accept", "reject");
            // Without --local-ranks the cause is the input, not its files:
            // the headline's action says how to write it again.
            node_rejects.push(if g.local_ranks.is_none() {
                f.about(Subject::MergeInputs)
            } else {
                f
            });
        }
        // Every identity field is required: a null is never "agreement".
        for (field, missing, code) in [
            ("incarnation", g.incarnation.is_none(), Code::KV107),
            ("epoch", g.epoch.is_none(), Code::KV107),
            ("world_size", g.world_size.is_none(), Code::KV104),
            ("tp", g.tp.is_none(), Code::KV104),
            ("pp", g.pp.is_none(), Code::KV104),
        ] {
            if missing {
                findings.push(
                    Finding::reject(
                        code,
                        format!("report {name} carries no {field} for the group"),
                    )
                    .values(field, "null"),
                );
            }
        }
    }
    node_rejects
}

/// The cross-node rules over every rank of every part ([`judge_ranks`]):
/// each rank against its part's lifetime, its report's time and local
/// ranks, and the agreed `world_size`.
fn judge_parts(
    parts: &[(String, NodeGroup)],
    written: &[u64],
    world_size: Option<u64>,
) -> RanksJudged {
    let locals: Vec<Option<LocalRanks>> = parts
        .iter()
        .map(|(_, g)| g.local_ranks.as_deref().map(LocalRanks::parse))
        .collect();
    let facts: Vec<RankFacts> = parts
        .iter()
        .zip(written)
        .zip(&locals)
        .enumerate()
        .flat_map(|(source, (((_, g), &written), local))| {
            let lifetime = (wire::uuid(g.incarnation.as_deref()), g.epoch);
            g.ranks.iter().map(move |rank| RankFacts {
                rank,
                source,
                written: Some(written),
                lifetime,
                local: local.as_ref(),
            })
        })
        .collect();
    judge_ranks(&facts, world_size)
}

/// A rank created after its report was written (beyond the clock slack) is
/// dated in the future: the descriptors' rule (docs/format.md §5.4,
/// §10.3), whatever the report says of it. It becomes one of the rank's
/// own findings, as the audit would have made it.
fn created_after_findings(parts: &mut [(String, NodeGroup)], judged: &RanksJudged) {
    let ranks = parts.iter_mut().flat_map(|(_, g)| g.ranks.iter_mut());
    for (rank, breaches) in ranks.zip(&judged.breaches) {
        for b in breaches {
            let &RankBreach::CreatedAfter {
                created: c,
                written,
            } = b
            else {
                continue;
            };
            rank.findings.push(wire::Finding {
                code: Code::KV108.as_str().to_string(),
                name: Code::KV108.name().to_string(),
                severity: Severity::Reject,
                message: format!(
                    "created {} s after its report was written (created_unix_ms {c}, \
                     generated_unix_ms {written}), beyond the {} s clock slack",
                    (c - written) / 1000,
                    FUTURE_SLACK_MS / 1000
                ),
                path: Some(rank.path.clone()),
                expected: Some(format!(
                    "created_unix_ms at most {}",
                    written.saturating_add(FUTURE_SLACK_MS)
                )),
                found: Some(format!("created_unix_ms {c}")),
                counted: true,
            });
        }
    }
}

/// Every rank of every part, with its breaches ([`judge_parts`], in the
/// same order); the parts are consumed here: each rank's strings move into
/// its verdict.
fn rank_verdicts(
    parts: Vec<(String, NodeGroup)>,
    names: &[String],
    breaches: Vec<Vec<RankBreach>>,
) -> Vec<RankVerdict> {
    let mut breaches = breaches.into_iter();
    let mut ranks: Vec<RankVerdict> = Vec::new();
    for (pi, (_, g)) in parts.into_iter().enumerate() {
        let name = names[pi].as_str();
        let local = g.local_ranks.as_deref().map(LocalRanks::parse);
        for r in g.ranks {
            let b = breaches.next().unwrap_or_default();
            ranks.push(judge_rank(name, r, b, local.as_ref()));
        }
    }
    ranks
}

/// One rank of report `name`: its own findings, then each breach of the
/// cross-node rules as a finding (its report's `local` ranks named).
fn judge_rank(
    name: &str,
    mut r: wire::Rank,
    breaches: Vec<RankBreach>,
    local: Option<&LocalRanks>,
) -> RankVerdict {
    let mut rank_findings: Vec<Finding> = std::mem::take(&mut r.findings)
        .into_iter()
        .map(|f| finding(name, f, Place::Rank))
        .collect();
    let mut rejected = false;
    for b in breaches {
        let f = match b {
            // Already one of its own findings (`created_after_findings`).
            RankBreach::CreatedAfter { .. } => continue,
            RankBreach::Rejected => {
                rejected = true;
                continue;
            }
            // The GPU must be a GPU UUID (docs/format.md §3).
            RankBreach::NoGpu => Finding::reject(
                Code::KV106,
                format!("report {name} gives this rank no valid GPU UUID"),
            )
            .values(
                "GPU-<uuid> or MIG-<uuid>",
                format!("{:?}", r.gpu_uuid.as_deref().unwrap_or("null")),
            ),
            // The rank's own lifetime, never its group's word for it
            // (docs/format.md §10.1).
            RankBreach::Lifetime { field, mine, group } => {
                let field = field.as_str();
                let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "null".into());
                Finding::reject(
                    Code::KV107,
                    format!(
                        "report {name}: this rank carries {field} {}, its group {}: a rank is \
                         judged by its own data, and every rank of a group has the group's",
                        shown(&mine),
                        shown(&group)
                    ),
                )
                .values(
                    format!("{field} {}", shown(&group)),
                    format!("{field} {}", shown(&mine)),
                )
            }
            // One descriptor file is one rank: the rank is the one its file
            // name names (docs/format.md §10.1).
            RankBreach::NotItsFile { rank: n } => Finding::reject(
                Code::KV101,
                format!(
                    "report {name} lists rank {n} read from {:?}, a file not named rank-{n}.json",
                    r.path
                ),
            )
            .values(format!("rank-{n}.json"), format!("{:?}", r.path)),
            RankBreach::NoNumber => Finding::reject(
                Code::KV101,
                format!("report {name} lists a rank with no number"),
            )
            .values("a rank number", "null"),
            RankBreach::NotBelow {
                rank: n,
                world_size: ws,
            } => Finding::reject(
                Code::KV101,
                format!("report {name} lists rank {n}, not below world_size {ws}"),
            )
            .values(format!("rank < {ws}"), n),
            RankBreach::OutsideLocal { rank: n } => {
                let set = local
                    .and_then(|l| l.set.as_ref().ok())
                    .map(ToString::to_string)
                    .unwrap_or_default();
                Finding::reject(
                    Code::KV101,
                    format!("report {name} lists rank {n}, outside its own local ranks {set}"),
                )
                .values(format!("a rank in {set}"), n)
            }
            RankBreach::UnreadableLocal => {
                let s = local.map_or("", |l| l.text);
                Finding::reject(
                    Code::KV101,
                    format!("report {name} has unreadable local_ranks {s:?}"),
                )
                .values("a rank list such as 0-3", format!("{s:?}"))
            }
        };
        rank_findings.push(f.at(r.path.clone()));
    }
    if rejected && !rank_findings.iter().any(Finding::is_reject) {
        rank_findings.push(
            Finding::reject(
                Code::KV007,
                format!("report {name} rejects this rank without a reason"),
            )
            .values("accept", "reject")
            .at(r.path.clone()),
        );
    }
    // A rank is accepted only when nothing in its own data rejects it.
    let verdict =
        if r.verdict == wire::Verdict::Accept && !rank_findings.iter().any(Finding::is_reject) {
            Verdict::Accept
        } else {
            Verdict::Reject
        };
    let (inc, epoch) = (wire::uuid(r.incarnation.as_deref()), r.epoch);
    RankVerdict {
        rank: r.rank,
        raw_path: r.path.as_bytes().to_vec(),
        path: r.path,
        gpu_uuid: r.gpu_uuid,
        verdict,
        findings: rank_findings,
        not_checked: r.not_checked,
        report: Some(name.to_string()),
        incarnation: inc,
        epoch,
        created_unix_ms: r.created_unix_ms,
        // Set by `merge` against the merge's clock.
        age_ms: None,
        owner_pid: r.owner_pid,
        checks: Vec::new(),
        cause_code: None,
    }
}

/// `a, b and N more`: at most 8 names (docs/format.md §9.3).
fn bounded(names: &[&str]) -> String {
    const MAX_NAMED: usize = 8;
    let mut s = names
        .iter()
        .take(MAX_NAMED)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > MAX_NAMED {
        s.push_str(&format!(" and {} more", names.len() - MAX_NAMED));
    }
    s
}

/// One GPU (its 16 UUID bytes) for one rank across the whole fleet: each
/// rank of a GPU claimed twice ([`super::RanksJudged::shared_gpus`]) is
/// rejected (KV106).
fn one_rank_per_gpu(
    ranks: &mut [RankVerdict],
    shared: &[(crate::format::descriptor::GpuUuid, Vec<usize>)],
) {
    for (gpu, idx) in shared {
        let names: Vec<String> = idx
            .iter()
            .map(|&i| {
                let r = &ranks[i];
                format!(
                    "rank {} ({})",
                    r.rank.map_or("?".to_string(), |n| n.to_string()),
                    r.report.as_deref().unwrap_or("?")
                )
            })
            .collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        for &i in idx {
            let at = ranks[i].path.clone();
            ranks[i].verdict = Verdict::Reject;
            ranks[i].findings.push(
                Finding::reject(
                    Code::KV106,
                    format!(
                        "GPU {gpu} is claimed by {} ranks: {}",
                        idx.len(),
                        bounded(&refs)
                    ),
                )
                .values("one rank per GPU", format!("{gpu} shared"))
                .at(at),
            );
        }
    }
}

/// One node per rank: a rank listed by two reports (`seen`: the reports,
/// by position in `names`, that list each rank) is rejected in both (KV102).
fn one_node_per_rank(
    ranks: &mut [RankVerdict],
    seen: &BTreeMap<u64, Vec<usize>>,
    names: &[String],
) {
    for r in ranks.iter_mut() {
        let Some(n) = r.rank else {
            continue;
        };
        let by: Vec<&str> = seen[&n].iter().map(|&i| names[i].as_str()).collect();
        if by.len() > 1 {
            r.verdict = Verdict::Reject;
            r.findings.push(
                Finding::reject(
                    Code::KV102,
                    format!(
                        "rank {n} is reported by {} reports: {}",
                        by.len(),
                        bounded(&by)
                    ),
                )
                .values("one node per rank", bounded(&by))
                .at(r.path.clone()),
            );
        }
    }
}

/// Ranks 0..world_size-1 that no node reports (`absent`, KV103, recomputed
/// over all nodes), as runs for the verdict's `missing` list.
fn missing_ranks(
    world_size: Option<u64>,
    absent: Option<Vec<u64>>,
    names: &[String],
) -> (Vec<(u64, u64)>, Option<Finding>) {
    let (Some(ws), Some(absent)) = (world_size, absent) else {
        return (Vec::new(), None);
    };
    let missing = crate::format::rankset::runs(absent.iter().copied());
    if absent.is_empty() {
        return (missing, None);
    }
    let list = crate::rules::compress_ranks(&absent);
    let all: Vec<&str> = names.iter().map(String::as_str).collect();
    let names = [bounded(&all)];
    let finding = Finding::reject(
        Code::KV103,
        format!(
            "no node reports rank{} {list} of {ws} (reports: {})",
            if absent.len() == 1 { "" } else { "s" },
            names.join(", ")
        ),
    )
    .values(format!("ranks 0-{}", ws - 1), format!("missing {list}"));
    (missing, Some(finding))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{self, Desc};

    /// A genuine two-rank audit report, read without `read_report` (which
    /// would check its ids): what a library caller can hand to `merge`.
    fn report() -> NodeReport {
        let dir = tempfile::tempdir().unwrap();
        for rank in 0..2 {
            let p = dir.path().join(format!("rank-{rank}.json"));
            std::fs::write(p, Desc::new("unit", rank, 2, 1).bytes()).unwrap();
        }
        let doc = crate::api::audit(dir.path(), &crate::api::AuditOptions::default()).unwrap();
        assert_eq!(doc.exit_status(), 0, "{}", doc.as_json());
        serde_json::from_str(doc.as_json()).unwrap()
    }

    /// A group id is an `EngineId` only once checked: a report whose
    /// engine_id breaks the rule is a KV007 of that report, never a group.
    #[test]
    fn a_report_built_with_a_bad_engine_id_is_refused_not_made_a_group() {
        let now = testkit::CREATED_UNIX_MS + 1000;
        let j = merge(vec![("a.json".into(), report())], now, &Default::default());
        assert_eq!(j.groups.len(), 1);
        assert_eq!(j.groups[0].engine_id, "unit");
        for bad in ["bad id", "", "e\u{1b}[31m"] {
            let mut r = report();
            r.groups[0].engine_id = bad.into();
            let j = merge(vec![("a.json".into(), r)], now, &Default::default());
            assert!(j.groups.is_empty(), "{bad:?}: {:?}", j.groups);
            let f = j.files.iter().find(|f| f.path == "a.json: groups").unwrap();
            assert_eq!(f.findings[0].code, Code::KV007);
            assert!(f.findings[0].is_reject());
            let message = crate::format::message::render(&f.findings[0].message);
            assert!(message.contains(&format!("{bad:?}")), "{message}");
            assert_eq!(j.exit_status(), crate::format::exit::REJECTED);
        }
    }
}
