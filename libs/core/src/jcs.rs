//! RFC 8785 JSON Canonicalization Scheme (JCS).
//!
//! Content ids of JSON documents are hashes of their canonical bytes, so two services (or a
//! service and a TypeScript/Go client) must produce byte-identical output for the same
//! value. The heavy lifting is delegated to `serde_jcs`, which sorts object keys by UTF-16
//! code units and formats numbers with `ryu-js` (ECMAScript `Number.prototype.toString`).
//! `serde_jcs` turns on serde_json's `float_roundtrip` feature, so decimal input is parsed
//! to the nearest double exactly as `JSON.parse` does; serde_json's `arbitrary_precision`
//! is not needed and is not enabled by this crate.
//!
//! What this module adds on top: parsing text rejects duplicate object keys (RFC 8785
//! requires I-JSON input; serde_json would silently keep the last value, which would make
//! two different documents share one content id), and a string-literal writer used where a
//! canonical object is assembled by hand (see `cid.rs`).

use std::collections::HashSet;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};

/// Why a value or a text could not be canonicalized.
#[derive(Debug, thiserror::Error)]
pub enum JcsError {
    /// The text is not a single valid JSON value (syntax error, trailing characters, a
    /// number outside the IEEE-754 double range, an unpaired surrogate escape, or a
    /// duplicate object key).
    #[error("invalid JSON: {0}")]
    InvalidJson(#[source] serde_json::Error),
    /// The value contains something JCS cannot represent (only possible for numbers that
    /// are not finite doubles).
    #[error("value cannot be canonicalized: {0}")]
    Unrepresentable(#[source] serde_json::Error),
}

/// Canonical UTF-8 bytes of `value` per RFC 8785.
pub fn canonicalize(value: &serde_json::Value) -> Result<Vec<u8>, JcsError> {
    canonical_string(value).map(String::into_bytes)
}

/// [`canonicalize`], as text.
pub fn canonical_string(value: &serde_json::Value) -> Result<String, JcsError> {
    serde_jcs::to_string(value).map_err(JcsError::Unrepresentable)
}

/// Parses `json_text` (rejecting duplicate object keys) and returns its canonical bytes.
pub fn canonicalize_str(json_text: &str) -> Result<Vec<u8>, JcsError> {
    // First pass only checks for duplicate keys; the second builds the value. Keeping the
    // check separate means it never has to know how serde_json represents numbers.
    let mut check = serde_json::Deserializer::from_str(json_text);
    NoDuplicateKeys::deserialize(&mut check).map_err(JcsError::InvalidJson)?;
    check.end().map_err(JcsError::InvalidJson)?;

    let value: serde_json::Value =
        serde_json::from_str(json_text).map_err(JcsError::InvalidJson)?;
    canonicalize(&value)
}

/// Appends `s` as a JSON string literal exactly as RFC 8785 §3.2.2.2 (and ECMAScript
/// `JSON.stringify`) writes it: `"` and `\` escaped, the five short control escapes
/// (`\b \f \n \r \t`), every other code point below U+0020 as `\u00xx` with lowercase
/// hex, and everything else (including `/`, U+007F, U+2028, non-ASCII) literal UTF-8.
/// A Rust `&str` cannot hold an unpaired surrogate, so that case never arises.
pub fn write_string(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let b = u32::from(c) as usize;
                out.push_str("\\u00");
                out.push(char::from(HEX[b >> 4]));
                out.push(char::from(HEX[b & 0xf]));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Deserializes any JSON value, failing on the first object with a repeated key.
struct NoDuplicateKeys;

impl<'de> Deserialize<'de> for NoDuplicateKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NoDuplicateKeysVisitor)
    }
}

struct NoDuplicateKeysVisitor;

impl<'de> Visitor<'de> for NoDuplicateKeysVisitor {
    type Value = NoDuplicateKeys;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<NoDuplicateKeys>()?.is_some() {}
        Ok(NoDuplicateKeys)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(format_args!(
                    "duplicate object key {key:?} (RFC 8785 requires unique keys)"
                )));
            }
            map.next_value::<NoDuplicateKeys>()?;
        }
        Ok(NoDuplicateKeys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Number, Value, json};

    fn canon(text: &str) -> String {
        let bytes = canonicalize_str(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        String::from_utf8(bytes).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn canon_f64(bits: u64) -> String {
        let n = Number::from_f64(f64::from_bits(bits))
            .unwrap_or_else(|| panic!("{bits:016x} is not finite"));
        let bytes = canonicalize(&Value::Number(n)).unwrap_or_else(|e| panic!("{e}"));
        String::from_utf8(bytes).unwrap_or_else(|e| panic!("{e}"))
    }

    /// RFC 8785 §3.2.2: the "numbers / string / literals" example, input and output
    /// transcribed from the RFC text.
    #[test]
    fn rfc8785_section_3_2_2_example() {
        let input = r#"{
          "numbers": [333333333.33333329, 1E30, 4.50,
                      2e-3, 0.000000000000000000000000001],
          "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
          "literals": [null, true, false]
        }"#;
        let expected = concat!(
            r#"{"literals":[null,true,false],"#,
            r#""numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"#,
            r#""string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
        assert_eq!(canon(input), expected);
    }

    /// RFC 8785 §3.2.4: the canonical bytes of the §3.2.2 example, as UTF-8 hex.
    #[test]
    fn rfc8785_section_3_2_4_utf8_bytes() {
        let input = r#"{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}"#;
        let hex = data_encoding::HEXLOWER.encode(&canonicalize_str(input).unwrap_or_default());
        // Laid out as in the RFC, 20 bytes per row.
        let expected: String = "
            7b 22 6c 69 74 65 72 61 6c 73 22 3a 5b 6e 75 6c 6c 2c 74 72
            75 65 2c 66 61 6c 73 65 5d 2c 22 6e 75 6d 62 65 72 73 22 3a
            5b 33 33 33 33 33 33 33 33 33 2e 33 33 33 33 33 33 33 2c 31
            65 2b 33 30 2c 34 2e 35 2c 30 2e 30 30 32 2c 31 65 2d 32 37
            5d 2c 22 73 74 72 69 6e 67 22 3a 22 e2 82 ac 24 5c 75 30 30
            30 66 5c 6e 41 27 42 5c 22 5c 5c 5c 5c 5c 22 2f 22 7d"
            .split_whitespace()
            .collect();
        assert_eq!(hex, expected);
    }

    /// RFC 8785 §3.2.3: property sorting by UTF-16 code units (the emoji's high surrogate
    /// 0xD83D sorts before U+FB33 although its code point is larger).
    #[test]
    fn rfc8785_section_3_2_3_sorting() {
        let input = r#"{
          "\u20ac": "Euro Sign",
          "\r": "Carriage Return",
          "\ufb33": "Hebrew Letter Dalet With Dagesh",
          "1": "One",
          "\ud83d\ude00": "Emoji: Grinning Face",
          "\u0080": "Control",
          "\u00f6": "Latin Small Letter O With Diaeresis"
        }"#;
        let expected = concat!(
            "{\"\\r\":\"Carriage Return\",",
            "\"1\":\"One\",",
            "\"\u{80}\":\"Control\",",
            "\"\u{f6}\":\"Latin Small Letter O With Diaeresis\",",
            "\"\u{20ac}\":\"Euro Sign\",",
            "\"\u{1f600}\":\"Emoji: Grinning Face\",",
            "\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}"
        );
        assert_eq!(canon(input), expected);
    }

    /// Nested structures: arrays keep their order, objects at every depth are sorted,
    /// numeric-looking keys sort as strings ("1" < "10" < "d"), whitespace disappears.
    #[test]
    fn nested_structures_are_sorted_at_every_depth() {
        assert_eq!(
            canon(r#"[56, {"d": true, "10": null, "1": [ ]}]"#),
            r#"[56,{"1":[],"10":null,"d":true}]"#
        );
        assert_eq!(
            canon(r#"{"b": {"z": 1, "a": [3, {"y": 2, "x": 1}]}, "a": "x"}"#),
            r#"{"a":"x","b":{"a":[3,{"x":1,"y":2}],"z":1}}"#
        );
        assert_eq!(canon(" [ ] "), "[]");
        assert_eq!(canon("{}"), "{}");
    }

    /// RFC 8785 Appendix B: IEEE-754 bit patterns and their canonical text.
    #[test]
    fn rfc8785_appendix_b_number_table() {
        let table: &[(u64, &str)] = &[
            (0x0000000000000000, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ];
        for &(bits, expected) in table {
            assert_eq!(canon_f64(bits), expected, "bits {bits:016x}");
        }
    }

    /// Appendix B's NaN and Infinity rows must be errors. A `serde_json::Value` cannot hold
    /// them, and text that would overflow to infinity is rejected by the parser.
    #[test]
    fn non_finite_numbers_are_rejected() {
        assert!(Number::from_f64(f64::NAN).is_none());
        assert!(Number::from_f64(f64::INFINITY).is_none());
        for text in ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "[1e309]"] {
            assert!(canonicalize_str(text).is_err(), "{text} must be rejected");
        }
    }

    /// Number text, parsed then serialized, as the RFC's §3.2.2.3 rules require.
    #[test]
    fn number_text_round_trips_like_ecmascript() {
        let cases = [
            ("1e+21", "1e+21"),
            ("1e21", "1e+21"),
            ("1e20", "100000000000000000000"),
            ("1e-7", "1e-7"),
            ("0.0000001", "1e-7"),
            ("333333333.33333329", "333333333.3333333"),
            ("0.000001", "0.000001"),
            ("1e23", "1e+23"),
            ("-0", "0"),
            ("-0.0", "0"),
            ("0.0", "0"),
            ("4.50", "4.5"),
            ("2e-3", "0.002"),
            ("0.000000000000000000000000001", "1e-27"),
            ("1E30", "1e+30"),
            ("-1.5", "-1.5"),
            ("100", "100"),
            ("1.0", "1"),
            // Integers beyond 2^53 are rounded to the nearest double, as JSON.parse does.
            ("9007199254740993", "9007199254740992"),
            ("18446744073709551615", "18446744073709552000"),
            ("-9223372036854775808", "-9223372036854776000"),
            ("123456789012345678901234567890", "1.2345678901234568e+29"),
        ];
        for (input, expected) in cases {
            assert_eq!(canon(input), expected, "input {input}");
        }
    }

    #[test]
    fn string_escaping_follows_json_stringify() {
        assert_eq!(
            canon(r#""\u0000\u0001\u001f\u007f\b\f\n\r\t/\u2028\u00e9\ud83d\ude00""#),
            "\"\\u0000\\u0001\\u001f\u{7f}\\b\\f\\n\\r\\t/\u{2028}é😀\""
        );
    }

    #[test]
    fn write_string_matches_the_jcs_crate_for_every_control_and_special_char() {
        let mut all = String::new();
        for c in (0u32..0x100).chain([0x2028, 0x2029, 0xfeff, 0x1f600]) {
            if let Some(c) = char::from_u32(c) {
                all.push(c);
            }
        }
        all.push_str("\"\\/");
        let mut ours = String::new();
        write_string(&mut ours, &all);
        let theirs = canonicalize(&Value::String(all)).unwrap_or_default();
        assert_eq!(ours.as_bytes(), theirs.as_slice());
    }

    #[test]
    fn duplicate_keys_are_rejected_at_any_depth() {
        for text in [
            r#"{"a":1,"a":2}"#,
            r#"[{"x":{"k":1,"k":1}}]"#,
            r#"{"\u0061":1,"a":2}"#,
        ] {
            let err = canonicalize_str(text).err();
            assert!(
                matches!(&err, Some(JcsError::InvalidJson(e)) if e.to_string().contains("duplicate object key")),
                "{text}: {err:?}"
            );
        }
        // Same key in sibling objects is fine.
        assert_eq!(canon(r#"[{"a":1},{"a":2}]"#), r#"[{"a":1},{"a":2}]"#);
    }

    #[test]
    fn invalid_text_is_rejected() {
        for text in [
            "",
            "{",
            r#"{"a":1} x"#,
            "[1,]",
            r#""\ud800""#,
            "'single'",
            "01",
        ] {
            assert!(
                matches!(canonicalize_str(text), Err(JcsError::InvalidJson(_))),
                "{text:?} must be rejected"
            );
        }
    }

    #[test]
    fn canonicalize_value_matches_canonicalize_str() {
        let value = json!({"z": [1.5, -0.0, 1e21], "a": {"c": "\u{20ac}", "b": null}});
        let from_value = canonicalize(&value).unwrap_or_default();
        let from_text = canonicalize_str(&value.to_string()).unwrap_or_default();
        assert_eq!(from_value, from_text);
        assert_eq!(
            String::from_utf8(from_value).unwrap_or_default(),
            r#"{"a":{"b":null,"c":"€"},"z":[1.5,0,1e+21]}"#
        );
    }
}

/// Generated input: any text is answered without a panic, and what is accepted has one
/// canonical form that canonicalization leaves as it is.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod properties {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Number, Value};

    /// Any JSON value: every scalar kind, nested arrays and objects, any key or string.
    pub(crate) fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_filter_map("finite", |f| Number::from_f64(f).map(Value::Number)),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(any::<String>(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(crate::proptest_config())]

        #[test]
        fn any_text_is_answered_without_a_panic(text in any::<String>()) {
            let _ = canonicalize_str(&text);
        }

        #[test]
        fn json_looking_text_is_answered_without_a_panic(
            text in r#"[\[\]{}":,0-9eE.+\-a-z\\ ]{0,40}"#,
        ) {
            if let Ok(canonical) = canonicalize_str(&text) {
                let again = canonicalize_str(std::str::from_utf8(&canonical).unwrap()).unwrap();
                prop_assert_eq!(again, canonical);
            }
        }

        #[test]
        fn canonical_text_is_a_fixed_point(value in json_value()) {
            let canonical = canonical_string(&value).unwrap();
            let again = canonicalize_str(&canonical).unwrap();
            prop_assert_eq!(String::from_utf8(again).unwrap(), canonical);
        }

        #[test]
        fn every_serialization_of_a_value_has_its_canonical_text(value in json_value()) {
            let canonical = canonicalize(&value).unwrap();
            let pretty = serde_json::to_string_pretty(&value).unwrap();
            prop_assert_eq!(canonicalize_str(&pretty).unwrap(), canonical);
        }

        #[test]
        fn a_repeated_key_is_refused(key in any::<String>(), a in any::<i32>(), b in any::<i32>()) {
            let key = serde_json::to_string(&key).unwrap();
            let text = format!("{{\"x\":[{{{key}:{a},{key}:{b}}}]}}");
            prop_assert!(canonicalize_str(&text).is_err());
        }

        #[test]
        fn string_literals_are_written_as_jcs_writes_them(s in any::<String>()) {
            let mut out = String::new();
            write_string(&mut out, &s);
            prop_assert_eq!(&out, &canonical_string(&Value::String(s.clone())).unwrap());
            prop_assert_eq!(serde_json::from_str::<String>(&out).unwrap(), s);
        }
    }
}
