//! The `kvcr import` printers: the per-rank table (the plan, or what was
//! imported) and the closing lines (what happened and what is left), or the
//! report as one JSON document.

use crate::format::failure::Failure;
use crate::format::text::{human_bytes, terminal};
use crate::import::engine::Cause;
use crate::import::report::{ImportReport, Mode, ResultKind};
use crate::import::run::steps::Done;
use crate::import::spec::Step;
use crate::io::output::emit;
use crate::print::{self, Format, Printer, Verbosity};
use std::io::{self, Write};

/// A hold has imported every rank: the table now (the closing lines come
/// on release), and how to release it on stderr.
pub fn holding(p: &Printer, r: &ImportReport) {
    if p.verbosity == Verbosity::Quiet {
        return;
    }
    if p.format == Format::Table {
        let _ = emit(|out| write_table(out, p, r));
    }
    crate::io::output::err_line(&format!(
        "kvcr: holding {} ranks of {}; send SIGINT or SIGTERM (kill -TERM {}) to release",
        r.ranks.len(),
        terminal(r.engine_id.as_deref().unwrap_or("?")),
        std::process::id()
    ));
}

/// The finished import: the JSON document, or the refused audit's table,
/// the rank table and the closing lines.
pub fn done(p: &Printer, done: &Done) -> Result<(), Failure> {
    if p.verbosity == Verbosity::Quiet {
        return Ok(());
    }
    let r = &done.report;
    if p.format == Format::Json {
        let mut r = r.clone();
        r.meta.exit_status = r.status();
        return emit(|out| crate::format::json::write(out, &r));
    }
    if let Some(run) = &done.audit {
        emit(|out| crate::print::audit::print_audit(out, p, run, None))?;
    }
    // A hold printed its table when it was ready.
    let held_already = r.mode == Mode::Hold && r.result == ResultKind::Imported;
    emit(|out| {
        if !held_already {
            write_table(out, p, r)?;
        }
        write_result(out, r)
    })
}

/// The per-rank table: the plan (dry run) or what was imported.
pub fn write_table(out: &mut dyn Write, p: &Printer, r: &ImportReport) -> io::Result<()> {
    let engine = r.engine_id.as_deref().unwrap_or("-");
    let mut head = format!(
        "{} {}  [{}",
        match r.mode {
            Mode::DryRun => "plan for",
            _ => "import of",
        },
        terminal(engine),
        match r.mode {
            Mode::DryRun => "dry run",
            Mode::Trial => "trial",
            Mode::Hold => "hold",
            Mode::Gate => "gate",
        }
    );
    if r.backend != "none" {
        head.push_str(&format!(", {} backend", r.backend));
    }
    head.push(']');
    if let Some(i) = r.incarnation {
        head.push_str(&format!("  incarnation {}", &i.to_string()[..8]));
    }
    if let Some(e) = r.epoch {
        head.push_str(&format!(" epoch {e}"));
    }
    writeln!(out, "{head}")?;
    if r.ranks.is_empty() {
        return Ok(());
    }
    let dry = r.mode == Mode::DryRun;
    let mut header = vec!["rank", "gpu"];
    if !dry {
        header.push("device");
    }
    header.extend(["allocations", "bytes"]);
    header.push(if dry { "descriptor" } else { "time" });
    let mut rows = Vec::new();
    for row in &r.ranks {
        let kinds = {
            let mut counts = std::collections::BTreeMap::<&str, usize>::new();
            for a in &row.items {
                *counts.entry(a.kind).or_default() += 1;
            }
            counts
                .iter()
                .map(|(k, n)| format!("{k}×{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut alloc = format!("{} ({kinds})", row.allocations);
        if p.verbosity == Verbosity::Verbose {
            for a in &row.items {
                alloc.push_str(&format!(
                    "\n  {} {} {}",
                    terminal(&a.id),
                    a.kind,
                    human_bytes(a.size_bytes as u128)
                ));
            }
        }
        let mut cells = vec![row.rank.to_string(), row.gpu_uuid.clone()];
        if !dry {
            cells.push(row.device.map(|d| d.to_string()).unwrap_or_default());
        }
        cells.push(alloc);
        cells.push(human_bytes(row.bytes));
        cells.push(if dry {
            terminal(&row.path).into_owned()
        } else {
            row.ms
                .map(crate::format::text::human_duration_ms)
                .unwrap_or_default()
        });
        rows.push(cells);
    }
    print::table::columns(out, p, " ", &header, &rows)
}

/// The closing lines: what happened and what is left.
pub fn write_result(out: &mut dyn Write, r: &ImportReport) -> io::Result<()> {
    let allocs: usize = r.ranks.iter().map(|x| x.allocations).sum();
    let bytes: u128 = r.ranks.iter().map(|x| x.bytes).sum();
    // Set by every path that released; a count never made up as 0.
    let released = r.released.map(|n| format!("{n} ")).unwrap_or_default();
    match r.result {
        ResultKind::Planned => {
            writeln!(
                out,
                "planned: {} ranks, {allocs} allocations, {}; nothing imported (dry run)",
                r.ranks.len(),
                human_bytes(bytes)
            )?;
            if !r.refusals.is_empty() {
                writeln!(
                    out,
                    "the real import would be refused (exit {}):",
                    r.status()
                )?;
                for x in &r.refusals {
                    writeln!(out, "  - (exit {}) {}", x.status, terminal(&x.message))?;
                }
            }
        }
        ResultKind::Rejected if r.mode == Mode::DryRun => {
            let why = match &r.audit {
                Some(g) => format!(
                    "group {} rejected: {}",
                    terminal(&g.engine_id),
                    terminal(&g.cause)
                ),
                None if !r.files.is_empty() => format!(
                    "{} file(s) in the inventory carry rejecting findings",
                    r.files.len()
                ),
                None => "no descriptor found".into(),
            };
            writeln!(out, "dry run: the import would be refused: {why}")?;
            for x in &r.refusals {
                writeln!(
                    out,
                    "  - (exit {}, answered first) {}",
                    x.status,
                    terminal(&x.message)
                )?;
            }
        }
        ResultKind::Rejected => {
            let why = match (&r.audit, r.refusals.first()) {
                (_, Some(x)) => terminal(&x.message).into_owned(),
                (Some(g), None) => format!(
                    "group {} rejected: \
                    {}",
                    terminal(&g.engine_id),
                    terminal(&g.cause)
                ),
                (None, None) if !r.files.is_empty() => format!(
                    "{} file(s) in the inventory carry rejecting findings",
                    r.files.len()
                ),
                (None, None) => "no descriptor found".into(),
            };
            writeln!(out, "import refused, nothing imported: {why}")?;
            if r.refusals.is_empty() && r.audit.is_some() && !r.files.is_empty() {
                writeln!(
                    out,
                    "  also: {} file(s) in the inventory carry rejecting findings",
                    r.files.len()
                )?;
            }
        }
        ResultKind::Imported => writeln!(
            out,
            "imported and verified {} ranks ({allocs} allocations, {}), then released all \
                {released}resources in reverse order{}",
            r.ranks.len(),
            human_bytes(bytes),
            if r.mode == Mode::Hold {
                " on signal"
            } else {
                " (trial)"
            }
        )?,
        ResultKind::Failed | ResultKind::Interrupted | ResultKind::ReleaseFailed => {
            if let Some(f) = &r.failure {
                let verb = if r.result == ResultKind::Interrupted || f.cause == Cause::Interrupted {
                    "INTERRUPTED"
                } else if f.step == Step::Release {
                    "RELEASE FAILED"
                } else {
                    "FAILED"
                };
                writeln!(out, "{verb}: {}", terminal(&f.to_string()))?;
            }
            if r.remaining.is_empty() {
                writeln!(
                    out,
                    "released all {released}resources taken, in reverse order; nothing remains \
                        held"
                )?;
            } else {
                writeln!(
                    out,
                    "release failed: released {released}resources in reverse order; {} remain \
                        held by this process:",
                    r.remaining.len()
                )?;
                for x in &r.remaining {
                    let alloc = x
                        .allocation
                        .as_deref()
                        .map(|a| format!(" allocation {:?}", terminal(a)))
                        .unwrap_or_default();
                    writeln!(
                        out,
                        "  rank {}{alloc}: {} ({}){}",
                        x.rank,
                        x.resource,
                        x.release_call,
                        x.error
                            .as_deref()
                            .map(|e| format!(": {}", terminal(e)))
                            .unwrap_or_default()
                    )?;
                }
            }
        }
    }
    for w in &r.warnings {
        writeln!(out, "warning: {}", terminal(w))?;
    }
    Ok(())
}
