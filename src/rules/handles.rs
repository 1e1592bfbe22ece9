//! KV111 (handle-reuse): one piece of memory must back one allocation.
//!
//! A memory handle's identity is its kind plus its bytes: the 64 bytes of a
//! `cuda_ipc` or `fabric` handle, the owner pid and fd of a `posix_fd`
//! (docs/format.md §3.4). The same handle twice in one descriptor at
//! overlapping byte ranges makes its size sum count the memory twice; at
//! disjoint ranges it is one exported segment carved into allocations
//! (§8.10), which is accepted. The same handle in two ranks makes two ranks
//! share one cache. Either rejection is KV111.

use super::claims::{name_bounded, Claims};
use super::Row;
use crate::format::descriptor::{Descriptor, HandleId};
use crate::format::finding::{Code, Finding};
use std::collections::BTreeMap;

/// The identity of one handle: its [`HandleId`], and for `posix_fd` the
/// owner pid (fd 7 of two processes is two handles).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct HandleKey {
    /// The owner's pid for a `posix_fd` handle; `None` for a handle whose
    /// bytes alone are its identity (never a pid of 0 standing for "none").
    owner_pid: Option<i32>,
    id: HandleId,
}

impl HandleKey {
    /// 64 bits of the key, for a first sort: equal keys always share one.
    pub(crate) fn fingerprint(&self) -> u64 {
        let lo = u64::from_le_bytes(self.id.id[..8].try_into().unwrap_or([0; 8]));
        (lo ^ self
            .owner_pid
            .map_or(0, |p| p as u32 as u64)
            .rotate_left(32)
            ^ u64::from(self.id.kind as u8) << 61)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    fn of(h: &HandleId, d: &Descriptor) -> HandleKey {
        HandleKey {
            owner_pid: h.fd().map(|_| d.owner.pid),
            id: *h,
        }
    }

    /// Short, printable: `fabric handle` or `posix_fd 7 of owner pid 42`
    /// (the allocation index names where the bytes are).
    fn describe(&self) -> String {
        match (self.id.fd(), self.owner_pid) {
            (Some(fd), Some(pid)) => format!("posix_fd {fd} of owner pid {pid}"),
            _ => format!("{} handle", self.id.kind_name()),
        }
    }
}

pub(crate) fn keys(d: &Descriptor) -> Vec<HandleKey> {
    each_key(d).collect()
}

/// [`keys`] one at a time, in allocation order, without a list.
pub(crate) fn each_key(d: &Descriptor) -> impl Iterator<Item = HandleKey> + '_ {
    d.alloc_summary.handles.iter().map(|h| HandleKey::of(h, d))
}

/// The allocation pairs of one row and one handle whose byte ranges
/// overlap (each pair once, lower index first), found in one sort by start:
/// a range that starts before the furthest end seen so far overlaps the
/// range that reached it. A range list that does not cover every allocation
/// (it always does after a parse) counts every pair as overlapping.
fn overlaps(same: &[(HandleKey, u32, u32)], ranges: &[(u64, u64)]) -> Vec<(usize, usize)> {
    let mut spans: Vec<(u64, u64, usize)> = Vec::with_capacity(same.len());
    for p in same {
        let a = p.2 as usize;
        match ranges.get(a) {
            Some(&(o, e)) => spans.push((o, e, a)),
            None => {
                return same
                    .windows(2)
                    .map(|w| (w[0].2 as usize, w[1].2 as usize))
                    .collect()
            }
        }
    }
    spans.sort_unstable();
    let mut out = Vec::new();
    let mut reach: Option<(u64, usize)> = None;
    for &(o, e, a) in &spans {
        if let Some((end, b)) = reach {
            if o < end {
                out.push((a.min(b), a.max(b)));
            }
            if e > end {
                reach = Some((e, a));
            }
        } else {
            reach = Some((e, a));
        }
    }
    out
}

pub(crate) fn check(rows: &mut [Row]) {
    // One sort of every (key, row, allocation) of the group: equal keys are
    // neighbours. The same row twice in a run is a repeat within the
    // descriptor; two rows in a run share a handle. Most groups have
    // neither, and then nothing else is built.
    // Equal keys have equal fingerprints: when no two fingerprints are
    // equal, no key repeats and every run below is a single pair, so the
    // pairs are neither built nor sorted (the costly part for a clean group).
    let mut prints: Vec<u64> = Vec::with_capacity(
        rows.iter()
            .filter_map(Row::desc)
            .map(|d| d.alloc_summary.handles.len())
            .sum(),
    );
    for d in rows.iter().filter_map(Row::desc) {
        prints.extend(each_key(d).map(|k| k.fingerprint()));
    }
    prints.sort_unstable();
    let mut pairs: Vec<(HandleKey, u32, u32)> = Vec::new();
    if prints.windows(2).any(|w| w[0] == w[1]) {
        for (ri, r) in rows.iter().enumerate() {
            if let Some(d) = r.desc() {
                pairs.extend(
                    each_key(d)
                        .enumerate()
                        .map(|(ai, k)| (k, ri as u32, ai as u32)),
                );
            }
        }
        pairs.sort_unstable();
    }
    drop(prints);
    // Per row: its repeats (allocation pairs) and its shared handles (first
    // allocation of each shared key).
    let mut repeats: BTreeMap<usize, Vec<(usize, usize)>> = BTreeMap::new();
    let mut shared: BTreeMap<usize, Vec<(usize, HandleKey)>> = BTreeMap::new();
    let mut shared_claims: Vec<(HandleKey, usize)> = Vec::new();
    let mut i = 0;
    while i < pairs.len() {
        let mut j = i + 1;
        while j < pairs.len() && pairs[j].0 == pairs[i].0 {
            j += 1;
        }
        let run = &pairs[i..j];
        // Within one row (the run is sorted by row): one handle at disjoint
        // ranges is one exported segment carved into allocations; at
        // overlapping ranges it is the same memory twice.
        let mut k = 0;
        while k < run.len() {
            let mut l = k + 1;
            while l < run.len() && run[l].1 == run[k].1 {
                l += 1;
            }
            if l - k > 1 {
                let row = run[k].1 as usize;
                let ranges = rows[row]
                    .desc()
                    .map(|d| d.alloc_summary.ranges.as_slice())
                    .unwrap_or(&[]);
                repeats
                    .entry(row)
                    .or_default()
                    .extend(overlaps(&run[k..l], ranges));
            }
            k = l;
        }
        repeats.retain(|_, v| !v.is_empty());
        if run.iter().any(|p| p.1 != run[0].1) {
            let mut last = None;
            for &(k, r, a) in run {
                if last != Some(r) {
                    shared.entry(r as usize).or_default().push((a as usize, k));
                    shared_claims.push((k, r as usize));
                    last = Some(r);
                }
            }
        }
        i = j;
    }
    let claims = Claims::new(rows, shared_claims);
    let mut out: Vec<Vec<Finding>> = Vec::with_capacity(rows.len());
    for me in 0..rows.len() {
        let mut findings = Vec::new();
        if let Some(reps) = repeats.get(&me) {
            let &(a, b) = reps.iter().min().expect("non-empty");
            let more = if reps.len() > 1 {
                format!("; {} repeats in all", reps.len())
            } else {
                String::new()
            };
            let k = rows[me].desc().map(keys).unwrap_or_default()[a];
            findings.push(
                Finding::reject(
                    Code::KV111,
                    format!(
                        "allocations[{a}] and allocations[{b}] carry the same {}: the memory \
                            would be counted twice{more}",
                        k.describe()
                    ),
                )
                .values(
                    "each handle once",
                    format!("allocations[{a}] and allocations[{b}]"),
                ),
            );
        }
        // Across ranks: the first shared handle is named, the rest counted.
        let mut first: Option<(usize, HandleKey, String)> = None;
        let mut count = 0usize;
        let mut mine = shared.get(&me).cloned().unwrap_or_default();
        mine.sort_unstable_by_key(|(a, _)| *a);
        for (ai, k) in mine {
            if let Some(rv) = claims.rivals(rows, &k, me) {
                count += 1;
                if first.is_none() {
                    let named: Vec<String> = rv
                        .named
                        .iter()
                        .map(|&j| match rows[j].desc() {
                            Some(o) => format!("rank {} ({})", o.rank, rows[j].path()),
                            None => rows[j].path().to_string(),
                        })
                        .collect();
                    first = Some((ai, k, name_bounded(&named, rv.total)));
                }
            }
        }
        if let Some((ai, k, who)) = first {
            findings.push(shared_finding(ai, &k, &who, count));
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

/// KV111 for a descriptor whose handle in `allocations[ai]` (key `k`) other
/// ranks also use (`who`), `count` of its handles shared in all.
fn shared_finding(ai: usize, k: &HandleKey, who: &str, count: usize) -> Finding {
    let more = if count > 1 {
        format!("; {count} of this descriptor's handles are shared")
    } else {
        String::new()
    };
    Finding::reject(
        Code::KV111,
        format!(
            "the {} in allocations[{ai}] is also used by {who}: the same memory would \
                be imported twice{more}",
            k.describe()
        ),
    )
    .values(
        "a handle used by one rank only",
        format!("also used by {who}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::descriptor::Handle;

    fn same(n: u32) -> Vec<(HandleKey, u32, u32)> {
        let k = HandleKey {
            owner_pid: None,
            id: HandleId::of(&Handle::Fabric([3; 64])),
        };
        (0..n).map(|a| (k, 0, a)).collect()
    }

    #[test]
    fn overlapping_pairs_are_found_in_one_sort() {
        // Disjoint, adjacent, any order: none.
        assert!(overlaps(&same(3), &[(20, 30), (0, 10), (10, 20)]).is_empty());
        // [0] reaches furthest; [2] starts inside it although [1] ended.
        assert_eq!(
            overlaps(&same(3), &[(0, 100), (10, 20), (50, 60)]),
            vec![(0, 1), (0, 2)]
        );
        // Identical ranges.
        assert_eq!(overlaps(&same(2), &[(5, 9), (5, 9)]), vec![(0, 1)]);
        // One byte of overlap, reported lower index first.
        assert_eq!(overlaps(&same(2), &[(9, 20), (0, 10)]), vec![(0, 1)]);
        // Ranges that do not cover every allocation: every pair counts.
        assert_eq!(overlaps(&same(3), &[(0, 1)]), vec![(0, 1), (1, 2)]);
    }
}
