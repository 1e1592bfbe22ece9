//! docs/format.md §8: the all-or-nothing import of one accepted rank group.
//!
//! The pieces, each in its own file:
//! - [`execute`] (here): the pure engine. It walks the plan
//!   (`crate::import::plan`: one [`PlannedRank`] per rank) step by step
//!   through a [`Backend`], records every acquired resource in the
//!   [`Ledger`] right after it is acquired, checks for an interrupt between
//!   steps, and on any failure or interrupt releases the ledger in exact
//!   reverse order before it returns.
//! - [`ledger`]: what was taken, and the reverse-order release.
//! - [`distinct`]: whether two allocations are one memory (docs/format.md
//!   §8.10).
//! - [`cuda`]: the real backend on the CUDA driver API; [`sim`]: a
//!   deterministic simulated backend and a fault injector usable around
//!   either backend.
//! - [`pidfd`]: taking a duplicate of the owner's POSIX fd.
//!
//! What drives it lives beside it in `crate::import`: `gate` (what must
//! hold besides the verdict before a GPU call), `plan`, and `command` (audit
//! → gate → plan → execute → report, the signal flag, the hold's ready file
//! and the probe).

pub mod cuda;
pub mod distinct;
pub mod ledger;
pub mod pidfd;
pub mod sim;

use crate::format::descriptor::{Allocation, GpuUuid, Handle, Owner};
use serde::Serialize;
use std::fmt;
use std::time::Instant;

pub use crate::import::plan::{Plan, PlannedRank};
pub use crate::import::spec::Step;
pub use distinct::{Compared, Distinct, Identity, IdentityKind, MemoryId};
pub use ledger::{Ledger, ReleaseReport};

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

/// A GPU memory backend, one method per step so the engine can record each
/// resource the moment it exists. Errors are [`BackendError`]s: one line
/// naming the call that failed, and its status when the driver answered.
pub trait Backend {
    /// "cuda" or "sim", for the report.
    fn name(&self) -> &'static str;
    /// Finds the GPU whose UUID is `gpu` and retains its primary context.
    /// Returns the device and the [`Resource::Context`] to release.
    fn open_device(&mut self, gpu: &GpuUuid) -> Result<(Device, Resource), BackendError>;
    /// Opens a legacy IPC handle on `dev` ([`Resource::IpcMapping`]).
    fn ipc_open(&mut self, dev: Device, handle: &[u8; 64]) -> Result<Resource, BackendError>;
    /// Imports a fabric handle or the owner's POSIX fd ([`Resource::Imported`]),
    /// with, for `posix_fd`, what the kernel says the file behind the fd is
    /// ([`IdentityKind::OwnerFile`], docs/format.md §8.10).
    fn import_shareable(
        &mut self,
        dev: Device,
        handle: &Handle,
        owner: &Owner,
    ) -> Result<(Resource, Option<Identity>), BackendError>;
    /// Reserves an address range for `size` bytes of `imported` (the
    /// allocation's `offset_bytes + size_bytes`), rounded up to the planned
    /// device's allocation granularity ([`Resource::Reservation`]).
    fn reserve(
        &mut self,
        dev: Device,
        imported: &Resource,
        size: u64,
    ) -> Result<Resource, BackendError>;
    /// Maps `imported` over the whole `reservation` ([`Resource::Mapping`]).
    fn map(
        &mut self,
        dev: Device,
        reservation: &Resource,
        imported: &Resource,
    ) -> Result<Resource, BackendError>;
    /// Grants `dev` access to `mapping` (nothing to release: unmapping drops it).
    fn set_access(&mut self, dev: Device, mapping: &Resource) -> Result<(), BackendError>;
    /// Reports where the `size` bytes at `offset` into `mapping` (an IPC
    /// mapping or a VMM mapping) really are.
    fn inspect(
        &mut self,
        dev: Device,
        mapping: &Resource,
        offset: u64,
        size: u64,
    ) -> Result<Mapped, BackendError>;
    /// Releases one resource.
    fn release(&mut self, r: &Resource) -> Result<(), BackendError>;
    /// `posix_fd`: the owner's fd kvcr took for the imported handle
    /// `imported` and keeps while it holds it (a hold hands it over,
    /// docs/format.md §8.6); `None` for any other resource, or a backend
    /// that takes no fds.
    fn held_fd(&self, _imported: &Resource) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }
    /// `posix_fd`: the real uids of the owners whose fds kvcr took, each
    /// read while that owner's start time still matched its descriptor
    /// (the hand-over serves them, docs/format.md §8.6).
    fn owner_uids(&self) -> Vec<u32> {
        Vec::new()
    }
    /// What a hold should tell about the devices it keeps (an
    /// exclusive-process compute mode keeps the engine out).
    fn hold_warnings(&self) -> Vec<String> {
        Vec::new()
    }
    /// `CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID` of the byte at `offset` into
    /// `mapping` (an IPC mapping, or a VMM mapping with access granted): the
    /// driver's id of the physical allocation, or
    /// [`Identity::NotAvailable`] where the driver does not answer the
    /// attribute ([`Distinct`]); an error fails the step.
    fn block_id(
        &mut self,
        dev: Device,
        mapping: &Resource,
        offset: u64,
    ) -> Result<Identity, BackendError>;
    /// VMM: the driver's word that `imported` is pinned device memory on
    /// `dev` (docs/format.md §8.4); every enum read as an integer.
    fn verify_location(&mut self, dev: Device, imported: &Resource) -> Result<(), BackendError>;
    /// Reads `len` bytes at `offset` from the start of `mapping` (an IPC
    /// mapping, or a VMM mapping with access granted): the exported
    /// allocation's bytes, `offset_bytes` included. Never writes.
    fn read(
        &mut self,
        dev: Device,
        mapping: &Resource,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, BackendError>;
}

/// The driver call that failed and the integer status it returned (any
/// integer: a code this build does not know is kept as it is).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DriverCall {
    pub call: &'static str,
    pub status: i32,
}

/// Why a backend step or release failed: a one-line message, and the
/// driver call and status when a driver call failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BackendError {
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<DriverCall>,
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<String> for BackendError {
    fn from(message: String) -> BackendError {
        BackendError {
            message,
            driver: None,
        }
    }
}

impl From<&str> for BackendError {
    fn from(message: &str) -> BackendError {
        BackendError::from(message.to_string())
    }
}

impl From<crate::io::cuda_ffi::CallError> for BackendError {
    fn from(e: crate::io::cuda_ffi::CallError) -> BackendError {
        BackendError {
            message: e.to_string(),
            driver: e.status.map(|s| DriverCall {
                call: e.call,
                status: s.0,
            }),
        }
    }
}

/// Why the import stopped at a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// The step (or publishing the ready file, or a release) failed.
    Failed,
    /// SIGINT/SIGTERM arrived before the step.
    Interrupted,
}

/// Which rank, allocation and step failed (or was about to run when the
/// import was interrupted).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StepFailure {
    pub rank: u64,
    pub allocation: Option<String>,
    pub step: Step,
    /// Failed or interrupted (the report's `result` says it too, except
    /// when a release failed afterwards).
    #[serde(skip)]
    pub cause: Cause,
    /// What went wrong (and the driver call and status, when one failed).
    #[serde(flatten)]
    pub error: BackendError,
}

impl fmt::Display for StepFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rank {}", self.rank)?;
        if let Some(a) = &self.allocation {
            write!(f, ", allocation {a:?}")?;
        }
        write!(f, ", step {}: {}", self.step, self.error)
    }
}

/// One imported rank.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RankResult {
    pub rank: u64,
    pub gpu_uuid: String,
    pub device: i32,
    pub allocations: usize,
    pub bytes: u128,
    pub ms: u64,
    /// Per allocation, in plan order: the identities compared for it
    /// (docs/format.md §8.10).
    #[serde(skip)]
    pub distinct: Vec<Vec<Compared>>,
}

/// What [`execute`] did.
#[derive(Debug)]
pub enum Outcome {
    /// Every allocation of every rank imported and verified; the ledger
    /// holds everything (the caller releases it: trial, or after a hold).
    Imported { ranks: Vec<RankResult> },
    /// A step failed; the ledger was released in reverse before returning.
    Failed {
        failure: StepFailure,
        ranks: Vec<RankResult>,
        release: ReleaseReport,
    },
    /// The interrupt flag was seen before `at`; the ledger was released in
    /// reverse before returning.
    Interrupted {
        at: StepFailure,
        ranks: Vec<RankResult>,
        release: ReleaseReport,
    },
}

/// Progress, for the bar: what it shows (the rank and GPU being imported,
/// one tick per allocation).
#[derive(Clone, Copy, Debug)]
pub enum Event<'a> {
    RankStarted { rank: u64, gpu: &'a GpuUuid },
    AllocationDone,
    RankDone,
}

enum Stop {
    Failed(StepFailure),
    Interrupted(StepFailure),
}

/// Imports the whole plan through `backend`, all or nothing.
///
/// Every acquired resource is recorded in `ledger` the moment it exists.
/// `interrupted` is asked before every step; when it answers true, or when a
/// step fails, everything in the ledger is released in exact reverse order
/// and the outcome says which rank, allocation and step stopped the import.
/// On success the ledger holds every resource and the caller releases it.
pub fn execute(
    plan: &Plan,
    backend: &mut dyn Backend,
    ledger: &mut Ledger,
    interrupted: &dyn Fn() -> bool,
    progress: &mut dyn FnMut(Event),
) -> Outcome {
    let mut done = Vec::new();
    match import_all(plan, backend, ledger, interrupted, progress, &mut done) {
        Ok(()) => Outcome::Imported { ranks: done },
        Err(stop) => {
            let release = ledger.release_all(backend);
            match stop {
                Stop::Failed(failure) => Outcome::Failed {
                    failure,
                    ranks: done,
                    release,
                },
                Stop::Interrupted(at) => Outcome::Interrupted {
                    at,
                    ranks: done,
                    release,
                },
            }
        }
    }
}

/// Runs one step: checks the interrupt first, then maps the error to a
/// [`StepFailure`] naming rank, allocation and step.
struct Stepper<'a> {
    interrupted: &'a dyn Fn() -> bool,
    rank: u64,
    allocation: Option<&'a str>,
}

impl Stepper<'_> {
    fn at(&self, step: Step, cause: Cause, e: BackendError) -> StepFailure {
        StepFailure {
            rank: self.rank,
            allocation: self.allocation.map(str::to_string),
            step,
            cause,
            error: e,
        }
    }

    fn run<T>(&self, step: Step, f: impl FnOnce() -> Result<T, BackendError>) -> Result<T, Stop> {
        if (self.interrupted)() {
            return Err(Stop::Interrupted(self.at(
                step,
                Cause::Interrupted,
                "interrupted by a signal before this step".into(),
            )));
        }
        f().map_err(|e| Stop::Failed(self.at(step, Cause::Failed, e)))
    }
}

fn import_all(
    plan: &Plan,
    backend: &mut dyn Backend,
    ledger: &mut Ledger,
    interrupted: &dyn Fn() -> bool,
    progress: &mut dyn FnMut(Event),
    done: &mut Vec<RankResult>,
) -> Result<(), Stop> {
    let mut distinct = Distinct::default();
    for pr in &plan.ranks {
        let started = Instant::now();
        progress(Event::RankStarted {
            rank: pr.rank,
            gpu: &pr.gpu,
        });
        let s = Stepper {
            interrupted,
            rank: pr.rank,
            allocation: None,
        };
        let dev = s.run(Step::Device, || {
            let (dev, ctx) = backend.open_device(&pr.gpu)?;
            ledger.record(pr.rank, None, ctx);
            Ok(dev)
        })?;
        for a in &pr.allocations {
            let s = Stepper {
                interrupted,
                rank: pr.rank,
                allocation: Some(&a.id),
            };
            import_one(&s, backend, ledger, &mut distinct, dev, pr, a)?;
            progress(Event::AllocationDone);
        }
        let ms = started.elapsed().as_millis() as u64;
        progress(Event::RankDone);
        done.push(RankResult {
            rank: pr.rank,
            gpu_uuid: pr.gpu.to_string(),
            device: dev.0,
            allocations: pr.allocations.len(),
            bytes: pr.bytes(),
            ms,
            distinct: pr
                .allocations
                .iter()
                .map(|a| distinct.compared(pr.rank, &a.id))
                .collect(),
        });
    }
    // The block ids, once every allocation is mapped (docs/format.md §8.10).
    if let Err(c) = distinct.settle() {
        // The ranks from the one named on did not complete.
        if let Some(at) = done.iter().position(|r| r.rank == c.rank) {
            done.truncate(at);
        }
        return Err(Stop::Failed(StepFailure {
            rank: c.rank,
            allocation: Some(c.allocation),
            step: Step::VerifyDistinctMapped,
            cause: Cause::Failed,
            error: c.error,
        }));
    }
    for (r, pr) in done.iter_mut().zip(&plan.ranks) {
        r.distinct = pr
            .allocations
            .iter()
            .map(|a| distinct.compared(pr.rank, &a.id))
            .collect();
    }
    Ok(())
}

/// The imported handle (or IPC pointer) as an identity.
fn handle_identity(r: &Resource) -> Identity {
    match *r {
        Resource::IpcMapping { device, ptr } => {
            Identity::Known(MemoryId::IpcPointer { device, ptr })
        }
        Resource::Imported { device, handle } => {
            Identity::Known(MemoryId::VmmHandle { device, handle })
        }
        other => Identity::NotAvailable(
            IdentityKind::Handle,
            format!("internal: {other} is not an import"),
        ),
    }
}

fn import_one(
    s: &Stepper,
    backend: &mut dyn Backend,
    ledger: &mut Ledger,
    distinct: &mut Distinct,
    dev: Device,
    pr: &PlannedRank,
    a: &Allocation,
) -> Result<(), Stop> {
    let rank = pr.rank;
    let id = Some(a.id.as_str());
    let (offset, size) = (a.offset_bytes, a.size_bytes);
    match &a.handle {
        Handle::CudaIpc(bytes) => {
            let mapping = s.run(Step::Import, || {
                let r = backend.ipc_open(dev, bytes)?;
                ledger.record(rank, id, r);
                Ok(r)
            })?;
            s.run(Step::VerifyDistinct, || {
                distinct.admit(rank, &a.id, offset, size, vec![handle_identity(&mapping)])
            })?;
            let m = s.run(Step::Verify, || {
                let m = backend.inspect(dev, &mapping, offset, size)?;
                check_mapping(&mapping, &m, dev, offset, size).map(|()| m)
            })?;
            s.run(Step::VerifyDistinctMapped, || {
                let range = MemoryId::Range {
                    device: dev.0,
                    base: m.base,
                    size: m.size,
                };
                let ids = vec![
                    backend.block_id(dev, &mapping, offset)?,
                    Identity::Known(range),
                ];
                distinct.extend(rank, &a.id, ids)
            })?;
            verify_content(s, backend, dev, &mapping, a)
        }
        Handle::Fabric(_) | Handle::PosixFd(_) => {
            // The parser refuses an overflowing offset + size (KV007).
            let extent = offset.checked_add(size).ok_or_else(|| {
                Stop::Failed(s.at(
                    Step::Reserve,
                    Cause::Failed,
                    "offset_bytes + size_bytes overflows".into(),
                ))
            })?;
            let (imported, file) = s.run(Step::Import, || {
                let (r, file) = backend.import_shareable(dev, &a.handle, &pr.owner)?;
                ledger.record(rank, id, r);
                Ok((r, file))
            })?;
            s.run(Step::VerifyDistinct, || {
                let mut ids = vec![handle_identity(&imported)];
                ids.extend(file);
                distinct.admit(rank, &a.id, offset, size, ids)
            })?;
            s.run(Step::VerifyLocation, || {
                backend.verify_location(dev, &imported)
            })?;
            let reservation = s.run(Step::Reserve, || {
                let r = backend.reserve(dev, &imported, extent)?;
                ledger.record(rank, id, r);
                Ok(r)
            })?;
            let mapping = s.run(Step::Map, || {
                let r = backend.map(dev, &reservation, &imported)?;
                ledger.record(rank, id, r);
                Ok(r)
            })?;
            s.run(Step::SetAccess, || backend.set_access(dev, &mapping))?;
            s.run(Step::Verify, || {
                let m = backend.inspect(dev, &mapping, offset, size)?;
                check_mapping(&mapping, &m, dev, offset, size)
            })?;
            // A VMM mapping's range is kvcr's own reservation: it says
            // nothing about the memory, so only the block id is asked.
            s.run(Step::VerifyDistinctMapped, || {
                let ids = vec![backend.block_id(dev, &mapping, offset)?];
                distinct.extend(rank, &a.id, ids)
            })?;
            verify_content(s, backend, dev, &mapping, a)
        }
    }
}

/// docs/format.md §3.6: when the allocation carries `content`, its sampled
/// bytes, read through kvcr's own mapping, must digest to its `sha256`.
/// Runs after `verify`, so every read lies inside the verified range.
fn verify_content(
    s: &Stepper,
    backend: &mut dyn Backend,
    dev: Device,
    mapping: &Resource,
    a: &Allocation,
) -> Result<(), Stop> {
    let Some(want) = a.content else {
        return Ok(());
    };
    s.run(Step::VerifyContent, || {
        let mut failed: Option<BackendError> = None;
        let got = crate::format::content::digest_content(
            a.size_bytes,
            a.offset_bytes,
            want.page_bytes,
            want.pages,
            &mut |o, n| {
                backend.read(dev, mapping, o, n).map_err(|e| {
                    let m = e.message.clone();
                    failed = Some(e);
                    m
                })
            },
        );
        match got {
            Ok(c) if c.sha256 == want.sha256 => Ok(()),
            Ok(c) => Err(format!(
                "content mismatch: the {} sampled range{} ({} bytes each, docs/format.md §3.6) \
                    digest to sha256 {}, the descriptor says {}: this handle maps other memory \
                    than the owner described (another rank's or model's, or a restarted owner's)",
                c.pages,
                if c.pages == 1 { "" } else { "s" },
                want.page_bytes.min(a.size_bytes),
                crate::format::hex::encode(&c.sha256),
                crate::format::hex::encode(&want.sha256)
            )
            .into()),
            Err(e) => Err(match failed {
                Some(mut b) => {
                    b.message = format!("reading the sampled bytes: {}", b.message);
                    b
                }
                None => e.to_string().into(),
            }),
        }
    })
}

/// docs/format.md §8.4: the mapping covers `offset_bytes + size_bytes` from
/// its pointer (checked first: the device answers mean nothing outside it),
/// and the rank's first and last byte sit on the planned device.
pub fn check_mapping(
    mapping: &Resource,
    m: &Mapped,
    dev: Device,
    offset_bytes: u64,
    size_bytes: u64,
) -> Result<(), BackendError> {
    let ptr = match *mapping {
        Resource::IpcMapping { ptr, .. } | Resource::Mapping { ptr, .. } => ptr,
        other => return Err(format!("internal: cannot verify {other}").into()),
    };
    let need = u128::from(offset_bytes) + u128::from(size_bytes);
    let end = u128::from(m.base) + u128::from(m.size);
    let covered = if u128::from(m.base) <= u128::from(ptr) && u128::from(ptr) <= end {
        end - u128::from(ptr)
    } else {
        0
    };
    if covered < need {
        return Err(format!(
            "mapping at {ptr:#x} covers {covered} bytes (range {:#x}+{}), the descriptor needs \
                {need} (offset_bytes {offset_bytes} + size_bytes {size_bytes})",
            m.base, m.size
        )
        .into());
    }
    for (which, d) in [("first", m.device), ("last", m.end_device)] {
        match d {
            Some(d) if d == dev.0 => {}
            Some(d) => {
                return Err(format!(
                    "the rank's {which} byte (mapping {ptr:#x} + {offset_bytes}) resides on device \
                        {d}, the plan put it on device {} (the descriptor's gpu_uuid is wrong)",
                    dev.0
                )
                .into())
            }
            // The backend did not ask although the range covers the bytes.
            None => {
                return Err(format!(
                    "internal: the device of the rank's {which} byte (mapping {ptr:#x} + \
                        {offset_bytes}) was not asked of the driver"
                )
                .into())
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_memory;
#[cfg(test)]
mod tests_pidfd;
