//! Secrets for tools: read only from the server's environment or from secret files, never
//! from a policy or a request, and scrubbed from everything a tool call returns.
//!
//! A policy names where a secret lives (`{"env": "WEBHOOK_TOKEN"}` or
//! `{"file": "/run/secrets/webhook"}`); the value is read when the tool runs, so rotating
//! a secret needs no policy change. Every text a runner hands back (response bodies,
//! output, error messages) passes through a [`Redactor`] holding the values it used.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What a redacted value is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Secrets shorter than this are not scrubbed from output: replacing every occurrence of
/// a one- or two-character value would mangle unrelated text while hiding nothing.
/// Such short secrets are refused when resolved instead.
pub const MIN_SECRET_LEN: usize = 8;

/// Where a secret's value is read from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum SecretSource {
    /// An environment variable of the server process.
    Env(String),
    /// A file (e.g. a mounted Kubernetes secret); one trailing newline is dropped.
    File(PathBuf),
}

impl fmt::Display for SecretSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretSource::Env(name) => write!(f, "environment variable {name}"),
            SecretSource::File(path) => write!(f, "secret file {}", path.display()),
        }
    }
}

/// Why a secret could not be read. The messages name the source, never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
pub enum SecretError {
    #[error("secret {0} is not set")]
    Missing(String),
    #[error("secret {0} is not valid UTF-8")]
    NotUtf8(String),
    #[error("secret {source_name} is shorter than {min} characters")]
    TooShort { source_name: String, min: usize },
    #[error("secret {source_name} cannot be read: {reason}")]
    Unreadable { source_name: String, reason: String },
}

impl SecretSource {
    /// Reads the value now.
    pub fn resolve(&self) -> Result<Secret, SecretError> {
        let name = self.to_string();
        let value = match self {
            SecretSource::Env(var) => match std::env::var(var) {
                Ok(value) => value,
                Err(std::env::VarError::NotPresent) => return Err(SecretError::Missing(name)),
                Err(std::env::VarError::NotUnicode(_)) => return Err(SecretError::NotUtf8(name)),
            },
            SecretSource::File(path) => match std::fs::read(path) {
                Ok(bytes) => {
                    let mut text =
                        String::from_utf8(bytes).map_err(|_| SecretError::NotUtf8(name.clone()))?;
                    if text.ends_with('\n') {
                        text.pop();
                        if text.ends_with('\r') {
                            text.pop();
                        }
                    }
                    text
                }
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                    return Err(SecretError::Missing(name));
                }
                Err(err) => {
                    return Err(SecretError::Unreadable {
                        source_name: name,
                        reason: err.kind().to_string(),
                    });
                }
            },
        };
        if value.is_empty() {
            return Err(SecretError::Missing(name));
        }
        if value.chars().count() < MIN_SECRET_LEN {
            return Err(SecretError::TooShort {
                source_name: name,
                min: MIN_SECRET_LEN,
            });
        }
        Ok(Secret(value))
    }
}

/// A secret's value. `Debug` never shows it; only [`Secret::expose`] does.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// A secret from a value already in hand (tests, or a caller that read it itself).
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// Replaces every occurrence of known secret values with [`REDACTED`].
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Longest first, so a secret that contains another is replaced whole.
    secrets: Vec<Secret>,
}

impl Redactor {
    pub fn new(secrets: impl IntoIterator<Item = Secret>) -> Redactor {
        let mut secrets: Vec<Secret> = secrets
            .into_iter()
            .filter(|s| s.0.chars().count() >= MIN_SECRET_LEN)
            .collect();
        secrets.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        secrets.dedup();
        Redactor { secrets }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every secret value replaced.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in &self.secrets {
            if out.contains(secret.expose()) {
                out = out.replace(secret.expose(), REDACTED);
            }
        }
        out
    }

    /// `value` with every secret replaced in every string, object keys included.
    pub fn redact_json(&self, value: serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        if self.secrets.is_empty() {
            return value;
        }
        match value {
            Value::String(s) => Value::String(self.redact(&s)),
            Value::Array(items) => {
                Value::Array(items.into_iter().map(|v| self.redact_json(v)).collect())
            }
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| (self.redact(&k), self.redact_json(v)))
                    .collect(),
            ),
            other => other,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn file_secrets_drop_one_trailing_newline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "s3cr3t-value\n").unwrap();
        let secret = SecretSource::File(path.clone()).resolve().unwrap();
        assert_eq!(secret.expose(), "s3cr3t-value");
        std::fs::write(&path, "s3cr3t-value\r\n").unwrap();
        assert_eq!(
            SecretSource::File(path.clone()).resolve().unwrap().expose(),
            "s3cr3t-value"
        );
    }

    #[test]
    fn missing_empty_and_short_secrets_are_errors_that_name_the_source_only() {
        let dir = tempfile::tempdir().unwrap();
        let missing = SecretSource::File(dir.path().join("nope"));
        assert!(matches!(missing.resolve(), Err(SecretError::Missing(_))));
        let short = dir.path().join("short");
        std::fs::write(&short, "abc").unwrap();
        let err = SecretSource::File(short).resolve().unwrap_err();
        assert!(matches!(err, SecretError::TooShort { min: 8, .. }));
        assert!(!err.to_string().contains("abc"), "{err}");
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        assert!(matches!(
            SecretSource::File(empty).resolve(),
            Err(SecretError::Missing(_))
        ));
        assert!(matches!(
            SecretSource::Env("NOEMA_TOOLS_TEST_SURELY_UNSET_VARIABLE".into()).resolve(),
            Err(SecretError::Missing(_))
        ));
    }

    #[test]
    fn env_secrets_come_from_the_process_environment() {
        // PATH is set wherever tests run and is longer than the minimum.
        let path = std::env::var("PATH").unwrap();
        let secret = SecretSource::Env("PATH".into()).resolve().unwrap();
        assert_eq!(secret.expose(), path);
    }

    #[test]
    fn debug_never_shows_the_value() {
        let secret = Secret::new("hunter2-hunter2");
        assert!(!format!("{secret:?}").contains("hunter2"));
    }

    #[test]
    fn redactor_replaces_every_occurrence_longest_first() {
        let r = Redactor::new([
            Secret::new("abcdefgh"),
            Secret::new("abcdefgh-and-more"),
            Secret::new("tiny"),
        ]);
        assert_eq!(
            r.redact("x abcdefgh-and-more y abcdefgh z tiny"),
            "x [redacted] y [redacted] z tiny"
        );
        assert_eq!(
            r.redact_json(json!({"abcdefgh": ["abcdefgh", 1, {"k": "pre-abcdefgh-post"}]})),
            json!({"[redacted]": ["[redacted]", 1, {"k": "pre-[redacted]-post"}]})
        );
    }
}
