//! `kvcr pools`: the read-only checker of what NVIDIA's KV Cache Runner
//! (KVCR 0.1.1) keeps on a node (docs/format.md §16): pool files with their
//! recovery journal and handback region, and the primary's G3 files. One
//! vertical folder, lowest layer first:
//!
//! - [`codes`]: the finding codes KV401–KV499 and their `kvcr explain` texts;
//! - [`mod@format`]: the on-disk layout as pinned constants and strict decoders;
//! - [`rules`]: the facts of a read, and the pure judgement of a pool, a
//!   group and the run;
//! - [`read`]: the read-only opens and `pread`s; [`live`]: who holds what,
//!   from `/proc`;
//! - [`mod@print`]: the table, the `kvcr.pools-report/v1` document and the
//!   Prometheus text;
//! - this file: the run (find, read twice, look at `/proc`, judge).

pub mod codes;
pub mod format;
pub mod live;
pub mod print;
pub mod read;
pub mod rules;
#[cfg(test)]
mod tests;

use self::format::Name;
use self::rules::{
    EntryKind, Finding, G3State, Handback, Liveness, Options, PoolRead, PoolReport, Run,
};
use crate::format::failure::Failure;
use rustix::fs::FileType;
use std::collections::BTreeSet;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// The directory KVCR's documentation uses for `--pool-dir` (a convention,
/// not a default: the flag is required).
pub const DOCUMENTED_POOL_DIR: &str = "/dev/shm/kvcr";

fn usage(path: &Path, what: &str, hint: &str) -> Failure {
    Failure::usage(
        format!(
            "{}: {what}",
            crate::format::text::terminal(&path.to_string_lossy())
        ),
        Some(hint.to_string()),
    )
}

/// What a caller asks for, as `kvcr pools`'s flags spell it (the command
/// line and the library both resolve it here, into `Options`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Asked {
    /// `--live`: who holds each pool, from `/proc`.
    pub live: bool,
    /// `--socket-path`: the service's socket.
    pub socket_path: Option<PathBuf>,
    /// `--guard-count`: pool_0 … pool_{N-1} expected.
    pub guard_count: Option<u64>,
    /// `--pool-sizes-gb` as given (`0.0001`, `64,32`).
    pub pool_sizes_gb: Option<String>,
    /// `--journal-bytes` (`None`: KVCR's CLI's 104,857,600).
    pub journal_bytes: Option<u64>,
    /// `--pool-layouts NAME:BYTES,...`.
    pub pool_layouts: Option<String>,
    /// `--compatibility-digest`.
    pub compatibility_digest: Option<String>,
    /// `--page-size` (`None`: 4096).
    pub page_size: Option<u64>,
    /// `G3Options.paths`, in the primary's order.
    pub g3_paths: Vec<PathBuf>,
    /// `G3Options.capacity_bytes_per_file`.
    pub capacity_bytes_per_file: Option<u64>,
    /// The original file's `(st_dev, st_ino)`, to check a copy's digest.
    pub identity: Option<(u64, u64)>,
    /// `--interval-ms` (`None`: 100; at most 60,000).
    pub interval_ms: Option<u64>,
}

/// The most milliseconds between the two reads.
pub const MAX_INTERVAL_MS: u64 = 60_000;

/// Resolves what was asked into [`Options`]: `--pool-sizes-gb` and
/// `--pool-layouts` parsed as KVCR parses them; a value KVCR would refuse
/// is a usage error naming the flag.
pub fn resolve(paths: &[PathBuf], a: &Asked) -> Result<Options, Failure> {
    let bad = |flag: &str, e: String, hint: &str| {
        Failure::usage(format!("{flag}: {e}"), Some(hint.to_string()))
    };
    let page_size = a.page_size.unwrap_or(format::DEFAULT_PAGE_SIZE);
    if page_size == 0 {
        return Err(bad(
            "--page-size",
            "must be at least 1".into(),
            "give the writing host's page \
            size",
        ));
    }
    let interval_ms = a.interval_ms.unwrap_or(100);
    if interval_ms > MAX_INTERVAL_MS {
        return Err(bad(
            "--interval-ms",
            format!("{interval_ms} is out of range: 0 to {MAX_INTERVAL_MS}"),
            "give a shorter interval",
        ));
    }
    if a.guard_count == Some(0) {
        return Err(bad(
            "--guard-count",
            "must be at least 1".into(),
            "give the service's \
            --guard-count",
        ));
    }
    let pool_sizes_bytes = a
        .pool_sizes_gb
        .as_deref()
        .map(|s| format::parse_pool_sizes_gb(s, page_size))
        .transpose()
        .map_err(|e| {
            bad(
                "--pool-sizes-gb",
                e,
                "give the service's --pool-sizes-gb as it was \
            started",
            )
        })?;
    let pool_layouts = a
        .pool_layouts
        .as_deref()
        .map(format::parse_pool_layouts)
        .transpose()
        .map_err(|e| {
            bad(
                "--pool-layouts",
                e,
                "give the claimant's pool_layouts as \
            NAME:BLOCK_BYTES,...",
            )
        })?;
    Ok(Options {
        paths: paths.to_vec(),
        live: a.live,
        socket_path: a.socket_path.clone(),
        guard_count: a.guard_count,
        pool_sizes_bytes,
        journal_bytes: a.journal_bytes.unwrap_or(format::DEFAULT_JOURNAL_BYTES),
        pool_layouts,
        compatibility_digest: a.compatibility_digest.clone(),
        page_size,
        g3_paths: a.g3_paths.clone(),
        capacity_bytes_per_file: a.capacity_bytes_per_file,
        identity: a.identity,
        interval_ms,
    })
}

/// One pool directory (or the directory of a pool file named alone).
struct Target {
    path: PathBuf,
    dir: OwnedFd,
    /// `Some(name)`: only this entry (a pool file was named).
    only: Option<Vec<u8>>,
    /// The directory a symlinked PATH resolves to (KVCR resolves
    /// `--pool-dir` the same way).
    resolved: Option<PathBuf>,
}

/// Opens a directory read-only, without following a final symlink.
fn open_dir(p: &Path) -> Result<OwnedFd, Failure> {
    read::open_ro(None, p, rustix::fs::OFlags::DIRECTORY).map_err(|e| {
        usage(
            p,
            &format!("cannot open the directory: {}", std::io::Error::from(e)),
            "run kvcr as root or as the service's user",
        )
    })
}

fn targets(o: &Options) -> Result<Vec<Target>, Failure> {
    if o.paths.is_empty() {
        return Err(Failure::usage(
            "no PATH: KVCR has no default pool directory (its service's --pool-dir is required)"
                .to_string(),
            Some(format!(
                "name the service's --pool-dir; KVCR's documentation uses {DOCUMENTED_POOL_DIR}: \
                 kvcr pools {DOCUMENTED_POOL_DIR}"
            )),
        ));
    }
    let mut out = Vec::new();
    for p in &o.paths {
        let st = match rustix::fs::lstat(p) {
            Ok(st) => st,
            Err(rustix::io::Errno::NOENT) => {
                return Err(usage(
                    p,
                    "does not exist",
                    "name the service's --pool-dir or a pool file",
                ))
            }
            Err(e) => {
                return Err(usage(
                    p,
                    &format!("cannot stat: {}", std::io::Error::from(e)),
                    "run kvcr as root or as the service's user",
                ))
            }
        };
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => {
                let dir = open_dir(p)?;
                out.push(Target {
                    path: p.clone(),
                    dir,
                    only: None,
                    resolved: None,
                });
            }
            FileType::RegularFile => {
                let name = p
                    .file_name()
                    .map(|n| n.as_bytes().to_vec())
                    .unwrap_or_default();
                if matches!(format::classify_name(&name), Name::Other) {
                    return Err(usage(
                        p,
                        "is no KVCR pool file (its name is not kvcr-<pool id>-<32 hex>)",
                        "name a pool directory or a kvcr-pool_<i>-<generation> file; G3 files \
                            are given with --g3-paths",
                    ));
                }
                let parent = p
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .unwrap_or(Path::new("."));
                let dir = open_dir(parent)?;
                out.push(Target {
                    path: p.clone(),
                    dir,
                    only: Some(name),
                    resolved: None,
                });
            }
            FileType::Symlink => {
                // KVCR resolves --pool-dir (Path.resolve()), so kvcr follows a
                // symlinked directory the same way, and says so; a pool
                // name KVCR never follows.
                let target = std::fs::canonicalize(p).ok().filter(|t| t.is_dir());
                let Some(target) = target else {
                    return Err(usage(
                        p,
                        "is a symbolic link, not to a directory (KVCR never follows a pool name)",
                        "name the pool directory or the file itself",
                    ));
                };
                let dir = open_dir(&target)?;
                out.push(Target {
                    path: p.clone(),
                    dir,
                    only: None,
                    resolved: Some(target),
                });
            }
            _ => {
                return Err(usage(
                    p,
                    "is not a directory or a regular file",
                    "name the service's \
                --pool-dir",
                ))
            }
        }
    }
    Ok(out)
}

/// A pool file to read twice.
struct Open {
    report: PoolReport,
    fd: Option<OwnedFd>,
}

fn blank(path: PathBuf, kind: EntryKind) -> PoolReport {
    PoolReport {
        path,
        index: None,
        pool_id: None,
        generation: None,
        kind,
        read: None,
        changed: Vec::new(),
        liveness: Liveness::NotChecked("offline (add --live)".into()),
        findings: Vec::new(),
        kvcr_would: String::new(),
    }
}

/// Runs `kvcr pools`: finds the pool files under each PATH, reads each
/// twice `interval_ms` apart, looks at `/proc` for `--live`, and judges.
/// `sleep` waits between the two reads (tests pass one that returns at once).
pub fn run(o: &Options, sleep: &dyn Fn(u64)) -> Result<Run, Failure> {
    let targets = targets(o)?;
    let (groups, resolved) = open_all(&targets)?;

    // The mapping size per group: given, or inferred from its pool files.
    let mappings: Vec<Option<(u64, bool)>> = groups
        .iter()
        .map(|(_, _, opens, _)| {
            o.mapping_bytes().map(|m| (m, true)).or_else(|| {
                let sizes: Vec<u64> = opens
                    .iter()
                    .filter_map(|x| x.fd.as_ref())
                    .filter_map(|fd| read::stat(fd).ok().map(|s| s.size))
                    .collect();
                rules::infer_mapping(&sizes, o.page_size).map(|m| (m, false))
            })
        })
        .collect();

    type Reads = Vec<Vec<Option<Result<PoolRead, String>>>>;
    let read_all = |groups: &Vec<(PathBuf, usize, Vec<Open>, bool)>| -> Reads {
        groups
            .iter()
            .zip(&mappings)
            .map(|((_, _, opens, _), m)| {
                opens
                    .iter()
                    .map(|x| {
                        x.fd.as_ref()
                            .map(|fd| read::read_pool(fd, o, *m, x.report.generation.as_deref()))
                    })
                    .collect()
            })
            .collect()
    };
    let first = read_all(&groups);
    sleep(o.interval_ms);
    let second = read_all(&groups);

    // Liveness.
    let mut keys: BTreeSet<(u32, u32, u64)> = BTreeSet::new();
    let key_of = |fd: &OwnedFd| {
        read::stat(fd)
            .ok()
            .map(|s| (rustix::fs::major(s.dev), rustix::fs::minor(s.dev), s.ino))
    };
    for (_, _, opens, _) in &groups {
        for x in opens {
            if let Some(k) = x.fd.as_ref().and_then(key_of) {
                keys.insert(k);
            }
        }
    }
    let g3: Vec<(PathBuf, G3Look)> = o
        .g3_paths
        .iter()
        .map(|p| (p.clone(), read::g3_state(p)))
        .collect();
    for (_, s) in &g3 {
        if let Ok((_, Some(k))) = s {
            keys.insert(*k);
        }
    }
    let snapshot = o.live.then(|| live::Snapshot::read(&keys));
    let socket = o
        .socket_path
        .as_ref()
        .map(|p| p.as_os_str().as_bytes().to_vec());

    let mut pools = Vec::new();
    let mut group_reports = Vec::new();
    let mut g3_files: BTreeSet<u64> = BTreeSet::new();
    for (gi, (path, others, opens, is_dir)) in groups.into_iter().enumerate() {
        let mut reports = Vec::new();
        for (pi, x) in opens.into_iter().enumerate() {
            let mut r = x.report;
            let a = first[gi][pi].clone();
            let b = second[gi][pi].clone();
            match (a, b) {
                (Some(Ok(a)), Some(Ok(b))) => {
                    let fa = rules::judge_read(&a, o);
                    let fb = rules::judge_read(&b, o);
                    r.changed = rules::changes(&a, &b);
                    r.findings.extend(rules::both_reads(&fa, fb));
                    if !r.changed.is_empty() {
                        r.findings.push(Finding::new(
                            codes::KV427,
                            format!(
                                "changed between the two reads, {} ms apart: {}; in motion, \
                                    judged where both reads agree",
                                o.interval_ms,
                                r.changed.join("; ")
                            ),
                        ));
                    }
                    r.read = Some(b);
                }
                (Some(Err(e)), other) | (other, Some(Err(e))) => {
                    r.findings.push(Finding::new(codes::KV427, e));
                    if let Some(Ok(x)) = other {
                        r.read = Some(x);
                    }
                }
                _ => {}
            }
            if let Some(read) = &r.read {
                for t in tables(read) {
                    g3_files.extend(t.g3_files.iter().copied());
                }
            }
            if let (Some(s), Some(fd)) = (&snapshot, x.fd.as_ref()) {
                if let Some(k) = key_of(fd) {
                    r.liveness = s.liveness(k, socket.as_deref());
                }
            }
            rules::judge_liveness(&mut r, o.live);
            reports.push(r);
        }
        if is_dir {
            let mut g = rules::judge_group(path, others, &reports, o);
            if let Some(t) = &resolved[gi] {
                g.findings.push(Finding::new(
                    codes::KV429,
                    format!(
                        "the path is a symbolic link to {}: KVCR resolves --pool-dir the same way \
                         (Path.resolve()), so its pools live there",
                        t.to_string_lossy()
                    ),
                ));
            }
            group_reports.push(g);
        }
        pools.extend(reports);
    }

    let g3 = judge_g3_paths(o, g3, &g3_files, snapshot.as_ref());
    Ok(Run {
        options: o.clone(),
        groups: group_reports,
        pools,
        g3,
    })
}

/// A G3 path's state and inode, or why it could not be looked at.
type G3Look = Result<(G3State, Option<read::InodeKey>), String>;

/// A PATH's pool files as listed and opened: the path, how many other
/// entries it holds, the opened (or already judged) entries, and whether
/// it is a directory (a group) rather than one named file.
type Listed = (PathBuf, usize, Vec<Open>, bool);

/// Lists each target and opens its pool files (never following a link);
/// an entry judged by its name or kind alone gets its finding here. With
/// each group, the path a symlinked target resolves to.
fn open_all(targets: &[Target]) -> Result<(Vec<Listed>, Vec<Option<PathBuf>>), Failure> {
    let mut groups: Vec<Listed> = Vec::new();
    let mut resolved: Vec<Option<PathBuf>> = Vec::new();
    for t in targets {
        let entries =
            read::list(&t.dir).map_err(|e| usage(&t.path, &e, "name a directory kvcr may list"))?;
        let mut others = 0;
        let mut opens = Vec::new();
        let mut found = false;
        for e in entries {
            if t.only.as_ref().is_some_and(|n| n != &e.name) {
                continue;
            }
            found = true;
            let path = if t.only.is_some() {
                t.path.clone()
            } else {
                t.path.join(std::ffi::OsString::from_vec(e.name.clone()))
            };
            let shown = String::from_utf8_lossy(&e.name).into_owned();
            let (index, pool_id, generation) = match &e.name_kind {
                Name::Other => {
                    others += 1;
                    continue;
                }
                Name::Unmatched => {
                    let mut r = blank(path, EntryKind::ForeignName(shown.clone()));
                    r.findings.push(Finding::new(
                        codes::KV401,
                        format!(
                            "{shown:?} starts with kvcr- but does not match KVCR's purge pattern \
                             kvcr-.+-[0-9a-f]{{32}}: never purged, never granted, its memory never \
                             reclaimed"
                        ),
                    ));
                    r.kvcr_would = "nothing: never purged, never granted".into();
                    opens.push(Open {
                        report: r,
                        fd: None,
                    });
                    continue;
                }
                Name::ForeignId {
                    pool_id,
                    generation,
                } => (None, Some(pool_id.clone()), Some(generation.clone())),
                Name::Pool { index, generation } => (
                    Some(*index),
                    Some(format!("pool_{index}")),
                    Some(generation.clone()),
                ),
            };
            let kind = match e.kind {
                FileType::RegularFile => EntryKind::Pool,
                FileType::Symlink => EntryKind::Symlink,
                _ => EntryKind::NotRegular,
            };
            let mut r = blank(path, kind.clone());
            r.index = index;
            r.pool_id = pool_id.clone();
            r.generation = generation;
            if index.is_none() {
                r.findings.push(Finding::new(
                    codes::KV401,
                    format!(
                        "pool id {:?} is not a service's pool_<i>: purged when unheld by any \
                         service starting on this directory, but not this service's",
                        pool_id.unwrap_or_default()
                    ),
                ));
            }
            let fd = match kind {
                EntryKind::Symlink => {
                    r.findings.push(Finding::new(
                        codes::KV402,
                        "the pool name is a symbolic link: KVCR's purge skips it and its attach \
                         fails (ELOOP); kvcr does not follow it",
                    ));
                    r.kvcr_would = "skip it at the purge; fail every attach".into();
                    None
                }
                EntryKind::NotRegular => {
                    r.findings.push(Finding::new(
                        codes::KV403,
                        format!(
                            "the pool name is a {}, not a regular file: never attached, \
                            never purged",
                            kind_word(e.kind)
                        ),
                    ));
                    r.kvcr_would = "leave it at the purge; never attach it".into();
                    None
                }
                _ => match read::open_pool(&t.dir, &e.name) {
                    Ok(fd) => Some(fd),
                    Err(why) => {
                        return Err(usage(
                            &r.path,
                            &why,
                            "run kvcr as root or as the service's user",
                        ));
                    }
                },
            };
            opens.push(Open { report: r, fd });
        }
        if t.only.is_some() && !found {
            return Err(usage(
                &t.path,
                "vanished while it was listed",
                "run kvcr again",
            ));
        }
        groups.push((t.path.clone(), others, opens, t.only.is_none()));
        resolved.push(t.resolved.clone());
    }
    Ok((groups, resolved))
}

/// What `--g3-paths` named, as [`run`] looked at it: each path's state
/// (its locks from the live snapshot), judged, and KV425 for a path named
/// twice. `g3_files` holds the indices the pools' tables name.
fn judge_g3_paths(
    o: &Options,
    g3: Vec<(PathBuf, G3Look)>,
    g3_files: &BTreeSet<u64>,
    snapshot: Option<&live::Snapshot>,
) -> Vec<(PathBuf, G3State, Vec<Finding>)> {
    g3.into_iter()
        .enumerate()
        .map(|(i, (p, s))| {
            let named = g3_files.contains(&(i as u64));
            let twice = o.g3_paths[..i]
                .iter()
                .any(|q| q.as_os_str().as_bytes() == p.as_os_str().as_bytes());
            let (state, findings) = match s {
                Ok((state, key)) => {
                    let mut state = state;
                    if let (G3State::File { locks, .. }, Some(snap), Some(k)) =
                        (&mut state, snapshot, key)
                    {
                        *locks = Some(snap.locks_on(k));
                    }
                    let mut f = rules::judge_g3(&state, named, o);
                    if twice {
                        f.push(Finding::new(
                            codes::KV425,
                            "named twice in --g3-paths: KVCR requires distinct G3 files (after \
                             realpath), so the primary does not start",
                        ));
                    }
                    (state, f)
                }
                Err(e) => (G3State::NotRegular, vec![Finding::new(codes::KV425, e)]),
            };
            (p, state, findings)
        })
        .collect()
}

fn tables(r: &PoolRead) -> Vec<&rules::Table> {
    let mut v = Vec::new();
    if let Handback::Present(reg) = &r.handback {
        if let Ok(t) = &reg.records {
            v.push(t);
        }
    }
    if let Some(p) = r.journal.as_ref().and_then(|j| j.pending.as_ref()) {
        v.push(&p.table);
    }
    v
}

fn kind_word(t: FileType) -> &'static str {
    match t {
        FileType::Directory => "directory",
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        _ => "special file",
    }
}
