//! The GMS service (docs/format.md §14): finds the artifacts (where GMS
//! puts them, or in the PATHs given), reads every one once, waits the
//! interval, reads every one again, gathers the live facts and judges
//! (`crate::gms::rules`); printing is `crate::gms::print`'s.
//! `crate::gms::read` is
//! everything that touches the system: discovery, the read-only opens,
//! `/proc/locks`, the cohort probe, the processes `--live` asks about.

use crate::format::failure::{Failure, Kind as FailureKind};
use crate::format::names::display_path;
use crate::gms::format::{self as format, Magic, Superseded};
use crate::gms::read as io;
use crate::gms::rules::{
    self as rules, Artifact, CohortRead, Facts, Kind, LeaseRead, Looked, Options, RecoveryAsk,
    RecoveryRead, Run, SupersededRead, NAMESPACE_DEVICES,
};
use rustix::fs::FileType;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn failure(e: io::ReadError) -> Failure {
    let path = crate::format::text::terminal(&display_path(&e.path)).into_owned();
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

/// What a target is.
#[derive(Clone, Copy)]
enum What {
    Lease,
    Recovery,
    Superseded(Superseded),
    Cohort,
}

/// Something to read twice: where it is and what it is, never an open
/// file. Each read opens it (beneath its directory), reads it and closes
/// it, so the run holds one artifact open at a time, whatever their
/// number (docs/format.md §14.7); a directory kvcr listed stays open
/// (shared by its entries), so every open below it is relative to it.
struct Target {
    what: What,
    at: Place,
    /// The identity its listing (or its first open) saw: a read that
    /// finds another file there refuses it.
    key: io::Key,
}

/// Where a target is.
enum Place {
    /// A file, or a writer-cohort directory below a listed one.
    Below(io::Loc),
    /// A writer-cohort directory named itself (a PATH, or where GMS keeps
    /// one), held open.
    Itself(Arc<OwnedFd>, PathBuf),
}

impl Target {
    fn path(&self) -> &Path {
        match &self.at {
            Place::Below(l) => &l.path,
            Place::Itself(_, p) => p,
        }
    }
}

/// One read of a target.
enum Read {
    Lease(LeaseRead),
    Recovery(RecoveryRead),
    Superseded(SupersededRead),
    Cohort(CohortRead),
}

/// The artifact a regular file is, by content (opened, its first bytes
/// read, closed); `None` for a stranger.
fn by_content(at: io::Loc, expect: Option<io::Key>) -> Result<Option<Target>, Failure> {
    let o = at.open(expect).map_err(failure)?;
    let magic = io::recognise(&o).map_err(|e| errno(&at.path, "cannot read", e))?;
    Ok(magic.map(|m| Target {
        what: match m {
            Magic::Lease => What::Lease,
            Magic::Recovery => What::Recovery,
            Magic::Superseded(s) => What::Superseded(s),
        },
        key: o.key,
        at: Place::Below(at),
    }))
}

/// The directories kvcr reads beneath, each opened once (by the path it
/// was named by, without following a symlink at its last component) and
/// held for the run: every open below one is relative to its descriptor.
/// One descriptor per directory, however many artifacts it holds.
#[derive(Default)]
struct Dirs(BTreeMap<PathBuf, Arc<OwnedFd>>);

impl Dirs {
    fn open(&mut self, path: &Path) -> Result<Arc<OwnedFd>, Failure> {
        if let Some(d) = self.0.get(path) {
            return Ok(d.clone());
        }
        let d = Arc::new(io::open_dir(path).map_err(failure)?);
        self.0.insert(path.to_path_buf(), d.clone());
        Ok(d)
    }

    /// A path named as a whole: its directory (held), its last component
    /// beneath it.
    fn loc(&mut self, path: &Path) -> Result<io::Loc, Failure> {
        let name = path.file_name().ok_or_else(|| {
            failure(io::ReadError {
                path: path.to_path_buf(),
                what: "names no file (it ends in `..`)".into(),
                denied: false,
            })
        })?;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let held = self.open(dir)?;
        Ok(io::Loc {
            dir: held,
            name: name.to_os_string(),
            path: path.to_path_buf(),
        })
    }
}

/// A regular file named by path (a PATH, or a file GMS's variables
/// name): refused from its `statx` when it is anything else, before any
/// open (a device is never opened).
fn named_file(dirs: &mut Dirs, path: &Path, what: &str) -> Result<(io::Loc, io::Key), Failure> {
    let at = dirs.loc(path)?;
    let shown = || crate::format::text::terminal(&display_path(path)).into_owned();
    match at.stat().map_err(failure)? {
        None => Err(Failure::usage(
            format!("{}: does not exist", shown()),
            Some("name an existing file or directory".to_string()),
        )),
        Some(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => {
            let key = (
                rustix::fs::major(st.st_dev),
                rustix::fs::minor(st.st_dev),
                st.st_ino,
            );
            Ok((at, key))
        }
        Some(st) => Err(Failure::usage(
            format!(
                "{}: is a {}, not a regular file: not opened",
                shown(),
                io::type_words(FileType::from_raw_mode(st.st_mode))
            ),
            Some(format!("name {what}")),
        )),
    }
}

/// A directory named by path, opened without following a symlink at its
/// last component, and its entries.
fn listed_dir(dirs: &mut Dirs, path: &Path) -> Result<(Arc<OwnedFd>, Vec<io::Entry>), Failure> {
    let dir = dirs.open(path)?;
    let entries = io::entries(&dir).map_err(|e| failure(e.at(path)))?;
    Ok((dir, entries))
}

/// The cohort directory below a listed one, when it has the shape of one.
fn cohort_below(
    dir: &Arc<OwnedFd>,
    shown: &Path,
    e: &io::Entry,
) -> Result<Option<Target>, Failure> {
    let at = io::Loc::below(dir, shown, &e.name);
    let d = at.open_dir(Some(e.key)).map_err(failure)?;
    let inner = io::entries(&d).map_err(|x| failure(x.at(&at.path)))?;
    Ok(io::is_cohort_dir(&inner).then(|| Target {
        what: What::Cohort,
        key: e.key,
        at: Place::Below(at),
    }))
}

/// The targets below a PATH the operator named.
fn named(dirs: &mut Dirs, path: &Path, out: &mut Vec<Target>) -> Result<(), Failure> {
    let shown = || crate::format::text::terminal(&display_path(path)).into_owned();
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
            let (dir, entries) = listed_dir(dirs, path)?;
            if io::is_cohort_dir(&entries) {
                let key = io::inode_key(&dir)
                    .ok_or_else(|| errno(path, "cannot stat", rustix::io::Errno::IO))?;
                out.push(Target {
                    what: What::Cohort,
                    key,
                    at: Place::Itself(dir, path.to_path_buf()),
                });
                return Ok(());
            }
            for e in &entries {
                match e.ty {
                    FileType::RegularFile => {
                        let at = io::Loc::below(&dir, path, &e.name);
                        out.extend(by_content(at, Some(e.key))?);
                    }
                    FileType::Directory => out.extend(cohort_below(&dir, path, e)?),
                    // Anything else is never opened.
                    _ => {}
                }
            }
            Ok(())
        }
        Some(FileType::RegularFile) => {
            let (at, key) = named_file(
                dirs,
                path,
                "a lease ring, a writer-cohort directory or recovery metadata",
            )?;
            match by_content(at, Some(key))? {
                Some(t) => {
                    out.push(t);
                    Ok(())
                }
                None => Err(Failure::usage(
                    format!(
                        "{}: is no GMS artifact (no GMSL, DYNKV001, DYNKVIX1, GMSKVIX1, GMSKVIX2 \
                         or GMSKVGN1 magic)",
                        shown()
                    ),
                    Some(
                        "name a lease ring, a writer-cohort directory or recovery metadata".into(),
                    ),
                )),
            }
        }
        Some(_) => Err(Failure::usage(
            format!("{}: is not a regular file or a directory", shown()),
            Some("name a file or a directory".to_string()),
        )),
    }
}

/// The targets where GMS puts its artifacts, and where kvcr looked.
fn discovered(
    dirs: &mut Dirs,
    env: &dyn Fn(&str) -> Option<OsString>,
    looked: &mut Vec<Looked>,
    out: &mut Vec<Target>,
) -> Result<(), Failure> {
    use io::Place as P;
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
            (P::LeaseDir(_), Some(FileType::Directory)) => {
                let (dir, entries) = listed_dir(dirs, &path)?;
                for e in io::lease_files(&entries) {
                    out.push(Target {
                        what: What::Lease,
                        key: e.key,
                        at: Place::Below(io::Loc::below(&dir, &path, &e.name)),
                    });
                }
            }
            (P::LeaseFile(_), Some(_)) => {
                let (at, key) = named_file(dirs, &path, "a lease ring")?;
                out.push(Target {
                    what: What::Lease,
                    key,
                    at: Place::Below(at),
                });
            }
            (P::CohortDir(_), Some(_)) => {
                // Beneath its directory, like any file GMS's variables
                // name: refused from its statx unless a directory.
                let at = dirs.loc(&path)?;
                let dir = at.open_dir(None).map_err(failure)?;
                let key = io::inode_key(&dir)
                    .ok_or_else(|| errno(&path, "cannot stat", rustix::io::Errno::IO))?;
                drop(dir);
                out.push(Target {
                    what: What::Cohort,
                    key,
                    at: Place::Below(at),
                });
            }
            (P::Recovery(_), Some(_)) => {
                let (at, key) = named_file(dirs, &path, "recovery metadata")?;
                out.push(Target {
                    what: What::Recovery,
                    key,
                    at: Place::Below(at),
                });
            }
            (P::Index(_), Some(_)) => {
                let mut gen = path.clone().into_os_string();
                gen.push(".gen");
                for p in [path.clone(), PathBuf::from(gen)] {
                    if io::lstat_kind(&p).map_err(failure)?.is_some() {
                        let (at, key) = named_file(dirs, &p, "a superseded block index")?;
                        if let Some(
                            t @ Target {
                                what: What::Superseded(_),
                                ..
                            },
                        ) = by_content(at, Some(key))?
                        {
                            out.push(t);
                        }
                    }
                }
            }
            (_, Some(t)) => {
                return Err(Failure::usage(
                    format!(
                        "{}: is a {}, not a directory, where GMS keeps {}",
                        crate::format::text::terminal(&display_path(&path)),
                        io::type_words(t),
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

/// Opens a cohort target's directory for one read.
fn cohort_dir(t: &Target) -> Result<CohortDir<'_>, Failure> {
    match &t.at {
        Place::Itself(fd, _) => Ok(CohortDir::Held(fd)),
        Place::Below(at) => at
            .open_dir(Some(t.key))
            .map(CohortDir::Opened)
            .map_err(failure),
    }
}

enum CohortDir<'a> {
    Held(&'a OwnedFd),
    Opened(OwnedFd),
}

impl CohortDir<'_> {
    fn fd(&self) -> &OwnedFd {
        match self {
            CohortDir::Held(f) => f,
            CohortDir::Opened(f) => f,
        }
    }
}

/// The lock keys (device, inode) of every cohort and `.leader` file of the
/// cohort directories, for the kernel's lock table.
fn cohort_inodes(targets: &[Target]) -> BTreeSet<io::Key> {
    let mut out = BTreeSet::new();
    for t in targets {
        if !matches!(t.what, What::Cohort) {
            continue;
        }
        let Ok(dir) = cohort_dir(t) else { continue };
        let Ok(entries) = io::entries(dir.fd()) else {
            continue;
        };
        for e in entries {
            if matches!(
                format::cohort_name_of(e.name.as_bytes()),
                format::CohortName::Cohort(_) | format::CohortName::Leader(_)
            ) {
                out.insert(e.key);
            }
        }
    }
    out
}

/// Reads every target once, one open at a time.
fn read_all(targets: &[Target], ask: &RecoveryAsk) -> Result<Vec<Read>, Failure> {
    let inodes = cohort_inodes(targets);
    let locks = (!inodes.is_empty()).then(|| io::LockTable::read(&inodes));
    let mut out = Vec::new();
    for t in targets {
        let path = t.path();
        let e = |e| errno(path, "cannot read", e);
        let file = || match &t.at {
            Place::Below(at) => at.open(Some(t.key)).map_err(failure),
            Place::Itself(..) => Err(Failure::internal("a directory read as a file", None)),
        };
        out.push(match t.what {
            What::Lease => Read::Lease(io::read_lease(&file()?).map_err(e)?),
            What::Recovery => Read::Recovery(io::read_recovery(&file()?, ask).map_err(e)?),
            What::Superseded(s) => {
                let Place::Below(at) = &t.at else {
                    return Err(Failure::internal("a directory read as a file", None));
                };
                Read::Superseded(io::read_superseded(&file()?, s, at).map_err(e)?)
            }
            What::Cohort => {
                let dir = cohort_dir(t)?;
                Read::Cohort(
                    io::read_cohort(dir.fd(), path, locks.as_ref().expect("a cohort target"))
                        .map_err(failure)?,
                )
            }
        });
    }
    Ok(out)
}

/// Finds, reads twice and judges (docs/format.md §14). GMS's variables
/// are read from `options.env`, never from this process's environment.
pub fn run(options: &Options) -> Result<Run, Failure> {
    let mut looked = Vec::new();
    let mut targets = Vec::new();
    let mut dirs = Dirs::default();
    if options.paths.is_empty() {
        let env = |k: &str| options.env.get(std::ffi::OsStr::new(k)).cloned();
        discovered(&mut dirs, &env, &mut looked, &mut targets)?;
    } else {
        for p in &options.paths {
            named(&mut dirs, p, &mut targets)?;
        }
    }
    // One artifact named twice (a PATH and its directory, or two paths
    // to one file) is read once: by identity, not by spelling.
    let mut seen = BTreeSet::new();
    targets.retain(|t| seen.insert(t.key));
    let first = read_all(&targets, &options.ask)?;
    if !targets.is_empty() {
        std::thread::sleep(std::time::Duration::from_millis(options.interval_ms));
    }
    let second = read_all(&targets, &options.ask)?;
    let live = options.live.then(|| {
        let mut owners = BTreeSet::new();
        for r in first.iter().chain(&second) {
            if let Read::Lease(l) = r {
                if let Some(s) = &l.scan {
                    owners.extend(s.owners.keys().copied());
                }
            }
        }
        let rings: BTreeSet<io::Key> = targets
            .iter()
            .filter(|t| matches!(t.what, What::Lease))
            .map(|t| t.key)
            .collect();
        let namespaces = if rings.is_empty() {
            BTreeMap::new()
        } else {
            io::ring_namespaces(&rings)
        };
        (io::lease_live(&owners), namespaces)
    });
    let mut artifacts = Vec::new();
    for (t, (a, b)) in targets.iter().zip(first.into_iter().zip(second)) {
        let path = t.path();
        let (kind, findings, facts) = match (a, b) {
            (Read::Lease(a), Read::Lease(b)) => {
                // The barrier's pid, read only while it is held (GMS never
                // clears it).
                let pid = [&b, &a]
                    .into_iter()
                    .filter_map(|r| r.header)
                    .find(|h| h.active_mutations == format::LEASE_BARRIER)
                    .map(|h| h.recovery_owner_pid);
                let live = live.as_ref().map(|(base, namespaces)| {
                    let unknown = Err("the ring was not looked for in /proc".to_string());
                    io::ring_live(base, namespaces.get(&t.key).unwrap_or(&unknown), pid)
                });
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
            path: path.to_path_buf(),
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
