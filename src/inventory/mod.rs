//! Listing the inventory (walkdir) and race-free opening (SPEC §2). (Being implemented.)

use crate::finding::Finding;
use std::path::PathBuf;

/// What an entry's name says it is (SPEC §2).
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
    /// Path relative to the resolved root, as listed.
    pub rel_path: PathBuf,
    pub kind: EntryKind,
    pub findings: Vec<Finding>,
    /// st_mode of the opened file (0 when not opened).
    pub mode: u32,
}
