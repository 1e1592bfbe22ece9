//! The verdict's cause and action: the one line an operator reads, chosen
//! by the core when it judges (the printers only print it).
//!
//! A rejected group usually carries several findings, and most follow from
//! one of them: a duplicated file also clashes on its GPU and its handles, a
//! malformed file leaves its rank missing, an incarnation tie makes every
//! rank look duplicated. [`explains`] writes those causal edges down; the
//! headline names a finding that no other finding of the group explains
//! (first in [`ROOT_ORDER`]), and its action is that finding's safe step,
//! with the real root path and flags in every command it suggests.

use crate::format::finding::{Code, Finding, Subject};
use crate::format::message::render;
use crate::format::names::parse_rank_name;
use crate::rules::{compress_ranks, FileVerdict, GroupVerdict, Judgement, Verdict};
use std::ffi::OsStr;

/// How the run was invoked: what a suggested command must repeat.
#[derive(Clone, Debug, Default)]
pub struct Invocation {
    /// The resolved inventory root; `None` for `kvcr merge`.
    pub root: Option<String>,
    pub live: bool,
    /// Flags to repeat after `--engine ID`, already split into words
    /// (`--profile`, `p.json`, `--max-age`, `3600`...).
    pub flags: Vec<String>,
    /// `kvcr merge`: each input report's name, host and root, in argument order.
    pub merged: Option<Vec<MergeInput>>,
}

#[derive(Clone, Debug, Default)]
pub struct MergeInput {
    pub report: String,
    pub host: Option<String>,
    pub root: Option<String>,
    /// Written by `kvcr audit --live`, with the node's boot id: what the
    /// import gate needs of every input (docs/format.md §8.9).
    pub live: bool,
}

/// `a` explains `b`: when both are among a group's findings, `b` is a
/// consequence and never the headline.
pub fn explains(a: Code, b: Code) -> bool {
    use Code::*;
    match a {
        // Two owner lifetimes counted at once: every rank looks duplicated,
        // and each pair shares its GPU and handles.
        KV107 => matches!(b, KV101 | KV102 | KV103 | KV106 | KV111),
        // A descriptor edited after sealing: its incarnation or epoch is no
        // longer the owner's, so a tie or an epoch disagreement follows.
        KV008 => b == KV107,
        // A file that is no usable descriptor leaves its rank missing.
        KV001 | KV002 | KV004 | KV005 | KV006 | KV007 | KV009 => b == KV103,
        // A descriptor in the wrong slot collides with the rank it names and
        // leaves its own slot empty.
        KV101 => matches!(b, KV102 | KV103 | KV106 | KV111),
        // A second copy of a rank claims the same GPU and the same handles.
        KV102 => matches!(b, KV106 | KV111),
        // Another node's descriptor: its GPU and handles mean nothing here.
        KV110 => matches!(b, KV106 | KV111),
        // (live) A reboot or a dead owner: the memory and its GPUs are gone.
        KV108 => matches!(b, KV106 | KV109),
        _ => false,
    }
}

/// Among findings that nothing else explains, the one named first: the
/// likeliest root cause, and the one whose action is safe to take first.
/// Derived from each code's `root_rank` in [`crate::format::finding::TABLE`];
/// compiling it checks that the ranks are a permutation of all codes.
pub const ROOT_ORDER: [Code; Code::ALL.len()] = {
    let table = &crate::format::finding::TABLE;
    let mut order = [Code::KV001; Code::ALL.len()];
    let mut placed = [false; Code::ALL.len()];
    let mut i = 0;
    while i < table.len() {
        let r = table[i].root_rank as usize;
        assert!(r < order.len(), "root_rank out of range");
        assert!(!placed[r], "two codes share a root_rank");
        placed[r] = true;
        order[r] = table[i].code;
        i += 1;
    }
    order
};

// The order is built at compile time, and building it fails unless the
// table's root ranks are a permutation of all codes: this names it so that
// every build, not only the tests' (src/rules/tests_code_table.rs), checks.
const _: [Code; Code::ALL.len()] = ROOT_ORDER;

/// One rejecting finding the headline may name, and where it is.
struct Candidate<'a> {
    finding: &'a Finding,
    /// The rank row it sits on; `None` for a group-level finding.
    rank: Option<u64>,
    /// A file-level finding on an unusable `rank-N.json` of a missing rank.
    file: Option<&'a str>,
}

/// The rank a file-level finding's file was meant to be: `rank-N.json`, or a
/// staging leftover `.rank-N.json[.XXXX].tmp`.
fn intended_rank(path: &str) -> Option<u64> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let name = match name.strip_prefix('.').filter(|n| n.ends_with(".tmp")) {
        Some(n) => n.find(".json").map_or(n, |i| &n[..i + 5]),
        None => name,
    };
    parse_rank_name(OsStr::new(name)).flatten()
}

fn candidates<'a>(g: &'a GroupVerdict, files: &'a [FileVerdict]) -> Vec<Candidate<'a>> {
    let mut out: Vec<Candidate> = g
        .findings
        .iter()
        .filter(|f| f.is_reject())
        .map(|f| Candidate {
            finding: f,
            rank: None,
            file: None,
        })
        .collect();
    for r in &g.ranks {
        out.extend(
            r.findings
                .iter()
                .filter(|f| f.is_reject())
                .map(|f| Candidate {
                    finding: f,
                    rank: r.rank,
                    file: None,
                }),
        );
    }
    for f in files {
        let Some(rank) = intended_rank(&f.path) else {
            continue;
        };
        if !missing_rank(g, rank) {
            continue;
        }
        out.extend(
            f.findings
                .iter()
                .filter(|x| x.is_reject())
                .map(|x| Candidate {
                    finding: x,
                    rank: Some(rank),
                    file: Some(f.path.as_str()),
                }),
        );
    }
    out
}

fn missing_rank(g: &GroupVerdict, rank: u64) -> bool {
    g.missing.iter().any(|&(a, b)| a <= rank && rank <= b)
}

/// Rejecting file-level findings no group claims (not the unusable file of
/// one of this group's missing ranks): each may be this group's, so each
/// rejects it (docs/format.md §5.6), after the group's own causes.
fn unclaimed<'a>(g: &GroupVerdict, files: &'a [FileVerdict]) -> Vec<Candidate<'a>> {
    files
        .iter()
        .filter(|f| !intended_rank(&f.path).is_some_and(|r| missing_rank(g, r)))
        .flat_map(|f| {
            f.findings
                .iter()
                .filter(|x| x.is_reject())
                .map(move |x| Candidate {
                    finding: x,
                    rank: None,
                    file: Some(f.path.as_str()),
                })
        })
        .collect()
}

fn order(c: Code) -> usize {
    c.spec().root_rank as usize
}

/// The headline finding, and the other codes it explains (sorted, unique).
fn pick<'a, 'b>(cands: &'b [Candidate<'a>]) -> Option<(&'b Candidate<'a>, Vec<Code>)> {
    let present: Vec<Code> = cands.iter().map(|c| c.finding.code).collect();
    let root = cands
        .iter()
        .filter(|c| {
            !present
                .iter()
                .any(|&p| p != c.finding.code && explains(p, c.finding.code))
        })
        // Group-level first, then file-level causes, then by rank.
        .min_by_key(|c| {
            (
                order(c.finding.code),
                c.rank.is_some() as u8 + c.file.is_none() as u8,
                c.rank,
            )
        })?;
    let mut explained: Vec<Code> = present
        .into_iter()
        .filter(|&p| explains(root.finding.code, p))
        .collect();
    explained.sort();
    explained.dedup();
    Some((root, explained))
}

/// Finishes a judgement: writes every group's cause, action and cause
/// code, every rank row's cause code, and the run's cause. The judge
/// ([`crate::rules::judge`], [`crate::rules::fleet::merge`]) calls it last;
/// printers only read what it wrote.
pub fn fill(j: &mut Judgement, inv: &Invocation) {
    let files = std::mem::take(&mut j.files);
    for g in &mut j.groups {
        let (code, cause, action) = headline(g, &files, inv);
        g.cause_code = code;
        g.cause = cause;
        g.action = action;
        for r in &mut g.ranks {
            let rejects: Vec<&Finding> = r.findings.iter().filter(|f| f.is_reject()).collect();
            r.cause_code = row_cause(&rejects).map(|f| f.code);
        }
    }
    j.files = files;
    j.cause = run_cause(j);
}

/// The prefix of the run's cause for an empty inventory: a monitor can
/// match it (docs/format.md §6).
pub const EMPTY: &str = "empty";

/// Why the run exits with its status, in one line: the report's top-level
/// `cause` (docs/format.md §9.2). It starts with a stable word: `empty`,
/// `accepted`, `rejected`.
pub fn run_cause(j: &Judgement) -> String {
    let bad_files: Vec<&FileVerdict> = j
        .files
        .iter()
        .filter(|f| f.findings.iter().any(|x| x.is_reject()))
        .collect();
    if j.is_empty() {
        return format!(
            "{EMPTY}: no descriptor and no rejecting file in the inventory; nothing is retained \
             here, so there is nothing to import"
        );
    }
    let rejected: Vec<&GroupVerdict> = j
        .groups
        .iter()
        .filter(|g| g.verdict == Verdict::Reject)
        .collect();
    if let Some(g) = rejected.first() {
        return if j.groups.len() == 1 {
            format!("rejected: group {}: {}", g.engine_id, g.cause)
        } else {
            format!(
                "rejected: {} of {} groups rejected; first {}: {}",
                rejected.len(),
                j.groups.len(),
                g.engine_id,
                g.cause
            )
        };
    }
    if let Some(f) = bad_files.first() {
        let x = f.findings.iter().find(|x| x.is_reject());
        return format!(
            "rejected: no descriptor any group could claim; {}: {}{}",
            f.path,
            x.map(|x| format!("{} ({})", render(&x.message), x.code))
                .unwrap_or_default(),
            if bad_files.len() > 1 {
                format!("; and {} more rejecting files", bad_files.len() - 1)
            } else {
                String::new()
            }
        );
    }
    format!(
        "accepted: {} accepted",
        if j.groups.len() == 1 {
            "the one group".to_string()
        } else {
            format!("all {} groups", j.groups.len())
        }
    )
}

/// A word for a POSIX shell: as is when it is plainly safe, else in single
/// quotes. (The printer escapes control characters for the terminal.)
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_./:@%+=,-".contains(&b));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

fn command(verb: &str, live: bool, root: &str, engine: &str, flags: &[String]) -> String {
    let mut words = vec!["kvcr".to_string(), verb.to_string()];
    if live {
        words.push("--live".into());
    }
    words.push(shell_quote(root));
    words.push("--engine".into());
    words.push(shell_quote(engine));
    words.extend(flags.iter().map(|f| shell_quote(f)));
    words.join(" ")
}

/// `kvcr import …` as an operator can run it: import requires the group's
/// declared deployment profile (docs/format.md §8.9), so a run without one
/// names where it goes; `extra` adds flags such as --local-ranks.
fn import_command(root: &str, engine: &str, flags: &[String], extra: &[String]) -> String {
    let mut all: Vec<String> = flags.to_vec();
    all.extend(extra.iter().cloned());
    let mut c = command("import", false, root, engine, &all);
    if !flags.iter().any(|f| f == "--profile") {
        c.push_str(" --profile PROFILE.json");
    }
    c
}

/// What to say after a suggested import without a profile.
fn profile_note(flags: &[String]) -> &'static str {
    if flags.iter().any(|f| f == "--profile") {
        ""
    } else {
        " (PROFILE.json: the group's declared deployment profile, which import requires; `kvcr \
         schema profile`)"
    }
}

fn not_checked(g: &GroupVerdict) -> usize {
    g.ranks.iter().map(|r| r.not_checked.len()).sum()
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn headline(
    g: &GroupVerdict,
    files: &[FileVerdict],
    inv: &Invocation,
) -> (Option<Code>, String, String) {
    if g.verdict == Verdict::Accept {
        let (cause, action) = accepted(g, inv);
        return (None, cause, action);
    }
    let own = candidates(g, files);
    let others = unclaimed(g, files);
    let unclaimed_files = |skip: Option<&str>| {
        let mut paths: Vec<&str> = others
            .iter()
            .filter_map(|c| c.file)
            .filter(|&p| Some(p) != skip)
            .collect();
        paths.dedup();
        paths.len()
    };
    let (cands, from_files) = if own.is_empty() {
        (others.as_slice(), true)
    } else {
        (own.as_slice(), false)
    };
    let Some((root, explained)) = pick(cands) else {
        return (
            None,
            "no usable descriptor in the current incarnation".to_string(),
            "start the engine with an empty cache".to_string(),
        );
    };
    let f = root.finding;
    let mut cause = match (root.rank, root.file) {
        (Some(r), Some(path)) => format!(
            "rank {r} has no usable descriptor: {path}: {} ({})",
            render(&f.message),
            f.code
        ),
        // The full path is in the files list; a long one would not wrap.
        (None, Some(path)) => match path.rsplit_once('/') {
            None => format!(
                "{path}: {} ({}); no group claims the file, so it may be this group's",
                render(&f.message),
                f.code
            ),
            Some((_, name)) => format!(
                "…/{name}: {} ({}); no group claims the file (its path is in the files list), so \
                 it may be this group's",
                render(&f.message),
                f.code
            ),
        },
        (Some(r), None) => match f.path.as_deref() {
            Some(p) => format!("rank {r} ({p}): {} ({})", render(&f.message), f.code),
            None => format!("rank {r}: {} ({})", render(&f.message), f.code),
        },
        _ => format!("{} ({})", render(&f.message), f.code),
    };
    if !explained.is_empty() {
        let list: Vec<&str> = explained.iter().map(|c| c.as_str()).collect();
        cause.push_str(&format!("; this also explains {}", list.join(", ")));
    }
    if let Some(tally) = rejected_in_all(g) {
        cause.push_str(&format!("; {tally}"));
    }
    // Every file that rejects the run is named or counted in the cause.
    let more = unclaimed_files(if from_files { root.file } else { None });
    if more > 0 {
        cause.push_str(&format!(
            "; and {} (see files)",
            plural(
                more,
                "rejecting file no group claims",
                "rejecting files no group claims"
            )
        ));
    }
    let action = match partial_view(g, &own, inv) {
        Some(a) => a,
        None => format!("{}; see `kvcr explain {}`", action_for(f, g, inv), f.code),
    };
    (Some(f.code), cause, action)
}

/// A partial multi-node view: the only thing wrong is one contiguous block
/// of missing ranks at either end, every present rank passes, the present
/// ranks are contiguous too and the missing count is a multiple of them
/// (nodes hold equal shares), no `--local-ranks` was given and no file
/// claims a missing rank. The other ranks likely live on other nodes: audit
/// this node's part and merge, rather than discard the cache.
fn partial_view(g: &GroupVerdict, own: &[Candidate], inv: &Invocation) -> Option<String> {
    if g.local_ranks.is_some() || inv.merged.is_some() || g.missing.len() != 1 {
        return None;
    }
    if own
        .iter()
        .any(|c| c.finding.code != Code::KV103 || c.file.is_some())
    {
        return None;
    }
    // Not even a notice: descriptors of another lifetime (a superseded
    // incarnation) say the missing ranks were here once.
    if g.findings.iter().any(|f| f.code != Code::KV103) {
        return None;
    }
    let present: Vec<u64> = g.ranks.iter().filter_map(|r| r.rank).collect();
    if present.is_empty() || g.ranks.iter().any(|r| r.verdict != Verdict::Accept) {
        return None;
    }
    let ws = g.world_size?;
    let (a, b) = g.missing[0];
    let missing = b - a + 1;
    let here = present.len() as u64;
    if !(a == 0 || b + 1 == ws) || missing % here != 0 {
        return None;
    }
    let local = compress_ranks(&present);
    let root = inv.root.as_deref().unwrap_or(".");
    let flags = [
        inv.flags.clone(),
        vec!["--local-ranks".to_string(), local.clone()],
    ]
    .concat();
    let audit = command("audit", true, root, &g.engine_id, &flags);
    Some(format!(
        "if {} on other nodes, this is one node's part of the group ({} of {ws} ranks here): write \
         this node's report ({audit} --format json > \"$(hostname).json\"), do the same on every \
         node, and judge the whole group with kvcr merge over every node's report; if they were \
         never elsewhere, start the engine with an empty cache; see `kvcr explain KV103`",
        if a == b {
            format!("rank {a} lives")
        } else {
            format!("ranks {a}-{b} live")
        },
        present.len()
    ))
}

/// How much of the group is rejected, when more than one row is: ranks
/// counted as ranks (distinct rank numbers), and descriptors named as
/// descriptors where a rank has more than one (two incarnations that tie,
/// a copy of a rank, one rank reported by two nodes), so a 2-rank group
/// never reads "4 ranks rejected".
fn rejected_in_all(g: &GroupVerdict) -> Option<String> {
    let rows: Vec<Option<u64>> = g
        .ranks
        .iter()
        .filter(|r| r.verdict == Verdict::Reject)
        .map(|r| r.rank)
        .collect();
    if rows.len() < 2 {
        return None;
    }
    let mut ranks: Vec<u64> = rows.iter().flatten().copied().collect();
    ranks.sort_unstable();
    ranks.dedup();
    Some(if ranks.len() == rows.len() {
        format!("{} ranks rejected in all", ranks.len())
    } else if rows.iter().any(Option::is_none) {
        // A descriptor whose rank has no number: only descriptors count.
        format!("{} descriptors rejected in all", rows.len())
    } else {
        format!(
            "{} descriptors of {} rejected in all",
            rows.len(),
            plural(ranks.len(), "rank", "ranks")
        )
    })
}

/// The safe step for the headline finding: the code's own, unless the
/// finding came from the command line or from `kvcr merge`.
fn action_for(f: &Finding, g: &GroupVerdict, inv: &Invocation) -> String {
    let present: Vec<u64> = g.ranks.iter().filter_map(|r| r.rank).collect();
    match f.code {
        // The operator's --local-ranks (or the profile's) names ranks the
        // group does not have: nothing in the files is wrong.
        Code::KV101 if f.subject == Subject::Request => format!(
            "name only ranks below world_size {} in --local-ranks (or the profile's local_ranks); \
             this inventory holds ranks {}",
            g.world_size
                .map_or_else(|| "(not known)".to_string(), |ws| ws.to_string()),
            if present.is_empty() {
                "none".to_string()
            } else {
                compress_ranks(&present)
            }
        ),
        // A node's report written without --local-ranks rejects the group
        // for the ranks other nodes hold: the inputs are wrong.
        Code::KV103 if f.subject == Subject::MergeInputs && inv.merged.is_some() => {
            audit_with_local_ranks(g, inv)
        }
        // A file of a user kvcr does not trust: when that user is the
        // producer's, the files are right and the audit lacks the
        // declaration (docs/format.md §2.4).
        Code::KV003 => match f.subject {
            Subject::UndeclaredOwner(uid) => format!(
                "if uid {uid} is the producer's user (its sidecar runs as uid {uid}), declare it: \
                 --producer-user {uid}, or KVCR_PRODUCER_USER={uid} in /etc/default/kvcr for the \
                 packaged units, then audit again; if it is not, someone else wrote into the \
                 inventory: do not import"
            ),
            _ => crate::rules::explain::action(f.code).to_string(),
        },
        // Two reports of one node in `kvcr merge`: the inputs are wrong.
        Code::KV102 if f.subject == Subject::MergeInputs => format!(
            "pass one report per node to kvcr merge: keep the newest of {} and drop the others",
            f.found.as_deref().unwrap_or("them")
        ),
        // Ranks of one lifetime disagree on its epoch: not a tie to pin.
        Code::KV107
            if f.expected
                .as_deref()
                .is_some_and(|e| e.parse::<u64>().is_ok()) =>
        {
            "the ranks of one owner lifetime disagree on its epoch: a descriptor was edited or \
             written by another owner; do not import, have the owner rewrite the group's \
             descriptors, then audit again"
                .to_string()
        }
        Code::KV107 if inv.root.is_some() => {
            let root = inv.root.as_deref().unwrap_or_default();
            let tied: Vec<String> = f
                .found
                .as_deref()
                .unwrap_or_default()
                .split(", ")
                .map(str::to_string)
                .collect();
            format!(
                "find the lifetime whose owner pid still runs, then pin it: {} (or {}); or remove \
                 the dead lifetime's descriptors",
                command(
                    "audit",
                    true,
                    root,
                    &g.engine_id,
                    &[
                        inv.flags.clone(),
                        vec![
                            "--incarnation".into(),
                            tied.first().cloned().unwrap_or_default()
                        ]
                    ]
                    .concat()
                ),
                tied.get(1..).map(|t| t.join(", ")).unwrap_or_default()
            )
        }
        c => crate::rules::explain::action(c).to_string(),
    }
}

/// What reusing an accepted group takes, around the `import` command(s)
/// that prove it (docs/import.md "Trial, hold, dry run"): a trial import
/// proves `what` can be imported now, whole, and releases it, so it hands
/// nothing over; the engine takes the memory over by importing the handles
/// itself, from the import plan, while a hold keeps it mapped. `whose`
/// comes before "engine" ("the ", or "each node's " after a merge).
fn reuse(what: &str, whose: &str, import: &str) -> String {
    format!(
        "a trial proves {what} can be reused now (it imports every rank, verifies and releases \
         them: nothing is handed over): {import}; to hand the memory over, hold it \
         instead (the same with --hold --ready-file PATH keeps it mapped until SIGTERM) while \
         {whose}engine imports the handles itself from the import plan (the same with --dry-run \
         --format json)"
    )
}

/// The ranks of group `g` that merge input `i` reported.
fn ranks_of(g: &GroupVerdict, i: &MergeInput) -> Vec<u64> {
    g.ranks
        .iter()
        .filter(|r| r.report.as_deref() == Some(i.report.as_str()))
        .filter_map(|r| r.rank)
        .collect()
}

/// At most 8 steps, one per node, then how many more: "; "-separated.
fn bounded_steps(steps: impl ExactSizeIterator<Item = String>) -> String {
    let n = steps.len();
    let mut shown: Vec<String> = steps.take(8).collect();
    if n > 8 {
        shown.push(format!("and {} more nodes", n - 8));
    }
    shown.join("; ")
}

/// The live audit to run again on merge input `i`'s node, naming its own
/// ranks of `g` (`--strict` when `strict`), its report written to
/// `HOST.json`; `why` says what was wrong with the report it has.
fn audit_step(g: &GroupVerdict, i: &MergeInput, why: Option<&str>, strict: bool) -> String {
    let host = i.host.as_deref().unwrap_or("its node");
    let mut flags = vec![
        "--local-ranks".to_string(),
        compress_ranks(&ranks_of(g, i)),
        "--format".to_string(),
        "json".to_string(),
    ];
    if strict {
        flags.insert(0, "--strict".to_string());
    }
    format!(
        "on {host} (report {}{}): {} > {}",
        i.report,
        why.map(|w| format!(", {w}")).unwrap_or_default(),
        command(
            "audit",
            true,
            i.root.as_deref().unwrap_or("."),
            &g.engine_id,
            &flags
        ),
        shell_quote(&format!("{host}.json"))
    )
}

/// `kvcr merge` of reports written without `--local-ranks`: each node's
/// audit missed the ranks the other nodes hold and rejected the group
/// (KV103), though every rank row is accepted. The fix is the audits'
/// flag, not the cache: audit every node of the group again naming its
/// own ranks, then merge the new reports (the import gate takes a fleet
/// report only as fresh as its oldest input, so every node's is new).
fn audit_with_local_ranks(g: &GroupVerdict, inv: &Invocation) -> String {
    let inputs: Vec<&MergeInput> = inv
        .merged
        .iter()
        .flatten()
        .filter(|i| !ranks_of(g, i).is_empty())
        .collect();
    let steps = bounded_steps(inputs.iter().map(|i| audit_step(g, i, None, false)));
    format!(
        "a node's report written without --local-ranks misses the ranks other nodes hold and \
         rejects the group, whatever its rank rows say; audit every node again naming its own \
         ranks: {steps}; then kvcr merge every node's report again"
    )
}

fn accepted(g: &GroupVerdict, inv: &Invocation) -> (String, String) {
    // Both judges accept a group only with a world size; a verdict built
    // without one still never claims "0 ranks".
    let ws = g.world_size;
    let unchecked = not_checked(g);
    let checked = if !inv.live {
        "; offline: node not checked".to_string()
    } else if unchecked > 0 {
        format!("; live, {} not checked", plural(unchecked, "fact", "facts"))
    } else {
        "; checked against this node".to_string()
    };
    if let Some(inputs) = &inv.merged {
        let cause = format!(
            "all {}ranks present once across {}, accepted and consistent{}",
            ws.map_or_else(String::new, |ws| format!("{ws} ")),
            plural(inputs.len(), "report", "reports"),
            if inv.live {
                "; every input live"
            } else {
                "; not every input was live"
            }
        );
        // The import gate refuses a fleet report with an input that is not
        // live (or names no boot id) and ranks with facts not checked:
        // never advise that import; name each node to audit again, live,
        // and the command to run there.
        let unproven: Vec<(&MergeInput, bool)> = inputs
            .iter()
            .filter_map(|i| {
                let unchecked = g.ranks.iter().any(|r| {
                    r.report.as_deref() == Some(i.report.as_str()) && !r.not_checked.is_empty()
                });
                (!i.live || unchecked).then_some((i, unchecked))
            })
            .collect();
        if !unproven.is_empty() {
            let steps = bounded_steps(unproven.iter().map(|&(i, unchecked)| {
                let why = if unchecked {
                    "facts not checked"
                } else {
                    "not live"
                };
                audit_step(g, i, Some(why), unchecked)
            }));
            return (
                cause,
                format!(
                    "none needed; an import needs every node audited live with every fact checked: \
                     {steps}; then kvcr merge every node's report again"
                ),
            );
        }
        // Each node imports its own ranks from its own inventory.
        let steps = bounded_steps(inputs.iter().map(|i| {
            format!(
                "on {}: {}",
                i.host.as_deref().unwrap_or("its node"),
                import_command(
                    i.root.as_deref().unwrap_or("."),
                    &g.engine_id,
                    &[],
                    &[
                        "--local-ranks".to_string(),
                        compress_ranks(&ranks_of(g, i)),
                        "--fleet-report".to_string(),
                        "fleet.json".to_string(),
                    ]
                )
            )
        }));
        return (
            cause,
            format!(
                "none needed; save this report as fleet.json (kvcr merge … --format json > \
                 fleet.json) and copy it to each node; then {}",
                reuse(
                    "each node's ranks",
                    "each node's ",
                    &format!("{steps}{}", profile_note(&[]))
                )
            ),
        );
    }
    let root = inv.root.as_deref().unwrap_or(".");
    if let Some(l) = &g.local_ranks {
        let audit = command("audit", true, root, &g.engine_id, &inv.flags);
        return (
            format!(
                "local part accepted: ranks {l}{} present, current and consistent{checked}; \
                 the other ranks are expected on other nodes",
                ws.map_or_else(String::new, |ws| format!(" of {ws}"))
            ),
            format!(
                "write this node's report ({audit} --format json > \"$(hostname).json\") and judge \
                 the whole group with kvcr merge over every node's report"
            ),
        );
    }
    let cause = format!(
        "all {} present, current and consistent{checked}",
        ws.map_or_else(
            || "ranks".to_string(),
            |ws| plural(ws as usize, "rank", "ranks")
        )
    );
    let import = format!(
        "{}{}",
        import_command(root, &g.engine_id, &inv.flags, &[]),
        profile_note(&inv.flags)
    );
    let action = if !inv.live {
        format!(
            "check this node first: {}; then {}",
            command("audit", true, root, &g.engine_id, &inv.flags),
            reuse("the group", "the ", &import)
        )
    } else if unchecked > 0 {
        format!(
            "see which facts with -v (import refuses facts it cannot check); then {}",
            reuse("the group", "the ", &import)
        )
    } else {
        format!("none needed; {}", reuse("the group", "the ", &import))
    };
    (cause, action)
}

/// The finding a rank row shows first: one no other of the row's findings
/// explains, first in [`ROOT_ORDER`].
pub fn row_cause<'a>(findings: &[&'a Finding]) -> Option<&'a Finding> {
    findings
        .iter()
        .filter(|f| {
            !findings
                .iter()
                .any(|g| g.code != f.code && explains(g.code, f.code))
        })
        .min_by_key(|f| order(f.code))
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::descriptor::parse_descriptor;
    use crate::rules::{judge, Candidate, Context, Expectations};
    use crate::testkit::{self, Desc};

    /// A clean two-rank group, judged offline: accepted, world size 2.
    fn accepted_pair() -> GroupVerdict {
        let cands = (0..2)
            .map(|rank| {
                let p = parse_descriptor(&Desc::new("unit", rank, 2, 1).bytes());
                Candidate {
                    path: format!("rank-{rank}.json"),
                    raw_path: format!("rank-{rank}.json").into_bytes(),
                    name_rank: Some(rank),
                    mode: Some(0o600),
                    ident: p.ident,
                    descriptor: p.descriptor,
                    findings: p.findings,
                }
            })
            .collect();
        let expect = Expectations::default();
        let ctx = Context {
            now_unix_ms: testkit::CREATED_UNIX_MS + 1000,
            node: None,
            expect: &expect,
            invocation: &Default::default(),
        };
        let mut j = judge(cands, Vec::new(), &ctx);
        let g = j.groups.remove(0);
        assert_eq!((g.verdict, g.world_size), (Verdict::Accept, Some(2)));
        g
    }

    /// A world size that is not known (was `unwrap_or(0)`) is never
    /// printed as 0: not in the accepted cause, its local and merged
    /// forms, nor in the KV101 --local-ranks action.
    #[test]
    fn no_known_world_size_never_reads_as_0_ranks() {
        let inv = Invocation::default();
        let g = accepted_pair();
        let (cause, _) = accepted(&g, &inv);
        assert!(cause.starts_with("all 2 ranks present"), "{cause}");
        let g = GroupVerdict {
            world_size: None,
            ..accepted_pair()
        };
        let (cause, _) = accepted(&g, &inv);
        assert!(cause.starts_with("all ranks present, current"), "{cause}");
        let local = GroupVerdict {
            local_ranks: Some(crate::format::rankset::RankSet::parse("0-1").unwrap()),
            ..g.clone()
        };
        let (cause, _) = accepted(&local, &inv);
        assert!(
            cause.starts_with("local part accepted: ranks 0-1 present"),
            "{cause}"
        );
        let merged = Invocation {
            merged: Some(vec![MergeInput {
                report: "a.json".into(),
                ..MergeInput::default()
            }]),
            ..Invocation::default()
        };
        let (cause, _) = accepted(&g, &merged);
        assert!(
            cause.starts_with("all ranks present once across 1 report"),
            "{cause}"
        );
        let f = Finding::reject(Code::KV101, "local ranks 5 are not below world_size")
            .about(Subject::Request);
        let action = action_for(&f, &g, &inv);
        assert!(
            action.contains("below world_size (not known) in --local-ranks"),
            "{action}"
        );
        for text in [cause, action, accepted(&local, &inv).0] {
            assert!(
                !text.contains(" 0 ranks")
                    && !text.contains("world_size 0")
                    && !text.contains(" of 0"),
                "{text}"
            );
        }
        let known = action_for(&f, &accepted_pair(), &inv);
        assert!(known.contains("below world_size 2 in"), "{known}");
    }

    /// Ranks are counted as ranks, descriptors as descriptors (issue #31
    /// §3): two rows of one rank are two descriptors of one rank.
    #[test]
    fn rejected_in_all_counts_ranks_and_names_descriptors() {
        let reject = |mut g: GroupVerdict| {
            for r in &mut g.ranks {
                r.verdict = Verdict::Reject;
            }
            g
        };
        let one = GroupVerdict {
            ranks: vec![accepted_pair().ranks.remove(0)],
            ..accepted_pair()
        };
        assert_eq!(rejected_in_all(&reject(one)), None);
        assert_eq!(rejected_in_all(&accepted_pair()), None);
        let g = reject(accepted_pair());
        assert_eq!(rejected_in_all(&g).unwrap(), "2 ranks rejected in all");
        // Both ranks twice (two incarnations that tie): 4 descriptors.
        let mut tie = g.clone();
        tie.ranks.extend(g.ranks.clone());
        assert_eq!(
            rejected_in_all(&tie).unwrap(),
            "4 descriptors of 2 ranks rejected in all"
        );
        // One rank twice (a copy): 2 descriptors of 1 rank.
        let mut copy = g.clone();
        copy.ranks[1].rank = Some(0);
        assert_eq!(
            rejected_in_all(&copy).unwrap(),
            "2 descriptors of 1 rank rejected in all"
        );
        // A descriptor whose rank has no number: only descriptors count.
        let mut unnumbered = g.clone();
        unnumbered.ranks[1].rank = None;
        assert_eq!(
            rejected_in_all(&unnumbered).unwrap(),
            "2 descriptors rejected in all"
        );
        // Accepted rows are not counted.
        let mut mixed = tie.clone();
        mixed.ranks[0].verdict = Verdict::Accept;
        mixed.ranks[1].verdict = Verdict::Accept;
        assert_eq!(rejected_in_all(&mixed).unwrap(), "2 ranks rejected in all");
    }

    #[test]
    fn shell_quote_examples() {
        assert_eq!(shell_quote("/srv/kv"), "/srv/kv");
        assert_eq!(shell_quote("/srv/my kv"), "'/srv/my kv'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
