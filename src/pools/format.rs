//! What KVCR 0.1.1 writes into a pool file, as constants and strict
//! decoders (docs/format.md §16.2): the file name, the journal header and
//! ring frames, the record payload (a msgpack array), the handback region
//! and its digest terms. Every constant here is pinned by a test against the
//! value in the 0.1.1 wheel; a file that disagrees is reported as a layout
//! kvcr does not know, never decoded on a guess. Nothing here does I/O.

use sha2::{Digest, Sha256};

/// The file-name prefix (`kvcr/memory.py:20`).
pub const POOL_PREFIX: &str = "kvcr-";
/// The mode KVCR creates and requires (`kvcr/memory.py:19`, `:100-101`).
pub const POOL_MODE: u32 = 0o600;
/// The journal header's size (`kvcr/memory.py:29`).
pub const JOURNAL_HEADER_BYTES: u64 = 4096;
/// The journal size the service's CLI always uses (`kvcr/kvcr_service.py:60`).
pub const DEFAULT_JOURNAL_BYTES: u64 = 100 * (1 << 20);
/// Offsets of the header words (`kvcr/recovery_journal.py:63`).
pub const INVALID_OFFSET: u64 = 0;
pub const PUBLISHED_OFFSET: u64 = 128;
pub const CONSUMED_OFFSET: u64 = 192;
/// Ring alignment (`kvcr/recovery_journal.py:65`).
pub const ALIGNMENT: u64 = 8;
/// The frame header `<HHH` (`kvcr/recovery_journal.py:69`).
pub const FRAME_HEADER: u64 = 6;
/// The one record type (`kvcr/recovery_journal.py:72`).
pub const RECORD_BLOCK: u16 = 1;
/// The handback header `<32sQ` (`kvcr/recovery_journal.py:562`).
pub const HANDBACK_HEADER: u64 = 40;
/// The handback digest's domain (`kvcr/recovery_journal.py:563`).
pub const HANDBACK_DOMAIN: &[u8] = b"KVCR-HANDBACK\0";
/// `--pool-sizes-gb` counts GiB (`kvcr/kvcr_service.py:64`).
pub const GIB: u128 = 1 << 30;
/// The page size kvcr assumes for the writing host when none is given
/// (x86-64 and most arm64 kernels).
pub const DEFAULT_PAGE_SIZE: u64 = 4096;

/// What a directory entry's name says it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Name {
    /// Not `kvcr-*`: not KVCR's.
    Other,
    /// `kvcr-*` that KVCR's purge pattern `kvcr-.+-[0-9a-f]{32}` does not
    /// fully match: never purged, never granted.
    Unmatched,
    /// Matches the purge pattern, but the pool id is not a service's
    /// `pool_<decimal>` (or is outside KVCR's alphabet).
    ForeignId { pool_id: String, generation: String },
    /// A service's pool file: `kvcr-pool_<index>-<generation>`.
    Pool { index: u64, generation: String },
}

/// Classifies a directory entry's raw name (`kvcr/memory.py:302-305`,
/// `kvcr/kvcr_service.py:63`, `:98`).
pub fn classify_name(name: &[u8]) -> Name {
    let Some(rest) = name.strip_prefix(POOL_PREFIX.as_bytes()) else {
        return Name::Other;
    };
    // `.+-[0-9a-f]{32}`: at least one byte, a dash, then 32 lower-case hex.
    if rest.len() < 34 {
        return Name::Unmatched;
    }
    let (id, tail) = rest.split_at(rest.len() - 33);
    let gen = &tail[1..];
    if tail[0] != b'-' || !gen.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Name::Unmatched;
    }
    // `.` of Python's re matches anything but a newline.
    if id.contains(&b'\n') {
        return Name::Unmatched;
    }
    let generation = String::from_utf8(gen.to_vec()).expect("hex is ascii");
    if let Some(index) = id.strip_prefix(b"pool_").and_then(decimal) {
        return Name::Pool { index, generation };
    }
    Name::ForeignId {
        pool_id: String::from_utf8_lossy(id).into_owned(),
        generation,
    }
}

/// A decimal index as `str(i)` writes it: digits, no sign, no leading zero.
fn decimal(b: &[u8]) -> Option<u64> {
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) || (b.len() > 1 && b[0] == b'0') {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// The journal header words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub invalid: u64,
    pub published: u64,
    pub consumed: u64,
    /// Offsets of header bytes outside the three words that are not zero
    /// (KVCR never writes them), the first few.
    pub stray: Option<u64>,
}

fn u64_at(b: &[u8], off: u64) -> u64 {
    let o = off as usize;
    u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"))
}

/// Decodes a 4096-byte journal header.
pub fn header(b: &[u8; JOURNAL_HEADER_BYTES as usize]) -> Header {
    let words = [INVALID_OFFSET, PUBLISHED_OFFSET, CONSUMED_OFFSET];
    let stray = (0..JOURNAL_HEADER_BYTES)
        .find(|&i| b[i as usize] != 0 && !words.iter().any(|&w| (w..w + 8).contains(&i)));
    Header {
        invalid: u64_at(b, INVALID_OFFSET),
        published: u64_at(b, PUBLISHED_OFFSET),
        consumed: u64_at(b, CONSUMED_OFFSET),
        stray,
    }
}

/// Whether the cursors are valid (`kvcr/recovery_journal.py:289-294`).
pub fn cursors_valid(published: u64, consumed: u64, capacity: u64) -> bool {
    published.is_multiple_of(ALIGNMENT)
        && consumed.is_multiple_of(ALIGNMENT)
        && consumed <= published
        && published - consumed <= capacity
}

/// A ring frame's stored size: the frame padded to [`ALIGNMENT`].
pub fn stored_size(frame_size: u64) -> u64 {
    frame_size.div_ceil(ALIGNMENT) * ALIGNMENT
}

/// Why a ring frame is refused, as KVCR's reader says it
/// (`kvcr/recovery_journal.py:255-266`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    KeySize { frame_size: u16, key_size: u16 },
    UnknownType(u16),
    Exceeds { stored: u64, available: u64 },
    Padding,
}

impl FrameError {
    pub fn describe(&self) -> String {
        match self {
            FrameError::KeySize {
                frame_size,
                key_size,
            } => format!("invalid key size: frame_size {frame_size} < 6 + key_size {key_size}"),
            FrameError::UnknownType(t) => format!("unknown type {t} (only 1, BLOCK, exists)"),
            FrameError::Exceeds { stored, available } => format!(
                "frame of {stored} stored bytes exceeds the published bytes ({available} \
                 pending)"
            ),
            FrameError::Padding => "padding is not zero".to_string(),
        }
    }
}

/// A frame header `<HHH`.
pub fn frame_header(b: &[u8; 6]) -> (u16, u16, u16) {
    (
        u16::from_le_bytes([b[0], b[1]]),
        u16::from_le_bytes([b[2], b[3]]),
        u16::from_le_bytes([b[4], b[5]]),
    )
}

/// Checks a ring frame's header against the pending bytes and the ring's
/// capacity, as KVCR's reader does, in its order.
pub fn check_ring_frame(
    h: (u16, u16, u16),
    pending: u64,
    capacity: u64,
) -> Result<u64, FrameError> {
    let (frame_size, record_type, key_size) = h;
    if u64::from(frame_size) < FRAME_HEADER + u64::from(key_size) {
        return Err(FrameError::KeySize {
            frame_size,
            key_size,
        });
    }
    if record_type != RECORD_BLOCK {
        return Err(FrameError::UnknownType(record_type));
    }
    let stored = stored_size(u64::from(frame_size));
    if stored > capacity || stored > pending {
        return Err(FrameError::Exceeds {
            stored,
            available: pending,
        });
    }
    Ok(stored)
}

// ---------------------------------------------------------------------------
// The record payload: msgpack `[g2, g3, position]` as msgspec decodes it
// (`kvcr/recovery_journal.py:79-93`, `:121-141`).
// ---------------------------------------------------------------------------

/// One decoded record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// G2 residency: `(label, slot)` pairs, or none.
    pub g2: Option<Vec<(String, u64)>>,
    pub g3: Option<u64>,
    pub position: i64,
}

impl Record {
    /// A record with neither residency removes its key.
    pub fn is_removal(&self) -> bool {
        self.g2.is_none() && self.g3.is_none()
    }
}

/// The deepest nesting kvcr skips inside an ignored trailing element.
const MAX_DEPTH: u32 = 32;

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

#[derive(Debug)]
enum Val {
    Nil,
    Int(i128),
    Str(String),
    Array(usize),
    Other(&'static str),
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.b.len() - self.i < n {
            return Err("truncated msgpack".into());
        }
        let s = &self.b[self.i..self.i + n];
        self.i += n;
        Ok(s)
    }
    fn be(&mut self, n: usize) -> Result<u64, String> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |a, &x| (a << 8) | u64::from(x)))
    }
    /// Reads one value's head; arrays return their length (elements follow),
    /// other containers and scalars of no interest are skipped whole.
    fn value(&mut self, depth: u32) -> Result<Val, String> {
        if depth > MAX_DEPTH {
            return Err("msgpack nested too deep".into());
        }
        let t = self.take(1)?[0];
        Ok(match t {
            0x00..=0x7f => Val::Int(i128::from(t)),
            0xe0..=0xff => Val::Int(i128::from(t as i8)),
            0xc0 => Val::Nil,
            0xc2 | 0xc3 => Val::Other("a bool"),
            0xcc => Val::Int(i128::from(self.be(1)?)),
            0xcd => Val::Int(i128::from(self.be(2)?)),
            0xce => Val::Int(i128::from(self.be(4)?)),
            0xcf => Val::Int(i128::from(self.be(8)?)),
            0xd0 => Val::Int(i128::from(self.be(1)? as u8 as i8)),
            0xd1 => Val::Int(i128::from(self.be(2)? as u16 as i16)),
            0xd2 => Val::Int(i128::from(self.be(4)? as u32 as i32)),
            0xd3 => Val::Int(i128::from(self.be(8)? as i64)),
            0xca => {
                self.take(4)?;
                Val::Other("a float")
            }
            0xcb => {
                self.take(8)?;
                Val::Other("a float")
            }
            0xa0..=0xbf => self.str((t & 0x1f) as usize)?,
            0xd9 => {
                let n = self.be(1)? as usize;
                self.str(n)?
            }
            0xda => {
                let n = self.be(2)? as usize;
                self.str(n)?
            }
            0xdb => {
                let n = self.be(4)? as usize;
                self.str(n)?
            }
            0xc4..=0xc6 => {
                let n = self.be(1 << (t - 0xc4))? as usize;
                self.take(n)?;
                Val::Other("bin")
            }
            0x90..=0x9f => Val::Array((t & 0x0f) as usize),
            0xdc => Val::Array(self.be(2)? as usize),
            0xdd => Val::Array(self.be(4)? as usize),
            0x80..=0x8f | 0xde | 0xdf => {
                let n = match t {
                    0xde => self.be(2)? as usize,
                    0xdf => self.be(4)? as usize,
                    _ => (t & 0x0f) as usize,
                };
                for _ in 0..n.checked_mul(2).ok_or("map too long")? {
                    self.skip(depth + 1)?;
                }
                Val::Other("a map")
            }
            0xd4..=0xd8 => {
                self.take(1 + (1 << (t - 0xd4)))?;
                Val::Other("an ext")
            }
            0xc7..=0xc9 => {
                let n = self.be(1 << (t - 0xc7))? as usize;
                self.take(1 + n)?;
                Val::Other("an ext")
            }
            0xc1 => return Err("msgpack byte 0xc1 is never used".into()),
        })
    }
    fn str(&mut self, n: usize) -> Result<Val, String> {
        let s = self.take(n)?;
        String::from_utf8(s.to_vec())
            .map(Val::Str)
            .map_err(|_| "a label is not UTF-8".into())
    }
    fn skip(&mut self, depth: u32) -> Result<(), String> {
        if let Val::Array(n) = self.value(depth)? {
            for _ in 0..n {
                self.skip(depth + 1)?;
            }
        }
        Ok(())
    }
}

fn what(v: &Val) -> String {
    match v {
        Val::Nil => "nil".into(),
        Val::Int(i) => format!("the integer {i}"),
        Val::Str(_) => "a str".into(),
        Val::Array(_) => "an array".into(),
        Val::Other(w) => (*w).into(),
    }
}

/// Decodes a record payload as msgspec does for `_RecoveryBlock`: a shorter
/// array takes the defaults, extra trailing elements are ignored, bytes
/// after the array are an error. Label rules need the pool names
/// (`pool_names`); without them labels are not checked.
pub fn decode_record(payload: &[u8], pool_names: Option<&[String]>) -> Result<Record, String> {
    let mut c = Cursor { b: payload, i: 0 };
    let n = match c.value(0)? {
        Val::Array(n) => n,
        v => return Err(format!("the record is {}, not an array", what(&v))),
    };
    let mut r = Record {
        g2: None,
        g3: None,
        position: -1,
    };
    for i in 0..n {
        match i {
            0 => r.g2 = g2(&mut c)?,
            1 => {
                r.g3 = match c.value(1)? {
                    Val::Nil => None,
                    Val::Int(v) if (0..=i128::from(u64::MAX)).contains(&v) => Some(v as u64),
                    v => return Err(format!("g3 is {}, not nil or an integer ≥ 0", what(&v))),
                }
            }
            2 => {
                r.position = match c.value(1)? {
                    Val::Int(v) if (-1..=i128::from(i64::MAX)).contains(&v) => v as i64,
                    v => return Err(format!("position is {}, not an integer ≥ -1", what(&v))),
                }
            }
            _ => c.skip(1)?,
        }
    }
    if c.i != payload.len() {
        return Err(format!(
            "{} byte(s) follow the record's array",
            payload.len() - c.i
        ));
    }
    if let (Some(names), Some(g2)) = (pool_names, &r.g2) {
        let mut labels = std::collections::BTreeSet::new();
        for (label, _) in g2 {
            let (pool, part) = match label.split_once(':') {
                Some((p, part)) => (p, Some(part)),
                None => (label.as_str(), None),
            };
            let bad_part = part.is_some_and(|p| p.is_empty() || p == "*" || labels.contains(label));
            if !names.iter().any(|n| n == pool) || bad_part {
                return Err(format!(
                    "G2 label {label:?} does not match the pool group (pools {names:?})"
                ));
            }
            labels.insert(label.clone());
        }
    }
    Ok(r)
}

fn g2(c: &mut Cursor<'_>) -> Result<Option<Vec<(String, u64)>>, String> {
    let n = match c.value(1)? {
        Val::Nil => return Ok(None),
        Val::Array(0) => return Err("g2 is an empty array".into()),
        Val::Array(n) => n,
        v => return Err(format!("g2 is {}, not nil or an array", what(&v))),
    };
    let mut out = Vec::new();
    for _ in 0..n {
        match c.value(2)? {
            Val::Array(2) => {}
            Val::Array(k) => return Err(format!("a g2 pair has {k} elements, not 2")),
            v => return Err(format!("a g2 pair is {}, not an array", what(&v))),
        }
        let label = match c.value(3)? {
            Val::Str(s) => s,
            v => return Err(format!("a g2 label is {}, not a str", what(&v))),
        };
        let slot = match c.value(3)? {
            Val::Int(v) if (0..=i128::from(u64::MAX)).contains(&v) => v as u64,
            v => return Err(format!("a g2 slot is {}, not an integer ≥ 0", what(&v))),
        };
        out.push((label, slot));
    }
    Ok(Some(out))
}

// ---------------------------------------------------------------------------
// The handback region (`kvcr/recovery_journal.py:560-711`, `kvcr/memory.py:23-26`).
// ---------------------------------------------------------------------------

/// `x` rounded up to a multiple of `p`.
pub fn round_up(x: u64, p: u64) -> Option<u64> {
    x.div_ceil(p).checked_mul(p)
}

/// One pool of a pool file, as the handback digest names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolTerm {
    pub name: String,
    pub size_bytes: u64,
    pub block_size_bytes: u64,
    pub offset_bytes: u64,
}

fn mp_uint(out: &mut Vec<u8>, v: u64) {
    if v < 0x80 {
        out.push(v as u8);
    } else if v <= 0xff {
        out.extend([0xcc, v as u8]);
    } else if v <= 0xffff {
        out.push(0xcd);
        out.extend((v as u16).to_be_bytes());
    } else if v <= 0xffff_ffff {
        out.push(0xce);
        out.extend((v as u32).to_be_bytes());
    } else {
        out.push(0xcf);
        out.extend(v.to_be_bytes());
    }
}

fn mp_str(out: &mut Vec<u8>, s: &str) {
    let n = s.len();
    if n < 32 {
        out.push(0xa0 | n as u8);
    } else if n <= 0xff {
        out.extend([0xd9, n as u8]);
    } else if n <= 0xffff {
        out.push(0xda);
        out.extend((n as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend((n as u32).to_be_bytes());
    }
    out.extend(s.as_bytes());
}

/// The digest terms (`canonical_pool_terms`, `kvcr/recovery_journal.py:566-585`).
pub struct Terms<'a> {
    pub compatibility_digest: &'a str,
    pub generation: [u8; 16],
    pub pools: &'a [PoolTerm],
    pub journal_bytes: u64,
    pub mapping_bytes: u64,
    pub st_dev: u64,
    pub st_ino: u64,
}

/// The bytes the handback digest covers before the body.
pub fn terms(t: &Terms<'_>) -> Vec<u8> {
    let mut out = HANDBACK_DOMAIN.to_vec();
    out.extend(t.compatibility_digest.as_bytes());
    out.push(0);
    out.extend(t.generation);
    let n = t.pools.len();
    if n < 16 {
        out.push(0x90 | n as u8);
    } else if n <= 0xffff {
        out.push(0xdc);
        out.extend((n as u16).to_be_bytes());
    } else {
        out.push(0xdd);
        out.extend((n as u32).to_be_bytes());
    }
    for p in t.pools {
        out.push(0x84);
        mp_str(&mut out, "name");
        mp_str(&mut out, &p.name);
        mp_str(&mut out, "size_bytes");
        mp_uint(&mut out, p.size_bytes);
        mp_str(&mut out, "block_size_bytes");
        mp_uint(&mut out, p.block_size_bytes);
        mp_str(&mut out, "offset_bytes");
        mp_uint(&mut out, p.offset_bytes);
    }
    for v in [t.journal_bytes, t.mapping_bytes, t.st_dev, t.st_ino] {
        out.extend(v.to_le_bytes());
    }
    out
}

/// sha256(terms ‖ body).
pub fn handback_digest(terms: &[u8], body: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(terms);
    h.update(body);
    h.finalize().into()
}

/// The 16 bytes of a 32-hex-digit generation.
pub fn generation_bytes(gen: &str) -> Option<[u8; 16]> {
    let b = gen.as_bytes();
    if b.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        let h = std::str::from_utf8(&b[2 * i..2 * i + 2]).ok()?;
        *o = u8::from_str_radix(h, 16).ok()?;
    }
    Some(out)
}

/// The pools of a file from `--pool-sizes-gb` and `pool_layouts`: each
/// pool's offset is the journal plus the pools before it.
pub fn pool_terms(journal_bytes: u64, sizes: &[u64], layouts: &[(String, u64)]) -> Vec<PoolTerm> {
    let mut off = journal_bytes;
    sizes
        .iter()
        .zip(layouts)
        .map(|(&size, (name, block))| {
            let t = PoolTerm {
                name: name.clone(),
                size_bytes: size,
                block_size_bytes: *block,
                offset_bytes: off,
            };
            off = off.saturating_add(size);
            t
        })
        .collect()
}

/// A frame's key and payload, as ranges of the body.
pub type FrameRanges = (std::ops::Range<usize>, std::ops::Range<usize>);

/// How a handback body's frames read (`kvcr/recovery_journal.py:686-703`):
/// each frame unpadded, back to back. Returns the frames as (key, payload)
/// ranges, or KVCR's refusal.
pub fn handback_frames(body: &[u8]) -> Result<Vec<FrameRanges>, String> {
    let mut out = Vec::new();
    let mut off = 0usize;
    while off < body.len() {
        if body.len() - off < FRAME_HEADER as usize {
            return Err(format!(
                "handback frame header is truncated at body offset {off}"
            ));
        }
        let (fs, ty, ks) = frame_header(body[off..off + 6].try_into().expect("6"));
        let (fs, ks) = (fs as usize, ks as usize);
        if fs < 6 + ks || off + fs > body.len() {
            return Err(format!(
                "handback frame is malformed at body offset {off}: frame_size {fs}, key_size {ks}, \
                 {} body bytes left",
                body.len() - off
            ));
        }
        if ty != RECORD_BLOCK {
            return Err(format!("handback frame has an unknown type: {ty}"));
        }
        out.push((off + 6..off + 6 + ks, off + 6 + ks..off + fs));
        off += fs;
    }
    Ok(out)
}

/// `--pool-sizes-gb` as KVCR parses it (`kvcr/kvcr_service.py:615-640`):
/// each a positive decimal number of GiB, floored to bytes, rounded down to
/// the page, at least one page.
pub fn parse_pool_sizes_gb(s: &str, page: u64) -> Result<Vec<u64>, String> {
    s.split(',').map(|v| gb(v.trim(), page)).collect()
}

fn gb(v: &str, page: u64) -> Result<u64, String> {
    let bad = || format!("{v:?} is not a positive decimal number of GiB");
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || int.len() + frac.len() > 27
    {
        return Err(bad());
    }
    let digits = format!("{int}{frac}");
    let n: u128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| bad())?
    };
    let bytes = n * GIB / 10u128.pow(frac.len() as u32);
    let bytes = bytes / u128::from(page) * u128::from(page);
    if n == 0 {
        return Err(bad());
    }
    if bytes < u128::from(page) {
        return Err(format!("{v} GiB is less than one page ({page} bytes)"));
    }
    u64::try_from(bytes).map_err(|_| format!("{v} GiB is too large"))
}

/// `pool_layouts` as `NAME:BLOCK[,NAME:BLOCK]...` (NAME may be empty, as
/// vLLM's one pool is), checked as KVCR checks it (`kvcr/config.py:21-36`).
pub fn parse_pool_layouts(s: &str) -> Result<Vec<(String, u64)>, String> {
    let mut out: Vec<(String, u64)> = Vec::new();
    for item in s.split(',') {
        let (name, block) = item
            .rsplit_once(':')
            .ok_or_else(|| format!("{item:?} is not NAME:BLOCK_BYTES"))?;
        if name.contains(':') {
            return Err(format!("pool name {name:?} contains a colon"));
        }
        let block: u64 = block
            .parse()
            .ok()
            .filter(|&b| b > 0)
            .ok_or_else(|| format!("block size {block:?} is not a positive integer"))?;
        if out.iter().any(|(n, _)| n == name) {
            return Err(format!("pool name {name:?} is given twice"));
        }
        out.push((name.to_string(), block));
    }
    if out.len() > 1 && out.iter().any(|(n, _)| n.is_empty()) {
        return Err("an empty pool name is allowed only for a single pool".into());
    }
    Ok(out)
}
