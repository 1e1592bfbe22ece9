//! Recovery metadata (docs/format.md §14.4): the scan of one read, the
//! block count a size implies, and the two reads judged
//! ([`judge_recovery`]).

use super::*;
use crate::format::finding::{Code, Finding};
use crate::gms::format::{self as format, RecoveryHeader};

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
