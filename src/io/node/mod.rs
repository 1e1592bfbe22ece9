//! The node probe (live mode, docs/format.md §11): facts about this machine, read
//! through one small trait so tests can describe any node.
//!
//! [`LinuxProbe`] reads this machine (`proc.rs`: boot id, hostname, process
//! start times; `gpus.rs`: the GPUs through the CUDA driver or
//! /proc/driver/nvidia). [`FakeProbe`] answers from a description, either
//! built by a test or read from the file `KVCR_NODE_FACTS` names
//! (`facts_file.rs`). Nothing here is read unless live mode asks.

pub mod facts_file;
pub mod gpus;
pub mod proc;

pub use crate::rules::facts::{Fact, Gpus, NodeFacts};
use std::collections::BTreeMap;
use std::path::Path;
use uuid::Uuid;

/// Where node facts come from: the real machine, or a test's description.
pub trait NodeProbe {
    fn boot_id(&self) -> Fact<Uuid>;
    fn hostname(&self) -> Fact<String>;
    /// Field 22 of `/proc/<pid>/stat`: `Known(None)` when no such process
    /// (a zombie counts as gone: it has released its memory).
    fn start_ticks(&self, pid: i32) -> Fact<Option<u64>>;
    fn gpus(&self) -> Fact<Gpus>;
}

/// Reads every fact live mode needs for these process ids, once.
pub fn gather(probe: &dyn NodeProbe, pids: impl IntoIterator<Item = i32>) -> NodeFacts {
    let mut processes = BTreeMap::new();
    for pid in pids {
        processes
            .entry(pid)
            .or_insert_with(|| probe.start_ticks(pid));
    }
    NodeFacts {
        boot_id: probe.boot_id(),
        hostname: probe.hostname(),
        processes,
        gpus: probe.gpus(),
    }
}

/// A node described by a test.
#[derive(Clone, Debug)]
pub struct FakeProbe {
    pub boot_id: Fact<Uuid>,
    pub hostname: Fact<String>,
    pub processes: BTreeMap<i32, u64>,
    /// When set, every process lookup answers this.
    pub processes_unreadable: Option<String>,
    pub gpus: Fact<Gpus>,
}

impl NodeProbe for FakeProbe {
    fn boot_id(&self) -> Fact<Uuid> {
        self.boot_id.clone()
    }
    fn hostname(&self) -> Fact<String> {
        self.hostname.clone()
    }
    fn start_ticks(&self, pid: i32) -> Fact<Option<u64>> {
        match &self.processes_unreadable {
            Some(why) => Fact::NotChecked(why.clone()),
            None => Fact::Known(self.processes.get(&pid).copied()),
        }
    }
    fn gpus(&self) -> Fact<Gpus> {
        self.gpus.clone()
    }
}

/// The probe that reads this machine. Each call reads afresh; `gather`
/// calls each once per run.
#[derive(Clone, Copy, Debug, Default)]
pub struct LinuxProbe;

impl NodeProbe for LinuxProbe {
    fn boot_id(&self) -> Fact<Uuid> {
        proc::boot_id()
    }
    fn hostname(&self) -> Fact<String> {
        proc::hostname()
    }
    fn start_ticks(&self, pid: i32) -> Fact<Option<u64>> {
        proc::start_ticks(pid)
    }
    fn gpus(&self) -> Fact<Gpus> {
        gpus::probe()
    }
}

/// This machine read through a given procfs root ([`LinuxProbe`] uses
/// `/proc`; tests give a directory of forged files, which is never
/// trusted).
#[cfg(test)]
#[derive(Clone, Copy, Debug)]
pub struct ProcProbe<'a>(pub &'a crate::io::procfs::ProcFs);

#[cfg(test)]
impl NodeProbe for ProcProbe<'_> {
    fn boot_id(&self) -> Fact<Uuid> {
        proc::boot_id_in(self.0)
    }
    fn hostname(&self) -> Fact<String> {
        proc::hostname()
    }
    fn start_ticks(&self, pid: i32) -> Fact<Option<u64>> {
        proc::start_ticks_in(self.0, pid)
    }
    fn gpus(&self) -> Fact<Gpus> {
        gpus::probe_in(self.0)
    }
}

/// Where [`probe`]'s facts come from, for the report: "proc", or the
/// facts file.
pub fn facts_source(facts: Option<&Path>) -> String {
    facts.map_or_else(|| "proc".to_string(), |p| p.to_string_lossy().into_owned())
}

/// The probe live mode and the import use: this machine, or, with a facts
/// file (`KVCR_NODE_FACTS` on the command line, resolved into the settings;
/// the library's `node_facts` option), the node that file describes (a
/// test and demo hook). `named` is how the note names the file's path
/// (`KVCR_NODE_FACTS=` for the command line, `node_facts=` for the library). A file that cannot be read or parsed
/// is an error: the run cannot happen. Beside the probe come the notes the
/// operator is owed about where its facts come from (the facts file; or the
/// `KVCR_PROC_ROOT` test hook and a `/proc` that is not trusted),
/// terminal-safe; the caller prints them (`crate::service::audit::probe_node`), this
/// module prints nothing.
pub fn probe(
    facts: Option<&Path>,
    named: &str,
) -> Result<(Box<dyn NodeProbe>, Vec<String>), String> {
    let Some(path) = facts else {
        let proc = crate::io::procfs::ProcFs::system();
        let untrusted = proc.untrusted().map(|why| {
            format!(
                "{}; the boot id, owner processes and /proc GPU list are not checked",
                crate::format::text::terminal(why)
            )
        });
        let notes = proc
            .note()
            .map(str::to_string)
            .into_iter()
            .chain(untrusted)
            .collect();
        return Ok((Box::new(LinuxProbe), notes));
    };
    let probe = facts_file::load(path, named)?;
    let note = format!(
        "node facts come from {named}{}, not from this node",
        crate::format::text::terminal(&path.to_string_lossy())
    );
    Ok((Box::new(probe), vec![note]))
}

/// This node's name from uname(2) (the report's `host`).
pub fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// The wall clock, in Unix milliseconds (0 before 1970).
///
/// Not a sentinel: a clock before 1970 saturates to the epoch, where every
/// descriptor is from the future (KV108) and none looks fresh.
pub fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests_notes;
#[cfg(test)]
mod tests_proc;
#[cfg(test)]
mod tests_proc_note;
