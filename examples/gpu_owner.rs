//! A Rust-side GPU check for `kvcr import`, run by hand on a machine with an
//! NVIDIA GPU, its driver and the Rust toolchain (never in CI). The GPU proof,
//! `scripts/gpu-proof.sh`, no longer uses it: its owner is the C program
//! `scripts/gpu-proof-owner.c`, which needs no Rust on the GPU machine.
//!
//! `gpu_owner serve --inventory DIR --expect FILE [--size-mib N] [--ranks N]`
//!   plays the KV-cache owner: on each of the first N visible GPUs (one rank
//!   per GPU) it allocates a legacy `cuMemAlloc` buffer exported as a
//!   `cuda_ipc` handle, a VMM allocation exported as a `posix_fd` handle
//!   (kept open here), and, where the GPU and driver support it, a VMM
//!   allocation exported as a `fabric` handle. Each allocation is filled with
//!   its own byte; one more `cuda_ipc` segment holds the rank's bytes in its
//!   second half only (`offset_bytes`). It writes one sealed descriptor per
//!   rank (mode 0600, dir 0700), the deployment profile as
//!   FILE.profile.json, then FILE with the expected bytes, and waits for
//!   SIGTERM.
//!   It allows any process to ptrace it (`PR_SET_PTRACER_ANY`), so kvcr's
//!   `pidfd_getfd` works under Yama `ptrace_scope=1`.
//!
//! `gpu_owner check --inventory DIR --expect FILE`
//!   imports the group through kvcr's own library (live audit, plan, the
//!   CUDA backend, the ledger), reads the start and end of every mapping and
//!   compares them with FILE, releases the ledger, then proves each mapping
//!   is gone (`cuMemGetAddressRange` fails in the still-live context).
//!   Exit 0 when every byte matches and everything was released.

use kvcr_testkit as testkit;

use cudarc::driver::sys;
use kvcr::internals::import::{self, cuda::CudaBackend, Ledger, Outcome, Plan, Resource};
use serde_json::json;
use std::collections::BTreeMap;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

type R<T> = Result<T, String>;

fn ck(r: sys::CUresult, call: &str) -> R<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(format!("{call}: {r:?}"))
    }
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let inv = arg(&args, "--inventory").map(PathBuf::from);
    let expect = arg(&args, "--expect").map(PathBuf::from);
    let r = match (args.get(1).map(String::as_str), inv, expect) {
        (Some("serve"), Some(inv), Some(expect)) => {
            let mib: u64 = arg(&args, "--size-mib")
                .and_then(|s| s.parse().ok())
                .unwrap_or(64);
            let ranks: Option<usize> = arg(&args, "--ranks").and_then(|s| s.parse().ok());
            serve(&inv, &expect, mib << 20, ranks)
        }
        (Some("check"), Some(inv), Some(expect)) => check(&inv, &expect),
        _ => Err(
            "usage: gpu_owner serve|check --inventory DIR --expect FILE [--size-mib N] [--ranks N]"
                .into(),
        ),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpu_owner: {e}");
            ExitCode::FAILURE
        }
    }
}

fn init() -> R<i32> {
    if !kvcr::internals::import::cuda::driver_present() {
        return Err("no NVIDIA driver (libcuda) on this machine".into());
    }
    // SAFETY: flags must be 0; libcuda is loaded by cudarc on first use
    // (this example is only run where the driver exists).
    ck(unsafe { sys::cuInit(0) }, "cuInit")?;
    let mut n = 0;
    // SAFETY: writes one int.
    ck(unsafe { sys::cuDeviceGetCount(&mut n) }, "cuDeviceGetCount")?;
    Ok(n)
}

fn device(ordinal: i32) -> R<sys::CUdevice> {
    let mut d = 0;
    // SAFETY: writes one device handle.
    ck(unsafe { sys::cuDeviceGet(&mut d, ordinal) }, "cuDeviceGet")?;
    Ok(d)
}

fn retain_ctx(dev: sys::CUdevice) -> R<sys::CUcontext> {
    let mut ctx = std::ptr::null_mut();
    // SAFETY: writes one context handle; released by release_ctx.
    ck(
        unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, dev) },
        "cuDevicePrimaryCtxRetain",
    )?;
    // SAFETY: ctx was just retained.
    ck(unsafe { sys::cuCtxSetCurrent(ctx) }, "cuCtxSetCurrent")?;
    Ok(ctx)
}

fn release_ctx(dev: sys::CUdevice) {
    // SAFETY: balances a retain_ctx on this device.
    unsafe { sys::cuDevicePrimaryCtxRelease_v2(dev) };
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn gpu_uuid(dev: sys::CUdevice) -> R<String> {
    // SAFETY: CUuuid is 16 plain bytes.
    let mut u: sys::CUuuid = unsafe { std::mem::zeroed() };
    // SAFETY: writes 16 bytes.
    ck(
        unsafe { sys::cuDeviceGetUuid_v2(&mut u, dev) },
        "cuDeviceGetUuid_v2",
    )?;
    let b = u.bytes.map(|x| x as u8);
    let u = uuid::Uuid::from_bytes(b);
    Ok(format!("GPU-{}", u.hyphenated()))
}

fn vmm_prop(ordinal: i32, handle_type: sys::CUmemAllocationHandleType) -> sys::CUmemAllocationProp {
    // SAFETY: all-zero is valid for every field.
    let mut p: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    p.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    p.requestedHandleTypes = handle_type;
    p.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = ordinal;
    p
}

/// A VMM allocation, mapped here and filled with `byte`.
fn vmm_alloc(
    ordinal: i32,
    size: u64,
    ht: sys::CUmemAllocationHandleType,
    byte: u8,
) -> R<(u64, u64)> {
    let prop = vmm_prop(ordinal, ht);
    let mut gran = 0usize;
    // SAFETY: reads prop, writes one size.
    ck(
        unsafe {
            sys::cuMemGetAllocationGranularity(
                &mut gran,
                &prop,
                sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
            )
        },
        "cuMemGetAllocationGranularity",
    )?;
    let size = kvcr::internals::import::cuda::round_up(size, gran as u64).ok_or("size overflow")?;
    let mut h = 0;
    // SAFETY: creates a physical allocation we own.
    ck(
        unsafe { sys::cuMemCreate(&mut h, size as usize, &prop, 0) },
        "cuMemCreate",
    )?;
    let mut ptr = 0;
    // SAFETY: fresh address range.
    ck(
        unsafe { sys::cuMemAddressReserve(&mut ptr, size as usize, gran, 0, 0) },
        "cuMemAddressReserve",
    )?;
    // SAFETY: maps our handle into our range.
    ck(
        unsafe { sys::cuMemMap(ptr, size as usize, 0, h, 0) },
        "cuMemMap",
    )?;
    let desc = sys::CUmemAccessDesc {
        location: prop.location,
        flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    // SAFETY: one valid descriptor for our mapping.
    ck(
        unsafe { sys::cuMemSetAccess(ptr, size as usize, &desc, 1) },
        "cuMemSetAccess",
    )?;
    // SAFETY: the range is mapped and writable.
    ck(
        unsafe { sys::cuMemsetD8_v2(ptr, byte, size as usize) },
        "cuMemsetD8",
    )?;
    Ok((h, size))
}

fn serve(inv: &Path, expect: &Path, size: u64, want_ranks: Option<usize>) -> R<()> {
    // Let kvcr (not our parent) take our fds with pidfd_getfd under Yama.
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY, 0, 0, 0) };
    let n = init()? as usize;
    if n == 0 {
        return Err("no CUDA device".into());
    }
    let ranks = want_ranks.unwrap_or(n).min(n).max(1);
    let pid = std::process::id() as i32;
    let ticks = kvcr::internals::import::pidfd::proc_start_ticks(pid)
        .map_err(|e| e.to_string())?
        .ok_or("no /proc/self/stat")?;
    let hostname =
        std::fs::read_to_string("/proc/sys/kernel/hostname").map_err(|e| e.to_string())?;
    let boot_id =
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id").map_err(|e| e.to_string())?;
    let now_ms = kvcr::internals::node::now_unix_ms();
    let incarnation = uuid::Uuid::new_v4().to_string();
    std::fs::create_dir_all(inv).map_err(|e| e.to_string())?;
    std::fs::set_permissions(inv, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| e.to_string())?;

    let mut expected: BTreeMap<String, BTreeMap<String, u8>> = BTreeMap::new();
    let mut profile = json!({});
    let mut profile_gpus = Vec::new();
    let mut keep_fds = Vec::new();
    for rank in 0..ranks {
        let ordinal = rank as i32;
        let dev = device(ordinal)?;
        retain_ctx(dev)?; // held for the owner's whole life
        let mut allocations = Vec::new();
        let mut bytes = BTreeMap::new();
        let pat = |i: u8| 0x40 + (rank as u8) * 8 + i;

        // cuda_ipc: a legacy allocation.
        let mut p = 0;
        // SAFETY: allocates device memory we own for the process lifetime.
        ck(
            unsafe { sys::cuMemAlloc_v2(&mut p, size as usize) },
            "cuMemAlloc",
        )?;
        // SAFETY: p is a fresh allocation of `size` bytes.
        ck(
            unsafe { sys::cuMemsetD8_v2(p, pat(0), size as usize) },
            "cuMemsetD8",
        )?;
        // SAFETY: CUipcMemHandle is 64 plain bytes.
        let mut ih: sys::CUipcMemHandle = unsafe { std::mem::zeroed() };
        // SAFETY: writes 64 bytes for an allocation we own.
        ck(
            unsafe { sys::cuIpcGetMemHandle(&mut ih, p) },
            "cuIpcGetMemHandle",
        )?;
        let raw: Vec<u8> = ih.reserved.iter().map(|b| *b as u8).collect();
        allocations.push(json!({"id": "kv-ipc", "size_bytes": size, "handle": {"kind": "cuda_ipc", "hex": hex(&raw)}}));
        bytes.insert("kv-ipc".to_string(), pat(0));

        // cuda_ipc with offset_bytes: a segment whose first half is another
        // tensor (0xEE) and whose second half is this rank's (docs/format.md §8.9).
        let mut q = 0;
        // SAFETY: allocates device memory we own for the process lifetime.
        ck(
            unsafe { sys::cuMemAlloc_v2(&mut q, size as usize) },
            "cuMemAlloc",
        )?;
        let half = size / 2;
        // SAFETY: both halves lie inside the fresh allocation of `size` bytes.
        ck(
            unsafe { sys::cuMemsetD8_v2(q, 0xee, half as usize) },
            "cuMemsetD8",
        )?;
        // SAFETY: as above.
        ck(
            unsafe { sys::cuMemsetD8_v2(q + half, pat(3), (size - half) as usize) },
            "cuMemsetD8",
        )?;
        // SAFETY: CUipcMemHandle is 64 plain bytes.
        let mut ih: sys::CUipcMemHandle = unsafe { std::mem::zeroed() };
        // SAFETY: writes 64 bytes for an allocation we own.
        ck(
            unsafe { sys::cuIpcGetMemHandle(&mut ih, q) },
            "cuIpcGetMemHandle",
        )?;
        let raw: Vec<u8> = ih.reserved.iter().map(|b| *b as u8).collect();
        allocations.push(
            json!({"id": "kv-ipc-off", "size_bytes": size - half, "offset_bytes": half,
                                "handle": {"kind": "cuda_ipc", "hex": hex(&raw)}}),
        );
        bytes.insert("kv-ipc-off".to_string(), pat(3));

        // posix_fd: VMM, exported as an fd that stays open here.
        let (h, sz) = vmm_alloc(
            ordinal,
            size,
            sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            pat(1),
        )?;
        let mut fd: libc::c_int = -1;
        // SAFETY: for POSIX_FD the driver writes an int fd through the pointer.
        ck(
            unsafe {
                sys::cuMemExportToShareableHandle(
                    (&mut fd as *mut libc::c_int).cast(),
                    h,
                    sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                    0,
                )
            },
            "cuMemExportToShareableHandle(posix_fd)",
        )?;
        keep_fds.push(fd);
        allocations.push(
            json!({"id": "kv-fd", "size_bytes": sz, "handle": {"kind": "posix_fd", "fd": fd}}),
        );
        bytes.insert("kv-fd".to_string(), pat(1));

        // fabric, if supported (needs an IMEX channel on most systems).
        let mut fabric_ok = 0;
        // SAFETY: writes one int.
        let _ = unsafe {
            sys::cuDeviceGetAttribute(
                &mut fabric_ok,
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED,
                dev,
            )
        };
        let fabric = if fabric_ok == 1 {
            vmm_alloc(
                ordinal,
                size,
                sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_FABRIC,
                pat(2),
            )
            .and_then(|(h, sz)| {
                // SAFETY: CUmemFabricHandle is 64 plain bytes.
                let mut fh: sys::CUmemFabricHandle = unsafe { std::mem::zeroed() };
                // SAFETY: for FABRIC the driver writes 64 bytes into fh.
                ck(
                    unsafe {
                        sys::cuMemExportToShareableHandle(
                            (&mut fh as *mut sys::CUmemFabricHandle).cast(),
                            h,
                            sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_FABRIC,
                            0,
                        )
                    },
                    "cuMemExportToShareableHandle(fabric)",
                )?;
                Ok((fh.data, sz))
            })
        } else {
            Err("HANDLE_TYPE_FABRIC_SUPPORTED is 0".into())
        };
        match fabric {
            Ok((data, sz)) => {
                allocations.push(json!({"id": "kv-fabric", "size_bytes": sz, "handle": {"kind": "fabric", "hex": hex(&data)}}));
                bytes.insert("kv-fabric".to_string(), pat(2));
            }
            Err(e) => eprintln!("gpu_owner: rank {rank}: no fabric allocation ({e})"),
        }
        // SAFETY: waits for the memsets.
        ck(unsafe { sys::cuCtxSynchronize() }, "cuCtxSynchronize")?;

        // Geometry: 2 × 256 blocks × 16 × 1 head × 64 × 2 bytes = 1 MiB ≤ the allocations.
        let mut d = json!({
            "schema": "kvcr.retained-rank/v1",
            "engine_id": "gpu-proof",
            "incarnation": incarnation,
            "epoch": now_ms,
            "rank": rank,
            "world_size": ranks,
            "tp": ranks,
            "pp": 1,
            "node": {"hostname": hostname.trim(), "boot_id": boot_id.trim()},
            "gpu_uuid": gpu_uuid(dev)?,
            "model": {"name": "gpu-proof", "revision": "1", "quantization": null},
            "geometry": {"num_layers": 1, "kv_heads_per_rank": 1, "head_size": 64, "block_size": 16,
                         "num_blocks": 256, "dtype": "float16", "use_mla": false},
            "owner": {"pid": pid, "start_ticks": ticks},
            "writer": {"pid": pid, "start_ticks": ticks, "quiesced": true},
            "allocations": allocations,
            "created_unix_ms": now_ms,
        });
        profile_gpus.push(d["gpu_uuid"].clone());
        if rank == 0 {
            profile = json!({
                "schema": "kvcr.profile/v1",
                "engine_id": d["engine_id"],
                "world_size": ranks,
                "tp": ranks,
                "pp": 1,
                "model": d["model"],
                "geometry": d["geometry"],
            });
        }
        testkit::seal(&mut d);
        write_private(
            &inv.join(format!("rank-{rank}.json")),
            &testkit::to_bytes(&d),
        )?;
        expected.insert(rank.to_string(), bytes);
    }
    // The declared deployment profile, beside FILE (FILE.profile.json).
    profile["gpus"] = serde_json::Value::Array(profile_gpus);
    write_private(
        &expect.with_extension("profile.json"),
        &serde_json::to_vec_pretty(&profile).map_err(|e| e.to_string())?,
    )?;
    // Written last: the script waits for it.
    write_private(
        expect,
        &serde_json::to_vec_pretty(&expected).map_err(|e| e.to_string())?,
    )?;
    eprintln!("gpu_owner: serving {ranks} ranks as pid {pid}; fds {keep_fds:?}; SIGTERM ends");
    loop {
        // SAFETY: pause() only waits for a signal; SIGTERM's default action
        // ends the process and the driver frees everything we own.
        unsafe { libc::pause() };
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> R<()> {
    use std::io::Write;
    // Staged as `.NAME.PID.tmp` beside the target, as docs/format.md §3.5 writers do.
    let name = path.file_name().ok_or("no file name")?.to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    f.write_all(bytes).map_err(|e| e.to_string())?;
    f.sync_all().map_err(|e| e.to_string())?;
    std::fs::rename(&tmp, path).map_err(|e| e.to_string())
}

/// Reads `len` bytes at `ptr` in the current context.
fn read(ptr: u64, len: usize) -> R<Vec<u8>> {
    let mut buf = vec![0u8; len];
    // SAFETY: copies `len` bytes into a host buffer of that size.
    ck(
        unsafe { sys::cuMemcpyDtoH_v2(buf.as_mut_ptr().cast(), ptr, len) },
        "cuMemcpyDtoH",
    )?;
    Ok(buf)
}

fn check(inv: &Path, expect: &Path) -> R<()> {
    let expected: BTreeMap<String, BTreeMap<String, u8>> =
        serde_json::from_slice(&std::fs::read(expect).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    let inventory = kvcr::internals::settings::Inventory::at(inv);
    let (probe, notes) = kvcr::internals::node::probe(None)?;
    for n in notes {
        eprintln!("kvcr: note: {n}");
    }
    let audited =
        kvcr::internals::audit::audit(&inventory, Some(probe.as_ref()), false, true, false)
            .map_err(|f| f.message)?;
    let group = import::plan::select(&audited.run.judgement.groups, None)
        .map_err(|f| f.message)?
        .ok_or("no group")?;
    let plan = Plan::from_group(group, &audited.descriptors).map_err(|e| e.to_string())?;
    let mut backend = CudaBackend::new().map_err(|e| e.to_string())?;
    // Our own context references keep each context alive across kvcr's
    // release, so the post-release lookups happen where the mappings were.
    let n = init()?;
    let devs: Vec<sys::CUdevice> = (0..n).map(device).collect::<R<_>>()?;
    for d in &devs {
        retain_ctx(*d)?;
    }
    let mut ledger = Ledger::new();
    let out = import::execute(&plan, &mut backend, &mut ledger, &|| false, &mut |_| {});
    let Outcome::Imported { ranks } = out else {
        return Err(format!("import failed: {out:?}"));
    };
    let sizes: BTreeMap<(u64, String), (u64, u64)> = plan
        .ranks
        .iter()
        .flat_map(|r| {
            r.allocations
                .iter()
                .map(move |a| ((r.rank, a.id.clone()), (a.offset_bytes, a.size_bytes)))
        })
        .collect();
    let mut mappings = Vec::new();
    let mut checked = 0;
    for e in ledger.entries() {
        let (device, ptr) = match e.resource {
            Resource::IpcMapping { device, ptr } | Resource::Mapping { device, ptr, .. } => {
                (device, ptr)
            }
            _ => continue,
        };
        let id = e.allocation.clone().unwrap_or_default();
        let (offset, size) = sizes[&(e.rank, id.clone())];
        let want = *expected
            .get(&e.rank.to_string())
            .and_then(|m| m.get(&id))
            .ok_or(format!("no expected byte for rank {} {id}", e.rank))?;
        retain_ctx(devs[device as usize])?;
        let chunk = (size as usize).min(64 << 10);
        for off in [0, size as usize - chunk] {
            // The rank's bytes start offset_bytes into the mapping.
            let got = read(ptr + offset + off as u64, chunk)?;
            if let Some(bad) = got.iter().position(|b| *b != want) {
                return Err(format!(
                    "rank {} {id}: byte {} is {:#04x}, the owner wrote {want:#04x}",
                    e.rank,
                    off + bad,
                    got[bad]
                ));
            }
        }
        release_ctx(devs[device as usize]);
        mappings.push((device, ptr, e.rank, id));
        checked += 1;
    }
    let rel = ledger.release_all(&mut backend);
    if !rel.is_clean() {
        return Err(format!("release failed: {:?}", rel.failed));
    }
    for (device, ptr, rank, id) in &mappings {
        retain_ctx(devs[*device as usize])?;
        let (mut base, mut size) = (0, 0usize);
        // SAFETY: a lookup only; writes through valid pointers.
        let r = unsafe { sys::cuMemGetAddressRange_v2(&mut base, &mut size, *ptr) };
        release_ctx(devs[*device as usize]);
        if r == sys::CUresult::CUDA_SUCCESS {
            return Err(format!(
                "rank {rank} {id}: {ptr:#x} is still mapped after release"
            ));
        }
    }
    for d in &devs {
        release_ctx(*d);
    }
    println!(
        "{}",
        json!({"ranks": ranks.len(), "mappings_checked": checked, "released": rel.released.len(), "bytes_match": true})
    );
    Ok(())
}
