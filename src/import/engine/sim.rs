//! The simulated backend and the fault injector, selected only by
//! `KVCR_IMPORT_BACKEND=sim` (tests, demos, and the GPU proof's injected
//! failures; the binary warns when it is used).
//!
//! [`SimBackend`] touches no GPU: it hands out deterministic fake pointers
//! and handles, records every acquire and release in an event log (and, when
//! asked, appends it as JSON lines to a file so a test can follow a `kvcr`
//! process), and refuses to release anything it did not hand out or to
//! release twice. [`Faults`] makes any step fail on its Nth call, the Nth
//! release fail, or raises the interrupt flag after N acquisitions; it is
//! built into the simulator and can wrap the CUDA backend too
//! ([`Injected`]), which is how the GPU proof injects a failure into a real
//! import.
//!
//! Selected with `KVCR_IMPORT_BACKEND` (see [`BackendSpec::parse`]); never
//! used unless asked for, and always named in the report.

use super::{Backend, BackendError, Device, Identity, IdentityKind, Mapped, Resource, Step};
use crate::format::descriptor::{GpuUuid, Handle, Owner};
pub use crate::import::spec::{BackendSpec, FaultPlan};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Fault injection, shared by the simulator and [`Injected`].
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// Fail the Nth (1-based) call of this step, or of any step when the
    /// step is `None`. Steps are the [`Step::BACKEND`] calls.
    pub fail: Option<(Option<Step>, usize)>,
    /// Fail the Nth (1-based) release.
    pub fail_release: Option<usize>,
    /// Raise [`Faults::flag`] after the Nth successful acquisition (device,
    /// import, reserve, map).
    pub interrupt_after: Option<usize>,
    /// Sleep this long before every step and release.
    pub delay: Duration,
    /// The flag `interrupt_after` raises; the caller checks it.
    pub flag: Arc<AtomicBool>,
    calls: usize,
    per_step: BTreeMap<Step, usize>,
    acquired: usize,
    releases: usize,
}

impl Faults {
    /// Fresh counters for the faults `plan` asks for (the interrupt flag is
    /// the plan's, shared).
    pub fn from_plan(plan: &FaultPlan) -> Faults {
        Faults {
            fail: plan.fail,
            fail_release: plan.fail_release,
            interrupt_after: plan.interrupt_after,
            delay: plan.delay,
            flag: plan.flag.clone(),
            ..Faults::default()
        }
    }

    #[cfg(test)]
    pub fn fail_at(step: Step, nth: usize) -> Faults {
        Faults {
            fail: Some((Some(step), nth)),
            ..Faults::default()
        }
    }

    #[cfg(test)]
    pub fn fail_nth_step(nth: usize) -> Faults {
        Faults {
            fail: Some((None, nth)),
            ..Faults::default()
        }
    }

    #[cfg(test)]
    pub fn fail_release(nth: usize) -> Faults {
        Faults {
            fail_release: Some(nth),
            ..Faults::default()
        }
    }

    #[cfg(test)]
    pub fn interrupt_after(n: usize) -> Faults {
        Faults {
            interrupt_after: Some(n),
            ..Faults::default()
        }
    }

    /// Call before a step: the injected error, if this call is the one.
    pub fn before(&mut self, step: Step) -> Result<(), BackendError> {
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
        self.calls += 1;
        let n = self.per_step.entry(step).or_default();
        *n += 1;
        let hit = match self.fail {
            Some((Some(s), nth)) => s == step && *n == nth,
            Some((None, nth)) => self.calls == nth,
            None => false,
        };
        if hit {
            Err(format!("injected failure at {step} (call {})", self.calls).into())
        } else {
            Ok(())
        }
    }

    /// Call after a successful acquisition.
    pub fn acquired(&mut self) {
        self.acquired += 1;
        if self.interrupt_after == Some(self.acquired) {
            self.flag.store(true, Ordering::SeqCst);
        }
    }

    /// Call before a release: the injected error, if this call is the one.
    pub fn before_release(&mut self) -> Result<(), BackendError> {
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
        self.releases += 1;
        if self.fail_release == Some(self.releases) {
            Err(format!("injected release failure (release {})", self.releases).into())
        } else {
            Ok(())
        }
    }
}

/// One thing the simulator was asked to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum SimEvent {
    Acquire {
        step: Step,
        resource: Resource,
    },
    /// A step that acquires nothing (set-access, verify).
    Call {
        step: Step,
    },
    Fail {
        step: Step,
        message: String,
    },
    Release {
        resource: Resource,
    },
    ReleaseFail {
        resource: Resource,
        message: String,
    },
}

/// The simulator's (and the fake driver's, tests/fakecuda/fakecuda.c) memory:
/// the byte at `offset` of an exported allocation whose content seed is
/// `seed` (the first handle byte; for `posix_fd` in the simulator, the fd's
/// low byte).
pub fn sim_byte(seed: u8, offset: u64) -> u8 {
    (offset.wrapping_mul(131) ^ (offset >> 9) ^ u64::from(seed)) as u8
}

/// Granularity the simulator rounds reservations to.
pub const SIM_GRANULARITY: u64 = 2 << 20;

type Hook = Box<dyn FnMut(&SimEvent)>;

/// A deterministic backend that touches no GPU.
#[derive(Default)]
pub struct SimBackend {
    pub faults: Faults,
    /// Every event, in order.
    pub log: Vec<SimEvent>,
    /// Report this size from `inspect` instead of the real one.
    pub lie_size: Option<u64>,
    /// Report another device from `inspect`.
    pub lie_device: bool,
    /// Report VMM memory on another device from `verify_location`.
    pub lie_location: bool,
    /// Read other bytes than the memory holds (every byte flipped).
    pub lie_content: bool,
    /// Answer this one MEMORY_BLOCK_ID for every mapping (a driver that
    /// says every allocation is one memory).
    pub same_block: bool,
    /// Answer no MEMORY_BLOCK_ID at all (a driver that predates it).
    pub no_block: bool,
    /// The content seed of every IPC mapping, imported handle and mapping
    /// ([`sim_byte`]).
    seeds: BTreeMap<Resource, u8>,
    /// The MEMORY_BLOCK_ID of every IPC mapping (a mix of the handle's
    /// bytes and the device, like its pointer), imported handle (its own)
    /// and mapping (its handle's).
    blocks: BTreeMap<Resource, u64>,
    log_file: Option<File>,
    hook: Option<Hook>,
    devices: BTreeMap<GpuUuid, i32>,
    held: BTreeMap<Resource, usize>,
    /// The pointer each IPC handle opened at: like the driver, a handle
    /// already open answers its existing pointer (one more reference).
    ipc_ptrs: BTreeMap<(i32, [u8; 64]), u64>,
    next: u64,
}

impl SimBackend {
    #[cfg(test)]
    pub fn new() -> SimBackend {
        SimBackend::default()
    }

    pub fn with_faults(faults: Faults) -> SimBackend {
        SimBackend {
            faults,
            ..SimBackend::default()
        }
    }

    /// Also append every event to `file` (opened for appending) as one JSON
    /// line, as it happens.
    pub fn log_to(&mut self, file: std::fs::File) {
        self.log_file = Some(file);
    }

    #[cfg(test)]
    /// Calls `f` on every event as it happens.
    pub fn on_event(&mut self, f: impl FnMut(&SimEvent) + 'static) {
        self.hook = Some(Box::new(f));
    }

    #[cfg(test)]
    /// Resources handed out and not released.
    pub fn held(&self) -> std::collections::BTreeSet<Resource> {
        self.held.keys().copied().collect()
    }

    #[cfg(test)]
    /// The acquired resources, in order.
    pub fn acquired(&self) -> Vec<Resource> {
        self.log
            .iter()
            .filter_map(|e| match e {
                SimEvent::Acquire { resource, .. } => Some(*resource),
                _ => None,
            })
            .collect()
    }

    #[cfg(test)]
    /// The released resources, in order.
    pub fn released(&self) -> Vec<Resource> {
        self.log
            .iter()
            .filter_map(|e| match e {
                SimEvent::Release { resource } => Some(*resource),
                _ => None,
            })
            .collect()
    }

    #[cfg(test)]
    /// Asserts that everything acquired was released, exactly in reverse
    /// order (the engine's tests and the import run's).
    pub fn assert_released_in_reverse(&self) {
        let mut acquired = self.acquired();
        acquired.reverse();
        assert_eq!(self.released(), acquired, "release order");
        assert!(self.held().is_empty(), "still held: {:?}", self.held());
    }

    fn event(&mut self, e: SimEvent) {
        if let Some(f) = &mut self.log_file {
            if let Ok(line) = serde_json::to_string(&e) {
                let _ = writeln!(f, "{line}");
            }
        }
        if let Some(h) = &mut self.hook {
            h(&e);
        }
        self.log.push(e);
    }

    fn step(&mut self, step: Step) -> Result<(), BackendError> {
        self.faults.before(step).inspect_err(|e| {
            self.event(SimEvent::Fail {
                step,
                message: e.message.clone(),
            })
        })
    }

    fn acquire(&mut self, step: Step, resource: Resource) -> Resource {
        *self.held.entry(resource).or_default() += 1;
        self.event(SimEvent::Acquire { step, resource });
        self.faults.acquired();
        resource
    }

    fn fresh(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    fn check_held(&self, r: &Resource, what: &str) -> Result<(), BackendError> {
        if self.held.contains_key(r) {
            Ok(())
        } else {
            Err(format!("sim: {what} {r}, which is not held").into())
        }
    }
}

impl Backend for SimBackend {
    fn name(&self) -> &'static str {
        "sim"
    }

    fn open_device(&mut self, gpu: &GpuUuid) -> Result<(Device, Resource), BackendError> {
        self.step(Step::Device)?;
        let n = self.devices.len() as i32;
        let ordinal = *self.devices.entry(*gpu).or_insert(n);
        let r = self.acquire(Step::Device, Resource::Context { device: ordinal });
        Ok((Device(ordinal), r))
    }

    fn ipc_open(&mut self, dev: Device, handle: &[u8; 64]) -> Result<Resource, BackendError> {
        self.step(Step::Import)?;
        let open = self.ipc_ptrs.get(&(dev.0, *handle)).copied().filter(|p| {
            self.held.contains_key(&Resource::IpcMapping {
                device: dev.0,
                ptr: *p,
            })
        });
        let ptr = match open {
            Some(p) => p,
            None => {
                let p = 0x7f00_0000_0000 + self.fresh() * 0x1_0000_0000;
                self.ipc_ptrs.insert((dev.0, *handle), p);
                p
            }
        };
        let r = self.acquire(Step::Import, Resource::IpcMapping { device: dev.0, ptr });
        self.seeds.insert(r, handle[0]);
        // Like its pointers, the simulator's IPC memory is per device.
        self.blocks.insert(r, mix(handle) ^ dev.0 as u64);
        Ok(r)
    }

    fn import_shareable(
        &mut self,
        dev: Device,
        handle: &Handle,
        _owner: &Owner,
    ) -> Result<(Resource, Option<Identity>), BackendError> {
        self.step(Step::Import)?;
        let seed = match handle {
            Handle::CudaIpc(b) | Handle::Fabric(b) => b[0],
            Handle::PosixFd(fd) => *fd as u8,
        };
        let h = 0x1000 + self.fresh();
        // Every import is memory of its own, like its handle.
        let block = mix(&[h as u8; 64]) ^ h;
        let r = self.acquire(
            Step::Import,
            Resource::Imported {
                device: dev.0,
                handle: h,
            },
        );
        self.seeds.insert(r, seed);
        self.blocks.insert(r, block);
        let file = matches!(handle, Handle::PosixFd(_)).then(|| {
            Identity::NotAvailable(
                IdentityKind::OwnerFile,
                "the simulated backend takes no fd".into(),
            )
        });
        Ok((r, file))
    }

    fn reserve(
        &mut self,
        dev: Device,
        imported: &Resource,
        size: u64,
    ) -> Result<Resource, BackendError> {
        self.step(Step::Reserve)?;
        self.check_held(imported, "reserve for")?;
        let size = crate::import::engine::round_up(size, SIM_GRANULARITY)
            .ok_or_else(|| format!("sim: size {size} overflows"))?;
        let ptr = 0x7e00_0000_0000 + self.fresh() * 0x1_0000_0000;
        Ok(self.acquire(
            Step::Reserve,
            Resource::Reservation {
                device: dev.0,
                ptr,
                size,
            },
        ))
    }

    fn map(
        &mut self,
        dev: Device,
        reservation: &Resource,
        imported: &Resource,
    ) -> Result<Resource, BackendError> {
        self.step(Step::Map)?;
        self.check_held(imported, "map of")?;
        self.check_held(reservation, "map into")?;
        let Resource::Reservation { ptr, size, .. } = *reservation else {
            return Err(format!("sim: map into {reservation}").into());
        };
        let r = self.acquire(
            Step::Map,
            Resource::Mapping {
                device: dev.0,
                ptr,
                size,
            },
        );
        if let Some(seed) = self.seeds.get(imported).copied() {
            self.seeds.insert(r, seed);
        }
        if let Some(b) = self.blocks.get(imported).copied() {
            self.blocks.insert(r, b);
        }
        Ok(r)
    }

    fn set_access(&mut self, _dev: Device, mapping: &Resource) -> Result<(), BackendError> {
        self.step(Step::SetAccess)?;
        self.check_held(mapping, "set access on")?;
        self.event(SimEvent::Call {
            step: Step::SetAccess,
        });
        Ok(())
    }

    fn inspect(
        &mut self,
        dev: Device,
        mapping: &Resource,
        _offset: u64,
        _size: u64,
    ) -> Result<Mapped, BackendError> {
        self.step(Step::Verify)?;
        self.check_held(mapping, "inspect")?;
        self.event(SimEvent::Call { step: Step::Verify });
        let (base, size) = match *mapping {
            Resource::Mapping { ptr, size, .. } => (ptr, size),
            // An IPC mapping covers the owner's whole allocation; the
            // simulator does not know its size, so it is "large": up to
            // the next IPC pointer it hands out (4 GiB on).
            Resource::IpcMapping { ptr, .. } => (ptr, 1 << 32),
            other => return Err(format!("sim: inspect {other}").into()),
        };
        let device = Some(if self.lie_device { dev.0 + 100 } else { dev.0 });
        Ok(Mapped {
            base,
            size: self.lie_size.unwrap_or(size),
            device,
            end_device: device,
        })
    }

    fn release(&mut self, r: &Resource) -> Result<(), BackendError> {
        if let Err(e) = self.faults.before_release() {
            self.event(SimEvent::ReleaseFail {
                resource: *r,
                message: e.message.clone(),
            });
            return Err(e);
        }
        self.check_held(r, "release of")?;
        if let Some(n) = self.held.get_mut(r) {
            *n -= 1;
            if *n == 0 {
                self.held.remove(r);
            }
        }
        self.event(SimEvent::Release { resource: *r });
        Ok(())
    }

    fn block_id(
        &mut self,
        _dev: Device,
        mapping: &Resource,
        _offset: u64,
    ) -> Result<Identity, BackendError> {
        self.check_held(mapping, "ask the block id of")?;
        if self.no_block {
            return Ok(Identity::NotAvailable(
                IdentityKind::MemoryBlockId,
                "sim: no MEMORY_BLOCK_ID (a driver that predates it)".into(),
            ));
        }
        let id = if self.same_block {
            0xb10c
        } else {
            self.blocks
                .get(mapping)
                .copied()
                .ok_or_else(|| format!("sim: {mapping} maps no imported memory"))?
        };
        Ok(Identity::Known(super::MemoryId::BlockId { id }))
    }

    fn verify_location(&mut self, dev: Device, imported: &Resource) -> Result<(), BackendError> {
        self.step(Step::VerifyLocation)?;
        self.check_held(imported, "verify the location of")?;
        self.event(SimEvent::Call {
            step: Step::VerifyLocation,
        });
        if self.lie_location {
            return Err(format!(
                "sim: {imported} is pinned device memory on device {}, the plan put it on device \
                    {}",
                dev.0 + 100,
                dev.0
            )
            .into());
        }
        Ok(())
    }

    fn read(
        &mut self,
        _dev: Device,
        mapping: &Resource,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, BackendError> {
        self.step(Step::VerifyContent)?;
        self.check_held(mapping, "read from")?;
        self.event(SimEvent::Call {
            step: Step::VerifyContent,
        });
        if len > crate::format::content::PAGE_MAX {
            return Err(format!("sim: read of {len} bytes, more than one page").into());
        }
        // Every import records a seed and each mapping takes its import's.
        let seed = self
            .seeds
            .get(mapping)
            .copied()
            .ok_or_else(|| format!("sim: {mapping} maps no imported bytes"))?;
        let flip = if self.lie_content { 0xff } else { 0 };
        Ok((offset..offset + len)
            .map(|o| sim_byte(seed, o) ^ flip)
            .collect())
    }
}

/// FNV-1a of 64 bytes: the simulator's stand-in for a driver's block id.
fn mix(b: &[u8; 64]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Fault injection around any backend (the GPU proof wraps the CUDA backend).
pub struct Injected<B: Backend> {
    pub inner: B,
    pub faults: Faults,
}

impl<B: Backend> Backend for Injected<B> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn open_device(&mut self, gpu: &GpuUuid) -> Result<(Device, Resource), BackendError> {
        self.faults.before(Step::Device)?;
        let r = self.inner.open_device(gpu)?;
        self.faults.acquired();
        Ok(r)
    }
    fn ipc_open(&mut self, dev: Device, handle: &[u8; 64]) -> Result<Resource, BackendError> {
        self.faults.before(Step::Import)?;
        let r = self.inner.ipc_open(dev, handle)?;
        self.faults.acquired();
        Ok(r)
    }
    fn import_shareable(
        &mut self,
        dev: Device,
        handle: &Handle,
        owner: &Owner,
    ) -> Result<(Resource, Option<Identity>), BackendError> {
        self.faults.before(Step::Import)?;
        let r = self.inner.import_shareable(dev, handle, owner)?;
        self.faults.acquired();
        Ok(r)
    }
    fn reserve(
        &mut self,
        dev: Device,
        imported: &Resource,
        size: u64,
    ) -> Result<Resource, BackendError> {
        self.faults.before(Step::Reserve)?;
        let r = self.inner.reserve(dev, imported, size)?;
        self.faults.acquired();
        Ok(r)
    }
    fn map(
        &mut self,
        dev: Device,
        reservation: &Resource,
        imported: &Resource,
    ) -> Result<Resource, BackendError> {
        self.faults.before(Step::Map)?;
        let r = self.inner.map(dev, reservation, imported)?;
        self.faults.acquired();
        Ok(r)
    }
    fn set_access(&mut self, dev: Device, mapping: &Resource) -> Result<(), BackendError> {
        self.faults.before(Step::SetAccess)?;
        self.inner.set_access(dev, mapping)
    }
    fn inspect(
        &mut self,
        dev: Device,
        mapping: &Resource,
        offset: u64,
        size: u64,
    ) -> Result<Mapped, BackendError> {
        self.faults.before(Step::Verify)?;
        self.inner.inspect(dev, mapping, offset, size)
    }
    fn release(&mut self, r: &Resource) -> Result<(), BackendError> {
        self.faults.before_release()?;
        self.inner.release(r)
    }
    fn held_fd(&self, imported: &Resource) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.inner.held_fd(imported)
    }
    fn hold_warnings(&self) -> Vec<String> {
        self.inner.hold_warnings()
    }
    fn block_id(
        &mut self,
        dev: Device,
        mapping: &Resource,
        offset: u64,
    ) -> Result<Identity, BackendError> {
        self.inner.block_id(dev, mapping, offset)
    }
    fn verify_location(&mut self, dev: Device, imported: &Resource) -> Result<(), BackendError> {
        self.faults.before(Step::VerifyLocation)?;
        self.inner.verify_location(dev, imported)
    }
    fn read(
        &mut self,
        dev: Device,
        mapping: &Resource,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, BackendError> {
        self.faults.before(Step::VerifyContent)?;
        self.inner.read(dev, mapping, offset, len)
    }
}

impl BackendSpec {
    /// A simulator configured by this spec.
    /// The sim backend this spec asks for, logging to `log` (the spec's
    /// `log=PATH`, opened by the caller through the output check).
    pub fn build_sim(&self, log: Option<std::fs::File>) -> SimBackend {
        let mut b = SimBackend::with_faults(Faults::from_plan(&self.faults));
        b.lie_size = self.lie_size;
        b.lie_device = self.lie_device;
        b.lie_location = self.lie_location;
        b.lie_content = self.lie_content;
        if let Some(f) = log {
            b.log_to(f);
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_foreign_and_double_release() {
        let mut b = SimBackend::new();
        let gpu = GpuUuid::parse("GPU-6a1f0c2e-0000-4000-8000-000000000001").unwrap();
        let (_, ctx) = b.open_device(&gpu).unwrap();
        assert!(b.release(&Resource::Context { device: 9 }).is_err());
        b.release(&ctx).unwrap();
        assert!(b.release(&ctx).is_err());
        assert!(b.held().is_empty());
    }
}
