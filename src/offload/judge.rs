//! The rules of docs/format.md §15.2: each set's findings, block counts
//! and verdict, from what the walk found ([`super::scan`]). Pure: no I/O,
//! no clock (the caller passes the time).

use super::grammar::{pt_hash_text, Key};
use super::scan::{FlatSet, Loose, MpIdent, PtIdent, RootScan, Scan, State};
use super::tally::{loose_findings, mode, plural, BlockCheck, SizeIs, Tallies, Wording};
use crate::format::finding::{Code, Finding};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
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

fn unattributed(r: RootScan, now_s: i64) -> Option<Set> {
    if r.loose.is_empty() {
        return None;
    }
    let mut set = Set::new(r.path, "unattributed");
    loose_findings(&mut set, r.loose, now_s, "at the root, in no set");
    Some(set)
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
