//! `kvcr_audit._native`: the Python package's native half, a thin layer over
//! `kvcr_audit::api` (docs/python.md). Arguments arrive already converted by
//! `kvcr_audit/__init__.py` (paths as bytes, descriptors and profiles as JSON
//! text); documents go back as JSON text, with the notes the command would
//! print on stderr. Errors are raised here as the package's own exceptions
//! (`kvcr_audit.Error` and its subclasses), worded for Python in one place
//! (errors.rs).

mod errors;
mod objects;

use errors::{raise, usage};
use kvcr_audit::api::{self, Error, Profile};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

fn path(b: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(b))
}

/// Runs a call's body so that no Rust panic reaches Python as
/// `PanicException`: a panic is kvcr's internal error, `kvcr_audit.Error` with the
/// command line's exit status 70 (docs/format.md §13.2).
fn guarded<T>(body: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(r) => r,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_string());
            Err(raise(Error::Other {
                message: format!("internal error: {what}; please report this"),
                status: 70,
            }))
        }
    }
}

/// At most 64 characters of a caller's text, for a message.
fn shown(s: &str) -> String {
    match s.char_indices().nth(64) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The profile as given; the package reads no environment variable
/// (docs/format.md §13.2), so none given is none.
fn profile(path_bytes: Option<Vec<u8>>, json: Option<Vec<u8>>) -> Option<Profile> {
    match (path_bytes, json) {
        (_, Some(j)) => Some(Profile::Json(j)),
        (Some(p), None) => Some(Profile::Path(path(&p))),
        (None, None) => None,
    }
}

fn ranks(s: Option<String>) -> PyResult<Option<kvcr_audit::rankset::RankSet>> {
    s.map(|s| {
        kvcr_audit::rankset::RankSet::parse(&s)
            .map_err(|e| usage(format!("local_ranks=: {:?}: {e}", shown(&s))))
    })
    .transpose()
}

/// The kvcr version (`X.Y.Z`).
#[pyfunction]
fn version() -> &'static str {
    kvcr_audit::VERSION
}

/// `kvcr audit --format json`, with the GIL released: the document, its
/// exit status and the notes the command would print.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (root, profile_path, profile_json, engine, live, strict, local_ranks, min_epoch, max_age_s, incarnation, node_facts, threads))]
fn audit(
    py: Python<'_>,
    root: Vec<u8>,
    profile_path: Option<Vec<u8>>,
    profile_json: Option<Vec<u8>>,
    engine: Option<String>,
    live: bool,
    strict: bool,
    local_ranks: Option<String>,
    min_epoch: Option<u64>,
    max_age_s: Option<u64>,
    incarnation: Option<String>,
    node_facts: Option<Vec<u8>>,
    threads: Option<usize>,
) -> PyResult<(Bound<'_, PyAny>, i32, Vec<String>)> {
    guarded(move || {
        let incarnation = incarnation
            .map(|s| {
                uuid::Uuid::parse_str(&s)
                    .map_err(|e| usage(format!("incarnation=: {:?} is not a UUID: {e}", shown(&s))))
            })
            .transpose()?;
        let o = api::AuditOptions {
            profile: profile(profile_path, profile_json),
            engine,
            live,
            strict,
            local_ranks: ranks(local_ranks)?,
            min_epoch,
            max_age_s,
            incarnation,
            node_facts: node_facts.map(|p| path(&p)),
            threads,
            producer_uid: None,
        };
        let root = path(&root);
        let r = py
            .detach(move || api::audit_structured(&root, &o))
            .map_err(raise)?;
        Ok((objects(py, &r)?, r.exit_status(), r.notes().to_vec()))
    })
}

/// The document as Python objects (objects.rs): what `json.loads` of its
/// JSON text gives, built directly from the value that text is written
/// from (`kvcr_audit::api::Structured`). A failure here is kvcr's own (the
/// wire types hold only what JSON holds): an internal error, exit 70, as a
/// panic is.
fn objects<'py>(py: Python<'py>, d: &api::Structured) -> PyResult<Bound<'py, PyAny>> {
    objects::build(py, d).map_err(|e| {
        raise(Error::Other {
            message: format!("internal error: cannot build the document: {e}"),
            status: 70,
        })
    })
}

/// `--max-age` text to seconds; errors name the argument `name`.
#[pyfunction]
fn parse_age(name: &str, s: &str) -> PyResult<u64> {
    guarded(move || {
        api::parse_age(s).map_err(|e| match e {
            Error::Usage { message, .. } => usage(format!(
                "{name}=: {}",
                message.trim_start_matches("max_age: ")
            )),
            other => raise(other),
        })
    })
}

/// For the package's tests only: panics with `message`, so they can prove
/// a panic reaches Python as `kvcr_audit.Error` (exit status 70), never as
/// `PanicException`.
#[pyfunction]
fn _panic_for_tests(message: &str) -> PyResult<()> {
    guarded(move || panic!("{message}"))
}

/// `kvcr examine FILE --format json`.
#[pyfunction]
fn examine(py: Python<'_>, file: Vec<u8>) -> PyResult<String> {
    guarded(move || {
        let p = path(&file);
        py.detach(move || api::examine(&p))
            .map(api::Document::into_json)
            .map_err(raise)
    })
}

/// The sealed descriptor bytes (`kvcr seal`).
#[pyfunction]
fn seal(text: &[u8]) -> PyResult<Vec<u8>> {
    guarded(move || api::seal_json(text).map_err(raise))
}

/// The canonical digest (`kvcr digest`).
#[pyfunction]
fn digest(text: &[u8]) -> PyResult<String> {
    guarded(move || api::digest_json(text).map_err(raise))
}

/// Seal and write `rank-<R>.json` (docs/format.md §3.5), after the node
/// checks (this machine, or the facts file `node_facts` names); the path
/// written, as bytes.
#[pyfunction]
#[pyo3(signature = (root, text, subdir, node_facts))]
fn write_rank(
    py: Python<'_>,
    root: Vec<u8>,
    text: Vec<u8>,
    subdir: Option<Vec<u8>>,
    node_facts: Option<Vec<u8>>,
) -> PyResult<Vec<u8>> {
    guarded(move || {
        let root = path(&root);
        let o = api::WriteOptions {
            subdir: subdir.map(|s| path(&s)),
            node_facts: node_facts.map(|p| path(&p)),
        };
        py.detach(move || api::write_rank_json_with(&root, &text, &o))
            .map(|p| p.into_os_string().into_vec())
            .map_err(raise)
    })
}

/// The highest epoch of group `engine` in the inventory, or `None`.
#[pyfunction]
fn current_epoch(py: Python<'_>, root: Vec<u8>, engine: String) -> PyResult<Option<u64>> {
    guarded(move || {
        let root = path(&root);
        py.detach(move || api::current_epoch(&root, &engine))
            .map_err(raise)
    })
}

/// Field 22 of `/proc/<pid>/stat`.
#[pyfunction]
fn proc_start_ticks(pid: i32) -> PyResult<u64> {
    guarded(move || api::proc_start_ticks(pid).map_err(raise))
}

/// This boot's id.
#[pyfunction]
fn boot_id() -> PyResult<String> {
    guarded(move || api::boot_id().map(|u| u.to_string()).map_err(raise))
}

/// The sampled content digest: (page_bytes, pages, sha256 hex). A
/// `read(offset, length)` that raises re-raises here unchanged.
#[pyfunction]
fn content_digest(
    read: Bound<'_, PyAny>,
    size_bytes: u64,
    offset_bytes: u64,
    pages: u64,
    page_bytes: u64,
) -> PyResult<(u64, u64, String)> {
    guarded(move || {
        let mut raised: Option<PyErr> = None;
        let mut cb = |offset: u64, length: u64| -> Result<Vec<u8>, String> {
            let v = read.call1((offset, length)).map_err(|e| {
                let m = e.to_string();
                raised = Some(e);
                m
            })?;
            match v.extract::<PyBackedBytes>() {
                Ok(b) => Ok(b.to_vec()),
                Err(_) => Err(format!(
                    "read({offset}, {length}) returned {}, expected bytes or bytearray",
                    v.get_type()
                        .name()
                        .map(|n| n.to_string())
                        .unwrap_or_else(|_| "?".into())
                )),
            }
        };
        let out = api::digest_content(size_bytes, offset_bytes, page_bytes, pages, &mut cb);
        match out {
            Ok(c) => {
                let hex: String = c.sha256.iter().map(|b| format!("{b:02x}")).collect();
                Ok((c.page_bytes, c.pages, hex))
            }
            Err(api::ContentError::Read(m)) => Err(raised.take().unwrap_or_else(|| {
                raise(Error::Other {
                    message: format!("content: {m}"),
                    status: 1,
                })
            })),
            Err(api::ContentError::Shape(m)) => Err(raise(Error::Descriptor {
                code: kvcr_audit::finding::Code::KV007,
                field: Some("content".into()),
                message: format!("content: {m}"),
            })),
        }
    })
}

/// The readiness gate: the import plan as JSON text and the notes, with
/// the GIL released.
#[pyfunction]
#[pyo3(signature = (root, profile_path, profile_json, engine, local_ranks, fleet_report, max_report_age_s, node_facts, threads))]
#[allow(clippy::too_many_arguments)]
fn gate(
    py: Python<'_>,
    root: Vec<u8>,
    profile_path: Option<Vec<u8>>,
    profile_json: Option<Vec<u8>>,
    engine: Option<String>,
    local_ranks: Option<String>,
    fleet_report: Option<Vec<u8>>,
    max_report_age_s: u64,
    node_facts: Option<Vec<u8>>,
    threads: Option<usize>,
) -> PyResult<(Bound<'_, PyAny>, Vec<String>)> {
    guarded(move || {
        let o = api::GateOptions {
            profile: profile(profile_path, profile_json),
            engine,
            local_ranks: ranks(local_ranks)?,
            fleet_report: fleet_report.map(|p| path(&p)),
            max_report_age_s,
            node_facts: node_facts.map(|p| path(&p)),
            threads,
        };
        let root = path(&root);
        let d = py
            .detach(move || api::gate_structured(&root, &o))
            .map_err(raise)?;
        Ok((objects(py, &d)?, d.notes().to_vec()))
    })
}

/// `kvcr gms PATH... --format json`, with the GIL released.
#[pyfunction]
#[pyo3(signature = (paths, live, num_blocks, binding, interval_ms, env))]
fn gms(
    py: Python<'_>,
    paths: Vec<Vec<u8>>,
    live: bool,
    num_blocks: Option<u64>,
    binding: Option<String>,
    interval_ms: Option<u64>,
    env: Vec<(Vec<u8>, Vec<u8>)>,
) -> PyResult<String> {
    guarded(move || {
        let binding = binding
            .map(|b| api::parse_binding(&b))
            .transpose()
            .map_err(raise)?;
        let o = api::GmsOptions {
            live,
            num_blocks,
            binding,
            interval_ms,
            // GMS's variables as the Python code passed them (os.environb
            // unless the caller gave `env=`): the library reads none.
            env: env
                .into_iter()
                .map(|(k, v)| (OsString::from_vec(k), OsString::from_vec(v)))
                .collect(),
        };
        let paths: Vec<PathBuf> = paths.iter().map(|p| path(p)).collect();
        py.detach(move || api::gms(&paths, &o))
            .map(api::Document::into_json)
            .map_err(raise)
    })
}

/// `kvcr pools PATH... --format json`, with the GIL released.
#[pyfunction]
#[pyo3(signature = (paths, live, socket_path, guard_count, pool_sizes_gb, journal_bytes,
                    pool_layouts, compatibility_digest, page_size, g3_paths,
                    capacity_bytes_per_file, identity, interval_ms))]
#[allow(clippy::too_many_arguments)]
fn pools(
    py: Python<'_>,
    paths: Vec<Vec<u8>>,
    live: bool,
    socket_path: Option<Vec<u8>>,
    guard_count: Option<u64>,
    pool_sizes_gb: Option<String>,
    journal_bytes: Option<u64>,
    pool_layouts: Option<String>,
    compatibility_digest: Option<String>,
    page_size: Option<u64>,
    g3_paths: Vec<Vec<u8>>,
    capacity_bytes_per_file: Option<u64>,
    identity: Option<(u64, u64)>,
    interval_ms: Option<u64>,
) -> PyResult<String> {
    guarded(move || {
        let o = api::PoolsOptions {
            live,
            socket_path: socket_path.map(|p| path(&p)),
            guard_count,
            pool_sizes_gb,
            journal_bytes,
            pool_layouts,
            compatibility_digest,
            page_size,
            g3_paths: g3_paths.iter().map(|p| path(p)).collect(),
            capacity_bytes_per_file,
            identity,
            interval_ms,
        };
        let paths: Vec<PathBuf> = paths.iter().map(|p| path(p)).collect();
        py.detach(move || api::pools(&paths, &o))
            .map(api::Document::into_json)
            .map_err(raise)
    })
}

/// `kvcr offload PATH... --format json`, with the GIL released.
#[pyfunction]
#[pyo3(signature = (paths, producer, threads, kv_bytes_per_chunk, bytes_per_block, chunk_bytes, sglang_storage_dir, page_bytes=None, models=Vec::new()))]
#[allow(clippy::too_many_arguments)]
fn offload(
    py: Python<'_>,
    paths: Vec<Vec<u8>>,
    producer: Option<String>,
    threads: Option<usize>,
    kv_bytes_per_chunk: Option<u64>,
    bytes_per_block: Vec<(Option<u32>, u64)>,
    chunk_bytes: Option<u64>,
    sglang_storage_dir: Option<Vec<u8>>,
    page_bytes: Option<u64>,
    models: Vec<String>,
) -> PyResult<String> {
    guarded(move || {
        let o = api::OffloadOptions {
            producer,
            threads,
            kv_bytes_per_chunk,
            bytes_per_block,
            chunk_bytes,
            page_bytes,
            models,
            sglang_storage_dir: sglang_storage_dir.map(|p| path(&p)),
        };
        let paths: Vec<PathBuf> = paths.iter().map(|p| path(p)).collect();
        py.detach(move || api::offload(&paths, &o))
            .map(api::Document::into_json)
            .map_err(raise)
    })
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(audit, m)?)?;
    m.add_function(wrap_pyfunction!(parse_age, m)?)?;
    m.add_function(wrap_pyfunction!(examine, m)?)?;
    m.add_function(wrap_pyfunction!(seal, m)?)?;
    m.add_function(wrap_pyfunction!(digest, m)?)?;
    m.add_function(wrap_pyfunction!(write_rank, m)?)?;
    m.add_function(wrap_pyfunction!(proc_start_ticks, m)?)?;
    m.add_function(wrap_pyfunction!(boot_id, m)?)?;
    m.add_function(wrap_pyfunction!(content_digest, m)?)?;
    m.add_function(wrap_pyfunction!(gate, m)?)?;
    m.add_function(wrap_pyfunction!(current_epoch, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_tests, m)?)?;
    m.add_function(wrap_pyfunction!(gms, m)?)?;
    m.add_function(wrap_pyfunction!(pools, m)?)?;
    m.add_function(wrap_pyfunction!(offload, m)?)?;
    Ok(())
}
