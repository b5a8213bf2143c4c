//! The policy in force: loaded at start (a missing or invalid file refuses the start with
//! "risk matrix not loaded: …"), reloaded on SIGHUP and by `ReloadPolicy`. A reload that
//! fails keeps the running policy and is remembered, so the release check names it until
//! a reload succeeds.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde_json::Value;
use time::OffsetDateTime;

use crate::domain::policy::{AntiAbuseParams, DEFAULT_POLICY_TEXT, PolicyError, RiskPolicy};

/// What configuration overrides in the policy file.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Overrides {
    pub gold_ratio: Option<f64>,
    pub anti_abuse: Option<AntiAbuseParams>,
}

/// A policy as loaded: the overrides are applied to the document before it is validated,
/// so the hash in each risk report is that of the rules that decided it.
#[derive(Debug)]
pub struct LoadedPolicy {
    pub policy: RiskPolicy,
    /// The file, or `builtin:default`.
    pub source: String,
    pub loaded_at: OffsetDateTime,
    /// The effective document.
    pub document: Value,
}

/// The name of the shipped policy as a source.
pub const BUILTIN_SOURCE: &str = "builtin:default";

#[derive(Debug)]
pub struct PolicyHolder {
    file: Option<PathBuf>,
    overrides: Overrides,
    current: RwLock<Arc<LoadedPolicy>>,
    last_error: RwLock<Option<String>>,
}

impl PolicyHolder {
    /// Loads the policy from `file` (the shipped one when `None`).
    pub fn load(file: Option<PathBuf>, overrides: Overrides) -> Result<PolicyHolder, PolicyError> {
        let loaded = read(file.as_deref(), overrides)?;
        Ok(PolicyHolder {
            file,
            overrides,
            current: RwLock::new(Arc::new(loaded)),
            last_error: RwLock::new(None),
        })
    }

    /// The policy in force.
    pub fn current(&self) -> Arc<LoadedPolicy> {
        match self.current.read() {
            Ok(current) => Arc::clone(&current),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// The policy file, if one is configured.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Reads the policy again. On failure the running policy stays, and the failure is
    /// remembered until a reload succeeds.
    pub fn reload(&self) -> Result<Arc<LoadedPolicy>, PolicyError> {
        match read(self.file.as_deref(), self.overrides) {
            Ok(loaded) => {
                let loaded = Arc::new(loaded);
                match self.current.write() {
                    Ok(mut current) => *current = Arc::clone(&loaded),
                    Err(poisoned) => *poisoned.into_inner() = Arc::clone(&loaded),
                }
                self.set_error(None);
                Ok(loaded)
            }
            Err(err) => {
                self.set_error(Some(err.to_string()));
                Err(err)
            }
        }
    }

    /// Why the last reload failed, while no later one succeeded.
    pub fn last_error(&self) -> Option<String> {
        match self.last_error.read() {
            Ok(e) => e.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn set_error(&self, error: Option<String>) {
        match self.last_error.write() {
            Ok(mut e) => *e = error,
            Err(poisoned) => *poisoned.into_inner() = error,
        }
    }
}

fn read(file: Option<&Path>, overrides: Overrides) -> Result<LoadedPolicy, PolicyError> {
    let (text, source) = match file {
        None => (DEFAULT_POLICY_TEXT.to_owned(), BUILTIN_SOURCE.to_owned()),
        Some(path) => {
            let shown = path.display().to_string();
            let text = std::fs::read_to_string(path).map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    PolicyError::Missing(shown.clone())
                } else {
                    PolicyError::Unreadable {
                        path: shown.clone(),
                        reason: e.to_string(),
                    }
                }
            })?;
            (text, shown)
        }
    };
    // Duplicate keys are refused, as `RiskPolicy::from_json_text` does.
    noema_core::jcs::canonicalize_str(&text).map_err(|e| PolicyError::NotJson(e.to_string()))?;
    let mut document: Value =
        serde_json::from_str(&text).map_err(|e| PolicyError::NotJson(e.to_string()))?;
    if let Some(object) = document.as_object_mut() {
        if let Some(ratio) = overrides.gold_ratio
            && let Some(gold) = object.get_mut("gold").and_then(Value::as_object_mut)
        {
            gold.insert("ratio".into(), Value::from(ratio));
        }
        if let Some(params) = overrides.anti_abuse {
            let params =
                serde_json::to_value(params).map_err(|e| PolicyError::NotJson(e.to_string()))?;
            object.insert("anti_abuse".into(), params);
        }
    }
    let policy = RiskPolicy::from_value(document.clone())?;
    Ok(LoadedPolicy {
        policy,
        source,
        loaded_at: OffsetDateTime::now_utc(),
        document,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_broken_file_is_not_loaded_and_a_failed_reload_keeps_the_policy() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.json");
        let err = PolicyHolder::load(Some(path.clone()), Overrides::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "risk matrix not loaded: policy file {} does not exist",
                path.display()
            )
        );

        std::fs::write(&path, DEFAULT_POLICY_TEXT).unwrap();
        let holder = PolicyHolder::load(Some(path.clone()), Overrides::default()).unwrap();
        let first = holder.current();
        assert_eq!(first.source, path.display().to_string());

        std::fs::write(&path, "{\"schema_version\": \"0.1\"}").unwrap();
        let err = holder.reload().unwrap_err();
        assert!(err.to_string().starts_with("risk matrix not loaded"));
        assert_eq!(holder.current().policy.hash(), first.policy.hash());
        assert_eq!(holder.last_error(), Some(err.to_string()));

        std::fs::write(
            &path,
            DEFAULT_POLICY_TEXT.replace("\"ttl_seconds\": 3600", "\"ttl_seconds\": 60"),
        )
        .unwrap();
        let reloaded = holder.reload().unwrap();
        assert_ne!(reloaded.policy.hash(), first.policy.hash());
        assert_eq!(reloaded.policy.document().approval.ttl_seconds, 60);
        assert_eq!(holder.last_error(), None);
    }

    #[test]
    fn overrides_are_part_of_the_policy_and_checked_like_it() {
        let params = AntiAbuseParams {
            duplicate_vote_cooldown_seconds: 0,
            max_votes_per_submission: 3,
            burst_window_seconds: 60,
            burst_max_votes: 5,
        };
        let holder = PolicyHolder::load(
            None,
            Overrides {
                gold_ratio: Some(0.05),
                anti_abuse: Some(params),
            },
        )
        .unwrap();
        let loaded = holder.current();
        assert_eq!(loaded.source, BUILTIN_SOURCE);
        assert_eq!(loaded.policy.document().gold.ratio, 0.05);
        assert_eq!(loaded.policy.document().anti_abuse, params);
        assert_ne!(
            loaded.policy.hash(),
            RiskPolicy::default_policy().unwrap().hash()
        );

        let err = PolicyHolder::load(
            None,
            Overrides {
                gold_ratio: Some(0.2),
                anti_abuse: None,
            },
        )
        .unwrap_err();
        assert_eq!(err.field(), Some("gold.ratio"));
    }
}
