//! Hex, both ways, in one place: the lowercase encoding every digest,
//! handle and content check is written in (docs/format.md §3), and the
//! strict decoder the descriptor checks use.

/// Not a hex digit (a flag of both tables below).
const NOT_HEX: u16 = 0x100;
/// An uppercase hex digit (a flag of both tables below).
const UPPER: u16 = 0x200;

/// Per byte: its hex digit value shifted by `shift` in the low eight bits,
/// [`UPPER`] for `A`..`F`, [`NOT_HEX`] for anything else.
const fn hex_table(shift: u32) -> [u16; 256] {
    let mut t = [NOT_HEX; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = (i as u16) << shift;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = (10 + i as u16) << shift;
        t[b'A' as usize + i] = UPPER | (10 + i as u16) << shift;
        i += 1;
    }
    t
}

/// The high digit of a byte pair: its value in bits 4-7.
static HEX_HIGH: [u16; 256] = hex_table(4);
/// The low digit of a byte pair: its value in bits 0-3.
static HEX_LOW: [u16; 256] = hex_table(0);

/// Decodes exactly `2 * out.len()` hex digits into `out`; false when the
/// length is wrong or a digit is invalid (or uppercase, unless `upper_ok`).
/// A pair is two table loads and an `or`: the byte in the low eight bits,
/// the flags of both digits above them.
pub fn decode(hex: &[u8], out: &mut [u8], upper_ok: bool) -> bool {
    let (pairs, odd) = hex.as_chunks::<2>();
    if pairs.len() != out.len() || !odd.is_empty() {
        return false;
    }
    let mut seen = 0u16;
    for (o, &[h, l]) in out.iter_mut().zip(pairs) {
        let v = HEX_HIGH[usize::from(h)] | HEX_LOW[usize::from(l)];
        seen |= v;
        *o = v as u8;
    }
    seen & NOT_HEX == 0 && (upper_ok || seen & UPPER == 0)
}

/// Lowercase hex of `bytes`.
///
/// Written as bytes, a pair per input byte (a `char` pushed at a time is
/// a UTF-8 length test and a capacity check per digit).
pub fn encode(bytes: &[u8]) -> String {
    encode_after("", bytes)
}

/// `prefix` then the lowercase hex of `bytes`, in one allocation (a
/// digest's `sha256:…`).
pub fn encode_after(prefix: &str, bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = vec![0u8; prefix.len() + bytes.len() * 2];
    let (head, digits) = out.split_at_mut(prefix.len());
    head.copy_from_slice(prefix.as_bytes());
    for (pair, &b) in digits.as_chunks_mut::<2>().0.iter_mut().zip(bytes) {
        *pair = [HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]];
    }
    // A str and ASCII digits: valid UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn encodes_lowercase_and_decodes_strictly() {
        assert_eq!(super::encode(&[0x00, 0xab, 0xff]), "00abff");
        assert_eq!(super::encode(&[]), "");
        let all: Vec<u8> = (0..=255).collect();
        let want: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(super::encode(&all), want);
        assert_eq!(
            super::encode_after("sha256:", &all),
            format!("sha256:{want}")
        );
        assert_eq!(super::encode_after("é", &[0x0f]), "é0f");
        let mut out = [0u8; 3];
        assert!(super::decode(b"00abff", &mut out, false));
        assert_eq!(out, [0x00, 0xab, 0xff]);
        assert!(!super::decode(b"00ABff", &mut out, false));
        assert!(super::decode(b"00ABff", &mut out, true));
        assert!(!super::decode(b"00abf", &mut out, true));
        assert!(!super::decode(b"00abfg", &mut out, true));
        assert!(!super::decode(b"00abff0", &mut out, true));
        assert!(!super::decode(b"", &mut out, true));
        assert!(super::decode(b"", &mut [], false));
    }

    /// Every byte pair against a decoder written from the definition.
    #[test]
    fn every_pair_decodes_as_its_definition() {
        let digit = |c: u8| match c {
            b'0'..=b'9' => Some((c - b'0', false)),
            b'a'..=b'f' => Some((c - b'a' + 10, false)),
            b'A'..=b'F' => Some((c - b'A' + 10, true)),
            _ => None,
        };
        for h in 0..=255u8 {
            for l in 0..=255u8 {
                let want = digit(h).zip(digit(l));
                for upper_ok in [false, true] {
                    let mut out = [0x5au8; 2];
                    let ok = super::decode(&[b'7', b'f', h, l], &mut out, upper_ok);
                    match want {
                        Some(((hv, hu), (lv, lu))) if upper_ok || !(hu || lu) => {
                            assert!(ok, "{h:#x} {l:#x} {upper_ok}");
                            assert_eq!(out, [0x7f, hv << 4 | lv]);
                        }
                        _ => assert!(!ok, "{h:#x} {l:#x} {upper_ok}"),
                    }
                }
            }
        }
    }
}
