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
//!   Every allocation declares `content` (docs/format.md §3.6), the digest
//!   of its sampled pages, and the profile requires it.
//!
//! `gpu_owner check --inventory DIR --expect FILE [--kvcr PATH]`
//!   imports the group with the kvcr command (a trial: `kvcr import
//!   --profile FILE.profile.json DIR --format json`; PATH defaults to the
//!   `kvcr` built beside this example), which maps every allocation,
//!   compares the sampled pages with the declared content, and releases
//!   everything in reverse. Exit 0 when the import was clean, every
//!   allocation FILE lists was verified, and nothing remains held.

use kvcr_testkit as testkit;

use cudarc::driver::sys;
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
        (Some("check"), Some(inv), Some(expect)) => {
            check(&inv, &expect, arg(&args, "--kvcr").map(PathBuf::from))
        }
        _ => Err(concat!(
            "usage: gpu_owner serve|check --inventory DIR --expect FILE ",
            "[--size-mib N] [--ranks N] [--kvcr PATH]"
        )
        .into()),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpu_owner: {e}");
            ExitCode::FAILURE
        }
    }
}

/// True when libcuda loads (cudarc's dynamic loading panics without it).
fn driver_present() -> bool {
    [c"libcuda.so.1", c"libcuda.so"].iter().any(|name| {
        // SAFETY: dlopen of a NUL-terminated name; the handle is kept (the
        // driver stays loaded for cudarc).
        !unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) }.is_null()
    })
}

/// `n` rounded up to a multiple of `g` (> 0), or `None` on overflow.
fn round_up(n: u64, g: u64) -> Option<u64> {
    n.checked_add(g.checked_sub(1)?).map(|x| x / g * g)
}

/// The `content` member (docs/format.md §3.6) of `size` bytes at `offset`
/// that all hold `byte`: 16 pages of 4096 bytes.
fn content(size: u64, offset: u64, byte: u8) -> R<serde_json::Value> {
    let mut read = |_: u64, n: u64| Ok(vec![byte; n as usize]);
    let c = kvcr_audit::api::digest_content(size, offset, 4096, 16, &mut read)
        .map_err(|e| format!("content: {e:?}"))?;
    Ok(json!({"page_bytes": c.page_bytes, "pages": c.pages, "sha256": hex(&c.sha256)}))
}

fn init() -> R<i32> {
    if !driver_present() {
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
    // SAFETY: writes one context handle; held until the process ends.
    ck(
        unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, dev) },
        "cuDevicePrimaryCtxRetain",
    )?;
    // SAFETY: ctx was just retained.
    ck(unsafe { sys::cuCtxSetCurrent(ctx) }, "cuCtxSetCurrent")?;
    Ok(ctx)
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
    let size = round_up(size, gran as u64).ok_or("size overflow")?;
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
    let ticks = kvcr_audit::api::proc_start_ticks(pid).map_err(|e| e.to_string())?;
    let hostname =
        std::fs::read_to_string("/proc/sys/kernel/hostname").map_err(|e| e.to_string())?;
    let boot_id =
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id").map_err(|e| e.to_string())?;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_millis() as u64;
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
        allocations.push(json!({"id": "kv-ipc", "size_bytes": size,
            "handle": {"kind": "cuda_ipc", "hex": hex(&raw)},
            "content": content(size, 0, pat(0))?}));
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
                "handle": {"kind": "cuda_ipc", "hex": hex(&raw)},
                "content": content(size - half, half, pat(3))?}),
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
            json!({"id": "kv-fd", "size_bytes": sz, "handle": {"kind": "posix_fd", "fd": fd},
                "content": content(sz, 0, pat(1))?}),
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
                allocations.push(json!({"id": "kv-fabric", "size_bytes": sz,
                    "handle": {"kind": "fabric", "hex": hex(&data)},
                    "content": content(sz, 0, pat(2))?}));
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
                "require_content": true,
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

/// The trial import by the kvcr command: exit 0, every allocation of
/// `expect` imported with its content verified, nothing left held.
fn check(inv: &Path, expect: &Path, kvcr: Option<PathBuf>) -> R<()> {
    let expected: BTreeMap<String, BTreeMap<String, u8>> =
        serde_json::from_slice(&std::fs::read(expect).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    let kvcr = match kvcr {
        Some(p) => p,
        // target/<profile>/examples/gpu_owner → target/<profile>/kvcr
        None => std::env::current_exe()
            .map_err(|e| e.to_string())?
            .parent()
            .and_then(Path::parent)
            .ok_or("no directory above this example")?
            .join("kvcr"),
    };
    let out = std::process::Command::new(&kvcr)
        .arg("import")
        .arg(inv)
        .arg("--profile")
        .arg(expect.with_extension("profile.json"))
        .args(["--format", "json"])
        .output()
        .map_err(|e| format!("{}: {e}", kvcr.display()))?;
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "kvcr import printed no report ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    if out.status.code() != Some(0) || report["result"] != "imported" {
        return Err(format!("kvcr import: {:?}\n{report:#}", out.status.code()));
    }
    let mut checked = 0;
    for (rank, allocations) in &expected {
        let row = report["ranks"]
            .as_array()
            .and_then(|rs| {
                rs.iter()
                    .find(|r| r["rank"].as_u64().is_some_and(|n| n.to_string() == *rank))
            })
            .ok_or(format!("rank {rank} was not imported"))?;
        for id in allocations.keys() {
            let item = row["items"]
                .as_array()
                .and_then(|is| is.iter().find(|i| i["id"] == id.as_str()))
                .ok_or(format!("rank {rank} {id} was not imported"))?;
            if item["content"] != "verified" {
                return Err(format!("rank {rank} {id}: content {}", item["content"]));
            }
            checked += 1;
        }
    }
    if report["remaining"]
        .as_array()
        .is_some_and(|r| !r.is_empty())
    {
        return Err(format!(
            "still held after the release: {}",
            report["remaining"]
        ));
    }
    println!(
        "{}",
        json!({"ranks": expected.len(), "allocations_verified": checked,
               "released": report["released"], "bytes_match": true})
    );
    Ok(())
}
