//! The CUDA backend, on the driver API through [`crate::io::cuda_ffi`] (libcuda
//! is opened on first use; kvcr builds and runs without a toolkit or
//! driver). Every status stays the integer the driver returned; a code this
//! build does not know is reported by number, never a crash.
//!
//! Devices are planned from the node probe's list ([`gpus::cuda_devices`],
//! kept for the run by `kvcr import`: `cuDeviceGetUuid_v2`, 16 raw bytes,
//! never ordinal or bus id) and used through their primary contexts. A GPU the plan does
//! not use is never asked anything by the backend.
//!
//! Verification (the `verify` step) asks the driver where the rank's first
//! and last byte live (`CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL`) and which
//! range contains them (`cuMemGetAddressRange`); docs/import.md says what
//! each check can and cannot catch.

// Calls the C library, the kernel or the CUDA driver through raw pointers:
// one of the files allowed unsafe code (Cargo.toml [lints]); every block
// says why it is sound.
#![allow(unsafe_code)]

use super::resource::round_up;
use super::{Backend, BackendError, Device, Identity, IdentityKind, Mapped, MemoryId, Resource};
use crate::format::descriptor::{GpuUuid, Handle, Owner};
use crate::import::engine::pidfd;
use crate::io::cuda_ffi::{self, consts, CallError, Driver};
use crate::io::node::gpus;
use std::collections::BTreeMap;
use std::ffi::c_int;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// True when the 16 raw bytes of `cuDeviceGetUuid_v2` are this GPU's UUID.
/// `GPU-` and `MIG-` name the same 16-byte space: the driver reports a MIG
/// instance's own UUID for a MIG device, so the prefix is not compared.
pub fn uuid_matches(gpu: &GpuUuid, raw: &[u8; 16]) -> bool {
    gpu.uuid.as_bytes() == raw
}

/// `CUmemAccess_flags` by name, for messages (the decision compares integers).
fn access_name(flags: u64) -> &'static str {
    match flags {
        0 => "PROT_NONE",
        1 => "PROT_READ",
        3 => "PROT_READWRITE",
        _ => "unknown to this build",
    }
}

/// `CUmemLocationType` by name, for messages (the decision compares integers).
fn location_name(t: c_int) -> &'static str {
    match t {
        0 => "invalid",
        1 => "device",
        2 => "host",
        3 => "host NUMA node",
        4 => "host NUMA node of the calling thread",
        5 => "CU_MEM_LOCATION_TYPE_INVISIBLE: the memory's device is not visible to this process",
        _ => {
            "unknown to this build; CUDA 13.x adds location types (device locality domains) \
             whose id is a union of a deviceId and a localityDomainId byte, which kvcr does \
             not read"
        }
    }
}

/// docs/format.md §8.4: an imported VMM allocation is pinned
/// (`CU_MEM_ALLOCATION_TYPE_PINNED`, 1) device memory
/// (`CU_MEM_LOCATION_TYPE_DEVICE`, 1) on the planned device. Every value is
/// the integer the driver wrote.
pub fn check_location(
    alloc_type: c_int,
    location_type: c_int,
    location_id: c_int,
    ordinal: i32,
) -> Result<(), BackendError> {
    if alloc_type != consts::CU_MEM_ALLOCATION_TYPE_PINNED {
        return Err(format!(
            "cuMemGetAllocationPropertiesFromHandle reports allocation type {alloc_type}, kvcr \
                imports only pinned device memory (type {})",
            consts::CU_MEM_ALLOCATION_TYPE_PINNED
        )
        .into());
    }
    if location_type != consts::CU_MEM_LOCATION_TYPE_DEVICE || location_id != ordinal {
        // Another location type's id may not be an int at all (CUDA 13.x):
        // its raw bytes, for the operator.
        let raw = if location_type == consts::CU_MEM_LOCATION_TYPE_DEVICE {
            String::new()
        } else {
            format!(" (bytes {:#010x})", location_id as u32)
        };
        return Err(format!(
            "cuMemGetAllocationPropertiesFromHandle reports location type {location_type} ({}) id \
                {location_id}{raw}, the plan put it on device {ordinal} (location type {} id \
                {ordinal})",
            location_name(location_type),
            consts::CU_MEM_LOCATION_TYPE_DEVICE
        )
        .into());
    }
    Ok(())
}

/// True when a failed `cuPointerGetAttribute(MEMORY_BLOCK_ID)` means the
/// driver does not answer the attribute: `CUDA_ERROR_INVALID_VALUE` (1), as
/// a driver that predates it answers an attribute it does not know (an
/// assumption: the reference documents that status for invalid arguments),
/// or `CUDA_ERROR_NOT_SUPPORTED` (801). Any other status fails the step.
pub fn block_id_unanswered(e: &CallError) -> bool {
    matches!(e.status, Some(cuda_ffi::Status(1 | 801)))
}

/// `CU_COMPUTEMODE_*`: why a context may be refused on a device in mode
/// `mode` (the integer the driver wrote), or `None` for the default mode.
pub fn compute_mode_refusal(mode: i32, ordinal: i32) -> Option<String> {
    match mode {
        0 => None,
        2 => Some(format!(
            "device {ordinal} is in prohibited compute mode (CU_COMPUTEMODE_PROHIBITED, 2): no \
             process may create a context on it"
        )),
        3 => Some(format!(
            "device {ordinal} is in exclusive-process compute mode \
             (CU_COMPUTEMODE_EXCLUSIVE_PROCESS, 3): only one process may have a context on it, \
             and another one has"
        )),
        m => Some(format!(
            "device {ordinal} is in compute mode {m}, which this build does not know"
        )),
    }
}

/// Why the CUDA backend cannot be used on this machine (exit 2).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DriverError {
    #[error(
        "no NVIDIA driver: libcuda could not be loaded, so kvcr cannot import GPU memory on \
        this machine"
    )]
    NotFound,
    #[error("the NVIDIA driver is too old: libcuda lacks {}", .missing.join(", "))]
    TooOld { missing: Vec<&'static str> },
    #[error("this is the CUDA toolkit's stub, not the driver ({0})")]
    Stub(String),
}

/// Every driver entry point the backend calls.
pub const REQUIRED_SYMBOLS: [&str; 23] = cuda_ffi::IMPORT_SYMBOLS;

/// True when libcuda can be loaded. Calls nothing in it.
#[cfg(test)]
pub fn driver_present() -> bool {
    cuda_ffi::driver().is_ok()
}

/// The real backend.
pub struct CudaBackend {
    drv: &'static Driver,
    /// Map VMM memory read-write (`--map-read-write`); read-only otherwise.
    read_write: bool,
    /// Retained primary contexts by ordinal: device handle, context, our count.
    contexts: BTreeMap<i32, (cuda_ffi::CuDevice, cuda_ffi::Context, usize)>,
    /// What `cuMemGetAllocationPropertiesFromHandle` wrote for each
    /// imported handle (`verify-location`), the first answer kept: the
    /// granularity query takes the allocation's own properties.
    props: BTreeMap<u64, cuda_ffi::MemAllocationProp>,
    /// The compute mode of each device kvcr retained a context on (the
    /// integer the driver wrote), for the hold's warning.
    compute_modes: BTreeMap<i32, i32>,
    /// The owner fds taken for `posix_fd` imports, by imported handle (one
    /// per import: the driver may answer a handle it already gave), kept
    /// open until that import is released: each is itself a reference to
    /// the memory, `kcmp` compares a new one with them, and a hold hands
    /// them over (docs/format.md §8.6).
    taken: BTreeMap<u64, Vec<Taken>>,
    /// What this backend minted and has not released, contexts aside
    /// (`contexts` counts those).
    held: Held,
}

/// An owner's fd kvcr took (`pidfd_getfd`), with where it came from.
#[derive(Debug)]
struct Taken {
    /// The identity label this file was given (docs/format.md §8.10): the
    /// first owner fd taken of its open file, kept for every later fd of
    /// that file whichever order they are found in.
    label: Identity,
    /// The owner's real uid, read while its start time still matched
    /// (`pidfd::owner_uid`), for the hand-over's `SO_PEERCRED` check.
    uid: Option<u32>,
    file: OwnedFd,
}

/// The resources a backend returned and has not released, with how many
/// times each was handed out. The backend maps, inspects, frees and
/// releases only these: a [`Resource`] is a plain value any code can write,
/// so without this check safe code could hand `release` an address it never
/// mapped and have the driver unmap it. The `SAFETY` comments below rely on
/// it.
///
/// The driver hands out one value more than once: `cuIpcOpenMemHandle` of a
/// handle already open in the context returns the existing pointer and
/// increments its reference count (two allocations at disjoint ranges of
/// one exported segment share one open, docs/format.md §8.10), and an
/// import may return a handle already held. Each such return is one more
/// reference, released by one more driver call: the count keeps the second
/// release from being refused as "not held" (exit 4 on a clean trial, and a
/// leaked reference).
#[derive(Debug, Default)]
pub(crate) struct Held {
    live: BTreeMap<Resource, usize>,
}

impl Held {
    /// Records one more reference to a resource the driver just handed out
    /// and returns it.
    pub(crate) fn mint(&mut self, r: Resource) -> Resource {
        *self.live.entry(r).or_default() += 1;
        r
    }

    /// `Ok` when `r` was minted here and not all of its references were
    /// forgotten since.
    pub(crate) fn check(&self, r: &Resource) -> Result<(), BackendError> {
        if self.live.contains_key(r) {
            Ok(())
        } else {
            Err(format!("internal: {r} is not a resource this backend holds").into())
        }
    }

    /// How many references to `r` are held (0: none).
    pub(crate) fn count(&self, r: &Resource) -> usize {
        self.live.get(r).copied().unwrap_or(0)
    }

    /// Drops one reference to `r` after it was released.
    pub(crate) fn forget(&mut self, r: &Resource) {
        if let Some(n) = self.live.get_mut(r) {
            *n -= 1;
            if *n == 0 {
                self.live.remove(r);
            }
        }
    }
}

fn call(e: CallError) -> BackendError {
    e.into()
}

impl CudaBackend {
    /// Checks the driver before anything is imported: libcuda loads, has
    /// every symbol kvcr uses, and is not the toolkit's stub (the probe's
    /// `cuInit` answers CUDA_ERROR_STUB_LIBRARY). VMM mappings are read-only.
    pub fn new() -> Result<CudaBackend, DriverError> {
        let drv = cuda_ffi::driver().map_err(|_| DriverError::NotFound)?;
        // The toolkit's stub first (the probe's cuInit answered
        // CUDA_ERROR_STUB_LIBRARY): it may lack entry points too, and "too
        // old" would send the operator the wrong way.
        if let Err(e @ gpus::EnumError::Call(c)) = &gpus::cuda_devices() {
            if e.is_stub() {
                return Err(DriverError::Stub(c.to_string()));
            }
        }
        let missing = drv.missing(&REQUIRED_SYMBOLS);
        if !missing.is_empty() {
            return Err(DriverError::TooOld { missing });
        }
        Ok(CudaBackend {
            drv,
            read_write: false,
            contexts: BTreeMap::new(),
            props: BTreeMap::new(),
            compute_modes: BTreeMap::new(),
            taken: BTreeMap::new(),
            held: Held::default(),
        })
    }

    /// Allow read-write VMM mappings (`--map-read-write`).
    pub fn read_write(mut self, yes: bool) -> CudaBackend {
        self.read_write = yes;
        self
    }

    /// Makes `ordinal`'s retained primary context current on this thread.
    fn enter(&self, ordinal: i32) -> Result<(), BackendError> {
        let (_, ctx, _) = self
            .contexts
            .get(&ordinal)
            .ok_or_else(|| format!("no retained context for device {ordinal}"))?;
        self.drv.ctx_set_current(Some(*ctx)).map_err(call)
    }

    /// [`file_identity`] of `dup` against every fd taken so far.
    fn file_identity(&self, pid: i32, fd: i32, dup: BorrowedFd<'_>) -> Identity {
        let taken: Vec<(&Identity, BorrowedFd<'_>)> = self
            .taken
            .values()
            .flatten()
            .map(|t| (&t.label, t.file.as_fd()))
            .collect();
        file_identity(&taken, pid, fd, dup)
    }
}

/// The file behind the owner's `fd` (our duplicate `dup`), docs/format.md
/// §8.10: a regular file (a memfd) by device and inode; any other file
/// (the driver exports a character device, whose `fstat` says nothing)
/// by `kcmp(KCMP_FILE)` against every fd taken before (`taken`: each with
/// the label it was given, all held open in this process), so two fds of
/// one open file are one memory whichever owners they came from, and every
/// fd of one open file gets the label its first fd got, in whatever order
/// the others are found. Where `kcmp` cannot answer, the identity is not
/// available (evidence neither way).
fn file_identity(
    taken: &[(&Identity, BorrowedFd<'_>)],
    pid: i32,
    fd: i32,
    dup: BorrowedFd<'_>,
) -> Identity {
    {
        if let Ok(st) = rustix::fs::fstat(dup) {
            if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile
            {
                return Identity::Known(MemoryId::File {
                    dev: st.st_dev,
                    ino: st.st_ino,
                });
            }
        }
        let not = |why: String| Identity::NotAvailable(IdentityKind::OwnerFile, why);
        if pidfd::same_file_here(dup, dup) != Some(true) {
            return not(
                "kcmp(KCMP_FILE) cannot compare files here (no kcmp, or not permitted), and the \
                 file is not a regular file"
                    .into(),
            );
        }
        let mut unknown = None;
        for (label, file) in taken {
            match pidfd::same_file_here(*file, dup) {
                // The label that open file was given, never the fd found.
                Some(true) => return (*label).clone(),
                Some(false) => {}
                None => unknown = Some((*label).clone()),
            }
        }
        match unknown {
            Some(Identity::Known(other)) => {
                not(format!("kcmp(KCMP_FILE) could not compare it with {other}"))
            }
            Some(Identity::NotAvailable(..)) => {
                not("kcmp(KCMP_FILE) could not compare it with a file taken earlier".into())
            }
            None => Identity::Known(MemoryId::OwnerFile { pid, fd }),
        }
    }
}

impl CudaBackend {
    /// The pointer of `mapping` (an IPC mapping or a VMM mapping this
    /// backend holds), with its device's context made current.
    fn mapped(&self, dev: Device, mapping: &Resource) -> Result<u64, BackendError> {
        self.held.check(mapping)?;
        self.enter(dev.0)?;
        match *mapping {
            Resource::Mapping { ptr, .. } | Resource::IpcMapping { ptr, .. } => Ok(ptr),
            other => Err(format!("internal: {other} is not a mapping").into()),
        }
    }

    fn handle_of(r: &Resource) -> Result<u64, BackendError> {
        match *r {
            Resource::Imported { handle, .. } => Ok(handle),
            other => Err(format!("internal: {other} is not an imported handle").into()),
        }
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn open_device(&mut self, gpu: &GpuUuid) -> Result<(Device, Resource), BackendError> {
        let devices = gpus::cuda_devices();
        let list = match &devices {
            Ok(l) => l,
            Err(e) => {
                let mut err =
                    BackendError::from(format!("the CUDA driver could not list its devices: {e}"));
                if let gpus::EnumError::Call(c) = e {
                    err.driver = BackendError::from(c.clone()).driver;
                }
                return Err(err);
            }
        };
        let Some(v) = list
            .devices
            .iter()
            .find(|d| uuid_matches(gpu, d.uuid.as_bytes()))
            .copied()
        else {
            let mut why = format!(
                "{gpu} is not among the {} CUDA devices visible to this process \
                    (CUDA_VISIBLE_DEVICES?)",
                list.devices.len()
            );
            if !list.unreadable.is_empty() {
                why.push_str(&format!(
                    "; the UUID of {} more could not be read: {}",
                    list.unreadable.len(),
                    list.unreadable.join("; ")
                ));
            }
            return Err(why.into());
        };
        let mode = self.drv.compute_mode(v.handle);
        let ctx = self.drv.primary_ctx_retain(v.handle).map_err(|e| {
            let mut err = call(e);
            if let Some(why) = mode.and_then(|m| compute_mode_refusal(m, v.ordinal)) {
                err.message.push_str(&format!("; {why}"));
            }
            err
        })?;
        if let Some(m) = mode {
            self.compute_modes.insert(v.ordinal, m);
        }
        let e = self.contexts.entry(v.ordinal).or_insert((v.handle, ctx, 0));
        e.2 += 1;
        // Nothing fallible between the retain and handing it to the ledger:
        // every later step makes the context current itself (`enter`), so a
        // failure there is a recorded step failure and the ledger releases
        // the retain (a failed release is then reported, exit 4).
        Ok((Device(v.ordinal), Resource::Context { device: v.ordinal }))
    }

    fn ipc_open(&mut self, dev: Device, handle: &[u8; 64]) -> Result<Resource, BackendError> {
        self.enter(dev.0)?;
        let ptr = self.drv.ipc_open(handle).map_err(call)?;
        Ok(self.held.mint(Resource::IpcMapping { device: dev.0, ptr }))
    }

    fn import_shareable(
        &mut self,
        dev: Device,
        handle: &Handle,
        owner: &Owner,
    ) -> Result<(Resource, Option<Identity>), BackendError> {
        self.enter(dev.0)?;
        let mut file = None;
        let h = match handle {
            Handle::Fabric(bytes) => self.drv.import_fabric(bytes).map_err(call)?,
            Handle::PosixFd(fd) => {
                let dup =
                    pidfd::take_fd(owner.pid, *fd, owner.start_ticks, &pidfd::proc_start_ticks)
                        .map_err(|e| format!("taking fd {fd} of owner {}: {e}", owner.pid))?;
                let ident = self.file_identity(owner.pid, *fd, dup.as_fd());
                let uid = pidfd::owner_uid(owner.pid, owner.start_ticks, &pidfd::proc_start_ticks);
                // A failed import closes our duplicate (dropped here); a
                // good one keeps it with the handle until it is released.
                let h = self.drv.import_fd(dup.as_fd()).map_err(call)?;
                self.taken.entry(h).or_default().push(Taken {
                    label: ident.clone(),
                    uid,
                    file: dup,
                });
                file = Some(ident);
                h
            }
            Handle::CudaIpc(_) => return Err("internal: cuda_ipc is not a shareable handle".into()),
        };
        let r = self.held.mint(Resource::Imported {
            device: dev.0,
            handle: h,
        });
        Ok((r, file))
    }

    fn reserve(
        &mut self,
        dev: Device,
        imported: &Resource,
        size: u64,
    ) -> Result<Resource, BackendError> {
        self.held.check(imported)?;
        self.enter(dev.0)?;
        let h = Self::handle_of(imported)?;
        // The imported allocation's own properties, which verify-location
        // read (and found to be pinned memory of the planned device).
        let prop = self.props.get(&h).copied().ok_or_else(|| {
            format!("internal: no allocation properties recorded for imported handle {h:#x}")
        })?;
        let gran = self.drv.granularity(&prop).map_err(call)?;
        let size = round_up(size, gran)
            .ok_or_else(|| format!("size {size} cannot be rounded to granularity {gran}"))?;
        let ptr = self.drv.address_reserve(size, gran).map_err(call)?;
        Ok(self.held.mint(Resource::Reservation {
            device: dev.0,
            ptr,
            size,
        }))
    }

    fn map(
        &mut self,
        dev: Device,
        reservation: &Resource,
        imported: &Resource,
    ) -> Result<Resource, BackendError> {
        self.held.check(reservation)?;
        self.held.check(imported)?;
        self.enter(dev.0)?;
        let Resource::Reservation { ptr, size, .. } = *reservation else {
            return Err(format!("internal: cannot map into {reservation}").into());
        };
        let h = Self::handle_of(imported)?;
        // SAFETY: the reservation and the handle are ledger entries this
        // backend made and has not released; the range is not mapped yet.
        unsafe { self.drv.map(ptr, size, h) }.map_err(call)?;
        Ok(self.held.mint(Resource::Mapping {
            device: dev.0,
            ptr,
            size,
        }))
    }

    fn set_access(&mut self, dev: Device, mapping: &Resource) -> Result<(), BackendError> {
        self.held.check(mapping)?;
        self.enter(dev.0)?;
        let Resource::Mapping { ptr, size, .. } = *mapping else {
            return Err(format!("internal: cannot set access on {mapping}").into());
        };
        // SAFETY: exactly a mapping this backend made (a ledger entry).
        unsafe { self.drv.set_access(ptr, size, dev.0, self.read_write) }.map_err(|e| {
            let mut err = call(e);
            if !self.read_write {
                err.message.push_str(
                    "; the driver refused a read-only mapping: --map-read-write allows kvcr to \
                        map it read-write",
                );
            }
            err
        })?;
        // The driver's word on what it granted (docs/format.md §8.3): exactly
        // the flags asked for, compared as integers.
        let want = if self.read_write {
            consts::CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        } else {
            consts::CU_MEM_ACCESS_FLAGS_PROT_READ
        } as u64;
        let got = self.drv.access_flags(dev.0, ptr).map_err(call)?;
        if got != want {
            return Err(format!(
                "cuMemGetAccess reports access flags {got} ({}) for device {} on mapping \
                    {ptr:#x}, kvcr asked for {want} ({})",
                access_name(got),
                dev.0,
                access_name(want)
            )
            .into());
        }
        Ok(())
    }

    fn verify_location(&mut self, dev: Device, imported: &Resource) -> Result<(), BackendError> {
        self.held.check(imported)?;
        self.enter(dev.0)?;
        let h = Self::handle_of(imported)?;
        // SAFETY: a handle this backend imported and holds (checked above).
        let p = unsafe { self.drv.allocation_properties(h) }.map_err(call)?;
        check_location(p.type_, p.location.type_, p.location.id, dev.0)?;
        // A handle the driver gave before keeps its first answer.
        self.props.entry(h).or_insert(p);
        Ok(())
    }

    fn read(
        &mut self,
        dev: Device,
        mapping: &Resource,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, BackendError> {
        let ptr = self.mapped(dev, mapping)?;
        if len > crate::format::content::PAGE_MAX {
            return Err(format!("internal: a read of {len} bytes is more than one page").into());
        }
        let src = ptr
            .checked_add(offset)
            .ok_or_else(|| format!("internal: {ptr:#x} + {offset} overflows"))?;
        // SAFETY: a mapping this backend holds; the engine reads only the
        // sampled ranges of [offset_bytes, offset_bytes + size_bytes), which
        // `verify` found inside it. Device memory is only read.
        unsafe { self.drv.read(src, len) }.map_err(call)
    }

    fn inspect(
        &mut self,
        dev: Device,
        mapping: &Resource,
        offset: u64,
        size: u64,
    ) -> Result<Mapped, BackendError> {
        let ptr = self.mapped(dev, mapping)?;
        // The range containing the mapping's own pointer: for an IPC mapping
        // the exporter's whole allocation, for a VMM mapping our reservation.
        let (base, range) = self.drv.address_range(ptr).map_err(call)?;
        let need = u128::from(offset) + u128::from(size);
        let covered = u128::from(base) + u128::from(range) >= u128::from(ptr) + need;
        let (mut device, mut end_device) = (None, None);
        if covered && size > 0 {
            // In range, so neither sum overflows.
            let first = ptr + offset;
            let last = first + (size - 1);
            device = Some(self.drv.pointer_device(first).map_err(call)?);
            end_device = Some(self.drv.pointer_device(last).map_err(call)?);
        }
        Ok(Mapped {
            base,
            size: range,
            device,
            end_device,
        })
    }

    fn block_id(
        &mut self,
        dev: Device,
        mapping: &Resource,
        offset: u64,
    ) -> Result<Identity, BackendError> {
        let ptr = self.mapped(dev, mapping)?;
        let at = ptr
            .checked_add(offset)
            .ok_or_else(|| format!("internal: {ptr:#x} + {offset} overflows"))?;
        match self.drv.pointer_block_id(at) {
            Ok(id) => Ok(Identity::Known(MemoryId::BlockId { id })),
            Err(e) if block_id_unanswered(&e) => Ok(Identity::NotAvailable(
                IdentityKind::MemoryBlockId,
                e.to_string(),
            )),
            Err(e) => Err(call(e)),
        }
    }

    fn hold_warnings(&self) -> Vec<String> {
        self.compute_modes
            .iter()
            .filter(|(_, m)| **m == 3)
            .map(|(d, _)| {
                format!(
                    "device {d} is in exclusive-process compute mode \
                     (CU_COMPUTEMODE_EXCLUSIVE_PROCESS): while kvcr holds its context there, no \
                     other process, the engine included, can create one"
                )
            })
            .collect()
    }

    fn owner_uids(&self) -> Vec<u32> {
        self.taken
            .values()
            .flatten()
            .filter_map(|t| t.uid)
            .collect()
    }

    fn held_fd(&self, imported: &Resource) -> Option<BorrowedFd<'_>> {
        let Resource::Imported { handle, .. } = *imported else {
            return None;
        };
        self.taken
            .get(&handle)
            .and_then(|t| t.first())
            .map(|t| t.file.as_fd())
    }

    fn release(&mut self, r: &Resource) -> Result<(), BackendError> {
        match *r {
            // Released through its retain count in `contexts`, which
            // release_held checks (an unknown device is refused there).
            Resource::Context { .. } => self.release_held(r),
            _ => {
                self.held.check(r)?;
                self.release_held(r)?;
                self.held.forget(r);
                Ok(())
            }
        }
    }
}

impl CudaBackend {
    /// Releases `r`: a context through its retain count, anything else
    /// once [`Held::check`] found this backend holds it.
    fn release_held(&mut self, r: &Resource) -> Result<(), BackendError> {
        match *r {
            Resource::Context { device } => {
                let (dev, _, count) = *self
                    .contexts
                    .get(&device)
                    .ok_or_else(|| format!("no retained context for device {device}"))?;
                let _ = self.drv.ctx_set_current(None);
                // SAFETY: one retain of ours on `dev`; the ledger releases a
                // context only after everything on its device.
                unsafe { self.drv.primary_ctx_release(dev) }.map_err(call)?;
                if count <= 1 {
                    self.contexts.remove(&device);
                } else if let Some(e) = self.contexts.get_mut(&device) {
                    e.2 -= 1;
                }
                Ok(())
            }
            Resource::IpcMapping { device, ptr } => {
                self.enter(device)?;
                // SAFETY: a mapping from ipc_open with a reference of ours left (Held counts each open).
                unsafe { self.drv.ipc_close(ptr) }.map_err(call)
            }
            Resource::Imported { device, handle } => {
                self.enter(device)?;
                // SAFETY: a handle from import_shareable with a reference of ours left (Held counts each import).
                unsafe { self.drv.mem_release(handle) }.map_err(call)?;
                // This import's owner fd goes with it (closed when dropped).
                if let Some(fds) = self.taken.get_mut(&handle) {
                    fds.pop();
                }
                if self.held.count(r) <= 1 {
                    self.props.remove(&handle);
                    self.taken.remove(&handle);
                }
                Ok(())
            }
            Resource::Reservation { device, ptr, size } => {
                self.enter(device)?;
                // SAFETY: a range from reserve; the ledger frees it only
                // after the mapping inside it was unmapped.
                unsafe { self.drv.address_free(ptr, size) }.map_err(call)
            }
            Resource::Mapping { device, ptr, size } => {
                self.enter(device)?;
                // SAFETY: exactly a mapping from map, held once by the ledger.
                unsafe { self.drv.unmap(ptr, size) }.map_err(call)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fd_of_one_open_file_keeps_the_label_it_was_given() {
        // Three fds of one open file (a character device, as the driver
        // exports): the first was labelled "owner 7's fd 10"; the second,
        // found to be it, kept that label; the third is compared with them
        // in whatever order they are held (by handle, here the second
        // first) and gets that label too, never "fd 11".
        let f0 = std::fs::File::open("/dev/null").unwrap();
        let f1 = f0.try_clone().unwrap();
        let f2 = f0.try_clone().unwrap();
        if pidfd::same_file_here(f0.as_fd(), f1.as_fd()) != Some(true) {
            eprintln!("skipped: kcmp unavailable");
            return;
        }
        let label = Identity::Known(MemoryId::OwnerFile { pid: 7, fd: 10 });
        let taken = [(&label, f1.as_fd()), (&label, f0.as_fd())];
        assert_eq!(file_identity(&taken, 7, 12, f2.as_fd()), label);
        // Another open file is another label: its own.
        let other = std::fs::File::open("/dev/null").unwrap();
        assert_eq!(
            file_identity(&taken, 7, 13, other.as_fd()),
            Identity::Known(MemoryId::OwnerFile { pid: 7, fd: 13 })
        );
    }

    #[test]
    fn only_minted_resources_are_acted_on() {
        let mut h = Held::default();
        let m = Resource::Mapping {
            device: 0,
            ptr: 0x7f00_0000_0000,
            size: 2 << 20,
        };
        // Made up by the caller, never handed out: refused.
        let e = h.check(&m).unwrap_err();
        assert!(
            e.message.contains("is not a resource this backend holds"),
            "{}",
            e.message
        );
        assert_eq!(h.mint(m), m);
        assert!(h.check(&m).is_ok());
        // Same kind and device, another address or size: still refused.
        for other in [
            Resource::Mapping {
                device: 0,
                ptr: 0x7f00_0000_0000,
                size: 4 << 20,
            },
            Resource::Mapping {
                device: 0,
                ptr: 0x7f00_0020_0000,
                size: 2 << 20,
            },
            Resource::Mapping {
                device: 1,
                ptr: 0x7f00_0000_0000,
                size: 2 << 20,
            },
            Resource::Reservation {
                device: 0,
                ptr: 0x7f00_0000_0000,
                size: 2 << 20,
            },
        ] {
            assert!(h.check(&other).is_err(), "{other}");
        }
        // Released once: a second release is refused, not passed to the driver.
        h.forget(&m);
        assert!(h.check(&m).is_err());
    }

    #[test]
    fn a_resource_handed_out_twice_is_released_twice() {
        // cuIpcOpenMemHandle of a handle already open returns the same
        // pointer: two references, two releases, then none.
        let mut h = Held::default();
        let ipc = Resource::IpcMapping {
            device: 0,
            ptr: 0x7f00_0000_0000,
        };
        h.mint(ipc);
        h.mint(ipc);
        assert_eq!(h.count(&ipc), 2);
        h.forget(&ipc);
        assert!(h.check(&ipc).is_ok(), "one reference remains");
        h.forget(&ipc);
        assert!(h.check(&ipc).is_err());
        assert_eq!(h.count(&ipc), 0);
        h.forget(&ipc); // forgetting what is not held changes nothing
        assert_eq!(h.count(&ipc), 0);
    }

    #[test]
    fn location_and_access_compare_integers() {
        assert!(check_location(1, 1, 2, 2).is_ok());
        for (t, lt, id, want) in [
            (0, 1, 0, "allocation type 0"),
            (7, 1, 0, "allocation type 7"),
            (1, 2, 0, "location type 2 (host)"),
            (1, 3, 0, "location type 3 (host NUMA node)"),
            (1, 0, 0, "location type 0 (invalid)"),
            (1, 919, 0, "location type 919 (unknown to this build"),
            (1, 919, 0, "device locality domains"),
            (1, 5, -2, "location type 5 (CU_MEM_LOCATION_TYPE_INVISIBLE"),
            (1, 5, -2, "bytes 0xfffffffe"),
            (1, 1, 1, "id 1, the plan put it on device 0"),
            (1, 1, -1, "id -1"),
        ] {
            let e = check_location(t, lt, id, 0).unwrap_err();
            assert!(e.message.contains(want), "{}", e.message);
        }
        assert_eq!(access_name(1), "PROT_READ");
        assert_eq!(access_name(2), "unknown to this build");
    }

    #[test]
    fn only_an_unknown_attribute_leaves_the_block_id_unanswered() {
        let e = |status| CallError {
            call: "cuPointerGetAttribute(MEMORY_BLOCK_ID)",
            status: Some(cuda_ffi::Status(status)),
            text: None,
        };
        assert!(block_id_unanswered(&e(1)));
        assert!(block_id_unanswered(&e(801)));
        for other in [2, 201, 700, 919, 999, -1] {
            assert!(!block_id_unanswered(&e(other)), "{other}");
        }
        let missing = CallError {
            status: None,
            ..e(1)
        };
        assert!(!block_id_unanswered(&missing));
    }

    #[test]
    fn compute_modes_are_named_by_their_integer() {
        assert_eq!(compute_mode_refusal(0, 1), None);
        assert!(compute_mode_refusal(2, 1)
            .unwrap()
            .contains("CU_COMPUTEMODE_PROHIBITED, 2"));
        assert!(compute_mode_refusal(3, 1)
            .unwrap()
            .contains("device 1 is in exclusive-process compute mode"));
        assert!(compute_mode_refusal(77, 0)
            .unwrap()
            .contains("compute mode 77, which this build does not know"));
    }

    #[test]
    fn granularity_rounding() {
        let mib2 = 2 << 20;
        assert_eq!(round_up(1, mib2), Some(mib2));
        assert_eq!(round_up(mib2, mib2), Some(mib2));
        assert_eq!(round_up(mib2 + 1, mib2), Some(2 * mib2));
        assert_eq!(round_up(0, mib2), Some(0));
        assert_eq!(round_up(5, 0), None);
        assert_eq!(round_up(u64::MAX, mib2), None);
    }

    #[test]
    fn uuid_bytes_match() {
        let gpu = GpuUuid::parse("GPU-6a1f0c2e-0000-4000-8000-00000000000a").unwrap();
        let raw: [u8; 16] = [
            0x6a, 0x1f, 0x0c, 0x2e, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0x0a,
        ];
        assert!(uuid_matches(&gpu, &raw));
        let mig = GpuUuid::parse("MIG-6a1f0c2e-0000-4000-8000-00000000000a").unwrap();
        assert!(uuid_matches(&mig, &raw));
        let mut other = raw;
        other[15] = 0x0b;
        assert!(!uuid_matches(&gpu, &other));
    }

    #[test]
    fn no_driver_is_an_error_not_a_panic() {
        if driver_present() {
            eprintln!("skipped: libcuda is present on this machine");
            return;
        }
        assert_eq!(CudaBackend::new().err(), Some(DriverError::NotFound));
        assert!(DriverError::NotFound.to_string().contains("NVIDIA driver"));
    }
}
