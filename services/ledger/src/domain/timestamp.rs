//! open-cognition's timestamp rules: RFC 3339 as Go's `time.RFC3339` parses it
//! (uppercase `T` and `Z`, optional fraction, `Z` or `±hh:mm`), stored in UTC at second
//! precision.

use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{OffsetDateTime, UtcOffset};

/// Parses `text` the way Go's `time.Parse(time.RFC3339, …)` accepts it.
pub fn parse_rfc3339(text: &str) -> Option<OffsetDateTime> {
    let bytes = text.as_bytes();
    // Go's layout is strict about the separators' case; the RFC allows lowercase.
    if bytes.len() < 20 || bytes.get(10) != Some(&b'T') || text.ends_with('z') {
        return None;
    }
    OffsetDateTime::parse(text, &Rfc3339).ok()
}

/// The time as the ledger stores and lists it: UTC, whole seconds.
pub fn normalize(at: OffsetDateTime) -> OffsetDateTime {
    let utc = at.to_offset(UtcOffset::UTC);
    utc.replace_nanosecond(0).unwrap_or(utc)
}

/// `YYYY-MM-DDTHH:MM:SSZ`.
pub fn format_utc_seconds(at: OffsetDateTime) -> String {
    normalize(at)
        .format(format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second]Z"
        ))
        .unwrap_or_default()
}

/// `YYYY/MM/DD` of the UTC date, as storage paths use it.
pub fn utc_date_path(at: OffsetDateTime) -> String {
    at.to_offset(UtcOffset::UTC)
        .format(format_description!("[year]/[month]/[day]"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_what_go_accepts() {
        for ok in [
            "2026-04-14T18:20:43Z",
            "2026-04-14T18:20:43.123456Z",
            "2026-04-14T20:20:43+02:00",
            "2026-04-14T18:20:43-00:30",
        ] {
            assert!(parse_rfc3339(ok).is_some(), "{ok}");
        }
        for bad in [
            "2026-04-14t18:20:43Z",
            "2026-04-14T18:20:43z",
            "2026-04-14 18:20:43Z",
            "2026-04-14T18:20:43",
            "2026-04-14",
            "",
            "yesterday",
        ] {
            assert!(parse_rfc3339(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn offsets_can_shift_the_utc_date() {
        let at = parse_rfc3339("2026-04-14T23:30:00-02:00").unwrap_or(OffsetDateTime::UNIX_EPOCH);
        assert_eq!(utc_date_path(at), "2026/04/15");
        assert_eq!(format_utc_seconds(at), "2026-04-15T01:30:00Z");
    }
}
