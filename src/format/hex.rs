//! Hex, both ways, in one place: the lowercase encoding every digest,
//! handle and content check is written in (docs/format.md §3), and the
//! strict decoder the descriptor checks use.

/// Hex digit values; uppercase letters carry 0x20, anything else is 0xFF.
static HEX_VALUE: [u8; 256] = {
    let mut t = [0xFFu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 0x20 | (10 + i as u8);
        i += 1;
    }
    t
};

/// Decodes exactly `2 * out.len()` hex digits into `out`; false when the
/// length is wrong or a digit is invalid (or uppercase, unless `upper_ok`).
pub fn decode(hex: &[u8], out: &mut [u8], upper_ok: bool) -> bool {
    if hex.len() != 2 * out.len() {
        return false;
    }
    let mut seen = 0u8;
    for (o, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        let (h, l) = (HEX_VALUE[pair[0] as usize], HEX_VALUE[pair[1] as usize]);
        seen |= h | l;
        *o = ((h & 0x0F) << 4) | (l & 0x0F);
    }
    seen & 0x80 == 0 && (upper_ok || seen & 0x20 == 0)
}

/// Lowercase hex of `bytes`.
pub fn encode(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn encodes_lowercase_and_decodes_strictly() {
        assert_eq!(super::encode(&[0x00, 0xab, 0xff]), "00abff");
        let mut out = [0u8; 3];
        assert!(super::decode(b"00abff", &mut out, false));
        assert_eq!(out, [0x00, 0xab, 0xff]);
        assert!(!super::decode(b"00ABff", &mut out, false));
        assert!(super::decode(b"00ABff", &mut out, true));
        assert!(!super::decode(b"00abf", &mut out, true));
        assert!(!super::decode(b"00abfg", &mut out, true));
    }
}
