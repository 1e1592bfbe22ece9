//! `kvcr merge`: per-node audit reports in, group verdicts over the whole
//! fleet out (a TP×PP group can span nodes; each node's inventory holds only
//! its own ranks). Pure: parsed reports in, a [`Judgement`] out.
//!
//! A merged group is accepted only if every rank 0..world_size-1 appears
//! exactly once across all reports and is accepted there, no node rejected
//! the group for another reason, and incarnation, epoch, world_size, tp, pp,
//! geometry and model agree across nodes.

use crate::descriptor::{Geometry, Model};
use crate::finding::{Code, Finding, Severity};
use crate::verdict::{compress_ranks, FileVerdict, GroupVerdict, Judgement, RankVerdict, Verdict};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Display;
use uuid::Uuid;

/// One per-node report as read back (the subset merge needs).
#[derive(Debug, Deserialize)]
pub struct NodeReport {
    pub schema: String,
    #[serde(default)]
    pub root: Option<String>,
    #[serde(default)]
    pub host: Option<String>,
    #[serde(default)]
    pub live: bool,
    #[serde(default)]
    pub boot_id: Option<Uuid>,
    #[serde(default)]
    pub generated_unix_ms: Option<u64>,
    pub groups: Vec<NodeGroup>,
    #[serde(default)]
    pub files: Vec<NodeFile>,
}

#[derive(Debug, Deserialize)]
pub struct NodeGroup {
    pub engine_id: String,
    pub incarnation: Option<Uuid>,
    pub epoch: Option<u64>,
    pub world_size: Option<u64>,
    #[serde(default)]
    pub tp: Option<u64>,
    #[serde(default)]
    pub pp: Option<u64>,
    #[serde(default)]
    pub model: Option<Model>,
    #[serde(default)]
    pub geometry: Option<Geometry>,
    #[serde(default)]
    pub local_ranks: Option<String>,
    pub verdict: Verdict,
    pub findings: Vec<NodeFinding>,
    pub ranks: Vec<NodeRank>,
}

#[derive(Debug, Deserialize)]
pub struct NodeRank {
    /// `null` in a report when the file name's rank did not fit in 64 bits.
    pub rank: Option<u64>,
    pub path: String,
    pub gpu_uuid: Option<String>,
    pub verdict: Verdict,
    pub findings: Vec<NodeFinding>,
    #[serde(default)]
    pub not_checked: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub struct NodeFile {
    pub path: String,
    pub findings: Vec<NodeFinding>,
}

#[derive(Debug, Deserialize)]
pub struct NodeFinding {
    pub code: String,
    pub severity: Severity,
    pub message: String,
    pub path: Option<String>,
    pub expected: Option<String>,
    pub found: Option<String>,
}

impl<'de> Deserialize<'de> for Verdict {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match String::deserialize(d)?.as_str() {
            "accept" => Ok(Verdict::Accept),
            "reject" => Ok(Verdict::Reject),
            other => Err(serde::de::Error::custom(format!(
                "unknown verdict {other:?}"
            ))),
        }
    }
}

impl<'de> Deserialize<'de> for Severity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match String::deserialize(d)?.as_str() {
            "reject" => Ok(Severity::Reject),
            "notice" => Ok(Severity::Notice),
            other => Err(serde::de::Error::custom(format!(
                "unknown severity {other:?}"
            ))),
        }
    }
}

/// Reads one report; anything that is not a kvcr audit report v1 is an error
/// naming the file.
pub fn read_report(name: &str, bytes: &[u8]) -> Result<NodeReport, String> {
    let v: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("{name}: not JSON: {e}"))?;
    match v.get("schema").and_then(|s| s.as_str()) {
        Some(crate::report::json::REPORT_SCHEMA) => {}
        Some(other) => {
            return Err(format!(
                "{name}: schema {other:?} is not {:?}; merge only reads kvcr audit reports of this version",
                crate::report::json::REPORT_SCHEMA
            ))
        }
        None => return Err(format!("{name}: not a kvcr audit report (no \"schema\" member)")),
    }
    serde_json::from_value(v).map_err(|e| format!("{name}: malformed kvcr audit report: {e}"))
}

fn finding(name: &str, f: &NodeFinding) -> Finding {
    let code = Code::parse(&f.code).unwrap_or(Code::KV007);
    Finding {
        code,
        name: code.name(),
        severity: f.severity,
        message: format!("[{name}] {}", f.message),
        path: f.path.clone(),
        expected: f.expected.clone(),
        found: f.found.clone(),
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
    let list: Vec<String> = known.iter().map(|(n, v)| format!("{n}: {v}")).collect();
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

/// Merges per-node reports (name, report) into group verdicts.
pub fn merge(reports: &[(String, NodeReport)]) -> Judgement {
    let mut files = Vec::new();
    let mut global = Vec::new();

    // Two reports from one node would count its ranks twice. Hostnames
    // compare ASCII case-insensitively; a report that names no host cannot
    // be told apart from another node's.
    let mut by_host: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for (name, r) in reports {
        match r.host.as_deref().filter(|h| !h.is_empty()) {
            Some(h) => by_host
                .entry(h.to_ascii_lowercase())
                .or_default()
                .push(name),
            None => global.push(
                Finding::reject(
                    Code::KV110,
                    format!("report {name} names no host: cannot tell which node it describes"),
                )
                .values("a non-empty host", "none"),
            ),
        }
        for f in &r.files {
            files.push(FileVerdict {
                path: format!("{name}: {}", f.path),
                findings: f.findings.iter().map(|x| finding(name, x)).collect(),
            });
        }
    }
    for (host, names) in &by_host {
        if names.len() > 1 {
            global.push(
                Finding::reject(
                    Code::KV102,
                    format!(
                        "reports {} all come from node {host:?} (hostnames compare ignoring ASCII case); each node must be audited once",
                        names.join(", ")
                    ),
                )
                .values("one report per node", names.join(", ")),
            );
        }
    }

    let mut engines: BTreeMap<&str, Vec<(&str, &NodeGroup)>> = BTreeMap::new();
    for (name, r) in reports {
        for g in &r.groups {
            engines
                .entry(g.engine_id.as_str())
                .or_default()
                .push((name.as_str(), g));
        }
    }
    let mut groups = Vec::new();
    for (engine, parts) in engines {
        groups.push(merge_group(engine, &parts, &global));
    }
    let descriptors = groups.iter().map(|g| g.ranks.len()).sum();
    Judgement::new(groups, files, descriptors)
}

fn merge_group(engine: &str, parts: &[(&str, &NodeGroup)], global: &[Finding]) -> GroupVerdict {
    let mut findings: Vec<Finding> = global.to_vec();
    let col = |f: fn(&NodeGroup) -> Option<u64>| -> Vec<(&str, Option<u64>)> {
        parts.iter().map(|(n, g)| (*n, f(g))).collect()
    };
    let incs: Vec<(&str, Option<Uuid>)> = parts.iter().map(|(n, g)| (*n, g.incarnation)).collect();
    let incarnation = agree(&mut findings, Code::KV107, "incarnation", &incs);
    let epoch = agree(&mut findings, Code::KV107, "epoch", &col(|g| g.epoch));
    let world_size = agree(
        &mut findings,
        Code::KV104,
        "world_size",
        &col(|g| g.world_size),
    );
    let tp = agree(&mut findings, Code::KV104, "tp", &col(|g| g.tp));
    let pp = agree(&mut findings, Code::KV104, "pp", &col(|g| g.pp));
    let geos: Vec<(&str, Option<Json<Geometry>>)> = parts
        .iter()
        .map(|(n, g)| (*n, g.geometry.as_ref().map(Json)))
        .collect();
    let geometry_ok = agree(&mut findings, Code::KV104, "geometry", &geos).is_some();
    let models: Vec<(&str, Option<Json<Model>>)> = parts
        .iter()
        .map(|(n, g)| (*n, g.model.as_ref().map(Json)))
        .collect();
    let model_ok = agree(&mut findings, Code::KV105, "model", &models).is_some();

    // Judged from the ranks' own data (docs/format.md §10), never from a
    // report's verdict fields alone.
    if world_size == Some(0) {
        findings.push(
            Finding::reject(Code::KV104, "world_size is 0 in the reports")
                .values("world_size ≥ 1", 0),
        );
    }
    for (name, g) in parts {
        if g.geometry.is_none() {
            findings.push(
                Finding::reject(
                    Code::KV104,
                    format!("report {name} carries no geometry for the group: the shape cannot be compared across nodes"),
                )
                .values("geometry", "none"),
            );
        }
        if g.model.is_none() {
            findings.push(
                Finding::reject(
                    Code::KV105,
                    format!("report {name} carries no model for the group: the model cannot be compared across nodes"),
                )
                .values("model", "none"),
            );
        }
        // Each node's own group-level rejections carry over, except KV103:
        // merge recomputes missing ranks over all nodes.
        for f in &g.findings {
            if f.code != "KV103" {
                findings.push(finding(name, f));
            }
        }
        // A node that rejected the group rejects the merge, whatever else
        // the report says.
        if g.verdict == Verdict::Reject
            && !g.findings.iter().any(|f| f.severity == Severity::Reject)
            && !g
                .ranks
                .iter()
                .any(|r| r.findings.iter().any(|f| f.severity == Severity::Reject))
        {
            findings.push(
                Finding::reject(
                    Code::KV007,
                    format!(
                        "report {name} rejects the group without a reason this merge can judge"
                    ),
                )
                .values("accept", "reject"),
            );
        }
    }

    let mut ranks: Vec<RankVerdict> = Vec::new();
    let mut seen: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for (name, g) in parts {
        let local = g
            .local_ranks
            .as_deref()
            .map(|s| (s, crate::rankset::RankSet::parse(s)));
        for r in &g.ranks {
            let mut rank_findings: Vec<Finding> =
                r.findings.iter().map(|f| finding(name, f)).collect();
            let at = |f: Finding| f.at(r.path.clone());
            match r.rank {
                None => rank_findings.push(at(Finding::reject(
                    Code::KV101,
                    format!("report {name} lists a rank with no number"),
                )
                .values("a rank number", "null"))),
                Some(n) => {
                    seen.entry(n).or_default().push(name);
                    if let Some(ws) = world_size.filter(|&ws| n >= ws) {
                        rank_findings.push(at(Finding::reject(
                            Code::KV101,
                            format!("report {name} lists rank {n}, not below world_size {ws}"),
                        )
                        .values(format!("rank < {ws}"), n)));
                    }
                    match &local {
                        Some((_, Ok(set))) if !set.contains(n) => {
                            rank_findings.push(at(Finding::reject(
                                Code::KV101,
                                format!("report {name} lists rank {n}, outside its own local ranks {set}"),
                            )
                            .values(format!("a rank in {set}"), n)));
                        }
                        Some((s, Err(_))) => {
                            rank_findings.push(at(Finding::reject(
                                Code::KV101,
                                format!("report {name} has unreadable local_ranks {s:?}"),
                            )
                            .values("a rank list such as 0-3", format!("{s:?}"))));
                        }
                        _ => {}
                    }
                }
            }
            if r.verdict == Verdict::Reject && !rank_findings.iter().any(Finding::is_reject) {
                rank_findings.push(at(Finding::reject(
                    Code::KV007,
                    format!("report {name} rejects this rank without a reason"),
                )
                .values("accept", "reject")));
            }
            // A rank is accepted only when nothing in its own data rejects it.
            let verdict =
                if r.verdict == Verdict::Accept && !rank_findings.iter().any(Finding::is_reject) {
                    Verdict::Accept
                } else {
                    Verdict::Reject
                };
            ranks.push(RankVerdict {
                rank: r.rank,
                path: r.path.clone(),
                raw_path: r.path.as_bytes().to_vec(),
                gpu_uuid: r.gpu_uuid.clone(),
                verdict,
                findings: rank_findings,
                not_checked: r.not_checked.clone(),
                report: Some(name.to_string()),
                incarnation: g.incarnation,
                epoch: g.epoch,
                created_unix_ms: None,
                checks: Vec::new(),
            });
        }
    }
    for r in ranks.iter_mut() {
        let Some(n) = r.rank else {
            continue;
        };
        let names = &seen[&n];
        if names.len() > 1 {
            r.verdict = Verdict::Reject;
            r.findings.push(
                Finding::reject(
                    Code::KV102,
                    format!("rank {n} is reported by {}", names.join(" and ")),
                )
                .values("one node per rank", names.join(", "))
                .at(r.path.clone()),
            );
        }
    }
    let mut missing = Vec::new();
    if let Some(ws) = world_size {
        let absent: Vec<u64> = (0..ws.min(crate::descriptor::MAX_WORLD_SIZE))
            .filter(|r| !seen.contains_key(r))
            .collect();
        missing = crate::rankset::runs(absent.iter().copied());
        if !absent.is_empty() {
            let list = compress_ranks(&absent);
            let names: Vec<&str> = parts.iter().map(|(n, _)| *n).collect();
            findings.push(
                Finding::reject(
                    Code::KV103,
                    format!(
                        "no node reports rank{} {list} of {ws} (reports: {})",
                        if absent.len() == 1 { "" } else { "s" },
                        names.join(", ")
                    ),
                )
                .values(format!("ranks 0-{}", ws - 1), format!("missing {list}")),
            );
        }
    }
    ranks.sort_by(|a, b| a.rank.cmp(&b.rank).then(a.report.cmp(&b.report)));
    let accepted = world_size.is_some()
        && geometry_ok
        && model_ok
        && missing.is_empty()
        && ranks.iter().all(|r| r.verdict == Verdict::Accept)
        && !findings.iter().any(Finding::is_reject);
    let verdict = if accepted {
        Verdict::Accept
    } else {
        Verdict::Reject
    };
    let (cause, action) = if accepted {
        (
            format!(
                "all {} ranks present once across {} reports, accepted and consistent",
                world_size.unwrap_or(0),
                parts.len()
            ),
            "none needed: import on each node with kvcr import --engine ID".to_string(),
        )
    } else {
        let first = findings
            .iter()
            .chain(ranks.iter().flat_map(|r| &r.findings))
            .find(|f| f.is_reject());
        match first {
            Some(f) => (
                format!("{} ({})", f.message, f.code),
                format!(
                    "{}; see `kvcr explain {}`",
                    crate::report::explain::action(f.code),
                    f.code
                ),
            ),
            None => (
                "the group's shape could not be established from the reports".to_string(),
                "audit every node again with kvcr audit --live --format json".to_string(),
            ),
        }
    };
    let g0 = parts[0].1;
    GroupVerdict {
        engine_id: engine.to_string(),
        incarnation,
        epoch,
        world_size,
        tp,
        pp,
        model: if model_ok { g0.model.clone() } else { None },
        geometry: if geometry_ok {
            g0.geometry.clone()
        } else {
            None
        },
        local_ranks: None,
        verdict,
        cause,
        action,
        findings,
        ranks,
        missing,
    }
}
