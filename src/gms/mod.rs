//! `kvcr gms`: the read-only checker of what ai-dynamo/dynamo's GPU Memory
//! Service leaves on a node (docs/format.md §14): lease rings (GMSL),
//! writer-cohort directories, recovery metadata (DYNKV001) and files of
//! superseded formats.
//!
//! The slice is layered as the rest of the crate: [`format`] (byte layouts,
//! pure), [`rules`] (facts in, findings out, pure), [`io`] (discovery, the
//! read-only opens, `/proc`), [`report`] (the table and the
//! `kvcr.gms-report/v1` document); this module runs them in order: find,
//! read every artifact once, wait the interval, read every artifact again,
//! gather the live facts, judge.

pub mod command;
pub mod format;
pub mod io;
pub mod report;
pub mod rules;

#[cfg(test)]
mod tests;

use crate::error::{Failure, Kind as FailureKind};
use crate::finding::Finding;
use format::{Magic, Superseded};
use rules::{
    CohortDirFacts, CohortRead, LeaseFacts, LeaseRead, RecoveryAsk, RecoveryFacts, RecoveryRead,
    SupersededRead,
};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// The interval between the two reads when none is given, in milliseconds.
pub const DEFAULT_INTERVAL_MS: u64 = 200;
/// The longest interval `--interval-ms` takes.
pub const MAX_INTERVAL_MS: u64 = 60_000;

/// The devices whose default namespaces a ring's file name is compared
/// with (`{engine}:gpu{device}:{suffix}`).
pub const NAMESPACE_DEVICES: u32 = 64;

/// What a run is asked for.
#[derive(Clone, Debug)]
pub struct Options {
    /// Files or directories; empty: where GMS puts its artifacts.
    pub paths: Vec<PathBuf>,
    pub live: bool,
    pub ask: RecoveryAsk,
    pub interval_ms: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            paths: Vec::new(),
            live: false,
            ask: RecoveryAsk::default(),
            interval_ms: DEFAULT_INTERVAL_MS,
        }
    }
}

/// What an artifact is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Lease,
    Cohort,
    Recovery,
    Superseded,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Lease => "lease",
            Kind::Cohort => "cohort",
            Kind::Recovery => "recovery",
            Kind::Superseded => "superseded",
        }
    }
}

/// An artifact's facts, by kind.
#[derive(Clone, Debug)]
pub enum Facts {
    Lease(LeaseFacts),
    Cohort(CohortDirFacts),
    Recovery(RecoveryFacts),
    Superseded(SupersededRead),
}

/// One judged artifact.
#[derive(Clone, Debug)]
pub struct Artifact {
    pub path: PathBuf,
    pub kind: Kind,
    pub findings: Vec<Finding>,
    pub facts: Facts,
}

impl Artifact {
    pub fn rejected(&self) -> bool {
        rules::rejected(&self.findings)
    }

    /// The finding the headline names: the rejecting one first in the
    /// root-cause order (`crate::finding::Spec::root_rank`).
    pub fn cause(&self) -> Option<&Finding> {
        self.findings
            .iter()
            .filter(|f| f.is_reject())
            .min_by_key(|f| f.code.spec().root_rank)
    }
}

/// One place discovery looked at.
#[derive(Clone, Debug)]
pub struct Looked {
    pub path: PathBuf,
    pub what: &'static str,
    /// Whether the place exists.
    pub present: bool,
    /// The artifacts found there.
    pub found: usize,
}

/// A judged run.
#[derive(Clone, Debug)]
pub struct Run {
    /// Discovery's places (empty when PATHs were given).
    pub looked: Vec<Looked>,
    pub artifacts: Vec<Artifact>,
    pub options: Options,
}

impl Run {
    /// 0 when every artifact is ok (notices allowed), 1 when one is
    /// rejected; a run that could not happen is a [`Failure`] (2).
    pub fn exit_status(&self) -> i32 {
        if self.artifacts.iter().any(Artifact::rejected) {
            crate::exit::REJECTED
        } else {
            crate::exit::OK
        }
    }
}

fn failure(e: io::ReadError) -> Failure {
    let path = crate::text::terminal(&e.path.to_string_lossy()).into_owned();
    let mut f = Failure::usage(
        format!("{path}: {}", e.what),
        Some(if e.denied {
            format!(
                "run kvcr as root or as the user that owns it; this user is uid {}",
                rustix::process::geteuid().as_raw()
            )
        } else {
            "name GMS artifacts: lease rings, writer-cohort directories, recovery metadata \
             (docs/format.md §14)"
                .to_string()
        }),
    );
    if e.denied {
        f = f.of_kind(FailureKind::PermissionDenied);
    }
    f
}

fn errno(path: &Path, what: &str, e: rustix::io::Errno) -> Failure {
    failure(io::ReadError {
        path: path.to_path_buf(),
        what: format!("{what}: {}", std::io::Error::from(e)),
        denied: matches!(e, rustix::io::Errno::ACCESS | rustix::io::Errno::PERM),
    })
}

/// Something to read twice.
enum Target {
    Lease(io::Opened),
    Recovery(io::Opened),
    Superseded(io::Opened, Superseded),
    Cohort(OwnedFd),
}

/// One read of a target.
enum Read {
    Lease(LeaseRead),
    Recovery(RecoveryRead),
    Superseded(SupersededRead),
    Cohort(CohortRead),
}

/// The artifact a regular file is, by content; `None` for a stranger.
fn by_content(path: &Path) -> Result<Option<Target>, Failure> {
    let o = io::open_file(path).map_err(failure)?;
    let magic = io::recognise(&o).map_err(|e| errno(path, "cannot read", e))?;
    Ok(magic.map(|m| match m {
        Magic::Lease => Target::Lease(o),
        Magic::Recovery => Target::Recovery(o),
        Magic::Superseded(s) => Target::Superseded(o, s),
    }))
}

/// The targets below a PATH the operator named.
fn named(path: &Path, out: &mut Vec<(PathBuf, Target)>) -> Result<(), Failure> {
    use rustix::fs::FileType;
    let shown = || crate::text::terminal(&path.to_string_lossy()).into_owned();
    match io::lstat_kind(path).map_err(failure)? {
        None => Err(Failure::usage(
            format!("{}: does not exist", shown()),
            Some("name an existing file or directory".to_string()),
        )),
        Some(FileType::Symlink) => Err(Failure::usage(
            format!("{}: is a symbolic link (kvcr follows none)", shown()),
            Some("name the file it points to".to_string()),
        )),
        Some(FileType::Directory) => {
            let dir = io::open_dir(path).map_err(failure)?;
            let entries = io::entries(&dir).map_err(|e| errno(path, "cannot list", e))?;
            if io::is_cohort_dir(&entries) {
                out.push((path.to_path_buf(), Target::Cohort(dir)));
                return Ok(());
            }
            for (name, ty, ..) in entries {
                let p = path.join(&name);
                match ty {
                    FileType::RegularFile => {
                        if let Some(t) = by_content(&p)? {
                            out.push((p, t));
                        }
                    }
                    FileType::Directory => {
                        let d = io::open_dir(&p).map_err(failure)?;
                        let e = io::entries(&d).map_err(|e| errno(&p, "cannot list", e))?;
                        if io::is_cohort_dir(&e) {
                            out.push((p, Target::Cohort(d)));
                        }
                    }
                    _ => {}
                }
            }
            Ok(())
        }
        Some(FileType::RegularFile) => match by_content(path)? {
            Some(t) => {
                out.push((path.to_path_buf(), t));
                Ok(())
            }
            None => Err(Failure::usage(
                format!(
                    "{}: is no GMS artifact (no GMSL, DYNKV001, DYNKVIX1, GMSKVIX1, GMSKVIX2 or \
                     GMSKVGN1 magic)",
                    shown()
                ),
                Some("name a lease ring, a writer-cohort directory or recovery metadata".into()),
            )),
        },
        Some(_) => Err(Failure::usage(
            format!("{}: is not a regular file or a directory", shown()),
            Some("name a file or a directory".to_string()),
        )),
    }
}

/// The targets where GMS puts its artifacts, and where kvcr looked.
fn discovered(
    env: &dyn Fn(&str) -> Option<OsString>,
    looked: &mut Vec<Looked>,
    out: &mut Vec<(PathBuf, Target)>,
) -> Result<(), Failure> {
    use rustix::fs::FileType;
    let dev_shm = matches!(
        io::lstat_kind(Path::new("/dev/shm")),
        Ok(Some(FileType::Directory))
    );
    for place in io::places(env, dev_shm) {
        let path = place.path().to_path_buf();
        let kind = io::lstat_kind(&path).map_err(failure)?;
        let before = out.len();
        match (&place, kind) {
            (_, None) => {}
            (io::Place::LeaseDir(_), Some(FileType::Directory)) => {
                for f in io::lease_files(&path).map_err(failure)? {
                    let o = io::open_file(&f).map_err(failure)?;
                    out.push((f, Target::Lease(o)));
                }
            }
            (io::Place::LeaseFile(_), Some(_)) => {
                let o = io::open_file(&path).map_err(failure)?;
                out.push((path.clone(), Target::Lease(o)));
            }
            (io::Place::CohortDir(_), Some(_)) => {
                let d = io::open_dir(&path).map_err(failure)?;
                out.push((path.clone(), Target::Cohort(d)));
            }
            (io::Place::Recovery(_), Some(_)) => {
                let o = io::open_file(&path).map_err(failure)?;
                out.push((path.clone(), Target::Recovery(o)));
            }
            (io::Place::Index(_), Some(_)) => {
                let mut gen = path.clone().into_os_string();
                gen.push(".gen");
                for p in [path.clone(), PathBuf::from(gen)] {
                    if io::lstat_kind(&p).map_err(failure)?.is_some() {
                        if let Some(t @ Target::Superseded(..)) = by_content(&p)? {
                            out.push((p, t));
                        }
                    }
                }
            }
            (_, Some(_)) => {
                return Err(Failure::usage(
                    format!(
                        "{}: is not a directory, where GMS keeps {}",
                        crate::text::terminal(&path.to_string_lossy()),
                        place.what()
                    ),
                    Some("check the GMS variables in this environment".to_string()),
                ))
            }
        }
        looked.push(Looked {
            path,
            what: place.what(),
            present: kind.is_some(),
            found: out.len() - before,
        });
    }
    Ok(())
}

/// The lock keys (device, inode) of every cohort and `.leader` file of the
/// cohort directories, for the kernel's lock table.
fn cohort_inodes(targets: &[(PathBuf, Target)]) -> BTreeSet<(u32, u32, u64)> {
    let mut out = BTreeSet::new();
    for (_, t) in targets {
        let Target::Cohort(dir) = t else { continue };
        let Ok(entries) = io::entries(dir) else {
            continue;
        };
        for (name, ..) in entries {
            if matches!(
                format::cohort_name(&name),
                format::CohortName::Cohort(_) | format::CohortName::Leader(_)
            ) {
                if let Ok(st) =
                    rustix::fs::statat(dir, name.as_str(), rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                {
                    out.insert((
                        rustix::fs::major(st.st_dev),
                        rustix::fs::minor(st.st_dev),
                        st.st_ino,
                    ));
                }
            }
        }
    }
    out
}

/// Reads every target once.
fn read_all(targets: &[(PathBuf, Target)], ask: &RecoveryAsk) -> Result<Vec<Read>, Failure> {
    let inodes = cohort_inodes(targets);
    let locks = (!inodes.is_empty()).then(|| io::LockTable::read(&inodes));
    let mut out = Vec::new();
    for (path, t) in targets {
        let e = |e| errno(path, "cannot read", e);
        out.push(match t {
            Target::Lease(o) => Read::Lease(io::read_lease(o).map_err(e)?),
            Target::Recovery(o) => Read::Recovery(io::read_recovery(o, ask).map_err(e)?),
            Target::Superseded(o, s) => {
                Read::Superseded(io::read_superseded(o, *s, path).map_err(e)?)
            }
            Target::Cohort(d) => Read::Cohort(
                io::read_cohort(d, path, locks.as_ref().expect("a cohort target"))
                    .map_err(failure)?,
            ),
        });
    }
    Ok(out)
}

/// Finds, reads twice and judges (docs/format.md §14). `env` is the
/// environment GMS's variables are read from.
pub fn run(options: &Options, env: &dyn Fn(&str) -> Option<OsString>) -> Result<Run, Failure> {
    let mut looked = Vec::new();
    let mut targets = Vec::new();
    if options.paths.is_empty() {
        discovered(env, &mut looked, &mut targets)?;
    } else {
        for p in &options.paths {
            named(p, &mut targets)?;
        }
    }
    // One artifact named twice (a PATH and its directory) is read once.
    let mut seen = BTreeSet::new();
    targets.retain(|(p, _)| seen.insert(p.clone()));
    let first = read_all(&targets, &options.ask)?;
    if !targets.is_empty() {
        std::thread::sleep(std::time::Duration::from_millis(options.interval_ms));
    }
    let second = read_all(&targets, &options.ask)?;
    let live = options.live.then(|| {
        let mut owners = BTreeSet::new();
        let mut pid = None;
        for r in first.iter().chain(&second) {
            if let Read::Lease(l) = r {
                if let Some(s) = &l.scan {
                    owners.extend(s.owners.keys().copied());
                }
                if let Some(h) = l.header {
                    if h.active_mutations == format::LEASE_BARRIER {
                        pid = Some(h.recovery_owner_pid);
                    }
                }
            }
        }
        io::lease_live(&owners, pid)
    });
    let mut artifacts = Vec::new();
    for ((path, _), (a, b)) in targets.iter().zip(first.into_iter().zip(second)) {
        let (kind, findings, facts) = match (a, b) {
            (Read::Lease(a), Read::Lease(b)) => {
                let (f, mut x) = rules::judge_lease(&a, &b, live.as_ref());
                x.namespace = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| format::default_namespace(n, NAMESPACE_DEVICES));
                (Kind::Lease, f, Facts::Lease(x))
            }
            (Read::Recovery(a), Read::Recovery(b)) => {
                let (f, x) = rules::judge_recovery(&a, &b, &options.ask);
                (Kind::Recovery, f, Facts::Recovery(x))
            }
            (Read::Superseded(_), Read::Superseded(b)) => (
                Kind::Superseded,
                rules::judge_superseded(&b),
                Facts::Superseded(b),
            ),
            (Read::Cohort(a), Read::Cohort(b)) => {
                let (f, x) = rules::judge_cohort(&a, &b);
                (Kind::Cohort, f, Facts::Cohort(x))
            }
            _ => {
                return Err(Failure::internal(
                    "the two reads of one artifact differ in kind",
                    None,
                ))
            }
        };
        artifacts.push(Artifact {
            path: path.clone(),
            kind,
            findings,
            facts,
        });
    }
    Ok(Run {
        looked,
        artifacts,
        options: options.clone(),
    })
}

/// The process environment, as GMS reads it.
pub fn process_env(k: &str) -> Option<OsString> {
    std::env::var_os(k)
}
