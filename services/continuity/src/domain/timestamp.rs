//! Timestamps as the original parses, checks and prints them.
//!
//! `parse_iso` is CPython 3.12's `datetime.fromisoformat` after replacing every `Z` by `+00:00`,
//! with naive values taken as UTC; `require_utc` adds the capsule rule that the text ends in `Z`
//! or `+00:00`. Output is `YYYY-MM-DDTHH:MM:SS[.ffffff]Z` (`format_iso`) or `YYYYMMDDTHHMMSSZ`
//! (`format_compact`).

use time::{Date, Month, OffsetDateTime, PrimitiveDateTime, Time, UtcOffset};

use super::error::ContinuityError;

/// The floor the original writes for a legacy capsule without usable timestamps.
pub const LEGACY_TIMESTAMP_FLOOR: &str = "1970-01-01T00:00:00Z";

/// `datetime.fromisoformat(value.replace("Z", "+00:00"))`, naive → UTC; `None` when Python
/// raises (or for an empty value).
pub fn parse_iso(value: &str) -> Option<OffsetDateTime> {
    if value.is_empty() {
        return None;
    }
    let text = value.replace('Z', "+00:00");
    let chars: Vec<char> = text.chars().collect();
    fromisoformat(&chars)
}

/// The original's `_require_utc_timestamp`: parseable, then ending in `Z` or `+00:00`.
pub fn require_utc(value: &str, field: &str) -> Result<OffsetDateTime, ContinuityError> {
    let parsed = parse_iso(value)
        .ok_or_else(|| ContinuityError::invalid(format!("Invalid UTC timestamp for {field}")))?;
    if !(value.ends_with('Z') || value.ends_with("+00:00")) {
        return Err(ContinuityError::invalid(format!(
            "Timestamp must be UTC for {field}"
        )));
    }
    Ok(parsed)
}

/// `isoformat()` in UTC with `+00:00` written `Z`; microseconds only when non-zero.
pub use noema_core::time::python_iso_utc as format_iso;

/// `YYYYMMDDTHHMMSSZ` (microseconds dropped), for archive names.
pub use noema_core::time::basic_seconds as format_compact;

/// The request instant as the original takes it: UTC, microseconds dropped.
pub use noema_core::time::utc_whole_seconds as whole_seconds;

/// `(later - earlier).total_seconds()`.
pub fn total_seconds(later: OffsetDateTime, earlier: OffsetDateTime) -> f64 {
    let micros = (later - earlier).whole_microseconds();
    micros as f64 / 1e6
}

fn digits(chars: &[char], at: usize, count: usize) -> Option<u32> {
    let slice = chars.get(at..at + count)?;
    let mut value = 0u32;
    for c in slice {
        value = value * 10 + c.to_digit(10).filter(|_| c.is_ascii_digit())?;
    }
    Some(value)
}

/// Where the date ends, as CPython's `_find_isoformat_datetime_separator` decides it.
fn separator_position(chars: &[char]) -> Option<usize> {
    let len = chars.len();
    if len == 7 {
        return Some(7);
    }
    if chars[4] == '-' {
        if chars[5] == 'W' {
            if len < 8 {
                return None;
            }
            if len > 8 && chars[8] == '-' {
                if len == 9 {
                    return None;
                }
                if len > 10 && chars[10].is_ascii_digit() {
                    return Some(8);
                }
                return Some(10);
            }
            return Some(8);
        }
        return Some(10);
    }
    if chars[4] == 'W' {
        let mut idx = 7;
        while idx < len && chars[idx].is_ascii_digit() {
            idx += 1;
        }
        if idx < 9 {
            return Some(idx);
        }
        return Some(if idx % 2 == 0 { 7 } else { 8 });
    }
    Some(8)
}

fn parse_date(chars: &[char]) -> Option<Date> {
    if !matches!(chars.len(), 7 | 8 | 10) {
        return None;
    }
    let year = digits(chars, 0, 4)?;
    let has_sep = chars[4] == '-';
    let mut pos = 4 + usize::from(has_sep);
    if chars.get(pos) == Some(&'W') {
        pos += 1;
        let week = digits(chars, pos, 2)?;
        pos += 2;
        let mut day = 1;
        if chars.len() > pos {
            if (chars[pos] == '-') != has_sep {
                return None;
            }
            pos += usize::from(has_sep);
            day = digits(chars, pos, 1)?;
            pos += 1;
        }
        if pos != chars.len() || !(1..=7).contains(&day) {
            return None;
        }
        let year = i32::try_from(year).ok().filter(|y| *y >= 1)?;
        let weekday = time::Weekday::Monday.nth_next((day - 1) as u8);
        return Date::from_iso_week_date(year, u8::try_from(week).ok()?, weekday).ok();
    }
    let month = digits(chars, pos, 2)?;
    pos += 2;
    if (chars.get(pos) == Some(&'-')) != has_sep {
        return None;
    }
    pos += usize::from(has_sep);
    let day = digits(chars, pos, 2)?;
    pos += 2;
    if pos != chars.len() || year < 1 {
        return None;
    }
    let month = Month::try_from(u8::try_from(month).ok()?).ok()?;
    Date::from_calendar_date(year as i32, month, u8::try_from(day).ok()?).ok()
}

/// CPython's `parse_hh_mm_ss_ff` over `chars[..end]` (`end` is where a time zone starts):
/// `Err` when malformed, else the clock values, microseconds and whether anything but the end
/// of the text follows (the C code's `return *p != '\0'`).
fn parse_clock(chars: &[char], end: usize) -> Result<([u32; 3], u32, bool), ()> {
    let at = |i: usize| chars.get(i).copied();
    let mut vals = [0u32; 3];
    let mut p = 0usize;
    let mut has_separator = true;
    for i in 0..3 {
        vals[i] = digits(&chars[..end], p, 2).ok_or(())?;
        p += 2;
        let c = at(p);
        p += 1;
        if i == 0 {
            has_separator = c == Some(':');
        }
        if p >= end {
            return Ok((vals, 0, c.is_some()));
        } else if has_separator && c == Some(':') {
            continue;
        } else if c == Some('.') || c == Some(',') {
            break;
        } else if !has_separator {
            p -= 1;
        } else {
            return Err(());
        }
    }
    let remains = end.saturating_sub(p);
    let take = remains.min(6);
    if take == 0 {
        return Err(());
    }
    let mut micros = digits(&chars[..end], p, take).ok_or(())?;
    for _ in take..6 {
        micros *= 10;
    }
    p += take;
    while at(p).is_some_and(|c| c.is_ascii_digit()) {
        p += 1;
    }
    Ok((vals, micros, at(p).is_some()))
}

fn fromisoformat(chars: &[char]) -> Option<OffsetDateTime> {
    if chars.len() < 7 {
        return None;
    }
    let sep = separator_position(chars)?;
    let date = parse_date(chars.get(..sep)?)?;
    let time_part = chars.get(sep + 1..).unwrap_or(&[]);
    if sep < chars.len() && time_part.is_empty() {
        return None;
    }
    let mut offset = Some(UtcOffset::UTC);
    let mut clock = Time::MIDNIGHT;
    if !time_part.is_empty() {
        let tz = time_part
            .iter()
            .position(|c| matches!(c, '+' | '-'))
            .unwrap_or(time_part.len());
        let (hms, micros, trailing) = parse_clock(time_part, tz).ok()?;
        if tz == time_part.len() {
            if trailing {
                return None;
            }
            offset = None;
        } else {
            let sign: i32 = if time_part[tz] == '-' { -1 } else { 1 };
            let tz_chars = &time_part[tz + 1..];
            let (tz_hms, tz_micros, tz_trailing) = parse_clock(tz_chars, tz_chars.len()).ok()?;
            if tz_trailing {
                return None;
            }
            // Python bounds only the whole offset (strictly inside ±24 h), not its parts.
            let seconds = sign * (tz_hms[0] * 3600 + tz_hms[1] * 60 + tz_hms[2]) as i32;
            if seconds.abs() >= 86_400 || tz_micros != 0 {
                // Sub-second offsets exist in Python but not in `time`; nothing writes them.
                return None;
            }
            offset = Some(UtcOffset::from_whole_seconds(seconds).ok()?);
        }
        clock = Time::from_hms_micro(
            u8::try_from(hms[0]).ok()?,
            u8::try_from(hms[1]).ok()?,
            u8::try_from(hms[2]).ok()?,
            micros,
        )
        .ok()?;
    }
    let local = PrimitiveDateTime::new(date, clock);
    Some(match offset {
        Some(offset) => local.assume_offset(offset),
        None => local.assume_utc(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// Each value with what CPython 3.12 answers for
    /// `format_iso(parse_iso(value))` (the original's helpers), `None` where it raises.
    #[test]
    fn parse_iso_follows_python_fromisoformat() {
        let cases: &[(&str, Option<&str>)] = &[
            ("2025-01-01T00:00:00Z", Some("2025-01-01T00:00:00Z")),
            ("2025-01-01T00:00:00+00:00", Some("2025-01-01T00:00:00Z")),
            ("2025-01-01T02:30:00+02:30", Some("2025-01-01T00:00:00Z")),
            ("2025-01-01T00:00:00-01:00", Some("2025-01-01T01:00:00Z")),
            ("2025-01-01", Some("2025-01-01T00:00:00Z")),
            ("20250101", Some("2025-01-01T00:00:00Z")),
            ("2025-01-01 12:34", Some("2025-01-01T12:34:00Z")),
            ("2025-01-01T12", Some("2025-01-01T12:00:00Z")),
            ("2025-01-01T1234", Some("2025-01-01T12:34:00Z")),
            (
                "2025-01-01T12:34:56.5Z",
                Some("2025-01-01T12:34:56.500000Z"),
            ),
            (
                "2025-01-01T12:34:56,123456789Z",
                Some("2025-01-01T12:34:56.123456Z"),
            ),
            ("20250101T123456Z", Some("2025-01-01T12:34:56Z")),
            ("2025-W01-1", Some("2024-12-30T00:00:00Z")),
            ("2025W013", Some("2025-01-01T00:00:00Z")),
            ("2025-01-01T00:00:00+0100", Some("2024-12-31T23:00:00Z")),
            ("2025-01-01T00:00:00+01", Some("2024-12-31T23:00:00Z")),
            ("2025-01-01XYZ", None),
            ("2025-13-01", None),
            ("2025-02-29", None),
            ("2024-02-29T00:00:00Z", Some("2024-02-29T00:00:00Z")),
            ("2025-01-01T24:00:00", None),
            ("2025-01-01T12:34:", None),
            ("2025-01-01T12:34:56.", None),
            ("2025-01-01T", None),
            ("2025-1-01", None),
            ("yesterday", None),
            ("", None),
            ("0000-01-01", None),
            ("2025-01-01T00:00:00ZZ", None),
            ("2025-01-01T00:00:00+24:00", None),
            ("2025-01-01T1234567", None),
            ("2025-01-01T12:+00:00", Some("2025-01-01T12:00:00Z")),
            ("2025-01-01T00:00:00+00:60", Some("2024-12-31T23:00:00Z")),
            ("2025-01-01T12:34.5", Some("2025-01-01T12:34:00.500000Z")),
            (
                "2025-01-01T12:34:56:78",
                Some("2025-01-01T12:34:56.780000Z"),
            ),
            ("2025-W01", Some("2024-12-30T00:00:00Z")),
            ("2025W01", Some("2024-12-30T00:00:00Z")),
            (
                "2025-01-01T12:34:56.123+05:00",
                Some("2025-01-01T07:34:56.123000Z"),
            ),
            ("2025-01-01T00:00:00+01:00:30", Some("2024-12-31T22:59:30Z")),
            ("2025-01-01T00:00:60", None),
            ("2025-01-01T00:00:00Zx", None),
            ("2025-01-01x12:00", Some("2025-01-01T12:00:00Z")),
            (
                "2025-01-01T12:34:56.1234567",
                Some("2025-01-01T12:34:56.123456Z"),
            ),
        ];
        for (value, want) in cases {
            assert_eq!(
                parse_iso(value).map(format_iso).as_deref(),
                *want,
                "parse_iso({value:?})"
            );
        }
    }

    #[test]
    fn utc_is_required_literally() {
        assert!(require_utc("2025-01-01T00:00:00Z", "updated_at").is_ok());
        assert!(require_utc("2025-01-01T00:00:00+00:00", "updated_at").is_ok());
        let err = require_utc("2025-01-01T00:00:00", "updated_at").unwrap_err();
        assert_eq!(err.to_string(), "Timestamp must be UTC for updated_at");
        let err = require_utc("2025-01-01T01:00:00+01:00", "verified_at").unwrap_err();
        assert_eq!(err.to_string(), "Timestamp must be UTC for verified_at");
        let err = require_utc("soon", "verified_at").unwrap_err();
        assert_eq!(err.to_string(), "Invalid UTC timestamp for verified_at");
    }

    #[test]
    fn compact_form_drops_microseconds() {
        let at = parse_iso("2025-03-04T05:06:07.891Z").unwrap();
        assert_eq!(format_compact(at), "20250304T050607Z");
    }
}
