//! What one descriptor earns by itself (docs/format.md §3.5, §5), the one
//! function `kvcr examine`, the writers' seal and write (`kvcr seal`,
//! `kvcr_audit::writer`, `kvcr_audit::api::seal_json` / `write_rank_json`, the Python
//! package's `seal` and `write_rank`) call, so that a writer refuses
//! exactly what the audit would reject in a descriptor on its own.
//!
//! [`findings`] is the verdict core run on a group of one, keeping what the
//! file earns (its parse findings, KV101 its own rank and world size,
//! KV104 its own sizes, KV111 a handle repeated within it, KV108 a
//! `created_unix_ms` in seconds), not what only the rest of the group can
//! decide (KV103 for the ranks it does not hold, KV102, KV106 against a
//! profile). [`write_time`] adds the node facts that must already hold
//! when the owner writes: this node's hostname (KV110) and boot id
//! (KV108), and the owner alive with its start ticks (KV108); never the
//! writer's quiescence (normally false while writing) or the GPUs.

use super::facts::NodeFacts;
use super::{Candidate, CheckStatus, Context, Expectations, Row};
use crate::format::descriptor::{Descriptor, Ident};
use crate::format::finding::Finding;

/// Every finding `cand` earns on its own at `now_unix_ms`, in the order the
/// audit lists them.
pub fn findings(cand: Candidate, now_unix_ms: u64) -> Vec<Finding> {
    let expect = Expectations::default();
    let ctx = Context {
        now_unix_ms,
        node: None,
        expect: &expect,
        invocation: &Default::default(),
    };
    let own = cand.findings.clone();
    let j = super::judge(vec![cand], Vec::new(), &ctx);
    let mut out: Vec<Finding> = Vec::new();
    for g in &j.groups {
        for r in &g.ranks {
            out.extend(r.findings.iter().cloned());
        }
    }
    for f in &j.files {
        out.extend(f.findings.iter().cloned());
    }
    if j.groups.is_empty() && j.files.is_empty() {
        out = own;
    }
    out
}

/// A candidate for a descriptor that has no file yet (the writer's): its
/// parse findings, named as its own rank's file.
pub fn unwritten(d: Option<Descriptor>, ident: Ident, parse_findings: Vec<Finding>) -> Candidate {
    let rank = d.as_ref().map(|d| d.rank).or(ident.rank);
    let path = rank.map_or_else(|| "rank-?.json".to_string(), |r| format!("rank-{r}.json"));
    Candidate {
        raw_path: path.as_bytes().to_vec(),
        findings: parse_findings
            .into_iter()
            .map(|f| f.at(path.clone()))
            .collect(),
        path,
        name_rank: rank,
        mode: None,
        ident,
        descriptor: d,
    }
}

/// The node facts a descriptor must match when it is written (module
/// docs): each mismatch with the member it is about (`node.hostname`,
/// `node.boot_id`, `owner`) and the audit's finding. A fact that could not
/// be read is no mismatch.
pub fn write_time(d: &Descriptor, node: &NodeFacts) -> Vec<(&'static str, Finding)> {
    let mut row = Row {
        cand: unwritten(Some(d.clone()), Ident::default(), Vec::new()),
        slot: Some(d.rank),
        findings: Vec::new(),
        not_checked: Vec::new(),
        checks: Vec::new(),
    };
    super::live::hostname(&mut row, d, node);
    super::staleness::live(&mut row, d, node);
    // Each failed check made exactly one finding, in order.
    let failed = row
        .checks
        .iter()
        .filter(|c| c.status == CheckStatus::Fail)
        .map(|c| match c.name {
            "hostname" => "node.hostname",
            "boot_id" => "node.boot_id",
            _ => "owner",
        });
    failed.zip(row.findings).collect()
}
