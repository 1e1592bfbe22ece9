//! The GPUs on this node and the GPUs this process can see.
//!
//! - Visible: through the CUDA driver when libcuda loads ([`crate::io::cuda_ffi`]):
//!   every device's `cuDeviceGetUuid_v2`, 16 raw bytes. The driver
//!   applies `CUDA_VISIBLE_DEVICES`, and in MIG mode gives the MIG instance's
//!   UUID.
//! - On the node: every `GPU UUID:` line of
//!   `/proc/driver/nvidia/gpus/*/information` (physical GPUs only: MIG
//!   instances are not listed there).
//! - CUDA unusable but /proc readable: visible = on the node.
//! - Neither: not checked.
//!
//! Nothing here panics when libcuda is missing or answers a status this
//! build does not know: the FFI module checks the library and each symbol
//! before a call and keeps every status a number.
//!
//! The driver's list is read afresh on every call ([`cuda_devices`]):
//! nothing here is kept for the process, so a long-running caller of the
//! library (an engine asking the gate) never sees a list gone stale, nor a
//! driver that failed once (a `cuInit` before the driver was ready) failing
//! for ever. `kvcr import`, one run per process, keeps the first list
//! ([`keep_one_list`]) so that the probe, the plan and the backend see one
//! and the same list.

use super::{Fact, Gpus};
use crate::format::descriptor::{GpuKind, GpuUuid};
use crate::io::cuda_ffi::{self, CallError, Status};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use uuid::Uuid;

#[cfg(test)]
pub const PROC_GPUS: &str = "/proc/driver/nvidia/gpus";
pub const SOURCE_CUDA: &str = "cuda driver";
pub const SOURCE_PROC: &str = "/proc/driver/nvidia";

/// The `GPU UUID:` line of one `information` file. `Err` when the file has
/// the line but its value is not a UUID (the driver prints `GPU-????...`
/// for a GPU it has not initialised); `Ok(None)` when there is no such line.
pub fn parse_information(text: &str) -> Result<Option<GpuUuid>, String> {
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        if key.trim() != "GPU UUID" {
            continue;
        }
        let v = value.trim();
        let (kind, rest) = if let Some(r) = v.strip_prefix("GPU-") {
            (GpuKind::Gpu, r)
        } else if let Some(r) = v.strip_prefix("MIG-") {
            (GpuKind::Mig, r)
        } else {
            return Err(format!("GPU UUID {v:?} has no GPU- prefix"));
        };
        return match Uuid::parse_str(rest) {
            Ok(u) if !u.is_nil() => Ok(Some(GpuUuid { kind, uuid: u })),
            _ => Err(format!("GPU UUID {v:?} is not a UUID")),
        };
    }
    Ok(None)
}

/// Every GPU listed under `dir` (`/proc/driver/nvidia/gpus`). `Ok(None)`
/// when the directory does not exist (no NVIDIA kernel driver); `Err` when
/// it exists but some GPU's UUID cannot be read: a partial list could call a
/// present GPU absent, so it is not used at all.
pub fn read_proc_gpus(dir: &Path) -> Result<Option<BTreeSet<GpuUuid>>, String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot list {}: {e}", dir.display())),
    };
    let mut out = BTreeSet::new();
    for e in entries {
        let e = e.map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        let info = e.path().join("information");
        // The driver's own procfs file, under the /proc kvcr was given
        // (docs/live.md); never an inventory file (clippy.toml).
        #[allow(clippy::disallowed_methods)]
        let text = std::fs::read_to_string(&info)
            .map_err(|err| format!("cannot read {}: {err}", info.display()))?;
        match parse_information(&text) {
            Ok(Some(g)) => {
                out.insert(g);
            }
            Ok(None) => return Err(format!("{} has no GPU UUID line", info.display())),
            Err(why) => return Err(format!("{}: {why}", info.display())),
        }
    }
    Ok(Some(out))
}

/// One device as the CUDA driver reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CudaDevice {
    /// Its ordinal in this process (after CUDA_VISIBLE_DEVICES).
    pub ordinal: i32,
    /// The `CUdevice` handle `cuDeviceGet` gave for it.
    pub handle: i32,
    /// `cuDeviceGetUuid_v2`: the MIG instance's UUID in MIG mode.
    pub uuid: Uuid,
    /// `cuDeviceGetUuid` (v1) where the driver has it. Older drivers answer
    /// the physical GPU there; current CUDA documents v1 as MIG-aware too
    /// (the MIG instance's UUID, like v2), so an equal answer proves nothing.
    pub parent: Option<Uuid>,
}

/// Names a CUDA device GPU or MIG (the label and the KV106 message only:
/// decisions compare the 16 bytes). When /proc lists the node's physical
/// GPUs, a UUID not among them is a MIG instance, whatever v1 said. Without
/// /proc, a v1 UUID that differs from v2 (an older driver naming the parent
/// GPU) shows a MIG instance; an equal one cannot tell, and the device is
/// named a GPU.
pub fn classify(dev: &CudaDevice, physical: Option<&BTreeSet<GpuUuid>>) -> GpuUuid {
    let mig = match (physical, dev.parent) {
        (Some(phys), _) => !phys.iter().any(|g| g.uuid == dev.uuid),
        (None, Some(p)) => p != dev.uuid,
        (None, None) => false,
    };
    GpuUuid {
        kind: if mig { GpuKind::Mig } else { GpuKind::Gpu },
        uuid: dev.uuid,
    }
}

/// Combines what the CUDA driver and /proc said into the fact.
pub fn combine(
    cuda: Result<Vec<CudaDevice>, String>,
    proc_gpus: Result<Option<BTreeSet<GpuUuid>>, String>,
) -> Fact<Gpus> {
    let on_node = proc_gpus.as_ref().ok().cloned().flatten();
    match (cuda, proc_gpus) {
        (Ok(devs), _) => Fact::Known(Gpus {
            visible: devs.iter().map(|d| classify(d, on_node.as_ref())).collect(),
            on_node,
            source: SOURCE_CUDA.to_string(),
            unreadable: Vec::new(),
        }),
        (Err(cuda_why), Ok(Some(all))) => Fact::Known(Gpus {
            visible: all.clone(),
            on_node: Some(all),
            source: format!("{SOURCE_PROC} (CUDA driver unusable: {cuda_why})"),
            unreadable: Vec::new(),
        }),
        (Err(cuda_why), Ok(None)) => {
            if cuda_why == NO_LIBCUDA {
                Fact::NotChecked(
                    "no NVIDIA driver: libcuda not found and /proc/driver/nvidia absent".into(),
                )
            } else {
                Fact::NotChecked(format!("{cuda_why}; and /proc/driver/nvidia absent"))
            }
        }
        (Err(cuda_why), Err(proc_why)) => Fact::NotChecked(format!("{cuda_why}; and {proc_why}")),
    }
}

const NO_LIBCUDA: &str = "libcuda not found";

/// Reads both sources and combines them. Never panics.
pub fn probe() -> Fact<Gpus> {
    probe_in(crate::io::procfs::ProcFs::system())
}

/// [`probe`] with the GPU list read through `proc` (never from a `/proc`
/// that is not procfs).
pub fn probe_in(proc: &crate::io::procfs::ProcFs) -> Fact<Gpus> {
    let proc_gpus = proc.gpus_dir().and_then(|d| read_proc_gpus(&d));
    let (cuda, unreadable) = match cuda_devices() {
        Ok(e) => (Ok(e.devices), e.unreadable),
        Err(e) => (Err(e.to_string()), Vec::new()),
    };
    let mut fact = combine(cuda, proc_gpus);
    // A device whose UUID could not be read leaves the GPUs it might be "not
    // checked" rather than absent; the others are still checked (and the
    // import backend still uses them).
    if let Fact::Known(g) = &mut fact {
        if g.source == SOURCE_CUDA {
            g.unreadable = unreadable;
        }
    }
    fact
}

/// Why the CUDA driver could not list its devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnumError {
    /// libcuda could not be loaded.
    NoLibrary,
    /// A call failed (cuInit, cuDeviceGetCount), or an entry point is missing.
    Call(CallError),
}

impl EnumError {
    /// True when the library on the path is the CUDA toolkit's stub.
    pub fn is_stub(&self) -> bool {
        matches!(self, EnumError::Call(c) if c.status == Some(Status::STUB_LIBRARY))
    }
}

impl std::fmt::Display for EnumError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EnumError::NoLibrary => f.write_str(NO_LIBCUDA),
            EnumError::Call(c) if self.is_stub() => write!(
                f,
                "{c}: this libcuda is the CUDA toolkit's stub, not the driver"
            ),
            EnumError::Call(c) => write!(f, "{c}"),
        }
    }
}

/// What the driver listed: every device whose UUID it gave, and one line
/// per device it could not read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Enumeration {
    pub devices: Vec<CudaDevice>,
    pub unreadable: Vec<String>,
}

/// Set by [`keep_one_list`]: the command is one run.
static KEEP: AtomicBool = AtomicBool::new(false);
/// The list kept once [`KEEP`] is set.
static KEPT: OnceLock<Result<Enumeration, EnumError>> = OnceLock::new();

/// Makes [`cuda_devices`] keep the first list it reads for the rest of
/// the process: `kvcr import` (one run, whose probe, plan and backend must
/// see one list) calls it; the library never does.
pub fn keep_one_list() {
    KEEP.store(true, Ordering::SeqCst);
}

/// The driver's device list: read now (`cuInit`, which is cheap once it
/// succeeded, then every device's UUID), or, after [`keep_one_list`], the
/// first one read.
pub fn cuda_devices() -> Result<Enumeration, EnumError> {
    if KEEP.load(Ordering::SeqCst) {
        return KEPT.get_or_init(enumerate).clone();
    }
    enumerate()
}

fn enumerate() -> Result<Enumeration, EnumError> {
    let drv = cuda_ffi::driver().map_err(|_| EnumError::NoLibrary)?;
    match drv.init() {
        // CUDA_VISIBLE_DEVICES hides every GPU (or there is none): the
        // driver works and this process sees nothing.
        Err(e) if e.status == Some(Status::NO_DEVICE) => return Ok(Enumeration::default()),
        r => r.map_err(EnumError::Call)?,
    }
    let n = drv.device_count().map_err(EnumError::Call)?;
    let mut out = Enumeration::default();
    for ordinal in 0..n.max(0) {
        let read = drv.device_get(ordinal).and_then(|handle| {
            let uuid = drv.device_uuid(handle)?;
            Ok((handle, uuid))
        });
        match read {
            Ok((handle, uuid)) => out.devices.push(CudaDevice {
                ordinal,
                handle,
                uuid: Uuid::from_bytes(uuid),
                // Only names MIG devices, and only where it differs (classify).
                parent: drv.device_uuid_v1(handle).map(Uuid::from_bytes),
            }),
            Err(e) => out.unreadable.push(format!("device {ordinal}: {e}")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(s: &str) -> GpuUuid {
        GpuUuid::parse(s).unwrap()
    }

    const INFO: &str = "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\nGPU UUID: \t \
        GPU-6a1f0c2e-0000-4000-8000-000000000003\nVideo BIOS: \t 96.00.74.00.0d\nBus Type: \t \
        PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t \
        0000:19:00.0\nDevice Minor: \t 3\nGPU Excluded:\t No\n";

    #[test]
    fn information_uuid_line() {
        assert_eq!(
            parse_information(INFO),
            Ok(Some(g("GPU-6a1f0c2e-0000-4000-8000-000000000003")))
        );
        assert_eq!(parse_information("Model: x\n"), Ok(None));
        assert!(
            parse_information("GPU UUID: \t GPU-????????-????-????-????-????????????\n").is_err()
        );
        assert!(parse_information("GPU UUID: 1234\n").is_err());
        // Upper case hex is the same UUID.
        assert_eq!(
            parse_information("GPU UUID: GPU-6A1F0C2E-0000-4000-8000-000000000003"),
            Ok(Some(g("GPU-6a1f0c2e-0000-4000-8000-000000000003")))
        );
    }

    #[test]
    fn proc_tree_read() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(read_proc_gpus(&t.path().join("nope")), Ok(None));
        for (bus, n) in [("0000:19:00.0", 3), ("0000:3b:00.0", 4)] {
            std::fs::create_dir(t.path().join(bus)).unwrap();
            std::fs::write(
                t.path().join(bus).join("information"),
                INFO.replace("000000000003", &format!("{n:012x}")),
            )
            .unwrap();
        }
        let got = read_proc_gpus(t.path()).unwrap().unwrap();
        assert_eq!(got.len(), 2);
        assert!(got.contains(&g("GPU-6a1f0c2e-0000-4000-8000-000000000004")));
        // One unreadable UUID: the whole list is refused.
        std::fs::create_dir(t.path().join("0000:5d:00.0")).unwrap();
        std::fs::write(
            t.path().join("0000:5d:00.0/information"),
            "GPU UUID: GPU-????????-????-????-????-????????????\n",
        )
        .unwrap();
        assert!(read_proc_gpus(t.path()).is_err());
    }

    #[test]
    fn mig_classification() {
        let phys = g("GPU-6a1f0c2e-0000-4000-8000-000000000001");
        let mig = Uuid::parse_str("11111111-2222-4333-8444-555555555555").unwrap();
        let on: BTreeSet<GpuUuid> = [phys].into();
        // v1 differs from v2: a MIG instance of that GPU.
        let d = CudaDevice {
            ordinal: 0,
            handle: 0,
            uuid: mig,
            parent: Some(phys.uuid),
        };
        assert_eq!(classify(&d, None).kind, GpuKind::Mig);
        let d = CudaDevice {
            ordinal: 0,
            handle: 0,
            uuid: phys.uuid,
            parent: Some(phys.uuid),
        };
        assert_eq!(classify(&d, None).kind, GpuKind::Gpu);
        // No v1: /proc decides; without /proc it is taken as a GPU.
        let d = CudaDevice {
            ordinal: 0,
            handle: 0,
            uuid: mig,
            parent: None,
        };
        assert_eq!(classify(&d, Some(&on)).kind, GpuKind::Mig);
        assert_eq!(classify(&d, None).kind, GpuKind::Gpu);
        // A MIG-aware v1 (current CUDA) answers the MIG UUID, equal to v2:
        // /proc still tells it is not a physical GPU.
        let d = CudaDevice {
            ordinal: 0,
            handle: 0,
            uuid: mig,
            parent: Some(mig),
        };
        assert_eq!(classify(&d, Some(&on)).kind, GpuKind::Mig);
        assert_eq!(classify(&d, None).kind, GpuKind::Gpu);
        // A physical GPU listed by /proc is a GPU even if v1 disagreed.
        let d = CudaDevice {
            ordinal: 0,
            handle: 0,
            uuid: phys.uuid,
            parent: Some(mig),
        };
        assert_eq!(classify(&d, Some(&on)).kind, GpuKind::Gpu);
    }

    #[test]
    fn combine_sources() {
        let a = g("GPU-6a1f0c2e-0000-4000-8000-000000000001");
        let b = g("GPU-6a1f0c2e-0000-4000-8000-000000000002");
        let all: BTreeSet<GpuUuid> = [a, b].into();
        // CUDA sees one (CUDA_VISIBLE_DEVICES), /proc both.
        let f = combine(
            Ok(vec![CudaDevice {
                ordinal: 0,
                handle: 0,
                uuid: a.uuid,
                parent: Some(a.uuid),
            }]),
            Ok(Some(all.clone())),
        );
        let Fact::Known(gp) = f else { panic!() };
        assert_eq!(gp.visible, [a].into());
        assert_eq!(gp.on_node, Some(all.clone()));
        assert_eq!(gp.source, SOURCE_CUDA);
        // CUDA unusable: /proc alone.
        let Fact::Known(gp) = combine(Err(NO_LIBCUDA.into()), Ok(Some(all.clone()))) else {
            panic!()
        };
        assert_eq!(gp.visible, all);
        assert!(gp.source.starts_with(SOURCE_PROC));
        // Neither.
        assert_eq!(
            combine(Err(NO_LIBCUDA.into()), Ok(None)),
            Fact::NotChecked(
                "no NVIDIA driver: libcuda not found and /proc/driver/nvidia absent".into()
            )
        );
        assert!(matches!(
            combine(Err("x".into()), Err("y".into())),
            Fact::NotChecked(_)
        ));
        // CUDA works but sees nothing and /proc is absent: known, empty.
        let Fact::Known(gp) = combine(Ok(vec![]), Ok(None)) else {
            panic!()
        };
        assert!(gp.visible.is_empty() && gp.on_node.is_none());
    }

    #[test]
    fn this_machine_never_panics() {
        // On a machine without libcuda and /proc/driver/nvidia (CI), the
        // answer is "not checked"; on a GPU node it is a known list.
        match probe() {
            Fact::NotChecked(why) => assert!(!why.is_empty()),
            Fact::Known(g) => assert!(!g.source.is_empty()),
        }
        if !Path::new(PROC_GPUS).exists() && crate::io::cuda_ffi::driver().is_err() {
            assert_eq!(
                probe(),
                Fact::NotChecked(
                    "no NVIDIA driver: libcuda not found and /proc/driver/nvidia absent".into()
                )
            );
        }
    }
}
