//! `kvcr._native`: the Python package's native half, a thin layer over
//! `kvcr::api` (docs/python.md). Arguments arrive already converted by
//! `kvcr/__init__.py` (paths as bytes, descriptors and profiles as JSON
//! text); documents go back as JSON text. Errors are raised as
//! `NativeError(kind, exit_status, code, field, message, report)`, which
//! the package turns into its public exceptions.

use kvcr::api::{self, Error, Profile};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use std::ffi::OsStr;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

create_exception!(
    _native,
    NativeError,
    PyException,
    "(kind, exit_status, code, field, message, report) from kvcr::api"
);

fn path(b: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(b))
}

fn raise(e: Error) -> PyErr {
    let status = e.exit_status();
    let (kind, code, field, message, report) = match e {
        Error::Usage { message, hint } => {
            let message = match hint {
                Some(h) => format!("{message} (hint: {h})"),
                None => message,
            };
            ("usage", None, None, message, None)
        }
        Error::Descriptor {
            code,
            field,
            message,
        } => (
            "descriptor",
            Some(code.as_str().to_string()),
            field,
            message,
            None,
        ),
        Error::Refused { message, report } => {
            ("refused", None, None, message, Some(report.into_json()))
        }
        Error::Other { message, .. } => ("other", None, None, message, None),
    };
    NativeError::new_err((kind, status, code, field, message, report))
}

fn usage(message: String) -> PyErr {
    raise(Error::Usage {
        message,
        hint: None,
    })
}

fn profile(path_bytes: Option<Vec<u8>>, json: Option<Vec<u8>>) -> Option<Profile> {
    match (path_bytes, json) {
        (_, Some(j)) => Some(Profile::Json(j)),
        (Some(p), None) => Some(Profile::Path(path(&p))),
        // As on the command line: $KVCR_PROFILE only when none is given.
        (None, None) => Profile::from_env(),
    }
}

fn ranks(s: Option<String>) -> PyResult<Option<kvcr::rankset::RankSet>> {
    s.map(|s| {
        kvcr::rankset::RankSet::parse(&s).map_err(|e| usage(format!("local_ranks {s:?}: {e}")))
    })
    .transpose()
}

/// The kvcr version (`X.Y.Z`).
#[pyfunction]
fn version() -> &'static str {
    kvcr::VERSION
}

/// `kvcr audit --format json`, with the GIL released.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (root, profile_path, profile_json, engine, live, strict, local_ranks, min_epoch, max_age_s, incarnation))]
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
) -> PyResult<(String, i32)> {
    let incarnation = incarnation
        .map(|s| uuid::Uuid::parse_str(&s).map_err(|e| usage(format!("incarnation {s:?}: {e}"))))
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
        producer_uid: None,
    };
    let root = path(&root);
    let r = py.detach(move || api::audit(&root, &o)).map_err(raise)?;
    let status = r.exit_status();
    Ok((r.into_json(), status))
}

/// `--max-age` text to seconds.
#[pyfunction]
fn parse_age(s: &str) -> PyResult<u64> {
    api::parse_age(s).map_err(raise)
}

/// `kvcr examine FILE --format json`.
#[pyfunction]
fn examine(py: Python<'_>, file: Vec<u8>) -> PyResult<String> {
    let p = path(&file);
    py.detach(move || api::examine(&p))
        .map(api::Document::into_json)
        .map_err(raise)
}

/// The sealed descriptor bytes (`kvcr seal`).
#[pyfunction]
fn seal(text: &[u8]) -> PyResult<Vec<u8>> {
    api::seal_json(text).map_err(raise)
}

/// The canonical digest (`kvcr digest`).
#[pyfunction]
fn digest(text: &[u8]) -> PyResult<String> {
    api::digest_json(text).map_err(raise)
}

/// Seal and write `rank-<R>.json` (docs/format.md §3.5); the path written, as bytes.
#[pyfunction]
#[pyo3(signature = (root, text, subdir))]
fn write_rank(
    py: Python<'_>,
    root: Vec<u8>,
    text: Vec<u8>,
    subdir: Option<Vec<u8>>,
) -> PyResult<Vec<u8>> {
    let root = path(&root);
    let sub = subdir.map(|s| path(&s));
    py.detach(move || api::write_rank_json(&root, &text, sub.as_deref()))
        .map(|p| p.into_os_string().into_vec())
        .map_err(raise)
}

/// Field 22 of `/proc/<pid>/stat`.
#[pyfunction]
fn proc_start_ticks(pid: i32) -> PyResult<u64> {
    api::proc_start_ticks(pid).map_err(raise)
}

/// This boot's id.
#[pyfunction]
fn boot_id() -> PyResult<String> {
    api::boot_id().map(|u| u.to_string()).map_err(raise)
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
            code: kvcr::finding::Code::KV007,
            field: Some("content".into()),
            message: format!("content: {m}"),
        })),
    }
}

/// The readiness gate: the import plan as JSON text, with the GIL released.
#[pyfunction]
#[pyo3(signature = (root, profile_path, profile_json, engine, local_ranks, fleet_report, max_report_age_s))]
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
) -> PyResult<String> {
    let o = api::GateOptions {
        profile: profile(profile_path, profile_json),
        engine,
        local_ranks: ranks(local_ranks)?,
        fleet_report: fleet_report.map(|p| path(&p)),
        max_report_age_s,
    };
    let root = path(&root);
    py.detach(move || api::gate(&root, &o))
        .map(api::Document::into_json)
        .map_err(raise)
}

/// `kvcr gms PATH... --format json`, with the GIL released.
#[pyfunction]
#[pyo3(signature = (paths, live, num_blocks, binding, interval_ms))]
fn gms(
    py: Python<'_>,
    paths: Vec<Vec<u8>>,
    live: bool,
    num_blocks: Option<u64>,
    binding: Option<String>,
    interval_ms: Option<u64>,
) -> PyResult<String> {
    let binding = binding
        .map(|b| api::parse_binding(&b))
        .transpose()
        .map_err(raise)?;
    let o = api::GmsOptions {
        live,
        num_blocks,
        binding,
        interval_ms,
    };
    let paths: Vec<PathBuf> = paths.iter().map(|p| path(p)).collect();
    py.detach(move || api::gms(&paths, &o))
        .map(api::Document::into_json)
        .map_err(raise)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("NativeError", m.py().get_type::<NativeError>())?;
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
    m.add_function(wrap_pyfunction!(gms, m)?)?;
    Ok(())
}
