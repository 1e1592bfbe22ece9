//! The types a judged set is made of (docs/format.md §15.5), and the
//! options every producer's rules read: below the tallies and the rules so
//! that every producer's judge and the shared tallies use one definition.

use super::scan::{Paths, Staged};
use crate::format::finding::{Finding, Severity};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The most incomplete or damaged blocks the document lists per set.
pub const LIST_CAP: usize = 10_000;

/// The largest world a set's names, directories or `config.json` may claim
/// before kvcr refuses to enumerate its ranks (LMCache MP packs at most 255;
/// no deployment of one set reaches this): beyond it the claim is KV310 and
/// no rank is expected, so nothing is allocated per claimed rank.
pub const FLAT_WORLD_MAX: u32 = 4096;

/// Which producer's reading `--producer` asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Choice {
    #[default]
    Auto,
    Vllm,
    Llmd,
    Lmcache,
    LmcacheMp,
    Sglang,
}

impl Choice {
    /// The name `--producer` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Choice::Auto => "auto",
            Choice::Vllm => "vllm",
            Choice::Llmd => "llmd",
            Choice::Lmcache => "lmcache",
            Choice::LmcacheMp => "lmcache-mp",
            Choice::Sglang => "sglang",
        }
    }
}

/// The geometry options (docs/format.md §15.2): the bytes the engine's
/// configuration gives and the disk does not record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Geometry {
    /// vLLM `--kv-bytes-per-chunk`: one file (the row the worker logs).
    pub kv_bytes_per_chunk: Option<u64>,
    /// llm-d `--bytes-per-block`: per group (`None`: every group).
    pub bytes_per_block: BTreeMap<Option<u32>, u64>,
    /// lmcache and lmcache-mp `--chunk-bytes`: one rank's full chunk.
    pub chunk_bytes: Option<u64>,
    /// SGLang `--page-bytes`: one rank's KV page file (one pipeline stage).
    pub page_bytes: Option<u64>,
}

impl Geometry {
    pub(super) fn llmd_bpb(&self, group: u32) -> Option<u64> {
        self.bytes_per_block
            .get(&Some(group))
            .or_else(|| self.bytes_per_block.get(&None))
            .copied()
    }
}

/// One incomplete or damaged block, as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedBlock {
    pub key: String,
    pub group: Option<u32>,
    pub present_ranks: Vec<u32>,
    pub missing_ranks: Vec<u32>,
    pub problem: String,
    /// One of its files (the first damaged one, or the first present).
    pub path: String,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Blocks {
    pub total: u64,
    pub complete: u64,
    pub incomplete: u64,
    pub damaged: u64,
}

/// One judged set.
#[derive(Clone, Debug)]
pub struct Set {
    pub path: String,
    pub producer: &'static str,
    pub identity: Map<String, Value>,
    pub findings: Vec<Finding>,
    /// `None`: not checkable offline (vLLM).
    pub ranks_expected: Option<Vec<u32>>,
    pub ranks_present: Vec<u32>,
    pub blocks: Blocks,
    pub bytes: u64,
    pub staging: Paths<Staged>,
    pub foreign: Paths<String>,
    pub listed: Vec<ListedBlock>,
    pub listed_count: u64,
}

impl Set {
    pub(super) fn new(path: String, producer: &'static str) -> Set {
        Set {
            path,
            producer,
            identity: Map::new(),
            findings: Vec::new(),
            ranks_expected: None,
            ranks_present: Vec::new(),
            blocks: Blocks::default(),
            bytes: 0,
            staging: Paths::default(),
            foreign: Paths::default(),
            listed: Vec::new(),
            listed_count: 0,
        }
    }

    pub fn rejected(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Reject)
    }

    /// The first rejecting finding in code order: the set's cause.
    pub fn cause(&self) -> Option<&Finding> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Reject)
            .min_by_key(|f| f.code)
    }

    pub(super) fn list(&mut self, b: ListedBlock) {
        self.listed_count += 1;
        if self.listed.len() < LIST_CAP {
            self.listed.push(b);
        }
    }
}
