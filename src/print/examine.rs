//! The `kvcr.examine/v1` document (one descriptor checked on its own, by
//! `crate::service::examine`) and its table.

use crate::format::descriptor::Descriptor;
use crate::format::exit;
use crate::format::finding::Finding;
use crate::format::text::terminal;
use crate::rules;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;

pub const EXAMINE_SCHEMA: &str = "kvcr.examine/v1";

#[derive(Serialize)]
pub struct Examined {
    pub schema: &'static str,
    pub kvcr_version: &'static str,
    pub path: String,
    /// The R of `rank-<R>.json`, when the file is named so.
    pub name_rank: Option<u64>,
    pub digest: &'static str,
    pub engine_id: Option<crate::format::descriptor::EngineId>,
    pub incarnation: Option<uuid::Uuid>,
    pub epoch: Option<u64>,
    pub rank: Option<u64>,
    pub world_size: Option<u64>,
    pub tp: Option<u64>,
    pub pp: Option<u64>,
    pub gpu_uuid: Option<String>,
    pub hostname: Option<String>,
    pub boot_id: Option<uuid::Uuid>,
    pub owner_pid: Option<i32>,
    pub writer_pid: Option<i32>,
    pub writer_quiesced: Option<bool>,
    pub created_unix_ms: Option<u64>,
    pub bytes_needed: Option<u64>,
    pub bytes_allocated: Option<u128>,
    pub allocations: Option<usize>,
    /// Handle kind → how many allocations use it.
    pub handle_kinds: BTreeMap<&'static str, usize>,
    /// How many allocations carry a content check (docs/format.md §3.6).
    pub content_checked: Option<usize>,
    pub verdict: rules::Verdict,
    /// Written as the report's findings are (`format::wire::Finding`).
    #[serde(serialize_with = "wire_findings")]
    pub findings: Vec<Finding>,
    pub exit_status: i32,
}

fn wire_findings<S: serde::Serializer>(f: &[Finding], s: S) -> Result<S::Ok, S::Error> {
    crate::format::wire::Each(f, crate::format::wire::Finding::of).serialize(s)
}

/// The document of one examined file.
pub fn summary(
    path: String,
    name_rank: Option<u64>,
    d: Option<&Descriptor>,
    digest: &'static str,
    findings: Vec<Finding>,
) -> Examined {
    let mut kinds = BTreeMap::new();
    for h in d.map(|d| d.alloc_summary.handles.as_slice()).unwrap_or(&[]) {
        *kinds.entry(h.kind_name()).or_insert(0) += 1;
    }
    if kinds.is_empty() {
        for a in d.and_then(|d| d.allocations.as_deref()).unwrap_or(&[]) {
            *kinds.entry(a.handle.kind()).or_insert(0) += 1;
        }
    }
    let rejected = d.is_none() || findings.iter().any(Finding::is_reject);
    let status = if rejected { exit::REJECTED } else { exit::OK };
    Examined {
        schema: EXAMINE_SCHEMA,
        kvcr_version: crate::format::version::VERSION,
        path,
        name_rank,
        digest,
        engine_id: d.map(|d| d.engine_id.clone()),
        incarnation: d.map(|d| d.incarnation),
        epoch: d.map(|d| d.epoch),
        rank: d.map(|d| d.rank),
        world_size: d.map(|d| d.world_size),
        tp: d.map(|d| d.tp),
        pp: d.map(|d| d.pp),
        gpu_uuid: d.map(|d| d.gpu_uuid.to_string()),
        hostname: d.map(|d| d.node.hostname.clone()),
        boot_id: d.map(|d| d.node.boot_id),
        owner_pid: d.map(|d| d.owner.pid),
        writer_pid: d.map(|d| d.writer.pid),
        writer_quiesced: d.map(|d| d.writer.quiesced),
        created_unix_ms: d.map(|d| d.created_unix_ms),
        bytes_needed: d.and_then(|d| d.geometry.bytes_needed()),
        bytes_allocated: d.map(|d| d.allocated_bytes()),
        allocations: d.map(|d| d.alloc_summary.count),
        content_checked: d.map(|d| d.alloc_summary.with_content),
        handle_kinds: kinds,
        verdict: if rejected {
            rules::Verdict::Reject
        } else {
            rules::Verdict::Accept
        },
        findings,
        exit_status: status,
    }
}

fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or("-".to_string(), |x| x.to_string())
}

/// The table `kvcr examine` prints.
pub fn write_table(out: &mut dyn Write, e: &Examined) -> std::io::Result<()> {
    let kinds: Vec<String> = e
        .handle_kinds
        .iter()
        .map(|(k, n)| format!("{k} ×{n}"))
        .collect();
    let sizes = match (e.bytes_needed, e.bytes_allocated) {
        (Some(n), Some(a)) if a >= u128::from(n) => format!("{a} allocated ≥ {n} needed"),
        (Some(n), Some(a)) => format!("{a} allocated < {n} needed"),
        _ => "-".to_string(),
    };
    let rows: Vec<(&str, String)> = vec![
        ("file", terminal(&e.path).into_owned()),
        (
            "verdict",
            match e.verdict {
                rules::Verdict::Accept => "passes its own checks".to_string(),
                rules::Verdict::Reject => "REJECTED".to_string(),
            },
        ),
        ("digest", e.digest.to_string()),
        ("engine_id", terminal(&opt(&e.engine_id)).into_owned()),
        ("incarnation", opt(&e.incarnation)),
        ("epoch", opt(&e.epoch)),
        (
            "rank",
            format!("{} (file name: {})", opt(&e.rank), opt(&e.name_rank)),
        ),
        (
            "world",
            format!(
                "world_size {}  tp {}  pp {}",
                opt(&e.world_size),
                opt(&e.tp),
                opt(&e.pp)
            ),
        ),
        ("gpu", opt(&e.gpu_uuid)),
        (
            "node",
            format!("{}  boot {}", terminal(&opt(&e.hostname)), opt(&e.boot_id)),
        ),
        ("owner pid", opt(&e.owner_pid)),
        (
            "writer pid",
            format!(
                "{}  quiesced {}",
                opt(&e.writer_pid),
                opt(&e.writer_quiesced)
            ),
        ),
        (
            "created",
            e.created_unix_ms
                .map_or("-".into(), crate::format::timefmt::utc),
        ),
        ("bytes", sizes),
        (
            "allocations",
            format!("{}  {}", opt(&e.allocations), kinds.join(", ")),
        ),
        (
            "content",
            match (e.content_checked, e.allocations) {
                (Some(c), Some(n)) => format!("{c} of {n} allocations carry a content check"),
                _ => "-".into(),
            },
        ),
    ];
    for (k, v) in rows {
        writeln!(out, "{k:<12} {}", v.trim_end())?;
    }
    for f in &e.findings {
        let kind = if f.is_reject() { "reject" } else { "notice" };
        writeln!(
            out,
            "{kind}: {} {}",
            f.code,
            terminal(&crate::format::message::render(&f.message))
        )?;
    }
    writeln!(out, "exit {}", e.exit_status)
}
