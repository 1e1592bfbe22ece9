//! llm-d ≤ v0.8.1's nested layout (docs/format.md §15.1): its names, what
//! the walk found of one set, and the set's judgement. Upstream
//! (`llm-d-kv-cache` tag v0.8.1, `kv_connectors/llmd_fs_backend/`):
//! `llmd_fs_backend/file_mapper.py` builds
//! `<root>/<model_name>/block_size_<B>_blocks_per_file_<F>/tp_<T>_pp_size_<P>_pcp_size_<C>/rank_<R>/<dtype>/<h[0:3]>/<h[3:5]>/<h>.bin`
//! with `h` the block hash's low 64 bits as 16 hex digits; `main` from
//! 9e3eb64 until e817348 wrote the same directories with
//! `<h[0:3]>/<h[3:5]>_g<G>/<full hex>.bin` below `<dtype>`. Each file is the
//! whole staging buffer, at least 16 MiB (`csrc/storage/thread_pool.cpp`
//! `MIN_STAGING_BUFFER_SIZE`); temps are `<file>_<u32>.tmp` (file_io.cpp).

use super::grammar::{decimal, Key, MAX_HASH_BYTES};
use super::scan::{NestedScan, State};
use super::set::{Set, FLAT_WORLD_MAX};
use super::tally::{loose_findings, mode, ranks_text, BlockCheck, SizeIs, Tallies, Wording};
use crate::format::finding::{Code, Finding};
use serde_json::json;
use std::collections::{BTreeSet, HashMap};

/// The smallest file v0.8.1 writes: its staging buffer's floor.
pub const MIN_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// v0.8.1's hash width in hex digits (the hash's low 64 bits).
pub const HASH_HEX: usize = 16;
/// How many directory levels a model name may span below the root
/// (`org/name` is two; a local path more).
pub const MODEL_DEPTH: usize = 4;
/// The most directories looked into while searching one root entry for
/// the layout, so a large foreign tree costs a bounded amount.
pub const PROBE_DIRS: usize = 4096;

/// `block_size_<B>_blocks_per_file_<F>`.
pub fn block_size_dir(name: &[u8]) -> Option<(u64, u64)> {
    let rest = name.strip_prefix(b"block_size_")?;
    let pos = rest.windows(17).position(|w| w == b"_blocks_per_file_")?;
    Some((
        decimal(&rest[..pos], u32::MAX as u64)?,
        decimal(&rest[pos + 17..], u32::MAX as u64)?,
    ))
}

/// `tp_<T>_pp_size_<P>_pcp_size_<C>`.
pub fn parallel_dir(name: &[u8]) -> Option<(u32, u32, u32)> {
    let rest = name.strip_prefix(b"tp_")?;
    let a = rest.windows(9).position(|w| w == b"_pp_size_")?;
    let tail = &rest[a + 9..];
    let b = tail.windows(10).position(|w| w == b"_pcp_size_")?;
    let n = |x: &[u8]| decimal(x, u32::MAX as u64).map(|v| v as u32);
    Some((n(&rest[..a])?, n(&tail[..b])?, n(&tail[b + 10..])?))
}

/// `rank_<R>`.
pub fn rank_dir(name: &[u8]) -> Option<u32> {
    decimal(name.strip_prefix(b"rank_")?, u32::MAX as u64).map(|v| v as u32)
}

/// The second bucket level: `<2 hex>` (v0.8.1) or `<2 hex>_g<G>` (from
/// 9e3eb64); returns (the 2 hex, `Some(G)` for the second).
pub fn bucket2(name: &[u8]) -> Option<(&[u8], Option<u32>)> {
    if name.len() == 2
        && name
            .iter()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    {
        return Some((name, None));
    }
    super::grammar::bucket2(name).map(|(b, g)| (b, Some(g)))
}

/// A leaf below `<b1>/<b2>[_g<G>]`: a block, its temp (`Some(true)` in the
/// second field), or `None`. 16 hex digits without a group, 64 or 32 with.
pub fn leaf(name: &[u8], b1: &[u8], b2: &[u8], group: Option<u32>) -> Option<(Key, bool)> {
    match group {
        Some(g) => match super::grammar::leaf(name, b1, b2, g) {
            super::grammar::LeafName::Block(k) => Some((k, false)),
            super::grammar::LeafName::Temp(k, n) if n <= u32::MAX as u64 => Some((k, true)),
            _ => None,
        },
        None => {
            let (hex, temp) = match name.strip_suffix(b".bin") {
                Some(h) => (h, false),
                None => {
                    let t = name.strip_suffix(b".tmp")?;
                    let pos = t.windows(5).position(|w| w == b".bin_")?;
                    decimal(&t[pos + 5..], u32::MAX as u64)?;
                    (&t[..pos], true)
                }
            };
            if hex.len() != HASH_HEX || &hex[..3] != b1 || &hex[3..5] != b2 {
                return None;
            }
            let mut hash = [0u8; MAX_HASH_BYTES];
            for (i, p) in hex.chunks_exact(2).enumerate() {
                let s = std::str::from_utf8(p).ok()?;
                if s.bytes().any(|c| c.is_ascii_uppercase()) {
                    return None;
                }
                hash[i] = u8::from_str_radix(s, 16).ok()?;
            }
            Some((
                Key {
                    hash,
                    len: (HASH_HEX / 2) as u8,
                    group: 0,
                },
                temp,
            ))
        }
    }
}

/// The display path of key `k`'s file on rank `r`.
fn file(ns: &NestedScan, k: &Key, r: u32) -> String {
    let h = k.hex();
    let b2 = match k.len as usize * 2 {
        HASH_HEX => h[3..5].to_string(),
        _ => format!("{}_g{}", &h[3..5], k.group),
    };
    format!(
        "{}/rank_{r}/{}/{}/{b2}/{h}.bin",
        ns.path(),
        String::from_utf8_lossy(&ns.dtype),
        &h[..3]
    )
}

/// Judges one nested set: every rank `0 … tp·pp·pcp−1` must hold each key;
/// each file is at least [`MIN_FILE_BYTES`] and of its rank's common size;
/// under TP only the ranks of a key agree on its size.
pub fn judge(mut ns: NestedScan, now_s: i64) -> Set {
    let mut set = Set::new(ns.path(), "llmd-nested");
    let dtype = String::from_utf8_lossy(&ns.dtype).into_owned();
    set.identity.extend([
        ("layout".into(), json!("llm-d <= v0.8.1 nested")),
        (
            "model_name".into(),
            json!(String::from_utf8_lossy(&ns.model)),
        ),
        ("hash_block_size".into(), json!(ns.block_size)),
        ("gpu_blocks_per_file".into(), json!(ns.per_file)),
        ("tp_size".into(), json!(ns.tp)),
        ("pp_size".into(), json!(ns.pp)),
        ("pcp_size".into(), json!(ns.pcp)),
        ("dtype".into(), json!(dtype)),
    ]);
    let world = u64::from(ns.tp)
        .saturating_mul(u64::from(ns.pp))
        .saturating_mul(u64::from(ns.pcp));
    let expected = expected_ranks(&mut set, world);
    set.ranks_expected = Some(expected.clone());
    let mut loose = std::mem::take(&mut ns.loose);
    let out: Vec<u32> = ns
        .ranks
        .keys()
        .copied()
        .filter(|&r| r as u64 >= world)
        .collect();
    if let Some(first) = out.first() {
        set.findings.push(
            Finding::reject(
                Code::KV310,
                format!(
                    "rank directories {} at or above tp·pp·pcp = {world}: the directory's \
                        configuration cannot write them",
                    ranks_text(&out)
                ),
            )
            .at(format!("{}/rank_{first}", ns.path())),
        );
        for r in &out {
            ns.ranks.remove(r);
        }
    }
    set.ranks_present = ns.ranks.keys().copied().collect();
    let mut blocks: HashMap<Key, Vec<(u32, u64, State)>> = HashMap::new();
    for (&r, rs) in ns.ranks.iter_mut() {
        loose.merge(std::mem::take(&mut rs.loose));
        for b in rs.blocks.drain(..) {
            blocks.entry(b.key).or_default().push((r, b.size, b.state));
        }
    }
    let mut per_rank: HashMap<u32, Vec<u64>> = HashMap::new();
    for v in blocks.values() {
        for &(r, s, st) in v {
            if st == State::Regular && s >= MIN_FILE_BYTES {
                per_rank.entry(r).or_default().push(s);
            }
        }
    }
    let full: HashMap<u32, u64> = per_rank
        .into_iter()
        .filter_map(|(r, v)| mode(v.into_iter()).map(|m| (r, m)))
        .collect();
    let tp_only = ns.pp == 1 && ns.pcp == 1;
    let mut t = Tallies::default();
    let mut keys: Vec<&Key> = blocks.keys().collect();
    keys.sort_unstable();
    for k in keys {
        let v = &blocks[k];
        let present: Vec<u32> = v.iter().map(|x| x.0).collect();
        let missing: Vec<u32> = expected
            .iter()
            .copied()
            .filter(|r| !present.contains(r))
            .collect();
        let mut b = BlockCheck::default();
        for &(r, size, state) in v {
            if !t.file(&mut set, &mut b, r, size, state, || file(&ns, k, r)) {
                continue;
            }
            let is = match full.get(&r) {
                _ if size < MIN_FILE_BYTES => SizeIs::Short(MIN_FILE_BYTES),
                Some(&f) if size < f => SizeIs::Short(f),
                Some(&f) if size > f => SizeIs::Long(f),
                _ => SizeIs::Ok,
            };
            t.size(&mut b, r, size, is, || file(&ns, k, r));
        }
        let sizes: BTreeSet<u64> = v
            .iter()
            .filter(|x| x.2 == State::Regular)
            .map(|x| x.1)
            .collect();
        if tp_only && sizes.len() > 1 {
            let list: Vec<String> = v.iter().map(|(r, s, _)| format!("rank {r}: {s}")).collect();
            t.disagree.add(
                || file(&ns, k, v[0].0),
                "one size on every rank".into(),
                list.join(", "),
            );
            b.bad(
                v[0].0,
                format!("ranks disagree on the size ({})", list.join(", ")),
            );
        }
        t.block(&mut set, b, present, missing, |r| {
            (
                k.hex(),
                (k.len as usize * 2 != HASH_HEX).then_some(k.group),
                file(&ns, k, r),
            )
        });
    }
    t.finish(
        &mut set,
        &Wording {
            unit: "block",
            missing_tail: "; llm-d's scheduler checks rank 0 only and reports such a load as a \
                success",
            short: "shorter than the staging buffer the producer writes whole",
            long: "longer than the rank's other files (the staging buffer is one size)",
            partial: "",
        },
    );
    set.findings.push(
        Finding::notice(
            Code::KV323,
            format!(
                "llm-d <= v0.8.1's nested layout: llm-d since e817348 writes <model>_<digest>/ \
                    namespaces and never reads this tree again; judged as v0.8.1 wrote it \
                    (every rank of tp·pp·pcp = {world}, files of at least {MIN_FILE_BYTES} bytes)"
            ),
        )
        .at(set.path.clone()),
    );
    loose_findings(&mut set, loose, now_s, "in the set");
    set
}

/// Every rank of tp·pp·pcp = `world`; beyond `FLAT_WORLD_MAX`, KV310 and
/// none (never enumerated).
fn expected_ranks(set: &mut Set, world: u64) -> Vec<u32> {
    if world > u64::from(FLAT_WORLD_MAX) {
        set.findings.push(Finding::reject(
            Code::KV310,
            format!(
                "tp·pp·pcp = {world} ranks, over the {FLAT_WORLD_MAX} kvcr enumerates: no \
                    deployment writes this; no rank is expected, so a missing rank is not \
                    looked for"
            ),
        ));
        return Vec::new();
    }
    (0..world as u32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// llm-d-kv-cache v0.8.1 `llmd_fs_backend/file_mapper.py:60-85` and
    /// `csrc/storage/thread_pool.cpp:35`.
    #[test]
    fn v0_8_1_names_and_constants() {
        assert_eq!(MIN_FILE_BYTES, 16 * 1024 * 1024);
        assert_eq!(HASH_HEX, 16);
        assert_eq!(
            block_size_dir(b"block_size_16_blocks_per_file_256"),
            Some((16, 256))
        );
        assert_eq!(block_size_dir(b"block_size_016_blocks_per_file_256"), None);
        assert_eq!(block_size_dir(b"block_size_16_blocks_per_file_"), None);
        assert_eq!(block_size_dir(b"block_size_16"), None);
        assert_eq!(parallel_dir(b"tp_2_pp_size_1_pcp_size_1"), Some((2, 1, 1)));
        // The docstring's form, which the code never wrote.
        assert_eq!(parallel_dir(b"tp_2_pp_1_pcp_1"), None);
        assert_eq!(parallel_dir(b"tp_2_pp_size_1_pcp_size_01"), None);
        assert_eq!(rank_dir(b"rank_0"), Some(0));
        assert_eq!(rank_dir(b"rank_12"), Some(12));
        assert_eq!(rank_dir(b"rank_012"), None);
        assert_eq!(rank_dir(b"rank_"), None);
        assert_eq!(bucket2(b"e5"), Some((&b"e5"[..], None)));
        assert_eq!(bucket2(b"E5"), None);
        assert_eq!(bucket2(b"e5_g1"), Some((&b"e5"[..], Some(1))));
    }

    #[test]
    fn leaves_of_both_nested_states() {
        let (k, temp) = leaf(b"c01e52ddb7875b4b.bin", b"c01", b"e5", None).unwrap();
        assert!(!temp);
        assert_eq!(k.hex(), "c01e52ddb7875b4b");
        assert_eq!(k.len, 8);
        // Buckets must match the name; widths are 16 without a group.
        assert!(leaf(b"c01e52ddb7875b4b.bin", b"c02", b"e5", None).is_none());
        assert!(leaf(b"c01e52ddb7875b4.bin", b"c01", b"e5", None).is_none());
        assert!(leaf(b"C01e52ddb7875b4b.bin", b"C01", b"e5", None).is_none());
        let full = "c01e52ddb7875b4b".repeat(4);
        assert!(leaf(format!("{full}.bin").as_bytes(), b"c01", b"e5", None).is_none());
        // From 9e3eb64: full hex under <2>_g<G>.
        let (k, _) = leaf(format!("{full}.bin").as_bytes(), b"c01", b"e5", Some(2)).unwrap();
        assert_eq!((k.len, k.group), (32, 2));
        // Temps: file_io.cpp's `_<u32>.tmp`, nothing wider.
        let (_, temp) = leaf(b"c01e52ddb7875b4b.bin_4294967295.tmp", b"c01", b"e5", None).unwrap();
        assert!(temp);
        assert!(leaf(b"c01e52ddb7875b4b.bin_4294967296.tmp", b"c01", b"e5", None).is_none());
        assert!(leaf(
            format!("{full}.bin_4294967296.tmp").as_bytes(),
            b"c01",
            b"e5",
            Some(0)
        )
        .is_none());
    }
}
