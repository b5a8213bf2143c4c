//! The id grammars of the world: human ids (environment labels, workflow node ids, ambient
//! source ids, scenario labels, world slugs) and entity ids.
//!
//! Both are `[a-z0-9][a-z0-9_-]{0,63}`: lowercase so that one name never has two spellings,
//! and no normalisation anywhere — an id that does not match is refused, never folded.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

/// The pattern both id kinds follow; the built-in JSON Schemas carry the same text (a test
/// keeps them equal).
pub const ID_PATTERN: &str = "^[a-z0-9][a-z0-9_-]{0,63}$";

/// The longest id.
pub const ID_MAX_LEN: usize = 64;

/// Why a text is not an id.
pub fn id_problem(text: &str) -> Option<String> {
    let first = text.bytes().next();
    if first.is_none() {
        return Some("must not be empty".to_owned());
    }
    if text.len() > ID_MAX_LEN {
        return Some(format!(
            "is {} characters long; the longest id is {ID_MAX_LEN}",
            text.len()
        ));
    }
    if !matches!(first, Some(b'a'..=b'z' | b'0'..=b'9')) {
        return Some(format!(
            "{text:?} must start with a lowercase letter or a digit"
        ));
    }
    if let Some(bad) = text
        .chars()
        .find(|c| !matches!(c, 'a'..='z' | '0'..='9' | '_' | '-'))
    {
        return Some(format!(
            "{text:?} contains {bad:?}; ids use lowercase letters, digits, '_' and '-'"
        ));
    }
    None
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// The id, if `text` follows the grammar.
            pub fn parse(text: &str) -> Result<Self, String> {
                match id_problem(text) {
                    None => Ok($name(text.to_owned())),
                    Some(problem) => Err(problem),
                }
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                $name::parse(&text).map_err(serde::de::Error::custom)
            }
        }
    };
}

id_type!(
    /// A human-facing id: environment labels, scenario labels, workflow node ids, ambient
    /// source ids, world slugs.
    HumanId
);

id_type!(
    /// An entity's id within a world.
    EntityId
);

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    #[test]
    fn the_grammar_accepts_the_seeds_ids() {
        for id in [
            "bob",
            "vending_machine",
            "park_pa_speaker",
            "bob_phone",
            "park",
            "act",
            "park_weather",
            "chat_router",
            "0",
            "a-b",
        ] {
            assert!(HumanId::parse(id).is_ok(), "{id}");
            assert!(EntityId::parse(id).is_ok(), "{id}");
        }
    }

    #[test]
    fn the_grammar_refuses_without_normalising() {
        for (id, needle) in [
            ("", "empty"),
            ("Bob", "start with"),
            ("bob smith", "contains ' '"),
            ("bOb", "contains 'O'"),
            ("_bob", "start with"),
            ("bob.phone", "contains '.'"),
        ] {
            let problem = id_problem(id).unwrap_or_default();
            assert!(problem.contains(needle), "{id:?}: {problem}");
        }
        let long = "a".repeat(65);
        assert!(id_problem(&long).is_some());
        assert!(id_problem(&"a".repeat(64)).is_none());
    }

    #[test]
    fn serde_validates() {
        assert!(serde_json::from_str::<EntityId>("\"bob\"").is_ok());
        assert!(serde_json::from_str::<EntityId>("\"Bob\"").is_err());
        assert_eq!(
            serde_json::to_string(&HumanId::parse("park").unwrap_or_else(|e| panic!("{e}")))
                .ok()
                .as_deref(),
            Some("\"park\"")
        );
    }
}
