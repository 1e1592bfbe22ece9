//! Where and how kvcr writes: the one writer of stdout ([`emit`]: a closed
//! pipe ends quietly) and the one writer of stderr ([`to_stderr`],
//! [`err_line`], [`print_note`]: a stderr that is closed or a pipe whose
//! reader has gone loses the text, never the exit status), and
//! [`OutputFile`], the one way to a file kvcr writes (a `--textfile`, the
//! import log, a `--ready-file`): checked against the inventory once,
//! whichever way its root was chosen, and written only through what the
//! check resolved, so that nothing is ever written inside the inventory
//! (docs/format.md §1, §8.8). Nothing else in `src/` prints
//! (tests/it/project/architecture.rs).

// The one writer: the only holder of the process's stdout and stderr
// (clippy.toml: disallowed-methods).
#![allow(clippy::disallowed_methods)]

use crate::format::failure::Failure;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags};
use std::ffi::{OsStr, OsString};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Set once anything was written to stdout by [`emit`]: a failure after
/// that prints no second (error) document.
static EMITTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether [`emit`] has written to stdout in this process.
pub fn emitted() -> bool {
    EMITTED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Writes to stdout; a closed pipe (`kvcr audit | head -1`) ends quietly.
pub fn emit(f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<(), Failure> {
    EMITTED.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut lock = io::BufWriter::new(io::stdout().lock());
    match f(&mut lock).and_then(|_| lock.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(Failure::new(
            crate::format::exit::USAGE,
            format!("cannot write the report: {e}"),
        )),
        _ => Ok(()),
    }
}

/// Prints `kvcr: note: {note}` on stderr, once per process: a note the
/// dispatcher already gave (the `KVCR_PROC_ROOT` hook, announced by every
/// command that reads files) is not repeated when the node probe returns it
/// again.
pub(crate) fn print_note(note: &str) {
    static PRINTED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut printed = PRINTED.lock().unwrap_or_else(|e| e.into_inner());
    if !printed.iter().any(|p| p == note) {
        err_line(&format!("kvcr: note: {note}"));
        printed.push(note.to_string());
    }
}

/// A file kvcr writes outside the inventory: the directory it goes in,
/// resolved, checked and held open by [`OutputFile::resolve`], and its name
/// there. Every write (and every later write of the same file: the import
/// log's release record, the ready file's publication and removal) goes
/// through the held directory (`openat`, `renameat`, `unlinkat` on its fd)
/// and never resolves the path again, so a directory swapped for a symlink
/// after the check cannot move a write into the inventory.
#[derive(Debug)]
pub struct OutputFile {
    dir: OwnedFd,
    name: OsString,
    path: PathBuf,
}

/// Why an output path cannot be used.
#[derive(Debug)]
pub enum Unusable {
    /// It lies inside the inventory (exit 2 for every output: kvcr never
    /// writes there).
    Inside(Failure),
    /// It names no file, or its directory cannot be created or opened: why.
    Other(String),
}

/// The inventory's directories, to tell whether a directory lies inside it.
struct InventoryDirs {
    /// The root as given, for messages.
    shown: PathBuf,
    /// The resolved root, or (a root that does not resolve) the root as an
    /// absolute path: a directory whose real path lies below it is inside.
    below: Option<PathBuf>,
    /// (device, inode) of every directory of the inventory, the root
    /// included: the same directory seen through another path (a bind
    /// mount, a symlink) is inside too.
    ids: std::collections::HashSet<(u64, u64)>,
}

impl InventoryDirs {
    fn of(root: &Path) -> InventoryDirs {
        let resolved = std::fs::canonicalize(root).ok().filter(|r| r.is_dir());
        let mut ids = std::collections::HashSet::new();
        if let Some(r) = &resolved {
            use std::os::unix::fs::MetadataExt;
            for e in walkdir::WalkDir::new(r)
                .follow_links(false)
                .into_iter()
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_dir())
            {
                if let Ok(m) = e.metadata() {
                    ids.insert((m.dev(), m.ino()));
                }
            }
        }
        InventoryDirs {
            shown: root.to_path_buf(),
            below: resolved.or_else(|| std::path::absolute(root).ok()),
            ids,
        }
    }

    /// Whether the directory open at `fd` is one of the inventory's or lies
    /// below one: by its real path (the kernel's, through `/proc/self/fd`)
    /// and by the identity of the directory and of each of its ancestors,
    /// reached through `..` from the fd itself.
    fn holds(&self, fd: BorrowedFd<'_>) -> bool {
        let real = crate::io::procfs::ProcFs::system().fd_target(fd);
        if let (Some(real), Some(below)) = (&real, &self.below) {
            if real.starts_with(below) {
                return true;
            }
        }
        if self.ids.is_empty() {
            return false;
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let Ok(mut cur) = rustix::fs::openat(fd, ".", flags, Mode::empty()) else {
            return false;
        };
        // At most as many levels as a path can have.
        for _ in 0..4096 {
            let Ok(st) = rustix::fs::fstat(&cur) else {
                return false;
            };
            #[allow(clippy::unnecessary_cast)]
            let id = (st.st_dev as u64, st.st_ino as u64);
            if self.ids.contains(&id) {
                return true;
            }
            let Ok(up) = rustix::fs::openat(&cur, "..", flags, Mode::empty()) else {
                return false;
            };
            match rustix::fs::fstat(&up) {
                #[allow(clippy::unnecessary_cast)]
                Ok(u) if (u.st_dev as u64, u.st_ino as u64) == id => return false,
                Ok(_) => cur = up,
                Err(_) => return false,
            }
        }
        false
    }

    fn refusal(&self, path: &Path, what: &str) -> Unusable {
        let root = crate::format::names::display_path(&self.shown);
        Unusable::Inside(Failure::usage(
            format!(
                "{what} {} is inside the inventory {root}; kvcr never writes inside the inventory",
                crate::format::names::display_path(path),
            ),
            Some(format!("choose a {what} path outside {root}")),
        ))
    }
}

/// The file name of an output path, refusing one that names a directory
/// (empty, ending in `/`, `.` or `..`).
fn file_name(path: &Path) -> Option<&OsStr> {
    let bytes = path.as_os_str().as_bytes();
    let last = bytes.rsplit(|&b| b == b'/').next().unwrap_or_default();
    if last.is_empty() || last == b"." || last == b".." {
        return None;
    }
    Some(OsStr::from_bytes(last))
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::CLOEXEC);

impl OutputFile {
    /// The one check of an output path: `path`'s directory is opened (and,
    /// with `create_dirs`, its missing directories created `0700`, each
    /// beneath the one before, after the deepest existing one was checked),
    /// and refused when it is inside the inventory: the root given (ROOT or
    /// `$KVCR_INVENTORY`), else [`DEFAULT_ROOT`](crate::format::names::DEFAULT_ROOT),
    /// compared by real path and by the identity of the directory and its
    /// ancestors (a bind mount or a symlink of the inventory elsewhere is
    /// inside too). `what` names the path in messages (`--textfile`,
    /// `KVCR_IMPORT_LOG`).
    pub fn resolve(
        root: Option<&Path>,
        path: &Path,
        what: &str,
        create_dirs: bool,
    ) -> Result<OutputFile, Unusable> {
        let name = file_name(path)
            .ok_or_else(|| Unusable::Other("names no file (it ends in /, . or ..)".to_string()))?;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let shown_dir = crate::format::names::display_path(&dir);
        let inv = InventoryDirs::of(root.unwrap_or(Path::new(crate::format::names::DEFAULT_ROOT)));
        let cannot = |at: &Path, e: rustix::io::Errno| {
            Unusable::Other(format!(
                "its directory cannot be used: {}: {}",
                crate::format::names::display_path(at),
                io::Error::from(e)
            ))
        };
        let fd = match rustix::fs::open(&dir, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => {
                let parts: Vec<Component<'_>> = dir.components().collect();
                let mut k = parts.len();
                let mut fd = loop {
                    let prefix: PathBuf = parts[..k].iter().collect();
                    let at = if k == 0 { Path::new(".") } else { &prefix };
                    match rustix::fs::open(at, DIR_FLAGS, Mode::empty()) {
                        Ok(fd) => break fd,
                        Err(rustix::io::Errno::NOENT) if k > 0 => k -= 1,
                        Err(e) => return Err(cannot(at, e)),
                    }
                };
                // A directory that does not exist yet is inside the
                // inventory when its deepest existing ancestor is; nothing
                // is created there.
                if inv.holds(fd.as_fd()) {
                    return Err(inv.refusal(path, what));
                }
                if !create_dirs {
                    return Err(cannot(&dir, rustix::io::Errno::NOENT));
                }
                for c in &parts[k..] {
                    let Component::Normal(n) = c else {
                        return Err(Unusable::Other(format!(
                            "cannot create its directory {shown_dir} (a missing directory \
                             followed by . or ..)"
                        )));
                    };
                    match rustix::fs::mkdirat(&fd, *n, Mode::from_raw_mode(0o700)) {
                        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                        Err(e) => return Err(cannot(&dir, e)),
                    }
                    // Never through a symlink created meanwhile.
                    fd = rustix::fs::openat(&fd, *n, DIR_FLAGS | OFlags::NOFOLLOW, Mode::empty())
                        .map_err(|e| cannot(&dir, e))?;
                }
                fd
            }
            Err(e) => return Err(cannot(&dir, e)),
        };
        if inv.holds(fd.as_fd()) {
            return Err(inv.refusal(path, what));
        }
        Ok(OutputFile {
            dir: fd,
            name: name.to_os_string(),
            path: path.to_path_buf(),
        })
    }

    /// The path as given (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The held directory.
    pub fn dir(&self) -> BorrowedFd<'_> {
        self.dir.as_fd()
    }

    /// The file's name in the held directory.
    pub fn name(&self) -> &OsStr {
        &self.name
    }

    /// What is at the name now, not following a symlink (`None`: nothing).
    pub fn lstat(&self) -> io::Result<Option<rustix::fs::Stat>> {
        match rustix::fs::statat(&self.dir, &self.name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(st)),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes `bytes` as the file, atomically ([`write_atomic_at`] in the
    /// held directory).
    pub fn write_atomic(&self, bytes: &[u8], mode: u32) -> Result<(), AtomicError> {
        let shown_dir = self.path.parent().unwrap_or(Path::new("."));
        write_atomic_at(self.dir(), shown_dir, &self.name, bytes, mode, None)
    }

    /// Appends `line` and a newline to the file in one `write`, then
    /// `fsync`s it: created `0600` if missing, opened `O_APPEND |
    /// O_NOFOLLOW | O_NONBLOCK` beneath the held directory; only a regular
    /// file with one link is written (a second name may be anywhere, a
    /// descriptor inside the inventory included).
    pub fn append(&self, line: &[u8]) -> Result<(), String> {
        let shown = crate::format::names::display_path(&self.path);
        let mut f = self.open_append()?;
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line);
        buf.push(b'\n');
        f.write_all(&buf)
            .map_err(|e| format!("cannot append to {shown}: {e}"))?;
        f.sync_all()
            .map_err(|e| format!("cannot sync {shown}: {e}"))
    }

    /// The file opened for appending as [`OutputFile::append`] opens it
    /// (created `0600`, `O_APPEND | O_NOFOLLOW | O_NONBLOCK` beneath the held
    /// directory, a regular file with one link), for a caller that keeps it.
    pub fn open_append(&self) -> Result<std::fs::File, String> {
        let shown = crate::format::names::display_path(&self.path);
        let fd = rustix::fs::openat(
            &self.dir,
            &self.name,
            OFlags::WRONLY
                | OFlags::APPEND
                | OFlags::CREATE
                | OFlags::NOFOLLOW
                | OFlags::NONBLOCK
                | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| format!("cannot open {shown}: {}", io::Error::from(e)))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| format!("cannot stat {shown}: {e}"))?;
        if !rustix::fs::FileType::from_raw_mode(st.st_mode).is_file() {
            return Err(format!("{shown} is not a regular file"));
        }
        #[allow(clippy::unnecessary_cast)]
        let nlink = st.st_nlink as u64;
        if nlink > 1 {
            return Err(format!(
                "{shown} has {nlink} hard links; kvcr appends only to a file with one name"
            ));
        }
        Ok(std::fs::File::from(fd))
    }
}

/// A failed atomic write: what was being done (naming the file) and the
/// system's error.
#[derive(Debug)]
pub struct AtomicError {
    pub what: String,
    pub source: io::Error,
}

/// A staging name `.NAME.<random>.tmp`: a staging leftover to kvcr (KV009),
/// ignored by node-exporter's textfile collector.
pub fn staging_name(name: &OsStr) -> OsString {
    let random = uuid::Uuid::new_v4().simple().to_string();
    let mut s = OsString::from(".");
    s.push(name);
    s.push(".");
    s.push(&random[..16]);
    s.push(".tmp");
    s
}

/// Writes `bytes` as `name` in the directory open at `dir` (shown as
/// `shown_dir`), atomically: a staging file created exclusively beside it
/// (`O_NOFOLLOW`), given `mode` (and `owner` uid/gid when set), synced,
/// renamed over `name`, then the directory synced. A reader sees the old
/// file or the whole new one; on failure the staging file is removed and
/// `name` is untouched. Nothing is resolved by path: the staging file, the
/// rename and the sync all name the held directory.
pub fn write_atomic_at(
    dir: BorrowedFd<'_>,
    shown_dir: &Path,
    name: &OsStr,
    bytes: &[u8],
    mode: u32,
    owner: Option<(u32, u32)>,
) -> Result<(), AtomicError> {
    let tmp = staging_name(name);
    let shown = shown_dir.join(&tmp).display().to_string();
    let fail = |what: String| move |e: io::Error| AtomicError { what, source: e };
    let fd = rustix::fs::openat(
        dir,
        &tmp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| fail(format!("cannot create {shown}"))(e.into()))?;
    let mut f = std::fs::File::from(fd);
    let staged = (|| -> Result<(), AtomicError> {
        if let Some((uid, gid)) = owner {
            rustix::fs::fchown(
                &f,
                Some(rustix::fs::Uid::from_raw(uid)),
                Some(rustix::fs::Gid::from_raw(gid)),
            )
            .map_err(|e| fail(format!("cannot give {shown} its owner"))(e.into()))?;
        }
        // After fchown, which may clear set-id bits; the umask does not apply.
        rustix::fs::fchmod(&f, Mode::from_raw_mode(mode & 0o7777))
            .map_err(|e| fail(format!("cannot set the mode of {shown}"))(e.into()))?;
        f.write_all(bytes)
            .map_err(fail(format!("cannot write {shown}")))?;
        f.sync_all().map_err(fail(format!("cannot sync {shown}")))?;
        rustix::fs::renameat(dir, &tmp, dir, name).map_err(|e| {
            fail(format!(
                "cannot rename {shown} to {}",
                shown_dir.join(name).display()
            ))(e.into())
        })
    })();
    drop(f);
    if let Err(e) = staged {
        let _ = rustix::fs::unlinkat(dir, &tmp, AtFlags::empty());
        return Err(e);
    }
    rustix::fs::fsync(dir)
        .map_err(|e| fail(format!("cannot sync directory {}", shown_dir.display()))(e.into()))
}

/// Writes to stderr through `f`: the one writer of stderr. A write that
/// fails (a pipe whose reader has gone, EPIPE; a stderr that is closed or
/// not writable, EBADF, which the standard library already reads as
/// written; a full disk) loses the text and nothing else: no panic (where
/// `eprintln!` would panic, exit 101), no error, and the command's exit
/// status stays what its verdict says.
pub fn to_stderr(f: impl FnOnce(&mut dyn Write) -> io::Result<()>) {
    let mut err = io::stderr().lock();
    let _ = f(&mut err).and_then(|()| err.flush());
}

/// Stderr as a writer for several writes in a row, with [`to_stderr`]'s
/// rule: a write that fails is dropped (and reported as written), so
/// nothing after it fails either.
pub fn stderr() -> impl Write {
    struct Lossy(io::StderrLock<'static>);
    impl Write for Lossy {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let _ = self.0.write_all(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            let _ = self.0.flush();
            Ok(())
        }
    }
    Lossy(io::stderr().lock())
}

/// One line on stderr (the newline is added), through [`to_stderr`].
pub fn err_line(line: &str) {
    to_stderr(|w| {
        w.write_all(line.as_bytes())?;
        w.write_all(b"\n")
    });
}

/// Bytes on stdout exactly as given (clap's help and version), through the
/// same rule as [`emit`] but failing never: a closed pipe loses them.
pub fn to_stdout(bytes: &[u8]) {
    EMITTED.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut out = io::stdout().lock();
    let _ = out.write_all(bytes).and_then(|()| out.flush());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn resolve(root: &Path, p: &Path, create: bool) -> Result<OutputFile, Unusable> {
        OutputFile::resolve(Some(root), p, "--out", create)
    }

    #[test]
    fn a_path_that_names_a_directory_names_no_file() {
        for p in ["", "d/", "d/.", "d/..", ".", "..", "/"] {
            assert!(file_name(Path::new(p)).is_none(), "{p:?}");
        }
        assert_eq!(file_name(Path::new("d/x.prom")), Some(OsStr::new("x.prom")));
        assert_eq!(file_name(Path::new("x")), Some(OsStr::new("x")));
    }

    #[test]
    fn inside_by_path_by_identity_and_below_a_missing_directory() {
        let t = tempfile::tempdir().unwrap();
        let inv = t.path().join("inv");
        std::fs::create_dir_all(inv.join("g0/sub")).unwrap();
        std::os::unix::fs::symlink(&inv, t.path().join("alias")).unwrap();
        std::os::unix::fs::symlink(inv.join("g0"), t.path().join("alias-g0")).unwrap();
        for p in [
            "inv/x",
            "inv/g0/sub/x",
            "inv/g0/../x",
            "inv/missing/deeper/x",
            "alias/x",
            "alias-g0/x",
            "alias-g0/sub/x",
        ] {
            for create in [false, true] {
                let r = resolve(&inv, &t.path().join(p), create);
                assert!(matches!(r, Err(Unusable::Inside(_))), "{p}: {r:?}");
            }
        }
        // Through a symlinked root too.
        let r = resolve(&t.path().join("alias"), &inv.join("g0/x"), false);
        assert!(matches!(r, Err(Unusable::Inside(_))), "{r:?}");
        assert!(!inv.join("missing").exists(), "nothing created inside");
        // A root that does not resolve: lexically below it is inside.
        let gone = t.path().join("gone");
        std::fs::create_dir(t.path().join("other")).unwrap();
        let r = resolve(&gone, &t.path().join("other/x"), false);
        assert!(r.is_ok(), "{r:?}");
        let r = resolve(&t.path().join("other"), &t.path().join("other/x"), false);
        assert!(matches!(r, Err(Unusable::Inside(_))), "{r:?}");
    }

    #[test]
    fn missing_directories_are_created_private_only_when_asked() {
        let t = tempfile::tempdir().unwrap();
        let inv = t.path().join("inv");
        std::fs::create_dir(&inv).unwrap();
        let p = t.path().join("log/kvcr/import.jsonl");
        assert!(matches!(resolve(&inv, &p, false), Err(Unusable::Other(_))));
        assert!(!t.path().join("log").exists());
        let out = resolve(&inv, &p, true).unwrap();
        for d in ["log", "log/kvcr"] {
            let mode = std::fs::metadata(t.path().join(d))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "{d}: {mode:o}");
        }
        out.append(b"{}").unwrap();
        out.append(b"{}").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"{}\n{}\n");
        // `..` after a missing directory is not created.
        let r = resolve(&inv, &t.path().join("new/../x"), true);
        assert!(matches!(r, Err(Unusable::Other(_))), "{r:?}");
    }

    #[test]
    fn writes_go_to_the_held_directory_after_a_swap() {
        let t = tempfile::tempdir().unwrap();
        let inv = t.path().join("inv");
        std::fs::create_dir(&inv).unwrap();
        let dir = t.path().join("out");
        std::fs::create_dir(&dir).unwrap();
        let out = resolve(&inv, &dir.join("m.prom"), false).unwrap();
        std::fs::rename(&dir, t.path().join("held")).unwrap();
        std::os::unix::fs::symlink(&inv, &dir).unwrap();
        out.write_atomic(b"a 1\n", 0o644).unwrap();
        out.append(b"b 2").unwrap();
        assert_eq!(
            std::fs::read_dir(&inv).unwrap().count(),
            0,
            "nothing inside"
        );
        let held = std::fs::read_to_string(t.path().join("held/m.prom")).unwrap();
        assert_eq!(held, "a 1\nb 2\n");
        // The name swapped for a symlink: never followed.
        std::fs::remove_file(t.path().join("held/m.prom")).unwrap();
        std::os::unix::fs::symlink(inv.join("x"), t.path().join("held/m.prom")).unwrap();
        assert!(out.append(b"c").is_err());
        assert!(!inv.join("x").exists());
    }
}
