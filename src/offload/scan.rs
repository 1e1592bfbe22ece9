//! What the walk found (docs/format.md §15.3): plain data, handed from the
//! reader (`walk`) to the rules (`judge`). Block keys are interned as
//! fixed-size [`Key`]s, never as paths, so memory grows with the number of
//! blocks; paths are rebuilt from keys for output.

use super::grammar::{Key, MpName, PtName};
use std::collections::{BTreeMap, BTreeSet, HashMap};

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
    pub blocks: HashMap<Key, Vec<(u32, u64, State)>>,
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

/// One llm-d <= v0.8.1 nested set (src/offload/nested.rs): a `tp_…` directory and one dtype below its ranks.
#[derive(Clone, Debug, Default)]
pub struct NestedScan {
    pub root: String,
    /// The directories between the root and `block_size_…` (the model
    /// name as it nests; empty when the PATH named the model directory).
    pub model: Vec<u8>,
    pub block_size: u64,
    pub per_file: u64,
    pub tp: u32,
    pub pp: u32,
    pub pcp: u32,
    pub dtype: Vec<u8>,
    pub ranks: BTreeMap<u32, RankScan>,
    pub loose: Loose,
}

impl NestedScan {
    /// The `tp_…` directory's display path.
    pub fn path(&self) -> String {
        let mut p = self.root.clone();
        if !self.model.is_empty() {
            p.push('/');
            p.push_str(&String::from_utf8_lossy(&self.model));
        }
        format!(
            "{p}/block_size_{}_blocks_per_file_{}/tp_{}_pp_size_{}_pcp_size_{}",
            self.block_size, self.per_file, self.tp, self.pp, self.pcp
        )
    }
}

/// The walk's whole answer.
#[derive(Clone, Debug, Default)]
pub struct Scan {
    pub roots: Vec<RootScan>,
    pub namespaces: Vec<NsScan>,
    pub mp: BTreeMap<MpIdent, FlatSet>,
    pub pt: BTreeMap<PtIdent, FlatSet>,
    /// llm-d <= v0.8.1's nested sets.
    pub nested: Vec<NestedScan>,
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
