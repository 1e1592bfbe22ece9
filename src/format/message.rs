//! The one function that turns a finding's [`Message`] into text: the core
//! carries numbers (an age in milliseconds, a moment), the printers format
//! them here, with the operator's units of `crate::format::text` and `crate::format::timefmt`.

use crate::format::finding::{Message, Part};

/// The message as every printer writes it (before terminal escaping).
pub fn render(m: &Message) -> String {
    if let Some(t) = m.as_text() {
        return t.to_string();
    }
    let mut out = String::new();
    for p in m.parts() {
        match p {
            Part::Text(t) => out.push_str(t),
            Part::DurationMs(ms) => out.push_str(&crate::format::text::human_duration_ms(*ms)),
            Part::UnixMs(ms) => out.push_str(&crate::format::timefmt::utc(*ms)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::render;
    use crate::format::finding::Message;

    #[test]
    fn quantities_are_written_in_the_operators_units() {
        let m = Message::new()
            .text("sealed ")
            .duration_ms(3 * 86_400_000 + 4 * 3_600_000)
            .text(" ago, older than ")
            .duration_ms(3_600_000)
            .text("; created ")
            .unix_ms(0);
        assert_eq!(
            render(&m),
            "sealed 3d 4h ago, older than 1h 0m; created 1970-01-01 00:00:00 UTC"
        );
        assert_eq!(render(&Message::from("plain")), "plain");
        assert_eq!(render(&Message::new()), "");
        assert_eq!(render(&Message::new().duration_ms(850)), "850ms");
    }
}
