//! Unix milliseconds as UTC calendar time, without a clock or a time crate.

/// `2025-11-30 07:10:25 UTC`; a time past year 9999 prints as milliseconds.
pub fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let days = secs / 86_400;
    if days > 2_932_896 {
        return format!("unix ms {ms}");
    }
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// RFC 3339 in UTC with milliseconds (`2025-11-30T07:10:25.123Z`), for
/// machine-read logs; a time past year 9999 prints as milliseconds.
pub fn rfc3339(ms: u64) -> String {
    let secs = ms / 1000;
    let days = secs / 86_400;
    if days > 2_932_896 {
        return format!("unix ms {ms}");
    }
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        ms % 1000
    )
}

/// Howard Hinnant's days-from-civil inverse (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_examples() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_764_486_625_000), "2025-11-30 07:10:25 UTC");
        assert_eq!(rfc3339(1_764_486_625_123), "2025-11-30T07:10:25.123Z");
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
    }
}

/// The largest `--min-epoch` and `--max-age` (in seconds): the profile's
/// bound for `min_epoch` and `max_age_s` (docs/format.md §5.4: one rule for
/// both, 0 included).
pub const I63_MAX: u64 = i64::MAX as u64;

/// `--max-age`: plain seconds or a number with the unit s, m, h or d, in seconds.
pub fn parse_age(s: &str) -> Result<u64, String> {
    let bad = || {
        format!("{s:?} is not an age: use seconds (300) or a number with s, m, h or d (5m, 2h, 1d)")
    };
    let (digits, mult) = match s.as_bytes().last() {
        Some(b's') => (&s[..s.len() - 1], 1),
        Some(b'm') => (&s[..s.len() - 1], 60),
        Some(b'h') => (&s[..s.len() - 1], 3600),
        Some(b'd') => (&s[..s.len() - 1], 86400),
        _ => (s, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .filter(|&n| n <= I63_MAX)
        .ok_or_else(bad)
}

#[cfg(test)]
mod tests_age {
    use super::parse_age;

    #[test]
    fn ages_take_units() {
        assert_eq!(parse_age("90"), Ok(90));
        assert_eq!(parse_age("15m"), Ok(900));
        assert_eq!(parse_age("2h"), Ok(7200));
        assert_eq!(parse_age("1d"), Ok(86400));
        assert!(parse_age("1.5h").is_err());
        assert!(parse_age("-1").is_err());
    }
}
