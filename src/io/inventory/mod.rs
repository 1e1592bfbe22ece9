//! Listing the inventory (walkdir) and race-free opening (docs/format.md §2).
//!
//! [`resolve_root`] canonicalises the operator's root once (a symlinked root
//! is followed on purpose; the resolved path is what the report shows).
//! The walk ([`InventoryRoot::walk`]) goes beneath it without ever following a symlink, classifies
//! every entry by name ([`crate::format::names::classify_name`]), and opens descriptors only
//! through an fd held on the root ([`open`]), so an entry swapped for a
//! symlink after listing is rejected (KV001), never followed.

mod beneath;
pub mod open;
mod perms;
pub(crate) mod reader;
pub(crate) mod walk;

#[cfg(test)]
mod tests;

use crate::format::finding::Finding;
use std::path::PathBuf;

pub use crate::format::names::EntryKind;
pub use perms::{access_hint, parse_user};
pub use reader::{ReadJob, Reader};
pub use walk::{resolve_root, InventoryRoot, Listed};

/// One listed entry with its file-level findings (KV001–KV005, KV009, KV010).
#[derive(Clone, Debug)]
pub struct Entry {
    /// Path relative to the resolved root, as listed (`.` for the root itself).
    pub rel_path: PathBuf,
    pub kind: EntryKind,
    pub findings: Vec<Finding>,
    /// st_mode of the opened file; `None` when it was not opened (a
    /// directory, a stray, a symlink, a file that could not be opened).
    pub mode: Option<u32>,
}

/// Counts from one walk of the inventory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// Entries handed to the visitor.
    pub entries: usize,
    /// Of those, entries of kind [`EntryKind::Descriptor`] (read or not).
    pub descriptors: usize,
}

/// Why the run could not happen at all (the caller maps it to exit 2).
#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    #[error("inventory root {path} does not exist")]
    NotFound { path: String },
    #[error("inventory root {path} is not a directory")]
    NotADirectory { path: String },
    #[error("cannot resolve inventory root {path}: {source}")]
    Resolve {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open inventory root {path}: {source}")]
    OpenRoot {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("inventory root {path} was replaced while auditing")]
    RootChanged { path: String },
}
