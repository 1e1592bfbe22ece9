//! The pure verdict core of `kvcr pools` (docs/format.md §16.3–§16.5): the
//! facts one read of a pool file gives, the liveness `--live` found, and the
//! judgement of a pool, of a group (one pool directory) and of the run.
//! Nothing here touches the system.

use super::codes::{self, Code};
use super::format::{self as fmt, FrameError, Header, Record};
use crate::format::finding::Severity;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// What the operator says that KVCR does not record on disk, named after
/// KVCR's flags and configuration fields, with KVCR's defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    pub paths: Vec<PathBuf>,
    pub live: bool,
    /// `--socket-path`: the service's socket (liveness: which listener).
    pub socket_path: Option<PathBuf>,
    /// `--guard-count`.
    pub guard_count: Option<u64>,
    /// `--pool-sizes-gb`, as bytes (each rounded down to the page).
    pub pool_sizes_bytes: Option<Vec<u64>>,
    /// `journal_bytes` (KVCR's CLI: 104,857,600).
    pub journal_bytes: u64,
    /// The claimant's `pool_layouts`.
    pub pool_layouts: Option<Vec<(String, u64)>>,
    /// `--compatibility-digest`.
    pub compatibility_digest: Option<String>,
    /// The writing host's page size.
    pub page_size: u64,
    /// `G3Options.paths`, in order.
    pub g3_paths: Vec<PathBuf>,
    /// `G3Options.capacity_bytes_per_file`.
    pub capacity_bytes_per_file: Option<u64>,
    /// `(st_dev, st_ino)` of the original file, for a copy.
    pub identity: Option<(u64, u64)>,
    /// Milliseconds between the two reads.
    pub interval_ms: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            paths: Vec::new(),
            live: false,
            socket_path: None,
            guard_count: None,
            pool_sizes_bytes: None,
            journal_bytes: fmt::DEFAULT_JOURNAL_BYTES,
            pool_layouts: None,
            compatibility_digest: None,
            page_size: fmt::DEFAULT_PAGE_SIZE,
            g3_paths: Vec::new(),
            capacity_bytes_per_file: None,
            identity: None,
            interval_ms: 100,
        }
    }
}

impl Options {
    /// The mapping size the options give: journal + Σ pool sizes.
    pub fn mapping_bytes(&self) -> Option<u64> {
        let sizes = self.pool_sizes_bytes.as_ref()?;
        sizes
            .iter()
            .try_fold(self.journal_bytes, |a, &s| a.checked_add(s))
    }
}

/// One finding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub code: Code,
    pub severity: Severity,
    pub message: String,
}

impl Finding {
    pub fn new(code: Code, message: impl Into<String>) -> Finding {
        Finding {
            code,
            severity: code.severity(),
            message: message.into(),
        }
    }
    pub fn notice(code: Code, message: impl Into<String>) -> Finding {
        Finding {
            severity: Severity::Notice,
            ..Finding::new(code, message)
        }
    }
    pub fn is_reject(&self) -> bool {
        self.severity == Severity::Reject
    }
}

/// The file's `fstat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Stat {
    pub dev: u64,
    pub ino: u64,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub blocks: u64,
}

/// The pending frames of a journal (`[consumed, published)`), decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pending {
    /// Frames decoded before any error.
    pub frames: u64,
    /// Pending bytes (`published − consumed`).
    pub bytes: u64,
    /// The first framing error and the cursor of its frame.
    pub frame_error: Option<(u64, FrameError)>,
    /// The first payload error and the cursor of its frame.
    pub payload_error: Option<(u64, String)>,
    /// What the last pending record of each key names.
    pub table: Table,
}

/// What a replayed table (last write per key) names, summarised as soon as
/// it is built, so that no read keeps a table: the key count, the first
/// slot KVCR would refuse, and which G3 files its G3 slots live in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    pub keys: usize,
    /// The table stopped growing at [`TABLE_CAP`] keys.
    pub capped: bool,
    /// The first slot problem ([`slot_problem`]).
    pub slot_problem: Option<String>,
    /// The G3 files (index in `G3Options.paths`) a G3 slot names.
    pub g3_files: BTreeSet<u64>,
}

/// A table being replayed (last write per key wins; a record naming
/// neither tier removes its key), kept compact: labels interned, slots in
/// boxed slices (≈ 150 bytes a key).
#[derive(Debug, Default)]
pub struct Replay {
    labels: Vec<String>,
    entries: BTreeMap<Box<[u8]>, Entry>,
    capped: bool,
}

#[derive(Debug)]
struct Entry {
    g2: Option<Box<[(u32, u64)]>>,
    g3: Option<u64>,
}

impl Replay {
    /// Applies one record of `key`.
    pub fn apply(&mut self, key: &[u8], r: Record) {
        if r.is_removal() {
            self.entries.remove(key);
            return;
        }
        if self.entries.len() >= TABLE_CAP && !self.entries.contains_key(key) {
            self.capped = true;
            return;
        }
        let g2 = r.g2.map(|pairs| {
            pairs
                .into_iter()
                .map(|(label, slot)| (self.intern(label), slot))
                .collect()
        });
        self.entries.insert(key.into(), Entry { g2, g3: r.g3 });
    }

    fn intern(&mut self, label: String) -> u32 {
        match self.labels.iter().position(|l| *l == label) {
            Some(i) => i as u32,
            None => {
                self.labels.push(label);
                (self.labels.len() - 1) as u32
            }
        }
    }

    /// The summary a read keeps ([`Table`]); the replay is dropped after.
    pub fn summary(&self, o: &Options) -> Table {
        let n = o.g3_paths.len() as u64;
        Table {
            keys: self.entries.len(),
            capped: self.capped,
            slot_problem: slot_problem(self, o),
            g3_files: if n == 0 {
                BTreeSet::new()
            } else {
                self.entries
                    .values()
                    .filter_map(|e| e.g3)
                    .map(|s| s % n)
                    .collect()
            },
        }
    }
}

/// The most distinct keys kvcr keeps while it replays one table (one table
/// at a time; measured ≈ 270 bytes a key with the allocator's overhead).
pub const TABLE_CAP: usize = 1_000_000;

/// The journal, as one read saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Journal {
    pub header: Header,
    /// `None` when the cursors are invalid.
    pub pending: Option<Pending>,
}

/// The handback region, as one read saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Handback {
    /// Where it starts is not known (no mapping size given or inferred).
    NotLocated(String),
    Absent,
    /// Torn: KVCR discards it.
    Torn(String),
    Present(Region),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    pub offset: u64,
    pub length: u64,
    pub digest: [u8; 32],
    /// The digest under the terms given, or why it was not computed.
    pub computed: Result<[u8; 32], String>,
    /// The terms the digest was computed with (for the message).
    pub terms_used: String,
    /// Bytes past `40 + length`.
    pub trailing: u64,
    /// The records, or KVCR's refusal of the body.
    pub records: Result<Table, String>,
    pub frames: u64,
}

impl Region {
    pub fn digest_ok(&self) -> Option<bool> {
        self.computed.as_ref().ok().map(|c| c == &self.digest)
    }
}

/// One read of one pool file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolRead {
    pub stat: Stat,
    /// `None` when the file is shorter than the journal header.
    pub journal: Option<Journal>,
    pub handback: Handback,
    /// The mapping size used, and whether it was given or inferred.
    pub mapping: Option<(u64, bool)>,
}

/// Who holds a pool file (`--live`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// Offline, or why it could not be decided.
    NotChecked(String),
    /// Held by the pid that owns the listening socket (plus primaries).
    Live {
        service: i32,
        socket: String,
        primaries: Vec<i32>,
    },
    /// Held only by processes other than a listening service.
    Leaked { holders: Vec<i32> },
    /// Held, but no listening service could be tied to a holder.
    HeldNoService { holders: Vec<i32> },
    /// Held by nobody, with the whole lock table read.
    Orphan,
}

impl Liveness {
    pub fn as_str(&self) -> &'static str {
        match self {
            Liveness::NotChecked(_) => "not-checked",
            Liveness::Live { .. } => "live",
            Liveness::Leaked { .. } => "leaked",
            Liveness::HeldNoService { .. } => "held-no-service",
            Liveness::Orphan => "orphan",
        }
    }
}

/// A G3 file as it was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum G3State {
    Absent,
    Symlink,
    NotRegular,
    File {
        size: u64,
        mode: u32,
        /// Locks on it: (pid, exclusive).
        locks: Option<Vec<(i32, bool)>>,
    },
}

/// Where an entry of a pool directory stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryKind {
    Symlink,
    NotRegular,
    ForeignName(String),
    Pool,
}

/// One judged pool file (or a `kvcr-*` entry that is not one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolReport {
    pub path: PathBuf,
    /// `pool_<i>`'s index, when the name is a service's.
    pub index: Option<u64>,
    pub pool_id: Option<String>,
    pub generation: Option<String>,
    pub kind: EntryKind,
    pub read: Option<PoolRead>,
    /// Whether the two reads differed.
    pub changed: Vec<String>,
    pub liveness: Liveness,
    pub findings: Vec<Finding>,
    /// What KVCR itself would do with it.
    pub kvcr_would: String,
}

impl PoolReport {
    pub fn rejected(&self) -> bool {
        self.findings.iter().any(Finding::is_reject)
    }
    /// The cause: the first rejecting finding in the root-cause order.
    pub fn cause(&self) -> Option<&Finding> {
        self.findings
            .iter()
            .filter(|f| f.is_reject())
            .min_by_key(|f| f.code.rank())
    }
    pub fn verdict(&self) -> &'static str {
        if self.rejected() {
            "rejected"
        } else {
            "ok"
        }
    }
}

/// One pool directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupReport {
    pub path: PathBuf,
    /// Entries not named `kvcr-*` (not KVCR's; the directory may be /dev/shm).
    pub others: usize,
    pub findings: Vec<Finding>,
    /// The path reached a symlink on the way (KVCR resolves it).
    pub indices: Vec<u64>,
}

impl GroupReport {
    pub fn rejected(&self) -> bool {
        self.findings.iter().any(Finding::is_reject)
    }
    pub fn verdict(&self) -> &'static str {
        if self.rejected() {
            "rejected"
        } else {
            "ok"
        }
    }
}

/// The run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    pub options: Options,
    pub groups: Vec<GroupReport>,
    pub pools: Vec<PoolReport>,
    /// G3 files named by the options: (path, state, findings).
    pub g3: Vec<(PathBuf, G3State, Vec<Finding>)>,
}

impl Run {
    /// 0 when nothing is rejected, 1 when something is.
    pub fn exit_status(&self) -> i32 {
        let rejected = self.pools.iter().any(PoolReport::rejected)
            || self.groups.iter().any(GroupReport::rejected)
            || self
                .g3
                .iter()
                .any(|(_, _, f)| f.iter().any(Finding::is_reject));
        if rejected {
            crate::format::exit::REJECTED
        } else {
            crate::format::exit::OK
        }
    }
}

// ---------------------------------------------------------------------------
// Judging one read
// ---------------------------------------------------------------------------

/// The findings of one read of a pool file.
pub fn judge_read(r: &PoolRead, o: &Options) -> Vec<Finding> {
    let mut out = Vec::new();
    let st = &r.stat;
    if st.mode & 0o7777 != fmt::POOL_MODE {
        out.push(Finding::new(
            codes::KV404,
            format!(
                "mode is {:04o}, KVCR requires 0600: its attach refuses the file (\"must have \
                 mode 0600\"), so every claim of this pool fails",
                st.mode & 0o7777
            ),
        ));
    }
    let jb = o.journal_bytes;
    if jb <= fmt::JOURNAL_HEADER_BYTES || !jb.is_multiple_of(4096) {
        out.push(Finding::new(
            codes::KV428,
            format!("journal_bytes {jb} is not what KVCR accepts (> 4096 and a multiple of 4096)"),
        ));
        return out;
    }
    match r.mapping {
        Some((mapping, given)) if st.size < mapping => {
            let what = if st.size == 0 {
                " (0 bytes: a service start killed before ftruncate)"
            } else {
                ""
            };
            out.push(Finding::new(
                codes::KV406,
                format!(
                    "the file is {} bytes, the mapping {} is {mapping}{what}: KVCR's attach \
                     refuses it (\"smaller than the grant describes\")",
                    st.size,
                    if given {
                        "the options give"
                    } else {
                        "the group's other pools show"
                    }
                ),
            ));
        }
        Some((mapping, _)) if st.blocks.saturating_mul(512) < mapping => {
            out.push(Finding::new(
                codes::KV407,
                format!(
                    "{} bytes allocated of a {mapping}-byte mapping: KVCR fallocates at creation, \
                     so this is a copy or an interrupted start",
                    st.blocks.saturating_mul(512)
                ),
            ));
        }
        _ => {}
    }
    if st.size < jb && !out.iter().any(|f| f.code == codes::KV406) {
        out.push(Finding::new(
            codes::KV428,
            format!(
                "the file is {} bytes, shorter than the {jb}-byte journal KVCR writes at its \
                 start: not decoded",
                st.size
            ),
        ));
    }
    if let Some(j) = &r.journal {
        judge_journal(j, jb, o, &mut out);
    }
    judge_handback(&r.handback, o, &mut out);
    judge_slots(r, &mut out);
    out
}

fn judge_journal(j: &Journal, jb: u64, o: &Options, out: &mut Vec<Finding>) {
    let h = &j.header;
    let cap = jb - fmt::JOURNAL_HEADER_BYTES;
    match h.invalid {
        0 => {}
        1 => out.push(Finding::new(
            codes::KV408,
            format!(
                "the journal is invalidated (invalid = 1): recovery is off for this lease and a \
                 death promotes cold; {}",
                pending_words(j)
            ),
        )),
        v => out.push(Finding::new(
            codes::KV408,
            format!(
                "the invalid word is {v}, a value KVCR never writes; KVCR reads any non-zero \
                 value as invalid; {}",
                pending_words(j)
            ),
        )),
    }
    if let Some(off) = h.stray {
        out.push(Finding::new(
            codes::KV408,
            format!(
                "header byte at offset {off} is not zero; KVCR never writes outside the words \
                 at 0, 128 and 192 and ignores it"
            ),
        ));
    }
    if !fmt::cursors_valid(h.published, h.consumed, cap) {
        out.push(Finding::new(
            codes::KV409,
            format!(
                "the cursors are invalid: published {}, consumed {}, ring capacity {cap} (both \
                 multiples of 8 and consumed ≤ published ≤ consumed + capacity are required)",
                h.published, h.consumed
            ),
        ));
        return;
    }
    let Some(p) = &j.pending else { return };
    if let Some((at, e)) = &p.frame_error {
        out.push(Finding::new(
            codes::KV410,
            format!(
                "the pending frame at cursor {at}: {}; KVCR's reader invalidates the journal and \
                 the lease runs cold",
                e.describe()
            ),
        ));
    }
    if let Some((at, e)) = &p.payload_error {
        out.push(Finding::new(
            codes::KV411,
            format!(
                "the pending frame at cursor {at} holds no valid recovery record: {e}; a live \
                 Guard mirroring it fails and stops the service{}",
                if o.pool_layouts.is_some() {
                    " (labels checked against --pool-layouts; a wrong layout gives the same result)"
                } else {
                    ""
                }
            ),
        ));
    }
}

fn pending_words(j: &Journal) -> String {
    match &j.pending {
        Some(p) => format!(
            "{} pending frame(s) ({} bytes) between consumed and published, one lease's \
             changes, never the pool's content",
            p.frames, p.bytes
        ),
        None => "no pending frames decoded".to_string(),
    }
}

fn judge_handback(h: &Handback, o: &Options, out: &mut Vec<Finding>) {
    match h {
        Handback::Absent | Handback::NotLocated(_) => {}
        Handback::Torn(why) => out.push(Finding::new(
            codes::KV413,
            format!(
                "the handback region is torn ({why}): KVCR discards it at the next claim and the \
                 next primary starts cold"
            ),
        )),
        Handback::Present(r) => {
            match r.digest_ok() {
                Some(false) => {
                    out.push(Finding::new(
                        codes::KV414,
                        format!(
                            "the handback digest does not match under the terms used ({}): KVCR \
                             refuses every claim of this pool until the service restarts; a \
                             wrong option gives exactly this result",
                            r.terms_used
                        ),
                    ));
                    return;
                }
                None => out.push(Finding::new(
                    codes::KV415,
                    format!(
                        "a {}-byte handback region is present; its digest is not checked ({}); \
                         structure only",
                        r.length,
                        r.computed.as_ref().err().map_or("", String::as_str)
                    ),
                )),
                Some(true) => {}
            }
            if let Err(e) = &r.records {
                let f = if r.digest_ok() == Some(true) {
                    Finding::new(codes::KV416, format!("{e}: KVCR refuses the claim"))
                } else {
                    Finding::notice(
                        codes::KV416,
                        format!(
                            "{e} (the digest is not checked; KVCR would refuse a claim if it \
                            verifies)"
                        ),
                    )
                };
                out.push(f);
            }
            if r.trailing > 0 {
                out.push(Finding::new(
                    codes::KV418,
                    format!(
                        "{} byte(s) follow the region's declared length; KVCR ignores them",
                        r.trailing
                    ),
                ));
            }
            let _ = o;
        }
    }
}

/// The slots the records name, against the options' geometry.
fn judge_slots(r: &PoolRead, out: &mut Vec<Finding>) {
    let mut tables: Vec<(&str, &Table)> = Vec::new();
    if let Handback::Present(reg) = &r.handback {
        if let Ok(t) = &reg.records {
            tables.push(("the handback region", t));
        }
    }
    if let Some(Journal {
        pending: Some(p), ..
    }) = &r.journal
    {
        tables.push(("the pending journal frames", &p.table));
    }
    for (what, t) in tables {
        if t.capped {
            out.push(Finding::notice(
                codes::KV417,
                format!(
                    "{what} name more than {TABLE_CAP} keys, the most kvcr replays: slots are \
                     checked for the first {TABLE_CAP} only"
                ),
            ));
        }
        if let Some(e) = &t.slot_problem {
            out.push(Finding::new(
                codes::KV417,
                format!(
                    "{what}: {e}; the next primary does not start (or a promoting Guard \
                    stops the service)"
                ),
            ));
        }
    }
}

/// The first slot problem in a table (last write per key), or `None`.
pub fn slot_problem(t: &Replay, o: &Options) -> Option<String> {
    let sizes: Option<BTreeMap<&str, u64>> = match (&o.pool_layouts, &o.pool_sizes_bytes) {
        (Some(l), Some(s)) if l.len() == s.len() => Some(
            l.iter()
                .zip(s)
                .map(|((n, b), size)| (n.as_str(), size / b))
                .collect(),
        ),
        _ => None,
    };
    let g3_total = match (
        o.g3_paths.len() as u64,
        o.capacity_bytes_per_file,
        &o.pool_layouts,
    ) {
        (n, Some(cap), Some(l)) if n > 0 && l.len() == 1 => Some(n * (cap / l[0].1)),
        _ => None,
    };
    let g3_given = !o.g3_paths.is_empty();
    let mut g2_seen: BTreeSet<(&str, u64)> = BTreeSet::new();
    let mut g3_seen: BTreeSet<u64> = BTreeSet::new();
    let label = |i: u32| t.labels[i as usize].as_str();
    for (key, rec) in &t.entries {
        if let Some(g2) = &rec.g2 {
            if g3_given && (g2.len() != 1 || g2.iter().any(|(l, _)| label(*l).contains(':'))) {
                return Some(format!(
                    "key {} has {} G2 slot(s) or a part label while G3 is configured (one slot \
                     without a part label is required)",
                    short_key(key),
                    g2.len()
                ));
            }
            for &(l, ref slot) in g2.iter() {
                let pool = label(l).split(':').next().unwrap_or("");
                if let Some(n) = sizes.as_ref().and_then(|m| m.get(pool)) {
                    if slot >= n {
                        return Some(format!(
                            "key {} names G2 slot {slot} of pool {pool:?}, which has {n} slots",
                            short_key(key)
                        ));
                    }
                }
                if !g2_seen.insert((pool, *slot)) {
                    return Some(format!(
                        "G2 slot {slot} of pool {pool:?} is named twice (again by key {})",
                        short_key(key)
                    ));
                }
            }
        }
        if let Some(s) = rec.g3 {
            if !g3_given {
                return Some(format!(
                    "key {} names G3 slot {s} but no G3 is configured (--g3-paths)",
                    short_key(key)
                ));
            }
            if let Some(total) = g3_total {
                if s >= total {
                    return Some(format!(
                        "key {} names G3 slot {s}; the G3 files hold {total}",
                        short_key(key)
                    ));
                }
            }
            if !g3_seen.insert(s) {
                return Some(format!(
                    "G3 slot {s} is named twice (again by key {})",
                    short_key(key)
                ));
            }
        }
    }
    None
}

fn short_key(k: &[u8]) -> String {
    let h = crate::format::hex::encode(&k[..k.len().min(8)]);
    if k.len() > 8 {
        format!("{h}…")
    } else {
        h
    }
}

/// Keeps the findings of the second read that the first read also shows
/// (by code): a condition a live pool shows for a moment is not judged.
pub fn both_reads(first: &[Finding], second: Vec<Finding>) -> Vec<Finding> {
    second
        .into_iter()
        .filter(|f| first.iter().any(|g| g.code == f.code))
        .collect()
}

/// What changed between two reads.
pub fn changes(a: &PoolRead, b: &PoolRead) -> Vec<String> {
    let mut out = Vec::new();
    if a.stat.size != b.stat.size {
        out.push(format!("size {} → {}", a.stat.size, b.stat.size));
    }
    if (a.stat.dev, a.stat.ino) != (b.stat.dev, b.stat.ino) {
        out.push("the file was replaced".to_string());
    }
    if a.stat.mode != b.stat.mode {
        out.push(format!(
            "mode {:04o} → {:04o}",
            a.stat.mode & 0o7777,
            b.stat.mode & 0o7777
        ));
    }
    match (&a.journal, &b.journal) {
        (Some(x), Some(y)) if x.header != y.header => {
            let (p, q) = (&x.header, &y.header);
            out.push(format!(
                "journal invalid {}→{}, published {}→{}, consumed {}→{}",
                p.invalid, q.invalid, p.published, q.published, p.consumed, q.consumed
            ))
        }
        _ => {}
    }
    if a.handback != b.handback {
        out.push("the handback region".to_string());
    }
    out
}

/// The findings of liveness, and what KVCR would do.
pub fn judge_liveness(p: &mut PoolReport, live: bool) {
    let pending = p
        .read
        .as_ref()
        .and_then(|r| r.journal.as_ref())
        .and_then(|j| j.pending.as_ref())
        .map_or(0, |x| x.frames);
    let bytes = p.read.as_ref().map_or(0, |r| r.stat.size);
    match &p.liveness {
        Liveness::Live {
            service, primaries, ..
        } => {
            p.kvcr_would = if primaries.is_empty() {
                format!(
                    "live: service pid {service} holds it with no primary; the next claim of \
                     this index gets it{}",
                    if matches!(
                        p.read.as_ref().map(|r| &r.handback),
                        Some(Handback::Present(_))
                    ) {
                        " and replays its handback region"
                    } else {
                        ""
                    }
                )
            } else {
                format!(
                    "live: service pid {service} serves it to primary pid(s) {}; on a primary's \
                     death the Guard promotes from the journal",
                    pids(primaries)
                )
            };
        }
        Liveness::Leaked { holders } => {
            p.findings.push(Finding::new(
                codes::KV419,
                format!(
                    "held only by pid(s) {} and by no listening service: leaked; a new service \
                     start leaves it and makes a new generation beside it",
                    pids(holders)
                ),
            ));
            p.kvcr_would = "leave it at the next start (\"Leaving KVCR pool still in use\"); \
                            free it at the first start after its holders exit"
                .to_string();
        }
        Liveness::HeldNoService { holders } => {
            p.findings.push(Finding::new(
                codes::KV421,
                format!(
                    "held by pid(s) {}, but no listening KVCR socket could be tied to them \
                     (give --socket-path, or the service is still starting): service not \
                     identified",
                    pids(holders)
                ),
            ));
            p.kvcr_would = "leave it at the next start while it is held".to_string();
        }
        Liveness::Orphan => {
            p.findings.push(Finding::new(
                codes::KV420,
                format!(
                    "held by nobody: an orphan the next service start on this directory deletes \
                     ({bytes} bytes of RAM held until then)"
                ),
            ));
            p.kvcr_would = format!(
                "delete it at the next service start on this directory (\"Reclaimed orphaned \
                 KVCR pool from a dead instance\", {bytes} bytes)"
            );
        }
        Liveness::NotChecked(why) => {
            if live {
                p.findings.push(Finding::new(
                    codes::KV421,
                    format!("liveness not checked: {why}"),
                ));
            }
            p.kvcr_would = "a starting service deletes it if nothing holds it; a running one \
                            grants it at the next claim of its index"
                .to_string();
        }
    }
    if pending > 0 && matches!(p.liveness, Liveness::Leaked { .. } | Liveness::Orphan) {
        p.findings.push(Finding::new(
            codes::KV412,
            format!(
                "{pending} pending journal frame(s) nobody will consume (one lease's changes, \
                 never the pool's content)"
            ),
        ));
    }
}

fn pids(p: &[i32]) -> String {
    p.iter().map(i32::to_string).collect::<Vec<_>>().join(", ")
}

/// The mapping size of a group whose options give none: the one size every
/// pool file without a handback region (a page-multiple size) shares.
pub fn infer_mapping(sizes: &[u64], page: u64) -> Option<u64> {
    let aligned: BTreeSet<u64> = sizes
        .iter()
        .copied()
        .filter(|s| *s > 0 && s % page == 0)
        .collect();
    (aligned.len() == 1).then(|| *aligned.iter().next().expect("one"))
}

/// The findings of one pool directory.
pub fn judge_group(path: PathBuf, others: usize, pools: &[PoolReport], o: &Options) -> GroupReport {
    let mut findings = Vec::new();
    let mut by_index: BTreeMap<u64, Vec<&PoolReport>> = BTreeMap::new();
    for p in pools.iter().filter(|p| p.kind == EntryKind::Pool) {
        if let Some(i) = p.index {
            by_index.entry(i).or_default().push(p);
        }
    }
    let indices: Vec<u64> = by_index.keys().copied().collect();
    let live_service = pools
        .iter()
        .any(|p| matches!(p.liveness, Liveness::Live { .. }));
    let top = indices.last().map(|i| i + 1).unwrap_or(0);
    let want = o.guard_count.map_or(top, |g| g.max(top));
    let missing: Vec<u64> = (0..want.min(1 << 16))
        .filter(|i| !by_index.contains_key(i))
        .collect();
    if !missing.is_empty() && !indices.is_empty() {
        let names = missing
            .iter()
            .take(8)
            .map(|i| format!("pool_{i}"))
            .collect::<Vec<_>>()
            .join(", ");
        let msg = format!(
            "{names}{} missing ({} expected: pool_0 … pool_{}){}",
            if missing.len() > 8 { ", …" } else { "" },
            want,
            want - 1,
            if live_service {
                "; the listening service's claims of that index fail (attach ENOENT)"
            } else {
                ""
            }
        );
        findings.push(if o.live && live_service {
            Finding::new(codes::KV422, msg)
        } else {
            Finding::notice(codes::KV422, msg)
        });
    }
    for (i, ps) in &by_index {
        if ps.len() > 1 {
            let gens: Vec<String> = ps
                .iter()
                .map(|p| {
                    format!(
                        "{} ({})",
                        p.generation.as_deref().unwrap_or("?"),
                        p.liveness.as_str()
                    )
                })
                .collect();
            findings.push(Finding::new(
                codes::KV424,
                format!(
                    "pool_{i} has {} generations: {}; only the holders tell which is current \
                     (the listening service's)",
                    ps.len(),
                    gens.join(", ")
                ),
            ));
        }
    }
    let owners: BTreeSet<u32> = pools
        .iter()
        .filter(|p| p.kind == EntryKind::Pool)
        .filter_map(|p| p.read.as_ref().map(|r| r.stat.uid))
        .collect();
    if owners.len() > 1 {
        findings.push(Finding::new(
            codes::KV405,
            format!(
                "the pool files have different owners (uids {}): a service's purge may fail to \
                 open another user's file, so it is never reclaimed",
                owners
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    if o.pool_sizes_bytes.is_none() {
        let sizes: Vec<u64> = pools
            .iter()
            .filter(|p| p.kind == EntryKind::Pool)
            .filter_map(|p| p.read.as_ref().map(|r| r.stat.size))
            .collect();
        let aligned: BTreeSet<u64> = sizes
            .iter()
            .copied()
            .filter(|s| *s > 0 && s % o.page_size == 0)
            .collect();
        if aligned.len() > 1 {
            findings.push(Finding::new(
                codes::KV423,
                format!(
                    "the pools' mapping sizes differ ({} bytes): not one service's pools",
                    aligned
                        .iter()
                        .map(u64::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    GroupReport {
        path,
        others,
        findings,
        indices,
    }
}

/// The findings of one G3 file (`named`: a record names one of its slots).
pub fn judge_g3(s: &G3State, named: bool, o: &Options) -> Vec<Finding> {
    let mut out = Vec::new();
    match s {
        G3State::Absent if named => out.push(Finding::new(
            codes::KV425,
            "absent, but records name its slots: KVCR would recreate it zero-filled and serve the \
             zeros as hits",
        )),
        G3State::Absent => {}
        G3State::Symlink => out.push(Finding::new(
            codes::KV426,
            "a symbolic link: KVCR resolves it; kvcr does not follow it (name the target to \
                check it)",
        )),
        G3State::NotRegular => out.push(Finding::new(
            codes::KV425,
            "not a regular file: the next primary does not start",
        )),
        G3State::File { size, mode, locks } => {
            if *size == 0 && named {
                out.push(Finding::new(
                    codes::KV425,
                    "0 bytes, but records name its slots: KVCR would allocate it zero-filled and \
                     serve the zeros as hits",
                ));
            } else if let Some(cap) = o.capacity_bytes_per_file {
                if *size != 0 && *size != cap {
                    out.push(Finding::new(
                        codes::KV425,
                        format!(
                            "{size} bytes, neither 0 nor capacity_bytes_per_file {cap}: \"has \
                             incompatible size\", the next primary does not start"
                        ),
                    ));
                }
            }
            if *mode != 0o600 {
                out.push(Finding::new(
                    codes::KV426,
                    format!("mode {mode:04o}: KVCR resets it to 0600"),
                ));
            }
            if let Some(l) = locks {
                let odd: Vec<String> = l
                    .iter()
                    .filter(|(_, ex)| !ex)
                    .map(|(pid, _)| format!("a shared lock by pid {pid}"))
                    .collect();
                if !odd.is_empty() || l.iter().filter(|(_, ex)| *ex).count() > 1 {
                    out.push(Finding::new(
                        codes::KV426,
                        format!(
                            "locked other than by one primary's LOCK_EX ({}): the next primary \
                             cannot lock it",
                            if odd.is_empty() {
                                "several exclusive \
                                locks"
                                    .to_string()
                            } else {
                                odd.join(", ")
                            }
                        ),
                    ));
                }
            }
        }
    }
    out
}
