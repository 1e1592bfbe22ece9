//! The rules of docs/format.md §15.2: each set's findings, block counts
//! and verdict, from what the walk found ([`super::scan`]). Pure: no I/O,
//! no clock (the caller passes the time).

use super::grammar::{pt_hash_text, Key};
use super::scan::{FlatSet, Loose, MpIdent, Paths, PtIdent, RootScan, Scan, Staged, State};
use super::tally::{mode, plural, BlockCheck, SizeIs, Tallies, Wording};
use crate::format::finding::{Code, Finding, Severity};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

/// A staging file younger than this may belong to a running writer.
pub const RECENT_S: i64 = 600;
/// The most incomplete or damaged blocks the document lists per set.
pub const LIST_CAP: usize = 10_000;
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
}

impl Geometry {
    pub(super) fn llmd_bpb(&self, group: u32) -> Option<u64> {
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

/// The whole run's sets, in a stable order.
pub fn judge(scan: Scan, choice: Choice, geo: &Geometry, now_s: i64) -> Vec<Set> {
    let mut sets = Vec::new();
    for ns in scan.namespaces {
        sets.push(super::family::family(ns, choice, geo, now_s));
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
    for ns in scan.nested {
        sets.push(super::nested::judge(ns, now_s));
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

/// Findings every set gets from its loose entries.
pub(super) fn loose_findings(set: &mut Set, loose: Loose, now_s: i64, where_: &str) {
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
                    "{} of SGLang HiCache's shape: its names cannot be split from the served model \
                        name without knowing it, and this kvcr does not judge SGLang sets: \
                        listed, not judged (first: {first})",
                    plural(loose.sglang.count, "file", "files")
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

pub(super) fn push_state(set: &mut Set, s: State, path: &str, what: &str) {
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
fn flat(
    mut set: Set,
    fs: FlatSet,
    world: u32,
    partial_allowed: bool,
    geo: &Geometry,
    now_s: i64,
    file_path: &dyn Fn(&Key, u32) -> String,
) -> Set {
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
    let full: HashMap<u32, u64> = per_rank
        .iter()
        .filter_map(|(r, v)| {
            geo.chunk_bytes
                .or_else(|| mode(v.iter().copied()))
                .map(|m| (*r, m))
        })
        .collect();
    let mut t = Tallies::default();
    let mut keys: Vec<&Key> = fs.blocks.keys().collect();
    keys.sort_unstable();
    for k in keys {
        let v = &fs.blocks[k];
        // The common case first, without allocating: every rank of a world
        // of at most 128 exactly once, each a regular file of its rank's
        // full size.
        if world <= 128 && v.len() == world as usize {
            let mut seen: u128 = 0;
            let whole = v.iter().all(|(r, s, st)| {
                let bit = 1u128 << r;
                let first = seen & bit == 0;
                seen |= bit;
                first && *st == State::Regular && full.get(r) == Some(s)
            });
            if whole {
                set.bytes += v.iter().map(|x| x.1).sum::<u64>();
                Tallies::whole(&mut set);
                continue;
            }
        }
        let present: Vec<u32> = v.iter().map(|(r, _, _)| *r).collect();
        let missing: Vec<u32> = (0..world).filter(|r| !present.contains(r)).collect();
        let mut b = BlockCheck::default();
        let all_short = v.iter().all(|(r, s, st)| {
            *st == State::Regular && full.get(r).is_some_and(|f| s < f) && *s > 0
        });
        let sizes: BTreeSet<u64> = v.iter().map(|(_, s, _)| *s).collect();
        let partial = partial_allowed && all_short && sizes.len() == 1 && missing.is_empty();
        for &(r, size, state) in v {
            if !t.file(&mut set, &mut b, r, size, state, || file_path(k, r)) {
                continue;
            }
            let Some(&f) = full.get(&r) else { continue };
            let is = if size > f {
                SizeIs::Long(f)
            } else if size < f && partial {
                t.partial.add(
                    || file_path(k, r),
                    format!("{f} bytes"),
                    format!("{size} bytes on every rank"),
                );
                SizeIs::Partial
            } else if size < f {
                SizeIs::Short(f)
            } else {
                SizeIs::Ok
            };
            t.size(&mut b, r, size, is, || file_path(k, r));
        }
        let key = set_key_text(&set, k);
        t.block(&mut set, b, present, missing, |r| {
            (key, None, file_path(k, r))
        });
    }
    let unit = if geo.chunk_bytes.is_some() {
        "--chunk-bytes"
    } else {
        "the rank's common chunk size"
    };
    t.finish(
        &mut set,
        &Wording {
            unit: "chunk",
            missing_tail: "",
            short: &format!("shorter than {unit}"),
            long: &format!("longer than {unit} (read up to the expected length without an error)"),
            partial: "shorter than a full chunk on every rank alike (the request's unfull last \
                chunk)",
        },
    );
    if geo.chunk_bytes.is_none() && set.blocks.total > 0 {
        set.findings.push(Finding::notice(
            Code::KV316,
            "without --chunk-bytes each rank's chunks were checked against that rank's common \
                size, not against the bytes a chunk must have",
        ));
    }
    let loose = Loose {
        staging: fs.staging,
        ..Loose::default()
    };
    loose_findings(&mut set, loose, now_s, "of this set");
    set
}

fn set_key_text(set: &Set, k: &Key) -> String {
    if set.producer == "lmcache" {
        pt_hash_text(k)
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
    flat(set, fs, id.world as u32, false, geo, now_s, &file_path)
}

fn pt(id: PtIdent, fs: FlatSet, geo: &Geometry, now_s: i64, mixed: bool) -> Set {
    let root = fs.roots.iter().next().cloned().unwrap_or_default();
    let mut set = Set::new(root.clone(), "lmcache");
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
    if fs.roots.len() > 1 {
        set.identity
            .insert("roots".into(), json!(fs.roots.iter().collect::<Vec<_>>()));
    }
    if mixed {
        mixed_notice(&mut set, &model);
    }
    let dtype = String::from_utf8_lossy(&id.dtype).into_owned();
    let mut suffix = String::new();
    if let Some(l) = id.layer {
        suffix.push_str(&format!("@{l}"));
    }
    for t in &tags {
        suffix.push('@');
        suffix.push_str(t);
    }
    let w = id.world;
    let total = fs.blocks.values().map(|v| v.len() as u64).sum::<u64>();
    let file_path = move |k: &Key, r: u32| {
        format!(
            "{root}/{model}@{w}@{r}@{}@{dtype}{suffix}.pt",
            pt_hash_text(k)
        )
    };
    let mut set = flat(set, fs, w, true, geo, now_s, &file_path);
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
