//! The readiness gate (`kvcr import` up to the driver check): its
//! options and the import plan it answers with.

use super::document::Body;
use super::inventory::{inventory, probe};
use super::{AuditOptions, Document, Error, Profile, Structured};
use crate::format::rankset::RankSet;
use std::path::{Path, PathBuf};

/// The options of the readiness gate: those of `kvcr import` that apply
/// before the driver.
#[derive(Clone, Debug)]
pub struct GateOptions {
    /// `--profile`: required (a missing or incomplete one is [`Error::Usage`]).
    pub profile: Option<Profile>,
    /// `--engine ID`.
    pub engine: Option<String>,
    /// `--local-ranks`.
    pub local_ranks: Option<RankSet>,
    /// `--fleet-report FILE`: the `kvcr merge` report proving the whole group.
    pub fleet_report: Option<PathBuf>,
    /// `--max-report-age`, seconds (default 300).
    pub max_report_age_s: u64,
    /// The node the gate judges against: `None` reads this machine; a
    /// facts file describes another (as [`AuditOptions::node_facts`]). On a
    /// machine without a GPU driver the GPUs cannot be checked, and the
    /// gate refuses (`not-checked`) unless a facts file lists them
    /// (docs/live.md).
    pub node_facts: Option<PathBuf>,
    /// As [`AuditOptions::threads`].
    pub threads: Option<usize>,
}

impl Default for GateOptions {
    fn default() -> GateOptions {
        GateOptions {
            profile: None,
            engine: None,
            local_ranks: None,
            fleet_report: None,
            max_report_age_s: 300,
            node_facts: None,
            threads: None,
        }
    }
}

/// The import plan (`kvcr.import-plan/v1`, docs/format.md §13.4).
pub type ImportPlan = Document;

/// The engine's readiness question: runs the import gate of `kvcr import`
/// in live, strict mode, in the documented order of answers (docs/format.md
/// §8.9), up to and not including the driver check, with no GPU call.
/// Returns the accepted group's import plan; a refusal is
/// [`Error::Refused`] with the import report, a missing or incomplete
/// profile [`Error::Usage`].
pub fn gate(root: &Path, o: &GateOptions) -> Result<ImportPlan, Error> {
    gate_structured(root, o)?.to_document()
}

/// [`gate`]'s plan before it is rendered as text ([`Structured`]); a
/// refusal is the same [`Error`] as [`gate`]'s.
pub fn gate_structured(root: &Path, o: &GateOptions) -> Result<Structured, Error> {
    let audit_options = AuditOptions {
        local_ranks: o.local_ranks.clone(),
        node_facts: o.node_facts.clone(),
        threads: o.threads,
        ..AuditOptions::default()
    };
    let inv = inventory(
        root,
        o.profile.as_ref(),
        o.engine.as_deref(),
        &audit_options,
    )?;
    let (probe, notes) = probe(inv.node_facts.as_deref())?;
    let req = crate::import::gate::order::Inputs {
        inventory: &inv,
        fleet_report: o.fleet_report.as_deref(),
        max_report_age_s: o.max_report_age_s,
        probe: probe.as_ref(),
        progress: false,
    };
    match crate::import::gate::readiness::ask(&req) {
        Ok(plan) => Ok(Structured {
            body: Body::Plan(Box::new(plan)),
            exit_status: crate::format::exit::OK,
            notes,
        }),
        Err(crate::import::gate::readiness::NotReady::Usage(f)) => Err(f.into()),
        Err(crate::import::gate::readiness::NotReady::Refused(report)) => {
            let message = first_reason(&report);
            Err(Error::Refused {
                message,
                report: Document::of(&report, crate::format::exit::REJECTED)?.with_notes(notes),
            })
        }
    }
}

/// One line saying why the gate refused.
fn first_reason(r: &crate::import::report::ImportReport) -> String {
    if let Some(x) = r.refusals.first() {
        return x.message.clone();
    }
    if let Some(g) = &r.audit {
        return format!("group {}: {}", g.engine_id, g.cause);
    }
    if let Some(f) = r.files.first() {
        let code = f.findings.first().map(|x| x.code.as_str()).unwrap_or("");
        return format!("{code} {}: a rejecting finding in the inventory", f.path);
    }
    match &r.engine_id {
        Some(e) => format!("no descriptor of group {e}"),
        None => "no descriptor found".into(),
    }
}
