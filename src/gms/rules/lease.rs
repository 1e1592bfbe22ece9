//! Lease rings (docs/format.md §14.2): the scan of one read, the two
//! reads judged together ([`judge_lease`]) and the facts printed.

use super::*;
use crate::format::finding::{Code, Finding};
use crate::gms::format::{self as format, LeaseHeader};
use std::collections::BTreeMap;

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
    let Some(h) = lease_header(a, b, &mut facts, &mut out) else {
        return (out, facts);
    };
    let (Some(sa), Some(sb)) = (&a.scan, &b.scan) else {
        return (out, facts);
    };
    facts.scan = Some(sb.clone());
    let ha = a.header.expect("identity equal");
    let unchanged = sa.digest == sb.digest && ha == h;
    lease_records(sa, sb, &mut out);
    lease_header_state(&ha, &h, sa, sb, unchanged, live, &mut facts, &mut out);
    lease_owners(sa, sb, live, &mut facts, &mut out);
    (out, facts)
}

/// The header and the size, the same in both reads and as GMS writes
/// them (KV250, KV201-KV203); `None` when nothing more can be judged.
fn lease_header(
    a: &LeaseRead,
    b: &LeaseRead,
    facts: &mut LeaseFacts,
    out: &mut Vec<Finding>,
) -> Option<LeaseHeader> {
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
        return None;
    }
    let Some(h) = b.header else {
        out.push(
            Finding::reject(Code::KV203, "shorter than the 64-byte lease header")
                .values(format!("at least {} bytes", format::LEASE_HEADER), a.size),
        );
        return None;
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
        return None;
    }
    if h.version != format::LEASE_VERSION {
        out.push(
            Finding::reject(
                Code::KV202,
                "unknown lease-ring version: not decoded; the next GMS client re-initialises it",
            )
            .values(format::LEASE_VERSION, h.version),
        );
        return None;
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
        return None;
    }
    if h.record_size != format::LEASE_RECORD {
        out.push(
            Finding::reject(Code::KV202, "unknown record size: not decoded")
                .values(format::LEASE_RECORD, h.record_size),
        );
        return None;
    }
    if h.total_blocks == 0 {
        out.push(
            Finding::reject(
                Code::KV202,
                "total_blocks is 0, which GMS never writes: the next client re-initialises it",
            )
            .values("at least 1", 0),
        );
        return None;
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
    Some(h)
}

/// The records' states in both reads (KV204-KV207).
fn lease_records(sa: &LeaseScan, sb: &LeaseScan, out: &mut Vec<Finding>) {
    block_condition(
        out,
        Code::KV204,
        &sa.invalid_state,
        &sb.invalid_state,
        &format!(
            "in a state GMS never writes (first value {})",
            sb.first_invalid.or(sa.first_invalid).unwrap_or(0)
        ),
    );
    block_condition(
        out,
        Code::KV205,
        &sa.transition,
        &sb.transition,
        "in TRANSITION: a writer died mid-update",
    );
    block_condition(
        out,
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
}

/// The header's conditions in either read: the recovery barrier, mutations
/// in flight, the free count against the records, the reservation.
#[allow(clippy::too_many_arguments)] // the two reads' halves, each named
fn lease_header_state(
    ha: &LeaseHeader,
    h: &LeaseHeader,
    sa: &LeaseScan,
    sb: &LeaseScan,
    unchanged: bool,
    live: Option<&LeaseLive>,
    facts: &mut LeaseFacts,
    out: &mut Vec<Finding>,
) {
    // Barrier, mutations, free count, reservation: header conditions.
    let barrier = |x: &LeaseHeader| x.active_mutations == format::LEASE_BARRIER;
    facts.barrier = barrier(h);
    if barrier(ha) || barrier(h) {
        let both = barrier(ha) && barrier(h);
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
    if mutating(ha) || mutating(h) {
        let f = Finding::reject(
            Code::KV209,
            format!(
                "{} record mutation(s) in flight with no record changing: a writer died inside \
                 a mutation",
                h.active_mutations
            ),
        )
        .values(0, h.active_mutations);
        let stranded = mutating(ha) && mutating(h) && unchanged;
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
    if drift(ha, sa) || drift(h, sb) {
        let f = Finding::reject(
            Code::KV208,
            "free_count is not the number of FREE records, with no mutation in flight",
        )
        .values(sb.states[format::STATE_FREE as usize], h.free_count);
        out.push(if drift(ha, sa) && drift(h, sb) && unchanged {
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
    if odd(ha) || odd(h) {
        let f = Finding::reject(
            Code::KV212,
            "reservation_epoch is odd: a reservation update was torn",
        )
        .values("an even epoch", h.reservation_epoch);
        out.push(
            if odd(ha) && odd(h) && ha.reservation_epoch == h.reservation_epoch {
                f
            } else {
                once(f)
            },
        );
    }
}

/// The owners of leased and sealed blocks, and with `--live` whether each
/// still runs (KV213).
fn lease_owners(
    sa: &LeaseScan,
    sb: &LeaseScan,
    live: Option<&LeaseLive>,
    facts: &mut LeaseFacts,
    out: &mut Vec<Finding>,
) {
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
