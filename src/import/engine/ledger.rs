//! The ledger: every resource the import acquired, in acquisition order, and
//! its release in exact reverse order (docs/format.md §8.3, §8.5).

use super::{Backend, Resource};
use serde::Serialize;

/// One acquired resource and whom it belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// Position in acquisition order (0-based).
    pub seq: usize,
    pub rank: u64,
    /// The allocation id; `None` for a rank's device context.
    pub allocation: Option<String>,
    pub resource: Resource,
}

/// A release that failed; the entry remains.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReleaseFailure {
    pub entry: Entry,
    /// Why (and the driver call and status, when one failed).
    #[serde(flatten)]
    pub error: super::BackendError,
}

/// What [`Ledger::release_all`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReleaseReport {
    /// Released entries, in the order they were released (reverse of
    /// acquisition).
    pub released: Vec<Entry>,
    /// Releases the driver refused.
    pub failed: Vec<ReleaseFailure>,
    /// Everything still held, in acquisition order: the failed entries, and
    /// the device contexts kept because something on their device remains.
    pub remaining: Vec<Entry>,
}

impl ReleaseReport {
    /// True when everything taken was released.
    pub fn is_clean(&self) -> bool {
        self.remaining.is_empty()
    }
}

/// Resources held by this import, in acquisition order.
#[derive(Debug, Default)]
pub struct Ledger {
    entries: Vec<Entry>,
    next_seq: usize,
}

impl Ledger {
    pub fn new() -> Ledger {
        Ledger::default()
    }

    /// Records a resource right after it was acquired.
    pub fn record(&mut self, rank: u64, allocation: Option<&str>, resource: Resource) {
        self.entries.push(Entry {
            seq: self.next_seq,
            rank,
            allocation: allocation.map(str::to_string),
            resource,
        });
        self.next_seq += 1;
    }

    /// What is held, in acquisition order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Releases every entry, last acquired first, and empties the ledger.
    ///
    /// A failed release does not stop the others (each is an independent
    /// reference); the failed entry is reported with the driver's message
    /// and remains. A resource that something still held depends on is
    /// kept and reported as remaining too: a device context while anything
    /// on its device remains, a reservation while a mapping inside it
    /// remains (cuMemAddressFree needs the range unmapped first).
    pub fn release_all(&mut self, backend: &mut dyn Backend) -> ReleaseReport {
        let mut report = ReleaseReport::default();
        while let Some(e) = self.entries.pop() {
            let blocked = report
                .remaining
                .iter()
                .any(|r| e.resource.depends_on(&r.resource));
            if blocked {
                report.remaining.push(e);
                continue;
            }
            match backend.release(&e.resource) {
                Ok(()) => report.released.push(e),
                Err(err) => {
                    report.failed.push(ReleaseFailure {
                        entry: e.clone(),
                        error: err,
                    });
                    report.remaining.push(e);
                }
            }
        }
        report.remaining.sort_by_key(|e| e.seq);
        report
    }
}
