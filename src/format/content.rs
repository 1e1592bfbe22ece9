//! docs/format.md §3.6: the content check. Pure: no I/O, the bytes come
//! from a read callback (the import backend's own mapping, the writer
//! API's caller, the Python package's producer).
//!
//! With `S = size_bytes`, `O = offset_bytes`, `P = page_bytes`, `N = pages`:
//! if `S <= P` there is one range `[O, O + S)` and `N` must be 1; otherwise
//! range `i` (for `i` in `0..N`) starts at `O + floor(i × (S − P) / (N − 1))`
//! and is `P` bytes long (`N >= 2`, so the first and the last page are always
//! sampled). `sha256` is SHA-256 over the sampled bytes concatenated in
//! order. `page_bytes` is a power of two from 512 to 1 MiB; `pages` is 1 to
//! 64. Offsets count from the start of the exported allocation (`O`
//! included), as `offset_bytes` does.

use sha2::{Digest, Sha256};
use std::fmt;
use std::ops::Range;

/// Smallest `page_bytes`.
pub(crate) const PAGE_MIN: u64 = 512;
/// Largest `page_bytes` (1 MiB).
pub(crate) const PAGE_MAX: u64 = 1 << 20;
/// Largest `pages`.
pub(crate) const PAGES_MAX: u64 = 64;

/// An allocation's `content` member: how it was sampled and the digest of
/// the samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Content {
    pub page_bytes: u64,
    pub pages: u64,
    pub sha256: [u8; 32],
}

/// Why a content digest could not be computed.
#[derive(Debug)]
pub enum ContentError {
    /// The sampling parameters break the rule (a descriptor with them is
    /// KV007).
    Shape(String),
    /// A read failed or returned the wrong number of bytes.
    Read(String),
}

impl fmt::Display for ContentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ContentError::Shape(s) => write!(f, "bad content sampling: {s}"),
            ContentError::Read(s) => write!(f, "reading the sampled bytes failed: {s}"),
        }
    }
}

impl std::error::Error for ContentError {}

/// The byte ranges the rule samples, in order (docs/format.md §3.6).
pub fn sampled_ranges(
    size_bytes: u64,
    offset_bytes: u64,
    page_bytes: u64,
    pages: u64,
) -> Result<Vec<Range<u64>>, ContentError> {
    let shape = |s: String| Err(ContentError::Shape(s));
    if !(PAGE_MIN..=PAGE_MAX).contains(&page_bytes) || !page_bytes.is_power_of_two() {
        return shape(format!(
            "page_bytes {page_bytes} is not a power of two from {PAGE_MIN} to {PAGE_MAX}"
        ));
    }
    if !(1..=PAGES_MAX).contains(&pages) {
        return shape(format!("pages {pages} is not from 1 to {PAGES_MAX}"));
    }
    if size_bytes == 0 {
        return shape("size_bytes is 0".into());
    }
    let Some(end) = offset_bytes.checked_add(size_bytes) else {
        return shape(format!(
            "offset_bytes {offset_bytes} + size_bytes {size_bytes} overflows"
        ));
    };
    if size_bytes <= page_bytes {
        if pages != 1 {
            return shape(format!(
                "pages {pages}: size_bytes {size_bytes} ≤ page_bytes {page_bytes} samples one \
                    range, so pages must be 1"
            ));
        }
        return Ok(std::iter::once(offset_bytes..end).collect());
    }
    if pages < 2 {
        return shape(format!(
            "pages {pages}: size_bytes {size_bytes} > page_bytes {page_bytes} samples the first \
                and the last page, so pages must be at least 2"
        ));
    }
    let span = u128::from(size_bytes - page_bytes);
    Ok((0..pages)
        .map(|i| {
            // ≤ size_bytes − page_bytes, so the sum fits below `end`.
            let step = (u128::from(i) * span / u128::from(pages - 1)) as u64;
            let start = offset_bytes + step;
            start..start + page_bytes
        })
        .collect())
}

/// Reads the sampled ranges through `read(offset, length)` and digests them.
pub fn digest_content(
    size_bytes: u64,
    offset_bytes: u64,
    page_bytes: u64,
    pages: u64,
    read: &mut dyn FnMut(u64, u64) -> Result<Vec<u8>, String>,
) -> Result<Content, ContentError> {
    let ranges = sampled_ranges(size_bytes, offset_bytes, page_bytes, pages)?;
    let mut h = Sha256::new();
    for r in ranges {
        let len = r.end - r.start;
        let bytes = read(r.start, len)
            .map_err(|e| ContentError::Read(format!("at offset {} ({len} bytes): {e}", r.start)))?;
        if bytes.len() as u64 != len {
            return Err(ContentError::Read(format!(
                "at offset {}: {} bytes returned, {len} asked",
                r.start,
                bytes.len()
            )));
        }
        h.update(&bytes);
    }
    Ok(Content {
        page_bytes,
        pages,
        sha256: h.finalize().into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(o: u64) -> u8 {
        (o.wrapping_mul(131) ^ (o >> 9)) as u8
    }

    fn reader() -> impl FnMut(u64, u64) -> Result<Vec<u8>, String> {
        |o, n| Ok((o..o + n).map(pattern).collect())
    }

    #[test]
    fn ranges_follow_the_rule() {
        // S ≤ P: one range of S bytes at O.
        assert_eq!(
            sampled_ranges(100, 7, 512, 1).unwrap(),
            [Range { start: 7, end: 107 }]
        );
        assert_eq!(
            sampled_ranges(512, 0, 512, 1).unwrap(),
            [Range { start: 0, end: 512 }]
        );
        // S > P: first and last page, evenly spread, floored.
        assert_eq!(
            sampled_ranges(10_000, 0, 4096, 2).unwrap(),
            vec![0..4096, 5904..10_000]
        );
        assert_eq!(
            sampled_ranges(10_000, 100, 4096, 3).unwrap(),
            vec![100..4196, 3052..7148, 6004..10_100]
        );
        // floor(i × 1 / 2) for S − P = 1.
        assert_eq!(
            sampled_ranges(513, 0, 512, 3).unwrap(),
            vec![0..512, 0..512, 1..513]
        );
        // Huge sizes do not overflow the product (u128).
        let r = sampled_ranges(u64::MAX - 1, 1, 1 << 20, 64).unwrap();
        assert_eq!(r[0].start, 1);
        assert_eq!(r[63].end, u64::MAX);
    }

    #[test]
    fn shapes_that_break_the_rule_are_refused() {
        for (s, o, p, n, want) in [
            (10_000, 0, 4096, 1, "at least 2"),
            (100, 0, 512, 2, "must be 1"),
            (10_000, 0, 4095, 2, "power of two"),
            (10_000, 0, 256, 2, "power of two"),
            (10_000, 0, 2 << 20, 2, "power of two"),
            (10_000, 0, 0, 2, "power of two"),
            (10_000, 0, 4096, 0, "from 1 to 64"),
            (10_000, 0, 4096, 65, "from 1 to 64"),
            (0, 0, 4096, 1, "size_bytes is 0"),
            (10, u64::MAX - 5, 512, 1, "overflows"),
        ] {
            match sampled_ranges(s, o, p, n) {
                Err(ContentError::Shape(m)) => assert!(m.contains(want), "{m}"),
                other => panic!("{s} {o} {p} {n}: {other:?}"),
            }
        }
    }

    #[test]
    fn digest_reads_exactly_the_sampled_bytes() {
        let mut asked = Vec::new();
        let mut read = |o: u64, n: u64| {
            asked.push((o, n));
            Ok((o..o + n).map(pattern).collect())
        };
        let c = digest_content(10_000, 100, 4096, 3, &mut read).unwrap();
        assert_eq!(asked, vec![(100, 4096), (3052, 4096), (6004, 4096)]);
        let mut h = Sha256::new();
        for (o, n) in asked {
            h.update((o..o + n).map(pattern).collect::<Vec<u8>>());
        }
        let want: [u8; 32] = h.finalize().into();
        assert_eq!(c.sha256, want);
        assert_eq!((c.page_bytes, c.pages), (4096, 3));
        // Another byte anywhere sampled changes the digest.
        let mut flipped = |o: u64, n: u64| {
            Ok((o..o + n)
                .map(|x| pattern(x) ^ u8::from(x == 9_999))
                .collect())
        };
        let d = digest_content(10_000, 100, 4096, 3, &mut flipped).unwrap();
        assert_ne!(d.sha256, c.sha256);
        assert_eq!(crate::format::hex::encode(&c.sha256).len(), 64);
    }

    #[test]
    fn short_long_and_failed_reads_are_read_errors() {
        for bad in [0usize, 1, 2] {
            let mut read = |o: u64, n: u64| match bad {
                0 => Ok(vec![0; n as usize - 1]),
                1 => Ok(vec![0; n as usize + 1]),
                _ => Err(format!("device gone at {o}")),
            };
            match digest_content(4096, 0, 1024, 2, &mut read) {
                Err(e @ ContentError::Read(_)) => {
                    assert!(e.to_string().contains("at offset 0"), "{e}")
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
        let mut r = reader();
        assert!(matches!(
            digest_content(4096, 0, 1000, 2, &mut r),
            Err(ContentError::Shape(_))
        ));
    }
}
