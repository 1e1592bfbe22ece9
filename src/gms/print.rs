//! The GMS reader's printers (docs/format.md §14.8): the table, and the
//! `kvcr.gms-report/v1` document (`schemas/gms-report.schema.json`). Each
//! artifact gets the audit's headline: a verdict, the cause and the action
//! the core words (`crate::gms::rules::headline`, `run_cause`).

use crate::gms::rules::{
    headline, plural, run_cause, Artifact, CohortDirFacts, Facts, Holder, LeaseFacts, Lock,
    RecoveryFacts, Retired, Run, SupersededRead,
};

use crate::format::finding::{Finding, Severity};
use crate::format::hex::encode as hex_lower;
use crate::format::message::render;
use crate::format::names::display_path;
use crate::format::text::terminal;
use serde_json::{json, Value};
use std::fmt::Write as _;

pub use crate::format::ids::GMS_REPORT as GMS_REPORT_SCHEMA;

fn finding_json(f: &Finding) -> Value {
    let mut v = json!({
        "code": f.code.as_str(),
        "name": f.code.name(),
        "severity": match f.severity {
            Severity::Reject => "reject",
            Severity::Notice => "notice",
        },
        "message": render(&f.message),
    });
    let o = v.as_object_mut().expect("an object");
    if let Some(p) = &f.path {
        o.insert("path".into(), json!(p));
    }
    if let Some(e) = &f.expected {
        o.insert("expected".into(), json!(e));
    }
    if let Some(x) = &f.found {
        o.insert("found".into(), json!(x));
    }
    v
}

fn hex64(v: u64) -> String {
    format!("{v:#018x}")
}

fn lease_json(l: &LeaseFacts) -> Value {
    let h = l.header;
    let records = l.scan.as_ref().map(|s| {
        json!({
            "free": s.states[0],
            "leased": s.states[1],
            "sealed": s.states[2],
            "reserved": s.states[3],
            "transition": s.states[4],
            "invalid": s.invalid_state.count,
        })
    });
    let owners = l.live.then(|| {
        Value::Array(
            l.owners
                .iter()
                .map(|(hash, n, id)| {
                    json!({
                        "owner_hash": hex64(*hash),
                        "blocks": n,
                        "live": id.as_ref().map(|i| json!({
                            "engine": i.engine, "pid": i.pid, "device": i.device,
                        })),
                    })
                })
                .collect(),
        )
    });
    json!({
        "namespace": l.namespace,
        "size_bytes": l.size,
        "expected_size_bytes": l.expected_size,
        "magic": h.map(|h| format!("{:#010x}", h.magic)),
        "version": h.map(|h| h.version),
        "record_size": h.map(|h| h.record_size),
        "total_blocks": h.map(|h| h.total_blocks),
        "free_count": h.map(|h| h.free_count),
        "active_mutations": h.map(|h| h.active_mutations),
        "barrier_held": l.barrier,
        "recovery_owner_pid": h.map(|h| h.recovery_owner_pid),
        "reservation_epoch": h.map(|h| h.reservation_epoch),
        "reserved_blocks": h.map(|h| h.reserved_blocks),
        "reserved_owner_hash": h.map(|h| hex64(h.reserved_owner_hash)),
        "records": records,
        "owners": owners,
        "owners_not_checked": l.owners_not_checked,
        "owners_untracked": l.scan.as_ref().map(|s| s.owners_untracked),
    })
}

fn recovery_json(r: &RecoveryFacts, reason: &str) -> Value {
    let h = r.header;
    json!({
        "outcome": r.outcome.as_str(),
        "reason": reason,
        "size_bytes": r.size,
        "num_blocks": r.num_blocks,
        "num_blocks_from": r.num_blocks_from,
        "epoch": h.map(|h| h.epoch),
        "commit": h.map(|h| h.commit),
        "owner": h.map(|h| hex_lower(&h.owner)),
        "binding": h.map(|h| hex_lower(&h.binding)),
        "binding_checked": r.binding_checked,
        "records": r.scan.as_ref().map(|s| json!({
            "valid": s.valid,
            "empty": s.empty,
            "invalid": s.bad_valid.count + s.bad_crc.count + s.bad_lengths.count,
        })),
    })
}

fn lock_json(l: &Lock) -> Value {
    let holder = |h: &Holder| {
        json!({
            "pid": h.pid,
            "exclusive": h.exclusive,
            "running": h.running,
            "exiting": h.exiting,
        })
    };
    match l {
        Lock::Free => json!({"state": "free", "holders": []}),
        Lock::Held { holders } => {
            json!({"state": "held", "holders": holders.iter().map(holder).collect::<Vec<_>>()})
        }
        Lock::NotChecked(why) => json!({"state": "not-checked", "holders": [], "why": why}),
    }
}

fn cohort_json(c: &CohortDirFacts) -> Value {
    json!({
        "flavour": c.flavour.as_str(),
        "active": c.active,
        "predecessor": c.predecessor,
        "cohorts": c.cohorts.iter().map(|k| json!({
            "id": k.id,
            "role": k.role.as_str(),
            "state": k.state.as_str(),
            "lock": lock_json(&k.lock),
            "leader": k.leader.as_ref().map(lock_json),
        })).collect::<Vec<_>>(),
        "staging": c.staging,
        "joining": c.joining.iter().map(|(n, id)| json!({"name": n, "cohort": id}))
            .collect::<Vec<_>>(),
    })
}

fn superseded_json(s: &SupersededRead) -> Value {
    json!({
        "format": s.format.name(),
        "what": s.format.what(),
        "size_bytes": s.size,
        "expected_size_bytes": s.expected_size,
        "records_fill_file": s.format.snapshot_record().map(|_| s.exact),
        "beside": s.beside,
    })
}

fn artifact_json(a: &Artifact) -> Value {
    let (cause, action) = headline(a);
    let mut v = json!({
        "path": display_path(&a.path),
        "kind": a.kind.as_str(),
        "verdict": if a.rejected() { "reject" } else { "ok" },
        "cause": cause,
        "action": action,
        "cause_code": a.cause().map(|f| f.code.as_str()),
        "findings": a.findings.iter().map(finding_json).collect::<Vec<_>>(),
    });
    let (key, facts) = match &a.facts {
        Facts::Lease(l) => ("lease", lease_json(l)),
        Facts::Recovery(r) => {
            let reason = a
                .cause()
                .map_or("every check passed".to_string(), |f| render(&f.message));
            ("recovery", recovery_json(r, &reason))
        }
        Facts::Cohort(c) => ("cohort", cohort_json(c)),
        Facts::Superseded(s) => ("superseded", superseded_json(s)),
    };
    v.as_object_mut()
        .expect("an object")
        .insert(key.into(), facts);
    v
}

/// The `kvcr.gms-report/v1` document.
pub fn document(run: &Run, now_ms: u64, host: &str) -> Value {
    let o = &run.options;
    let notices: usize = run
        .artifacts
        .iter()
        .map(|a| a.findings.iter().filter(|f| !f.is_reject()).count())
        .sum();
    let rejected = run.artifacts.iter().filter(|a| a.rejected()).count();
    json!({
        "schema": GMS_REPORT_SCHEMA,
        "kvcr_version": crate::format::version::VERSION,
        "generated_unix_ms": now_ms,
        "host": host,
        "live": o.live,
        "options": {
            "paths": o.paths.iter().map(|p| display_path(p)).collect::<Vec<_>>(),
            "num_blocks": o.ask.num_blocks,
            "binding": o.ask.binding.map(|b| hex_lower(&b)),
            "interval_ms": o.interval_ms,
        },
        "looked": run.looked.iter().map(|l| json!({
            "path": display_path(&l.path),
            "what": l.what,
            "present": l.present,
            "found": l.found,
        })).collect::<Vec<_>>(),
        "exit_status": run.exit_status(),
        "cause": run_cause(run),
        "artifacts": run.artifacts.iter().map(artifact_json).collect::<Vec<_>>(),
        "summary": {
            "artifacts": run.artifacts.len(),
            "ok": run.artifacts.len() - rejected,
            "rejected": rejected,
            "notices": notices,
        },
    })
}

/// The table.
pub fn table(run: &Run) -> String {
    let mut s = String::new();
    let t = |x: &str| terminal(x).into_owned();
    if !run.looked.is_empty() {
        let _ = writeln!(s, "gms  looked where GMS puts its artifacts:");
        for l in &run.looked {
            let _ = writeln!(
                s,
                "  {}  {}{}",
                t(&display_path(&l.path)),
                l.what,
                if !l.present {
                    ": absent".to_string()
                } else {
                    format!(": {}", plural(l.found, "artifact"))
                }
            );
        }
    }
    if run.artifacts.is_empty() {
        let _ = writeln!(s, "{}", t(&run_cause(run)));
    }
    for a in &run.artifacts {
        let (cause, action) = headline(a);
        let _ = writeln!(
            s,
            "\n{} {}  {}",
            a.kind.as_str(),
            t(&display_path(&a.path)),
            if a.rejected() { "REJECTED" } else { "OK" }
        );
        let _ = writeln!(s, "  cause:  {}", t(&cause));
        let _ = writeln!(s, "  action: {}", t(&action));
        for line in facts_lines(a) {
            let _ = writeln!(s, "  {}", t(&line));
        }
        if !a.findings.is_empty() {
            let _ = writeln!(s, "  code   severity  finding");
            for f in &a.findings {
                let sev = match f.severity {
                    Severity::Reject => "reject",
                    Severity::Notice => "notice",
                };
                let at = f.path.as_ref().map_or(String::new(), |p| format!("{p}: "));
                let mut line = format!("{at}{}", render(&f.message));
                if let (Some(e), Some(x)) = (&f.expected, &f.found) {
                    let _ = write!(line, " (expected {e}, found {x})");
                }
                let _ = writeln!(s, "  {}  {sev:<8}  {}", f.code, t(&line));
            }
        }
    }
    let rejected = run.artifacts.iter().filter(|a| a.rejected()).count();
    let notices: usize = run
        .artifacts
        .iter()
        .map(|a| a.findings.iter().filter(|f| !f.is_reject()).count())
        .sum();
    let _ = writeln!(
        s,
        "\n{}: {} ok, {} rejected · {} · {} · exit {}",
        plural(run.artifacts.len(), "artifact"),
        run.artifacts.len() - rejected,
        rejected,
        plural(notices, "notice"),
        if run.options.live { "live" } else { "offline" },
        run.exit_status()
    );
    s
}

fn facts_lines(a: &Artifact) -> Vec<String> {
    match &a.facts {
        Facts::Lease(l) => {
            let Some(h) = l.header else {
                return vec![format!("{} bytes, no header", l.size)];
            };
            let mut out = Vec::new();
            if let Some(ns) = &l.namespace {
                out.push(format!("namespace {ns} (a default one)"));
            }
            out.push(format!(
                "GMSL v{} · record {} bytes · {} blocks · {} bytes{}",
                h.version,
                h.record_size,
                h.total_blocks,
                l.size,
                l.expected_size
                    .filter(|&e| e != l.size)
                    .map_or(String::new(), |e| format!(" (expected {e})"))
            ));
            if let Some(sc) = &l.scan {
                out.push(format!(
                    "blocks: free {} · leased {} · sealed {} · reserved {} · transition {}{}",
                    sc.states[0],
                    sc.states[1],
                    sc.states[2],
                    sc.states[3],
                    sc.states[4],
                    if sc.invalid_state.count > 0 {
                        format!(" · invalid {}", sc.invalid_state.count)
                    } else {
                        String::new()
                    }
                ));
                let barrier = h.active_mutations == crate::gms::format::LEASE_BARRIER;
                out.push(format!(
                    "free_count {} · mutations in flight {} · barrier {}",
                    h.free_count,
                    if barrier { 0 } else { h.active_mutations },
                    if barrier {
                        format!("held (recovery_owner_pid {})", h.recovery_owner_pid)
                    } else {
                        "not held".to_string()
                    }
                ));
                if let Some(why) = l.owners_not_checked.as_deref().filter(|_| l.live) {
                    out.push(format!("{} owner(s) · not checked: {why}", sc.owners.len()));
                } else if l.live {
                    for (hash, n, id) in l.owners.iter().take(8) {
                        out.push(format!(
                            "owner {} · {n} block(s) · {}",
                            hex64(*hash),
                            id.as_ref()
                                .map_or("no live process".to_string(), |i| format!(
                                    "{}-{}-{}",
                                    i.engine, i.pid, i.device
                                ))
                        ));
                    }
                } else if !sc.owners.is_empty() {
                    out.push(format!(
                        "{} owner(s) · not checked (add --live)",
                        sc.owners.len()
                    ));
                }
            }
            out
        }
        Facts::Recovery(r) => {
            let mut out = vec![format!(
                "{} · {} bytes · {} blocks (from {})",
                r.outcome.as_str(),
                r.size,
                r.num_blocks
                    .map_or("no block count fits".to_string(), |n| n.to_string()),
                r.num_blocks_from
            )];
            if let Some(h) = r.header {
                out.push(format!(
                    "epoch {} · commit {} · owner {} · binding {}{}",
                    h.epoch,
                    h.commit,
                    hex_lower(&h.owner),
                    hex_lower(&h.binding),
                    if r.binding_checked {
                        ""
                    } else {
                        " (not checked)"
                    }
                ));
            }
            if let Some(s) = &r.scan {
                out.push(format!(
                    "records: {} valid · {} empty · {} invalid",
                    s.valid,
                    s.empty,
                    s.bad_valid.count + s.bad_crc.count + s.bad_lengths.count
                ));
            }
            out
        }
        Facts::Cohort(c) => {
            let mut out = vec![format!(
                "{} cohorts · active {} · predecessor {}",
                c.flavour.as_str(),
                c.active.as_deref().unwrap_or("none"),
                c.predecessor.as_deref().unwrap_or("none")
            )];
            for k in &c.cohorts {
                let leader = match &k.leader {
                    None => String::new(),
                    Some(l) => format!(" · leader {}", lock_text(l)),
                };
                out.push(format!(
                    "{}  {:<11} {:<7} lock {}{leader}",
                    k.id,
                    k.role.as_str(),
                    state_text(k.state),
                    lock_text(&k.lock)
                ));
            }
            out
        }
        Facts::Superseded(s) => vec![format!(
            "{} {} · {} bytes{}{}",
            s.format.name(),
            s.format.what(),
            s.size,
            s.expected_size
                .map_or(String::new(), |e| format!(" (header says {e})")),
            if s.beside.is_empty() {
                String::new()
            } else {
                format!(" · beside it: {}", s.beside.join(", "))
            }
        )],
    }
}

fn state_text(s: Retired) -> &'static str {
    s.as_str()
}

fn lock_text(l: &Lock) -> String {
    match l {
        Lock::Free => "free".to_string(),
        Lock::Held { holders } if holders.is_empty() => "held (no holder named)".to_string(),
        Lock::Held { holders } => format!(
            "held by {}",
            holders
                .iter()
                .map(|h| format!(
                    "pid {}{}",
                    h.pid,
                    if !h.running {
                        " (gone)"
                    } else if h.exiting {
                        " (exiting)"
                    } else {
                        ""
                    }
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Lock::NotChecked(why) => format!("not checked ({why})"),
    }
}
