//! The rules of docs/format.md §15.2: each set's findings, block counts
//! and verdict, from what the walk found ([`super::scan`]). Pure: no I/O,
//! no clock (the caller passes the time).

use super::grammar::{
    gds_buckets, pt_hash_text, quote, sglang_name, Key, GDS_DATA_SUFFIXES, SGLANG_POOLS,
};
use super::scan::{FlatSet, GdsSet, Loose, MpIdent, PtIdent, RootScan, Scan, SgIdent, State};
use super::set::ListedBlock;
use super::tally::{loose_findings, mode, plural, BlockCheck, SizeIs, Tallies, Tally, Wording};
use crate::format::finding::{Code, Finding, Severity};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

pub use super::set::{Choice, Geometry, Set};

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

pub use super::set::FLAT_WORLD_MAX;

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

fn unattributed(r: RootScan, now_s: i64) -> Option<Set> {
    if r.loose.is_empty() {
        return None;
    }
    let mut set = Set::new(r.path, "unattributed");
    loose_findings(&mut set, r.loose, now_s, "at the root, in no set");
    Some(set)
}

/// What a flat set's file sizes are checked against.
enum Expect<'a> {
    /// A geometry option's bytes (or, without it, each rank's common size)
    /// and the option's name.
    Option(Option<u64>, &'a str),
    /// Each file's own size rule (LMCache GDS: its header's bytes); `None`
    /// for a file whose rule is unknown (reported on its own).
    PerFile(&'a dyn Fn(&Key, u32) -> Option<u64>, &'a str),
}

/// How a flat producer judges sizes: whether a shorter chunk agreed by every
/// rank is legitimate (LMCache's unfull last chunk) or never stored (lmcache-mp).
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
    if !ranks(&mut set, &fs, world) {
        return set;
    }
    let full_of_rank = full_of_rank(&fs, expected);
    let full = |k: &Key, r: u32| match per_file {
        Some(f) => f(k, r),
        None => full_of_rank.get(&r).copied(),
    };
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
                first && *st == State::Regular && full(k, *r) == Some(*s)
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
            *st == State::Regular && full(k, *r).is_some_and(|f| *s < f) && *s > 0
        });
        let sizes: BTreeSet<u64> = v.iter().map(|(_, s, _)| *s).collect();
        let partial = partial_allowed && all_short && sizes.len() == 1 && missing.is_empty();
        for &(r, size, state) in v {
            if !t.file(&mut set, &mut b, r, size, state, || file_path(k, r)) {
                continue;
            }
            let Some(f) = full(k, r) else { continue };
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
    let noun = unit_noun(set.producer);
    let unit = if expected.is_some() || per_file.is_some() {
        option.to_string()
    } else {
        "the rank's common size".to_string()
    };
    t.finish(
        &mut set,
        &Wording {
            unit: noun,
            missing_tail: "",
            short: &format!("shorter than {unit}"),
            long: &format!("longer than {unit} (read up to the expected length without an error)"),
            partial: "shorter than a full chunk on every rank alike (the request's unfull last \
                chunk)",
        },
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

/// The set's expected and present ranks, and KV310 for files at or above
/// the world size; false (the set judged damaged whole) for a world over
/// [`FLAT_WORLD_MAX`], which kvcr never enumerates.
fn ranks(set: &mut Set, fs: &FlatSet, world: u32) -> bool {
    if world > FLAT_WORLD_MAX {
        // Never enumerate a world a name claims without bound.
        set.blocks.total = fs.blocks.keys().count() as u64;
        set.blocks.damaged = set.blocks.total;
        set.findings.push(Finding::reject(
            Code::KV310,
            format!(
                "the names claim a world of {world} ranks, over the {FLAT_WORLD_MAX} kvcr \
                    enumerates: no deployment writes this; not judged further"
            ),
        ));
        return false;
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
    true
}

/// Per rank: the full size of a file (the geometry option's, or the rank's
/// most common size).
fn full_of_rank(fs: &FlatSet, expected: Option<u64>) -> HashMap<u32, u64> {
    let mut per_rank: HashMap<u32, Vec<u64>> = HashMap::new();
    for v in fs.blocks.values() {
        for (r, s, st) in v {
            if *st == State::Regular {
                per_rank.entry(*r).or_default().push(*s);
            }
        }
    }
    per_rank
        .iter()
        .filter_map(|(r, v)| {
            expected
                .or_else(|| mode(v.iter().copied()))
                .map(|m| (*r, m))
        })
        .collect()
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
    if set.producer == "lmcache" || set.producer == "lmcache-gds" {
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
    let mut t = SidecarTallies::default();
    let SidecarTallies {
        invalid,
        missing,
        mismatch,
        orphan,
        links,
        special,
    } = &mut t;
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
                    State::Special(kind) => (&mut *special, format!("a {kind}")),
                    _ => (&mut *links, "a symlink".to_string()),
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
    damaged(&mut set, bad, &g.headers, &path_of);
    t.finish(&mut set);
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

/// What an LMCache GDS set's sidecars and headers tally, each its own code.
#[derive(Default)]
struct SidecarTallies {
    invalid: Tally,
    missing: Tally,
    mismatch: Tally,
    orphan: Tally,
    links: Tally,
    special: Tally,
}

impl SidecarTallies {
    fn finish(self, set: &mut Set) {
        self.invalid.finish(
            set,
            Code::KV354,
            Severity::Reject,
            "whose 4096-byte header is not one LMCache writes",
        );
        self.missing.finish(
            set,
            Code::KV351,
            Severity::Reject,
            "without a .metadata sidecar (the engine's start-up scan never sees them)",
        );
        self.mismatch.finish(
            set,
            Code::KV353,
            Severity::Reject,
            "whose sidecar differs from its data file's header (the engine believes the sidecar)",
        );
        self.orphan.finish(
            set,
            Code::KV352,
            Severity::Reject,
            "sidecars without their data file (registered at start-up; the load then fails)",
        );
        self.links.finish(
            set,
            Code::KV308,
            Severity::Reject,
            "symlinked where a sidecar belongs, never followed",
        );
        self.special.finish(
            set,
            Code::KV309,
            Severity::Reject,
            "special where a sidecar belongs, never opened",
        );
    }
}

/// A block the size rules passed but whose header or sidecar is wrong
/// (`bad`: the problems per key) is damaged, not complete.
fn damaged(
    set: &mut Set,
    bad: BTreeMap<Key, Vec<String>>,
    headers: &HashMap<(Key, u32), super::scan::GdsHead>,
    path_of: &dyn Fn(&Key, u32) -> String,
) {
    let listed: BTreeSet<String> = set.listed.iter().map(|b| b.key.clone()).collect();
    // The ranks holding each bad key, in one pass over the headers (not one
    // pass per bad key).
    let mut ranks: HashMap<Key, BTreeSet<u32>> = HashMap::new();
    for (k, r) in headers.keys() {
        if bad.contains_key(k) {
            ranks.entry(*k).or_default().insert(*r);
        }
    }
    for (k, problems) in bad {
        let key = pt_hash_text(&k);
        if listed.contains(&key) {
            continue;
        }
        set.blocks.complete = set.blocks.complete.saturating_sub(1);
        set.blocks.damaged += 1;
        let present = ranks.remove(&k).unwrap_or_default().into_iter().collect();
        set.list(ListedBlock {
            key,
            group: None,
            present_ranks: present,
            missing_ranks: Vec::new(),
            problem: problems.join("; "),
            path: path_of(&k, 0),
        });
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
