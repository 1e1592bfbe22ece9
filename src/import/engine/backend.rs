//! The backend trait: one method per step, so the engine records each
//! resource the moment it exists.

use super::{BackendError, Device, Identity, Mapped, Resource};
use crate::format::descriptor::{GpuUuid, Handle, Owner};

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
    /// ([`IdentityKind::OwnerFile`](super::IdentityKind::OwnerFile), docs/format.md §8.10).
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
    /// attribute ([`Distinct`](super::Distinct)); an error fails the step.
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
