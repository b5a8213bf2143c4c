//! Object timestamps: ISO-8601 as RFC 3339 (what the schemas' `date-time` format
//! accepts), written by the server in UTC with microseconds at most, the precision
//! both database backends keep.

use time::{OffsetDateTime, UtcOffset};

/// Parses an RFC 3339 date-time.
pub use noema_core::time::parse_rfc3339 as parse;

/// `at` in UTC, truncated to microseconds.
pub fn normalize(at: OffsetDateTime) -> OffsetDateTime {
    let utc = at.to_offset(UtcOffset::UTC);
    utc.replace_microsecond(utc.microsecond()).unwrap_or(utc)
}

/// RFC 3339 text of `at` in UTC (`2026-02-14T10:00:00.5Z`).
pub fn format(at: OffsetDateTime) -> String {
    noema_core::time::rfc3339(normalize(at))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    #[test]
    fn parses_offsets_and_writes_utc() {
        let at = parse("2026-02-14T12:00:00.123456789+02:00").unwrap();
        assert_eq!(format(at), "2026-02-14T10:00:00.123456Z");
        assert_eq!(
            format(parse("2026-02-14T10:00:00Z").unwrap()),
            "2026-02-14T10:00:00Z"
        );
        assert!(parse("2026-02-14").is_none());
        assert!(parse("yesterday").is_none());
    }
}
