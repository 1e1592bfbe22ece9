//! The content digest of one allocation (issue #20, item 1): SHA-256 over pages
//! sampled at fixed offsets of the rank's byte range, so an importer can
//! check it holds the memory the owner described, not merely a valid handle.
//!
//! With `S = size_bytes`, `O = offset_bytes`, `P = page_bytes`, `N = pages`:
//! if `S <= P`, one range `[O, O+S)` and `N` must be 1; otherwise range `i`
//! (`0 <= i < N`, `N >= 2`) starts at `O + floor(i * (S - P) / (N - 1))` and
//! is `P` bytes long, so the first and the last page are always sampled.
//! `page_bytes` is a power of two from 512 to 1 MiB; `pages` is 1 to 64.

use sha2::{Digest, Sha256};
use std::fmt;
use std::ops::Range;

/// Smallest `page_bytes`.
pub const MIN_PAGE_BYTES: u64 = 512;
/// Largest `page_bytes` (1 MiB).
pub const MAX_PAGE_BYTES: u64 = 1 << 20;
/// Largest `pages`.
pub const MAX_PAGES: u64 = 64;

/// An allocation's `content` member: how it was sampled and the digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Content {
    /// Bytes per sampled page.
    pub page_bytes: u64,
    /// How many pages were sampled.
    pub pages: u64,
    /// SHA-256 of the sampled bytes, concatenated in order.
    pub sha256: [u8; 32],
}

/// Why a content digest could not be computed.
#[derive(Debug)]
pub enum ContentError {
    /// The sampling parameters break the rule (a `page_bytes` that is not a
    /// power of two in range, `pages` out of range, one page for a large
    /// allocation, an overflowing range...).
    Shape(String),
    /// The read callback failed or returned the wrong number of bytes.
    Read(String),
}

impl fmt::Display for ContentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ContentError::Shape(m) => write!(f, "content: {m}"),
            ContentError::Read(m) => write!(f, "content: read failed: {m}"),
        }
    }
}

impl std::error::Error for ContentError {}

/// The byte ranges the rule samples, in order (absolute offsets inside the
/// exported allocation).
pub fn sampled_ranges(
    size_bytes: u64,
    offset_bytes: u64,
    page_bytes: u64,
    pages: u64,
) -> Result<Vec<Range<u64>>, ContentError> {
    let shape = |m: String| Err(ContentError::Shape(m));
    if !page_bytes.is_power_of_two() || !(MIN_PAGE_BYTES..=MAX_PAGE_BYTES).contains(&page_bytes) {
        return shape(format!(
            "page_bytes is {page_bytes}, not a power of two from {MIN_PAGE_BYTES} to {MAX_PAGE_BYTES}"
        ));
    }
    if !(1..=MAX_PAGES).contains(&pages) {
        return shape(format!("pages is {pages}, not 1 to {MAX_PAGES}"));
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
                "size_bytes {size_bytes} fits in one page of {page_bytes}: pages must be 1, found {pages}"
            ));
        }
        return Ok(std::iter::once(offset_bytes..end).collect());
    }
    if pages < 2 {
        return shape(format!(
            "size_bytes {size_bytes} is larger than page_bytes {page_bytes}: pages must be at least 2, found {pages}"
        ));
    }
    let span = (size_bytes - page_bytes) as u128;
    Ok((0..pages)
        .map(|i| {
            // i * span < 64 * 2^64 fits u128; the quotient is at most span.
            let start = offset_bytes + (i as u128 * span / (pages - 1) as u128) as u64;
            start..start + page_bytes
        })
        .collect())
}

/// Computes the content digest, reading each sampled range with
/// `read(offset, length)` (absolute offsets, as [`sampled_ranges`] gives them).
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
        let bytes = read(r.start, len).map_err(ContentError::Read)?;
        if bytes.len() as u64 != len {
            return Err(ContentError::Read(format!(
                "read({}, {len}) returned {} bytes, expected {len}",
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

    #[test]
    fn ranges_follow_the_rule() {
        // S <= P: one range, N must be 1.
        let one = sampled_ranges(100, 8, 4096, 1).unwrap();
        assert_eq!((one.len(), one[0].clone()), (1, 8..108));
        assert!(sampled_ranges(100, 0, 4096, 2).is_err());
        // S > P: the first and the last page.
        let r = sampled_ranges(10_000, 0, 4096, 2).unwrap();
        assert_eq!(r, vec![0..4096, 5904..10_000]);
        let r = sampled_ranges(8192 + 1, 100, 512, 3).unwrap();
        // span 7681: 0, 3840, 7681.
        assert_eq!(r, vec![100..612, 3940..4452, 7781..8293]);
        assert!(sampled_ranges(10_000, 0, 4096, 1).is_err());
        for bad in [0, 511, 513, 3000, 2 << 20] {
            assert!(sampled_ranges(10_000, 0, bad, 2).is_err(), "{bad}");
        }
        assert!(sampled_ranges(10_000, 0, 512, 65).is_err());
        assert!(sampled_ranges(10_000, 0, 512, 0).is_err());
        assert!(sampled_ranges(0, 0, 512, 1).is_err());
        assert!(sampled_ranges(10, u64::MAX - 5, 512, 1).is_err());
        // Huge sizes do not overflow the arithmetic.
        let r = sampled_ranges(u64::MAX - 1, 0, 1 << 20, 64).unwrap();
        assert_eq!(r.last().unwrap().end, u64::MAX - 1);
    }

    #[test]
    fn digest_hashes_the_sampled_bytes_in_order() {
        let mem: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        let mut read = |o: u64, n: u64| Ok(mem[o as usize..(o + n) as usize].to_vec());
        let c = digest_content(10_000, 16, 4096, 3, &mut read).unwrap();
        let mut h = Sha256::new();
        for r in sampled_ranges(10_000, 16, 4096, 3).unwrap() {
            h.update(&mem[r.start as usize..r.end as usize]);
        }
        assert_eq!(c.sha256, <[u8; 32]>::from(h.finalize()));
        assert_eq!((c.page_bytes, c.pages), (4096, 3));
        let mut short = |_: u64, _: u64| Ok(vec![0u8; 3]);
        assert!(matches!(
            digest_content(10_000, 0, 4096, 2, &mut short),
            Err(ContentError::Read(_))
        ));
        let mut fails = |_: u64, _: u64| Err("boom".to_string());
        assert!(matches!(
            digest_content(10_000, 0, 4096, 2, &mut fails),
            Err(ContentError::Read(m)) if m == "boom"
        ));
    }
}
