//! The cold tier (digest §2, §9): the exact gzip payload of an archive envelope, its
//! searchable stub (rendered and parsed as the original does), the envelope a rehydrate
//! restores, and the cold-store and rehydrate response bodies.

use std::io::{Read, Write};

use serde_json::Value;
use time::OffsetDateTime;

use super::error::ContinuityError;
use super::json::{Json, JsonObject, canonical_json};
use super::model::Capsule;
use super::plans::archive_path_from_envelope;
use super::stored::load_capsule_value;
use super::subject::{
    COLD_INDEX_DIR, SubjectKey, archive_path_from_cold_artifact, cold_storage_path, cold_stub_path,
};
use super::text::{py_prefix, py_strip};
use super::trust::phase_checked;
use super::validation::upgrade_legacy;
use super::write::{health_summary, revision_json, verification_status};

/// The stub's `type`.
pub const COLD_STUB_TYPE: &str = "continuity_cold_stub";
/// The stub schema version written (quoted in the front matter).
pub const COLD_STUB_SCHEMA_VERSION: &str = "1.1";
/// Stub versions a parse accepts.
const SUPPORTED_STUB_VERSIONS: [&str; 2] = ["\"1.0\"", "\"1.1\""];
/// The front-matter keys, in their order.
pub const COLD_STUB_FRONTMATTER: [&str; 15] = [
    "type",
    "schema_version",
    "artifact_state",
    "subject_kind",
    "subject_id",
    "source_archive_path",
    "cold_storage_path",
    "archived_at",
    "cold_stored_at",
    "verification_kind",
    "verification_status",
    "health_status",
    "freshness_class",
    "phase",
    "update_reason",
];
/// Archive envelope versions a rehydrate accepts.
const SUPPORTED_ARCHIVE_VERSIONS: [&str; 2] = ["1.0", "1.1"];
/// The archive envelope's `schema_type`.
pub const ARCHIVE_SCHEMA_TYPE: &str = "continuity_archive_envelope";

/// gzip of `bytes` exactly as the original writes a cold payload: level 9, mtime 0, no file
/// name, OS byte 255 — CPython's `GzipFile` over zlib. Byte for byte the same as the
/// original's only because the deflate stream comes from zlib itself (flate2's `zlib`
/// backend), as CPython's does.
pub fn cold_gzip(bytes: &[u8]) -> Result<Vec<u8>, ContinuityError> {
    let mut encoder = flate2::GzBuilder::new()
        .mtime(0)
        .operating_system(255)
        .write(Vec::new(), flate2::Compression::new(9));
    encoder
        .write_all(bytes)
        .and_then(|()| encoder.try_finish())
        .map_err(|e| ContinuityError::invalid(format!("Invalid continuity cold payload: {e}")))?;
    encoder
        .finish()
        .map_err(|e| ContinuityError::invalid(format!("Invalid continuity cold payload: {e}")))
}

/// The bytes a cold payload holds (400 `Invalid continuity cold payload: …` when it is not
/// gzip).
pub fn cold_gunzip(payload: &[u8]) -> Result<Vec<u8>, ContinuityError> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(payload)
        .read_to_end(&mut out)
        .map_err(|e| ContinuityError::invalid(format!("Invalid continuity cold payload: {e}")))?;
    Ok(out)
}

/// `_normalize_stub_scalar`: one trimmed line.
fn stub_scalar(value: &str) -> String {
    let one_line = value
        .replace("\r\n", "\n")
        .replace('\r', "\n")
        .replace('\n', " ");
    py_strip(&one_line).to_owned()
}

/// `_truncate_stub_text`: one line cut to `limit` code points.
fn stub_text(value: &str, limit: usize) -> String {
    py_prefix(&stub_scalar(value), limit).to_owned()
}

fn stub_list(items: &[String], count: usize, limit: usize) -> Vec<String> {
    items
        .iter()
        .take(count)
        .map(|item| stub_text(item, limit))
        .collect()
}

/// The searchable stub of one cold-stored archive envelope (`_build_cold_stub_text`).
pub fn render_cold_stub(
    envelope: &Value,
    capsule: &Capsule,
    source_archive_path: &str,
    cold_stored_at: &str,
    now: OffsetDateTime,
) -> Result<String, ContinuityError> {
    let c = &capsule.continuity;
    let phase = phase_checked(capsule, now).ok_or_else(|| {
        ContinuityError::invalid("Invalid UTC timestamp for verified_at".to_owned())
    })?;
    let archived_at = match envelope.get("archived_at") {
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    };
    let frontmatter: [(&str, String); 15] = [
        ("type", COLD_STUB_TYPE.to_owned()),
        ("schema_version", format!("\"{COLD_STUB_SCHEMA_VERSION}\"")),
        ("artifact_state", "cold".to_owned()),
        ("subject_kind", stub_scalar(capsule.subject_kind.as_str())),
        ("subject_id", stub_scalar(&capsule.subject_id)),
        ("source_archive_path", stub_scalar(source_archive_path)),
        (
            "cold_storage_path",
            stub_scalar(&cold_storage_path(source_archive_path)?),
        ),
        ("archived_at", stub_scalar(&archived_at)),
        ("cold_stored_at", stub_scalar(cold_stored_at)),
        (
            "verification_kind",
            stub_scalar(capsule.verification_kind.map_or("", |k| k.as_str())),
        ),
        (
            "verification_status",
            stub_scalar(verification_status(capsule).as_str()),
        ),
        (
            "health_status",
            stub_scalar(health_summary(capsule).0.as_str()),
        ),
        (
            "freshness_class",
            stub_scalar(
                capsule
                    .freshness
                    .as_ref()
                    .and_then(|f| f.freshness_class)
                    .map_or("", |f| f.as_str()),
            ),
        ),
        ("phase", stub_scalar(phase.as_str())),
        (
            "update_reason",
            stub_scalar(capsule.source.update_reason.as_str()),
        ),
    ];
    let negative: Vec<String> = c
        .negative_decisions
        .iter()
        .take(2)
        .map(|d| {
            format!(
                "decision: {} | rationale: {}",
                stub_text(&d.decision, 160),
                stub_text(&d.rationale, 240)
            )
        })
        .collect();
    let rationale: Vec<String> = c
        .rationale_entries
        .iter()
        .filter(|e| e.status.as_str() == "active")
        .take(3)
        .map(|e| {
            format!(
                "[{}] {}: {}",
                stub_text(e.kind.as_str(), 20),
                stub_text(&e.tag, 80),
                stub_text(&e.summary, 160)
            )
        })
        .collect();
    // `None` marks stance_summary, rendered as one line rather than bullets.
    let sections: [(&str, Option<Vec<String>>); 11] = [
        ("top_priorities", Some(stub_list(&c.top_priorities, 3, 160))),
        (
            "active_constraints",
            Some(stub_list(&c.active_constraints, 3, 160)),
        ),
        (
            "active_concerns",
            Some(stub_list(&c.active_concerns, 3, 160)),
        ),
        ("open_loops", Some(stub_list(&c.open_loops, 3, 160))),
        ("stance_summary", None),
        ("drift_signals", Some(stub_list(&c.drift_signals, 5, 160))),
        (
            "session_trajectory",
            Some(stub_list(&c.session_trajectory, 3, 80)),
        ),
        ("trailing_notes", Some(stub_list(&c.trailing_notes, 3, 160))),
        (
            "curiosity_queue",
            Some(stub_list(&c.curiosity_queue, 3, 120)),
        ),
        ("negative_decisions", Some(negative)),
        ("rationale_entries", Some(rationale)),
    ];
    let mut lines = vec!["---".to_owned()];
    for (key, value) in &frontmatter {
        lines.push(format!("{key}: {value}"));
    }
    lines.push("---".to_owned());
    for (name, items) in sections {
        lines.push(format!("## {name}"));
        match items {
            None => lines.push(stub_text(&c.stance_summary, 240)),
            Some(items) if items.is_empty() => lines.push(String::new()),
            Some(items) => lines.extend(items.iter().map(|item| format!("- {item}"))),
        }
    }
    Ok(format!("{}\n", lines.join("\n").trim_end_matches('\n')))
}

/// A parsed cold stub: its front matter, in order and checked against its path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedStub {
    pub fields: Vec<(String, String)>,
}

impl ParsedStub {
    pub fn get(&self, key: &str) -> &str {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map_or("", |(_, v)| v.as_str())
    }

    /// What a list row shows of it.
    pub fn list_fields(&self) -> super::listing::ColdStub {
        super::listing::ColdStub {
            subject_kind: self.get("subject_kind").to_owned(),
            subject_id: self.get("subject_id").to_owned(),
            source_archive_path: self.get("source_archive_path").to_owned(),
            cold_storage_path: self.get("cold_storage_path").to_owned(),
            archived_at: self.get("archived_at").to_owned(),
            cold_stored_at: self.get("cold_stored_at").to_owned(),
            verification_kind: self.get("verification_kind").to_owned(),
            verification_status: self.get("verification_status").to_owned(),
            health_status: self.get("health_status").to_owned(),
            freshness_class: self.get("freshness_class").to_owned(),
            phase: self.get("phase").to_owned(),
        }
    }
}

fn bad_frontmatter() -> ContinuityError {
    ContinuityError::invalid("Invalid continuity cold stub frontmatter")
}

/// `_load_cold_stub`: the stub at `stub_path` parsed and checked (front matter, order, type,
/// version, and that it names the archive its path says).
pub fn parse_cold_stub(stub_path: &str, text: &str) -> Result<ParsedStub, ContinuityError> {
    if !stub_path.starts_with(&format!("{COLD_INDEX_DIR}/")) || !stub_path.ends_with(".md") {
        return Err(ContinuityError::invalid(
            "cold_stub_path must be under memory/continuity/cold/index/",
        ));
    }
    let Some(rest) = text.strip_prefix("---\n") else {
        return Err(bad_frontmatter());
    };
    let Some((raw, _body)) = text.split_once("\n---\n") else {
        return Err(bad_frontmatter());
    };
    let raw = raw.strip_prefix("---\n").unwrap_or(rest);
    let mut fields = Vec::new();
    // Python's splitlines() also splits on \r, \x0b, \x0c, \x1c-\x1e, \x85, \u2028, \u2029.
    for line in raw.split([
        '\n', '\r', '\x0b', '\x0c', '\x1c', '\x1d', '\x1e', '\u{85}', '\u{2028}', '\u{2029}',
    ]) {
        let Some((key, value)) = line.split_once(':') else {
            return Err(bad_frontmatter());
        };
        fields.push((py_strip(key).to_owned(), py_strip(value).to_owned()));
    }
    let order: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
    if order != COLD_STUB_FRONTMATTER {
        return Err(ContinuityError::invalid(
            "Invalid continuity cold stub frontmatter order",
        ));
    }
    let stub = ParsedStub { fields };
    if stub.get("type") != COLD_STUB_TYPE {
        return Err(ContinuityError::invalid(
            "Invalid continuity cold stub type",
        ));
    }
    if !SUPPORTED_STUB_VERSIONS.contains(&stub.get("schema_version")) {
        return Err(ContinuityError::invalid(
            "Invalid continuity cold stub schema_version",
        ));
    }
    let source = stub.get("source_archive_path");
    if cold_stub_path(source).ok().as_deref() != Some(stub_path) {
        return Err(ContinuityError::invalid(
            "Continuity cold stub path does not match source archive identity",
        ));
    }
    if cold_storage_path(source).ok().as_deref() != Some(stub.get("cold_storage_path")) {
        return Err(ContinuityError::invalid(
            "Continuity cold stub payload path does not match source archive identity",
        ));
    }
    if archive_path_from_cold_artifact(stub_path).ok().as_deref() != Some(source) {
        return Err(ContinuityError::invalid(
            "Continuity cold stub archive identity does not match path",
        ));
    }
    Ok(stub)
}

/// The archive envelope a cold payload restores to `source_archive_path`: the decoded bytes
/// as they are, or (for a 1.0 envelope or a capsule the legacy upgrade changes) the upgraded
/// envelope's canonical JSON. Errors are the original's 400s.
pub fn rehydrated_envelope(
    decoded: &[u8],
    source_archive_path: &str,
) -> Result<(Vec<u8>, Capsule, Vec<String>), ContinuityError> {
    let invalid = |reason: &str| {
        ContinuityError::invalid(format!("Invalid continuity cold payload: {reason}"))
    };
    let payload: Value = serde_json::from_slice(decoded).map_err(|e| invalid(&e.to_string()))?;
    if payload.get("schema_type").and_then(Value::as_str) != Some(ARCHIVE_SCHEMA_TYPE) {
        return Err(invalid("wrong schema_type"));
    }
    let version = payload.get("schema_version").and_then(Value::as_str);
    if !version.is_some_and(|v| SUPPORTED_ARCHIVE_VERSIONS.contains(&v)) {
        return Err(invalid("wrong schema_version"));
    }
    let raw_capsule = payload
        .get("capsule")
        .cloned()
        .unwrap_or(Value::Object(Default::default()));
    let upgraded = upgrade_legacy(&raw_capsule);
    let (capsule, warnings) = load_capsule_value(&raw_capsule, None, "").map_err(|e| match e {
        ContinuityError::Invalid(detail) => invalid(&detail),
        other => other,
    })?;
    let mut restored = payload.clone();
    restored["capsule"] = capsule.to_value();
    let envelope = super::plans::Envelope {
        json: restored.clone(),
        capsule: capsule.clone(),
        warnings: Vec::new(),
    };
    if archive_path_from_envelope(&envelope)? != source_archive_path {
        return Err(ContinuityError::invalid(
            "Continuity cold payload identity does not match requested source archive",
        ));
    }
    let active = SubjectKey::new(capsule.subject_kind, &capsule.subject_id)?.active_path();
    if payload.get("active_path").and_then(Value::as_str) != Some(active.as_str()) {
        return Err(ContinuityError::invalid(
            "Invalid continuity archive envelope in cold payload: active_path mismatch",
        ));
    }
    let bytes = if version != Some("1.1") || upgraded != raw_capsule {
        restored["schema_version"] = Value::from("1.1");
        canonical_json(&Json::from_value(&restored)).into_bytes()
    } else {
        decoded.to_vec()
    };
    Ok((bytes, capsule, warnings))
}

/// The cold-store job result.
pub fn cold_store_response(
    source_archive_path: &str,
    cold_stored_at: &str,
    revision: Option<&str>,
    recovery_warnings: &[String],
) -> Result<Json, ContinuityError> {
    let storage = cold_storage_path(source_archive_path)?;
    let stub = cold_stub_path(source_archive_path)?;
    let mut body = JsonObject::new();
    body.insert("ok", Json::Bool(true));
    body.insert("artifact_state", Json::from("cold"));
    body.insert("source_archive_path", Json::from(source_archive_path));
    body.insert("cold_storage_path", Json::from(storage.as_str()));
    body.insert("cold_stub_path", Json::from(stub.as_str()));
    body.insert("cold_stored_at", Json::from(cold_stored_at));
    body.insert(
        "committed_files",
        Json::Array(vec![
            Json::from(storage.as_str()),
            Json::from(stub.as_str()),
            Json::from(source_archive_path),
        ]),
    );
    body.insert("durable", Json::Bool(true));
    body.insert("latest_commit", revision_json(revision));
    body.insert("warnings", Json::Array(vec![]));
    body.insert(
        "recovery_warnings",
        Json::Array(
            recovery_warnings
                .iter()
                .map(|w| Json::from(w.as_str()))
                .collect(),
        ),
    );
    Ok(Json::Object(body))
}

/// The cold-rehydrate job result.
pub fn rehydrate_response(
    source_archive_path: &str,
    rehydrated_at: &str,
    revision: Option<&str>,
    recovery_warnings: &[String],
) -> Result<Json, ContinuityError> {
    let storage = cold_storage_path(source_archive_path)?;
    let stub = cold_stub_path(source_archive_path)?;
    let mut body = JsonObject::new();
    body.insert("ok", Json::Bool(true));
    body.insert("artifact_state", Json::from("archived"));
    body.insert("source_archive_path", Json::from(source_archive_path));
    body.insert("restored_archive_path", Json::from(source_archive_path));
    body.insert("cold_storage_path", Json::from(storage.as_str()));
    body.insert("cold_stub_path", Json::from(stub.as_str()));
    body.insert("rehydrated_at", Json::from(rehydrated_at));
    body.insert(
        "committed_files",
        Json::Array(vec![
            Json::from(source_archive_path),
            Json::from(storage.as_str()),
            Json::from(stub.as_str()),
        ]),
    );
    body.insert("durable", Json::Bool(true));
    body.insert("latest_commit", revision_json(revision));
    body.insert("warnings", Json::Array(vec![]));
    body.insert(
        "recovery_warnings",
        Json::Array(
            recovery_warnings
                .iter()
                .map(|w| Json::from(w.as_str()))
                .collect(),
        ),
    );
    Ok(Json::Object(body))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::domain::model::SubjectKind;
    use crate::domain::plans::load_archive_envelope;
    use crate::domain::timestamp::parse_iso;
    use crate::domain::write::archive_envelope;

    fn capsule() -> Capsule {
        let body = r#"{"subject_kind":"thread","subject_id":"Big Launch","updated_at":"2026-01-01T00:00:00Z",
            "verified_at":"2026-01-01T00:00:00Z","verification_kind":"self_review",
            "source":{"producer":"p","update_reason":"manual"},
            "freshness":{"freshness_class":"durable"},
            "continuity":{"top_priorities":["ship\nit","b","c","d"],"active_concerns":[],
            "active_constraints":["x"],"open_loops":[],"stance_summary":"  calm\r\nand steady  ",
            "drift_signals":["d1"],
            "negative_decisions":[{"decision":"no rewrite","rationale":"too late"}],
            "rationale_entries":[{"tag":"t1","kind":"decision","status":"active","summary":"keep it","reasoning":"r"},
                                 {"tag":"t2","kind":"tension","status":"retired","summary":"old","reasoning":"r"}]},
            "confidence":{"continuity":0.5,"relationship_model":0.25}}"#;
        Capsule::from_json_at(&Json::parse(body.as_bytes()).unwrap(), &Default::default()).unwrap()
    }

    /// Pinned from the original's `_build_cold_stub_text` for this capsule.
    #[test]
    fn the_stub_renders_like_the_original() {
        let subject = SubjectKey::new(SubjectKind::Thread, "Big Launch").unwrap();
        let archived = parse_iso("2026-02-01T10:00:00Z").unwrap();
        let (path, envelope) = archive_envelope(&subject, &capsule(), "owner", "done", archived);
        let envelope = load_archive_envelope(canonical_json(&envelope).as_bytes()).unwrap();
        let now = parse_iso("2026-06-01T00:00:00Z").unwrap();
        let stub = render_cold_stub(
            &envelope.json,
            &envelope.capsule,
            &path,
            "2026-06-01T00:00:00Z",
            now,
        )
        .unwrap();
        let want = "---\n\
type: continuity_cold_stub\n\
schema_version: \"1.1\"\n\
artifact_state: cold\n\
subject_kind: thread\n\
subject_id: Big Launch\n\
source_archive_path: memory/continuity/archive/thread-big-launch-20260201T100000Z.json\n\
cold_storage_path: memory/continuity/cold/thread-big-launch-20260201T100000Z.json.gz\n\
archived_at: 2026-02-01T10:00:00Z\n\
cold_stored_at: 2026-06-01T00:00:00Z\n\
verification_kind: self_review\n\
verification_status: unverified\n\
health_status: healthy\n\
freshness_class: durable\n\
phase: fresh\n\
update_reason: manual\n\
---\n\
## top_priorities\n- ship it\n- b\n- c\n\
## active_constraints\n- x\n\
## active_concerns\n\n\
## open_loops\n\n\
## stance_summary\ncalm and steady\n\
## drift_signals\n- d1\n\
## session_trajectory\n\n\
## trailing_notes\n\n\
## curiosity_queue\n\n\
## negative_decisions\n- decision: no rewrite | rationale: too late\n\
## rationale_entries\n- [decision] t1: keep it\n";
        assert_eq!(stub, want);
        let stub_path = cold_stub_path(&path).unwrap();
        let parsed = parse_cold_stub(&stub_path, &stub).unwrap();
        assert_eq!(parsed.get("source_archive_path"), path);
        assert_eq!(parsed.list_fields().phase, "fresh");
        // A stub under another archive's name is refused.
        let other = stub_path.replace("big-launch", "other");
        assert!(matches!(
            parse_cold_stub(&other, &stub),
            Err(ContinuityError::Invalid(d)) if d.contains("does not match")
        ));
        assert!(parse_cold_stub(&stub_path, "no front matter").is_err());
    }

    /// CPython's `gzip.GzipFile(compresslevel=9, filename="", mtime=0)` bytes for `b"hello
    /// cold tier"`, recorded from the original's interpreter.
    #[test]
    fn gzip_is_byte_exact_and_round_trips() {
        let data = b"hello cold tier";
        let gz = cold_gzip(data).unwrap();
        assert_eq!(&gz[..10], &[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 0xff]);
        let hex: String = gz.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "1f8b08000000000002ffcb48cdc9c95748cecf495128c94c2d0200fc4b37100f000000"
        );
        assert_eq!(cold_gunzip(&gz).unwrap(), data);
        assert!(cold_gunzip(b"not gzip").is_err());
    }

    #[test]
    fn a_rehydrated_envelope_keeps_its_bytes_and_checks_its_identity() {
        let subject = SubjectKey::new(SubjectKind::Thread, "Big Launch").unwrap();
        let archived = parse_iso("2026-02-01T10:00:00Z").unwrap();
        // Entries without timestamps are what the legacy upgrade rewrites (tested below).
        let mut stamped = capsule();
        stamped.continuity.negative_decisions.clear();
        stamped.continuity.rationale_entries.clear();
        let (path, envelope) = archive_envelope(&subject, &stamped, "owner", "done", archived);
        let bytes = canonical_json(&envelope).into_bytes();
        let (restored, restored_capsule, _) = rehydrated_envelope(&bytes, &path).unwrap();
        assert_eq!(restored, bytes);
        assert_eq!(restored_capsule.subject_id, "Big Launch");
        let elsewhere = path.replace("20260201T100000Z", "20260202T100000Z");
        assert!(rehydrated_envelope(&bytes, &elsewhere).is_err());
        assert!(rehydrated_envelope(b"{\"schema_type\":\"x\"}", &path).is_err());
        // A legacy envelope (1.0, unstamped entries) is restored upgraded.
        let (_, legacy) = archive_envelope(&subject, &capsule(), "owner", "done", archived);
        let mut legacy = legacy.to_value();
        legacy["schema_version"] = Value::from("1.0");
        let legacy = serde_json::to_vec(&legacy).unwrap();
        let (upgraded, _, _) = rehydrated_envelope(&legacy, &path).unwrap();
        let upgraded: Value = serde_json::from_slice(&upgraded).unwrap();
        assert_eq!(upgraded["schema_version"], "1.1");
        assert_eq!(
            upgraded["capsule"]["continuity"]["negative_decisions"][0]["created_at"],
            "2026-01-01T00:00:00Z"
        );
    }
}
