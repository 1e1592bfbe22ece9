//! `kvcr merge REPORT.json…|DIR` (docs/format.md §10): per-node audit
//! reports judged as one fleet, for groups that span nodes.

use super::args::OutputArgs;
use crate::format::failure::Failure;
use crate::io::node::now_unix_ms;
use crate::io::output::emit;
use crate::print::audit::{print_audit, AuditRun};
use crate::print::Printer;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
pub struct MergeArgs {
    /// Per-node reports written by `kvcr audit --live --local-ranks ... --format json`.
    #[arg(value_name = "REPORT.json", required = true)]
    pub reports: Vec<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// The most bytes one merge input may have (docs/format.md §10).
const MAX_MERGE_INPUT: u64 = 64 << 20;

/// Merge inputs: each path as given, a directory as its `*.json` entries
/// (regular files, not entered recursively) in byte order of their names.
fn merge_inputs(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Failure> {
    let mut out = Vec::new();
    for path in paths {
        let shown = crate::format::text::terminal(&path.display().to_string()).into_owned();
        let Ok(meta) = std::fs::metadata(path) else {
            out.push(path.clone());
            continue;
        };
        if !meta.is_dir() {
            out.push(path.clone());
            continue;
        }
        let entries = std::fs::read_dir(path)
            .map_err(|e| Failure::usage(format!("cannot read directory {shown}: {e}"), None))?;
        let mut found: Vec<PathBuf> = Vec::new();
        for e in entries {
            let e =
                e.map_err(|e| Failure::usage(format!("cannot read directory {shown}: {e}"), None))?;
            let name = e.file_name();
            let is_json = name.as_encoded_bytes().ends_with(b".json")
                && !name.as_encoded_bytes().starts_with(b".");
            if is_json && e.file_type().is_ok_and(|t| t.is_file()) {
                found.push(e.path());
            }
        }
        if found.is_empty() {
            return Err(Failure::usage(
                format!("directory {shown} holds no report (no regular *.json file)"),
                Some("merge takes reports written by `kvcr audit --format json`".to_string()),
            ));
        }
        found.sort_by(|a, b| {
            a.as_os_str()
                .as_encoded_bytes()
                .cmp(b.as_os_str().as_encoded_bytes())
        });
        out.extend(found);
    }
    Ok(out)
}

/// `kvcr merge REPORT.json…|DIR`: per-node reports judged as one fleet.
pub fn run(paths: &[PathBuf], p: &Printer) -> Result<i32, Failure> {
    let mut reports = Vec::new();
    for path in merge_inputs(paths)? {
        let name = path.display().to_string();
        let shown = crate::format::text::terminal(&name).into_owned();
        // A merge input is an audit report: bounded like a fleet report,
        // and read straight into the typed wire layer (no JSON value tree).
        let file = crate::io::safe_file::open_regular(&path, MAX_MERGE_INPUT)
            .map_err(|e| Failure::usage(format!("cannot read {shown}: {e}"), None))?;
        let r = crate::rules::fleet::read_report(&name, file).map_err(|e| {
            Failure::usage(
                e,
                Some("merge takes reports written by `kvcr audit --format json`".to_string()),
            )
        })?;
        reports.push((name, r));
    }
    let live = reports
        .iter()
        .all(|(_, r)| crate::rules::fleet::proves_live(r));
    let names: Vec<String> = reports.iter().map(|(n, _)| n.clone()).collect();
    // Dated no earlier than its newest input (within the clock slack).
    let now_ms = crate::rules::fleet::merged_at(&reports, now_unix_ms());
    let oldest = crate::rules::fleet::oldest_input_age_ms(&reports, now_ms);
    // What the printers need of each input; the reports themselves are
    // consumed by the merge.
    let inputs: Vec<crate::format::meta::MergeInput> = reports
        .iter()
        .map(|(n, r)| crate::format::meta::MergeInput {
            report: n.clone(),
            host: r.host.clone(),
            boot_id: crate::format::wire::uuid(r.boot_id.as_deref()),
            live: r.live,
            generated_unix_ms: Some(r.generated_unix_ms),
        })
        .collect();
    let roots: Vec<String> = reports.iter().map(|(_, r)| r.root.clone()).collect();
    let invocation = crate::rules::cause::Invocation {
        root: None,
        live,
        flags: Vec::new(),
        merged: Some(
            inputs
                .iter()
                .zip(roots)
                .map(|(i, root)| crate::rules::cause::MergeInput {
                    report: i.report.clone(),
                    host: i.host.clone(),
                    root: Some(root),
                    live: i.live && i.boot_id.is_some(),
                })
                .collect(),
        ),
    };
    let judgement = crate::rules::fleet::merge(reports, now_ms, &invocation);
    let meta = crate::format::meta::Meta::new(live, now_ms, judgement.exit_status());
    let run = AuditRun {
        meta,
        merge: Some(crate::format::meta::MergeMeta {
            reports: names.clone(),
            all_inputs_live: live,
            oldest_input_age_ms: oldest,
            inputs,
        }),
        root: format!(
            "merged from {} report{}",
            names.len(),
            if names.len() == 1 { "" } else { "s" }
        ),
        live,
        strict: false,
        node: None,
        now_ms,
        judgement,
    };
    let status = run.judgement.exit_status();
    emit(|out| print_audit(out, p, &run, None))?;
    Ok(status)
}
