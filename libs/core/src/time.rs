//! Timestamps as they cross the wire, written once: the text forms the seed systems print
//! and accept, and the protobuf `Timestamp` conversions every adapter needs.
//!
//! Formatting never fails for the times Noema handles (years 0000-9999); a time outside
//! that range formats as an empty string rather than panicking.

use ::time::format_description::well_known::Rfc3339;
use ::time::macros::format_description;
use ::time::{OffsetDateTime, UtcOffset};

/// The same instant in UTC, with the fraction of a second dropped: how open-cognition
/// stores, lists and compares times.
pub fn utc_whole_seconds(at: OffsetDateTime) -> OffsetDateTime {
    let utc = at.to_offset(UtcOffset::UTC);
    utc.replace_nanosecond(0).unwrap_or(utc)
}

/// `YYYY-MM-DDTHH:MM:SSZ`: RFC 3339 in UTC at second precision, as open-cognition and
/// CogniRelay render every time (and open-cognition's clients send them).
pub fn rfc3339_seconds(at: OffsetDateTime) -> String {
    utc_whole_seconds(at)
        .format(format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second]Z"
        ))
        .unwrap_or_default()
}

/// RFC 3339 at the instant's own precision and offset (`2026-02-14T10:00:00.5Z`,
/// `2026-02-14T12:00:00+02:00`): the orchestrator's and the world's object times, and
/// anything Noema itself prints for a person or a log.
pub fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&Rfc3339).unwrap_or_default()
}

/// `YYYY-MM-DDTHH:MM:SS[.ffffff]Z`: Python's `isoformat()` in UTC with `+00:00` written
/// `Z`, the microseconds only when there are any (CogniRelay's timestamps).
pub fn python_iso_utc(at: OffsetDateTime) -> String {
    let utc = at.to_offset(UtcOffset::UTC);
    let format = if utc.microsecond() == 0 {
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z")
    } else {
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z")
    };
    utc.format(format).unwrap_or_default()
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`: UTC with milliseconds, as JavaScript's
/// `Date.prototype.toISOString()` prints it (MoltNet's timestamps).
pub fn iso_millis(at: OffsetDateTime) -> String {
    at.to_offset(UtcOffset::UTC)
        .format(format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
        ))
        .unwrap_or_default()
}

/// `YYYYMMDDTHHMMSSZ`: ISO 8601's basic format in UTC at second precision, as CogniRelay
/// puts it into token ids.
pub fn basic_seconds(at: OffsetDateTime) -> String {
    at.to_offset(UtcOffset::UTC)
        .format(format_description!(
            "[year][month][day]T[hour][minute][second]Z"
        ))
        .unwrap_or_default()
}

/// `YYYY/MM/DD` of the UTC date, as open-cognition's storage paths use it.
pub fn utc_date_path(at: OffsetDateTime) -> String {
    at.to_offset(UtcOffset::UTC)
        .format(format_description!("[year]/[month]/[day]"))
        .unwrap_or_default()
}

/// Any RFC 3339 timestamp (either case of `T` and `Z`, optional fraction, any offset).
pub fn parse_rfc3339(text: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(text, &Rfc3339).ok()
}

/// RFC 3339 as Go's `time.Parse(time.RFC3339, …)` accepts it, which open-cognition
/// uses: stricter than the RFC about the separators, which must be an uppercase `T` and
/// `Z` (or a `±hh:mm` offset).
pub fn parse_go_rfc3339(text: &str) -> Option<OffsetDateTime> {
    let bytes = text.as_bytes();
    if bytes.len() < 20 || bytes.get(10) != Some(&b'T') || text.ends_with('z') {
        return None;
    }
    parse_rfc3339(text)
}

/// `google.protobuf.Timestamp` ⇄ `OffsetDateTime`, and the text forms above for the
/// adapters that hold protobuf timestamps (the gateway).
pub mod proto {
    use std::time::SystemTime;

    use ::time::OffsetDateTime;
    use prost_types::Timestamp;

    /// The protobuf form of `at`.
    pub fn timestamp(at: OffsetDateTime) -> Timestamp {
        Timestamp::from(SystemTime::from(at))
    }

    /// The instant a protobuf timestamp names; `None` when it is outside the range of
    /// `OffsetDateTime` (or its nanoseconds are not a fraction of a second).
    pub fn to_time(at: &Timestamp) -> Option<OffsetDateTime> {
        let nanos = i128::from(at.seconds) * 1_000_000_000 + i128::from(at.nanos);
        OffsetDateTime::from_unix_timestamp_nanos(nanos).ok()
    }

    /// [`super::rfc3339_seconds`] of a protobuf timestamp (empty when out of range).
    pub fn rfc3339_seconds(at: &Timestamp) -> String {
        to_time(at).map(super::rfc3339_seconds).unwrap_or_default()
    }

    /// [`super::iso_millis`] of a protobuf timestamp (empty when out of range).
    pub fn iso_millis(at: &Timestamp) -> String {
        to_time(at).map(super::iso_millis).unwrap_or_default()
    }

    /// [`super::parse_rfc3339`] into a protobuf timestamp.
    pub fn parse_rfc3339(text: &str) -> Option<Timestamp> {
        super::parse_rfc3339(text).map(timestamp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> OffsetDateTime {
        parse_rfc3339(text).unwrap_or(OffsetDateTime::UNIX_EPOCH)
    }

    #[test]
    fn formats_each_wire_form() {
        let t = at("2026-04-14T20:20:43.0059+02:00");
        assert_eq!(rfc3339_seconds(t), "2026-04-14T18:20:43Z");
        assert_eq!(iso_millis(t), "2026-04-14T18:20:43.005Z");
        assert_eq!(basic_seconds(t), "20260414T182043Z");
        assert_eq!(utc_date_path(t), "2026/04/14");
        assert_eq!(
            basic_seconds(OffsetDateTime::UNIX_EPOCH),
            "19700101T000000Z"
        );
    }

    #[test]
    fn rfc3339_keeps_the_precision_and_the_offset() {
        assert_eq!(
            rfc3339(at("2026-04-14T20:20:43.0059+02:00")),
            "2026-04-14T20:20:43.0059+02:00"
        );
        assert_eq!(rfc3339(at("2026-04-14T18:20:43Z")), "2026-04-14T18:20:43Z");
    }

    #[test]
    fn python_iso_is_utc_with_microseconds_only_when_there_are_any() {
        assert_eq!(
            python_iso_utc(at("2026-04-14T20:20:43+02:00")),
            "2026-04-14T18:20:43Z"
        );
        assert_eq!(
            python_iso_utc(at("2026-04-14T18:20:43.5Z")),
            "2026-04-14T18:20:43.500000Z"
        );
        // Truncated to the microsecond, as Python's datetime holds it.
        assert_eq!(
            python_iso_utc(at("2026-04-14T18:20:43.000001999Z")),
            "2026-04-14T18:20:43.000001Z"
        );
        // Below a microsecond there is nothing Python would print.
        assert_eq!(
            python_iso_utc(at("2026-04-14T18:20:43.000000999Z")),
            "2026-04-14T18:20:43Z"
        );
    }

    #[test]
    fn whole_seconds_are_utc_and_truncated_not_rounded() {
        let t = utc_whole_seconds(at("2026-04-14T20:20:43.999+02:00"));
        assert_eq!(t, at("2026-04-14T18:20:43Z"));
        assert_eq!(t.offset(), UtcOffset::UTC);
        assert_eq!(
            rfc3339_seconds(at("2026-04-14T18:20:43.999Z")),
            "2026-04-14T18:20:43Z"
        );
    }

    #[test]
    fn offsets_can_shift_the_utc_date() {
        let t = at("2026-04-14T23:30:00-02:00");
        assert_eq!(utc_date_path(t), "2026/04/15");
        assert_eq!(rfc3339_seconds(t), "2026-04-15T01:30:00Z");
    }

    #[test]
    fn go_parsing_accepts_what_go_accepts() {
        for ok in [
            "2026-04-14T18:20:43Z",
            "2026-04-14T18:20:43.123456Z",
            "2026-04-14T20:20:43+02:00",
            "2026-04-14T18:20:43-00:30",
        ] {
            assert!(parse_go_rfc3339(ok).is_some(), "{ok}");
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
            assert!(parse_go_rfc3339(bad).is_none(), "{bad}");
        }
        // The RFC itself allows the lowercase separators.
        assert!(parse_rfc3339("2026-04-14t18:20:43z").is_some());
        assert!(parse_rfc3339("yesterday").is_none());
    }

    #[test]
    fn protobuf_timestamps_round_trip() {
        let ts = prost_types::Timestamp {
            seconds: 1_776_190_843,
            nanos: 5_900_000,
        };
        let t = proto::to_time(&ts);
        assert_eq!(t.map(proto::timestamp), Some(ts));
        assert_eq!(proto::rfc3339_seconds(&ts), "2026-04-14T18:20:43Z");
        assert_eq!(proto::iso_millis(&ts), "2026-04-14T18:20:43.005Z");
        let parsed = proto::parse_rfc3339("2026-04-14T20:20:43+02:00");
        assert_eq!(parsed.map(|t| t.seconds), Some(1_776_190_843));
        assert!(proto::parse_rfc3339("yesterday").is_none());
        let out_of_range = prost_types::Timestamp {
            seconds: i64::MAX,
            nanos: 0,
        };
        assert_eq!(proto::to_time(&out_of_range), None);
        assert_eq!(proto::rfc3339_seconds(&out_of_range), "");
    }
}

/// Generated input: any text is read or refused without a panic, Go's stricter reading
/// accepts nothing the RFC reading refuses, and every form written reads back.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Instants of years 0001-9999 with nanoseconds, at any whole-minute offset.
    fn instant() -> impl Strategy<Value = OffsetDateTime> {
        (
            -62_135_596_800i64..253_402_300_799,
            0u32..1_000_000_000,
            -1439i32..1440,
        )
            .prop_map(|(seconds, nanos, minutes)| {
                let utc = OffsetDateTime::from_unix_timestamp(seconds)
                    .unwrap()
                    .replace_nanosecond(nanos)
                    .unwrap();
                let offset = UtcOffset::from_whole_seconds(minutes * 60).unwrap();
                utc.to_offset(offset)
            })
    }

    fn check(text: &str) -> Result<(), TestCaseError> {
        let rfc = parse_rfc3339(text);
        if parse_go_rfc3339(text).is_some() {
            prop_assert_eq!(parse_go_rfc3339(text), rfc);
        }
        prop_assert_eq!(proto::parse_rfc3339(text).is_some(), rfc.is_some());
        Ok(())
    }

    proptest! {
        #![proptest_config(crate::proptest_config())]

        #[test]
        fn any_text_is_read_or_refused(text in any::<String>()) {
            check(&text)?;
        }

        #[test]
        fn timestamp_looking_text_is_read_or_refused(
            text in "[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,12})?([Zz]|[+-][0-9]{2}:[0-9]{2})?",
        ) {
            check(&text)?;
        }

        #[test]
        fn written_forms_read_back(at in instant()) {
            let whole = utc_whole_seconds(at);
            prop_assert_eq!(parse_go_rfc3339(&rfc3339_seconds(at)), Some(whole));
            let millis = parse_rfc3339(&iso_millis(at)).unwrap();
            prop_assert_eq!(millis.unix_timestamp(), at.unix_timestamp());
            prop_assert_eq!(millis.millisecond(), at.millisecond());
            prop_assert_eq!(proto::to_time(&proto::timestamp(at)), Some(at.to_offset(UtcOffset::UTC)));
        }

        #[test]
        fn any_protobuf_timestamp_converts_without_a_panic(seconds in any::<i64>(), nanos in any::<i32>()) {
            let at = prost_types::Timestamp { seconds, nanos };
            let _ = proto::rfc3339_seconds(&at);
            let _ = proto::iso_millis(&at);
            if let Some(time) = proto::to_time(&at) {
                prop_assert_eq!(proto::to_time(&proto::timestamp(time)), Some(time));
            }
        }
    }
}
