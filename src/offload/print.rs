//! The printers of docs/format.md §15.5: the table, the
//! `kvcr.offload-report/v1` document (`schemas/offload-report.schema.json`)
//! and the Prometheus text. They take a finished [`super::Run`] and return
//! text or a value; nothing here prints.

use super::judge::{Run, Set};
use crate::format::finding::{Finding, Severity};
use crate::format::message::render;
use crate::format::text::{human_bytes, terminal};
use crate::print::prometheus::escape_label;
use crate::rules::explain;
use serde_json::{json, Value};
use std::fmt::Write as _;

pub use crate::format::ids::OFFLOAD_REPORT;

/// What kvcr cannot find by itself (docs/format.md §15.1).
pub const NOT_LOOKED: &str = "vLLM's root_dir and LMCache's local_disk and base_path are set only \
    in the engine's own arguments: name them as PATH";

/// A set's headline: (cause, action).
pub fn headline(s: &Set) -> (String, String) {
    if let Some(f) = s.cause() {
        return (
            format!("{} ({})", render(&f.message), f.code),
            format!("{}; see `kvcr explain {}`", explain::action(f.code), f.code),
        );
    }
    let notices = s.findings.len();
    let cause = match s.blocks.total {
        0 => "nothing to judge: no block files".to_string(),
        n => format!("{n} blocks, every one complete and of the expected size"),
    };
    let action = if notices == 0 {
        "nothing to do".to_string()
    } else {
        format!("nothing required; {notices} notice(s) below (`kvcr explain CODE` for each)")
    };
    (cause, action)
}

fn finding_json(f: &Finding) -> Value {
    let mut v = json!({
        "code": f.code,
        "name": f.code.name(),
        "severity": f.severity,
        "message": render(&f.message),
    });
    if let Some(p) = &f.path {
        v["path"] = json!(p);
    }
    if let Some(e) = &f.expected {
        v["expected"] = json!(e);
    }
    if let Some(x) = &f.found {
        v["found"] = json!(x);
    }
    v
}

fn set_json(s: &Set) -> Value {
    let (cause, action) = headline(s);
    json!({
        "path": s.path,
        "producer": s.producer,
        "identity": Value::Object(s.identity.clone()),
        "verdict": if s.rejected() { "reject" } else { "ok" },
        "cause": cause,
        "cause_code": s.cause().map(|f| f.code),
        "action": action,
        "findings": s.findings.iter().map(finding_json).collect::<Vec<_>>(),
        "ranks": {
            "expected": s.ranks_expected,
            "present": s.ranks_present,
            "checkable": s.ranks_expected.is_some(),
        },
        "blocks": {
            "total": s.blocks.total,
            "complete": s.blocks.complete,
            "incomplete": s.blocks.incomplete,
            "damaged": s.blocks.damaged,
        },
        "bytes": s.bytes,
        "staging": s.staging.items.iter().map(|t| json!({
            "path": t.path,
            "size": t.size,
            "mtime_unix_s": t.mtime_s,
            "empty": t.size == 0,
            "rank": t.rank,
        })).collect::<Vec<_>>(),
        "staging_count": s.staging.count,
        "foreign": s.foreign.items,
        "foreign_count": s.foreign.count,
        "listed": {
            "cap": super::set::LIST_CAP,
            "count": s.listed_count,
            "blocks": s.listed.iter().map(|b| json!({
                "key": b.key,
                "group": b.group,
                "present_ranks": b.present_ranks,
                "missing_ranks": b.missing_ranks,
                "problem": b.problem,
                "path": b.path,
            })).collect::<Vec<_>>(),
        },
    })
}

/// The `kvcr.offload-report/v1` document.
pub fn document(run: &Run, now_ms: u64, host: &str) -> Value {
    let rejected = run.sets.iter().filter(|s| s.rejected()).count();
    let o = &run.options;
    let bpb: serde_json::Map<String, Value> = o
        .geometry
        .bytes_per_block
        .iter()
        .map(|(g, n)| (g.map_or("*".to_string(), |g| g.to_string()), json!(n)))
        .collect();
    json!({
        "schema": OFFLOAD_REPORT,
        "kvcr_version": crate::format::version::VERSION,
        "generated_unix_ms": now_ms,
        "host": host,
        "exit_status": run.exit_status(),
        "options": {
            "paths": o.paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "producer": o.producer.as_str(),
            "threads": o.threads,
            "kv_bytes_per_chunk": o.geometry.kv_bytes_per_chunk,
            "bytes_per_block": bpb,
            "chunk_bytes": o.geometry.chunk_bytes,
            "page_bytes": o.geometry.page_bytes,
            "model": o
                .sglang_models
                .iter()
                .map(|m| String::from_utf8_lossy(m).into_owned())
                .collect::<Vec<_>>(),
        },
        "looked_in": run.looked.iter().map(|l| json!({
            "path": l.path.display().to_string(),
            "producer": l.producer,
            "why": l.why,
            "present": l.present,
        })).collect::<Vec<_>>(),
        "not_looked": if o.paths.is_empty() { Value::from(NOT_LOOKED) } else { Value::Null },
        "entries": run.entries,
        "opened_without_noatime": run.without_noatime,
        "sets": run.sets.iter().map(set_json).collect::<Vec<_>>(),
        "summary": {
            "sets": run.sets.len(),
            "ok": run.sets.len() - rejected,
            "rejected": rejected,
            "blocks": run.sets.iter().map(|s| s.blocks.total).sum::<u64>(),
            "staging": run.sets.iter().map(|s| s.staging.count).sum::<u64>(),
        },
    })
}

fn ranks(r: &[u32]) -> String {
    if r.is_empty() {
        return "none".into();
    }
    crate::format::rankset::compress_ranks(&r.iter().map(|&x| x as u64).collect::<Vec<_>>())
}

/// The table: per set its verdict, identity, counts, headline and findings;
/// `list` names up to that many incomplete or damaged blocks per set.
pub fn table(run: &Run, list: usize) -> String {
    let mut out = String::new();
    let t = |s: &str| terminal(s).into_owned();
    for l in &run.looked {
        let _ = writeln!(
            out,
            "looked in {} ({}): {}",
            t(&l.path.display().to_string()),
            l.why,
            if l.present { "found" } else { "absent" }
        );
    }
    if run.options.paths.is_empty() {
        let _ = writeln!(out, "{NOT_LOOKED}");
    }
    if run.sets.is_empty() {
        let _ = writeln!(out, "no offload set found");
    }
    for s in &run.sets {
        let (cause, action) = headline(s);
        let _ = writeln!(
            out,
            "\n{}  {}  {}",
            if s.rejected() { "REJECT" } else { "OK    " },
            s.producer,
            t(&s.path)
        );
        if !s.identity.is_empty() {
            let id: Vec<String> = s
                .identity
                .iter()
                // Per-rank names are the JSON's; the table names ranks by number.
                .filter(|(k, _)| k.as_str() != "rank_names")
                .map(|(k, v)| format!("{k}={}", v.as_str().map_or(v.to_string(), str::to_string)))
                .collect();
            let _ = writeln!(out, "  identity: {}", t(&id.join(" ")));
        }
        if s.producer != "unattributed" {
            let _ = writeln!(
                out,
                "  ranks:    expected {}, present {}",
                s.ranks_expected
                    .as_deref()
                    .map_or("not checkable offline".to_string(), ranks),
                ranks(&s.ranks_present)
            );
        }
        let _ = writeln!(
            out,
            "  blocks:   {} total, {} complete, {} incomplete, {} damaged; {}",
            s.blocks.total,
            s.blocks.complete,
            s.blocks.incomplete,
            s.blocks.damaged,
            human_bytes(s.bytes as u128)
        );
        let _ = writeln!(
            out,
            "  staging:  {}; foreign: {}",
            s.staging.count, s.foreign.count
        );
        let _ = writeln!(out, "  cause:    {}", t(&cause));
        let _ = writeln!(out, "  action:   {}", t(&action));
        for f in &s.findings {
            let _ = writeln!(
                out,
                "  {} {:<6} {}",
                f.code,
                match f.severity {
                    Severity::Reject => "reject",
                    Severity::Notice => "notice",
                },
                t(&render(&f.message))
            );
        }
        if list > 0 && s.listed_count > 0 {
            let shown = s.listed.len().min(list);
            let _ = writeln!(
                out,
                "  incomplete or damaged blocks ({shown} of {}):",
                s.listed_count
            );
            for b in s.listed.iter().take(list) {
                let _ = writeln!(out, "    {}: {}", t(&b.key), t(&b.problem));
                let _ = writeln!(out, "      {}", t(&b.path));
            }
        }
    }
    let rejected = run.sets.iter().filter(|s| s.rejected()).count();
    let _ = writeln!(
        out,
        "\n{} sets, {} ok, {} rejected; {} entries read; exit status {}",
        run.sets.len(),
        run.sets.len() - rejected,
        rejected,
        run.entries,
        run.exit_status()
    );
    out
}

/// Prometheus text for the node exporter's textfile collector.
pub fn prometheus(run: &Run) -> String {
    let mut out = String::new();
    let metrics: [(&str, &str); 5] = [
        (
            "kvcr_offload_blocks",
            "Blocks per offload set by state (complete, incomplete, damaged).",
        ),
        (
            "kvcr_offload_staging_files",
            "Staging files a writer left, per offload set.",
        ),
        (
            "kvcr_offload_bytes",
            "Bytes of the block files of an offload set.",
        ),
        (
            "kvcr_offload_set_ok",
            "1 when the offload set is ok, 0 when rejected.",
        ),
        (
            "kvcr_offload_exit_status",
            "The exit status of kvcr offload (0 ok, 1 a set rejected).",
        ),
    ];
    for (name, help) in metrics {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for s in &run.sets {
            let labels = format!(
                "path=\"{}\",producer=\"{}\"",
                escape_label(&s.path),
                escape_label(s.producer)
            );
            match name {
                "kvcr_offload_blocks" => {
                    for (state, n) in [
                        ("complete", s.blocks.complete),
                        ("incomplete", s.blocks.incomplete),
                        ("damaged", s.blocks.damaged),
                    ] {
                        let _ = writeln!(out, "{name}{{{labels},state=\"{state}\"}} {n}");
                    }
                }
                "kvcr_offload_staging_files" => {
                    let _ = writeln!(out, "{name}{{{labels}}} {}", s.staging.count);
                }
                "kvcr_offload_bytes" => {
                    let _ = writeln!(out, "{name}{{{labels}}} {}", s.bytes);
                }
                "kvcr_offload_set_ok" => {
                    let _ = writeln!(out, "{name}{{{labels}}} {}", u8::from(!s.rejected()));
                }
                _ => {}
            }
        }
        if name == "kvcr_offload_exit_status" {
            let _ = writeln!(out, "{name} {}", run.exit_status());
        }
    }
    out
}
