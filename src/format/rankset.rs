//! Rank lists such as `0-7` or `0-3,8-11` (`--local-ranks`, profile
//! `local_ranks`).

use std::fmt;

const WORDS: usize = (crate::format::descriptor::MAX_WORLD_SIZE as usize).div_ceil(64);

/// A set of ranks, each below [`crate::format::descriptor::MAX_WORLD_SIZE`], as a
/// fixed bitset: parsing is linear in the text (a range sets whole words),
/// however many times a list repeats its ranges.
#[derive(Clone, PartialEq, Eq)]
pub struct RankSet(Box<[u64; WORDS]>);

impl Default for RankSet {
    fn default() -> Self {
        RankSet(Box::new([0; WORDS]))
    }
}

impl fmt::Debug for RankSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RankSet({self})")
    }
}

impl RankSet {
    /// Parses `0-7`, `0-3,8-11`, `5`; spaces around items are allowed.
    pub fn parse(s: &str) -> Result<RankSet, String> {
        let max = crate::format::descriptor::MAX_WORLD_SIZE;
        let num = |t: &str| -> Result<u64, String> {
            let t = t.trim();
            if t.is_empty()
                || !t.bytes().all(|b| b.is_ascii_digit())
                || (t.len() > 1 && t.starts_with('0'))
            {
                return Err(format!(
                    "{t:?} is not a rank (decimal, no sign, no leading zeros)"
                ));
            }
            let n: u64 = t.parse().map_err(|_| format!("{t:?} is out of range"))?;
            if n >= max {
                return Err(format!("rank {n} is out of range (ranks are below {max})"));
            }
            Ok(n)
        };
        let mut set = RankSet::default();
        for item in s.split(',') {
            match item.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b {
                        return Err(format!("range {a}-{b} runs backwards"));
                    }
                    set.insert_range(a, b);
                }
                None => {
                    let r = num(item)?;
                    set.insert_range(r, r);
                }
            }
        }
        Ok(set)
    }

    /// Sets ranks a..=b (both below MAX_WORLD_SIZE), a word at a time.
    fn insert_range(&mut self, a: u64, b: u64) {
        let (a, b) = (a as usize, b as usize);
        let (wa, wb) = (a / 64, b / 64);
        for w in wa..=wb {
            let lo = if w == wa { a % 64 } else { 0 };
            let hi = if w == wb { b % 64 } else { 63 };
            let mask = (u64::MAX >> (63 - hi)) & (u64::MAX << lo);
            self.0[w] |= mask;
        }
    }

    pub fn contains(&self, rank: u64) -> bool {
        usize::try_from(rank)
            .ok()
            .and_then(|r| self.0.get(r / 64).map(|w| w >> (r % 64) & 1 == 1))
            .unwrap_or(false)
    }

    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.0.iter().enumerate().flat_map(|(i, &w)| {
            (0..64u64)
                .filter(move |b| w >> b & 1 == 1)
                .map(move |b| i as u64 * 64 + b)
        })
    }

    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }
}

impl fmt::Display for RankSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_runs(&runs(self.iter())))
    }
}

/// Written as its text (`"0-3,8-11"`), as reports always carried it.
impl serde::Serialize for RankSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl std::str::FromStr for RankSet {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RankSet::parse(s)
    }
}

/// Sorted ranks as inclusive runs: `[0,1,2,5]` → `[(0,2),(5,5)]`. A group's
/// missing ranks are kept this way, so a group declaring world_size 4096
/// with one rank present costs one run, not 4095 numbers.
pub fn runs(ranks: impl IntoIterator<Item = u64>) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for r in ranks {
        match out.last_mut() {
            Some((_, end)) if end.checked_add(1) == Some(r) => *end = r,
            _ => out.push((r, r)),
        }
    }
    out
}

/// Runs as text: `[(0,2),(5,5)]` → `0-2,5`.
pub fn format_runs(runs: &[(u64, u64)]) -> String {
    runs.iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `[0,1,2,5,7,8]` → `0-2,5,7-8`.
pub fn compress_ranks(ranks: &[u64]) -> String {
    format_runs(&runs(ranks.iter().copied()))
}

#[cfg(test)]
mod tests {
    use super::RankSet;
    use super::*;

    #[test]
    fn parse_examples() {
        let r = RankSet::parse("0-3, 8-11").unwrap();
        assert!(r.contains(9) && !r.contains(4));
        assert_eq!(r.to_string(), "0-3,8-11");
        assert!(RankSet::parse("7-0").is_err());
    }

    #[test]
    fn compress_examples() {
        assert_eq!(compress_ranks(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(compress_ranks(&[]), "");
    }

    #[test]
    fn ranges_are_set_word_by_word() {
        let r = super::RankSet::parse("0-4095").unwrap();
        assert_eq!(r.len(), 4096);
        assert_eq!(r.to_string(), "0-4095");
        let r = super::RankSet::parse("63-64,127,5").unwrap();
        assert_eq!(r.iter().collect::<Vec<_>>(), [5, 63, 64, 127]);
        assert!(!r.contains(4096) && !r.contains(u64::MAX));
        // Repeats cost what their text costs.
        let long = vec!["0-4095"; 20_000].join(",");
        let t = std::time::Instant::now();
        assert_eq!(super::RankSet::parse(&long).unwrap().len(), 4096);
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
    }

    #[test]
    fn parses_lists_and_ranges() {
        let s = RankSet::parse("0-3, 8-11,15").unwrap();
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 8, 9, 10, 11, 15]
        );
        assert_eq!(s.to_string(), "0-3,8-11,15");
        assert!(RankSet::parse("3-1").is_err());
        assert!(RankSet::parse("01").is_err());
        assert!(RankSet::parse("-1").is_err());
        assert!(RankSet::parse("").is_err());
        assert!(RankSet::parse("4096").is_err());
        assert!(RankSet::parse("0-4095").is_ok());
    }
}
