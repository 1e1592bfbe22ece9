//! KV111 (handle-reuse): one piece of memory must back one allocation.
//!
//! A memory handle's identity is its kind plus its bytes: the 64 bytes of a
//! `cuda_ipc` or `fabric` handle, the owner pid and fd of a `posix_fd`
//! (docs/format.md §3.4). The same handle twice in one descriptor makes
//! its size sum count the memory twice; the same handle in two ranks makes
//! two ranks share one cache. Either rejects.

use super::claims::{name_bounded, Claims};
use super::Row;
use crate::descriptor::{Descriptor, HandleId};
use crate::finding::{Code, Finding};

/// The identity of one handle: its [`HandleId`], and for `posix_fd` the
/// owner pid (fd 7 of two processes is two handles).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct HandleKey {
    owner_pid: i32,
    id: HandleId,
}

impl HandleKey {
    fn of(h: &HandleId, d: &Descriptor) -> HandleKey {
        HandleKey {
            owner_pid: if h.fd().is_some() { d.owner.pid } else { 0 },
            id: *h,
        }
    }

    /// Short, printable: `fabric handle` or `posix_fd 7 of owner pid 42`
    /// (the allocation index names where the bytes are).
    fn describe(&self) -> String {
        match self.id.fd() {
            Some(fd) => format!("posix_fd {fd} of owner pid {}", self.owner_pid),
            None => format!("{} handle", self.id.kind_name()),
        }
    }
}

pub(crate) fn keys(d: &Descriptor) -> Vec<HandleKey> {
    d.alloc_summary
        .handles
        .iter()
        .map(|h| HandleKey::of(h, d))
        .collect()
}

pub(crate) fn check(rows: &mut [Row]) {
    let per_row: Vec<Vec<HandleKey>> = rows
        .iter()
        .map(|r| r.desc().map(keys).unwrap_or_default())
        .collect();
    let claims = Claims::new(
        rows,
        per_row
            .iter()
            .enumerate()
            .flat_map(|(i, ks)| ks.iter().map(move |k| (*k, i))),
    );
    let mut out: Vec<Vec<Finding>> = Vec::with_capacity(rows.len());
    for (me, ks) in per_row.iter().enumerate() {
        let mut findings = Vec::new();
        // Within the descriptor: sort positions by key, equal neighbours repeat.
        let mut pos: Vec<usize> = (0..ks.len()).collect();
        pos.sort_by(|&a, &b| ks[a].cmp(&ks[b]).then(a.cmp(&b)));
        let repeats: Vec<(usize, usize)> = pos
            .windows(2)
            .filter(|w| ks[w[0]] == ks[w[1]])
            .map(|w| (w[0], w[1]))
            .collect();
        if let Some(&(a, b)) = repeats.iter().min() {
            let more = if repeats.len() > 1 {
                format!("; {} repeats in all", repeats.len())
            } else {
                String::new()
            };
            findings.push(
                Finding::reject(
                    Code::KV111,
                    format!(
                        "allocations[{a}] and allocations[{b}] carry the same {}: the memory would be counted twice{more}",
                        ks[a].describe()
                    ),
                )
                .values(
                    "each handle once",
                    format!("allocations[{a}] and allocations[{b}]"),
                ),
            );
        }
        // Across ranks: the first shared handle is named, the rest counted
        // (each distinct handle once: `pos` is sorted by key).
        let mut first: Option<(usize, String)> = None;
        let mut shared = 0usize;
        let mut distinct: Vec<usize> = pos.clone();
        distinct.dedup_by(|b, a| ks[*a] == ks[*b]);
        distinct.sort_unstable();
        for ai in distinct {
            let k = &ks[ai];
            if let Some(rv) = claims.rivals(rows, k, me) {
                shared += 1;
                if first.is_none() {
                    let named: Vec<String> = rv
                        .named
                        .iter()
                        .map(|&j| match rows[j].desc() {
                            Some(o) => format!("rank {} ({})", o.rank, rows[j].path()),
                            None => rows[j].path().to_string(),
                        })
                        .collect();
                    first = Some((ai, name_bounded(&named, rv.total)));
                }
            }
        }
        if let Some((ai, who)) = first {
            let more = if shared > 1 {
                format!("; {shared} of this descriptor's handles are shared")
            } else {
                String::new()
            };
            findings.push(
                Finding::reject(
                    Code::KV111,
                    format!(
                        "the {} in allocations[{ai}] is also used by {who}: the same memory would be imported twice{more}",
                        ks[ai].describe()
                    ),
                )
                .values("a handle used by one rank only", format!("also used by {who}")),
            );
        }
        out.push(findings);
    }
    for (row, findings) in rows.iter_mut().zip(out) {
        let ok = findings.is_empty();
        for f in findings {
            row.reject(f);
        }
        if row.desc().is_some() {
            row.check("handles", ok);
        }
    }
}
