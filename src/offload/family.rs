//! A vLLM or llm-d namespace (docs/format.md §15.2): its `config.json` and
//! digest, its rank directories, and each block's files against the
//! producer's size rule. The per-set tallies are [`super::tally`]'s.

use super::canon::{canonical, Canonical, CONFIG_MAX_BYTES};
use super::grammar::Key;
use super::scan::{BlockFile, Config, Loose, NsScan, RankScan, State};
use super::set::{Choice, Geometry, Set, FLAT_WORLD_MAX};
use super::tally::Wording;
use super::tally::{loose_findings, mode, push_state, ranks_text, BlockCheck, SizeIs, Tallies};
use crate::format::finding::{Code, Finding};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// vLLM's row alignment floor: the page size, a multiple of 4096.
pub const VLLM_ALIGN: u64 = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fam {
    Vllm,
    Llmd,
    /// llm-d or vLLM 0.22.0: identical fields.
    LlmdOr022,
    Unknown,
}

fn int_field(c: &Canonical, k: &str) -> Option<u64> {
    c.fields.get(k).and_then(Value::as_u64)
}

/// A vLLM or llm-d namespace (docs/format.md §15.2).
pub(super) fn family(ns: NsScan, choice: Choice, geo: &Geometry, now_s: i64) -> Set {
    let path = ns.path();
    let mut findings = Vec::new();
    let canon = read_config(&ns.config, &path, &mut findings);
    let any_high_rank = ns.ranks.keys().any(|&r| r >= 1);
    let fam = fam_of(canon.as_ref(), choice, any_high_rank);
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
        identity(&mut set, c, &ns.base, fam);
    }
    if let Some(s) = ns.base_not_dir {
        push_state(&mut set, s, &path, "where the namespace directory belongs");
    }
    let field = |k| canon.as_ref().and_then(|c| int_field(c, k));
    let (pp, pcp) = (field("pp_size"), field("pcp_size"));
    let world = match (field("tp_size"), pp, pcp) {
        (Some(a), Some(b), Some(c)) => a.checked_mul(b).and_then(|x| x.checked_mul(c)),
        _ => None,
    };
    if fam == Fam::LlmdOr022 {
        ambiguous_notice(&mut set, &base_text, world);
    }
    let mut loose = ns.loose;
    // Which rank directories belong to the set.
    let expected: Option<Vec<u32>> = match fam {
        Fam::Vllm | Fam::LlmdOr022 => Some(vec![0]),
        Fam::Llmd => {
            // config.json's tp·pp·pcp, or without it the ranks present, 0
            // to the highest; never enumerated past FLAT_WORLD_MAX.
            let from_config = world.filter(|&w| w > 0);
            let claimed =
                from_config.or_else(|| ns.ranks.keys().next_back().map(|&m| u64::from(m) + 1));
            match claimed {
                Some(w) if w > u64::from(FLAT_WORLD_MAX) => {
                    let whose = if from_config.is_some() {
                        "config.json's tp_size·pp_size·pcp_size claims"
                    } else {
                        "the rank directories claim"
                    };
                    set.findings.push(Finding::reject(
                        Code::KV310,
                        format!(
                            "{whose} a world of {w} ranks, over the {FLAT_WORLD_MAX} kvcr \
                                enumerates: no deployment writes this; no rank is expected, \
                                so a missing rank is not looked for"
                        ),
                    ));
                    None
                }
                Some(w) => Some((0..w as u32).collect()),
                None => None,
            }
        }
        Fam::Unknown => None,
    };
    let rank_base = format!("{}/{}", ns.root, base_text);
    let mut ranks = ns.ranks;
    let dropped = out_of_range(&mut set, &mut ranks, &mut loose, fam, &expected, &rank_base);
    set.ranks_expected = match fam {
        Fam::Vllm => None,
        _ => expected.clone(),
    };
    set.ranks_present = ranks
        .iter()
        .filter(|(_, r)| r.present)
        .map(|(&k, _)| k)
        .collect();
    if ns.base_dir && ranks.is_empty() && !dropped {
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
    let rule = Rule {
        fam,
        geo,
        gpb: field("gpu_blocks_per_file"),
        vllm_mode: vllm_mode(&blocks),
        group_max: group_max(&blocks),
        tp_only: pp == Some(1) && pcp == Some(1),
    };
    let groups_len = canon
        .as_ref()
        .and_then(|c| c.fields.get("kv_cache_groups"))
        .and_then(Value::as_array)
        .map(|a| a.len() as u32);
    let beyond_groups = judge_blocks(&mut set, &blocks, &rule, &expected, groups_len, &rank_base);
    closing_notices(&mut set, &rule, beyond_groups, groups_len);
    loose_findings(&mut set, loose, now_s, "in the namespace");
    set
}

/// `config.json` read and canonicalised; each way it cannot be is KV301.
fn read_config(config: &Config, path: &str, findings: &mut Vec<Finding>) -> Option<Canonical> {
    let why = match config {
        Config::Read(bytes) => match canonical(bytes) {
            Ok(c) => return Some(c),
            Err(e) => format!("({} bytes) is {}", bytes.len(), e.describe()),
        },
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
            return None;
        }
        Config::Symlink => "is a symlink, never followed".to_string(),
        Config::Special(kind) => format!("is a {kind}, never opened"),
        Config::TooLarge(n) => format!("is {n} bytes, over the {CONFIG_MAX_BYTES}-byte limit"),
    };
    findings.push(
        Finding::reject(
            Code::KV301,
            format!("{path}/config.json {why}: the namespace cannot be verified"),
        )
        .at(format!("{path}/config.json")),
    );
    None
}

/// Which producer's namespace this is, by `config.json`'s fields
/// (docs/format.md §15.1), unless `--producer` says.
fn fam_of(canon: Option<&Canonical>, choice: Choice, any_high_rank: bool) -> Fam {
    match (canon, choice) {
        (_, Choice::Vllm) => Fam::Vllm,
        (_, Choice::Llmd) => Fam::Llmd,
        (Some(c), _) => {
            let has = |k| c.fields.contains_key(k);
            if has("tokens_per_hash") && has("blocks_per_file") {
                Fam::Vllm
            } else if has("hash_block_size") && has("gpu_blocks_per_file") {
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
    }
}

/// The identity fields, and the directory name against `config.json`: the
/// digest (KV302), the model prefix (KV302), a string model name (KV301),
/// vLLM's direct layout (KV320), fields of neither producer (KV314).
fn identity(set: &mut Set, c: &Canonical, base: &[u8], fam: Fam) {
    let path = set.path.clone();
    let base_text = String::from_utf8_lossy(base).into_owned();
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
    let (prefix, digest) = super::grammar::namespace_dir(base).unwrap_or((base, ""));
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
    // Only vLLM >= 0.33's fields say agnostic by leaving parallel_agnostic
    // out; 0.22.0's (llm-d's keys) never write it.
    if fam == Fam::Vllm
        && c.fields.contains_key("tokens_per_hash")
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

/// KV314: llm-d's fields, which vLLM 0.22.0 also writes, and only `_r0`.
fn ambiguous_notice(set: &mut Set, base_text: &str, world: Option<u64>) {
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
    let at = set.path.clone();
    set.findings.push(Finding::notice(Code::KV314, msg).at(at));
}

/// Rank directories outside `expected` taken out of `ranks`: llm-d's are
/// KV310, the others' foreign. True when there were any.
fn out_of_range(
    set: &mut Set,
    ranks: &mut BTreeMap<u32, RankScan>,
    loose: &mut Loose,
    fam: Fam,
    expected: &Option<Vec<u32>>,
    rank_base: &str,
) -> bool {
    let Some(exp) = expected else {
        return false;
    };
    let keep: BTreeSet<u32> = exp.iter().copied().collect();
    let list: Vec<u32> = ranks
        .keys()
        .copied()
        .filter(|r| !keep.contains(r))
        .collect();
    for r in &list {
        ranks.remove(r);
    }
    let Some(first) = list.first() else {
        return false;
    };
    if fam == Fam::Llmd {
        set.findings.push(
            Finding::reject(
                Code::KV310,
                format!(
                    "rank directories {} at or above tp·pp·pcp = {}: the recorded \
                        configuration cannot write them and no engine of this namespace reads \
                        them",
                    ranks_text(&list),
                    exp.len()
                ),
            )
            .at(format!("{rank_base}_r{first}")),
        );
    } else {
        for r in &list {
            loose.foreign.push(format!("{rank_base}_r{r}"));
        }
    }
    true
}

/// vLLM's reference size without geometry: the namespace's most common
/// aligned size.
fn vllm_mode(blocks: &HashMap<Key, Vec<(u32, u64, State)>>) -> Option<u64> {
    mode(
        blocks
            .values()
            .flatten()
            .filter(|(_, s, st)| *st == State::Regular && *s > 0 && s % VLLM_ALIGN == 0)
            .map(|(_, s, _)| *s),
    )
}

/// llm-d's reference size without geometry: the largest file per rank and
/// group (pipeline stages hold different layers, so a block's bytes differ
/// by stage; under TP the ranks agree, which KV307 checks).
fn group_max(blocks: &HashMap<Key, Vec<(u32, u64, State)>>) -> HashMap<(u32, u32), u64> {
    let mut group_max: HashMap<(u32, u32), u64> = HashMap::new();
    for (k, v) in blocks {
        for (r, s, st) in v {
            if *st == State::Regular {
                let e = group_max.entry((*r, k.group)).or_default();
                *e = (*e).max(*s);
            }
        }
    }
    group_max
}

/// The size rule of one namespace.
struct Rule<'a> {
    fam: Fam,
    geo: &'a Geometry,
    /// llm-d's `gpu_blocks_per_file`.
    gpb: Option<u64>,
    vllm_mode: Option<u64>,
    group_max: HashMap<(u32, u32), u64>,
    /// llm-d with pp = pcp = 1: every rank of a key holds the same bytes.
    tp_only: bool,
}

impl Rule<'_> {
    /// One regular file of `group` on rank `r` holding `size` bytes: what its size is
    /// against the producer's unit, and against the size it should have
    /// (two separate rules for vLLM without geometry: a truncated file is
    /// both short of the namespace's size and off the page alignment).
    fn size(&self, r: u32, group: u32, size: u64) -> [SizeIs; 2] {
        let against = |m: Option<u64>| match m {
            Some(m) if size < m => SizeIs::Short(m),
            Some(m) if size > m => SizeIs::Long(m),
            _ => SizeIs::Ok,
        };
        let one = match self.fam {
            Fam::Vllm => match self.geo.kv_bytes_per_chunk {
                Some(n) => against(Some(n)),
                None => {
                    let aligned = size != 0 && size.is_multiple_of(VLLM_ALIGN);
                    let unit = match aligned {
                        true => SizeIs::Ok,
                        false => SizeIs::Misaligned(VLLM_ALIGN),
                    };
                    return [unit, against(self.vllm_mode)];
                }
            },
            Fam::Llmd => match self.geo.llmd_bpb(group) {
                Some(bpb) if size == 0 || !size.is_multiple_of(bpb) => SizeIs::Misaligned(bpb),
                Some(bpb) => match self.gpb {
                    Some(g) if size / bpb > g => SizeIs::Long(g * bpb),
                    Some(g) if size / bpb < g => SizeIs::Partial,
                    _ => SizeIs::Ok,
                },
                None if size == 0 => {
                    SizeIs::Short(self.group_max.get(&(r, group)).copied().unwrap_or(0))
                }
                None if self.group_max.get(&(r, group)).is_some_and(|&m| size < m) => {
                    SizeIs::Partial
                }
                None => SizeIs::Ok,
            },
            Fam::LlmdOr022 | Fam::Unknown if size == 0 => SizeIs::Short(1),
            Fam::LlmdOr022 | Fam::Unknown => SizeIs::Ok,
        };
        [one, SizeIs::Ok]
    }

    /// llm-d: a file of `group` on rank `r` holding fewer than
    /// `gpu_blocks_per_file` blocks.
    fn partial(&self, r: u32, group: u32, s: u64) -> bool {
        match self.geo.llmd_bpb(group) {
            Some(bpb) => self.gpb.is_some_and(|g| s / bpb < g),
            None => self.group_max.get(&(r, group)).is_some_and(|&m| s < m),
        }
    }
}

/// Every key's files judged and tallied; the group ids at or beyond
/// `kv_cache_groups` returned.
fn judge_blocks(
    set: &mut Set,
    blocks: &HashMap<Key, Vec<(u32, u64, State)>>,
    rule: &Rule,
    expected: &Option<Vec<u32>>,
    groups_len: Option<u32>,
    rank_base: &str,
) -> BTreeSet<u32> {
    let file_path = |k: &Key, r: u32| {
        let h = k.hex();
        format!(
            "{rank_base}_r{r}/{}/{}_g{}/{h}.bin",
            &h[..3],
            &h[3..5],
            k.group
        )
    };
    let fam = rule.fam;
    let mut t = Tallies::default();
    let mut beyond_groups = BTreeSet::new();
    let mut keys: Vec<&Key> = blocks.keys().collect();
    keys.sort_unstable();
    for k in keys {
        let v = &blocks[k];
        if groups_len.is_some_and(|n| k.group >= n) {
            beyond_groups.insert(k.group);
        }
        let present: Vec<u32> = v.iter().map(|(r, _, _)| *r).collect();
        let missing: Vec<u32> = match (expected, fam) {
            (Some(exp), Fam::Llmd) => exp
                .iter()
                .copied()
                .filter(|r| !present.contains(r))
                .collect(),
            _ => Vec::new(),
        };
        let mut b = BlockCheck::default();
        for &(r, size, state) in v {
            if t.file(set, &mut b, r, size, state, || file_path(k, r)) {
                for is in rule.size(r, k.group, size) {
                    t.size(&mut b, r, size, is, || file_path(k, r));
                }
            }
        }
        // llm-d: the ranks must agree on a key's size (TP only), and a
        // partial file is legitimate only when every rank agrees.
        if fam == Fam::Llmd && rule.tp_only {
            let sizes: BTreeSet<u64> = v
                .iter()
                .filter(|(_, _, st)| *st == State::Regular)
                .map(|(_, s, _)| *s)
                .collect();
            if sizes.len() > 1 {
                let list: Vec<String> =
                    v.iter().map(|(r, s, _)| format!("rank {r}: {s}")).collect();
                t.disagree.add(
                    || file_path(k, v[0].0),
                    "one size on every rank".into(),
                    list.join(", "),
                );
                b.bad(
                    v[0].0,
                    format!("ranks disagree on the size ({})", list.join(", ")),
                );
            }
        }
        if fam == Fam::Llmd
            && b.is_clean()
            && v.iter()
                .any(|(r, s, st)| *st == State::Regular && rule.partial(*r, k.group, *s))
        {
            let (r, s, _) = v[0];
            t.partial.add(
                || file_path(k, r),
                "gpu_blocks_per_file blocks".into(),
                format!("{s} bytes on every rank present"),
            );
        }
        t.block(set, b, present, missing, |r| {
            (k.hex(), Some(k.group), file_path(k, r))
        });
    }
    t.finish(
        set,
        &Wording {
            unit: "block",
            missing_tail: "; llm-d's scheduler checks rank 0 only and reports such a load as a \
                success with the previous file's bytes",
            short: "shorter than the size the producer writes",
            long: "longer than the size the producer writes (loaded without an error, with \
                wrong bytes)",
            partial: "holding fewer than gpu_blocks_per_file blocks, agreed by every rank \
                present (a partial chunk)",
        },
    );
    beyond_groups
}

/// KV315 (vLLM's ranks are inside its files), KV316 (what was checked
/// without geometry), KV321 (group ids beyond the recorded groups).
fn closing_notices(set: &mut Set, rule: &Rule, beyond: BTreeSet<u32>, groups_len: Option<u32>) {
    if rule.fam == Fam::Vllm {
        set.findings.push(Finding::notice(
            Code::KV315,
            "vLLM keeps every worker's slice inside one file under _r0: rank completeness cannot \
                be checked offline, only each file's size",
        ));
    }
    let note = match rule.fam {
        Fam::Vllm if rule.geo.kv_bytes_per_chunk.is_none() => Some(
            "without --kv-bytes-per-chunk the files were checked against 4096-byte alignment and \
            the namespace's common size, not against the row the engine writes",
        ),
        Fam::Llmd if rule.geo.bytes_per_block.is_empty() => Some(
            "without --bytes-per-block the files were checked against each other (equal sizes \
            across the ranks of a key), not against the bytes a block occupies",
        ),
        _ => None,
    };
    if let Some(note) = note.filter(|_| set.blocks.total > 0) {
        set.findings.push(Finding::notice(Code::KV316, note));
    }
    if !beyond.is_empty() && rule.fam == Fam::Vllm {
        let g: Vec<u32> = beyond.into_iter().collect();
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
}
