//! What every set tallies over its blocks (docs/format.md §15.2), one
//! helper for every producer: each file's bytes, symlinks and special
//! files, its size against the producer's rule (short, long, misaligned),
//! each block's outcome (complete, incomplete with the ranks it misses,
//! damaged) and the per-rank count of missing blocks, and at the end one
//! finding per code. A producer's judge decides only what is its own: which
//! ranks a block needs, and the size each file should have ([`SizeIs`]).

use super::grammar::sglang_readings;
use super::scan::{Loose, SgIdent, State};
use super::set::{ListedBlock, Set};
use crate::format::finding::{Code, Finding, Severity};
use std::collections::{BTreeMap, HashMap};

/// A staging file younger than this may belong to a running writer.
pub const RECENT_S: i64 = 600;

/// `1 file`, `2 files`.
pub(super) fn plural(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// Ranks as ranges: `0-3,7`.
pub(super) fn ranks_text(r: &[u32]) -> String {
    crate::format::rankset::compress_ranks(&r.iter().map(|&x| x as u64).collect::<Vec<_>>())
}

/// The most common size among `sizes` (ties: the larger).
pub(super) fn mode(sizes: impl Iterator<Item = u64>) -> Option<u64> {
    let mut m: HashMap<u64, u64> = HashMap::new();
    for s in sizes {
        *m.entry(s).or_default() += 1;
    }
    m.into_iter().max_by_key(|&(s, n)| (n, s)).map(|(s, _)| s)
}

/// One regular file's size against the producer's rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SizeIs {
    Ok,
    /// Shorter than this many bytes.
    Short(u64),
    /// Longer than this many bytes.
    Long(u64),
    /// Not a non-zero multiple of this unit.
    Misaligned(u64),
    /// Shorter, and legitimately so (the caller tallies it as it words it).
    Partial,
}

/// Aggregates one code's findings into one line per set.
#[derive(Default)]
pub(super) struct Tally {
    count: u64,
    first: Option<(String, String, String)>,
}

impl Tally {
    pub(super) fn add(&mut self, path: impl FnOnce() -> String, expected: String, found: String) {
        self.count += 1;
        if self.first.is_none() {
            self.first = Some((path(), expected, found));
        }
    }

    pub(super) fn finish(self, set: &mut Set, code: Code, severity: Severity, what: &str) {
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

/// One block's problems, gathered as its files are checked.
#[derive(Default)]
pub(super) struct BlockCheck {
    problems: Vec<String>,
    /// The first rank with a problem: the file the block is listed by.
    first_bad: Option<u32>,
}

impl BlockCheck {
    pub(super) fn bad(&mut self, rank: u32, problem: String) {
        self.problems.push(problem);
        self.first_bad.get_or_insert(rank);
    }

    /// No file of the block has a problem (so far).
    pub(super) fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// How a producer words its set's findings.
pub(super) struct Wording<'a> {
    /// What one key is: `block` or `chunk` (plural: with an s).
    pub unit: &'a str,
    /// Appended to KV303's count: what the engine does with such a block.
    pub missing_tail: &'a str,
    /// KV304's, KV305's and KV313's descriptions of their files.
    pub short: &'a str,
    pub long: &'a str,
    pub partial: &'a str,
}

/// A set's tallies, block by block; [`Tallies::finish`] turns them into
/// findings.
#[derive(Default)]
pub(super) struct Tallies {
    short: Tally,
    long: Tally,
    misaligned: Tally,
    /// KV307: the ranks of one key disagree on its size.
    pub disagree: Tally,
    links: Tally,
    special: Tally,
    /// KV313: legitimately shorter files, as the producer counts them.
    pub partial: Tally,
    /// Per rank: the blocks missing on it.
    incomplete_ranks: BTreeMap<u32, u64>,
}

impl Tallies {
    /// One file of a block on rank `r`: its bytes counted, a symlink or a
    /// special file tallied. True when it is a regular file, whose size the
    /// caller then judges.
    pub(super) fn file(
        &mut self,
        set: &mut Set,
        b: &mut BlockCheck,
        r: u32,
        size: u64,
        state: State,
        path: impl FnOnce() -> String,
    ) -> bool {
        set.bytes += size;
        match state {
            State::Symlink => {
                self.links
                    .add(path, "a regular file".into(), "a symlink".into());
                b.bad(r, format!("rank {r}: a symlink"));
                false
            }
            State::Special(kind) => {
                self.special
                    .add(path, "a regular file".into(), format!("a {kind}"));
                b.bad(r, format!("rank {r}: a {kind}"));
                false
            }
            State::Regular => true,
        }
    }

    /// A regular file's size judged: short, long and misaligned tallied
    /// (`Ok` and `Partial` are not problems of the block).
    pub(super) fn size(
        &mut self,
        b: &mut BlockCheck,
        r: u32,
        size: u64,
        is: SizeIs,
        path: impl FnOnce() -> String,
    ) {
        let found = || format!("{size} bytes on rank {r}");
        match is {
            SizeIs::Ok | SizeIs::Partial => {}
            SizeIs::Short(n) => {
                self.short.add(path, format!("{n} bytes"), found());
                b.bad(r, format!("rank {r}: {size} bytes, short of {n}"));
            }
            SizeIs::Long(n) => {
                self.long.add(path, format!("{n} bytes"), found());
                b.bad(r, format!("rank {r}: {size} bytes, over {n}"));
            }
            SizeIs::Misaligned(unit) => {
                self.misaligned
                    .add(path, format!("a non-zero multiple of {unit}"), found());
                b.bad(
                    r,
                    format!("rank {r}: {size} bytes, not a non-zero multiple of {unit}"),
                );
            }
        }
    }

    /// A block every rank holds whole.
    pub(super) fn whole(set: &mut Set) {
        set.blocks.total += 1;
        set.blocks.complete += 1;
    }

    /// One block's outcome: complete, incomplete (`missing` ranks) or
    /// damaged (a file's problem); an incomplete or damaged block is listed
    /// as `listed(rank)` names it (key, group, path of that rank's file),
    /// by its first bad file, else by its first present one.
    pub(super) fn block(
        &mut self,
        set: &mut Set,
        b: BlockCheck,
        present: Vec<u32>,
        missing: Vec<u32>,
        listed: impl FnOnce(u32) -> (String, Option<u32>, String),
    ) {
        if missing.is_empty() && b.problems.is_empty() {
            Tallies::whole(set);
            return;
        }
        set.blocks.total += 1;
        let (key, group, path) = listed(b.first_bad.unwrap_or(present[0]));
        let problem = if missing.is_empty() {
            set.blocks.damaged += 1;
            b.problems.join("; ")
        } else {
            set.blocks.incomplete += 1;
            for r in &missing {
                *self.incomplete_ranks.entry(*r).or_default() += 1;
            }
            let mut problem = format!(
                "present on ranks {}, missing on {}",
                ranks_text(&present),
                ranks_text(&missing)
            );
            if !b.problems.is_empty() {
                problem.push_str("; ");
                problem.push_str(&b.problems.join("; "));
            }
            problem
        };
        set.list(ListedBlock {
            key,
            group,
            present_ranks: present,
            missing_ranks: missing,
            problem,
            path,
        });
    }

    /// The set's findings, in code order: KV303 (blocks missing on some
    /// rank), KV304 short, KV305 long, KV306 misaligned, KV307 ranks
    /// disagree, KV308 symlinks, KV309 special files, KV313 partial.
    pub(super) fn finish(self, set: &mut Set, w: &Wording) {
        if !self.incomplete_ranks.is_empty() {
            let per: Vec<String> = self
                .incomplete_ranks
                .iter()
                .map(|(r, n)| format!("rank {r}: {n}"))
                .collect();
            let first = set
                .listed
                .iter()
                .find(|b| !b.missing_ranks.is_empty())
                .cloned();
            let mut msg = format!(
                "{} of {} missing on some rank ({}){}",
                plural(set.blocks.incomplete, w.unit, &format!("{}s", w.unit)),
                set.blocks.total,
                per.join(", "),
                w.missing_tail
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
        let reject = Severity::Reject;
        self.short.finish(set, Code::KV304, reject, w.short);
        self.long.finish(set, Code::KV305, reject, w.long);
        self.misaligned.finish(
            set,
            Code::KV306,
            reject,
            "not a whole number of the producer's units",
        );
        self.disagree.finish(
            set,
            Code::KV307,
            reject,
            "whose ranks disagree on the block's size",
        );
        self.links.finish(
            set,
            Code::KV308,
            reject,
            &format!("symlinked where a {} file belongs, never followed", w.unit),
        );
        self.special.finish(
            set,
            Code::KV309,
            reject,
            &format!("special where a {} file belongs, never opened", w.unit),
        );
        self.partial
            .finish(set, Code::KV313, Severity::Notice, w.partial);
    }
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
    ambiguity_findings(set, &loose);
    set.staging.merge(loose.staging);
    set.foreign.merge(loose.foreign);
}

/// KV314: the loose names that parse more than one way, or name a served
/// model no --model names.
fn ambiguity_findings(set: &mut Set, loose: &Loose) {
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
