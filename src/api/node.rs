//! What a producer asks of the inventory and this node: the current
//! epoch of a group, a process's start ticks, this boot's id.

use super::Error;
use crate::service::audit::Inventory;
use std::path::Path;

/// The current epoch of group `engine` in the inventory at `root`: the
/// highest epoch any of its descriptors states (current, superseded or
/// rejected alike; one whose identity alone can be read counts too), or
/// `None` when the inventory holds none. A producer's first start takes the
/// larger of this and the epoch it persisted, plus one (docs/format.md
/// §3.5); an empty inventory and no state is the one case that starts at 1.
/// Reads the inventory as the audit does (no live facts).
pub fn current_epoch(root: &Path, engine: &str) -> Result<Option<u64>, Error> {
    let engine = crate::format::descriptor::EngineId::parse(engine)
        .map_err(|m| Error::usage(format!("engine {engine:?}: {m}")))?;
    let inv = Inventory {
        root: Some(root.to_path_buf()),
        threads: crate::io::pipeline::threads(None),
        ..Inventory::default()
    };
    let opts = crate::io::pipeline::Options {
        threads: inv.threads,
        keep_allocations: false,
        producer_uid: None,
    };
    let (cands, _files) = crate::service::audit::collect(&inv.root()?, false, &opts)?;
    Ok(crate::rules::highest_epoch(&cands, &engine))
}

/// The start time of process `pid` (field 22 of `/proc/<pid>/stat`, clock
/// ticks since boot), read the way the live audit reads it. An error when
/// there is no such process, or only its zombie.
pub fn proc_start_ticks(pid: i32) -> Result<u64, Error> {
    match crate::io::node::proc::start_ticks(pid) {
        crate::io::node::Fact::Known(Some(t)) => Ok(t),
        crate::io::node::Fact::Known(None) => Err(Error::Other {
            message: format!("no running process {pid}"),
            status: crate::format::exit::REJECTED,
        }),
        crate::io::node::Fact::NotChecked(why) => Err(Error::usage(format!(
            "cannot read the start time of process {pid}: {why}"
        ))),
    }
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`, without its newline),
/// read the way the live audit reads it.
pub fn boot_id() -> Result<uuid::Uuid, Error> {
    match crate::io::node::proc::boot_id() {
        crate::io::node::Fact::Known(u) => Ok(u),
        crate::io::node::Fact::NotChecked(why) => Err(Error::usage(why)),
    }
}
