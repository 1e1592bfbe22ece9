//! docs/format.md §8.1–8.2: select one audited group and plan it.
//!
//! The plan is built from the very descriptors the audit judged (the same
//! bytes, parsed once; [`crate::service::audit::audit`] keeps them), never from a
//! second read of the inventory, so a file swapped between audit and import
//! cannot slip in.

use crate::format::descriptor::{Allocation, Descriptor, EngineId, GpuUuid, Owner};
use crate::format::failure::Failure;
use crate::format::text::terminal;
use crate::rules::{GroupVerdict, Verdict};
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

/// Why an accepted group could not be planned: the audit and the plan
/// disagree, which is kvcr's bug (an accepted group has exactly one
/// current, parsed descriptor per rank).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("group {0:?} was not accepted")]
    NotAccepted(EngineId),
    #[error("group {0:?} has no world size")]
    NoWorldSize(EngineId),
    #[error("no parsed descriptor for {0}")]
    NotKept(String),
    #[error("descriptor {0} was parsed without its allocations")]
    NoAllocations(String),
    #[error("descriptor {path} does not hold rank {rank:?} of {engine:?}")]
    WrongRank {
        path: String,
        rank: Option<u64>,
        engine: EngineId,
    },
    #[error("group {engine:?}: planned ranks {planned:?}, expected {expected:?}")]
    Ranks {
        engine: EngineId,
        planned: Vec<u64>,
        expected: Vec<u64>,
    },
}

/// An accepted group, rank by rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub engine_id: EngineId,
    pub incarnation: Option<Uuid>,
    pub epoch: Option<u64>,
    /// The ranks this node holds, in order: 0..world_size-1, or the
    /// `--local-ranks` share of a group that spans nodes.
    pub ranks: Vec<PlannedRank>,
}

impl Plan {
    /// Plans an accepted group from the descriptors the audit judged
    /// (keyed by raw path bytes).
    pub fn from_group(
        g: &GroupVerdict,
        descriptors: &BTreeMap<Vec<u8>, Descriptor>,
    ) -> Result<Plan, PlanError> {
        if g.verdict != Verdict::Accept {
            return Err(PlanError::NotAccepted(g.engine_id.clone()));
        }
        let world = g
            .world_size
            .ok_or_else(|| PlanError::NoWorldSize(g.engine_id.clone()))?;
        // The ranks this node must hold: all of them, or `--local-ranks`.
        let expected: Vec<u64> = match &g.local_ranks {
            Some(l) => l.iter().filter(|r| *r < world).collect(),
            None => (0..world).collect(),
        };
        let mut ranks = Vec::with_capacity(g.ranks.len());
        for rv in &g.ranks {
            let d = descriptors
                .get(&rv.raw_path)
                .ok_or_else(|| PlanError::NotKept(rv.path.clone()))?;
            // Kept, and every one of them (the summary counts them all).
            let allocations = match &d.allocations {
                Some(a) if a.len() == d.alloc_summary.count => a.clone(),
                _ => return Err(PlanError::NoAllocations(rv.path.clone())),
            };
            if Some(d.rank) != rv.rank || d.engine_id != g.engine_id {
                return Err(PlanError::WrongRank {
                    path: rv.path.clone(),
                    rank: rv.rank,
                    engine: g.engine_id.clone(),
                });
            }
            ranks.push(PlannedRank {
                rank: d.rank,
                gpu: d.gpu_uuid,
                path: rv.path.clone(),
                owner: d.owner,
                allocations,
            });
        }
        let planned: Vec<u64> = ranks.iter().map(|r| r.rank).collect();
        if planned != expected {
            return Err(PlanError::Ranks {
                engine: g.engine_id.clone(),
                planned,
                expected,
            });
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
    /// The content check (docs/format.md §3.6): `"none"` (the descriptor
    /// has no `content` member), `"planned"` (a dry run), `"verified"` (the
    /// sampled bytes matched).
    pub content: &'static str,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl PlannedRank {
    /// The allocations as reported; `imported` when the rank was imported
    /// (so every content check it carries was verified).
    pub fn planned_allocations(&self, imported: bool) -> Vec<PlannedAllocation> {
        self.allocations
            .iter()
            .map(|a| PlannedAllocation {
                id: a.id.clone(),
                kind: a.handle.kind(),
                size_bytes: a.size_bytes,
                offset_bytes: a.offset_bytes,
                content: match (a.content.is_some(), imported) {
                    (false, _) => "none",
                    (true, false) => "planned",
                    (true, true) => "verified",
                },
            })
            .collect()
    }
}
