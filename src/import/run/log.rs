//! The import log (docs/import.md "The import log"): every import and hold
//! (never a dry run) appends one JSON line to `$KVCR_IMPORT_LOG` (default
//! `/var/log/kvcr/import.jsonl`) and, when the journal is reachable, sends
//! the same record there. A log that cannot be written is a warning on
//! stderr: it never refuses, fails or holds up an import, and never keeps
//! memory held.

use crate::import::report::{ImportReport, Mode};
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;

pub use crate::format::ids::IMPORT_LOG as SCHEMA;
pub use crate::import::spec::{Target, ENV};

/// What the record says happened: the end of an import or hold, or a hold
/// that reached its ready point (written then, so that a hold later killed
/// with SIGKILL still left a trace).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    Holding,
    Ended,
}

/// The JSON record for `r` (one line, no newline inside).
pub fn record(r: &ImportReport, event: Event, now_ms: u64) -> Value {
    let ranks: Vec<Value> = r
        .ranks
        .iter()
        .map(|x| {
            json!({"rank": x.rank, "gpu_uuid": x.gpu_uuid, "allocations": x.allocations,
                   "bytes": x.bytes, "path": x.path})
        })
        .collect();
    let remaining: Vec<Value> = r
        .remaining
        .iter()
        .map(|x| {
            json!({
                "rank": x.rank,
                "allocation": x.allocation,
                "resource": x.resource.to_string(),
            })
        })
        .collect();
    let (result, status) = match event {
        Event::Holding => (json!("holding"), Value::Null),
        Event::Ended => (json!(r.result), json!(r.status())),
    };
    json!({
        "schema": SCHEMA,
        "time": crate::format::timefmt::rfc3339(now_ms),
        "unix_ms": now_ms,
        "host": r.meta.host,
        "boot_id": r.meta.boot_id,
        "pid": std::process::id(),
        "uid": rustix::process::getuid().as_raw(),
        "kvcr_version": r.meta.kvcr_version,
        "root": r.root,
        "engine_id": r.engine_id,
        "incarnation": r.incarnation,
        "epoch": r.epoch,
        "mode": r.mode,
        "backend": r.backend,
        "plan": {
            "ranks": r.ranks.len(),
            "allocations": r.ranks.iter().map(|x| x.allocations).sum::<usize>(),
            "bytes": r.ranks.iter().map(|x| x.bytes).sum::<u128>(),
            "by_rank": ranks,
        },
        "result": result,
        "exit_status": status,
        "failure": r.failure.as_ref().map(|f| json!({
            "rank": f.rank, "allocation": f.allocation, "step": f.step, "message": f.error.message,
        })),
        "released": r.released,
        "remaining": remaining,
    })
}

/// Where the records of one run go, resolved once before anything is
/// imported: the log file's directory held open
/// (`crate::io::output::OutputFile`; created `0700` where missing), so the
/// hold's release record, written long after, goes to the very directory
/// that was checked, never to whatever the path names by then; or why the
/// file cannot be written (a warning at each record, never a refusal). And
/// the journal's socket.
pub struct Log {
    file: Result<crate::io::output::OutputFile, String>,
    shown: String,
    journal: std::path::PathBuf,
}

impl Log {
    /// Resolves `t` against the inventory `root` (as given; `None`: the
    /// default root). A log inside the inventory is refused (exit 2, before
    /// anything is imported); one that cannot be opened or created is kept as
    /// a warning.
    pub fn open(t: &Target, root: Option<&Path>) -> Result<Log, crate::format::failure::Failure> {
        use crate::io::output::{OutputFile, Unusable};
        let shown = crate::format::names::display_path(&t.file);
        let file = match OutputFile::resolve(root, &t.file, ENV, true) {
            Ok(f) => Ok(f),
            Err(Unusable::Inside(f)) => return Err(f),
            Err(Unusable::Other(why)) => Err(format!("{shown}: {why}")),
        };
        Ok(Log {
            file,
            shown,
            journal: t.journal.clone(),
        })
    }
}

/// Sends the record to the journal's native socket as one datagram:
/// `MESSAGE`, `PRIORITY`, `SYSLOG_IDENTIFIER` and the record itself in
/// `KVCR_RECORD` (plain `KEY=value` lines: no value holds a newline). `Ok(false)`
/// when no journal listens there.
pub fn journal(socket: &Path, message: &str, record: &str) -> Result<bool, String> {
    if !socket.exists() {
        return Ok(false);
    }
    let one_line = |s: &str| s.replace('\n', " ");
    let mut d = String::new();
    d.push_str(&format!("MESSAGE={}\n", one_line(message)));
    d.push_str("PRIORITY=6\nSYSLOG_IDENTIFIER=kvcr\n");
    d.push_str(&format!("KVCR_RECORD={}\n", one_line(record)));
    let sock = std::os::unix::net::UnixDatagram::unbound()
        .map_err(|e| format!("cannot open a socket for the journal: {e}"))?;
    let sent = sock.send_to(d.as_bytes(), socket);
    match sent {
        // Over the socket's datagram limit (thousands of ranks): the record
        // without its per-rank list, marked as such; the file has it whole.
        Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => {
            let mut short: Value = serde_json::from_str(record).map_err(|e| e.to_string())?;
            short["plan"]["by_rank"] = Value::Null;
            let mut d = String::new();
            d.push_str(&format!("MESSAGE={}\n", one_line(message)));
            d.push_str("PRIORITY=6\nSYSLOG_IDENTIFIER=kvcr\nKVCR_RECORD_TRUNCATED=1\n");
            d.push_str(&format!("KVCR_RECORD={short}\n"));
            sock.send_to(d.as_bytes(), socket)
        }
        other => other,
    }
    .map_err(|e| format!("cannot send to the journal at {}: {e}", socket.display()))?;
    Ok(true)
}

/// Writes the record of `r` to the file and the journal; says on stderr
/// where (unless `quiet`), and warns on stderr when it cannot. Never fails.
pub fn write(log: &Log, r: &ImportReport, event: Event, quiet: bool) {
    if r.mode == Mode::DryRun {
        return;
    }
    let rec = record(r, event, crate::io::node::now_unix_ms());
    let line = rec.to_string();
    let shown = &log.shown;
    let file = match &log.file {
        Ok(f) => f.append(line.as_bytes()),
        Err(why) => Err(why.clone()),
    };
    let message = format!(
        "kvcr import: {} {} of {} (epoch {}): {}",
        match r.mode {
            Mode::Hold => "hold",
            _ => "trial",
        },
        if event == Event::Holding {
            "holding"
        } else {
            "ended"
        },
        r.engine_id.as_deref().unwrap_or("no group"),
        r.epoch.map_or("?".to_string(), |e| e.to_string()),
        rec["result"].as_str().unwrap_or("?"),
    );
    let journal = journal(&log.journal, &message, &line);
    let mut err = crate::io::output::stderr();
    match &file {
        Ok(()) if !quiet => {
            let also = if matches!(journal, Ok(true)) {
                " and the journal"
            } else {
                ""
            };
            let _ = writeln!(err, "kvcr: import recorded in {shown}{also}");
        }
        Ok(()) => {}
        Err(e) => {
            let _ = writeln!(
                err,
                "kvcr: warning: the import log was not written: {}",
                crate::format::text::terminal(e)
            );
        }
    }
    if let Err(e) = journal {
        let _ = writeln!(
            err,
            "kvcr: warning: the import record was not sent to the journal: {}",
            crate::format::text::terminal(&e)
        );
    }
}
