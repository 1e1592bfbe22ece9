//! The reader families: `kvcr gms`, `kvcr pools` and `kvcr offload`,
//! each with its options.

use super::{Document, Error};
use std::path::PathBuf;

/// What [`gms`] is asked for: the options of `kvcr gms`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GmsOptions {
    /// `--live`: lease owners and a held recovery barrier's owner checked
    /// against this node's processes.
    pub live: bool,
    /// `--num-blocks`: the block count the engine will ask recovery
    /// metadata for.
    pub num_blocks: Option<u64>,
    /// `--binding`: the binding digest the engine will compute.
    pub binding: Option<[u8; 32]>,
    /// `--interval-ms` (0 to 60000; `None`: the default, 200).
    pub interval_ms: Option<u64>,
    /// The environment GMS's variables (`GMS_KV_LEASE_SHM_DIR`,
    /// `FAILOVER_LOCK_PATH`, `DYN_KV_RECOVERY_PATH`, …, docs/format.md
    /// §14.1) are read from when no path is given: what a GMS process on
    /// this node sees. The library never reads its own process's
    /// environment; `kvcr gms` passes its own (`std::env::vars_os()`), the
    /// Python package `os.environ`. Empty: none set, GMS's defaults.
    pub env: std::collections::BTreeMap<std::ffi::OsString, std::ffi::OsString>,
}

/// `--binding`'s text (64 hex digits) as the digest [`GmsOptions`] takes.
pub fn parse_binding(s: &str) -> Result<[u8; 32], Error> {
    crate::gms::format::parse_binding(s).map_err(Error::usage)
}

/// Reads what Dynamo's GPU Memory Service left on this node and judges
/// it: the `kvcr.gms-report/v1` document `kvcr gms PATH... --format json`
/// prints (docs/format.md §14). With no path, looks where GMS puts its
/// artifacts, from [`GmsOptions::env`] as GMS reads it. A path that
/// does not exist, cannot be read or is no GMS artifact is [`Error::Usage`].
pub fn gms(paths: &[PathBuf], o: &GmsOptions) -> Result<Document, Error> {
    use crate::gms::rules::{Options, RecoveryAsk, DEFAULT_INTERVAL_MS, MAX_INTERVAL_MS};
    let interval_ms = o.interval_ms.unwrap_or(DEFAULT_INTERVAL_MS);
    if interval_ms > MAX_INTERVAL_MS {
        return Err(Error::usage(format!(
            "interval_ms {interval_ms} is out of range: 0 to {MAX_INTERVAL_MS}"
        )));
    }
    let options = Options {
        paths: paths.to_vec(),
        live: o.live,
        ask: RecoveryAsk {
            num_blocks: o.num_blocks,
            binding: o.binding,
        },
        interval_ms,
        env: o.env.clone(),
    };
    let run = crate::gms::run::run(&options)?;
    let doc = crate::gms::print::document(
        &run,
        crate::io::node::now_unix_ms(),
        &crate::io::node::hostname(),
    );
    Document::of(&doc, run.exit_status())
}

/// What [`pools`] is asked for: the options of `kvcr pools`, named after
/// KVCR's own flags and configuration fields (docs/format.md §16.2); the
/// command line resolves the same struct.
pub use crate::pools::Asked as PoolsOptions;

/// Reads NVIDIA KVCR's pool files and judges them, read-only: the
/// `kvcr.pools-report/v1` document `kvcr pools PATH... --format json`
/// prints (docs/format.md §16). No path is [`Error::Usage`] (KVCR has no
/// default pool directory), as is a path that does not exist, cannot be
/// read or is no pool file.
pub fn pools(paths: &[PathBuf], o: &PoolsOptions) -> Result<Document, Error> {
    let options = crate::pools::resolve(paths, o)?;
    let run = crate::pools::run(&options, &|ms| {
        std::thread::sleep(std::time::Duration::from_millis(ms))
    })?;
    let doc = crate::pools::print::document(
        &run,
        crate::io::node::now_unix_ms(),
        &crate::io::node::hostname(),
    );
    Document::of(&doc, run.exit_status())
}

/// What [`offload`] is asked for: the options of `kvcr offload`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OffloadOptions {
    /// `--producer`: `auto` (or `None`), `vllm`, `llmd`, `lmcache`,
    /// `lmcache-mp` or `sglang`.
    pub producer: Option<String>,
    /// `--threads` (`None`: 1; the library starts no more threads than asked).
    pub threads: Option<usize>,
    /// `--kv-bytes-per-chunk` (vLLM).
    pub kv_bytes_per_chunk: Option<u64>,
    /// `--bytes-per-block` (llm-d): per group id, `None` for every group.
    pub bytes_per_block: Vec<(Option<u32>, u64)>,
    /// `--chunk-bytes` (LMCache).
    pub chunk_bytes: Option<u64>,
    /// `--page-bytes` (SGLang).
    pub page_bytes: Option<u64>,
    /// `--model` (SGLang): the served model names, repeatable.
    pub models: Vec<String>,
    /// Without paths: SGLang's storage directory as the command takes it
    /// from `SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR` (the library reads no
    /// environment variable).
    pub sglang_storage_dir: Option<PathBuf>,
}

/// Reads the disk offload tiers at `paths` (none: the engines' default
/// roots) and judges every set: the `kvcr.offload-report/v1` document
/// `kvcr offload PATH... --format json` prints (docs/format.md §15). A
/// path that is missing, a symlink or not a directory, or a directory that
/// cannot be listed whole, is [`Error::Usage`].
pub fn offload(paths: &[PathBuf], o: &OffloadOptions) -> Result<Document, Error> {
    use crate::offload::{Choice, Geometry, Options};
    let producer = match o.producer.as_deref().unwrap_or("auto") {
        "auto" => Choice::Auto,
        "vllm" => Choice::Vllm,
        "llmd" => Choice::Llmd,
        "lmcache" => Choice::Lmcache,
        "lmcache-mp" => Choice::LmcacheMp,
        "sglang" => Choice::Sglang,
        other => {
            return Err(Error::usage(format!(
                "producer {other:?} is not one of auto, vllm, llmd, lmcache, lmcache-mp, sglang"
            )))
        }
    };
    for (what, v) in [
        ("kv_bytes_per_chunk", o.kv_bytes_per_chunk),
        ("chunk_bytes", o.chunk_bytes),
        ("page_bytes", o.page_bytes),
    ] {
        if v == Some(0) {
            return Err(Error::usage(format!("{what} 0 is not a size")));
        }
    }
    if o.bytes_per_block.iter().any(|&(_, n)| n == 0) {
        return Err(Error::usage("bytes_per_block 0 is not a size"));
    }
    let options = Options {
        paths: paths.to_vec(),
        producer,
        geometry: Geometry {
            kv_bytes_per_chunk: o.kv_bytes_per_chunk,
            bytes_per_block: o.bytes_per_block.iter().copied().collect(),
            chunk_bytes: o.chunk_bytes,
            page_bytes: o.page_bytes,
        },
        threads: o.threads.unwrap_or(1).max(1),
        sglang_models: o.models.iter().map(|m| m.as_bytes().to_vec()).collect(),
    };
    let dir = o.sglang_storage_dir.clone();
    let env = move |k: &str| {
        (k == crate::offload::walk::SGLANG_ROOT_ENV)
            .then(|| dir.clone().map(PathBuf::into_os_string))
            .flatten()
    };
    let now_ms = crate::io::node::now_unix_ms();
    let run = crate::offload::run(&options, &env, None, (now_ms / 1000) as i64)?;
    let doc = crate::offload::print::document(&run, now_ms, &crate::io::node::hostname());
    Document::of(&doc, run.exit_status())
}
