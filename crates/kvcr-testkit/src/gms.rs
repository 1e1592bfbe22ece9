//! Generators of Dynamo GPU Memory Service artifacts (docs/format.md §14):
//! each written valid, and with each mutation of the "generator recipe"
//! lists of the GMS reference (lease rings, recovery metadata), plus the
//! writer-cohort directories and the superseded formats. The layouts are
//! written here from the upstream sources independently of kvcr's own
//! decoder (`src/gms/format.rs`), so a test that reads what this writes
//! checks one against the other.
//!
//! Plain data only (bytes, strings, paths), as the rest of the test kit.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------
// GMSL lease rings
// ---------------------------------------------------------------------------

pub const FREE: u32 = 0;
pub const LEASED: u32 = 1;
pub const SEALED: u32 = 2;
pub const RESERVED: u32 = 3;
pub const TRANSITION: u32 = 4;

/// GMS's owner hash: sha256(owner_id)[:8], little-endian.
pub fn owner_hash(owner_id: &str) -> u64 {
    let d = Sha256::digest(owner_id.as_bytes());
    u64::from_le_bytes(d[..8].try_into().unwrap())
}

/// `gms-kv-lease-<first 20 hex of sha256(namespace)>.shm`.
pub fn lease_file_name(namespace: &str) -> String {
    let d = Sha256::digest(namespace.as_bytes());
    let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
    format!("gms-kv-lease-{}.shm", &hex[..20])
}

/// A pid no process has: above the kernel's `pid_max` ceiling (2^22).
pub const DEAD_PID: u32 = 4_194_400;

/// One lease record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub state: u32,
    pub generation: u32,
    pub owner_hash: u64,
}

/// A lease ring, field by field; [`Lease::bytes`] writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub magic: [u8; 4],
    pub version: u32,
    pub record_size: u32,
    /// Written as `total_blocks`; `None`: the number of records.
    pub total_blocks: Option<u32>,
    pub free_count: u64,
    pub active_mutations: u64,
    pub reservation_epoch: u64,
    pub reserved_blocks: u32,
    pub reserved_owner_hash: u64,
    pub recovery_owner_pid: u64,
    pub records: Vec<Record>,
    /// Bytes added to (positive) or cut from (negative) the exact size.
    pub size_delta: i64,
}

impl Lease {
    /// A healthy ring of `n` blocks (n ≥ 6) as GMS leaves it at rest:
    /// block 0 RESERVED (the null block), blocks 1-3 LEASED and block 4
    /// SEALED by `owner`, the rest FREE; free_count exact, no mutation in
    /// flight, an even reservation epoch.
    pub fn valid(n: u32, owner: u64) -> Lease {
        assert!(n >= 6);
        let records = (0..n)
            .map(|b| match b {
                0 => Record {
                    state: RESERVED,
                    generation: 0,
                    owner_hash: 0,
                },
                1..=3 => Record {
                    state: LEASED,
                    generation: 2,
                    owner_hash: owner,
                },
                4 => Record {
                    state: SEALED,
                    generation: 1,
                    owner_hash: owner,
                },
                _ => Record {
                    state: FREE,
                    generation: 1,
                    owner_hash: 0,
                },
            })
            .collect();
        let mut l = Lease {
            magic: *b"GMSL",
            version: 1,
            record_size: 16,
            total_blocks: None,
            free_count: 0,
            active_mutations: 0,
            reservation_epoch: 0,
            reserved_blocks: 0,
            reserved_owner_hash: 0,
            recovery_owner_pid: 0,
            records,
            size_delta: 0,
        };
        l.free_count = l.free_records();
        l
    }

    pub fn free_records(&self) -> u64 {
        self.records.iter().filter(|r| r.state == FREE).count() as u64
    }

    /// The ring's bytes: the 64-byte header, then 16-byte records (or, with
    /// `record_size` 32, the legacy 32-byte records: state, generation,
    /// lease_epoch, owner_hash, 8 unused bytes).
    pub fn bytes(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(self.magic);
        b.extend(self.version.to_le_bytes());
        let total = self.total_blocks.unwrap_or(self.records.len() as u32);
        b.extend(total.to_le_bytes());
        b.extend(self.record_size.to_le_bytes());
        b.extend(self.free_count.to_le_bytes());
        b.extend(self.active_mutations.to_le_bytes());
        b.extend(self.reservation_epoch.to_le_bytes());
        b.extend(self.reserved_blocks.to_le_bytes());
        b.extend([0u8; 4]);
        b.extend(self.reserved_owner_hash.to_le_bytes());
        b.extend(self.recovery_owner_pid.to_le_bytes());
        assert_eq!(b.len(), 64);
        for r in &self.records {
            b.extend(r.state.to_le_bytes());
            b.extend(r.generation.to_le_bytes());
            if self.record_size == 32 {
                b.extend(1u64.to_le_bytes()); // lease_epoch
                b.extend(r.owner_hash.to_le_bytes());
                b.extend([0u8; 8]);
            } else {
                b.extend(r.owner_hash.to_le_bytes());
            }
        }
        resize(b, self.size_delta)
    }
}

fn resize(mut b: Vec<u8>, delta: i64) -> Vec<u8> {
    if delta >= 0 {
        b.extend(std::iter::repeat_n(0u8, delta as usize));
    } else {
        b.truncate(b.len() - (-delta) as usize);
    }
    b
}

/// The mutations of the lease ring's generator recipe, then the other
/// conditions kvcr names (each with the code it earns, docs/format.md
/// §14.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseMutation {
    /// `record_size = 32` with a 32-byte-record body (the legacy variant).
    Legacy32,
    /// A TRANSITION record.
    Transition,
    /// `free_count` off by one.
    FreeCountOffByOne,
    /// `active_mutations = 1`.
    MutationsInFlight,
    /// `active_mutations = u64::MAX` (the recovery barrier), its owner a
    /// pid that does not exist.
    Barrier,
    /// Owner hashes of a pid that does not exist.
    DeadOwner,
    /// FREE with owner ≠ 0.
    FreeWithOwner,
    /// The file one byte short.
    OneByteShort,
    /// The magic byte-swapped (`LSMG` on disk).
    MagicByteSwapped,
    // Beyond the recipe:
    /// The file one byte long.
    OneByteLong,
    /// Version 2.
    Version2,
    /// Record size 24.
    RecordSize24,
    /// total_blocks 0.
    ZeroBlocks,
    /// A state value 7.
    InvalidState,
    /// LEASED with owner 0.
    LeasedWithoutOwner,
    /// SEALED with owner 0 (a protected reclaim's leftover).
    SealedUnowned,
    /// reserved_blocks > total_blocks.
    ReservationOutOfRange,
    /// An odd reservation_epoch.
    OddReservationEpoch,
}

impl LeaseMutation {
    /// The generator recipe's mutations (the GMS reference, §2.4).
    pub const RECIPE: [LeaseMutation; 9] = [
        LeaseMutation::Legacy32,
        LeaseMutation::Transition,
        LeaseMutation::FreeCountOffByOne,
        LeaseMutation::MutationsInFlight,
        LeaseMutation::Barrier,
        LeaseMutation::DeadOwner,
        LeaseMutation::FreeWithOwner,
        LeaseMutation::OneByteShort,
        LeaseMutation::MagicByteSwapped,
    ];

    /// Every mutation.
    pub const ALL: [LeaseMutation; 18] = [
        LeaseMutation::Legacy32,
        LeaseMutation::Transition,
        LeaseMutation::FreeCountOffByOne,
        LeaseMutation::MutationsInFlight,
        LeaseMutation::Barrier,
        LeaseMutation::DeadOwner,
        LeaseMutation::FreeWithOwner,
        LeaseMutation::OneByteShort,
        LeaseMutation::MagicByteSwapped,
        LeaseMutation::OneByteLong,
        LeaseMutation::Version2,
        LeaseMutation::RecordSize24,
        LeaseMutation::ZeroBlocks,
        LeaseMutation::InvalidState,
        LeaseMutation::LeasedWithoutOwner,
        LeaseMutation::SealedUnowned,
        LeaseMutation::ReservationOutOfRange,
        LeaseMutation::OddReservationEpoch,
    ];

    /// The code kvcr gives the mutated ring (KV213 only with --live; the
    /// magic only where GMS puts its rings).
    pub fn code(self) -> &'static str {
        use LeaseMutation::*;
        match self {
            Legacy32 => "KV201",
            MagicByteSwapped | Version2 | RecordSize24 | ZeroBlocks => "KV202",
            OneByteShort | OneByteLong => "KV203",
            InvalidState => "KV204",
            Transition => "KV205",
            FreeWithOwner | LeasedWithoutOwner => "KV206",
            SealedUnowned => "KV207",
            FreeCountOffByOne => "KV208",
            MutationsInFlight => "KV209",
            Barrier => "KV210",
            ReservationOutOfRange => "KV211",
            OddReservationEpoch => "KV212",
            DeadOwner => "KV213",
        }
    }

    /// `lease` with this mutation.
    pub fn apply(self, lease: &Lease) -> Lease {
        use LeaseMutation::*;
        let mut l = lease.clone();
        let free = l.records.iter().position(|r| r.state == FREE).unwrap();
        let leased = l.records.iter().position(|r| r.state == LEASED).unwrap();
        let sealed = l.records.iter().position(|r| r.state == SEALED).unwrap();
        match self {
            Legacy32 => l.record_size = 32,
            Transition => {
                // A record left mid-update, its free count already taken
                // (so the TRANSITION is the only thing wrong).
                l.records[free].state = TRANSITION;
                l.free_count -= 1;
                l.active_mutations = 0;
            }
            FreeCountOffByOne => l.free_count += 1,
            MutationsInFlight => l.active_mutations = 1,
            Barrier => {
                l.active_mutations = u64::MAX;
                l.recovery_owner_pid = u64::from(DEAD_PID);
            }
            DeadOwner => {
                let dead = owner_hash(&format!("vllm-{DEAD_PID}-0"));
                for r in l.records.iter_mut().filter(|r| r.owner_hash != 0) {
                    r.owner_hash = dead;
                }
            }
            FreeWithOwner => l.records[free].owner_hash = 0x1234,
            OneByteShort => l.size_delta = -1,
            MagicByteSwapped => l.magic = *b"LSMG",
            OneByteLong => l.size_delta = 1,
            Version2 => l.version = 2,
            RecordSize24 => l.record_size = 24,
            ZeroBlocks => l.total_blocks = Some(0),
            InvalidState => {
                l.records[free].state = 7;
                l.free_count -= 1;
            }
            LeasedWithoutOwner => l.records[leased].owner_hash = 0,
            SealedUnowned => l.records[sealed].owner_hash = 0,
            ReservationOutOfRange => l.reserved_blocks = l.records.len() as u32 + 1,
            OddReservationEpoch => l.reservation_epoch = 3,
        }
        l
    }
}

// ---------------------------------------------------------------------------
// DYNKV001 recovery metadata
// ---------------------------------------------------------------------------

/// zlib's crc32.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// Compact JSON with sorted keys: `json.dumps(v, sort_keys=True,
/// separators=(",", ":"))` for ASCII strings and integers.
pub fn compact_sorted(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", Value::String((*k).clone()), compact_sorted(&m[*k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => {
            let parts: Vec<String> = a.iter().map(compact_sorted).collect();
            format!("[{}]", parts.join(","))
        }
        other => other.to_string(),
    }
}

/// GMS's binding digest over the allocations (sorted by allocation_id)
/// and the KV manifest.
pub fn binding(allocations: &[Value], manifest: &Value) -> [u8; 32] {
    let mut a = allocations.to_vec();
    a.sort_by(|x, y| {
        x["allocation_id"]
            .to_string()
            .cmp(&y["allocation_id"].to_string())
    });
    let doc = serde_json::json!({"allocations": a, "manifest": manifest});
    Sha256::digest(compact_sorted(&doc).as_bytes()).into()
}

/// An allocation record of the binding.
pub fn allocation(id: &str, size_bytes: u64, server_nonce: &str, gpu_uuid: &str) -> Value {
    serde_json::json!({
        "allocation_id": id,
        "size_bytes": size_bytes,
        "server_nonce": server_nonce,
        "gpu_uuid": gpu_uuid,
    })
}

/// A KV manifest of the binding.
pub fn manifest(num_blocks: u64) -> Value {
    serde_json::json!({
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "num_blocks": num_blocks,
        "block_size": 16,
        "hash_algorithm": "sha256",
        "tensors": [{
            "name": "kv", "allocation_id": "a0", "offset_bytes": 0,
            "shape": [num_blocks, 2, 16, 8, 128], "stride": [32768, 16384, 1024, 128, 1],
            "dtype": "bfloat16",
        }],
        "engine_version": "0.11.0",
    })
}

/// The binding of the generator's healthy pool (one allocation).
pub fn pool_binding(num_blocks: u64, server_nonce: &str, gpu_uuid: &str) -> [u8; 32] {
    binding(
        &[allocation("a0", 1 << 30, server_nonce, gpu_uuid)],
        &manifest(num_blocks),
    )
}

pub const SERVER_NONCE: &str = "nonce-1";
pub const GPU_UUID: &str = "GPU-6a1f0c2e-0000-4000-8000-000000000000";

/// One recovery record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryRecord {
    pub valid: u64,
    pub hash_len: u32,
    pub num_tokens: u64,
    pub hash: Vec<u8>,
    /// The crc written; `None`: the correct one.
    pub crc: Option<u32>,
    /// A payload byte flipped after the crc was computed.
    pub flip: Option<usize>,
}

/// Recovery metadata, field by field; [`Recovery::bytes`] writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovery {
    pub magic: [u8; 8],
    pub epoch: u64,
    pub commit: u64,
    pub binding: [u8; 32],
    pub owner: [u8; 16],
    pub num_blocks: u64,
    /// Block id → record (ids 1..num_blocks-1).
    pub records: Vec<(u64, RecoveryRecord)>,
    pub size_delta: i64,
}

impl Recovery {
    /// A healthy file after a committed takeover (epoch = commit = 3) with
    /// records 1-3 published (valid, correct crc, 36-byte hashes), bound to
    /// [`pool_binding`] of [`SERVER_NONCE`] and [`GPU_UUID`].
    pub fn valid(num_blocks: u64) -> Recovery {
        assert!(num_blocks >= 5);
        let records = (1..=3)
            .map(|b| {
                (
                    b,
                    RecoveryRecord {
                        valid: 1,
                        hash_len: 36,
                        num_tokens: 16,
                        hash: vec![b as u8; 36],
                        crc: None,
                        flip: None,
                    },
                )
            })
            .collect();
        Recovery {
            magic: *b"DYNKV001",
            epoch: 3,
            commit: 3,
            binding: pool_binding(num_blocks, SERVER_NONCE, GPU_UUID),
            owner: *b"\x9f\x1b\x04\x7e\x5d\x2a\x4c\x88\xb1\x63\x0e\x55\xa7\x19\xd2\x40",
            num_blocks,
            records,
            size_delta: 0,
        }
    }

    pub fn bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; 4096 + 128 * self.num_blocks as usize];
        b[..8].copy_from_slice(&self.magic);
        b[16..24].copy_from_slice(&self.epoch.to_le_bytes());
        b[24..32].copy_from_slice(&self.commit.to_le_bytes());
        b[32..64].copy_from_slice(&self.binding);
        b[64..80].copy_from_slice(&self.owner);
        for (id, r) in &self.records {
            let o = 4096 + 128 * *id as usize;
            b[o..o + 8].copy_from_slice(&r.valid.to_le_bytes());
            let mut payload = Vec::new();
            payload.extend(r.hash_len.to_le_bytes());
            payload.extend(r.num_tokens.to_le_bytes());
            let mut hash = r.hash.clone();
            hash.resize(68, 0);
            payload.extend(hash);
            assert_eq!(payload.len(), 80);
            let crc = r.crc.unwrap_or_else(|| crc32(&payload));
            if let Some(i) = r.flip {
                payload[i] ^= 0x40;
            }
            b[o + 8..o + 88].copy_from_slice(&payload);
            b[o + 88..o + 92].copy_from_slice(&crc.to_le_bytes());
        }
        resize(b, self.size_delta)
    }
}

/// The mutations of the recovery metadata's generator recipe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryMutation {
    /// `commit = 0` (a torn takeover).
    CommitZero,
    /// `commit ≠ epoch`.
    CommitNotEpoch,
    /// One record with `valid = 2`.
    ValidTwo,
    /// A flipped payload byte (crc mismatch).
    FlippedPayloadByte,
    /// `hash_len = 4`.
    HashLen4,
    /// `hash_len = 69`.
    HashLen69,
    /// `num_tokens = 0`.
    NumTokensZero,
    /// The size off by one.
    SizeOffByOne,
    /// A wrong magic.
    WrongMagic,
    /// A binding for a different `server_nonce`.
    OtherServerNonce,
    /// A binding for a different `gpu_uuid`.
    OtherGpuUuid,
    // Beyond the recipe:
    /// epoch = commit = 0.
    EpochZero,
}

impl RecoveryMutation {
    pub const RECIPE: [RecoveryMutation; 11] = [
        RecoveryMutation::CommitZero,
        RecoveryMutation::CommitNotEpoch,
        RecoveryMutation::ValidTwo,
        RecoveryMutation::FlippedPayloadByte,
        RecoveryMutation::HashLen4,
        RecoveryMutation::HashLen69,
        RecoveryMutation::NumTokensZero,
        RecoveryMutation::SizeOffByOne,
        RecoveryMutation::WrongMagic,
        RecoveryMutation::OtherServerNonce,
        RecoveryMutation::OtherGpuUuid,
    ];

    pub const ALL: [RecoveryMutation; 12] = [
        RecoveryMutation::CommitZero,
        RecoveryMutation::CommitNotEpoch,
        RecoveryMutation::ValidTwo,
        RecoveryMutation::FlippedPayloadByte,
        RecoveryMutation::HashLen4,
        RecoveryMutation::HashLen69,
        RecoveryMutation::NumTokensZero,
        RecoveryMutation::SizeOffByOne,
        RecoveryMutation::WrongMagic,
        RecoveryMutation::OtherServerNonce,
        RecoveryMutation::OtherGpuUuid,
        RecoveryMutation::EpochZero,
    ];

    /// The code kvcr gives it (the binding only with `--binding`, the magic
    /// only where GMS keeps the file).
    pub fn code(self) -> &'static str {
        use RecoveryMutation::*;
        match self {
            SizeOffByOne => "KV221",
            WrongMagic => "KV222",
            EpochZero => "KV223",
            CommitZero | CommitNotEpoch => "KV224",
            OtherServerNonce | OtherGpuUuid => "KV225",
            ValidTwo => "KV226",
            FlippedPayloadByte => "KV227",
            HashLen4 | HashLen69 | NumTokensZero => "KV228",
        }
    }

    pub fn apply(self, r: &Recovery) -> Recovery {
        use RecoveryMutation::*;
        let mut m = r.clone();
        let rec = &mut m.records[1].1;
        match self {
            CommitZero => m.commit = 0,
            CommitNotEpoch => m.commit = m.epoch - 1,
            ValidTwo => rec.valid = 2,
            FlippedPayloadByte => rec.flip = Some(20),
            HashLen4 => rec.hash_len = 4,
            HashLen69 => rec.hash_len = 69,
            NumTokensZero => rec.num_tokens = 0,
            SizeOffByOne => m.size_delta = 1,
            WrongMagic => m.magic = *b"DYNKV002",
            OtherServerNonce => m.binding = pool_binding(m.num_blocks, "nonce-2", GPU_UUID),
            OtherGpuUuid => {
                m.binding = pool_binding(
                    m.num_blocks,
                    SERVER_NONCE,
                    "GPU-f428759f-0000-4000-8000-000000000001",
                )
            }
            EpochZero => {
                m.epoch = 0;
                m.commit = 0;
            }
        }
        m
    }
}

// ---------------------------------------------------------------------------
// Writer-cohort directories
// ---------------------------------------------------------------------------

/// A cohort identity: 32 lower-case hex digits, distinct per `n`.
pub fn cohort_id(n: u8) -> String {
    format!("{:02x}", n).repeat(16)
}

/// `joining-<first 20 hex of sha256(ENGINE_ID)>`.
pub fn joining_name(engine_id: &str) -> String {
    let d = Sha256::digest(engine_id.as_bytes());
    let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
    format!("joining-{}", &hex[..20])
}

/// Writes `name` in `dir` with mode 0600, as GMS creates every entry.
pub fn put(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    use std::os::unix::fs::OpenOptionsExt;
    let p = dir.join(name);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&p)
        .unwrap();
    std::io::Write::write_all(&mut f, bytes).unwrap();
    p
}

/// A cohort directory (mode 0700).
pub fn cohort_dir(parent: &Path, name: &str) -> PathBuf {
    use std::os::unix::fs::DirBuilderExt;
    let d = parent.join(name);
    std::fs::DirBuilder::new().mode(0o700).create(&d).unwrap();
    d
}

/// A healthy vLLM cohort directory after one takeover: the predecessor
/// (cohort 1) retired with its tombstone `R` and no writer left, the
/// active cohort (2) open, `<2>.predecessor` naming 1, `active` naming 2,
/// a `.leader` per cohort and the joining marker of `ENGINE_ID=0` naming
/// 2. Returns (predecessor, active). The active cohort's writers (a lock
/// on its file) are the caller's to hold.
pub fn vllm_healthy(dir: &Path) -> (String, String) {
    let (p, a) = (cohort_id(1), cohort_id(2));
    put(dir, &p, b"R");
    put(dir, &format!("{p}.leader"), b"");
    put(dir, &a, b"");
    put(dir, &format!("{a}.leader"), b"");
    put(dir, &format!("{a}.predecessor"), p.as_bytes());
    put(dir, "active", a.as_bytes());
    put(dir, &joining_name("0"), a.as_bytes());
    (p, a)
}

/// A healthy SGLang cohort directory: cohort 1 (the predecessor, created
/// first: its mtime is older), cohort 2 active. Returns (older, active).
pub fn sglang_healthy(dir: &Path) -> (String, String) {
    let (p, a) = (cohort_id(1), cohort_id(2));
    let old = put(dir, &p, b"");
    put(dir, &a, b"");
    put(dir, "active", a.as_bytes());
    let t = std::time::SystemTime::now() - std::time::Duration::from_secs(600);
    std::fs::File::options()
        .write(true)
        .open(old)
        .unwrap()
        .set_modified(t)
        .unwrap();
    (p, a)
}

// ---------------------------------------------------------------------------
// Superseded formats
// ---------------------------------------------------------------------------

/// A DYNKVIX1 block-index store of `num_blocks` blocks (4096-byte header,
/// 64-byte records), one usable entry.
pub fn dynkvix1(num_blocks: u32) -> Vec<u8> {
    let mut b = vec![0u8; 4096 + 64 * num_blocks as usize];
    b[..8].copy_from_slice(b"DYNKVIX1");
    b[8..12].copy_from_slice(&1u32.to_le_bytes());
    b[12..16].copy_from_slice(&num_blocks.to_le_bytes());
    b[16..24].copy_from_slice(&1u64.to_le_bytes());
    let r = 4096 + 64;
    b[r..r + 8].copy_from_slice(&1u64.to_le_bytes());
    b[r + 8..r + 12].copy_from_slice(&16u32.to_le_bytes());
    b[r + 12..r + 16].copy_from_slice(&36u32.to_le_bytes());
    b
}

/// A GMSKVIX1 (10-byte records) or GMSKVIX2 (18-byte records) snapshot
/// with layout id `lid` and one record per hash.
pub fn gmskvix(version: u8, lid: &str, hashes: &[&[u8]]) -> Vec<u8> {
    let mut b = format!("GMSKVIX{version}").into_bytes();
    b.extend((lid.len() as u16).to_le_bytes());
    b.extend((hashes.len() as u32).to_le_bytes());
    b.extend(lid.as_bytes());
    for (i, h) in hashes.iter().enumerate() {
        b.extend((h.len() as u16).to_le_bytes());
        b.extend((i as i32 + 1).to_le_bytes());
        b.extend(16u32.to_le_bytes());
        if version == 2 {
            b.extend(1u64.to_le_bytes());
        }
        b.extend(*h);
    }
    b
}

/// GMSKVGN1 generation counters for `num_blocks` blocks.
pub fn gmskvgn1(lid: &str, num_blocks: u32) -> Vec<u8> {
    let mut b = b"GMSKVGN1".to_vec();
    b.extend((lid.len() as u16).to_le_bytes());
    b.extend(num_blocks.to_le_bytes());
    b.extend(lid.as_bytes());
    b.resize(4096 + 8 * num_blocks as usize, 0);
    b
}
