//! The fleet proof (docs/format.md §8.9, §10): a local part
//! (`--local-ranks`) is imported only with a `kvcr merge` report proving
//! the whole group. The report is untrusted data, judged again from its own
//! contents, never from its verdict fields: the rules across nodes by the
//! very functions `kvcr merge` applies (`crate::rules::fleet`), each
//! breach a refusal here; then what only the gate asks: every input live,
//! this node's tp, pp, model, geometry and lifetime, this host and boot as
//! the source of exactly these ranks, no fact left unchecked, and fresh.

use crate::format::rankset::RankSet;
use crate::format::text::terminal;
use crate::format::wire;
use crate::import::report::{Check, Refusal};
use crate::io::node::{Fact, NodeFacts};
use crate::rules::fleet::{self as rules, Place, RankBreach, RankFacts, RanksJudged};
use crate::rules::GroupVerdict;
use std::path::Path;

/// A merge report is small; anything larger is not one.
const MAX_FLEET_REPORT: u64 = 64 << 20;

/// What the fleet check needs to know about this run.
pub struct Fleet<'a> {
    /// `--fleet-report`.
    pub report: Option<&'a Path>,
    /// `--max-report-age`, seconds.
    pub max_age_s: u64,
    pub now_ms: u64,
}

/// A local part (`--local-ranks`) is imported only with proof of the whole
/// group: a `kvcr merge` report that accepts it, built only from live
/// reports, with this group's engine_id, incarnation and epoch, naming this
/// host and boot id as the source of exactly these ranks, no older than
/// `--max-report-age`. `None` when the group is not a local part or the
/// proof holds.
pub fn fleet(f: &Fleet, g: &GroupVerdict, node: Option<&NodeFacts>) -> Option<Refusal> {
    let local = g.local_ranks.as_ref()?;
    check_fleet(f, g, local, node)
        .err()
        .map(|m| Refusal::new(Check::FleetReport, m))
}

fn check_fleet(
    f: &Fleet,
    g: &GroupVerdict,
    local: &RankSet,
    node: Option<&NodeFacts>,
) -> Result<(), String> {
    let engine = terminal(&g.engine_id);
    let (name, v) = read_fleet_report(f, &engine, local)?;
    let inputs = live_inputs(&name, &v)?;
    let group = accepted_group(&name, &engine, &v, g)?;
    let judged = judge_ranks(inputs, group, g.world_size);
    every_rank_once(&name, &engine, group, &judged, g)?;
    same_lifetime(&name, &engine, group, g)?;

    // Then everything merge would have refused, from the data itself.
    judge_report_data(&name, &engine, &v, group, &judged, inputs, g, f.now_ms)?;

    // This node's share: the input from this host and this boot.
    let input = this_nodes_input(&name, inputs, node)?;
    this_nodes_ranks(&name, group, input, g, local)?;

    // Fresh: its oldest input is no older than --max-report-age.
    fresh(&name, f, inputs)
}

/// The `--fleet-report` file, read by the same typed, strict reader merge
/// uses (docs/format.md §10.2), with its name as shown in messages.
fn read_fleet_report(
    f: &Fleet,
    engine: &str,
    local: &RankSet,
) -> Result<(String, wire::AuditReport), String> {
    let Some(path) = f.report else {
        return Err(format!(
            "--local-ranks {local}: this node holds only part of group {engine}; import requires \
                --fleet-report FILE, a `kvcr merge --format json` report of every node's live \
                audit that accepts the whole group"
        ));
    };
    let name = terminal(&path.display().to_string()).into_owned();
    let file = crate::io::safe_file::open_regular(path, MAX_FLEET_REPORT)
        .map_err(|e| format!("cannot read --fleet-report {name}: {e}"))?;
    let v = wire::read(&format!("--fleet-report {name}"), file)?;
    Ok((name, v))
}

/// A merge report's inputs, every one of them a live report.
fn live_inputs<'v>(name: &str, v: &'v wire::AuditReport) -> Result<&'v [wire::Input], String> {
    let (Some(inputs), Some(_)) = (v.inputs.as_deref(), v.reports.as_ref()) else {
        return Err(format!(
            "--fleet-report {name} is not a kvcr merge report (no \"reports\" member); write it \
                with kvcr merge --format json"
        ));
    };
    if v.all_inputs_live != Some(true) {
        return Err(format!(
            "--fleet-report {name} was not built only from live reports (all_inputs_live is {}); \
                audit every node with kvcr audit --live",
            v.all_inputs_live
                .map_or("missing".into(), |b| b.to_string())
        ));
    }
    if let Some(i) = inputs.iter().find(|i| !i.live) {
        return Err(format!(
            "--fleet-report {name}: input {} is not a live report",
            terminal(&i.report)
        ));
    }
    Ok(inputs)
}

/// The report's one entry for this group (by engine id bytes), accepted.
fn accepted_group<'v>(
    name: &str,
    engine: &str,
    v: &'v wire::AuditReport,
    g: &GroupVerdict,
) -> Result<&'v wire::Group, String> {
    let entries: Vec<&wire::Group> = v
        .groups
        .iter()
        .filter(|x| x.engine_id.as_bytes() == g.engine_id.as_bytes())
        .collect();
    let group = match entries.as_slice() {
        [one] => *one,
        [] => return Err(format!("--fleet-report {name} has no group {engine}")),
        many => {
            return Err(format!(
            "--fleet-report {name} lists group {engine} {} times; a merge lists each group once",
            many.len()
        ))
        }
    };
    if group.verdict != wire::Verdict::Accept {
        return Err(format!(
            "--fleet-report {name} rejects group {engine}: {}",
            terminal(&group.cause)
        ));
    }
    Ok(group)
}

/// The merged group's ranks by the rules across nodes
/// ([`rules::judge_ranks`]): each against the group's lifetime, the time
/// its own input was written, and this node's world size.
fn judge_ranks(
    inputs: &[wire::Input],
    group: &wire::Group,
    world_size: Option<u64>,
) -> RanksJudged {
    let lifetime = (wire::uuid(group.incarnation.as_deref()), group.epoch);
    let facts: Vec<RankFacts> = group
        .ranks
        .iter()
        .map(|rank| {
            // A rank whose `report` is no input is refused below; its time
            // is then unknown.
            let source = inputs
                .iter()
                .position(|i| rank.report.as_deref() == Some(i.report.as_str()));
            RankFacts {
                rank,
                source: source.unwrap_or(inputs.len()),
                written: source.and_then(|s| inputs[s].generated_unix_ms),
                lifetime,
                local: None,
            }
        })
        .collect();
    rules::judge_ranks(&facts, world_size)
}

/// Judged from the ranks themselves too, not the verdict field alone:
/// every rank 0..world_size-1 exactly once, each accepted.
fn every_rank_once(
    name: &str,
    engine: &str,
    group: &wire::Group,
    judged: &RanksJudged,
    g: &GroupVerdict,
) -> Result<(), String> {
    for (r, breaches) in group.ranks.iter().zip(&judged.breaches) {
        let Some(n) = r.rank else {
            return Err(format!(
                "--fleet-report {name} lists a rank of group {engine} with no number"
            ));
        };
        if breaches.contains(&RankBreach::Rejected) {
            return Err(format!(
                "--fleet-report {name} accepts group {engine} but rejects its rank {n}"
            ));
        }
        for b in breaches {
            if let RankBreach::CreatedAfter { created, written } = b {
                return Err(format!(
                    "--fleet-report {name}: rank {n} of group {engine} was created \
                        (created_unix_ms {created}) after the report was written (its input \
                        {}: generated_unix_ms {written}), beyond the clock slack",
                    terminal(r.report.as_deref().unwrap_or_default())
                ));
            }
        }
        if breaches
            .iter()
            .any(|b| matches!(b, RankBreach::NotItsFile { .. }))
        {
            return Err(format!(
                "--fleet-report {name} lists rank {n} of group {engine} read from {}, a file not \
                    named rank-{n}.json",
                terminal(&r.path)
            ));
        }
    }
    // Without a world size here no rank is "missing": refuse as
    // `same_lifetime` would, instead of calling every rank out of range.
    if g.world_size.is_none() {
        return Err(format!(
            "--fleet-report {name} accepted group {engine} with world_size {}, this node holds \
                world_size none",
            group.world_size.map_or("none".into(), |w| w.to_string())
        ));
    }
    let c = &judged.coverage;
    let missing = c.missing.as_deref().unwrap_or_default();
    let mut odd: Vec<u64> = c.repeated.iter().chain(&c.beyond).copied().collect();
    odd.sort_unstable();
    odd.dedup();
    if !missing.is_empty() || !odd.is_empty() {
        return Err(format!(
            "--fleet-report {name} does not hold every rank of group {engine} exactly once \
                (missing {}, duplicate or out of range {})",
            list(missing),
            list(&odd)
        ));
    }
    Ok(())
}

/// The accepted group has this node's incarnation, epoch and world size.
fn same_lifetime(
    name: &str,
    engine: &str,
    group: &wire::Group,
    g: &GroupVerdict,
) -> Result<(), String> {
    let shown_u64 = |x: Option<u64>| x.map_or_else(|| "none".to_string(), |e| e.to_string());
    let group_inc = wire::uuid(group.incarnation.as_deref());
    for (field, same, here, there) in [
        (
            "incarnation",
            group_inc.is_some() && group_inc == g.incarnation,
            g.incarnation.map_or("none".into(), |u| u.to_string()),
            group
                .incarnation
                .as_deref()
                .map_or("none".into(), |u| terminal(u).into_owned()),
        ),
        (
            "epoch",
            group.epoch.is_some() && group.epoch == g.epoch,
            shown_u64(g.epoch),
            shown_u64(group.epoch),
        ),
        (
            "world_size",
            group.world_size.is_some() && group.world_size == g.world_size,
            shown_u64(g.world_size),
            shown_u64(group.world_size),
        ),
    ] {
        if !same {
            return Err(format!(
                "--fleet-report {name} accepted group {engine} with {field} {there}, this node \
                    holds {field} {here}"
            ));
        }
    }
    Ok(())
}

/// The one input of the report from this host (by host key) and this boot
/// (by the boot id's 16 bytes).
fn this_nodes_input<'v>(
    name: &str,
    inputs: &'v [wire::Input],
    node: Option<&NodeFacts>,
) -> Result<&'v wire::Input, String> {
    let (host, boot) = match node {
        Some(n) => (&n.hostname, &n.boot_id),
        None => return Err("this node's hostname and boot id were not read".into()),
    };
    let host = match host {
        Fact::Known(h) => h,
        Fact::NotChecked(why) => {
            return Err(format!(
                "--fleet-report {name} cannot be matched to this node: hostname not checked: {}",
                terminal(why)
            ))
        }
    };
    let boot = match boot {
        Fact::Known(b) => b,
        Fact::NotChecked(why) => {
            return Err(format!(
                "--fleet-report {name} cannot be matched to this node: boot_id not checked: {}",
                terminal(why)
            ))
        }
    };
    let mine: Vec<&wire::Input> = inputs
        .iter()
        .filter(|i| {
            i.host
                .as_deref()
                .is_some_and(|h| rules::host_key(h) == rules::host_key(host))
        })
        .collect();
    let input = match mine.as_slice() {
        [one] => *one,
        [] => {
            return Err(format!(
                "--fleet-report {name} names no input from this host {}",
                terminal(host)
            ))
        }
        _ => {
            return Err(format!(
                "--fleet-report {name} names {} inputs from this host {}",
                mine.len(),
                terminal(host)
            ))
        }
    };
    // Boot ids compare as their 16 bytes (validated canonical by the reader).
    if wire::uuid(input.boot_id.as_deref()).map(|u| *u.as_bytes()) != Some(*boot.as_bytes()) {
        return Err(format!(
            "--fleet-report {name}: input {} from host {} was audited in boot {}, this node is in \
                boot {boot} (rebooted since?)",
            terminal(&input.report),
            terminal(host),
            input
                .boot_id
                .as_deref()
                .map_or("none".into(), |b| terminal(b).into_owned())
        ));
    }
    Ok(input)
}

/// The ranks the report names from this node's input are this import's
/// local ranks (below the world size).
fn this_nodes_ranks(
    name: &str,
    group: &wire::Group,
    input: &wire::Input,
    g: &GroupVerdict,
    local: &RankSet,
) -> Result<(), String> {
    let want: Vec<u64> = match g.world_size {
        Some(ws) => local.iter().take_while(|r| *r < ws).collect(),
        None => local.iter().collect(),
    };
    let mut named: Vec<u64> = group
        .ranks
        .iter()
        .filter(|r| r.report.as_deref().map(str::as_bytes) == Some(input.report.as_bytes()))
        .filter_map(|r| r.rank)
        .collect();
    named.sort_unstable();
    if named != want {
        return Err(format!(
            "--fleet-report {name} names ranks {} from this node (input {}), this import holds \
                ranks {}",
            list(&named),
            terminal(&input.report),
            list(&want)
        ));
    }
    Ok(())
}

/// Fresh: the report's oldest input is no older than --max-report-age, and
/// none is dated in the future.
fn fresh(name: &str, f: &Fleet, inputs: &[wire::Input]) -> Result<(), String> {
    let mut oldest: Option<(u64, &str)> = None;
    for i in inputs {
        let Some(t) = i.generated_unix_ms else {
            return Err(format!(
                "--fleet-report {name}: input {} does not say when it was written, so its age \
                    cannot be proven",
                terminal(&i.report)
            ));
        };
        if rules::beyond_slack(t, f.now_ms) {
            return Err(format!(
                "--fleet-report {name}: input {} is dated {} s in the future, so its age cannot be \
                    proven",
                terminal(&i.report),
                (t - f.now_ms) / 1000
            ));
        }
        if oldest.is_none_or(|(o, _)| t < o) {
            oldest = Some((t, &i.report));
        }
    }
    let (t, which) = oldest.ok_or_else(|| format!("--fleet-report {name} lists no inputs"))?;
    let age_ms = f.now_ms.saturating_sub(t);
    if age_ms > f.max_age_s.saturating_mul(1000) {
        return Err(format!(
            "--fleet-report {name} is too old: its input {} was written {} s ago, more than \
                --max-report-age {} s; audit every node again and merge",
            terminal(which),
            age_ms / 1000,
            f.max_age_s
        ));
    }
    Ok(())
}

/// The fleet report is untrusted data: its verdict fields alone prove
/// nothing (docs/format.md §10). Everything the merge would have refused is
/// refused here again, from the report's own ranks, findings and inputs.
#[allow(clippy::too_many_arguments)]
fn judge_report_data(
    name: &str,
    engine: &str,
    v: &wire::AuditReport,
    group: &wire::Group,
    judged: &RanksJudged,
    inputs: &[wire::Input],
    g: &GroupVerdict,
    now_ms: u64,
) -> Result<(), String> {
    // Files: a rejecting file-level finding in the merge means a node was
    // not clean.
    if rules::unclean(v.files.iter().flat_map(|f| &f.findings)).0 > 0 {
        return Err(format!(
            "--fleet-report {name} lists rejecting file-level findings: a node's inventory was not \
                clean"
        ));
    }
    // Group findings: only notices about descriptors outside the current
    // incarnation (`"counted": false`, with their path, of a known code)
    // may stand: the same typed rule merge applies. (Merge also counts such
    // a notice naming a rank of its own report; a merged report no longer
    // says which report a notice came from, and merge wrote it counted.)
    for x in &group.findings {
        if rules::rejects_at(x, Place::Group) {
            return Err(format!(
                "--fleet-report {name} accepts group {engine} although it carries finding {} ({})",
                terminal(&x.code),
                terminal(&x.message)
            ));
        }
    }
    same_shape(name, engine, group, g)?;
    let (names, newest_input) = listed_inputs(name, inputs)?;
    // The report itself: written after its inputs, not from the future.
    let t = v.generated_unix_ms;
    if rules::beyond_slack(t, now_ms) || newest_input.is_some_and(|n| t < n) {
        return Err(format!(
            "--fleet-report {name} is dated {t}, which is in the future or before its own inputs"
        ));
    }
    // Ranks: no finding, every fact checked, from a listed input, of this
    // lifetime, each on its own GPU.
    let number = |i: usize| {
        group.ranks[i]
            .rank
            .map_or("?".to_string(), |n| n.to_string())
    };
    for (k, (r, breaches)) in group.ranks.iter().zip(&judged.breaches).enumerate() {
        // Numbered: `check_fleet` refused a rank without a number already.
        let n = number(k);
        if let Some(x) = r
            .findings
            .iter()
            .find(|x| rules::rejects_at(x, Place::Rank))
        {
            return Err(format!(
                "--fleet-report {name} accepts rank {n} of group {engine} although it carries \
                    finding {} ({})",
                terminal(&x.code),
                terminal(&x.message)
            ));
        }
        if let Some(x) = r.not_checked.first() {
            return Err(format!(
                "--fleet-report {name}: rank {n} of group {engine} was accepted with facts not \
                    checked ({}); import needs every node's facts checked: audit that node with \
                    kvcr audit --live --strict",
                terminal(x)
            ));
        }
        if !r.report.as_deref().is_some_and(|x| names.contains(&x)) {
            return Err(format!(
                "--fleet-report {name}: rank {n} of group {engine} comes from {}, which is not one \
                    of its inputs",
                r.report.as_deref().map_or("none".into(), |x| terminal(x).into_owned())
            ));
        }
        let shown = |x: &Option<String>| {
            x.as_deref()
                .map_or("none".into(), |x| terminal(x).into_owned())
        };
        for field in [
            rules::LifetimeField::Incarnation,
            rules::LifetimeField::Epoch,
        ] {
            for b in breaches {
                let RankBreach::Lifetime {
                    field: f,
                    mine,
                    group,
                } = b
                else {
                    continue;
                };
                if *f == field {
                    return Err(format!(
                        "--fleet-report {name}: rank {n} of group {engine} has {} {}, the group \
                            {}",
                        field.as_str(),
                        shown(mine),
                        shown(group)
                    ));
                }
            }
        }
        if breaches.contains(&RankBreach::NoGpu) {
            return Err(format!(
                "--fleet-report {name}: rank {n} of group {engine} has no valid GPU UUID ({})",
                shown(&r.gpu_uuid)
            ));
        }
        // One GPU (16 bytes) per rank: this rank's GPU as it spells it,
        // with the first rank that claims it.
        let first = judged
            .shared_gpus
            .iter()
            .find(|(_, claims)| claims[1..].contains(&k))
            .map(|(_, claims)| claims[0]);
        if let (Some(first), Some(gpu)) = (first, wire::gpu(r.gpu_uuid.as_deref())) {
            return Err(format!(
                "--fleet-report {name}: GPU {gpu} is claimed by ranks {} and {n} of group \
                    {engine}",
                number(first)
            ));
        }
    }
    Ok(())
}

/// The shape this node audited (tp, pp, model, geometry) is the one the
/// fleet report describes for group `engine`.
fn same_shape(
    name: &str,
    engine: &str,
    group: &wire::Group,
    g: &GroupVerdict,
) -> Result<(), String> {
    let shape_tp = (group.tp, g.tp);
    let shape_pp = (group.pp, g.pp);
    for (field, (there, here)) in [("tp", shape_tp), ("pp", shape_pp)] {
        if here.is_none() || there != here {
            let s = |x: Option<u64>| x.map_or_else(|| "none".to_string(), |v| v.to_string());
            return Err(format!(
                "--fleet-report {name} describes group {engine} with {field} {}, this node audited \
                    {field} {}",
                s(there),
                s(here)
            ));
        }
    }
    let json = |x: &dyn erased::Shown| x.shown();
    if g.model.is_none() || group.model != g.model {
        return Err(format!(
            "--fleet-report {name} describes group {engine} with model {}, this node audited model \
                {}",
            json(&group.model),
            json(&g.model)
        ));
    }
    if g.geometry.is_none() || group.geometry != g.geometry {
        return Err(format!(
            "--fleet-report {name} describes group {engine} with geometry {}, this node audited \
                geometry {}",
            json(&group.geometry),
            json(&g.geometry)
        ));
    }
    Ok(())
}

/// The fleet report's inputs: each names a host, no two the same host
/// (`rules::hosts`), and a boot id. Their report names, and the newest
/// input's time (`None` while no input names one).
fn listed_inputs<'i>(
    name: &str,
    inputs: &'i [wire::Input],
) -> Result<(Vec<&'i str>, Option<u64>), String> {
    let hosts = rules::hosts(inputs.iter().map(|i| i.host.as_deref()));
    let mut names: Vec<&str> = Vec::new();
    let mut newest_input: Option<u64> = None;
    for (k, i) in inputs.iter().enumerate() {
        if hosts.nameless.contains(&k) {
            return Err(format!(
                "--fleet-report {name}: input {} names no host",
                terminal(&i.report)
            ));
        }
        if hosts.repeats(k) {
            return Err(format!(
                "--fleet-report {name} lists two inputs from host {} (hostnames compare ignoring \
                    ASCII case and a trailing dot)",
                terminal(i.host.as_deref().unwrap_or_default())
            ));
        }
        if i.boot_id.is_none() {
            return Err(format!(
                "--fleet-report {name}: input {} names no boot id",
                terminal(&i.report)
            ));
        }
        names.push(&i.report);
        newest_input = newest_input.max(i.generated_unix_ms);
    }
    Ok((names, newest_input))
}

/// A model or geometry, as JSON, escaped for a message.
mod erased {
    pub trait Shown {
        fn shown(&self) -> String;
    }
    impl<T: serde::Serialize> Shown for Option<T> {
        fn shown(&self) -> String {
            match self {
                None => "none".into(),
                Some(v) => {
                    crate::format::text::terminal(&serde_json::to_string(v).unwrap_or_default())
                        .into_owned()
                }
            }
        }
    }
}

fn list(ranks: &[u64]) -> String {
    if ranks.is_empty() {
        "none".into()
    } else {
        crate::rules::compress_ranks(ranks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{judge, Candidate, Context, Expectations};
    use crate::testkit::{self, Desc};

    /// One clean two-rank group: its audit report as the gate reads it,
    /// and this node's verdict of it.
    fn report_and_verdict() -> (wire::AuditReport, GroupVerdict) {
        let dir = tempfile::tempdir().unwrap();
        let mut cands = Vec::new();
        for rank in 0..2 {
            let bytes = Desc::new("unit", rank, 2, 1).bytes();
            let name = format!("rank-{rank}.json");
            std::fs::write(dir.path().join(&name), &bytes).unwrap();
            let p = crate::format::descriptor::parse_descriptor(&bytes);
            cands.push(Candidate {
                path: name.clone(),
                raw_path: name.into_bytes(),
                name_rank: Some(rank),
                mode: Some(0o600),
                ident: p.ident,
                descriptor: p.descriptor,
                findings: p.findings,
            });
        }
        let doc = crate::api::audit(dir.path(), &crate::api::AuditOptions::default()).unwrap();
        let v: wire::AuditReport = serde_json::from_str(doc.as_json()).unwrap();
        let expect = Expectations::default();
        let ctx = Context {
            now_unix_ms: testkit::CREATED_UNIX_MS + 1000,
            node: None,
            expect: &expect,
            invocation: &Default::default(),
        };
        (v, judge(cands, Vec::new(), &ctx).groups.remove(0))
    }

    /// Without a world size here (was `unwrap_or(0)`: no rank missing,
    /// every rank "out of range"), the ranks check refuses with the
    /// lifetime check's own words, naming both world sizes.
    #[test]
    fn no_world_size_here_is_refused_as_a_world_size_mismatch_not_as_odd_ranks() {
        let (v, g) = report_and_verdict();
        assert_eq!(g.world_size, Some(2));
        let judged = judge_ranks(&[], &v.groups[0], g.world_size);
        assert_eq!(
            every_rank_once("f.json", "unit", &v.groups[0], &judged, &g),
            Ok(())
        );
        assert_eq!(same_lifetime("f.json", "unit", &v.groups[0], &g), Ok(()));
        let g = GroupVerdict {
            world_size: None,
            ..g
        };
        let judged = judge_ranks(&[], &v.groups[0], g.world_size);
        let e = every_rank_once("f.json", "unit", &v.groups[0], &judged, &g).unwrap_err();
        assert_eq!(
            e,
            "--fleet-report f.json accepted group unit with world_size 2, this node holds \
             world_size none"
        );
        assert_eq!(same_lifetime("f.json", "unit", &v.groups[0], &g), Err(e));
    }
}
