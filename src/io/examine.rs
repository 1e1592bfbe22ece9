//! `kvcr examine FILE`: one descriptor decoded and checked on its own, like
//! `mdadm --examine` for one member: its fields, the digest, the bytes the
//! geometry needs against the bytes allocated, the handle kinds, and every
//! finding the descriptor earns by itself (KV006/7/8 parsing, KV101 own
//! rank, KV104 own sizes, KV111 a handle repeated within it). Checks that
//! need the rest of the group or the node (KV102, KV103, KV106, KV110,
//! live mode) are the audit's.
//!
//! Exit 0 when the file passes its own checks, 1 when it does not, 2 when
//! it cannot be read as a regular file.

use crate::format::descriptor::{parse_descriptor, Descriptor, MAX_FILE_BYTES};
use crate::format::exit;
use crate::format::failure::Failure;
use crate::format::finding::{Code, Finding};
use crate::format::text::terminal;
use crate::report::{emit, Format};
use crate::rules::{self, Candidate, Context, Expectations};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;

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
    /// Written as the report's findings are (`report::wire::Finding`).
    #[serde(serialize_with = "wire_findings")]
    pub findings: Vec<Finding>,
    pub exit_status: i32,
}

fn wire_findings<S: serde::Serializer>(f: &[Finding], s: S) -> Result<S::Ok, S::Error> {
    crate::format::wire::Each(f, crate::format::wire::Finding::of).serialize(s)
}

fn read(path: &Path) -> Result<(Vec<u8>, u64, u32), Failure> {
    let shown = crate::io::inventory::display_path(path);
    // Classified through O_PATH, then exactly that inode is reopened: no
    // FIFO blocks, no device is opened, no symlink is followed.
    let (f, st) = crate::io::safe_file::open_no_follow(path).map_err(|e| match e {
        crate::io::safe_file::NotOpened::Io(e) => Failure::usage(
            format!("cannot open {shown}: {e}"),
            Some("examine reads one regular descriptor file (symlinks are not followed)".into()),
        ),
        crate::io::safe_file::NotOpened::NotRegular(what) => Failure::usage(
            format!("{shown} is not a regular file ({what})"),
            Some("examine reads one regular descriptor file (symlinks are not followed)".into()),
        ),
    })?;
    let mut bytes = Vec::new();
    f.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Failure::usage(format!("cannot read {shown}: {e}"), None))?;
    // st_nlink is narrower than u64 on some architectures.
    #[allow(clippy::unnecessary_cast)]
    let nlink = st.st_nlink as u64;
    Ok((bytes, nlink, st.st_mode))
}

/// Decodes and checks `path`.
pub fn examine(path: &Path, now_ms: u64) -> Result<Examined, Failure> {
    let (bytes, nlink, mode) = read(path)?;
    let shown = crate::io::inventory::display_path(path);
    let name = path.file_name().unwrap_or_default();
    let name_rank = crate::io::inventory::parse_rank_name(name).flatten();
    if bytes.len() as u64 > MAX_FILE_BYTES {
        let f = Finding::reject(Code::KV004, "larger than 1 MiB; not read").at(shown.clone());
        return Ok(summary(shown, name_rank, None, "not checked", vec![f]));
    }
    let parsed = parse_descriptor(&bytes);
    let digest = if parsed.findings.iter().any(|f| f.code == Code::KV008) {
        "mismatch"
    } else if parsed.descriptor.is_some() {
        "ok"
    } else {
        "not checked"
    };
    // The verdict core's own-rank rules, on a group of one: only what this
    // file earns by itself counts (KV103 for the other ranks does not).
    let cand = Candidate {
        path: shown.clone(),
        raw_path: shown.as_bytes().to_vec(),
        name_rank: name_rank.or(parsed.descriptor.as_ref().map(|d| d.rank)),
        mode: Some(mode),
        ident: parsed.ident.clone(),
        descriptor: parsed.descriptor.clone(),
        findings: parsed
            .findings
            .iter()
            .cloned()
            .map(|f| f.at(shown.clone()))
            .chain(crate::io::inventory::reader::hard_links(nlink, &shown))
            .collect(),
    };
    let expect = Expectations::default();
    let ctx = Context {
        now_unix_ms: now_ms,
        node: None,
        expect: &expect,
    };
    let mut findings: Vec<Finding> = Vec::new();
    let j = rules::judge(vec![cand.clone()], Vec::new(), &ctx);
    for g in &j.groups {
        for r in &g.ranks {
            findings.extend(r.findings.iter().cloned());
        }
    }
    for f in &j.files {
        findings.extend(f.findings.iter().cloned());
    }
    if j.groups.is_empty() && j.files.is_empty() {
        findings = cand.findings;
    }
    Ok(summary(
        shown,
        name_rank,
        parsed.descriptor.as_ref(),
        digest,
        findings,
    ))
}

fn summary(
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

fn write_table(out: &mut dyn Write, e: &Examined) -> std::io::Result<()> {
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

/// `kvcr examine FILE`.
pub fn run(file: &Path, format: Format) -> Result<i32, Failure> {
    if format == Format::Prometheus {
        return Err(Failure::usage(
            "kvcr examine writes a table or JSON; --format prometheus is for kvcr audit",
            None,
        ));
    }
    let e = examine(file, crate::io::node::now_unix_ms())?;
    let status = e.exit_status;
    emit(|out| match format {
        Format::Json => crate::format::json::write(out, &e),
        Format::Table | Format::Prometheus => write_table(out, &e),
    })?;
    Ok(status)
}
