//! Typed extraction of a descriptor (docs/format.md §3) from strict JSON.
//!
//! Every schema problem becomes a KV007 finding that names the field path
//! (`geometry.num_layers`, `allocations[3].handle.hex`), the expected and the
//! found value; all problems are reported (up to [`MAX_FINDINGS`] per file),
//! not just the first. The field rules live in shared helpers
//! ([`Checker`], [`model`], [`geometry`], ...) that the deployment profile
//! ([`crate::profile`]) uses too, so both files speak the same language.

use super::canon::{self, format_digest};
use super::json::{self, preview, quote_preview, NumKind, Value};
use super::{
    parse_canonical_uuid, AllocSummary, Allocation, Descriptor, Dtype, Geometry, GpuUuid, Handle,
    Model, NodeId, Owner, Writer, MAX_ALLOCATIONS, MAX_WORLD_SIZE, SCHEMA,
};
use crate::finding::{Code, Finding};
use std::borrow::Cow;
use std::fmt::{self, Write as _};
use uuid::Uuid;

/// Identity fields recovered best-effort, each only if it is individually
/// valid, so a broken descriptor can still be attributed to its group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ident {
    pub engine_id: Option<String>,
    pub incarnation: Option<Uuid>,
    pub epoch: Option<u64>,
    pub rank: Option<u64>,
}

#[derive(Clone, Debug, Default)]
pub struct ParseOutcome {
    /// Present when the file is well-formed JSON and schema-valid (a KV008
    /// digest mismatch may still be among `findings`).
    pub descriptor: Option<Descriptor>,
    pub ident: Ident,
    /// KV006 / KV007 / KV008 findings, without a path (the caller adds it).
    pub findings: Vec<Finding>,
}

/// At most this many findings are reported for one file; when schema
/// problems exceed it, the last slot says how many were left out.
pub const MAX_FINDINGS: usize = 20;

/// Largest value of the "< 2^63" integers (epoch, num_blocks, timestamps).
pub(crate) const I63_MAX: u64 = i64::MAX as u64;
/// 2^32: upper bound of the per-rank geometry dimensions.
pub(crate) const DIM_MAX: u64 = 1 << 32;
pub(crate) const PID_MAX: u64 = i32::MAX as u64;

/// The members of a descriptor (docs/format.md §3), in the spec's order.
pub(crate) const DESCRIPTOR_FIELDS: [&str; 17] = [
    "schema",
    "engine_id",
    "incarnation",
    "epoch",
    "rank",
    "world_size",
    "tp",
    "pp",
    "node",
    "gpu_uuid",
    "model",
    "geometry",
    "owner",
    "writer",
    "allocations",
    "created_unix_ms",
    "digest",
];
const NODE_FIELDS: &[&str] = &["hostname", "boot_id"];
const MODEL_FIELDS: &[&str] = &["name", "revision", "quantization"];
const GEOMETRY_FIELDS: &[&str] = &[
    "num_layers",
    "kv_heads_per_rank",
    "head_size",
    "block_size",
    "num_blocks",
    "dtype",
    "use_mla",
];
const OWNER_FIELDS: &[&str] = &["pid", "start_ticks"];
const WRITER_FIELDS: &[&str] = &["pid", "start_ticks", "quiesced"];
const ALLOCATION_FIELDS: &[&str] = &["id", "size_bytes", "offset_bytes", "handle"];
pub(super) const HANDLE_KINDS: &[&str] = &["cuda_ipc", "fabric", "posix_fd"];
const DTYPE_NAMES: &[&str] = &[
    "float16",
    "bfloat16",
    "float32",
    "float8_e4m3",
    "float8_e5m2",
    "int8",
];

/// Parses one descriptor file's bytes: strict JSON (KV006), the docs/format.md §3 schema
/// (KV007) and the docs/format.md §3.2 digest (KV008).
pub fn parse_descriptor(bytes: &[u8]) -> ParseOutcome {
    parse_descriptor_with(bytes, true)
}

/// [`parse_descriptor`], keeping `Descriptor::allocations` only when
/// `keep_allocations`. Every allocation is checked either way, and the
/// findings and [`AllocSummary`] are the same; without them a descriptor
/// takes a few hundred bytes instead of a few kilobytes (the audit of a
/// large inventory keeps one per file).
pub fn parse_descriptor_with(bytes: &[u8], keep_allocations: bool) -> ParseOutcome {
    if let Some(out) = super::fast::parse(bytes, keep_allocations) {
        // The fast path must agree with the general one wherever it answers;
        // every debug build (tests, fuzzing) checks that it does.
        #[cfg(debug_assertions)]
        {
            let general = parse_general(bytes, keep_allocations);
            assert_eq!(
                format!("{out:?}"),
                format!("{general:?}"),
                "fast path differs from the general parser"
            );
        }
        return out;
    }
    parse_general(bytes, keep_allocations)
}

/// The general parser: every input, every finding. [`parse_descriptor_with`]
/// uses it for whatever its fast path does not answer (public for the
/// benchmark and the tests that compare the two).
#[doc(hidden)]
pub fn parse_general(bytes: &[u8], keep_allocations: bool) -> ParseOutcome {
    let mut out = ParseOutcome::default();
    let value = match json::parse(bytes) {
        Ok(v) => v,
        Err(e) => {
            out.findings
                .push(Finding::reject(Code::KV006, format!("malformed: {e}")));
            return out;
        }
    };
    let mut c = Checker::new();
    let (descriptor, check_digest) =
        extract_descriptor(&mut c, &value, &mut out.ident, keep_allocations);

    let mut digest_finding = None;
    if check_digest {
        let file_digest = value
            .get("digest")
            .and_then(Value::as_str)
            .and_then(|s| parse_digest(s).map(|d| (s, d)));
        if let Some((text, claimed)) = file_digest {
            let actual = canon::digest_without(&value, "digest");
            digest_finding = digest_mismatch(&actual, &claimed, text);
        }
    }

    let slots = MAX_FINDINGS - usize::from(digest_finding.is_some());
    let total = c.total;
    let mut shown = c.errors;
    if total > slots {
        shown.truncate(slots - 1);
    }
    out.findings.extend(
        shown
            .iter()
            .map(|e| Finding::reject(Code::KV007, e.message()).values(&e.expected, &e.found)),
    );
    if total > slots {
        let more = total - (slots - 1);
        out.findings.push(Finding::reject(
            Code::KV007,
            format!("{more} more schema problems not shown"),
        ));
    }
    out.findings.extend(digest_finding);
    out.descriptor = descriptor;
    out
}

/// KV008 when the computed digest differs from the one the file claims
/// (`text` as written in the file).
pub(super) fn digest_mismatch(
    actual: &[u8; 32],
    claimed: &[u8; 32],
    text: &str,
) -> Option<Finding> {
    (actual != claimed).then(|| {
        Finding::reject(
            Code::KV008,
            "digest does not match the content (torn or edited file)",
        )
        .values(format_digest(actual), text)
    })
}

/// SHA-256 of the canonical form of `bytes` (JSON) without its top-level
/// `digest` member: the value a descriptor's `digest` must carry.
pub fn compute_digest(bytes: &[u8]) -> Result<[u8; 32], String> {
    let v = json::parse(bytes).map_err(|e| e.to_string())?;
    Ok(canon::digest_without(&v, "digest"))
}

/// `sha256:` + 64 lowercase hex digits; anything else is `None`.
pub fn parse_digest(s: &str) -> Option<[u8; 32]> {
    let hex = s.strip_prefix("sha256:")?;
    let mut out = [0u8; 32];
    decode_hex(hex.as_bytes(), &mut out, false).then_some(out)
}

/// Hex digit values; uppercase letters carry 0x20, anything else is 0xFF.
static HEX_VALUE: [u8; 256] = {
    let mut t = [0xFFu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 0x20 | (10 + i as u8);
        i += 1;
    }
    t
};

/// Decodes exactly `2 * out.len()` hex digits into `out`; false when the
/// length is wrong or a digit is invalid (or uppercase, unless `upper_ok`).
pub(super) fn decode_hex(hex: &[u8], out: &mut [u8], upper_ok: bool) -> bool {
    if hex.len() != 2 * out.len() {
        return false;
    }
    let mut seen = 0u8;
    for (o, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        let (h, l) = (HEX_VALUE[pair[0] as usize], HEX_VALUE[pair[1] as usize]);
        seen |= h | l;
        *o = ((h & 0x0F) << 4) | (l & 0x0F);
    }
    seen & 0x80 == 0 && (upper_ok || seen & 0x20 == 0)
}

/// Returns the descriptor (when schema-valid) and whether the digest should
/// be checked (not for a file that declares another schema).
fn extract_descriptor(
    c: &mut Checker,
    value: &Value<'_>,
    ident: &mut Ident,
    keep_allocations: bool,
) -> (Option<Descriptor>, bool) {
    let root = Field::root(value);
    let Some(members) = c.members(&root, || {
        "object (a kvcr.retained-rank/v1 descriptor)".into()
    }) else {
        return (None, false);
    };
    let o = Obj {
        path: root.path,
        members,
    };

    // A file that declares another schema is judged by that alone: its
    // fields follow other rules, and a flood of v1 errors would hide the cause.
    if let Some(Value::String(s)) = o.get("schema") {
        if s != SCHEMA {
            c.fail(
                &o.path.key("schema"),
                "wrong schema",
                format!("\"{SCHEMA}\""),
                quote_preview(s),
            );
            let mut scratch = Checker::new();
            *ident = Ident {
                engine_id: scratch.engine_id(o.at("engine_id")),
                incarnation: scratch.uuid(o.at("incarnation")),
                epoch: scratch.uint(o.at("epoch"), 1, I63_MAX),
                rank: scratch.uint(o.at("rank"), 0, I63_MAX),
            };
            return (None, false);
        }
    }

    c.unknown_fields(&o, &DESCRIPTOR_FIELDS);
    let d = descriptor_fields(c, &o, ident, keep_allocations);
    debug_assert!(
        d.is_some() || !c.is_clean(),
        "every failed field records an error"
    );
    (d.filter(|_| c.is_clean()), true)
}

fn descriptor_fields(
    c: &mut Checker,
    o: &Obj<'_, '_>,
    ident: &mut Ident,
    keep_allocations: bool,
) -> Option<Descriptor> {
    c.exact(o.at("schema"), SCHEMA);
    let engine_id = c.engine_id(o.at("engine_id"));
    let incarnation = c.uuid(o.at("incarnation"));
    let epoch = c.uint(o.at("epoch"), 1, I63_MAX);
    let rank = c.uint(o.at("rank"), 0, I63_MAX);
    *ident = Ident {
        engine_id: engine_id.clone(),
        incarnation,
        epoch,
        rank,
    };
    let world_size = c.uint(o.at("world_size"), 1, MAX_WORLD_SIZE);
    let tp = c.uint(o.at("tp"), 1, MAX_WORLD_SIZE);
    let pp = c.uint(o.at("pp"), 1, MAX_WORLD_SIZE);
    let node = node(c, o.at("node"));
    let gpu_uuid = c.gpu_uuid(o.at("gpu_uuid"));
    let model = model(c, o.at("model"));
    let geometry = geometry(c, o.at("geometry"));
    let owner = owner(c, o.at("owner"));
    let writer = writer(c, o.at("writer"));
    let allocations = allocations(c, o.at("allocations"), keep_allocations);
    let created_unix_ms = c.uint(o.at("created_unix_ms"), 0, I63_MAX);
    let digest = c.digest(o.at("digest"));
    let (allocations, alloc_summary) = allocations?;
    Some(Descriptor {
        engine_id: engine_id?,
        incarnation: incarnation?,
        epoch: epoch?,
        rank: rank?,
        world_size: world_size?,
        tp: tp?,
        pp: pp?,
        node: node?,
        gpu_uuid: gpu_uuid?,
        model: model?,
        geometry: geometry?,
        owner: owner?,
        writer: writer?,
        allocations,
        alloc_summary,
        created_unix_ms: created_unix_ms?,
        digest: digest?,
    })
}

fn node(c: &mut Checker, f: Field<'_, '_>) -> Option<NodeId> {
    let o = c.object(f, NODE_FIELDS)?;
    let hostname = c.string(o.at("hostname"), 1, 253);
    let boot_id = c.uuid(o.at("boot_id"));
    Some(NodeId {
        hostname: hostname?.to_owned(),
        boot_id: boot_id?,
    })
}

/// `model` (docs/format.md §3): `name`, `revision`, `quantization` (string or null).
pub(crate) fn model(c: &mut Checker, f: Field<'_, '_>) -> Option<Model> {
    let o = c.object(f, MODEL_FIELDS)?;
    let name = c.string(o.at("name"), 1, 256);
    let revision = c.string(o.at("revision"), 1, 64);
    let quantization = c.string_or_null(o.at("quantization"), 1, 64);
    Some(Model {
        name: name?.to_owned(),
        revision: revision?.to_owned(),
        quantization: quantization?.map(str::to_owned),
    })
}

/// `geometry` (docs/format.md §3, §3.1), including the overflow check of the bytes needed.
pub(crate) fn geometry(c: &mut Checker, f: Field<'_, '_>) -> Option<Geometry> {
    let o = c.object(f, GEOMETRY_FIELDS)?;
    let num_layers = c.uint(o.at("num_layers"), 1, DIM_MAX);
    let kv_heads_per_rank = c.uint(o.at("kv_heads_per_rank"), 1, DIM_MAX);
    let head_size = c.uint(o.at("head_size"), 1, DIM_MAX);
    let block_size = c.uint(o.at("block_size"), 1, DIM_MAX);
    let num_blocks = c.uint(o.at("num_blocks"), 1, I63_MAX);
    let dtype = c.one_of(o.at("dtype"), DTYPE_NAMES).and_then(Dtype::parse);
    let use_mla = c.boolean(o.at("use_mla"));
    let g = Geometry {
        num_layers: num_layers?,
        kv_heads_per_rank: kv_heads_per_rank?,
        head_size: head_size?,
        block_size: block_size?,
        num_blocks: num_blocks?,
        dtype: dtype?,
        use_mla: use_mla?,
    };
    if g.bytes_needed().is_none() {
        let product = format!(
            "{} × {} × {} × {} × {} × {} × {}",
            g.num_layers,
            if g.use_mla { 1 } else { 2 },
            g.num_blocks,
            g.block_size,
            g.kv_heads_per_rank,
            g.head_size,
            g.dtype.bytes()
        );
        c.fail(
            &o.path,
            "geometry bytes overflow",
            format!("bytes needed ≤ {} (u64)", u64::MAX),
            product,
        );
        return None;
    }
    Some(g)
}

fn owner(c: &mut Checker, f: Field<'_, '_>) -> Option<Owner> {
    let o = c.object(f, OWNER_FIELDS)?;
    let pid = c.uint(o.at("pid"), 1, PID_MAX);
    let start_ticks = c.uint(o.at("start_ticks"), 0, u64::MAX);
    Some(Owner {
        pid: pid? as i32,
        start_ticks: start_ticks?,
    })
}

fn writer(c: &mut Checker, f: Field<'_, '_>) -> Option<Writer> {
    let o = c.object(f, WRITER_FIELDS)?;
    let pid = c.uint(o.at("pid"), 1, PID_MAX);
    let start_ticks = c.uint(o.at("start_ticks"), 0, u64::MAX);
    let quiesced = c.boolean(o.at("quiesced"));
    Some(Writer {
        pid: pid? as i32,
        start_ticks: start_ticks?,
        quiesced: quiesced?,
    })
}

/// Up to this many allocations, duplicate ids are found by a linear scan.
const LINEAR_DUP_SCAN: usize = 32;

/// Checks every allocation; returns them (when `keep`, else an empty Vec)
/// and their summary.
fn allocations(
    c: &mut Checker,
    f: Field<'_, '_>,
    keep: bool,
) -> Option<(Vec<Allocation>, AllocSummary)> {
    let items = c.array(&f, 1, MAX_ALLOCATIONS, "allocations")?;
    let mut b = AllocBuilder::new(items.len(), keep);
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        match allocation(c, f.item(i, item)) {
            Some((id, size_bytes, offset_bytes, handle)) if ok => {
                b.push(id, size_bytes, offset_bytes, handle)
            }
            Some(_) => {}
            None => ok = false,
        }
    }
    ok.then(|| b.finish())
}

/// Collects valid allocations (when `keep`) and their [`AllocSummary`].
pub(super) struct AllocBuilder<'v> {
    keep: bool,
    out: Vec<Allocation>,
    ids: Vec<&'v str>,
    sum: AllocSummary,
}

impl<'v> AllocBuilder<'v> {
    pub(super) fn new(n: usize, keep: bool) -> Self {
        AllocBuilder {
            keep,
            out: Vec::with_capacity(if keep { n } else { 0 }),
            ids: Vec::with_capacity(n),
            sum: AllocSummary {
                handles: Vec::with_capacity(n),
                ..AllocSummary::default()
            },
        }
    }

    pub(super) fn push(&mut self, id: &'v str, size_bytes: u64, offset_bytes: u64, handle: Handle) {
        self.sum.count += 1;
        self.sum.total_bytes += u128::from(size_bytes);
        self.sum.carries_bytes |= handle.carries_bytes();
        self.ids.push(id);
        self.sum.handles.push(super::HandleId::of(&handle));
        if self.keep {
            self.out.push(Allocation {
                id: id.to_owned(),
                size_bytes,
                offset_bytes,
                handle,
            });
        }
    }

    pub(super) fn finish(mut self) -> (Vec<Allocation>, AllocSummary) {
        self.sum.duplicate_ids = duplicates(&self.ids);
        (self.out, self.sum)
    }
}

/// Ids that occur more than once, each once, in the order of their first
/// repetition.
fn duplicates(ids: &[&str]) -> Vec<String> {
    let mut dups: Vec<String> = Vec::new();
    let mut note = |id: &str| {
        if !dups.iter().any(|d| d == id) {
            dups.push(id.to_owned());
        }
    };
    if ids.len() <= LINEAR_DUP_SCAN {
        // Compare a fingerprint (length and first eight bytes) before the
        // strings: distinct ids rarely share one.
        let mut fp = [0u64; LINEAR_DUP_SCAN];
        for (f, id) in fp.iter_mut().zip(ids) {
            let b = id.as_bytes();
            let mut w = [0u8; 8];
            let n = b.len().min(7);
            w[..n].copy_from_slice(&b[..n]);
            w[7] = b.len().min(255) as u8;
            *f = u64::from_le_bytes(w);
        }
        for (i, id) in ids.iter().enumerate() {
            if (0..i).any(|j| fp[j] == fp[i] && ids[j] == *id) {
                note(id);
            }
        }
    } else {
        let mut seen = std::collections::HashSet::with_capacity(ids.len());
        for id in ids {
            if !seen.insert(*id) {
                note(id);
            }
        }
    }
    dups
}

/// One allocation: id, size_bytes, offset_bytes (optional, docs/format.md §3.3:
/// absent is 0; `offset_bytes + size_bytes` must not overflow) and handle.
fn allocation<'v>(c: &mut Checker, f: Field<'_, 'v>) -> Option<(&'v str, u64, u64, Handle)> {
    let o = c.object(f, ALLOCATION_FIELDS)?;
    let id = c.string(o.at("id"), 1, 128);
    let size_bytes = c.uint(o.at("size_bytes"), 1, u64::MAX);
    let offset = o.at("offset_bytes");
    let offset_bytes = match offset.value {
        None => Some(0),
        Some(_) => c.uint(offset, 0, u64::MAX),
    };
    if let (Some(s), Some(off)) = (size_bytes, offset_bytes) {
        if off.checked_add(s).is_none() {
            c.fail(
                &offset.path,
                "overflow",
                format!("offset_bytes + size_bytes ≤ {}", u64::MAX),
                format!("{off} + {s}"),
            );
            return None;
        }
    }
    let handle = handle(c, o.at("handle"));
    Some((id?, size_bytes?, offset_bytes?, handle?))
}

fn handle(c: &mut Checker, f: Field<'_, '_>) -> Option<Handle> {
    let members = c.members(&f, || {
        "object {\"kind\": cuda_ipc|fabric, \"hex\": …} or {\"kind\": posix_fd, \"fd\": …}".into()
    })?;
    let o = Obj {
        path: f.path,
        members,
    };
    let kind = c.one_of(o.at("kind"), HANDLE_KINDS);
    let known: &[&str] = match kind {
        Some("posix_fd") => &["kind", "fd"],
        Some(_) => &["kind", "hex"],
        None => &["kind", "hex", "fd"],
    };
    c.unknown_fields(&o, known);
    match kind? {
        "cuda_ipc" => c.hex64(o.at("hex")).map(Handle::CudaIpc),
        "fabric" => c.hex64(o.at("hex")).map(Handle::Fabric),
        _ => c
            .uint(o.at("fd"), 0, PID_MAX)
            .map(|fd| Handle::PosixFd(fd as i32)),
    }
}

// ---------------------------------------------------------------------------
// Shared extraction machinery (also used by `crate::profile`).

/// One schema problem: the field path, what is wrong, and both values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Path of the field, e.g. `geometry.num_layers`, `allocations[3].handle.hex`.
    pub field: String,
    /// What is wrong, e.g. `out of range`, `missing field`, `unknown field`.
    pub problem: String,
    pub expected: String,
    /// The found value as JSON (cut to about 60 chars), or `(missing)`.
    pub found: String,
}

/// The `found` text of a missing field.
pub const MISSING: &str = "(missing)";

impl FieldError {
    /// `geometry.num_layers: out of range, found 0`.
    pub fn message(&self) -> String {
        if self.found == MISSING {
            format!("{}: {}", self.field, self.problem)
        } else {
            format!("{}: {}, found {}", self.field, self.problem, self.found)
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}`: {}: expected {}, found {}",
            self.field, self.problem, self.expected, self.found
        )
    }
}

#[derive(Clone, Copy, Debug)]
enum Seg<'p> {
    Key(&'p str),
    Index(usize),
}

/// A field path, built on the stack as extraction descends and rendered
/// only when an error is recorded.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Path<'p> {
    parent: Option<&'p Path<'p>>,
    seg: Option<Seg<'p>>,
}

impl<'p> Path<'p> {
    pub(crate) const ROOT: Path<'static> = Path {
        parent: None,
        seg: None,
    };

    pub(crate) fn key<'s>(&'s self, key: &'s str) -> Path<'s> {
        Path {
            parent: Some(self),
            seg: Some(Seg::Key(key)),
        }
    }

    pub(crate) fn index(&self, i: usize) -> Path<'_> {
        Path {
            parent: Some(self),
            seg: Some(Seg::Index(i)),
        }
    }

    pub(crate) fn render(&self) -> String {
        let mut segs = Vec::new();
        let mut p = Some(self);
        while let Some(x) = p {
            segs.extend(x.seg);
            p = x.parent;
        }
        if segs.is_empty() {
            return "(top level)".to_owned();
        }
        let mut s = String::new();
        for seg in segs.iter().rev() {
            match seg {
                Seg::Key(k) if is_plain_key(k) => {
                    if !s.is_empty() {
                        s.push('.');
                    }
                    s.push_str(k);
                }
                Seg::Key(k) => {
                    let _ = write!(s, "[{}]", quote_preview(k));
                }
                Seg::Index(i) => {
                    let _ = write!(s, "[{i}]");
                }
            }
        }
        s
    }
}

fn is_plain_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 64
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A field to check: its path and its value (`None` when absent).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Field<'p, 'v> {
    pub(crate) path: Path<'p>,
    pub(crate) value: Option<&'v Value<'v>>,
}

impl<'v> Field<'static, 'v> {
    pub(crate) fn root(v: &'v Value<'v>) -> Self {
        Field {
            path: Path::ROOT,
            value: Some(v),
        }
    }
}

impl<'p, 'v> Field<'p, 'v> {
    /// Item `i` of this (array) field.
    pub(crate) fn item<'s>(&'s self, i: usize, v: &'v Value<'v>) -> Field<'s, 'v> {
        Field {
            path: self.path.index(i),
            value: Some(v),
        }
    }

    /// `None` when the field is absent or `null` (optional profile fields).
    pub(crate) fn optional(self) -> Option<Self> {
        match self.value {
            None | Some(Value::Null) => None,
            Some(_) => Some(self),
        }
    }
}

type Members<'v> = &'v [(Cow<'v, str>, Value<'v>)];

/// The members of a JSON object being checked.
pub(crate) struct Obj<'p, 'v> {
    pub(crate) path: Path<'p>,
    members: Members<'v>,
}

impl<'p, 'v> Obj<'p, 'v> {
    pub(crate) fn get(&self, key: &str) -> Option<&'v Value<'v>> {
        self.members.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub(crate) fn at<'s>(&'s self, key: &'s str) -> Field<'s, 'v> {
        Field {
            path: self.path.key(key),
            value: self.get(key),
        }
    }
}

/// Collects schema problems; every check records an error when it returns `None`.
#[derive(Debug, Default)]
pub(crate) struct Checker {
    /// The first [`Checker::KEEP`] problems.
    pub(crate) errors: Vec<FieldError>,
    /// How many problems there were in all.
    pub(crate) total: usize,
}

impl Checker {
    const KEEP: usize = 64;

    pub(crate) fn new() -> Self {
        Self::default()
    }

    pub(crate) fn is_clean(&self) -> bool {
        self.total == 0
    }

    pub(crate) fn fail(
        &mut self,
        path: &Path<'_>,
        problem: impl Into<String>,
        expected: impl Into<String>,
        found: impl Into<String>,
    ) {
        self.total += 1;
        if self.errors.len() < Self::KEEP {
            self.errors.push(FieldError {
                field: path.render(),
                problem: problem.into(),
                expected: expected.into(),
                found: found.into(),
            });
        }
    }

    /// The value of a required field; records "missing field" when absent.
    fn present<'v>(
        &mut self,
        f: &Field<'_, 'v>,
        expected: impl FnOnce() -> String,
    ) -> Option<&'v Value<'v>> {
        if f.value.is_none() {
            self.fail(&f.path, "missing field", expected(), MISSING);
        }
        f.value
    }

    /// Records a type mismatch (a float gets its own wording).
    fn wrong_type(&mut self, path: &Path<'_>, v: &Value<'_>, expected: String) {
        let problem = match v {
            Value::Number(n) if !n.is_integer() => "float not allowed".to_owned(),
            _ => format!("wrong type ({})", v.type_name()),
        };
        self.fail(path, problem, expected, preview(v));
    }

    pub(crate) fn members<'v>(
        &mut self,
        f: &Field<'_, 'v>,
        expected: impl Fn() -> String,
    ) -> Option<Members<'v>> {
        match self.present(f, &expected)? {
            Value::Object(m) => Some(m),
            v => {
                self.wrong_type(&f.path, v, expected());
                None
            }
        }
    }

    /// Records every member of `o` not named in `known`.
    pub(crate) fn unknown_fields(&mut self, o: &Obj<'_, '_>, known: &[&str]) {
        for (k, v) in o.members {
            if !known.contains(&k.as_ref()) {
                self.fail(
                    &o.path.key(k),
                    "unknown field",
                    format!("one of {}", known.join(", ")),
                    preview(v),
                );
            }
        }
    }

    /// A required object with exactly the `known` fields (missing ones are
    /// reported by the field checks that follow).
    pub(crate) fn object<'p, 'v>(
        &mut self,
        f: Field<'p, 'v>,
        known: &[&str],
    ) -> Option<Obj<'p, 'v>> {
        let members = self.members(&f, || format!("object with {}", known.join(", ")))?;
        let o = Obj {
            path: f.path,
            members,
        };
        self.unknown_fields(&o, known);
        Some(o)
    }

    pub(crate) fn array<'v>(
        &mut self,
        f: &Field<'_, 'v>,
        min: usize,
        max: usize,
        what: &str,
    ) -> Option<&'v [Value<'v>]> {
        let expected = || format!("array of {min}–{max} {what}");
        let items = match self.present(f, expected)? {
            Value::Array(items) => items,
            v => {
                self.wrong_type(&f.path, v, expected());
                return None;
            }
        };
        if items.len() < min || items.len() > max {
            let problem = if items.is_empty() {
                "empty array".to_owned()
            } else {
                format!("wrong number of items ({})", items.len())
            };
            self.fail(&f.path, problem, expected(), preview(f.value?));
            return None;
        }
        Some(items)
    }

    pub(crate) fn int(&mut self, f: Field<'_, '_>, lo: i128, hi: i128) -> Option<i128> {
        let expected = || format!("integer {lo}..={hi}");
        let v = self.present(&f, expected)?;
        match v {
            Value::Number(n) => match n.kind {
                NumKind::Int(i) if (lo..=hi).contains(&i) => Some(i),
                NumKind::Int(_) | NumKind::BigInt => {
                    self.fail(&f.path, "out of range", expected(), preview(v));
                    None
                }
                NumKind::Float => {
                    self.wrong_type(&f.path, v, expected());
                    None
                }
            },
            _ => {
                self.wrong_type(&f.path, v, expected());
                None
            }
        }
    }

    pub(crate) fn uint(&mut self, f: Field<'_, '_>, lo: u64, hi: u64) -> Option<u64> {
        // In range lo..=hi, so the conversion back to u64 is lossless.
        self.int(f, i128::from(lo), i128::from(hi))
            .map(|i| i as u64)
    }

    pub(crate) fn boolean(&mut self, f: Field<'_, '_>) -> Option<bool> {
        match self.present(&f, || "boolean".into())? {
            Value::Bool(b) => Some(*b),
            v => {
                self.wrong_type(&f.path, v, "boolean".into());
                None
            }
        }
    }

    fn str_value<'v>(
        &mut self,
        f: &Field<'_, 'v>,
        expected: impl Fn() -> String,
    ) -> Option<&'v str> {
        match self.present(f, &expected)? {
            Value::String(s) => Some(s),
            v => {
                self.wrong_type(&f.path, v, expected());
                None
            }
        }
    }

    /// Checks the length (in characters) of an already type-checked string.
    fn check_len(
        &mut self,
        path: &Path<'_>,
        s: &str,
        min: usize,
        max: usize,
        expected: impl FnOnce() -> String,
    ) -> bool {
        // A string of n bytes has between ceil(n/4) and n characters.
        if s.len() <= max && s.len() >= min.saturating_mul(4) {
            return true;
        }
        let n = s.chars().count();
        if n < min {
            let problem = if n == 0 {
                "empty string".to_owned()
            } else {
                format!("too short ({n} chars)")
            };
            self.fail(path, problem, expected(), quote_preview(s));
            false
        } else if n > max {
            self.fail(
                path,
                format!("too long ({n} chars)"),
                expected(),
                quote_preview(s),
            );
            false
        } else {
            true
        }
    }

    pub(crate) fn string<'v>(
        &mut self,
        f: Field<'_, 'v>,
        min: usize,
        max: usize,
    ) -> Option<&'v str> {
        let expected = || format!("string of {min}–{max} chars");
        let s = self.str_value(&f, expected)?;
        self.check_len(&f.path, s, min, max, expected).then_some(s)
    }

    /// A required string or `null` (`Some(None)`).
    pub(crate) fn string_or_null<'v>(
        &mut self,
        f: Field<'_, 'v>,
        min: usize,
        max: usize,
    ) -> Option<Option<&'v str>> {
        if let Some(Value::Null) = f.value {
            return Some(None);
        }
        let expected = || format!("null or string of {min}–{max} chars");
        let s = self.str_value(&f, expected)?;
        self.check_len(&f.path, s, min, max, expected)
            .then_some(Some(s))
    }

    /// A string that must equal `want` exactly.
    pub(crate) fn exact(&mut self, f: Field<'_, '_>, want: &str) -> Option<()> {
        let expected = || format!("\"{want}\"");
        let s = self.str_value(&f, expected)?;
        if s == want {
            Some(())
        } else {
            self.fail(&f.path, "wrong schema", expected(), quote_preview(s));
            None
        }
    }

    pub(crate) fn one_of<'v>(&mut self, f: Field<'_, 'v>, options: &[&str]) -> Option<&'v str> {
        let expected = || format!("one of {}", options.join(", "));
        let s = self.str_value(&f, expected)?;
        if options.contains(&s) {
            Some(s)
        } else {
            self.fail(&f.path, "unknown value", expected(), quote_preview(s));
            None
        }
    }

    /// `engine_id`: 1–128 chars of `[A-Za-z0-9._:/-]`.
    pub(crate) fn engine_id(&mut self, f: Field<'_, '_>) -> Option<String> {
        let expected = || "string of 1–128 chars from [A-Za-z0-9._:/-]".to_owned();
        let s = self.str_value(&f, expected)?;
        if !self.check_len(&f.path, s, 1, 128, expected) {
            return None;
        }
        let bad = s.char_indices().find(|&(_, c)| {
            !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '/' | '-'))
        });
        if let Some((i, c)) = bad {
            self.fail(
                &f.path,
                format!("invalid character {c:?} at byte {i}"),
                expected(),
                quote_preview(s),
            );
            return None;
        }
        Some(s.to_owned())
    }

    /// A canonical lowercase hyphenated UUID, not nil.
    pub(crate) fn uuid(&mut self, f: Field<'_, '_>) -> Option<Uuid> {
        let expected = || "canonical lowercase hyphenated UUID, not nil".to_owned();
        let s = self.str_value(&f, expected)?;
        match parse_canonical_uuid(s) {
            Some(u) if !u.is_nil() => Some(u),
            Some(_) => {
                self.fail(&f.path, "nil UUID", expected(), quote_preview(s));
                None
            }
            None => {
                let problem = uuid_problem(s);
                self.fail(&f.path, problem, expected(), quote_preview(s));
                None
            }
        }
    }

    /// `GPU-<uuid>` or `MIG-<uuid>`.
    pub(crate) fn gpu_uuid(&mut self, f: Field<'_, '_>) -> Option<GpuUuid> {
        let expected = || "\"GPU-\" or \"MIG-\" + canonical lowercase UUID, not nil".to_owned();
        let s = self.str_value(&f, expected)?;
        if let Some(g) = GpuUuid::parse(s) {
            return Some(g);
        }
        let problem = match s.strip_prefix("GPU-").or_else(|| s.strip_prefix("MIG-")) {
            None => "missing GPU- or MIG- prefix",
            Some(rest) => match parse_canonical_uuid(rest) {
                Some(_) => "nil UUID",
                None => uuid_problem(rest),
            },
        };
        self.fail(&f.path, problem, expected(), quote_preview(s));
        None
    }

    /// `sha256:` + 64 lowercase hex.
    pub(crate) fn digest(&mut self, f: Field<'_, '_>) -> Option<[u8; 32]> {
        let expected = || "\"sha256:\" + 64 lowercase hex digits".to_owned();
        let s = self.str_value(&f, expected)?;
        let d = parse_digest(s);
        if d.is_none() {
            self.fail(&f.path, "malformed digest", expected(), quote_preview(s));
        }
        d
    }

    /// 128 hex digits (either case) → 64 bytes.
    pub(crate) fn hex64(&mut self, f: Field<'_, '_>) -> Option<[u8; 64]> {
        let expected = || "128 hex chars (64 bytes)".to_owned();
        let s = self.str_value(&f, expected)?;
        let mut out = [0u8; 64];
        if decode_hex(s.as_bytes(), &mut out, true) {
            return Some(out);
        }
        let problem = match s.chars().find(|c| !c.is_ascii_hexdigit()) {
            Some(c) if s.len() == 128 => format!("non-hex character {c:?}"),
            _ => format!("wrong length ({} chars)", s.chars().count()),
        };
        self.fail(&f.path, problem, expected(), quote_preview(s));
        None
    }
}

fn uuid_problem(s: &str) -> &'static str {
    if parse_canonical_uuid(&s.to_ascii_lowercase()).is_some() {
        "uppercase UUID (must be lowercase)"
    } else {
        "not a canonical hyphenated UUID"
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// A valid descriptor without its digest.
    pub(crate) fn doc() -> serde_json::Value {
        json!({
            "schema": "kvcr.retained-rank/v1",
            "engine_id": "vllm:llama-70b/prod-1",
            "incarnation": "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b",
            "epoch": 7,
            "rank": 1,
            "world_size": 2,
            "tp": 2,
            "pp": 1,
            "node": {"hostname": "gpu-node-17", "boot_id": "0b5e3c1a-2d4f-4a6b-8c9d-0e1f2a3b4c5d"},
            "gpu_uuid": "GPU-3f9a1b2c-4d5e-6f70-8192-a3b4c5d6e7f8",
            "model": {"name": "meta-llama/Llama-3.1-70B", "revision": "main", "quantization": null},
            "geometry": {
                "num_layers": 80, "kv_heads_per_rank": 4, "head_size": 128,
                "block_size": 16, "num_blocks": 1000, "dtype": "bfloat16", "use_mla": false
            },
            "owner": {"pid": 4242, "start_ticks": 123456},
            "writer": {"pid": 4343, "start_ticks": 123999, "quiesced": true},
            "allocations": [
                {"id": "kv-0", "size_bytes": 1342177280u64, "handle": {"kind": "cuda_ipc", "hex": "ab".repeat(64)}},
                {"id": "kv-1", "size_bytes": 1024, "handle": {"kind": "posix_fd", "fd": 17}},
                {"id": "kv-2", "size_bytes": 1024, "handle": {"kind": "fabric", "hex": "0F".repeat(64)}}
            ],
            "created_unix_ms": 1735689600000u64
        })
    }

    /// Serialises `v` with its correct digest inserted (last, like a writer might).
    pub(crate) fn seal(mut v: serde_json::Value) -> Vec<u8> {
        let bytes = serde_json::to_vec(&v).unwrap();
        let d = compute_digest(&bytes).unwrap();
        v.as_object_mut()
            .unwrap()
            .insert("digest".into(), json!(format_digest(&d)));
        serde_json::to_vec_pretty(&v).unwrap()
    }

    fn parse_v(v: serde_json::Value) -> ParseOutcome {
        parse_descriptor(&seal(v))
    }

    /// The single finding of `out`, which must have code `code`.
    fn only(out: &ParseOutcome, code: Code) -> &Finding {
        assert_eq!(out.findings.len(), 1, "{:#?}", out.findings);
        let f = &out.findings[0];
        assert_eq!(f.code, code, "{f:#?}");
        f
    }

    fn schema_error(v: serde_json::Value) -> Finding {
        let out = parse_v(v);
        assert!(out.descriptor.is_none());
        only(&out, Code::KV007).clone()
    }

    #[test]
    fn offset_bytes_is_optional_strict_and_bounded() {
        // Absent: 0.
        let d = parse_v(doc()).descriptor.unwrap();
        assert!(d.allocations.iter().all(|a| a.offset_bytes == 0));
        // Present: any integer ≥ 0, kept, and part of the digest like any member.
        let mut v = doc();
        v["allocations"][0]["offset_bytes"] = json!(4096);
        v["allocations"][1]["offset_bytes"] = json!(0);
        let out = parse_v(v.clone());
        assert!(out.findings.is_empty(), "{:#?}", out.findings);
        let d = out.descriptor.unwrap();
        assert_eq!(d.allocations[0].offset_bytes, 4096);
        assert_eq!(d.allocations[1].offset_bytes, 0);
        let mut edited = String::from_utf8(seal(v)).unwrap();
        edited = edited.replace("\"offset_bytes\": 4096", "\"offset_bytes\": 8192");
        assert_eq!(
            parse_descriptor(edited.as_bytes()).findings[0].code,
            Code::KV008
        );
        // Wrong types, negatives, floats and null are schema errors.
        for bad in [
            json!(-1),
            json!("4096"),
            json!(1.5),
            json!(null),
            json!(true),
        ] {
            let mut v = doc();
            v["allocations"][2]["offset_bytes"] = bad.clone();
            let f = schema_error(v);
            assert!(
                f.message.starts_with("allocations[2].offset_bytes: "),
                "{bad}: {f:?}"
            );
        }
        // offset + size must not overflow.
        let mut v = doc();
        v["allocations"][1]["offset_bytes"] = json!(u64::MAX);
        let f = schema_error(v);
        assert!(
            f.message
                .starts_with("allocations[1].offset_bytes: overflow"),
            "{f:?}"
        );
        let mut v = doc();
        v["allocations"][1]["offset_bytes"] = json!(u64::MAX - 1024);
        assert!(parse_v(v).findings.is_empty());
    }

    #[test]
    fn valid_descriptor_round_trip() {
        let out = parse_descriptor(&seal(doc()));
        assert!(out.findings.is_empty(), "{:#?}", out.findings);
        let d = out.descriptor.expect("valid");
        assert_eq!(d.engine_id, "vllm:llama-70b/prod-1");
        assert_eq!(d.epoch, 7);
        assert_eq!(d.rank, 1);
        assert_eq!(d.world_size, 2);
        assert_eq!(d.node.hostname, "gpu-node-17");
        assert_eq!(
            d.gpu_uuid.to_string(),
            "GPU-3f9a1b2c-4d5e-6f70-8192-a3b4c5d6e7f8"
        );
        assert_eq!(d.model.quantization, None);
        assert_eq!(d.geometry.dtype, Dtype::Bfloat16);
        assert_eq!(
            d.geometry.bytes_needed(),
            Some(80 * 2 * 1000 * 16 * 4 * 128 * 2)
        );
        assert_eq!(d.owner.pid, 4242);
        assert!(d.writer.quiesced);
        assert_eq!(d.allocations.len(), 3);
        assert_eq!(d.allocations[0].handle, Handle::CudaIpc([0xab; 64]));
        assert_eq!(d.allocations[1].handle, Handle::PosixFd(17));
        assert_eq!(d.allocations[2].handle, Handle::Fabric([0x0f; 64]));
        assert_eq!(d.created_unix_ms, 1735689600000);
        assert_eq!(
            out.ident,
            Ident {
                engine_id: Some(d.engine_id.clone()),
                incarnation: Some(d.incarnation),
                epoch: Some(7),
                rank: Some(1),
            }
        );
        // Member order and whitespace do not matter to the digest.
        let text = String::from_utf8(seal(doc())).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let mut reordered = serde_json::Map::new();
        for (k, x) in v.as_object().unwrap().iter().rev() {
            reordered.insert(k.clone(), x.clone());
        }
        let compact = serde_json::to_vec(&serde_json::Value::Object(reordered)).unwrap();
        let out = parse_descriptor(&compact);
        assert!(out.findings.is_empty(), "{:#?}", out.findings);
    }

    #[test]
    fn quantization_string() {
        let mut v = doc();
        v["model"]["quantization"] = json!("fp8");
        assert!(parse_v(v).findings.is_empty());
    }

    #[test]
    fn missing_field() {
        let mut v = doc();
        v["geometry"].as_object_mut().unwrap().remove("dtype");
        let f = schema_error(v);
        assert_eq!(f.message, "geometry.dtype: missing field");
        assert_eq!(
            f.expected.as_deref(),
            Some("one of float16, bfloat16, float32, float8_e4m3, float8_e5m2, int8")
        );
        assert_eq!(f.found.as_deref(), Some(MISSING));
    }

    #[test]
    fn unknown_fields_at_any_level() {
        let mut v = doc();
        v["extra"] = json!(1);
        v["node"]["rack"] = json!("r1");
        v["allocations"][2]["handle"]["fd"] = json!(3);
        let out = parse_v(v);
        assert!(out.descriptor.is_none());
        let msgs: Vec<&str> = out.findings.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(
            msgs,
            [
                "extra: unknown field, found 1",
                "node.rack: unknown field, found \"r1\"",
                "allocations[2].handle.fd: unknown field, found 3",
            ]
        );
        assert!(out.findings.iter().all(|f| f.code == Code::KV007));
        assert_eq!(
            out.findings[2].expected.as_deref(),
            Some("one of kind, hex")
        );
    }

    #[test]
    fn wrong_type() {
        let mut v = doc();
        v["epoch"] = json!("7");
        let f = schema_error(v);
        assert_eq!(f.message, "epoch: wrong type (string), found \"7\"");
        assert_eq!(
            f.expected.as_deref(),
            Some("integer 1..=9223372036854775807")
        );
        assert_eq!(f.found.as_deref(), Some("\"7\""));
        let mut v = doc();
        v["writer"]["quiesced"] = json!(1);
        assert_eq!(
            schema_error(v).message,
            "writer.quiesced: wrong type (integer), found 1"
        );
        let mut v = doc();
        v["allocations"] = json!({});
        assert_eq!(
            schema_error(v).message,
            "allocations: wrong type (object), found {}"
        );
    }

    #[test]
    fn float_anywhere_is_schema_error() {
        let mut v = doc();
        v["geometry"]["num_layers"] = json!(80.0);
        let f = schema_error(v);
        assert_eq!(
            f.message,
            "geometry.num_layers: float not allowed, found 80.0"
        );
        let text = String::from_utf8(seal(doc()))
            .unwrap()
            .replace("\"size_bytes\": 1024", "\"size_bytes\": 1e3");
        let out = parse_descriptor(text.as_bytes());
        assert!(out.findings.len() >= 2, "{:#?}", out.findings);
        assert_eq!(out.findings[0].code, Code::KV007);
        assert_eq!(
            out.findings[0].message,
            "allocations[1].size_bytes: float not allowed, found 1e3"
        );
        // The content changed after sealing, so the digest no longer matches.
        assert_eq!(out.findings.last().unwrap().code, Code::KV008);
    }

    #[test]
    fn out_of_range() {
        let mut v = doc();
        v["geometry"]["num_layers"] = json!(0);
        let f = schema_error(v);
        assert_eq!(f.message, "geometry.num_layers: out of range, found 0");
        assert_eq!(f.expected.as_deref(), Some("integer 1..=4294967296"));
        assert_eq!(f.found.as_deref(), Some("0"));

        for (field, bad) in [
            ("epoch", json!(0)),
            ("epoch", json!(1u64 << 63)),
            ("rank", json!(-1)),
            ("world_size", json!(4097)),
            ("tp", json!(0)),
            ("created_unix_ms", json!(-5)),
        ] {
            let mut v = doc();
            v[field] = bad;
            let f = schema_error(v);
            assert!(
                f.message.starts_with(&format!("{field}: out of range")),
                "{f:?}"
            );
        }
        let mut v = doc();
        v["owner"]["pid"] = json!(1u64 << 31);
        assert!(schema_error(v)
            .message
            .starts_with("owner.pid: out of range"));
        // 2^32 is the inclusive upper bound.
        let mut v = doc();
        v["geometry"]["head_size"] = json!(1u64 << 32);
        v["geometry"]["num_layers"] = json!(1);
        v["geometry"]["num_blocks"] = json!(1);
        v["allocations"][0]["size_bytes"] = json!(u64::MAX);
        assert!(parse_v(v).findings.is_empty());
        // Integers beyond any machine type are out of range, not malformed.
        let text = String::from_utf8(seal(doc())).unwrap().replace(
            "\"epoch\": 7",
            "\"epoch\": 123456789012345678901234567890123456789012",
        );
        let out = parse_descriptor(text.as_bytes());
        assert_eq!(
            out.findings[0].message,
            "epoch: out of range, found 123456789012345678901234567890123456789012"
        );
    }

    #[test]
    fn bytes_needed_overflow() {
        let mut v = doc();
        v["geometry"]["num_layers"] = json!(1u64 << 32);
        v["geometry"]["head_size"] = json!(1u64 << 32);
        let f = schema_error(v);
        assert!(
            f.message.starts_with("geometry: geometry bytes overflow"),
            "{f:?}"
        );
        assert_eq!(
            f.found.as_deref(),
            Some("4294967296 × 2 × 1000 × 16 × 4 × 4294967296 × 2")
        );
    }

    #[test]
    fn uuids() {
        for (value, problem) in [
            ("not-a-uuid", "not a canonical hyphenated UUID"),
            ("00000000-0000-0000-0000-000000000000", "nil UUID"),
            (
                "6F1C2A3B-4D5E-4F60-8A7B-9C0D1E2F3A4B",
                "uppercase UUID (must be lowercase)",
            ),
            (
                "6f1c2a3b4d5e4f608a7b9c0d1e2f3a4b",
                "not a canonical hyphenated UUID",
            ),
            (
                "{6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b}",
                "not a canonical hyphenated UUID",
            ),
        ] {
            let mut v = doc();
            v["incarnation"] = json!(value);
            let out = parse_v(v);
            let f = only(&out, Code::KV007);
            assert_eq!(
                f.message,
                format!("incarnation: {problem}, found \"{value}\"")
            );
            assert_eq!(out.ident.incarnation, None);
            assert_eq!(out.ident.epoch, Some(7), "other ident fields survive");
        }
        let mut v = doc();
        v["node"]["boot_id"] = json!("00000000-0000-0000-0000-000000000000");
        assert_eq!(
            schema_error(v).message,
            "node.boot_id: nil UUID, found \"00000000-0000-0000-0000-000000000000\""
        );
    }

    #[test]
    fn gpu_uuids() {
        for (value, problem) in [
            (
                "3f9a1b2c-4d5e-6f70-8192-a3b4c5d6e7f8",
                "missing GPU- or MIG- prefix",
            ),
            ("GPU-00000000-0000-0000-0000-000000000000", "nil UUID"),
            (
                "GPU-3F9A1B2C-4D5E-6F70-8192-A3B4C5D6E7F8",
                "uppercase UUID (must be lowercase)",
            ),
            (
                "gpu-3f9a1b2c-4d5e-6f70-8192-a3b4c5d6e7f8",
                "missing GPU- or MIG- prefix",
            ),
        ] {
            let mut v = doc();
            v["gpu_uuid"] = json!(value);
            assert_eq!(
                schema_error(v).message,
                format!("gpu_uuid: {problem}, found \"{value}\"")
            );
        }
        let mut v = doc();
        v["gpu_uuid"] = json!("MIG-3f9a1b2c-4d5e-6f70-8192-a3b4c5d6e7f8");
        assert!(parse_v(v).findings.is_empty());
    }

    #[test]
    fn engine_id_rules() {
        let mut v = doc();
        v["engine_id"] = json!("engine id");
        let out = parse_v(v);
        let f = only(&out, Code::KV007);
        assert_eq!(
            f.message,
            "engine_id: invalid character ' ' at byte 6, found \"engine id\""
        );
        assert_eq!(out.ident.engine_id, None);
        assert_eq!(out.ident.rank, Some(1));

        let mut v = doc();
        v["engine_id"] = json!("e".repeat(129));
        let f = schema_error(v);
        assert!(f
            .message
            .starts_with("engine_id: too long (129 chars), found \"eee"));
        let found = f.found.unwrap();
        assert!(found.ends_with('…'), "{found}");
        assert_eq!(found.chars().count(), 61);

        let mut v = doc();
        v["engine_id"] = json!("e".repeat(128));
        assert!(parse_v(v).findings.is_empty());
        let mut v = doc();
        v["engine_id"] = json!("");
        assert_eq!(
            schema_error(v).message,
            "engine_id: empty string, found \"\""
        );
    }

    #[test]
    fn handle_rules() {
        let mut v = doc();
        v["allocations"][0]["handle"]["hex"] = json!("ab".repeat(63));
        let f = schema_error(v);
        assert!(
            f.message
                .starts_with("allocations[0].handle.hex: wrong length (126 chars)"),
            "{f:?}"
        );
        assert_eq!(f.expected.as_deref(), Some("128 hex chars (64 bytes)"));

        let mut v = doc();
        v["allocations"][2]["handle"]["hex"] = json!("zz".repeat(64));
        assert!(schema_error(v)
            .message
            .starts_with("allocations[2].handle.hex: non-hex character 'z'"));

        let mut v = doc();
        v["allocations"][1]["handle"] = json!({"kind": "pidfd", "fd": 3});
        let f = schema_error(v);
        assert_eq!(
            f.message,
            "allocations[1].handle.kind: unknown value, found \"pidfd\""
        );
        assert_eq!(
            f.expected.as_deref(),
            Some("one of cuda_ipc, fabric, posix_fd")
        );

        let mut v = doc();
        v["allocations"][1]["handle"]["fd"] = json!(-1);
        assert!(schema_error(v)
            .message
            .starts_with("allocations[1].handle.fd: out of range"));

        let mut v = doc();
        v["allocations"][1]["handle"] = json!({"kind": "posix_fd"});
        assert_eq!(
            schema_error(v).message,
            "allocations[1].handle.fd: missing field"
        );
    }

    #[test]
    fn allocation_count() {
        let mut v = doc();
        v["allocations"] = json!([]);
        let f = schema_error(v);
        assert_eq!(f.message, "allocations: empty array, found []");
        let mut v = doc();
        let one = v["allocations"][1].clone();
        v["allocations"] = serde_json::Value::Array(vec![one; MAX_ALLOCATIONS + 1]);
        let f = schema_error(v);
        assert!(f
            .message
            .starts_with("allocations: wrong number of items (4097)"));
    }

    #[test]
    fn dtype_unknown_value() {
        let mut v = doc();
        v["geometry"]["dtype"] = json!("fp8");
        let f = schema_error(v);
        assert_eq!(f.message, "geometry.dtype: unknown value, found \"fp8\"");
        assert_eq!(
            f.expected.as_deref(),
            Some("one of float16, bfloat16, float32, float8_e4m3, float8_e5m2, int8")
        );
        assert_eq!(f.found.as_deref(), Some("\"fp8\""));
    }

    #[test]
    fn wrong_schema_is_reported_alone() {
        let mut v = doc();
        v["schema"] = json!("kvcr.retained-rank/v2");
        v["extra"] = json!(true);
        let out = parse_v(v);
        let f = only(&out, Code::KV007);
        assert_eq!(
            f.message,
            "schema: wrong schema, found \"kvcr.retained-rank/v2\""
        );
        assert_eq!(f.expected.as_deref(), Some("\"kvcr.retained-rank/v1\""));
        assert_eq!(
            out.ident.engine_id.as_deref(),
            Some("vllm:llama-70b/prod-1")
        );
        // Missing schema, though, is one problem among the others.
        let mut v = doc();
        v.as_object_mut().unwrap().remove("schema");
        v["tp"] = json!(0);
        let out = parse_v(v);
        assert_eq!(out.findings.len(), 2);
        assert_eq!(out.findings[0].message, "schema: missing field");
    }

    #[test]
    fn top_level_not_an_object() {
        let out = parse_descriptor(b"[1,2]");
        let f = only(&out, Code::KV007);
        assert_eq!(f.message, "(top level): wrong type (array), found [1,2]");
    }

    #[test]
    fn digest_mismatch_names_both_values() {
        let sealed = seal(doc());
        let good = parse_descriptor(&sealed).descriptor.unwrap();
        let text = String::from_utf8(sealed)
            .unwrap()
            .replace("\"epoch\": 7", "\"epoch\": 8");
        let out = parse_descriptor(text.as_bytes());
        let f = only(&out, Code::KV008).clone();
        let d = out.descriptor.expect("still returned");
        assert_eq!(d.epoch, 8);
        let expected = format_digest(&compute_digest(text.as_bytes()).unwrap());
        assert_eq!(f.expected.as_deref(), Some(expected.as_str()));
        assert_eq!(
            f.found.as_deref(),
            Some(format_digest(&good.digest).as_str())
        );
        assert_ne!(f.expected, f.found);
    }

    #[test]
    fn digest_checked_even_when_schema_invalid() {
        let text = String::from_utf8(seal(doc()))
            .unwrap()
            .replace("\"tp\": 2", "\"tp\": 0");
        let out = parse_descriptor(text.as_bytes());
        let codes: Vec<Code> = out.findings.iter().map(|f| f.code).collect();
        assert_eq!(codes, [Code::KV007, Code::KV008]);
        assert!(out.descriptor.is_none());
        // Sealed with the bad value: schema error only.
        let mut v = doc();
        v["tp"] = json!(0);
        assert_eq!(parse_v(v).findings.len(), 1);
    }

    #[test]
    fn malformed_digest_field() {
        let mut v = doc();
        v["digest"] = json!("sha256:ABC");
        let text = serde_json::to_vec(&v).unwrap();
        let out = parse_descriptor(&text);
        let f = only(&out, Code::KV007);
        assert_eq!(f.message, "digest: malformed digest, found \"sha256:ABC\"");
        let mut v = doc();
        v["digest"] = json!(format!("sha256:{}", "A".repeat(64)));
        assert_eq!(
            only(
                &parse_descriptor(&serde_json::to_vec(&v).unwrap()),
                Code::KV007
            )
            .code,
            Code::KV007
        );
    }

    #[test]
    fn all_problems_reported_and_capped() {
        let mut v = doc();
        v["epoch"] = json!(0);
        v["tp"] = json!(0);
        v["geometry"]["dtype"] = json!("x");
        let out = parse_v(v);
        assert_eq!(out.findings.len(), 3);
        assert_eq!(out.ident.epoch, None);

        let mut v = doc();
        let bad = json!({"id": "", "size_bytes": 0, "handle": {"kind": "posix_fd", "fd": -1}});
        v["allocations"] = serde_json::Value::Array(vec![bad; 100]);
        let out = parse_v(v);
        assert_eq!(out.findings.len(), MAX_FINDINGS);
        assert_eq!(
            out.findings[19].message,
            "281 more schema problems not shown"
        );
        assert!(out.findings.iter().all(|f| f.code == Code::KV007));
    }

    #[test]
    fn ident_best_effort() {
        let mut v = doc();
        v["world_size"] = json!("two");
        v["epoch"] = json!(-1);
        let out = parse_v(v);
        assert!(out.descriptor.is_none());
        assert_eq!(
            out.ident.engine_id.as_deref(),
            Some("vllm:llama-70b/prod-1")
        );
        assert!(out.ident.incarnation.is_some());
        assert_eq!(out.ident.epoch, None);
        assert_eq!(out.ident.rank, Some(1));
    }

    #[test]
    fn rank_and_world_size_relations_are_not_checked_here() {
        let mut v = doc();
        v["rank"] = json!(9);
        v["world_size"] = json!(3);
        v["allocations"][1]["id"] = json!("kv-0");
        assert!(parse_v(v).findings.is_empty());
    }

    fn malformed(bytes: &[u8]) -> String {
        let out = parse_descriptor(bytes);
        assert!(out.descriptor.is_none());
        assert_eq!(out.ident, Ident::default());
        only(&out, Code::KV006).message.clone()
    }

    #[test]
    fn malformed_inputs() {
        let m = malformed(br#"{"rank": 1, "rank": 2}"#);
        assert_eq!(m, r#"malformed: duplicate key "rank" at byte 12"#);
        let m = malformed(b"{} x");
        assert_eq!(
            m,
            "malformed: trailing data after the top-level value at byte 3"
        );
        let mut bom = b"\xEF\xBB\xBF".to_vec();
        bom.extend(seal(doc()));
        assert!(malformed(&bom).contains("byte order mark"));
        let m = malformed(b"{\"a\": \"\xFF\"}");
        assert_eq!(m, "malformed: invalid UTF-8 at byte 7");
        assert_eq!(malformed(b""), "malformed: empty file at byte 0");
        let deep = "[".repeat(200_000);
        assert!(malformed(deep.as_bytes()).contains("nesting deeper than 32"));
        assert!(malformed(b"{\"a\":\"x\ny\"}").contains("control character"));
    }

    #[test]
    fn compute_digest_rejects_bad_json() {
        assert!(compute_digest(b"{").is_err());
        assert!(compute_digest(b"{}").is_ok());
    }

    #[test]
    fn path_rendering_quotes_odd_keys() {
        let mut v = doc();
        v["node"]["a.b\n"] = json!(1);
        let f = schema_error(v);
        assert_eq!(f.message, "node[\"a.b\\n\"]: unknown field, found 1");
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(200))]
            // Any edit of a sealed descriptor is caught (or is a no-op) and
            // never panics: a changed byte breaks the JSON, the schema or
            // the digest.
            #[test]
            fn edits_never_pass_unnoticed(pos in any::<prop::sample::Index>(), byte in any::<u8>(), cut in any::<bool>()) {
                let sealed = seal(doc());
                let mut b = sealed.clone();
                let i = pos.index(b.len());
                if cut { b.truncate(i); } else { b[i] = byte; }
                let out = parse_descriptor(&b);
                let same_content = canon_of(&b).is_some() && canon_of(&b) == canon_of(&sealed);
                if !same_content {
                    prop_assert!(!out.findings.is_empty());
                }
                prop_assert!(out.findings.len() <= MAX_FINDINGS);
            }

            #[test]
            fn arbitrary_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..512)) {
                let out = parse_descriptor(&b);
                prop_assert!(out.descriptor.is_none() || out.findings.iter().all(|f| f.code == Code::KV008));
            }
        }

        fn canon_of(b: &[u8]) -> Option<String> {
            let v = json::parse(b).ok()?;
            Some(String::from_utf8(canon::canonical_bytes(&v, None)).unwrap())
        }
    }
}
