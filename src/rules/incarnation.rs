//! KV107 and the superseded part of KV108: which owner lifetime is current.
//!
//! The current incarnation is the profile's, else the one with the highest
//! epoch. Descriptors outside it never count toward the group and never
//! reject it: they become notices. kvcr never falls back to an older one.

use super::Candidate;
use crate::format::finding::{Code, Finding, Message};
use std::collections::BTreeMap;
use uuid::Uuid;

pub(crate) struct Selection {
    pub current: Option<Uuid>,
    pub epoch: Option<u64>,
    /// Incarnations tied on the highest epoch (all count as current; the
    /// group is rejected with KV107).
    tied: Vec<Uuid>,
    /// The profile pinned the current incarnation.
    pinned: bool,
    /// Notices for descriptors outside the current incarnation.
    pub notices: Vec<Finding>,
}

impl Selection {
    /// On a tie, the finding every descriptor of a tied lifetime carries:
    /// none is usable alone until one lifetime is pinned.
    pub fn tie_finding(&self, c: &Candidate) -> Option<Finding> {
        let inc = c.incarnation()?;
        if self.tied.len() < 2 || !self.tied.contains(&inc) {
            return None;
        }
        let others: Vec<String> = self
            .tied
            .iter()
            .filter(|u| **u != inc)
            .map(|u| format!("{}…", &u.to_string()[..8]))
            .collect();
        Some(
            Finding::reject(
                Code::KV107,
                format!(
                    "tied with incarnation {}: usable only once one lifetime is pinned",
                    others.join(", ")
                ),
            )
            .values("one current incarnation", inc),
        )
    }

    /// Decided from the candidate's own incarnation and epoch, never from
    /// its path: two files whose paths print alike are still judged apart.
    pub fn is_current(&self, c: &Candidate) -> bool {
        let (Some(current), Some(inc)) = (self.current, c.incarnation()) else {
            return true; // nothing identifiable, or cannot prove it is not current
        };
        if inc == current || self.tied.contains(&inc) {
            return true;
        }
        // Another lifetime: out when pinned away, or proven older by epoch.
        !(self.pinned || (c.epoch().is_some() && self.epoch.is_some()))
    }
}

/// The highest epoch any descriptor of `engine` states (parsed, or with
/// only its identity readable; current, superseded or rejected alike): the
/// current incarnation's epoch when nothing is pinned (§5.1), and the one a
/// producer's new incarnation must exceed (docs/format.md §3.5). `None`
/// when no descriptor of `engine` states an epoch.
pub fn highest_epoch(
    cands: &[Candidate],
    engine: &crate::format::descriptor::EngineId,
) -> Option<u64> {
    cands
        .iter()
        .filter(|c| c.engine_id() == Some(engine))
        .filter_map(Candidate::epoch)
        .max()
}

pub(crate) fn select(
    cands: &[Candidate],
    pin: Option<Uuid>,
    group_findings: &mut Vec<Finding>,
) -> Selection {
    // Highest epoch seen per incarnation.
    let mut epochs: BTreeMap<Uuid, u64> = BTreeMap::new();
    for c in cands {
        if let (Some(i), Some(e)) = (c.incarnation(), c.epoch()) {
            let slot = epochs.entry(i).or_insert(e);
            *slot = (*slot).max(e);
        }
    }
    let mut sel = Selection {
        current: None,
        epoch: None,
        tied: Vec::new(),
        pinned: false,
        notices: Vec::new(),
    };
    if let Some(pinned) = pin {
        sel.current = Some(pinned);
        sel.pinned = true;
        sel.epoch = epochs.get(&pinned).copied();
    } else if let Some(max) = epochs.values().copied().max() {
        let tied: Vec<Uuid> = epochs
            .iter()
            .filter(|(_, &e)| e == max)
            .map(|(i, _)| *i)
            .collect();
        sel.current = Some(tied[0]);
        sel.epoch = Some(max);
        if tied.len() > 1 {
            let names: Vec<String> = tied.iter().map(|u| u.to_string()).collect();
            // Who wrote each lifetime, and when: what the operator needs to
            // tell the dead owner from the live one.
            let mut said = Message::from("incarnations ");
            for (i, u) in tied.iter().enumerate() {
                let and = if i == 0 { "" } else { " and " };
                said = said
                    .text(format!("{and}{u} ("))
                    .then(lifetime(cands, *u))
                    .text(")");
            }
            group_findings.push(
                Finding::reject(
                    Code::KV107,
                    said.text(format!(
                        " tie on the highest epoch {max}; \
                         cannot tell which owner lifetime is current"
                    )),
                )
                .values("one incarnation at the highest epoch", names.join(", ")),
            );
            sel.tied = tied;
        }
    }

    let Some(current) = sel.current else {
        return sel; // nothing identifiable: every candidate counts as current
    };
    for c in cands {
        if sel.is_current(c) {
            continue;
        }
        let Some(inc) = c.incarnation() else {
            continue; // unreachable: is_current holds for these
        };
        let f = match (pin, c.epoch(), sel.epoch) {
            (Some(pinned), _, _) => Finding::notice(
                Code::KV107,
                format!("incarnation {inc} is not the pinned incarnation {pinned}; not counted"),
            )
            .values(pinned, inc),
            (None, Some(e), Some(cur)) => Finding::notice(
                Code::KV108,
                format!("superseded by incarnation {current} (epoch {cur}); not counted"),
            )
            .values(format!("epoch {cur}"), format!("epoch {e}")),
            _ => continue,
        };
        sel.notices.push(Finding {
            counted: false,
            ..f.at(c.path.clone())
        });
    }
    // In path order, not in the order the files were found: the report must
    // not depend on the walk (or on a parallel reader).
    sel.notices.sort_by(|a, b| a.path.cmp(&b.path));
    sel
}

/// "owner pid 4242, created 2025-11-30 07:10:25 UTC" for one incarnation:
/// its descriptors' owner pids (at most 4) and their earliest seal time (a
/// moment the printer writes).
fn lifetime(cands: &[Candidate], inc: Uuid) -> Message {
    let mut pids = std::collections::BTreeSet::new();
    let mut created: Option<u64> = None;
    for d in cands
        .iter()
        .filter(|c| c.incarnation() == Some(inc))
        .filter_map(|c| c.descriptor.as_ref())
    {
        pids.insert(d.owner.pid);
        created = Some(created.map_or(d.created_unix_ms, |c| c.min(d.created_unix_ms)));
    }
    let mut list: Vec<String> = pids.iter().take(4).map(|p| p.to_string()).collect();
    if pids.len() > 4 {
        list.push(format!("and {} more", pids.len() - 4));
    }
    let who = match list.len() {
        0 => "owner pid unknown".to_string(),
        1 => format!("owner pid {}", list[0]),
        _ => format!("owner pids {}", list.join(", ")),
    };
    match created {
        Some(ms) => Message::from(who).text(", created ").unix_ms(ms),
        None => Message::from(who),
    }
}
