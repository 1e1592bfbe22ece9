//! docs/format.md §8.10: no memory imported twice, whatever the driver
//! answers.
//!
//! Each imported allocation gets every identity the driver or the kernel
//! gives for its memory ([`MemoryId`]): the imported handle (or the IPC
//! pointer), the file behind a `posix_fd`, and once it is mapped the
//! driver's `CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID` and, for an IPC mapping,
//! the range the driver maps it at. Two allocations are one memory when
//! they share **any** identity; an identity the driver does not answer is
//! [`Identity::NotAvailable`], evidence neither way, and the report says
//! so ([`Compared`]). An allocation keeps every identity it was given: a
//! handle the driver hands out again is a second allocation with the same
//! handle, never a replacement of the first one's record.

use super::BackendError;
use serde::Serialize;
use std::fmt;

/// The kinds of identity kvcr compares, in the order they become known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IdentityKind {
    /// The handle `cuMemImportFromShareableHandle` returned, or the pointer
    /// `cuIpcOpenMemHandle` returned (known at import).
    Handle,
    /// `posix_fd`: the open file behind the owner's fd (known at import).
    OwnerFile,
    /// `CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID` of the rank's first byte, once mapped.
    MemoryBlockId,
    /// `cuda_ipc`: the range `cuMemGetAddressRange` reports for the
    /// mapping, once mapped.
    MappedRange,
}

impl IdentityKind {
    pub fn as_str(self) -> &'static str {
        match self {
            IdentityKind::Handle => "handle",
            IdentityKind::OwnerFile => "owner-file",
            IdentityKind::MemoryBlockId => "memory-block-id",
            IdentityKind::MappedRange => "mapped-range",
        }
    }
}

impl fmt::Display for IdentityKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One identity of the memory behind an allocation, as the driver or the
/// kernel gave it. Compared as values ([`MemoryId::matches`]), never as text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum MemoryId {
    /// The pointer `cuIpcOpenMemHandle` returned: one exported allocation
    /// opened twice in a context answers the same pointer.
    IpcPointer { device: i32, ptr: u64 },
    /// The handle `cuMemImportFromShareableHandle` returned: the driver may
    /// hand an allocation it already imported back under the same handle.
    VmmHandle { device: i32, handle: u64 },
    /// The regular file behind a `posix_fd` (`fstat`: device and inode).
    File { dev: u64, ino: u64 },
    /// The open file behind a `posix_fd` that is not a regular file: the
    /// first owner fd kvcr took that `kcmp(KCMP_FILE)` found to be it.
    OwnerFile { pid: i32, fd: i32 },
    /// `CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID`: documented as a process-wide
    /// unique id of the physical allocation a pointer belongs to.
    BlockId { id: u64 },
    /// The range an IPC mapping lies in (`cuMemGetAddressRange`): pointers
    /// are unique in the process (unified addressing), so two mappings whose
    /// ranges overlap are one memory.
    Range { device: i32, base: u64, size: u64 },
}

impl MemoryId {
    pub fn kind(&self) -> IdentityKind {
        match self {
            MemoryId::IpcPointer { .. } | MemoryId::VmmHandle { .. } => IdentityKind::Handle,
            MemoryId::File { .. } | MemoryId::OwnerFile { .. } => IdentityKind::OwnerFile,
            MemoryId::BlockId { .. } => IdentityKind::MemoryBlockId,
            MemoryId::Range { .. } => IdentityKind::MappedRange,
        }
    }

    /// True when `self` and `other` say they are one memory. Pointers,
    /// handles and block ids are process-wide, so the device is not
    /// compared; identities of different kinds never match.
    pub fn matches(&self, other: &MemoryId) -> bool {
        match (*self, *other) {
            (MemoryId::IpcPointer { ptr: a, .. }, MemoryId::IpcPointer { ptr: b, .. }) => a == b,
            (MemoryId::VmmHandle { handle: a, .. }, MemoryId::VmmHandle { handle: b, .. }) => {
                a == b
            }
            (a @ MemoryId::File { .. }, b @ MemoryId::File { .. })
            | (a @ MemoryId::OwnerFile { .. }, b @ MemoryId::OwnerFile { .. }) => a == b,
            (MemoryId::BlockId { id: a }, MemoryId::BlockId { id: b }) => a == b,
            (
                MemoryId::Range {
                    base: a, size: s, ..
                },
                MemoryId::Range {
                    base: b, size: t, ..
                },
            ) => {
                let (a, b) = (u128::from(a), u128::from(b));
                s > 0 && t > 0 && a < b + u128::from(t) && b < a + u128::from(s)
            }
            _ => false,
        }
    }
}

impl fmt::Display for MemoryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            MemoryId::IpcPointer { device, ptr } => {
                write!(f, "IPC pointer {ptr:#x} on device {device}")
            }
            MemoryId::VmmHandle { device, handle } => {
                write!(f, "imported handle {handle:#x} on device {device}")
            }
            MemoryId::File { dev, ino } => write!(f, "file dev {dev} inode {ino}"),
            MemoryId::OwnerFile { pid, fd } => write!(f, "the open file of owner {pid}'s fd {fd}"),
            MemoryId::BlockId { id } => write!(f, "MEMORY_BLOCK_ID {id:#x}"),
            MemoryId::Range { device, base, size } => {
                write!(f, "mapped range {base:#x}+{size} on device {device}")
            }
        }
    }
}

/// An identity as the backend found it: known, or not answered (and why).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Identity {
    Known(MemoryId),
    NotAvailable(IdentityKind, String),
}

impl Identity {
    pub fn kind(&self) -> IdentityKind {
        match self {
            Identity::Known(m) => m.kind(),
            Identity::NotAvailable(k, _) => *k,
        }
    }
}

/// For the report: whether an identity was compared for an allocation, and
/// why not when it was not available.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Compared {
    pub identity: IdentityKind,
    pub compared: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

#[derive(Debug)]
struct Seen {
    rank: u64,
    id: String,
    offset: u64,
    end: u64,
    known: Vec<MemoryId>,
    compared: Vec<Compared>,
}

/// The identities each imported allocation resolved to, and the rule of
/// docs/format.md §8.10: one memory may back several allocations of one
/// rank at disjoint ranges `[offset_bytes, offset_bytes + size_bytes)` (a
/// caching allocator exports whole segments); overlapping ranges are the
/// same memory twice, and one memory in two ranks is refused outright.
#[derive(Debug, Default)]
pub struct Distinct {
    seen: Vec<Seen>,
}

impl Distinct {
    /// Admits allocation `id` of `rank` at `[offset, offset + size)` with
    /// the identities known at import, or says which earlier allocation it
    /// is the same memory as.
    pub fn admit(
        &mut self,
        rank: u64,
        id: &str,
        offset: u64,
        size: u64,
        ids: Vec<Identity>,
    ) -> Result<(), BackendError> {
        self.seen.push(Seen {
            rank,
            id: id.to_string(),
            offset,
            end: offset.saturating_add(size),
            known: Vec::new(),
            compared: Vec::new(),
        });
        self.add(self.seen.len() - 1, ids)
    }

    /// Adds the identities found once allocation `id` of `rank` is mapped
    /// and checks them against every other allocation.
    pub fn extend(&mut self, rank: u64, id: &str, ids: Vec<Identity>) -> Result<(), BackendError> {
        let i = self
            .seen
            .iter()
            .rposition(|s| s.rank == rank && s.id == id)
            .ok_or_else(|| {
                format!("internal: allocation {id:?} of rank {rank} was not admitted")
            })?;
        self.add(i, ids)
    }

    /// What was compared for allocation `id` of `rank`, in the order known.
    pub fn compared(&self, rank: u64, id: &str) -> Vec<Compared> {
        self.seen
            .iter()
            .rfind(|s| s.rank == rank && s.id == id)
            .map(|s| s.compared.clone())
            .unwrap_or_default()
    }

    fn add(&mut self, i: usize, ids: Vec<Identity>) -> Result<(), BackendError> {
        let mut fresh = Vec::new();
        for ident in ids {
            let (compared, why) = match ident {
                Identity::Known(m) => {
                    fresh.push(m);
                    (true, None)
                }
                Identity::NotAvailable(_, ref why) => (false, Some(why.clone())),
            };
            self.seen[i].compared.push(Compared {
                identity: ident.kind(),
                compared,
                why,
            });
        }
        let me = &self.seen[i];
        for (j, other) in self.seen.iter().enumerate() {
            if j == i {
                continue;
            }
            let hit = fresh
                .iter()
                .find_map(|a| other.known.iter().find(|b| a.matches(b)).map(|b| (a, b)));
            let Some((mine, theirs)) = hit else { continue };
            let (id, offset, end) = (&me.id, me.offset, me.end);
            let same = if mine == theirs {
                format!("{mine}")
            } else {
                format!("{mine}, and {theirs}")
            };
            if other.rank != me.rank {
                return Err(format!(
                    "allocation {id:?} resolves to the same memory ({same}) as allocation {:?} \
                        of rank {}: a rank's memory lives on its own GPU, so one memory cannot \
                        back two ranks",
                    other.id, other.rank
                )
                .into());
            }
            if offset < other.end && other.offset < end {
                return Err(format!(
                    "allocation {id:?} resolves to the same memory ({same}) as allocation \
                        {:?}, and their ranges [{offset}, {end}) and [{}, {}) overlap: the \
                        same memory would be imported twice",
                    other.id, other.offset, other.end
                )
                .into());
            }
        }
        self.seen[i].known.extend(fresh);
        Ok(())
    }
}
