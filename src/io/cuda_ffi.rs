//! The one CUDA driver FFI module: the node probe (`node::gpus`) and the
//! import backend (`import::cuda`) both call the driver through it.
//!
//! - libcuda is opened with `dlopen` (`libcuda.so.1`, then `libcuda.so`)
//!   on first use and never closed; a missing library is an error, never a
//!   panic, and nothing is called before the library and each symbol are
//!   known to exist.
//! - Every entry point is resolved with its C signature from `cuda.h`, with
//!   each enum the driver reads or writes (`CUresult`, `CUmemLocationType`,
//!   access flags, handle types, pointer attributes) spelled as a C `int`.
//!   A driver integer is never turned into a Rust enum: a status that this
//!   build does not know (a newer driver's 919 or 36) stays a number,
//!   [`Status`], and prints as "CUDA error 919 (unknown to this build)".
//! - The struct layouts are written from `cuda.h` (CUDA 12.x) and pinned by
//!   compile-time size checks; `tests/fakecuda/fakecuda.c` pins the same
//!   layouts with `_Static_assert` on the C side.
//! - Calls that take device addresses or handles the driver cannot tell
//!   apart from someone else's are `unsafe fn` with their contract; calls
//!   that only write through pointers to our own locals are safe.

// Calls the C library, the kernel or the CUDA driver through raw pointers:
// one of the files allowed unsafe code (Cargo.toml [lints]); every block
// says why it is sound.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::fmt;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::OnceLock;

/// `CUdevice`: the driver's device handle (from `cuDeviceGet`, not the ordinal).
pub type CuDevice = c_int;
/// `CUdeviceptr` on a 64-bit host.
pub type DevicePtr = u64;
/// `CUmemGenericAllocationHandle`.
pub type MemHandle = u64;

/// `CUuuid`: 16 raw bytes (declared `char[16]` in C; the layout is the same).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CuUuid {
    pub bytes: [u8; 16],
}

/// `CUipcMemHandle`: 64 opaque bytes, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IpcMemHandle {
    pub reserved: [u8; 64],
}

/// `CUmemFabricHandle`: 64 opaque bytes.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FabricHandle {
    pub data: [u8; 64],
}

/// `CUmemLocation`: `{CUmemLocationType type; int id;}`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemLocation {
    pub type_: c_int,
    pub id: c_int,
}

/// The `allocFlags` member of `CUmemAllocationProp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct AllocFlags {
    pub compression_type: u8,
    pub gpu_direct_rdma_capable: u8,
    pub usage: u16,
    pub reserved: [u8; 4],
}

/// `CUmemAllocationProp`. The CUDA 13.x headers make `location.id` a union
/// with a `{deviceId, localityDomainId}` byte pair (for
/// `CU_MEM_LOCATION_TYPE_DEVICE_LOCALITY_DOMAIN`): still 4 bytes, so the
/// layout is unchanged, and kvcr reads `id` as an int only where the
/// location type is device (1).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MemAllocationProp {
    pub type_: c_int,
    pub requested_handle_types: c_int,
    pub location: MemLocation,
    pub win32_handle_meta_data: *mut c_void,
    pub alloc_flags: AllocFlags,
}

/// `CUmemAccessDesc`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MemAccessDesc {
    pub location: MemLocation,
    pub flags: c_int,
}

const _: () = {
    assert!(std::mem::size_of::<CuUuid>() == 16);
    assert!(std::mem::size_of::<IpcMemHandle>() == 64);
    assert!(std::mem::size_of::<FabricHandle>() == 64);
    assert!(std::mem::size_of::<MemLocation>() == 8);
    assert!(std::mem::size_of::<MemAllocationProp>() == 32);
    assert!(std::mem::offset_of!(MemAllocationProp, win32_handle_meta_data) == 16);
    assert!(std::mem::offset_of!(MemAllocationProp, alloc_flags) == 24);
    assert!(std::mem::size_of::<MemAccessDesc>() == 12);
};

/// `cuda.h` constants kvcr passes (never reads back as an enum).
pub mod consts {
    use std::ffi::c_int;
    pub const CU_MEM_ALLOCATION_TYPE_PINNED: c_int = 1;
    pub const CU_MEM_LOCATION_TYPE_DEVICE: c_int = 1;
    pub const CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: c_int = 1;
    pub const CU_MEM_HANDLE_TYPE_FABRIC: c_int = 8;
    pub const CU_MEM_ACCESS_FLAGS_PROT_READ: c_int = 1;
    pub const CU_MEM_ACCESS_FLAGS_PROT_READWRITE: c_int = 3;
    pub const CU_MEM_ALLOC_GRANULARITY_MINIMUM: c_int = 0;
    pub const CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: c_int = 9;
    pub const CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID: c_int = 20;
    pub const CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: c_int = 20;
    pub const CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS: std::ffi::c_uint = 1;
}

/// A `CUresult` as the integer the driver returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Status(pub i32);

impl Status {
    pub const STUB_LIBRARY: Status = Status(34);
    pub const NO_DEVICE: Status = Status(100);

    /// The `cuda.h` (CUDA 12.8) name, when this build knows the code.
    pub fn name(self) -> Option<&'static str> {
        status_name(self.0)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n} ({})", self.0),
            None => write!(f, "CUDA error {} (unknown to this build)", self.0),
        }
    }
}

/// One driver call that did not return `CUDA_SUCCESS`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallError {
    /// The entry point, as kvcr names it (`cuMemMap`, `cuMemSetAccess(read-only)`).
    pub call: &'static str,
    /// What the driver returned; `None` when this libcuda lacks the entry
    /// point (nothing was called).
    pub status: Option<Status>,
    /// The driver's own text for the code (`cuGetErrorString`), when it has one.
    pub text: Option<String>,
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(status) = self.status else {
            return write!(
                f,
                "{}: this libcuda lacks the entry point (driver too old)",
                self.call
            );
        };
        write!(f, "{} failed: {status}", self.call)?;
        if let Some(t) = &self.text {
            write!(f, ": {t}")?;
        }
        Ok(())
    }
}

/// Why the driver cannot be used at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadError {
    /// Neither `libcuda.so.1` nor `libcuda.so` could be opened.
    NotFound(String),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::NotFound(why) => write!(f, "libcuda could not be loaded ({why})"),
        }
    }
}

macro_rules! driver_api {
    ($( $field:ident = $sym:literal : fn($($arg:ty),*); )*) => {
        /// The entry points, each `None` when this libcuda lacks it.
        #[derive(Clone, Copy)]
        struct Api {
            $( $field: Option<unsafe extern "C" fn($($arg),*) -> c_int>, )*
        }

        impl Api {
            /// # Safety
            /// `lib` is a live handle from `dlopen`, never closed.
            unsafe fn resolve(lib: *mut c_void) -> Api {
                Api {
                    $( $field: {
                        // SAFETY: the caller's contract (# Safety); `lib` is live; the name is NUL-terminated.
                        let p = unsafe { libc::dlsym(lib, concat!($sym, "\0").as_ptr().cast()) };
                        if p.is_null() {
                            None
                        } else {
                            // SAFETY: the symbol is the cuda.h function of this
                            // name, whose C signature this type spells (enums as
                            // int); a data pointer and a function pointer have the
                            // same size on every platform kvcr supports.
                            Some(unsafe {
                                std::mem::transmute::<
                                    *mut c_void,
                                    unsafe extern "C" fn($($arg),*) -> c_int,
                                >(p)
                            })
                        }
                    }, )*
                }
            }

            /// The names of the entry points this libcuda lacks, of `wanted`.
            fn missing(&self, wanted: &[&'static str]) -> Vec<&'static str> {
                let mut out = Vec::new();
                $( if self.$field.is_none() && wanted.contains(&$sym) { out.push($sym); } )*
                out
            }
        }
    };
}

driver_api! {
    init = "cuInit": fn(c_uint);
    get_error_string = "cuGetErrorString": fn(c_int, *mut *const c_char);
    device_get_count = "cuDeviceGetCount": fn(*mut c_int);
    device_get = "cuDeviceGet": fn(*mut CuDevice, c_int);
    device_get_uuid_v2 = "cuDeviceGetUuid_v2": fn(*mut CuUuid, CuDevice);
    device_get_uuid = "cuDeviceGetUuid": fn(*mut CuUuid, CuDevice);
    primary_ctx_retain = "cuDevicePrimaryCtxRetain": fn(*mut *mut c_void, CuDevice);
    primary_ctx_release = "cuDevicePrimaryCtxRelease_v2": fn(CuDevice);
    ctx_set_current = "cuCtxSetCurrent": fn(*mut c_void);
    ipc_open = "cuIpcOpenMemHandle_v2": fn(*mut DevicePtr, IpcMemHandle, c_uint);
    ipc_close = "cuIpcCloseMemHandle": fn(DevicePtr);
    mem_import = "cuMemImportFromShareableHandle": fn(*mut MemHandle, *mut c_void, c_int);
    mem_granularity = "cuMemGetAllocationGranularity":
        fn(*mut usize, *const MemAllocationProp, c_int);
    address_reserve = "cuMemAddressReserve": fn(*mut DevicePtr, usize, usize, DevicePtr, u64);
    address_free = "cuMemAddressFree": fn(DevicePtr, usize);
    mem_map = "cuMemMap": fn(DevicePtr, usize, usize, MemHandle, u64);
    mem_unmap = "cuMemUnmap": fn(DevicePtr, usize);
    mem_set_access = "cuMemSetAccess": fn(DevicePtr, usize, *const MemAccessDesc, usize);
    mem_release = "cuMemRelease": fn(MemHandle);
    address_range = "cuMemGetAddressRange_v2": fn(*mut DevicePtr, *mut usize, DevicePtr);
    pointer_attribute = "cuPointerGetAttribute": fn(*mut c_void, c_int, DevicePtr);
    memcpy_dtoh = "cuMemcpyDtoH_v2": fn(*mut c_void, DevicePtr, usize);
    mem_properties = "cuMemGetAllocationPropertiesFromHandle":
        fn(*mut MemAllocationProp, MemHandle);
    mem_get_access = "cuMemGetAccess": fn(*mut u64, *const MemLocation, DevicePtr);
    device_get_attribute = "cuDeviceGetAttribute": fn(*mut c_int, c_int, CuDevice);
}

/// Every entry point the import backend calls.
pub const IMPORT_SYMBOLS: [&str; 23] = [
    "cuInit",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetUuid_v2",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",
    "cuIpcOpenMemHandle_v2",
    "cuIpcCloseMemHandle",
    "cuMemImportFromShareableHandle",
    "cuMemGetAllocationGranularity",
    "cuMemAddressReserve",
    "cuMemAddressFree",
    "cuMemMap",
    "cuMemUnmap",
    "cuMemSetAccess",
    "cuMemRelease",
    "cuMemGetAddressRange_v2",
    "cuPointerGetAttribute",
    "cuGetErrorString",
    "cuMemcpyDtoH_v2",
    "cuMemGetAllocationPropertiesFromHandle",
    "cuMemGetAccess",
];

/// A retained primary context. Only [`Driver::primary_ctx_retain`] makes
/// one, so [`Driver::ctx_set_current`] can never be handed a stray pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Context(*mut c_void);

/// The loaded driver. One per process, never unloaded.
pub struct Driver {
    api: Api,
}

// SAFETY: Api holds only function pointers into a library that stays loaded
// for the life of the process; the driver API is thread-safe.
unsafe impl Send for Driver {}
// SAFETY: as above; nothing in Driver is mutated after loading.
unsafe impl Sync for Driver {}

/// The loaded driver: kept once loaded (a library is never unloaded, so
/// the function pointers stay valid), never a failure, which a later call
/// tries again (a driver installed or a library path fixed while a
/// long-running caller waits).
static DRIVER: OnceLock<Driver> = OnceLock::new();

/// The driver, loaded on first success. Calls nothing in it.
pub fn driver() -> Result<&'static Driver, LoadError> {
    if let Some(d) = DRIVER.get() {
        return Ok(d);
    }
    // Two threads may both load: dlopen hands out one handle, and the
    // second Driver (function pointers only) is dropped unused.
    let loaded = load()?;
    Ok(DRIVER.get_or_init(|| loaded))
}

fn load() -> Result<Driver, LoadError> {
    load_from(&[c"libcuda.so.1", c"libcuda.so"])
}

/// The first of `names` that `dlopen` opens, as a driver; else why the
/// first could not be opened.
fn load_from(names: &[&CStr]) -> Result<Driver, LoadError> {
    let mut why = String::new();
    for name in names {
        // SAFETY: dlopen with a NUL-terminated name; running the library's
        // initialisers is what loading a driver means.
        let lib = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if !lib.is_null() {
            // SAFETY: `lib` is live and is never closed.
            let api = unsafe { Api::resolve(lib) };
            return Ok(Driver { api });
        }
        // SAFETY: dlerror returns a thread-local NUL-terminated string or null.
        let e = unsafe { libc::dlerror() };
        if !e.is_null() && why.is_empty() {
            // SAFETY: non-null, NUL-terminated (above).
            why = unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned();
        }
    }
    Err(LoadError::NotFound(if why.is_empty() {
        "libcuda.so.1 not found".into()
    } else {
        why
    }))
}

/// The symbol, or a "driver too old" error naming it.
macro_rules! sym {
    ($self:ident . $field:ident, $name:literal) => {
        match $self.api.$field {
            Some(f) => f,
            None => return Err($self.missing_symbol($name)),
        }
    };
}

impl Driver {
    /// Of `wanted`, the entry points this libcuda lacks.
    pub fn missing(&self, wanted: &[&'static str]) -> Vec<&'static str> {
        self.api.missing(wanted)
    }

    fn missing_symbol(&self, name: &'static str) -> CallError {
        CallError {
            call: name,
            status: None,
            text: None,
        }
    }

    /// Maps a status to `Ok` or a [`CallError`] with the driver's own text.
    pub fn check(&self, call: &'static str, r: c_int) -> Result<(), CallError> {
        if r == 0 {
            return Ok(());
        }
        Err(CallError {
            call,
            status: Some(Status(r)),
            text: self.error_string(Status(r)),
        })
    }

    /// `cuGetErrorString`, bounded and lossily decoded; `None` when the
    /// driver has no text for the code (or lacks the call).
    pub fn error_string(&self, s: Status) -> Option<String> {
        let f = self.api.get_error_string?;
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: writes one pointer through a valid pointer; any int is a
        // valid argument (unknown codes answer CUDA_ERROR_INVALID_VALUE).
        let r = unsafe { f(s.0, &mut p) };
        if r != 0 || p.is_null() {
            return None;
        }
        // SAFETY: on success the driver points at a static NUL-terminated string.
        let text = unsafe { CStr::from_ptr(p) }.to_string_lossy();
        let t: String = text.chars().take(200).collect();
        (!t.is_empty()).then_some(t)
    }

    pub fn init(&self) -> Result<(), CallError> {
        let f = sym!(self.init, "cuInit");
        // SAFETY: flags by value, must be 0; cuInit may be called repeatedly.
        self.check("cuInit", unsafe { f(0) })
    }

    pub fn device_count(&self) -> Result<i32, CallError> {
        let f = sym!(self.device_get_count, "cuDeviceGetCount");
        let mut n: c_int = 0;
        // SAFETY: writes one int through a valid pointer.
        self.check("cuDeviceGetCount", unsafe { f(&mut n) })?;
        Ok(n)
    }

    pub fn device_get(&self, ordinal: i32) -> Result<CuDevice, CallError> {
        let f = sym!(self.device_get, "cuDeviceGet");
        let mut d: CuDevice = 0;
        // SAFETY: writes one int through a valid pointer; the driver checks the ordinal.
        self.check("cuDeviceGet", unsafe { f(&mut d, ordinal) })?;
        Ok(d)
    }

    /// `cuDeviceGetUuid_v2`: the MIG instance's UUID in MIG mode.
    pub fn device_uuid(&self, dev: CuDevice) -> Result<[u8; 16], CallError> {
        let f = sym!(self.device_get_uuid_v2, "cuDeviceGetUuid_v2");
        let mut u = CuUuid::default();
        // SAFETY: writes 16 bytes into a valid CUuuid; the driver checks `dev`.
        self.check("cuDeviceGetUuid_v2", unsafe { f(&mut u, dev) })?;
        Ok(u.bytes)
    }

    /// `cuDeviceGetUuid` (v1); `None` where the driver lacks it or refuses.
    /// Older drivers answer the physical GPU for a MIG instance; current
    /// CUDA documents it as MIG-aware (the instance's UUID, like v2), so it
    /// may only ever name a device MIG where it differs from v2.
    pub fn device_uuid_v1(&self, dev: CuDevice) -> Option<[u8; 16]> {
        let f = self.api.device_get_uuid?;
        let mut u = CuUuid::default();
        // SAFETY: as for cuDeviceGetUuid_v2.
        (unsafe { f(&mut u, dev) } == 0).then_some(u.bytes)
    }

    pub fn primary_ctx_retain(&self, dev: CuDevice) -> Result<Context, CallError> {
        let f = sym!(self.primary_ctx_retain, "cuDevicePrimaryCtxRetain");
        let mut ctx: *mut c_void = std::ptr::null_mut();
        // SAFETY: writes one context handle through a valid pointer.
        self.check("cuDevicePrimaryCtxRetain", unsafe { f(&mut ctx, dev) })?;
        Ok(Context(ctx))
    }

    /// Drops one reference taken with [`Driver::primary_ctx_retain`].
    ///
    /// # Safety
    /// The caller took a reference on `dev` that it has not dropped yet, and
    /// nothing it still uses lives in that context.
    pub unsafe fn primary_ctx_release(&self, dev: CuDevice) -> Result<(), CallError> {
        let f = sym!(self.primary_ctx_release, "cuDevicePrimaryCtxRelease_v2");
        // SAFETY: the caller's contract (# Safety); balances one retain of ours.
        self.check("cuDevicePrimaryCtxRelease_v2", unsafe { f(dev) })
    }

    /// Makes `ctx` current on this thread (`None` unbinds).
    pub fn ctx_set_current(&self, ctx: Option<Context>) -> Result<(), CallError> {
        let f = sym!(self.ctx_set_current, "cuCtxSetCurrent");
        let p = ctx.map_or(std::ptr::null_mut(), |c| c.0);
        // SAFETY: `p` is null or a context the driver handed us (Context is
        // only made by primary_ctx_retain); the driver rejects a released one.
        self.check("cuCtxSetCurrent", unsafe { f(p) })
    }

    /// `cuIpcOpenMemHandle` with lazy peer access: maps the exporter's
    /// whole allocation into the current context.
    pub fn ipc_open(&self, handle: &[u8; 64]) -> Result<DevicePtr, CallError> {
        let f = sym!(self.ipc_open, "cuIpcOpenMemHandle_v2");
        let mut ptr: DevicePtr = 0;
        let h = IpcMemHandle { reserved: *handle };
        // SAFETY: the handle is passed by value (64 bytes, as cuda.h declares
        // it); the driver validates it and writes one pointer.
        self.check("cuIpcOpenMemHandle_v2", unsafe {
            f(&mut ptr, h, consts::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
        })?;
        Ok(ptr)
    }

    /// # Safety
    /// `ptr` came from [`Driver::ipc_open`] in this process and was not closed.
    pub unsafe fn ipc_close(&self, ptr: DevicePtr) -> Result<(), CallError> {
        let f = sym!(self.ipc_close, "cuIpcCloseMemHandle");
        // SAFETY: the caller's contract (# Safety); our own mapping; the exporter's memory is untouched.
        self.check("cuIpcCloseMemHandle", unsafe { f(ptr) })
    }

    /// Imports a fabric handle (the 64 bytes).
    pub fn import_fabric(&self, bytes: &[u8; 64]) -> Result<MemHandle, CallError> {
        let f = sym!(self.mem_import, "cuMemImportFromShareableHandle");
        let mut fh = FabricHandle { data: *bytes };
        let mut h: MemHandle = 0;
        // SAFETY: for FABRIC the os handle points at a 64-byte
        // CUmemFabricHandle, which `fh` is and which outlives the call.
        self.check("cuMemImportFromShareableHandle(fabric)", unsafe {
            f(
                &mut h,
                (&mut fh as *mut FabricHandle).cast(),
                consts::CU_MEM_HANDLE_TYPE_FABRIC,
            )
        })?;
        Ok(h)
    }

    /// Imports a POSIX fd handle (the driver does not take the fd).
    pub fn import_fd(&self, fd: BorrowedFd<'_>) -> Result<MemHandle, CallError> {
        let f = sym!(self.mem_import, "cuMemImportFromShareableHandle");
        let mut h: MemHandle = 0;
        // SAFETY: for POSIX_FILE_DESCRIPTOR the os handle is the fd itself as
        // a pointer-sized integer; it stays open for the call.
        self.check("cuMemImportFromShareableHandle(posix_fd)", unsafe {
            f(
                &mut h,
                fd.as_raw_fd() as usize as *mut c_void,
                consts::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            )
        })?;
        Ok(h)
    }

    /// Minimum granularity of an allocation with the properties `prop`: the
    /// imported allocation's own, as
    /// `cuMemGetAllocationPropertiesFromHandle` wrote them.
    pub fn granularity(&self, prop: &MemAllocationProp) -> Result<u64, CallError> {
        let f = sym!(self.mem_granularity, "cuMemGetAllocationGranularity");
        let mut g: usize = 0;
        // SAFETY: reads `prop` (a struct the driver itself wrote), writes
        // one size, both valid for the call.
        self.check("cuMemGetAllocationGranularity", unsafe {
            f(&mut g, prop, consts::CU_MEM_ALLOC_GRANULARITY_MINIMUM)
        })?;
        Ok(g as u64)
    }

    /// `CU_DEVICE_ATTRIBUTE_COMPUTE_MODE` of `dev`, as the integer the
    /// driver wrote; `None` where the driver lacks the call or refuses.
    pub fn compute_mode(&self, dev: CuDevice) -> Option<i32> {
        let f = self.api.device_get_attribute?;
        let mut v: c_int = -1;
        // SAFETY: writes one int through a valid pointer; the driver checks `dev`.
        let r = unsafe { f(&mut v, consts::CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, dev) };
        (r == 0).then_some(v)
    }

    /// Reserves a fresh virtual address range (no fixed address).
    pub fn address_reserve(&self, size: u64, align: u64) -> Result<DevicePtr, CallError> {
        let f = sym!(self.address_reserve, "cuMemAddressReserve");
        let mut ptr: DevicePtr = 0;
        // SAFETY: writes one pointer; the driver picks an unused range.
        self.check("cuMemAddressReserve", unsafe {
            f(&mut ptr, size as usize, align as usize, 0, 0)
        })?;
        Ok(ptr)
    }

    /// # Safety
    /// `ptr`/`size` is exactly a range this process reserved with
    /// [`Driver::address_reserve`], with nothing of ours still mapped in it.
    pub unsafe fn address_free(&self, ptr: DevicePtr, size: u64) -> Result<(), CallError> {
        let f = sym!(self.address_free, "cuMemAddressFree");
        // SAFETY: the caller's contract (the function's # Safety).
        self.check("cuMemAddressFree", unsafe { f(ptr, size as usize) })
    }

    /// # Safety
    /// `ptr`/`size` lies in a range this process reserved and has not
    /// mapped; `handle` is an imported handle this process holds.
    pub unsafe fn map(
        &self,
        ptr: DevicePtr,
        size: u64,
        handle: MemHandle,
    ) -> Result<(), CallError> {
        let f = sym!(self.mem_map, "cuMemMap");
        // SAFETY: the caller's contract (# Safety). Offset 0: cuda.h says it must be zero; the rank's
        // offset_bytes is applied to the mapped address instead.
        self.check("cuMemMap", unsafe { f(ptr, size as usize, 0, handle, 0) })
    }

    /// # Safety
    /// `ptr`/`size` is exactly a mapping this process made with [`Driver::map`].
    pub unsafe fn unmap(&self, ptr: DevicePtr, size: u64) -> Result<(), CallError> {
        let f = sym!(self.mem_unmap, "cuMemUnmap");
        // SAFETY: the caller's contract (# Safety); our mapping; the owner's are in its own process.
        self.check("cuMemUnmap", unsafe { f(ptr, size as usize) })
    }

    /// Grants device `ordinal` access to a mapping: read-only, or
    /// read-write when `read_write`.
    ///
    /// # Safety
    /// `ptr`/`size` is exactly a mapping this process made with [`Driver::map`].
    pub unsafe fn set_access(
        &self,
        ptr: DevicePtr,
        size: u64,
        ordinal: i32,
        read_write: bool,
    ) -> Result<(), CallError> {
        let call = if read_write {
            "cuMemSetAccess(read-write)"
        } else {
            "cuMemSetAccess(read-only)"
        };
        let f = sym!(self.mem_set_access, "cuMemSetAccess");
        let desc = MemAccessDesc {
            location: MemLocation {
                type_: consts::CU_MEM_LOCATION_TYPE_DEVICE,
                id: ordinal,
            },
            flags: if read_write {
                consts::CU_MEM_ACCESS_FLAGS_PROT_READWRITE
            } else {
                consts::CU_MEM_ACCESS_FLAGS_PROT_READ
            },
        };
        // SAFETY: the caller's contract (# Safety); one valid descriptor, count 1.
        self.check(call, unsafe { f(ptr, size as usize, &desc, 1) })
    }

    /// # Safety
    /// `handle` came from an import in this process and was not released.
    pub unsafe fn mem_release(&self, handle: MemHandle) -> Result<(), CallError> {
        let f = sym!(self.mem_release, "cuMemRelease");
        // SAFETY: the caller's contract (# Safety); drops our reference only.
        self.check("cuMemRelease", unsafe { f(handle) })
    }

    /// `cuMemGetAddressRange`: base and size of the range containing `ptr`.
    /// A lookup only: the driver answers NOT_FOUND for an address it does
    /// not know.
    pub fn address_range(&self, ptr: DevicePtr) -> Result<(DevicePtr, u64), CallError> {
        let f = sym!(self.address_range, "cuMemGetAddressRange_v2");
        let (mut base, mut size): (DevicePtr, usize) = (0, 0);
        // SAFETY: writes a base and a size through valid pointers.
        self.check("cuMemGetAddressRange_v2", unsafe {
            f(&mut base, &mut size, ptr)
        })?;
        Ok((base, size as u64))
    }

    /// `CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL` of `ptr`: the device the memory
    /// at that address resides on. A lookup only.
    pub fn pointer_device(&self, ptr: DevicePtr) -> Result<i32, CallError> {
        let f = sym!(self.pointer_attribute, "cuPointerGetAttribute");
        let mut ordinal: c_int = -1;
        // SAFETY: DEVICE_ORDINAL writes one int through the data pointer.
        self.check("cuPointerGetAttribute(DEVICE_ORDINAL)", unsafe {
            f(
                (&mut ordinal as *mut c_int).cast(),
                consts::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                ptr,
            )
        })?;
        Ok(ordinal)
    }
}

impl Driver {
    /// `CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID` of `ptr`: documented as a
    /// process-wide unique id of the physical allocation the pointer belongs
    /// to (an `unsigned long long`). A lookup only; a driver that predates
    /// the attribute answers an error, which the caller treats as "not
    /// available".
    pub fn pointer_block_id(&self, ptr: DevicePtr) -> Result<u64, CallError> {
        let f = sym!(self.pointer_attribute, "cuPointerGetAttribute");
        let mut id: u64 = 0;
        // SAFETY: MEMORY_BLOCK_ID writes one unsigned long long through the
        // data pointer, which points at our u64.
        self.check("cuPointerGetAttribute(MEMORY_BLOCK_ID)", unsafe {
            f(
                (&mut id as *mut u64).cast(),
                consts::CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID,
                ptr,
            )
        })?;
        Ok(id)
    }
}

impl Driver {
    /// `cuMemcpyDtoH_v2`: copies `len` bytes at device address `src` into a
    /// fresh host buffer. Reads only: kvcr never writes GPU memory.
    ///
    /// # Safety
    /// `src..src + len` lies inside a mapping this process made (an IPC
    /// mapping or a VMM mapping with access granted) that is still mapped.
    pub unsafe fn read(&self, src: DevicePtr, len: u64) -> Result<Vec<u8>, CallError> {
        let f = sym!(self.memcpy_dtoh, "cuMemcpyDtoH_v2");
        let n = usize::try_from(len).map_err(|_| CallError {
            call: "cuMemcpyDtoH_v2",
            status: Some(Status(1)),
            text: Some(format!("{len} bytes do not fit in memory")),
        })?;
        let mut buf = vec![0u8; n];
        // SAFETY: the caller's contract (# Safety); the source is our mapping; the destination is
        // our buffer of exactly `n` bytes.
        self.check("cuMemcpyDtoH_v2", unsafe {
            f(buf.as_mut_ptr().cast(), src, n)
        })?;
        Ok(buf)
    }

    /// `cuMemGetAllocationPropertiesFromHandle`: the allocation type, and
    /// the location type and id, each as the integer the driver wrote.
    ///
    /// # Safety
    /// `handle` came from an import in this process and was not released.
    pub unsafe fn allocation_properties(
        &self,
        handle: MemHandle,
    ) -> Result<MemAllocationProp, CallError> {
        let f = sym!(
            self.mem_properties,
            "cuMemGetAllocationPropertiesFromHandle"
        );
        let mut prop = MemAllocationProp {
            type_: -1,
            requested_handle_types: 0,
            location: MemLocation { type_: -1, id: -1 },
            win32_handle_meta_data: std::ptr::null_mut(),
            alloc_flags: AllocFlags::default(),
        };
        // SAFETY: the caller's contract (# Safety); the driver writes one CUmemAllocationProp.
        self.check("cuMemGetAllocationPropertiesFromHandle", unsafe {
            f(&mut prop, handle)
        })?;
        Ok(prop)
    }

    /// `cuMemGetAccess` of device `ordinal` on `ptr`: the flags as the
    /// integer the driver wrote (a lookup only).
    pub fn access_flags(&self, ordinal: i32, ptr: DevicePtr) -> Result<u64, CallError> {
        let f = sym!(self.mem_get_access, "cuMemGetAccess");
        let loc = MemLocation {
            type_: consts::CU_MEM_LOCATION_TYPE_DEVICE,
            id: ordinal,
        };
        let mut flags: u64 = u64::MAX;
        // SAFETY: reads one location, writes one 64-bit flags word.
        self.check("cuMemGetAccess", unsafe { f(&mut flags, &loc, ptr) })?;
        Ok(flags)
    }
}

/// The `cuda.h` (CUDA 12.8) name of a `CUresult`.
fn status_name(code: i32) -> Option<&'static str> {
    Some(match code {
        0 => "CUDA_SUCCESS",
        1 => "CUDA_ERROR_INVALID_VALUE",
        2 => "CUDA_ERROR_OUT_OF_MEMORY",
        3 => "CUDA_ERROR_NOT_INITIALIZED",
        4 => "CUDA_ERROR_DEINITIALIZED",
        5 => "CUDA_ERROR_PROFILER_DISABLED",
        6 => "CUDA_ERROR_PROFILER_NOT_INITIALIZED",
        7 => "CUDA_ERROR_PROFILER_ALREADY_STARTED",
        8 => "CUDA_ERROR_PROFILER_ALREADY_STOPPED",
        34 => "CUDA_ERROR_STUB_LIBRARY",
        46 => "CUDA_ERROR_DEVICE_UNAVAILABLE",
        100 => "CUDA_ERROR_NO_DEVICE",
        101 => "CUDA_ERROR_INVALID_DEVICE",
        102 => "CUDA_ERROR_DEVICE_NOT_LICENSED",
        200 => "CUDA_ERROR_INVALID_IMAGE",
        201 => "CUDA_ERROR_INVALID_CONTEXT",
        202 => "CUDA_ERROR_CONTEXT_ALREADY_CURRENT",
        205 => "CUDA_ERROR_MAP_FAILED",
        206 => "CUDA_ERROR_UNMAP_FAILED",
        207 => "CUDA_ERROR_ARRAY_IS_MAPPED",
        208 => "CUDA_ERROR_ALREADY_MAPPED",
        209 => "CUDA_ERROR_NO_BINARY_FOR_GPU",
        210 => "CUDA_ERROR_ALREADY_ACQUIRED",
        211 => "CUDA_ERROR_NOT_MAPPED",
        212 => "CUDA_ERROR_NOT_MAPPED_AS_ARRAY",
        213 => "CUDA_ERROR_NOT_MAPPED_AS_POINTER",
        214 => "CUDA_ERROR_ECC_UNCORRECTABLE",
        215 => "CUDA_ERROR_UNSUPPORTED_LIMIT",
        216 => "CUDA_ERROR_CONTEXT_ALREADY_IN_USE",
        217 => "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
        218 => "CUDA_ERROR_INVALID_PTX",
        219 => "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT",
        220 => "CUDA_ERROR_NVLINK_UNCORRECTABLE",
        221 => "CUDA_ERROR_JIT_COMPILER_NOT_FOUND",
        222 => "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
        223 => "CUDA_ERROR_JIT_COMPILATION_DISABLED",
        224 => "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY",
        225 => "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC",
        226 => "CUDA_ERROR_CONTAINED",
        300 => "CUDA_ERROR_INVALID_SOURCE",
        301 => "CUDA_ERROR_FILE_NOT_FOUND",
        302 => "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND",
        303 => "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED",
        304 => "CUDA_ERROR_OPERATING_SYSTEM",
        400 => "CUDA_ERROR_INVALID_HANDLE",
        401 => "CUDA_ERROR_ILLEGAL_STATE",
        402 => "CUDA_ERROR_LOSSY_QUERY",
        500 => "CUDA_ERROR_NOT_FOUND",
        600 => "CUDA_ERROR_NOT_READY",
        700 => "CUDA_ERROR_ILLEGAL_ADDRESS",
        701 => "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
        702 => "CUDA_ERROR_LAUNCH_TIMEOUT",
        703 => "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING",
        704 => "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
        705 => "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
        708 => "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE",
        709 => "CUDA_ERROR_CONTEXT_IS_DESTROYED",
        710 => "CUDA_ERROR_ASSERT",
        711 => "CUDA_ERROR_TOO_MANY_PEERS",
        712 => "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
        713 => "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
        714 => "CUDA_ERROR_HARDWARE_STACK_ERROR",
        715 => "CUDA_ERROR_ILLEGAL_INSTRUCTION",
        716 => "CUDA_ERROR_MISALIGNED_ADDRESS",
        717 => "CUDA_ERROR_INVALID_ADDRESS_SPACE",
        718 => "CUDA_ERROR_INVALID_PC",
        719 => "CUDA_ERROR_LAUNCH_FAILED",
        720 => "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
        721 => "CUDA_ERROR_TENSOR_MEMORY_LEAK",
        800 => "CUDA_ERROR_NOT_PERMITTED",
        801 => "CUDA_ERROR_NOT_SUPPORTED",
        802 => "CUDA_ERROR_SYSTEM_NOT_READY",
        803 => "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
        804 => "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
        805 => "CUDA_ERROR_MPS_CONNECTION_FAILED",
        806 => "CUDA_ERROR_MPS_RPC_FAILURE",
        807 => "CUDA_ERROR_MPS_SERVER_NOT_READY",
        808 => "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED",
        809 => "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED",
        810 => "CUDA_ERROR_MPS_CLIENT_TERMINATED",
        811 => "CUDA_ERROR_CDP_NOT_SUPPORTED",
        812 => "CUDA_ERROR_CDP_VERSION_MISMATCH",
        900 => "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
        901 => "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
        902 => "CUDA_ERROR_STREAM_CAPTURE_MERGE",
        903 => "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
        904 => "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
        905 => "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
        906 => "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
        907 => "CUDA_ERROR_CAPTURED_EVENT",
        908 => "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
        909 => "CUDA_ERROR_TIMEOUT",
        910 => "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE",
        911 => "CUDA_ERROR_EXTERNAL_DEVICE",
        912 => "CUDA_ERROR_INVALID_CLUSTER_SIZE",
        913 => "CUDA_ERROR_FUNCTION_NOT_LOADED",
        914 => "CUDA_ERROR_INVALID_RESOURCE_TYPE",
        915 => "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION",
        916 => "CUDA_ERROR_KEY_ROTATION",
        999 => "CUDA_ERROR_UNKNOWN",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_and_unknown_codes() {
        assert_eq!(Status(1).to_string(), "CUDA_ERROR_INVALID_VALUE (1)");
        assert_eq!(Status(34).to_string(), "CUDA_ERROR_STUB_LIBRARY (34)");
        // CUDA 13 codes and nonsense stay numbers.
        for c in [919, 36, 999_999, -1, i32::MIN, i32::MAX] {
            assert_eq!(
                Status(c).to_string(),
                format!("CUDA error {c} (unknown to this build)")
            );
        }
        let e = CallError {
            call: "cuMemMap",
            status: Some(Status(919)),
            text: None,
        };
        assert_eq!(
            e.to_string(),
            "cuMemMap failed: CUDA error 919 (unknown to this build)"
        );
        let missing = CallError {
            call: "cuMemMap",
            status: None,
            text: None,
        };
        assert!(missing.to_string().contains("lacks the entry point"));
    }

    #[test]
    fn a_missing_entry_point_is_named_as_resolved() {
        // A libcuda that lacks everything: each call names the very symbol
        // kvcr resolves (the `_v2` ones included), and calls nothing.
        let d = Driver {
            // SAFETY: every field of Api is an Option of a function pointer,
            // for which all-zero bytes are None.
            api: unsafe { std::mem::zeroed::<Api>() },
        };
        let name = |r: Result<(), CallError>| {
            let e = r.unwrap_err();
            assert!(e.status.is_none(), "{e}");
            assert!(e.to_string().contains("lacks the entry point"), "{e}");
            e.call
        };
        assert_eq!(
            name(d.ipc_open(&[0; 64]).map(drop)),
            "cuIpcOpenMemHandle_v2"
        );
        assert_eq!(
            name(d.address_range(0).map(drop)),
            "cuMemGetAddressRange_v2"
        );
        assert_eq!(
            // SAFETY: nothing is called: the entry point is missing.
            name(unsafe { d.primary_ctx_release(0x100) }),
            "cuDevicePrimaryCtxRelease_v2"
        );
        assert_eq!(name(d.device_uuid(0).map(drop)), "cuDeviceGetUuid_v2");
        // SAFETY: as above.
        assert_eq!(name(unsafe { d.read(0, 8) }.map(drop)), "cuMemcpyDtoH_v2");
        assert_eq!(name(d.access_flags(0, 0).map(drop)), "cuMemGetAccess");
        assert_eq!(
            name(d.pointer_block_id(0).map(drop)),
            "cuPointerGetAttribute"
        );
        // Optional: without it the compute mode is simply unknown.
        assert_eq!(d.compute_mode(0x100), None);
        // Every name the backend requires is one the table resolves.
        let all = d.missing(&IMPORT_SYMBOLS);
        assert_eq!(all.len(), IMPORT_SYMBOLS.len());
    }

    #[test]
    fn a_library_that_is_not_there_is_not_found_naming_it() {
        match load_from(&[c"libkvcr-no-such-driver.so.9"]) {
            Err(LoadError::NotFound(why)) => {
                assert!(why.contains("libkvcr-no-such-driver.so.9"), "{why}")
            }
            Ok(_) => panic!("a library that does not exist was loaded"),
        }
    }

    #[test]
    fn a_library_without_the_driver_api_names_what_it_lacks() {
        // libc loads, and has none of the driver's entry points.
        let d = load_from(&[c"libc.so.6"]).expect("libc loads");
        assert_eq!(
            d.missing(&["cuInit", "cuDeviceGet"]),
            ["cuInit", "cuDeviceGet"]
        );
    }
}
