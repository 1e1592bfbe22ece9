//! The byte layouts of the Dynamo GPU Memory Service artifacts kvcr reads
//! (docs/format.md §14.2-§14.5), as constants and pure decoders: bytes in,
//! plain values out, no I/O and no judgement. Every constant is pinned by a
//! test below against the value the upstream source defines.

use sha2::{Digest, Sha256};

// ---------------------------------------------------------------------------
// GMSL lease ring (§14.2)
// ---------------------------------------------------------------------------

/// The lease ring's magic as the little-endian u32 at offset 0; on disk the
/// bytes are `GMSL`.
pub const LEASE_MAGIC: u32 = 0x4C53_4D47;
/// The on-disk bytes of [`LEASE_MAGIC`].
pub const LEASE_MAGIC_BYTES: [u8; 4] = *b"GMSL";
/// The only version any lease-ring variant writes.
pub const LEASE_VERSION: u32 = 1;
/// The header, in bytes; records start here.
pub const LEASE_HEADER: u64 = 64;
/// The current record size (state u32, generation u32, owner_hash u64).
pub const LEASE_RECORD: u32 = 16;
/// The oldest variant's record size (state, generation, lease_epoch,
/// owner_hash, 8 unused bytes): reported as a legacy layout, never decoded.
pub const LEASE_RECORD_LEGACY: u32 = 32;
/// `active_mutations` while a post-fence recovery holds the ring.
pub const LEASE_BARRIER: u64 = u64::MAX;

/// Header offsets.
pub const L_MAGIC: usize = 0;
pub const L_VERSION: usize = 4;
pub const L_TOTAL_BLOCKS: usize = 8;
pub const L_RECORD_SIZE: usize = 12;
pub const L_FREE_COUNT: usize = 16;
pub const L_ACTIVE_MUTATIONS: usize = 24;
pub const L_RESERVATION_EPOCH: usize = 32;
pub const L_RESERVED_BLOCKS: usize = 40;
pub const L_RESERVED_OWNER_HASH: usize = 48;
pub const L_RECOVERY_OWNER_PID: usize = 56;

/// Record offsets (16-byte layout).
pub const LR_STATE: usize = 0;
pub const LR_GENERATION: usize = 4;
pub const LR_OWNER_HASH: usize = 8;

/// Record states.
pub const STATE_FREE: u32 = 0;
pub const STATE_LEASED: u32 = 1;
pub const STATE_SEALED: u32 = 2;
pub const STATE_RESERVED: u32 = 3;
pub const STATE_TRANSITION: u32 = 4;

/// The engine names GMS's integrations give their lease clients (the
/// `{engine}` of the default owner id and of the per-engine variables).
pub const ENGINES: [&str; 3] = ["vllm", "sglang", "trtllm"];

/// The 64-byte lease header, every field as stored (nothing checked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseHeader {
    pub magic: u32,
    pub version: u32,
    pub total_blocks: u32,
    pub record_size: u32,
    pub free_count: u64,
    pub active_mutations: u64,
    pub reservation_epoch: u64,
    pub reserved_blocks: u32,
    pub reserved_owner_hash: u64,
    pub recovery_owner_pid: u64,
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

/// Decodes the lease header.
pub fn lease_header(b: &[u8; 64]) -> LeaseHeader {
    LeaseHeader {
        magic: u32_at(b, L_MAGIC),
        version: u32_at(b, L_VERSION),
        total_blocks: u32_at(b, L_TOTAL_BLOCKS),
        record_size: u32_at(b, L_RECORD_SIZE),
        free_count: u64_at(b, L_FREE_COUNT),
        active_mutations: u64_at(b, L_ACTIVE_MUTATIONS),
        reservation_epoch: u64_at(b, L_RESERVATION_EPOCH),
        reserved_blocks: u32_at(b, L_RESERVED_BLOCKS),
        reserved_owner_hash: u64_at(b, L_RESERVED_OWNER_HASH),
        recovery_owner_pid: u64_at(b, L_RECOVERY_OWNER_PID),
    }
}

impl LeaseHeader {
    /// The size GMS gives a ring of this header: `64 + record_size ×
    /// total_blocks` (computed in u64: it cannot overflow).
    pub fn expected_size(&self) -> u64 {
        LEASE_HEADER + u64::from(self.record_size) * u64::from(self.total_blocks)
    }

    /// The magic read as the big-endian bytes an easy mistake writes (`LSMG`
    /// on disk).
    pub fn magic_byte_swapped(&self) -> bool {
        self.magic == LEASE_MAGIC.swap_bytes()
    }
}

/// One 16-byte lease record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseRecord {
    pub state: u32,
    pub generation: u32,
    pub owner_hash: u64,
}

/// Decodes a 16-byte lease record.
pub fn lease_record(b: &[u8]) -> LeaseRecord {
    LeaseRecord {
        state: u32_at(b, LR_STATE),
        generation: u32_at(b, LR_GENERATION),
        owner_hash: u64_at(b, LR_OWNER_HASH),
    }
}

/// GMS's owner hash of an owner id: the first 8 bytes of sha256(owner_id),
/// read as a little-endian u64.
pub fn owner_hash(owner_id: &str) -> u64 {
    let d = Sha256::digest(owner_id.as_bytes());
    u64::from_le_bytes(d[..8].try_into().expect("8 bytes"))
}

/// GMS's default owner id, `{engine}-{pid}-{device}`.
pub fn default_owner_id(engine: &str, pid: u32, device: u32) -> String {
    format!("{engine}-{pid}-{device}")
}

/// The file name GMS gives the ring of a namespace:
/// `gms-kv-lease-<first 20 hex of sha256(namespace)>.shm`.
pub fn lease_file_name(namespace: &str) -> String {
    let d = Sha256::digest(namespace.as_bytes());
    format!("gms-kv-lease-{}.shm", &crate::format::hex::encode(&d)[..20])
}

/// The namespace suffixes GMS's integrations use by default (`kv`, and
/// vLLM's `block-pool`); TRT-LLM's V2 pools name theirs by geometry.
pub const NAMESPACE_SUFFIXES: [&str; 2] = ["kv", "block-pool"];

/// The default namespace (`{engine}:gpu{device}:{suffix}`, devices below
/// `devices`) whose ring has this file name, when one has.
pub fn default_namespace(file_name: &str, devices: u32) -> Option<String> {
    for engine in ENGINES {
        for device in 0..devices {
            for suffix in NAMESPACE_SUFFIXES {
                let ns = format!("{engine}:gpu{device}:{suffix}");
                if lease_file_name(&ns) == file_name {
                    return Some(ns);
                }
            }
        }
    }
    None
}

/// The upper-case engine name GMS puts in its per-engine variables
/// (`GMS_<ENGINE>_KV_LEASE_SHM_DIR`): `engine.upper().replace("-", "_")`.
pub fn engine_env(engine: &str) -> String {
    engine.to_ascii_uppercase().replace('-', "_")
}

// ---------------------------------------------------------------------------
// DYNKV001 recovery metadata (§14.4)
// ---------------------------------------------------------------------------

pub const RECOVERY_MAGIC: [u8; 8] = *b"DYNKV001";
pub const RECOVERY_HEADER: u64 = 4096;
pub const RECOVERY_RECORD: u64 = 128;
pub const R_EPOCH: usize = 16;
pub const R_COMMIT: usize = 24;
pub const R_BINDING: usize = 32;
pub const R_OWNER: usize = 64;
/// Record offsets: valid u64, then the 80-byte payload `<IQ68s>`
/// (hash_len, num_tokens, hash), then its crc32.
pub const RR_VALID: usize = 0;
pub const RR_PAYLOAD: usize = 8;
pub const RR_PAYLOAD_LEN: usize = 80;
pub const RR_HASH_LEN: usize = 8;
pub const RR_NUM_TOKENS: usize = 12;
pub const RR_CRC: usize = 88;
/// The legal hash lengths: `4 < hash_len <= 68`.
pub const HASH_LEN_MIN_EXCLUSIVE: u32 = 4;
pub const HASH_LEN_MAX: u32 = 68;

/// `--binding`: the digest GMS binds recovery metadata with, as 64 hex
/// digits (either case).
pub fn parse_binding(s: &str) -> Result<[u8; 32], String> {
    let mut out = [0u8; 32];
    if crate::format::hex::decode(s.as_bytes(), &mut out, true) {
        Ok(out)
    } else {
        Err(format!(
            "{s:?} is not a binding: 64 hex digits (a sha256 digest)"
        ))
    }
}

/// The recovery header's fields GMS reads (the rest is unused).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoveryHeader {
    pub magic: [u8; 8],
    pub epoch: u64,
    pub commit: u64,
    pub binding: [u8; 32],
    pub owner: [u8; 16],
}

/// Decodes the first 80 bytes of a recovery header.
pub fn recovery_header(b: &[u8; 80]) -> RecoveryHeader {
    RecoveryHeader {
        magic: b[..8].try_into().expect("8 bytes"),
        epoch: u64_at(b, R_EPOCH),
        commit: u64_at(b, R_COMMIT),
        binding: b[R_BINDING..R_BINDING + 32].try_into().expect("32 bytes"),
        owner: b[R_OWNER..R_OWNER + 16].try_into().expect("16 bytes"),
    }
}

/// One 128-byte recovery record, with the crc kvcr computes beside the one
/// stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoveryRecord {
    pub valid: u64,
    pub hash_len: u32,
    pub num_tokens: u64,
    pub crc_stored: u32,
    pub crc_computed: u32,
}

/// Decodes a 128-byte recovery record.
pub fn recovery_record(b: &[u8]) -> RecoveryRecord {
    RecoveryRecord {
        valid: u64_at(b, RR_VALID),
        hash_len: u32_at(b, RR_HASH_LEN),
        num_tokens: u64_at(b, RR_NUM_TOKENS),
        crc_stored: u32_at(b, RR_CRC),
        crc_computed: crc32(&b[RR_PAYLOAD..RR_PAYLOAD + RR_PAYLOAD_LEN]),
    }
}

/// The block count a recovery file of `size` bytes holds, when the size is
/// `4096 + 128 × n` for some n.
pub fn recovery_blocks_for_size(size: u64) -> Option<u64> {
    let body = size.checked_sub(RECOVERY_HEADER)?;
    (body % RECOVERY_RECORD == 0).then_some(body / RECOVERY_RECORD)
}

/// The size GMS gives recovery metadata for `num_blocks` blocks (`None`
/// past u64).
pub fn recovery_size(num_blocks: u64) -> Option<u64> {
    num_blocks
        .checked_mul(RECOVERY_RECORD)?
        .checked_add(RECOVERY_HEADER)
}

/// zlib's crc32 (the IEEE polynomial, reflected, initial and final value
/// all ones), as Python's `zlib.crc32` computes it.
pub fn crc32(bytes: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    };
    let mut c = !0u32;
    for &b in bytes {
        c = TABLE[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8);
    }
    !c
}

// ---------------------------------------------------------------------------
// Superseded formats (§14.5)
// ---------------------------------------------------------------------------

/// A format whose producing design was withdrawn upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Superseded {
    /// The block-index store (`$GMS_KV_INDEX_PATH`).
    Dynkvix1,
    /// The index snapshot with 10-byte records.
    Gmskvix1,
    /// The index snapshot with 18-byte records (a generation each).
    Gmskvix2,
    /// The snapshot's generation counters (`<path>.gen`).
    Gmskvgn1,
}

impl Superseded {
    pub const ALL: [Superseded; 4] = [
        Superseded::Dynkvix1,
        Superseded::Gmskvix1,
        Superseded::Gmskvix2,
        Superseded::Gmskvgn1,
    ];

    pub fn magic(self) -> &'static [u8; 8] {
        match self {
            Superseded::Dynkvix1 => b"DYNKVIX1",
            Superseded::Gmskvix1 => b"GMSKVIX1",
            Superseded::Gmskvix2 => b"GMSKVIX2",
            Superseded::Gmskvgn1 => b"GMSKVGN1",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Superseded::Dynkvix1 => "DYNKVIX1",
            Superseded::Gmskvix1 => "GMSKVIX1",
            Superseded::Gmskvix2 => "GMSKVIX2",
            Superseded::Gmskvgn1 => "GMSKVGN1",
        }
    }

    /// What the format was, for the report.
    pub fn what(self) -> &'static str {
        match self {
            Superseded::Dynkvix1 => "block-index store",
            Superseded::Gmskvix1 | Superseded::Gmskvix2 => "block-index snapshot",
            Superseded::Gmskvgn1 => "snapshot generation counters",
        }
    }

    /// The bytes [`superseded_expected_size`] needs to see (DYNKVIX1's
    /// num_blocks ends at 16; a snapshot's header is 14).
    pub const HEAD: usize = 16;

    /// A snapshot's fixed record part (the hash bytes follow it).
    pub fn snapshot_record(self) -> Option<u64> {
        match self {
            Superseded::Gmskvix1 => Some(10),
            Superseded::Gmskvix2 => Some(18),
            _ => None,
        }
    }
}

/// DYNKVIX1's header and record sizes.
pub const DYNKVIX1_HEADER: u64 = 4096;
pub const DYNKVIX1_RECORD: u64 = 64;
/// GMSKVGN1's counters start at this offset, 8 bytes each.
pub const GMSKVGN1_DATA: u64 = 4096;

/// What a file's first bytes say it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Magic {
    Lease,
    Recovery,
    Superseded(Superseded),
}

/// Recognises an artifact by its magic. `head` is the file's first bytes
/// (fewer when the file is shorter).
pub fn recognise(head: &[u8]) -> Option<Magic> {
    if head.len() >= 4 && head[..4] == LEASE_MAGIC_BYTES {
        return Some(Magic::Lease);
    }
    if head.len() >= 8 {
        if head[..8] == RECOVERY_MAGIC {
            return Some(Magic::Recovery);
        }
        for s in Superseded::ALL {
            if head[..8] == *s.magic() {
                return Some(Magic::Superseded(s));
            }
        }
    }
    None
}

/// The size a superseded file's header implies, where the header alone
/// says it (DYNKVIX1, GMSKVGN1); `None` for the snapshots (their records
/// are walked, [`SnapshotWalk`]) or a head too short to tell.
pub fn superseded_expected_size(s: Superseded, head: &[u8]) -> Option<u64> {
    match s {
        Superseded::Dynkvix1 if head.len() >= 16 => {
            Some(DYNKVIX1_HEADER + DYNKVIX1_RECORD * u64::from(u32_at(head, 12)))
        }
        Superseded::Gmskvgn1 if head.len() >= 14 => {
            Some(GMSKVGN1_DATA + 8 * u64::from(u32_at(head, 10)))
        }
        _ => None,
    }
}

/// A snapshot's (GMSKVIX1/2) header: the layout id's length and the record
/// count (`<8s H I>`, 14 bytes).
pub fn snapshot_header(head: &[u8]) -> Option<(u16, u32)> {
    (head.len() >= 14).then(|| (u16::from_le_bytes([head[8], head[9]]), u32_at(head, 10)))
}

/// Walks a snapshot's records over a stream of bytes, with bounded state:
/// each record is a fixed part whose first u16 is the hash length, then
/// that many hash bytes. The records must end exactly at the end of the
/// file.
#[derive(Clone, Debug)]
pub struct SnapshotWalk {
    fixed: u64,
    /// Bytes still to skip before the next record starts.
    skip: u64,
    /// The fixed part being assembled (its first two bytes are the length).
    partial: Vec<u8>,
    /// Records still expected.
    pub remaining: u64,
    /// Bytes after the last record.
    pub trailing: u64,
}

impl SnapshotWalk {
    /// A walk that starts after the header and the layout id.
    pub fn new(s: Superseded, layout_id_len: u16, count: u32) -> Option<SnapshotWalk> {
        Some(SnapshotWalk {
            fixed: s.snapshot_record()?,
            skip: u64::from(layout_id_len),
            partial: Vec::new(),
            remaining: u64::from(count),
            trailing: 0,
        })
    }

    /// Feeds the next bytes of the file (after the 14-byte header).
    pub fn feed(&mut self, mut b: &[u8]) {
        while !b.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(b.len() as u64) as usize;
                self.skip -= n as u64;
                b = &b[n..];
                continue;
            }
            if self.remaining == 0 {
                self.trailing += b.len() as u64;
                return;
            }
            let want = self.fixed as usize - self.partial.len();
            let n = want.min(b.len());
            self.partial.extend_from_slice(&b[..n]);
            b = &b[n..];
            if self.partial.len() == self.fixed as usize {
                let hash_len = u16::from_le_bytes([self.partial[0], self.partial[1]]);
                self.skip = u64::from(hash_len);
                self.partial.clear();
                self.remaining -= 1;
            }
        }
    }

    /// Whether the records filled the file exactly.
    pub fn exact(&self) -> bool {
        self.remaining == 0 && self.skip == 0 && self.partial.is_empty() && self.trailing == 0
    }
}

// ---------------------------------------------------------------------------
// Writer-cohort directories (§14.3)
// ---------------------------------------------------------------------------

/// `$FAILOVER_LOCK_PATH` when unset.
pub const FAILOVER_LOCK_DEFAULT: &str = "/shared/failover.lock";
// The writer-cohort directories' suffixes (`VLLM_WRITERS`,
// `SGLANG_WRITERS`) and the lease ring's name shape are in
// `crate::format::names`: the inventory walk names them too (§14.9).
pub use crate::format::names::{is_lease_file_name, SGLANG_WRITERS, VLLM_WRITERS};
/// The tombstone a retiring successor writes at offset 0.
pub const TOMBSTONE: u8 = b'R';

/// A cohort identity as GMS accepts one: `uuid.UUID(hex=s).hex == s`, i.e.
/// 32 lower-case hex digits.
pub fn is_cohort_id(s: &str) -> bool {
    s.len() == 32
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `joining-<first 20 hex of sha256(ENGINE_ID)>`, the vLLM joining marker's
/// name (kvcr recognises the shape; the test pins the rule).
#[cfg(test)]
pub fn joining_name(engine_id: &str) -> String {
    let d = Sha256::digest(engine_id.as_bytes());
    format!("joining-{}", &crate::format::hex::encode(&d)[..20])
}

fn is_joining_hash(s: &str) -> bool {
    s.len() == 20
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// What an entry of a writer-cohort directory is, by its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CohortName {
    /// `<uuid>`: a cohort file.
    Cohort(String),
    /// `<uuid>.leader` (vLLM): the launcher's exclusive lifetime lock.
    Leader(String),
    /// `<uuid>.predecessor` (vLLM): names that cohort's predecessor.
    Predecessor(String),
    /// `active`: names the current cohort.
    Active,
    /// `joining-<h>` (vLLM): names the cohort ranks should join.
    Joining(String),
    /// A staging file a crash between write and rename leaves:
    /// `<uuid>.<uuid2>.active` (vLLM), `<uuid>.active` (SGLang, older
    /// vLLM), `<uuid>.predecessor.<uuid2>.pending`, `joining-<h>.<uuid>`.
    Staging(Staging),
    /// Anything else.
    Other,
}

/// The kinds of staging file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Staging {
    Active,
    Predecessor,
    Joining,
}

impl Staging {
    /// The marker the staging file was meant to replace.
    pub fn marker(self) -> &'static str {
        match self {
            Staging::Active => "active",
            Staging::Predecessor => "<uuid>.predecessor",
            Staging::Joining => "joining-<h>",
        }
    }
}

/// Classifies a cohort directory's entry by its name, as bytes: a name
/// that is not UTF-8 is none of GMS's (all ASCII), so it is
/// [`CohortName::Other`], and counts as such in the shape test.
pub fn cohort_name_of(name: &[u8]) -> CohortName {
    std::str::from_utf8(name).map_or(CohortName::Other, cohort_name)
}

/// Classifies a cohort directory's entry by its name.
pub fn cohort_name(name: &str) -> CohortName {
    if name == "active" {
        return CohortName::Active;
    }
    if is_cohort_id(name) {
        return CohortName::Cohort(name.to_string());
    }
    if let Some(rest) = name.strip_prefix("joining-") {
        if is_joining_hash(rest) {
            return CohortName::Joining(rest.to_string());
        }
        if let Some((h, id)) = rest.split_once('.') {
            if is_joining_hash(h) && is_cohort_id(id) {
                return CohortName::Staging(Staging::Joining);
            }
        }
        return CohortName::Other;
    }
    let parts: Vec<&str> = name.split('.').collect();
    match parts.as_slice() {
        [id, "leader"] if is_cohort_id(id) => CohortName::Leader(id.to_string()),
        [id, "predecessor"] if is_cohort_id(id) => CohortName::Predecessor(id.to_string()),
        [id, "active"] if is_cohort_id(id) => CohortName::Staging(Staging::Active),
        [id, n, "active"] if is_cohort_id(id) && is_cohort_id(n) => {
            CohortName::Staging(Staging::Active)
        }
        [id, "predecessor", n, "pending"] if is_cohort_id(id) && is_cohort_id(n) => {
            CohortName::Staging(Staging::Predecessor)
        }
        _ => CohortName::Other,
    }
}

/// Whether a directory's entries (each name's class, and whether it is a
/// regular file) have a writer-cohort directory's shape: at least one
/// regular cohort file, and a marker beside it (`active`, a `.leader`, a
/// `.predecessor`, a joining marker) or nothing but cohort names (a boot
/// that has not fenced yet).
pub fn is_cohort_shape(entries: &[(CohortName, bool)]) -> bool {
    let cohort = entries
        .iter()
        .any(|(n, regular)| *regular && matches!(n, CohortName::Cohort(_)));
    let marker = entries.iter().any(|(n, _)| {
        matches!(
            n,
            CohortName::Active
                | CohortName::Leader(_)
                | CohortName::Predecessor(_)
                | CohortName::Joining(_)
        )
    });
    let only = entries.iter().all(|(n, _)| *n != CohortName::Other);
    cohort && (marker || only)
}

/// A marker's content as GMS reads it (`read_text().strip()`), when it is
/// a cohort identity.
pub fn marker_id(content: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(content).ok()?.trim();
    is_cohort_id(s).then(|| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::names::artifact_by_name;

    /// The lease ring's constants, as `rust_ring/src/lib.rs` @ 815b3158
    /// defines them (`LEASE_MAGIC`, `LEASE_VERSION`, `LEASE_HEADER_SIZE`,
    /// `LEASE_RECORD_SIZE`, the `L_*` and `LR_*` offsets, the states and
    /// `LEASE_RECOVERY_BARRIER`), and as `kv_lease_client.py` @ 12860c91
    /// mirrors them; GMS's own load-time drift check compares the same four.
    #[test]
    fn lease_constants_are_upstreams() {
        assert_eq!(LEASE_MAGIC, 0x4c53_4d47);
        assert_eq!(LEASE_MAGIC.to_le_bytes(), LEASE_MAGIC_BYTES);
        assert_eq!(&LEASE_MAGIC_BYTES, b"GMSL");
        assert_eq!((LEASE_VERSION, LEASE_HEADER, LEASE_RECORD), (1, 64, 16));
        assert_eq!(LEASE_RECORD_LEGACY, 32);
        assert_eq!(
            [
                L_MAGIC,
                L_VERSION,
                L_TOTAL_BLOCKS,
                L_RECORD_SIZE,
                L_FREE_COUNT,
                L_ACTIVE_MUTATIONS,
                L_RESERVATION_EPOCH,
                L_RESERVED_BLOCKS,
                L_RESERVED_OWNER_HASH,
                L_RECOVERY_OWNER_PID
            ],
            [0, 4, 8, 12, 16, 24, 32, 40, 48, 56]
        );
        assert_eq!([LR_STATE, LR_GENERATION, LR_OWNER_HASH], [0, 4, 8]);
        assert_eq!(
            [
                STATE_FREE,
                STATE_LEASED,
                STATE_SEALED,
                STATE_RESERVED,
                STATE_TRANSITION
            ],
            [0, 1, 2, 3, 4]
        );
        assert_eq!(LEASE_BARRIER, u64::MAX);
    }

    #[test]
    fn a_header_decodes_field_by_field() {
        let mut b = [0u8; 64];
        b[0..4].copy_from_slice(b"GMSL");
        b[4..8].copy_from_slice(&1u32.to_le_bytes());
        b[8..12].copy_from_slice(&7u32.to_le_bytes());
        b[12..16].copy_from_slice(&16u32.to_le_bytes());
        b[16..24].copy_from_slice(&5u64.to_le_bytes());
        b[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        b[32..40].copy_from_slice(&3u64.to_le_bytes());
        b[40..44].copy_from_slice(&2u32.to_le_bytes());
        b[48..56].copy_from_slice(&0xABu64.to_le_bytes());
        b[56..64].copy_from_slice(&0xDEADu64.to_le_bytes());
        let h = lease_header(&b);
        assert_eq!(
            h,
            LeaseHeader {
                magic: LEASE_MAGIC,
                version: 1,
                total_blocks: 7,
                record_size: 16,
                free_count: 5,
                active_mutations: LEASE_BARRIER,
                reservation_epoch: 3,
                reserved_blocks: 2,
                reserved_owner_hash: 0xAB,
                recovery_owner_pid: 0xDEAD,
            }
        );
        assert_eq!(h.expected_size(), 64 + 7 * 16);
        assert!(!h.magic_byte_swapped());
        b[0..4].copy_from_slice(b"LSMG");
        assert!(lease_header(&b).magic_byte_swapped());
        let huge = LeaseHeader {
            total_blocks: u32::MAX,
            record_size: u32::MAX,
            ..h
        };
        assert_eq!(
            huge.expected_size(),
            64 + u64::from(u32::MAX) * u64::from(u32::MAX)
        );
    }

    /// `_owner_hash` and `_kv_lease_shm_path` of `kv_lease_client.py` @
    /// 12860c91: sha256, first 8 bytes little-endian; the file name's 20 hex
    /// digits. The expected values were computed with Python's hashlib.
    #[test]
    fn owner_hash_and_file_name_are_gmss() {
        assert_eq!(default_owner_id("vllm", 4242, 0), "vllm-4242-0");
        assert_eq!(owner_hash("vllm-4242-0"), 0x160d_25b2_b8e4_550f);
        assert_eq!(
            lease_file_name("vllm:gpu0:kv"),
            "gms-kv-lease-7ddad39cf58299b417aa.shm"
        );
        assert!(is_lease_file_name(lease_file_name("x").as_bytes()));
        assert!(!is_lease_file_name(b"gms-kv-lease-.shm"));
        assert!(!is_lease_file_name(b"gms-kv-lease-1.shm.tmp"));
        // Names are bytes: GMS's glob matches a name that is not UTF-8.
        assert!(is_lease_file_name(b"gms-kv-lease-\xff\xfe.shm"));
        assert_eq!(engine_env("trt-llm"), "TRT_LLM");
        let ring = lease_file_name("vllm:gpu0:kv");
        assert_eq!(artifact_by_name(&ring, None), Some("a GMS lease ring"));
        assert!(artifact_by_name(&format!("{ring}.reserve"), None).is_some());
        assert_eq!(
            artifact_by_name("kv-recovery.mmap", Some("x")),
            Some("GMS recovery metadata")
        );
        assert!(artifact_by_name("active", Some("failover.lock.vllm-writers")).is_some());
        assert!(artifact_by_name("active", Some("failover.lock.writers")).is_some());
        assert_eq!(artifact_by_name("notes.txt", Some("inventory")), None);
        let name = lease_file_name("sglang:gpu3:kv");
        assert_eq!(
            default_namespace(&name, 8).as_deref(),
            Some("sglang:gpu3:kv")
        );
        assert_eq!(default_namespace(&name, 3), None);
        let pool = lease_file_name("vllm:gpu0:block-pool");
        assert_eq!(
            default_namespace(&pool, 1).as_deref(),
            Some("vllm:gpu0:block-pool")
        );
        assert_eq!(default_namespace(&lease_file_name("custom"), 8), None);
        assert_eq!(ENGINES, ["vllm", "sglang", "trtllm"]);
    }

    /// `kv_recovery/backends/mmap.py` @ 3474c1be: `_HEADER = 4096`,
    /// `_STRIDE = 128`, `_MAGIC`, `_EPOCH`, `_COMMIT`, `_BINDING`, `_OWNER`,
    /// `_PAYLOAD = struct.Struct("<IQ68s")` (80 bytes at offset 8) and the
    /// crc after it; `publish_blocks` accepts `4 < len <= 68`.
    #[test]
    fn recovery_constants_are_upstreams() {
        assert_eq!(&RECOVERY_MAGIC, b"DYNKV001");
        assert_eq!((RECOVERY_HEADER, RECOVERY_RECORD), (4096, 128));
        assert_eq!([R_EPOCH, R_COMMIT, R_BINDING, R_OWNER], [16, 24, 32, 64]);
        assert_eq!(RR_PAYLOAD_LEN, 4 + 8 + 68);
        assert_eq!(
            [RR_VALID, RR_PAYLOAD, RR_HASH_LEN, RR_NUM_TOKENS],
            [0, 8, 8, 12]
        );
        assert_eq!(RR_CRC, RR_PAYLOAD + RR_PAYLOAD_LEN);
        assert_eq!((HASH_LEN_MIN_EXCLUSIVE, HASH_LEN_MAX), (4, 68));
        assert_eq!(recovery_blocks_for_size(4096 + 128 * 9), Some(9));
        assert_eq!(recovery_blocks_for_size(4096 + 128 * 9 + 1), None);
        assert_eq!(recovery_blocks_for_size(4095), None);
        assert_eq!(recovery_size(9), Some(4096 + 128 * 9));
        assert_eq!(recovery_size(u64::MAX), None);
    }

    #[test]
    fn bindings_are_64_hex_digits() {
        let hex = "00ff".repeat(16);
        let b = parse_binding(&hex).unwrap();
        assert_eq!((b[0], b[1], b[31]), (0x00, 0xff, 0xff));
        assert_eq!(parse_binding(&hex.to_uppercase()), Ok(b));
        assert!(parse_binding(&hex[..62]).is_err());
        assert!(parse_binding(&format!("{}zz", &hex[..62])).is_err());
        assert!(parse_binding(&format!("{hex}00")).is_err());
    }

    #[test]
    fn crc32_is_zlibs() {
        // The check value of CRC-32/ISO-HDLC, and zlib.crc32 of b"".
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(&[0u8; 80]), 0x8E23_18E6);
    }

    #[test]
    fn a_recovery_record_decodes_with_its_crc() {
        let mut r = [0u8; 128];
        r[0..8].copy_from_slice(&1u64.to_le_bytes());
        r[8..12].copy_from_slice(&36u32.to_le_bytes());
        r[12..20].copy_from_slice(&16u64.to_le_bytes());
        r[20..56].fill(0x5A);
        let crc = crc32(&r[8..88]);
        r[88..92].copy_from_slice(&crc.to_le_bytes());
        let d = recovery_record(&r);
        assert_eq!((d.valid, d.hash_len, d.num_tokens), (1, 36, 16));
        assert_eq!(d.crc_stored, d.crc_computed);
        r[30] ^= 1;
        let d = recovery_record(&r);
        assert_ne!(d.crc_stored, d.crc_computed);
    }

    /// The superseded magics: `DYNKVIX1` (`kv_cache/backends/mmap.py` @
    /// 4f4e5eee, `MAGIC`, `HEADER_BYTES = 4096`, 64-byte records),
    /// `GMSKVIX1` (10-byte `<HiI` records), `GMSKVIX2` and `GMSKVGN1`
    /// (`kv_index_persist.py`: 18-byte `<HiIQ` records; counters at 4096).
    #[test]
    fn superseded_formats_are_recognised_by_magic() {
        assert_eq!(recognise(b"GMSL\x01"), Some(Magic::Lease));
        assert_eq!(recognise(b"DYNKV001"), Some(Magic::Recovery));
        for s in Superseded::ALL {
            assert_eq!(recognise(s.magic()), Some(Magic::Superseded(s)));
            assert_eq!(s.name().as_bytes(), s.magic());
        }
        assert_eq!(recognise(b"LSMG\x01\0\0\0"), None);
        assert_eq!(recognise(b"DYNKV00"), None);
        assert_eq!(recognise(b""), None);
        assert_eq!(
            (DYNKVIX1_HEADER, DYNKVIX1_RECORD, GMSKVGN1_DATA),
            (4096, 64, 4096)
        );
        let mut h = b"DYNKVIX1".to_vec();
        h.extend(1u32.to_le_bytes());
        h.extend(10u32.to_le_bytes());
        assert_eq!(h.len(), Superseded::HEAD);
        assert_eq!(
            superseded_expected_size(Superseded::Dynkvix1, &h),
            Some(4096 + 640)
        );
        let mut g = b"GMSKVGN1".to_vec();
        g.extend(3u16.to_le_bytes());
        g.extend(5u32.to_le_bytes());
        assert_eq!(
            superseded_expected_size(Superseded::Gmskvgn1, &g),
            Some(4096 + 40)
        );
        assert_eq!(Superseded::Gmskvix1.snapshot_record(), Some(10));
        assert_eq!(Superseded::Gmskvix2.snapshot_record(), Some(18));
    }

    #[test]
    fn a_snapshot_walk_needs_records_that_fill_the_file() {
        // layout id "ab", two GMSKVIX2 records with hashes of 3 and 0 bytes.
        let mut body = b"ab".to_vec();
        body.extend(3u16.to_le_bytes());
        body.extend([0u8; 16]);
        body.extend(b"xyz");
        body.extend(0u16.to_le_bytes());
        body.extend([0u8; 16]);
        let walk = |bytes: &[u8], count: u32, chunk: usize| {
            let mut w = SnapshotWalk::new(Superseded::Gmskvix2, 2, count).unwrap();
            for c in bytes.chunks(chunk) {
                w.feed(c);
            }
            w
        };
        for chunk in [1, 3, 64] {
            assert!(walk(&body, 2, chunk).exact(), "{chunk}");
            assert!(!walk(&body[..body.len() - 1], 2, chunk).exact());
            assert_eq!(walk(&body, 1, chunk).trailing, 18);
            assert!(!walk(&body, 3, chunk).exact());
        }
        assert!(SnapshotWalk::new(Superseded::Dynkvix1, 0, 0).is_none());
    }

    /// The vLLM names (`writer_lifecycle.py` @ c2cf47b7: `<uuid>`,
    /// `<uuid>.leader`, `<uuid>.predecessor`, `active`, `joining-<h>`, and
    /// the staging names `<uuid>.<uuid2>.active`,
    /// `<uuid>.predecessor.<uuid2>.pending`, `joining-<h>.<uuid>`), the older
    /// vLLM and the SGLang staging name `<uuid>.active` (SGLang
    /// `writer_lifecycle.py` @ 2709a4c9).
    #[test]
    fn cohort_names_are_classified() {
        let a = "0123456789abcdef0123456789abcdef";
        let b = "fedcba9876543210fedcba9876543210";
        assert_eq!(cohort_name(a), CohortName::Cohort(a.into()));
        assert_eq!(
            cohort_name(&format!("{a}.leader")),
            CohortName::Leader(a.into())
        );
        assert_eq!(
            cohort_name(&format!("{a}.predecessor")),
            CohortName::Predecessor(a.into())
        );
        assert_eq!(cohort_name("active"), CohortName::Active);
        let j = joining_name("0");
        assert_eq!(j.len(), "joining-".len() + 20);
        let h = j["joining-".len()..].to_string();
        assert_eq!(cohort_name(&j), CohortName::Joining(h.clone()));
        for staging in [
            (format!("{a}.{b}.active"), Staging::Active),
            (format!("{a}.active"), Staging::Active),
            (format!("{a}.predecessor.{b}.pending"), Staging::Predecessor),
            (format!("{j}.{a}"), Staging::Joining),
        ] {
            assert_eq!(cohort_name(&staging.0), CohortName::Staging(staging.1));
        }
        for other in [
            "ACTIVE",
            "0123456789ABCDEF0123456789ABCDEF",
            "0123456789abcdef0123456789abcde",
            "x.leader",
            "joining-short",
            "active.tmp",
        ] {
            assert_eq!(cohort_name(other), CohortName::Other, "{other}");
        }
        assert_eq!(marker_id(format!("{a}\n").as_bytes()), Some(a.to_string()));
        assert_eq!(marker_id(b"nope"), None);
        assert_eq!(marker_id(&[0xff, 0xfe]), None);
        assert_eq!(TOMBSTONE, b'R');
        let c = |n: &str| (cohort_name(n), true);
        assert!(is_cohort_shape(&[c(a), c("active")]));
        assert!(is_cohort_shape(&[c(a)]));
        assert!(is_cohort_shape(&[
            c(a),
            c(&format!("{a}.leader")),
            c("notes.txt")
        ]));
        assert!(!is_cohort_shape(&[c(a), c("notes.txt")]));
        assert!(!is_cohort_shape(&[c("active")]));
        assert!(!is_cohort_shape(&[(cohort_name(a), false), c("active")]));
        assert!(!is_cohort_shape(&[]));
        assert_eq!(
            (FAILOVER_LOCK_DEFAULT, VLLM_WRITERS, SGLANG_WRITERS),
            ("/shared/failover.lock", ".vllm-writers", ".writers")
        );
    }
}
