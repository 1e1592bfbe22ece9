//! KV101 (wrong rank), KV102 (duplicate rank) and KV103 (missing rank).

use super::claims::{name_bounded, Claims, MAX_NAMED};
use super::Row;
use crate::format::finding::{Code, Finding, Subject};
use crate::format::rankset::{compress_ranks, RankSet};
use std::collections::BTreeMap;

/// Rules one descriptor can break on its own: its rank and its world size.
pub(crate) fn own_rank_rules(rows: &mut [Row]) {
    for row in rows.iter_mut() {
        let name_rank = row.cand.name_rank;
        let judged = row.with_desc(|row, d| {
            let mut ok = true;
            match name_rank {
                Some(n) if n != d.rank => {
                    ok = false;
                    row.reject(
                        Finding::reject(
                            Code::KV101,
                            format!(
                                "file name says rank {n} but the content says rank {}",
                                d.rank
                            ),
                        )
                        .values(n, d.rank),
                    );
                }
                None => {
                    ok = false;
                    row.reject(
                        Finding::reject(
                            Code::KV101,
                            "the rank in the file name does not fit in 64 bits",
                        )
                        .values(d.rank, "out of range"),
                    );
                }
                _ => {}
            }
            if d.rank >= d.world_size {
                ok = false;
                row.reject(
                    Finding::reject(
                        Code::KV101,
                        format!("rank {} is not below world_size {}", d.rank, d.world_size),
                    )
                    .values(format!("rank < {}", d.world_size), d.rank),
                );
            }
            match d.tp.checked_mul(d.pp) {
                Some(p) if p == d.world_size => {}
                p => {
                    ok = false;
                    let prod = p.map_or("overflow".to_string(), |p| p.to_string());
                    row.reject(
                        Finding::reject(
                            Code::KV101,
                            format!(
                                "world_size {} is not tp × pp = {} × {} = {prod}",
                                d.world_size, d.tp, d.pp
                            ),
                        )
                        .values(prod, d.world_size),
                    );
                }
            }
            row.check("rank", ok);
        });
        if judged.is_none() && name_rank.is_none() {
            row.reject(Finding::reject(
                Code::KV101,
                "the rank in the file name does not fit in 64 bits",
            ));
        }
    }
}

/// Places rows in rank slots: KV102 for two current descriptors on one rank,
/// KV103 (group level) for each rank 0..world_size-1 with none. Returns the
/// missing ranks as inclusive runs.
pub(crate) fn slots(
    rows: &mut [Row],
    world_size: Option<u64>,
    local: Option<&RankSet>,
    hints: &BTreeMap<u64, Vec<String>>,
    group_findings: &mut Vec<Finding>,
) -> Vec<(u64, u64)> {
    if let Some(l) = local {
        for row in rows.iter_mut() {
            if let Some(s) = row.slot.filter(|&s| !l.contains(s)) {
                row.reject(
                    Finding::reject(
                        Code::KV101,
                        format!("rank {s} is not one of this node's ranks ({l})"),
                    )
                    .values(format!("a rank in {l}"), s),
                );
            }
        }
    }
    let claims = Claims::new(
        rows,
        rows.iter()
            .enumerate()
            .filter_map(|(i, r)| r.slot.map(|s| (s, i))),
    );
    let found: Vec<Option<(u64, String, String)>> = (0..rows.len())
        .map(|i| {
            let slot = rows[i].slot?;
            let rv = claims.rivals(rows, &slot, i)?;
            let named: Vec<String> = rv
                .named
                .iter()
                .map(|&j| rows[j].path().to_string())
                .collect();
            let others = name_bounded(&named, rv.total);
            // Each copy names itself: "this one" alone says nothing in a
            // list of rows that look alike.
            let msg = format!(
                "rank {slot} is claimed by {} current descriptors: {} (this one) and {others}",
                rv.total + 1,
                rows[i].path()
            );
            Some((slot, msg, others))
        })
        .collect();
    for (row, f) in rows.iter_mut().zip(found) {
        if let Some((_, msg, others)) = f {
            row.reject(Finding::reject(Code::KV102, msg).values("one descriptor per rank", others));
        }
    }
    let present: std::collections::BTreeSet<u64> = rows.iter().filter_map(|r| r.slot).collect();
    let mut missing = Vec::new();
    if let Some(ws) = world_size {
        // world_size is bounded (≤ 4096) by the schema and the profile parser.
        for rank in 0..ws.min(crate::format::descriptor::MAX_WORLD_SIZE) {
            if local.is_some_and(|l| !l.contains(rank)) {
                continue; // expected on another node
            }
            if !present.contains(&rank) {
                missing.push(rank);
            }
        }
        if let Some(l) = local {
            let outside: Vec<u64> = l.iter().filter(|&r| r >= ws).collect();
            if !outside.is_empty() {
                group_findings.push(
                    Finding::reject(
                        Code::KV101,
                        format!(
                            "local ranks {} are not below world_size {ws}",
                            compress_ranks(&outside)
                        ),
                    )
                    .values(format!("ranks below {ws}"), compress_ranks(&outside))
                    .about(Subject::Request),
                );
            }
        }
        if !missing.is_empty() {
            let list = compress_ranks(&missing);
            let mut msg = format!(
                "no current descriptor for rank{} {list} of {ws}",
                if missing.len() == 1 { "" } else { "s" }
            );
            // Bounded: many groups missing one rank must not each list
            // every unusable file of that name.
            let related = || missing.iter().filter_map(|m| hints.get(m));
            let named: Vec<String> = related().flatten().take(MAX_NAMED).cloned().collect();
            if !named.is_empty() {
                let total = related().map(Vec::len).sum();
                msg.push_str(&format!(
                    "; unusable files with that name: {}",
                    name_bounded(&named, total)
                ));
            }
            let want = match local {
                Some(l) => format!("ranks {l}"),
                None => format!("ranks 0-{}", ws - 1),
            };
            group_findings
                .push(Finding::reject(Code::KV103, msg).values(want, format!("missing {list}")));
        }
    }
    crate::format::rankset::runs(missing)
}
