//! Canonical objects: immutable, content-addressed, validated exactly as open-cognition
//! does — same checks, same order, same messages (`shared/compat/open-cognition.md` §4).

use noema_core::content_id::ContentId;
use noema_core::time::{parse_go_rfc3339, utc_date_path, utc_whole_seconds};
use serde_json::Value;
use time::OffsetDateTime;

pub const SCHEMA_VERSION: &str = "0.1.0";
pub const OBJECT_TYPES: [&str; 4] = ["observation", "document", "tool_output", "policy"];
/// Largest payload accepted (the gateway's body limit is set to fit it in base64).
pub const MAX_PAYLOAD_BYTES: usize = 16 * 1024 * 1024;

/// A submitted canonical object, as received.
#[derive(Debug, Clone, PartialEq)]
pub struct CanonicalSubmission {
    pub schema_version: String,
    pub id: String,
    pub object_type: String,
    pub content_type: String,
    pub size_bytes: i64,
    pub created_at: String,
    pub created_by: String,
    pub storage_path: String,
    pub payload: Vec<u8>,
    pub metadata: Option<Value>,
}

/// A canonical object that passed validation, ready to store.
#[derive(Debug, Clone, PartialEq)]
pub struct CanonicalObject {
    pub id: String,
    pub object_type: String,
    pub content_type: String,
    pub size_bytes: i64,
    /// As submitted (echoed by the create response).
    pub created_at_text: String,
    /// UTC, whole seconds (stored and listed).
    pub created_at: OffsetDateTime,
    pub created_by: String,
    pub storage_path: String,
    pub metadata: Option<Value>,
    pub recorded_at: OffsetDateTime,
}

/// Why a submission was refused. The text is open-cognition's, word for word.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

fn invalid(text: impl Into<String>) -> Invalid {
    Invalid(text.into())
}

/// `^canonical/[a-z_]+/[0-9]{4}/[0-9]{2}/[0-9]{2}/sha256:[0-9a-f]{64}\.json$`
fn is_storage_path_shape(path: &str) -> bool {
    let Some(rest) = path.strip_prefix("canonical/") else {
        return false;
    };
    let parts: Vec<&str> = rest.split('/').collect();
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    match parts.as_slice() {
        [kind, yyyy, mm, dd, file] => {
            !kind.is_empty()
                && kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
                && digits(yyyy, 4)
                && digits(mm, 2)
                && digits(dd, 2)
                && file.strip_suffix(".json").is_some_and(ContentId::is_valid)
        }
        _ => false,
    }
}

/// The deterministic storage path of an object.
pub fn expected_storage_path(object_type: &str, created_at: OffsetDateTime, id: &str) -> String {
    format!(
        "canonical/{object_type}/{}/{id}.json",
        utc_date_path(created_at)
    )
}

/// Go's `%q` of an ASCII path: quotes, with `"` and `\` escaped.
fn go_quote(text: &str) -> String {
    format!("{text:?}")
}

/// Validates in open-cognition's order; the first failure wins.
pub fn validate(
    submission: CanonicalSubmission,
    recorded_at: OffsetDateTime,
) -> Result<(CanonicalObject, Vec<u8>), Invalid> {
    let s = submission;
    if s.schema_version != SCHEMA_VERSION {
        return Err(invalid("schema_version must be '0.1.0'"));
    }
    if !ContentId::is_valid(&s.id) {
        return Err(invalid("id must match sha256:[0-9a-f]{64}"));
    }
    if !OBJECT_TYPES.contains(&s.object_type.as_str()) {
        return Err(invalid(
            "object_type must be one of: observation, document, tool_output, policy",
        ));
    }
    if s.content_type.is_empty() {
        return Err(invalid("content_type is required"));
    }
    if s.size_bytes < 0 {
        return Err(invalid("size_bytes must be >= 0"));
    }
    if s.created_by.is_empty() {
        return Err(invalid("created_by is required"));
    }
    let created_at = parse_go_rfc3339(&s.created_at)
        .ok_or_else(|| invalid("created_at must be a valid RFC3339 timestamp"))?;
    if !is_storage_path_shape(&s.storage_path) {
        return Err(invalid(
            "storage_path must match canonical/{object_type}/{yyyy}/{mm}/{dd}/{id}.json",
        ));
    }
    if s.payload.is_empty() {
        return Err(invalid("payload is required"));
    }
    if s.payload.len() > MAX_PAYLOAD_BYTES {
        return Err(invalid(format!(
            "payload is {} bytes; the limit is {MAX_PAYLOAD_BYTES}",
            s.payload.len()
        )));
    }
    let computed = ContentId::of_bytes(&s.payload);
    if computed.as_str() != s.id {
        return Err(invalid(format!(
            "payload hash mismatch: id is {} but sha256(payload) is {computed}",
            s.id
        )));
    }
    if usize::try_from(s.size_bytes).ok() != Some(s.payload.len()) {
        return Err(invalid(format!(
            "size_bytes mismatch: declared {} but payload is {} bytes",
            s.size_bytes,
            s.payload.len()
        )));
    }
    let expected = expected_storage_path(&s.object_type, created_at, &s.id);
    if s.storage_path != expected {
        return Err(invalid(format!(
            "storage_path must be {}",
            go_quote(&expected)
        )));
    }
    if let Some(metadata) = &s.metadata
        && !metadata.is_object()
    {
        return Err(invalid("metadata must be a JSON object"));
    }
    let object = CanonicalObject {
        id: s.id,
        object_type: s.object_type,
        content_type: s.content_type,
        size_bytes: s.size_bytes,
        created_at_text: s.created_at,
        created_at: utc_whole_seconds(created_at),
        created_by: s.created_by,
        storage_path: s.storage_path,
        metadata: s
            .metadata
            .filter(|m| m.as_object().is_some_and(|o| !o.is_empty())),
        recorded_at,
    };
    Ok((object, s.payload))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn good() -> CanonicalSubmission {
        let payload = br#"{"smoke":"test"}"#.to_vec();
        let id = ContentId::of_bytes(&payload).into_string();
        CanonicalSubmission {
            schema_version: "0.1.0".into(),
            storage_path: format!("canonical/observation/2026/04/14/{id}.json"),
            id,
            object_type: "observation".into(),
            content_type: "application/json".into(),
            size_bytes: payload.len() as i64,
            created_at: "2026-04-14T18:20:43Z".into(),
            created_by: "smoke:test".into(),
            payload,
            metadata: None,
        }
    }

    fn error(s: CanonicalSubmission) -> String {
        validate(s, OffsetDateTime::UNIX_EPOCH).unwrap_err().0
    }

    #[test]
    fn a_good_submission_passes() {
        let (object, payload) = validate(good(), OffsetDateTime::UNIX_EPOCH).unwrap();
        assert_eq!(object.created_at_text, "2026-04-14T18:20:43Z");
        assert_eq!(payload, br#"{"smoke":"test"}"#);
    }

    #[test]
    fn each_check_has_open_cognitions_message() {
        type Case = (fn(&mut CanonicalSubmission), &'static str);
        let cases: Vec<Case> = vec![
            (
                |s| s.schema_version = "1.0".into(),
                "schema_version must be '0.1.0'",
            ),
            (
                |s| s.id = s.id.to_uppercase(),
                "id must match sha256:[0-9a-f]{64}",
            ),
            (
                |s| s.object_type = "note".into(),
                "object_type must be one of: observation, document, tool_output, policy",
            ),
            (|s| s.content_type.clear(), "content_type is required"),
            (|s| s.size_bytes = -1, "size_bytes must be >= 0"),
            (|s| s.created_by.clear(), "created_by is required"),
            (
                |s| s.created_at = "2026-04-14".into(),
                "created_at must be a valid RFC3339 timestamp",
            ),
            (
                |s| s.storage_path = "objects/x".into(),
                "storage_path must match canonical/{object_type}/{yyyy}/{mm}/{dd}/{id}.json",
            ),
            (|s| s.payload.clear(), "payload is required"),
            (
                |s| s.size_bytes = 3,
                "size_bytes mismatch: declared 3 but payload is 16 bytes",
            ),
        ];
        for (mutate, message) in cases {
            let mut s = good();
            mutate(&mut s);
            assert_eq!(error(s), message);
        }
    }

    #[test]
    fn hash_is_checked_before_size_and_path() {
        let mut s = good();
        s.payload = b"other".to_vec();
        let message = error(s);
        assert!(
            message.starts_with("payload hash mismatch: id is sha256:"),
            "{message}"
        );
        assert!(
            message.contains("but sha256(payload) is sha256:"),
            "{message}"
        );
    }

    #[test]
    fn storage_path_must_be_the_utc_date_of_created_at() {
        let mut s = good();
        s.created_at = "2026-04-14T23:30:00-02:00".into();
        let expected = format!("\"canonical/observation/2026/04/15/{}.json\"", s.id);
        assert_eq!(error(s), format!("storage_path must be {expected}"));
    }
}

/// Generated submissions: any field values are validated without a panic, and an accepted
/// object's storage path is a valid object-store key that names its own id and type.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    fn submission() -> impl Strategy<Value = CanonicalSubmission> {
        (
            prop_oneof![Just("0.1.0".to_owned()), any::<String>()],
            prop_oneof![Just("observation".to_owned()), Just("policy".to_owned()), "[a-z_]{0,12}"],
            "[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2})",
            any::<Vec<u8>>(),
            prop_oneof![Just(None), Just(Some(serde_json::json!({"k": 1}))), Just(Some(serde_json::json!([1])))],
            any::<bool>(),
            any::<i64>(),
        )
            .prop_map(|(schema_version, object_type, created_at, payload, metadata, consistent, size)| {
                let id = ContentId::of_bytes(&payload).into_string();
                let (storage_path, size_bytes) = match (consistent, parse_go_rfc3339(&created_at)) {
                    (true, Some(at)) => (
                        expected_storage_path(&object_type, at, &id),
                        i64::try_from(payload.len()).unwrap(),
                    ),
                    _ => (format!("canonical/{object_type}/2026/01/01/{id}.json"), size),
                };
                CanonicalSubmission {
                    schema_version,
                    id,
                    object_type,
                    content_type: "application/octet-stream".into(),
                    size_bytes,
                    created_at,
                    created_by: "agent:p".into(),
                    storage_path,
                    payload,
                    metadata,
                }
            })
    }

    proptest! {
        #![proptest_config(crate::proptest_config())]

        #[test]
        fn any_submission_is_validated_without_a_panic(s in submission()) {
            if let Ok((object, payload)) = validate(s.clone(), OffsetDateTime::UNIX_EPOCH) {
                prop_assert!(noema_store::object::key::validate_key(&object.storage_path).is_ok());
                let file = format!("/{}.json", object.id);
                prop_assert!(object.storage_path.ends_with(&file));
                prop_assert!(ContentId::of_bytes(&payload).as_str() == object.id);
                prop_assert!(OBJECT_TYPES.contains(&object.object_type.as_str()));
            }
        }

        #[test]
        fn any_storage_path_is_checked_without_a_panic(path in any::<String>()) {
            let _ = is_storage_path_shape(&path);
        }

        #[test]
        fn storage_path_looking_text_is_a_valid_key_when_accepted(
            path in "canonical/[a-z_A-Z]{0,8}/[0-9]{3,4}/[0-9]{2}/[0-9]{1,2}/sha256:[0-9a-f]{63,64}\\.json",
        ) {
            if is_storage_path_shape(&path) {
                prop_assert!(noema_store::object::key::validate_key(&path).is_ok());
            }
        }
    }
}
