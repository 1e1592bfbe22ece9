//! The verdict core (docs/format.md §5): descriptors and facts in, verdicts out.
//!
//! Nothing here reads a file, a clock or /proc: the caller passes the time,
//! the profile and (in live mode) the node facts in. Each rule family lives in
//! its own file, so "where is KV104 decided?" has one answer
//! (`consistency.rs`).

pub(crate) mod across;
pub mod cause;
mod claims;
mod consistency;
pub mod explain;
pub mod facts;
pub(crate) mod fleet;
mod handles;
mod incarnation;
mod live;
pub mod own;
mod ranks;
mod staleness;

#[cfg(test)]
mod tests_mutants;

pub use crate::format::rankset::compress_ranks;
pub use incarnation::highest_epoch;
pub use staleness::FUTURE_SLACK_MS;

use crate::format::descriptor::{Descriptor, EngineId, Ident};
use crate::format::descriptor::{Geometry, Model};
use crate::format::finding::{Code, Finding};
use crate::format::profile::Profile;
use crate::format::rankset::RankSet;
use crate::rules::facts::NodeFacts;
use serde::Serialize;
use std::collections::BTreeMap;
use uuid::Uuid;

/// The prefix of a notice about a descriptor outside the current incarnation.
pub const NOT_COUNTED: &str = "(not counted: outside the current incarnation)";

/// One descriptor file after reading and parsing, before judging.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// Path relative to the resolved root (display form: for printing only).
    pub path: String,
    /// The same path's raw bytes: the descriptor's identity. Every decision
    /// that tells descriptors apart uses this (or the candidate's position),
    /// never `path`, whose escaping can make two paths print alike.
    pub raw_path: Vec<u8>,
    /// R of `rank-<R>.json`.
    pub name_rank: Option<u64>,
    /// st_mode of the file, for the live capability-exposure check; `None`
    /// when it is not known (that check is then not checked, never passed).
    pub mode: Option<u32>,
    pub ident: Ident,
    /// Present when the file parsed and is schema-valid. Held in place, not
    /// boxed: a box per descriptor made on the reading threads halved the
    /// copies of a candidate's moves but raised the audit's peak RSS by
    /// 3-4.5 MiB at 20,000 descriptors (measured; freed by the judging
    /// thread, the boxes' memory likely stays with the malloc arenas of the
    /// threads that made them), so [`judge_keeping`] moves a run of one
    /// group's candidates into its list with room made once for the run.
    pub descriptor: Option<Descriptor>,
    /// File-level findings already made (inventory and parsing), with paths.
    pub findings: Vec<Finding>,
}

impl Candidate {
    fn epoch(&self) -> Option<u64> {
        self.descriptor
            .as_ref()
            .map(|d| d.epoch)
            .or(self.ident.epoch)
    }
    fn incarnation(&self) -> Option<Uuid> {
        self.descriptor
            .as_ref()
            .map(|d| d.incarnation)
            .or(self.ident.incarnation)
    }
    fn engine_id(&self) -> Option<&EngineId> {
        self.descriptor
            .as_ref()
            .map(|d| &d.engine_id)
            .or(self.ident.engine_id.as_ref())
    }
}

/// What the operator expects, from the profile and the command line (flags
/// override profile fields).
#[derive(Clone, Debug, Default)]
pub struct Expectations {
    /// Limit the run to this group.
    pub engine: Option<EngineId>,
    /// The deployment profile; applies to the group with its `engine_id`.
    pub profile: Option<Profile>,
    /// `--min-epoch`, overriding the profile's `min_epoch` (all groups in scope).
    pub min_epoch: Option<u64>,
    /// `--max-age`, overriding the profile's `max_age_s` (all groups in scope).
    pub max_age_s: Option<u64>,
    /// `--local-ranks`, overriding the profile's `local_ranks`: the ranks this
    /// node holds of a group that spans nodes.
    pub local_ranks: Option<RankSet>,
    /// `--incarnation`, overriding the profile's `incarnation`: pins the
    /// current owner lifetime of the group that has it.
    pub incarnation: Option<Uuid>,
    /// `audit --strict`: in live mode a fact that could not be read rejects
    /// its rank instead of being listed as not checked.
    pub strict: bool,
}

/// "A flag beats the profile", worked out in one place: each option is the
/// flag when given, else the field of `profile` (the profile that applies to
/// the group at hand, or the run's for its options record).
impl Expectations {
    pub fn min_epoch(&self, profile: Option<&Profile>) -> Option<u64> {
        self.min_epoch.or(profile.and_then(|p| p.min_epoch))
    }

    pub fn max_age_s(&self, profile: Option<&Profile>) -> Option<u64> {
        self.max_age_s.or(profile.and_then(|p| p.max_age_s))
    }

    pub fn local_ranks(&self, profile: Option<&Profile>) -> Option<RankSet> {
        self.local_ranks
            .clone()
            .or_else(|| profile.and_then(|p| p.local_ranks.clone()))
    }

    /// The incarnation asked for. For a group, [`pinned`] also requires
    /// that one of its descriptors has the flag's incarnation.
    pub fn incarnation(&self, profile: Option<&Profile>) -> Option<Uuid> {
        self.incarnation.or(profile.and_then(|p| p.incarnation))
    }
}

/// Facts from outside the core.
#[derive(Clone, Debug)]
pub struct Context<'a> {
    pub now_unix_ms: u64,
    /// Live mode: the node's facts. `None` means not live.
    pub node: Option<&'a NodeFacts>,
    pub expect: &'a Expectations,
    /// How the run was invoked: what the action's suggested commands
    /// repeat ([`cause::fill`] finishes the verdict with it).
    pub invocation: &'a cause::Invocation,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Accept,
    Reject,
}

/// The state of one check on one rank, for `--verbose`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: CheckStatus,
}

/// How one check on one rank ended. Printed (and serialized) as "pass",
/// "fail", "not checked: *why*" or "skipped: *why*"; only the last two
/// carry text, so a passing check allocates nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckStatus {
    Pass,
    Fail,
    /// The fact could not be read (never a mismatch).
    NotChecked(String),
    /// Not made: another finding makes it moot.
    Skipped(String),
}

impl CheckStatus {
    /// The fact could not be read.
    pub fn is_not_checked(&self) -> bool {
        matches!(self, CheckStatus::NotChecked(_))
    }
}

impl std::fmt::Display for CheckStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckStatus::Pass => f.write_str("pass"),
            CheckStatus::Fail => f.write_str("fail"),
            CheckStatus::NotChecked(why) => write!(f, "not checked: {why}"),
            CheckStatus::Skipped(why) => write!(f, "skipped: {why}"),
        }
    }
}

impl Serialize for CheckStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[derive(Clone, Debug)]
pub struct RankVerdict {
    /// The rank slot (from the file name); `None` when the name's rank does
    /// not fit in 64 bits.
    pub rank: Option<u64>,
    pub path: String,
    /// Raw path bytes: the identity the import plan looks descriptors up by.
    pub raw_path: Vec<u8>,
    pub gpu_uuid: Option<String>,
    pub verdict: Verdict,
    pub findings: Vec<Finding>,
    /// Live facts that could not be read for this rank; never a mismatch.
    pub not_checked: Vec<String>,
    /// `kvcr merge` only: the per-node report this rank came from.
    pub report: Option<String>,
    pub incarnation: Option<Uuid>,
    pub epoch: Option<u64>,
    /// When the owner sealed the descriptor (its own claim).
    pub created_unix_ms: Option<u64>,
    /// `now - created_unix_ms` at the audit; `None` when dated in the future.
    pub age_ms: Option<u64>,
    pub owner_pid: Option<i32>,
    pub checks: Vec<Check>,
    /// The code the row names first among its rejecting findings: one no
    /// other of them explains ([`cause::fill`]); `None` when none rejects.
    pub cause_code: Option<Code>,
}

#[derive(Clone, Debug)]
pub struct GroupVerdict {
    pub engine_id: EngineId,
    pub incarnation: Option<Uuid>,
    pub epoch: Option<u64>,
    pub world_size: Option<u64>,
    /// tp, pp, model and geometry every rank was checked against (the
    /// profile's where it declares them, else the reference rank's), so
    /// per-node reports can be merged.
    pub tp: Option<u64>,
    pub pp: Option<u64>,
    pub model: Option<Model>,
    pub geometry: Option<Geometry>,
    /// The ranks this node was asked to hold (`--local-ranks`); `null` when
    /// the whole group is expected here.
    pub local_ranks: Option<RankSet>,
    pub verdict: Verdict,
    /// One line: why the group is (not) usable, written by [`cause::fill`]
    /// when the group is judged.
    pub cause: String,
    /// One safe next step (from [`cause::fill`] too).
    pub action: String,
    /// The code the headline names as the root cause; `None` when accepted.
    pub cause_code: Option<Code>,
    pub findings: Vec<Finding>,
    pub ranks: Vec<RankVerdict>,
    /// Ranks 0..world_size-1 with no current descriptor, as inclusive runs.
    pub missing: Vec<(u64, u64)>,
}

/// A file that could not be attributed to a group, with its findings.
#[derive(Clone, Debug)]
pub struct FileVerdict {
    pub path: String,
    pub findings: Vec<Finding>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub groups: usize,
    pub accepted: usize,
    pub rejected: usize,
    pub descriptors: usize,
    pub files_rejected: usize,
    pub notices: usize,
    /// Live facts that could not be read, over every rank (`not_checked`).
    pub not_checked: usize,
}

/// Everything the printers need.
#[derive(Clone, Debug)]
pub struct Judgement {
    pub groups: Vec<GroupVerdict>,
    pub files: Vec<FileVerdict>,
    pub summary: Summary,
    /// One line: why the run exits with its status (the report's top-level
    /// `cause`). Written by [`cause::fill`] with the groups' causes.
    pub cause: String,
}

impl Judgement {
    /// Assembles a judgement and its summary counts.
    pub fn new(
        groups: Vec<GroupVerdict>,
        files: Vec<FileVerdict>,
        descriptors: usize,
    ) -> Judgement {
        let rejects = |f: &FileVerdict| f.findings.iter().any(Finding::is_reject);
        let summary = Summary {
            groups: groups.len(),
            accepted: groups
                .iter()
                .filter(|g| g.verdict == Verdict::Accept)
                .count(),
            rejected: groups
                .iter()
                .filter(|g| g.verdict == Verdict::Reject)
                .count(),
            descriptors,
            files_rejected: files.iter().filter(|f| rejects(f)).count(),
            notices: files
                .iter()
                .flat_map(|f| &f.findings)
                .chain(groups.iter().flat_map(|g| &g.findings))
                .filter(|f| !f.is_reject())
                .count(),
            not_checked: groups
                .iter()
                .flat_map(|g| &g.ranks)
                .map(|r| r.not_checked.len())
                .sum(),
        };
        Judgement {
            groups,
            files,
            summary,
            cause: String::new(),
        }
    }

    /// No group and no rejecting file: nothing is retained here. A healthy
    /// node whose engine keeps nothing looks like this (docs/format.md §6).
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
            && !self
                .files
                .iter()
                .any(|f| f.findings.iter().any(Finding::is_reject))
    }

    /// docs/format.md §6: 0 when every group in scope is accepted and no
    /// rejecting file-level finding exists, an empty inventory included
    /// (nothing retained is not a rejection; `import` still has nothing to
    /// import, exit 1).
    pub fn exit_status(&self) -> i32 {
        let any_group_rejected = self.groups.iter().any(|g| g.verdict == Verdict::Reject);
        let files_reject = self
            .files
            .iter()
            .any(|f| f.findings.iter().any(Finding::is_reject));
        if any_group_rejected || files_reject {
            crate::format::exit::REJECTED
        } else {
            crate::format::exit::OK
        }
    }
}

/// Parsed descriptors by raw path bytes: what [`judge_keeping`] hands back.
pub type Kept = BTreeMap<Vec<u8>, Descriptor>;

/// Judges every group. `files` are entries that never were descriptors
/// (symlinks, torn, stray, unreadable...), already carrying their findings.
pub fn judge(candidates: Vec<Candidate>, files: Vec<FileVerdict>, ctx: &Context) -> Judgement {
    judge_keeping(candidates, files, ctx, None)
}

/// [`judge`], moving every parsed descriptor it judged into `kept` (by raw
/// path bytes) once its verdict is made, instead of dropping it: `kvcr
/// import` and the readiness gate plan from these very descriptors, and a
/// copy of each made before the judgement would cost a clone per rank.
pub fn judge_keeping(
    candidates: Vec<Candidate>,
    files: Vec<FileVerdict>,
    ctx: &Context,
    mut kept: Option<&mut Kept>,
) -> Judgement {
    let mut files = files;
    let mut by_engine: BTreeMap<EngineId, Vec<Candidate>> = BTreeMap::new();
    let mut unattributed = Vec::new();
    // Taken from the back, releasing the list's memory as it goes (in
    // geometric steps, so it stays linear even where shrinking copies), so
    // a large inventory never holds every candidate twice; each group (and
    // the unattributed files) is put back in walk order below.
    let mut candidates = candidates;
    while let Some(c) = candidates.pop() {
        let spare = candidates.capacity() - candidates.len();
        if spare >= 4096 && spare >= candidates.len() / 8 {
            candidates.shrink_to_fit();
        }
        match c.engine_id() {
            // Every group is kept until the rules across groups have run:
            // `--engine` must not hide another group's claim on a handle.
            Some(e) => {
                // A group's files are usually found one after another: the
                // candidates of one run (up to RUN) go to their group
                // together, with one lookup and one clone of the engine id,
                // and room made once for the run, not regrown one push at a
                // time. A larger group grows by doubling as before, while
                // the list above shrinks.
                const RUN: usize = 64;
                let run = candidates
                    .iter()
                    .rev()
                    .take(RUN - 1)
                    .take_while(|o| o.engine_id() == Some(e))
                    .count();
                let list = by_engine.entry(e.clone()).or_default();
                list.reserve(run + 1);
                list.push(c);
                list.extend(std::iter::from_fn(|| candidates.pop()).take(run));
            }
            None => unattributed.push(FileVerdict {
                path: c.path.clone(),
                findings: if c.findings.is_empty() {
                    // Unreachable in practice: an unattributable descriptor has a finding.
                    vec![Finding::reject(Code::KV007, "engine_id could not be read").at(&c.path)]
                } else {
                    c.findings
                },
            }),
        }
    }
    // Its spare capacity is freed now, before the rules across groups.
    drop(candidates);
    by_engine.values_mut().for_each(|g| g.reverse());
    files.extend(unattributed.into_iter().rev());
    // A profile (or --engine) names a group that must exist.
    let wanted = ctx
        .expect
        .engine
        .clone()
        .or_else(|| ctx.expect.profile.as_ref().map(|p| p.engine_id.clone()));
    if let Some(w) = wanted {
        by_engine.entry(w).or_default();
    }
    // Unattributed files named rank-N.json may be the missing ranks: name them.
    let mut hints: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for f in &files {
        let name = f.path.rsplit('/').next().unwrap_or(&f.path);
        if let Some(Some(rank)) = crate::format::names::parse_rank_name(std::ffi::OsStr::new(name))
        {
            let codes: Vec<&str> = f
                .findings
                .iter()
                .filter(|x| x.is_reject())
                .map(|x| x.code.as_str())
                .collect();
            if !codes.is_empty() {
                hints
                    .entry(rank)
                    .or_default()
                    .push(format!("{} ({})", f.path, codes.join(", ")));
            }
        }
    }
    // In path order, whatever order the files were found in.
    hints.values_mut().for_each(|h| h.sort());
    // Rules across groups (one handle, one group; one node per inventory).
    let mut across = across::check(&mut by_engine, ctx);
    if let Some(want) = ctx.expect.engine.as_ref() {
        by_engine.retain(|e, cands| {
            if e != want {
                keep(kept.as_deref_mut(), cands.drain(..));
            }
            e == want
        });
    }
    let descriptors: usize = by_engine.values().map(Vec::len).sum();
    let mut groups: Vec<GroupVerdict> = by_engine
        .into_iter()
        .map(|(engine, cands)| {
            let extra = across.remove(&engine).unwrap_or_default();
            judge_group(engine, cands, ctx, &hints, extra, kept.as_deref_mut())
        })
        .collect();
    groups.sort_by(|a, b| a.engine_id.cmp(&b.engine_id));
    files.sort_by(|a, b| a.path.cmp(&b.path));
    // A file no group can claim may be any group's (a torn `.rank-3.json…
    // .tmp`, a symlinked `rank-3.json`): it rejects every group in scope,
    // so the verdict, the exit status and the import agree (§5.6). The
    // headline names the file.
    if files
        .iter()
        .any(|f| f.findings.iter().any(Finding::is_reject))
    {
        for g in &mut groups {
            g.verdict = Verdict::Reject;
        }
    }

    let mut j = Judgement::new(groups, files, descriptors);
    cause::fill(&mut j, ctx.invocation);
    j
}

/// How many checks a parsed row records: rank, geometry, model, one-node,
/// gpu-uuid, handles, staleness; in live mode also hostname, writer,
/// gpu-present, owner and handle-exposure. Only the room each row's list
/// is given at first (a wrong count costs a reallocation, never a verdict).
pub(crate) const ROW_CHECKS: usize = 7;
pub(crate) const LIVE_CHECKS: usize = 5;

/// Rank rows under construction.
pub(crate) struct Row {
    pub cand: Candidate,
    pub slot: Option<u64>,
    pub findings: Vec<Finding>,
    pub not_checked: Vec<String>,
    pub checks: Vec<Check>,
}

impl Row {
    pub fn desc(&self) -> Option<&Descriptor> {
        self.cand.descriptor.as_ref()
    }
    /// Runs `f` with the row's descriptor lent out of the row, so the rules
    /// can add findings to the row while they read it, without a clone per
    /// row; `None` (and `f` not run) when the row has no descriptor. Inside
    /// `f`, `row.desc()` is `None`: read the descriptor through `d`.
    pub fn with_desc<R>(&mut self, f: impl FnOnce(&mut Row, &Descriptor) -> R) -> Option<R> {
        let d = self.cand.descriptor.take()?;
        let r = f(self, &d);
        self.cand.descriptor = Some(d);
        Some(r)
    }
    pub fn path(&self) -> &str {
        &self.cand.path
    }
    /// The identity of the row's file (raw path bytes).
    pub fn raw_path(&self) -> &[u8] {
        &self.cand.raw_path
    }
    pub fn reject(&mut self, f: Finding) {
        let f = if f.path.is_none() {
            f.at(self.cand.path.clone())
        } else {
            f
        };
        self.findings.push(f);
    }
    pub fn check(&mut self, name: &'static str, ok: bool) {
        self.checks.push(Check {
            name,
            status: if ok {
                CheckStatus::Pass
            } else {
                CheckStatus::Fail
            },
        });
    }
    pub fn not_checked(&mut self, name: &'static str, why: &str) {
        self.not_checked.push(format!("{name}: {why}"));
        self.checks.push(Check {
            name,
            status: CheckStatus::NotChecked(why.to_owned()),
        });
    }
    pub fn is_clean(&self) -> bool {
        self.desc().is_some() && !self.findings.iter().any(Finding::is_reject)
    }
}

/// The incarnation pinned for a group: `--incarnation` when one of the
/// group's descriptors has it, else the profile's.
pub(crate) fn pinned(
    cands: &[Candidate],
    ctx: &Context,
    profile: Option<&Profile>,
) -> Option<Uuid> {
    ctx.expect
        .incarnation
        .filter(|u| cands.iter().any(|c| c.incarnation() == Some(*u)))
        .or(profile.and_then(|p| p.incarnation))
}

fn judge_group(
    engine: EngineId,
    cands: Vec<Candidate>,
    ctx: &Context,
    hints: &BTreeMap<u64, Vec<String>>,
    inventory_findings: Vec<Finding>,
    mut kept: Option<&mut Kept>,
) -> GroupVerdict {
    let profile = ctx
        .expect
        .profile
        .as_ref()
        .filter(|p| p.engine_id == engine);
    let mut group_findings = inventory_findings;

    // 1. Which incarnation is current; the rest become notices.
    let inc = incarnation::select(&cands, pinned(&cands, ctx, profile), &mut group_findings);
    // Usually every candidate is current: the list is then kept as it is,
    // not copied into a new one.
    let (current, others): (Vec<Candidate>, Vec<Candidate>) =
        if cands.iter().all(|c| inc.is_current(c)) {
            (cands, Vec::new())
        } else {
            cands.into_iter().partition(|c| inc.is_current(c))
        };

    let mut rows: Vec<Row> = current
        .into_iter()
        .map(|c| Row {
            slot: c.name_rank.or(c.ident.rank),
            findings: c.findings.clone(),
            cand: c,
            not_checked: Vec::new(),
            checks: Vec::with_capacity(ROW_CHECKS + ctx.node.map_or(0, |_| LIVE_CHECKS)),
        })
        .collect();

    // 2. Per-descriptor rank rules (KV101), then pick the reference rank.
    ranks::own_rank_rules(&mut rows);
    let reference = consistency::reference(&rows);
    let world_size = profile
        .and_then(|p| p.world_size)
        .or(reference.as_ref().map(|r| r.world_size));

    // 3. Rule families.
    for row in &mut rows {
        if let Some(f) = inc.tie_finding(&row.cand) {
            row.reject(f);
        }
    }
    consistency::check(&mut rows, reference.as_ref(), profile);
    handles::check(&mut rows);
    staleness::check(&mut rows, profile, ctx);
    if let Some(node) = ctx.node {
        live::check(&mut rows, node);
        if ctx.expect.strict {
            rows.iter_mut().for_each(live::strict);
        }
    }
    // The flag wins over the profile's list.
    let local = ctx
        .expect
        .local_ranks(profile)
        // Local ranks that are exactly 0..world_size-1 are the whole group:
        // nothing is expected elsewhere, and no fleet proof is needed.
        .filter(|l| match world_size {
            Some(ws) => l.len() as u64 != ws || l.iter().any(|r| r >= ws),
            None => true,
        });
    let missing = ranks::slots(
        &mut rows,
        world_size,
        local.as_ref(),
        hints,
        &mut group_findings,
    );
    let expected_count = match (world_size, &local) {
        (Some(ws), Some(l)) => l.iter().filter(|&r| r < ws).count() as u64,
        (Some(ws), None) => ws,
        _ => 0,
    };

    // 4. Verdicts.
    let mut ranks_out: Vec<RankVerdict> = rows
        .into_iter()
        .map(|r| rank_verdict(r, ctx.now_unix_ms, kept.as_deref_mut()))
        .collect();
    // Unknown ranks (None) sort first; ties by raw path bytes.
    ranks_out.sort_by(|a, b| a.rank.cmp(&b.rank).then(a.raw_path.cmp(&b.raw_path)));
    if world_size.is_none() {
        // Every reason is listed: say why no rank could be expected.
        group_findings.push(
            Finding::reject(
                Code::KV103,
                if ranks_out.is_empty() {
                    "no descriptor of this group was found".to_string()
                } else {
                    "no descriptor of the current incarnation could be parsed, so the group's \
                     world size is unknown"
                        .to_string()
                },
            )
            .values("a parsed descriptor for every rank", "world size unknown"),
        );
    }
    group_findings.extend(inc.notices);
    // Descriptors outside the current incarnation never reject the group,
    // but what is wrong with them is still listed, as notices.
    group_findings.extend(not_counted(others, kept));

    let accepted = world_size.is_some()
        && missing.is_empty()
        && ranks_out.iter().all(|r| r.verdict == Verdict::Accept)
        && !group_findings.iter().any(Finding::is_reject)
        && ranks_out.len() as u64 == expected_count;
    let verdict = if accepted {
        Verdict::Accept
    } else {
        Verdict::Reject
    };
    let declared = |f: fn(&Profile) -> Option<u64>| profile.and_then(f);
    GroupVerdict {
        engine_id: engine,
        incarnation: inc.current,
        epoch: inc.epoch,
        world_size,
        tp: declared(|p| p.tp).or(reference.as_ref().map(|r| r.tp)),
        pp: declared(|p| p.pp).or(reference.as_ref().map(|r| r.pp)),
        model: profile
            .and_then(|p| p.model.clone())
            .or(reference.as_ref().map(|r| r.model.clone())),
        geometry: profile
            .and_then(|p| p.geometry.clone())
            .or(reference.as_ref().map(|r| r.geometry.clone())),
        local_ranks: local,
        verdict,
        cause: String::new(),
        action: String::new(),
        cause_code: None,
        findings: group_findings,
        ranks: ranks_out,
        missing,
    }
}

/// A rank's verdict from its row: rejected when any of its findings
/// rejects; its age against `now_unix_ms`. The row's descriptor goes to
/// `kept` when given.
fn rank_verdict(r: Row, now_unix_ms: u64, kept: Option<&mut Kept>) -> RankVerdict {
    let d = r.cand.descriptor.as_ref();
    let (incarnation, epoch) = (r.cand.incarnation(), r.cand.epoch());
    let gpu_uuid = d.map(|d| d.gpu_uuid.to_string());
    let created_unix_ms = d.map(|d| d.created_unix_ms);
    let owner_pid = d.map(|d| d.owner.pid);
    let raw_path = match (kept, r.cand.descriptor) {
        (Some(k), Some(d)) => {
            k.insert(r.cand.raw_path.clone(), d);
            r.cand.raw_path
        }
        _ => r.cand.raw_path,
    };
    RankVerdict {
        rank: r.slot,
        path: r.cand.path,
        raw_path,
        gpu_uuid,
        verdict: if r.findings.iter().any(Finding::is_reject) {
            Verdict::Reject
        } else {
            Verdict::Accept
        },
        incarnation,
        epoch,
        created_unix_ms,
        age_ms: created_unix_ms.and_then(|c| now_unix_ms.checked_sub(c)),
        owner_pid,
        findings: r.findings,
        not_checked: r.not_checked,
        report: None,
        checks: r.checks,
        cause_code: None,
    }
}

/// Moves the parsed descriptors of `cands` into `kept`, when given.
fn keep(kept: Option<&mut Kept>, cands: impl Iterator<Item = Candidate>) {
    if let Some(k) = kept {
        for c in cands {
            if let Some(d) = c.descriptor {
                k.insert(c.raw_path, d);
            }
        }
    }
}

/// What is wrong with the descriptors outside the current incarnation, as
/// notices that never reject the group, in path and code order; their
/// descriptors go to `kept` when given.
fn not_counted(others: Vec<Candidate>, mut kept: Option<&mut Kept>) -> Vec<Finding> {
    let mut stale: Vec<Finding> = others
        .into_iter()
        .flat_map(|mut c| {
            if let (Some(k), Some(d)) = (kept.as_deref_mut(), c.descriptor.take()) {
                k.insert(c.raw_path, d);
            }
            c.findings
        })
        .map(|mut f| {
            f.severity = crate::format::finding::Severity::Notice;
            f.message.prepend(&format!("{NOT_COUNTED} "));
            f.counted = false;
            f
        })
        .collect();
    stale.sort_by(|a, b| a.path.cmp(&b.path).then(a.code.cmp(&b.code)));
    stale
}

#[cfg(test)]
mod tests_check_status;
#[cfg(test)]
mod tests_code_table;
#[cfg(test)]
mod tests_flag_beats_profile;
#[cfg(test)]
mod tests_props;
#[cfg(test)]
mod tests_typed_messages;
