//! The engine's readiness question (docs/format.md §13.3): the import gate
//! run in live, strict mode up to, and not including, the driver check,
//! and the import plan it hands back (`kvcr.import-plan/v1`, §13.4).
//!
//! An engine that imports the memory with its own driver asks this before
//! it becomes ready. The answers come in the order of §8.9 from the very
//! function `kvcr import` asks ([`crate::import::gate::order::before_driver`]): usage
//! errors (a missing or incomplete profile, several groups without an
//! engine), then the audit's rejections, then the fleet proof, then the
//! profile's required content; then facts that could not be checked
//! ([`crate::import::gate::order::not_checked`]). The driver is the engine's, so it is
//! not asked; no GPU call is made.

use crate::format::failure::Failure;
use crate::import::gate::order::{self, Answer, Decision, Inputs};
pub use crate::import::plan::document::{ImportPlan, Origin};
use crate::import::report::{ImportReport, Mode};

/// The origin of a plan made from this audit: its clock, node and root.
pub fn origin(a: &crate::print::audit::AuditRun) -> Origin {
    Origin {
        generated_unix_ms: a.now_ms,
        host: a.meta.host.clone(),
        boot_id: a.meta.boot_id,
        root: a.root.clone(),
    }
}

/// Why the gate did not answer with a plan.
#[derive(Debug)]
pub enum NotReady {
    /// The run could not happen (the failure's status: exit 2 for no or an
    /// incomplete profile, several groups without an engine, a root that
    /// cannot be read; exit 70 for an internal error).
    Usage(Failure),
    /// Refused (exit 1): the report says why (mode `gate`).
    Refused(Box<ImportReport>),
}

impl From<Failure> for NotReady {
    fn from(f: Failure) -> NotReady {
        NotReady::Usage(f)
    }
}

/// What the refusal adds when the GPUs could not be checked: a process
/// without a GPU driver (the engine lists its GPUs with its own) can give
/// the node's facts, GPUs included, as a facts file.
pub const GPUS_HINT: &str = "; the GPUs could not be listed in this process (no GPU driver \
    answered): give this node's facts, the GPUs the engine sees included, as a facts file with \
    the node_facts option (node_facts=FILE; the format is in docs/live.md)";

/// True when some rank's GPU presence was not checked (by the check's name,
/// `gpu-present`, never its text).
fn gpus_not_listed(g: &crate::rules::GroupVerdict) -> bool {
    g.ranks.iter().any(|r| {
        r.checks
            .iter()
            .any(|c| c.name == "gpu-present" && c.status.is_not_checked())
    })
}

/// Runs the import gate up to the driver check (module docs).
pub fn ask(gates: &Inputs) -> Result<ImportPlan, NotReady> {
    let Answer {
        audited,
        descriptors,
        mut report,
        gated,
        ..
    } = order::before_driver(gates, Mode::Gate)?;
    let refused = |mut report: ImportReport| {
        report.meta.exit_status = report.status();
        NotReady::Refused(Box::new(report))
    };
    let Decision::Go { group, plan } = gated else {
        return Err(refused(report));
    };
    let group = &audited.judgement.groups[group];
    // No driver: the engine's own. Facts not checked come next (§8.9).
    if order::not_checked(&mut report, group) {
        if gpus_not_listed(group) {
            if let Some(r) = report.refusals.last_mut() {
                r.message.push_str(GPUS_HINT);
            }
        }
        return Err(refused(report));
    }
    ImportPlan::new(origin(&audited), group, plan, &descriptors).map_err(|e| {
        NotReady::Usage(Failure::internal(
            format!("internal error while planning: {e}"),
            Some("please report this".to_string()),
        ))
    })
}
