//! The engine's readiness question (docs/format.md §13.3): the import gate
//! run in live, strict mode up to, and not including, the driver check,
//! and the import plan it hands back (`kvcr.import-plan/v1`, §13.4).
//!
//! An engine that imports the memory with its own driver asks this before
//! it becomes ready. The answers come in the order of §8.9, from the same
//! checks `kvcr import` asks ([`super::gate`], [`super::plan`],
//! [`crate::audit::audit`]): usage errors (a missing or incomplete profile,
//! several groups without an engine), then the audit's rejections, then the
//! fleet proof, then facts that could not be checked. The driver is the
//! engine's, so it is not asked; no GPU call is made.

use super::gate::{self, Refusal};
use super::plan::{self, Plan};
use super::report::{rejecting_files, Mode, Report};
use crate::audit::{self, Audited};
use crate::error::Failure;
use crate::node::NodeProbe;
use crate::settings::Inventory;
use crate::verdict::Verdict;
use std::path::Path;

pub use super::plan_document::{ImportPlan, Origin};

/// The origin of a plan made from this audit: its clock, node and root.
pub fn origin(a: &crate::audit::AuditRun) -> Origin {
    Origin {
        generated_unix_ms: a.now_ms,
        host: a.meta.host.clone(),
        boot_id: a.meta.boot_id,
        root: a.root.clone(),
    }
}

/// What the readiness gate needs.
pub struct Request<'a> {
    pub inventory: &'a Inventory,
    /// `--fleet-report`: proof of the whole group for a local part.
    pub fleet_report: Option<&'a Path>,
    /// `--max-report-age`, seconds.
    pub max_report_age_s: u64,
    pub probe: &'a dyn NodeProbe,
}

/// Why the gate did not answer with a plan.
#[derive(Debug)]
pub enum NotReady {
    /// The run could not happen (the failure's status: exit 2 for no or an
    /// incomplete profile, several groups without an engine, a root that
    /// cannot be read; exit 70 for an internal error).
    Usage(Failure),
    /// Refused (exit 1): the report says why (mode `gate`).
    Refused(Box<Report>),
}

impl From<Failure> for NotReady {
    fn from(f: Failure) -> NotReady {
        NotReady::Usage(f)
    }
}

/// Runs the import gate up to the driver check (module docs).
pub fn gate(req: &Request) -> Result<ImportPlan, NotReady> {
    if let Some(r) = gate::profile(req.inventory.expect.profile.as_ref()) {
        return Err(NotReady::Usage(Failure::usage(
            r.message,
            Some("pass the profile the group was deployed with (docs/format.md §4)".into()),
        )));
    }
    // Not strict here, as in `kvcr import`: facts not checked are an
    // answer of their own, after the audit's rejections and the fleet proof.
    let Audited {
        run: audited,
        descriptors,
    } = audit::audit(req.inventory, Some(req.probe), false, true, false)?;
    let mut report = Report::before_gate(&audited.meta, &audited.root, Mode::Gate);
    let refuse = |mut report: Report, r: Option<Refusal>| {
        report.refusals.extend(r);
        report.meta.exit_status = report.status();
        NotReady::Refused(Box::new(report))
    };
    let judgement = &audited.judgement;
    let files = rejecting_files(&judgement.files);
    let Some(group) = plan::select(&judgement.groups, req.inventory.expect.engine.as_deref())?
    else {
        report.files = files;
        return Err(refuse(report, None));
    };
    report.engine_id = Some(group.engine_id.clone());
    report.incarnation = group.incarnation;
    report.epoch = group.epoch;
    if group.verdict == Verdict::Reject || !files.is_empty() {
        report.audit = Some(group.clone());
        report.files = files;
        return Err(refuse(report, None));
    }
    let fleet = gate::Fleet {
        report: req.fleet_report,
        max_age_s: req.max_report_age_s,
        now_ms: audited.now_ms,
    };
    if let Some(r) = gate::fleet(&fleet, group, audited.node.as_ref()) {
        return Err(refuse(report, Some(r)));
    }
    if let Some(r) = gate::not_checked(group) {
        report.audit = Some(group.clone());
        return Err(refuse(report, Some(r)));
    }
    let internal = |e: String| {
        NotReady::Usage(Failure::internal(
            format!("internal error while planning: {e}"),
            Some("please report this".to_string()),
        ))
    };
    let plan = Plan::from_group(group, &descriptors).map_err(|e| internal(e.to_string()))?;
    ImportPlan::new(origin(&audited), group, &plan, &descriptors).map_err(internal)
}
