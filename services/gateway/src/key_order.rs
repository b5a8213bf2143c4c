//! JSON written with the original system's key order. The discovery and help documents are
//! built as `serde_json::Value`s, whose objects are sorted; the original writes Python dicts
//! in insertion order. [`Ordered`] writes a value with the keys of the objects it names
//! first, in the order given, then any others (Noema's additions) sorted; [`OrderedMap`] is
//! an object of typed values in the order of its list.

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

/// A JSON object whose entries are written in the order of the list.
#[derive(Debug)]
pub struct OrderedMap<V>(pub Vec<(&'static str, V)>);

impl<V: Serialize> Serialize for OrderedMap<V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// Key orders by object path: `""` is the document, `"/protocol"` its `protocol` object,
/// `"/tools/*"` each element of its `tools` array.
pub type KeyOrders = &'static [(&'static str, &'static [&'static str])];

/// `value`, written with `orders`.
pub struct Ordered {
    pub value: Value,
    pub orders: KeyOrders,
}

/// Documented as the JSON value it writes.
impl schemars::JsonSchema for Ordered {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        Value::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        Value::json_schema(generator)
    }
}

impl Serialize for Ordered {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        At {
            value: &self.value,
            path: String::new(),
            orders: self.orders,
        }
        .serialize(serializer)
    }
}

struct At<'a> {
    value: &'a Value,
    path: String,
    orders: KeyOrders,
}

impl At<'_> {
    fn child<'b>(&self, value: &'b Value, segment: &str) -> At<'b> {
        At {
            value,
            path: format!("{}/{segment}", self.path),
            orders: self.orders,
        }
    }
}

impl Serialize for At<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.value {
            Value::Object(map) => {
                let listed = self
                    .orders
                    .iter()
                    .find(|(path, _)| *path == self.path)
                    .map_or(&[][..], |(_, keys)| *keys);
                let first = listed.iter().filter_map(|k| map.get_key_value(*k));
                let rest = map.iter().filter(|(k, _)| !listed.contains(&k.as_str()));
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for (key, value) in first.chain(rest) {
                    out.serialize_entry(key, &self.child(value, key))?;
                }
                out.end()
            }
            Value::Array(items) => {
                let mut out = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    out.serialize_element(&self.child(item, "*"))?;
                }
                out.end()
            }
            other => other.serialize(serializer),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn listed_keys_come_first_in_their_order_then_the_others_sorted() {
        let value = json!({
            "z": 1, "ok": true,
            "protocol": {"version": "1", "name": "n", "extra": 0},
            "tools": [{"b": 1, "a": 2}, {"a": 3, "b": 4}],
        });
        const ORDERS: KeyOrders = &[
            ("", &["ok", "protocol", "tools"]),
            ("/protocol", &["name", "version"]),
            ("/tools/*", &["b", "a"]),
        ];
        let text = serde_json::to_string(&Ordered {
            value,
            orders: ORDERS,
        })
        .unwrap();
        assert_eq!(
            text,
            r#"{"ok":true,"protocol":{"name":"n","version":"1","extra":0},"tools":[{"b":1,"a":2},{"b":4,"a":3}],"z":1}"#
        );
    }
}
