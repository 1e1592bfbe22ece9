//! The printers of `kvcr pools` (docs/format.md §16.8): the table, the
//! `kvcr.pools-report/v1` document (`schemas/pools-report.schema.json`) and
//! the Prometheus text. Every pool gets a headline: verdict, cause (the
//! first rejecting finding in the code order) and next step.

use super::codes::Code;
use super::rules::{
    EntryKind, Finding, G3State, GroupReport, Handback, Journal, Liveness, PoolReport, Run,
};
use crate::format::finding::Severity;
use crate::format::hex::encode as hex;
use crate::format::text::terminal;
use serde_json::{json, Value};
use std::fmt::Write as _;

/// The report's `schema`.
pub use crate::format::ids::POOLS_REPORT;

fn sev(s: Severity) -> &'static str {
    match s {
        Severity::Reject => "reject",
        Severity::Notice => "notice",
    }
}

/// A pool's (cause, next step).
pub fn headline(p: &PoolReport) -> (String, String) {
    if let Some(f) = p.cause() {
        return (
            format!("{} ({})", f.message, f.code.id()),
            format!(
                "{}; see `kvcr explain {}`",
                f.code.spec().action,
                f.code.id()
            ),
        );
    }
    let cause = match (&p.kind, &p.read) {
        (EntryKind::ForeignName(_), _) => "not a service's pool file".to_string(),
        (_, Some(r)) => {
            let j = match &r.journal {
                Some(Journal { header, pending }) => format!(
                    "journal {}, {} pending frame(s)",
                    if header.invalid == 0 {
                        "valid"
                    } else {
                        "invalid"
                    },
                    pending.as_ref().map_or(0, |x| x.frames)
                ),
                None => "no journal".into(),
            };
            let h = match &r.handback {
                Handback::Absent => "no handback region".to_string(),
                Handback::NotLocated(_) => "handback region not located".to_string(),
                Handback::Torn(_) => "a torn handback region".to_string(),
                Handback::Present(reg) => match reg.digest_ok() {
                    Some(true) => format!(
                        "a complete handback region of {} record(s), digest verified",
                        reg.frames
                    ),
                    _ => format!(
                        "a handback region of {} record(s), digest not checked",
                        reg.frames
                    ),
                },
            };
            format!("{}: {j}; {h}", p.liveness.as_str())
        }
        _ => p.liveness.as_str().to_string(),
    };
    let notices = p.findings.len();
    let action = if notices == 0 {
        "nothing to do".to_string()
    } else {
        format!("nothing required; {notices} notice(s) below (`kvcr explain CODE` for each)")
    };
    (cause, action)
}

fn finding_json(f: &Finding) -> Value {
    json!({
        "code": f.code.id(),
        "name": f.code.name(),
        "severity": sev(f.severity),
        "message": f.message,
    })
}

fn liveness_json(l: &Liveness) -> Value {
    match l {
        Liveness::NotChecked(why) => json!({"state": "not-checked", "why": why}),
        Liveness::Live {
            service,
            socket,
            primaries,
        } => json!({
            "state": "live", "service_pid": service, "socket": socket, "primary_pids": primaries,
        }),
        Liveness::Leaked { holders } => json!({"state": "leaked", "holder_pids": holders}),
        Liveness::HeldNoService { holders } => {
            json!({"state": "held-no-service", "holder_pids": holders})
        }
        Liveness::Orphan => json!({"state": "orphan"}),
    }
}

fn journal_json(p: &PoolReport) -> Value {
    let Some(Journal { header, pending }) = p.read.as_ref().and_then(|r| r.journal.as_ref()) else {
        return Value::Null;
    };
    json!({
        "invalid": header.invalid,
        "published": header.published,
        "consumed": header.consumed,
        "pending": pending.as_ref().map(|x| json!({
            "frames": x.frames,
            "bytes": x.bytes,
            "keys": x.table.keys,
            "keys_capped": x.table.capped,
            "frame_error": x.frame_error.as_ref()
                .map(|(c, e)| json!({"cursor": c, "error": e.describe()})),
            "payload_error": x.payload_error.as_ref()
                .map(|(c, e)| json!({"cursor": c, "error": e})),
            "note": "one lease's changes since its claim, never the pool's content",
        })),
    })
}

fn handback_json(p: &PoolReport) -> Value {
    let Some(r) = &p.read else { return Value::Null };
    match &r.handback {
        Handback::NotLocated(why) => json!({"state": "not-located", "why": why}),
        Handback::Absent => json!({"state": "absent"}),
        Handback::Torn(why) => json!({"state": "torn", "why": why}),
        Handback::Present(reg) => json!({
            "state": match reg.digest_ok() {
                Some(true) => "complete",
                Some(false) => "digest-mismatch",
                None => "digest-not-checked",
            },
            "offset": reg.offset,
            "length": reg.length,
            "digest": hex(&reg.digest),
            "computed": reg.computed.as_ref().ok().map(|d| hex(d)),
            "not_checked_why": reg.computed.as_ref().err(),
            "terms_used": reg.terms_used,
            "records": reg.records.as_ref().ok().map(|t| t.keys),
            "frames": reg.frames,
            "records_error": reg.records.as_ref().err(),
            "trailing_bytes": reg.trailing,
        }),
    }
}

fn pool_json(p: &PoolReport) -> Value {
    let (cause, action) = headline(p);
    let r = p.read.as_ref();
    json!({
        "path": p.path.to_string_lossy(),
        "pool": p.pool_id,
        "index": p.index,
        "generation": p.generation,
        "kind": match &p.kind {
            EntryKind::Pool => "pool",
            EntryKind::Symlink => "symlink",
            EntryKind::NotRegular => "not-regular",
            EntryKind::ForeignName(_) => "foreign-name",
        },
        "size": r.map(|r| r.stat.size),
        "mode": r.map(|r| format!("{:04o}", r.stat.mode & 0o7777)),
        "owner": r.map(|r| json!({"uid": r.stat.uid, "gid": r.stat.gid})),
        "identity": r.map(|r| json!({"st_dev": r.stat.dev, "st_ino": r.stat.ino})),
        "mapping_bytes": r.and_then(|r| r.mapping.map(|m| m.0)),
        "mapping_given": r.and_then(|r| r.mapping.map(|m| m.1)),
        "verdict": p.verdict(),
        "cause": cause,
        "action": action,
        "kvcr_would": p.kvcr_would,
        "changed": p.changed,
        "liveness": liveness_json(&p.liveness),
        "journal": journal_json(p),
        "handback": handback_json(p),
        "findings": p.findings.iter().map(finding_json).collect::<Vec<_>>(),
    })
}

fn group_json(g: &GroupReport) -> Value {
    json!({
        "path": g.path.to_string_lossy(),
        "verdict": g.verdict(),
        "indices": g.indices,
        "other_entries": g.others,
        "findings": g.findings.iter().map(finding_json).collect::<Vec<_>>(),
    })
}

fn g3_json((p, s, f): &(std::path::PathBuf, G3State, Vec<Finding>)) -> Value {
    json!({
        "path": p.to_string_lossy(),
        "state": match s {
            G3State::Absent => json!({"kind": "absent"}),
            G3State::Symlink => json!({"kind": "symlink"}),
            G3State::NotRegular => json!({"kind": "not-regular"}),
            G3State::File { size, mode, locks } => json!({
                "kind": "file", "size": size, "mode": format!("{mode:04o}"),
                "locks": locks.as_ref().map(|l| l.iter()
                    .map(|(pid, ex)| json!({"pid": pid, "exclusive": ex}))
                    .collect::<Vec<_>>()),
            }),
        },
        "verdict": if f.iter().any(Finding::is_reject) { "rejected" } else { "ok" },
        "findings": f.iter().map(finding_json).collect::<Vec<_>>(),
    })
}

/// The run's one-line cause.
pub fn run_cause(run: &Run) -> String {
    let pools = run
        .pools
        .iter()
        .filter(|p| p.kind == EntryKind::Pool)
        .count();
    if let Some(p) = run.pools.iter().find(|p| p.rejected()) {
        return format!("{}: {}", p.path.to_string_lossy(), headline(p).0);
    }
    if let Some(g) = run.groups.iter().find(|g| g.rejected()) {
        let f = g.findings.iter().find(|f| f.is_reject()).expect("rejected");
        return format!(
            "{}: {} ({})",
            g.path.to_string_lossy(),
            f.message,
            f.code.id()
        );
    }
    if let Some((p, _, f)) = run
        .g3
        .iter()
        .find(|(_, _, f)| f.iter().any(Finding::is_reject))
    {
        let f = f.iter().find(|f| f.is_reject()).expect("rejected");
        return format!("{}: {} ({})", p.to_string_lossy(), f.message, f.code.id());
    }
    if pools == 0 {
        return "empty: no KVCR pool file (what a clean stop leaves)".to_string();
    }
    format!("{pools} pool file(s), none rejected")
}

/// The `kvcr.pools-report/v1` document.
pub fn document(run: &Run, now_ms: u64, host: &str) -> Value {
    let o = &run.options;
    json!({
        "schema": POOLS_REPORT,
        "kvcr_version": crate::format::version::VERSION,
        "generated_unix_ms": now_ms,
        "host": host,
        "live": o.live,
        "options": {
            "paths": o.paths.iter().map(|p| p.to_string_lossy()).collect::<Vec<_>>(),
            "socket_path": o.socket_path.as_ref().map(|p| p.to_string_lossy()),
            "guard_count": o.guard_count,
            "pool_sizes_bytes": o.pool_sizes_bytes,
            "journal_bytes": o.journal_bytes,
            "pool_layouts": o.pool_layouts.as_ref().map(|l| l.iter()
                .map(|(n, b)| json!({"name": n, "block_size_bytes": b}))
                .collect::<Vec<_>>()),
            "compatibility_digest": o.compatibility_digest,
            "page_size": o.page_size,
            "g3_paths": o.g3_paths.iter().map(|p| p.to_string_lossy()).collect::<Vec<_>>(),
            "capacity_bytes_per_file": o.capacity_bytes_per_file,
            "identity": o.identity.map(|(d, i)| json!({"st_dev": d, "st_ino": i})),
            "interval_ms": o.interval_ms,
        },
        "exit_status": run.exit_status(),
        "cause": run_cause(run),
        "groups": run.groups.iter().map(group_json).collect::<Vec<_>>(),
        "pools": run.pools.iter().map(pool_json).collect::<Vec<_>>(),
        "g3": run.g3.iter().map(g3_json).collect::<Vec<_>>(),
        "summary": {
            "pools": run.pools.len(),
            "rejected": run.pools.iter().filter(|p| p.rejected()).count(),
            "notices": run.pools.iter().flat_map(|p| &p.findings)
                .filter(|f| !f.is_reject()).count(),
        },
    })
}

fn t(s: &str) -> String {
    terminal(s).into_owned()
}

fn findings_lines(s: &mut String, f: &[Finding]) {
    for f in f {
        let _ = writeln!(
            s,
            "    {} {:<6} {}",
            f.code.id(),
            sev(f.severity),
            t(&f.message)
        );
    }
}

/// The table.
pub fn table(run: &Run) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "pools  {}", t(&run_cause(run)));
    for g in &run.groups {
        let _ = writeln!(
            s,
            "group {}  {}  pools {:?}, {} other entr{}",
            t(&g.path.to_string_lossy()),
            g.verdict(),
            g.indices,
            g.others,
            if g.others == 1 { "y" } else { "ies" }
        );
        findings_lines(&mut s, &g.findings);
    }
    for p in &run.pools {
        let (cause, action) = headline(p);
        let _ = writeln!(s, "{}  {}", t(&p.path.to_string_lossy()), p.verdict());
        let _ = writeln!(s, "  cause:  {}", t(&cause));
        let _ = writeln!(s, "  next:   {}", t(&action));
        if let Some(r) = &p.read {
            let _ = writeln!(
                s,
                "  pool:   {} generation {} size {} mode {:04o} owner {}:{}",
                t(p.pool_id.as_deref().unwrap_or("?")),
                p.generation.as_deref().unwrap_or("?"),
                r.stat.size,
                r.stat.mode & 0o7777,
                r.stat.uid,
                r.stat.gid
            );
            if let Some(j) = &r.journal {
                let _ = writeln!(
                    s,
                    "  journal: invalid {} published {} consumed {}; {}",
                    j.header.invalid,
                    j.header.published,
                    j.header.consumed,
                    j.pending.as_ref().map_or(
                        "pending frames not decoded".to_string(),
                        |x| format!(
                            "{} pending frame(s), {} bytes (this lease's changes, not the pool's \
                            content)",
                            x.frames, x.bytes
                        )
                    )
                );
            }
            let hb = match &r.handback {
                Handback::NotLocated(w) => format!("not located ({w})"),
                Handback::Absent => "absent".into(),
                Handback::Torn(w) => format!("torn ({w})"),
                Handback::Present(reg) => format!(
                    "{} bytes at {}, {} record(s), digest {}",
                    reg.length,
                    reg.offset,
                    reg.frames,
                    match reg.digest_ok() {
                        Some(true) => "verified".to_string(),
                        Some(false) => "MISMATCH".to_string(),
                        None => format!(
                            "not checked ({})",
                            reg.computed.as_ref().err().map_or("", |s| s.as_str())
                        ),
                    }
                ),
            };
            let _ = writeln!(s, "  handback: {}", t(&hb));
        }
        let live = match &p.liveness {
            Liveness::NotChecked(w) => format!("not checked ({w})"),
            l => liveness_json(l).to_string(),
        };
        let _ = writeln!(s, "  liveness: {}", t(&live));
        if !p.kvcr_would.is_empty() {
            let _ = writeln!(s, "  KVCR would: {}", t(&p.kvcr_would));
        }
        findings_lines(&mut s, &p.findings);
    }
    for (p, st, f) in &run.g3 {
        let _ = writeln!(
            s,
            "g3 {}  {}  {:?}",
            t(&p.to_string_lossy()),
            if f.iter().any(Finding::is_reject) {
                "rejected"
            } else {
                "ok"
            },
            st
        );
        findings_lines(&mut s, f);
    }
    s
}

/// The Prometheus text exposition.
pub fn prometheus(run: &Run) -> String {
    use crate::print::prometheus::escape_label as esc;
    let mut s = String::new();
    s.push_str(
        "# HELP kvcr_pools_exit_status The exit status kvcr pools returned.\n# TYPE \
        kvcr_pools_exit_status gauge\n",
    );
    let _ = writeln!(s, "kvcr_pools_exit_status {}", run.exit_status());
    s.push_str(
        "# HELP kvcr_pool_rejected 1 when the pool file is rejected.\n# TYPE \
        kvcr_pool_rejected gauge\n",
    );
    for p in &run.pools {
        let _ = writeln!(
            s,
            "kvcr_pool_rejected{{path=\"{}\",pool=\"{}\",generation=\"{}\",liveness=\"{}\"}} {}",
            esc(&p.path.to_string_lossy()),
            esc(p.pool_id.as_deref().unwrap_or("")),
            p.generation.as_deref().unwrap_or(""),
            p.liveness.as_str(),
            u8::from(p.rejected())
        );
    }
    s.push_str(
        "# HELP kvcr_pool_bytes The pool file's size in bytes.\n# TYPE kvcr_pool_bytes gauge\n",
    );
    for p in &run.pools {
        if let Some(r) = &p.read {
            let _ = writeln!(
                s,
                "kvcr_pool_bytes{{path=\"{}\"}} {}",
                esc(&p.path.to_string_lossy()),
                r.stat.size
            );
        }
    }
    s.push_str(
        "# HELP kvcr_pool_journal_pending_frames Frames between consumed and \
        published.\n# TYPE kvcr_pool_journal_pending_frames gauge\n",
    );
    for p in &run.pools {
        if let Some(x) = p
            .read
            .as_ref()
            .and_then(|r| r.journal.as_ref())
            .and_then(|j| j.pending.as_ref())
        {
            let _ = writeln!(
                s,
                "kvcr_pool_journal_pending_frames{{path=\"{}\"}} {}",
                esc(&p.path.to_string_lossy()),
                x.frames
            );
        }
    }
    s.push_str(
        "# HELP kvcr_pool_findings Findings per pool file and code.\n# TYPE \
        kvcr_pool_findings gauge\n",
    );
    for p in &run.pools {
        let mut codes: Vec<Code> = p.findings.iter().map(|f| f.code).collect();
        codes.sort();
        codes.dedup();
        for c in codes {
            let n = p.findings.iter().filter(|f| f.code == c).count();
            let _ = writeln!(
                s,
                "kvcr_pool_findings{{path=\"{}\",code=\"{}\"}} {n}",
                esc(&p.path.to_string_lossy()),
                c.id()
            );
        }
    }
    s
}
