//! The inventory walk: list, classify and check each entry; descriptors are
//! handed to the reader (`reader.rs`).
//!
//! The walk and the reading are separate steps: [`InventoryRoot::walk`]
//! lists and classifies entries in walk order and hands each descriptor out
//! as a [`ReadJob`]; a [`Reader`] (one per thread, each with its own reused
//! buffer) opens and reads it. One thread can do both; the audit
//! pipeline (`crate::io::pipeline`) reads on several.

use super::beneath::{Beneath, Now};
use super::open::{self, mode_type_name, mount_id, FileId, OpenError};
use super::perms::{findings_of, permission_issues, Owners, PermIssue};
use super::reader::{ReadJob, Reader};
use super::{Entry, EntryKind, InventoryError, ScanStats};
use crate::format::finding::{Code, Finding};
use crate::format::names::{classify_name, display_path, parse_rank_name, MAX_DESCRIPTOR_DEPTH};
use rustix::fs::Stat;
use std::fs::{File, Metadata};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use walkdir::{DirEntryExt, WalkDir};

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

/// One directory found unsafe (KV003), inherited by the descriptors below it.
struct UnsafeDir {
    depth: usize,
    at: String,
    issues: Vec<PermIssue>,
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
    f.about(issue.finding.subject)
}

struct Scanner<'a> {
    root: &'a Path,
    root_fd: BorrowedFd<'a>,
    owners: Owners,
    unsafe_dirs: Vec<UnsafeDir>,
    /// The last directory that could not be opened beneath the root.
    failed_dir: Option<PathBuf>,
}

/// The resolved root, held open for one run: [`InventoryRoot::walk`] lists
/// beneath it and every [`Reader`] opens through its fd.
pub struct InventoryRoot {
    root: PathBuf,
    file: File,
    md: Metadata,
    owners: Owners,
}

/// One step of the walk, in walk order.
#[derive(Debug)]
pub enum Listed {
    /// An entry that is complete without reading a file.
    Entry(Entry),
    /// A descriptor (a regular file named `rank-<R>.json`) to read.
    Read(ReadJob),
}

impl InventoryRoot {
    /// Opens the resolved `root` (see [`resolve_root`]); files are trusted
    /// when root, this process's user or the declared `producer` owns them
    /// (docs/format.md §2.4).
    pub fn open(root: &Path, producer: Option<u32>) -> Result<InventoryRoot, InventoryError> {
        let shown = display_path(root);
        let file = open::open_root(root).map_err(|e| InventoryError::OpenRoot {
            path: shown.clone(),
            source: e,
        })?;
        let md = file.metadata().map_err(|e| InventoryError::OpenRoot {
            path: shown.clone(),
            source: e,
        })?;
        Ok(InventoryRoot {
            root: root.to_path_buf(),
            file,
            md,
            owners: Owners::of_this_process(producer),
        })
    }

    /// A reader with its own buffer; one per thread.
    pub fn reader(&self) -> Reader<'_> {
        Reader::new(self.file.as_fd(), self.md.dev(), self.owners)
    }

    /// Lists beneath the root and calls `visit` once per reported entry or
    /// descriptor to read, in walk order (sorted by file name, pre-order).
    /// Directories are reported only when they carry findings. Nothing is
    /// opened here but directories.
    pub fn walk<F: FnMut(Listed)>(&self, mut visit: F) -> Result<ScanStats, InventoryError> {
        walk(self, &mut visit)
    }
}

/// What the walk does with one listed entry: what it reports (if anything)
/// and whether it skips the rest of the current directory (walkdir's
/// `skip_current_dir`: a directory's contents when the entry is a
/// directory, the rest of its parent otherwise).
#[derive(Default)]
struct Step {
    listed: Option<Listed>,
    skip_dir: bool,
}

impl Step {
    fn entry(entry: Entry) -> Step {
        Step {
            listed: Some(Listed::Entry(entry)),
            skip_dir: false,
        }
    }

    fn read(job: ReadJob) -> Step {
        Step {
            listed: Some(Listed::Read(job)),
            skip_dir: false,
        }
    }

    fn skip_dir(mut self, skip: bool) -> Step {
        self.skip_dir |= skip;
        self
    }
}

/// The state of one walk: the scanner (unsafe directories above, the last
/// directory that failed) and the parents held open beneath the root.
struct Walker<'a> {
    sc: Scanner<'a>,
    /// Entries reported without being opened are looked up again through
    /// their parent, held open beneath the root (see `beneath`).
    beneath: Beneath<'a>,
    root_md: &'a Metadata,
    root_mnt: Option<u64>,
}

fn walk(inv: &InventoryRoot, visit: &mut dyn FnMut(Listed)) -> Result<ScanStats, InventoryError> {
    let root = inv.root.as_path();
    let mut w = Walker {
        sc: Scanner {
            root,
            root_fd: inv.file.as_fd(),
            owners: inv.owners,
            unsafe_dirs: Vec::new(),
            failed_dir: None,
        },
        beneath: Beneath::new(inv.file.as_fd()),
        root_md: &inv.md,
        root_mnt: None,
    };
    let mut stats = ScanStats::default();
    // No depth limit on the walk: the limit bounds where descriptors are
    // read, not where unsafe entries (symlinks, devices, mounts) are found.
    let mut it = WalkDir::new(root)
        .follow_links(false)
        .sort_by(|a, b| leaf(a.path()).cmp(leaf(b.path())))
        .into_iter();
    w.root_mnt = mount_id(inv.file.as_fd(), None);
    while let Some(item) = it.next() {
        let step = match item {
            Ok(dent) => w.step(&dent)?,
            Err(err) => Step::entry(w.sc.walk_error(&err)),
        };
        if step.skip_dir {
            it.skip_current_dir();
        }
        if let Some(listed) = step.listed {
            stats.entries += 1;
            let descriptor = match &listed {
                Listed::Entry(e) => matches!(e.kind, EntryKind::Descriptor { .. }),
                Listed::Read(_) => true,
            };
            if descriptor {
                stats.descriptors += 1;
            }
            visit(listed);
        }
    }
    Ok(stats)
}

/// `path` below `root`: what `Path::strip_prefix` answers (or `path`
/// itself), found by comparing bytes where the path is `root`, a slash and
/// plain names (how walkdir joins what it lists); anything else is left to
/// `strip_prefix`. Component by component, the same names: a root that is
/// not empty and does not end with a slash, then one separator, then
/// components that are neither empty nor `.` (which `strip_prefix` would
/// skip).
fn below<'p>(path: &'p Path, root: &Path) -> &'p Path {
    use std::os::unix::ffi::OsStrExt;
    let (p, r) = (path.as_os_str().as_bytes(), root.as_os_str().as_bytes());
    let plain = |rest: &[u8]| {
        !rest.is_empty()
            && rest
                .split(|b| *b == b'/')
                .all(|c| !c.is_empty() && c != b".")
    };
    match p.strip_prefix(r).and_then(|x| x.strip_prefix(b"/")) {
        Some(rest) if !r.is_empty() && !r.ends_with(b"/") && plain(rest) => {
            Path::new(std::ffi::OsStr::from_bytes(rest))
        }
        _ => path.strip_prefix(root).unwrap_or(path),
    }
}

/// walkdir's `DirEntry::file_name` of an entry at `path` (its last
/// component, or the whole path when it has none), read from the bytes
/// after the last slash when they are a plain name; otherwise asked of
/// `Path::file_name` as walkdir asks it. The walk's order and every name
/// check use it.
fn leaf(path: &Path) -> &std::ffi::OsStr {
    use std::os::unix::ffi::OsStrExt;
    let p = path.as_os_str().as_bytes();
    let last = p.rsplit(|b| *b == b'/').next().unwrap_or(p);
    if !last.is_empty() && last != b"." && last != b".." {
        return std::ffi::OsStr::from_bytes(last);
    }
    path.file_name().unwrap_or(path.as_os_str())
}

impl Walker<'_> {
    /// One listed entry: the root, or an entry looked up again beneath the
    /// root and then classified.
    fn step(&mut self, dent: &walkdir::DirEntry) -> Result<Step, InventoryError> {
        let depth = dent.depth();
        self.sc.unsafe_dirs.retain(|u| u.depth < depth);
        if depth == 0 {
            let listed = self.sc.root_entry(dent, self.root_md)?.map(Listed::Entry);
            return Ok(Step {
                listed,
                skip_dir: false,
            });
        }
        let root = self.sc.root;
        let rel = below(dent.path(), root).to_path_buf();
        let at = display_path(&rel);
        let ft = dent.file_type();

        // walkdir read this entry's directory by path, possibly through a
        // symlink swapped in since: report nothing that is not beneath the
        // root now. (Descriptors are opened beneath the root by the reader.)
        let read_later = ft.is_file()
            && depth <= MAX_DESCRIPTOR_DEPTH
            && matches!(
                classify_name(leaf(dent.path())),
                EntryKind::Descriptor { .. }
            );
        let now = if read_later {
            None
        } else {
            match self.beneath.stat(&rel) {
                Now::Here(st) => Some(Ok(st)),
                Now::Failed(e) => Some(Err(std::io::Error::from(e))),
                Now::Gone => return Ok(Step::default().skip_dir(ft.is_dir())),
                Now::ParentFailed(e) => return Ok(self.parent_failed(&rel, e)),
            }
        };
        if let Some(Ok(st)) = &now {
            let was = open::type_name(ft);
            let is = mode_type_name(st.st_mode);
            if was != is {
                return Ok(self.changed_type(dent, rel, &at, was, is));
            }
        }
        Ok(self.classify(dent, rel, at, now))
    }

    /// The listed entry's parent could not be opened beneath the root:
    /// reported once, at the first entry; the rest of the directory is
    /// skipped.
    fn parent_failed(&mut self, rel: &Path, e: OpenError) -> Step {
        let sc = &mut self.sc;
        let parent = rel.parent().unwrap_or(Path::new("")).to_path_buf();
        let mut step = Step::default().skip_dir(true);
        if sc.failed_dir.as_ref() != Some(&parent) {
            let pat = display_path(&parent);
            let f = match e {
                OpenError::Symlink => {
                    let found = open::symlink_description(sc.root_fd, &parent);
                    Finding::reject(
                        Code::KV001,
                        "directory replaced by a symlink while auditing; not followed",
                    )
                    .at(&pat)
                    .values("directory", found)
                }
                OpenError::Os(e) => {
                    let e = std::io::Error::from(e);
                    Finding::reject(Code::KV005, format!("cannot open directory: {e}"))
                        .at(&pat)
                        .denied_if(&e)
                }
            };
            let kind = dir_kind(parent.file_name().unwrap_or_default());
            let entry = sc.with_inherited(sc.entry(parent.clone(), kind, vec![f]), &pat);
            step.listed = Some(Listed::Entry(entry));
            sc.failed_dir = Some(parent);
        }
        step
    }

    /// The entry's type now is not the type it was listed with.
    fn changed_type(
        &self,
        dent: &walkdir::DirEntry,
        rel: PathBuf,
        at: &str,
        was: &str,
        is: &str,
    ) -> Step {
        let ft = dent.file_type();
        let f = Finding::reject(
            Code::KV005,
            format!("changed while auditing (a {was} when listed, a {is} now)"),
        )
        .at(at)
        .values(was, is);
        let kind = if ft.is_dir() {
            dir_kind(leaf(dent.path()))
        } else {
            classify_name(leaf(dent.path()))
        };
        let entry = self
            .sc
            .with_inherited(self.sc.entry(rel, kind, vec![f]), at);
        Step::entry(entry).skip_dir(ft.is_dir())
    }

    /// An entry beneath the root, classified by its listed type and name;
    /// `now` is its lstat beneath the root (`None` for a descriptor, which
    /// the reader opens).
    fn classify(
        &mut self,
        dent: &walkdir::DirEntry,
        rel: PathBuf,
        at: String,
        now: Option<std::io::Result<Stat>>,
    ) -> Step {
        let sc = &self.sc;
        let ft = dent.file_type();
        if dent.depth() > MAX_DESCRIPTOR_DEPTH && ft.is_file() {
            // Deeper regular files are never read; unsafe entries are still
            // reported below as at any depth.
            let f = Finding::notice(
                Code::KV010,
                format!("beyond the depth limit of {MAX_DESCRIPTOR_DEPTH}; not read"),
            )
            .at(&at);
            return Step::entry(sc.entry(rel, EntryKind::Stray, vec![f]));
        }
        let name = leaf(dent.path());
        if ft.is_symlink() {
            let found = open::symlink_description(sc.root_fd, &rel);
            let f = Finding::reject(Code::KV001, format!("{found}; never followed"))
                .at(&at)
                .values("regular file or directory", found);
            let kind = classify_name(name);
            return Step::entry(sc.with_inherited(sc.entry(rel, kind, vec![f]), &at));
        }

        if ft.is_file() {
            if let kind @ EntryKind::Descriptor { .. } = classify_name(name) {
                // No lstat: the reader checks the opened file against the
                // listing's inode number (and lstats only if they differ).
                return Step::read(ReadJob {
                    inherited: sc.inherited(&at),
                    listed_ino: dent.ino(),
                    rel,
                    kind,
                    at,
                });
            }
        }

        // lstat of the listed entry (walkdir does not follow here).
        let md = match now.unwrap_or_else(|| Err(std::io::Error::from(rustix::io::Errno::INVAL))) {
            Ok(md) => md,
            Err(e) => {
                let kind = if ft.is_dir() {
                    dir_kind(name)
                } else {
                    classify_name(name)
                };
                let f = Finding::reject(Code::KV005, format!("cannot stat: {e}"))
                    .at(&at)
                    .denied_if(&e);
                return Step::entry(sc.with_inherited(sc.entry(rel, kind, vec![f]), &at));
            }
        };
        if ft.is_dir() {
            return self.directory(dent, rel, at, &md);
        }
        let kind = classify_name(name);
        if !ft.is_file() {
            return Step::entry(sc.not_regular(ft, rel, kind, &at));
        }
        match kind {
            EntryKind::Torn => Step::entry(sc.entry(rel, kind, vec![torn(&at)])),
            EntryKind::Stray | EntryKind::Dir => {
                let f = Finding::notice(Code::KV010, stray_message(&rel)).at(&at);
                Step::entry(sc.entry(rel, EntryKind::Stray, vec![f]))
            }
            // Regular files named as descriptors were handed out above.
            EntryKind::Descriptor { .. } => Step::read(ReadJob {
                inherited: sc.inherited(&at),
                listed_ino: md.st_ino,
                rel,
                kind,
                at,
            }),
        }
    }

    /// A directory beneath the root (lstat'ed as `md`): another mount and a
    /// staging leftover are reported and not entered; an unsafe one is
    /// registered for the descriptors below it.
    fn directory(&mut self, dent: &walkdir::DirEntry, rel: PathBuf, at: String, md: &Stat) -> Step {
        let sc = &mut self.sc;
        let name = leaf(dent.path());
        let mut findings = Vec::new();
        let kind = dir_kind(name);
        // Another mount (a bind mount, another file system) is not
        // entered: whatever it holds is not this inventory's.
        let other_mount = md.st_dev != self.root_md.dev()
            || match (self.root_mnt, self.beneath.mount_id(&rel)) {
                (Some(a), Some(b)) => a != b,
                _ => false,
            };
        if other_mount {
            findings.push(
                Finding::reject(
                    Code::KV003,
                    "directory is a mount point (another mount than the inventory root's); not \
                        entered",
                )
                .at(&at)
                .values("the inventory root's mount", "another mount"),
            );
            let entry = sc.with_inherited(sc.entry(rel, kind, findings), &at);
            return Step::entry(entry).skip_dir(true);
        }
        if crate::format::names::is_staging_name(name) {
            // A staging leftover's name (§2.2) on a directory: a writer
            // that stages a whole directory and renames it into place
            // was interrupted. What it holds was never published, so it
            // is reported and not entered (never judged as a group).
            let f = Finding::reject(
                Code::KV009,
                "a directory named like a staging leftover of an interrupted write; not entered",
            )
            .at(&at)
            .values("a published directory", "a staging directory");
            return Step::entry(sc.entry(rel, EntryKind::Torn, vec![f])).skip_dir(true);
        }
        if let EntryKind::Descriptor { .. } = kind {
            findings.push(
                Finding::reject(Code::KV002, "a directory with a descriptor's name")
                    .at(&at)
                    .values("regular file", "directory"),
            );
        }
        let perms = permission_issues(md.st_mode, md.st_uid, sc.owners, "directory", &at);
        findings.extend(findings_of(&perms));
        // Inherit from the dirs above before registering this one.
        let mut entry = sc.entry(rel, kind, findings);
        if matches!(entry.kind, EntryKind::Descriptor { .. }) {
            entry = sc.with_inherited(entry, &at);
        }
        if !perms.is_empty() {
            sc.unsafe_dirs.push(UnsafeDir {
                depth: dent.depth(),
                at: at.clone(),
                issues: perms,
            });
        }
        if entry.findings.is_empty() {
            Step::default()
        } else {
            Step::entry(entry)
        }
    }
}

impl Scanner<'_> {
    /// A FIFO, socket or device: decided from the listing, never opened.
    fn not_regular(&self, ft: std::fs::FileType, rel: PathBuf, kind: EntryKind, at: &str) -> Entry {
        let what = open::type_name(ft);
        let mut findings = Vec::new();
        if kind == EntryKind::Torn {
            findings.push(torn(at));
        }
        findings.push(
            Finding::reject(
                Code::KV002,
                format!("not a regular file ({what}); not opened"),
            )
            .at(at)
            .values("regular file", what),
        );
        self.with_inherited(self.entry(rel, kind, findings), at)
    }
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
    fn entry(&self, rel_path: PathBuf, kind: EntryKind, findings: Vec<Finding>) -> Entry {
        // The walk opens no file: only the reader knows a mode.
        Entry {
            rel_path,
            kind,
            findings,
            mode: None,
        }
    }

    /// Adds the KV003 of every unsafe directory above a descriptor.
    fn with_inherited(&self, mut entry: Entry, at: &str) -> Entry {
        if !matches!(entry.kind, EntryKind::Descriptor { .. }) {
            return entry;
        }
        entry.findings.extend(self.inherited(at));
        entry
    }

    /// The KV003 of every unsafe directory above the descriptor at `at`.
    ///
    /// Bounded (docs/format.md §9.3): the nearest unsafe directory is named
    /// and the others above it are counted, so a chain of D unsafe
    /// directories costs D findings, not D²/2.
    fn inherited(&self, at: &str) -> Vec<Finding> {
        let Some((nearest, above)) = self.unsafe_dirs.split_last() else {
            return Vec::new();
        };
        nearest
            .issues
            .iter()
            .map(|issue| {
                let mut f = inherited(nearest, issue, at);
                if !above.is_empty() {
                    f.message.push_str(&format!(
                        " (and {} more unsafe director{} above it)",
                        above.len(),
                        if above.len() == 1 { "y" } else { "ies" }
                    ));
                }
                f
            })
            .collect()
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
            self.owners,
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
        let denied = err
            .io_error()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied);
        let kind = rel
            .file_name()
            .and_then(parse_rank_name)
            .map_or(EntryKind::Dir, |name_rank| EntryKind::Descriptor {
                name_rank,
            });
        let mut f = Finding::reject(Code::KV005, msg).at(&at);
        if denied {
            f = f.about(crate::format::finding::Subject::Access);
        }
        self.with_inherited(self.entry(rel, kind, vec![f]), &at)
    }
}

/// The notice of a stray file: "unexpected file; not read", naming the GMS
/// artifact its name (or its directory's) is, with where to check it
/// (docs/format.md §14.9). By name only: nothing more is read.
fn stray_message(rel: &Path) -> String {
    let name = rel.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let dir = rel
        .parent()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str());
    match crate::format::names::artifact_by_name(name, dir) {
        Some(what) => format!(
            "unexpected file; not read (named as {what}: check it with `kvcr gms`, \
             docs/format.md §14)"
        ),
        None => "unexpected file; not read".to_string(),
    }
}

#[cfg(test)]
mod path_tests {
    use super::{below, leaf};
    use std::path::Path;

    const PATHS: &[&str] = &[
        "",
        "/",
        "//",
        ".",
        "..",
        "/.",
        "/..",
        "a",
        "a/",
        "a/.",
        "a/..",
        "/a",
        "/a/",
        "/a/b",
        "/a/b/",
        "/a/b/.",
        "/a/b/..",
        "/a/./b",
        "/a//b",
        "/a/b//c",
        "./a",
        "./a/b",
        "../a/b",
        "a/b/c",
        "/a/bc",
        "/a/b/c/d",
        "/a/b/./c",
        "/a/b/../c",
        "/a/b/c/.",
        "/a/b/\u{e9}",
        "/a/b/rank-0.json",
        "/a/b/.tmp",
        "/a/b/...",
        "/a/b/.x/y",
        "/r/a\\b",
        "///a//b",
    ];

    /// The byte reading gives what `Path::strip_prefix` gives for every
    /// pair of paths, plain or not.
    #[test]
    fn below_is_strip_prefix() {
        for p in PATHS {
            for r in PATHS {
                let (p, r) = (Path::new(p), Path::new(r));
                let want = p.strip_prefix(r).unwrap_or(p);
                assert_eq!(
                    below(p, r).as_os_str(),
                    want.as_os_str(),
                    "{p:?} below {r:?}"
                );
            }
        }
    }

    /// The byte reading gives walkdir's file name for every path.
    #[test]
    fn leaf_is_walkdirs_file_name() {
        for p in PATHS {
            let p = Path::new(p);
            let want = p.file_name().unwrap_or(p.as_os_str());
            assert_eq!(leaf(p), want, "{p:?}");
        }
    }
}
