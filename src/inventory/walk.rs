//! The inventory walk: classify, check and (for descriptors) read each entry.

use super::open::{self, FileId};
use super::{
    classify_name, display_path, parse_rank_name, Entry, EntryKind, InventoryError, ScanOptions,
    ScanStats, MAX_DESCRIPTOR_DEPTH,
};
use crate::descriptor::MAX_FILE_BYTES;
use crate::finding::{Code, Finding};
use std::fs::Metadata;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use walkdir::WalkDir;

/// Resolves the operator's root once: a symlinked root is followed on
/// purpose and the resolved path is what the report shows. A missing root or
/// one that is not a directory is an error naming the path (exit 2).
pub fn resolve_root(root: &Path) -> Result<PathBuf, InventoryError> {
    let shown = display_path(root);
    let resolved = std::fs::canonicalize(root).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => InventoryError::NotFound {
            path: shown.clone(),
        },
        std::io::ErrorKind::NotADirectory => InventoryError::NotADirectory {
            path: shown.clone(),
        },
        _ => InventoryError::Resolve {
            path: shown.clone(),
            source: e,
        },
    })?;
    let md = std::fs::metadata(&resolved).map_err(|e| InventoryError::Resolve {
        path: shown.clone(),
        source: e,
    })?;
    if !md.is_dir() {
        return Err(InventoryError::NotADirectory { path: shown });
    }
    Ok(resolved)
}

/// One KV003 reason: the finding and the words a descriptor below inherits.
#[derive(Clone)]
struct PermIssue {
    why: String,
    finding: Finding,
}

/// One directory found unsafe (KV003), inherited by the descriptors below it.
struct UnsafeDir {
    depth: usize,
    at: String,
    issues: Vec<PermIssue>,
}

/// KV003 checks on a mode/uid pair: writable by group/others, or owned by a
/// uid that is neither root nor the effective uid of this process.
fn permission_issues(mode: u32, uid: u32, euid: u32, what: &str, at: &str) -> Vec<PermIssue> {
    let mut out = Vec::new();
    if mode & 0o022 != 0 {
        let why = "is writable by group/others".to_string();
        out.push(PermIssue {
            finding: Finding::reject(Code::KV003, format!("{what} {why}"))
                .at(at)
                .values("not group/other-writable", format!("{:04o}", mode & 0o7777)),
            why,
        });
    }
    if uid != 0 && uid != euid {
        let expected = if euid == 0 {
            "uid 0".to_string()
        } else {
            format!("uid 0 or {euid}")
        };
        let why = format!("is owned by uid {uid}, neither root nor the invoking user");
        out.push(PermIssue {
            finding: Finding::reject(Code::KV003, format!("{what} {why}"))
                .at(at)
                .values(expected, format!("uid {uid}")),
            why,
        });
    }
    out
}

fn findings_of(issues: &[PermIssue]) -> impl Iterator<Item = Finding> + '_ {
    issues.iter().map(|i| i.finding.clone())
}

/// The KV003 a descriptor inherits from an unsafe directory above it.
fn inherited(dir: &UnsafeDir, issue: &PermIssue, at: &str) -> Finding {
    let subject = if dir.at == "." {
        "the inventory root directory".to_string()
    } else {
        format!("directory {}", dir.at)
    };
    let mut f = Finding::reject(Code::KV003, format!("{subject} {}", issue.why)).at(at);
    f.expected.clone_from(&issue.finding.expected);
    f.found.clone_from(&issue.finding.found);
    f
}

struct Scanner<'a> {
    root: &'a Path,
    root_fd: BorrowedFd<'a>,
    euid: u32,
    buf: Vec<u8>,
    unsafe_dirs: Vec<UnsafeDir>,
}

/// Walks the resolved `root` and calls `visit` once per reported entry, in
/// walk order (sorted by file name, pre-order). For a descriptor that opened
/// and read fine the second argument is its bytes (a buffer reused across
/// files). Directories are reported only when they carry findings.
pub fn scan<F: FnMut(Entry, Option<&[u8]>)>(
    root: &Path,
    opts: &ScanOptions,
    mut visit: F,
) -> Result<ScanStats, InventoryError> {
    let _ = opts;
    let shown = display_path(root);
    let root_file = open::open_root(root).map_err(|e| InventoryError::OpenRoot {
        path: shown.clone(),
        source: e,
    })?;
    let root_md = root_file.metadata().map_err(|e| InventoryError::OpenRoot {
        path: shown.clone(),
        source: e,
    })?;
    let mut sc = Scanner {
        root,
        root_fd: root_file.as_fd(),
        euid: rustix::process::geteuid().as_raw(),
        buf: Vec::new(),
        unsafe_dirs: Vec::new(),
    };
    let mut stats = ScanStats::default();
    let mut emit = |entry: Entry, bytes: Option<&[u8]>, stats: &mut ScanStats| {
        stats.entries += 1;
        if matches!(entry.kind, EntryKind::Descriptor { .. }) {
            stats.descriptors += 1;
        }
        visit(entry, bytes);
    };

    let mut it = WalkDir::new(root)
        .follow_links(false)
        .sort_by_file_name()
        .max_depth(MAX_DESCRIPTOR_DEPTH + 1)
        .into_iter();
    while let Some(item) = it.next() {
        let dent = match item {
            Ok(d) => d,
            Err(err) => {
                let entry = sc.walk_error(&err);
                emit(entry, None, &mut stats);
                continue;
            }
        };
        let depth = dent.depth();
        sc.unsafe_dirs.retain(|u| u.depth < depth);
        if depth == 0 {
            if let Some(entry) = sc.root_entry(&dent, &root_md)? {
                emit(entry, None, &mut stats);
            }
            continue;
        }
        let rel = dent
            .path()
            .strip_prefix(root)
            .unwrap_or(dent.path())
            .to_path_buf();
        let at = display_path(&rel);
        let ft = dent.file_type();

        if depth > MAX_DESCRIPTOR_DEPTH {
            if ft.is_dir() {
                it.skip_current_dir();
            }
            let kind = if ft.is_dir() {
                EntryKind::Dir
            } else {
                EntryKind::Stray
            };
            let f = Finding::notice(
                Code::KV010,
                format!("beyond the depth limit of {MAX_DESCRIPTOR_DEPTH}; not read"),
            )
            .at(&at);
            emit(sc.entry(rel, kind, vec![f], 0), None, &mut stats);
            continue;
        }

        let name = dent.file_name();
        if ft.is_symlink() {
            let found = open::symlink_description(sc.root_fd, &rel);
            let f = Finding::reject(Code::KV001, format!("{found}; never followed"))
                .at(&at)
                .values("regular file or directory", found);
            let kind = classify_name(name);
            let entry = sc.with_inherited(sc.entry(rel, kind, vec![f], 0), &at);
            emit(entry, None, &mut stats);
            continue;
        }

        // lstat of the listed entry (walkdir does not follow here).
        let md = match dent.metadata() {
            Ok(md) => md,
            Err(e) => {
                let kind = if ft.is_dir() {
                    dir_kind(name)
                } else {
                    classify_name(name)
                };
                let f = Finding::reject(Code::KV005, format!("cannot stat: {e}")).at(&at);
                let entry = sc.with_inherited(sc.entry(rel, kind, vec![f], 0), &at);
                emit(entry, None, &mut stats);
                continue;
            }
        };

        if ft.is_dir() {
            let mut findings = Vec::new();
            let kind = dir_kind(name);
            if let EntryKind::Descriptor { .. } = kind {
                findings.push(
                    Finding::reject(Code::KV002, "a directory with a descriptor's name")
                        .at(&at)
                        .values("regular file", "directory"),
                );
            }
            let perms = permission_issues(md.mode(), md.uid(), sc.euid, "directory", &at);
            findings.extend(findings_of(&perms));
            // Inherit from the dirs above before registering this one.
            let mut entry = sc.entry(rel, kind, findings, 0);
            if matches!(entry.kind, EntryKind::Descriptor { .. }) {
                entry = sc.with_inherited(entry, &at);
            }
            if !perms.is_empty() {
                sc.unsafe_dirs.push(UnsafeDir {
                    depth,
                    at: at.clone(),
                    issues: perms,
                });
            }
            if !entry.findings.is_empty() {
                emit(entry, None, &mut stats);
            }
            continue;
        }

        let kind = classify_name(name);
        if !ft.is_file() {
            // FIFO, socket, device: decided from the listing, never opened.
            let what = open::type_name(ft);
            let mut findings = Vec::new();
            if kind == EntryKind::Torn {
                findings.push(torn(&at));
            }
            findings.push(
                Finding::reject(
                    Code::KV002,
                    format!("not a regular file ({what}); not opened"),
                )
                .at(&at)
                .values("regular file", what),
            );
            let entry = sc.with_inherited(sc.entry(rel, kind, findings, 0), &at);
            emit(entry, None, &mut stats);
            continue;
        }

        match kind {
            EntryKind::Torn => {
                emit(sc.entry(rel, kind, vec![torn(&at)], 0), None, &mut stats);
            }
            EntryKind::Stray | EntryKind::Dir => {
                let f = Finding::notice(Code::KV010, "unexpected file; not read").at(&at);
                emit(
                    sc.entry(rel, EntryKind::Stray, vec![f], 0),
                    None,
                    &mut stats,
                );
            }
            EntryKind::Descriptor { .. } => {
                let (mut entry, ok) = sc.read_descriptor(rel, kind, &md, &at);
                entry = sc.with_inherited(entry, &at);
                let bytes = if ok { Some(&sc.buf[..]) } else { None };
                emit(entry, bytes, &mut stats);
            }
        }
    }
    Ok(stats)
}

fn torn(at: &str) -> Finding {
    Finding::reject(Code::KV009, "staging leftover of an interrupted write").at(at)
}

/// A directory is `Descriptor` when it carries a descriptor's name (KV002).
fn dir_kind(name: &std::ffi::OsStr) -> EntryKind {
    match parse_rank_name(name) {
        Some(name_rank) => EntryKind::Descriptor { name_rank },
        None => EntryKind::Dir,
    }
}

impl Scanner<'_> {
    fn entry(
        &self,
        rel_path: PathBuf,
        kind: EntryKind,
        findings: Vec<Finding>,
        mode: u32,
    ) -> Entry {
        Entry {
            rel_path,
            kind,
            findings,
            mode,
        }
    }

    /// Adds the KV003 of every unsafe directory above a descriptor.
    fn with_inherited(&self, mut entry: Entry, at: &str) -> Entry {
        if !matches!(entry.kind, EntryKind::Descriptor { .. }) {
            return entry;
        }
        for dir in &self.unsafe_dirs {
            for issue in &dir.issues {
                entry.findings.push(inherited(dir, issue, at));
            }
        }
        entry
    }

    /// The root itself: reported only when unsafe (KV003).
    fn root_entry(
        &mut self,
        dent: &walkdir::DirEntry,
        root_md: &Metadata,
    ) -> Result<Option<Entry>, InventoryError> {
        let listed = dent.metadata().ok().map(|m| FileId::of(&m));
        if listed.is_some_and(|id| id != FileId::of(root_md)) {
            return Err(InventoryError::RootChanged {
                path: display_path(self.root),
            });
        }
        let perms = permission_issues(
            root_md.mode(),
            root_md.uid(),
            self.euid,
            "the inventory root directory",
            ".",
        );
        if perms.is_empty() {
            return Ok(None);
        }
        let findings = findings_of(&perms).collect();
        self.unsafe_dirs.push(UnsafeDir {
            depth: 0,
            at: ".".to_string(),
            issues: perms,
        });
        Ok(Some(self.entry(
            PathBuf::from("."),
            EntryKind::Dir,
            findings,
            0,
        )))
    }

    /// A walkdir error (e.g. a directory that cannot be listed): KV005.
    fn walk_error(&self, err: &walkdir::Error) -> Entry {
        let rel = err
            .path()
            .map(|p| p.strip_prefix(self.root).unwrap_or(p).to_path_buf())
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| PathBuf::from("."));
        let at = display_path(&rel);
        let msg = match err.io_error() {
            Some(e) => format!("cannot list: {e}"),
            None => format!("cannot list: {err}"),
        };
        let kind = rel
            .file_name()
            .and_then(parse_rank_name)
            .map_or(EntryKind::Dir, |name_rank| EntryKind::Descriptor {
                name_rank,
            });
        let f = Finding::reject(Code::KV005, msg).at(&at);
        self.with_inherited(self.entry(rel, kind, vec![f], 0), &at)
    }

    /// Opens (race-free) and reads one descriptor. Returns the entry and
    /// whether `self.buf` holds its complete bytes.
    fn read_descriptor(
        &mut self,
        rel: PathBuf,
        kind: EntryKind,
        listed: &Metadata,
        at: &str,
    ) -> (Entry, bool) {
        let (mut file, md) = match open::open_listed(self.root_fd, &rel, FileId::of(listed)) {
            Ok(x) => x,
            Err(f) => return (self.entry(rel, kind, vec![*f], 0), false),
        };
        let mode = md.mode();
        let mut findings: Vec<Finding> = findings_of(&permission_issues(
            mode,
            md.uid(),
            self.euid,
            "descriptor",
            at,
        ))
        .collect();
        if md.len() > MAX_FILE_BYTES {
            findings.push(
                Finding::reject(
                    Code::KV004,
                    format!("larger than {MAX_FILE_BYTES} bytes; rejected unread"),
                )
                .at(at)
                .values(
                    format!("≤ {MAX_FILE_BYTES} bytes"),
                    format!("{} bytes", md.len()),
                ),
            );
            return (self.entry(rel, kind, findings, mode), false);
        }
        if let Err(e) = open::read_capped(&mut file, &mut self.buf) {
            findings.push(Finding::reject(Code::KV005, format!("cannot read: {e}")).at(at));
            return (self.entry(rel, kind, findings, mode), false);
        }
        if self.buf.len() as u64 > MAX_FILE_BYTES {
            findings.push(
                Finding::reject(
                    Code::KV004,
                    format!("grew past {MAX_FILE_BYTES} bytes while being read"),
                )
                .at(at)
                .values(
                    format!("≤ {MAX_FILE_BYTES} bytes"),
                    format!("more than {MAX_FILE_BYTES} bytes"),
                ),
            );
            return (self.entry(rel, kind, findings, mode), false);
        }
        (self.entry(rel, kind, findings, mode), true)
    }
}
