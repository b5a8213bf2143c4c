//! Subject keys and the original's repository paths (digest §2).
//!
//! A subject is `(kind, id)`; its key is the id normalised (`Foo Bar` and `foo-bar` share one
//! key, as in the original). The paths are the ones CogniRelay answers with (`path`,
//! `archived_path`, …); Noema stores elsewhere but speaks these names.

use noema_core::content_id::sha256_hex;

use super::error::ContinuityError;
use super::model::SubjectKind;
use super::text::{py_prefix, py_strip};

pub const CONTINUITY_DIR: &str = "memory/continuity";
pub const COLD_DIR: &str = "memory/continuity/cold";
pub const COLD_INDEX_DIR: &str = "memory/continuity/cold/index";
pub const REFRESH_STATE_PATH: &str = "memory/continuity/refresh_state.json";
pub const RETENTION_STATE_PATH: &str = "memory/continuity/retention_state.json";
pub const NORMALIZED_EMPTY: &str = "Normalized subject_id is empty";

/// Top-level directories a repo-relative path may start with.
pub const ALLOWED_TOP_LEVEL: &[&str] = &[
    "journal",
    "essays",
    "projects",
    "memory",
    "messages",
    "peers",
    "snapshots",
    "tasks",
    "patches",
    "runs",
    "index",
    "archive",
    "config",
    "logs",
    "backups",
];

/// trim → lowercase → runs outside `[a-z0-9._-]` become `-` → strip `-` → first 120 → strip `-`.
pub fn normalize_subject_id(subject_id: &str) -> Result<String, ContinuityError> {
    let lowered = py_strip(subject_id).to_lowercase();
    let mut replaced = String::with_capacity(lowered.len());
    let mut in_run = false;
    for c in lowered.chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-') {
            replaced.push(c);
            in_run = false;
        } else if !in_run {
            replaced.push('-');
            in_run = true;
        }
    }
    let trimmed = replaced.trim_matches('-');
    if trimmed.is_empty() {
        return Err(ContinuityError::invalid(NORMALIZED_EMPTY));
    }
    let cut = py_prefix(trimmed, 120).trim_matches('-');
    if cut.is_empty() {
        return Err(ContinuityError::invalid(NORMALIZED_EMPTY));
    }
    Ok(cut.to_owned())
}

/// A subject as the original addresses it: kind plus normalised key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SubjectKey {
    pub kind: SubjectKind,
    pub key: String,
}

impl SubjectKey {
    pub fn new(kind: SubjectKind, subject_id: &str) -> Result<SubjectKey, ContinuityError> {
        Ok(SubjectKey {
            kind,
            key: normalize_subject_id(subject_id)?,
        })
    }

    /// `<kind>-<key>`, the stem of every file name of this subject.
    pub fn stem(&self) -> String {
        format!("{}-{}", self.kind, self.key)
    }

    /// `memory/continuity/<kind>-<key>.json`.
    pub fn active_path(&self) -> String {
        format!("{CONTINUITY_DIR}/{}.json", self.stem())
    }

    /// `memory/continuity/fallback/<kind>-<key>.json`.
    pub fn fallback_path(&self) -> String {
        format!("{CONTINUITY_DIR}/fallback/{}.json", self.stem())
    }

    /// The subject whose active file (`false`) or fallback file (`true`) `path` (normalised)
    /// names, if it names one: `memory/continuity[/fallback]/<kind>-<key>.json` with a key
    /// in its normalised form.
    pub fn of_capsule_file(path: &str) -> Option<(SubjectKey, bool)> {
        let rest = path.strip_prefix(CONTINUITY_DIR)?.strip_prefix('/')?;
        let (rest, fallback) = match rest.strip_prefix("fallback/") {
            Some(rest) => (rest, true),
            None => (rest, false),
        };
        let (kind, key) = rest.strip_suffix(".json")?.split_once('-')?;
        let kind = SubjectKind::parse(kind)?;
        let normal = normalize_subject_id(key).ok()?;
        (normal == key).then_some((SubjectKey { kind, key: normal }, fallback))
    }

    /// `memory/continuity/archive/<kind>-<key>-<YYYYMMDDTHHMMSSZ>.json`.
    pub fn archive_path(&self, compact_timestamp: &str) -> String {
        format!(
            "{CONTINUITY_DIR}/archive/{}-{compact_timestamp}.json",
            self.stem()
        )
    }

    /// `continuity_<sha256 of "<kind>:<key>">`, the original's lock id.
    pub fn lock_id(&self) -> String {
        let hex = sha256_hex(format!("{}:{}", self.kind, self.key).as_bytes());
        format!("continuity_{hex}")
    }
}

/// The original's check of an archive path given to the cold tier.
pub fn validate_archive_path(path: &str) -> Result<String, ContinuityError> {
    let normalized = py_strip(path);
    if !normalized.starts_with(&format!("{CONTINUITY_DIR}/archive/"))
        || !normalized.ends_with(".json")
    {
        return Err(ContinuityError::invalid(
            "source_archive_path must be under memory/continuity/archive/",
        ));
    }
    Ok(normalized.to_owned())
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// `memory/continuity/cold/<archive file name>.gz`.
pub fn cold_storage_path(source_archive_path: &str) -> Result<String, ContinuityError> {
    let archive = validate_archive_path(source_archive_path)?;
    Ok(format!("{COLD_DIR}/{}.gz", file_name(&archive)))
}

/// `memory/continuity/cold/index/<archive stem>.md`.
pub fn cold_stub_path(source_archive_path: &str) -> Result<String, ContinuityError> {
    let archive = validate_archive_path(source_archive_path)?;
    let name = file_name(&archive);
    let stem = name.strip_suffix(".json").unwrap_or(name);
    Ok(format!("{COLD_INDEX_DIR}/{stem}.md"))
}

/// The archive path a cold payload or stub belongs to.
pub fn archive_path_from_cold_artifact(path: &str) -> Result<String, ContinuityError> {
    let rel = py_strip(path);
    if let Some(name) = rel
        .strip_prefix(&format!("{COLD_INDEX_DIR}/"))
        .and_then(|rest| rest.strip_suffix(".md"))
    {
        let stem = file_name(name);
        return Ok(format!("{CONTINUITY_DIR}/archive/{stem}.json"));
    }
    if rel.starts_with(&format!("{COLD_DIR}/")) && rel.ends_with(".json.gz") {
        let name = file_name(rel);
        return Ok(format!(
            "{CONTINUITY_DIR}/archive/{}",
            &name[..name.len() - 3]
        ));
    }
    Err(ContinuityError::invalid(
        "Invalid continuity cold artifact path",
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// Expected keys from the original's `_normalize_subject_id` (CPython 3.12).
    #[test]
    fn subject_ids_normalise_like_the_original() {
        let cases: &[(&str, Option<&str>)] = &[
            ("Alice", Some("alice")),
            ("  Foo Bar  ", Some("foo-bar")),
            ("foo-bar", Some("foo-bar")),
            ("a//b??c", Some("a-b-c")),
            ("--x--", Some("x")),
            ("Ünïcode Näme", Some("n-code-n-me")),
            ("a.b_c-d", Some("a.b_c-d")),
            ("???", None),
            ("   ", None),
            ("İ", Some("i")),
            ("\u{1f}a\u{1f}", Some("a")),
        ];
        for (id, want) in cases {
            assert_eq!(normalize_subject_id(id).ok().as_deref(), *want, "{id:?}");
        }
        let long = format!("{}-{}", "a".repeat(119), "b".repeat(10));
        assert_eq!(normalize_subject_id(&long).unwrap(), "a".repeat(119));
        assert_eq!(
            normalize_subject_id("???").unwrap_err().to_string(),
            "Normalized subject_id is empty"
        );
    }

    #[test]
    fn paths_follow_the_original_layout() {
        let subject = SubjectKey::new(SubjectKind::Thread, "Launch Plan").unwrap();
        assert_eq!(
            subject.active_path(),
            "memory/continuity/thread-launch-plan.json"
        );
        assert_eq!(
            subject.fallback_path(),
            "memory/continuity/fallback/thread-launch-plan.json"
        );
        let archive = subject.archive_path("20250102T030405Z");
        assert_eq!(
            archive,
            "memory/continuity/archive/thread-launch-plan-20250102T030405Z.json"
        );
        assert_eq!(
            cold_storage_path(&archive).unwrap(),
            "memory/continuity/cold/thread-launch-plan-20250102T030405Z.json.gz"
        );
        assert_eq!(
            cold_stub_path(&archive).unwrap(),
            "memory/continuity/cold/index/thread-launch-plan-20250102T030405Z.md"
        );
        assert_eq!(
            archive_path_from_cold_artifact(&cold_stub_path(&archive).unwrap()).unwrap(),
            archive
        );
        assert_eq!(
            archive_path_from_cold_artifact(&cold_storage_path(&archive).unwrap()).unwrap(),
            archive
        );
        assert_eq!(
            cold_stub_path("memory/x.json").unwrap_err().to_string(),
            "source_archive_path must be under memory/continuity/archive/"
        );
        // _continuity_subject_lock_id("thread", "Launch Plan") in the original.
        assert_eq!(
            subject.lock_id(),
            "continuity_6baf256f3b82e13429083c5f75f1135e1169a8da1c2a84824c750768e8eeef68"
        );
    }
}

/// Generated subject ids: normalisation never panics, and a key is non-empty, at most 120
/// characters of `[a-z0-9._-]` not starting or ending with `-`, and its own key.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    fn check(id: &str) -> Result<(), TestCaseError> {
        match normalize_subject_id(id) {
            Ok(key) => {
                prop_assert!(!key.is_empty() && key.chars().count() <= 120);
                prop_assert!(key.chars().all(|c| c.is_ascii_lowercase()
                    || c.is_ascii_digit()
                    || matches!(c, '.' | '_' | '-')));
                prop_assert!(!key.starts_with('-') && !key.ends_with('-'));
                prop_assert_eq!(normalize_subject_id(&key).unwrap(), key);
            }
            Err(err) => prop_assert_eq!(err.to_string(), NORMALIZED_EMPTY),
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(crate::proptest_config())]

        #[test]
        fn any_text_is_a_key_or_refused(id in any::<String>()) {
            check(&id)?;
        }

        #[test]
        fn long_and_dashed_ids_are_keys_or_refused(id in "[ A-Za-z0-9._\\-\u{e9}\u{130}\u{1e9e}]{0,200}") {
            check(&id)?;
        }
    }
}
