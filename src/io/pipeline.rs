//! The audit's read pipeline: walk the inventory, read, parse and digest
//! every descriptor, on several threads, with a result that never depends
//! on thread timing.
//!
//! The calling thread walks ([`InventoryRoot::walk`]: listing and name
//! checks only) and numbers what it lists in walk order: every entry gets a
//! walk number, every descriptor to read also a descriptor number.
//! Descriptors go, in batches, to a queue; helper threads (started only
//! once there is a full batch, so a small inventory never starts one) and
//! the walking thread itself take batches and open, read (one reused
//! buffer per thread), parse and digest them. A candidate is stored in the
//! slot of its descriptor number and a file-level verdict keeps its walk
//! number, so both lists come out exactly as a one-thread walk makes them.
//!
//! [`Options::threads`] is the number of threads (the walking thread
//! included; `KVCR_THREADS` on the command line, the library's `threads`
//! option): `1` reads everything on the calling thread. The default
//! ([`threads`]) is the number of CPUs this process may run on.

use crate::format::descriptor::parse_descriptor_with;
use crate::format::names::display_path;
use crate::io::inventory::{
    Entry, EntryKind, InventoryError, InventoryRoot, Listed, ReadJob, Reader,
};
use crate::rules::{Candidate, FileVerdict};
use std::collections::VecDeque;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// Upper bound on threads, whatever is asked.
pub const MAX_THREADS: usize = 64;

/// Descriptors handed to a thread at a time.
const BATCH: usize = 16;

/// Batches waiting, per thread, before the walking thread reads one itself
/// (bounds what is held in the queue).
const QUEUED_PER_THREAD: usize = 2;

/// How to collect.
#[derive(Clone, Debug)]
pub struct Options {
    /// Threads that read and parse, the walking thread included; 0 is the
    /// default ([`threads`]): the CPUs this process may run on, asked only
    /// once the walk has a full batch for a second thread, so a small
    /// inventory never pays for asking (it reads the cgroup files).
    pub threads: usize,
    /// Keep each descriptor's allocations with their handles (import needs
    /// them); without, only the summary the verdict needs is kept.
    pub keep_allocations: bool,
    /// The declared producer's uid (`--producer-user`): its files are
    /// trusted like root's (docs/format.md §2.4).
    pub producer_uid: Option<u32>,
}

/// [`Options::threads`] for `asked`: `asked` when it is at least 1 (at
/// most `MAX_THREADS`), else 0, the default (the CPUs this process may run
/// on, asked when needed: [`cpus`]).
pub fn threads(asked: Option<usize>) -> usize {
    asked.filter(|&n| n >= 1).map_or(0, |n| n.min(MAX_THREADS))
}

/// The number of CPUs this process may run on, at most `MAX_THREADS`.
pub fn cpus() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_THREADS)
}

/// Descriptors become candidates; every other entry with findings (and a
/// descriptor that could not be read) becomes a file-level verdict. Both
/// lists are in walk order. `tick` is called once per listed entry, on the
/// calling thread.
pub fn collect(
    root: &Path,
    opts: &Options,
    tick: &mut dyn FnMut(),
) -> Result<(Vec<Candidate>, Vec<FileVerdict>), InventoryError> {
    let inv = InventoryRoot::open(root, opts.producer_uid)?;
    let keep = opts.keep_allocations;
    if opts.threads != 1 {
        return parallel(&inv, opts.threads, keep, tick);
    }
    let mut cands = Vec::new();
    let mut files = Vec::new();
    let mut reader = inv.reader();
    inv.walk(|listed| {
        tick();
        let out = match listed {
            Listed::Entry(entry) => outcome(entry, None, None, keep),
            Listed::Read(job) => {
                let (entry, shown, bytes) = reader.read_shown(job);
                outcome(entry, Some(shown), bytes, keep)
            }
        };
        match out {
            Outcome::Candidate(c) => cands.push(c),
            Outcome::File(f) => files.push(f),
            Outcome::Nothing => {}
        }
    })?;
    // Kept until the verdict: no spare capacity.
    cands.shrink_to_fit();
    Ok((cands, files))
}

/// The mode a descriptor given in memory is taken to have: a regular file,
/// `0600`, as the writer of docs/format.md §3.5 leaves it.
const IN_MEMORY_MODE: u32 = libc::S_IFREG | 0o600;

/// [`collect`] for descriptor files given in memory (`crate::api::audit_files`):
/// what the walk and the reader make of an inventory that holds exactly
/// these files, each a regular file of mode `0600` owned by this user with
/// one name, in private directories on the root's mount (docs/format.md
/// §2.3–§2.5): the same walk order (sorted by name, pre-order: by path,
/// component by component), the same size limit (KV004), the same parser.
/// Refused, naming the path: one that is not relative plain names ending in
/// a descriptor's name (§2.2) at most `MAX_DESCRIPTOR_DEPTH` deep, a
/// directory named like a descriptor or a staging leftover (the walk
/// reports those, never a descriptor below them), and a path given twice.
pub fn collect_in_memory(
    files: &[(&Path, &[u8])],
    keep_allocations: bool,
) -> Result<(Vec<Candidate>, Vec<FileVerdict>), String> {
    use crate::format::names::{
        classify_name, is_staging_name, parse_rank_name, MAX_DESCRIPTOR_DEPTH,
    };
    use std::path::Component;
    let mut sorted: Vec<(&Path, &[u8])> = files.to_vec();
    for (path, _) in &sorted {
        let shown = display_path(path);
        let names: Vec<&std::ffi::OsStr> = path
            .components()
            .map(|c| match c {
                Component::Normal(n) => Ok(n),
                _ => Err(format!(
                    "{shown}: a path below the root is plain names (no /, . or ..)"
                )),
            })
            .collect::<Result<_, _>>()?;
        let Some((last, dirs)) = names.split_last() else {
            return Err("an empty path names no file".to_string());
        };
        if !matches!(classify_name(last), EntryKind::Descriptor { .. }) {
            return Err(format!("{shown}: not a descriptor's name (rank-<R>.json)"));
        }
        if names.len() > MAX_DESCRIPTOR_DEPTH {
            return Err(format!(
                "{shown}: deeper than {MAX_DESCRIPTOR_DEPTH} levels, where descriptors are not read"
            ));
        }
        if let Some(d) = dirs
            .iter()
            .find(|d| is_staging_name(d) || parse_rank_name(d).is_some())
        {
            return Err(format!(
                "{shown}: directory {} is named like a descriptor or a staging leftover",
                display_path(Path::new(d))
            ));
        }
    }
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    if let Some(w) = sorted.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(format!("{}: given twice", display_path(w[0].0)));
    }
    let mut cands = Vec::new();
    let mut verdicts = Vec::new();
    for (path, bytes) in sorted {
        let at = display_path(path);
        let name = path.file_name().unwrap_or_default();
        let too_large = crate::io::inventory::reader::too_large(bytes.len() as u64, &at);
        let entry = Entry {
            rel_path: path.to_path_buf(),
            kind: classify_name(name),
            findings: too_large.into_iter().collect(),
            mode: Some(IN_MEMORY_MODE),
        };
        let read = entry.findings.is_empty().then_some(bytes);
        match outcome(entry, Some(at), read, keep_allocations) {
            Outcome::Candidate(c) => cands.push(c),
            Outcome::File(f) => verdicts.push(f),
            Outcome::Nothing => {}
        }
    }
    Ok((cands, verdicts))
}

/// What one listed entry contributes. Short-lived (moved straight into its
/// list), so the size difference is cheaper than a box per candidate.
#[allow(clippy::large_enum_variant)]
enum Outcome {
    Candidate(Candidate),
    File(FileVerdict),
    Nothing,
}

/// An entry (with the bytes of a descriptor that was read) as a candidate
/// or a file-level verdict. `shown`, when given, is `display_path` of the
/// entry's path, already made (not made twice).
fn outcome(
    entry: Entry,
    shown: Option<String>,
    bytes: Option<&[u8]>,
    keep_allocations: bool,
) -> Outcome {
    let path = shown.unwrap_or_else(|| display_path(&entry.rel_path));
    match (&entry.kind, bytes) {
        (EntryKind::Descriptor { name_rank }, Some(bytes)) => {
            let parsed = parse_descriptor_with(bytes, keep_allocations);
            let mut findings = entry.findings;
            findings.extend(parsed.findings.into_iter().map(|f| f.at(path.clone())));
            Outcome::Candidate(Candidate {
                path,
                raw_path: entry.rel_path.as_os_str().as_bytes().to_vec(),
                name_rank: *name_rank,
                mode: entry.mode,
                ident: parsed.ident,
                descriptor: parsed.descriptor,
                findings,
            })
        }
        _ if entry.findings.is_empty() => Outcome::Nothing,
        _ => Outcome::File(FileVerdict {
            path,
            findings: entry.findings,
        }),
    }
}

/// A descriptor to read with its walk number and its descriptor number.
type Job = (usize, usize, ReadJob);
type Batch = Vec<Job>;
/// File-level verdicts with their walk numbers.
type Files = Vec<(usize, FileVerdict)>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking reader poisons nothing that matters here: the panic
    // itself is re-raised when its thread is joined.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the threads share: batches to read and the candidates' slots.
struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
    /// Slot `j` holds the candidate of descriptor `j` once it is read.
    slots: Mutex<Vec<Option<Candidate>>>,
}

struct Queue {
    batches: VecDeque<Batch>,
    /// No more batches will come.
    closed: bool,
}

impl Shared {
    /// Adds a batch whose descriptors are numbered below `descriptors`;
    /// returns how many batches are waiting now. `helpers`: whether a
    /// helper thread was started, so one may be waiting to be woken (a
    /// wake-up is a system call even when nobody waits).
    fn push(&self, batch: Batch, descriptors: usize, helpers: bool) -> usize {
        {
            let mut slots = lock(&self.slots);
            if slots.len() < descriptors {
                slots.resize_with(descriptors, || None);
            }
        }
        let waiting = {
            let mut q = lock(&self.queue);
            q.batches.push_back(batch);
            q.batches.len()
        };
        if helpers {
            self.ready.notify_one();
        }
        waiting
    }

    fn try_pop(&self) -> Option<Batch> {
        lock(&self.queue).batches.pop_front()
    }

    /// The next batch; `None` once the queue is closed and empty.
    fn pop(&self) -> Option<Batch> {
        let mut q = lock(&self.queue);
        loop {
            if let Some(b) = q.batches.pop_front() {
                return Some(b);
            }
            if q.closed {
                return None;
            }
            q = self.ready.wait(q).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// No more batches; `helpers` as for [`Shared::push`].
    fn close(&self, drop_waiting: bool, helpers: bool) {
        let mut q = lock(&self.queue);
        if drop_waiting {
            q.batches.clear();
        }
        q.closed = true;
        drop(q);
        if helpers {
            self.ready.notify_all();
        }
    }
}

/// One thread's reading: its reader, and what it made of each batch.
struct Worker<'a> {
    reader: Reader<'a>,
    keep: bool,
    files: Files,
    /// Candidates of the batch in hand, moved to their slots in one go.
    done: Vec<(usize, Candidate)>,
}

impl<'a> Worker<'a> {
    fn new(inv: &'a InventoryRoot, keep: bool) -> Self {
        Worker {
            reader: inv.reader(),
            keep,
            files: Vec::new(),
            done: Vec::with_capacity(BATCH),
        }
    }

    /// Opens, reads, parses and digests every descriptor of `batch`.
    fn read(&mut self, batch: Batch, shared: &Shared) {
        for (seq, j, job) in batch {
            let (entry, shown, bytes) = self.reader.read_shown(job);
            match outcome(entry, Some(shown), bytes, self.keep) {
                Outcome::Candidate(c) => self.done.push((j, c)),
                Outcome::File(f) => self.files.push((seq, f)),
                Outcome::Nothing => {}
            }
        }
        let mut slots = lock(&shared.slots);
        for (j, c) in self.done.drain(..) {
            slots[j] = Some(c);
        }
    }
}

/// The walk on this thread, reading on `threads` threads (0: [`cpus`],
/// asked at the first full batch).
fn parallel(
    inv: &InventoryRoot,
    threads: usize,
    keep: bool,
    tick: &mut dyn FnMut(),
) -> Result<(Vec<Candidate>, Vec<FileVerdict>), InventoryError> {
    let mut threads = threads;
    let shared = Shared {
        queue: Mutex::new(Queue {
            batches: VecDeque::new(),
            closed: false,
        }),
        ready: Condvar::new(),
        slots: Mutex::new(Vec::new()),
    };
    let (walked, mut files) = std::thread::scope(|s| {
        let shared = &shared;
        let mut helpers = Vec::new();
        let mut me = Worker::new(inv, keep);
        let mut listed: Files = Vec::new();
        let mut batch: Batch = Vec::with_capacity(BATCH);
        let (mut seq, mut descriptors) = (0usize, 0usize);
        let walked = inv.walk(|l| {
            tick();
            match l {
                Listed::Entry(entry) => {
                    if let Outcome::File(f) = outcome(entry, None, None, keep) {
                        listed.push((seq, f));
                    }
                }
                Listed::Read(job) => {
                    batch.push((seq, descriptors, job));
                    descriptors += 1;
                    if batch.len() == BATCH {
                        let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                        // The helpers start after the first push: they
                        // find it queued, none waits for it yet.
                        let waiting = shared.push(full, descriptors, !helpers.is_empty());
                        if threads == 0 {
                            threads = cpus();
                        }
                        if helpers.is_empty() {
                            for _ in 1..threads {
                                helpers.push(s.spawn(move || {
                                    let mut w = Worker::new(inv, keep);
                                    while let Some(b) = shared.pop() {
                                        w.read(b, shared);
                                    }
                                    w.files
                                }));
                            }
                        }
                        // Readers behind: this thread reads a batch too.
                        if waiting > QUEUED_PER_THREAD * threads {
                            if let Some(b) = shared.try_pop() {
                                me.read(b, shared);
                            }
                        }
                    }
                }
            }
            seq += 1;
        });
        if !batch.is_empty() {
            shared.push(batch, descriptors, !helpers.is_empty());
        }
        // On failure the run cannot happen: drop what is queued.
        shared.close(walked.is_err(), !helpers.is_empty());
        while let Some(b) = shared.pop() {
            me.read(b, shared);
        }
        listed.append(&mut me.files);
        for h in helpers {
            match h.join() {
                Ok(mut f) => listed.append(&mut f),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        (walked, listed)
    });
    walked?;
    // Walk numbers are unique: an unstable sort is deterministic.
    files.sort_unstable_by_key(|(seq, _)| *seq);
    let slots = shared
        .slots
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    // Collected in place (same size: `Option<Candidate>` uses a niche), so
    // the candidates are never held twice; `flatten` would allocate anew.
    #[allow(clippy::filter_map_identity)]
    let cands: Vec<Candidate> = slots.into_iter().filter_map(|c| c).collect();
    Ok((cands, files.into_iter().map(|(_, f)| f).collect()))
}
