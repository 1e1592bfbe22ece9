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
    fn sglang_temp_and_shape() {
        assert!(sglang_temp(b".0123456789abcdef0123456789abcdef.tmp"));
        assert!(!sglang_temp(b".0123456789abcdef0123456789abcdeg.tmp"));
        let h = "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881";
        assert!(sglang_shape(format!("{h}_org-Model-7B_1_2.bin").as_bytes()));
        assert!(sglang_shape(format!("{h}.mamba_m_0_2.bin").as_bytes()));
    }
}
