//! Rules across the groups of one inventory (docs/format.md §3.4, §5.5):
//! one memory handle backs one allocation of one group (KV111), and one
//! inventory holds one node's descriptors (KV110). The rules across the
//! nodes of one group (docs/format.md §10) are `rules::fleet`'s.
//!
//! Only current descriptors count, as everywhere: each group's current
//! incarnation is selected exactly as `judge_group` selects it.

use super::claims::{name_bounded, MAX_NAMED};
use super::handles::{each_key, HandleKey};
use super::{incarnation, Candidate, Context};
use crate::format::descriptor::EngineId;
use crate::format::finding::{Code, Finding};
use std::collections::BTreeMap;
use uuid::Uuid;

/// One candidate's handles that other groups use too.
struct Shared {
    /// The allocation whose handle is named.
    first_alloc: usize,
    /// Other groups' places using it (at most `MAX_NAMED`), and how many.
    named: Vec<String>,
    total: usize,
    /// How many of this candidate's handles other groups use.
    handles: usize,
}

/// Adds KV111 to current candidates whose handle another group also uses,
/// and returns, per engine, the group-level KV110 findings when the groups
/// name more than one node.
pub(crate) fn check(
    by_engine: &mut BTreeMap<EngineId, Vec<Candidate>>,
    ctx: &Context,
) -> BTreeMap<EngineId, Vec<Finding>> {
    let engines: Vec<EngineId> = by_engine.keys().cloned().collect();
    // Pass 1: one 8-byte word per current handle, its fingerprint's high
    // bits and its group's index in the low `bits`; one sort finds the
    // fingerprints seen in two or more groups. A fingerprint cut short can
    // only add suspects, which pass 2 checks exactly. Most inventories have
    // none, and nothing larger is ever held for them.
    let bits = usize::BITS - by_engine.len().leading_zeros();
    let group_mask = (1u64 << bits) - 1;
    let mut current: Vec<Vec<usize>> = Vec::with_capacity(by_engine.len());
    // Sized once for every handle of every group (those of descriptors that
    // are not current are a few spare slots): grown by doubling, this is
    // the largest allocation of a large audit at its peak.
    let mut prints: Vec<u64> = Vec::with_capacity(
        by_engine
            .values()
            .flatten()
            .filter_map(|c| c.descriptor.as_ref())
            .map(|d| d.alloc_summary.handles.len())
            .sum(),
    );
    // Each group's nodes: those its current descriptors name.
    let mut nodes: Vec<std::collections::BTreeSet<(String, Uuid)>> = Vec::new();
    for (gi, (engine, cands)) in by_engine.iter().enumerate() {
        let profile = ctx
            .expect
            .profile
            .as_ref()
            .filter(|p| &p.engine_id == engine);
        let sel = incarnation::select(cands, super::pinned(cands, ctx, profile), &mut Vec::new());
        let mut named = std::collections::BTreeSet::new();
        let mut last: Option<(&str, Uuid)> = None;
        let mut mine = Vec::new();
        for (ci, c) in cands.iter().enumerate() {
            let Some(d) = c.descriptor.as_ref().filter(|_| sel.is_current(c)) else {
                continue;
            };
            mine.push(ci);
            prints.extend(each_key(d).map(|k| (k.fingerprint() & !group_mask) | gi as u64));
            // A group's descriptors usually name one node: the hostname is
            // lowered (a new String) only when it differs from the last one
            // inserted, compared as the set compares it.
            let same = last.is_some_and(|(h, b): (&str, Uuid)| {
                b == d.node.boot_id && h.eq_ignore_ascii_case(&d.node.hostname)
            });
            if !same {
                named.insert((d.node.hostname.to_ascii_lowercase(), d.node.boot_id));
                last = Some((d.node.hostname.as_str(), d.node.boot_id));
            }
        }
        current.push(mine);
        nodes.push(named);
    }
    prints.sort_unstable();
    prints.dedup();
    // Equal high bits in neighbouring words (deduplicated, so of two
    // groups): a suspect.
    let mut suspects: Vec<u64> = prints
        .windows(2)
        .filter(|w| w[0] & !group_mask == w[1] & !group_mask)
        .map(|w| w[0] & !group_mask)
        .collect();
    drop(prints);
    suspects.dedup();

    // Pass 2: the exact keys of the suspect fingerprints only.
    let mut claims: Vec<(HandleKey, usize, usize, usize)> = Vec::new();
    if !suspects.is_empty() {
        for (gi, cands) in by_engine.values().enumerate() {
            for &ci in &current[gi] {
                let Some(d) = cands[ci].descriptor.as_ref() else {
                    continue;
                };
                for (ai, k) in each_key(d).enumerate() {
                    if suspects
                        .binary_search(&(k.fingerprint() & !group_mask))
                        .is_ok()
                    {
                        claims.push((k, gi, ci, ai));
                    }
                }
            }
        }
    }
    claims.sort_unstable_by(|a, b| a.0.cmp(&b.0).then((a.1, a.2, a.3).cmp(&(b.1, b.2, b.3))));
    let mut found: BTreeMap<(usize, usize), Shared> = BTreeMap::new();
    let mut i = 0;
    while i < claims.len() {
        let mut j = i + 1;
        while j < claims.len() && claims[j].0 == claims[i].0 {
            j += 1;
        }
        let run = &claims[i..j];
        if run.iter().any(|c| c.1 != run[0].1) {
            // Claims per group in this run, so each member's count of
            // others is one lookup, not a scan.
            let mut per_group: BTreeMap<usize, usize> = BTreeMap::new();
            for c in run {
                *per_group.entry(c.1).or_default() += 1;
            }
            for &(_, gi, ci, ai) in run {
                let total = run.len() - per_group[&gi];
                let entry = found.entry((gi, ci)).or_insert_with(|| {
                    let named = run
                        .iter()
                        .filter(|o| o.1 != gi)
                        .take(MAX_NAMED)
                        .map(|o| {
                            let p = &by_engine[&engines[o.1]][o.2].path;
                            format!("group {:?} ({p})", engines[o.1])
                        })
                        .collect();
                    Shared {
                        first_alloc: ai,
                        named,
                        total,
                        handles: 0,
                    }
                });
                entry.handles += 1;
            }
        }
        i = j;
    }
    add_shared(by_engine, &engines, found);

    across_nodes(&nodes, &engines)
}

/// KV111 on each current descriptor `found` names (group index,
/// candidate index): a handle another group also uses.
fn add_shared(
    by_engine: &mut BTreeMap<EngineId, Vec<Candidate>>,
    engines: &[EngineId],
    found: BTreeMap<(usize, usize), Shared>,
) {
    for ((gi, ci), sh) in found {
        let Shared {
            first_alloc: ai,
            named,
            total,
            handles: shared,
        } = sh;
        let c = &mut by_engine.get_mut(&engines[gi]).expect("engine")[ci];
        let who = name_bounded(&named, total);
        let more = if shared > 1 {
            format!("; {shared} of this descriptor's handles are used by other groups")
        } else {
            String::new()
        };
        let f = Finding::reject(
            Code::KV111,
            format!(
                "the handle in allocations[{ai}] is also used by {who}: one memory would back two \
                    groups{more}"
            ),
        )
        .values(
            "a handle used by one group only",
            format!("also used by {who}"),
        )
        .at(c.path.clone());
        c.findings.push(f);
    }
}

/// KV110 across groups: when the current descriptors of two or more groups
/// name more than one node between them (`nodes`, per group in `engines`'
/// order), every such group is rejected (one group alone is judged rank by
/// rank in consistency.rs).
fn across_nodes(
    nodes: &[std::collections::BTreeSet<(String, Uuid)>],
    engines: &[EngineId],
) -> BTreeMap<EngineId, Vec<Finding>> {
    let mut by_node: BTreeMap<&(String, Uuid), Vec<&str>> = BTreeMap::new();
    for (gi, ns) in nodes.iter().enumerate() {
        for n in ns {
            by_node.entry(n).or_default().push(&engines[gi]);
        }
    }
    let groups_with_nodes = nodes.iter().filter(|n| !n.is_empty()).count();
    let mut out: BTreeMap<EngineId, Vec<Finding>> = BTreeMap::new();
    if by_node.len() > 1 && groups_with_nodes > 1 {
        let described: Vec<String> = by_node
            .iter()
            .take(MAX_NAMED)
            .map(|((h, b), gs)| {
                let named: Vec<String> = gs.iter().take(3).map(|g| format!("{g:?}")).collect();
                format!("{h:?} boot {b} (group {})", name_bounded(&named, gs.len()))
            })
            .collect();
        let list = name_bounded(&described, by_node.len());
        for (gi, n) in nodes.iter().enumerate() {
            if n.is_empty() {
                continue;
            }
            out.entry(engines[gi].clone()).or_default().push(
                Finding::reject(
                    Code::KV110,
                    format!(
                        "the inventory holds descriptors of {} nodes: {list}; one inventory is one \
                            node's, so no group in it can be trusted",
                        by_node.len()
                    ),
                )
                .values("one node per inventory", format!("{} nodes", by_node.len())),
            );
        }
    }
    out
}
