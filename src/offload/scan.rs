//! What the walk found (docs/format.md §15.3): plain data, handed from the
//! reader (`walk`) to the rules (`judge`). Block keys are interned as
//! fixed-size [`Key`]s, never as paths, so memory grows with the number of
//! blocks; paths are rebuilt from keys for output.

use super::grammar::{Key, MpName, PtName};
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, RandomState};

/// The most paths of one kind kept per set (the rest are counted).
pub const PATH_CAP: usize = 10_000;

/// What `statx` says an entry is, apart from a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Regular,
    Symlink,
    /// A FIFO, socket, device, or a directory where a file belongs.
    Special(&'static str),
}

/// Paths of one kind: the first [`PATH_CAP`] and how many there were.
#[derive(Clone, Debug)]
pub struct Paths<T> {
    pub items: Vec<T>,
    pub count: u64,
}

impl<T> Default for Paths<T> {
    fn default() -> Self {
        Paths {
            items: Vec::new(),
            count: 0,
        }
    }
}

impl<T> Paths<T> {
    pub fn push(&mut self, t: T) {
        self.count += 1;
        if self.items.len() < PATH_CAP {
            self.items.push(t);
        }
    }

    pub fn merge(&mut self, other: Paths<T>) {
        let n = other.count;
        for t in other.items {
            if self.items.len() < PATH_CAP {
                self.items.push(t);
            }
        }
        self.count += n;
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// A staging (temp) file: where, how big, when last written, whose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Staged {
    pub path: String,
    pub size: u64,
    pub mtime_s: i64,
    pub rank: Option<u32>,
}

/// Entries that are no block: staging files, foreign names, links and
/// special files, probe files, empty directories, legacy layouts,
/// ambiguous names.
#[derive(Clone, Debug, Default)]
pub struct Loose {
    pub staging: Paths<Staged>,
    pub foreign: Paths<String>,
    pub symlinks: Paths<String>,
    pub special: Paths<(String, &'static str)>,
    pub probes: Paths<Staged>,
    pub empty_dirs: Paths<String>,
    pub legacy: Paths<String>,
    pub ambiguous: Paths<String>,
    /// SGLang HiCache page files (recognised, not judged).
    pub sglang: Paths<String>,
}

impl Loose {
    pub fn merge(&mut self, o: Loose) {
        self.staging.merge(o.staging);
        self.foreign.merge(o.foreign);
        self.symlinks.merge(o.symlinks);
        self.special.merge(o.special);
        self.probes.merge(o.probes);
        self.empty_dirs.merge(o.empty_dirs);
        self.legacy.merge(o.legacy);
        self.ambiguous.merge(o.ambiguous);
        self.sglang.merge(o.sglang);
    }

    pub fn is_empty(&self) -> bool {
        self.staging.is_empty()
            && self.foreign.is_empty()
            && self.symlinks.is_empty()
            && self.special.is_empty()
            && self.probes.is_empty()
            && self.empty_dirs.is_empty()
            && self.legacy.is_empty()
            && self.ambiguous.is_empty()
            && self.sglang.is_empty()
    }
}

/// A namespace's `config.json` as found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Config {
    Missing,
    Symlink,
    Special(&'static str),
    TooLarge(u64),
    Read(Vec<u8>),
}

/// One block file of a rank directory.
#[derive(Clone, Copy, Debug)]
pub struct BlockFile {
    pub key: Key,
    pub size: u64,
    pub state: State,
}

/// One `<base>_r<N>` directory.
#[derive(Clone, Debug, Default)]
pub struct RankScan {
    pub present: bool,
    /// A symlink or special file where the rank directory belongs.
    pub not_dir: Option<State>,
    pub blocks: Vec<BlockFile>,
    pub loose: Loose,
}

/// One vLLM/llm-d namespace (`<model>_<12 hex>` and its `_r<N>` siblings).
#[derive(Clone, Debug)]
pub struct NsScan {
    /// The root it was found under (its display text).
    pub root: String,
    pub base: Vec<u8>,
    /// The base directory exists (as a directory).
    pub base_dir: bool,
    pub base_not_dir: Option<State>,
    pub config: Config,
    pub ranks: BTreeMap<u32, RankScan>,
    pub loose: Loose,
}

impl NsScan {
    pub fn new(root: String, base: Vec<u8>) -> NsScan {
        NsScan {
            root,
            base,
            base_dir: false,
            base_not_dir: None,
            config: Config::Missing,
            ranks: BTreeMap::new(),
            loose: Loose::default(),
        }
    }

    /// The namespace directory's display path.
    pub fn path(&self) -> String {
        format!("{}/{}", self.root, String::from_utf8_lossy(&self.base))
    }
}

/// The identity of an lmcache-mp set.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MpIdent {
    pub model: Vec<u8>,
    pub world: u8,
    pub group: u32,
    pub salt: Option<Vec<u8>>,
}

impl MpIdent {
    pub fn of(n: &MpName) -> MpIdent {
        MpIdent {
            model: n.model.clone(),
            world: n.world(),
            group: n.group,
            salt: n.salt.clone(),
        }
    }
}

/// The identity of an LMCache local-disk set.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PtIdent {
    pub model: Vec<u8>,
    pub world: u32,
    pub dtype: Vec<u8>,
    pub layer: Option<u32>,
    pub tags: Vec<Vec<u8>>,
}

impl PtIdent {
    pub fn of(n: &PtName) -> PtIdent {
        PtIdent {
            model: n.model.clone(),
            world: n.world,
            dtype: n.dtype.clone(),
            layer: n.layer,
            tags: n.tags.clone(),
        }
    }
}

/// The files of one flat identity group (lmcache-mp, lmcache): per key,
/// the ranks holding it and their sizes.
#[derive(Clone, Debug, Default)]
pub struct FlatSet {
    pub roots: BTreeSet<String>,
    pub blocks: Chunks,
    /// Files whose rank is at or above the world size.
    pub out_of_range: Paths<(String, u32)>,
    pub staging: Paths<Staged>,
}

/// Everything one root holds apart from its namespaces and flat sets.
#[derive(Clone, Debug, Default)]
pub struct RootScan {
    pub path: String,
    pub loose: Loose,
}

/// The walk's whole answer.
#[derive(Clone, Debug, Default)]
pub struct Scan {
    pub roots: Vec<RootScan>,
    pub namespaces: Vec<NsScan>,
    pub mp: BTreeMap<MpIdent, FlatSet>,
    pub pt: BTreeMap<PtIdent, FlatSet>,
    /// Entries looked at (one statx each).
    pub entries: u64,
    /// Directories and files opened without O_NOATIME (EPERM).
    pub without_noatime: u64,
}

/// Where an engine puts its offload root by default (docs/format.md §15.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Looked {
    pub path: std::path::PathBuf,
    pub producer: &'static str,
    pub why: String,
    pub present: bool,
}

/// One file of a chunk: its rank, its size and what it is.
pub type ChunkFile = (u32, u64, State);

/// The chunks of one flat set, sealed (built by [`ChunkBuilder`]): each key
/// once, in key order, with its files in the order the walk read them.
/// Three flat arrays, no allocation per chunk: a key (40 bytes) and an
/// offset (4) per chunk, a [`ChunkFile`] (32) per file.
#[derive(Clone, Debug, Default)]
pub struct Chunks {
    keys: Vec<Key>,
    /// `files[start[i]..start[i + 1]]` are chunk `i`'s.
    start: Vec<u32>,
    files: Vec<ChunkFile>,
}

impl Chunks {
    /// The keys, in order.
    pub fn keys(&self) -> std::slice::Iter<'_, Key> {
        self.keys.iter()
    }

    /// Each chunk's files, in key order.
    pub fn values(&self) -> impl Iterator<Item = &[ChunkFile]> + '_ {
        (0..self.keys.len()).map(|i| self.at(i))
    }

    fn at(&self, i: usize) -> &[ChunkFile] {
        &self.files[self.start[i] as usize..self.start[i + 1] as usize]
    }

    /// The files of `key`, if any.
    pub fn get(&self, key: &Key) -> Option<&[ChunkFile]> {
        // A key borrowed from `keys()` (what the judge looks up) is found
        // by its address; any other by binary search.
        let base = self.keys.as_ptr() as usize;
        let i = (key as *const Key as usize).wrapping_sub(base) / std::mem::size_of::<Key>();
        if self.keys.get(i).is_some_and(|k| std::ptr::eq(k, key)) {
            return Some(self.at(i));
        }
        self.keys.binary_search(key).ok().map(|i| self.at(i))
    }
}

impl std::ops::Index<&Key> for Chunks {
    type Output = [ChunkFile];

    fn index(&self, key: &Key) -> &[ChunkFile] {
        self.get(key).unwrap_or(&[])
    }
}

/// Builds [`Chunks`] as the walk reads files: a key's first file makes
/// its chunk, found again through an open-addressed table of chunk numbers
/// and hash tags (hashed with a per-process random key, so that crafted
/// names cannot make lookups slow); every file is one [`ChunkFile`] and the
/// number of its chunk. [`ChunkBuilder::finish`] sorts the keys and groups
/// the files in place.
#[derive(Clone, Debug, Default)]
pub struct ChunkBuilder {
    keys: Vec<Key>,
    /// Per slot: the chunk number plus one in the low 32 bits (0 = empty),
    /// the key's hash's high 32 bits above; a power-of-two length.
    table: Vec<u64>,
    hasher: RandomState,
    files: Vec<ChunkFile>,
    chunk_of: Vec<u32>,
}

impl ChunkBuilder {
    /// Adds one file of chunk `key`.
    pub fn push(&mut self, key: Key, file: ChunkFile) {
        let c = self.chunk(key);
        self.files.push(file);
        self.chunk_of.push(c);
    }

    fn chunk(&mut self, key: Key) -> u32 {
        if (self.keys.len() + 1) * 8 > self.table.len() * 7 {
            self.grow();
        }
        let mask = self.table.len() - 1;
        let h = self.hasher.hash_one(key);
        let tag = h & !(u32::MAX as u64);
        let mut i = h as usize & mask;
        loop {
            let slot = self.table[i];
            if slot == 0 {
                let c = self.keys.len() as u32;
                self.keys.push(key);
                self.table[i] = tag | (c as u64 + 1);
                return c;
            }
            let c = (slot as u32).wrapping_sub(1);
            if slot & !(u32::MAX as u64) == tag && self.keys[c as usize] == key {
                return c;
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let len = (self.table.len() * 2).max(64);
        let mut table = vec![0u64; len];
        for slot in std::mem::take(&mut self.table) {
            if slot == 0 {
                continue;
            }
            let c = (slot as u32 - 1) as usize;
            let mut i = self.hasher.hash_one(self.keys[c]) as usize & (len - 1);
            while table[i] != 0 {
                i = (i + 1) & (len - 1);
            }
            table[i] = slot;
        }
        self.table = table;
    }

    /// Seals: keys in order, each chunk's files together in read order.
    pub fn finish(self) -> Chunks {
        let ChunkBuilder {
            mut keys,
            table,
            mut files,
            mut chunk_of,
            ..
        } = self;
        drop(table);
        let n = keys.len();
        // The chunks in key order: by the hash's first 8 bytes, then whole.
        let mut order: Vec<u32> = (0..n as u32).collect();
        let prefix = |c: u32| {
            let h = &keys[c as usize].hash;
            u64::from_be_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]])
        };
        order.sort_unstable_by_key(|&c| prefix(c));
        let mut a = 0;
        while a < n {
            let p = prefix(order[a]);
            let mut b = a + 1;
            while b < n && prefix(order[b]) == p {
                b += 1;
            }
            if b - a > 1 {
                order[a..b].sort_unstable_by(|&x, &y| keys[x as usize].cmp(&keys[y as usize]));
            }
            a = b;
        }
        // rank[c]: chunk c's place in key order; start: its first file's.
        let mut rank = vec![0u32; n];
        for (i, &c) in order.iter().enumerate() {
            rank[c as usize] = i as u32;
        }
        drop(order);
        let mut start = vec![0u32; n + 1];
        for &c in &chunk_of {
            start[rank[c as usize] as usize + 1] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        // chunk_of becomes each file's destination (stable within a
        // chunk), then files are permuted there in place.
        let mut next = start[..n].to_vec();
        for c in chunk_of.iter_mut() {
            let r = rank[*c as usize] as usize;
            *c = next[r];
            next[r] += 1;
        }
        drop(next);
        permute(&mut files, &mut chunk_of);
        drop(chunk_of);
        permute(&mut keys, &mut rank);
        files.shrink_to_fit();
        Chunks { keys, start, files }
    }
}

/// Moves each `items[j]` to `dest[j]` in place (`dest` a permutation; it is
/// left as the identity): every swap puts one item where it belongs.
fn permute<T>(items: &mut [T], dest: &mut [u32]) {
    for j in 0..items.len() {
        while dest[j] as usize != j {
            let d = dest[j] as usize;
            items.swap(j, d);
            dest.swap(j, d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offload::grammar::MAX_HASH_BYTES;

    fn key(i: u64, len: u8, group: u32) -> Key {
        let mut hash = [0u8; MAX_HASH_BYTES];
        // Many keys share their first 8 bytes (the sort's first pass).
        hash[..8].copy_from_slice(&(i % 7).to_be_bytes());
        hash[8..16].copy_from_slice(&(i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_be_bytes());
        Key { hash, len, group }
    }

    #[test]
    fn chunks_group_each_keys_files_in_read_order_and_sort_the_keys() {
        let mut b = ChunkBuilder::default();
        let mut want: BTreeMap<Key, Vec<ChunkFile>> = BTreeMap::new();
        let states = [
            State::Regular,
            State::Symlink,
            State::Special("FIFO"),
            State::Regular,
        ];
        // 5,000 keys, each seen up to five times, interleaved; the same
        // hash with another length or group is another key.
        for round in 0..5u64 {
            for i in 0..5_000u64 {
                if (i + round) % 3 == 0 && round > 0 {
                    continue;
                }
                let k = key(i, 32 - (i % 2) as u8 * 16, (i % 3) as u32);
                let f = (
                    (round * 7 + i) as u32 % 9,
                    i * 10 + round,
                    states[(i % 4) as usize],
                );
                b.push(k, f);
                want.entry(k).or_default().push(f);
            }
        }
        let c = b.finish();
        let keys: Vec<Key> = c.keys().copied().collect();
        assert_eq!(keys, want.keys().copied().collect::<Vec<_>>());
        let values: Vec<Vec<ChunkFile>> = c.values().map(|v| v.to_vec()).collect();
        assert_eq!(values, want.values().cloned().collect::<Vec<_>>());
        for (k, v) in &want {
            // A copy of the key (found by search) and the stored key.
            assert_eq!(&c[k], v.as_slice());
        }
        for k in c.keys() {
            assert_eq!(&c[k], want[k].as_slice());
        }
        assert!(c.get(&key(99_999, 32, 0)).is_none());
        assert!(c[&key(99_999, 32, 0)].is_empty());
    }

    #[test]
    fn no_chunks() {
        let c = ChunkBuilder::default().finish();
        assert_eq!(c.keys().count(), 0);
        assert_eq!(c.values().count(), 0);
        assert!(c.get(&key(1, 32, 0)).is_none());
        assert_eq!(Chunks::default().values().count(), 0);
    }
}
