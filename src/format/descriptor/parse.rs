//! Typed extraction of a descriptor (docs/format.md §3) from strict JSON.
//!
//! Every schema problem becomes a KV007 finding that names the field path
//! (`geometry.num_layers`, `allocations[3].handle.hex`), the expected and the
//! found value; all problems are reported (up to [`MAX_FINDINGS`] per file),
//! not just the first. The field rules live in shared helpers
//! (`check::Checker`, `model`, `geometry`, ...) that the deployment profile
//! ([`crate::format::profile`]) uses too, so both files speak the same language.
//!
//! This is the only descriptor parser: [`crate::format::json`] reads the file into
//! a flat node list (one allocation), the checks below walk it (a lookup is
//! one key comparison when the members come in the spec's order), and the
//! digest is hashed from the same list ([`super::canon`]).

use super::canon::{self, format_digest};
use super::check::{parse_digest, Checker, Field, Obj, Path};
use super::{
    AllocSummary, Allocation, Descriptor, Dtype, Geometry, Handle, Model, NodeId, Owner, Writer,
    MAX_ALLOCATIONS, MAX_WORLD_SIZE, SCHEMA,
};
use crate::format::finding::{Code, Finding};
use crate::format::json::{self, quote_preview};
use uuid::Uuid;

/// Identity fields recovered best-effort, each only if it is individually
/// valid, so a broken descriptor can still be attributed to its group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ident {
    pub engine_id: Option<super::EngineId>,
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
    /// The schema problems behind the KV007 findings shown, with each
    /// field's path (`node.boot_id`), for callers that report the field on
    /// its own (the library's descriptor errors).
    pub schema_errors: Vec<super::check::FieldError>,
}

/// At most this many findings are reported for one file; when schema
/// problems exceed it, the last slot says how many were left out.
pub const MAX_FINDINGS: usize = 20;

/// Largest value of the "< 2^63" integers (epoch, num_blocks, timestamps).
pub(crate) const I63_MAX: u64 = i64::MAX as u64;
/// 2^32: upper bound of the per-rank geometry dimensions.
pub(crate) const DIM_MAX: u64 = 1 << 32;
pub(crate) const PID_MAX: u64 = i32::MAX as u64;
const MODEL_NAME_MAX: usize = 256;
const MODEL_REVISION_MAX: usize = 64;
const MODEL_QUANTIZATION_MAX: usize = 64;

/// The members of a descriptor (docs/format.md §3), in the spec's order.
const DESCRIPTOR_FIELDS: [&str; 17] = [
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
const ALLOCATION_FIELDS: &[&str] = &["id", "size_bytes", "offset_bytes", "handle", "content"];
const CONTENT_FIELDS: &[&str] = &["page_bytes", "pages", "sha256"];
const HANDLE_KINDS: &[&str] = &["cuda_ipc", "fabric", "posix_fd"];
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
    let mut out = ParseOutcome::default();
    let doc = match json::parse(bytes) {
        Ok(v) => v,
        Err(e) => {
            out.findings
                .push(Finding::reject(Code::KV006, format!("malformed: {e}")));
            return out;
        }
    };
    let mut c = Checker::new();
    let (descriptor, check_digest) = extract_descriptor(
        &mut c,
        Field::root(doc.root()),
        &mut out.ident,
        keep_allocations,
    );

    let mut digest_finding = None;
    if check_digest {
        let file_digest = doc
            .root()
            .get("digest")
            .and_then(|v| v.as_str())
            .and_then(|s| parse_digest(s).map(|d| (s, d)));
        if let Some((text, claimed)) = file_digest {
            let actual = canon::digest_without(&doc, "digest");
            digest_finding = digest_mismatch(&actual, &claimed, text);
        }
    }

    let slots = MAX_FINDINGS - usize::from(digest_finding.is_some());
    let total = c.total;
    let mut shown = c.errors;
    if total > slots {
        shown.truncate(slots - 1);
    }
    out.schema_errors = shown.clone();
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

/// The words of KV008 (docs/format.md §3.2), in the audit's finding and in
/// `kvcr seal`'s refusal alike.
pub const DIGEST_MISMATCH: &str = "digest does not match the content (torn or edited file)";

/// KV008 when the computed digest differs from the one the file claims
/// (`text` as written in the file).
fn digest_mismatch(actual: &[u8; 32], claimed: &[u8; 32], text: &str) -> Option<Finding> {
    (actual != claimed)
        .then(|| Finding::reject(Code::KV008, DIGEST_MISMATCH).values(format_digest(actual), text))
}

/// What a descriptor's JSON text says of its own digest (docs/format.md
/// §3.2), as `kvcr seal` asks before it writes one (§6.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DigestClaim {
    /// No top-level `digest` member: never sealed.
    Absent,
    /// A `digest` that is the digest of the content, as the audit reads it.
    Matches,
    /// A `digest` member that is not the content's digest: another digest
    /// (the content was edited or damaged after sealing) or no digest at
    /// all (`null`, `"sha256:stale"`: damaged, or never a seal).
    Differs {
        /// The member as written (a longer string is cut and quoted; a
        /// value that is not a string is named by its type).
        claimed: String,
        /// The digest of the content.
        actual: String,
    },
}

/// The [`DigestClaim`] of `doc`, a JSON text already read strictly.
pub fn digest_claim(doc: &json::Doc<'_>) -> DigestClaim {
    let Some(member) = doc.root().get("digest") else {
        return DigestClaim::Absent;
    };
    let actual = canon::digest_without(doc, "digest");
    if member.as_str().and_then(parse_digest) == Some(actual) {
        return DigestClaim::Matches;
    }
    let claimed = match member.as_str() {
        // A digest's length (71) in full; anything longer is cut.
        Some(text) if text.chars().count() <= 80 => text.to_string(),
        Some(text) => quote_preview(text),
        None => format!("{} (not a string)", member.type_name()),
    };
    DigestClaim::Differs {
        claimed,
        actual: format_digest(&actual),
    }
}

/// SHA-256 of the canonical form of `bytes` (JSON) without its top-level
/// `digest` member: the value a descriptor's `digest` must carry.
pub fn compute_digest(bytes: &[u8]) -> Result<[u8; 32], String> {
    let v = json::parse(bytes).map_err(|e| e.to_string())?;
    Ok(canon::digest_without(&v, "digest"))
}

/// Returns the descriptor (when schema-valid) and whether the digest should
/// be checked (not for a file that declares another schema).
fn extract_descriptor(
    c: &mut Checker,
    root: Field<'_, '_>,
    ident: &mut Ident,
    keep_allocations: bool,
) -> (Option<Descriptor>, bool) {
    let Some(members) = c.members(&root, || {
        "object (a kvcr.retained-rank/v1 descriptor)".into()
    }) else {
        return (None, false);
    };
    let o = Obj::new(root.path, members);

    // A file that declares another schema is judged by that alone: its
    // fields follow other rules, and a flood of v1 errors would hide the cause.
    if let Some(s) = o.get("schema").and_then(|v| v.as_str()) {
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
    let name = c.string(o.at("name"), 1, MODEL_NAME_MAX);
    let revision = c.string(o.at("revision"), 1, MODEL_REVISION_MAX);
    let quantization = c.string_or_null(o.at("quantization"), 1, MODEL_QUANTIZATION_MAX);
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
    geometry_fits(c, &o.path, &g).then_some(g)
}

/// The §3.1 overflow rule of a geometry already read: true when the bytes
/// one rank needs fit in a u64.
fn geometry_fits(c: &mut Checker, path: &Path<'_>, g: &Geometry) -> bool {
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
            path,
            "geometry bytes overflow",
            format!("bytes needed ≤ {} (u64)", u64::MAX),
            product,
        );
        return false;
    }
    true
}

/// The rules of a `geometry` already read (from a report, docs/format.md
/// §10.2): each dimension's range and the overflow rule, as [`geometry`].
pub(crate) fn geometry_value(c: &mut Checker, path: &Path<'_>, g: &Geometry) -> bool {
    let mut ok = true;
    for (field, v, hi) in [
        ("num_layers", g.num_layers, DIM_MAX),
        ("kv_heads_per_rank", g.kv_heads_per_rank, DIM_MAX),
        ("head_size", g.head_size, DIM_MAX),
        ("block_size", g.block_size, DIM_MAX),
        ("num_blocks", g.num_blocks, I63_MAX),
    ] {
        ok &= c.uint_value(&path.key(field), v, 1, hi);
    }
    ok && geometry_fits(c, path, g)
}

/// The rules of a `model` already read, as [`model`].
pub(crate) fn model_value(c: &mut Checker, path: &Path<'_>, m: &Model) -> bool {
    let mut ok = c.string_str(&path.key("name"), &m.name, 1, MODEL_NAME_MAX);
    ok &= c.string_str(&path.key("revision"), &m.revision, 1, MODEL_REVISION_MAX);
    if let Some(q) = &m.quantization {
        ok &= c.string_str(&path.key("quantization"), q, 1, MODEL_QUANTIZATION_MAX);
    }
    ok
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
) -> Option<(Option<Vec<Allocation>>, AllocSummary)> {
    let items = c.array(&f, 1, MAX_ALLOCATIONS, "allocations")?;
    let mut b = AllocBuilder::new(items.len(), keep);
    let mut ok = true;
    let mut handle = Handle::PosixFd(0);
    for (i, item) in items.iter().enumerate() {
        match allocation(c, f.item(i, item), &mut handle) {
            Some((id, size_bytes, offset_bytes, content)) if ok => {
                b.push(id, size_bytes, offset_bytes, &handle, content)
            }
            Some(_) => {}
            None => ok = false,
        }
    }
    ok.then(|| b.finish())
}

/// Collects valid allocations (when kept) and their [`AllocSummary`].
struct AllocBuilder<'v> {
    /// `None` when the allocations are not kept.
    out: Option<Vec<Allocation>>,
    ids: Vec<&'v str>,
    sum: AllocSummary,
}

impl<'v> AllocBuilder<'v> {
    fn new(n: usize, keep: bool) -> Self {
        AllocBuilder {
            out: keep.then(|| Vec::with_capacity(n)),
            ids: Vec::with_capacity(n),
            sum: AllocSummary {
                handles: Vec::with_capacity(n),
                ranges: Vec::with_capacity(n),
                ..AllocSummary::default()
            },
        }
    }

    fn push(
        &mut self,
        id: &'v str,
        size_bytes: u64,
        offset_bytes: u64,
        handle: &Handle,
        content: Option<crate::format::content::Content>,
    ) {
        self.sum.count += 1;
        self.sum.total_bytes += u128::from(size_bytes);
        self.sum.carries_bytes |= handle.carries_bytes();
        self.sum.with_content += usize::from(content.is_some());
        self.ids.push(id);
        self.sum.handles.push(super::HandleId::of(handle));
        self.sum
            .ranges
            .push((offset_bytes, offset_bytes.saturating_add(size_bytes)));
        if let Some(out) = &mut self.out {
            out.push(Allocation {
                id: id.to_owned(),
                size_bytes,
                offset_bytes,
                handle: handle.clone(),
                content,
            });
        }
    }

    fn finish(mut self) -> (Option<Vec<Allocation>>, AllocSummary) {
        self.sum.duplicate_ids = duplicates(&self.ids);
        // The ranges decide only between allocations of one handle within
        // this descriptor (`crate::rules::handles`): kept when a handle
        // repeats here, dropped otherwise (16 bytes an allocation that a
        // large audit would hold for every descriptor).
        if !repeats(&self.sum.handles) {
            self.sum.ranges = Vec::new();
        }
        (self.out, self.sum)
    }
}

/// Whether any handle identity occurs twice.
fn repeats(handles: &[super::HandleId]) -> bool {
    if handles.len() <= LINEAR_DUP_SCAN {
        return handles
            .iter()
            .enumerate()
            .any(|(i, h)| handles[..i].contains(h));
    }
    let mut sorted = handles.to_vec();
    sorted.sort_unstable();
    sorted.windows(2).any(|w| w[0] == w[1])
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
/// The handle goes to `handle`.
fn allocation<'v>(
    c: &mut Checker,
    f: Field<'_, 'v>,
    handle: &mut Handle,
) -> Option<(&'v str, u64, u64, Option<crate::format::content::Content>)> {
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
    let handle = self::handle(c, o.at("handle"), handle);
    let cf = o.at("content");
    let content = match cf.value {
        None => Some(None),
        Some(_) => self::content(c, cf, size_bytes, offset_bytes).map(Some),
    };
    Some((id?, size_bytes?, offset_bytes?, content?)).filter(|_| handle.is_some())
}

/// `content` (docs/format.md §3.6): `page_bytes` a power of two from 512 to
/// 1 MiB, `pages` 1 to 64 (1 exactly when `size_bytes ≤ page_bytes`, at
/// least 2 otherwise), `sha256` 64 lowercase hex digits.
fn content(
    c: &mut Checker,
    f: Field<'_, '_>,
    size_bytes: Option<u64>,
    offset_bytes: Option<u64>,
) -> Option<crate::format::content::Content> {
    use crate::format::content::{PAGES_MAX, PAGE_MAX, PAGE_MIN};
    let o = c.object(f, CONTENT_FIELDS)?;
    let page_bytes = c.uint(o.at("page_bytes"), PAGE_MIN, PAGE_MAX);
    if let Some(p) = page_bytes.filter(|p| !p.is_power_of_two()) {
        c.fail(
            &o.at("page_bytes").path,
            "not a power of two",
            format!("a power of two from {PAGE_MIN} to {PAGE_MAX}"),
            p.to_string(),
        );
        return None;
    }
    let pages = c.uint(o.at("pages"), 1, PAGES_MAX);
    let sf = o.at("sha256");
    let sha = match c.string(sf, 0, usize::MAX) {
        Some(s) => {
            let mut out = [0u8; 32];
            if s.len() == 64
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                && crate::format::hex::decode(s.as_bytes(), &mut out, false)
            {
                Some(out)
            } else {
                let shown: String = s.chars().take(80).collect();
                c.fail(
                    &o.at("sha256").path,
                    "malformed sha256",
                    "64 lowercase hex digits",
                    format!("{shown:?}"),
                );
                None
            }
        }
        None => None,
    };
    let (page_bytes, pages, sha256) = (page_bytes?, pages?, sha?);
    let (size, offset) = (size_bytes?, offset_bytes?);
    if let Err(e) = crate::format::content::sampled_ranges(size, offset, page_bytes, pages) {
        let want = if size <= page_bytes {
            "pages 1 (size_bytes ≤ page_bytes)".to_string()
        } else {
            "pages from 2 to 64 (size_bytes > page_bytes)".to_string()
        };
        let why = match e {
            crate::format::content::ContentError::Shape(s)
            | crate::format::content::ContentError::Read(s) => s,
        };
        c.fail(
            &o.path,
            why,
            want,
            format!("pages {pages}, size_bytes {size}"),
        );
        return None;
    }
    Some(crate::format::content::Content {
        page_bytes,
        pages,
        sha256,
    })
}

/// A valid handle is written to `out`.
fn handle(c: &mut Checker, f: Field<'_, '_>, out: &mut Handle) -> Option<()> {
    let members = c.members(&f, || {
        "object {\"kind\": cuda_ipc|fabric, \"hex\": …} or {\"kind\": posix_fd, \"fd\": …}".into()
    })?;
    let o = Obj::new(f.path, members);
    let kind = c.one_of(o.at("kind"), HANDLE_KINDS);
    let known: &[&str] = match kind {
        Some("posix_fd") => &["kind", "fd"],
        Some(_) => &["kind", "hex"],
        None => &["kind", "hex", "fd"],
    };
    c.unknown_fields(&o, known);
    *out = match kind? {
        "cuda_ipc" => Handle::CudaIpc([0; 64]),
        "fabric" => Handle::Fabric([0; 64]),
        _ => Handle::PosixFd(c.uint(o.at("fd"), 0, PID_MAX)? as i32),
    };
    match out {
        Handle::CudaIpc(bytes) | Handle::Fabric(bytes) => c.hex64(o.at("hex"), bytes),
        Handle::PosixFd(_) => Some(()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::format::descriptor::check::MISSING;
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
                {"id": "kv-0", "size_bytes": 1342177280u64,
                 "handle": {"kind": "cuda_ipc", "hex": "ab".repeat(64)}},
                {"id": "kv-1", "size_bytes": 1024, "handle": {"kind": "posix_fd", "fd": 17}},
                {"id": "kv-2", "size_bytes": 1024,
                 "handle": {"kind": "fabric", "hex": "0F".repeat(64)}}
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
        let kept = d.allocations.unwrap();
        assert!(kept.iter().all(|a| a.offset_bytes == 0));
        // Present: any integer ≥ 0, kept, and part of the digest like any member.
        let mut v = doc();
        v["allocations"][0]["offset_bytes"] = json!(4096);
        v["allocations"][1]["offset_bytes"] = json!(0);
        let out = parse_v(v.clone());
        assert!(out.findings.is_empty(), "{:#?}", out.findings);
        let d = out.descriptor.unwrap();
        let kept = d.allocations.as_deref().unwrap();
        assert_eq!(kept[0].offset_bytes, 4096);
        assert_eq!(kept[1].offset_bytes, 0);
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
        let kept = d.allocations.as_deref().unwrap();
        assert_eq!(kept.len(), 3);
        assert_eq!(kept[0].handle, Handle::CudaIpc([0xab; 64]));
        assert_eq!(kept[1].handle, Handle::PosixFd(17));
        assert_eq!(kept[2].handle, Handle::Fabric([0x0f; 64]));
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
        let msgs: Vec<&str> = out
            .findings
            .iter()
            .map(|f| f.message.as_text().unwrap())
            .collect();
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
        only(&out, Code::KV006)
            .message
            .as_text()
            .unwrap()
            .to_string()
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

    /// Kept from the former fast path's tests: the files it answered for
    /// (clean, escape-free, plain integers) and the files it handed to the
    /// general parser now take one path, and give the same outcomes.
    mod one_path {
        use super::super::parse_descriptor_with;
        use crate::format::finding::Code;
        use crate::testkit::{seal, to_bytes, Desc};
        use proptest::prelude::*;
        use serde_json::{json, Value};

        fn sealed(edit: impl FnOnce(&mut Value)) -> Vec<u8> {
            let mut d = Desc::new("fast:path/1", 1, 4, 2);
            d.allocations = 3;
            let mut v = d.value();
            edit(&mut v);
            seal(&mut v);
            to_bytes(&v)
        }

        /// The byte ranges are kept only where a handle repeats within the
        /// descriptor (the one case they decide, `crate::rules::handles`),
        /// in allocation order; distinct handles hold none.
        #[test]
        fn ranges_are_kept_only_for_a_repeated_handle() {
            let distinct = parse_descriptor_with(&sealed(|_| {}), false);
            let d = distinct.descriptor.expect("parses");
            assert_eq!(d.alloc_summary.handles.len(), 3);
            assert!(d.alloc_summary.ranges.is_empty());
            let repeated = parse_descriptor_with(
                &sealed(|v| {
                    let h = v["allocations"][0]["handle"].clone();
                    v["allocations"][2]["handle"] = h;
                }),
                false,
            );
            let d = repeated.descriptor.expect("parses");
            let sizes: Vec<u64> = (0..3)
                .map(|i| d.alloc_summary.ranges[i].1 - d.alloc_summary.ranges[i].0)
                .collect();
            assert_eq!(d.alloc_summary.ranges.len(), 3, "{:?}", d.alloc_summary);
            assert!(sizes.iter().all(|&n| n > 0), "{sizes:?}");
        }

        /// Clean, with and without the allocations kept; the summary agrees.
        fn clean(bytes: &[u8]) -> String {
            let full = parse_descriptor_with(bytes, true);
            let lean = parse_descriptor_with(bytes, false);
            assert!(full.findings.is_empty(), "{:?}", full.findings);
            assert!(lean.findings.is_empty(), "{:?}", lean.findings);
            let (f, l) = (full.descriptor.unwrap(), lean.descriptor.unwrap());
            assert_eq!(f.alloc_summary, l.alloc_summary);
            assert_eq!(
                f.allocations.as_ref().map(Vec::len),
                Some(f.alloc_summary.count)
            );
            assert_eq!(l.allocations, None);
            assert_eq!(full.ident, lean.ident);
            format!("{:?}", (full.ident, f))
        }

        /// Rejected with findings and no descriptor.
        fn rejected(bytes: &[u8]) {
            let out = parse_descriptor_with(bytes, false);
            assert!(
                !out.findings.is_empty(),
                "{}",
                String::from_utf8_lossy(bytes)
            );
            assert!(out.descriptor.is_none());
        }

        #[test]
        fn valid_shapes() {
            for kind in ["fabric", "cuda_ipc", "posix_fd"] {
                let mut d = Desc::new("e", 0, 1, 1);
                d.handle_kind = kind;
                d.allocations = 16;
                clean(&d.bytes());
            }
            clean(&sealed(|_| {}));
            // Compact, keys sorted, digest first: any layout.
            let mut v = Desc::new("e", 0, 1, 1).value();
            seal(&mut v);
            clean(&serde_json::to_vec(&v).unwrap());
            clean(&sealed(|v| {
                v["model"]["quantization"] = json!("fp8");
                v["model"]["name"] = json!("modèle-éè/Ω");
                v["gpu_uuid"] = json!("MIG-4b0c6f1e-2d3a-4c5b-8e9f-0a1b2c3d4e5f");
                v["geometry"]["use_mla"] = json!(true);
                v["writer"]["quiesced"] = json!(false);
                v["allocations"][1]["id"] = json!("kv-0"); // duplicate id: a verdict matter
                v["allocations"][2]["handle"]["hex"] = json!("AB".repeat(64));
            }));
            // Extreme values in range.
            clean(&sealed(|v| {
                v["owner"]["start_ticks"] = json!(u64::MAX);
                v["allocations"][0]["size_bytes"] = json!(u64::MAX);
                v["epoch"] = json!(i64::MAX);
                v["created_unix_ms"] = json!(0);
            }));
        }

        #[test]
        fn representation_does_not_matter() {
            // What the former fast path read (plain strings, spec order,
            // pretty) and what only the general parser read (escapes, other
            // orders, no whitespace) give one and the same outcome.
            let plain = sealed(|_| {});
            let text = String::from_utf8(plain.clone()).unwrap();
            let escaped = text
                .replacen("gpu-node-17", "gpu-node-\\u0031\\u0037", 1)
                .replacen("\"schema\"", "\"sch\\u0065ma\"", 1)
                .replacen("kvcr.retained-rank/v1", "kvcr.retained-rank\\/v1", 1);
            assert_ne!(escaped, text);
            let v: Value = serde_json::from_slice(&plain).unwrap();
            let compact = serde_json::to_vec(&v).unwrap();
            let mut reversed = String::from("{");
            for (i, (k, x)) in v.as_object().unwrap().iter().rev().enumerate() {
                if i > 0 {
                    reversed.push_str(" ,\r\n\t");
                }
                reversed.push_str(&format!("{}:{}", json!(k), x));
            }
            reversed.push('}');
            let want = clean(&plain);
            assert_eq!(clean(escaped.as_bytes()), want);
            assert_eq!(clean(&compact), want);
            assert_eq!(clean(reversed.as_bytes()), want);
        }

        #[test]
        fn offset_bytes() {
            clean(&sealed(|v| {
                v["allocations"][0]["offset_bytes"] = json!(0);
                v["allocations"][1]["offset_bytes"] = json!(1u64 << 40);
            }));
            // Either key order.
            let b = String::from_utf8(sealed(|_| {})).unwrap().replacen(
                "\"id\": \"kv-0\"",
                "\"offset_bytes\": 7, \"id\": \"kv-0\"",
                1,
            );
            let mut v: Value = serde_json::from_str(&b).unwrap();
            seal(&mut v);
            clean(&to_bytes(&v));
            // Overflow, a negative, a float, null: schema errors.
            for bad in [json!(u64::MAX), json!(-1), json!(1.0), json!(null)] {
                rejected(&sealed(|v| {
                    v["allocations"][2]["offset_bytes"] = bad.clone()
                }));
            }
        }

        #[test]
        fn digest_mismatch_keeps_the_descriptor() {
            let b = String::from_utf8(sealed(|_| {}))
                .unwrap()
                .replace("\"pid\": 4242", "\"pid\": 4243");
            for keep in [true, false] {
                let out = parse_descriptor_with(b.as_bytes(), keep);
                assert_eq!(out.findings.len(), 1);
                assert_eq!(out.findings[0].code, Code::KV008);
                assert!(out.descriptor.is_some());
            }
        }

        #[test]
        fn everything_else_is_reported() {
            let good = String::from_utf8(sealed(|_| {})).unwrap();
            let edits: Vec<String> = vec![
                good.replacen("\"tp\": 4", "\"tp\": 4.0", 1),
                good.replacen("\"tp\": 4", "\"tp\": 04", 1),
                good.replacen("\"tp\": 4", "\"tp\": 4e0", 1),
                good.replacen("\"rank\": 1", "\"rank\": -1", 1),
                good.replacen("\"rank\": 1", "\"rank\": 99999999999999999999999", 1),
                good.replacen("{", "{\"rank\": 1,", 1),
                good.replacen("{", "{\"extra\": 1,", 1),
                good.replacen("\"kind\": \"fabric\"", "\"kind\": \"fabric\", \"fd\": 3", 1),
                good.replacen("kvcr.retained-rank/v1", "kvcr.retained-rank/v2", 1),
                good.replacen("\"quiesced\": true", "\"quiesced\": 1", 1),
                good.replacen("bfloat16", "bf16", 1),
                format!("\u{feff}{good}"),
                format!("{good} x"),
                format!("[{good}]"),
                good.replacen("\"tp\": 4,", "\"tp\": 4,,", 1),
                good.replacen("\"pp\": 2", "\"pp\": 2\u{1}", 1),
                good[..good.len() / 2].to_string(),
                String::new(),
            ];
            for e in &edits {
                rejected(e.as_bytes());
            }
            // -0 is the integer 0 (a valid rank): only the digest differs.
            let z = good.replacen("\"rank\": 1", "\"rank\": -0", 1);
            let out = parse_descriptor_with(z.as_bytes(), false);
            assert_eq!(out.ident.rank, Some(0));
            assert_eq!(out.findings.len(), 1);
            assert_eq!(out.findings[0].code, Code::KV008);
            // Geometry that overflows u64.
            rejected(&sealed(|v| v["geometry"]["num_blocks"] = json!(i64::MAX)));
            // Deep nesting.
            rejected(format!("{}{}", "[".repeat(100), "]".repeat(100)).as_bytes());
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(300))]
            // Keeping the allocations or not changes nothing else.
            #[test]
            fn keeping_allocations_changes_nothing_else(
                pos in any::<prop::sample::Index>(),
                byte in any::<u8>(),
                cut in any::<bool>(),
            ) {
                let mut b = sealed(|_| {});
                let i = pos.index(b.len());
                if cut { b.truncate(i); } else { b[i] = byte; }
                let full = parse_descriptor_with(&b, true);
                let mut lean = parse_descriptor_with(&b, false);
                let mut full_d = full.descriptor.clone();
                if let Some(d) = full_d.as_mut() {
                    d.allocations = None;
                }
                prop_assert_eq!(format!("{:?}", full.findings), format!("{:?}", lean.findings));
                prop_assert_eq!(full_d, lean.descriptor.take());
                prop_assert_eq!(full.ident, lean.ident);
            }
        }
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
            fn edits_never_pass_unnoticed(
                pos in any::<prop::sample::Index>(),
                byte in any::<u8>(),
                cut in any::<bool>(),
            ) {
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
                prop_assert!(
                    out.descriptor.is_none() || out.findings.iter().all(|f| f.code == Code::KV008)
                );
            }
        }

        fn canon_of(b: &[u8]) -> Option<String> {
            let v = json::parse(b).ok()?;
            Some(String::from_utf8(canon::canonical_bytes(&v, None)).unwrap())
        }
    }
}
