//! The rules of docs/format.md §15.2: each set's findings, block counts
//! and verdict, from what the walk found ([`super::scan`]). Pure: no I/O,
//! no clock (the caller passes the time).

use super::canon::{canonical, Canonical, CONFIG_MAX_BYTES};
use super::grammar::{
    gds_buckets, pt_hash_text, quote, sglang_name, sglang_readings, Key, GDS_DATA_SUFFIXES,
    SGLANG_POOLS,
};
use super::scan::{
    BlockFile, Config, FlatSet, GdsSet, Loose, MpIdent, NsScan, Paths, PtIdent, RootScan, Scan,
    SgIdent, Staged, State,
};
use crate::format::finding::{Code, Finding, Severity};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

/// A staging file younger than this may belong to a running writer.
pub const RECENT_S: i64 = 600;
/// The most incomplete or damaged blocks the document lists per set.
pub const LIST_CAP: usize = 10_000;
/// The largest world a flat set's names may claim before kvcr refuses to
/// enumerate its ranks (LMCache MP packs at most 255; no deployment of one
/// set reaches this).
pub const FLAT_WORLD_MAX: u32 = 4096;
/// vLLM's row alignment floor: the page size, a multiple of 4096.
pub const VLLM_ALIGN: u64 = 4096;

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
    fn llmd_bpb(&self, group: u32) -> Option<u64> {
        self.bytes_per_block
            .get(&Some(group))
            .or_else(|| self.bytes_per_block.get(&None))
            .copied()
    }
}

/// What a run is asked for.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Offload roots or namespace directories; none: the defaults.
    pub paths: Vec<PathBuf>,
    pub producer: Choice,
    pub geometry: Geometry,
    /// Threads walking rank directories (at least 1).
    pub threads: usize,
    /// SGLang `--model`: the served model names its files are keyed on
    /// (raw bytes; `/` is made `-` as SGLang does).
    pub sglang_models: Vec<Vec<u8>>,
}

/// A finished run.
#[derive(Clone, Debug)]
pub struct Run {
    pub options: Options,
    /// Where kvcr looked without a PATH.
    pub looked: Vec<super::scan::Looked>,
    pub sets: Vec<Set>,
    pub entries: u64,
    pub without_noatime: u64,
}

impl Run {
    /// 0 nothing rejected, 1 a set rejected.
    pub fn exit_status(&self) -> i32 {
        if self.sets.iter().any(Set::rejected) {
            1
        } else {
            0
        }
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
    fn new(path: String, producer: &'static str) -> Set {
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

    fn list(&mut self, b: ListedBlock) {
        self.listed_count += 1;
        if self.listed.len() < LIST_CAP {
            self.listed.push(b);
        }
    }
}

/// The whole run's sets, in a stable order.
pub fn judge(scan: Scan, choice: Choice, geo: &Geometry, now_s: i64) -> Vec<Set> {
    let mut sets = Vec::new();
    for ns in scan.namespaces {
        sets.push(family(ns, choice, geo, now_s));
    }
    let mp_worlds = worlds(scan.mp.keys().map(|k| (k.model.clone(), k.world as u32)));
    for (id, fs) in scan.mp {
        let mixed = mp_worlds.get(&id.model).is_some_and(|w| w.len() > 1);
        sets.push(mp(id, fs, geo, now_s, mixed));
    }
    let pt_worlds = worlds(scan.pt.keys().map(|k| (k.model.clone(), k.world)));
    for (id, fs) in scan.pt {
        let mixed = pt_worlds.get(&id.model).is_some_and(|w| w.len() > 1);
        sets.push(pt(id, fs, geo, now_s, mixed));
    }
    let sg_worlds = worlds(
        scan.sg
            .keys()
            .map(|k| (k.model.clone(), k.world().min(u32::MAX as u64) as u32)),
    );
    for (id, fs) in scan.sg {
        let mixed = sg_worlds.get(&id.model).is_some_and(|w| w.len() > 1);
        sets.push(sg(id, fs, geo, now_s, mixed));
    }
    sglang_overlap(&mut sets);
    let gds_worlds = worlds(scan.gds.keys().map(|k| (k.model.clone(), k.world)));
    for (id, g) in scan.gds {
        let mixed = gds_worlds.get(&id.model).is_some_and(|w| w.len() > 1);
        sets.push(gds(id, g, now_s, mixed));
    }
    for r in scan.roots {
        if let Some(s) = unattributed(r, now_s) {
            sets.push(s);
        }
    }
    sets
}

fn worlds(it: impl Iterator<Item = (Vec<u8>, u32)>) -> HashMap<Vec<u8>, BTreeSet<u32>> {
    let mut m: HashMap<Vec<u8>, BTreeSet<u32>> = HashMap::new();
    for (model, w) in it {
        m.entry(model).or_default().insert(w);
    }
    m
}

fn plural(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

fn ranks_text(r: &[u32]) -> String {
    crate::format::rankset::compress_ranks(&r.iter().map(|&x| x as u64).collect::<Vec<_>>())
}

/// Findings every set gets from its loose entries.
fn loose_findings(set: &mut Set, loose: Loose, now_s: i64, where_: &str) {
    if !loose.symlinks.is_empty() {
        let first = loose.symlinks.items[0].clone();
        set.findings.push(
            Finding::reject(
                Code::KV308,
                format!(
                    "{} {where_}, never followed (first: {first})",
                    plural(loose.symlinks.count, "symlink", "symlinks")
                ),
            )
            .at(first),
        );
    }
    if !loose.special.is_empty() {
        let (first, kind) = loose.special.items[0].clone();
        set.findings.push(
            Finding::reject(
                Code::KV309,
                format!(
                    "{} {where_}, never opened (first: {first}, a {kind})",
                    plural(loose.special.count, "special file", "special files")
                ),
            )
            .at(first),
        );
    }
    if !loose.staging.is_empty() {
        let empty = loose.staging.items.iter().filter(|s| s.size == 0).count();
        let recent = loose
            .staging
            .items
            .iter()
            .filter(|s| now_s - s.mtime_s < RECENT_S)
            .count();
        let first = &loose.staging.items[0];
        let mut msg = format!(
            "{} left by a writer {where_} ({empty} empty: killed before writing; {} with bytes: \
                killed mid-write or before the rename)",
            plural(loose.staging.count, "staging file", "staging files"),
            loose.staging.count - empty as u64
        );
        if recent > 0 {
            msg.push_str(&format!(
                "; {recent} recent (under {} minutes): a writer may still be running",
                RECENT_S / 60
            ));
        }
        msg.push_str(&format!("; first: {} ({} bytes)", first.path, first.size));
        set.findings
            .push(Finding::notice(Code::KV311, msg).at(first.path.clone()));
    }
    if !loose.foreign.is_empty() {
        let first = loose.foreign.items[0].clone();
        set.findings.push(
            Finding::notice(
                Code::KV312,
                format!(
                    "{} no producer writes {where_} (first: {first})",
                    plural(loose.foreign.count, "name", "names")
                ),
            )
            .at(first),
        );
    }
    if !loose.probes.is_empty() {
        let first = loose.probes.items[0].path.clone();
        set.findings.push(
            Finding::notice(
                Code::KV318,
                format!("vLLM's O_DIRECT probe file left by a killed start-up: {first}"),
            )
            .at(first),
        );
    }
    if !loose.empty_dirs.is_empty() {
        let first = loose.empty_dirs.items[0].clone();
        set.findings.push(
            Finding::notice(
                Code::KV319,
                format!(
                    "{} (a failed store leaves its bucket directories; first: {first})",
                    plural(
                        loose.empty_dirs.count,
                        "empty directory",
                        "empty directories"
                    )
                ),
            )
            .at(first),
        );
    }
    if !loose.legacy.is_empty() {
        let first = loose.legacy.items[0].clone();
        set.findings.push(
            Finding::notice(
                Code::KV323,
                format!(
                    "{} of a layout no current producer writes (first: {first})",
                    plural(loose.legacy.count, "entry", "entries")
                ),
            )
            .at(first),
        );
    }
    if !loose.sglang.is_empty() {
        let first = loose.sglang.items[0].clone();
        set.findings.push(
            Finding::notice(
                Code::KV314,
                format!(
                    "{} of SGLang HiCache whose names parse more than one way: a served model \
                        name may end in _<digits>, so the model cannot be split from the ranks \
                        (first: {first}, {}); not paired with any set: rerun with --model \
                        <served model name> to settle it",
                    plural(loose.sglang.count, "file", "files"),
                    sglang_readings_text(&first)
                ),
            )
            .at(first),
        );
    }
    if !loose.sglang_other.is_empty() {
        let first = loose.sglang_other.items[0].clone();
        set.findings.push(
            Finding::notice(
                Code::KV314,
                format!(
                    "{} of SGLang HiCache of a served model no --model names (first: {first}, \
                        {}): not judged; add its --model to judge it",
                    plural(loose.sglang_other.count, "file", "files"),
                    sglang_readings_text(&first)
                ),
            )
            .at(first),
        );
    }
    if !loose.ambiguous.is_empty() {
        let first = loose.ambiguous.items[0].clone();
        set.findings.push(
            Finding::notice(
                Code::KV314,
                format!(
                    "{} that parse more than one way (an @ inside a field; first: {first}): not \
                        paired with any set",
                    plural(loose.ambiguous.count, "name", "names")
                ),
            )
            .at(first),
        );
    }
    set.staging.merge(loose.staging);
    set.foreign.merge(loose.foreign);
}

fn unattributed(r: RootScan, now_s: i64) -> Option<Set> {
    if r.loose.is_empty() {
        return None;
    }
    let mut set = Set::new(r.path, "unattributed");
    loose_findings(&mut set, r.loose, now_s, "at the root, in no set");
    Some(set)
}

/// The size problems of one file against an expected size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SizeIs {
    Ok,
    Short(u64),
    Long(u64),
    Misaligned(u64),
    Partial,
}

/// Aggregates one code's findings into one line per set.
#[derive(Default)]
struct Tally {
    count: u64,
    first: Option<(String, String, String)>,
}

impl Tally {
    fn add(&mut self, path: impl FnOnce() -> String, expected: String, found: String) {
        self.count += 1;
        if self.first.is_none() {
            self.first = Some((path(), expected, found));
        }
    }

    fn finish(self, set: &mut Set, code: Code, severity: Severity, what: &str) {
        let Some((path, expected, found)) = self.first else {
            return;
        };
        let msg = format!(
            "{} {what} (first: {path}: {found}, expected {expected})",
            plural(self.count, "file", "files")
        );
        let f = match severity {
            Severity::Reject => Finding::reject(code, msg),
            Severity::Notice => Finding::notice(code, msg),
        };
        set.findings.push(f.at(path).values(expected, found));
    }
}

/// The most common size among `sizes` (ties: the larger).
fn mode(sizes: impl Iterator<Item = u64>) -> Option<u64> {
    let mut m: HashMap<u64, u64> = HashMap::new();
    for s in sizes {
        *m.entry(s).or_default() += 1;
    }
    m.into_iter().max_by_key(|&(s, n)| (n, s)).map(|(s, _)| s)
}

fn int_field(c: &Canonical, k: &str) -> Option<u64> {
    c.fields.get(k).and_then(Value::as_u64)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fam {
    Vllm,
    Llmd,
    /// llm-d or vLLM 0.22.0: identical fields.
    LlmdOr022,
    Unknown,
}

/// A vLLM or llm-d namespace (docs/format.md §15.2).
fn family(ns: NsScan, choice: Choice, geo: &Geometry, now_s: i64) -> Set {
    let path = ns.path();
    let mut findings = Vec::new();
    // config.json and the digest.
    let canon: Option<Canonical> =
        match &ns.config {
            Config::Missing => {
                findings.push(
                    Finding::reject(
                        Code::KV301,
                        format!(
                            "{path}/config.json is missing: the namespace cannot be verified (the \
                    engine recreates it only at its next start)"
                        ),
                    )
                    .at(format!("{path}/config.json")),
                );
                None
            }
            Config::Symlink => {
                findings.push(Finding::reject(
                Code::KV301,
                format!("{path}/config.json is a symlink, never followed: the namespace cannot be \
                    verified"),
            ).at(format!("{path}/config.json")));
                None
            }
            Config::Special(kind) => {
                findings.push(Finding::reject(
                Code::KV301,
                format!("{path}/config.json is a {kind}, never opened: the namespace cannot be \
                    verified"),
            ).at(format!("{path}/config.json")));
                None
            }
            Config::TooLarge(n) => {
                findings.push(Finding::reject(
                Code::KV301,
                format!("{path}/config.json is {n} bytes, over the {CONFIG_MAX_BYTES}-byte limit: \
                    the namespace cannot be verified"),
            ).at(format!("{path}/config.json")));
                None
            }
            Config::Read(bytes) => match canonical(bytes) {
                Ok(c) => Some(c),
                Err(e) => {
                    findings.push(
                        Finding::reject(
                            Code::KV301,
                            format!(
                            "{path}/config.json ({} bytes) is {}: the namespace cannot be verified",
                            bytes.len(),
                            e.describe()
                        ),
                        )
                        .at(format!("{path}/config.json")),
                    );
                    None
                }
            },
        };
    let any_high_rank = ns.ranks.keys().any(|&r| r >= 1);
    let fam = match (&canon, choice) {
        (_, Choice::Vllm) => Fam::Vllm,
        (_, Choice::Llmd) => Fam::Llmd,
        (Some(c), _) => {
            if c.fields.contains_key("tokens_per_hash") && c.fields.contains_key("blocks_per_file")
            {
                Fam::Vllm
            } else if c.fields.contains_key("hash_block_size")
                && c.fields.contains_key("gpu_blocks_per_file")
            {
                if any_high_rank {
                    Fam::Llmd
                } else {
                    Fam::LlmdOr022
                }
            } else {
                Fam::Unknown
            }
        }
        (None, _) if any_high_rank => Fam::Llmd,
        (None, _) => Fam::Unknown,
    };
    let producer = match fam {
        Fam::Vllm => "vllm",
        Fam::Llmd => "llmd",
        Fam::LlmdOr022 => "llmd-or-vllm-0.22",
        Fam::Unknown => "vllm-family",
    };
    let mut set = Set::new(path.clone(), producer);
    set.findings = findings;
    let base_text = String::from_utf8_lossy(&ns.base).into_owned();
    set.identity.insert("namespace".into(), json!(base_text));
    if let Some(c) = &canon {
        for k in [
            "model_name",
            "tp_size",
            "pp_size",
            "pcp_size",
            "dcp_size",
            "dtype",
            "tokens_per_hash",
            "blocks_per_file",
            "hash_block_size",
            "gpu_blocks_per_file",
            "parallel_agnostic",
            "replicated_layout",
            "canonical_format",
        ] {
            if let Some(v) = c.fields.get(k) {
                set.identity.insert(k.into(), v.clone());
            }
        }
        set.identity
            .insert("digest".into(), json!(c.sha256_hex()[..12].to_string()));
        // The digest and the model prefix, byte for byte.
        let (prefix, digest) =
            super::grammar::namespace_dir(&ns.base).unwrap_or((&ns.base[..], ""));
        let d12 = c.digest12();
        if d12 != digest {
            set.findings.push(
                Finding::reject(
                    Code::KV302,
                    format!(
                        "{base_text}: the directory's digest is {digest}, config.json's fields \
                            give {d12}: the engine would never open this directory for the \
                            configuration it records"
                    ),
                )
                .at(path.clone())
                .values(&d12, digest),
            );
        }
        match c.safe_model() {
            Some(m) if m.as_bytes() == prefix => {}
            Some(m) => set.findings.push(
                Finding::reject(
                    Code::KV302,
                    format!(
                        "{base_text}: the directory's model prefix is {}, config.json's model_name \
                            gives {m}",
                        String::from_utf8_lossy(prefix)
                    ),
                )
                .at(path.clone())
                .values(&m, String::from_utf8_lossy(prefix)),
            ),
            None => set.findings.push(
                Finding::reject(
                    Code::KV301,
                    format!(
                        "{path}/config.json has no string model_name: the namespace cannot be \
                        verified"
                    ),
                )
                .at(format!("{path}/config.json")),
            ),
        }
        if fam == Fam::Vllm
            && !c.fields.contains_key("parallel_agnostic")
            && !c.fields.contains_key("canonical_format")
            && c.fields.get("replicated_layout") != Some(&Value::Bool(true))
        {
            set.findings.push(
                Finding::notice(
                    Code::KV320,
                    format!(
                        "{base_text} is parallel-agnostic without canonical_format: written by \
                    vLLM ≤ 0.33's direct layout, unsafe to read after a tensor-parallel change"
                    ),
                )
                .at(path.clone()),
            );
        }
        if fam == Fam::Unknown {
            set.findings.push(
                Finding::notice(
                    Code::KV314,
                    format!(
                        "{path}/config.json holds neither vLLM's fields (tokens_per_hash, \
                    blocks_per_file) nor llm-d's (hash_block_size, gpu_blocks_per_file): rerun \
                    with --producer vllm or --producer llmd"
                    ),
                )
                .at(format!("{path}/config.json")),
            );
        }
    }
    if let Some(s) = ns.base_not_dir {
        push_state(&mut set, s, &path, "where the namespace directory belongs");
    }
    let tp = canon.as_ref().and_then(|c| int_field(c, "tp_size"));
    let pp = canon.as_ref().and_then(|c| int_field(c, "pp_size"));
    let pcp = canon.as_ref().and_then(|c| int_field(c, "pcp_size"));
    let world = match (tp, pp, pcp) {
        (Some(a), Some(b), Some(c)) => a.checked_mul(b).and_then(|x| x.checked_mul(c)),
        _ => None,
    };
    if fam == Fam::LlmdOr022 {
        let mut msg = format!(
            "{base_text}: config.json's fields are llm-d's and vLLM 0.22.0's \
            alike and only _r0 exists: llm-d or vLLM 0.22.0; only what both satisfy is checked \
            (rerun with --producer llmd or --producer vllm, or see the deployment's spec_name: \
            SharedStorageOffloadingSpec is llm-d)"
        );
        if let Some(w) = world.filter(|&w| w > 1) {
            msg.push_str(&format!(
                "; as llm-d (tp·pp·pcp = {w}) every key would be missing on ranks 1-{}",
                w - 1
            ));
        }
        set.findings
            .push(Finding::notice(Code::KV314, msg).at(path.clone()));
    }
    let mut loose = ns.loose;
    let groups_len = canon
        .as_ref()
        .and_then(|c| c.fields.get("kv_cache_groups"))
        .and_then(Value::as_array)
        .map(|a| a.len() as u32);
    // Which rank directories belong to the set.
    let expected: Option<Vec<u32>> = match fam {
        Fam::Vllm | Fam::LlmdOr022 => Some(vec![0]),
        Fam::Llmd => match world.filter(|&w| w > 0 && w <= 1 << 20) {
            Some(w) => Some((0..w as u32).collect()),
            // Without config.json: the ranks present, 0 to the highest.
            None => ns.ranks.keys().next_back().map(|&m| (0..=m).collect()),
        },
        Fam::Unknown => None,
    };
    let rank_base = format!("{}/{}", ns.root, base_text);
    let mut ranks = ns.ranks;
    let mut out_of_range = Vec::new();
    if let Some(exp) = &expected {
        let keep: BTreeSet<u32> = exp.iter().copied().collect();
        let extra: Vec<u32> = ranks
            .keys()
            .copied()
            .filter(|r| !keep.contains(r))
            .collect();
        for r in extra {
            let rs = ranks.remove(&r).unwrap_or_default();
            out_of_range.push((r, rs.blocks.len()));
        }
    }
    if !out_of_range.is_empty() {
        let list: Vec<u32> = out_of_range.iter().map(|(r, _)| *r).collect();
        let first = format!("{rank_base}_r{}", list[0]);
        match fam {
            Fam::Llmd => set.findings.push(
                Finding::reject(
                    Code::KV310,
                    format!(
                        "rank directories {} at or above tp·pp·pcp = {}: the recorded \
                            configuration cannot write them and no engine of this namespace reads \
                            them",
                        ranks_text(&list),
                        expected.as_ref().map_or(0, |e| e.len())
                    ),
                )
                .at(first),
            ),
            _ => {
                for r in &list {
                    loose.foreign.push(format!("{rank_base}_r{r}"));
                }
            }
        }
    }
    set.ranks_expected = match fam {
        Fam::Vllm => None,
        _ => expected.clone(),
    };
    set.ranks_present = ranks
        .iter()
        .filter(|(_, r)| r.present)
        .map(|(&k, _)| k)
        .collect();
    if ns.base_dir && ranks.is_empty() && out_of_range.is_empty() {
        loose.empty_dirs.push(path.clone());
    }
    // Per key: the ranks holding it.
    let mut blocks: HashMap<Key, Vec<(u32, u64, State)>> = HashMap::new();
    for (&r, rs) in ranks.iter_mut() {
        if let Some(s) = rs.not_dir {
            push_state(
                &mut set,
                s,
                &format!("{rank_base}_r{r}"),
                "where a rank directory belongs",
            );
        }
        loose.merge(std::mem::take(&mut rs.loose));
        for BlockFile { key, size, state } in rs.blocks.drain(..) {
            blocks.entry(key).or_default().push((r, size, state));
        }
    }
    let file_path = |k: &Key, r: u32| {
        let h = k.hex();
        format!(
            "{rank_base}_r{r}/{}/{}_g{}/{h}.bin",
            &h[..3],
            &h[3..5],
            k.group
        )
    };
    let tp_only = pp == Some(1) && pcp == Some(1);
    let gpb = canon
        .as_ref()
        .and_then(|c| int_field(c, "gpu_blocks_per_file"));
    let mut geometry_note: Option<String> = None;
    // The reference size per group (no geometry): vLLM one size for the
    // namespace, llm-d the largest per group.
    let vllm_mode = mode(
        blocks
            .values()
            .flatten()
            .filter(|(_, s, st)| *st == State::Regular && *s > 0 && s % VLLM_ALIGN == 0)
            .map(|(_, s, _)| *s),
    );
    let mut group_max: HashMap<u32, u64> = HashMap::new();
    for (k, v) in &blocks {
        for (_, s, st) in v {
            if *st == State::Regular {
                let e = group_max.entry(k.group).or_default();
                *e = (*e).max(*s);
            }
        }
    }
    match fam {
        Fam::Vllm if geo.kv_bytes_per_chunk.is_none() => {
            geometry_note = Some(
                "without --kv-bytes-per-chunk the files were checked against \
                4096-byte alignment and the namespace's common size, not against the row the \
                engine writes"
                    .into(),
            )
        }
        Fam::Llmd if geo.bytes_per_block.is_empty() => {
            geometry_note = Some(
                "without --bytes-per-block the files were checked against each \
                other (equal sizes across the ranks of a key), not against the bytes a block \
                occupies"
                    .into(),
            )
        }
        _ => {}
    }
    let mut short = Tally::default();
    let mut long = Tally::default();
    let mut misaligned = Tally::default();
    let mut partial = Tally::default();
    let mut disagree = Tally::default();
    let mut incomplete_ranks: BTreeMap<u32, u64> = BTreeMap::new();
    let mut links = Tally::default();
    let mut special = Tally::default();
    let mut beyond_groups = BTreeSet::new();
    let mut keys: Vec<&Key> = blocks.keys().collect();
    keys.sort_unstable();
    for k in keys {
        let v = &blocks[k];
        set.blocks.total += 1;
        if groups_len.is_some_and(|n| k.group >= n) {
            beyond_groups.insert(k.group);
        }
        let present: Vec<u32> = v.iter().map(|(r, _, _)| *r).collect();
        let missing: Vec<u32> = match (&expected, fam) {
            (Some(exp), Fam::Llmd) => exp
                .iter()
                .copied()
                .filter(|r| !present.contains(r))
                .collect(),
            _ => Vec::new(),
        };
        let mut problems: Vec<String> = Vec::new();
        let mut first_bad: Option<u32> = None;
        for &(r, size, state) in v {
            set.bytes += size;
            match state {
                State::Symlink => {
                    links.add(
                        || file_path(k, r),
                        "a regular file".into(),
                        "a symlink".into(),
                    );
                    problems.push(format!("rank {r}: a symlink"));
                    first_bad.get_or_insert(r);
                    continue;
                }
                State::Special(kind) => {
                    special.add(
                        || file_path(k, r),
                        "a regular file".into(),
                        format!("a {kind}"),
                    );
                    problems.push(format!("rank {r}: a {kind}"));
                    first_bad.get_or_insert(r);
                    continue;
                }
                State::Regular => {}
            }
            let is = match fam {
                Fam::Vllm => match geo.kv_bytes_per_chunk {
                    Some(n) if size < n => SizeIs::Short(n),
                    Some(n) if size > n => SizeIs::Long(n),
                    Some(_) => SizeIs::Ok,
                    None if size == 0 || size % VLLM_ALIGN != 0 => SizeIs::Misaligned(VLLM_ALIGN),
                    None => match vllm_mode {
                        Some(m) if size < m => SizeIs::Short(m),
                        Some(m) if size > m => SizeIs::Long(m),
                        _ => SizeIs::Ok,
                    },
                },
                Fam::Llmd => match geo.llmd_bpb(k.group) {
                    Some(bpb) if size == 0 || size % bpb != 0 => SizeIs::Misaligned(bpb),
                    Some(bpb) => {
                        let kblocks = size / bpb;
                        match gpb {
                            Some(g) if kblocks > g => SizeIs::Long(g * bpb),
                            Some(g) if kblocks < g => SizeIs::Partial,
                            _ => SizeIs::Ok,
                        }
                    }
                    None if size == 0 => {
                        SizeIs::Short(group_max.get(&k.group).copied().unwrap_or(0))
                    }
                    None => {
                        if group_max.get(&k.group).is_some_and(|&m| size < m) {
                            SizeIs::Partial
                        } else {
                            SizeIs::Ok
                        }
                    }
                },
                Fam::LlmdOr022 | Fam::Unknown => {
                    if size == 0 {
                        SizeIs::Short(1)
                    } else {
                        SizeIs::Ok
                    }
                }
            };
            match is {
                SizeIs::Ok => {}
                SizeIs::Short(n) => {
                    short.add(
                        || file_path(k, r),
                        format!("{n} bytes"),
                        format!("{size} bytes on rank {r}"),
                    );
                    problems.push(format!("rank {r}: {size} bytes, short of {n}"));
                    first_bad.get_or_insert(r);
                }
                SizeIs::Long(n) => {
                    long.add(
                        || file_path(k, r),
                        format!("{n} bytes"),
                        format!("{size} bytes on rank {r}"),
                    );
                    problems.push(format!("rank {r}: {size} bytes, over {n}"));
                    first_bad.get_or_insert(r);
                }
                SizeIs::Misaligned(unit) => {
                    misaligned.add(
                        || file_path(k, r),
                        format!("a non-zero multiple of {unit}"),
                        format!("{size} bytes on rank {r}"),
                    );
                    problems.push(format!(
                        "rank {r}: {size} bytes, not a non-zero multiple of {unit}"
                    ));
                    first_bad.get_or_insert(r);
                }
                SizeIs::Partial => {}
            }
        }
        // llm-d: the ranks must agree on a key's size (TP only), and a
        // partial file is legitimate only when every rank agrees.
        if fam == Fam::Llmd && tp_only {
            let sizes: BTreeSet<u64> = v
                .iter()
                .filter(|(_, _, st)| *st == State::Regular)
                .map(|(_, s, _)| *s)
                .collect();
            if sizes.len() > 1 {
                let list: Vec<String> =
                    v.iter().map(|(r, s, _)| format!("rank {r}: {s}")).collect();
                disagree.add(
                    || file_path(k, v[0].0),
                    "one size on every rank".into(),
                    list.join(", "),
                );
                problems.push(format!("ranks disagree on the size ({})", list.join(", ")));
                first_bad.get_or_insert(v[0].0);
            }
        }
        if fam == Fam::Llmd && problems.is_empty() {
            let partial_here = v.iter().any(|(_, s, st)| {
                *st == State::Regular
                    && match geo.llmd_bpb(k.group) {
                        Some(bpb) => gpb.is_some_and(|g| s / bpb < g),
                        None => group_max.get(&k.group).is_some_and(|m| s < m),
                    }
            });
            if partial_here {
                let (r, s, _) = v[0];
                partial.add(
                    || file_path(k, r),
                    "gpu_blocks_per_file blocks".into(),
                    format!("{s} bytes on every rank present"),
                );
            }
        }
        let path0 = file_path(k, first_bad.unwrap_or(present[0]));
        if !missing.is_empty() {
            set.blocks.incomplete += 1;
            for r in &missing {
                *incomplete_ranks.entry(*r).or_default() += 1;
            }
            let mut problem = format!(
                "present on ranks {}, missing on {}",
                ranks_text(&present),
                ranks_text(&missing)
            );
            if !problems.is_empty() {
                problem.push_str("; ");
                problem.push_str(&problems.join("; "));
            }
            set.list(ListedBlock {
                key: k.hex(),
                group: Some(k.group),
                present_ranks: present,
                missing_ranks: missing,
                problem,
                path: path0,
            });
        } else if !problems.is_empty() {
            set.blocks.damaged += 1;
            set.list(ListedBlock {
                key: k.hex(),
                group: Some(k.group),
                present_ranks: present,
                missing_ranks: Vec::new(),
                problem: problems.join("; "),
                path: path0,
            });
        } else {
            set.blocks.complete += 1;
        }
    }
    if !incomplete_ranks.is_empty() {
        let per: Vec<String> = incomplete_ranks
            .iter()
            .map(|(r, n)| format!("rank {r}: {n}"))
            .collect();
        let first = set
            .listed
            .iter()
            .find(|b| !b.missing_ranks.is_empty())
            .cloned();
        let mut msg = format!(
            "{} of {} missing on some rank ({}); llm-d's scheduler checks rank 0 only and reports \
                such a load as a success with the previous file's bytes",
            plural(set.blocks.incomplete, "block", "blocks"),
            set.blocks.total,
            per.join(", ")
        );
        if let Some(b) = &first {
            msg.push_str(&format!("; first: {} {}", b.key, b.problem));
        }
        let mut f = Finding::reject(Code::KV303, msg);
        if let Some(b) = first {
            f = f.at(b.path);
        }
        set.findings.push(f);
    }
    short.finish(
        &mut set,
        Code::KV304,
        Severity::Reject,
        "shorter than the size the producer writes",
    );
    long.finish(
        &mut set,
        Code::KV305,
        Severity::Reject,
        "longer than the size the producer writes (loaded without an error, with wrong bytes)",
    );
    misaligned.finish(
        &mut set,
        Code::KV306,
        Severity::Reject,
        "not a whole number of the producer's units",
    );
    disagree.finish(
        &mut set,
        Code::KV307,
        Severity::Reject,
        "whose ranks disagree on the block's size",
    );
    links.finish(
        &mut set,
        Code::KV308,
        Severity::Reject,
        "symlinked where a block file belongs, never followed",
    );
    special.finish(
        &mut set,
        Code::KV309,
        Severity::Reject,
        "special where a block file belongs, never opened",
    );
    partial.finish(
        &mut set,
        Code::KV313,
        Severity::Notice,
        "holding fewer than \
        gpu_blocks_per_file blocks, agreed by every rank present (a partial chunk)",
    );
    if fam == Fam::Vllm {
        set.findings.push(Finding::notice(
            Code::KV315,
            "vLLM keeps every worker's slice inside one file under _r0: rank completeness cannot \
                be checked offline, only each file's size",
        ));
    }
    if let Some(note) = geometry_note.filter(|_| set.blocks.total > 0) {
        set.findings.push(Finding::notice(Code::KV316, note));
    }
    if !beyond_groups.is_empty() && fam == Fam::Vllm {
        let g: Vec<u32> = beyond_groups.into_iter().collect();
        set.findings.push(Finding::notice(
            Code::KV321,
            format!(
                "group ids {} are at or beyond config.json's {} kv_cache_groups (groups that are \
                    not prefix-cacheable are left out of the list)",
                ranks_text(&g),
                groups_len.unwrap_or(0)
            ),
        ));
    }
    loose_findings(&mut set, loose, now_s, "in the namespace");
    set
}

fn push_state(set: &mut Set, s: State, path: &str, what: &str) {
    match s {
        State::Symlink => set.findings.push(
            Finding::reject(
                Code::KV308,
                format!("{path} is a symlink {what}, never followed"),
            )
            .at(path.to_string()),
        ),
        State::Special(kind) => set.findings.push(
            Finding::reject(
                Code::KV309,
                format!("{path} is a {kind} {what}, never opened"),
            )
            .at(path.to_string()),
        ),
        State::Regular => set.findings.push(
            Finding::reject(Code::KV309, format!("{path} is a regular file {what}"))
                .at(path.to_string()),
        ),
    }
}

/// How a flat producer judges sizes: whether a shorter chunk agreed by every
/// rank is legitimate (LMCache's unfull last chunk) or never stored (lmcache-mp).
/// What a flat set's file sizes are checked against.
enum Expect<'a> {
    /// A geometry option's bytes (or, without it, each rank's common size)
    /// and the option's name.
    Option(Option<u64>, &'a str),
    /// Each file's own size rule (LMCache GDS: its header's bytes); `None`
    /// for a file whose rule is unknown (reported on its own).
    PerFile(&'a dyn Fn(&Key, u32) -> Option<u64>, &'a str),
}

#[allow(clippy::too_many_arguments)]
fn flat(
    mut set: Set,
    fs: FlatSet,
    world: u32,
    partial_allowed: bool,
    expect: Expect<'_>,
    now_s: i64,
    file_path: &dyn Fn(&Key, u32) -> String,
) -> Set {
    let (expected, option, per_file) = match expect {
        Expect::Option(e, o) => (e, o, None),
        Expect::PerFile(f, o) => (None, o, Some(f)),
    };
    if world > FLAT_WORLD_MAX {
        // Never enumerate a world a name claims without bound.
        set.blocks.total = fs.blocks.len() as u64;
        set.blocks.damaged = set.blocks.total;
        set.findings.push(Finding::reject(
            Code::KV310,
            format!(
                "the names claim a world of {world} ranks, over the {FLAT_WORLD_MAX} kvcr \
                    enumerates: no deployment writes this; not judged further"
            ),
        ));
        return set;
    }
    set.ranks_expected = Some((0..world).collect());
    let present: BTreeSet<u32> = fs.blocks.values().flatten().map(|(r, _, _)| *r).collect();
    set.ranks_present = present.into_iter().collect();
    if !fs.out_of_range.is_empty() {
        let (p, r) = fs.out_of_range.items[0].clone();
        set.findings.push(
            Finding::reject(
                Code::KV310,
                format!(
                    "{} at or above the world size {world} (first: {p}, rank {r}): no engine of \
                        this set reads them",
                    plural(
                        fs.out_of_range.count,
                        "file has a rank",
                        "files have a rank"
                    )
                ),
            )
            .at(p),
        );
    }
    // Per rank: the full size (geometry, or the rank's most common size).
    let mut per_rank: HashMap<u32, Vec<u64>> = HashMap::new();
    for v in fs.blocks.values() {
        for (r, s, st) in v {
            if *st == State::Regular {
                per_rank.entry(*r).or_default().push(*s);
            }
        }
    }
    let full_of_rank: HashMap<u32, u64> = per_rank
        .iter()
        .filter_map(|(r, v)| {
            expected
                .or_else(|| mode(v.iter().copied()))
                .map(|m| (*r, m))
        })
        .collect();
    let full = |k: &Key, r: u32| match per_file {
        Some(f) => f(k, r),
        None => full_of_rank.get(&r).copied(),
    };
    let mut short = Tally::default();
    let mut long = Tally::default();
    let mut partial = Tally::default();
    let mut links = Tally::default();
    let mut special = Tally::default();
    let mut incomplete_ranks: BTreeMap<u32, u64> = BTreeMap::new();
    let mut keys: Vec<&Key> = fs.blocks.keys().collect();
    keys.sort_unstable();
    for k in keys {
        let v = &fs.blocks[k];
        set.blocks.total += 1;
        // The common case first, without allocating: every rank of a world
        // of at most 128 exactly once, each a regular file of its rank's
        // full size.
        if world <= 128 && v.len() == world as usize {
            let mut seen: u128 = 0;
            let whole = v.iter().all(|(r, s, st)| {
                let bit = 1u128 << r;
                let first = seen & bit == 0;
                seen |= bit;
                first && *st == State::Regular && full(k, *r) == Some(*s)
            });
            if whole {
                set.bytes += v.iter().map(|x| x.1).sum::<u64>();
                set.blocks.complete += 1;
                continue;
            }
        }
        let present: Vec<u32> = v.iter().map(|(r, _, _)| *r).collect();
        let missing: Vec<u32> = (0..world).filter(|r| !present.contains(r)).collect();
        let mut problems = Vec::new();
        let mut first_bad = None;
        let all_short = v.iter().all(|(r, s, st)| {
            *st == State::Regular && full(k, *r).is_some_and(|f| *s < f) && *s > 0
        });
        let sizes: BTreeSet<u64> = v.iter().map(|(_, s, _)| *s).collect();
        for &(r, size, state) in v {
            set.bytes += size;
            match state {
                State::Symlink => {
                    links.add(
                        || file_path(k, r),
                        "a regular file".into(),
                        "a symlink".into(),
                    );
                    problems.push(format!("rank {r}: a symlink"));
                    first_bad.get_or_insert(r);
                    continue;
                }
                State::Special(kind) => {
                    special.add(
                        || file_path(k, r),
                        "a regular file".into(),
                        format!("a {kind}"),
                    );
                    problems.push(format!("rank {r}: a {kind}"));
                    first_bad.get_or_insert(r);
                    continue;
                }
                State::Regular => {}
            }
            let Some(f) = full(k, r) else { continue };
            if size > f {
                long.add(
                    || file_path(k, r),
                    format!("{f} bytes"),
                    format!("{size} bytes on rank {r}"),
                );
                problems.push(format!("rank {r}: {size} bytes, over {f}"));
                first_bad.get_or_insert(r);
            } else if size < f {
                if partial_allowed && all_short && sizes.len() == 1 && missing.is_empty() {
                    partial.add(
                        || file_path(k, r),
                        format!("{f} bytes"),
                        format!("{size} bytes on every rank"),
                    );
                } else {
                    short.add(
                        || file_path(k, r),
                        format!("{f} bytes"),
                        format!("{size} bytes on rank {r}"),
                    );
                    problems.push(format!("rank {r}: {size} bytes, short of {f}"));
                    first_bad.get_or_insert(r);
                }
            }
        }
        let path0 = file_path(k, first_bad.unwrap_or(present[0]));
        if !missing.is_empty() {
            set.blocks.incomplete += 1;
            for r in &missing {
                *incomplete_ranks.entry(*r).or_default() += 1;
            }
            let mut problem = format!(
                "present on ranks {}, missing on {}",
                ranks_text(&present),
                ranks_text(&missing)
            );
            if !problems.is_empty() {
                problem.push_str("; ");
                problem.push_str(&problems.join("; "));
            }
            set.list(ListedBlock {
                key: set_key_text(&set, k),
                group: None,
                present_ranks: present,
                missing_ranks: missing,
                problem,
                path: path0,
            });
        } else if !problems.is_empty() {
            set.blocks.damaged += 1;
            set.list(ListedBlock {
                key: set_key_text(&set, k),
                group: None,
                present_ranks: present,
                missing_ranks: Vec::new(),
                problem: problems.join("; "),
                path: path0,
            });
        } else {
            set.blocks.complete += 1;
        }
    }
    if !incomplete_ranks.is_empty() {
        let per: Vec<String> = incomplete_ranks
            .iter()
            .map(|(r, n)| format!("rank {r}: {n}"))
            .collect();
        let first = set
            .listed
            .iter()
            .find(|b| !b.missing_ranks.is_empty())
            .cloned();
        let mut msg = format!(
            "{} of {} missing on some rank ({})",
            plural(
                set.blocks.incomplete,
                unit_noun(set.producer),
                &format!("{}s", unit_noun(set.producer))
            ),
            set.blocks.total,
            per.join(", ")
        );
        if let Some(b) = &first {
            msg.push_str(&format!("; first: {} {}", b.key, b.problem));
        }
        let mut f = Finding::reject(Code::KV303, msg);
        if let Some(b) = first {
            f = f.at(b.path);
        }
        set.findings.push(f);
    }
    let noun = unit_noun(set.producer);
    let unit = if expected.is_some() || per_file.is_some() {
        option.to_string()
    } else {
        "the rank's common size".to_string()
    };
    short.finish(
        &mut set,
        Code::KV304,
        Severity::Reject,
        &format!("shorter than {unit}"),
    );
    long.finish(
        &mut set,
        Code::KV305,
        Severity::Reject,
        &format!("longer than {unit} (read up to the expected length without an error)"),
    );
    links.finish(
        &mut set,
        Code::KV308,
        Severity::Reject,
        &format!("symlinked where a {noun} file belongs, never followed"),
    );
    special.finish(
        &mut set,
        Code::KV309,
        Severity::Reject,
        &format!("special where a {noun} file belongs, never opened"),
    );
    partial.finish(
        &mut set,
        Code::KV313,
        Severity::Notice,
        "shorter than a full chunk on every rank alike (the request's unfull last chunk)",
    );
    if expected.is_none() && per_file.is_none() && set.blocks.total > 0 {
        set.findings.push(Finding::notice(
            Code::KV316,
            format!(
                "without {option} each rank's files were checked against that rank's common \
                size, not against the bytes a file must have"
            ),
        ));
    }
    let loose = Loose {
        staging: fs.staging,
        ..Loose::default()
    };
    loose_findings(&mut set, loose, now_s, "of this set");
    set
}

/// What one file of a flat producer holds: SGLang a page, LMCache a chunk.
fn unit_noun(producer: &str) -> &'static str {
    if producer == "sglang" {
        "page"
    } else {
        "chunk"
    }
}

fn set_key_text(set: &Set, k: &Key) -> String {
    if set.producer == "lmcache" {
        pt_hash_text(k)
    } else if set.producer == "sglang" {
        k.hex()
    } else {
        format!("{}@{:x}", k.hex(), k.group)
    }
}

fn mixed_notice(set: &mut Set, model: &str) {
    set.findings.push(Finding::notice(
        Code::KV317,
        format!(
            "the files of model {model} come in several world sizes: each set is judged alone, \
            never paired with another"
        ),
    ));
}

fn mp(id: MpIdent, fs: FlatSet, geo: &Geometry, now_s: i64, mixed: bool) -> Set {
    let root = fs.roots.iter().next().cloned().unwrap_or_default();
    let mut set = Set::new(root.clone(), "lmcache-mp");
    let model = String::from_utf8_lossy(&id.model).replace("-SEP-", "/");
    set.identity.insert("model".into(), json!(model));
    set.identity.insert("world_size".into(), json!(id.world));
    set.identity.insert("group".into(), json!(id.group));
    set.identity.insert(
        "salt".into(),
        id.salt
            .as_ref()
            .map_or(Value::Null, |s| json!(String::from_utf8_lossy(s))),
    );
    if fs.roots.len() > 1 {
        set.identity
            .insert("roots".into(), json!(fs.roots.iter().collect::<Vec<_>>()));
    }
    if mixed {
        mixed_notice(&mut set, &model);
    }
    let mname = String::from_utf8_lossy(&id.model).into_owned();
    let salt = id
        .salt
        .as_ref()
        .map(|s| format!("@{}", String::from_utf8_lossy(s)))
        .unwrap_or_default();
    let w = id.world as u32;
    let g = id.group;
    let file_path = move |k: &Key, r: u32| {
        let kv_rank = (w << 24) | (r << 16) | (w << 8) | r;
        format!(
            "{root}/{mname}@0x{kv_rank:08x}@{g:x}@{}{salt}.data",
            k.hex()
        )
    };
    flat(
        set,
        fs,
        id.world as u32,
        false,
        Expect::Option(geo.chunk_bytes, "--chunk-bytes"),
        now_s,
        &file_path,
    )
}

/// A set of LMCache's key grammar (local disk, GDS): its identity, and the
/// key text of a (hash, worker) without the hash and worker: (model, the
/// text after the hash).
fn pt_set(id: &PtIdent, roots: &BTreeSet<String>, producer: &'static str, mixed: bool) -> Set {
    let root = roots.iter().next().cloned().unwrap_or_default();
    let mut set = Set::new(root, producer);
    let model = String::from_utf8_lossy(&id.model).into_owned();
    set.identity.insert("model".into(), json!(model));
    set.identity.insert("world_size".into(), json!(id.world));
    set.identity
        .insert("dtype".into(), json!(String::from_utf8_lossy(&id.dtype)));
    set.identity.insert("layer".into(), json!(id.layer));
    let tags: Vec<String> = id
        .tags
        .iter()
        .map(|t| String::from_utf8_lossy(t).into_owned())
        .collect();
    set.identity.insert("tags".into(), json!(tags));
    if roots.len() > 1 {
        set.identity
            .insert("roots".into(), json!(roots.iter().collect::<Vec<_>>()));
    }
    if mixed {
        mixed_notice(&mut set, &model);
    }
    set
}

/// The key text LMCache writes for worker `r` of hash `k` in set `id`
/// (`lmcache/utils.py:467-475`).
fn pt_key_text(id: &PtIdent, k: &Key, r: u32) -> String {
    let mut s = format!(
        "{}@{}@{r}@{}@{}",
        String::from_utf8_lossy(&id.model),
        id.world,
        pt_hash_text(k),
        String::from_utf8_lossy(&id.dtype)
    );
    if let Some(l) = id.layer {
        s.push_str(&format!("@{l}"));
    }
    for t in &id.tags {
        s.push('@');
        s.push_str(&String::from_utf8_lossy(t));
    }
    s
}

fn pt(id: PtIdent, fs: FlatSet, geo: &Geometry, now_s: i64, mixed: bool) -> Set {
    let set = pt_set(&id, &fs.roots, "lmcache", mixed);
    let root = set.path.clone();
    let total = fs.blocks.values().map(|v| v.len() as u64).sum::<u64>();
    let file_path = |k: &Key, r: u32| format!("{root}/{}.pt", pt_key_text(&id, k, r));
    let mut set = flat(
        set,
        fs,
        id.world,
        true,
        Expect::Option(geo.chunk_bytes, "--chunk-bytes"),
        now_s,
        &file_path,
    );
    if total > 0 {
        set.findings.push(Finding::notice(
            Code::KV322,
            format!(
                "LMCache's local-disk backend indexes its {} in memory only: no engine reads \
                them again after a restart",
                plural(total, "file", "files")
            ),
        ));
    }
    set
}

/// An LMCache GDS set (docs/format.md §15.7): ranks and sizes as the local
/// disk's, each data file's size from its own header; every data file needs
/// a sidecar equal to its header, every sidecar a data file.
fn gds(id: PtIdent, g: GdsSet, now_s: i64, mixed: bool) -> Set {
    let set = pt_set(&id, &g.flat.roots, "lmcache-gds", mixed);
    let root = set.path.clone();
    let suffix = GDS_DATA_SUFFIXES[g.weka as usize];
    let path_of = |k: &Key, r: u32| {
        let text = pt_key_text(&id, k, r);
        let h = pt_hash_text(k);
        let (b1, b2) = gds_buckets(h.as_bytes()).unwrap_or_default();
        let dir = if b2.is_empty() {
            b1
        } else {
            format!("{b1}/{b2}")
        };
        format!("{root}/{dir}/{}{suffix}", quote(text.as_bytes()))
    };
    let headers = &g.headers;
    let data_present: std::collections::HashSet<(Key, u32)> = g
        .flat
        .blocks
        .iter()
        .flat_map(|(k, v)| v.iter().map(move |(r, _, _)| (*k, *r)))
        .collect();
    let want = |k: &Key, r: u32| {
        headers
            .get(&(*k, r))
            .and_then(|h| h.parsed.as_ref().ok().copied())
    };
    let mut set = flat(
        set,
        g.flat,
        id.world,
        false,
        Expect::PerFile(&want, "the header's bytes"),
        now_s,
        &path_of,
    );
    let mut invalid = Tally::default();
    let mut missing = Tally::default();
    let mut mismatch = Tally::default();
    let mut orphan = Tally::default();
    let mut links = Tally::default();
    let mut special = Tally::default();
    let mut bad: BTreeMap<Key, Vec<String>> = BTreeMap::new();
    let mut files: Vec<&(Key, u32)> = headers.keys().collect();
    files.sort_unstable();
    for kr in files {
        let (k, r) = *kr;
        let head = &headers[kr];
        let p = || path_of(&k, r);
        if let Err(e) = &head.parsed {
            invalid.add(p, "a header LMCache writes".into(), e.clone());
            bad.entry(k)
                .or_default()
                .push(format!("rank {r}: header: {e}"));
        }
        match g.sidecars.get(kr) {
            None => {
                missing.add(p, format!("{}.metadata", p()), "no sidecar".into());
                bad.entry(k)
                    .or_default()
                    .push(format!("rank {r}: no sidecar"));
            }
            Some((State::Regular, Some(side))) => {
                if side.digest != head.digest || side.parsed != head.parsed {
                    let said = |h: &super::scan::GdsHead| match &h.parsed {
                        Ok(n) => format!("a file of {n} bytes"),
                        Err(e) => e.clone(),
                    };
                    mismatch.add(
                        || format!("{}.metadata", p()),
                        format!("the data header's bytes ({})", said(head)),
                        format!("other bytes ({})", said(side)),
                    );
                    bad.entry(k)
                        .or_default()
                        .push(format!("rank {r}: sidecar differs from the header"));
                }
            }
            Some((state, _)) => {
                let (tally, what) = match state {
                    State::Special(kind) => (&mut special, format!("a {kind}")),
                    _ => (&mut links, "a symlink".to_string()),
                };
                tally.add(
                    || format!("{}.metadata", p()),
                    "a regular file".into(),
                    what,
                );
                bad.entry(k)
                    .or_default()
                    .push(format!("rank {r}: sidecar is not a regular file"));
            }
        }
    }
    let mut sides: Vec<&(Key, u32)> = g.sidecars.keys().collect();
    sides.sort_unstable();
    for kr in sides {
        if !data_present.contains(kr) {
            let (k, r) = *kr;
            orphan.add(
                || format!("{}.metadata", path_of(&k, r)),
                format!("its data file {}", path_of(&k, r)),
                "no data file".into(),
            );
        }
    }
    // A block the size rules passed but whose header or sidecar is wrong is
    // damaged, not complete.
    let listed: BTreeSet<String> = set.listed.iter().map(|b| b.key.clone()).collect();
    for (k, problems) in bad {
        let key = pt_hash_text(&k);
        if listed.contains(&key) {
            continue;
        }
        set.blocks.complete = set.blocks.complete.saturating_sub(1);
        set.blocks.damaged += 1;
        let present = g
            .headers
            .keys()
            .filter(|(hk, _)| *hk == k)
            .map(|(_, r)| *r)
            .collect::<BTreeSet<u32>>()
            .into_iter()
            .collect();
        set.list(ListedBlock {
            key,
            group: None,
            present_ranks: present,
            missing_ranks: Vec::new(),
            problem: problems.join("; "),
            path: path_of(&k, 0),
        });
    }
    invalid.finish(
        &mut set,
        Code::KV354,
        Severity::Reject,
        "whose 4096-byte header is not one LMCache writes",
    );
    missing.finish(
        &mut set,
        Code::KV351,
        Severity::Reject,
        "without a .metadata sidecar (the engine's start-up scan never sees them)",
    );
    mismatch.finish(
        &mut set,
        Code::KV353,
        Severity::Reject,
        "whose sidecar differs from its data file's header (the engine believes the sidecar)",
    );
    orphan.finish(
        &mut set,
        Code::KV352,
        Severity::Reject,
        "sidecars without their data file (registered at start-up; the load then fails)",
    );
    links.finish(
        &mut set,
        Code::KV308,
        Severity::Reject,
        "symlinked where a sidecar belongs, never followed",
    );
    special.finish(
        &mut set,
        Code::KV309,
        Severity::Reject,
        "special where a sidecar belongs, never opened",
    );
    if !g.misplaced.is_empty() {
        let (first, want) = g.misplaced.items[0].clone();
        set.findings.push(
            Finding::notice(
                Code::KV312,
                format!(
                    "{} in bucket directories their hash does not give (first: {first}, which \
                        LMCache writes under {want}/)",
                    plural(g.misplaced.count, "file", "files")
                ),
            )
            .at(first.clone()),
        );
        for (p, _) in g.misplaced.items {
            set.foreign.push(p);
        }
    }
    set
}

/// The readings of an SGLang name without a model, for a notice.
fn sglang_readings_text(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    let readings = sglang_readings(name.as_bytes(), &[]);
    let texts: Vec<String> = readings
        .iter()
        .take(4)
        .map(|r| {
            let model = String::from_utf8_lossy(&r.model);
            let (id, rank) = SgIdent::of(r);
            match id.tp_size {
                Some(n) => format!(
                    "model {model:?} rank {rank} of {}",
                    id.world().max(n as u64)
                ),
                None => format!("MLA model {model:?}"),
            }
        })
        .collect();
    if texts.is_empty() {
        "which matches no reading".to_string()
    } else {
        format!("read as {}", texts.join(", or as "))
    }
}

fn sg(id: SgIdent, fs: FlatSet, geo: &Geometry, now_s: i64, mixed: bool) -> Set {
    let root = fs.roots.iter().next().cloned().unwrap_or_default();
    let mut set = Set::new(root.clone(), "sglang");
    let model = String::from_utf8_lossy(&id.model).into_owned();
    let pool = id.pool.map_or("kv", |p| SGLANG_POOLS[p as usize]);
    set.identity.insert("model".into(), json!(model));
    set.identity.insert("pool".into(), json!(pool));
    set.identity
        .insert("mla".into(), json!(id.tp_size.is_none()));
    set.identity.insert("tp_size".into(), json!(id.tp_size));
    set.identity.insert("pp_size".into(), json!(id.pp_size));
    set.identity
        .insert("attn_cp_size".into(), json!(id.cp_size));
    set.identity
        .insert("dcp_size".into(), json!(id.dcp.map_or(1, |d| d.size)));
    if let Some(d) = id.dcp {
        set.identity
            .insert("logical_page_size".into(), json!(d.page));
        set.identity.insert("dcp_tp_size".into(), json!(d.tp_size));
    }
    set.identity.insert(
        "rank_order".into(),
        json!(if id.tp_size.is_some() {
            "pp_rank, attn_cp_rank, tp_rank"
        } else {
            "pp_rank, attn_cp_rank, dcp_rank"
        }),
    );
    if fs.roots.len() > 1 {
        set.identity
            .insert("roots".into(), json!(fs.roots.iter().collect::<Vec<_>>()));
    }
    // What each rank number is in SGLang's terms (as its suffix spells it).
    if id.world() <= FLAT_WORLD_MAX as u64 {
        let names: Vec<String> = (0..id.world() as u32)
            .map(|r| {
                let t = id.tail(r);
                let mut parts = Vec::new();
                if let Some((_, pp)) = t.pp {
                    parts.push(format!("pp_rank {pp}"));
                }
                if let Some((cp, _)) = t.cp {
                    parts.push(format!("attn_cp_rank {cp}"));
                }
                match (t.tp, t.dcp) {
                    (Some((tp, _)), _) => parts.push(format!("tp_rank {tp}")),
                    (None, Some(d)) => parts.push(format!("dcp_rank {}", d.rank)),
                    (None, None) => parts.push("the writer".to_string()),
                }
                parts.join(", ")
            })
            .collect();
        set.identity.insert("rank_names".into(), json!(names));
    }
    if mixed {
        mixed_notice(&mut set, &model);
    }
    // --page-bytes is one stage's KV page: applied to the KV pool of a
    // one-stage set only (stages hold different layer counts).
    let page_bytes = geo
        .page_bytes
        .filter(|_| id.pool.is_none() && id.pp_size == 1);
    let not_applied = geo.page_bytes.is_some() && page_bytes.is_none();
    let world = id.world().min(u32::MAX as u64) as u32;
    let pool_id = id.pool;
    let ident = id.clone();
    let file_path = move |k: &Key, r: u32| {
        format!(
            "{root}/{}",
            sglang_name(&k.hex(), pool_id, &model, &ident.tail(r))
        )
    };
    // Without --page-bytes: the TP (or DCP) shards of one stage and CP rank
    // hold equal slices, so their common sizes must agree (stages differ).
    let disagree = if page_bytes.is_none() {
        stage_disagreement(&id, &fs)
    } else {
        None
    };
    let mut set = flat(
        set,
        fs,
        world,
        false,
        Expect::Option(page_bytes, "--page-bytes"),
        now_s,
        &file_path,
    );
    if let Some(f) = disagree {
        set.findings.push(f);
    }
    if not_applied {
        set.findings.retain(|f| f.code != Code::KV316);
        set.findings.push(Finding::notice(
            Code::KV316,
            format!(
                "--page-bytes was not applied to this set ({}): it is one stage's KV page, and \
                    pipeline stages and other pools have their own sizes; each rank's files were \
                    checked against that rank's common size",
                if id.pool.is_some() {
                    format!("pool {pool}")
                } else {
                    format!("{} pipeline stages", id.pp_size)
                }
            ),
        ));
    }
    set
}

/// The first stage (PP rank, CP rank) of an SGLang set whose TP or DCP
/// shards' common page sizes differ, as a KV307 finding.
fn stage_disagreement(id: &SgIdent, fs: &FlatSet) -> Option<Finding> {
    let mut per_rank: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for v in fs.blocks.values() {
        for (r, size, st) in v {
            if *st == State::Regular {
                per_rank.entry(*r).or_default().push(*size);
            }
        }
    }
    let inner = id.tp_size.or(id.dcp.map(|d| d.size)).unwrap_or(1).max(1);
    let mut stages: BTreeMap<u32, Vec<(u32, u64)>> = BTreeMap::new();
    for (r, sizes) in per_rank {
        if let Some(m) = mode(sizes.into_iter()) {
            stages.entry(r / inner).or_default().push((r, m));
        }
    }
    for (stage, ranks) in stages {
        let sizes: BTreeSet<u64> = ranks.iter().map(|x| x.1).collect();
        if sizes.len() > 1 {
            let (pp, cp) = (stage / id.cp_size.max(1), stage % id.cp_size.max(1));
            let each: Vec<String> = ranks
                .iter()
                .map(|(r, m)| format!("rank {r}: {m} bytes"))
                .collect();
            let (a, b) = (ranks[0], ranks.iter().find(|x| x.1 != ranks[0].1)?);
            return Some(
                Finding::reject(
                    Code::KV307,
                    format!(
                        "the shards of pipeline stage {pp}, attention-CP rank {cp} hold pages \
                            of different common sizes ({}): they hold equal slices of one page, \
                            so one rank's pages are not this deployment's",
                        each.join(", ")
                    ),
                )
                .values(
                    format!("{} bytes (rank {})", a.1, a.0),
                    format!("{} bytes (rank {})", b.1, b.0),
                ),
            );
        }
    }
    None
}

/// SGLang's suffix overlap (docs/format.md §15.2): an MLA set's rank-0
/// evictor owns `_<model>_0_<tp>`, which is also a non-MLA set's rank-0
/// suffix of the same model text, so with eviction on it may evict the
/// other deployment's files. A notice on both sets, naming the other.
fn sglang_overlap(sets: &mut [Set]) {
    let key = |s: &Set| {
        (
            s.identity.get("model").cloned(),
            s.identity.get("pp_size").cloned(),
            s.identity.get("attn_cp_size").cloned(),
        )
    };
    let kv = |s: &Set, mla: bool| {
        s.producer == "sglang"
            && s.identity.get("pool") == Some(&json!("kv"))
            && s.identity.get("mla") == Some(&json!(mla))
            && s.identity.get("dcp_size") == Some(&json!(1))
    };
    let mla: Vec<usize> = (0..sets.len()).filter(|&i| kv(&sets[i], true)).collect();
    let mha: Vec<usize> = (0..sets.len()).filter(|&i| kv(&sets[i], false)).collect();
    let mut notes: Vec<(usize, String)> = Vec::new();
    for &a in &mla {
        for &b in &mha {
            if key(&sets[a]) != key(&sets[b]) || sets[a].path != sets[b].path {
                continue;
            }
            let tp = sets[b].identity.get("tp_size").cloned().unwrap_or_default();
            let model = sets[a].identity.get("model").cloned().unwrap_or_default();
            let msg = |other: &str| {
                format!(
                    "SGLang suffix overlap in {}: an MLA set and a tensor-parallel set (TP {tp}) \
                        of model {model} share a directory; an MLA deployment with TP {tp} owns \
                        _<model>_0_{tp} for eviction, which is also the other set's rank-0 \
                        suffix, so with max_size or min_free_space set it may evict {other}'s \
                        files; settle it with distinct served names or directories",
                    sets[a].path
                )
            };
            notes.push((a, msg("the tensor-parallel set")));
            notes.push((b, msg("this set")));
        }
    }
    for (i, m) in notes {
        sets[i].findings.push(Finding::notice(Code::KV350, m));
    }
}
