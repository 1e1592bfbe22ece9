//! What the walk found (docs/format.md §15.3): plain data, handed from the
//! reader (`walk`) to the rules (`judge`). Block keys are interned as
//! fixed-size [`Key`]s, never as paths, so memory grows with the number of
//! blocks; paths are rebuilt from keys for output.

use super::grammar::{Key, MpName, PtName, SgDcp, SgReading};
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
    /// SGLang HiCache page files whose names parse more than one way
    /// (no `--model`, or several that fit).
    pub sglang: Paths<String>,
    /// SGLang HiCache page files of a model no `--model` names.
    pub sglang_other: Paths<String>,
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
        self.sglang_other.merge(o.sglang_other);
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
            && self.sglang_other.is_empty()
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

/// The identity of an SGLang HiCache set (docs/format.md §15.2): the model
/// text, the pool, MLA or not, and the parallel layout the suffix names.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SgIdent {
    pub model: Vec<u8>,
    /// An index into `grammar::SGLANG_POOLS`; `None`: the KV pool.
    pub pool: Option<u8>,
    /// `None`: MLA (one file per page, no TP part).
    pub tp_size: Option<u32>,
    pub pp_size: u32,
    pub cp_size: u32,
    /// The DCP part with its rank set to 0.
    pub dcp: Option<SgDcp>,
}

impl SgIdent {
    /// The set a reading belongs to and its rank in it: pipeline stage
    /// outermost, then attention-CP rank, then the TP rank (DCP rank for
    /// MLA), as [`SgIdent::world`] counts them.
    pub fn of(r: &SgReading) -> (SgIdent, u32) {
        let t = &r.tail;
        let (pp_size, pp_rank) = t.pp.unwrap_or((1, 0));
        let (cp_rank, cp_size) = t.cp.unwrap_or((0, 1));
        let (inner_rank, inner_size) = match (t.tp, t.dcp) {
            (Some((r, n)), _) => (r, n),
            (None, Some(d)) => (d.rank, d.size),
            (None, None) => (0, 1),
        };
        let id = SgIdent {
            model: r.model.clone(),
            pool: r.pool,
            tp_size: t.tp.map(|(_, n)| n),
            pp_size,
            cp_size,
            dcp: t.dcp.map(|d| SgDcp { rank: 0, ..d }),
        };
        let rank = (pp_rank as u64 * cp_size as u64 + cp_rank as u64) * inner_size as u64
            + inner_rank as u64;
        (id, rank.min(u32::MAX as u64) as u32)
    }

    /// The files one page needs: TP (or DCP) ranks × CP ranks × stages.
    pub fn world(&self) -> u64 {
        let inner = self.tp_size.or(self.dcp.map(|d| d.size)).unwrap_or(1);
        inner as u64 * self.cp_size as u64 * self.pp_size as u64
    }

    /// The suffix tail of `rank` (the inverse of [`SgIdent::of`]).
    pub fn tail(&self, rank: u32) -> super::grammar::SgTail {
        let inner = self.tp_size.or(self.dcp.map(|d| d.size)).unwrap_or(1);
        let inner_rank = rank % inner;
        let rest = rank / inner;
        let cp_rank = rest % self.cp_size;
        let pp_rank = rest / self.cp_size;
        super::grammar::SgTail {
            tp: self.tp_size.map(|n| (inner_rank, n)),
            pp: (self.pp_size > 1).then_some((self.pp_size, pp_rank)),
            cp: (self.cp_size > 1).then_some((cp_rank, self.cp_size)),
            dcp: self.dcp.map(|d| SgDcp {
                rank: if self.tp_size.is_some() {
                    inner_rank % d.size
                } else {
                    inner_rank
                },
                ..d
            }),
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

/// One GDS header as read (from a data file or a sidecar): a digest of its
/// bytes, its size, and what it says (the data file's expected size,
/// 4096 + the payload bytes) or why it says nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GdsHead {
    pub digest: [u8; 32],
    pub parsed: Result<u64, String>,
}

/// An LMCache GDS identity group: its data files as a flat set, each data
/// file's header and each sidecar, per (key, rank).
#[derive(Clone, Debug, Default)]
pub struct GdsSet {
    pub flat: FlatSet,
    pub headers: HashMap<(Key, u32), GdsHead>,
    /// Sidecars: their state, and their header where one was read.
    pub sidecars: HashMap<(Key, u32), (State, Option<GdsHead>)>,
    /// Files placed in the wrong bucket directories are foreign, listed here
    /// per set: (path, the buckets their hash needs).
    pub misplaced: Paths<(String, String)>,
    /// Data files end `.weka1` (wekafs), not `.kvcache.safetensors`.
    pub weka: bool,
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
    pub sg: BTreeMap<SgIdent, FlatSet>,
    pub gds: BTreeMap<PtIdent, GdsSet>,
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
