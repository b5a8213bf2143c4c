//! `sha256:<64 lowercase hex>` content ids, and the one check of a SHA-256 hex digest.
//!
//! This is the id format of open-cognition canonical objects, of token hashes, audit and
//! chain hashes, and of every content-addressed blob in Noema: [`ContentId`] is the only
//! code that writes or reads the `sha256:` form. The form is strict (lowercase only, exact
//! length) because ids are compared as strings everywhere (ledger primary keys, storage
//! paths, token lookups), so exactly one text may name a given digest. Text typed by a
//! person or sent by another system (a configured owner-token hash, a token hash in a
//! CogniRelay request) goes through [`ContentId::parse_normalizing`], which folds it to
//! that one text.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

use crate::jcs::{self, JcsError};

const PREFIX: &str = "sha256:";
const HEX_LEN: usize = 64;

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    data_encoding::HEXLOWER.encode(&Sha256::digest(bytes))
}

/// Why a text is not a content id. Every message restates the required form so a caller
/// knows what to send instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContentIdError {
    #[error("content id must start with \"sha256:\" (expected sha256:[0-9a-f]{{64}})")]
    MissingPrefix,
    #[error(
        "content id has {actual} hex digits after \"sha256:\" but needs exactly 64 (expected sha256:[0-9a-f]{{64}})"
    )]
    WrongLength { actual: usize },
    #[error(
        "content id contains {found:?}, which is not a lowercase hex digit (expected sha256:[0-9a-f]{{64}})"
    )]
    InvalidDigit { found: char },
}

/// Which hex digits a digest may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Digits {
    /// `[0-9a-f]`: the stored form.
    Lowercase,
    /// `[0-9a-fA-F]`: accepted from people and other systems, then folded to lowercase.
    EitherCase,
}

/// The one validator of a SHA-256 hex digest: 64 digits from `digits`. An invalid digit is
/// reported before a wrong length, so `…\n` names the newline rather than a count.
fn check_hex(hex: &str, digits: Digits) -> Result<(), ContentIdError> {
    let allowed = |c: char| match digits {
        Digits::Lowercase => matches!(c, '0'..='9' | 'a'..='f'),
        Digits::EitherCase => c.is_ascii_hexdigit(),
    };
    if let Some(found) = hex.chars().find(|c| !allowed(*c)) {
        return Err(ContentIdError::InvalidDigit { found });
    }
    if hex.len() != HEX_LEN {
        return Err(ContentIdError::WrongLength { actual: hex.len() });
    }
    Ok(())
}

/// A validated `sha256:<64 lowercase hex>` id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentId(String);

impl ContentId {
    /// Id of raw bytes: SHA-256 over exactly these bytes.
    pub fn of_bytes(bytes: &[u8]) -> ContentId {
        ContentId(format!("{PREFIX}{}", sha256_hex(bytes)))
    }

    /// Id of a JSON value: SHA-256 over its RFC 8785 canonical bytes, so any two
    /// serializations of the same value get the same id.
    pub fn of_json(value: &serde_json::Value) -> Result<ContentId, JcsError> {
        Ok(ContentId::of_bytes(&jcs::canonicalize(value)?))
    }

    /// Id for an already computed digest.
    pub fn from_digest(digest: &[u8; 32]) -> ContentId {
        ContentId(format!(
            "{PREFIX}{}",
            data_encoding::HEXLOWER.encode(digest)
        ))
    }

    /// Id for 64 hex digits in either case (no prefix), folded to lowercase.
    pub fn from_hex(hex: &str) -> Result<ContentId, ContentIdError> {
        check_hex(hex, Digits::EitherCase)?;
        Ok(ContentId(format!("{PREFIX}{}", hex.to_ascii_lowercase())))
    }

    /// Id for exactly 64 lowercase hex digits (no prefix): the bare form of [`FromStr`],
    /// for formats that store the digest without its prefix and compare it as text.
    pub fn from_lowercase_hex(hex: &str) -> Result<ContentId, ContentIdError> {
        check_hex(hex, Digits::Lowercase)?;
        Ok(ContentId(format!("{PREFIX}{hex}")))
    }

    /// The lenient reading for text from people and other systems: `sha256:` optional, hex
    /// in either case; the result is the one stored form. Ids Noema compares as submitted
    /// (open-cognition's) use [`FromStr`] instead, which refuses anything but that form.
    pub fn parse_normalizing(text: &str) -> Result<ContentId, ContentIdError> {
        ContentId::from_hex(text.strip_prefix(PREFIX).unwrap_or(text))
    }

    /// `text` without a leading `sha256:`, unchecked: for formats that accept a digest with
    /// or without the prefix and compare what follows as text (CogniRelay's key
    /// fingerprints), where an ill-formed value must still compare rather than be refused.
    pub fn without_prefix(text: &str) -> &str {
        text.strip_prefix(PREFIX).unwrap_or(text)
    }

    /// Whether `text` is exactly a content id (`^sha256:[0-9a-f]{64}$`).
    pub fn is_valid(text: &str) -> bool {
        text.parse::<ContentId>().is_ok()
    }

    /// The full `sha256:…` text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The 64 hex digits without the `sha256:` prefix.
    pub fn hex(&self) -> &str {
        self.0.get(PREFIX.len()..).unwrap_or_default()
    }

    /// The 32 digest bytes.
    pub fn digest(&self) -> [u8; 32] {
        let mut out = [0u8; 32];
        // Validated on construction, so decoding cannot fail; a zero digest would only
        // appear if that invariant were broken.
        if let Ok(bytes) = data_encoding::HEXLOWER.decode(self.hex().as_bytes())
            && bytes.len() == out.len()
        {
            out.copy_from_slice(&bytes);
        }
        out
    }

    /// Whether `bytes` hash to this id.
    pub fn matches(&self, bytes: &[u8]) -> bool {
        self.hex() == sha256_hex(bytes)
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl FromStr for ContentId {
    type Err = ContentIdError;

    /// Accepts exactly `^sha256:[0-9a-f]{64}$`; uppercase hex is rejected rather than
    /// folded, because the seed systems compare ids as strings.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let hex = s
            .strip_prefix(PREFIX)
            .ok_or(ContentIdError::MissingPrefix)?;
        check_hex(hex, Digits::Lowercase)?;
        Ok(ContentId(s.to_owned()))
    }
}

impl TryFrom<String> for ContentId {
    type Error = ContentIdError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl fmt::Display for ContentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for ContentId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Serialize for ContentId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for ContentId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // SHA-256 of the empty string and of "abc" (FIPS 180-2 examples).
    const EMPTY: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    const ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    #[test]
    fn of_bytes_uses_lowercase_hex_sha256() {
        assert_eq!(sha256_hex(b""), EMPTY);
        assert_eq!(
            ContentId::of_bytes(b"abc").as_str(),
            format!("sha256:{ABC}")
        );
        assert_eq!(ContentId::of_bytes(b"abc").hex(), ABC);
        assert!(ContentId::of_bytes(b"abc").matches(b"abc"));
        assert!(!ContentId::of_bytes(b"abc").matches(b"abd"));
    }

    #[test]
    fn of_json_hashes_the_canonical_bytes() {
        let a = json!({"b": 1, "a": [1.0, "x"]});
        let b: serde_json::Value =
            serde_json::from_str(r#"{ "a" : [1, "x"], "b" : 1.00 }"#).unwrap_or_default();
        let id = ContentId::of_json(&a).ok();
        assert_eq!(id, ContentId::of_json(&b).ok());
        assert_eq!(id, Some(ContentId::of_bytes(br#"{"a":[1,"x"],"b":1}"#)));
    }

    #[test]
    fn digest_round_trips() {
        let id = ContentId::of_bytes(b"abc");
        assert_eq!(ContentId::from_digest(&id.digest()), id);
        assert_eq!(data_encoding::HEXLOWER.encode(&id.digest()), ABC);
    }

    #[test]
    fn parse_accepts_exactly_the_regex() {
        let ok = format!("sha256:{ABC}");
        assert_eq!(
            ok.parse::<ContentId>().map(|c| c.to_string()),
            Ok(ok.clone())
        );

        assert_eq!(ABC.parse::<ContentId>(), Err(ContentIdError::MissingPrefix));
        assert_eq!(
            format!("SHA256:{ABC}").parse::<ContentId>(),
            Err(ContentIdError::MissingPrefix)
        );
        assert_eq!(
            format!("sha256:{}", ABC.to_uppercase()).parse::<ContentId>(),
            Err(ContentIdError::InvalidDigit { found: 'B' })
        );
        assert_eq!(
            format!("sha256:{}", &ABC[..63]).parse::<ContentId>(),
            Err(ContentIdError::WrongLength { actual: 63 })
        );
        assert_eq!(
            format!("sha256:{ABC}0").parse::<ContentId>(),
            Err(ContentIdError::WrongLength { actual: 65 })
        );
        assert_eq!(
            format!("sha256:{ABC}\n").parse::<ContentId>(),
            Err(ContentIdError::InvalidDigit { found: '\n' })
        );
        assert_eq!(
            format!(" sha256:{ABC}").parse::<ContentId>(),
            Err(ContentIdError::MissingPrefix)
        );
        assert!("sha256:".parse::<ContentId>().is_err());
    }

    #[test]
    fn without_prefix_drops_one_leading_prefix_and_checks_nothing() {
        assert_eq!(ContentId::without_prefix(&format!("sha256:{ABC}")), ABC);
        assert_eq!(ContentId::without_prefix(ABC), ABC);
        assert_eq!(ContentId::without_prefix("sha256:sha256:x"), "sha256:x");
        assert_eq!(ContentId::without_prefix("SHA256:x"), "SHA256:x");
        assert_eq!(ContentId::without_prefix(""), "");
    }

    #[test]
    fn normalizing_parse_folds_case_and_an_optional_prefix_to_one_text() {
        let id = ContentId::of_bytes(b"abc");
        for text in [
            format!("sha256:{ABC}"),
            format!("sha256:{}", ABC.to_uppercase()),
            ABC.to_owned(),
            ABC.to_uppercase(),
        ] {
            assert_eq!(
                ContentId::parse_normalizing(&text).as_ref(),
                Ok(&id),
                "{text}"
            );
        }
        assert_eq!(ContentId::from_hex(&ABC.to_uppercase()).as_ref(), Ok(&id));
        assert_eq!(ContentId::from_lowercase_hex(ABC).as_ref(), Ok(&id));
        assert_eq!(
            ContentId::from_lowercase_hex(&ABC.to_uppercase()),
            Err(ContentIdError::InvalidDigit { found: 'B' })
        );
        assert_eq!(
            ContentId::parse_normalizing("sha256:xyz"),
            Err(ContentIdError::InvalidDigit { found: 'x' })
        );
        assert_eq!(
            ContentId::parse_normalizing(&ABC[..63]),
            Err(ContentIdError::WrongLength { actual: 63 })
        );
        assert!(ContentId::parse_normalizing(&format!("SHA256:{ABC}")).is_err());
        assert!(ContentId::parse_normalizing("").is_err());
    }

    #[test]
    fn is_valid_is_the_strict_form() {
        assert!(ContentId::is_valid(&format!("sha256:{ABC}")));
        assert!(!ContentId::is_valid(&format!(
            "sha256:{}",
            ABC.to_uppercase()
        )));
        assert!(!ContentId::is_valid(ABC));
    }

    #[test]
    fn error_messages_restate_the_required_form() {
        let err = "sha256:abc"
            .parse::<ContentId>()
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "content id has 3 hex digits after \"sha256:\" but needs exactly 64 (expected sha256:[0-9a-f]{64})"
            )
        );
    }

    #[test]
    fn serde_is_a_plain_string_and_validates() {
        let id = ContentId::of_bytes(b"");
        let text = serde_json::to_string(&id).unwrap_or_default();
        assert_eq!(text, format!("\"sha256:{EMPTY}\""));
        assert_eq!(serde_json::from_str::<ContentId>(&text).ok(), Some(id));
        assert!(serde_json::from_str::<ContentId>("\"sha256:XYZ\"").is_err());
        assert!(serde_json::from_str::<ContentId>("42").is_err());
    }
}

/// Generated input: exactly one text names a digest; the lenient reading folds what it
/// accepts to that text; nothing panics.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    fn check(text: &str) -> Result<(), TestCaseError> {
        if let Ok(id) = text.parse::<ContentId>() {
            prop_assert_eq!(id.as_str(), text);
            prop_assert_eq!(ContentId::from_digest(&id.digest()), id.clone());
        }
        if let Ok(id) = ContentId::parse_normalizing(text) {
            prop_assert!(ContentId::is_valid(id.as_str()));
            let bare = text.strip_prefix(PREFIX).unwrap_or(text);
            prop_assert_eq!(id.hex(), bare.to_ascii_lowercase());
        }
        if let Ok(id) = ContentId::from_lowercase_hex(text) {
            prop_assert_eq!(id.hex(), text);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(crate::proptest_config())]

        #[test]
        fn any_text_is_refused_or_canonical(text in any::<String>()) {
            check(&text)?;
        }

        #[test]
        fn id_looking_text_is_refused_or_canonical(text in "(sha256:|SHA256:|sha256|)[0-9a-fA-Fg\n ]{62,66}") {
            check(&text)?;
        }

        #[test]
        fn a_digest_round_trips(digest in any::<[u8; 32]>()) {
            let id = ContentId::from_digest(&digest);
            prop_assert_eq!(id.digest(), digest);
            prop_assert_eq!(id.as_str().parse::<ContentId>(), Ok(id.clone()));
            let upper = id.hex().to_ascii_uppercase();
            prop_assert_eq!(ContentId::parse_normalizing(&upper), Ok(id.clone()));
            if upper != id.hex() {
                let text = format!("sha256:{upper}");
                prop_assert!(text.parse::<ContentId>().is_err());
            }
        }

        #[test]
        fn an_id_of_bytes_matches_only_them(bytes in any::<Vec<u8>>(), other in any::<Vec<u8>>()) {
            let id = ContentId::of_bytes(&bytes);
            prop_assert!(id.matches(&bytes));
            prop_assert_eq!(id.matches(&other), bytes == other);
        }
    }
}
