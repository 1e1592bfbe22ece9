//! The audit (`kvcr audit --format json`): its options, the inventory
//! and probe they make, and the audit of an inventory on disk or given as
//! bytes.

use super::document::{audit_document, Body};
use super::{AuditReport, Error, Structured};
use crate::format::rankset::RankSet;
use crate::service::audit::Inventory;
use std::path::{Path, PathBuf};

/// A deployment profile: a file, as `--profile FILE` names it, or the JSON
/// text of one (a caller that holds the profile in memory). The library
/// never reads `$KVCR_PROFILE`: a caller that wants it passes it here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Profile {
    /// `--profile FILE`: the report's `options.profile` is the path,
    /// `options.profile_source` `"flag"`.
    Path(PathBuf),
    /// The profile's JSON text (docs/format.md §4): the report's
    /// `options.profile` is `null`, `options.profile_source` `"value"`.
    Json(Vec<u8>),
}

/// The options of `kvcr audit` (docs/format.md §7), each as its flag takes
/// it, and what the command takes from its environment.
#[derive(Clone, Debug, Default)]
pub struct AuditOptions {
    /// `--profile` (never `$KVCR_PROFILE`: the library reads no environment).
    pub profile: Option<Profile>,
    /// `--engine ID`.
    pub engine: Option<String>,
    /// `--live`.
    pub live: bool,
    /// `--strict` (needs `live`).
    pub strict: bool,
    /// `--local-ranks` ([`RankSet::parse`] reads `0-3,8`).
    pub local_ranks: Option<RankSet>,
    /// `--min-epoch N`.
    pub min_epoch: Option<u64>,
    /// `--max-age`, in seconds ([`parse_age`] reads `15m`).
    pub max_age_s: Option<u64>,
    /// `--incarnation UUID`.
    pub incarnation: Option<uuid::Uuid>,
    /// The node `live` judges against: `None` reads this machine (`/proc`,
    /// the CUDA driver); a facts file (docs/live.md) describes another
    /// node instead, as `KVCR_NODE_FACTS` does for the command line. The
    /// report's `node_facts_source` names it, and [`Document::notes`](super::Document::notes) says
    /// so.
    pub node_facts: Option<PathBuf>,
    /// Threads that read and parse the descriptors, the calling thread
    /// included (`KVCR_THREADS` for the command line): `None` (or 0) is the
    /// number of CPUs this process may run on; at most 64. The report does
    /// not depend on it.
    pub threads: Option<usize>,
    /// `--producer-user`, as a uid: files it owns are trusted like root's
    /// and this process's user's (docs/format.md §2.4).
    pub producer_uid: Option<u32>,
}

/// How the library's notes and messages name a facts file (`node_facts=PATH`).
pub(super) const NODE_FACTS_NAMED: &str = "node_facts=";

/// `--max-age` and `--max-report-age`: plain seconds or a number with the
/// unit s, m, h or d, in seconds.
pub fn parse_age(s: &str) -> Result<u64, Error> {
    crate::format::timefmt::parse_age(s).map_err(|e| Error::usage(format!("max_age: {e}")))
}

/// The inventory the command line would judge with these options.
pub(super) fn inventory(
    root: &Path,
    profile: Option<&Profile>,
    engine: Option<&str>,
    o: &AuditOptions,
) -> Result<Inventory, Error> {
    let engine = engine
        .map(|e| {
            crate::format::descriptor::EngineId::parse(e)
                .map_err(|m| Error::usage(format!("engine {e:?}: {m}")))
        })
        .transpose()?;
    use crate::service::audit::ProfileSource;
    let (path, loaded, source) = match profile {
        None => (None, None, None),
        Some(Profile::Path(p)) => (
            Some(p.clone()),
            Some(crate::service::audit::load_profile(
                p,
                &p.display().to_string(),
            )?),
            Some(ProfileSource::Flag),
        ),
        Some(Profile::Json(bytes)) => {
            let p = crate::format::profile::parse_profile(bytes).map_err(|e| Error::Usage {
                message: format!("bad profile: {e}"),
                hint: Some("see docs/format.md §4 for the format".into()),
            })?;
            (None, Some(p), Some(ProfileSource::Value))
        }
    };
    crate::service::audit::check_engine(loaded.as_ref(), engine.as_ref())?;
    Ok(Inventory {
        root: Some(root.to_path_buf()),
        profile_source: source,
        profile_path: path,
        expect: crate::rules::Expectations {
            engine,
            profile: loaded,
            min_epoch: o.min_epoch,
            max_age_s: o.max_age_s,
            local_ranks: o.local_ranks.clone(),
            incarnation: o.incarnation,
            strict: false,
        },
        threads: crate::io::pipeline::threads(o.threads),
        node_facts: o.node_facts.clone(),
        producer_uid: o.producer_uid,
    })
}

/// The node probe for a live call, and the notes it is owed (returned,
/// never printed).
pub(super) fn probe(
    facts: Option<&Path>,
) -> Result<(Box<dyn crate::io::node::NodeProbe>, Vec<String>), Error> {
    crate::io::node::probe(facts, NODE_FACTS_NAMED).map_err(Error::usage)
}

/// Audits the inventory at `root`: the `kvcr.audit-report/v1` document
/// `kvcr audit ROOT --format json` prints with the same options, computed
/// by the same code (docs/format.md §5, §9.2). A rejected group is not an
/// error: the report says so, and [`Document::exit_status`](super::Document::exit_status) is 1.
pub fn audit(root: &Path, o: &AuditOptions) -> Result<AuditReport, Error> {
    audit_structured(root, o)?.to_document()
}

/// [`audit`]'s report before it is rendered as text: the same run, for a
/// caller that builds its own objects from it ([`Structured`]).
pub fn audit_structured(root: &Path, o: &AuditOptions) -> Result<Structured, Error> {
    let (inv, probe, notes) = audit_inputs(root, o)?;
    let run = crate::service::audit::audit(&inv, probe.as_deref(), false, false, o.strict)?.run;
    Ok(Structured {
        exit_status: run.judgement.exit_status(),
        body: Body::Audit(Box::new(run)),
        notes,
    })
}

/// The inventory and, in live mode, the node probe of an audit with `o`
/// and the notes the probe is owed.
type AuditInputs = (
    Inventory,
    Option<Box<dyn crate::io::node::NodeProbe>>,
    Vec<String>,
);

fn audit_inputs(root: &Path, o: &AuditOptions) -> Result<AuditInputs, Error> {
    if o.strict && !o.live {
        return Err(Error::usage("strict requires live (--strict needs --live)"));
    }
    let inv = inventory(root, o.profile.as_ref(), o.engine.as_deref(), o)?;
    let (probe, notes) = match o.live {
        true => {
            let (p, n) = probe(inv.node_facts.as_deref())?;
            (Some(p), n)
        }
        false => (None, Vec::new()),
    };
    Ok((inv, probe, notes))
}

/// Audits descriptor files given as bytes (docs/format.md §13.1): the
/// `kvcr.audit-report/v1` document `kvcr audit ROOT --format json` prints,
/// with the same options, for an inventory at `root` that holds exactly
/// `files` and nothing else, each a regular file of mode `0600` owned by
/// this user with one name, in directories of mode `0700` on the root's
/// mount (§2.3–§2.5: how the writer of §3.5 leaves them). The same walk
/// order, size limit, parser and verdict core judge them as [`audit`]
/// judges that inventory; only the disk is not read: nothing is opened
/// under `root`, which is the name the report gives the inventory. A
/// profile given as a path is read, and `live` asks this node (or
/// `KVCR_NODE_FACTS`) as [`audit`] does.
///
/// Each file is `(path, bytes)`, the path relative to `root`, of plain
/// names, naming a descriptor (`g0/rank-0.json`; §2.2, at most 8 levels
/// deep, no directory named like a descriptor or a staging leftover).
/// Anything else, or a path given twice, is [`Error::Usage`]: the checks of
/// the files themselves (links, modes, owners, stray and torn entries) are
/// [`audit`]'s, on a real inventory. For a producer's tests and for the fuzz
/// targets (fuzz/), which judge thousands of inventories a second this way;
/// tests/it/library/api.rs checks that both routes give the same report.
///
/// ```
/// use kvcr_audit::api::{audit_files, AuditOptions};
/// use std::path::Path;
/// let report = audit_files(
///     Path::new("/run/kv/inventory"),
///     &[(Path::new("g0/rank-0.json"), b"{}".as_slice())],
///     &AuditOptions::default(),
/// )?;
/// assert_eq!(report.exit_status(), 1); // "{}" is no descriptor (KV007)
/// # Ok::<(), kvcr_audit::api::Error>(())
/// ```
pub fn audit_files(
    root: &Path,
    files: &[(&Path, &[u8])],
    o: &AuditOptions,
) -> Result<AuditReport, Error> {
    let (inv, probe, notes) = audit_inputs(root, o)?;
    let run = crate::service::audit::audit_in_memory(&inv, files, probe.as_deref(), o.strict)?.run;
    audit_document(&run, notes)
}
