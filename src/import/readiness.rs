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
use super::report::{rejecting_files, Mode, Report, ResultKind, REPORT_SCHEMA};
use crate::audit::{self, Audited};
use crate::descriptor::canon::format_digest;
use crate::descriptor::{Descriptor, Handle};
use crate::error::Failure;
use crate::node::NodeProbe;
use crate::settings::Inventory;
use crate::verdict::{GroupVerdict, Verdict};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use uuid::Uuid;

/// The `schema` of an import plan.
pub const PLAN_SCHEMA: &str = "kvcr.import-plan/v1";

/// An accepted group as kvcr judged it: everything an importer needs, from
/// the very bytes the audit read (docs/format.md §13.4).
#[derive(Clone, Debug, Serialize)]
pub struct ImportPlan {
    pub schema: &'static str,
    pub kvcr_version: &'static str,
    /// When the plan was made (the audit's clock), ms since the Unix epoch.
    pub generated_unix_ms: u64,
    /// The node the facts were checked on (hostname, boot id).
    pub host: Option<String>,
    pub boot_id: Option<Uuid>,
    /// The inventory root, resolved.
    pub root: String,
    pub engine_id: String,
    pub incarnation: Uuid,
    pub epoch: u64,
    pub world_size: u64,
    /// The ranks this node holds of a group spanning nodes (`0-3,8`), or
    /// `null` for the whole group.
    pub local_ranks: Option<String>,
    /// Every planned rank, in rank order.
    pub ranks: Vec<PlanRank>,
}

/// One rank of an [`ImportPlan`].
#[derive(Clone, Debug, Serialize)]
pub struct PlanRank {
    pub rank: u64,
    /// `GPU-…` or `MIG-…`, as the descriptor states it.
    pub gpu_uuid: String,
    /// The descriptor's path below the root (escaped for display, §9.6).
    pub path: String,
    /// The descriptor's `digest` (`sha256:…`), as judged.
    pub digest: String,
    pub owner: PlanOwner,
    pub allocations: Vec<PlanAllocation>,
}

/// The process that holds a rank's memory.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct PlanOwner {
    pub pid: i32,
    pub start_ticks: u64,
}

/// One allocation of a [`PlanRank`], with its handle as the descriptor
/// states it (hex digits are lowercase there, §3.3).
#[derive(Clone, Debug, Serialize)]
pub struct PlanAllocation {
    pub id: String,
    pub size_bytes: u64,
    pub offset_bytes: u64,
    pub handle: PlanHandle,
}

/// A memory handle, as in the descriptor (§3.3).
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PlanHandle {
    CudaIpc { hex: String },
    Fabric { hex: String },
    PosixFd { fd: i32 },
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(128), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

impl ImportPlan {
    /// The plan document of `plan`, a group the audit accepted; each rank's
    /// digest comes from the descriptor the audit judged (by raw path bytes).
    pub fn new(
        audited: &crate::audit::AuditRun,
        group: &GroupVerdict,
        plan: &Plan,
        descriptors: &BTreeMap<Vec<u8>, Descriptor>,
    ) -> Result<ImportPlan, String> {
        let missing = |what: &str| format!("group {:?} has no {what}", group.engine_id);
        let mut ranks = Vec::with_capacity(plan.ranks.len());
        for pr in &plan.ranks {
            let d = group
                .ranks
                .iter()
                .filter(|rv| rv.rank == Some(pr.rank) && rv.verdict == Verdict::Accept)
                .find_map(|rv| descriptors.get(&rv.raw_path))
                .ok_or_else(|| format!("no judged descriptor for rank {}", pr.rank))?;
            ranks.push(PlanRank {
                rank: pr.rank,
                gpu_uuid: pr.gpu.to_string(),
                path: pr.path.clone(),
                digest: format_digest(&d.digest),
                owner: PlanOwner {
                    pid: pr.owner.pid,
                    start_ticks: pr.owner.start_ticks,
                },
                allocations: pr
                    .allocations
                    .iter()
                    .map(|a| PlanAllocation {
                        id: a.id.clone(),
                        size_bytes: a.size_bytes,
                        offset_bytes: a.offset_bytes,
                        handle: match &a.handle {
                            Handle::CudaIpc(b) => PlanHandle::CudaIpc { hex: hex(b) },
                            Handle::Fabric(b) => PlanHandle::Fabric { hex: hex(b) },
                            Handle::PosixFd(fd) => PlanHandle::PosixFd { fd: *fd },
                        },
                    })
                    .collect(),
            });
        }
        Ok(ImportPlan {
            schema: PLAN_SCHEMA,
            kvcr_version: crate::VERSION,
            generated_unix_ms: audited.now_ms,
            host: audited.meta.host.clone(),
            boot_id: audited.meta.boot_id,
            root: audited.root.clone(),
            engine_id: plan.engine_id.clone(),
            incarnation: plan.incarnation.ok_or_else(|| missing("incarnation"))?,
            epoch: plan.epoch.ok_or_else(|| missing("epoch"))?,
            world_size: group.world_size.ok_or_else(|| missing("world size"))?,
            local_ranks: group.local_ranks.as_ref().map(|l| l.to_string()),
            ranks,
        })
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
    /// A usage error (exit 2): no or an incomplete profile, several groups
    /// without an engine, a root that cannot be read.
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
    let mut meta = audited.meta.clone();
    meta.strict = true;
    let mut report = Report {
        schema: REPORT_SCHEMA,
        meta,
        root: audited.root.clone(),
        engine_id: None,
        mode: Mode::Gate,
        backend: "none",
        result: ResultKind::Rejected,
        incarnation: None,
        epoch: None,
        ranks: Vec::new(),
        failure: None,
        released: None,
        remaining: Vec::new(),
        audit: None,
        files: Vec::new(),
        refusals: Vec::new(),
        warnings: Vec::new(),
        plan: None,
    };
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
        NotReady::Usage(Failure::usage(
            format!("internal error while planning: {e}"),
            Some("please report this".to_string()),
        ))
    };
    let plan = Plan::from_group(group, &descriptors).map_err(|e| internal(e.to_string()))?;
    ImportPlan::new(&audited, group, &plan, &descriptors).map_err(internal)
}
