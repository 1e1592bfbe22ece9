//! Who else claims the same thing: a rank slot (KV102), a GPU (KV106), a
//! memory handle (KV111).
//!
//! Claimants are row positions, never display paths, so two files whose
//! paths print alike are still two claimants. A finding names at most
//! [`MAX_NAMED`] other places and counts the rest (docs/format.md §9.3):
//! N copies of one descriptor cost O(N log N) time and O(N) output, not
//! O(N²). Claims by another owner lifetime (two incarnations tied on the
//! highest epoch) are not a conflict: only one of them could be imported.

use super::Row;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use uuid::Uuid;

/// Most other places one finding names before "and N more".
pub(crate) const MAX_NAMED: usize = 8;

/// The claimants of one key, sorted by (rank, raw path), grouped by lifetime.
#[derive(Default)]
struct Claimants {
    all: Vec<usize>,
    by_inc: BTreeMap<Uuid, Vec<usize>>,
    unknown: Vec<usize>,
}

/// Claims on keys of type `K`.
pub(crate) struct Claims<K: Ord> {
    map: BTreeMap<K, Claimants>,
}

/// What one claimant sees of the others.
pub(crate) struct Rivals {
    /// At most [`MAX_NAMED`] other claimants, in (rank, raw path) order.
    pub named: Vec<usize>,
    /// How many other claimants there are in all.
    pub total: usize,
}

fn order(rows: &[Row], a: usize, b: usize) -> Ordering {
    let rank = |i: usize| rows[i].desc().map(|d| d.rank).or(rows[i].slot);
    rank(a)
        .cmp(&rank(b))
        .then_with(|| rows[a].raw_path().cmp(rows[b].raw_path()))
        .then(a.cmp(&b))
}

impl<K: Ord> Claims<K> {
    /// `claims` yields (key, row) pairs; a row claiming one key twice counts
    /// once. Only keys with two or more claimants are kept: one sort of the
    /// pairs, no allocation per key for the (usual) unique ones.
    pub fn new(rows: &[Row], claims: impl IntoIterator<Item = (K, usize)>) -> Claims<K> {
        let mut pairs: Vec<(K, usize)> = claims.into_iter().collect();
        pairs.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        pairs.dedup_by(|b, a| a.0 == b.0 && a.1 == b.1);
        let mut map: BTreeMap<K, Claimants> = BTreeMap::new();
        let mut it = pairs.into_iter().peekable();
        while let Some((k, i)) = it.next() {
            if it.peek().is_none_or(|(k2, _)| *k2 != k) {
                continue; // a single claimant
            }
            let mut all = vec![i];
            while let Some((_, j)) = it.next_if(|(k2, _)| *k2 == k) {
                all.push(j);
            }
            all.sort_by(|&a, &b| order(rows, a, b));
            let mut c = Claimants {
                all,
                ..Claimants::default()
            };
            for &i in &c.all {
                match rows[i].cand.incarnation() {
                    Some(u) => c.by_inc.entry(u).or_default().push(i),
                    None => c.unknown.push(i),
                }
            }
            map.insert(k, c);
        }
        Claims { map }
    }

    /// The other claimants of `key` that row `me` conflicts with (same
    /// lifetime, or a lifetime that is not known); `None` when there are none.
    pub fn rivals(&self, rows: &[Row], key: &K, me: usize) -> Option<Rivals> {
        let c = self.map.get(key)?;
        if c.all.len() < 2 {
            return None;
        }
        let (lists, total): (Vec<&[usize]>, usize) = match rows[me].cand.incarnation() {
            Some(u) => {
                let same = c.by_inc.get(&u).map_or(&[][..], |v| &v[..]);
                (vec![same, &c.unknown[..]], same.len() + c.unknown.len())
            }
            None => (vec![&c.all[..]], c.all.len()),
        };
        // `me` is in exactly one of the lists.
        let total = total.saturating_sub(1);
        if total == 0 {
            return None;
        }
        let mut named: Vec<usize> = lists
            .iter()
            .flat_map(|l| l.iter().copied().filter(|&i| i != me).take(MAX_NAMED))
            .collect();
        named.sort_by(|&a, &b| order(rows, a, b));
        named.truncate(MAX_NAMED);
        Some(Rivals { named, total })
    }
}

/// `a, b, c` or `a, b, … h and 12 more` for `total` places of which `named`
/// are given.
pub(crate) fn name_bounded(named: &[String], total: usize) -> String {
    let mut s = named.join(", ");
    if total > named.len() {
        s.push_str(&format!(" and {} more", total - named.len()));
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn bounded_names() {
        let n: Vec<String> = ["a", "b"].iter().map(|s| s.to_string()).collect();
        assert_eq!(super::name_bounded(&n, 2), "a, b");
        assert_eq!(super::name_bounded(&n, 10), "a, b and 8 more");
    }
}
