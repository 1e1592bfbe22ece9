//! The GMS reader's checks (docs/format.md §14.6): what two reads of an
//! artifact saw (plain facts, gathered by `crate::gms::read`) in, findings and
//! the facts to print out, and the judged run the printers print, one file
//! per artifact family ([`lease`], [`cohort`], [`recovery`],
//! [`superseded`]). Nothing here reads a file, the clock or `/proc`.
//!
//! One rule for every condition a healthy artifact also shows for a moment
//! (a TRANSITION record, mutations in flight, a staging file): it is a
//! finding with its code's severity only when both reads show it, and a
//! notice when one read does ([`both_reads`], and block by block for a
//! lease ring's records).

use crate::format::finding::{Finding, Severity};
use std::collections::BTreeMap;
use std::path::PathBuf;

mod cause;
mod cohort;
mod lease;
mod recovery;
mod superseded;

pub use cause::*;
pub use cohort::*;
pub use lease::*;
pub use recovery::*;
pub use superseded::*;

/// How many block ids a condition keeps to name and to compare across the
/// two reads (the count is always exact).
pub const BLOCK_CAP: usize = 65_536;
/// How many distinct owner hashes a lease scan keeps.
pub const OWNER_CAP: usize = 4096;
/// How many block ids a message names.
const NAMED: usize = 8;

/// The blocks a condition holds for: the exact count and the first ids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Blocks {
    pub count: u64,
    pub first: Vec<u64>,
}

impl Blocks {
    pub fn push(&mut self, id: u64) {
        self.count += 1;
        if self.first.len() < BLOCK_CAP {
            self.first.push(id);
        }
    }

    /// The blocks of `self` that `other` holds too (ids beyond either cap
    /// are counted as held in both: never fewer than the truth).
    pub fn both(&self, other: &Blocks) -> Blocks {
        let mut out = Blocks::default();
        for &id in &self.first {
            if other.first.binary_search(&id).is_ok() {
                out.push(id);
            }
        }
        let beyond_a = self.count - self.first.len() as u64;
        let beyond_b = other.count - other.first.len() as u64;
        out.count += beyond_a.min(beyond_b);
        out
    }

    /// `N blocks (3, 9, 12, …)`.
    pub fn describe(&self) -> String {
        let ids: Vec<String> = self.first.iter().take(NAMED).map(u64::to_string).collect();
        let more = if self.count > ids.len() as u64 {
            ", …"
        } else {
            ""
        };
        let noun = if self.count == 1 { "block" } else { "blocks" };
        format!("{} {noun} ({}{more})", self.count, ids.join(", "))
    }
}

/// Findings seen in both reads keep their severity; a finding one read
/// alone shows becomes a notice that says so. Findings are matched by code
/// and path. The second read's findings come first, in its order.
pub fn both_reads(first: Vec<Finding>, second: Vec<Finding>) -> Vec<Finding> {
    let key = |f: &Finding| (f.code, f.path.clone());
    let mut out = Vec::new();
    for f in &second {
        if first.iter().any(|g| key(g) == key(f)) {
            out.push(f.clone());
        } else {
            out.push(once(f.clone()));
        }
    }
    for f in first {
        if !second.iter().any(|g| key(g) == key(&f)) {
            out.push(once(f));
        }
    }
    out
}

/// A finding one read alone showed: a notice saying so.
fn once(mut f: Finding) -> Finding {
    if f.severity == Severity::Reject {
        f.severity = Severity::Notice;
        f.message
            .prepend("(in one of two reads: a moment of a healthy artifact) ");
    }
    f
}

/// Whether any finding rejects.
pub fn rejected(findings: &[Finding]) -> bool {
    findings.iter().any(Finding::is_reject)
}

// ---------------------------------------------------------------------------
// A judged run
// ---------------------------------------------------------------------------

/// The interval between the two reads when none is given, in milliseconds.
pub const DEFAULT_INTERVAL_MS: u64 = 200;
/// The longest interval `--interval-ms` takes.
pub const MAX_INTERVAL_MS: u64 = 60_000;

/// The devices whose default namespaces a ring's file name is compared
/// with (`{engine}:gpu{device}:{suffix}`).
pub const NAMESPACE_DEVICES: u32 = 64;

/// What a run is asked for.
#[derive(Clone, Debug)]
pub struct Options {
    /// Files or directories; empty: where GMS puts its artifacts.
    pub paths: Vec<PathBuf>,
    pub live: bool,
    pub ask: RecoveryAsk,
    pub interval_ms: u64,
    /// The environment GMS's variables are read from when no path is
    /// given (docs/format.md §14.1): what the caller says a GMS process
    /// sees, never this process's own (the command line fills it from
    /// its environment, the Python package from `os.environb`). Empty:
    /// none is set, GMS's defaults.
    pub env: BTreeMap<std::ffi::OsString, std::ffi::OsString>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            paths: Vec::new(),
            live: false,
            ask: RecoveryAsk::default(),
            interval_ms: DEFAULT_INTERVAL_MS,
            env: BTreeMap::new(),
        }
    }
}

/// What an artifact is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Lease,
    Cohort,
    Recovery,
    Superseded,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Lease => "lease",
            Kind::Cohort => "cohort",
            Kind::Recovery => "recovery",
            Kind::Superseded => "superseded",
        }
    }
}

/// An artifact's facts, by kind.
#[derive(Clone, Debug)]
pub enum Facts {
    Lease(LeaseFacts),
    Cohort(CohortDirFacts),
    Recovery(RecoveryFacts),
    Superseded(SupersededRead),
}

/// One judged artifact.
#[derive(Clone, Debug)]
pub struct Artifact {
    pub path: PathBuf,
    pub kind: Kind,
    pub findings: Vec<Finding>,
    pub facts: Facts,
}

impl Artifact {
    pub fn rejected(&self) -> bool {
        rejected(&self.findings)
    }

    /// The finding the headline names: the rejecting one first in the
    /// root-cause order (`crate::format::finding::Spec::root_rank`).
    pub fn cause(&self) -> Option<&Finding> {
        self.findings
            .iter()
            .filter(|f| f.is_reject())
            .min_by_key(|f| f.code.spec().root_rank)
    }
}

/// One place discovery looked at.
#[derive(Clone, Debug)]
pub struct Looked {
    pub path: PathBuf,
    pub what: &'static str,
    /// Whether the place exists.
    pub present: bool,
    /// The artifacts found there.
    pub found: usize,
}

/// A judged run.
#[derive(Clone, Debug)]
pub struct Run {
    /// Discovery's places (empty when PATHs were given).
    pub looked: Vec<Looked>,
    pub artifacts: Vec<Artifact>,
    pub options: Options,
}

impl Run {
    /// 0 when every artifact is ok (notices allowed), 1 when one is
    /// rejected; a run that could not happen is a [`crate::format::failure::Failure`] (2).
    pub fn exit_status(&self) -> i32 {
        if self.artifacts.iter().any(Artifact::rejected) {
            crate::format::exit::REJECTED
        } else {
            crate::format::exit::OK
        }
    }
}

/// The message a finding renders to in tests.
#[cfg(test)]
pub fn text(f: &Finding) -> String {
    crate::format::message::render(&f.message)
}
