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
//!
//! Block ids are never trusted without a control: an id of 0 names no
//! allocation (not available), and they are compared only once every
//! allocation is mapped ([`Distinct::settle`]): when the driver gave one id
//! to two allocations that are provably distinct (on two devices, or IPC
//! ranges of different sizes), its ids cannot tell allocations apart and
//! are "not comparable" for the whole import, so they neither refuse nor
//! accept anything.

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

/// For the report: what an identity compared for an allocation can show
/// (docs/format.md §8.10, docs/json.md `items[].distinct[].evidence`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Evidence {
    /// Compared (`handle`, `owner-file`, `mapped-range`): a shared value
    /// shows one memory; a different one shows nothing (a new handle per
    /// import, a new file per export, a second pointer), so it never shows
    /// two allocations distinct.
    SameOnly,
    /// Compared (`memory-block-id`): different ids show distinct memory only
    /// where the driver answers them per allocation, as documented, not per
    /// import; which one a driver does is settled on hardware (the GPU
    /// proof's control pair), never by this import.
    BlockId,
    /// Not answered by the driver or the kernel (`why` says how).
    NotAvailable,
    /// Answered, but the answers named provably distinct memory as one, so
    /// they tell nothing (`why` names the allocations and the proof).
    NotComparable,
}

/// For the report: whether an identity was compared for an allocation,
/// what that can show, and why not when it was not.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Compared {
    pub identity: IdentityKind,
    pub compared: bool,
    pub evidence: Evidence,
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
    /// The device its handle (or IPC pointer, or mapped range) is on.
    device: Option<i32>,
    /// `cuda_ipc`: the size of the exported allocation's range
    /// (`cuMemGetAddressRange`), the whole allocation whichever pointer.
    range_size: Option<u64>,
    /// The block id the driver answered once mapped (never 0), compared
    /// only by [`Distinct::settle`].
    block: Option<u64>,
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

/// An allocation [`Distinct::settle`] found to be another's memory: its
/// rank, its id, and why.
#[derive(Debug)]
pub struct Conflict {
    pub rank: u64,
    pub allocation: String,
    pub error: BackendError,
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
            device: None,
            range_size: None,
            block: None,
        });
        self.add(self.seen.len() - 1, ids)
    }

    /// Adds the identities found once allocation `id` of `rank` is mapped
    /// and checks them against every other allocation (a block id only
    /// later, by [`Distinct::settle`]).
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

    /// Once every allocation is mapped: the block ids. When the driver gave
    /// one id to two allocations that are provably distinct (their memory
    /// on two devices, or IPC ranges of two sizes), its ids cannot tell
    /// allocations apart: every block id of the import becomes "not
    /// comparable" (why names the pair) and decides nothing, as on a driver
    /// without them. Otherwise an id shared by allocations of two ranks, or
    /// at overlapping ranges, is one memory twice: the later allocation
    /// (in import order) is named.
    pub fn settle(&mut self) -> Result<(), Conflict> {
        let with: Vec<usize> = (0..self.seen.len())
            .filter(|&i| self.seen[i].block.is_some())
            .collect();
        for (n, &j) in with.iter().enumerate() {
            for &i in &with[..n] {
                if self.seen[i].block != self.seen[j].block {
                    continue;
                }
                if let Some(proof) = self.provably_distinct(i, j) {
                    self.not_comparable(i, j, &proof);
                    return Ok(());
                }
            }
        }
        for (n, &j) in with.iter().enumerate() {
            for &i in &with[..n] {
                let (Some(a), Some(b)) = (self.seen[j].block, self.seen[i].block) else {
                    continue;
                };
                if a != b {
                    continue;
                }
                let same = MemoryId::BlockId { id: a }.to_string();
                if let Some(message) = conflict(&self.seen[j], &self.seen[i], &same) {
                    return Err(Conflict {
                        rank: self.seen[j].rank,
                        allocation: self.seen[j].id.clone(),
                        error: message.into(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Why allocations `i` and `j` cannot be one memory, whatever a block
    /// id says, or `None` when nothing shows it.
    fn provably_distinct(&self, i: usize, j: usize) -> Option<String> {
        let (a, b) = (&self.seen[i], &self.seen[j]);
        if let (Some(x), Some(y)) = (a.device, b.device) {
            if x != y {
                return Some(format!(
                    "their memory is on two devices ({x} and {y}, checked at verify)"
                ));
            }
        }
        if let (Some(x), Some(y)) = (a.range_size, b.range_size) {
            if x != y {
                return Some(format!(
                    "their exported allocations have two sizes ({x} and {y} bytes, \
                     cuMemGetAddressRange)"
                ));
            }
        }
        None
    }

    fn not_comparable(&mut self, i: usize, j: usize, proof: &str) {
        let id = self.seen[i].block.unwrap_or_default();
        let why = format!(
            "the driver answered MEMORY_BLOCK_ID {id:#x} for allocation {:?} of rank {} and \
             allocation {:?} of rank {}, which are provably distinct ({proof}): its ids cannot \
             tell allocations apart, so none decides anything (docs/format.md §8.10)",
            self.seen[i].id, self.seen[i].rank, self.seen[j].id, self.seen[j].rank
        );
        for s in &mut self.seen {
            if s.block.take().is_none() {
                continue;
            }
            for c in &mut s.compared {
                if c.identity == IdentityKind::MemoryBlockId {
                    c.compared = false;
                    c.evidence = Evidence::NotComparable;
                    c.why = Some(why.clone());
                }
            }
        }
    }

    fn add(&mut self, i: usize, ids: Vec<Identity>) -> Result<(), BackendError> {
        let mut fresh = Vec::new();
        for ident in ids {
            let kind = ident.kind();
            let (evidence, why) = match ident {
                // 0 names no allocation: the driver did not answer.
                Identity::Known(MemoryId::BlockId { id: 0 }) => (
                    Evidence::NotAvailable,
                    Some("the driver answered MEMORY_BLOCK_ID 0, which names no allocation".into()),
                ),
                Identity::Known(MemoryId::BlockId { id }) => {
                    self.seen[i].block = Some(id);
                    (Evidence::BlockId, None)
                }
                Identity::Known(m) => {
                    match m {
                        MemoryId::IpcPointer { device, .. }
                        | MemoryId::VmmHandle { device, .. } => {
                            self.seen[i].device.get_or_insert(device);
                        }
                        MemoryId::Range { device, size, .. } => {
                            self.seen[i].device.get_or_insert(device);
                            self.seen[i].range_size = Some(size);
                        }
                        _ => {}
                    }
                    fresh.push(m);
                    (Evidence::SameOnly, None)
                }
                Identity::NotAvailable(_, ref why) => (Evidence::NotAvailable, Some(why.clone())),
            };
            self.seen[i].compared.push(Compared {
                identity: kind,
                compared: matches!(evidence, Evidence::SameOnly | Evidence::BlockId),
                evidence,
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
            let same = if mine == theirs {
                format!("{mine}")
            } else {
                format!("{mine}, and {theirs}")
            };
            if let Some(message) = conflict(me, other, &same) {
                return Err(message.into());
            }
        }
        self.seen[i].known.extend(fresh);
        Ok(())
    }
}

/// The rule for `me` and `other`, which share the identity `same`: one
/// memory in two ranks, or at overlapping ranges of one rank, is refused
/// (the message); disjoint ranges of one rank are one segment carved up.
fn conflict(me: &Seen, other: &Seen, same: &str) -> Option<String> {
    let (id, offset, end) = (&me.id, me.offset, me.end);
    if other.rank != me.rank {
        return Some(format!(
            "allocation {id:?} resolves to the same memory ({same}) as allocation {:?} of rank \
             {}: a rank's memory lives on its own GPU, so one memory cannot back two ranks",
            other.id, other.rank
        ));
    }
    if offset < other.end && other.offset < end {
        return Some(format!(
            "allocation {id:?} resolves to the same memory ({same}) as allocation {:?}, and \
             their ranges [{offset}, {end}) and [{}, {}) overlap: the same memory would be \
             imported twice",
            other.id, other.offset, other.end
        ));
    }
    None
}
