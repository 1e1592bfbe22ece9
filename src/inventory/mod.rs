//! Listing the inventory (walkdir) and race-free opening (docs/format.md §2).
//!
//! [`resolve_root`] canonicalises the operator's root once (a symlinked root
//! is followed on purpose; the resolved path is what the report shows).
//! [`scan`] walks beneath it without ever following a symlink, classifies
//! every entry by name ([`classify_name`]), and opens descriptors only
//! through an fd held on the root ([`open`]), so an entry swapped for a
//! symlink after listing is rejected (KV001), never followed.

mod beneath;
pub mod open;
mod perms;
pub(crate) mod reader;
pub(crate) mod walk;

#[cfg(test)]
mod tests;

use crate::finding::Finding;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub use perms::parse_user;
pub use reader::{ReadJob, Reader};
pub use walk::{resolve_root, InventoryRoot, Listed};

/// Deepest level at which descriptors are read (depth 1 = directly in the root).
pub const MAX_DESCRIPTOR_DEPTH: usize = 8;

/// What an entry's name says it is (docs/format.md §2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// `rank-<R>.json`; `name_rank` is `None` when R overflows u64.
    Descriptor { name_rank: Option<u64> },
    /// A staging leftover `.<...>.tmp`.
    Torn,
    /// Any other file.
    Stray,
    /// A directory (only reported when it carries findings).
    Dir,
}

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

/// Counts from one [`scan`].
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

/// Renders a path for reports: valid UTF-8 is kept as-is (terminal escaping
/// is the report's job), each byte of an invalid sequence becomes `\xNN`.
pub fn display_path(p: &Path) -> String {
    display_bytes(p.as_os_str().as_bytes())
}

pub(crate) fn display_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// The rank of a descriptor name `rank-<R>.json` (R decimal digits, no sign,
/// no leading zeros): `Some(Some(r))`, `Some(None)` when R overflows u64,
/// `None` when the name is not a descriptor's.
pub fn parse_rank_name(name: &OsStr) -> Option<Option<u64>> {
    let digits = name
        .as_bytes()
        .strip_prefix(b"rank-")?
        .strip_suffix(b".json")?;
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if digits.len() > 1 && digits[0] == b'0' {
        return None;
    }
    let mut r: u64 = 0;
    for d in digits {
        match r
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(d - b'0')))
        {
            Some(v) => r = v,
            None => return Some(None),
        }
    }
    Some(Some(r))
}

/// A staging leftover: starts with `.` and ends with `.tmp`.
pub fn is_staging_name(name: &OsStr) -> bool {
    let b = name.as_bytes();
    b.starts_with(b".") && b.ends_with(b".tmp")
}

/// What a file's name says it is (never [`EntryKind::Dir`]).
pub fn classify_name(name: &OsStr) -> EntryKind {
    if let Some(name_rank) = parse_rank_name(name) {
        EntryKind::Descriptor { name_rank }
    } else if is_staging_name(name) {
        EntryKind::Torn
    } else {
        EntryKind::Stray
    }
}
