//! The order of answers up to the driver (docs/format.md §8.9), in one
//! place for `kvcr import` ([`crate::import::run::steps::import`], its dry run too)
//! and the readiness gate ([`crate::api::gate`]):
//!
//! 1. the declared profile (a usage error, exit 2; a dry run lists it);
//! 2. the live audit, one group ([`select::select`]): no descriptor, a
//!    rejected group or a rejecting file anywhere in the inventory (exit 1);
//! 3. the fleet proof of a local part (exit 1);
//! 4. the plan, from the very descriptors the audit judged, and the
//!    profile's `require_content` (exit 1).
//!
//! What comes next is the caller's: `kvcr import` opens the driver (exit 2)
//! and only then answers facts that could not be checked ([`not_checked`],
//! exit 1) before any GPU call; the readiness gate asks no driver (the
//! engine has its own) and answers [`not_checked`] straight away.
//!
//! A real import and the readiness gate stop at the first refusal; a dry
//! run collects each refusal the real import would stop at and goes on.

use crate::format::descriptor::Descriptor;
use crate::format::failure::Failure;
use crate::import::gate::checks;
use crate::import::plan::select::{self, Plan};
use crate::import::report::Refusal;
use crate::import::report::{rejecting_files, ImportReport, Mode};
use crate::io::node::NodeProbe;
use crate::print::audit::AuditRun;
use crate::rules::{GroupVerdict, Verdict};
use crate::service::audit::Inventory;
use crate::service::audit::{self, Audited};
use std::collections::BTreeMap;
use std::path::Path;

/// What the gates before the driver are asked.
pub struct Inputs<'a> {
    pub inventory: &'a Inventory,
    /// `--fleet-report`: proof of the whole group for a local part.
    pub fleet_report: Option<&'a Path>,
    /// `--max-report-age`, seconds.
    pub max_report_age_s: u64,
    pub probe: &'a dyn NodeProbe,
    /// Show the audit's progress bar on stderr.
    pub progress: bool,
}

/// How far the gates before the driver let the import go.
pub enum Decision {
    /// Accepted so far: the group (its index in [`Answer::audited`]'s
    /// `judgement.groups`: the audit's verdict itself, not a copy) and the
    /// plan of its import.
    Go { group: usize, plan: Plan },
    /// Refused: the report says why; `audit` when the table prints the
    /// live audit with it.
    Refused { audit: bool },
}

/// The answer of the gates before the driver.
pub struct Answer {
    /// The live audit (not strict: facts not checked are answered later).
    pub audited: AuditRun,
    /// The descriptors it judged, by raw path: what the plan is made from.
    pub descriptors: BTreeMap<Vec<u8>, Descriptor>,
    /// The import report so far (engine, incarnation and epoch once a group
    /// is selected; its audit, files or refusals when refused).
    pub report: ImportReport,
    /// A dry run's refusals so far, in the order of answers (empty for a
    /// real import and the readiness gate, which stop at the first).
    pub refusals: Vec<Refusal>,
    /// How far the import may go.
    pub gated: Decision,
}

/// Runs the gates before the driver, in the order of answers (module docs).
/// `Err` is a run that cannot happen: no or an incomplete profile (not in
/// a dry run), an unreadable root, several groups without an engine (exit
/// 2), an internal error while planning (exit 70).
pub fn before_driver(g: &Inputs, mode: Mode) -> Result<Answer, Failure> {
    let dry = mode == Mode::DryRun;
    let expect = &g.inventory.expect;
    let mut refusals = Vec::new();
    if let Some(r) = checks::profile(expect.profile.as_ref()) {
        if !dry {
            return Err(Failure::usage(r.message, Some(profile_hint(mode).into())));
        }
        refusals.push(r);
    }
    // Not strict: facts not checked are an answer of their own, after the
    // driver (the readiness gate asks none).
    let Audited {
        run: audited,
        descriptors,
    } = audit::audit(g.inventory, Some(g.probe), g.progress, true, false)?;
    let mut report = ImportReport::before_gate(&audited.meta, &audited.root, mode);
    let gated = gate_group(g, dry, &audited, &descriptors, &mut report, &mut refusals)?;
    Ok(Answer {
        audited,
        descriptors,
        report,
        refusals,
        gated,
    })
}

/// What to do about no or an incomplete profile.
fn profile_hint(mode: Mode) -> &'static str {
    match mode {
        Mode::Gate => "pass the profile the group was deployed with (docs/format.md §4)",
        _ => concat!(
            "write the profile the group was deployed with (docs/format.md §4; ",
            "`kvcr schema profile`), or plan without one: kvcr import --dry-run"
        ),
    }
}

/// Steps 2–4 (module docs) on the audit's judgement.
fn gate_group(
    g: &Inputs,
    dry: bool,
    audited: &AuditRun,
    descriptors: &BTreeMap<Vec<u8>, Descriptor>,
    report: &mut ImportReport,
    refusals: &mut Vec<Refusal>,
) -> Result<Decision, Failure> {
    let judgement = &audited.judgement;
    let files = rejecting_files(&judgement.files);
    // A dry run of a refused group still says that the real import would
    // have stopped at the profile first (exit 2).
    let Some(group) = select::select(&judgement.groups, g.inventory.expect.engine.as_deref())?
    else {
        report.files = files;
        report.refusals = refusals.clone();
        return Ok(Decision::Refused { audit: true });
    };
    report.engine_id = Some(group.engine_id.clone());
    report.incarnation = group.incarnation;
    report.epoch = group.epoch;
    if group.verdict == Verdict::Reject || !files.is_empty() {
        // Refused before any GPU call.
        report.audit = Some(group.clone());
        report.files = files;
        report.refusals = refusals.clone();
        return Ok(Decision::Refused { audit: true });
    }
    // A refusal from here on stops a real import and the readiness gate;
    // a dry run lists it and goes on.
    let mut refuse = |r: Refusal| {
        if dry {
            refusals.push(r);
            None
        } else {
            report.refusals.push(r);
            Some(Decision::Refused { audit: false })
        }
    };
    // A local part needs proof of the whole group.
    let fleet = super::fleet::Fleet {
        report: g.fleet_report,
        max_age_s: g.max_report_age_s,
        now_ms: audited.now_ms,
    };
    if let Some(stop) =
        super::fleet::fleet(&fleet, group, audited.node.as_ref()).and_then(&mut refuse)
    {
        return Ok(stop);
    }
    // Plan from the very descriptors the audit judged.
    let plan = Plan::from_group(group, descriptors).map_err(|e| {
        Failure::internal(
            format!("internal error while planning: {e}"),
            Some("nothing was imported; please report this".into()),
        )
    })?;
    // The profile's require_content.
    if let Some(stop) =
        checks::content(g.inventory.expect.profile.as_ref(), &plan).and_then(&mut refuse)
    {
        return Ok(stop);
    }
    // The group stays where the audit put it: no copy of its verdict.
    let group = judgement
        .groups
        .iter()
        .position(|g| std::ptr::eq(g, group))
        .ok_or_else(|| {
            Failure::internal(
                "internal error: the selected group is not the audit's".to_string(),
                Some("nothing was imported; please report this".into()),
            )
        })?;
    Ok(Decision::Go { group, plan })
}

/// Facts that could not be checked (exit 1), the answer after the driver
/// and before any GPU call: `true` (and the report says so) when the group
/// is refused for them.
pub fn not_checked(report: &mut ImportReport, group: &GroupVerdict) -> bool {
    let Some(r) = checks::not_checked(group) else {
        return false;
    };
    report.audit = Some(group.clone());
    report.refusals.push(r);
    true
}
