//! The environment sources read: `url_env`, `base_url_env` and `api_key_env` name variables
//! of the world service's process (D22: whether a URL points at a toy or a real service is
//! the environment's business). `[world] source_env` values are consulted first, so one
//! configuration file can carry a whole setup.

use std::collections::BTreeMap;

#[derive(Debug, Clone, Default)]
pub struct SourceEnv {
    overlay: BTreeMap<String, String>,
}

impl SourceEnv {
    /// Names are compared without regard to case in the overlay, because configuration
    /// read from `NOEMA__WORLD__SOURCE_ENV__…` variables arrives lowercased.
    pub fn new(overlay: BTreeMap<String, String>) -> SourceEnv {
        SourceEnv {
            overlay: overlay
                .into_iter()
                .map(|(name, value)| (name.to_ascii_uppercase(), value))
                .collect(),
        }
    }

    /// The value of `name`, if set and not empty.
    pub fn var(&self, name: &str) -> Option<String> {
        self.overlay
            .get(&name.to_ascii_uppercase())
            .cloned()
            .or_else(|| std::env::var(name).ok())
            .filter(|value| !value.is_empty())
    }
}
