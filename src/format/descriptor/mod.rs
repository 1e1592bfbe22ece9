//! Descriptor v1 (docs/format.md §3): typed model, strict parsing and the canonical digest.
//!
//! Parsing is three steps over one buffer: [`json`] (a strict, depth-bounded
//! JSON reader that refuses duplicate keys, trailing data and BOMs, into a
//! flat node list), [`canon`] (the docs/format.md §3.2 canonical form and its
//! digest, from that list) and [`parse`] (typed extraction through the
//! `check` layer, naming the field and both values on every error). There
//! is one parser: valid and invalid files take the same path.

pub mod canon;
/// The strict JSON reader descriptors are parsed with (`crate::format::json`,
/// kept here as the public path `kvcr_audit::descriptor::json`).
pub use crate::format::json;
pub(crate) mod check;
pub mod parse;

use serde::Serialize;
use std::fmt;
use uuid::Uuid;

pub use check::FieldError;
pub use parse::{parse_descriptor, parse_descriptor_with, Ident, ParseOutcome};

pub use crate::format::ids::RETAINED_RANK as SCHEMA;
/// Files larger than this are rejected unread (KV004).
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Deepest allowed nesting of arrays/objects (the top-level object is depth 1).
pub use crate::format::json::MAX_DEPTH;
pub const MAX_WORLD_SIZE: u64 = 4096;
pub const MAX_ALLOCATIONS: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dtype {
    Float16,
    Bfloat16,
    Float32,
    Float8E4m3,
    Float8E5m2,
    Int8,
}

impl Dtype {
    pub const ALL: [Dtype; 6] = [
        Dtype::Float16,
        Dtype::Bfloat16,
        Dtype::Float32,
        Dtype::Float8E4m3,
        Dtype::Float8E5m2,
        Dtype::Int8,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Dtype::Float16 => "float16",
            Dtype::Bfloat16 => "bfloat16",
            Dtype::Float32 => "float32",
            Dtype::Float8E4m3 => "float8_e4m3",
            Dtype::Float8E5m2 => "float8_e5m2",
            Dtype::Int8 => "int8",
        }
    }
    pub fn parse(s: &str) -> Option<Dtype> {
        Dtype::ALL.into_iter().find(|d| d.as_str() == s)
    }
    /// docs/format.md §3.1: 4 for float32, 2 for float16/bfloat16, 1 otherwise.
    pub fn bytes(self) -> u64 {
        match self {
            Dtype::Float32 => 4,
            Dtype::Float16 | Dtype::Bfloat16 => 2,
            _ => 1,
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Geometry {
    pub num_layers: u64,
    pub kv_heads_per_rank: u64,
    pub head_size: u64,
    pub block_size: u64,
    pub num_blocks: u64,
    pub dtype: Dtype,
    pub use_mla: bool,
}

impl Geometry {
    /// Bytes one rank needs (docs/format.md §3.1); `None` on overflow of any product.
    pub fn bytes_needed(&self) -> Option<u64> {
        let kv = if self.use_mla { 1 } else { 2 };
        self.num_layers
            .checked_mul(kv)?
            .checked_mul(self.num_blocks)?
            .checked_mul(self.block_size)?
            .checked_mul(self.kv_heads_per_rank)?
            .checked_mul(self.head_size)?
            .checked_mul(self.dtype.bytes())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    pub name: String,
    pub revision: String,
    pub quantization: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeId {
    pub hostname: String,
    pub boot_id: Uuid,
}

/// The process that holds the memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Owner {
    pub pid: i32,
    pub start_ticks: u64,
}

/// The engine process that last wrote this rank's KV.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Writer {
    pub pid: i32,
    pub start_ticks: u64,
    pub quiesced: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuKind {
    Gpu,
    Mig,
}

/// `GPU-<uuid>` or `MIG-<uuid>`.
///
/// A GPU's identity is its 16 UUID bytes (docs/format.md §3.4): equality,
/// ordering and hashing ignore the prefix, so `GPU-<u>` and `MIG-<u>` are the
/// same GPU everywhere a `GpuUuid` is compared (verdict, profile, node probe,
/// import plan, backends). The prefix is kept for display only.
#[derive(Clone, Copy, Debug)]
pub struct GpuUuid {
    pub kind: GpuKind,
    pub uuid: Uuid,
}

impl PartialEq for GpuUuid {
    fn eq(&self, other: &Self) -> bool {
        self.uuid.as_bytes() == other.uuid.as_bytes()
    }
}
impl Eq for GpuUuid {}
impl std::hash::Hash for GpuUuid {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.uuid.as_bytes().hash(h)
    }
}
impl PartialOrd for GpuUuid {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for GpuUuid {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.uuid.as_bytes().cmp(other.uuid.as_bytes())
    }
}

impl GpuUuid {
    /// Strict form: prefix + canonical lowercase hyphenated UUID, not nil.
    pub fn parse(s: &str) -> Option<GpuUuid> {
        let (kind, rest) = if let Some(r) = s.strip_prefix("GPU-") {
            (GpuKind::Gpu, r)
        } else if let Some(r) = s.strip_prefix("MIG-") {
            (GpuKind::Mig, r)
        } else {
            return None;
        };
        let uuid = parse_canonical_uuid(rest)?;
        if uuid.is_nil() {
            return None;
        }
        Some(GpuUuid { kind, uuid })
    }

    /// Its text as 40 ASCII bytes: the prefix and the lowercase hyphenated
    /// UUID, written in one piece (every rank row of a report and every
    /// plan carries its GPU).
    fn ascii(&self) -> [u8; 40] {
        let mut text = [0u8; 40];
        let (prefix, rest) = text.split_at_mut(4);
        prefix.copy_from_slice(match self.kind {
            GpuKind::Gpu => b"GPU-",
            GpuKind::Mig => b"MIG-",
        });
        self.uuid.hyphenated().encode_lower(rest);
        text
    }
}

impl fmt::Display for GpuUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(std::str::from_utf8(&self.ascii()).map_err(|_| fmt::Error)?)
    }
}

impl Serialize for GpuUuid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A canonical lowercase hyphenated UUID (36 chars); anything else is `None`.
pub fn parse_canonical_uuid(s: &str) -> Option<Uuid> {
    // One pass: the four hyphens where they belong, and the five groups of
    // lowercase hex digits decoded as they are checked (the `uuid` crate's
    // parser would check them again, and accept uppercase).
    let b = s.as_bytes();
    if b.len() != 36 || b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
        return None;
    }
    let mut out = [0u8; 16];
    let ok = crate::format::hex::decode(&b[0..8], &mut out[0..4], false)
        && crate::format::hex::decode(&b[9..13], &mut out[4..6], false)
        && crate::format::hex::decode(&b[14..18], &mut out[6..8], false)
        && crate::format::hex::decode(&b[19..23], &mut out[8..10], false)
        && crate::format::hex::decode(&b[24..36], &mut out[10..16], false);
    ok.then(|| Uuid::from_bytes(out))
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Handle {
    /// Legacy CUDA IPC handle (64 bytes); valid only while the owner lives.
    CudaIpc([u8; 64]),
    /// CUDA VMM fabric handle (64 bytes).
    Fabric([u8; 64]),
    /// A VMM POSIX-FD handle open inside the owner process.
    PosixFd(i32),
}

/// An engine id (docs/format.md §3 `engine_id`), with its rule in one
/// place: 1–128 characters, each one of `A-Z a-z 0-9 . _ : / -`. The
/// descriptor reader (and a report's ids), `--engine` and the library API
/// all check it here.
///
/// Only a checked id is one: [`EngineId::parse`] (or the descriptor and
/// profile readers) make it, so a field of this type never holds an
/// unchecked string. It reads as the `str` it wraps (`Deref`), compares
/// and orders by its bytes, and prints, debugs and serializes exactly as
/// that `str` does (the JSON and text outputs are those of a `String`).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EngineId(String);

impl std::ops::Deref for EngineId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for EngineId {
    type Err = &'static str;
    fn from_str(s: &str) -> Result<EngineId, &'static str> {
        EngineId::parse(s)
    }
}

impl AsRef<str> for EngineId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Lookups by `&str` in maps keyed by [`EngineId`]: its order is the
/// string's (byte order).
impl std::borrow::Borrow<str> for EngineId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for EngineId {
    fn eq(&self, other: &str) -> bool {
        self.0.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<&str> for EngineId {
    fn eq(&self, other: &&str) -> bool {
        self.0.as_bytes() == other.as_bytes()
    }
}

impl fmt::Display for EngineId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.0.as_str(), f)
    }
}

impl fmt::Debug for EngineId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0.as_str(), f)
    }
}

impl Serialize for EngineId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl EngineId {
    pub const MIN_CHARS: usize = 1;
    pub const MAX_CHARS: usize = 128;
    /// The rule, as a finding's `expected` value.
    pub const EXPECTED: &'static str = "string of 1–128 chars from [A-Za-z0-9._:/-]";

    /// Whether `c` may appear in an engine id.
    pub fn allowed(c: char) -> bool {
        c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '/' | '-')
    }

    /// The first character the rule refuses, with its byte offset.
    pub fn first_bad(s: &str) -> Option<(usize, char)> {
        s.char_indices().find(|&(_, c)| !Self::allowed(c))
    }

    /// `s` when it is an engine id; else the rule, in words.
    pub fn parse(s: &str) -> Result<EngineId, &'static str> {
        let n = s.chars().count();
        if (Self::MIN_CHARS..=Self::MAX_CHARS).contains(&n) && Self::first_bad(s).is_none() {
            Ok(EngineId(s.to_owned()))
        } else {
            Err("an engine_id is 1-128 characters of A-Z a-z 0-9 . _ : / -")
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

/// The kind of a [`Handle`] (docs/format.md §3.3 `handle.kind`): every
/// kind the reader accepts, so a new one cannot be mislabelled. The
/// discriminant is the kind's byte in a [`HandleId`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum HandleKind {
    CudaIpc = 0,
    Fabric = 1,
    PosixFd = 2,
}

impl HandleKind {
    /// The kind as a descriptor writes it.
    pub fn name(self) -> &'static str {
        match self {
            HandleKind::CudaIpc => "cuda_ipc",
            HandleKind::Fabric => "fabric",
            HandleKind::PosixFd => "posix_fd",
        }
    }
}

impl Handle {
    pub fn handle_kind(&self) -> HandleKind {
        match self {
            Handle::CudaIpc(_) => HandleKind::CudaIpc,
            Handle::Fabric(_) => HandleKind::Fabric,
            Handle::PosixFd(_) => HandleKind::PosixFd,
        }
    }

    pub fn kind(&self) -> &'static str {
        self.handle_kind().name()
    }
    /// True when the descriptor itself carries bytes that grant access.
    pub fn carries_bytes(&self) -> bool {
        !matches!(self, Handle::PosixFd(_))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation {
    pub id: String,
    pub size_bytes: u64,
    /// Where the rank's bytes start inside the exported allocation
    /// (docs/format.md §3.3; 0 when absent). `offset_bytes + size_bytes` never overflows.
    pub offset_bytes: u64,
    pub handle: Handle,
    /// The optional content check (docs/format.md §3.6), its shape checked
    /// against `size_bytes` and `offset_bytes` at parse time.
    pub content: Option<crate::format::content::Content>,
}

/// What the verdict needs to know about `allocations`, computed while
/// parsing, so an audit can drop the allocations themselves (16 handles of
/// 64 bytes each in a typical descriptor) and keep only this.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllocSummary {
    /// Number of allocations.
    pub count: usize,
    /// Sum of `size_bytes` (u128: 4096 × u64 cannot overflow it).
    pub total_bytes: u128,
    /// Ids that occur more than once, each listed once, in the order of
    /// their first repetition.
    pub duplicate_ids: Vec<String>,
    /// Whether any handle carries bytes that grant access (`cuda_ipc`, `fabric`).
    pub carries_bytes: bool,
    /// Every allocation's handle identity, in order, kept so the verdict can
    /// refuse one handle used twice (KV111) even when the allocations
    /// themselves are dropped.
    pub handles: Vec<HandleId>,
    /// Every allocation's byte range `[offset_bytes, offset_bytes +
    /// size_bytes)` in its handle's memory, in order: one handle at
    /// disjoint ranges is one exported segment carved into allocations, at
    /// overlapping ranges the same memory twice (KV111, docs/format.md §8.10).
    /// Empty when no handle repeats within the descriptor: the ranges
    /// decide nothing then, and a large audit does not hold them.
    pub ranges: Vec<(u64, u64)>,
    /// How many allocations carry a `content` member (docs/format.md §3.6).
    pub with_content: usize,
}

/// A handle's identity in 17 bytes instead of 65: its kind and, for
/// `cuda_ipc`/`fabric`, a 128-bit mix of the 64 handle bytes; for
/// `posix_fd`, the fd (the owner pid is added by the verdict). Equal handles
/// always have equal ids, so reuse is never missed; two distinct handles
/// that happened to share an id could only be rejected (KV111), never
/// accepted — a crafted collision only rejects its own group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HandleId {
    pub kind: HandleKind,
    pub id: [u8; 16],
}

impl HandleId {
    pub fn of(h: &Handle) -> HandleId {
        // Two independent multiply-rotate lanes over the eight words, each
        // finished with MurmurHash3's fmix64: cheap next to the file's SHA-256.
        fn fmix(mut k: u64) -> u64 {
            k ^= k >> 33;
            k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
            k ^= k >> 33;
            k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
            k ^ (k >> 33)
        }
        let mix = |kind: HandleKind, b: &[u8; 64]| {
            let (mut h1, mut h2) = (
                0x9e37_79b9_7f4a_7c15u64 ^ kind as u8 as u64,
                0x6a09_e667_f3bc_c909u64,
            );
            for w in b.chunks_exact(8) {
                let w = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
                h1 = (h1 ^ w).wrapping_mul(0x87c3_7b91_1142_53d5).rotate_left(31);
                h2 = (h2 ^ w.rotate_left(29))
                    .wrapping_mul(0x4cf5_ad43_2745_937f)
                    .rotate_left(33);
                h1 = h1.wrapping_add(h2);
            }
            let (a, b) = (fmix(h1), fmix(h2 ^ h1.rotate_left(17)));
            let mut id = [0u8; 16];
            id[..8].copy_from_slice(&a.to_le_bytes());
            id[8..].copy_from_slice(&b.to_le_bytes());
            HandleId { kind, id }
        };
        match h {
            Handle::CudaIpc(b) => mix(HandleKind::CudaIpc, b),
            Handle::Fabric(b) => mix(HandleKind::Fabric, b),
            Handle::PosixFd(fd) => {
                let mut id = [0u8; 16];
                id[..4].copy_from_slice(&fd.to_be_bytes());
                HandleId {
                    kind: HandleKind::PosixFd,
                    id,
                }
            }
        }
    }

    pub fn kind_name(&self) -> &'static str {
        self.kind.name()
    }

    /// The fd of a `posix_fd` handle.
    pub fn fd(&self) -> Option<i32> {
        (self.kind == HandleKind::PosixFd)
            .then(|| i32::from_be_bytes([self.id[0], self.id[1], self.id[2], self.id[3]]))
    }
}

/// A fully parsed, schema-valid descriptor. The digest may still mismatch;
/// that is reported as a KV008 finding beside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Descriptor {
    pub engine_id: EngineId,
    pub incarnation: Uuid,
    pub epoch: u64,
    pub rank: u64,
    pub world_size: u64,
    pub tp: u64,
    pub pp: u64,
    pub node: NodeId,
    pub gpu_uuid: GpuUuid,
    pub model: Model,
    pub geometry: Geometry,
    pub owner: Owner,
    pub writer: Writer,
    /// The allocations with their handles; `None` when the descriptor was
    /// parsed without them ([`parse_descriptor_with`], as `kvcr audit`
    /// does; a descriptor always has at least one). [`Descriptor::alloc_summary`]
    /// is always complete.
    pub allocations: Option<Vec<Allocation>>,
    /// Computed from every allocation at parse time.
    pub alloc_summary: AllocSummary,
    pub created_unix_ms: u64,
    pub digest: [u8; 32],
}

impl Descriptor {
    /// Sum of `size_bytes` (u128: 4096 × u64 cannot overflow it).
    pub fn allocated_bytes(&self) -> u128 {
        self.alloc_summary.total_bytes
    }
    /// Allocation ids that occur more than once (each once).
    pub fn duplicate_allocation_ids(&self) -> &[String] {
        &self.alloc_summary.duplicate_ids
    }
    /// True when some handle carries bytes that grant access to the memory.
    pub fn carries_handle_bytes(&self) -> bool {
        self.alloc_summary.carries_bytes
    }
}

#[cfg(test)]
mod uuid_tests {
    use super::*;

    /// The definition: 36 characters, hyphens at 8, 13, 18 and 23, every
    /// other one a digit or `a`-`f`; then the `uuid` crate's reading.
    fn by_definition(s: &str) -> Option<Uuid> {
        let ok = s.len() == 36
            && s.bytes().enumerate().all(|(i, b)| match i {
                8 | 13 | 18 | 23 => b == b'-',
                _ => b.is_ascii_digit() || (b'a'..=b'f').contains(&b),
            });
        ok.then(|| Uuid::parse_str(s).ok()).flatten()
    }

    /// Every byte at every position of a canonical UUID, and every length
    /// around 36, read as the definition reads them.
    #[test]
    fn canonical_uuid_parses_as_its_definition() {
        let good = "6c1d0e52-3a1f-4d5e-9b7a-2f4c8e1d9a30";
        assert_eq!(parse_canonical_uuid(good), Uuid::parse_str(good).ok());
        for i in 0..good.len() {
            for b in 0..=255u8 {
                let mut v = good.as_bytes().to_vec();
                v[i] = b;
                let Ok(s) = String::from_utf8(v) else {
                    continue;
                };
                assert_eq!(parse_canonical_uuid(&s), by_definition(&s), "{s:?}");
            }
        }
        for s in [
            "",
            "6c1d0e52-3a1f-4d5e-9b7a-2f4c8e1d9a3",
            "6c1d0e52-3a1f-4d5e-9b7a-2f4c8e1d9a300",
            "6C1D0E52-3A1F-4D5E-9B7A-2F4C8E1D9A30",
            "6c1d0e523a1f4d5e9b7a2f4c8e1d9a30",
            "{6c1d0e52-3a1f-4d5e-9b7a-2f4c8e1d9a3}",
            "6c1d0e52-3a1f-4d5e-9b7a-2f4c8e1d9aé",
        ] {
            assert_eq!(parse_canonical_uuid(s), by_definition(s), "{s:?}");
        }
    }

    /// The display of a GPU UUID is its prefix and the lowercase hyphenated
    /// UUID, whatever the formatter's flags.
    #[test]
    fn gpu_uuid_displays_as_written() {
        for s in [
            "GPU-6a1f0c2e-0000-4000-8000-00000000000a",
            "MIG-ffffffff-ffff-ffff-ffff-ffffffffffff",
        ] {
            let g = GpuUuid::parse(s).unwrap();
            assert_eq!(g.to_string(), s);
            assert_eq!(format!("{g:>60}"), s);
        }
    }

    #[test]
    fn gpu_uuid_is_written_as_its_prefix_and_lowercase_uuid() {
        let u = Uuid::from_bytes([
            0xAB, 0xCD, 0xEF, 0x01, 0x23, 0x45, 0x67, 0x89, 0xFE, 0xDC, 0xBA, 0x98, 0x76, 0x54,
            0x32, 0x10,
        ]);
        for (kind, prefix) in [(GpuKind::Gpu, "GPU-"), (GpuKind::Mig, "MIG-")] {
            let g = GpuUuid { kind, uuid: u };
            let text = g.to_string();
            assert_eq!(
                text,
                format!("{prefix}abcdef01-2345-6789-fedc-ba9876543210")
            );
            assert_eq!(format!("[{g}]"), format!("[{text}]"));
            let back = GpuUuid::parse(&text).expect("parses back");
            assert_eq!((back.kind, back.uuid), (kind, u));
        }
    }
}
