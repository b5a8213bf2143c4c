//! Moving artifacts between tiers (digest §9): archive and delete responses, and the
//! retention-apply job's per-path statuses and summary.

use super::error::ContinuityError;
use super::json::{Json, JsonObject};
use super::subject::{cold_storage_path, cold_stub_path, validate_archive_path};
use super::write::revision_json;

/// `POST /v1/continuity/archive`'s response.
pub fn archive_response(archived_path: &str, active_path: &str, revision: Option<&str>) -> Json {
    let mut body = JsonObject::new();
    body.insert("ok", Json::Bool(true));
    body.insert("archived_path", Json::from(archived_path));
    body.insert("removed_active_path", Json::from(active_path));
    body.insert("durable", Json::Bool(true));
    body.insert("latest_commit", revision_json(revision));
    body.insert("warnings", Json::Array(vec![]));
    Json::Object(body)
}

/// What a delete selects, in the original's order: active, fallback, then every archive of
/// the subject by name; missing active/fallback paths are reported, missing archives are not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeletePlan {
    pub deleted_paths: Vec<String>,
    pub missing_paths: Vec<String>,
}

/// `POST /v1/continuity/delete`'s response.
pub fn delete_response(plan: &DeletePlan, revision: Option<&str>) -> Json {
    let list =
        |paths: &[String]| Json::Array(paths.iter().map(|p| Json::from(p.as_str())).collect());
    let mut body = JsonObject::new();
    body.insert("ok", Json::Bool(true));
    body.insert("deleted_paths", list(&plan.deleted_paths));
    body.insert("missing_paths", list(&plan.missing_paths));
    body.insert("durable", Json::Bool(true));
    body.insert("latest_commit", revision_json(revision));
    body.insert("warnings", Json::Array(vec![]));
    Json::Object(body)
}

/// The status of one path in a retention apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyStatus {
    ColdStored,
    SkippedAlreadyCold,
    SkippedMissing,
    SkippedNotStale,
    FailedConflict,
    FailedAuthorization,
    FailedInvalidArchive,
    FailedInternal,
}

impl ApplyStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ApplyStatus::ColdStored => "cold_stored",
            ApplyStatus::SkippedAlreadyCold => "skipped_already_cold",
            ApplyStatus::SkippedMissing => "skipped_missing",
            ApplyStatus::SkippedNotStale => "skipped_not_stale",
            ApplyStatus::FailedConflict => "failed_conflict",
            ApplyStatus::FailedAuthorization => "failed_authorization",
            ApplyStatus::FailedInvalidArchive => "failed_invalid_archive",
            ApplyStatus::FailedInternal => "failed_internal",
        }
    }

    pub fn ok(self) -> bool {
        !self.as_str().starts_with("failed_")
    }

    /// The original's detail for the statuses it words itself.
    pub fn default_detail(self) -> &'static str {
        match self {
            ApplyStatus::ColdStored => "Cold-stored archived continuity envelope",
            ApplyStatus::SkippedAlreadyCold => "Matching cold payload and stub already exist",
            ApplyStatus::SkippedMissing => "Continuity archive envelope not found",
            ApplyStatus::SkippedNotStale => {
                "Archive is not stale under current retention threshold"
            }
            ApplyStatus::FailedConflict => "Partial or conflicting cold artifact state",
            _ => "",
        }
    }

    /// The status an error of the cold-store step maps to (`already_cold`: whether the
    /// archive is cold by now, for a 409).
    pub fn of_error(error: &ContinuityError, already_cold: bool) -> ApplyStatus {
        match error.http_status() {
            400 => ApplyStatus::FailedInvalidArchive,
            403 => ApplyStatus::FailedAuthorization,
            404 => ApplyStatus::SkippedMissing,
            409 if already_cold => ApplyStatus::SkippedAlreadyCold,
            409 => ApplyStatus::FailedConflict,
            _ => ApplyStatus::FailedInternal,
        }
    }
}

/// One row of `results`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyResult {
    pub source_archive_path: String,
    pub status: ApplyStatus,
    pub detail: String,
}

impl ApplyResult {
    pub fn new(path: &str, status: ApplyStatus) -> ApplyResult {
        ApplyResult {
            source_archive_path: path.to_owned(),
            status,
            detail: status.default_detail().to_owned(),
        }
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> ApplyResult {
        self.detail = detail.into();
        self
    }

    fn to_json(&self) -> Json {
        // Paths are named only once the archive path is valid.
        let valid = validate_archive_path(&self.source_archive_path).is_ok();
        let cold = |f: fn(&str) -> Result<String, ContinuityError>| {
            if valid {
                f(&self.source_archive_path).map_or(Json::Null, Json::String)
            } else {
                Json::Null
            }
        };
        let mut row = JsonObject::new();
        row.insert(
            "source_archive_path",
            Json::from(self.source_archive_path.as_str()),
        );
        row.insert("ok", Json::Bool(self.status.ok()));
        row.insert("status", Json::from(self.status.as_str()));
        row.insert("detail", Json::from(self.detail.as_str()));
        row.insert("cold_storage_path", cold(cold_storage_path));
        row.insert("cold_stub_path", cold(cold_stub_path));
        Json::Object(row)
    }
}

/// The paths to process (first occurrence of each) and a warning per repeat.
pub fn dedup_apply_paths(paths: &[String]) -> (Vec<String>, Vec<String>) {
    let mut unique: Vec<String> = Vec::new();
    let mut warnings = Vec::new();
    for path in paths {
        if unique.contains(path) {
            warnings.push(format!("duplicate_source_archive_path:{path}"));
        } else {
            unique.push(path.clone());
        }
    }
    (unique, warnings)
}

/// The retention-apply job result: `{ok, requested, unique_requested, processed,
/// cold_stored, failed, durable, results, warnings}`.
pub fn retention_apply_response(
    requested: usize,
    unique_requested: usize,
    results: &[ApplyResult],
    warnings: &[String],
) -> Json {
    let failed = results.iter().filter(|r| !r.status.ok()).count();
    let cold_stored = results
        .iter()
        .filter(|r| r.status == ApplyStatus::ColdStored)
        .count();
    let mut body = JsonObject::new();
    body.insert("ok", Json::Bool(failed == 0));
    body.insert("requested", Json::from(requested));
    body.insert("unique_requested", Json::from(unique_requested));
    body.insert("processed", Json::from(results.len()));
    body.insert("cold_stored", Json::from(cold_stored));
    body.insert("failed", Json::from(failed));
    body.insert("durable", Json::Bool(true));
    body.insert(
        "results",
        Json::Array(results.iter().map(ApplyResult::to_json).collect()),
    );
    body.insert(
        "warnings",
        Json::Array(warnings.iter().map(|w| Json::from(w.as_str())).collect()),
    );
    Json::Object(body)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::domain::json::to_py_json;

    #[test]
    fn retention_apply_reports_each_path_and_counts_failures() {
        let paths: Vec<String> = [
            "memory/continuity/archive/user-a-20250101T000000Z.json",
            "memory/continuity/archive/user-a-20250101T000000Z.json",
            "elsewhere.json",
        ]
        .map(str::to_owned)
        .to_vec();
        let (unique, warnings) = dedup_apply_paths(&paths);
        assert_eq!(unique.len(), 2);
        assert_eq!(
            warnings,
            [
                "duplicate_source_archive_path:memory/continuity/archive/user-a-20250101T000000Z.json"
            ]
        );
        let results = vec![
            ApplyResult::new(&unique[0], ApplyStatus::ColdStored),
            ApplyResult::new(&unique[1], ApplyStatus::FailedInvalidArchive)
                .with_detail("source_archive_path must be under memory/continuity/archive/"),
        ];
        let body = retention_apply_response(3, 2, &results, &warnings);
        assert_eq!(
            to_py_json(&body),
            concat!(
                r#"{"ok":false,"requested":3,"unique_requested":2,"processed":2,"cold_stored":1,"failed":1,"durable":true,"results":["#,
                r#"{"source_archive_path":"memory/continuity/archive/user-a-20250101T000000Z.json","ok":true,"status":"cold_stored","detail":"Cold-stored archived continuity envelope","cold_storage_path":"memory/continuity/cold/user-a-20250101T000000Z.json.gz","cold_stub_path":"memory/continuity/cold/index/user-a-20250101T000000Z.md"},"#,
                r#"{"source_archive_path":"elsewhere.json","ok":false,"status":"failed_invalid_archive","detail":"source_archive_path must be under memory/continuity/archive/","cold_storage_path":null,"cold_stub_path":null}],"#,
                r#""warnings":["duplicate_source_archive_path:memory/continuity/archive/user-a-20250101T000000Z.json"]}"#
            )
        );
        assert_eq!(
            ApplyStatus::of_error(&ContinuityError::stale_write(), true),
            ApplyStatus::SkippedAlreadyCold
        );
    }
}
