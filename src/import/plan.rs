//! docs/format.md §8.1–8.2: audit in live mode, select one group, plan it.
//!
//! The plan is built from the very descriptors the audit judged (the same
//! bytes, parsed once), never from a second read of the inventory, so a file
//! swapped between audit and import cannot slip in.

use crate::app::{self, AuditRun, Failure};
use crate::cli::InventoryArgs;
use crate::descriptor::{Allocation, Descriptor, GpuUuid, Owner};
use crate::node::NodeProbe;
use crate::report::sanitize::terminal;
use crate::verdict::{GroupVerdict, Verdict};
use serde::Serialize;
use std::collections::BTreeMap;
use uuid::Uuid;

/// One rank to import: where it goes and what it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedRank {
    pub rank: u64,
    /// The GPU the descriptor names; the backend finds it by UUID.
    pub gpu: GpuUuid,
    /// The descriptor's path, relative to the root.
    pub path: String,
    /// The process holding the memory (pidfd for posix_fd handles).
    pub owner: Owner,
    pub allocations: Vec<Allocation>,
}

impl PlannedRank {
    pub fn bytes(&self) -> u128 {
        self.allocations.iter().map(|a| a.size_bytes as u128).sum()
    }
}

/// An accepted group, rank by rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub engine_id: String,
    pub incarnation: Option<Uuid>,
    pub epoch: Option<u64>,
    /// The ranks this node holds, in order: 0..world_size-1, or the
    /// `--local-ranks` share of a group that spans nodes.
    pub ranks: Vec<PlannedRank>,
}

impl Plan {
    /// Plans an accepted group from the descriptors the audit judged
    /// (keyed by path). Anything inconsistent is an internal error: an
    /// accepted group has exactly one current, parsed descriptor per rank.
    pub fn from_group(
        g: &GroupVerdict,
        descriptors: &BTreeMap<Vec<u8>, Descriptor>,
    ) -> Result<Plan, String> {
        if g.verdict != Verdict::Accept {
            return Err(format!("group {:?} was not accepted", g.engine_id));
        }
        let world = g
            .world_size
            .ok_or_else(|| format!("group {:?} has no world size", g.engine_id))?;
        // The ranks this node must hold: all of them, or `--local-ranks`.
        let expected: Vec<u64> = match &g.local_ranks {
            Some(s) => crate::rankset::RankSet::parse(s)
                .map_err(|e| format!("local ranks {s:?}: {e}"))?
                .iter()
                .filter(|r| *r < world)
                .collect(),
            None => (0..world).collect(),
        };
        let mut ranks = Vec::with_capacity(g.ranks.len());
        for rv in &g.ranks {
            let d = descriptors
                .get(&rv.raw_path)
                .ok_or_else(|| format!("no parsed descriptor for {}", rv.path))?;
            if d.allocations.is_empty() || d.allocations.len() != d.alloc_summary.count {
                return Err(format!(
                    "descriptor {} was parsed without its allocations",
                    rv.path
                ));
            }
            if Some(d.rank) != rv.rank || d.engine_id != g.engine_id {
                return Err(format!(
                    "descriptor {} does not hold rank {:?} of {:?}",
                    rv.path, rv.rank, g.engine_id
                ));
            }
            ranks.push(PlannedRank {
                rank: d.rank,
                gpu: d.gpu_uuid,
                path: rv.path.clone(),
                owner: d.owner,
                allocations: d.allocations.clone(),
            });
        }
        let planned: Vec<u64> = ranks.iter().map(|r| r.rank).collect();
        if planned != expected {
            return Err(format!(
                "group {:?}: planned ranks {planned:?}, expected {expected:?}",
                g.engine_id
            ));
        }
        Ok(Plan {
            engine_id: g.engine_id.clone(),
            incarnation: g.incarnation,
            epoch: g.epoch,
            ranks,
        })
    }

    pub fn allocations(&self) -> usize {
        self.ranks.iter().map(|r| r.allocations.len()).sum()
    }

    pub fn bytes(&self) -> u128 {
        self.ranks.iter().map(PlannedRank::bytes).sum()
    }
}

/// A live audit that kept the parsed descriptors it judged, by raw path bytes.
pub struct Audited {
    pub run: AuditRun,
    pub descriptors: BTreeMap<Vec<u8>, Descriptor>,
}

/// `kvcr audit --live` for import: the same reading, the same verdict core,
/// and the descriptors kept (with their allocations) for planning.
pub fn audit_live(
    args: &InventoryArgs,
    probe: &dyn NodeProbe,
    progress: bool,
) -> Result<Audited, Failure> {
    // Not strict here: facts not checked are the gate's fourth answer, after the driver.
    let (run, descriptors) = app::audit_keeping(args, Some(probe), progress, true, false)?;
    Ok(Audited { run, descriptors })
}

/// The group to import: `--engine`, or the only group. More than one group
/// and no `--engine` is a usage error; no group at all is `Ok(None)` (no
/// descriptor found, exit 1).
pub fn select<'a>(
    groups: &'a [GroupVerdict],
    engine: Option<&str>,
) -> Result<Option<&'a GroupVerdict>, Failure> {
    if let Some(e) = engine {
        return Ok(groups.iter().find(|g| g.engine_id == e));
    }
    match groups {
        [] => Ok(None),
        [g] => Ok(Some(g)),
        many => {
            let ids: Vec<String> = many
                .iter()
                .map(|g| format!("{:?}", terminal(&g.engine_id)))
                .collect();
            Err(Failure::usage(
                format!(
                    "the inventory holds {} groups ({}); import takes one",
                    many.len(),
                    ids.join(", ")
                ),
                Some("choose one with --engine ID".to_string()),
            ))
        }
    }
}

/// One allocation in a printed plan.
#[derive(Clone, Debug, Serialize)]
pub struct PlannedAllocation {
    pub id: String,
    pub kind: &'static str,
    pub size_bytes: u64,
    /// Where the rank's bytes start in the exported allocation (omitted when 0).
    #[serde(skip_serializing_if = "is_zero")]
    pub offset_bytes: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl PlannedRank {
    pub fn planned_allocations(&self) -> Vec<PlannedAllocation> {
        self.allocations
            .iter()
            .map(|a| PlannedAllocation {
                id: a.id.clone(),
                kind: a.handle.kind(),
                size_bytes: a.size_bytes,
                offset_bytes: a.offset_bytes,
            })
            .collect()
    }

    /// `fabric×3`, `cuda_ipc×1, posix_fd×2`.
    pub fn kinds_summary(&self) -> String {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for a in &self.allocations {
            *counts.entry(a.handle.kind()).or_default() += 1;
        }
        counts
            .iter()
            .map(|(k, n)| format!("{k}×{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}
