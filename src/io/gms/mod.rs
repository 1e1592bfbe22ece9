//! The GMS service (docs/format.md §14): finds the artifacts (where GMS
//! puts them, or in the PATHs given), reads every one once, waits the
//! interval, reads every one again, gathers the live facts and judges
//! (`crate::rules::gms`); printing is `crate::report::gms`'s. [`read`] is
//! everything that touches the system: discovery, the read-only opens,
//! `/proc/locks`, the cohort probe, the processes `--live` asks about.

pub mod read;

use self::read as io;
use crate::format::failure::{Failure, Kind as FailureKind};
use crate::format::gms::{self as format, Magic, Superseded};
use crate::rules::gms::{
    self as rules, Artifact, CohortRead, Facts, Kind, LeaseRead, Looked, Options, RecoveryAsk,
    RecoveryRead, Run, SupersededRead, NAMESPACE_DEVICES,
};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

fn failure(e: io::ReadError) -> Failure {
    let path = crate::format::text::terminal(&e.path.to_string_lossy()).into_owned();
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
    let shown = || crate::format::text::terminal(&path.to_string_lossy()).into_owned();
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
            let entries = io::entries(&dir).map_err(|e| failure(e.at(path)))?;
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
                        let e = io::entries(&d).map_err(|e| failure(e.at(&p)))?;
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
                        crate::format::text::terminal(&path.to_string_lossy()),
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
        for r in first.iter().chain(&second) {
            if let Read::Lease(l) = r {
                if let Some(s) = &l.scan {
                    owners.extend(s.owners.keys().copied());
                }
            }
        }
        io::lease_live(&owners)
    });
    let mut artifacts = Vec::new();
    for ((path, t), (a, b)) in targets.iter().zip(first.into_iter().zip(second)) {
        let (kind, findings, facts) = match (a, b) {
            (Read::Lease(a), Read::Lease(b)) => {
                // The barrier's pid, read only while it is held (GMS never
                // clears it).
                let pid = [&b, &a]
                    .into_iter()
                    .filter_map(|r| r.header)
                    .find(|h| h.active_mutations == format::LEASE_BARRIER)
                    .map(|h| h.recovery_owner_pid);
                let ring = match t {
                    Target::Lease(o) => Some(o),
                    _ => None,
                };
                let live = live
                    .as_ref()
                    .zip(ring)
                    .map(|(base, o)| io::ring_live(base, o, pid));
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
