//! The audit service (`kvcr audit`, `kvcr merge`): reads the inventory,
//! asks the node probe (live), calls the verdict core, and hands the result
//! to a printer. `kvcr import` runs the same audit ([`audit`]) and keeps
//! the descriptors it judged.

use crate::format::descriptor::Descriptor;
use crate::format::failure::Failure;
use crate::format::profile::{parse_profile, Profile, ProfileError};
use crate::io::node::{self, now_unix_ms, NodeProbe};
use crate::io::pipeline;
use crate::print::audit::AuditRun;
use crate::rules::Expectations;
use crate::rules::{self, Candidate, Context, FileVerdict};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use crate::format::names::DEFAULT_ROOT;

/// What every command that reads an inventory was asked to judge.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    /// ROOT or `$KVCR_INVENTORY`, as given ([`Inventory::root`] resolves it).
    pub root: Option<PathBuf>,
    /// `--profile` or `$KVCR_PROFILE`, as given (the report names it);
    /// `None` also for a profile given as a value (the library).
    pub profile_path: Option<PathBuf>,
    /// Where the profile came from (the report's `options.profile_source`);
    /// `None` when there is no profile.
    pub profile_source: Option<ProfileSource>,
    /// The loaded profile and the flags that override it.
    pub expect: Expectations,
    /// Threads that read and parse (`crate::io::pipeline::threads`: the
    /// command line's `KVCR_THREADS`, the library's `threads` option).
    pub threads: usize,
    /// A file describing the node, in place of this one (the facts file of
    /// `crate::io::node::facts_file`: `KVCR_NODE_FACTS` on the command
    /// line, the library's `node_facts` option).
    pub node_facts: Option<PathBuf>,
    /// `--producer-user` or `$KVCR_PRODUCER_USER`, as a uid: whose files
    /// are trusted besides root's and this user's (docs/format.md §2.4).
    pub producer_uid: Option<u32>,
}

/// Where a run's profile came from (docs/json.md, `options.profile_source`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProfileSource {
    /// `--profile FILE`, or the library's profile given as a path.
    Flag,
    /// `$KVCR_PROFILE` (the command line only).
    Env,
    /// The library's profile given as a value (JSON text, a Python dict):
    /// no file, so the report's `options.profile` is `null`.
    Value,
}

impl ProfileSource {
    /// The report's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            ProfileSource::Flag => "flag",
            ProfileSource::Env => "env",
            ProfileSource::Value => "value",
        }
    }
}

impl Inventory {
    /// The resolved root: ROOT, else `$KVCR_INVENTORY`, else
    /// [`DEFAULT_ROOT`] (exit 2 when it cannot be used).
    pub fn root(&self) -> Result<PathBuf, Failure> {
        let given = self.root.is_some();
        let root = self.root.as_deref().unwrap_or(Path::new(DEFAULT_ROOT));
        crate::io::inventory::resolve_root(root).map_err(|e| {
            let denied = crate::format::failure::is_denied(&e);
            let hint = if denied {
                Some(crate::io::inventory::access_hint(root))
            } else if !given {
                Some(format!(
                    "no ROOT and no KVCR_INVENTORY, so kvcr used the default {DEFAULT_ROOT} \
                        (where the package keeps it); pass ROOT or set KVCR_INVENTORY"
                ))
            } else {
                None
            };
            let f = Failure::usage(e.to_string(), hint);
            if denied {
                f.of_kind(crate::format::failure::Kind::PermissionDenied)
            } else {
                f
            }
        })
    }
}

/// `engine` (the `--engine` flag, the library's `engine` option) must be
/// the profile's group when both are given: a profile written for another
/// group is a usage error, never a silent choice of one of them.
pub fn check_engine(
    profile: Option<&Profile>,
    engine: Option<&crate::format::descriptor::EngineId>,
) -> Result<(), Failure> {
    if let (Some(p), Some(e)) = (profile, engine) {
        if p.engine_id != *e {
            return Err(Failure::usage(
                format!(
                    "--engine {e:?} differs from the profile's engine_id {:?}",
                    p.engine_id
                ),
                Some("drop --engine, or use the profile written for that group".to_string()),
            ));
        }
    }
    Ok(())
}

/// Reads and parses the profile at `path`; every message names it as
/// `shown` (the command line adds where the path came from).
pub fn load_profile(path: &Path, shown: &str) -> Result<Profile, Failure> {
    // A profile is small; 1 MiB like a descriptor.
    let bytes = crate::io::safe_file::read_regular(path, 1 << 20)
        .map_err(|e| Failure::usage(format!("cannot read profile {shown}: {e}"), None))?;
    parse_profile(&bytes).map_err(|e| match e {
        ProfileError::LocalRanks(e) => Failure::usage(
            format!("bad profile {shown}: local_ranks: {e}"),
            Some("write ranks as 0-7 or 0-3,8-11".to_string()),
        ),
        e => Failure::usage(
            format!("bad profile {shown}: {e}"),
            Some("see docs/format.md §4 / README 'Deployment profile' for the format".to_string()),
        ),
    })
}

/// An audit and the parsed descriptors it judged, by raw path bytes.
pub struct Audited {
    pub run: AuditRun,
    pub descriptors: BTreeMap<Vec<u8>, Descriptor>,
}

/// Reads and parses every entry. Descriptors become candidates, with their
/// allocations and handles when `opts` keeps them (what import needs);
/// everything else becomes a file-level verdict. Both lists are in walk
/// order, however many threads read (`crate::io::pipeline`).
pub fn collect(
    root: &Path,
    progress: bool,
    opts: &pipeline::Options,
) -> Result<(Vec<Candidate>, Vec<FileVerdict>), Failure> {
    // Drawn only once the read has taken 200 ms: a spinner that flashes
    // for a four-file inventory is noise.
    let bar = progress.then(|| {
        let b =
            indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::hidden());
        b.set_style(indicatif::ProgressStyle::default_spinner());
        b.set_message("reading descriptors");
        b
    });
    let started = std::time::Instant::now();
    let mut shown = false;
    let mut tick = || {
        if let Some(b) = &bar {
            if !shown && started.elapsed() >= std::time::Duration::from_millis(200) {
                b.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                shown = true;
            }
            b.inc(1);
        }
    };
    let collected = pipeline::collect(root, opts, &mut tick).map_err(|e| {
        let hint =
            crate::format::failure::is_denied(&e).then(|| crate::io::inventory::access_hint(root));
        let kind = if hint.is_some() {
            crate::format::failure::Kind::PermissionDenied
        } else {
            crate::format::failure::Kind::CannotRun
        };
        Failure::usage(e.to_string(), hint).of_kind(kind)
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let (cands, files) = collected?;
    refuse_denied(root, &cands, &files)?;
    Ok((cands, files))
}

/// Permission denied anywhere in the walk (a directory that cannot be
/// listed or opened, a descriptor that cannot be opened or read) means this
/// user cannot audit the inventory: exit 2 naming the first such entry by
/// path and counting the others, never a verdict (docs/format.md §6).
fn refuse_denied(root: &Path, cands: &[Candidate], files: &[FileVerdict]) -> Result<(), Failure> {
    let denied = cands
        .iter()
        .flat_map(|c| &c.findings)
        .chain(files.iter().flat_map(|f| &f.findings))
        .filter(|f| f.subject == crate::format::finding::Subject::Access)
        .min_by(|a, b| a.path.cmp(&b.path));
    let Some(f) = denied else {
        return Ok(());
    };
    // Entries, not findings: one entry can be refused twice (listed by its
    // parent, then looked up beneath the root), and is counted once.
    let count = cands
        .iter()
        .flat_map(|c| &c.findings)
        .chain(files.iter().flat_map(|f| &f.findings))
        .filter(|f| f.subject == crate::format::finding::Subject::Access)
        .map(|f| f.path.as_deref())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    Err(Failure::usage(
        format!(
            "cannot audit {}: {}: {}{}; this user cannot read the whole inventory, so there is no \
             verdict",
            root.display(),
            f.path.as_deref().unwrap_or("."),
            crate::format::message::render(&f.message),
            if count > 1 {
                format!(" (and {} more entries refused)", count - 1)
            } else {
                String::new()
            }
        ),
        Some(crate::io::inventory::access_hint(root)),
    )
    .of_kind(crate::format::failure::Kind::PermissionDenied))
}

/// Audits an inventory. `probe` is `Some` in live mode; `strict` makes a
/// live fact that could not be read reject its rank. With
/// `keep_allocations` the descriptors judged come back with every
/// allocation and handle (import plans from these very bytes, never from a
/// second read); without, that map is empty and only the verdict's summary
/// was kept.
pub fn audit(
    inv: &Inventory,
    probe: Option<&dyn NodeProbe>,
    progress: bool,
    keep_allocations: bool,
    strict: bool,
) -> Result<Audited, Failure> {
    let root = inv.root()?;
    let opts = pipeline::Options {
        threads: inv.threads,
        keep_allocations,
        producer_uid: inv.producer_uid,
    };
    let (cands, files) = collect(&root, progress, &opts)?;
    judge_collected(inv, &root, cands, files, probe, keep_allocations, strict)
}

/// [`audit`] of descriptor files given in memory
/// ([`pipeline::collect_in_memory`]: an inventory holding exactly these
/// files, as its owner writes them) instead of the inventory on disk:
/// nothing under the root is read, and `inv.root` (else [`DEFAULT_ROOT`]) is
/// only the name the report gives the inventory. A path that is not a
/// descriptor's is a usage error.
pub fn audit_in_memory(
    inv: &Inventory,
    files: &[(&Path, &[u8])],
    probe: Option<&dyn NodeProbe>,
    strict: bool,
) -> Result<Audited, Failure> {
    let root = inv
        .root
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_ROOT));
    let (cands, verdicts) = pipeline::collect_in_memory(files, false).map_err(|e| {
        Failure::usage(
            format!("in-memory inventory: {e}"),
            Some("give descriptors as root-relative paths such as g0/rank-0.json".to_string()),
        )
    })?;
    judge_collected(inv, &root, cands, verdicts, probe, false, strict)
}

/// The judgement of what [`collect`] (or [`pipeline::collect_in_memory`])
/// found under `root`.
fn judge_collected(
    inv: &Inventory,
    root: &Path,
    cands: Vec<Candidate>,
    files: Vec<FileVerdict>,
    probe: Option<&dyn NodeProbe>,
    keep_allocations: bool,
    strict: bool,
) -> Result<Audited, Failure> {
    let mut expect = inv.expect.clone();
    expect.strict = strict && probe.is_some();
    check_names(inv, &cands)?;
    // Keyed by raw path bytes: two paths that print alike stay two entries.
    // The judgement moves each descriptor in once it is judged (no copy).
    let mut descriptors: BTreeMap<Vec<u8>, Descriptor> = BTreeMap::new();
    let now_ms = now_unix_ms();
    let facts = probe.map(|p| {
        let pids = cands
            .iter()
            .filter_map(|c| c.descriptor.as_ref())
            .flat_map(|d| [d.owner.pid, d.writer.pid]);
        node::gather(p, pids)
    });
    let invocation = rules::cause::Invocation {
        root: Some(root.display().to_string()),
        live: probe.is_some(),
        flags: repeat_flags(inv),
        merged: None,
    };
    let ctx = Context {
        now_unix_ms: now_ms,
        node: facts.as_ref(),
        expect: &expect,
        invocation: &invocation,
    };
    let kept = keep_allocations.then_some(&mut descriptors);
    let judgement = rules::judge_keeping(cands, files, &ctx, kept);
    let mut meta = crate::format::meta::Meta::new(probe.is_some(), now_ms, judgement.exit_status());
    // In live mode the hostname the descriptors were checked against (so a
    // fleet of facts files matches itself), else uname's.
    meta.host = Some(
        facts
            .as_ref()
            .and_then(|f| f.hostname.known().cloned())
            .unwrap_or_else(node::hostname),
    );
    meta.strict = expect.strict;
    meta.boot_id = facts.as_ref().and_then(|f| f.boot_id.known().copied());
    meta.node_facts_source = probe.map(|_| node::facts_source(inv.node_facts.as_deref()));
    let profile = expect.profile.as_ref();
    meta.options = crate::format::meta::Options {
        engine: expect.engine.clone(),
        profile: inv.profile_path.as_ref().map(|p| p.display().to_string()),
        profile_source: inv.profile_source.map(ProfileSource::as_str),
        min_epoch: expect.min_epoch(profile),
        max_age_s: expect.max_age_s(profile),
        local_ranks: expect.local_ranks(profile),
        incarnation: expect.incarnation(profile),
    };
    let run = AuditRun {
        root: root.display().to_string(),
        meta,
        merge: None,
        live: probe.is_some(),
        strict: expect.strict,
        node: facts,
        now_ms,
        judgement,
    };
    Ok(Audited { run, descriptors })
}

/// The flags a suggested command repeats after `ROOT --engine ID`.
fn repeat_flags(inv: &Inventory) -> Vec<String> {
    let e = &inv.expect;
    let mut f = Vec::new();
    if let Some(p) = &inv.profile_path {
        f.extend(["--profile".to_string(), p.display().to_string()]);
    }
    if let Some(n) = e.min_epoch {
        f.extend(["--min-epoch".to_string(), n.to_string()]);
    }
    if let Some(s) = e.max_age_s {
        f.extend(["--max-age".to_string(), s.to_string()]);
    }
    if let Some(l) = &e.local_ranks {
        f.extend(["--local-ranks".to_string(), l.to_string()]);
    }
    if let Some(i) = e.incarnation {
        f.extend(["--incarnation".to_string(), i.to_string()]);
    }
    f
}

/// `--engine` and `--incarnation` must name something the inventory has:
/// a typo is a usage error listing what is there, not a missing group.
fn check_names(inv: &Inventory, cands: &[Candidate]) -> Result<(), Failure> {
    let engines: std::collections::BTreeSet<&str> = cands
        .iter()
        .filter_map(|c| {
            c.descriptor
                .as_ref()
                .map(|d| d.engine_id.as_str())
                .or(c.ident.engine_id.as_deref())
        })
        .collect();
    let list = |names: Vec<String>| {
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    };
    let engine = inv.expect.engine.as_deref();
    if let Some(e) = engine {
        // A profile's group must exist: its absence is a rejection (KV103).
        if inv.profile_path.is_none() && !engines.contains(e) {
            return Err(Failure::usage(
                format!("--engine {e}: no descriptor of that group in the inventory"),
                Some(format!(
                    "groups present: {}",
                    list(engines.iter().map(|s| s.to_string()).collect())
                )),
            ));
        }
    }
    if let Some(i) = inv.expect.incarnation {
        let incs: std::collections::BTreeSet<uuid::Uuid> = cands
            .iter()
            .filter(|c| {
                engine.is_none() || c.descriptor.as_ref().map(|d| d.engine_id.as_str()) == engine
            })
            .filter_map(|c| c.descriptor.as_ref().map(|d| d.incarnation))
            .collect();
        if !incs.contains(&i) {
            return Err(Failure::usage(
                format!("--incarnation {i}: no descriptor has that incarnation"),
                Some(format!(
                    "incarnations present: {}",
                    list(incs.iter().map(|u| u.to_string()).collect())
                )),
            ));
        }
    }
    Ok(())
}

/// [`node::probe`] for the command line: its notes printed on stderr
/// (`kvcr: note: …`), the facts file named as `KVCR_NODE_FACTS=` names it.
/// The library takes [`node::probe`] itself and returns the notes.
pub(crate) fn probe_node(facts: Option<&Path>) -> Result<Box<dyn NodeProbe>, String> {
    let (probe, notes) = node::probe(facts, FACTS_ENV_NAMED)?;
    for n in notes {
        crate::io::output::print_note(&n);
    }
    Ok(probe)
}

/// How the command line's notes name a facts file (`KVCR_NODE_FACTS=PATH`).
pub const FACTS_ENV_NAMED: &str = "KVCR_NODE_FACTS=";
