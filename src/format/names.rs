//! Names (docs/format.md §2.2): what an entry's name says it is, and how a
//! raw path is shown. A descriptor is `rank-<R>.json` (R decimal, no sign,
//! no leading zeros); a staging leftover starts with `.` and ends in `.tmp`;
//! anything else is stray. Pure: the walk lists, this decides.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The inventory root when neither ROOT nor `$KVCR_INVENTORY` names one:
/// where the Debian package's units keep it (docs/format.md §2.1).
pub const DEFAULT_ROOT: &str = "/var/lib/kvcr/inventory";

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

// ---------------------------------------------------------------------------
// GMS artifacts' names (docs/format.md §14.9): the audit's walk names a
// stray file by them; the GMS reader (`crate::gms`) finds artifacts by them.
// ---------------------------------------------------------------------------

/// The vLLM cohort directory's suffix to the lock path's name.
pub const VLLM_WRITERS: &str = ".vllm-writers";
/// The SGLang cohort directory's suffix.
pub const SGLANG_WRITERS: &str = ".writers";

/// Whether `name` has the shape of a lease ring's file name
/// (`gms-kv-lease-*.shm`), the pattern discovery lists in a ring directory.
pub fn is_lease_file_name(name: &[u8]) -> bool {
    name.len() > b"gms-kv-lease-.shm".len()
        && name.starts_with(b"gms-kv-lease-")
        && name.ends_with(b".shm")
}

/// What a name inside a kvcr inventory says of a GMS artifact, for the
/// audit's stray notice (docs/format.md §14.9): `name` is the file's, `dir`
/// its directory's. The audit reads nothing more than it does for any
/// stray file.
pub fn artifact_by_name(name: &str, dir: Option<&str>) -> Option<&'static str> {
    if is_lease_file_name(name.as_bytes()) {
        return Some("a GMS lease ring");
    }
    if name.starts_with("gms-kv-lease-") && name.ends_with(".shm.reserve") {
        return Some("a GMS lease ring's reservation sidecar");
    }
    if name == "kv-recovery.mmap" {
        return Some("GMS recovery metadata");
    }
    if dir.is_some_and(|d| d.ends_with(VLLM_WRITERS) || d.ends_with(SGLANG_WRITERS)) {
        return Some("a file of a GMS writer-cohort directory");
    }
    None
}
