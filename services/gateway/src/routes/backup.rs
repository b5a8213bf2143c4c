//! CogniRelay's backup drill (`POST /v1/backup/create`, `POST /v1/backup/restore-test`) on
//! its paths and in its shapes, answered from continuity's `CheckArtifacts`: every
//! continuity artifact of every tier counted and validated, bad ones reported in the
//! original's lists without failing the call.
//!
//! The original tars its repository into `backups/<id>.tar.gz` and restore-tests the tar.
//! Noema's backup of record is `noema backup` (database snapshots and objects, verified by
//! `noema restore`); these routes are the drill a CogniRelay client runs: `create` names a
//! backup the way the original does and answers the counts its manifest records, and
//! `restore-test` validates what a restore of that moment would hold — the artifacts as
//! they are now (`docs/continuity.md` says so).

use noema_continuity::domain::text::py_strip;
use noema_core::ErrorCode;
use noema_core::scopes::TENANT_METADATA;
use noema_proto::continuity::v1 as pb;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::continuity::{Original, authorise_ops, call, invalid_envelope, original};
use crate::error::{ApiError, ErrorStyle};
use crate::forward::{Caller, RawJson};
use crate::route::{Route, Routes, Verb};

const COGNIRELAY: Routes = Routes::new(
    "continuity",
    ErrorStyle::CogniRelay,
    "noema.continuity.v1.ContinuityService",
);

/// Where the original keeps its archives and manifests.
const BACKUPS_DIR: &str = "backups";

/// `POST /v1/backup/create` (CogniRelay's `BackupCreateRequest`).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreateInput {
    /// Repository prefixes the original archives; continuity is counted when they cover
    /// `memory/continuity` (the default list does).
    #[serde(default)]
    pub include_prefixes: Vec<String>,
    #[serde(default)]
    pub note: Option<String>,
}

/// `POST /v1/backup/restore-test` (CogniRelay's `BackupRestoreTestRequest`).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RestoreTestInput {
    /// `backups/<id>.tar.gz`, as `create` answered it.
    #[schemars(extend("pattern" = noema_continuity::domain::rules::BACKUP_PATH_PATTERN))]
    pub backup_path: String,
    /// Default true. Noema keeps no file index, so there is nothing to rebuild.
    #[serde(default = "yes")]
    #[schemars(schema_with = "lax_bool_schema")]
    pub verify_index_rebuild: bool,
    /// Default true: validate every continuity artifact.
    #[serde(default = "yes")]
    #[schemars(schema_with = "lax_bool_schema")]
    pub verify_continuity: bool,
}

fn yes() -> bool {
    true
}

/// A boolean as pydantic reads one ([`lax_bool`]).
fn lax_bool_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    use noema_continuity::domain::schema::{Ty, json_schema};
    schemars::Schema::try_from(json_schema(&Ty::Bool, &mut |_| Value::Null)).unwrap_or_default()
}

/// The body's top-level fields (raw), or the original's 422 for a body that is not an
/// object.
fn fields(bytes: &[u8]) -> Result<Map<String, Value>, ApiError> {
    serde_json::from_slice::<Map<String, Value>>(bytes)
        .map_err(|e| ApiError::malformed_body(format!("invalid JSON: {e}")))
}

/// Pydantic's lax reading of a `bool` field: `None` when absent, else the value or its
/// 422.
fn lax_bool(body: &Map<String, Value>, field: &str) -> Result<Option<bool>, ApiError> {
    let loc = format!("[\"body\",\"{field}\"]");
    let refuse = |kind: &str, msg: &str, value: &Value| {
        invalid_envelope(kind, &loc, msg, &value.to_string(), None)
    };
    match body.get(field) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(value @ Value::Number(n)) => match n.as_f64() {
            Some(0.0) => Ok(Some(false)),
            Some(1.0) => Ok(Some(true)),
            _ => Err(refuse(
                "bool_parsing",
                "Input should be a valid boolean, unable to interpret input",
                value,
            )),
        },
        Some(value @ Value::String(s)) => match s.to_ascii_lowercase().as_str() {
            "0" | "off" | "f" | "false" | "n" | "no" => Ok(Some(false)),
            "1" | "on" | "t" | "true" | "y" | "yes" => Ok(Some(true)),
            _ => Err(refuse(
                "bool_parsing",
                "Input should be a valid boolean, unable to interpret input",
                value,
            )),
        },
        Some(value) => Err(refuse(
            "bool_type",
            "Input should be a valid boolean",
            value,
        )),
    }
}

/// The original's 400 with a string detail.
fn bad_request(detail: &str) -> ApiError {
    original(
        ErrorCode::InvalidArgument,
        400,
        format!(
            "{{\"detail\":{}}}",
            serde_json::to_string(detail).unwrap_or_default()
        ),
    )
}

/// What `CheckArtifacts` answers, its blocks kept as the service wrote them (the
/// original's key order).
#[derive(Debug, Deserialize)]
struct Drill {
    continuity_counts: Box<RawValue>,
    continuity_validation: Box<RawValue>,
}

/// The drill of every tenant (a superuser, as the original's `admin:peers`), or of the
/// tenant the caller names with `x-noema-tenant` (its own with `continuity:admin`, any
/// with `admin:peers`).
async fn check(caller: &Caller) -> Result<Drill, ApiError> {
    let all_tenants = caller.header(TENANT_METADATA).is_empty();
    let (mut client, request) = call(caller, pb::CheckArtifactsRequest { all_tenants });
    let body = client.check_artifacts(request).await?.into_inner().body;
    serde_json::from_slice(&body).map_err(|_| internal("the artifact check is not JSON"))
}

fn internal(message: &str) -> ApiError {
    ApiError(noema_core::Failure::new(ErrorCode::Internal, message))
}

/// The answer of `POST /v1/backup/create`, in the original's key order.
#[derive(Debug, Serialize)]
struct Created<'a> {
    ok: bool,
    backup_id: &'a str,
    backup_path: String,
    manifest_path: String,
    /// Empty: nothing is written (Noema's backup of record is `noema backup`).
    committed_files: [(); 0],
    latest_commit: (),
    #[serde(skip_serializing_if = "Option::is_none")]
    continuity_counts: Option<&'a RawValue>,
}

/// The answer of `POST /v1/backup/restore-test`, in the original's key order.
#[derive(Debug, Serialize)]
struct RestoreTested<'a> {
    ok: bool,
    backup_path: &'a str,
    extracted_files: u64,
    extracted_prefixes: Vec<&'static str>,
    /// Null: Noema keeps no file index to rebuild.
    index_validation: (),
    continuity_validation: Option<&'a RawValue>,
    artifact_history_validation: HistoryValidation,
    segment_history_validation: SegmentValidation,
    registry_history_validation: HistoryValidation,
}

/// An artifact or registry history validation in the original's shape, with nothing to
/// check: Noema keeps no such history files.
#[derive(Debug, Default, Serialize)]
struct HistoryValidation {
    ok: bool,
    payloads: u64,
    cold_payloads: u64,
    stubs: u64,
    invalid_payloads: [(); 0],
    invalid_cold_payloads: [(); 0],
    invalid_stubs: [(); 0],
    missing_payloads: [(); 0],
    unmatched_payloads: [(); 0],
    mismatched_stubs: [(); 0],
    warnings: [(); 0],
}

/// The segment history validation, with no family to check.
#[derive(Debug, Default, Serialize)]
struct SegmentValidation {
    ok: bool,
    families_checked: u64,
    families: [(); 0],
}

fn answer(body: &impl Serialize) -> Result<Original, ApiError> {
    serde_json::to_vec(body)
        .map(Original)
        .map_err(|_| internal("the answer does not serialise"))
}

/// `backup_<YYYYMMDDTHHMMSSZ>_<8 hex>`, as the original names a backup.
fn backup_id() -> String {
    let now = time::OffsetDateTime::now_utc();
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!(
        "backup_{}_{}",
        noema_core::time::basic_seconds(now),
        &random[..8]
    )
}

/// One pydantic error item of a 422 detail list.
fn pydantic_error(kind: &str, loc: &str, msg: &str, input: &Value) -> String {
    format!("{{\"type\":\"{kind}\",\"loc\":{loc},\"msg\":\"{msg}\",\"input\":{input}}}")
}

/// The items of `include_prefixes` (the original's `list[str]`), with pydantic's
/// `string_type` error for each item that is not a string, in the list's order.
fn string_items(items: &[Value], errors: &mut Vec<String>) -> Vec<String> {
    let mut prefixes = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        match item {
            Value::String(prefix) => prefixes.push(prefix.clone()),
            other => errors.push(pydantic_error(
                "string_type",
                &format!("[\"body\",\"include_prefixes\",{index}]"),
                "Input should be a valid string",
                other,
            )),
        }
    }
    prefixes
}

/// Whether the original's backup would hold continuity's files: a prefix covering
/// `memory/continuity` (an empty or wholly unknown list falls back to its defaults, which
/// do).
fn covers_continuity(prefixes: &[String]) -> bool {
    const ALLOWED: [&str; 12] = [
        "memory",
        "messages",
        "tasks",
        "patches",
        "runs",
        "projects",
        "essays",
        "journal",
        "snapshots",
        "peers",
        "config",
        "logs",
    ];
    let include: Vec<&str> = prefixes
        .iter()
        .map(|p| py_strip(p).trim_matches('/'))
        .filter(|p| !p.is_empty() && ALLOWED.contains(&p.split('/').next().unwrap_or_default()))
        .collect();
    include.is_empty()
        || include.iter().any(|p| {
            *p == "memory/continuity"
                || "memory/continuity".starts_with(&format!("{p}/"))
                || p.starts_with("memory/continuity/")
        })
}

/// The prefixes of a create request, or the original's 422 with every error pydantic finds
/// (`include_prefixes: list[str]`, `note: str | None`).
fn create_input(bytes: &[u8]) -> Result<Vec<String>, ApiError> {
    let body = fields(bytes)?;
    let mut errors = Vec::new();
    let prefixes = match body.get("include_prefixes") {
        None => Vec::new(),
        Some(Value::Array(items)) => string_items(items, &mut errors),
        Some(other) => {
            errors.push(pydantic_error(
                "list_type",
                "[\"body\",\"include_prefixes\"]",
                "Input should be a valid list",
                other,
            ));
            Vec::new()
        }
    };
    match body.get("note") {
        None | Some(Value::Null | Value::String(_)) => {}
        Some(other) => errors.push(pydantic_error(
            "string_type",
            "[\"body\",\"note\"]",
            "Input should be a valid string",
            other,
        )),
    }
    if errors.is_empty() {
        return Ok(prefixes);
    }
    Err(original(
        ErrorCode::FailedPrecondition,
        422,
        format!("{{\"detail\":[{}]}}", errors.join(",")),
    ))
}

async fn create(caller: Caller, document: RawJson<CreateInput>) -> Result<Original, ApiError> {
    let prefixes = match create_input(&document.bytes) {
        Ok(prefixes) => prefixes,
        Err(refusal) => {
            authorise_ops(&caller).await?;
            return Err(refusal);
        }
    };
    let drill = check(&caller).await?;
    let id = backup_id();
    answer(&Created {
        ok: true,
        backup_id: &id,
        backup_path: format!("{BACKUPS_DIR}/{id}.tar.gz"),
        manifest_path: format!("{BACKUPS_DIR}/{id}.json"),
        committed_files: [],
        latest_commit: (),
        continuity_counts: covers_continuity(&prefixes).then_some(&*drill.continuity_counts),
    })
}

async fn restore_test(
    caller: Caller,
    document: RawJson<RestoreTestInput>,
) -> Result<Original, ApiError> {
    match restore_test_input(&document.bytes) {
        Ok((backup_path, verify_continuity)) => {
            drill_restore(&caller, backup_path, verify_continuity).await
        }
        Err(refusal) => {
            // The original authenticates before it validates a body.
            authorise_ops(&caller).await?;
            Err(refusal)
        }
    }
}

/// The backup path and whether to validate continuity, or the original's 422.
fn restore_test_input(bytes: &[u8]) -> Result<(String, bool), ApiError> {
    let body = fields(bytes)?;
    let whole = std::str::from_utf8(bytes).unwrap_or("{}").trim();
    let backup_path = match body.get("backup_path") {
        None => {
            return Err(invalid_envelope(
                "missing",
                "[\"body\",\"backup_path\"]",
                "Field required",
                whole,
                None,
            ));
        }
        Some(Value::String(path)) => py_strip(path).to_owned(),
        Some(other) => {
            return Err(invalid_envelope(
                "string_type",
                "[\"body\",\"backup_path\"]",
                "Input should be a valid string",
                &other.to_string(),
                None,
            ));
        }
    };
    lax_bool(&body, "verify_index_rebuild")?;
    let verify_continuity = lax_bool(&body, "verify_continuity")?.unwrap_or(true);
    Ok((backup_path, verify_continuity))
}

async fn drill_restore(
    caller: &Caller,
    backup_path: String,
    verify_continuity: bool,
) -> Result<Original, ApiError> {
    // The scope comes before the path's checks, as in the original.
    let drill = check(caller).await?;
    if backup_path.is_empty() {
        return Err(bad_request("backup_path is required"));
    }
    if backup_path.starts_with('/') {
        return Err(bad_request("backup_path must be repo-relative"));
    }
    if !backup_path.starts_with(&format!("{BACKUPS_DIR}/")) {
        return Err(bad_request("backup_path must be under backups/"));
    }
    let counts: Map<String, Value> = serde_json::from_str(drill.continuity_counts.get())
        .map_err(|_| internal("the artifact counts are not an object"))?;
    let extracted_files: u64 = counts.values().filter_map(Value::as_u64).sum();
    let validation = verify_continuity.then_some(&*drill.continuity_validation);
    let ok = match validation {
        None => true,
        Some(raw) => {
            let block: Value = serde_json::from_str(raw.get())
                .map_err(|_| internal("the artifact validation is not JSON"))?;
            block["ok"] == Value::Bool(true)
        }
    };
    let valid_history = HistoryValidation {
        ok: true,
        ..HistoryValidation::default()
    };
    answer(&RestoreTested {
        ok,
        backup_path: &backup_path,
        extracted_files,
        extracted_prefixes: if extracted_files > 0 {
            vec!["memory"]
        } else {
            Vec::new()
        },
        index_validation: (),
        continuity_validation: validation,
        artifact_history_validation: HistoryValidation {
            ok: true,
            ..HistoryValidation::default()
        },
        segment_history_validation: SegmentValidation {
            ok: true,
            ..SegmentValidation::default()
        },
        registry_history_validation: valid_history,
    })
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    let r = COGNIRELAY;
    vec![
        r.route(
            Verb::Post,
            "/v1/backup/create",
            "backupCreate",
            "CogniRelay: the backup drill's counts of every continuity tier (admin)",
            create,
        )
        .calls("CheckArtifacts")
        .tool(
            "backup.create",
            "Count every continuity artifact per tier, as a backup manifest records them",
        ),
        r.route(
            Verb::Post,
            "/v1/backup/restore-test",
            "backupRestoreTest",
            "CogniRelay: validate every continuity artifact; bad ones are reported, not fatal",
            restore_test,
        )
        .calls("CheckArtifacts")
        .tool(
            "backup.restore_test",
            "Validate every continuity artifact (bad ones are listed)",
        )
        .status(400, "backup_path is empty, absolute or not under backups/"),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn continuity_is_counted_when_the_prefixes_cover_it() {
        let p = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(covers_continuity(&p(&[])));
        assert!(covers_continuity(&p(&["memory"])));
        assert!(covers_continuity(&p(&["/memory/continuity/"])));
        assert!(covers_continuity(&p(&["memory/continuity/archive"])));
        assert!(covers_continuity(&p(&["nowhere"])));
        assert!(!covers_continuity(&p(&["messages", "memory/core"])));
    }

    #[test]
    fn prefixes_are_strings_or_one_error_each() {
        assert_eq!(
            create_input(br#"{"include_prefixes":["memory","x"]}"#).unwrap(),
            vec!["memory".to_owned(), "x".to_owned()]
        );
        let ApiError(failure) = create_input(br#"{"include_prefixes":[1,"m",false]}"#).unwrap_err();
        assert_eq!(
            failure.metadata_value(noema_core::error::ORIGINAL_BODY_KEY),
            Some(
                r#"{"detail":[{"type":"string_type","loc":["body","include_prefixes",0],"msg":"Input should be a valid string","input":1},{"type":"string_type","loc":["body","include_prefixes",2],"msg":"Input should be a valid string","input":false}]}"#
            )
        );
        assert_eq!(
            failure.metadata_value(noema_core::error::ORIGINAL_STATUS_KEY),
            Some("422")
        );
    }

    #[test]
    fn a_backup_path_is_stripped_as_python_strips() {
        let (path, _) =
            restore_test_input(br#"{"backup_path":"\u001e\t backups/b.tar.gz\u2028"}"#).unwrap();
        assert_eq!(path, "backups/b.tar.gz");
    }

    #[test]
    fn a_note_is_a_string_or_null() {
        assert!(create_input(br#"{"note":"weekly"}"#).is_ok());
        assert!(create_input(br#"{"note":null}"#).is_ok());
        let ApiError(failure) =
            create_input(br#"{"include_prefixes":null,"note":{}}"#).unwrap_err();
        assert_eq!(
            failure.metadata_value(noema_core::error::ORIGINAL_BODY_KEY),
            Some(
                r#"{"detail":[{"type":"list_type","loc":["body","include_prefixes"],"msg":"Input should be a valid list","input":null},{"type":"string_type","loc":["body","note"],"msg":"Input should be a valid string","input":{}}]}"#
            )
        );
        assert_eq!(
            failure.metadata_value(noema_core::error::ORIGINAL_STATUS_KEY),
            Some("422")
        );
    }

    #[test]
    fn booleans_are_read_as_pydantic_reads_them() {
        let body: Map<String, Value> =
            serde_json::from_str(r#"{"a": true, "b": "no", "c": 1, "d": "maybe", "e": [true]}"#)
                .unwrap();
        assert_eq!(lax_bool(&body, "a").unwrap(), Some(true));
        assert_eq!(lax_bool(&body, "b").unwrap(), Some(false));
        assert_eq!(lax_bool(&body, "c").unwrap(), Some(true));
        assert_eq!(lax_bool(&body, "z").unwrap(), None);
        let ApiError(failure) = lax_bool(&body, "d").unwrap_err();
        assert_eq!(
            failure.metadata_value(noema_core::error::ORIGINAL_BODY_KEY),
            Some(
                r#"{"detail":[{"type":"bool_parsing","loc":["body","d"],"msg":"Input should be a valid boolean, unable to interpret input","input":"maybe"}]}"#
            )
        );
        assert!(lax_bool(&body, "e").is_err());
    }
}
