//! The import gate (docs/format.md §8.9): what must hold, besides the audit's
//! verdict, before kvcr makes a GPU call. Each check returns the reason it
//! refuses, or nothing; [`crate::import::gate::order`] asks them in the documented
//! order for `kvcr import` and the readiness gate alike, and a dry run lists
//! every one that would refuse.
//!
//! - the declared profile (exit 2),
//! - for a local part (`--local-ranks`), a fresh fleet report proving the
//!   whole group (exit 1; [`super::fleet`]),
//! - every live fact checked (exit 1).

use crate::format::profile::Profile;
use crate::format::text::terminal;
use crate::import::report::{Check, Refusal};
use crate::rules::GroupVerdict;

/// The declared profile an import requires, or why there is none.
pub fn profile(p: Option<&Profile>) -> Option<Refusal> {
    let msg = match p {
        None => "no deployment profile: import requires the declared profile (--profile FILE or \
            $KVCR_PROFILE) with engine_id, world_size, tp, pp, model, geometry and \
            gpus"
            .to_string(),
        Some(p) => {
            let missing = p.missing_for_import();
            if missing.is_empty() {
                return None;
            }
            format!(
                "the deployment profile for {} does not declare {}: import requires engine_id, \
                    world_size, tp, pp, model, geometry and gpus",
                terminal(&p.engine_id),
                missing.join(", ")
            )
        }
    };
    Some(Refusal::new(Check::Profile, msg))
}

/// The profile's `"require_content": true` (docs/format.md §3.6, §4): every
/// planned allocation must carry a `content` member. Names the first ones
/// missing it (rank and allocation id) and how many there are.
pub fn content(p: Option<&Profile>, plan: &crate::import::plan::Plan) -> Option<Refusal> {
    if !p.is_some_and(|p| p.require_content) {
        return None;
    }
    let missing: Vec<String> = plan
        .ranks
        .iter()
        .flat_map(|r| {
            r.allocations
                .iter()
                .filter(|a| a.content.is_none())
                .map(move |a| format!("rank {} allocation {}", r.rank, terminal(&a.id)))
        })
        .collect();
    if missing.is_empty() {
        return None;
    }
    let shown: Vec<&str> = missing.iter().take(3).map(String::as_str).collect();
    let more = if missing.len() > 3 {
        format!(" and {} more", missing.len() - 3)
    } else {
        String::new()
    };
    Some(Refusal::new(
        Check::Content,
        format!(
            "the profile requires a content check (require_content) and {} of {} allocations have \
                none: {}{more}",
            missing.len(),
            plan.allocations(),
            shown.join(", ")
        ),
    ))
}

/// Every live fact the group was judged on that could not be read, one
/// entry per rank and fact ("rank 0: boot_id: why").
pub fn not_checked(g: &GroupVerdict) -> Option<Refusal> {
    let facts: Vec<String> = g
        .ranks
        .iter()
        .flat_map(|r| {
            let rank = r.rank.map_or("?".to_string(), |n| n.to_string());
            r.not_checked
                .iter()
                .map(move |f| format!("rank {rank}: {f}"))
        })
        .collect();
    if facts.is_empty() {
        return None;
    }
    const SHOWN: usize = 8;
    let mut list = facts
        .iter()
        .take(SHOWN)
        .map(|s| terminal(s).into_owned())
        .collect::<Vec<_>>()
        .join("; ");
    if facts.len() > SHOWN {
        list.push_str(&format!("; and {} more", facts.len() - SHOWN));
    }
    Some(Refusal::new(
        Check::NotChecked,
        format!(
            "{} live fact{} could not be checked, and import checks every one: not checked: {list}",
            facts.len(),
            if facts.len() == 1 { "" } else { "s" }
        ),
    ))
}
