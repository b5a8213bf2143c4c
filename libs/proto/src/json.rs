//! `google.protobuf.Struct`/`Value` ⇄ `serde_json::Value`, for the free JSON that
//! agent-authored payloads and audit details carry.

use prost_types::value::Kind;
use prost_types::{ListValue, Struct, Value};

/// JSON → protobuf `Value`. Numbers become doubles, as protobuf's JSON mapping does.
pub fn to_proto_value(json: &serde_json::Value) -> Value {
    let kind = match json {
        serde_json::Value::Null => Kind::NullValue(0),
        serde_json::Value::Bool(b) => Kind::BoolValue(*b),
        serde_json::Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        serde_json::Value::String(s) => Kind::StringValue(s.clone()),
        serde_json::Value::Array(items) => Kind::ListValue(ListValue {
            values: items.iter().map(to_proto_value).collect(),
        }),
        serde_json::Value::Object(map) => Kind::StructValue(Struct {
            fields: map
                .iter()
                .map(|(k, v)| (k.clone(), to_proto_value(v)))
                .collect(),
        }),
    };
    Value { kind: Some(kind) }
}

/// JSON object → protobuf `Struct`; `None` when the JSON is not an object.
pub fn to_proto_struct(json: &serde_json::Value) -> Option<Struct> {
    match to_proto_value(json).kind {
        Some(Kind::StructValue(s)) => Some(s),
        _ => None,
    }
}

/// Protobuf `Value` → JSON. Integral doubles within ±2^53 come back as integers.
pub fn from_proto_value(value: &Value) -> serde_json::Value {
    match &value.kind {
        None | Some(Kind::NullValue(_)) => serde_json::Value::Null,
        Some(Kind::BoolValue(b)) => serde_json::Value::Bool(*b),
        Some(Kind::NumberValue(n)) => number_to_json(*n),
        Some(Kind::StringValue(s)) => serde_json::Value::String(s.clone()),
        Some(Kind::ListValue(list)) => {
            serde_json::Value::Array(list.values.iter().map(from_proto_value).collect())
        }
        Some(Kind::StructValue(s)) => from_proto_struct(s),
    }
}

pub fn from_proto_struct(s: &Struct) -> serde_json::Value {
    serde_json::Value::Object(
        s.fields
            .iter()
            .map(|(k, v)| (k.clone(), from_proto_value(v)))
            .collect(),
    )
}

fn number_to_json(n: f64) -> serde_json::Value {
    const MAX_SAFE: f64 = 9_007_199_254_740_992.0;
    if n.fract() == 0.0 && n.abs() <= MAX_SAFE {
        #[allow(clippy::cast_possible_truncation)]
        return serde_json::Value::from(n as i64);
    }
    serde_json::Number::from_f64(n)
        .map(serde_json::Value::Number)
        .unwrap_or(serde_json::Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trips_through_struct() {
        let json = serde_json::json!({"a": 1, "b": [true, null, "x", 2.5], "c": {"d": -3}});
        let back = from_proto_struct(&to_proto_struct(&json).unwrap_or_default());
        assert_eq!(back, json);
    }

    #[test]
    fn non_objects_are_not_structs() {
        assert!(to_proto_struct(&serde_json::json!([1])).is_none());
    }
}
