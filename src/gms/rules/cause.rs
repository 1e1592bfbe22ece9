//! The GMS verdict's words (docs/format.md §14.8): each artifact's cause
//! (the rejecting finding first in the root-cause order, with its code)
//! and action (that code's safe next step, `kvcr explain CODE`), and the
//! run's one-line cause. The core words them; the printers
//! (`crate::gms::print`) only print them.

use super::{Artifact, Facts, Run};
use crate::format::message::render;
use crate::format::names::display_path;
use crate::rules::explain;

/// An artifact's headline: (cause, action).
pub fn headline(a: &Artifact) -> (String, String) {
    if let Some(f) = a.cause() {
        let cause = format!("{} ({})", render(&f.message), f.code);
        let action = format!("{}; see `kvcr explain {}`", explain::action(f.code), f.code);
        return (cause, action);
    }
    let notices = a.findings.len();
    let cause = ok_cause(a);
    let action = if notices == 0 {
        "nothing to do".to_string()
    } else {
        format!(
            "nothing required; {} below (`kvcr explain CODE` for each)",
            plural(notices, "notice")
        )
    };
    (cause, action)
}

pub fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn ok_cause(a: &Artifact) -> String {
    match &a.facts {
        Facts::Lease(l) => {
            let (total, free) = l.header.map_or((0, 0), |h| (h.total_blocks, h.free_count));
            format!(
                "a consistent lease ring: {total} blocks, {free} free, no mutation stranded{}",
                if let Some(why) = l.owners_not_checked.as_deref().filter(|_| l.live) {
                    format!("; owners not checked: {why}")
                } else if l.live {
                    ", every owner alive".to_string()
                } else {
                    "; owners not checked (add --live)".to_string()
                }
            )
        }
        Facts::Recovery(r) => format!(
            "RECOVERED: GMS would recover {} published block(s){}",
            r.scan.as_ref().map_or(0, |s| s.valid),
            if r.binding_checked {
                ", and the binding matches"
            } else {
                " (binding not checked)"
            }
        ),
        Facts::Cohort(c) => match (&c.active, &c.predecessor) {
            (Some(a), Some(p)) => format!(
                "cohort {} active; its predecessor {} is fenced",
                short(a),
                short(p)
            ),
            (Some(a), None) if c.flavour == crate::gms::rules::Flavour::Sglang => format!(
                "cohort {} active; no writer of an older cohort runs",
                short(a)
            ),
            (Some(a), None) => format!("cohort {} active; no predecessor to fence", short(a)),
            (None, _) => "no active cohort yet; no older writer runs".to_string(),
        },
        Facts::Superseded(_) => "a superseded format".to_string(),
    }
}

fn short(id: &str) -> String {
    format!("{}…", &id[..8.min(id.len())])
}

/// The run's one-line cause (the JSON document's `cause`).
pub fn run_cause(run: &Run) -> String {
    if run.artifacts.is_empty() {
        return if run.looked.is_empty() {
            "empty: no GMS artifact in the paths given".to_string()
        } else {
            format!(
                "empty: no GMS artifact where GMS puts them (looked at {})",
                looked_list(run)
            )
        };
    }
    let rejected: Vec<&Artifact> = run.artifacts.iter().filter(|a| a.rejected()).collect();
    match rejected.first() {
        Some(a) => format!(
            "rejected: {}: {}{}",
            display_path(&a.path),
            headline(a).0,
            if rejected.len() > 1 {
                format!(" (and {} more rejected)", rejected.len() - 1)
            } else {
                String::new()
            }
        ),
        None => format!(
            "ok: {}, none rejected",
            plural(run.artifacts.len(), "artifact")
        ),
    }
}

fn looked_list(run: &Run) -> String {
    run.looked
        .iter()
        .map(|l| {
            format!(
                "{} ({}{})",
                display_path(&l.path),
                l.what,
                if l.present { "" } else { ", absent" }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}
