//! The import plan document (`kvcr.import-plan/v1`, docs/format.md §13.4):
//! an accepted group as kvcr judged it, from the very descriptors the audit
//! read (§8.2). The library's gate returns it ([`crate::import::gate::readiness`]) and a
//! dry run carries it (`plan` in the import report).

use crate::format::descriptor::canon::format_digest;
use crate::format::descriptor::{Descriptor, Handle};
use crate::import::plan::select::Plan;
use crate::rules::{GroupVerdict, Verdict};
use serde::Serialize;
use std::collections::BTreeMap;
use uuid::Uuid;

/// Where and when a plan was made: the audit's clock, node and root.
#[derive(Clone, Debug)]
pub struct Origin {
    pub generated_unix_ms: u64,
    pub host: Option<String>,
    pub boot_id: Option<Uuid>,
    pub root: String,
}

pub use crate::format::ids::IMPORT_PLAN as PLAN_SCHEMA;

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
    pub engine_id: crate::format::descriptor::EngineId,
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
    /// The descriptor's writer, as judged: an engine decides on
    /// `quiesced` from the plan, never from a second read of the file.
    pub writer: PlanWriter,
    pub allocations: Vec<PlanAllocation>,
}

/// The engine process that last wrote a rank's KV (docs/format.md §3).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct PlanWriter {
    pub pid: i32,
    pub start_ticks: u64,
    pub quiesced: bool,
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
    /// The allocation's `content` member (§3.6), when it declares one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<PlanContent>,
}

/// An allocation's `content` member, as the descriptor states it.
#[derive(Clone, Debug, Serialize)]
pub struct PlanContent {
    pub page_bytes: u64,
    pub pages: u64,
    /// 64 lowercase hex digits.
    pub sha256: String,
}

/// A memory handle, as in the descriptor (§3.3).
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PlanHandle {
    CudaIpc { hex: String },
    Fabric { hex: String },
    PosixFd { fd: i32 },
}

impl PlanHandle {
    /// A descriptor's handle as the plan (and a hold's ready file) states it.
    pub fn of(h: &Handle) -> PlanHandle {
        match h {
            Handle::CudaIpc(b) => PlanHandle::CudaIpc {
                hex: crate::format::hex::encode(b),
            },
            Handle::Fabric(b) => PlanHandle::Fabric {
                hex: crate::format::hex::encode(b),
            },
            Handle::PosixFd(fd) => PlanHandle::PosixFd { fd: *fd },
        }
    }
}

impl ImportPlan {
    /// The plan document of `plan`, a group the audit accepted; each rank's
    /// digest comes from the descriptor the audit judged (by raw path bytes).
    /// The plan is spent: its paths and allocation ids move into the
    /// document (no second copy of each).
    pub fn new(
        origin: Origin,
        group: &GroupVerdict,
        plan: Plan,
        descriptors: &BTreeMap<Vec<u8>, Descriptor>,
    ) -> Result<ImportPlan, String> {
        let missing = |what: &str| format!("group {:?} has no {what}", group.engine_id);
        let mut ranks = Vec::with_capacity(plan.ranks.len());
        for pr in plan.ranks {
            let d = group
                .ranks
                .iter()
                .filter(|rv| rv.rank == Some(pr.rank) && rv.verdict == Verdict::Accept)
                .find_map(|rv| descriptors.get(&rv.raw_path))
                .ok_or_else(|| format!("no judged descriptor for rank {}", pr.rank))?;
            ranks.push(PlanRank {
                rank: pr.rank,
                gpu_uuid: pr.gpu.to_string(),
                path: pr.path,
                digest: format_digest(&d.digest),
                owner: PlanOwner {
                    pid: pr.owner.pid,
                    start_ticks: pr.owner.start_ticks,
                },
                writer: PlanWriter {
                    pid: d.writer.pid,
                    start_ticks: d.writer.start_ticks,
                    quiesced: d.writer.quiesced,
                },
                allocations: pr
                    .allocations
                    .into_iter()
                    .map(|a| PlanAllocation {
                        id: a.id,
                        size_bytes: a.size_bytes,
                        offset_bytes: a.offset_bytes,
                        handle: PlanHandle::of(&a.handle),
                        content: a.content.map(|c| PlanContent {
                            page_bytes: c.page_bytes,
                            pages: c.pages,
                            sha256: crate::format::hex::encode(&c.sha256),
                        }),
                    })
                    .collect(),
            });
        }
        Ok(ImportPlan {
            schema: PLAN_SCHEMA,
            kvcr_version: crate::format::version::VERSION,
            generated_unix_ms: origin.generated_unix_ms,
            host: origin.host,
            boot_id: origin.boot_id,
            root: origin.root,
            engine_id: plan.engine_id,
            incarnation: plan.incarnation.ok_or_else(|| missing("incarnation"))?,
            epoch: plan.epoch.ok_or_else(|| missing("epoch"))?,
            world_size: group.world_size.ok_or_else(|| missing("world size"))?,
            local_ranks: group.local_ranks.as_ref().map(|l| l.to_string()),
            ranks,
        })
    }
}
