//! Timestamps as the seed systems print and accept them.

use time::OffsetDateTime;
use time::macros::format_description;

/// RFC 3339 in UTC at second precision with `Z`, as open-cognition renders every time.
pub fn rfc3339_seconds(at: &prost_types::Timestamp) -> String {
    let format = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    OffsetDateTime::from_unix_timestamp(at.seconds)
        .ok()
        .and_then(|t| t.format(format).ok())
        .unwrap_or_default()
}

/// ISO 8601 in UTC with milliseconds and `Z`, as JavaScript's `Date.toISOString()`
/// (MoltNet's timestamps).
pub fn iso_millis(at: &prost_types::Timestamp) -> String {
    let format =
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
    let nanos = i128::from(at.seconds) * 1_000_000_000 + i128::from(at.nanos);
    OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| t.format(format).ok())
        .unwrap_or_default()
}

/// Parses an RFC 3339 timestamp into a protobuf `Timestamp`.
pub fn parse_rfc3339(text: &str) -> Option<prost_types::Timestamp> {
    let at = OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
    Some(prost_types::Timestamp {
        seconds: at.unix_timestamp(),
        nanos: i32::try_from(at.nanosecond()).ok()?,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_utc_seconds() {
        let at = prost_types::Timestamp {
            seconds: 1_776_190_843,
            nanos: 999_000_000,
        };
        assert_eq!(super::rfc3339_seconds(&at), "2026-04-14T18:20:43Z");
    }

    #[test]
    fn formats_like_to_iso_string() {
        let at = prost_types::Timestamp {
            seconds: 1_776_190_843,
            nanos: 5_900_000,
        };
        assert_eq!(super::iso_millis(&at), "2026-04-14T18:20:43.005Z");
    }

    #[test]
    fn parses_offsets_to_utc() {
        let at = super::parse_rfc3339("2026-04-14T20:20:43+02:00");
        assert_eq!(at.map(|t| t.seconds), Some(1_776_190_843));
        assert!(super::parse_rfc3339("yesterday").is_none());
    }
}
