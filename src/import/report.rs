//! The `kvcr import` report (docs/format.md §8, `kvcr schema import-report`):
//! what the import planned, took, failed at and left held. `--format json`
//! prints it as one document; [`crate::import::run::print`] prints it as a table.

use crate::format::exit;
use crate::format::finding::Finding;
use crate::import::engine::{
    BackendError, Cause, Compared, RankResult, ReleaseReport, Resource, StepFailure,
};
use crate::import::plan::select::PlannedAllocation;
use crate::import::plan::Plan;
use crate::import::spec::Step;

use crate::rules::{FileVerdict, GroupVerdict};
use serde::Serialize;
use uuid::Uuid;

pub use crate::import::spec::Mode;

pub use crate::format::ids::IMPORT_REPORT as REPORT_SCHEMA;

/// The `result` of an import report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResultKind {
    /// Dry run: the plan was printed (exit 0).
    Planned,
    /// The audit refused the group, or no descriptor was found (exit 1).
    Rejected,
    /// Every rank imported and verified, then released: right away (trial)
    /// or on SIGINT/SIGTERM (hold) (exit 0).
    Imported,
    /// A step failed; everything taken was released (exit 3).
    Failed,
    /// SIGINT/SIGTERM during the import; everything taken was released (exit 130).
    Interrupted,
    /// Releasing failed; `remaining` lists what is still held (exit 4).
    ReleaseFailed,
}

impl ResultKind {
    pub fn status(self) -> i32 {
        match self {
            ResultKind::Planned | ResultKind::Imported => exit::OK,
            ResultKind::Rejected => exit::REJECTED,
            ResultKind::Failed => exit::IMPORT_FAILED,
            ResultKind::Interrupted => exit::INTERRUPTED,
            ResultKind::ReleaseFailed => exit::RELEASE_FAILED,
        }
    }
}

/// One rank in the report.
#[derive(Clone, Debug, Serialize)]
pub struct RankRow {
    pub rank: u64,
    pub gpu_uuid: String,
    pub path: String,
    /// The device ordinal the backend found by UUID (not in a dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<i32>,
    pub allocations: usize,
    pub bytes: u128,
    /// Time to import the rank (not in a dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ms: Option<u64>,
    /// The planned allocations (id, handle kind, size).
    pub items: Vec<ItemRow>,
}

/// One allocation of a [`RankRow`]: as planned, and for an imported one
/// the identities compared to show it is no other allocation's memory,
/// and those the driver did not answer (docs/format.md §8.10).
#[derive(Clone, Debug, Serialize)]
pub struct ItemRow {
    #[serde(flatten)]
    pub planned: PlannedAllocation,
    /// Absent in a dry run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distinct: Option<Vec<Compared>>,
}

impl std::ops::Deref for ItemRow {
    type Target = PlannedAllocation;
    fn deref(&self) -> &PlannedAllocation {
        &self.planned
    }
}

/// A resource still held after a failed release.
#[derive(Clone, Debug, Serialize)]
pub struct RemainingRow {
    pub rank: u64,
    pub allocation: Option<String>,
    pub resource: Resource,
    /// The call that should have released it.
    pub release_call: &'static str,
    /// The driver's answer, when the release was attempted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The driver call and its status, when a driver call refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<crate::import::engine::DriverCall>,
}

/// Which check refused, in the order an import asks them (the report
/// names it `gate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Check {
    /// No declared profile, or one that leaves out what import needs.
    Profile,
    /// `--local-ranks` without proof of the whole group.
    FleetReport,
    /// The profile's `require_content` and an allocation without `content`.
    Content,
    /// The fds kvcr keeps for the `posix_fd` allocations cannot fit
    /// `RLIMIT_NOFILE`, even raised to the hard limit (kvcr's own limit,
    /// like the driver: not asked by the library's readiness gate).
    OpenFiles,
    /// No usable CUDA driver.
    Driver,
    /// A live fact could not be read.
    NotChecked,
}

/// One reason the import is (or, in a dry run, would be) refused.
#[derive(Clone, Debug, Serialize)]
pub struct Refusal {
    /// The check that refused (the report's `gate` member).
    #[serde(rename = "gate")]
    pub check: Check,
    /// The exit status this refusal gives a real import.
    pub status: i32,
    pub message: String,
}

impl Refusal {
    pub fn new(check: Check, message: impl Into<String>) -> Refusal {
        let status = match check {
            Check::Profile | Check::OpenFiles | Check::Driver => crate::format::exit::USAGE,
            Check::FleetReport | Check::Content | Check::NotChecked => {
                crate::format::exit::REJECTED
            }
        };
        Refusal {
            check,
            status,
            message: message.into(),
        }
    }
}

/// The `kvcr import` report (`--format json` prints it as one document).
#[derive(Clone, Debug, Serialize)]
pub struct ImportReport {
    pub schema: &'static str,
    /// Report metadata (docs/format.md §9.4); `exit_status` is the import's.
    #[serde(flatten)]
    pub meta: crate::format::meta::Meta,
    pub root: String,
    pub engine_id: Option<crate::format::descriptor::EngineId>,
    pub mode: Mode,
    /// "cuda", "sim" (test-only) or "none" (dry run, or refused before a backend was used).
    pub backend: &'static str,
    pub result: ResultKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    /// Dry run: every planned rank. Otherwise: the ranks fully imported
    /// (before a failure, only those that completed).
    pub ranks: Vec<RankRow>,
    /// Which rank, allocation and step failed or was interrupted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<StepFailure>,
    /// How many ledger entries were released (reverse order).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub released: Option<usize>,
    /// What is still held after a failed release (exit 4).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub remaining: Vec<RemainingRow>,
    /// The group's audit verdict when the import was refused, written as
    /// the audit report writes a group (`format::wire`).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "wire_group")]
    pub audit: Option<GroupVerdict>,
    /// Rejecting file-level findings that refused the import.
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "wire_files")]
    pub files: Vec<FileVerdict>,
    /// What refused the import (exit 1: the fleet report, facts not
    /// checked); in a dry run, everything that would refuse the real import.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refusals: Vec<Refusal>,
    /// Things that went wrong without changing the result (e.g. the ready
    /// file could not be removed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Dry run of an accepted group: the import plan (docs/format.md §13.4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<crate::import::plan::document::ImportPlan>,
}

fn wire_group<S: serde::Serializer>(g: &Option<GroupVerdict>, s: S) -> Result<S::Ok, S::Error> {
    g.as_ref().map(crate::print::json::group).serialize(s)
}

fn wire_files<S: serde::Serializer>(f: &[FileVerdict], s: S) -> Result<S::Ok, S::Error> {
    crate::format::wire::Each(f, crate::print::json::file).serialize(s)
}

impl ImportReport {
    /// The report of an import (or a readiness gate) that has not got past
    /// the audit yet.
    pub fn before_gate(meta: &crate::format::meta::Meta, root: &str, mode: Mode) -> ImportReport {
        // `strict` (in the metadata) is true for a real import and the
        // readiness gate, which refuse facts not checked; false for a dry run,
        // which only lists them (docs/format.md §8.9).
        let mut meta = meta.clone();
        meta.strict = mode != Mode::DryRun;
        ImportReport {
            schema: REPORT_SCHEMA,
            meta,
            root: root.to_string(),
            engine_id: None,
            mode,
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
        }
    }

    /// The exit status. A dry run predicts the real import's status at the
    /// gate (docs/format.md §8.7, like `zpool import -n`): a missing profile
    /// (2) is answered before the audit; a rejected group is 1; a plan is 0
    /// only when nothing would refuse the real import before its first GPU
    /// call, else the status of the first refusal in the order of answers.
    pub fn status(&self) -> i32 {
        if self.mode != Mode::DryRun {
            return self.result.status();
        }
        let first = self.refusals.iter().min_by_key(|r| r.check);
        match (self.result, first) {
            (_, Some(r)) if r.check == Check::Profile => r.status,
            (ResultKind::Planned, Some(r)) => r.status,
            (result, _) => result.status(),
        }
    }
}

/// Rows for every planned rank (`done` is `None`: a dry run), or for the
/// ranks in `done` only.
pub(crate) fn rank_rows(plan: &Plan, done: Option<&[RankResult]>) -> Vec<RankRow> {
    plan.ranks
        .iter()
        .filter_map(|pr| {
            let r = done.and_then(|d| d.iter().find(|r| r.rank == pr.rank));
            if r.is_none() && done.is_some() {
                return None;
            }
            Some(RankRow {
                rank: pr.rank,
                gpu_uuid: pr.gpu.to_string(),
                path: pr.path.clone(),
                device: r.map(|r| r.device),
                allocations: pr.allocations.len(),
                bytes: pr.bytes(),
                ms: r.map(|r| r.ms),
                items: pr
                    .planned_allocations(r.is_some())
                    .into_iter()
                    .enumerate()
                    .map(|(i, planned)| ItemRow {
                        planned,
                        distinct: r.and_then(|r| r.distinct.get(i).cloned()),
                    })
                    .collect(),
            })
        })
        .collect()
}

pub(crate) fn remaining_rows(rel: &ReleaseReport) -> Vec<RemainingRow> {
    rel.remaining
        .iter()
        .map(|e| {
            let failed = rel.failed.iter().find(|f| f.entry.seq == e.seq);
            RemainingRow {
                rank: e.rank,
                allocation: e.allocation.clone(),
                resource: e.resource,
                release_call: e.resource.release_call(),
                error: failed.map(|f| f.error.message.clone()),
                driver: failed.and_then(|f| f.error.driver),
            }
        })
        .collect()
}

pub(crate) fn first_release_failure(rel: &ReleaseReport) -> Option<StepFailure> {
    rel.failed.first().map(|f| StepFailure {
        rank: f.entry.rank,
        allocation: f.entry.allocation.clone(),
        step: Step::Release,
        cause: Cause::Failed,
        error: BackendError {
            message: format!(
                "{} of {}: {}",
                f.entry.resource.release_call(),
                f.entry.resource,
                f.error
            ),
            driver: f.error.driver,
        },
    })
}

/// The rejecting file-level verdicts, which refuse an import.
pub(crate) fn rejecting_files(files: &[FileVerdict]) -> Vec<FileVerdict> {
    files
        .iter()
        .filter(|f| f.findings.iter().any(Finding::is_reject))
        .cloned()
        .collect()
}
