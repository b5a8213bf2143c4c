//! Timestamps as the seed systems print them.

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
}
