//! The facts about the node that live mode judges (docs/format.md §11), as
//! data: read by the node probes (`crate::io::node`) before judging, so the
//! verdict core stays pure. A fact that cannot be read is "not checked",
//! never a mismatch.

use crate::format::descriptor::GpuUuid;
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

/// A fact about the node that was either read, or could not be read.
/// A fact that cannot be read is reported as not checked, never as a mismatch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fact<T> {
    Known(T),
    NotChecked(String),
}

impl<T> Fact<T> {
    pub fn known(&self) -> Option<&T> {
        match self {
            Fact::Known(t) => Some(t),
            Fact::NotChecked(_) => None,
        }
    }
}

/// What this process can see of the node's GPUs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gpus {
    /// GPUs visible to this process (through the CUDA driver, which honours
    /// CUDA_VISIBLE_DEVICES), or all GPUs when read from /proc.
    pub visible: BTreeSet<GpuUuid>,
    /// Every GPU on the node when that is known (from /proc/driver/nvidia),
    /// used to tell "absent from the node" from "not visible to this process".
    pub on_node: Option<BTreeSet<GpuUuid>>,
    /// Where the list came from, for the report ("cuda driver", "/proc/driver/nvidia").
    pub source: String,
    /// Devices whose UUID the driver could not read, one line each: a GPU
    /// missing from `visible` is then "not checked", never "absent".
    pub unreadable: Vec<String>,
}

/// Everything live mode knows about the node, gathered before judging so the
/// verdict core stays pure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeFacts {
    pub boot_id: Fact<Uuid>,
    pub hostname: Fact<String>,
    /// pid → `Known(Some(start_ticks))` when running, `Known(None)` when no
    /// such process, `NotChecked` when /proc could not be read.
    pub processes: BTreeMap<i32, Fact<Option<u64>>>,
    pub gpus: Fact<Gpus>,
}

impl NodeFacts {
    /// A node about which nothing could be read.
    #[cfg(test)]
    pub fn unknown(why: &str) -> NodeFacts {
        NodeFacts {
            boot_id: Fact::NotChecked(why.to_string()),
            hostname: Fact::NotChecked(why.to_string()),
            processes: BTreeMap::new(),
            gpus: Fact::NotChecked(why.to_string()),
        }
    }

    pub fn process(&self, pid: i32) -> Fact<Option<u64>> {
        self.processes
            .get(&pid)
            .cloned()
            .unwrap_or_else(|| Fact::NotChecked(format!("process {pid} was not probed")))
    }
}
