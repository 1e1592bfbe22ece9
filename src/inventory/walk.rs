//! The inventory walk: list, classify and check each entry; descriptors are
//! handed to the reader (`reader.rs`).
//!
//! The walk and the reading are separate steps: [`InventoryRoot::walk`]
//! lists and classifies entries in walk order and hands each descriptor out
//! as a [`ReadJob`]; a [`Reader`] (one per thread, each with its own reused
//! buffer) opens and reads it. The audit pipeline (`crate::pipeline`) does
//! both, on one thread or several.
//!
//! Each directory is listed through its own fd, opened by name in its
//! parent's fd with `O_NOFOLLOW | O_DIRECTORY` (the root's is
//! [`InventoryRoot`]'s): whatever is listed is beneath the root, whatever
//! is renamed or swapped above it meanwhile. Each entry is then looked up
//! once, by name in that held fd: a directory is opened (its fd gives its
//! mode, owner and mount and lists it), anything else is lstat'ed, and a
//! descriptor is not looked up here at all (the reader opens it beneath the
//! root and checks it against the listing's inode number). An entry gone
//! since it was listed is not reported; one whose type changed is KV005.
//! At most [`MAX_HELD`] directory fds are held below the root; a deeper
//! walk closes the shallowest and reopens one (beneath the root, checked to
//! be the directory listed) when it comes back to it.

use super::open::{self, file_type_name, mode_type_name, mount_id, FileId, OpenError};
use super::perms::{findings_of, permission_issues, PermIssue};
use super::reader::{ReadJob, Reader};
use super::{
    classify_name, display_path, parse_rank_name, Entry, EntryKind, InventoryError, ScanStats,
    MAX_DESCRIPTOR_DEPTH,
};
use crate::finding::{Code, Finding};
use rustix::fs::{AtFlags, Dir, FileType, OFlags, Stat};
use rustix::io::Errno;
use std::ffi::OsStr;
use std::fs::{File, Metadata};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

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
    f
}

struct Scanner<'a> {
    root: &'a Path,
    root_fd: BorrowedFd<'a>,
    euid: u32,
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
    euid: u32,
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
    /// Opens the resolved `root` (see [`resolve_root`]).
    pub fn open(root: &Path) -> Result<InventoryRoot, InventoryError> {
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
            euid: rustix::process::geteuid().as_raw(),
        })
    }

    /// A reader with its own buffer; one per thread.
    pub fn reader(&self) -> Reader<'_> {
        Reader::new(self.file.as_fd(), self.md.dev(), self.euid)
    }

    /// Lists beneath the root and calls `visit` once per reported entry or
    /// descriptor to read, in walk order (sorted by file name, pre-order).
    /// Directories are reported only when they carry findings. Nothing is
    /// opened here but directories.
    pub fn walk<F: FnMut(Listed)>(&self, mut visit: F) -> Result<ScanStats, InventoryError> {
        walk(self, &mut visit)
    }
}

/// One entry as its directory's listing gives it, read through the
/// directory's held fd: the type from `d_type` (an lstat relative to that
/// fd where the file system gives none) and the inode number `d_ino`.
struct Dent {
    rel: PathBuf,
    depth: usize,
    ft: FileType,
    ino: u64,
}

impl Dent {
    fn name(&self) -> &OsStr {
        self.rel.file_name().unwrap_or_default()
    }

    /// What its name says it is, as listed (a directory: [`dir_kind`]).
    fn kind(&self) -> EntryKind {
        if self.ft == FileType::Directory {
            dir_kind(self.name())
        } else {
            classify_name(self.name())
        }
    }
}

/// One item of a directory's listing: an entry, or an error reading the
/// listing (or an entry's type), reported at `rel`.
enum Item {
    Dent(Dent),
    Error { rel: PathBuf, err: std::io::Error },
}

/// How a directory of the current walk position is held.
enum Held {
    /// The inventory root: [`InventoryRoot`]'s own fd.
    Root,
    /// Opened beneath its parent's fd (the listing stream's fd).
    Open(Dir),
    /// Closed to bound the fds held by a deep walk (see [`MAX_HELD`]):
    /// reopened beneath the root when its next entry is looked up, and
    /// checked to be the directory that was listed. (A directory that
    /// could not be listed is never opened: [`Level::unlisted`].)
    Closed,
}

/// Most directory fds held at once below the root: a deeper walk closes the
/// shallowest ones (reopened if the walk comes back to them).
pub(super) const MAX_HELD: usize = 16;

/// Longest path (the root's included) of a directory the walk lists.
const PATH_MAX: usize = 4096;

/// A directory of the current walk position: its identity, how it is
/// held, and the rest of its listing (sorted by file name).
struct Level {
    rel: PathBuf,
    id: FileId,
    held: Held,
    items: std::vec::IntoIter<Item>,
}

impl Level {
    /// A directory that is not listed: its one item says why (KV005).
    fn unlisted(rel: PathBuf, id: FileId, err: Errno) -> Level {
        Level {
            rel: rel.clone(),
            id,
            held: Held::Closed,
            items: vec![Item::Error {
                rel,
                err: err.into(),
            }]
            .into_iter(),
        }
    }
}

/// Reads the whole listing of `dir` (at `rel`, depth `depth`): the entries
/// sorted by file name (bytes), after any error reading it.
fn list(dir: &mut Dir, rel: &Path, depth: usize) -> Vec<Item> {
    let mut errors = Vec::new();
    let mut dents = Vec::new();
    while let Some(next) = dir.read() {
        let e = match next {
            Ok(e) => e,
            Err(err) => {
                errors.push(Item::Error {
                    rel: rel.to_path_buf(),
                    err: err.into(),
                });
                break;
            }
        };
        let name = OsStr::from_bytes(e.file_name().to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        let rel = rel.join(name);
        let ft = match e.file_type() {
            FileType::Unknown => match dir
                .fd()
                .and_then(|fd| rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW))
            {
                Ok(st) => FileType::from_raw_mode(st.st_mode),
                Err(err) => {
                    errors.push(Item::Error {
                        rel,
                        err: err.into(),
                    });
                    continue;
                }
            },
            ft => ft,
        };
        dents.push(Dent {
            rel,
            depth,
            ft,
            ino: e.ino(),
        });
    }
    dents.sort_unstable_by(|a, b| a.name().cmp(b.name()));
    errors.extend(dents.into_iter().map(Item::Dent));
    errors
}

/// What the one lookup of a listed entry in its held parent found.
enum Found {
    /// A directory, opened (`O_NOFOLLOW | O_DIRECTORY`).
    Dir(OwnedFd),
    /// The entry's lstat; for a symlink its words; for a directory that
    /// could not be opened, why.
    Here {
        st: Stat,
        link: Option<String>,
        unlistable: Option<Errno>,
    },
    /// No such entry now (removed since it was listed).
    Gone,
    /// The lstat failed.
    Failed(Errno),
}

/// Looks the listed entry `d` up in its held parent: a directory is opened
/// (its fd gives its mode, owner and mount, and lists it), anything else is
/// lstat'ed; a directory that cannot be opened is lstat'ed to say what it
/// is now.
fn look_up(parent: BorrowedFd<'_>, d: &Dent) -> Found {
    let name = d.name();
    let mut unlistable = None;
    if d.ft == FileType::Directory {
        let flags = OFlags::RDONLY
            | OFlags::DIRECTORY
            | OFlags::NOFOLLOW
            | OFlags::CLOEXEC
            | OFlags::NONBLOCK;
        match open::openat_retry(parent, name, flags) {
            Ok(fd) => return Found::Dir(fd),
            Err(Errno::NOENT) => return Found::Gone,
            Err(e) => unlistable = Some(e),
        }
    }
    match rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Found::Here {
            link: (FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
                .then(|| open::symlink_description_at(parent, name)),
            st,
            unlistable,
        },
        Err(Errno::NOENT) => Found::Gone,
        Err(e) => Found::Failed(e),
    }
}

/// What the walk does with one listed entry: what it reports (if anything),
/// the directory it enters next, and whether the rest of the current
/// directory is skipped (it could not be reopened).
#[derive(Default)]
struct Step {
    listed: Option<Listed>,
    enter: Option<Level>,
    skip_rest: bool,
}

impl Step {
    fn entry(entry: Entry) -> Step {
        Step {
            listed: Some(Listed::Entry(entry)),
            ..Step::default()
        }
    }

    fn read(job: ReadJob) -> Step {
        Step {
            listed: Some(Listed::Read(job)),
            ..Step::default()
        }
    }
}

/// The state of one walk: the scanner (unsafe directories above, the last
/// directory that failed) and the directories of the walk position, each
/// listed through its own fd, opened beneath its parent's without
/// following a symlink: whatever is listed is beneath the root, and each
/// entry is looked up once, by name in its held parent.
struct Walker<'a> {
    sc: Scanner<'a>,
    levels: Vec<Level>,
    root_md: &'a Metadata,
    root_mnt: Option<u64>,
}

fn walk(inv: &InventoryRoot, visit: &mut dyn FnMut(Listed)) -> Result<ScanStats, InventoryError> {
    let root = inv.root.as_path();
    let mut w = Walker {
        sc: Scanner {
            root,
            root_fd: inv.file.as_fd(),
            euid: inv.euid,
            unsafe_dirs: Vec::new(),
            failed_dir: None,
        },
        levels: Vec::new(),
        root_md: &inv.md,
        root_mnt: mount_id(inv.file.as_fd(), None),
    };
    let mut stats = ScanStats::default();
    let mut count = |listed: Listed| {
        stats.entries += 1;
        let descriptor = match &listed {
            Listed::Entry(e) => matches!(e.kind, EntryKind::Descriptor { .. }),
            Listed::Read(_) => true,
        };
        if descriptor {
            stats.descriptors += 1;
        }
        visit(listed);
    };
    if let Some(e) = w.sc.root_entry(&inv.md)? {
        count(Listed::Entry(e));
    }
    // The root's listing through a second fd on it (its own offset).
    let items = match Dir::read_from(inv.file.as_fd()) {
        Ok(mut dir) => list(&mut dir, Path::new(""), 1),
        Err(err) => vec![Item::Error {
            rel: PathBuf::new(),
            err: err.into(),
        }],
    };
    w.levels.push(Level {
        rel: PathBuf::new(),
        id: FileId::of(&inv.md),
        held: Held::Root,
        items: items.into_iter(),
    });
    // No depth limit on the walk: the limit bounds where descriptors are
    // read, not where unsafe entries (symlinks, devices, mounts) are found.
    while let Some(level) = w.levels.last_mut() {
        let Some(item) = level.items.next() else {
            w.levels.pop();
            continue;
        };
        let step = match item {
            Item::Dent(d) => w.step(d),
            Item::Error { rel, err } => Step::entry(w.sc.walk_error(rel, &err)),
        };
        if step.skip_rest {
            if let Some(level) = w.levels.last_mut() {
                level.items = Vec::new().into_iter();
            }
        }
        if let Some(level) = step.enter {
            w.enter(level);
        }
        if let Some(listed) = step.listed {
            count(listed);
        }
    }
    Ok(stats)
}

impl Walker<'_> {
    /// Pushes a directory to walk next. Only the last [`MAX_HELD`] levels
    /// below the root are ever open (a level reopened on the way back up
    /// is the last one), so closing the one `MAX_HELD` above keeps it so.
    fn enter(&mut self, level: Level) {
        if let Some(i) = (self.levels.len() + 1).checked_sub(MAX_HELD + 1) {
            if let Held::Open(_) = self.levels[i].held {
                self.levels[i].held = Held::Closed;
            }
        }
        self.levels.push(level);
    }

    /// The fd of the directory being listed, reopened beneath the root
    /// (and checked to be the one listed) if it was closed.
    fn parent_fd(&mut self) -> Result<BorrowedFd<'_>, OpenError> {
        let root_fd = self.sc.root_fd;
        let Some(level) = self.levels.last_mut() else {
            return Err(OpenError::Os(Errno::INVAL));
        };
        if let Held::Closed = level.held {
            let fd = open::open_beneath(root_fd, &level.rel, true)?;
            let st = rustix::fs::fstat(&fd).map_err(OpenError::Os)?;
            if FileId::of_stat(&st) != level.id {
                // Another directory there now: nothing more of the listed
                // one is looked up.
                return Err(OpenError::Os(Errno::STALE));
            }
            level.held = Held::Open(Dir::new(fd).map_err(OpenError::Os)?);
        }
        match &level.held {
            Held::Root => Ok(root_fd),
            Held::Open(dir) => dir.fd().map_err(OpenError::Os),
            Held::Closed => Err(OpenError::Os(Errno::INVAL)),
        }
    }

    /// One listed entry: looked up once, by name in its held parent (a
    /// descriptor is looked up by the reader instead), then classified.
    fn step(&mut self, d: Dent) -> Step {
        self.sc.unsafe_dirs.retain(|u| u.depth < d.depth);
        let at = display_path(&d.rel);
        let read_later = d.ft == FileType::RegularFile
            && d.depth <= MAX_DESCRIPTOR_DEPTH
            && matches!(classify_name(d.name()), EntryKind::Descriptor { .. });
        if read_later {
            return self.classify(d, at, None, None);
        }
        let found = match self.parent_fd() {
            Ok(parent) => look_up(parent, &d),
            Err(e) => return self.parent_failed(&d.rel, e),
        };
        match found {
            Found::Gone => Step::default(),
            Found::Dir(fd) => self.opened_dir(d, at, fd),
            Found::Here { st, .. } if FileType::from_raw_mode(st.st_mode) != d.ft => {
                self.changed_type(d, &at, st.st_mode)
            }
            Found::Here {
                st,
                unlistable: Some(e),
                ..
            } => self.unlistable_dir(d, at, &st, e),
            Found::Here { link, .. } => self.classify(d, at, None, link),
            Found::Failed(e) if d.ft == FileType::Directory => self.cannot_stat(d, &at, e.into()),
            Found::Failed(e) => self.classify(d, at, Some(e.into()), None),
        }
    }

    /// A directory listed and then opened as `fd`: classified from its
    /// fstat, and entered (listed through `fd`) unless it is reported as
    /// not entered.
    fn opened_dir(&mut self, d: Dent, at: String, fd: OwnedFd) -> Step {
        let st = match rustix::fs::fstat(&fd) {
            Ok(st) => st,
            Err(e) => return self.cannot_stat(d, &at, e.into()),
        };
        let mnt = mount_id(fd.as_fd(), None);
        let (mut step, enter) = self.directory(&d, &at, &st, mnt);
        if !enter {
            return step;
        }
        // Listed only while its path fits in PATH_MAX, as a listing by
        // path would be: this bounds the depth of the walk, and so the
        // memory its paths take.
        let path_len = self.sc.root.as_os_str().len() + 1 + d.rel.as_os_str().len();
        if path_len >= PATH_MAX {
            step.enter = Some(Level::unlisted(
                d.rel,
                FileId::of_stat(&st),
                Errno::NAMETOOLONG,
            ));
            return step;
        }
        step.enter = Some(match Dir::new(fd) {
            Ok(mut dir) => Level {
                items: list(&mut dir, &d.rel, d.depth + 1).into_iter(),
                rel: d.rel,
                id: FileId::of_stat(&st),
                held: Held::Open(dir),
            },
            Err(err) => Level::unlisted(d.rel, FileId::of_stat(&st), err),
        });
        step
    }

    /// A directory that could not be opened (`e`), lstat'ed as `st`: its own
    /// findings, then, unless it is one the walk does not enter, why it
    /// cannot be listed (KV005), as a listing that fails.
    fn unlistable_dir(&mut self, d: Dent, at: String, st: &Stat, e: Errno) -> Step {
        let (mut step, enter) = self.directory(&d, &at, st, None);
        if enter {
            step.enter = Some(Level::unlisted(d.rel, FileId::of_stat(st), e));
        }
        step
    }

    /// The directory the entry is in could not be opened again beneath the
    /// root: reported once, at the first entry; the rest of the directory
    /// is skipped.
    fn parent_failed(&mut self, rel: &Path, e: OpenError) -> Step {
        let sc = &mut self.sc;
        let parent = rel.parent().unwrap_or(Path::new("")).to_path_buf();
        let mut step = Step {
            skip_rest: true,
            ..Step::default()
        };
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
                OpenError::Os(Errno::STALE) => Finding::reject(
                    Code::KV005,
                    "directory replaced by another while auditing; the rest of it is not listed",
                )
                .at(&pat)
                .values("the directory listed", "another directory"),
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

    /// The entry's type now (`mode`) is not the type it was listed with;
    /// a directory is not entered.
    fn changed_type(&self, d: Dent, at: &str, mode: u32) -> Step {
        let was = file_type_name(d.ft);
        let is = mode_type_name(mode);
        let f = Finding::reject(
            Code::KV005,
            format!("changed while auditing (a {was} when listed, a {is} now)"),
        )
        .at(at)
        .values(was, is);
        let kind = d.kind();
        let entry = self
            .sc
            .with_inherited(self.sc.entry(d.rel, kind, vec![f]), at);
        Step::entry(entry)
    }

    /// KV005: the entry's lstat (or its opened directory's fstat) failed.
    fn cannot_stat(&self, d: Dent, at: &str, e: std::io::Error) -> Step {
        let sc = &self.sc;
        let kind = d.kind();
        let f = Finding::reject(Code::KV005, format!("cannot stat: {e}"))
            .at(at)
            .denied_if(&e);
        Step::entry(sc.with_inherited(sc.entry(d.rel, kind, vec![f]), at))
    }

    /// An entry beneath the root other than a directory, classified by its
    /// listed type and name; `failed` is why its lstat in its parent failed
    /// (a descriptor to read is not lstat'ed: the reader opens it), `link`
    /// a symlink's words.
    fn classify(
        &mut self,
        d: Dent,
        at: String,
        failed: Option<std::io::Error>,
        link: Option<String>,
    ) -> Step {
        let sc = &self.sc;
        let ft = d.ft;
        if d.depth > MAX_DESCRIPTOR_DEPTH && ft == FileType::RegularFile {
            // Deeper regular files are never read; unsafe entries are still
            // reported below as at any depth.
            let f = Finding::notice(
                Code::KV010,
                format!("beyond the depth limit of {MAX_DESCRIPTOR_DEPTH}; not read"),
            )
            .at(&at);
            return Step::entry(sc.entry(d.rel, EntryKind::Stray, vec![f]));
        }
        let kind = classify_name(d.name());
        if ft == FileType::Symlink {
            let found = link.unwrap_or_else(|| "symlink".to_string());
            let f = Finding::reject(Code::KV001, format!("{found}; never followed"))
                .at(&at)
                .values("regular file or directory", found);
            return Step::entry(sc.with_inherited(sc.entry(d.rel, kind, vec![f]), &at));
        }
        if ft == FileType::RegularFile {
            if let EntryKind::Descriptor { .. } = kind {
                // No lstat: the reader checks the opened file against the
                // listing's inode number (and lstats only if they differ).
                return Step::read(ReadJob {
                    inherited: sc.inherited(&at),
                    listed_ino: d.ino,
                    rel: d.rel,
                    kind,
                    at,
                });
            }
        }
        if let Some(e) = failed {
            return self.cannot_stat(d, &at, e);
        }
        if ft != FileType::RegularFile {
            return Step::entry(sc.not_regular(ft, d.rel, kind, &at));
        }
        match kind {
            EntryKind::Torn => Step::entry(sc.entry(d.rel, kind, vec![torn(&at)])),
            EntryKind::Stray | EntryKind::Dir => {
                let f = Finding::notice(Code::KV010, "unexpected file; not read").at(&at);
                Step::entry(sc.entry(d.rel, EntryKind::Stray, vec![f]))
            }
            // Regular files named as descriptors were handed out above.
            EntryKind::Descriptor { .. } => Step::read(ReadJob {
                inherited: sc.inherited(&at),
                listed_ino: d.ino,
                rel: d.rel,
                kind,
                at,
            }),
        }
    }

    /// A directory beneath the root (`md`, and its mount id `mnt` where
    /// known): another mount and a staging leftover are reported and not
    /// entered; an unsafe one is registered for the descriptors below it.
    /// Returns the step and whether the walk enters the directory.
    fn directory(&mut self, d: &Dent, at: &str, md: &Stat, mnt: Option<u64>) -> (Step, bool) {
        let sc = &mut self.sc;
        let name = d.name();
        let rel = d.rel.clone();
        let mut findings = Vec::new();
        let kind = dir_kind(name);
        // Another mount (a bind mount, another file system) is not
        // entered: whatever it holds is not this inventory's.
        let other_mount = md.st_dev != self.root_md.dev()
            || match (self.root_mnt, mnt) {
                (Some(a), Some(b)) => a != b,
                _ => false,
            };
        if other_mount {
            findings.push(
                Finding::reject(
                    Code::KV003,
                    "directory is a mount point (another mount than the inventory root's); \
                     not entered",
                )
                .at(at)
                .values("the inventory root's mount", "another mount"),
            );
            let entry = sc.with_inherited(sc.entry(rel, kind, findings), at);
            return (Step::entry(entry), false);
        }
        if crate::inventory::is_staging_name(name) {
            // A staging leftover's name (§2.2) on a directory: a writer
            // that stages a whole directory and renames it into place
            // was interrupted. What it holds was never published, so it
            // is reported and not entered (never judged as a group).
            let f = Finding::reject(
                Code::KV009,
                "a directory named like a staging leftover of an interrupted write; not entered",
            )
            .at(at)
            .values("a published directory", "a staging directory");
            return (Step::entry(sc.entry(rel, EntryKind::Torn, vec![f])), false);
        }
        if let EntryKind::Descriptor { .. } = kind {
            findings.push(
                Finding::reject(Code::KV002, "a directory with a descriptor's name")
                    .at(at)
                    .values("regular file", "directory"),
            );
        }
        let perms = permission_issues(md.st_mode, md.st_uid, sc.euid, "directory", at);
        findings.extend(findings_of(&perms));
        // Inherit from the dirs above before registering this one.
        let mut entry = sc.entry(rel, kind, findings);
        if matches!(entry.kind, EntryKind::Descriptor { .. }) {
            entry = sc.with_inherited(entry, at);
        }
        if !perms.is_empty() {
            sc.unsafe_dirs.push(UnsafeDir {
                depth: d.depth,
                at: at.to_string(),
                issues: perms,
            });
        }
        let step = if entry.findings.is_empty() {
            Step::default()
        } else {
            Step::entry(entry)
        };
        (step, true)
    }
}

impl Scanner<'_> {
    /// A FIFO, socket or device: decided from the listing, never opened.
    fn not_regular(&self, ft: FileType, rel: PathBuf, kind: EntryKind, at: &str) -> Entry {
        let what = file_type_name(ft);
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
    /// The root is looked up by its path once more and must still be the
    /// directory held open (else the run cannot happen).
    fn root_entry(&mut self, root_md: &Metadata) -> Result<Option<Entry>, InventoryError> {
        let listed = std::fs::symlink_metadata(self.root)
            .ok()
            .map(|m| FileId::of(&m));
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
        )))
    }

    /// A directory that cannot be listed (or an entry whose type cannot
    /// be read): KV005 at `rel` (`.` for the root).
    fn walk_error(&self, rel: PathBuf, err: &std::io::Error) -> Entry {
        let rel = if rel.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            rel
        };
        let at = display_path(&rel);
        let msg = format!("cannot list: {err}");
        let denied = err.kind() == std::io::ErrorKind::PermissionDenied;
        let kind = rel
            .file_name()
            .and_then(parse_rank_name)
            .map_or(EntryKind::Dir, |name_rank| EntryKind::Descriptor {
                name_rank,
            });
        let mut f = Finding::reject(Code::KV005, msg).at(&at);
        if denied {
            f = f.about(crate::finding::Subject::Access);
        }
        self.with_inherited(self.entry(rel, kind, vec![f]), &at)
    }
}
