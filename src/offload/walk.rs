//! The read-only walk (docs/format.md §15.3): every directory opened
//! relative to its parent's descriptor with `O_NOFOLLOW | O_NOATIME`, one
//! `statx(AT_SYMLINK_NOFOLLOW)` per entry, only `config.json` ever opened
//! as a file (after `statx` says it is a regular file, re-checked with
//! `fstat`). Nothing is written, locked or followed; a directory that
//! cannot be listed whole is an error (exit 2), never a partial answer.

use super::canon::{CONFIG_MAX_BYTES, CONFIG_NAME};
use super::grammar::{self, GdsKind, LeafName, Pt};
use super::judge::Choice;
use super::scan::{
    BlockFile, Config, FlatSet, GdsHead, Looked, Loose, MpIdent, NsScan, PtIdent, RankScan,
    RootScan, Scan, SgIdent, Staged, State,
};
use crate::format::failure::Failure;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir, StatxFlags, CWD};
use std::collections::{BTreeMap, VecDeque};
use std::ffi::{CStr, OsStr, OsString};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};

/// The `getdents64` buffer (benches/offload_floor.c reads with the same).
const DIRENT_BUF: usize = 64 * 1024;

/// llm-d's default `shared_storage_path` (`llmd_fs_backend/spec.py:67-69`).
pub const LLMD_DEFAULT_ROOT: &str = "/tmp/shared-kv";
/// SGLang's default storage directory and its environment variable
/// (`hicache_storage.py:728-736`).
pub const SGLANG_DEFAULT_ROOT: &str = "/tmp/hicache";
pub const SGLANG_ROOT_ENV: &str = "SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR";

/// The default roots, from the environment the caller hands in.
pub fn defaults(env: &dyn Fn(&str) -> Option<OsString>) -> Vec<Looked> {
    let mut out = vec![Looked {
        path: PathBuf::from(LLMD_DEFAULT_ROOT),
        producer: "llmd",
        why: "llm-d's default shared_storage_path".into(),
        present: false,
    }];
    match env(SGLANG_ROOT_ENV).filter(|v| !v.is_empty()) {
        Some(v) => out.push(Looked {
            path: PathBuf::from(v),
            producer: "sglang",
            why: format!("${SGLANG_ROOT_ENV}"),
            present: false,
        }),
        None => out.push(Looked {
            path: PathBuf::from(SGLANG_DEFAULT_ROOT),
            producer: "sglang",
            why: format!("SGLang's default storage directory (${SGLANG_ROOT_ENV} unset)"),
            present: false,
        }),
    }
    for l in &mut out {
        l.present = matches!(lstat_at(CWD, l.path.as_os_str()), Ok(Some(Kind::Dir)));
    }
    out
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Dir,
    Reg,
    Link,
    Other(&'static str),
}

struct Stat {
    kind: Kind,
    size: u64,
    mtime_s: i64,
}

fn kind_of(mode: u32) -> Kind {
    match FileType::from_raw_mode(mode) {
        FileType::Directory => Kind::Dir,
        FileType::RegularFile => Kind::Reg,
        FileType::Symlink => Kind::Link,
        FileType::Fifo => Kind::Other("FIFO"),
        FileType::Socket => Kind::Other("socket"),
        FileType::CharacterDevice => Kind::Other("character device"),
        FileType::BlockDevice => Kind::Other("block device"),
        _ => Kind::Other("file of unknown type"),
    }
}

fn statx_at<P: rustix::path::Arg>(dir: BorrowedFd<'_>, name: P) -> std::io::Result<Stat> {
    let sx = rustix::fs::statx(
        dir,
        name,
        AtFlags::SYMLINK_NOFOLLOW,
        StatxFlags::TYPE | StatxFlags::SIZE | StatxFlags::MTIME,
    )?;
    Ok(Stat {
        kind: kind_of(sx.stx_mode as u32),
        size: sx.stx_size,
        mtime_s: sx.stx_mtime.tv_sec,
    })
}

fn lstat_at(dir: BorrowedFd<'_>, name: &OsStr) -> std::io::Result<Option<Kind>> {
    match statx_at(dir, name) {
        Ok(s) => Ok(Some(s.kind)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Counters shared by the walk's threads.
struct Counters<'a> {
    entries: AtomicU64,
    without_noatime: AtomicU64,
    progress: Option<&'a AtomicU64>,
}

impl Counters<'_> {
    fn entry(&self) {
        self.entries.fetch_add(1, Ordering::Relaxed);
        if let Some(p) = self.progress {
            p.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn cannot(path: &str, what: &str, e: impl std::fmt::Display) -> Failure {
    Failure::usage(
        format!("cannot {what} {path}: {e}; kvcr judges nothing it could not read whole"),
        None,
    )
}

/// Opens directory `name` below `dir`: never a link, never its atime.
fn open_dir(dir: BorrowedFd<'_>, name: &OsStr, c: &Counters<'_>) -> std::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat(dir, name, flags | OFlags::NOATIME, Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(rustix::io::Errno::PERM) => {
            c.without_noatime.fetch_add(1, Ordering::Relaxed);
            Ok(rustix::fs::openat(dir, name, flags, Mode::empty())?)
        }
        Err(e) => Err(e.into()),
    }
}

/// What one entry's `statx` said: the entry, gone (removed between the
/// listing and the statx: a live writer), or an error.
enum Statted {
    Is(Stat),
    Gone,
    Failed(std::io::Error),
}

fn statted(dir: BorrowedFd<'_>, name: &CStr) -> Statted {
    match statx_at(dir, name) {
        Ok(s) => Statted::Is(s),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Statted::Gone,
        Err(e) => Statted::Failed(e),
    }
}

/// Hands one entry to `f`, or fails naming it.
fn deliver(
    path: &str,
    c: &Counters<'_>,
    name: &OsStr,
    st: Statted,
    f: &mut impl FnMut(&OsStr, Stat) -> Result<(), Failure>,
) -> Result<(), Failure> {
    c.entry();
    match st {
        Statted::Is(st) => f(name, st),
        Statted::Gone => Ok(()),
        Statted::Failed(e) => Err(cannot(
            &format!("{path}/{}", name.to_string_lossy()),
            "statx",
            e,
        )),
    }
}

fn dot(name: &[u8]) -> bool {
    name == b"." || name == b".."
}

/// Every entry of a directory with its statx, streamed: `f` sees each
/// entry as it is read (no list of names is built).
fn each(
    fd: &OwnedFd,
    path: &str,
    c: &Counters<'_>,
    mut f: impl FnMut(&OsStr, Stat) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let mut buf: Vec<u8> = Vec::with_capacity(DIRENT_BUF);
    let mut dir = RawDir::new(fd.as_fd(), buf.spare_capacity_mut());
    while let Some(ent) = dir.next() {
        let ent = ent.map_err(|e| cannot(path, "list", e))?;
        let name = ent.file_name();
        if dot(name.to_bytes()) {
            continue;
        }
        let st = statted(fd.as_fd(), name);
        deliver(path, c, OsStr::from_bytes(name.to_bytes()), st, &mut f)?;
    }
    Ok(())
}

/// One `getdents64` buffer's names (each with its NUL) and, once a worker
/// has been at them, their statx.
#[derive(Default)]
struct Batch {
    seq: u64,
    names: Vec<u8>,
    ends: Vec<u32>,
    stats: Vec<Statted>,
}

/// A queue of batches for the statx threads, first in first out; closing
/// it drops what is queued.
struct Queue {
    items: Mutex<(VecDeque<Batch>, bool)>,
    ready: Condvar,
}

impl Queue {
    fn put(&self, b: Batch) {
        if let Ok(mut q) = self.items.lock() {
            q.0.push_back(b);
            self.ready.notify_one();
        }
    }

    fn close(&self) {
        if let Ok(mut q) = self.items.lock() {
            q.0.clear();
            q.1 = true;
            self.ready.notify_all();
        }
    }

    fn take(&self) -> Option<Batch> {
        let mut q = self.items.lock().ok()?;
        loop {
            if let Some(b) = q.0.pop_front() {
                return Some(b);
            }
            if q.1 {
                return None;
            }
            q = self.ready.wait(q).ok()?;
        }
    }
}

/// [`each`] for a directory that may hold millions of entries: this thread
/// reads it (`getdents64`) and hands `f` every entry in the order read,
/// while `threads` others do the `statx` calls, a buffer at a time. The
/// answer is the same as [`each`]'s, in the same order.
fn each_parallel(
    fd: &OwnedFd,
    path: &str,
    c: &Counters<'_>,
    threads: usize,
    mut f: impl FnMut(&OsStr, Stat) -> Result<(), Failure>,
) -> Result<(), Failure> {
    if threads <= 1 {
        return each(fd, path, c, f);
    }
    let queue = Queue {
        items: Mutex::new((VecDeque::new(), false)),
        ready: Condvar::new(),
    };
    let (done_tx, done_rx) = mpsc::channel::<Batch>();
    std::thread::scope(|s| {
        for _ in 0..threads {
            let done_tx = done_tx.clone();
            let queue = &queue;
            s.spawn(move || {
                while let Some(mut b) = queue.take() {
                    let mut from = 0;
                    for &end in &b.ends {
                        let name = CStr::from_bytes_with_nul(&b.names[from..end as usize]);
                        from = end as usize;
                        b.stats.push(match name {
                            Ok(n) => statted(fd.as_fd(), n),
                            Err(_) => Statted::Gone,
                        });
                    }
                    if done_tx.send(b).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done_tx);
        let r = read_parallel(fd, path, c, threads, &queue, &done_rx, &mut f);
        queue.close();
        r
    })
}

fn read_parallel(
    fd: &OwnedFd,
    path: &str,
    c: &Counters<'_>,
    threads: usize,
    queue: &Queue,
    done: &mpsc::Receiver<Batch>,
    f: &mut impl FnMut(&OsStr, Stat) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let mut buf: Vec<u8> = Vec::with_capacity(DIRENT_BUF);
    let mut dir = RawDir::new(fd.as_fd(), buf.spare_capacity_mut());
    let mut spare: Vec<Batch> = Vec::new();
    let mut waiting: BTreeMap<u64, Batch> = BTreeMap::new();
    let (mut sent, mut next) = (0u64, 0u64);
    let mut end = false;
    let most = 2 * threads as u64 + 2;
    loop {
        while !end && sent - next < most {
            let mut b = spare.pop().unwrap_or_default();
            b.seq = sent;
            end = true;
            while let Some(ent) = dir.next() {
                let ent = ent.map_err(|e| cannot(path, "list", e))?;
                let name = ent.file_name().to_bytes_with_nul();
                if !dot(&name[..name.len() - 1]) {
                    b.names.extend_from_slice(name);
                    b.ends.push(b.names.len() as u32);
                }
                if dir.is_buffer_empty() {
                    end = false;
                    break;
                }
            }
            if b.ends.is_empty() {
                spare.push(b);
            } else {
                queue.put(b);
                sent += 1;
            }
        }
        if next == sent {
            return Ok(());
        }
        let b = done
            .recv()
            .map_err(|_| cannot(path, "statx the entries of", "a statx thread stopped"))?;
        waiting.insert(b.seq, b);
        while let Some(mut b) = waiting.remove(&next) {
            let mut from = 0;
            for (&e, st) in b.ends.iter().zip(b.stats.drain(..)) {
                let name = &b.names[from..e as usize - 1];
                from = e as usize;
                deliver(path, c, OsStr::from_bytes(name), st, f)?;
            }
            b.names.clear();
            b.ends.clear();
            spare.push(b);
            next += 1;
        }
    }
}

fn state_of(k: Kind) -> State {
    match k {
        Kind::Reg => State::Regular,
        Kind::Link => State::Symlink,
        Kind::Dir => State::Special("directory"),
        Kind::Other(what) => State::Special(what),
    }
}

/// Files, links and special files that are no block: sorted into `loose`.
fn stray(loose: &mut Loose, path: String, st: &Stat) {
    match st.kind {
        Kind::Link => loose.symlinks.push(path),
        Kind::Other(k) => loose.special.push((path, k)),
        Kind::Reg | Kind::Dir => loose.foreign.push(path),
    }
}

fn lossy(name: &OsStr) -> String {
    name.to_string_lossy().into_owned()
}

/// Opens file `name` below `dir` to read it: never a link, never blocking
/// (a FIFO), never its atime where the kernel lets kvcr avoid it (`EPERM`
/// without `O_NOATIME`: counted).
fn open_file(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    c: &Counters<'_>,
) -> Result<OwnedFd, rustix::io::Errno> {
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat(dir, name, flags | OFlags::NOATIME, Mode::empty()) {
        Err(rustix::io::Errno::PERM) => {
            c.without_noatime.fetch_add(1, Ordering::Relaxed);
            rustix::fs::openat(dir, name, flags, Mode::empty())
        }
        r => r,
    }
}

/// Reads `config.json` below a namespace directory.
fn read_config(dir: BorrowedFd<'_>, path: &str, c: &Counters<'_>) -> Result<Config, Failure> {
    let fd = match open_file(dir, OsStr::new(CONFIG_NAME), c) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(Config::Missing),
        Err(rustix::io::Errno::LOOP) => return Ok(Config::Symlink),
        Err(e) => return Err(cannot(path, "open", e)),
    };
    let st = rustix::fs::fstat(&fd).map_err(|e| cannot(path, "fstat", e))?;
    let k = kind_of(st.st_mode);
    if k != Kind::Reg {
        return Ok(match k {
            Kind::Link => Config::Symlink,
            Kind::Dir => Config::Special("directory"),
            Kind::Other(w) => Config::Special(w),
            Kind::Reg => unreachable!(),
        });
    }
    if st.st_size as u64 > CONFIG_MAX_BYTES {
        return Ok(Config::TooLarge(st.st_size as u64));
    }
    let mut buf = Vec::new();
    std::fs::File::from(fd)
        .take(CONFIG_MAX_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| cannot(path, "read", e))?;
    if buf.len() as u64 > CONFIG_MAX_BYTES {
        return Ok(Config::TooLarge(buf.len() as u64));
    }
    Ok(Config::Read(buf))
}

/// Reads the first 4096 bytes of a GDS data file or a whole sidecar
/// (opened as `config.json` is: never a link, never its atime, re-checked
/// as a regular file) and says what they are.
fn read_head(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    path: &str,
    sidecar: bool,
    c: &Counters<'_>,
) -> Result<GdsHead, Failure> {
    use sha2::Digest;
    let gone = |why: &str| GdsHead {
        digest: [0; 32],
        parsed: Err(why.to_string()),
    };
    let fd = match open_file(dir, name, c) {
        Ok(fd) => fd,
        // Removed or replaced since the statx: a live writer.
        Err(rustix::io::Errno::NOENT) => return Ok(gone("removed while kvcr read it")),
        Err(rustix::io::Errno::LOOP) => return Ok(gone("replaced by a symlink while read")),
        Err(e) => return Err(cannot(path, "open", e)),
    };
    let st = rustix::fs::fstat(&fd).map_err(|e| cannot(path, "fstat", e))?;
    if kind_of(st.st_mode) != Kind::Reg {
        return Ok(gone("not a regular file when opened"));
    }
    let mut buf = Vec::with_capacity(grammar::GDS_HEADER_BYTES as usize + 1);
    std::fs::File::from(fd)
        .take(grammar::GDS_HEADER_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| cannot(path, "read", e))?;
    let head = &buf[..buf.len().min(grammar::GDS_HEADER_BYTES as usize)];
    let digest: [u8; 32] = sha2::Sha256::digest(head).into();
    let parsed = if sidecar && buf.len() as u64 > grammar::GDS_HEADER_BYTES {
        Err(format!(
            "the sidecar is {} bytes, expected {}",
            st.st_size,
            grammar::GDS_HEADER_BYTES
        ))
    } else {
        grammar::gds_header(head).map(|h| grammar::GDS_HEADER_BYTES + h.nbytes)
    };
    Ok(GdsHead { digest, parsed })
}
mod nested;

/// One `<3 hex>` bucket of a rank directory, walked by a worker thread.
struct Job {
    ns: usize,
    rank: u32,
    dir: Arc<OwnedFd>,
    name: OsString,
    path: String,
}

struct Walker<'a> {
    choice: Choice,
    /// SGLang model texts (`--model`, `/` made `-`).
    sg_models: Vec<Vec<u8>>,
    c: &'a Counters<'a>,
    scan: Scan,
    ns_index: BTreeMap<(String, Vec<u8>), usize>,
    jobs: Vec<Job>,
    threads: usize,
    mp: FlatSets<MpIdent>,
    pt: FlatSets<PtIdent>,
}

/// The flat sets of one producer as the walk builds them, with the set the
/// last file went to: a flat directory's files come in runs of one set, so
/// most files find theirs without building an identity to look it up.
struct FlatSets<I> {
    sets: Vec<(I, FlatSet)>,
    index: BTreeMap<I, usize>,
    /// The set of the last file of the root being read.
    last: Option<usize>,
}

impl<I> Default for FlatSets<I> {
    fn default() -> Self {
        FlatSets {
            sets: Vec::new(),
            index: BTreeMap::new(),
            last: None,
        }
    }
}

impl<I: Ord + Clone> FlatSets<I> {
    /// The set of a file under `root`: the last one if `same` says it is
    /// the file's, else the one `ident` names (made if new).
    fn get(
        &mut self,
        root: &str,
        same: impl Fn(&I) -> bool,
        ident: impl FnOnce() -> I,
    ) -> &mut FlatSet {
        let i = match self.last {
            Some(i) if same(&self.sets[i].0) => i,
            _ => {
                let id = ident();
                let i = match self.index.get(&id) {
                    Some(&i) => i,
                    None => {
                        self.index.insert(id.clone(), self.sets.len());
                        self.sets.push((id, FlatSet::default()));
                        self.sets.len() - 1
                    }
                };
                let roots = &mut self.sets[i].1.roots;
                if !roots.contains(root) {
                    roots.insert(root.to_string());
                }
                self.last = Some(i);
                i
            }
        };
        &mut self.sets[i].1
    }

    fn finish(self) -> BTreeMap<I, FlatSet> {
        self.sets.into_iter().collect()
    }
}

impl Walker<'_> {
    fn ns(&mut self, root: &str, base: &[u8]) -> usize {
        let key = (root.to_string(), base.to_vec());
        if let Some(&i) = self.ns_index.get(&key) {
            return i;
        }
        let i = self.scan.namespaces.len();
        self.scan
            .namespaces
            .push(NsScan::new(root.to_string(), base.to_vec()));
        self.ns_index.insert(key, i);
        i
    }

    fn family_allowed(&self) -> bool {
        matches!(self.choice, Choice::Auto | Choice::Vllm | Choice::Llmd)
    }

    /// One root (or, with `only`, the one namespace of it the operator
    /// named), streamed: each entry is classified as it is read.
    fn root(&mut self, path: &Path, only: Option<&[u8]>) -> Result<(), Failure> {
        let display = path.display().to_string();
        let c = self.c;
        let fd = open_dir(CWD, path.as_os_str(), c).map_err(|e| cannot(&display, "open", e))?;
        let mut loose = Loose::default();
        self.mp.last = None;
        self.pt.last = None;
        each_parallel(&fd, &display, c, self.threads, |name, st| {
            self.root_entry(&display, only, &fd, name, st, &mut loose)
        })?;
        self.scan.roots.push(RootScan {
            path: display,
            loose,
        });
        Ok(())
    }

    fn root_entry(
        &mut self,
        root_path: &str,
        only: Option<&[u8]>,
        fd: &OwnedFd,
        name: &OsStr,
        st: Stat,
        loose: &mut Loose,
    ) -> Result<(), Failure> {
        let b = name.as_bytes();
        // A path is built only for what is reported or walked by path.
        let p = || format!("{root_path}/{}", lossy(name));
        if let Some(only) = only {
            let mine = b == only || grammar::rank_dir(b).is_some_and(|(base, _)| base == only);
            if !mine {
                return Ok(());
            }
        }
        if self.family_allowed() {
            if let Some((base, rank)) = grammar::rank_dir(b) {
                let i = self.ns(root_path, base);
                let rs = self.scan.namespaces[i].ranks.entry(rank).or_default();
                rs.present = true;
                if st.kind == Kind::Dir {
                    self.rank_dir(i, rank, fd, name, &p())?;
                } else {
                    rs.not_dir = Some(state_of(st.kind));
                }
                return Ok(());
            }
            if grammar::namespace_dir(b).is_some() {
                let i = self.ns(root_path, b);
                if st.kind == Kind::Dir {
                    self.scan.namespaces[i].base_dir = true;
                    self.base_dir(i, fd, name, &p())?;
                } else {
                    self.scan.namespaces[i].base_not_dir = Some(state_of(st.kind));
                }
                return Ok(());
            }
        }
        if st.kind == Kind::Dir
            && grammar::gds_dir1(b)
            && matches!(self.choice, Choice::Auto | Choice::Lmcache)
        {
            return self.gds_dir(root_path, fd, name, &p(), loose);
        }
        // A directory under a block's name is that block, not a foreign
        // entry: KV309 (docs/format.md §15.2), through `state_of`.
        if self.flat(root_path, b, &p, &st, loose) {
            return Ok(());
        }
        // llm-d <= v0.8.1's nested layout (src/offload/nested.rs).
        if st.kind == Kind::Dir
            && matches!(self.choice, Choice::Auto | Choice::Llmd)
            && nested::nested(&mut self.scan, self.c, root_path, fd, name, loose)?
        {
            return Ok(());
        }
        stray(loose, p(), &st);
        Ok(())
    }

    /// A root entry of a flat producer (lmcache-mp, lmcache, SGLang's
    /// staging); `false` when its name is none of theirs.
    fn flat(
        &mut self,
        root: &str,
        name: &[u8],
        path: &dyn Fn() -> String,
        st: &Stat,
        loose: &mut Loose,
    ) -> bool {
        let any = self.choice == Choice::Auto;
        if any || self.choice == Choice::LmcacheMp {
            if let Some(n) = grammar::mp_name(name) {
                let fs = self.mp.get(
                    root,
                    |id| {
                        id.model == n.model
                            && id.world == n.world()
                            && id.group == n.group
                            && id.salt == n.salt
                    },
                    || MpIdent::of(&n),
                );
                let rank = n.rank() as u32;
                if n.staging {
                    if st.kind == Kind::Reg {
                        fs.staging.push(Staged {
                            path: path(),
                            size: st.size,
                            mtime_s: st.mtime_s,
                            rank: Some(rank),
                        });
                        return true;
                    }
                    return false;
                }
                if rank >= n.world() as u32 {
                    fs.out_of_range.push((path(), rank));
                } else {
                    fs.blocks.push(n.key(), (rank, st.size, state_of(st.kind)));
                }
                return true;
            }
        }
        if any || self.choice == Choice::Lmcache {
            match grammar::pt_name(name) {
                Pt::One(n) => {
                    let Some(key) = grammar::pt_key(&n.hash) else {
                        return false;
                    };
                    let fs = self.pt.get(
                        root,
                        |id| {
                            id.model == n.model
                                && id.world == n.world
                                && id.dtype == n.dtype
                                && id.layer == n.layer
                                && id.tags == n.tags
                        },
                        || PtIdent::of(&n),
                    );
                    if n.worker >= n.world {
                        fs.out_of_range.push((path(), n.worker));
                    } else {
                        fs.blocks.push(key, (n.worker, st.size, state_of(st.kind)));
                    }
                    return true;
                }
                Pt::Ambiguous(_) => {
                    loose.ambiguous.push(path());
                    return true;
                }
                Pt::Legacy => {
                    loose.legacy.push(path());
                    return true;
                }
                Pt::None => {}
            }
            if name.ends_with(b".pt.meta") || name.ends_with(b".pt.meta.tmp") {
                loose.legacy.push(path());
                return true;
            }
        }
        if (any || self.choice == Choice::Sglang) && grammar::sglang_shape(name) {
            let readings = grammar::sglang_readings(name, &self.sg_models);
            match readings.as_slice() {
                [one] => {
                    let (id, rank) = SgIdent::of(one);
                    let fs = self.scan.sg.entry(id).or_default();
                    if !fs.roots.contains(root) {
                        fs.roots.insert(root.to_string());
                    }
                    let key = grammar::Key {
                        hash: one.hash,
                        len: 32,
                        group: 0,
                    };
                    fs.blocks.push(key, (rank, st.size, state_of(st.kind)));
                    return true;
                }
                [] => {
                    // With --model: a model the operator did not name, or
                    // (a named model's text followed by no valid tail) a
                    // name SGLang does not write.
                    let named = grammar::sglang_splits(name).iter().any(|sp| {
                        let text = &sp.suffix[1..];
                        self.sg_models.iter().any(|m| {
                            text.starts_with(m) && matches!(text.get(m.len()), None | Some(&b'_'))
                        })
                    });
                    if named || self.sg_models.is_empty() {
                        return false;
                    }
                    loose.sglang_other.push(path());
                    return true;
                }
                _ => {
                    loose.sglang.push(path());
                    return true;
                }
            }
        }
        // An unmerged SGLang variant's manifest: recognised, never required.
        if (any || self.choice == Choice::Sglang)
            && name.starts_with(b"__warmup_manifest__")
            && name.ends_with(b".jsonl")
        {
            loose.legacy.push(path());
            return true;
        }
        if (any || self.choice == Choice::Sglang)
            && grammar::sglang_temp(name)
            && st.kind == Kind::Reg
        {
            loose.staging.push(Staged {
                path: path(),
                size: st.size,
                mtime_s: st.mtime_s,
                rank: None,
            });
            return true;
        }
        false
    }

    /// An LMCache GDS first-level directory `str(hash)[0:2]` and its
    /// `str(hash)[2:4]` directories (`gds_backend.py:288-303`).
    fn gds_dir(
        &mut self,
        root: &str,
        parent: &OwnedFd,
        name: &OsStr,
        path: &str,
        loose: &mut Loose,
    ) -> Result<(), Failure> {
        let c = self.c;
        let fd = open_dir(parent.as_fd(), name, c).map_err(|e| cannot(path, "open", e))?;
        let l1 = name.as_bytes().to_vec();
        let mut subs = Vec::new();
        let mut any = false;
        each(&fd, path, c, |n, st| {
            any = true;
            if st.kind == Kind::Dir && grammar::gds_dir2(n.as_bytes()) {
                subs.push((n.to_os_string(), format!("{path}/{}", lossy(n))));
                Ok(())
            } else {
                // A hash of two decimal characters or fewer has no second
                // level; the bucket check says whether this one does.
                self.gds_file(root, &fd, (&l1, b""), n, st, path, loose)
            }
        })?;
        if !any {
            loose.empty_dirs.push(path.to_string());
        }
        for (n, p) in subs {
            let sub = open_dir(fd.as_fd(), &n, c).map_err(|e| cannot(&p, "open", e))?;
            let l2 = n.as_bytes().to_vec();
            let mut any = false;
            each(&sub, &p, c, |leaf, st| {
                any = true;
                self.gds_file(root, &sub, (&l1, &l2), leaf, st, &p, loose)
            })?;
            if !any {
                loose.empty_dirs.push(p);
            }
        }
        Ok(())
    }

    /// One file of a GDS bucket: a data file (its header read), a sidecar
    /// (read), a temp of either, or a stray.
    #[allow(clippy::too_many_arguments)]
    fn gds_file(
        &mut self,
        root: &str,
        dir: &OwnedFd,
        (l1, l2): (&[u8], &[u8]),
        leaf: &OsStr,
        st: Stat,
        dir_path: &str,
        loose: &mut Loose,
    ) -> Result<(), Failure> {
        // A directory under a data file's or sidecar's name is judged as that
        // file (KV309 through `state_of`), never walked.
        let lp = || format!("{dir_path}/{}", lossy(leaf));
        let parsed = grammar::gds_name(leaf.as_bytes()).and_then(|(kind, q)| {
            let mut text = grammar::unquote(q)?;
            text.extend_from_slice(b".pt");
            Some((kind, grammar::pt_name(&text)))
        });
        let (kind, n) = match parsed {
            Some((kind, Pt::One(n))) => (kind, n),
            Some((_, Pt::Ambiguous(_))) => {
                loose.ambiguous.push(lp());
                return Ok(());
            }
            _ => {
                stray(loose, lp(), &st);
                return Ok(());
            }
        };
        let Some(key) = grammar::pt_key(&n.hash) else {
            stray(loose, lp(), &st);
            return Ok(());
        };
        let c = self.c;
        let set = self.scan.gds.entry(PtIdent::of(&n)).or_default();
        if !set.flat.roots.contains(root) {
            set.flat.roots.insert(root.to_string());
        }
        if let Some((b1, b2)) = grammar::gds_buckets(&n.hash) {
            if b1.as_bytes() != l1 || b2.as_bytes() != l2 {
                set.misplaced.push((lp(), format!("{b1}/{b2}")));
                return Ok(());
            }
        }
        if n.worker >= n.world {
            set.flat.out_of_range.push((lp(), n.worker));
            return Ok(());
        }
        let state = state_of(st.kind);
        match kind {
            GdsKind::DataTemp | GdsKind::SidecarTemp => {
                if st.kind == Kind::Reg {
                    set.flat.staging.push(Staged {
                        path: lp(),
                        size: st.size,
                        mtime_s: st.mtime_s,
                        rank: Some(n.worker),
                    });
                } else {
                    stray(loose, lp(), &st);
                }
            }
            GdsKind::Data => {
                if leaf
                    .as_bytes()
                    .ends_with(grammar::GDS_DATA_SUFFIXES[1].as_bytes())
                {
                    set.weka = true;
                }
                set.flat.blocks.push(key, (n.worker, st.size, state));
                if state == State::Regular {
                    let head = read_head(dir.as_fd(), leaf, &lp(), false, c)?;
                    set.headers.insert((key, n.worker), head);
                }
            }
            GdsKind::Sidecar => {
                let head = if state == State::Regular {
                    Some(read_head(dir.as_fd(), leaf, &lp(), true, c)?)
                } else {
                    None
                };
                set.sidecars.insert((key, n.worker), (state, head));
            }
        }
        Ok(())
    }

    /// `<base>/`: config.json, vLLM's probe files, nothing else.
    fn base_dir(
        &mut self,
        i: usize,
        parent: &OwnedFd,
        name: &OsStr,
        path: &str,
    ) -> Result<(), Failure> {
        let c = self.c;
        let fd = open_dir(parent.as_fd(), name, c).map_err(|e| cannot(path, "open", e))?;
        let mut config_seen: Option<Kind> = None;
        let mut loose = Loose::default();
        each(&fd, path, c, |n, st| {
            let p = format!("{path}/{}", lossy(n));
            if n == CONFIG_NAME {
                config_seen = Some(st.kind);
                return Ok(());
            }
            if grammar::probe(n.as_bytes()) && st.kind == Kind::Reg {
                loose.probes.push(Staged {
                    path: p,
                    size: st.size,
                    mtime_s: st.mtime_s,
                    rank: None,
                });
                return Ok(());
            }
            stray(&mut loose, p, &st);
            Ok(())
        })?;
        // Opened only when statx said it is a regular file.
        let config = match config_seen {
            None => Config::Missing,
            Some(Kind::Reg) => read_config(fd.as_fd(), &format!("{path}/{CONFIG_NAME}"), c)?,
            Some(k) => match state_of(k) {
                State::Symlink => Config::Symlink,
                State::Special(w) => Config::Special(w),
                State::Regular => Config::Missing,
            },
        };
        let ns = &mut self.scan.namespaces[i];
        ns.config = config;
        ns.loose.merge(loose);
        Ok(())
    }

    /// `<base>_r<N>/`: `<3 hex>` buckets only; each is a job for the threads.
    fn rank_dir(
        &mut self,
        i: usize,
        rank: u32,
        parent: &OwnedFd,
        name: &OsStr,
        path: &str,
    ) -> Result<(), Failure> {
        let c = self.c;
        let fd = Arc::new(open_dir(parent.as_fd(), name, c).map_err(|e| cannot(path, "open", e))?);
        let mut loose = Loose::default();
        let mut jobs = Vec::new();
        let mut any = false;
        each(&fd, path, c, |n, st| {
            any = true;
            let p = format!("{path}/{}", lossy(n));
            if st.kind == Kind::Dir && grammar::bucket1(n.as_bytes()) {
                jobs.push(Job {
                    ns: i,
                    rank,
                    dir: fd.clone(),
                    name: n.to_os_string(),
                    path: p,
                });
            } else {
                stray(&mut loose, p, &st);
            }
            Ok(())
        })?;
        if !any {
            loose.empty_dirs.push(path.to_string());
        }
        self.jobs.extend(jobs);
        let rs = self.scan.namespaces[i].ranks.entry(rank).or_default();
        rs.loose.merge(loose);
        Ok(())
    }
}

/// Walks one `<3 hex>` bucket: `<2 hex>_g<G>/` directories of block files.
fn bucket(job: &Job, c: &Counters<'_>) -> Result<RankScan, Failure> {
    let mut out = RankScan::default();
    let fd = open_dir(job.dir.as_fd(), &job.name, c).map_err(|e| cannot(&job.path, "open", e))?;
    let b1 = job.name.as_bytes().to_vec();
    let mut subs = Vec::new();
    each(&fd, &job.path, c, |n, st| {
        let p = format!("{}/{}", job.path, lossy(n));
        match grammar::bucket2(n.as_bytes()) {
            Some((b2, g)) if st.kind == Kind::Dir => {
                subs.push((n.to_os_string(), b2.to_vec(), g, p))
            }
            _ => stray(&mut out.loose, p, &st),
        }
        Ok(())
    })?;
    if subs.is_empty() && out.loose.is_empty() {
        out.loose.empty_dirs.push(job.path.clone());
    }
    for (n, b2, g, p) in subs {
        let sub = open_dir(fd.as_fd(), &n, c).map_err(|e| cannot(&p, "open", e))?;
        let mut any = false;
        each(&sub, &p, c, |leaf, st| {
            any = true;
            // A path is built only for what is reported by path.
            let lp = || format!("{p}/{}", lossy(leaf));
            match grammar::leaf(leaf.as_bytes(), &b1, &b2, g) {
                LeafName::Block(key) => out.blocks.push(BlockFile {
                    key,
                    size: st.size,
                    state: state_of(st.kind),
                }),
                LeafName::Temp(_, _) if st.kind == Kind::Reg => out.loose.staging.push(Staged {
                    path: lp(),
                    size: st.size,
                    mtime_s: st.mtime_s,
                    rank: Some(job.rank),
                }),
                _ => stray(&mut out.loose, lp(), &st),
            }
            Ok(())
        })?;
        if !any {
            out.loose.empty_dirs.push(p);
        }
    }
    Ok(out)
}

/// What a PATH on the command line is.
/// `path` without its trailing slashes (`/` itself stays `/`).
fn without_trailing_slashes(path: &Path) -> PathBuf {
    let b = path.as_os_str().as_bytes();
    let end = b
        .iter()
        .rposition(|&c| c != b'/')
        .map_or(b.len().min(1), |i| i + 1);
    PathBuf::from(OsStr::from_bytes(&b[..end]))
}

fn named(path: &Path) -> Result<Option<(PathBuf, Vec<u8>)>, Failure> {
    let display = path.display().to_string();
    match lstat_at(CWD, path.as_os_str()) {
        Ok(Some(Kind::Dir)) => {}
        Ok(Some(Kind::Link)) => {
            return Err(Failure::usage(
                format!("{display} is a symlink: kvcr never follows links"),
                Some("name the directory it points to".to_string()),
            ))
        }
        Ok(Some(_)) => {
            return Err(Failure::usage(
                format!(
                    "{display} is not a directory: name an offload root or a namespace directory"
                ),
                None,
            ))
        }
        Ok(None) => return Err(Failure::usage(format!("{display} does not exist"), None)),
        Err(e) => return Err(cannot(&display, "statx", e)),
    }
    let Some(name) = path.file_name() else {
        return Ok(None);
    };
    let parent = match path.parent() {
        Some(p) if p.as_os_str().is_empty() => PathBuf::from("."),
        Some(p) => p.to_path_buf(),
        None => return Ok(None),
    };
    let b = name.as_bytes();
    if let Some((base, _)) = grammar::rank_dir(b) {
        return Ok(Some((parent, base.to_vec())));
    }
    if grammar::namespace_dir(b).is_some() {
        let has_config = lstat_at(CWD, path.join(CONFIG_NAME).as_os_str())
            .map_err(|e| cannot(&display, "statx", e))?
            .is_some();
        if has_config {
            return Ok(Some((parent, b.to_vec())));
        }
    }
    Ok(None)
}

/// Walks every PATH; `threads` walk the buckets of rank directories.
pub fn walk(
    paths: &[PathBuf],
    choice: Choice,
    sg_models: &[Vec<u8>],
    threads: usize,
    progress: Option<&AtomicU64>,
) -> Result<Scan, Failure> {
    let counters = Counters {
        entries: AtomicU64::new(0),
        without_noatime: AtomicU64::new(0),
        progress,
    };
    let mut w = Walker {
        choice,
        sg_models: sg_models
            .iter()
            .map(|m| grammar::sglang_model_text(m))
            .collect(),
        c: &counters,
        scan: Scan::default(),
        ns_index: BTreeMap::new(),
        jobs: Vec::new(),
        threads,
        mp: FlatSets::default(),
        pt: FlatSets::default(),
    };
    let mut seen = std::collections::BTreeSet::new();
    for p in paths {
        // `lnk/` names what the link points to (the kernel follows a link
        // before a trailing slash, O_NOFOLLOW or not): judged as `lnk`.
        let p = &without_trailing_slashes(p);
        match named(p)? {
            Some((parent, base)) => {
                if seen.insert((parent.clone(), Some(base.clone()))) {
                    w.root(&parent, Some(&base))?;
                }
            }
            None => {
                if seen.insert((p.clone(), None)) {
                    w.root(p, None)?;
                }
            }
        }
    }
    w.scan.mp = std::mem::take(&mut w.mp).finish();
    w.scan.pt = std::mem::take(&mut w.pt).finish();
    w.scan.seal();
    let jobs = std::mem::take(&mut w.jobs);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, u32, RankScan)>> = Mutex::new(Vec::new());
    let failure: Mutex<Option<Failure>> = Mutex::new(None);
    let c = w.c;
    std::thread::scope(|s| {
        for _ in 0..threads.max(1).min(jobs.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                if failure.lock().map(|f| f.is_some()).unwrap_or(true) {
                    break;
                }
                match bucket(job, c) {
                    Ok(r) => {
                        if let Ok(mut v) = results.lock() {
                            v.push((job.ns, job.rank, r));
                        }
                    }
                    Err(e) => {
                        if let Ok(mut f) = failure.lock() {
                            f.get_or_insert(e);
                        }
                        break;
                    }
                }
            });
        }
    });
    if let Some(f) = failure.into_inner().ok().flatten() {
        return Err(f);
    }
    let mut results = results.into_inner().unwrap_or_default();
    // A stable order whatever the threads did.
    results.sort_by_key(|r| (r.0, r.1));
    for (ns, rank, r) in results {
        let rs = w.scan.namespaces[ns].ranks.entry(rank).or_default();
        rs.blocks.extend(r.blocks);
        rs.loose.merge(r.loose);
    }
    w.scan.entries = w.c.entries.load(Ordering::Relaxed);
    w.scan.without_noatime = w.c.without_noatime.load(Ordering::Relaxed);
    Ok(w.scan)
}
