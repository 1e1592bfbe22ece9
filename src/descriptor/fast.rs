//! The fast path of descriptor parsing, for the common case: a well-formed,
//! schema-valid v1 descriptor without escapes in its strings.
//!
//! It reads the JSON into a flat node list kept per thread (no allocation
//! per object or array, unlike the general [`super::json`] tree), checks
//! every field of docs/format.md §3 with the same helpers and bounds as
//! [`super::parse`], and hashes the docs/format.md §3.2 canonical form from the same list.
//! It answers only when every check passes; anything else (an error of any
//! kind, an escape, a negative or fractional number, an unexpected shape)
//! returns `None` and the general parser takes over, so every finding is
//! still made, worded and ordered by one implementation.
//!
//! Where it answers it must answer exactly as the general parser:
//! `parse_descriptor_with` checks that in every debug build (tests and
//! fuzzing), and `tests::agrees_with_general_parser` checks edited files.

use super::canon::Sink;
use super::parse::{
    decode_hex, digest_mismatch, parse_digest, AllocBuilder, Ident, ParseOutcome,
    DESCRIPTOR_FIELDS, DIM_MAX, HANDLE_KINDS, I63_MAX, PID_MAX,
};
use super::{
    parse_canonical_uuid, Descriptor, Dtype, Geometry, GpuUuid, Handle, Model, NodeId, Owner,
    Writer, MAX_ALLOCATIONS, MAX_WORLD_SIZE, SCHEMA,
};
use sha2::{Digest, Sha256};
use std::cell::RefCell;
use uuid::Uuid;

/// Nesting deeper than this is not a descriptor (which nests 4 deep).
const MAX_DEPTH: u32 = 8;
/// A descriptor with 4096 allocations has about 29,000 nodes.
const MAX_NODES: usize = 32 * 1024;
/// No object of a descriptor has more members (the top level has 17).
const MAX_MEMBERS: usize = 17;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Null,
    True,
    False,
    /// A non-negative integer literal (digits only).
    Num,
    /// A string without escapes.
    Str,
    Arr,
    Obj,
}

/// One JSON value, its member key and its text as byte ranges of the input.
#[derive(Clone, Copy, Debug)]
struct Node {
    kind: Kind,
    /// Number of children (arrays and objects).
    len: u32,
    /// Index one past this node's last descendant: its next sibling.
    end: u32,
    key: (u32, u32),
    /// String content (without quotes) or number literal.
    text: (u32, u32),
}

/// What one thread reuses from one descriptor to the next.
struct Scratch {
    nodes: Vec<Node>,
    /// The canonical form, hashed in one call.
    canon: Vec<u8>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = const {
        RefCell::new(Scratch {
            nodes: Vec::new(),
            canon: Vec::new(),
        })
    };
}

/// The outcome of [`super::parse_descriptor_with`] for `bytes`, when they
/// are a valid descriptor the fast path understands; else `None`.
pub(super) fn parse(bytes: &[u8], keep_allocations: bool) -> Option<ParseOutcome> {
    let src = std::str::from_utf8(bytes).ok()?;
    SCRATCH.with(|cell| {
        let mut scratch = cell.try_borrow_mut().ok()?;
        let Scratch { nodes, canon } = &mut *scratch;
        nodes.clear();
        let mut r = Reader {
            b: bytes,
            pos: 0,
            nodes,
        };
        r.ws();
        r.value((0, 0), 0)?;
        r.ws();
        if r.pos != bytes.len() {
            return None;
        }
        let doc = Doc { src, nodes };
        doc.descriptor(keep_allocations, canon)
    })
}

struct Reader<'r> {
    b: &'r [u8],
    pos: usize,
    nodes: &'r mut Vec<Node>,
}

impl Reader<'_> {
    #[inline]
    fn ws(&mut self) {
        // Indentation first, eight spaces at a time.
        const SPACES: u64 = u64::from_ne_bytes([b' '; 8]);
        if self.b.get(self.pos) == Some(&b'\n') {
            self.pos += 1;
            while let Some(chunk) = self.b.get(self.pos..self.pos + 8) {
                if chunk != SPACES.to_ne_bytes() {
                    break;
                }
                self.pos += 8;
            }
        }
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.b.get(self.pos) {
            self.pos += 1;
        }
    }

    #[inline]
    fn eat(&mut self, c: u8) -> Option<()> {
        (self.b.get(self.pos) == Some(&c)).then(|| self.pos += 1)
    }

    /// A string at the opening quote, without escapes or control characters.
    #[inline]
    fn string(&mut self) -> Option<(u32, u32)> {
        let start = self.pos + 1;
        let end = super::json::find_special(self.b, start);
        if self.b.get(end) != Some(&b'"') {
            return None;
        }
        self.pos = end + 1;
        Some((start as u32, end as u32))
    }

    fn push(&mut self, kind: Kind, key: (u32, u32), text: (u32, u32)) -> Option<usize> {
        if self.nodes.len() >= MAX_NODES {
            return None;
        }
        let at = self.nodes.len();
        self.nodes.push(Node {
            kind,
            len: 0,
            end: at as u32 + 1,
            key,
            text,
        });
        Some(at)
    }

    fn value(&mut self, key: (u32, u32), depth: u32) -> Option<()> {
        let none = (0, 0);
        match *self.b.get(self.pos)? {
            b'"' => {
                let text = self.string()?;
                self.push(Kind::Str, key, text)?;
            }
            b'0'..=b'9' => {
                let start = self.pos;
                while let Some(b'0'..=b'9') = self.b.get(self.pos) {
                    self.pos += 1;
                }
                // A leading zero, a fraction or an exponent: the general parser.
                let digits = &self.b[start..self.pos];
                if (digits.len() > 1 && digits[0] == b'0')
                    || matches!(self.b.get(self.pos), Some(b'.' | b'e' | b'E'))
                {
                    return None;
                }
                self.push(Kind::Num, key, (start as u32, self.pos as u32))?;
            }
            b't' => self.literal(b"true", Kind::True, key)?,
            b'f' => self.literal(b"false", Kind::False, key)?,
            b'n' => self.literal(b"null", Kind::Null, key)?,
            open @ (b'[' | b'{') => {
                if depth >= MAX_DEPTH {
                    return None;
                }
                let (kind, close) = if open == b'[' {
                    (Kind::Arr, b']')
                } else {
                    (Kind::Obj, b'}')
                };
                let at = self.push(kind, key, none)?;
                self.pos += 1;
                self.ws();
                let mut len = 0u32;
                if self.eat(close).is_none() {
                    loop {
                        let k = if kind == Kind::Obj {
                            if self.b.get(self.pos) != Some(&b'"') {
                                return None;
                            }
                            let k = self.string()?;
                            self.ws();
                            self.eat(b':')?;
                            self.ws();
                            k
                        } else {
                            none
                        };
                        self.value(k, depth + 1)?;
                        len += 1;
                        self.ws();
                        if self.eat(b',').is_some() {
                            self.ws();
                        } else {
                            self.eat(close)?;
                            break;
                        }
                    }
                }
                let end = self.nodes.len() as u32;
                let n = &mut self.nodes[at];
                n.len = len;
                n.end = end;
            }
            _ => return None,
        }
        Some(())
    }

    fn literal(&mut self, word: &[u8], kind: Kind, key: (u32, u32)) -> Option<()> {
        if !self.b[self.pos..].starts_with(word) {
            return None;
        }
        self.pos += word.len();
        self.push(kind, key, (0, 0)).map(|_| ())
    }
}

/// The node list of one document.
struct Doc<'d> {
    src: &'d str,
    nodes: &'d [Node],
}

impl<'d> Doc<'d> {
    fn span(&self, (a, b): (u32, u32)) -> &'d str {
        &self.src[a as usize..b as usize]
    }

    fn bytes(&self, (a, b): (u32, u32)) -> &'d [u8] {
        &self.src.as_bytes()[a as usize..b as usize]
    }

    /// A string span with its quotes: the string's canonical form.
    fn quoted(&self, (a, b): (u32, u32)) -> &'d [u8] {
        &self.src.as_bytes()[a as usize - 1..b as usize + 1]
    }

    /// The first eight bytes of a key, zero-padded, as a number that orders
    /// like the bytes (keys here hold no NUL, so padding sorts first).
    #[inline]
    fn key_prefix(&self, i: usize) -> u64 {
        let k = self.bytes(self.nodes[i].key);
        if let Some(w) = k.first_chunk::<8>() {
            return u64::from_be_bytes(*w);
        }
        k.iter()
            .enumerate()
            .fold(0u64, |acc, (j, &b)| acc | u64::from(b) << (56 - 8 * j))
    }

    /// Indices of the children of container `i`.
    fn children(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        let mut c = i + 1;
        (0..self.nodes[i].len).map(move |_| {
            let at = c;
            c = self.nodes[c].end as usize;
            at
        })
    }

    /// The members of object `i`, which must have exactly the keys `keys`
    /// (so no key twice), in the order of `keys`.
    fn object<const N: usize>(&self, i: usize, keys: [&str; N]) -> Option<[usize; N]> {
        let n = &self.nodes[i];
        if n.kind != Kind::Obj || n.len as usize != N {
            return None;
        }
        let mut at = [usize::MAX; N];
        for (n, c) in self.children(i).enumerate() {
            let k = self.bytes(self.nodes[c].key);
            // Writers keep one order; try the key list's own first.
            let slot = if keys[n].as_bytes() == k {
                n
            } else {
                keys.iter().position(|want| want.as_bytes() == k)?
            };
            if at[slot] != usize::MAX {
                return None;
            }
            at[slot] = c;
        }
        Some(at)
    }

    fn str(&self, i: usize) -> Option<&'d str> {
        let n = &self.nodes[i];
        (n.kind == Kind::Str).then(|| self.span(n.text))
    }

    /// A string of `min..=max` characters.
    fn string(&self, i: usize, min: usize, max: usize) -> Option<&'d str> {
        let s = self.str(i)?;
        let chars = if s.is_ascii() {
            s.len()
        } else {
            s.chars().count()
        };
        (min..=max).contains(&chars).then_some(s)
    }

    fn uint(&self, i: usize, lo: u64, hi: u64) -> Option<u64> {
        let n = &self.nodes[i];
        if n.kind != Kind::Num {
            return None;
        }
        let mut v: u64 = 0;
        for d in self.span(n.text).bytes() {
            v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        }
        (lo..=hi).contains(&v).then_some(v)
    }

    fn boolean(&self, i: usize) -> Option<bool> {
        match self.nodes[i].kind {
            Kind::True => Some(true),
            Kind::False => Some(false),
            _ => None,
        }
    }

    fn uuid(&self, i: usize) -> Option<Uuid> {
        parse_canonical_uuid(self.str(i)?).filter(|u| !u.is_nil())
    }

    fn descriptor(&self, keep_allocations: bool, canon: &mut Vec<u8>) -> Option<ParseOutcome> {
        let [schema, engine_id, incarnation, epoch, rank, world_size, tp, pp, node, gpu_uuid, model, geometry, owner, writer, allocations, created_unix_ms, digest] =
            self.object(0, DESCRIPTOR_FIELDS)?;
        if self.str(schema)? != SCHEMA {
            return None;
        }
        let engine_id = self.string(engine_id, 1, 128)?;
        let engine_ok = engine_id
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b':' | b'/' | b'-'));
        if !engine_ok {
            return None;
        }
        let incarnation = self.uuid(incarnation)?;
        let epoch = self.uint(epoch, 1, I63_MAX)?;
        let rank = self.uint(rank, 0, I63_MAX)?;
        let world_size = self.uint(world_size, 1, MAX_WORLD_SIZE)?;
        let tp = self.uint(tp, 1, MAX_WORLD_SIZE)?;
        let pp = self.uint(pp, 1, MAX_WORLD_SIZE)?;
        let [hostname, boot_id] = self.object(node, ["hostname", "boot_id"])?;
        let node = NodeId {
            hostname: self.string(hostname, 1, 253)?.to_owned(),
            boot_id: self.uuid(boot_id)?,
        };
        let gpu_uuid = GpuUuid::parse(self.str(gpu_uuid)?)?;
        let [name, revision, quantization] =
            self.object(model, ["name", "revision", "quantization"])?;
        let quantization = match self.nodes[quantization].kind {
            Kind::Null => None,
            _ => Some(self.string(quantization, 1, 64)?.to_owned()),
        };
        let model = Model {
            name: self.string(name, 1, 256)?.to_owned(),
            revision: self.string(revision, 1, 64)?.to_owned(),
            quantization,
        };
        let geometry = self.geometry(geometry)?;
        let [pid, start_ticks] = self.object(owner, ["pid", "start_ticks"])?;
        let owner = Owner {
            pid: self.uint(pid, 1, PID_MAX)? as i32,
            start_ticks: self.uint(start_ticks, 0, u64::MAX)?,
        };
        let [pid, start_ticks, quiesced] =
            self.object(writer, ["pid", "start_ticks", "quiesced"])?;
        let writer = Writer {
            pid: self.uint(pid, 1, PID_MAX)? as i32,
            start_ticks: self.uint(start_ticks, 0, u64::MAX)?,
            quiesced: self.boolean(quiesced)?,
        };
        let (allocations, alloc_summary) = self.allocations(allocations, keep_allocations)?;
        let created_unix_ms = self.uint(created_unix_ms, 0, I63_MAX)?;
        let text = self.str(digest)?;
        let claimed = parse_digest(text)?;

        let actual = self.digest(canon);
        let engine_id = engine_id.to_owned();
        Some(ParseOutcome {
            ident: Ident {
                engine_id: Some(engine_id.clone()),
                incarnation: Some(incarnation),
                epoch: Some(epoch),
                rank: Some(rank),
            },
            descriptor: Some(Descriptor {
                engine_id,
                incarnation,
                epoch,
                rank,
                world_size,
                tp,
                pp,
                node,
                gpu_uuid,
                model,
                geometry,
                owner,
                writer,
                allocations,
                alloc_summary,
                created_unix_ms,
                digest: claimed,
            }),
            findings: digest_mismatch(&actual, &claimed, text)
                .into_iter()
                .collect(),
        })
    }

    fn geometry(&self, i: usize) -> Option<Geometry> {
        let [num_layers, kv_heads_per_rank, head_size, block_size, num_blocks, dtype, use_mla] =
            self.object(
                i,
                [
                    "num_layers",
                    "kv_heads_per_rank",
                    "head_size",
                    "block_size",
                    "num_blocks",
                    "dtype",
                    "use_mla",
                ],
            )?;
        let g = Geometry {
            num_layers: self.uint(num_layers, 1, DIM_MAX)?,
            kv_heads_per_rank: self.uint(kv_heads_per_rank, 1, DIM_MAX)?,
            head_size: self.uint(head_size, 1, DIM_MAX)?,
            block_size: self.uint(block_size, 1, DIM_MAX)?,
            num_blocks: self.uint(num_blocks, 1, I63_MAX)?,
            dtype: Dtype::parse(self.str(dtype)?)?,
            use_mla: self.boolean(use_mla)?,
        };
        g.bytes_needed().map(|_| g)
    }

    fn allocations(
        &self,
        i: usize,
        keep: bool,
    ) -> Option<(Vec<super::Allocation>, super::AllocSummary)> {
        let n = &self.nodes[i];
        if n.kind != Kind::Arr || n.len == 0 || n.len as usize > MAX_ALLOCATIONS {
            return None;
        }
        let mut b = AllocBuilder::new(n.len as usize, keep);
        for item in self.children(i) {
            // `offset_bytes` is optional (docs/format.md §3.3): 3 members or 4.
            let (id, size_bytes, offset, handle) = if self.nodes[item].len == 4 {
                let [id, s, o, h] =
                    self.object(item, ["id", "size_bytes", "offset_bytes", "handle"])?;
                (id, s, Some(o), h)
            } else {
                let [id, s, h] = self.object(item, ["id", "size_bytes", "handle"])?;
                (id, s, None, h)
            };
            let id = self.string(id, 1, 128)?;
            let size_bytes = self.uint(size_bytes, 1, u64::MAX)?;
            let offset_bytes = match offset {
                Some(o) => self.uint(o, 0, u64::MAX)?,
                None => 0,
            };
            // An overflow is a schema error: the general parser words it.
            offset_bytes.checked_add(size_bytes)?;
            b.push(id, size_bytes, offset_bytes, self.handle(handle)?);
        }
        Some(b.finish())
    }

    fn handle(&self, i: usize) -> Option<Handle> {
        let n = &self.nodes[i];
        if n.kind != Kind::Obj || n.len != 2 {
            return None;
        }
        let first = i + 1;
        let kind_at = if self.bytes(self.nodes[first].key) == b"kind" {
            first
        } else {
            self.nodes[first].end as usize
        };
        let kind = self.str(kind_at)?;
        if !HANDLE_KINDS.contains(&kind) {
            return None;
        }
        if kind == "posix_fd" {
            let [_, fd] = self.object(i, ["kind", "fd"])?;
            return Some(Handle::PosixFd(self.uint(fd, 0, PID_MAX)? as i32));
        }
        let [_, hex] = self.object(i, ["kind", "hex"])?;
        let mut bytes = [0u8; 64];
        if !decode_hex(self.str(hex)?.as_bytes(), &mut bytes, true) {
            return None;
        }
        Some(if kind == "cuda_ipc" {
            Handle::CudaIpc(bytes)
        } else {
            Handle::Fabric(bytes)
        })
    }

    /// SHA-256 of the docs/format.md §3.2 canonical form without the top-level `digest`,
    /// written into `canon` (no longer than the input: whitespace goes,
    /// nothing is escaped) and hashed in one call.
    fn digest(&self, canon: &mut Vec<u8>) -> [u8; 32] {
        canon.clear();
        canon.reserve(self.src.len());
        self.write(canon, 0, Some("digest"));
        Sha256::digest(&canon[..]).into()
    }

    /// Strings hold no escapes nor control characters here, and numbers are
    /// plain non-negative integer literals: both are written as they are.
    fn write<S: Sink>(&self, out: &mut S, i: usize, skip: Option<&str>) {
        let n = &self.nodes[i];
        match n.kind {
            Kind::Null => out.put(b"null"),
            Kind::True => out.put(b"true"),
            Kind::False => out.put(b"false"),
            Kind::Num => out.put(self.bytes(n.text)),
            Kind::Str => out.put(self.quoted(n.text)),
            Kind::Arr => {
                out.byte(b'[');
                for (k, c) in self.children(i).enumerate() {
                    if k > 0 {
                        out.byte(b',');
                    }
                    self.write(out, c, None);
                }
                out.byte(b']');
            }
            // Objects were checked against their key lists: at most
            // MAX_MEMBERS members, keys unique.
            Kind::Obj if n.len <= 4 => self.write_object::<4, S>(out, i, skip),
            Kind::Obj => self.write_object::<MAX_MEMBERS, S>(out, i, skip),
        }
    }

    /// Object `i` (at most `M` members) with its keys in byte order.
    fn write_object<const M: usize, S: Sink>(&self, out: &mut S, i: usize, skip: Option<&str>) {
        // Insertion sort on the keys' first eight bytes, comparing whole
        // keys only when those tie.
        let mut idx = [(0u64, 0usize); M];
        let len = (self.nodes[i].len as usize).min(M);
        for (slot, c) in idx.iter_mut().zip(self.children(i)) {
            *slot = (self.key_prefix(c), c);
        }
        let idx = &mut idx[..len];
        let less = |a: &(u64, usize), b: &(u64, usize)| {
            a.0 < b.0
                || (a.0 == b.0 && self.bytes(self.nodes[a.1].key) < self.bytes(self.nodes[b.1].key))
        };
        for j in 1..idx.len() {
            let mut k = j;
            while k > 0 && less(&idx[k], &idx[k - 1]) {
                idx.swap(k, k - 1);
                k -= 1;
            }
        }
        out.byte(b'{');
        let mut first = true;
        for &(_, c) in idx.iter() {
            let key = self.nodes[c].key;
            if skip.is_some_and(|s| s.as_bytes() == self.bytes(key)) {
                continue;
            }
            if !first {
                out.byte(b',');
            }
            first = false;
            out.put(self.quoted(key));
            out.byte(b':');
            self.write(out, c, None);
        }
        out.byte(b'}');
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse::parse_general;
    use crate::finding::Code;
    use crate::testkit::{seal, to_bytes, Desc};
    use proptest::prelude::*;
    use serde_json::{json, Value};

    fn both(bytes: &[u8]) -> (Option<String>, String) {
        let fast = super::parse(bytes, true).map(|o| format!("{o:?}"));
        let general = format!("{:?}", parse_general(bytes, true));
        (fast, general)
    }

    /// The fast path answers, and exactly as the general parser.
    fn answers_alike(bytes: &[u8]) {
        for keep in [true, false] {
            let fast = super::parse(bytes, keep).expect("the fast path answers");
            assert_eq!(
                format!("{fast:?}"),
                format!("{:?}", parse_general(bytes, keep))
            );
        }
    }

    /// The fast path declines (the general parser then reports).
    fn declines(bytes: &[u8]) {
        assert!(
            super::parse(bytes, true).is_none(),
            "{}",
            String::from_utf8_lossy(bytes)
        );
        assert!(!parse_general(bytes, true).findings.is_empty());
    }

    fn sealed(edit: impl FnOnce(&mut Value)) -> Vec<u8> {
        let mut d = Desc::new("fast:path/1", 1, 4, 2);
        d.allocations = 3;
        let mut v = d.value();
        edit(&mut v);
        seal(&mut v);
        to_bytes(&v)
    }

    #[test]
    fn valid_shapes_agree() {
        for kind in ["fabric", "cuda_ipc", "posix_fd"] {
            let mut d = Desc::new("e", 0, 1, 1);
            d.handle_kind = kind;
            d.allocations = 16;
            answers_alike(&d.bytes());
        }
        answers_alike(&sealed(|_| {}));
        // Compact, keys sorted, digest first: any layout.
        let mut v = Desc::new("e", 0, 1, 1).value();
        seal(&mut v);
        answers_alike(&serde_json::to_vec(&v).unwrap());
        answers_alike(&sealed(|v| {
            v["model"]["quantization"] = json!("fp8");
            v["model"]["name"] = json!("modèle-éè/Ω");
            v["gpu_uuid"] = json!("MIG-4b0c6f1e-2d3a-4c5b-8e9f-0a1b2c3d4e5f");
            v["geometry"]["use_mla"] = json!(true);
            v["writer"]["quiesced"] = json!(false);
            v["allocations"][1]["id"] = json!("kv-0"); // duplicate id: a verdict matter
            v["allocations"][2]["handle"]["hex"] = json!("AB".repeat(64));
        }));
        // Extreme values in range.
        answers_alike(&sealed(|v| {
            v["owner"]["start_ticks"] = json!(u64::MAX);
            v["allocations"][0]["size_bytes"] = json!(u64::MAX);
            v["epoch"] = json!(i64::MAX);
            v["created_unix_ms"] = json!(0);
        }));
    }

    #[test]
    fn offset_bytes_agrees() {
        answers_alike(&sealed(|v| {
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
        answers_alike(&to_bytes(&v));
        // Overflow, a negative, a float: the general parser reports.
        for bad in [json!(u64::MAX), json!(-1), json!(1.0), json!(null)] {
            declines(&sealed(|v| {
                v["allocations"][2]["offset_bytes"] = bad.clone()
            }));
        }
    }

    #[test]
    fn digest_mismatch_agrees() {
        let b = String::from_utf8(sealed(|_| {}))
            .unwrap()
            .replace("\"pid\": 4242", "\"pid\": 4243");
        answers_alike(b.as_bytes());
        let out = super::parse(b.as_bytes(), false).unwrap();
        assert_eq!(out.findings.len(), 1);
        assert_eq!(out.findings[0].code, Code::KV008);
    }

    #[test]
    fn declines_everything_else() {
        let good = String::from_utf8(sealed(|_| {})).unwrap();
        let edits: Vec<String> = vec![
            good.replacen("\"tp\": 4", "\"tp\": 4.0", 1),
            good.replacen("\"tp\": 4", "\"tp\": 04", 1),
            good.replacen("\"tp\": 4", "\"tp\": 4e0", 1),
            good.replacen("\"rank\": 1", "\"rank\": -1", 1),
            good.replacen("\"rank\": 1", "\"rank\": -0", 1),
            good.replacen("\"rank\": 1", "\"rank\": 99999999999999999999999", 1),
            good.replacen("gpu-node-17", "gpu-node-\\u0031", 1),
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
            declines(e.as_bytes());
        }
        // Geometry that overflows u64.
        declines(&sealed(|v| v["geometry"]["num_blocks"] = json!(i64::MAX)));
        // Deep nesting.
        declines(format!("{}{}", "[".repeat(100), "]".repeat(100)).as_bytes());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        // Wherever the fast path answers on an edited file, it answers as
        // the general parser does.
        #[test]
        fn agrees_with_general_parser(pos in any::<prop::sample::Index>(), byte in any::<u8>(), cut in any::<bool>()) {
            let mut b = sealed(|_| {});
            let i = pos.index(b.len());
            if cut { b.truncate(i); } else { b[i] = byte; }
            let (fast, general) = both(&b);
            if let Some(fast) = fast {
                prop_assert_eq!(fast, general);
            }
        }
    }
}
