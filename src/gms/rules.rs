//! The GMS reader's checks (docs/format.md §14.6): what two reads of an
//! artifact saw (plain facts, gathered by `crate::gms::read`) in, findings and
//! the facts to print out, and the judged run the printers print. Nothing
//! here reads a file, the clock or `/proc`.
//!
//! One rule for every condition a healthy artifact also shows for a moment
//! (a TRANSITION record, mutations in flight, a staging file): it is a
//! finding with its code's severity only when both reads show it, and a
//! notice when one read does ([`both_reads`], and block by block for a
//! lease ring's records).

use crate::format::finding::{Code, Finding, Severity};
use crate::gms::format::{self as format, LeaseHeader, RecoveryHeader, Superseded};
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// How many block ids a condition keeps to name and to compare across the
/// two reads (the count is always exact).
pub const BLOCK_CAP: usize = 65_536;
/// How many distinct owner hashes a lease scan keeps.
pub const OWNER_CAP: usize = 4096;
/// How many block ids a message names.
const NAMED: usize = 8;

/// The blocks a condition holds for: the exact count and the first ids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Blocks {
    pub count: u64,
    pub first: Vec<u64>,
}

impl Blocks {
    pub fn push(&mut self, id: u64) {
        self.count += 1;
        if self.first.len() < BLOCK_CAP {
            self.first.push(id);
        }
    }

    /// The blocks of `self` that `other` holds too (ids beyond either cap
    /// are counted as held in both: never fewer than the truth).
    pub fn both(&self, other: &Blocks) -> Blocks {
        let mut out = Blocks::default();
        for &id in &self.first {
            if other.first.binary_search(&id).is_ok() {
                out.push(id);
            }
        }
        let beyond_a = self.count - self.first.len() as u64;
        let beyond_b = other.count - other.first.len() as u64;
        out.count += beyond_a.min(beyond_b);
        out
    }

    /// `N blocks (3, 9, 12, …)`.
    pub fn describe(&self) -> String {
        let ids: Vec<String> = self.first.iter().take(NAMED).map(u64::to_string).collect();
        let more = if self.count > ids.len() as u64 {
            ", …"
        } else {
            ""
        };
        let noun = if self.count == 1 { "block" } else { "blocks" };
        format!("{} {noun} ({}{more})", self.count, ids.join(", "))
    }
}

/// Findings seen in both reads keep their severity; a finding one read
/// alone shows becomes a notice that says so. Findings are matched by code
/// and path. The second read's findings come first, in its order.
pub fn both_reads(first: Vec<Finding>, second: Vec<Finding>) -> Vec<Finding> {
    let key = |f: &Finding| (f.code, f.path.clone());
    let mut out = Vec::new();
    for f in &second {
        if first.iter().any(|g| key(g) == key(f)) {
            out.push(f.clone());
        } else {
            out.push(once(f.clone()));
        }
    }
    for f in first {
        if !second.iter().any(|g| key(g) == key(&f)) {
            out.push(once(f));
        }
    }
    out
}

/// A finding one read alone showed: a notice saying so.
fn once(mut f: Finding) -> Finding {
    if f.severity == Severity::Reject {
        f.severity = Severity::Notice;
        f.message
            .prepend("(in one of two reads: a moment of a healthy artifact) ");
    }
    f
}

/// Whether any finding rejects.
pub fn rejected(findings: &[Finding]) -> bool {
    findings.iter().any(Finding::is_reject)
}

// ---------------------------------------------------------------------------
// Lease rings
// ---------------------------------------------------------------------------

/// What one pass over a ring's 16-byte records saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaseScan {
    /// Records per state, FREE..TRANSITION.
    pub states: [u64; 5],
    pub invalid_state: Blocks,
    /// The first invalid state value seen.
    pub first_invalid: Option<u32>,
    pub transition: Blocks,
    /// FREE or RESERVED with an owner, or LEASED without one.
    pub owner_mismatch: Blocks,
    pub sealed_unowned: Blocks,
    /// Owner hash → LEASED and SEALED blocks it holds (at most
    /// [`OWNER_CAP`] owners; the rest counted in `owners_untracked`).
    pub owners: BTreeMap<u64, u64>,
    pub owners_untracked: u64,
    /// sha256 of every record byte: whether the ring changed between reads.
    pub digest: [u8; 32],
}

impl LeaseScan {
    /// Adds record `block`.
    pub fn push(&mut self, block: u64, r: &format::LeaseRecord) {
        use format::*;
        match r.state {
            STATE_FREE..=STATE_TRANSITION => self.states[r.state as usize] += 1,
            s => {
                self.invalid_state.push(block);
                self.first_invalid.get_or_insert(s);
            }
        }
        match r.state {
            STATE_TRANSITION => self.transition.push(block),
            STATE_FREE | STATE_RESERVED if r.owner_hash != 0 => self.owner_mismatch.push(block),
            STATE_LEASED if r.owner_hash == 0 => self.owner_mismatch.push(block),
            STATE_SEALED if r.owner_hash == 0 => self.sealed_unowned.push(block),
            _ => {}
        }
        if matches!(r.state, STATE_LEASED | STATE_SEALED) && r.owner_hash != 0 {
            if let Some(n) = self.owners.get_mut(&r.owner_hash) {
                *n += 1;
            } else if self.owners.len() < OWNER_CAP {
                self.owners.insert(r.owner_hash, 1);
            } else {
                self.owners_untracked += 1;
            }
        }
    }
}

/// One read of a lease ring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRead {
    /// st_size when the header was read.
    pub size: u64,
    /// `None` when the file is shorter than the header.
    pub header: Option<LeaseHeader>,
    /// The records, when the header is the current layout's and the file
    /// holds every record it declares.
    pub scan: Option<LeaseScan>,
}

impl LeaseRead {
    /// Whether a header is the current layout's (so its records are
    /// decoded): magic, version, record size 16 and blocks to hold.
    pub fn decodable(h: &LeaseHeader) -> bool {
        h.magic == format::LEASE_MAGIC
            && h.version == format::LEASE_VERSION
            && h.record_size == format::LEASE_RECORD
            && h.total_blocks > 0
    }
}

/// A default owner id that matched an owner hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerId {
    pub engine: &'static str,
    pub pid: u32,
    pub device: u32,
}

/// What `--live` knows for a lease ring.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaseLive {
    /// Owner hash → the live process's default owner id, for every hash the
    /// reads saw that matched one.
    pub owners: BTreeMap<u64, OwnerId>,
    /// The devices tried (0..devices).
    pub devices: u32,
    /// Why this ring's pids cannot be compared with this node's processes
    /// (`/proc` untrusted, or the ring's writers in another PID namespace
    /// or in one kvcr cannot tell, docs/format.md §14.2): then no owner and
    /// no barrier holder is judged alive or gone; it is said not checked.
    pub not_checked: Option<String>,
    /// The recovery owner pid's liveness, when the barrier is held:
    /// `Some(true)` running, `Some(false)` gone, `None` not checked.
    pub recovery_owner_alive: Option<bool>,
}

/// The facts a lease ring's report prints.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaseFacts {
    pub size: u64,
    pub header: Option<LeaseHeader>,
    pub expected_size: Option<u64>,
    pub scan: Option<LeaseScan>,
    /// Owner hash → the live default owner id, `None` for one no live
    /// process has (only with --live).
    pub owners: Vec<(u64, u64, Option<OwnerId>)>,
    pub live: bool,
    /// With --live: why the owners were not checked (`LeaseLive::not_checked`).
    pub owners_not_checked: Option<String>,
    pub barrier: bool,
    /// The default namespace whose ring the file name is, when it is one
    /// (`vllm:gpu0:kv`); `None` for a custom namespace or path.
    pub namespace: Option<String>,
}

fn hex16(v: u64) -> String {
    format!("{v:#018x}")
}

/// Judges a lease ring from two reads (`a` first), with `--live` facts. A
/// ring with a wrong magic reaches here only from where GMS puts its rings
/// (by content, a stranger is no lease ring).
pub fn judge_lease(
    a: &LeaseRead,
    b: &LeaseRead,
    live: Option<&LeaseLive>,
) -> (Vec<Finding>, LeaseFacts) {
    let mut facts = LeaseFacts {
        size: a.size,
        header: a.header,
        live: live.is_some(),
        owners_not_checked: live.and_then(|l| l.not_checked.clone()),
        ..LeaseFacts::default()
    };
    let mut out = Vec::new();
    let identity = |r: &LeaseRead| {
        r.header
            .map(|h| (r.size, h.magic, h.version, h.total_blocks, h.record_size))
    };
    if identity(a) != identity(b) || a.size != b.size {
        out.push(
            Finding::reject(
                Code::KV250,
                "the header or size changed between the two reads (re-initialised while read)",
            )
            .values(describe_identity(a), describe_identity(b)),
        );
        return (out, facts);
    }
    let Some(h) = b.header else {
        out.push(
            Finding::reject(Code::KV203, "shorter than the 64-byte lease header")
                .values(format!("at least {} bytes", format::LEASE_HEADER), a.size),
        );
        return (out, facts);
    };
    facts.header = Some(h);
    if h.magic != format::LEASE_MAGIC {
        let what = if h.magic_byte_swapped() {
            "the magic is byte-swapped (a big-endian writer)"
        } else {
            "the magic is not GMSL"
        };
        out.push(
            Finding::reject(
                Code::KV202,
                format!("{what}: the next GMS client re-initialises the ring, wiping every lease"),
            )
            .values(hex_magic(format::LEASE_MAGIC), hex_magic(h.magic)),
        );
        return (out, facts);
    }
    if h.version != format::LEASE_VERSION {
        out.push(
            Finding::reject(
                Code::KV202,
                "unknown lease-ring version: not decoded; the next GMS client re-initialises it",
            )
            .values(format::LEASE_VERSION, h.version),
        );
        return (out, facts);
    }
    if h.record_size == format::LEASE_RECORD_LEGACY {
        facts.expected_size = Some(h.expected_size());
        out.push(
            Finding::reject(
                Code::KV201,
                format!(
                    "the legacy 32-byte-record layout ({} blocks), not decoded as current: the \
                     next GMS client re-initialises the ring, wiping every lease",
                    h.total_blocks
                ),
            )
            .values(format::LEASE_RECORD, h.record_size),
        );
        return (out, facts);
    }
    if h.record_size != format::LEASE_RECORD {
        out.push(
            Finding::reject(Code::KV202, "unknown record size: not decoded")
                .values(format::LEASE_RECORD, h.record_size),
        );
        return (out, facts);
    }
    if h.total_blocks == 0 {
        out.push(
            Finding::reject(
                Code::KV202,
                "total_blocks is 0, which GMS never writes: the next client re-initialises it",
            )
            .values("at least 1", 0),
        );
        return (out, facts);
    }
    let expected = h.expected_size();
    facts.expected_size = Some(expected);
    if a.size != expected {
        let what = if a.size < expected {
            "truncated: smaller than 64 + 16 × total_blocks (the last records are lost)"
        } else {
            "foreign: larger than 64 + 16 × total_blocks (not what GMS wrote last)"
        };
        out.push(Finding::reject(Code::KV203, what).values(expected, a.size));
    }
    let (Some(sa), Some(sb)) = (&a.scan, &b.scan) else {
        return (out, facts);
    };
    facts.scan = Some(sb.clone());
    let ha = a.header.expect("identity equal");
    let unchanged = sa.digest == sb.digest && ha == h;
    block_condition(
        &mut out,
        Code::KV204,
        &sa.invalid_state,
        &sb.invalid_state,
        &format!(
            "in a state GMS never writes (first value {})",
            sb.first_invalid.or(sa.first_invalid).unwrap_or(0)
        ),
    );
    block_condition(
        &mut out,
        Code::KV205,
        &sa.transition,
        &sb.transition,
        "in TRANSITION: a writer died mid-update",
    );
    block_condition(
        &mut out,
        Code::KV206,
        &sa.owner_mismatch,
        &sb.owner_mismatch,
        "whose owner does not match the state (FREE or RESERVED with an owner, LEASED without)",
    );
    if sb.sealed_unowned.count > 0 {
        out.push(
            Finding::notice(
                Code::KV207,
                format!(
                    "{} SEALED with owner 0 (left by a reclaim that protected them): only an \
                     adopt through the content directory frees them",
                    sb.sealed_unowned.describe()
                ),
            )
            .values("an owner for every SEALED block", 0),
        );
    }
    // Barrier, mutations, free count, reservation: header conditions.
    let barrier = |x: &LeaseHeader| x.active_mutations == format::LEASE_BARRIER;
    facts.barrier = barrier(&h);
    if barrier(&ha) || barrier(&h) {
        let both = barrier(&ha) && barrier(&h);
        let pid = h.recovery_owner_pid;
        let (mut f, note) = match live.map(|l| l.recovery_owner_alive) {
            Some(Some(true)) => (
                Finding::notice(
                    Code::KV210,
                    format!(
                        "the recovery barrier is held by pid {pid}, which runs: a recovery in \
                         progress"
                    ),
                ),
                false,
            ),
            Some(Some(false)) => (
                Finding::reject(
                    Code::KV210,
                    format!(
                        "the recovery barrier is held and its owner (pid {pid}) is gone: stranded; \
                         every acquire fails"
                    ),
                ),
                true,
            ),
            Some(None) => (
                Finding::reject(
                    Code::KV210,
                    format!(
                        "the recovery barrier is held (whether recovery_owner_pid {pid} runs is \
                         not checked: {}); every acquire fails while it is",
                        live.and_then(|l| l.not_checked.as_deref())
                            .unwrap_or("the pid is not one of this node's")
                    ),
                ),
                true,
            ),
            None => (
                Finding::reject(
                    Code::KV210,
                    format!(
                        "the recovery barrier is held (recovery_owner_pid {pid}, not checked: add \
                         --live); every acquire fails while it is"
                    ),
                ),
                true,
            ),
        };
        f = f.values("active_mutations < 2^64-1", "2^64-1 (the barrier)");
        out.push(if both || !note { f } else { once(f) });
    }
    let mutating = |x: &LeaseHeader| x.active_mutations > 0 && !barrier(x);
    if mutating(&ha) || mutating(&h) {
        let f = Finding::reject(
            Code::KV209,
            format!(
                "{} record mutation(s) in flight with no record changing: a writer died inside \
                 a mutation",
                h.active_mutations
            ),
        )
        .values(0, h.active_mutations);
        let stranded = mutating(&ha) && mutating(&h) && unchanged;
        out.push(if stranded {
            f
        } else {
            let mut n = Finding::notice(
                Code::KV209,
                format!(
                    "mutations in flight ({} then {}): the ring is in use",
                    ha.active_mutations, h.active_mutations
                ),
            );
            n.expected = f.expected;
            n.found = f.found;
            n
        });
    }
    let drift = |x: &LeaseHeader, s: &LeaseScan| {
        x.active_mutations == 0 && x.free_count != s.states[format::STATE_FREE as usize]
    };
    if drift(&ha, sa) || drift(&h, sb) {
        let f = Finding::reject(
            Code::KV208,
            "free_count is not the number of FREE records, with no mutation in flight",
        )
        .values(sb.states[format::STATE_FREE as usize], h.free_count);
        out.push(if drift(&ha, sa) && drift(&h, sb) && unchanged {
            f
        } else {
            once(f)
        });
    }
    if h.reserved_blocks > h.total_blocks {
        out.push(
            Finding::reject(Code::KV211, "reserves more blocks than the ring has")
                .values(format!("at most {}", h.total_blocks), h.reserved_blocks),
        );
    }
    let odd = |x: &LeaseHeader| x.reservation_epoch % 2 == 1;
    if odd(&ha) || odd(&h) {
        let f = Finding::reject(
            Code::KV212,
            "reservation_epoch is odd: a reservation update was torn",
        )
        .values("an even epoch", h.reservation_epoch);
        out.push(
            if odd(&ha) && odd(&h) && ha.reservation_epoch == h.reservation_epoch {
                f
            } else {
                once(f)
            },
        );
    }
    // Owners (live).
    for (&hash, &n) in &sb.owners {
        let id = live.and_then(|l| l.owners.get(&hash).cloned());
        facts.owners.push((hash, n, id));
    }
    if let Some(l) = live {
        let owned: u64 = sb.owners.values().sum::<u64>() + sb.owners_untracked;
        if let (Some(why), true) = (&l.not_checked, owned > 0) {
            out.push(
                Finding::notice(
                    Code::KV213,
                    format!(
                        "whether the owners of {owned} leased or sealed block(s) run is not \
                         checked: {why}"
                    ),
                )
                .values("a live owner", "not checked"),
            );
        } else if l.not_checked.is_none() && sb.owners_untracked > 0 {
            out.push(
                Finding::notice(
                    Code::KV213,
                    format!(
                        "{} leased or sealed block(s) of owners beyond the first {OWNER_CAP} \
                         tracked are not checked",
                        sb.owners_untracked
                    ),
                )
                .values("a live owner", "not checked"),
            );
        }
        if l.not_checked.is_none() {
            let orphaned: Vec<(u64, u64)> = sb
                .owners
                .iter()
                .filter(|(h, _)| sa.owners.contains_key(h) && !l.owners.contains_key(h))
                .map(|(&h, &n)| (h, n))
                .collect();
            if !orphaned.is_empty() {
                let blocks: u64 = orphaned.iter().map(|(_, n)| n).sum();
                let named: Vec<String> = orphaned
                    .iter()
                    .take(NAMED)
                    .map(|(h, _)| hex16(*h))
                    .collect();
                let more = if orphaned.len() > NAMED { ", …" } else { "" };
                out.push(
                    Finding::reject(
                        Code::KV213,
                        format!(
                            "{blocks} leased or sealed block(s) of {} owner(s) ({}{more}) that no \
                             running process has under GMS's default owner id \
                             {{engine}}-{{pid}}-{{device}} (devices 0-{}); a custom owner id \
                             (GMS_KV_LEASE_OWNER_ID) cannot be checked",
                            orphaned.len(),
                            named.join(", "),
                            l.devices.saturating_sub(1)
                        ),
                    )
                    .values("a live owner", format!("{} without one", orphaned.len())),
                );
            }
        }
    }
    (out, facts)
}

fn hex_magic(m: u32) -> String {
    let b = m.to_le_bytes();
    let text: String = b
        .iter()
        .map(|&c| if c.is_ascii_graphic() { c as char } else { '.' })
        .collect();
    format!("{m:#010x} ({text})")
}

fn describe_identity(r: &LeaseRead) -> String {
    match r.header {
        Some(h) => format!(
            "size {}, magic {:#010x}, version {}, total_blocks {}, record_size {}",
            r.size, h.magic, h.version, h.total_blocks, h.record_size
        ),
        None => format!("size {} (no header)", r.size),
    }
}

/// A per-block condition over two reads: a finding for the blocks that
/// both reads show, a notice for the rest.
fn block_condition(out: &mut Vec<Finding>, code: Code, a: &Blocks, b: &Blocks, what: &str) {
    if a.count == 0 && b.count == 0 {
        return;
    }
    let both = a.both(b);
    if both.count > 0 {
        out.push(
            Finding::reject(code, format!("{} {what}, in both reads", both.describe()))
                .values(0, both.count),
        );
    }
    let once_a = a.count.saturating_sub(both.count);
    let once_b = b.count.saturating_sub(both.count);
    if once_a + once_b > 0 {
        let seen = if b.count > both.count { b } else { a };
        out.push(
            Finding::notice(
                code,
                format!(
                    "{} {what}, in one read only (a moment of a healthy ring)",
                    seen.describe()
                ),
            )
            .values(0, once_a.max(once_b)),
        );
    }
}

// ---------------------------------------------------------------------------
// Recovery metadata
// ---------------------------------------------------------------------------

/// What one pass over recovery records 1..num_blocks-1 saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryScan {
    pub num_blocks: u64,
    pub valid: u64,
    pub empty: u64,
    pub bad_valid: Blocks,
    pub first_bad_valid: Option<u64>,
    pub bad_crc: Blocks,
    pub bad_lengths: Blocks,
    pub first_bad_lengths: Option<(u32, u64)>,
}

impl RecoveryScan {
    /// Adds record `block` (1..num_blocks-1), in GMS's order of checks: the
    /// valid word, the crc, then the lengths.
    pub fn push(&mut self, block: u64, r: &format::RecoveryRecord) {
        match r.valid {
            0 => self.empty += 1,
            1 if r.crc_stored != r.crc_computed => self.bad_crc.push(block),
            1 if !(r.hash_len > format::HASH_LEN_MIN_EXCLUSIVE
                && r.hash_len <= format::HASH_LEN_MAX
                && r.num_tokens > 0) =>
            {
                self.bad_lengths.push(block);
                self.first_bad_lengths
                    .get_or_insert((r.hash_len, r.num_tokens));
            }
            1 => self.valid += 1,
            v => {
                self.bad_valid.push(block);
                self.first_bad_valid.get_or_insert(v);
            }
        }
    }
}

/// One read of recovery metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryRead {
    pub size: u64,
    /// `None` when the file is shorter than 80 bytes.
    pub header: Option<RecoveryHeader>,
    /// The records, when the size is exact.
    pub scan: Option<RecoveryScan>,
}

/// What the recovery check is asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryAsk {
    /// `--num-blocks`: the block count the engine will ask for.
    pub num_blocks: Option<u64>,
    /// `--binding`: the digest the engine will compute.
    pub binding: Option<[u8; 32]>,
}

/// The block count a recovery file is judged with: `--num-blocks`, else
/// the one its size implies (at least 2: GMS refuses fewer).
pub fn recovery_blocks(size: u64, ask: &RecoveryAsk) -> Option<u64> {
    match ask.num_blocks {
        Some(n) => (format::recovery_size(n) == Some(size)).then_some(n),
        None => format::recovery_blocks_for_size(size).filter(|&n| n >= 2),
    }
}

/// The outcome GMS's takeover would reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Recovered,
    Fresh,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Recovered => "RECOVERED",
            Outcome::Fresh => "FRESH",
        }
    }
}

/// The facts recovery metadata's report prints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryFacts {
    pub size: u64,
    pub header: Option<RecoveryHeader>,
    pub num_blocks: Option<u64>,
    pub num_blocks_from: &'static str,
    pub scan: Option<RecoveryScan>,
    pub binding_checked: bool,
    pub outcome: Outcome,
}

/// Judges recovery metadata from two reads: the outcome GMS would reach and
/// every reason, in GMS's order (size, magic, epoch, commit, binding,
/// records); the first is the headline's.
pub fn judge_recovery(
    a: &RecoveryRead,
    b: &RecoveryRead,
    ask: &RecoveryAsk,
) -> (Vec<Finding>, RecoveryFacts) {
    let mut facts = RecoveryFacts {
        size: b.size,
        header: b.header,
        num_blocks: recovery_blocks(b.size, ask),
        num_blocks_from: if ask.num_blocks.is_some() {
            "--num-blocks"
        } else {
            "size"
        },
        scan: b.scan.clone(),
        binding_checked: ask.binding.is_some(),
        outcome: Outcome::Fresh,
    };
    let ids = |r: &RecoveryRead| r.header.map(|h| (r.size, h.magic, h.epoch, h.owner));
    if ids(a) != ids(b) || a.size != b.size {
        let d = |r: &RecoveryRead| match r.header {
            Some(h) => format!(
                "size {}, epoch {}, commit {}, owner {}",
                r.size,
                h.epoch,
                h.commit,
                crate::format::hex::encode(&h.owner)
            ),
            None => format!("size {}", r.size),
        };
        let f = Finding::reject(
            Code::KV250,
            "the epoch or the owner changed between the two reads: a takeover ran while kvcr read",
        )
        .values(d(a), d(b));
        return (vec![f], facts);
    }
    let first = recovery_reasons(a, ask);
    let second = recovery_reasons(b, ask);
    let mut out = both_reads(first, second);
    if ask.binding.is_none() {
        out.push(
            Finding::notice(
                Code::KV229,
                "the binding was not checked (no --binding): the outcome is judged on \
                 everything else",
            )
            .values("--binding HEX", "none"),
        );
    }
    out.sort_by_key(|f| f.code.spec().root_rank);
    facts.outcome = if rejected(&out) {
        Outcome::Fresh
    } else {
        Outcome::Recovered
    };
    (out, facts)
}

fn recovery_reasons(r: &RecoveryRead, ask: &RecoveryAsk) -> Vec<Finding> {
    let mut out = Vec::new();
    let n = recovery_blocks(r.size, ask);
    if n.is_none() {
        let (expected, what) = match ask.num_blocks {
            Some(k) => (
                format::recovery_size(k).map_or("more than 2^64".to_string(), |s| s.to_string()),
                format!(
                    "not 4096 + 128 × {k} bytes (--num-blocks): GMS resizes it and starts FRESH"
                ),
            ),
            None => (
                "4096 + 128 × num_blocks, num_blocks ≥ 2".to_string(),
                "no block count explains the size: GMS resizes it and starts FRESH".to_string(),
            ),
        };
        out.push(Finding::reject(Code::KV221, what).values(expected, r.size));
        return out;
    }
    let Some(h) = r.header else {
        return out;
    };
    if h.magic != format::RECOVERY_MAGIC {
        out.push(
            Finding::reject(Code::KV222, "the magic is not DYNKV001: GMS starts FRESH")
                .values("DYNKV001", crate::format::hex::encode(&h.magic)),
        );
    }
    if h.epoch == 0 {
        out.push(
            Finding::reject(Code::KV223, "epoch 0: no takeover ever committed").values("≥ 1", 0),
        );
    } else if h.commit != h.epoch {
        let what = if h.commit == 0 {
            "commit 0: a takeover began and did not finish (torn takeover)"
        } else {
            "commit is not the epoch: the header is damaged"
        };
        out.push(Finding::reject(Code::KV224, what).values(h.epoch, h.commit));
    }
    if let Some(want) = ask.binding {
        if h.binding != want {
            out.push(
                Finding::reject(
                    Code::KV225,
                    "the binding is not --binding's: the file belongs to another KV pool \
                     (allocations, GPUs, server nonce or layout)",
                )
                .values(
                    crate::format::hex::encode(&want),
                    crate::format::hex::encode(&h.binding),
                ),
            );
        }
    }
    if let Some(s) = &r.scan {
        if s.bad_valid.count > 0 {
            out.push(
                Finding::reject(
                    Code::KV226,
                    format!(
                        "{} with a valid word other than 0 or 1: GMS discards the whole file",
                        s.bad_valid.describe()
                    ),
                )
                .values("0 or 1", s.first_bad_valid.unwrap_or(0)),
            );
        }
        if s.bad_crc.count > 0 {
            out.push(
                Finding::reject(
                    Code::KV227,
                    format!(
                        "{} marked valid whose crc32 does not match (corruption: a writer \
                         crash leaves valid 0, never a bad crc)",
                        s.bad_crc.describe()
                    ),
                )
                .values("the crc32 of bytes 8..87", "another value"),
            );
        }
        if s.bad_lengths.count > 0 {
            let (len, tokens) = s.first_bad_lengths.unwrap_or((0, 0));
            out.push(
                Finding::reject(
                    Code::KV228,
                    format!("{} with illegal lengths", s.bad_lengths.describe()),
                )
                .values(
                    "4 < hash_len ≤ 68 and num_tokens > 0",
                    format!("hash_len {len}, num_tokens {tokens}"),
                ),
            );
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Writer cohorts
// ---------------------------------------------------------------------------

/// Which integration's layout a cohort directory has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// `.vllm-writers`: tombstones, `.leader`, `.predecessor`, `joining-*`.
    Vllm,
    /// `.writers`: cohort files and `active` only.
    Sglang,
}

impl Flavour {
    pub fn as_str(self) -> &'static str {
        match self {
            Flavour::Vllm => "vllm",
            Flavour::Sglang => "sglang",
        }
    }
}

/// Who holds a lock, as the kernel tells.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The pid: from /proc/locks (the process that took the lock) or from
    /// a process whose descriptor table holds it.
    pub pid: i32,
    pub exclusive: bool,
    /// Whether the pid runs (a recorded pid may be gone: a forked child
    /// keeps the lock).
    pub running: bool,
    /// Every thread has PF_EXITING or a pending SIGKILL: it never runs user
    /// code again.
    pub exiting: bool,
}

/// A lock on one file, as far as kvcr can tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lock {
    /// Nobody holds it (the kernel lists none and a probe got it at once).
    Free,
    /// Held; `holders` may be empty when the kernel lists the lock but no
    /// running process could be named.
    Held { holders: Vec<Holder> },
    /// Could not be told (held outside this PID namespace, or no probe was
    /// possible); never read as free.
    NotChecked(String),
}

impl Lock {
    fn live_holders(&self) -> Vec<&Holder> {
        match self {
            Lock::Held { holders } => holders.iter().filter(|h| h.running && !h.exiting).collect(),
            _ => Vec::new(),
        }
    }
}

/// One entry of a cohort directory, as read once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CohortEntry {
    /// The name as the directory holds it: bytes, not necessarily UTF-8
    /// (docs/format.md §14.3); [`CohortEntry::shown`] for messages.
    pub name: std::ffi::OsString,
    /// A regular file (anything else is only listed).
    pub regular: bool,
    pub size: u64,
    /// mtime in nanoseconds (orders SGLang's cohort files, never written
    /// after creation).
    pub mtime_ns: i128,
    /// Markers: the first 64 bytes; cohort files: the first byte.
    pub content: Option<Vec<u8>>,
    /// Cohort files and `.leader` files only.
    pub lock: Option<Lock>,
    /// Why the file could not be opened or read (the errno, in words): its
    /// content is then unknown, never taken for empty (docs/format.md §14.3).
    pub unreadable: Option<String>,
}

impl CohortEntry {
    /// The name for messages: escaped as docs/format.md §9.6 says (a byte
    /// of an invalid sequence as `\xNN`).
    pub fn shown(&self) -> String {
        crate::format::names::display_bytes(self.name.as_bytes())
    }
}

/// One read of a cohort directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CohortRead {
    pub entries: Vec<CohortEntry>,
}

impl CohortRead {
    fn get(&self, name: &str) -> Option<&CohortEntry> {
        self.entries
            .iter()
            .find(|e| e.name.as_bytes() == name.as_bytes())
    }

    /// The layout, by shape: any vLLM-only name makes it vLLM.
    pub fn flavour(&self) -> Flavour {
        use format::{CohortName, Staging};
        let vllm = self.entries.iter().any(|e| {
            matches!(
                format::cohort_name_of(e.name.as_bytes()),
                CohortName::Leader(_)
                    | CohortName::Predecessor(_)
                    | CohortName::Joining(_)
                    | CohortName::Staging(Staging::Predecessor | Staging::Joining)
            ) || {
                let n = e.name.as_bytes();
                n.split(|&b| b == b'.').count() == 3 && n.ends_with(b".active")
            }
        });
        if vllm {
            Flavour::Vllm
        } else {
            Flavour::Sglang
        }
    }
}

/// The state of one cohort file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retired {
    /// Size 0: joiners are admitted.
    Open,
    /// Exactly the tombstone R at offset 0.
    Tombstone,
    /// Another first byte: joiners refuse it, the fence proof fails.
    Other(u8),
    /// The file could not be read: neither open nor retired (KV235).
    Unreadable,
}

impl Retired {
    pub fn of(e: &CohortEntry) -> Retired {
        if e.unreadable.is_some() {
            return Retired::Unreadable;
        }
        match e.content.as_deref().and_then(|c| c.first()) {
            None => Retired::Open,
            Some(&format::TOMBSTONE) => Retired::Tombstone,
            Some(&b) => Retired::Other(b),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Retired::Open => "open",
            Retired::Tombstone => "retired",
            Retired::Other(_) => "damaged",
            Retired::Unreadable => "unreadable",
        }
    }
}

/// A cohort's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Active,
    Predecessor,
    /// Created before the active cohort (SGLang), or retired (vLLM).
    Older,
    /// Open and not active: a standby, or a launch in progress.
    Other,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Active => "active",
            Role::Predecessor => "predecessor",
            Role::Older => "older",
            Role::Other => "other",
        }
    }
}

/// One cohort in the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CohortFacts {
    pub id: String,
    pub role: Role,
    pub state: Retired,
    pub lock: Lock,
    /// vLLM: the launcher's `.leader`: `None` absent, else its lock.
    pub leader: Option<Lock>,
}

/// The facts a cohort directory's report prints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CohortDirFacts {
    pub flavour: Flavour,
    pub active: Option<String>,
    pub predecessor: Option<String>,
    pub cohorts: Vec<CohortFacts>,
    pub staging: Vec<String>,
    /// Joining markers: name and the cohort named.
    pub joining: Vec<(String, Option<String>)>,
}

/// Judges a cohort directory from two reads.
pub fn judge_cohort(a: &CohortRead, b: &CohortRead) -> (Vec<Finding>, CohortDirFacts) {
    let facts = cohort_facts(b);
    let marker = |r: &CohortRead, name: &str| r.get(name).map(|e| e.content.clone());
    let pred_name = |r: &CohortRead| {
        let f = cohort_facts(r);
        f.active.map(|id| format!("{id}.predecessor"))
    };
    if marker(a, "active") != marker(b, "active")
        || pred_name(a).map(|n| marker(a, &n)) != pred_name(b).map(|n| marker(b, &n))
    {
        let show = |r: &CohortRead| {
            let f = cohort_facts(r);
            format!(
                "active {}, predecessor {}",
                f.active.as_deref().unwrap_or("none"),
                f.predecessor.as_deref().unwrap_or("none")
            )
        };
        let f = Finding::reject(
            Code::KV250,
            "the active or predecessor marker changed between the two reads: a takeover ran",
        )
        .values(show(a), show(b));
        return (vec![f], facts);
    }
    let out = both_reads(cohort_reasons(a), cohort_reasons(b));
    (out, facts)
}

fn cohort_facts(r: &CohortRead) -> CohortDirFacts {
    use format::CohortName;
    let flavour = r.flavour();
    let id_of = |name: &str| {
        r.get(name)
            .and_then(|e| e.content.as_deref())
            .and_then(format::marker_id)
    };
    let active = id_of("active");
    let predecessor = match (&active, flavour) {
        (Some(a), Flavour::Vllm) => id_of(&format!("{a}.predecessor")),
        _ => None,
    };
    let active_mtime = active.as_deref().and_then(|a| r.get(a)).map(|e| e.mtime_ns);
    let mut cohorts = Vec::new();
    let mut staging = Vec::new();
    let mut joining = Vec::new();
    for e in &r.entries {
        match format::cohort_name_of(e.name.as_bytes()) {
            CohortName::Cohort(id) if e.regular => {
                let state = Retired::of(e);
                let role = if Some(&id) == active.as_ref() {
                    Role::Active
                } else if Some(&id) == predecessor.as_ref() {
                    Role::Predecessor
                } else if match flavour {
                    Flavour::Vllm => matches!(state, Retired::Tombstone | Retired::Other(_)),
                    Flavour::Sglang => active_mtime.is_some_and(|t| e.mtime_ns < t),
                } {
                    Role::Older
                } else {
                    Role::Other
                };
                let leader = r.get(&format!("{id}.leader")).map(|l| {
                    l.lock
                        .clone()
                        .unwrap_or(Lock::NotChecked("not probed".into()))
                });
                cohorts.push(CohortFacts {
                    id,
                    role,
                    state,
                    lock: e
                        .lock
                        .clone()
                        .unwrap_or(Lock::NotChecked("not probed".into())),
                    leader,
                });
            }
            CohortName::Staging(_) => staging.push(e.shown()),
            CohortName::Joining(_) => {
                joining.push((e.shown(), e.content.as_deref().and_then(format::marker_id)))
            }
            _ => {}
        }
    }
    cohorts.sort_by_key(|c| (c.role as u8, c.id.clone()));
    CohortDirFacts {
        flavour,
        active,
        predecessor,
        cohorts,
        staging,
        joining,
    }
}

fn holders_text(hs: &[&Holder]) -> String {
    hs.iter()
        .map(|h| format!("pid {}", h.pid))
        .collect::<Vec<_>>()
        .join(", ")
}

fn cohort_reasons(r: &CohortRead) -> Vec<Finding> {
    let facts = cohort_facts(r);
    let mut out = Vec::new();
    // A file that could not be read is evidence of nothing: a notice naming
    // it and the errno, and no other check of it.
    for e in r.entries.iter().filter(|e| e.regular) {
        if let Some(why) = &e.unreadable {
            let what = match format::cohort_name_of(e.name.as_bytes()) {
                format::CohortName::Cohort(_) => {
                    "whether the cohort is retired and whether a writer of it runs are"
                }
                format::CohortName::Leader(_) => "whether its launcher holds it is",
                _ => "what the marker names is",
            };
            out.push(
                Finding::notice(
                    Code::KV235,
                    format!(
                        "{} could not be read ({why}): {what} not checked",
                        e.shown()
                    ),
                )
                .at(e.shown())
                .values("a readable file", why.clone()),
            );
        }
    }
    let unreadable = |name: &str| r.get(name).is_some_and(|e| e.unreadable.is_some());
    // Markers.
    if let Some(e) = r.get("active").filter(|_| !unreadable("active")) {
        match &facts.active {
            None => out.push(
                Finding::reject(Code::KV234, "active is not one 32-hex cohort identity")
                    .at("active")
                    .values("32 lower-case hex digits", shown(e.content.as_deref())),
            ),
            Some(id) if r.get(id).is_none_or(|c| !c.regular) => out.push(
                Finding::reject(
                    Code::KV234,
                    format!("active names cohort {id}, which is absent"),
                )
                .at("active")
                .values("a cohort file", "none"),
            ),
            _ => {}
        }
    }
    if let (Flavour::Vllm, Some(a)) = (facts.flavour, &facts.active) {
        let name = format!("{a}.predecessor");
        if let Some(e) = r.get(&name).filter(|_| !unreadable(&name)) {
            match &facts.predecessor {
                None => out.push(
                    Finding::reject(
                        Code::KV234,
                        "the predecessor marker is not one cohort identity",
                    )
                    .at(name.clone())
                    .values("32 lower-case hex digits", shown(e.content.as_deref())),
                ),
                Some(p) if r.get(p).is_none_or(|c| !c.regular) => out.push(
                    Finding::reject(
                        Code::KV234,
                        format!("the predecessor marker names cohort {p}, which is absent"),
                    )
                    .at(name.clone())
                    .values("a cohort file", "none"),
                ),
                _ => {}
            }
        }
    }
    for (name, id) in &facts.joining {
        if unreadable(name) {
            continue;
        }
        match id {
            None => out.push(
                Finding::reject(Code::KV234, "the joining marker is not one cohort identity")
                    .at(name.clone())
                    .values(
                        "32 lower-case hex digits",
                        shown(r.get(name).and_then(|e| e.content.as_deref())),
                    ),
            ),
            Some(id) => {
                let state = r.get(id).filter(|e| e.regular).map(Retired::of);
                if state.is_none_or(|s| s != Retired::Open) {
                    let what = if state.is_none() { "absent" } else { "retired" };
                    out.push(
                        Finding::notice(
                            Code::KV236,
                            format!("the joining marker names cohort {id}, which is {what}"),
                        )
                        .at(name.clone())
                        .values("an open cohort", what),
                    );
                }
            }
        }
    }
    for s in &facts.staging {
        let marker = match format::cohort_name(s) {
            format::CohortName::Staging(k) => k.marker(),
            _ => "a marker",
        };
        out.push(
            Finding::reject(
                Code::KV233,
                format!(
                    "a staging file of {marker}: a writer died between writing it and renaming \
                     it into place"
                ),
            )
            .at(s.clone())
            .values("no staging file", s.clone()),
        );
    }
    for c in &facts.cohorts {
        if c.state == Retired::Unreadable {
            continue;
        }
        if c.role == Role::Predecessor && c.state != Retired::Tombstone {
            let found = match c.state {
                Retired::Open => "size 0 (open: joiners admitted)".to_string(),
                Retired::Other(b) => format!("byte {b:#04x}"),
                Retired::Tombstone | Retired::Unreadable => unreachable!("filtered"),
            };
            out.push(
                Finding::reject(Code::KV231, "the predecessor cohort is not retired")
                    .at(c.id.clone())
                    .values("the tombstone R", found),
            );
        }
        if !matches!(c.role, Role::Predecessor | Role::Older) {
            continue;
        }
        let live = c.lock.live_holders();
        let whose = match c.role {
            Role::Predecessor => "the predecessor cohort",
            _ => "an older cohort",
        };
        match &c.lock {
            Lock::Held { holders } if !live.is_empty() => out.push(
                Finding::reject(
                    Code::KV232,
                    format!(
                        "{whose} still has a running writer ({}): not fenced",
                        holders_text(&live)
                    ),
                )
                .at(c.id.clone())
                .values("no lock holder", format!("{} holder(s)", holders.len())),
            ),
            Lock::Held { holders } if holders.is_empty() => out.push(
                Finding::reject(
                    Code::KV232,
                    format!(
                        "{whose} is locked, and no running process could be named as its holder \
                         (another user's process, or a descriptor passed on)"
                    ),
                )
                .at(c.id.clone())
                .values("no lock holder", "a lock"),
            ),
            Lock::Held { holders } => {
                let exiting: Vec<&Holder> = holders.iter().filter(|h| h.running).collect();
                let text = if exiting.is_empty() {
                    format!(
                        "{whose} is locked by a process that has gone (recorded pid {}): its \
                         lock is released as it finishes exiting",
                        holders[0].pid
                    )
                } else {
                    format!(
                        "{whose}'s last writers are exiting ({}): the end of a fence",
                        holders_text(&exiting)
                    )
                };
                out.push(
                    Finding::notice(Code::KV232, text)
                        .at(c.id.clone())
                        .values("no lock holder", "exiting holders"),
                );
            }
            Lock::NotChecked(why) => out.push(
                Finding::notice(
                    Code::KV235,
                    format!("whether a writer of {whose} still runs is not checked: {why}"),
                )
                .at(c.id.clone())
                .values("a lock the kernel lists, or none", "not checked"),
            ),
            Lock::Free => {}
        }
    }
    out
}

fn shown(content: Option<&[u8]>) -> String {
    match content {
        None => "unreadable".to_string(),
        Some(c) => format!("{:?}", String::from_utf8_lossy(c).trim()),
    }
}

// ---------------------------------------------------------------------------
// Superseded formats
// ---------------------------------------------------------------------------

/// One read of a file in a superseded format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SupersededRead {
    pub format: Superseded,
    pub size: u64,
    /// The size its header implies, when it does; `None` for a snapshot
    /// (then `exact` says whether its records filled the file).
    pub expected_size: Option<u64>,
    pub exact: bool,
    /// The files beside it that belong to it, by name (`.rank<R>`,
    /// `.status.jsonl`, `.tmp`, `.gen`, `.del`): listed, never read.
    pub beside: Vec<String>,
}

/// Judges a superseded file: always KV241, and KV242 when its size does
/// not match its own header.
pub fn judge_superseded(r: &SupersededRead) -> Vec<Finding> {
    let mut out = vec![Finding::reject(
        Code::KV241,
        format!(
            "a {} {} (superseded: its design was withdrawn upstream; no current GMS reads it, \
             and next to live leases it is stale)",
            r.format.name(),
            r.format.what()
        ),
    )
    .values("no file of a withdrawn format", r.format.name())];
    let bad = match r.expected_size {
        Some(e) => e != r.size,
        None => !r.exact,
    };
    if bad {
        let expected = r
            .expected_size
            .map_or("records that fill the file".to_string(), |e| e.to_string());
        out.push(
            Finding::reject(Code::KV242, "the size does not match its own header")
                .values(expected, r.size),
        );
    }
    out
}

// ---------------------------------------------------------------------------
// A judged run
// ---------------------------------------------------------------------------

/// The interval between the two reads when none is given, in milliseconds.
pub const DEFAULT_INTERVAL_MS: u64 = 200;
/// The longest interval `--interval-ms` takes.
pub const MAX_INTERVAL_MS: u64 = 60_000;

/// The devices whose default namespaces a ring's file name is compared
/// with (`{engine}:gpu{device}:{suffix}`).
pub const NAMESPACE_DEVICES: u32 = 64;

/// What a run is asked for.
#[derive(Clone, Debug)]
pub struct Options {
    /// Files or directories; empty: where GMS puts its artifacts.
    pub paths: Vec<PathBuf>,
    pub live: bool,
    pub ask: RecoveryAsk,
    pub interval_ms: u64,
    /// The environment GMS's variables are read from when no path is
    /// given (docs/format.md §14.1): what the caller says a GMS process
    /// sees, never this process's own (the command line fills it from
    /// its environment, the Python package from `os.environb`). Empty:
    /// none is set, GMS's defaults.
    pub env: BTreeMap<std::ffi::OsString, std::ffi::OsString>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            paths: Vec::new(),
            live: false,
            ask: RecoveryAsk::default(),
            interval_ms: DEFAULT_INTERVAL_MS,
            env: BTreeMap::new(),
        }
    }
}

/// What an artifact is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Lease,
    Cohort,
    Recovery,
    Superseded,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Lease => "lease",
            Kind::Cohort => "cohort",
            Kind::Recovery => "recovery",
            Kind::Superseded => "superseded",
        }
    }
}

/// An artifact's facts, by kind.
#[derive(Clone, Debug)]
pub enum Facts {
    Lease(LeaseFacts),
    Cohort(CohortDirFacts),
    Recovery(RecoveryFacts),
    Superseded(SupersededRead),
}

/// One judged artifact.
#[derive(Clone, Debug)]
pub struct Artifact {
    pub path: PathBuf,
    pub kind: Kind,
    pub findings: Vec<Finding>,
    pub facts: Facts,
}

impl Artifact {
    pub fn rejected(&self) -> bool {
        rejected(&self.findings)
    }

    /// The finding the headline names: the rejecting one first in the
    /// root-cause order (`crate::format::finding::Spec::root_rank`).
    pub fn cause(&self) -> Option<&Finding> {
        self.findings
            .iter()
            .filter(|f| f.is_reject())
            .min_by_key(|f| f.code.spec().root_rank)
    }
}

/// One place discovery looked at.
#[derive(Clone, Debug)]
pub struct Looked {
    pub path: PathBuf,
    pub what: &'static str,
    /// Whether the place exists.
    pub present: bool,
    /// The artifacts found there.
    pub found: usize,
}

/// A judged run.
#[derive(Clone, Debug)]
pub struct Run {
    /// Discovery's places (empty when PATHs were given).
    pub looked: Vec<Looked>,
    pub artifacts: Vec<Artifact>,
    pub options: Options,
}

impl Run {
    /// 0 when every artifact is ok (notices allowed), 1 when one is
    /// rejected; a run that could not happen is a [`crate::format::failure::Failure`] (2).
    pub fn exit_status(&self) -> i32 {
        if self.artifacts.iter().any(Artifact::rejected) {
            crate::format::exit::REJECTED
        } else {
            crate::format::exit::OK
        }
    }
}

/// The message a finding renders to in tests.
#[cfg(test)]
pub fn text(f: &Finding) -> String {
    crate::format::message::render(&f.message)
}
