//! The result of one audit as its printers take it ([`AuditRun`]: the
//! judgement and the report's metadata), and [`print_audit`], which writes
//! it as a table, the JSON document or Prometheus text.

use super::{Printer, Verbosity};
use std::io::{self, Write};

/// The result of auditing an inventory, before printing.
pub struct AuditRun {
    pub root: String,
    /// Report metadata (docs/format.md §9.4): host, boot id, options...
    pub meta: crate::format::meta::Meta,
    /// Set by `kvcr merge`: the reports merged.
    pub merge: Option<crate::format::meta::MergeMeta>,
    pub live: bool,
    /// `--strict`: a fact not checked rejected its rank.
    pub strict: bool,
    /// Live mode: the facts the audit was judged on.
    pub node: Option<crate::rules::facts::NodeFacts>,
    pub now_ms: u64,
    pub judgement: crate::rules::Judgement,
}

impl AuditRun {
    /// Live facts that could not be read, over every rank in scope.
    pub fn not_checked(&self) -> usize {
        self.judgement
            .groups
            .iter()
            .flat_map(|g| &g.ranks)
            .map(|r| r.not_checked.len())
            .sum()
    }
}

/// Prints an audit run in the chosen format (`took`: how long the audit
/// took, for the Prometheus text).
pub fn print_audit(
    out: &mut dyn Write,
    p: &Printer,
    run: &AuditRun,
    took: Option<std::time::Duration>,
) -> io::Result<()> {
    if p.verbosity == Verbosity::Quiet {
        return Ok(());
    }
    match p.format {
        super::Format::Json => {
            // Written through the wire layer merge and the gate read.
            let doc = crate::print::json::printed(
                &run.root,
                &run.meta,
                run.merge.as_ref(),
                &run.judgement,
            );
            crate::format::json::write(out, &doc)
        }
        super::Format::Table => super::table::write(
            out,
            p,
            &super::table::Header {
                root: &run.root,
                live: run.live,
                strict: run.strict,
                not_checked: run.not_checked(),
                merged: run.merge.is_some(),
                profile_from_env: run
                    .meta
                    .options
                    .profile
                    .as_deref()
                    .filter(|_| run.meta.options.profile_source == Some("env")),
            },
            &run.judgement,
            run.now_ms,
        ),
        super::Format::Prometheus => out.write_all(prometheus_text(run, took).as_bytes()),
    }
}

/// The Prometheus exposition of an audit run (docs/format.md §9.5).
pub fn prometheus_text(run: &AuditRun, took: Option<std::time::Duration>) -> String {
    super::prometheus::render(
        &run.judgement,
        &super::prometheus::Meta {
            now_unix_ms: run.now_ms,
            live: run.live,
            duration: took,
            exit_status: run.judgement.exit_status(),
        },
    )
}
