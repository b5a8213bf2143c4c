//! JSON the way the original's Python sees and writes it.
//!
//! CogniRelay parses bodies with `json.loads` (objects keep their key order; a repeated key keeps
//! its first position and its last value), validates them with pydantic and stores capsules as
//! `json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)`. Two things follow:
//!
//! - [`Json`] is an order-preserving value, so what the original echoes back (the `input` of a
//!   422 item, a raw body) comes out in the caller's key order without turning on serde_json's
//!   `preserve_order` for the whole workspace.
//! - [`PyFormatter`] prints floats as Python's `repr` does (`1.0`, `0.85`, `1e-05`, `1e+16`), which
//!   is what makes `capsule_sha256` equal to the original's for the same capsule.

use std::fmt;
use std::io;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Number, Value};

/// A JSON value that keeps object keys in the order they were written.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<Json>),
    Object(JsonObject),
}

/// An object as an ordered list of members; keys are unique.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JsonObject(Vec<(String, Json)>);

impl JsonObject {
    pub fn new() -> Self {
        JsonObject(Vec::new())
    }

    pub fn get(&self, key: &str) -> Option<&Json> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Json> {
        self.0.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.0.iter().any(|(k, _)| k == key)
    }

    /// Sets `key`, keeping its position when it exists (Python's `dict[key] = value`).
    pub fn insert(&mut self, key: impl Into<String>, value: Json) {
        let key = key.into();
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<Json> {
        let at = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.remove(at).1)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &Json)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.0.iter().map(|(k, _)| k)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromIterator<(String, Json)> for JsonObject {
    fn from_iter<I: IntoIterator<Item = (String, Json)>>(iter: I) -> Self {
        let mut object = JsonObject::new();
        for (k, v) in iter {
            object.insert(k, v);
        }
        object
    }
}

impl Json {
    /// Parses a request body; `None` when it is not JSON (the gateway answers that itself).
    pub fn parse(bytes: &[u8]) -> Result<Json, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    pub fn as_object(&self) -> Option<&JsonObject> {
        match self {
            Json::Object(o) => Some(o),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&Vec<Json>> {
        match self {
            Json::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }

    /// A member of an object (`None` for other values or a missing key).
    pub fn get(&self, key: &str) -> Option<&Json> {
        self.as_object().and_then(|o| o.get(key))
    }

    /// The same value as a serde_json value (object keys sorted, as serde_json keeps them).
    pub fn to_value(&self) -> Value {
        match self {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => Value::Number(n.clone()),
            Json::String(s) => Value::String(s.clone()),
            Json::Array(items) => Value::Array(items.iter().map(Json::to_value).collect()),
            Json::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, v)| (k.clone(), v.to_value()))
                    .collect::<serde_json::Map<_, _>>(),
            ),
        }
    }

    /// A serde_json value as an ordered one (keys in serde_json's order, i.e. sorted).
    pub fn from_value(value: &Value) -> Json {
        match value {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(*b),
            Value::Number(n) => Json::Number(n.clone()),
            Value::String(s) => Json::String(s.clone()),
            Value::Array(items) => Json::Array(items.iter().map(Json::from_value).collect()),
            Value::Object(o) => Json::Object(
                o.iter()
                    .map(|(k, v)| (k.clone(), Json::from_value(v)))
                    .collect(),
            ),
        }
    }
}

impl From<&str> for Json {
    fn from(s: &str) -> Json {
        Json::String(s.to_owned())
    }
}

impl From<String> for Json {
    fn from(s: String) -> Json {
        Json::String(s)
    }
}

impl From<i64> for Json {
    fn from(n: i64) -> Json {
        Json::Number(n.into())
    }
}

impl From<usize> for Json {
    fn from(n: usize) -> Json {
        Json::Number((n as u64).into())
    }
}

impl From<u64> for Json {
    fn from(n: u64) -> Json {
        Json::Number(n.into())
    }
}

impl From<bool> for Json {
    fn from(b: bool) -> Json {
        Json::Bool(b)
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => serializer.serialize_unit(),
            Json::Bool(b) => serializer.serialize_bool(*b),
            Json::Number(n) => n.serialize(serializer),
            Json::String(s) => serializer.serialize_str(s),
            Json::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Json::Object(o) => {
                let mut map = serializer.serialize_map(Some(o.len()))?;
                for (k, v) in o.iter() {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Json, D::Error> {
        struct JsonVisitor;

        impl<'de> Visitor<'de> for JsonVisitor {
            type Value = Json;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }

            fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
                Ok(Json::Bool(v))
            }

            fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
                Ok(Json::Number(v.into()))
            }

            fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
                Ok(Json::Number(v.into()))
            }

            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
                Number::from_f64(v)
                    .map(Json::Number)
                    .ok_or_else(|| E::custom("non-finite number"))
            }

            fn visit_str<E>(self, v: &str) -> Result<Json, E> {
                Ok(Json::String(v.to_owned()))
            }

            fn visit_string<E>(self, v: String) -> Result<Json, E> {
                Ok(Json::String(v))
            }

            fn visit_unit<E>(self) -> Result<Json, E> {
                Ok(Json::Null)
            }

            fn visit_none<E>(self) -> Result<Json, E> {
                Ok(Json::Null)
            }

            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
                Json::deserialize(d)
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Json::Array(items))
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
                let mut object = JsonObject::new();
                while let Some((k, v)) = map.next_entry::<String, Json>()? {
                    object.insert(k, v);
                }
                Ok(Json::Object(object))
            }
        }

        deserializer.deserialize_any(JsonVisitor)
    }
}

/// Python's `repr(float)`: the shortest digits that round-trip, in fixed notation when the
/// decimal exponent is in [-4, 16), otherwise `d.ddde±XX`; integral values keep a `.0`.
pub fn py_float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "1.2345e-5", "-0e0".
    let sci = format!("{x:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    // Python's decpt: the value is 0.<digits> × 10^decpt.
    let decpt = exponent + 1;
    let ndigits = digits.len() as i32;
    let body = if -4 < decpt && decpt <= 16 {
        if decpt <= 0 {
            format!("0.{}{}", "0".repeat((-decpt) as usize), digits)
        } else if decpt >= ndigits {
            format!("{}{}.0", digits, "0".repeat((decpt - ndigits) as usize))
        } else {
            let (int, frac) = digits.split_at(decpt as usize);
            format!("{int}.{frac}")
        }
    } else {
        let (first, rest) = digits.split_at(1);
        let mantissa = if rest.is_empty() {
            first.to_owned()
        } else {
            format!("{first}.{rest}")
        };
        let exp = decpt - 1;
        let exp_sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{exp_sign}{:02}", exp.abs())
    };
    format!("{sign}{body}")
}

/// serde_json's compact output with Python's float rendering. serde_json already escapes the
/// same characters as `json.dumps(ensure_ascii=False)` (`"`, `\`, and controls below U+0020 as
/// `\b \f \n \r \t` or lowercase `\u00xx`).
#[derive(Debug, Clone, Copy, Default)]
pub struct PyFormatter;

impl serde_json::ser::Formatter for PyFormatter {
    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        writer.write_all(py_float_repr(value).as_bytes())
    }

    fn write_f32<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        writer.write_all(py_float_repr(f64::from(value)).as_bytes())
    }
}

/// `json.dumps(value, separators=(",", ":"), ensure_ascii=False)`: keys in the value's own order.
pub fn to_py_json<T: Serialize + ?Sized>(value: &T) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PyFormatter);
    if value.serialize(&mut ser).is_err() {
        // Only non-string map keys fail, and none of our types has them.
        return String::from("null");
    }
    String::from_utf8(out).unwrap_or_default()
}

/// The original's `canonical_json`: sorted keys, compact separators, UTF-8, Python floats.
pub fn canonical_json<T: Serialize + ?Sized>(value: &T) -> String {
    // serde_json's map keeps its keys sorted (the workspace does not enable `preserve_order`),
    // byte order of UTF-8 being code point order, as Python sorts `str` keys.
    let sorted = serde_json::to_value(value).unwrap_or(Value::Null);
    to_py_json(&sorted)
}

/// Lowercase hex SHA-256 of some bytes.
pub use noema_core::content_id::sha256_hex;

/// Python's `==` on JSON values: `1 == 1.0 == True`, dicts equal whatever their key order.
pub fn py_eq(left: &Value, right: &Value) -> bool {
    fn as_number(v: &Value) -> Option<f64> {
        match v {
            Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
            Value::Number(n) => n.as_f64(),
            _ => None,
        }
    }
    match (left, right) {
        (Value::Number(a), Value::Number(b)) => match (a.as_i64(), b.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => match (a.as_u64(), b.as_u64()) {
                (Some(x), Some(y)) => x == y,
                _ => as_number(left) == as_number(right),
            },
        },
        (Value::Bool(_), Value::Number(_)) | (Value::Number(_), Value::Bool(_)) => {
            as_number(left) == as_number(right)
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| py_eq(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(k, v)| b.get(k).is_some_and(|other| py_eq(v, other)))
        }
        _ => left == right,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// Expected strings are `repr(x)` / `json.dumps(x)` as printed by CPython 3.12.
    #[test]
    fn floats_render_as_python_repr() {
        let cases: &[(f64, &str)] = &[
            (1.0, "1.0"),
            (0.85, "0.85"),
            (0.1, "0.1"),
            (1e-05, "1e-05"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (9999999999999998.0, "9999999999999998.0"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (1.5e-7, "1.5e-07"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (-2.5, "-2.5"),
            (1e100, "1e+100"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (12345.678, "12345.678"),
            (0.3333333333333333, "0.3333333333333333"),
            (100.0, "100.0"),
            (2.5e-5, "2.5e-05"),
        ];
        for (x, want) in cases {
            assert_eq!(py_float_repr(*x), *want, "repr({x:e})");
        }
    }

    #[test]
    fn parsing_keeps_key_order_and_repeated_keys_keep_their_first_place() {
        let json = Json::parse(br#"{"b":1,"a":{"z":1,"y":2},"b":3}"#).unwrap();
        assert_eq!(to_py_json(&json), r#"{"b":3,"a":{"z":1,"y":2}}"#);
        assert_eq!(canonical_json(&json), r#"{"a":{"y":2,"z":1},"b":3}"#);
    }

    /// `json.dumps({"é": "\u2192\n\x01\x7f", "n": [1, 1.0, 1e-05, True, None]}, sort_keys=True,
    /// separators=(",", ":"), ensure_ascii=False)` in CPython 3.12.
    #[test]
    fn canonical_json_matches_python_dumps() {
        let json = Json::parse(
            "{\"\u{e9}\":\"\u{2192}\\n\\u0001\u{7f}\",\"n\":[1,1.0,1e-05,true,null]}".as_bytes(),
        )
        .unwrap();
        assert_eq!(
            canonical_json(&json),
            "{\"n\":[1,1.0,1e-05,true,null],\"\u{e9}\":\"\u{2192}\\n\\u0001\u{7f}\"}"
        );
    }

    #[test]
    fn python_equality_mixes_ints_floats_and_bools() {
        use serde_json::json;
        assert!(py_eq(
            &json!({"a": 1, "b": [true]}),
            &json!({"b": [1.0], "a": 1.0})
        ));
        assert!(!py_eq(&json!("1"), &json!(1)));
        assert!(!py_eq(&json!([1, 2]), &json!([2, 1])));
    }
}
