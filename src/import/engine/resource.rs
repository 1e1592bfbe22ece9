//! What an import takes: the device chosen for a rank, every resource
//! the ledger records, and where a mapping's bytes really are; and the
//! rounding to the driver's granularity both backends reserve with.

use serde::Serialize;
use std::fmt;

/// A device chosen for one rank: the backend's number for it (CUDA: the
/// ordinal in this process, found by UUID, never assumed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Device(pub i32);

/// One resource the import took. Pointers and handles are the backend's
/// values; the ledger keeps them only to release them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Resource {
    /// A retained primary context (released by `cuDevicePrimaryCtxRelease_v2`).
    Context { device: i32 },
    /// A legacy IPC mapping (released by `cuIpcCloseMemHandle`).
    IpcMapping { device: i32, ptr: u64 },
    /// An imported VMM allocation handle (released by `cuMemRelease`).
    #[serde(rename = "imported-handle")]
    Imported { device: i32, handle: u64 },
    /// A reserved virtual address range (released by `cuMemAddressFree`).
    Reservation { device: i32, ptr: u64, size: u64 },
    /// A mapping of an imported handle (released by `cuMemUnmap`).
    Mapping { device: i32, ptr: u64, size: u64 },
}

impl Resource {
    /// True when releasing `self` while `held` remains would be invalid:
    /// a context under anything on its device, a reservation under a
    /// mapping inside its range.
    pub fn depends_on(&self, held: &Resource) -> bool {
        match (*self, *held) {
            (Resource::Context { device }, h) => h.device() == device,
            (Resource::Reservation { ptr, size, .. }, Resource::Mapping { ptr: m, .. }) => {
                m >= ptr && m < ptr.saturating_add(size)
            }
            _ => false,
        }
    }

    pub fn device(&self) -> i32 {
        match *self {
            Resource::Context { device }
            | Resource::IpcMapping { device, .. }
            | Resource::Imported { device, .. }
            | Resource::Reservation { device, .. }
            | Resource::Mapping { device, .. } => device,
        }
    }

    /// The short name used in reports.
    #[cfg(test)]
    pub fn kind(&self) -> &'static str {
        match self {
            Resource::Context { .. } => "context",
            Resource::IpcMapping { .. } => "ipc-mapping",
            Resource::Imported { .. } => "imported-handle",
            Resource::Reservation { .. } => "reservation",
            Resource::Mapping { .. } => "mapping",
        }
    }

    /// The driver call that releases it.
    pub fn release_call(&self) -> &'static str {
        match self {
            Resource::Context { .. } => "cuDevicePrimaryCtxRelease_v2",
            Resource::IpcMapping { .. } => "cuIpcCloseMemHandle",
            Resource::Imported { .. } => "cuMemRelease",
            Resource::Reservation { .. } => "cuMemAddressFree",
            Resource::Mapping { .. } => "cuMemUnmap",
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Resource::Context { device } => write!(f, "primary context of device {device}"),
            Resource::IpcMapping { device, ptr } => {
                write!(f, "IPC mapping {ptr:#x} on device {device}")
            }
            Resource::Imported { device, handle } => {
                write!(f, "imported handle {handle:#x} on device {device}")
            }
            Resource::Reservation { device, ptr, size } => {
                write!(f, "address range {ptr:#x}+{size} on device {device}")
            }
            Resource::Mapping { device, ptr, size } => {
                write!(f, "mapping {ptr:#x}+{size} on device {device}")
            }
        }
    }
}

/// Where a rank's bytes in a mapping really are, as the driver reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapped {
    /// Base of the range containing the mapping's pointer.
    pub base: u64,
    /// Size of that range.
    pub size: u64,
    /// The device the rank's first byte resides on (`None`: not asked, the
    /// range does not reach it).
    pub device: Option<i32>,
    /// The device the rank's last byte resides on (`None`: not asked).
    pub end_device: Option<i32>,
}

/// Rounds `n` up to a multiple of `granularity` (the driver's minimum
/// reservation unit, which the CUDA and simulated backends both reserve
/// in); `None` on overflow or a zero granularity.
pub fn round_up(n: u64, granularity: u64) -> Option<u64> {
    if granularity == 0 {
        return None;
    }
    n.div_ceil(granularity).checked_mul(granularity)
}
