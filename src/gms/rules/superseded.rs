//! Superseded formats (docs/format.md §14.5): an artifact GMS no longer
//! writes, named and left alone ([`judge_superseded`]).

use crate::format::finding::{Code, Finding};
use crate::gms::format::Superseded;

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
