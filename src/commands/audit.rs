//! `kvcr audit [ROOT]` (docs/format.md §5, §9): the read-only audit, as a
//! table, one JSON document or Prometheus text, optionally also written to
//! node-exporter's textfile directory (§9.5).

use super::args::{InventoryArgs, OutputArgs};
use super::settings;
use crate::format::exit;
use crate::format::failure::Failure;
use crate::io::node::now_unix_ms;
use crate::io::output::{emit, OutputFile, Unusable};
use crate::print;
use crate::print::audit::{print_audit, prometheus_text, AuditRun};
use crate::service::audit::{audit, probe_node};
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args, Debug, Clone)]
pub struct AuditArgs {
    #[command(flatten)]
    pub inventory: InventoryArgs,
    /// Also check against this node: boot id, hostname, owner and writer processes, GPUs present.
    #[arg(long)]
    pub live: bool,
    /// With --live: a fact that could not be read (boot id, hostname, owner,
    /// writer, GPU) rejects its rank, as it refuses an import (docs/format.md §8.9).
    #[arg(long, requires = "live")]
    pub strict: bool,
    /// Also write the Prometheus metrics (docs/format.md §9.5) to PATH, atomically, for
    /// node-exporter's textfile collector; PATH may not lie inside the inventory.
    #[arg(long, value_name = "PATH")]
    pub textfile: Option<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `kvcr audit`, resolved.
pub struct Audit {
    pub inventory: crate::service::audit::Inventory,
    pub printer: crate::print::Printer,
    /// `--live`: judge against this node.
    pub live: bool,
    /// `--strict`: a live fact not checked rejects its rank.
    pub strict: bool,
}

impl Audit {
    pub fn resolve(a: &AuditArgs) -> Result<Audit, Failure> {
        Ok(Audit {
            printer: settings::printer(&a.output),
            inventory: settings::inventory(&a.inventory)?,
            live: a.live,
            strict: a.strict,
        })
    }
}

/// `kvcr audit`, from its command line. With `--textfile`, a run that
/// cannot happen (exit 2 from the settings or the audit: no inventory, a bad
/// profile, no node probe) still replaces the file, with
/// `kvcr_audit_success 0` (docs/format.md §9.5): a textfile collector must
/// never go on exporting an earlier run's verdict. A `--textfile` that cannot
/// be used at all (inside the inventory, no such directory) is refused first
/// and nothing is written.
pub fn run(args: &AuditArgs) -> Result<i32, Failure> {
    let textfile = args
        .textfile
        .as_deref()
        .map(|t| textfile_target(t, args.inventory.root.as_deref()))
        .transpose()?;
    let judged = Audit::resolve(args).and_then(|a| {
        let started = std::time::Instant::now();
        let run = judge(&a)?;
        Ok((a, run, started.elapsed()))
    });
    let (a, run, took) = match judged {
        Ok(x) => x,
        Err(f) => {
            if let Some(out) = &textfile {
                let text = print::prometheus::render_failure(&print::prometheus::Meta {
                    now_unix_ms: now_unix_ms(),
                    live: args.live,
                    duration: None,
                    exit_status: f.status,
                });
                if let Err(e) = out.write_atomic(text.as_bytes(), 0o644) {
                    crate::io::output::err_line(&format!(
                        "kvcr: warning: cannot write kvcr_audit_success 0 to the --textfile: {}",
                        crate::format::text::terminal(&format!("{}: {}", e.what, e.source))
                    ));
                }
            }
            return Err(f);
        }
    };
    let p = &a.printer;
    let status = run.judgement.exit_status();
    if let Some(out) = &textfile {
        // A judgement that says the audit could not run (exit 2) carries no
        // verdict a monitor may show: the same text as a failed run.
        let text = if status == exit::USAGE {
            print::prometheus::render_failure(&print::prometheus::Meta {
                now_unix_ms: run.now_ms,
                live: run.live,
                duration: Some(took),
                exit_status: status,
            })
        } else {
            prometheus_text(&run, Some(took))
        };
        out.write_atomic(text.as_bytes(), 0o644).map_err(|e| {
            Failure::new(
                exit::USAGE,
                format!(
                    "cannot write the --textfile metrics: {}: {}",
                    e.what, e.source
                ),
            )
        })?;
    }
    emit(|out| print_audit(out, p, &run, Some(took)))?;
    // The process exits next: freeing every row, finding and string one by
    // one returns nothing to anyone and took 1.3 % of a 20,000-descriptor
    // audit's samples, on the serial tail after the reading threads end
    // (docs/bench.md, "Issue #39, fifth round"). The kernel takes the
    // memory back whole at exit.
    std::mem::forget(run);
    Ok(status)
}

/// The audit of `kvcr audit`: the node probe (live) and the judgement.
fn judge(a: &Audit) -> Result<AuditRun, Failure> {
    let facts = a.inventory.node_facts.as_deref();
    let probe = a
        .live
        .then(|| probe_node(facts))
        .transpose()
        .map_err(|e| Failure::usage(e, None))?;
    Ok(audit(
        &a.inventory,
        probe.as_deref(),
        a.printer.progress,
        false,
        a.strict,
    )?
    .run)
}

/// `--textfile PATH`: its directory, resolved once and held
/// (`crate::io::output::OutputFile`), refusing a PATH inside the inventory
/// (the ROOT or `$KVCR_INVENTORY` given, else the default root: kvcr never
/// writes there), one without a file name, one whose directory cannot be
/// opened, and a PATH that exists and is not a regular file. Checked before
/// the settings, so that a run that then fails (a bad profile) can still
/// write `kvcr_audit_success 0` there, and only there.
fn textfile_target(path: &Path, root: Option<&Path>) -> Result<OutputFile, Failure> {
    let bad = |why: String| {
        Failure::usage(
            format!("--textfile {}: {why}", path.display()),
            Some(
                "name a file in node-exporter's textfile directory, such as \
             /var/lib/prometheus/node-exporter/kvcr.prom"
                    .to_string(),
            ),
        )
    };
    let out = OutputFile::resolve(root, path, "--textfile", false).map_err(|u| match u {
        Unusable::Inside(f) => f,
        Unusable::Other(why) => bad(why),
    })?;
    // The write renames over PATH: only ever over a regular file, never over
    // a symlink (such as /dev/stdout) or a device.
    if let Ok(Some(st)) = out.lstat() {
        if !rustix::fs::FileType::from_raw_mode(st.st_mode).is_file() {
            return Err(bad(
                "exists and is not a regular file (a symlink, a directory or a device); kvcr \
                 replaces only a regular file"
                    .to_string(),
            ));
        }
    }
    Ok(out)
}
