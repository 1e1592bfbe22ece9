//! `kvcr import` wired to the process: the node probe, the CUDA backend
//! (or the test-only one `KVCR_IMPORT_BACKEND` names, resolved in
//! `crate::commands::import`), SIGINT/SIGTERM, and the printers.

use crate::format::failure::Failure;
use crate::import::engine::cuda::{CudaBackend, DriverError};
use crate::import::engine::sim::{Faults, Injected};
use crate::import::engine::Backend;
use crate::import::run::steps::{import, Action, Gpu, Request};
use crate::import::run::{print, signals};
use crate::import::spec::{BackendSpec, Mode, Target};
use crate::print::Verbosity;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// What `kvcr import` is asked, resolved from its command line and the
/// environment (`crate::commands::import`).
pub struct Import {
    pub inventory: crate::service::audit::Inventory,
    pub printer: crate::print::Printer,
    pub mode: Mode,
    /// `--hold --ready-file PATH`.
    pub ready_file: Option<std::path::PathBuf>,
    /// `--fleet-report`: proof of the whole group for a local part.
    pub fleet_report: Option<std::path::PathBuf>,
    /// `--max-report-age`, seconds.
    pub max_report_age_s: u64,
    /// `--map-read-write`.
    pub map_read_write: bool,
    /// `KVCR_IMPORT_BACKEND` (test-only; CUDA by default).
    pub backend: BackendSpec,
    /// `KVCR_IMPORT_LOG` (and the journal socket): where the record goes.
    pub import_log: Target,
}

/// `kvcr import`.
pub fn run(s: &Import) -> Result<i32, Failure> {
    let p = &s.printer;
    let spec = &s.backend;
    // One run: the probe, the plan and the backend see one GPU list.
    crate::io::node::gpus::keep_one_list();
    let probe = crate::service::audit::probe_node(s.inventory.node_facts.as_deref())
        .map_err(|e| Failure::usage(e, None))?;
    let flag = spec.flag();
    let interrupted = move || signals::interrupted() || flag.load(Ordering::SeqCst);
    let _signals = match s.mode {
        Mode::DryRun => None,
        _ => Some(signals::install().map_err(|e| {
            Failure::usage(format!("cannot install SIGINT/SIGTERM handlers: {e}"), None)
        })?),
    };
    let driver = || {
        if spec.sim {
            return None;
        }
        CudaBackend::new().err().map(|e| e.to_string())
    };
    // A simulated import records nothing in the system's logs: only where
    // KVCR_IMPORT_LOG / KVCR_JOURNAL_SOCKET name one.
    let target = s.import_log.for_backend(spec.sim);
    let open = || {
        let b = make_backend(spec, s.map_read_write, s.inventory.root.as_deref())?;
        if spec.sim && p.verbosity != Verbosity::Quiet {
            crate::io::output::err_line(&format!(
                "kvcr: warning: {} selects the simulated backend: no GPU memory is imported{}",
                BackendSpec::ENV,
                match &target {
                    None => format!(
                        ", and no record goes to the import log ({} names a file to keep one)",
                        crate::import::run::log::ENV
                    ),
                    Some(_) => String::new(),
                }
            ));
        }
        Ok(b)
    };
    // The import log is never inside the inventory (exit 2, before anything
    // is imported), and is resolved once for the whole run: the release
    // record goes where the check looked. A dry run writes none, nor does a
    // simulated import unless told where.
    let log = match (&s.mode, &target) {
        (Mode::DryRun, _) | (_, None) => None,
        (_, Some(t)) => Some(crate::import::run::log::Log::open(
            t,
            s.inventory.root.as_deref(),
        )?),
    };
    let quiet = p.verbosity == Verbosity::Quiet;
    let write_log = |r: &_, event| {
        if let Some(log) = &log {
            crate::import::run::log::write(log, r, event, quiet);
        }
    };
    let mut on_ready = |r: &_| {
        print::holding(p, r);
        write_log(r, crate::import::run::log::Event::Holding);
    };
    let run = match s.mode {
        // The command line never asks for the library's gate mode.
        Mode::DryRun | Mode::Gate => Action::DryRun { driver: &driver },
        Mode::Trial => Action::Trial {
            gpu: Gpu::Connect(&open),
        },
        Mode::Hold => Action::Hold {
            gpu: Gpu::Connect(&open),
            ready_file: s.ready_file.as_deref(),
            poll: Duration::from_millis(50),
            on_ready: &mut on_ready,
        },
    };
    let req = Request {
        inventory: &s.inventory,
        fleet_report: s.fleet_report.as_deref(),
        max_report_age_s: s.max_report_age_s,
        probe: probe.as_ref(),
        interrupted: &interrupted,
        progress: p.progress,
    };
    let done = import(&req, run)?;
    write_log(&done.report, crate::import::run::log::Event::Ended);
    print::done(p, &done)?;
    Ok(done.report.status())
}

/// Builds the backend `KVCR_IMPORT_BACKEND` asks for (CUDA by default;
/// VMM mappings read-only unless `read_write`). The sim backend's event log
/// is an output like any other: never inside the inventory at `root`.
fn make_backend(
    spec: &BackendSpec,
    read_write: bool,
    root: Option<&std::path::Path>,
) -> Result<Box<dyn Backend>, Failure> {
    if spec.sim {
        use crate::io::output::{OutputFile, Unusable};
        let cannot = |e: String| {
            Failure::usage(
                format!("{}: cannot open the sim log: {e}", BackendSpec::ENV),
                None,
            )
        };
        let log = match &spec.log {
            None => None,
            Some(p) => {
                let out =
                    OutputFile::resolve(root, p, BackendSpec::ENV, false).map_err(|u| match u {
                        Unusable::Inside(f) => f,
                        Unusable::Other(why) => cannot(why),
                    })?;
                Some(out.open_append().map_err(cannot)?)
            }
        };
        return Ok(Box::new(spec.build_sim(log)));
    }
    let cuda = CudaBackend::new()
        .map_err(|e| {
            let hint = match e {
                DriverError::NotFound => {
                    "install the NVIDIA driver (libcuda.so.1) on this node, or \
                run `kvcr import --dry-run` to audit and plan without one"
                }
                DriverError::TooOld { .. } => {
                    "upgrade the NVIDIA driver, or run `kvcr import \
                --dry-run` to audit and plan without one"
                }
                DriverError::Stub(_) => {
                    "remove the CUDA toolkit's stubs directory (…/lib64/stubs) \
                from LD_LIBRARY_PATH, or install the NVIDIA driver; `kvcr import --dry-run` \
                audits and plans without one"
                }
            };
            Failure::usage(e.to_string(), Some(hint.to_string()))
        })?
        .read_write(read_write);
    if spec.is_plain_cuda() {
        Ok(Box::new(cuda))
    } else {
        Ok(Box::new(Injected {
            inner: cuda,
            faults: Faults::from_plan(&spec.faults),
        }))
    }
}
