//! The CUDA backend, on the driver API through `cudarc::driver::sys`
//! (dynamic loading: libcuda is opened on first use, and every symbol
//! resolves lazily, so kvcr builds and runs without a toolkit or driver).
//!
//! Every `unsafe` of the CUDA path lives in [`drv`]: one small safe wrapper
//! per driver call, each with the reason its `unsafe` is sound. Before the
//! first call, [`CudaBackend::new`] checks that libcuda can be loaded and
//! that every symbol kvcr uses is present, so a missing or old driver is an
//! error, never a panic inside cudarc.
//!
//! Devices are found by UUID (`cuDeviceGetUuid_v2`, 16 raw bytes), never by
//! ordinal or bus id, and used through their primary contexts.

use super::pidfd;
use super::{Backend, Device, Mapped, Resource};
use crate::descriptor::{GpuUuid, Handle, Owner};
use cudarc::driver::sys;
use std::collections::BTreeMap;
use std::os::fd::AsFd;

/// Rounds `n` up to a multiple of `granularity`; `None` on overflow or a
/// zero granularity.
pub fn round_up(n: u64, granularity: u64) -> Option<u64> {
    if granularity == 0 {
        return None;
    }
    n.div_ceil(granularity).checked_mul(granularity)
}

/// True when the 16 raw bytes of `cuDeviceGetUuid_v2` are this GPU's UUID.
/// `GPU-` and `MIG-` name the same 16-byte space: the driver reports a MIG
/// instance's own UUID for a MIG device, so the prefix is not compared.
pub fn uuid_matches(gpu: &GpuUuid, raw: &[u8; 16]) -> bool {
    gpu.uuid.as_bytes() == raw
}

/// The 16 raw bytes of a `CUuuid` (`c_char` is signed on some targets).
pub fn raw_uuid(u: &sys::CUuuid) -> [u8; 16] {
    u.bytes.map(|b| b as u8)
}

/// A descriptor's 64 `cuda_ipc` bytes as the driver's handle type.
pub fn ipc_handle(bytes: &[u8; 64]) -> sys::CUipcMemHandle {
    sys::CUipcMemHandle {
        reserved: bytes.map(|b| b as core::ffi::c_char),
    }
}

/// A descriptor's 64 `fabric` bytes as the driver's handle type.
pub fn fabric_handle(bytes: &[u8; 64]) -> sys::CUmemFabricHandle {
    sys::CUmemFabricHandle { data: *bytes }
}

/// Why the CUDA backend cannot be used on this machine.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DriverError {
    #[error("no NVIDIA driver: libcuda could not be loaded, so kvcr cannot import GPU memory on this machine")]
    NotFound,
    #[error("the NVIDIA driver is too old: libcuda lacks {}", .missing.join(", "))]
    TooOld { missing: Vec<&'static str> },
}

/// Every driver entry point the backend calls.
pub const REQUIRED_SYMBOLS: [&str; 21] = [
    "cuInit",
    "cuGetErrorString",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetUuid_v2",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",
    "cuIpcOpenMemHandle_v2",
    "cuIpcCloseMemHandle",
    "cuMemImportFromShareableHandle",
    "cuMemGetAllocationPropertiesFromHandle",
    "cuMemGetAllocationGranularity",
    "cuMemAddressReserve",
    "cuMemAddressFree",
    "cuMemMap",
    "cuMemUnmap",
    "cuMemSetAccess",
    "cuMemRelease",
    "cuMemGetAddressRange_v2",
    "cuPointerGetAttribute",
];

/// True when libcuda can be loaded. Loads nothing else and calls nothing.
pub fn driver_present() -> bool {
    // SAFETY: is_culib_present only dlopens the candidate libcuda names (and
    // closes them again); it makes no CUDA call and touches no state of ours.
    unsafe { sys::is_culib_present() }
}

/// The driver entry points of [`REQUIRED_SYMBOLS`] that libcuda lacks.
/// Call only after [`driver_present`] answered true.
fn missing_symbols() -> Vec<&'static str> {
    // SAFETY: driver_present() answered true, so culib() loads the library
    // instead of panicking.
    let lib = unsafe { sys::culib() };
    REQUIRED_SYMBOLS
        .into_iter()
        // SAFETY: looking a symbol up does not call it; the type parameter is
        // never used to call through the returned symbol.
        .filter(|name| unsafe { lib.get::<unsafe extern "C" fn()>(*name) }.is_err())
        .collect()
}

/// Safe wrappers over the driver calls the backend makes. Crate-private:
/// they trust the backend to pass only handles and pointers it holds.
pub(crate) mod drv {
    use cudarc::driver::sys;
    use std::ffi::CStr;
    use std::os::fd::{AsRawFd, BorrowedFd};

    pub type R<T> = Result<T, String>;

    /// `CUDA_ERROR_INVALID_VALUE (invalid argument)`.
    pub fn describe(r: sys::CUresult) -> String {
        let mut s: *const core::ffi::c_char = std::ptr::null();
        // SAFETY: cuGetErrorString only writes a pointer to a static string
        // (or leaves it null for an unknown code).
        let ok = unsafe { sys::cuGetErrorString(r, &mut s) } == sys::CUresult::CUDA_SUCCESS;
        if ok && !s.is_null() {
            // SAFETY: the driver returned a NUL-terminated static string.
            let text = unsafe { CStr::from_ptr(s) }.to_string_lossy();
            format!("{r:?} ({text})")
        } else {
            format!("{r:?}")
        }
    }

    fn check(r: sys::CUresult, call: &str) -> R<()> {
        if r == sys::CUresult::CUDA_SUCCESS {
            Ok(())
        } else {
            Err(format!("{call} failed: {}", describe(r)))
        }
    }

    pub fn init() -> R<()> {
        // SAFETY: cuInit takes flags by value and must be 0.
        check(unsafe { sys::cuInit(0) }, "cuInit")
    }

    pub fn device_count() -> R<i32> {
        let mut n = 0;
        // SAFETY: writes one int through a valid pointer.
        check(unsafe { sys::cuDeviceGetCount(&mut n) }, "cuDeviceGetCount")?;
        Ok(n)
    }

    pub fn device_get(ordinal: i32) -> R<sys::CUdevice> {
        let mut d: sys::CUdevice = 0;
        // SAFETY: writes one device handle through a valid pointer.
        check(unsafe { sys::cuDeviceGet(&mut d, ordinal) }, "cuDeviceGet")?;
        Ok(d)
    }

    pub fn device_uuid(dev: sys::CUdevice) -> R<[u8; 16]> {
        // SAFETY: CUuuid is 16 plain bytes; all-zero is a valid value.
        let mut u: sys::CUuuid = unsafe { std::mem::zeroed() };
        // SAFETY: writes 16 bytes into `u`.
        check(
            unsafe { sys::cuDeviceGetUuid_v2(&mut u, dev) },
            "cuDeviceGetUuid_v2",
        )?;
        Ok(super::raw_uuid(&u))
    }

    pub fn primary_ctx_retain(dev: sys::CUdevice) -> R<sys::CUcontext> {
        let mut ctx: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: writes one context handle through a valid pointer.
        check(
            unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, dev) },
            "cuDevicePrimaryCtxRetain",
        )?;
        Ok(ctx)
    }

    pub fn primary_ctx_release(dev: sys::CUdevice) -> R<()> {
        // SAFETY: drops one reference this process took with
        // cuDevicePrimaryCtxRetain; the ledger calls it once per retain.
        check(
            unsafe { sys::cuDevicePrimaryCtxRelease_v2(dev) },
            "cuDevicePrimaryCtxRelease",
        )
    }

    pub fn ctx_set_current(ctx: sys::CUcontext) -> R<()> {
        // SAFETY: `ctx` is a retained primary context (or null, which unbinds).
        check(unsafe { sys::cuCtxSetCurrent(ctx) }, "cuCtxSetCurrent")
    }

    pub fn ipc_open(handle: &[u8; 64]) -> R<u64> {
        let mut ptr: sys::CUdeviceptr = 0;
        let flags = sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32;
        // SAFETY: the handle is passed by value; the driver validates it and
        // writes one device pointer through a valid pointer.
        check(
            unsafe { sys::cuIpcOpenMemHandle_v2(&mut ptr, super::ipc_handle(handle), flags) },
            "cuIpcOpenMemHandle",
        )?;
        Ok(ptr)
    }

    pub fn ipc_close(ptr: u64) -> R<()> {
        // SAFETY: `ptr` came from cuIpcOpenMemHandle in this process; closing
        // drops only our mapping, never the owner's allocation.
        check(
            unsafe { sys::cuIpcCloseMemHandle(ptr) },
            "cuIpcCloseMemHandle",
        )
    }

    pub fn import_fabric(bytes: &[u8; 64]) -> R<u64> {
        let mut fh = super::fabric_handle(bytes);
        let mut h: sys::CUmemGenericAllocationHandle = 0;
        // SAFETY: for FABRIC the os handle is a pointer to a 64-byte
        // CUmemFabricHandle, which `fh` is and which outlives the call.
        check(
            unsafe {
                sys::cuMemImportFromShareableHandle(
                    &mut h,
                    (&mut fh as *mut sys::CUmemFabricHandle).cast(),
                    sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_FABRIC,
                )
            },
            "cuMemImportFromShareableHandle(fabric)",
        )?;
        Ok(h)
    }

    pub fn import_fd(fd: BorrowedFd<'_>) -> R<u64> {
        let mut h: sys::CUmemGenericAllocationHandle = 0;
        // SAFETY: for POSIX_FILE_DESCRIPTOR the os handle is the fd itself,
        // cast to a pointer-sized value; the driver does not take ownership
        // of the fd, which stays open for the duration of the call.
        check(
            unsafe {
                sys::cuMemImportFromShareableHandle(
                    &mut h,
                    fd.as_raw_fd() as usize as *mut core::ffi::c_void,
                    sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                )
            },
            "cuMemImportFromShareableHandle(posix_fd)",
        )?;
        Ok(h)
    }

    pub fn allocation_props(handle: u64) -> R<sys::CUmemAllocationProp> {
        // SAFETY: every field of CUmemAllocationProp (enums with a 0 variant,
        // integers, a pointer) is valid all-zero.
        let mut p: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
        // SAFETY: the driver fills `p` for a handle this process holds.
        check(
            unsafe { sys::cuMemGetAllocationPropertiesFromHandle(&mut p, handle) },
            "cuMemGetAllocationPropertiesFromHandle",
        )?;
        Ok(p)
    }

    pub fn granularity(prop: &sys::CUmemAllocationProp) -> R<u64> {
        let mut g: usize = 0;
        // SAFETY: reads `prop` and writes one size through valid pointers.
        check(
            unsafe {
                sys::cuMemGetAllocationGranularity(
                    &mut g,
                    prop,
                    sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
                )
            },
            "cuMemGetAllocationGranularity",
        )?;
        Ok(g as u64)
    }

    pub fn address_reserve(size: u64, align: u64) -> R<u64> {
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: reserves fresh virtual address space (no fixed address);
        // writes one pointer through a valid pointer.
        check(
            unsafe { sys::cuMemAddressReserve(&mut ptr, size as usize, align as usize, 0, 0) },
            "cuMemAddressReserve",
        )?;
        Ok(ptr)
    }

    pub fn address_free(ptr: u64, size: u64) -> R<()> {
        // SAFETY: frees a range this process reserved, with its reserved size.
        check(
            unsafe { sys::cuMemAddressFree(ptr, size as usize) },
            "cuMemAddressFree",
        )
    }

    pub fn map(ptr: u64, size: u64, handle: u64) -> R<()> {
        // SAFETY: maps a handle we hold into a range we reserved, offset 0.
        check(
            unsafe { sys::cuMemMap(ptr, size as usize, 0, handle, 0) },
            "cuMemMap",
        )
    }

    pub fn unmap(ptr: u64, size: u64) -> R<()> {
        // SAFETY: unmaps a range this process mapped; the owner's mappings
        // are in the owner's address space and untouched.
        check(unsafe { sys::cuMemUnmap(ptr, size as usize) }, "cuMemUnmap")
    }

    pub fn set_access(ptr: u64, size: u64, ordinal: i32) -> R<()> {
        let desc = sys::CUmemAccessDesc {
            location: sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: ordinal,
            },
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: one valid access descriptor for a range we mapped.
        check(
            unsafe { sys::cuMemSetAccess(ptr, size as usize, &desc, 1) },
            "cuMemSetAccess",
        )
    }

    pub fn mem_release(handle: u64) -> R<()> {
        // SAFETY: drops the reference cuMemImportFromShareableHandle gave this
        // process; the owner's own handle keeps the memory alive.
        check(unsafe { sys::cuMemRelease(handle) }, "cuMemRelease")
    }

    pub fn address_range(ptr: u64) -> R<(u64, u64)> {
        let (mut base, mut size): (sys::CUdeviceptr, usize) = (0, 0);
        // SAFETY: writes a base and a size through valid pointers.
        check(
            unsafe { sys::cuMemGetAddressRange_v2(&mut base, &mut size, ptr) },
            "cuMemGetAddressRange",
        )?;
        Ok((base, size as u64))
    }

    pub fn pointer_device(ptr: u64) -> R<i32> {
        let mut ordinal: core::ffi::c_int = -1;
        // SAFETY: DEVICE_ORDINAL writes one int through the data pointer.
        check(
            unsafe {
                sys::cuPointerGetAttribute(
                    (&mut ordinal as *mut core::ffi::c_int).cast(),
                    sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                    ptr,
                )
            },
            "cuPointerGetAttribute(DEVICE_ORDINAL)",
        )?;
        Ok(ordinal)
    }
}

/// A visible device: its ordinal in this process, handle and UUID.
#[derive(Clone, Copy, Debug)]
struct Visible {
    ordinal: i32,
    dev: sys::CUdevice,
    uuid: [u8; 16],
}

/// The real backend.
pub struct CudaBackend {
    devices: Option<Vec<Visible>>,
    /// Retained primary contexts by ordinal, with our retain count.
    contexts: BTreeMap<i32, (sys::CUdevice, sys::CUcontext, usize)>,
}

impl CudaBackend {
    /// Checks the driver without calling it: libcuda loads and has every
    /// symbol kvcr uses. `cuInit` runs on the first device lookup.
    pub fn new() -> Result<CudaBackend, DriverError> {
        if !driver_present() {
            return Err(DriverError::NotFound);
        }
        let missing = missing_symbols();
        if !missing.is_empty() {
            return Err(DriverError::TooOld { missing });
        }
        Ok(CudaBackend {
            devices: None,
            contexts: BTreeMap::new(),
        })
    }

    fn visible(&mut self) -> Result<&[Visible], String> {
        if self.devices.is_none() {
            drv::init()?;
            let n = drv::device_count()?;
            let mut v = Vec::with_capacity(n.max(0) as usize);
            for ordinal in 0..n {
                let dev = drv::device_get(ordinal)?;
                v.push(Visible {
                    ordinal,
                    dev,
                    uuid: drv::device_uuid(dev)?,
                });
            }
            self.devices = Some(v);
        }
        Ok(self.devices.as_deref().unwrap_or_default())
    }

    /// Makes `ordinal`'s retained primary context current on this thread.
    fn enter(&self, ordinal: i32) -> Result<(), String> {
        let (_, ctx, _) = self
            .contexts
            .get(&ordinal)
            .ok_or_else(|| format!("no retained context for device {ordinal}"))?;
        drv::ctx_set_current(*ctx)
    }

    fn handle_of(r: &Resource) -> Result<u64, String> {
        match *r {
            Resource::Imported { handle, .. } => Ok(handle),
            other => Err(format!("internal: {other} is not an imported handle")),
        }
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn open_device(&mut self, gpu: &GpuUuid) -> Result<(Device, Resource), String> {
        let visible = self.visible()?;
        let found = visible.iter().find(|v| uuid_matches(gpu, &v.uuid)).copied();
        let Some(v) = found else {
            return Err(format!(
                "{gpu} is not among the {} CUDA devices visible to this process (CUDA_VISIBLE_DEVICES?)",
                visible.len()
            ));
        };
        let ctx = drv::primary_ctx_retain(v.dev)?;
        let e = self.contexts.entry(v.ordinal).or_insert((v.dev, ctx, 0));
        e.2 += 1;
        // Nothing fallible between the retain and handing it to the ledger:
        // every later step makes the context current itself (`enter`), so a
        // failure there is a recorded step failure and the ledger releases
        // the retain (a failed release is then reported, exit 4).
        Ok((Device(v.ordinal), Resource::Context { device: v.ordinal }))
    }

    fn ipc_open(&mut self, dev: Device, handle: &[u8; 64]) -> Result<Resource, String> {
        self.enter(dev.0)?;
        let ptr = drv::ipc_open(handle)?;
        Ok(Resource::IpcMapping { device: dev.0, ptr })
    }

    fn import_shareable(
        &mut self,
        dev: Device,
        handle: &Handle,
        owner: &Owner,
    ) -> Result<Resource, String> {
        self.enter(dev.0)?;
        let h = match handle {
            Handle::Fabric(bytes) => drv::import_fabric(bytes)?,
            Handle::PosixFd(fd) => {
                let dup =
                    pidfd::take_fd(owner.pid, *fd, owner.start_ticks, &pidfd::proc_start_ticks)
                        .map_err(|e| format!("taking fd {fd} of owner {}: {e}", owner.pid))?;
                let r = drv::import_fd(dup.as_fd());
                drop(dup); // our duplicate is closed whether or not the import worked
                r?
            }
            Handle::CudaIpc(_) => return Err("internal: cuda_ipc is not a shareable handle".into()),
        };
        Ok(Resource::Imported {
            device: dev.0,
            handle: h,
        })
    }

    fn reserve(&mut self, dev: Device, imported: &Resource, size: u64) -> Result<Resource, String> {
        self.enter(dev.0)?;
        let props = drv::allocation_props(Self::handle_of(imported)?)?;
        let gran = drv::granularity(&props)?;
        let size = round_up(size, gran)
            .ok_or_else(|| format!("size {size} cannot be rounded to granularity {gran}"))?;
        let ptr = drv::address_reserve(size, gran)?;
        Ok(Resource::Reservation {
            device: dev.0,
            ptr,
            size,
        })
    }

    fn map(
        &mut self,
        dev: Device,
        reservation: &Resource,
        imported: &Resource,
    ) -> Result<Resource, String> {
        self.enter(dev.0)?;
        let Resource::Reservation { ptr, size, .. } = *reservation else {
            return Err(format!("internal: cannot map into {reservation}"));
        };
        drv::map(ptr, size, Self::handle_of(imported)?)?;
        Ok(Resource::Mapping {
            device: dev.0,
            ptr,
            size,
        })
    }

    fn set_access(&mut self, dev: Device, mapping: &Resource) -> Result<(), String> {
        self.enter(dev.0)?;
        let Resource::Mapping { ptr, size, .. } = *mapping else {
            return Err(format!("internal: cannot set access on {mapping}"));
        };
        drv::set_access(ptr, size, dev.0)
    }

    fn inspect(
        &mut self,
        dev: Device,
        mapping: &Resource,
        imported: Option<&Resource>,
    ) -> Result<Mapped, String> {
        self.enter(dev.0)?;
        let ptr = match *mapping {
            Resource::Mapping { ptr, .. } | Resource::IpcMapping { ptr, .. } => ptr,
            other => return Err(format!("internal: cannot inspect {other}")),
        };
        let (base, size) = drv::address_range(ptr)?;
        let device = match imported {
            Some(r) => {
                let p = drv::allocation_props(Self::handle_of(r)?)?;
                if p.location.type_ != sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE {
                    return Err(format!(
                        "the imported allocation is not device memory (location {:?})",
                        p.location.type_
                    ));
                }
                p.location.id
            }
            None => drv::pointer_device(ptr)?,
        };
        Ok(Mapped { base, size, device })
    }

    fn release(&mut self, r: &Resource) -> Result<(), String> {
        match *r {
            Resource::Context { device } => {
                let (dev, _, count) = *self
                    .contexts
                    .get(&device)
                    .ok_or_else(|| format!("no retained context for device {device}"))?;
                let _ = drv::ctx_set_current(std::ptr::null_mut());
                drv::primary_ctx_release(dev)?;
                if count <= 1 {
                    self.contexts.remove(&device);
                } else if let Some(e) = self.contexts.get_mut(&device) {
                    e.2 -= 1;
                }
                Ok(())
            }
            Resource::IpcMapping { device, ptr } => {
                self.enter(device)?;
                drv::ipc_close(ptr)
            }
            Resource::Imported { device, handle } => {
                self.enter(device)?;
                drv::mem_release(handle)
            }
            Resource::Reservation { device, ptr, size } => {
                self.enter(device)?;
                drv::address_free(ptr, size)
            }
            Resource::Mapping { device, ptr, size } => {
                self.enter(device)?;
                drv::unmap(ptr, size)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn uuid_bytes_decode_and_match() {
        let gpu = GpuUuid::parse("GPU-6a1f0c2e-0000-4000-8000-00000000000a").unwrap();
        let raw: [u8; 16] = [
            0x6a, 0x1f, 0x0c, 0x2e, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0x0a,
        ];
        let cu = sys::CUuuid {
            bytes: raw.map(|b| b as core::ffi::c_char),
        };
        assert_eq!(raw_uuid(&cu), raw);
        assert!(uuid_matches(&gpu, &raw_uuid(&cu)));
        let mig = GpuUuid::parse("MIG-6a1f0c2e-0000-4000-8000-00000000000a").unwrap();
        assert!(uuid_matches(&mig, &raw));
        let mut other = raw;
        other[15] = 0x0b;
        assert!(!uuid_matches(&gpu, &other));
        // Bytes above 0x7f survive the signed c_char round trip.
        let high = [0xffu8; 16];
        let cu = sys::CUuuid {
            bytes: high.map(|b| b as core::ffi::c_char),
        };
        assert_eq!(raw_uuid(&cu), high);
    }

    #[test]
    fn handle_bytes_convert_unchanged() {
        let bytes: [u8; 64] = std::array::from_fn(|i| (i * 37 % 256) as u8);
        let ipc = ipc_handle(&bytes);
        assert_eq!(ipc.reserved.map(|b| b as u8), bytes);
        assert_eq!(fabric_handle(&bytes).data, bytes);
        assert_eq!(std::mem::size_of::<sys::CUipcMemHandle>(), 64);
        assert_eq!(std::mem::size_of::<sys::CUmemFabricHandle>(), 64);
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
