//! The `/proc` kvcr trusts (docs/format.md §11): opened once, checked to be
//! procfs on the held fd, and the root every `/proc` read goes through: the
//! node facts (`crate::io::node::proc`) and the reopening of an `O_PATH` fd
//! for reading (`crate::io::safe_file`).

// Calls the C library, the kernel or the CUDA driver through raw pointers:
// one of the files allowed unsafe code (Cargo.toml [lints]); every block
// says why it is sound.
#![allow(unsafe_code)]

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;

/// The test hook that names another procfs root than `/proc` (tests build
/// a plain directory holding forged files there; it is never trusted). The
/// command line reads it (`crate::commands::settings`) and installs it
/// with [`ProcFs::install_hook`]; the library never does, so an engine's
/// environment cannot move its `/proc`.
pub const ROOT_ENV: &str = "KVCR_PROC_ROOT";

/// The longest line [`ProcFs::read_lines`] takes (a `/proc/PID/maps` line
/// is at most some 4,200 bytes: a path of PATH_MAX and the fields).
pub const LINE_BYTES: usize = 1 << 16;

/// The process's procfs root, opened on first use ([`ProcFs::system`]).
static SYSTEM: OnceLock<ProcFs> = OnceLock::new();

/// A `/proc` that is trusted only when it is procfs (docs/format.md §11).
///
/// The root is opened once and checked once, on the held fd, with
/// `fstatfs`: a tmpfs or any other file system mounted on `/proc` (root, or
/// an unprivileged user namespace) could hold a forged boot id, forged
/// process start times and plain symlinks under `self/fd`. When the check
/// fails, every `/proc` fact is "not checked" with [`ProcFs::untrusted`]'s
/// words, and no file is reopened through `self/fd` (KV005: never followed,
/// never opened). Every file read through a trusted root is checked again on
/// its own fd (a file system mounted over a part of `/proc` is refused too).
///
/// What is held is held per process, not per address space: a child forked
/// after a call opens its own root and its own `self/fd` on its first use
/// (the parent's `self/fd` names the parent's fds, and a child that closed
/// its fds may hold other files under the parent's numbers). Reading what
/// is held takes no lock, so a fork while another thread reads leaves the
/// child nothing to wait for.
#[derive(Debug)]
pub struct ProcFs {
    /// How the root is named in messages (`/proc`, or the test root).
    label: String,
    /// The root's path, opened again by a forked child.
    path: PathBuf,
    /// What this process opened ([`ProcFs::held`]): a pointer from
    /// `Box::into_raw`, published once per process and never freed while
    /// this `ProcFs` lives (a parent's is never freed: its fds are not the
    /// child's to close).
    held: AtomicPtr<Held>,
    /// Why this root is not `/proc` (the test hook), for the operator.
    note: Option<String>,
}

/// The fds process `pid` opened: the checked root, and `self/fd` (opened
/// on first use): an fd on `/proc/<pid>/fd`, as the kernel resolves `self`
/// when it is opened, so it names that process's fds in any other process.
#[derive(Debug)]
struct Held {
    pid: rustix::process::Pid,
    root: Result<OwnedFd, String>,
    fd_dir: OnceLock<Result<OwnedFd, String>>,
}

impl Held {
    /// What this process holds of the root at `path`: the root, opened and
    /// checked on the held fd to be procfs, and `self/fd` not yet opened.
    fn open(path: &Path, label: &str) -> Box<Held> {
        let root = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::empty(),
        )
        .map_err(|e| format!("cannot open {label}: {e}"))
        .and_then(|fd| check_procfs(fd.as_fd(), label).map(|()| fd));
        Box::new(Held {
            pid: rustix::process::getpid(),
            root,
            fd_dir: OnceLock::new(),
        })
    }
}

/// Is the file system holding `fd` procfs? `Err` says why not, in words.
// `f_type`'s width differs between architectures: the casts are not no-ops
// everywhere.
#[allow(clippy::unnecessary_cast)]
fn check_procfs(fd: BorrowedFd<'_>, what: &str) -> Result<(), String> {
    match rustix::fs::fstatfs(fd) {
        Ok(st) if st.f_type as i64 == rustix::fs::PROC_SUPER_MAGIC as i64 => Ok(()),
        Ok(st) => Err(format!(
            "{what} is not procfs (file system magic {:#x}, procfs is {:#x}), \
             so nothing read from it is trusted",
            st.f_type as i64,
            rustix::fs::PROC_SUPER_MAGIC as i64
        )),
        Err(e) => Err(format!(
            "cannot statfs {what}: {e}, so nothing read from it is trusted"
        )),
    }
}

impl ProcFs {
    /// Opens `path` as the procfs root and checks, on the held fd, that it
    /// is procfs.
    pub fn open(path: &Path) -> ProcFs {
        let label = path.to_string_lossy().into_owned();
        let held = Held::open(path, &label);
        ProcFs {
            label,
            path: path.to_path_buf(),
            held: AtomicPtr::new(Box::into_raw(held)),
            note: None,
        }
    }

    /// What this process holds, opened anew when this process is not the
    /// one that opened what is published (a child forked since).
    fn held(&self) -> &Held {
        let pid = rustix::process::getpid();
        let mut seen = self.held.load(Ordering::Acquire);
        loop {
            // SAFETY: a published pointer comes from `Box::into_raw` and is
            // freed only by `Drop`, which `&self` excludes.
            if let Some(h) = unsafe { seen.as_ref() }.filter(|h| h.pid == pid) {
                return h;
            }
            let mine = Box::into_raw(Held::open(&self.path, &self.label));
            match self
                .held
                .compare_exchange(seen, mine, Ordering::AcqRel, Ordering::Acquire)
            {
                // The one replaced was the parent's: left as the fork left
                // it, never freed, its fds never closed.
                // SAFETY: `mine` was just published and is never freed
                // while `&self` lives.
                Ok(_) => return unsafe { &*mine },
                Err(now) => {
                    // Another thread of this process published first: ours
                    // was never seen by anyone and is dropped (its fds
                    // closed).
                    // SAFETY: `mine` came from `Box::into_raw` above and
                    // was never published.
                    drop(unsafe { Box::from_raw(mine) });
                    seen = now;
                }
            }
        }
    }

    /// This process's procfs root: `/proc`, or the directory the command
    /// line's [`ROOT_ENV`] hook installed ([`ProcFs::install_hook`];
    /// announced by the caller through [`ProcFs::note`]: this module prints
    /// nothing). Opened and checked once per process: what is kept is an fd
    /// on the procfs mount and whether it is procfs, which cannot go stale
    /// (every fact is read afresh through it, each call).
    pub fn system() -> &'static ProcFs {
        SYSTEM.get_or_init(|| ProcFs::open(Path::new("/proc")))
    }

    /// Makes the root [`ProcFs::from_hook`] opens for `value` this
    /// process's [`ProcFs::system`]. The command line's `KVCR_PROC_ROOT`,
    /// before anything opens a file; false (and nothing changed) when the
    /// system root was already opened.
    pub fn install_hook(value: Option<&std::ffi::OsStr>) -> bool {
        let mut installed = false;
        SYSTEM.get_or_init(|| {
            installed = true;
            ProcFs::from_hook(value)
        });
        installed
    }

    /// The root [`ProcFs::system`] opens for this value of [`ROOT_ENV`]:
    /// `/proc` when it is unset or empty, else the directory it names, with
    /// the note that says so.
    pub fn from_hook(value: Option<&std::ffi::OsStr>) -> ProcFs {
        match value.filter(|v| !v.is_empty()) {
            Some(v) => {
                let path = Path::new(v);
                let mut proc = ProcFs::open(path);
                proc.note = Some(format!(
                    "/proc is read from {ROOT_ENV}={}, a test hook",
                    crate::format::text::terminal(&path.to_string_lossy())
                ));
                proc
            }
            None => ProcFs::open(Path::new("/proc")),
        }
    }

    /// The note the operator is owed about where this root comes from (the
    /// [`ROOT_ENV`] test hook), terminal-safe, without the `kvcr: note: `
    /// prefix; `None` for `/proc`. The caller prints it (`node::probe`
    /// returns it among its notes, and the command announces it once).
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// Why nothing from this root is trusted, or `None` when it is procfs.
    pub fn untrusted(&self) -> Option<&str> {
        self.held().root.as_ref().err().map(String::as_str)
    }

    /// The checked root itself, for a reader that lists or stats beneath it
    /// (the GMS reader's lock holders); `Err` says why it is not trusted.
    pub fn root(&self) -> Result<BorrowedFd<'_>, String> {
        self.held()
            .root
            .as_ref()
            .map(|fd| fd.as_fd())
            .map_err(Clone::clone)
    }

    /// `label/rel`, for messages.
    pub fn display(&self, rel: &str) -> String {
        format!("{}/{rel}", self.label.trim_end_matches('/'))
    }

    /// Reads `rel` (beneath the root) whole, after checking on the open fd
    /// that the file is on procfs. `Err(Ok(errno))` is the kernel's answer
    /// (ENOENT, ESRCH: the caller decides), `Err(Err(why))` is a refusal.
    pub fn read(&self, rel: &str) -> Result<Vec<u8>, Result<Errno, String>> {
        // procfs files are small; the cap only guards against surprises.
        self.read_limited(rel, 1 << 20).map(|(b, _)| b)
    }

    /// Opens `rel` beneath the root for reading and checks on the open fd
    /// that it is on procfs: the one open of [`ProcFs::read_limited`] and
    /// [`ProcFs::read_lines`].
    fn open_checked(&self, rel: &str) -> Result<OwnedFd, Result<Errno, String>> {
        let root = self.root().map_err(Err)?;
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
        let fd = rustix::io::retry_on_intr(|| rustix::fs::openat(root, rel, flags, Mode::empty()))
            .map_err(Ok)?;
        check_procfs(fd.as_fd(), &self.display(rel)).map_err(Err)?;
        Ok(fd)
    }

    /// [`ProcFs::read`] of at most `limit` bytes, and whether that was the
    /// whole file (`false`: it is longer; a reader that must see all of it,
    /// as `/proc/locks`, says what it could not see).
    pub fn read_limited(
        &self,
        rel: &str,
        limit: u64,
    ) -> Result<(Vec<u8>, bool), Result<Errno, String>> {
        use std::io::Read;
        let fd = self.open_checked(rel)?;
        let mut out = Vec::new();
        std::fs::File::from(fd)
            .take(limit.saturating_add(1))
            .read_to_end(&mut out)
            .map_err(|e| match e.raw_os_error() {
                Some(n) => Ok(Errno::from_raw_os_error(n)),
                None => Err(format!("cannot read {}: {e}", self.display(rel))),
            })?;
        let whole = out.len() as u64 <= limit;
        out.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        Ok((out, whole))
    }

    /// Reads `rel` (beneath the root, checked to be procfs on the open fd)
    /// to its end, streamed: each line (without its newline) is handed to
    /// `line` and dropped, so a table of any length is read whole in
    /// bounded memory. Bounded by time, not by bytes: `Ok(false)` when
    /// `deadline` passed first, or a line was longer than [`LINE_BYTES`]
    /// (then the file was not read whole, and the caller says what it
    /// could not see). Errors as [`ProcFs::read`]'s.
    pub fn read_lines(
        &self,
        rel: &str,
        deadline: std::time::Instant,
        mut line: impl FnMut(&[u8]),
    ) -> Result<bool, Result<Errno, String>> {
        let fd = self.open_checked(rel)?;
        let mut buf = vec![0u8; 1 << 16];
        let mut carry: Vec<u8> = Vec::new();
        loop {
            if std::time::Instant::now() >= deadline {
                return Ok(false);
            }
            let n = match rustix::io::read(&fd, &mut buf) {
                Ok(n) => n,
                Err(Errno::INTR) => continue,
                Err(e) => return Err(Ok(e)),
            };
            if n == 0 {
                if !carry.is_empty() {
                    line(&carry);
                }
                return Ok(true);
            }
            let mut rest = &buf[..n];
            while let Some(i) = rest.iter().position(|&b| b == b'\n') {
                if carry.is_empty() {
                    line(&rest[..i]);
                } else {
                    carry.extend_from_slice(&rest[..i]);
                    line(&carry);
                    carry.clear();
                }
                rest = &rest[i + 1..];
            }
            carry.extend_from_slice(rest);
            if carry.len() > LINE_BYTES {
                return Ok(false);
            }
        }
    }

    /// `self/fd` beneath the root, checked to be procfs: the directory of
    /// magic links through which an `O_PATH` fd is reopened for reading.
    /// Kept per process, not per address space ([`ProcFs::held`]): `self`
    /// is resolved when the directory is opened, so the one a parent opened
    /// names the parent's fds in a child it forked (`fd/N` there is the
    /// parent's fd N: another file, or none).
    pub fn fd_dir(&self) -> Result<BorrowedFd<'_>, String> {
        let h = self.held();
        h.fd_dir
            .get_or_init(|| self.open_fd_dir(&h.root))
            .as_ref()
            .map(|fd| fd.as_fd())
            .map_err(Clone::clone)
    }

    fn open_fd_dir(&self, root: &Result<OwnedFd, String>) -> Result<OwnedFd, String> {
        let root = root.as_ref().map_err(Clone::clone)?;
        let fd = rustix::fs::openat(
            root,
            "self/fd",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| format!("cannot open {}: {e}", self.display("self/fd")))?;
        check_procfs(fd.as_fd(), &self.display("self/fd"))?;
        Ok(fd)
    }

    /// The path of fd `fd`'s magic link (`self/fd/N` beneath this root),
    /// for the calls that take a path (binding a Unix socket beneath a held
    /// directory); `Err` says why this root is not trusted (then no path
    /// through it is given: a `self/fd/N` there could be a plain symlink).
    pub fn fd_path(&self, fd: BorrowedFd<'_>) -> Result<PathBuf, String> {
        self.fd_dir()?;
        Ok(PathBuf::from(
            self.display(&format!("self/fd/{}", fd.as_raw_fd())),
        ))
    }

    /// What fd `fd` names, as the kernel says now (`readlink` of its magic
    /// link beneath the checked `self/fd`); `None` when it cannot tell.
    pub fn fd_target(&self, fd: BorrowedFd<'_>) -> Option<PathBuf> {
        let dir = self.fd_dir().ok()?;
        rustix::fs::readlinkat(dir, fd.as_raw_fd().to_string(), Vec::new())
            .ok()
            .map(|t| PathBuf::from(std::ffi::OsString::from_vec(t.into_bytes())))
    }

    /// Opens the inode fd `fd` names (an `O_PATH` fd included) anew with
    /// `flags`, through its magic link beneath the checked `self/fd`.
    pub fn reopen(&self, fd: BorrowedFd<'_>, flags: OFlags) -> std::io::Result<OwnedFd> {
        let dir = self.fd_dir().map_err(std::io::Error::other)?;
        rustix::io::retry_on_intr(|| {
            rustix::fs::openat(dir, fd.as_raw_fd().to_string(), flags, Mode::empty())
        })
        .map_err(Into::into)
    }

    /// Sets the mode of the inode fd `fd` names (an `O_PATH` fd included,
    /// which `fchmod` refuses), through its magic link beneath the checked
    /// `self/fd`.
    pub fn chmod(&self, fd: BorrowedFd<'_>, mode: u32) -> std::io::Result<()> {
        let dir = self.fd_dir().map_err(std::io::Error::other)?;
        rustix::fs::chmodat(
            dir,
            fd.as_raw_fd().to_string(),
            Mode::from_raw_mode(mode),
            rustix::fs::AtFlags::empty(),
        )
        .map_err(Into::into)
    }

    /// How many fds this process has open now (the entries of the checked
    /// `self/fd`, less the one the count itself opens); `None` when it
    /// cannot tell.
    pub fn open_fds(&self) -> Option<u64> {
        let dir = self.fd_dir().ok()?;
        let listing = rustix::fs::Dir::read_from(dir).ok()?;
        let n = listing
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_bytes() != b"." && e.file_name().to_bytes() != b"..")
            .count() as u64;
        Some(n.saturating_sub(1))
    }

    /// The directory listing GPUs, `driver/nvidia/gpus` beneath the root,
    /// as a path (read by `crate::io::node::gpus::read_proc_gpus`), or why it is not
    /// trusted.
    pub fn gpus_dir(&self) -> Result<PathBuf, String> {
        self.root()?;
        let mut p = PathBuf::from(&self.label);
        p.push("driver/nvidia/gpus");
        Ok(p)
    }
}

impl Drop for ProcFs {
    fn drop(&mut self) {
        let p = *self.held.get_mut();
        // SAFETY: published by `open` or `held` from `Box::into_raw`; no
        // borrow of it outlives `&self`. Only this process's is freed: a
        // parent's is left as the fork left it.
        if let Some(h) = unsafe { p.as_ref() } {
            if h.pid == rustix::process::getpid() {
                // SAFETY: `p` came from `Box::into_raw` (above), this
                // process made it, and nothing else frees it.
                drop(unsafe { Box::from_raw(p) });
            }
        }
    }
}
