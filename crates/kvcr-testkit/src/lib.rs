//! Builders for valid, sealed descriptors and inventories. Used by the
//! fixture generator (`cargo run --example gen-fixtures`), the integration
//! tests (as `util::testkit`), the library's unit tests (as
//! `crate::testkit`), the benchmarks, the examples and a fuzz target, so
//! fixtures can be regenerated whenever the format changes.
//!
//! Dev-only (`publish = false`): it is not part of the library, and kvcr
//! lists it under `[dev-dependencies]` only. It names the library as
//! `kvcr_audit::` (schema constants, the §3.2 digest); in the library's unit tests
//! that is a second copy of the library, so every helper here takes and
//! returns plain data (strings, JSON values, bytes, paths), never a kvcr
//! type: a kvcr value handed from here to a unit test would be a different
//! type from the one the unit test names.
//!
//! [`gms`] writes Dynamo GPU Memory Service artifacts, valid and with each
//! mutation of the GMS reference's generator recipes (tests/it/gms/).
//!
//! [`proc`] lays out stand-ins for `/proc` (forged facts, a hostile name).
//!
//! [`json_oracle`] is the differential oracle of the hand-written JSON
//! reader against serde_json (the `json` fuzz target and
//! tests/it/report/json_oracle.rs).

// A development tool, not the shipped crate: it prints its results and reads
// its own files by path, so the rules of clippy.toml and Cargo.toml [lints]
// for the crate do not apply here.
#![allow(clippy::disallowed_methods, clippy::print_stdout, clippy::print_stderr)]

pub mod gms;
pub mod json_oracle;
pub mod proc;

use serde_json::{json, Value};
use std::path::Path;

pub const BOOT_ID: &str = "6c1d0e52-3a1f-4d5e-9b7a-2f4c8e1d9a30";
pub const HOSTNAME: &str = "gpu-node-17";
pub const CREATED_UNIX_MS: u64 = 1_764_460_800_000;
pub const INCARNATION_A: &str = "3f2b8c1e-7d4a-4b6e-9c2f-1a5d8e7b4c90";
pub const INCARNATION_B: &str = "9a7e6d5c-4b3a-4f2e-8d1c-0b9a8f7e6d51";

/// A GPU UUID unique per (group, rank).
pub fn gpu(group: u32, rank: u64) -> String {
    // Leading digits differ per GPU, as real UUIDs do, so short forms differ.
    let lead =
        (rank as u32).wrapping_mul(0x9e37_79b1) ^ group.wrapping_mul(0x85eb_ca6b) ^ 0x6a1f_0c2e;
    format!("GPU-{lead:08x}-{group:04x}-4000-8000-{rank:012x}")
}

/// FNV-1a of an engine_id: keeps testkit handles distinct across groups.
fn engine_tag(engine_id: &str) -> u64 {
    engine_id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// 64 handle bytes as 128 hex chars, distinct per (group, rank, allocation):
/// the first 20 bytes spell the rank, the allocation index and a tag of the
/// engine_id, so no two of them ever share a handle (KV111).
pub fn handle_hex(engine_id: &str, rank: u64, alloc: usize) -> String {
    let mut b = [0u8; 64];
    b[..8].copy_from_slice(&rank.to_be_bytes());
    b[8..12].copy_from_slice(&(alloc as u32).to_be_bytes());
    b[12..20].copy_from_slice(&engine_tag(engine_id).to_be_bytes());
    for (i, x) in b.iter_mut().enumerate().skip(20) {
        *x = ((i as u64 * 7 + rank * 31 + alloc as u64 * 13) % 256) as u8;
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A posix_fd number distinct per (group, rank, allocation) inside one owner.
pub fn handle_fd(engine_id: &str, rank: u64, alloc: usize, allocations: usize) -> u64 {
    10 + (engine_tag(engine_id) % 63) * 65_536 + rank * allocations.max(1) as u64 + alloc as u64
}

/// Parameters of one descriptor; `build` turns them into sealed JSON.
#[derive(Clone, Debug)]
pub struct Desc {
    pub engine_id: String,
    pub incarnation: String,
    pub epoch: u64,
    pub rank: u64,
    pub tp: u64,
    pub pp: u64,
    pub group: u32,
    pub allocations: usize,
    pub handle_kind: &'static str,
}

impl Desc {
    pub fn new(engine_id: &str, rank: u64, tp: u64, pp: u64) -> Desc {
        Desc {
            engine_id: engine_id.to_string(),
            incarnation: INCARNATION_A.to_string(),
            epoch: 1,
            rank,
            tp,
            pp,
            group: 0,
            allocations: 2,
            handle_kind: "fabric",
        }
    }

    /// The unsealed JSON value (no digest member yet).
    pub fn value(&self) -> Value {
        // docs/format.md §3.1 for the geometry below.
        let per_rank: u64 = 80 * 2 * 1024 * 16 * 2 * 128 * 2;
        let n = self.allocations.max(1) as u64;
        let allocations: Vec<Value> = (0..self.allocations)
            .map(|i| {
                let handle = match self.handle_kind {
                    "posix_fd" => {
                        let fd = handle_fd(&self.engine_id, self.rank, i, self.allocations);
                        json!({"kind": "posix_fd", "fd": fd})
                    }
                    kind => json!({"kind": kind, "hex": handle_hex(&self.engine_id, self.rank, i)}),
                };
                json!({
                    "id": format!("kv-{i}"),
                    "size_bytes": per_rank.div_ceil(n),
                    "handle": handle,
                })
            })
            .collect();
        json!({
            "schema": kvcr_audit::descriptor::SCHEMA,
            "engine_id": self.engine_id,
            "incarnation": self.incarnation,
            "epoch": self.epoch,
            "rank": self.rank,
            "world_size": self.tp * self.pp,
            "tp": self.tp,
            "pp": self.pp,
            "node": {"hostname": HOSTNAME, "boot_id": BOOT_ID},
            "gpu_uuid": gpu(self.group, self.rank),
            "model": {
                "name": "meta-llama/Llama-3.1-70B-Instruct",
                "revision": "945c8663",
                "quantization": null,
            },
            "geometry": {
                "num_layers": 80, "kv_heads_per_rank": 2, "head_size": 128, "block_size": 16,
                "num_blocks": 1024, "dtype": "bfloat16", "use_mla": false,
            },
            "owner": {"pid": 4242, "start_ticks": 123456},
            "writer": {"pid": 4100, "start_ticks": 120000, "quiesced": true},
            "allocations": allocations,
            "created_unix_ms": CREATED_UNIX_MS,
        })
    }

    /// Sealed descriptor bytes after `edit` changed the JSON value.
    pub fn bytes_with(&self, edit: impl FnOnce(&mut Value)) -> Vec<u8> {
        let mut v = self.value();
        edit(&mut v);
        seal(&mut v);
        to_bytes(&v)
    }

    /// Sealed descriptor bytes.
    pub fn bytes(&self) -> Vec<u8> {
        let mut v = self.value();
        seal(&mut v);
        to_bytes(&v)
    }
}

/// The full deployment profile of `d`'s group (docs/format.md §4): everything
/// an import requires declared, matching what [`Desc::value`] writes.
pub fn profile(d: &Desc) -> Value {
    let v = d.value();
    let ws = d.tp * d.pp;
    json!({
        "schema": kvcr_audit::profile::PROFILE_SCHEMA,
        "engine_id": d.engine_id,
        "world_size": ws,
        "tp": d.tp,
        "pp": d.pp,
        "model": v["model"],
        "geometry": v["geometry"],
        "gpus": (0..ws).map(|r| gpu(d.group, r)).collect::<Vec<_>>(),
    })
}

/// Writes [`profile`] of `d` to `path`.
pub fn put_profile(path: &Path, d: &Desc) {
    std::fs::write(path, to_bytes(&profile(d))).unwrap();
}

/// Pretty JSON bytes with a trailing newline, as an owner would write them.
pub fn to_bytes(v: &Value) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(v).expect("serialise");
    b.push(b'\n');
    b
}

/// Sets `digest` to the docs/format.md §3.2 digest of the value without its digest member.
pub fn seal(v: &mut Value) {
    if let Some(o) = v.as_object_mut() {
        o.remove("digest");
    }
    let bytes = serde_json::to_vec(v).expect("serialise");
    let d = kvcr_audit::descriptor::parse::compute_digest(&bytes).expect("valid json");
    let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
    v.as_object_mut()
        .expect("object")
        .insert("digest".into(), Value::String(format!("sha256:{hex}")));
}

/// Writes `bytes` to `dir/rel`, creating parents.
pub fn put(dir: &Path, rel: &str, bytes: &[u8]) {
    let p = dir.join(rel);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(&p, bytes).expect("write");
}

/// Writes a whole group `rank-R.json` into `dir/sub`.
pub fn put_group(dir: &Path, sub: &str, d: &Desc) {
    for rank in 0..d.tp * d.pp {
        let mut r = d.clone();
        r.rank = rank;
        let rel = if sub.is_empty() {
            format!("rank-{rank}.json")
        } else {
            format!("{sub}/rank-{rank}.json")
        };
        put(dir, &rel, &r.bytes());
    }
}

/// Writes one sealed descriptor per rank of `d` as `dir/rank-R.json`, each
/// edited by `edit` before it is sealed, with file mode `mode`.
pub fn put_ranks(dir: &Path, d: &Desc, mode: u32, edit: impl Fn(&mut Value)) {
    use std::os::unix::fs::PermissionsExt;
    for rank in 0..d.tp * d.pp {
        let mut r = d.clone();
        r.rank = rank;
        let mut v = r.value();
        edit(&mut v);
        seal(&mut v);
        let p = dir.join(format!("rank-{rank}.json"));
        std::fs::write(&p, to_bytes(&v)).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }
}

/// Every entry below `root` with its type, mode, size and content hash:
/// compared before and after a run to prove kvcr wrote nothing.
pub fn snapshot(root: &Path) -> Vec<(String, u32, u64, Vec<u8>)> {
    use sha2::{Digest, Sha256};
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(root).sort_by_file_name() {
        let Ok(e) = e else { continue };
        let Ok(m) = e.path().symlink_metadata() else {
            continue;
        };
        let content = if m.file_type().is_file() {
            Sha256::digest(std::fs::read(e.path()).unwrap_or_default()).to_vec()
        } else if m.file_type().is_symlink() {
            std::fs::read_link(e.path())
                .map(|t| t.display().to_string().into_bytes())
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        out.push((e.path().display().to_string(), m.mode(), m.size(), content));
    }
    out
}

/// A JSON report with its clock-dependent fields set to fixed values
/// (`generated_unix_ms` to 0; ranks' `age_ms` and a merge's
/// `oldest_input_age_ms` to null), so two runs of the same audit compare
/// equal and the result still validates.
pub fn without_clock(mut v: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(o) => {
                if let Some(x) = o.get_mut("generated_unix_ms") {
                    *x = Value::from(0);
                }
                for k in ["age_ms", "oldest_input_age_ms"] {
                    if let Some(x) = o.get_mut(k) {
                        *x = Value::Null;
                    }
                }
                o.values_mut().for_each(walk);
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut v);
    v
}

/// [`without_clock`] on a report's bytes, back to pretty bytes.
pub fn without_clock_bytes(b: &[u8]) -> Vec<u8> {
    match serde_json::from_slice::<Value>(b) {
        Ok(v) => serde_json::to_vec_pretty(&without_clock(v)).unwrap_or_default(),
        Err(_) => b.to_vec(),
    }
}

/// What two audits of the same files must agree on, whatever the root and
/// the clock (in two directories, or on disk and in memory through
/// `kvcr_audit::api::audit_files`): the groups, the files, the summary and the
/// exit status of `report`, ages left out ([`without_clock`]) and the
/// report's own `root` written `<ROOT>`.
pub fn judgement(report: &Value) -> String {
    let j = without_clock(json!([
        report["groups"],
        report["files"],
        report["summary"],
        report["exit_status"]
    ]));
    let text = serde_json::to_string(&j).unwrap_or_default();
    match report["root"].as_str() {
        Some(root) if !root.is_empty() => text.replace(root, "<ROOT>"),
        _ => text,
    }
}
