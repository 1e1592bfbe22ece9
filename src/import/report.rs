//! The `kvcr import` report (docs/format.md §8, `kvcr schema import-report`):
//! what the import planned, took, failed at and left held. `--format json`
//! prints it as one document; [`super::print`] prints it as a table.

use super::gate::Refusal;
use super::plan::PlannedAllocation;
use super::{BackendError, Cause, Plan, RankResult, ReleaseReport, Resource, Step, StepFailure};
use crate::exit;
use crate::finding::Finding;
use crate::report;
use crate::verdict::{FileVerdict, GroupVerdict};
use serde::Serialize;
use uuid::Uuid;

pub use crate::import_spec::Mode;

pub use crate::ids::IMPORT_REPORT as REPORT_SCHEMA;

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
    pub items: Vec<PlannedAllocation>,
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
    pub driver: Option<super::DriverCall>,
}

/// The `kvcr import` report (`--format json` prints it as one document).
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub schema: &'static str,
    /// Report metadata (docs/format.md §9.4); `exit_status` is the import's.
    #[serde(flatten)]
    pub meta: report::json::Meta,
    pub root: String,
    pub engine_id: Option<crate::descriptor::EngineId>,
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
    /// the audit report writes a group (`report::wire`).
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
    pub plan: Option<super::plan_document::ImportPlan>,
}

fn wire_group<S: serde::Serializer>(g: &Option<GroupVerdict>, s: S) -> Result<S::Ok, S::Error> {
    g.as_ref().map(report::wire::Group::of).serialize(s)
}

fn wire_files<S: serde::Serializer>(f: &[FileVerdict], s: S) -> Result<S::Ok, S::Error> {
    report::wire::Each(f, report::wire::File::of).serialize(s)
}

impl Report {
    /// The report of an import (or a readiness gate) that has not got past
    /// the audit yet.
    pub fn before_gate(meta: &report::json::Meta, root: &str, mode: Mode) -> Report {
        // `strict` (in the metadata) is true for a real import and the
        // readiness gate, which refuse facts not checked; false for a dry run,
        // which only lists them (docs/format.md §8.9).
        let mut meta = meta.clone();
        meta.strict = mode != Mode::DryRun;
        Report {
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
        let first = self.refusals.iter().min_by_key(|r| r.gate);
        match (self.result, first) {
            (_, Some(r)) if r.gate == super::gate::Gate::Profile => r.status,
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
                items: {
                    let mut items = pr.planned_allocations(r.is_some());
                    if let Some(r) = r {
                        for (item, d) in items.iter_mut().zip(&r.distinct) {
                            item.distinct = Some(d.clone());
                        }
                    }
                    items
                },
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
