//! The producers' file and directory names, parsed strictly (docs/format.md
//! §15.1, §15.2; upstream: vLLM `v1/kv_offload/file_mapper.py`, `tiering/fs/io.py`,
//! llm-d `file_io.cpp`, LMCache `lmcache/utils.py`, `fs_l2_adapter.py`, SGLang
//! `hicache_storage.py`).
//! Pure functions of a name's bytes: nothing here touches the system.

/// The longest block hash any producer writes, in bytes.
pub const MAX_HASH_BYTES: usize = 32;
/// vLLM and llm-d block hash widths in hex digits (sha256*: 64, xxhash*: 32).
pub const FAMILY_HASH_HEX: [usize; 2] = [64, 32];
/// vLLM's temp suffix is a u63 (`randint(0, 2**63-1)`); llm-d's, a u32
/// (`std::random_device{}()`), is within it.
pub const VLLM_TEMP_MAX: u64 = (1 << 63) - 1;
/// lmcache-mp chunk hash widths in hex digits (blake3/sha256: 64, xxhash: 32, builtin: 16).
pub const MP_HASH_HEX: [usize; 3] = [64, 32, 16];
/// lmcache-mp salt limit (characters).
pub const MP_SALT_MAX: usize = 128;
/// LMCache's dtype names (`lmcache/utils.py:366-390`).
pub const LMCACHE_DTYPES: [&str; 14] = [
    "half",
    "bfloat16",
    "float",
    "double",
    "int8",
    "uint8",
    "int16",
    "int32",
    "int64",
    "bool",
    "fp8_e4m3fn",
    "fp8_e4m3fnuz",
    "fp8_e5m2",
    "fp8_e5m2fnuz",
];

/// A block's identity inside a set: its hash bytes and its group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub hash: [u8; MAX_HASH_BYTES],
    pub len: u8,
    pub group: u32,
}

impl Key {
    pub fn hash(&self) -> &[u8] {
        &self.hash[..self.len as usize]
    }

    pub fn hex(&self) -> String {
        crate::format::hex::encode(self.hash())
    }
}

fn is_lower_hex(b: &[u8]) -> bool {
    !b.is_empty() && b.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// Decimal without a leading zero ("0" alone allowed), at most `max`.
pub fn decimal(b: &[u8], max: u64) -> Option<u64> {
    if b.is_empty() || b.len() > 20 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if b.len() > 1 && b[0] == b'0' {
        return None;
    }
    let v: u64 = std::str::from_utf8(b).ok()?.parse().ok()?;
    (v <= max).then_some(v)
}

const fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// Lowercase hex of whole bytes, at most [`MAX_HASH_BYTES`] of them.
fn hex_bytes(h: &[u8]) -> Option<([u8; MAX_HASH_BYTES], u8)> {
    if h.is_empty() || !h.len().is_multiple_of(2) || h.len() / 2 > MAX_HASH_BYTES {
        return None;
    }
    // By table, without a branch per digit: a name's hash is decoded once
    // per file, a million times in a large offload directory.
    let mut out = [0u8; MAX_HASH_BYTES];
    let mut bad = 0u8;
    for (o, pair) in out.iter_mut().zip(h.chunks_exact(2)) {
        let (a, b) = (HEX_VALUE[pair[0] as usize], HEX_VALUE[pair[1] as usize]);
        bad |= a | b;
        *o = (a << 4) | b;
    }
    if bad & NOT_HEX != 0 {
        return None;
    }
    Some((out, (h.len() / 2) as u8))
}

/// [`HEX_VALUE`] of a byte that is no lowercase hex digit.
const NOT_HEX: u8 = 0x10;

/// Each byte's value as a lowercase hex digit ([`nibble`]), else [`NOT_HEX`].
const HEX_VALUE: [u8; 256] = {
    let mut t = [NOT_HEX; 256];
    let mut c = 0;
    while c < 256 {
        if let Some(v) = nibble(c as u8) {
            t[c] = v;
        }
        c += 1;
    }
    t
};

#[cfg(test)]
mod hex_tests {
    use super::*;

    #[test]
    fn hex_by_table_is_hex_by_nibble() {
        // Every byte in either place of a pair, and widths 2..=64 digits.
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                let want = nibble(a).zip(nibble(b)).map(|(x, y)| (x << 4) | y);
                let got = hex_bytes(&[a, b]).map(|(h, len)| (h[0], len));
                assert_eq!(got, want.map(|v| (v, 1)), "{a:#x} {b:#x}");
            }
        }
        let hex = b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        for n in (2..=64).step_by(2) {
            let (h, len) = hex_bytes(&hex[..n]).unwrap();
            assert_eq!(
                crate::format::hex::encode(&h[..len as usize]).as_bytes(),
                &hex[..n]
            );
            let mut bad = hex[..n].to_vec();
            bad[n - 1] = b'G';
            assert_eq!(hex_bytes(&bad), None);
        }
        assert_eq!(hex_bytes(&hex[..63]), None);
        assert_eq!(hex_bytes(b""), None);
        assert_eq!(hex_bytes(&[b'a'; 66]), None);
    }
}

/// `<model>_<12 hex>`: a namespace directory; returns (prefix, digest).
pub fn namespace_dir(name: &[u8]) -> Option<(&[u8], &str)> {
    let n = name.len();
    if n < 14 || name[n - 13] != b'_' || !is_lower_hex(&name[n - 12..]) {
        return None;
    }
    Some((&name[..n - 13], std::str::from_utf8(&name[n - 12..]).ok()?))
}

/// `<base>_r<N>`: a rank directory of namespace `base`; returns (base, N).
pub fn rank_dir(name: &[u8]) -> Option<(&[u8], u32)> {
    let pos = name.windows(2).rposition(|w| w == b"_r")?;
    let rank = decimal(&name[pos + 2..], u32::MAX as u64)? as u32;
    let base = &name[..pos];
    namespace_dir(base)?;
    Some((base, rank))
}

/// `<3 hex>`: the first bucket level.
pub fn bucket1(name: &[u8]) -> bool {
    name.len() == 3 && is_lower_hex(name)
}

/// `<2 hex>_g<G>`: the second bucket level; returns (the 2 hex, G).
pub fn bucket2(name: &[u8]) -> Option<(&[u8], u32)> {
    if name.len() < 5 || &name[2..4] != b"_g" || !is_lower_hex(&name[..2]) {
        return None;
    }
    Some((&name[..2], decimal(&name[4..], u32::MAX as u64)? as u32))
}

/// What a file inside `<b1>/<b2>_g<G>/` is.
#[derive(Debug, PartialEq, Eq)]
pub enum LeafName {
    /// `<hex>.bin` whose hash matches its buckets.
    Block(Key),
    /// `<hex>.bin_<n>.tmp`: the writer's staging file for that key; the
    /// suffix's value tells vLLM's u63 from llm-d's u32 only above 2³².
    Temp(Key, u64),
    Foreign,
}

/// Parses a leaf name against its buckets.
pub fn leaf(name: &[u8], b1: &[u8], b2: &[u8], group: u32) -> LeafName {
    let (hex, temp) = if let Some(h) = name.strip_suffix(b".bin") {
        (h, None)
    } else if let Some(t) = name.strip_suffix(b".tmp") {
        let Some(pos) = t.windows(5).position(|w| w == b".bin_") else {
            return LeafName::Foreign;
        };
        let Some(n) = decimal(&t[pos + 5..], VLLM_TEMP_MAX) else {
            return LeafName::Foreign;
        };
        (&t[..pos], Some(n))
    } else {
        return LeafName::Foreign;
    };
    if !FAMILY_HASH_HEX.contains(&hex.len()) || &hex[..3] != b1 || &hex[3..5] != b2 {
        return LeafName::Foreign;
    }
    let Some((hash, len)) = hex_bytes(hex) else {
        return LeafName::Foreign;
    };
    let key = Key { hash, len, group };
    match temp {
        None => LeafName::Block(key),
        Some(n) => LeafName::Temp(key, n),
    }
}

/// vLLM's O_DIRECT probe `.o_direct_probe_<n>.tmp` (beside `config.json`).
pub fn probe(name: &[u8]) -> bool {
    name.strip_prefix(b".o_direct_probe_")
        .and_then(|r| r.strip_suffix(b".tmp"))
        .and_then(|n| decimal(n, VLLM_TEMP_MAX))
        .is_some()
}

/// One lmcache-mp name (`fs_l2_adapter.py:99-121`): `<model with / → -SEP->@0x<8 hex>@<group hex>@<hash hex>[@<salt>]`
/// + `.data` (or `.tmp` for its staging file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MpName {
    /// The model as the name spells it (`-SEP-` kept).
    pub model: Vec<u8>,
    pub kv_rank: u32,
    pub group: u32,
    pub hash: [u8; MAX_HASH_BYTES],
    pub hash_len: u8,
    pub salt: Option<Vec<u8>>,
    pub staging: bool,
}

impl MpName {
    /// The packed world size, rank, local world size and local rank (shifts 24/16/8/0).
    pub fn world(&self) -> u8 {
        (self.kv_rank >> 24) as u8
    }
    pub fn rank(&self) -> u8 {
        (self.kv_rank >> 16) as u8
    }
    pub fn key(&self) -> Key {
        Key {
            hash: self.hash,
            len: self.hash_len,
            group: self.group,
        }
    }
}

pub fn mp_name(name: &[u8]) -> Option<MpName> {
    let (stem, staging) = if let Some(s) = name.strip_suffix(b".data") {
        (s, false)
    } else {
        (name.strip_suffix(b".tmp")?, true)
    };
    let fields: Vec<&[u8]> = stem.split(|&b| b == b'@').collect();
    if fields.len() != 4 && fields.len() != 5 {
        return None;
    }
    let model = fields[0];
    if model.is_empty() {
        return None;
    }
    let kr = fields[1].strip_prefix(b"0x")?;
    if kr.len() != 8 || !is_lower_hex(kr) {
        return None;
    }
    let kv_rank = u32::from_str_radix(std::str::from_utf8(kr).ok()?, 16).ok()?;
    let g = fields[2];
    if !is_lower_hex(g) || (g.len() > 1 && g[0] == b'0') || g.len() > 8 {
        return None;
    }
    let group = u32::from_str_radix(std::str::from_utf8(g).ok()?, 16).ok()?;
    if !MP_HASH_HEX.contains(&fields[3].len()) {
        return None;
    }
    let (hash, hash_len) = hex_bytes(fields[3])?;
    let salt = match fields.get(4) {
        Some(s) => {
            let chars = std::str::from_utf8(s).ok()?.chars().count();
            if s.is_empty() || chars > MP_SALT_MAX || s.iter().any(|&b| b == b'\\' || b == 0) {
                return None;
            }
            Some(s.to_vec())
        }
        None => None,
    };
    Some(MpName {
        model: model.to_vec(),
        kv_rank,
        group,
        hash,
        hash_len,
        salt,
        staging,
    })
}

/// One LMCache local-disk name (`lmcache/utils.py:467-475`):
/// `<model>@<ws>@<worker>@<hash>@<dtype>[@<layer>][@<tag>%<value>]….pt`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtName {
    pub model: Vec<u8>,
    pub world: u32,
    pub worker: u32,
    /// The signed unpadded hex text as written.
    pub hash: Vec<u8>,
    pub dtype: Vec<u8>,
    pub layer: Option<u32>,
    pub tags: Vec<Vec<u8>>,
}

/// What a `.pt` name is: one reading, several (an `@` inside a field), the
/// legacy v0 grammar, or none.
#[derive(Debug, PartialEq, Eq)]
pub enum Pt {
    One(PtName),
    Ambiguous(usize),
    Legacy,
    None,
}

fn lmcache_hash(b: &[u8]) -> bool {
    let d = b.strip_prefix(b"-").unwrap_or(b);
    is_lower_hex(d) && d.len() <= 64 && (d == b"0" || d[0] != b'0')
}

/// The fields after the model; the model is left empty.
fn pt_tail(fields: &[&[u8]]) -> Option<PtName> {
    if fields.len() < 4 {
        return None;
    }
    let world = decimal(fields[0], u32::MAX as u64)? as u32;
    let worker = decimal(fields[1], u32::MAX as u64)? as u32;
    if !lmcache_hash(fields[2]) || !LMCACHE_DTYPES.iter().any(|d| d.as_bytes() == fields[3]) {
        return None;
    }
    let mut rest = &fields[4..];
    let mut layer = None;
    if let Some(first) = rest.first() {
        if !first.contains(&b'%') {
            layer = Some(decimal(first, u32::MAX as u64)? as u32);
            rest = &rest[1..];
        }
    }
    // A tag value may hold `@` (nothing forbids it upstream): a field
    // without `%` after a tag continues that tag's value.
    let mut tags: Vec<Vec<u8>> = Vec::new();
    for t in rest {
        match t.iter().position(|&b| b == b'%') {
            Some(0) => return None,
            Some(_) => tags.push(t.to_vec()),
            None => {
                let last = tags.last_mut()?;
                last.push(b'@');
                last.extend_from_slice(t);
            }
        }
    }
    Some(PtName {
        model: Vec::new(),
        world,
        worker,
        hash: fields[2].to_vec(),
        dtype: fields[3].to_vec(),
        layer,
        tags,
    })
}

pub fn pt_name(name: &[u8]) -> Pt {
    let Some(stem) = name.strip_suffix(b".pt") else {
        return Pt::None;
    };
    let fields: Vec<&[u8]> = stem.split(|&b| b == b'@').collect();
    // Every split point of the model (an `@` may sit inside it or inside a
    // tag value): one reading is a name, several are ambiguous.
    let mut found = Vec::new();
    for k in 1..fields.len() {
        if let Some(t) = pt_tail(&fields[k..]) {
            found.push((fields[..k].join(&b'@'), t));
        }
    }
    match found.len() {
        1 => {
            let (model, mut n) = found.pop().unwrap();
            if model.is_empty() {
                return Pt::None;
            }
            n.model = model;
            Pt::One(n)
        }
        0 => {
            // v0: fmt@model@ws@worker@hash (lmcache/utils.py @ 54641cad).
            if fields.len() == 5
                && decimal(fields[2], u32::MAX as u64).is_some()
                && decimal(fields[3], u32::MAX as u64).is_some()
                && lmcache_hash(fields[4])
            {
                Pt::Legacy
            } else {
                Pt::None
            }
        }
        n => Pt::Ambiguous(n),
    }
}

/// LMCache's signed hash text as a [`Key`]: the digits' bytes
/// (left-padded to whole bytes), the sign in `group` (1: negative).
pub fn pt_key(hash: &[u8]) -> Option<Key> {
    let (neg, d) = match hash.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, hash),
    };
    let padded: Vec<u8> = if !d.len().is_multiple_of(2) {
        [&b"0"[..], d].concat()
    } else {
        d.to_vec()
    };
    let (h, len) = hex_bytes(&padded)?;
    Some(Key {
        hash: h,
        len,
        group: neg as u32,
    })
}

/// The hash text [`pt_key`] read.
pub fn pt_hash_text(k: &Key) -> String {
    let hex = k.hex();
    let t = hex.trim_start_matches('0');
    let t = if t.is_empty() { "0" } else { t };
    if k.group == 1 {
        format!("-{t}")
    } else {
        t.to_string()
    }
}

/// SGLang's staging file `.<32 hex>.tmp` (uuid4 hex; no key in it).
pub fn sglang_temp(name: &[u8]) -> bool {
    name.len() == 1 + 32 + 4
        && name[0] == b'.'
        && name.ends_with(b".tmp")
        && is_lower_hex(&name[1..33])
}

/// The shape of an SGLang block name: `<64 hex>[.<pool>]_<suffix>.bin`.
pub fn sglang_shape(name: &[u8]) -> bool {
    name.len() > 64 + 5 && is_lower_hex(&name[..64]) && name.ends_with(b".bin") && {
        let r = &name[64..];
        r[0] == b'_' || r[0] == b'.'
    }
}

/// SGLang's non-KV pool names (`PoolName`, `hicache_storage.py:85-121`;
/// the KV pool, `kv`, is written without a `.<pool>` part).
pub const SGLANG_POOLS: [&str; 22] = [
    "mamba",
    "swa",
    "auxiliary_swa",
    "indexer",
    "deepseek_v4_c1",
    "deepseek_v4_c1_indexer",
    "deepseek_v4_c1_indexer_scale",
    "deepseek_v4_c2",
    "deepseek_v4_c2_indexer",
    "deepseek_v4_c2_indexer_scale",
    "deepseek_v4_c4",
    "deepseek_v4_c4_indexer",
    "deepseek_v4_c4_indexer_scale",
    "deepseek_v4_c128",
    "deepseek_v4_c4_rope",
    "deepseek_v4_c128_rope",
    "deepseek_v4_c4_state",
    "deepseek_v4_c4_indexer_state",
    "deepseek_v4_c128_state",
    "draft",
    "draft_indexer",
    "draft_swa",
];

/// The index of the Mamba pool in [`SGLANG_POOLS`]: its keys always take the
/// TP-sharded suffix (`hicache_storage.py:822-826`).
pub const SGLANG_MAMBA: u8 = 0;

/// The parallel parts of an SGLang suffix after `_<model>`
/// (`hicache_storage.py:748-771`), every number decimal without a leading
/// zero, as the f-strings write them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SgTail {
    /// `_<tp_rank>_<tp_size>`: absent for MLA KV (one file per page).
    pub tp: Option<(u32, u32)>,
    /// `_<pp_size>_<pp_rank>` (size first), only when `pp_size > 1`.
    pub pp: Option<(u32, u32)>,
    /// `_cp<rank>_<size>`, only when `attn_cp_size > 1`.
    pub cp: Option<(u32, u32)>,
    /// `_tp<tp_size>_dcp<rank>_<size>_page<logical_page_size>`, only when
    /// `dcp_size > 1` (MLA).
    pub dcp: Option<SgDcp>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SgDcp {
    pub tp_size: u32,
    pub rank: u32,
    pub size: u32,
    pub page: u32,
}

/// A cursor over a suffix's bytes.
struct Cur<'a>(&'a [u8]);

impl Cur<'_> {
    fn lit(&mut self, l: &[u8]) -> bool {
        match self.0.strip_prefix(l) {
            Some(r) => {
                self.0 = r;
                true
            }
            None => false,
        }
    }
    fn num(&mut self) -> Option<u32> {
        let e = self
            .0
            .iter()
            .position(|c| !c.is_ascii_digit())
            .unwrap_or(self.0.len());
        let v = decimal(&self.0[..e], u32::MAX as u64)? as u32;
        self.0 = &self.0[e..];
        Some(v)
    }
    /// `<lead><a>_<b>`, or nothing consumed.
    fn pair(&mut self, lead: &[u8]) -> Option<(u32, u32)> {
        let save = self.0;
        let r = (|| {
            if !self.lit(lead) {
                return None;
            }
            let a = self.num()?;
            if !self.lit(b"_") {
                return None;
            }
            Some((a, self.num()?))
        })();
        if r.is_none() {
            self.0 = save;
        }
        r
    }
}

/// The tail after `_<model>`, parsed strictly: each part in SGLang's order,
/// every rank below its size, every present part's size above 1 (a part is
/// written only then; the TP part always), the TP part only where it can be
/// (non-MLA KV, and the Mamba pool, which is always TP-sharded), DCP sizes
/// dividing the TP size and the logical page size.
pub fn sglang_tail(t: &[u8], mamba: bool) -> Option<SgTail> {
    let mut c = Cur(t);
    let mut tail = SgTail {
        tp: None,
        pp: None,
        cp: None,
        dcp: None,
    };
    // `_<tp_rank>_<tp_size>` and `_<pp_size>_<pp_rank>` are both two bare
    // numbers: a TP pair has rank < size, a PP pair size > rank.
    let save = c.0;
    match c.pair(b"_") {
        Some((a, b)) if a < b => tail.tp = Some((a, b)),
        _ => c.0 = save,
    }
    let save = c.0;
    match c.pair(b"_") {
        Some((a, b)) if a > b && a > 1 => tail.pp = Some((a, b)),
        _ => c.0 = save,
    }
    if let Some((r, s)) = c.pair(b"_cp") {
        if r >= s || s < 2 {
            return None;
        }
        tail.cp = Some((r, s));
    }
    if c.lit(b"_tp") {
        let tp_size = c.num()?;
        let (rank, size) = c.pair(b"_dcp")?;
        if !c.lit(b"_page") {
            return None;
        }
        let page = c.num()?;
        let ok = size >= 2
            && rank < size
            && tp_size.is_multiple_of(size)
            && page > 0
            && page.is_multiple_of(size)
            && tail.tp.is_none_or(|(_, t)| t == tp_size);
        if !ok {
            return None;
        }
        if tail.tp.is_some_and(|(r, _)| r % size != rank) {
            return None;
        }
        tail.dcp = Some(SgDcp {
            tp_size,
            rank,
            size,
            page,
        });
    }
    if !c.0.is_empty() {
        return None;
    }
    // DCP with a TP part is the Mamba pool's (its TP suffix takes the DCP
    // part too); MLA KV never has a TP part.
    if (mamba && tail.tp.is_none()) || (!mamba && tail.tp.is_some() && tail.dcp.is_some()) {
        return None;
    }
    Some(tail)
}

/// One SGLang page file name split: hash, pool, and the suffix text after
/// them (starting with `_`), before `.bin`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SgSplit<'a> {
    pub hash: [u8; MAX_HASH_BYTES],
    /// An index into [`SGLANG_POOLS`]; `None` for the KV pool.
    pub pool: Option<u8>,
    pub suffix: &'a [u8],
}

/// Every way `name` splits into hash, pool and suffix (a pool name may
/// continue into the model text: `deepseek_v4_c1` + `_indexer…`).
pub fn sglang_splits(name: &[u8]) -> Vec<SgSplit<'_>> {
    let mut out = Vec::new();
    let Some(stem) = name.strip_suffix(b".bin") else {
        return out;
    };
    if stem.len() < 65 || !is_lower_hex(&stem[..64]) {
        return out;
    }
    let Some((hash, _)) = hex_bytes(&stem[..64]) else {
        return out;
    };
    let rest = &stem[64..];
    if rest[0] == b'_' {
        out.push(SgSplit {
            hash,
            pool: None,
            suffix: rest,
        });
    } else if rest[0] == b'.' {
        for (i, p) in SGLANG_POOLS.iter().enumerate() {
            if let Some(s) = rest[1..].strip_prefix(p.as_bytes()) {
                if s.first() == Some(&b'_') {
                    out.push(SgSplit {
                        hash,
                        pool: Some(i as u8),
                        suffix: s,
                    });
                }
            }
        }
    }
    out
}

/// One reading of an SGLang name: the model text and the tail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SgReading {
    pub hash: [u8; MAX_HASH_BYTES],
    pub pool: Option<u8>,
    /// The model text as the name spells it (`/` already `-`).
    pub model: Vec<u8>,
    pub tail: SgTail,
}

/// Every reading of `name`: with `models` (the model texts the operator
/// named), only those models; without, every split of the suffix (the
/// served name may end in `_<digits>`, so several splits usually parse).
pub fn sglang_readings(name: &[u8], models: &[Vec<u8>]) -> Vec<SgReading> {
    let mut out = Vec::new();
    for sp in sglang_splits(name) {
        let suffix = &sp.suffix[1..];
        let mamba = sp.pool == Some(SGLANG_MAMBA);
        let mut try_at = |m: usize| {
            if let Some(tail) = sglang_tail(&suffix[m..], mamba) {
                out.push(SgReading {
                    hash: sp.hash,
                    pool: sp.pool,
                    model: suffix[..m].to_vec(),
                    tail,
                });
            }
        };
        if models.is_empty() {
            for m in 0..=suffix.len() {
                if m == suffix.len() || suffix[m] == b'_' {
                    try_at(m);
                }
            }
        } else {
            for model in models {
                if suffix.starts_with(model) {
                    try_at(model.len());
                }
            }
        }
    }
    out
}

/// The model text SGLang keys its files on: the served name with every `/`
/// made `-` (`hicache_storage.py:746`).
pub fn sglang_model_text(served: &[u8]) -> Vec<u8> {
    served
        .iter()
        .map(|&b| if b == b'/' { b'-' } else { b })
        .collect()
}

/// The name SGLang writes for a reading (the inverse of [`sglang_readings`]).
pub fn sglang_name(hash_hex: &str, pool: Option<u8>, model: &str, t: &SgTail) -> String {
    let mut s = String::from(hash_hex);
    if let Some(p) = pool {
        s.push('.');
        s.push_str(SGLANG_POOLS[p as usize]);
    }
    s.push('_');
    s.push_str(model);
    if let Some((r, n)) = t.tp {
        s.push_str(&format!("_{r}_{n}"));
    }
    if let Some((n, r)) = t.pp {
        s.push_str(&format!("_{n}_{r}"));
    }
    if let Some((r, n)) = t.cp {
        s.push_str(&format!("_cp{r}_{n}"));
    }
    if let Some(d) = t.dcp {
        s.push_str(&format!(
            "_tp{}_dcp{}_{}_page{}",
            d.tp_size, d.rank, d.size, d.page
        ));
    }
    s.push_str(".bin");
    s
}

/// LMCache GDS (`v1/storage_backend/gds_backend.py:46-50`): the header
/// both the data file and its sidecar start with, its JSON length, the
/// suffixes and the sidecar's suffix.
pub const GDS_HEADER_BYTES: u64 = 4096;
pub const GDS_META_LEN: u64 = 4088;
pub const GDS_DATA_SUFFIXES: [&str; 2] = [".kvcache.safetensors", ".weka1"];
pub const GDS_SIDECAR_SUFFIX: &str = ".metadata";
/// The temp suffix: `.tmp` + `uuid4().hex[:8]` (`rand_suffix(8)`).
pub const GDS_TEMP_HEX: usize = 8;
/// The header's dtype strings and their item sizes (`torch_dtypes`, `:60-75`).
pub const GDS_DTYPES: [(&str, u64); 14] = [
    ("F16", 2),
    ("BF16", 2),
    ("F32", 4),
    ("F64", 8),
    ("U8", 1),
    ("U16", 2),
    ("U32", 4),
    ("U64", 8),
    ("I8", 1),
    ("I16", 2),
    ("I32", 4),
    ("I64", 8),
    ("F8E4M3FN", 1),
    ("F8E5M2", 1),
];
/// The only `__metadata__.lmcache_version` the start-up scan accepts.
pub const GDS_VERSION: &str = "1";

/// A first-level GDS directory: `str(hash)[0:2]` of a decimal hash
/// (`-1`…`-9`, `10`…`99`; `0`…`9` for a one-digit hash).
pub fn gds_dir1(name: &[u8]) -> bool {
    matches!(
        name,
        [b'-', b'1'..=b'9'] | [b'1'..=b'9', b'0'..=b'9'] | [b'0'..=b'9']
    )
}

/// A second-level GDS directory: `str(hash)[2:4]`, one or two digits (a
/// hash of two decimal characters or fewer has none: its files sit in the
/// first level, `os.path.join` dropping the empty name).
pub fn gds_dir2(name: &[u8]) -> bool {
    (1..=2).contains(&name.len()) && name.iter().all(u8::is_ascii_digit)
}

/// What a file of a GDS bucket is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GdsKind {
    Data,
    Sidecar,
    DataTemp,
    SidecarTemp,
}

/// Splits a GDS file name into its kind and the quoted key text.
pub fn gds_name(name: &[u8]) -> Option<(GdsKind, &[u8])> {
    let (stem, temp) = match name.len().checked_sub(4 + GDS_TEMP_HEX) {
        Some(at) if &name[at..at + 4] == b".tmp" && is_lower_hex(&name[at + 4..]) => {
            (&name[..at], true)
        }
        _ => (name, false),
    };
    let (stem, sidecar) = match stem.strip_suffix(GDS_SIDECAR_SUFFIX.as_bytes()) {
        Some(s) => (s, true),
        None => (stem, false),
    };
    let key = GDS_DATA_SUFFIXES
        .iter()
        .find_map(|suf| stem.strip_suffix(suf.as_bytes()))?;
    if key.is_empty() {
        return None;
    }
    let kind = match (sidecar, temp) {
        (false, false) => GdsKind::Data,
        (true, false) => GdsKind::Sidecar,
        (false, true) => GdsKind::DataTemp,
        (true, true) => GdsKind::SidecarTemp,
    };
    Some((kind, key))
}

fn quote_safe(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'~')
}

/// Python's `urllib.parse.quote(text, safe="")` of UTF-8 bytes.
pub fn quote(text: &[u8]) -> String {
    let mut s = String::with_capacity(text.len());
    for &b in text {
        if quote_safe(b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

/// The inverse of [`quote`], strictly: only what `quote` writes
/// (uppercase `%XX` for every byte outside the safe set, nothing else).
pub fn unquote(q: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(q.len());
    let mut i = 0;
    while i < q.len() {
        let b = q[i];
        if b == b'%' {
            let hex = q.get(i + 1..i + 3)?;
            let v = |c: u8| match c {
                b'0'..=b'9' => Some(c - b'0'),
                b'A'..=b'F' => Some(c - b'A' + 10),
                _ => None,
            };
            let byte = (v(hex[0])? << 4) | v(hex[1])?;
            if quote_safe(byte) {
                return None;
            }
            out.push(byte);
            i += 3;
        } else if quote_safe(b) {
            out.push(b);
            i += 1;
        } else {
            return None;
        }
    }
    Some(out)
}

/// `str(hash)[0:2]` and `str(hash)[2:4]` of LMCache's signed hex hash text
/// (the decimal text of the same Python int); `None` when the hash is wider
/// than 128 bits (not checked).
pub fn gds_buckets(hash_text: &[u8]) -> Option<(String, String)> {
    let (neg, d) = match hash_text.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, hash_text),
    };
    if d.len() > 32 {
        return None;
    }
    let v = u128::from_str_radix(std::str::from_utf8(d).ok()?, 16).ok()?;
    let dec = if neg { format!("-{v}") } else { v.to_string() };
    let chars: Vec<char> = dec.chars().collect();
    let take = |a: usize, b: usize| {
        chars[a.min(chars.len())..b.min(chars.len())]
            .iter()
            .collect()
    };
    Some((take(0, 2), take(2, 4)))
}

/// What a GDS header says (`pack_metadata`, `:101-124`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GdsHeader {
    pub dtype: String,
    pub shape: Vec<u64>,
    /// `data_offsets[1] - data_offsets[0]`: the payload bytes after the header.
    pub nbytes: u64,
    pub fmt: i64,
}

/// Parses a 4096-byte GDS header strictly: the u64 LE length 4088, the
/// JSON `pack_metadata` writes padded with spaces, a known dtype, offsets
/// `[0, n]` with `n` = the shape's element count × the item size, and
/// `lmcache_version` "1". The error names the field and both values.
pub fn gds_header(buf: &[u8]) -> Result<GdsHeader, String> {
    if buf.len() as u64 != GDS_HEADER_BYTES {
        return Err(format!(
            "header is {} bytes, expected {GDS_HEADER_BYTES}",
            buf.len()
        ));
    }
    let len = u64::from_le_bytes(buf[..8].try_into().map_err(|_| "short header")?);
    if len != GDS_META_LEN {
        return Err(format!("length word is {len}, expected {GDS_META_LEN}"));
    }
    let text = &buf[8..];
    let end = text.iter().rposition(|&b| b != b' ').map_or(0, |p| p + 1);
    let v: serde_json::Value =
        serde_json::from_slice(&text[..end]).map_err(|e| format!("JSON does not parse ({e})"))?;
    let m = v
        .get("kvcache")
        .and_then(|m| m.as_object())
        .ok_or("no \"kvcache\" object")?;
    let dtype = m
        .get("dtype")
        .and_then(|d| d.as_str())
        .ok_or("no \"dtype\" string")?;
    let item = GDS_DTYPES
        .iter()
        .find(|(d, _)| *d == dtype)
        .map(|(_, n)| *n)
        .ok_or_else(|| format!("dtype {dtype:?} is none LMCache writes"))?;
    let shape: Vec<u64> = m
        .get("shape")
        .and_then(|s| s.as_array())
        .ok_or("no \"shape\" list")?
        .iter()
        .map(|x| x.as_u64())
        .collect::<Option<_>>()
        .ok_or("shape holds a value that is not a count")?;
    let offs: Vec<u64> = m
        .get("data_offsets")
        .and_then(|s| s.as_array())
        .ok_or("no \"data_offsets\" list")?
        .iter()
        .map(|x| x.as_u64())
        .collect::<Option<_>>()
        .ok_or("data_offsets holds a value that is not a count")?;
    let [0, nbytes] = offs[..] else {
        return Err(format!("data_offsets is {offs:?}, expected [0, n]"));
    };
    let numel = shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .and_then(|n| n.checked_mul(item))
        .ok_or("shape overflows")?;
    if numel != nbytes {
        return Err(format!(
            "data_offsets says {nbytes} bytes, shape {shape:?} of {dtype} is {numel}"
        ));
    }
    let fmt = m
        .get("fmt")
        .and_then(|f| f.as_i64())
        .ok_or("no integer \"fmt\"")?;
    let version = m
        .get("__metadata__")
        .and_then(|x| x.get("lmcache_version"))
        .and_then(|x| x.as_str());
    if version != Some(GDS_VERSION) {
        return Err(format!(
            "__metadata__.lmcache_version is {}, expected \"{GDS_VERSION}\" (the engine \
                skips it at start-up)",
            version.map_or("absent".to_string(), |v| format!("{v:?}"))
        ));
    }
    Ok(GdsHeader {
        dtype: dtype.to_string(),
        shape,
        nbytes,
        fmt,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_and_rank_directories() {
        assert_eq!(
            namespace_dir(b"org_Model-7B_0867086f3a7a"),
            Some((&b"org_Model-7B"[..], "0867086f3a7a"))
        );
        assert_eq!(namespace_dir(b"org_Model-7B_0867086F3A7A"), None);
        assert_eq!(namespace_dir(b"_0867086f3a7a"), None);
        assert_eq!(
            rank_dir(b"org_Model-7B_0867086f3a7a_r12"),
            Some((&b"org_Model-7B_0867086f3a7a"[..], 12))
        );
        assert_eq!(rank_dir(b"org_Model-7B_0867086f3a7a_r012"), None);
        assert_eq!(rank_dir(b"org_Model-7B_0867086f3a7a_r"), None);
        assert_eq!(rank_dir(b"org_Model_r0"), None);
    }

    #[test]
    fn buckets_and_leaves() {
        let h = b"2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881";
        assert!(bucket1(b"2d7"));
        assert!(!bucket1(b"2D7"));
        assert_eq!(bucket2(b"11_g0"), Some((&b"11"[..], 0)));
        assert_eq!(bucket2(b"11_g01"), None);
        let name = [&h[..], b".bin"].concat();
        let LeafName::Block(k) = leaf(&name, b"2d7", b"11", 0) else {
            panic!()
        };
        assert_eq!(k.len, 32);
        assert_eq!(k.hex().as_bytes(), h);
        // The hash must match its buckets.
        assert_eq!(leaf(&name, b"2d8", b"11", 0), LeafName::Foreign);
        let t = [&h[..], b".bin_7447066661002759665.tmp"].concat();
        assert!(matches!(
            leaf(&t, b"2d7", b"11", 0),
            LeafName::Temp(_, 7447066661002759665)
        ));
        // llm-d's u32 suffix (`file_io.cpp:43-45`).
        let t = [&h[..], b".bin_4294967295.tmp"].concat();
        assert!(matches!(
            leaf(&t, b"2d7", b"11", 0),
            LeafName::Temp(_, 4294967295)
        ));
        assert_eq!(VLLM_TEMP_MAX, 9223372036854775807);
        let t = [&h[..], b".bin_9223372036854775808.tmp"].concat();
        assert_eq!(leaf(&t, b"2d7", b"11", 0), LeafName::Foreign);
        assert!(probe(b".o_direct_probe_42.tmp"));
        assert!(!probe(b".o_direct_probe_042.tmp"));
    }

    #[test]
    fn mp_names_decode_the_packed_rank() {
        let h = "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881";
        let n = mp_name(format!("org-SEP-Model-7B@0x02010201@0@{h}.data").as_bytes()).unwrap();
        assert_eq!((n.world(), n.rank(), n.group, n.staging), (2, 1, 0, false));
        let n =
            mp_name(format!("org-SEP-Model-7B@0x04030403@a@{h}@tenantA.tmp").as_bytes()).unwrap();
        assert_eq!((n.world(), n.rank(), n.group, n.staging), (4, 3, 10, true));
        assert_eq!(n.salt.as_deref(), Some(&b"tenantA"[..]));
        assert!(mp_name(format!("m@0x0201020@0@{h}.data").as_bytes()).is_none());
        assert!(mp_name(format!("m@0x02010201@00@{h}.data").as_bytes()).is_none());
        assert!(mp_name(b"m@0x02010201@0@abc.data").is_none());
    }

    #[test]
    fn pt_names_parse_one_way_or_are_ambiguous() {
        let Pt::One(n) = pt_name(b"org-Model-7B@2@1@-168c883837dc43ef@bfloat16@user%alice.pt")
        else {
            panic!()
        };
        assert_eq!((n.world, n.worker, n.layer), (2, 1, None));
        assert_eq!(n.hash, b"-168c883837dc43ef");
        assert_eq!(n.tags, vec![b"user%alice".to_vec()]);
        assert!(matches!(
            pt_name(b"org-Model-7B@1@0@9f0d8c7b770e52e@bfloat16.pt"),
            Pt::One(_)
        ));
        // A model ending like a key, or a tag value holding `@`: two readings.
        assert!(matches!(
            pt_name(b"m@1@0@1f@half@t%v@1@0@2f@half.pt"),
            Pt::Ambiguous(2)
        ));
        let Pt::One(n) = pt_name(b"m@1@0@1f@half@t%a@b.pt") else {
            panic!()
        };
        assert_eq!(n.tags, vec![b"t%a@b".to_vec()]);
        assert_eq!(pt_name(b"vllm@org-Model@2@1@-1f.pt"), Pt::Legacy);
        assert_eq!(pt_name(b"x@2@1@0f@bfloat16.pt"), Pt::None);
    }

    #[test]
    fn pt_keys_round_trip() {
        for t in ["-168c883837dc43ef", "9f0d8c7b770e52e", "0", "-1"] {
            assert_eq!(pt_hash_text(&pt_key(t.as_bytes()).unwrap()), t);
        }
    }

    #[test]
    fn sglang_tails_parse_strictly() {
        let t = |s: &str| sglang_tail(s.as_bytes(), false);
        assert_eq!(t("_1_2").unwrap().tp, Some((1, 2)));
        assert_eq!(t("_0_1").unwrap().tp, Some((0, 1)));
        // MLA: no TP part; PP size first.
        assert_eq!(t("").unwrap(), sglang_tail(b"", false).unwrap());
        let x = t("_2_1").unwrap();
        assert_eq!((x.tp, x.pp), (None, Some((2, 1))));
        let x = t("_0_1_2_1").unwrap();
        assert_eq!((x.tp, x.pp), (Some((0, 1)), Some((2, 1))));
        let x = t("_1_4_cp1_2").unwrap();
        assert_eq!(x.cp, Some((1, 2)));
        let x = t("_tp4_dcp1_2_page64").unwrap();
        assert_eq!(
            x.dcp,
            Some(SgDcp {
                tp_size: 4,
                rank: 1,
                size: 2,
                page: 64
            })
        );
        for bad in [
            "_1_1",
            "_01_2",
            "_1_2_",
            "_cp2_2",
            "_cp0_1",
            "_1_2_tp2_dcp0_2_page64",
            "_tp3_dcp0_2_page64",
            "_tp4_dcp0_2_page63",
            "_tp4_dcp2_2_page64",
            "_x",
            "_1_2_1_2",
        ] {
            assert_eq!(t(bad), None, "{bad}");
        }
        // The Mamba pool is always TP-sharded, DCP included.
        assert_eq!(sglang_tail(b"", true), None);
        assert!(sglang_tail(b"_1_4_tp4_dcp1_2_page64", true).is_some());
    }

    #[test]
    fn sglang_readings_need_the_model() {
        let h = "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881";
        let n = format!("{h}_org-Model-7B_1_2.bin");
        // Without the model: TP rank 1 of 2 of org-Model-7B, or MLA of org-Model-7B_1_2.
        let r = sglang_readings(n.as_bytes(), &[]);
        assert_eq!(r.len(), 2);
        let m = vec![b"org-Model-7B".to_vec()];
        let r = sglang_readings(n.as_bytes(), &m);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].tail.tp, Some((1, 2)));
        assert_eq!(sglang_name(h, None, "org-Model-7B", &r[0].tail), n);
        // A model ending in digits is read right with the model known.
        let n = format!("{h}_m_7_0_1.bin");
        let r = sglang_readings(n.as_bytes(), &[b"m_7".to_vec()]);
        assert_eq!((r.len(), r[0].tail.tp), (1, Some((0, 1))));
        // Pools: the longest name and a shorter one that continues into the model.
        let n = format!("{h}.deepseek_v4_c1_indexer_m_0_1.bin");
        let s = sglang_splits(n.as_bytes());
        assert_eq!(s.len(), 2);
        let r = sglang_readings(n.as_bytes(), &[b"m".to_vec()]);
        assert_eq!(r.len(), 1);
        assert_eq!(
            SGLANG_POOLS[r[0].pool.unwrap() as usize],
            "deepseek_v4_c1_indexer"
        );
        let n = format!("{h}.mamba_m_0_2.bin");
        let r = sglang_readings(n.as_bytes(), &[b"m".to_vec()]);
        assert_eq!(r[0].pool, Some(SGLANG_MAMBA));
        assert!(
            sglang_readings(format!("{h}.mamba_m.bin").as_bytes(), &[b"m".to_vec()]).is_empty()
        );
        // An MLA name with no numeric tail has one reading even without the model.
        assert_eq!(
            sglang_readings(format!("{h}_org-Model-7B.bin").as_bytes(), &[]).len(),
            1
        );
        assert_eq!(sglang_model_text(b"org/Model-7B"), b"org-Model-7B");
        // An empty served name writes `__0_2`.
        let r = sglang_readings(format!("{h}__0_2.bin").as_bytes(), &[Vec::new()]);
        assert_eq!(r[0].tail.tp, Some((0, 2)));
    }

    /// The header `pack_metadata` writes for a [2, 2, 16, 16] BF16 chunk
    /// (LMCache 0.5.6 `gds_backend.py:101-124`, run on the wheel).
    fn header(json: &str) -> Vec<u8> {
        let mut b = 4088u64.to_le_bytes().to_vec();
        b.extend_from_slice(json.as_bytes());
        b.resize(4096, b' ');
        b
    }

    #[test]
    fn gds_names_quoting_buckets_and_headers() {
        assert_eq!(GDS_HEADER_BYTES, 4096);
        assert_eq!(GDS_META_LEN, GDS_HEADER_BYTES - 8);
        let key = b"org/Model-7B@2@1@-168c883837dc43ef@bfloat16@user%alice";
        let q = quote(key);
        assert_eq!(
            q,
            "org%2FModel-7B%402%401%40-168c883837dc43ef%40bfloat16%40user%25alice"
        );
        assert_eq!(unquote(q.as_bytes()).unwrap(), key);
        assert_eq!(unquote(b"a%2fb"), None);
        assert_eq!(unquote(b"a%41"), None);
        assert_eq!(unquote(b"a@b"), None);
        // The reference's example: hash -1624823340610634735 = -0x168c883837dc43ef.
        assert_eq!(
            gds_buckets(b"-168c883837dc43ef"),
            Some(("-1".into(), "62".into()))
        );
        assert!(gds_dir1(b"-1") && gds_dir1(b"99") && !gds_dir1(b"09") && !gds_dir1(b"-0"));
        // Short hashes: str(123) gives 12/3/, str(-5) gives -5/ and no second level.
        assert_eq!(gds_buckets(b"7b"), Some(("12".into(), "3".into())));
        assert_eq!(gds_buckets(b"-5"), Some(("-5".into(), "".into())));
        assert!(gds_dir2(b"3") && !gds_dir2(b"") && !gds_dir2(b"x1"));
        let n = format!("{q}.kvcache.safetensors");
        assert_eq!(gds_name(n.as_bytes()), Some((GdsKind::Data, q.as_bytes())));
        let n = format!("{q}.kvcache.safetensors.metadata");
        assert_eq!(gds_name(n.as_bytes()).unwrap().0, GdsKind::Sidecar);
        let n = format!("{q}.weka1.tmp0a1b2c3d");
        assert_eq!(gds_name(n.as_bytes()).unwrap().0, GdsKind::DataTemp);
        let n = format!("{q}.kvcache.safetensors.metadata.tmp0a1b2c3d");
        assert_eq!(gds_name(n.as_bytes()).unwrap().0, GdsKind::SidecarTemp);
        assert_eq!(
            gds_name(format!("{q}.kvcache.safetensors.tmp0A1B2C3D").as_bytes()),
            None
        );
        let good = concat!(
            r#"{"kvcache": {"dtype": "BF16", "shape": [2, 2, 16, 16], "#,
            r#""data_offsets": [0, 2048], "fmt": 1, "#,
            r#""__metadata__": {"lmcache_version": "1"}}}"#
        );
        let h = gds_header(&header(good)).unwrap();
        assert_eq!((h.nbytes, h.fmt, h.dtype.as_str()), (2048, 1, "BF16"));
        for (bad, why) in [
            (good.replace("2048", "2049"), "data_offsets says"),
            (good.replace("BF16", "BF17"), "dtype"),
            (good.replace("\"1\"}", "\"2\"}"), "lmcache_version"),
            (good[..40].to_string(), "does not parse"),
        ] {
            let e = gds_header(&header(&bad)).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
        let mut b = header(good);
        b[0] = 7;
        assert!(gds_header(&b).unwrap_err().contains("length word"));
        assert!(gds_header(&b[..100]).is_err());
    }

    /// Each constant against the released source it comes from (checked
    /// against the PyPI wheels sglang 0.5.23 and lmcache 0.5.6; the real
    /// writers' trees in fixtures/offload/real/ are read with them).
    #[test]
    fn constants_pinned_to_the_released_sources() {
        // sglang/srt/mem_cache/hicache_storage.py:85-121 (PoolName, `kv` has
        // no part in a name), :730 (the default directory), :908 (the temp).
        assert_eq!(SGLANG_POOLS.len(), 22);
        assert_eq!(SGLANG_POOLS[SGLANG_MAMBA as usize], "mamba");
        assert_eq!(SGLANG_POOLS[21], "draft_swa");
        assert_eq!(crate::offload::walk::SGLANG_DEFAULT_ROOT, "/tmp/hicache");
        assert!(sglang_temp(format!(".{}.tmp", "0".repeat(32)).as_bytes()));
        // :750-771: PP size first, then _cp<rank>_<size>, then the DCP part.
        let t = SgTail {
            tp: Some((1, 2)),
            pp: Some((2, 1)),
            cp: Some((1, 2)),
            dcp: None,
        };
        assert_eq!(sglang_name("h", None, "m", &t), "h_m_1_2_2_1_cp1_2.bin");
        // lmcache/v1/storage_backend/gds_backend.py:46-50, :60-75, :146, :678.
        assert_eq!(GDS_SIDECAR_SUFFIX, ".metadata");
        assert_eq!(GDS_DATA_SUFFIXES, [".kvcache.safetensors", ".weka1"]);
        assert_eq!(GDS_VERSION, "1");
        assert_eq!(GDS_HEADER_BYTES, 4096);
        assert_eq!(GDS_TEMP_HEX, 8);
        assert_eq!(GDS_DTYPES[0], ("F16", 2));
        assert_eq!(GDS_DTYPES[13], ("F8E5M2", 1));
        // lmcache/utils.py:366-390.
        assert_eq!(LMCACHE_DTYPES.len(), 14);
    }

    #[test]
    fn sglang_temp_and_shape() {
        assert!(sglang_temp(b".0123456789abcdef0123456789abcdef.tmp"));
        assert!(!sglang_temp(b".0123456789abcdef0123456789abcdeg.tmp"));
        let h = "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881";
        assert!(sglang_shape(format!("{h}_org-Model-7B_1_2.bin").as_bytes()));
        assert!(sglang_shape(format!("{h}.mamba_m_0_2.bin").as_bytes()));
    }
}
