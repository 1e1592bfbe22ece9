//! The pure engine: [`execute`] walks the plan step by step through a
//! [`Backend`], records every resource in the [`Ledger`], and on a failure
//! or an interrupt releases it in exact reverse order.

use super::{
    Backend, BackendError, Cause, Compared, Device, Distinct, Identity, IdentityKind, Ledger,
    Mapped, MemoryId, Plan, PlannedRank, ReleaseReport, Resource, Step, StepFailure,
};
use crate::format::descriptor::{Allocation, GpuUuid, Handle};
use serde::Serialize;
use std::time::Instant;

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
