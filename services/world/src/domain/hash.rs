//! Content addressing: a component's hash is the 64 lowercase hex digits of SHA-256 over its
//! RFC 8785 (JCS) bytes — the seed's `sha256_hex`. The `sha256:`-prefixed form of
//! [`ContentId`] is accepted on input; output is always the bare hex the seed stores.

use std::fmt;

use noema_core::content_id::ContentId;
use noema_core::jcs::{self, JcsError};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A component hash: 64 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentHash(ContentId);

/// Why a text is not a content hash.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{text:?} is not a content hash (expected 64 lowercase hex digits, optionally prefixed \"sha256:\")"
)]
pub struct HashError {
    pub text: String,
}

impl ContentHash {
    /// The hash of a JSON document: SHA-256 over its canonical bytes.
    pub fn of_json(value: &serde_json::Value) -> Result<ContentHash, JcsError> {
        Ok(ContentHash(ContentId::of_bytes(&jcs::canonicalize(value)?)))
    }

    /// The hash of a value's JSON form.
    pub fn of_serializable<T: Serialize>(value: &T) -> Result<ContentHash, JcsError> {
        let json = serde_json::to_value(value).map_err(JcsError::Unrepresentable)?;
        ContentHash::of_json(&json)
    }

    /// Accepts `<64 lowercase hex>` or `sha256:<64 lowercase hex>`. Uppercase is refused, not
    /// folded: hashes are compared as text.
    pub fn parse(text: &str) -> Result<ContentHash, HashError> {
        text.parse::<ContentId>()
            .or_else(|_| ContentId::from_lowercase_hex(text))
            .map(ContentHash)
            .map_err(|_| HashError {
                text: text.to_owned(),
            })
    }

    /// The 64 hex digits.
    pub fn as_str(&self) -> &str {
        self.0.hex()
    }

    /// The same digest as a `sha256:` content id.
    pub fn content_id(&self) -> &ContentId {
        &self.0
    }

    /// The first 12 digits, for messages.
    pub fn short(&self) -> &str {
        self.as_str().get(..12).unwrap_or_default()
    }
}

impl From<ContentId> for ContentHash {
    fn from(id: ContentId) -> Self {
        ContentHash(id)
    }
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ContentHash {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ContentHash {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        ContentHash::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// `{"hash": "…"}`: how every component refers to another.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HashRef {
    pub hash: ContentHash,
}

impl From<ContentHash> for HashRef {
    fn from(hash: ContentHash) -> Self {
        HashRef { hash }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use serde_json::json;

    const ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    #[test]
    fn the_hash_is_sha256_hex_over_the_jcs_bytes() {
        let a = json!({"b": 1, "a": [1.0, "x"]});
        let text = r#"{ "a" : [1, "x"], "b" : 1.00 }"#;
        let b: serde_json::Value = serde_json::from_str(text).unwrap();
        let hash = ContentHash::of_json(&a).unwrap();
        assert_eq!(hash, ContentHash::of_json(&b).unwrap());
        assert_eq!(
            hash.as_str(),
            noema_core::content_id::sha256_hex(br#"{"a":[1,"x"],"b":1}"#)
        );
        assert_eq!(hash.as_str().len(), 64);
    }

    #[test]
    fn both_input_forms_parse_to_one_hash_and_output_is_bare_hex() {
        let bare = ContentHash::parse(ABC).unwrap();
        let prefixed = ContentHash::parse(&["sha256:", ABC].concat()).unwrap();
        assert_eq!(bare, prefixed);
        assert_eq!(bare.to_string(), ABC);
        assert_eq!(bare.content_id().hex(), ABC);
        assert_eq!(serde_json::to_value(&bare).unwrap(), json!(ABC));
        let reference: HashRef =
            serde_json::from_value(json!({"hash": (["sha256:", ABC].concat())})).unwrap();
        assert_eq!(
            serde_json::to_value(&reference).unwrap(),
            json!({"hash": ABC})
        );
        assert_eq!(bare.short(), &ABC[..12]);
    }

    #[test]
    fn malformed_hashes_are_refused() {
        for text in [
            "",
            &ABC[..63],
            &ABC.to_uppercase(),
            &format!("SHA256:{ABC}"),
            &["sha256:", &ABC[..10]].concat(),
            "<toy-weather-source-hash>",
            &format!("{ABC}0"),
        ] {
            assert!(ContentHash::parse(text).is_err(), "{text:?}");
        }
        assert!(serde_json::from_value::<HashRef>(json!({"hash": ABC, "extra": 1})).is_err());
    }
}
