//! The backup drill's view of continuity (`POST /v1/backup/create` counts, `/v1/backup/
//! restore-test` validation): every artifact of every tier counted and checked the way the
//! original's restore test checks its files, bad ones reported and never a failure.

use super::cold::{cold_gunzip, parse_cold_stub, rehydrated_envelope};
use super::json::{Json, JsonObject};
use super::plans::{archive_path_from_envelope, load_archive_envelope, load_fallback_envelope};
use super::stored::StoredCapsule;
use super::subject::{SubjectKey, archive_path_from_cold_artifact, cold_stub_path};

/// A tier, as the drill reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    Active,
    Fallback,
    Archive,
    Cold,
}

impl Tier {
    pub const ALL: [Tier; 4] = [Tier::Active, Tier::Fallback, Tier::Archive, Tier::Cold];

    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Active => "active",
            Tier::Fallback => "fallback",
            Tier::Archive => "archive",
            Tier::Cold => "cold",
        }
    }
}

/// One bad artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub tenant: String,
    pub tier: Tier,
    pub path: String,
    pub reason: String,
    /// The original's warning (`continuity_invalid_capsule:<path>`, …).
    pub warning: String,
    /// Which of the original's lists it goes in.
    list: &'static str,
}

/// The drill's tally.
#[derive(Debug, Clone, Default)]
pub struct ArtifactReport {
    counts: [(u64, u64); 4],
    pub invalid: Vec<Invalid>,
}

impl ArtifactReport {
    /// `(total, invalid)` of a tier.
    pub fn count(&self, tier: Tier) -> (u64, u64) {
        self.counts[tier as usize]
    }

    pub fn ok(&self) -> bool {
        self.invalid.is_empty()
    }

    fn seen(&mut self, tier: Tier) {
        self.counts[tier as usize].0 += 1;
    }

    fn bad(
        &mut self,
        tenant: &str,
        tier: Tier,
        path: &str,
        list: &'static str,
        warning: &str,
        reason: String,
    ) {
        self.counts[tier as usize].1 += 1;
        self.invalid.push(Invalid {
            tenant: tenant.to_owned(),
            tier,
            path: path.to_owned(),
            reason,
            warning: format!("{warning}:{path}"),
            list,
        });
    }

    /// An active capsule's stored bytes at `path`; `has_fallback` says whether its subject
    /// has a valid fallback snapshot.
    pub fn active(&mut self, tenant: &str, path: &str, bytes: &[u8], has_fallback: bool) {
        self.seen(Tier::Active);
        let checked = StoredCapsule::new(bytes)
            .load_for_read(None)
            .and_then(|(capsule, _)| {
                let expected =
                    SubjectKey::new(capsule.subject_kind, &capsule.subject_id)?.active_path();
                if expected == path {
                    Ok(())
                } else {
                    Err(super::error::ContinuityError::invalid(
                        "path does not match the capsule's subject",
                    ))
                }
            });
        match checked {
            Err(err) => self.bad(
                tenant,
                Tier::Active,
                path,
                "invalid_capsules",
                "continuity_invalid_capsule",
                err.to_string(),
            ),
            Ok(()) if !has_fallback => self.bad(
                tenant,
                Tier::Active,
                path,
                "missing_fallbacks",
                "continuity_missing_fallback",
                "no fallback snapshot".to_owned(),
            ),
            Ok(()) => {}
        }
    }

    /// A fallback envelope's bytes at `path`; whether it is valid.
    pub fn fallback(&mut self, tenant: &str, path: &str, bytes: &[u8]) -> bool {
        self.seen(Tier::Fallback);
        let checked = load_fallback_envelope(bytes).and_then(|envelope| {
            let expected =
                SubjectKey::new(envelope.capsule.subject_kind, &envelope.capsule.subject_id)?
                    .fallback_path();
            if expected == path {
                Ok(())
            } else {
                Err(super::error::ContinuityError::invalid(
                    "path does not match the capsule's subject",
                ))
            }
        });
        match checked {
            Ok(()) => true,
            Err(err) => {
                self.bad(
                    tenant,
                    Tier::Fallback,
                    path,
                    "invalid_fallbacks",
                    "continuity_invalid_fallback",
                    err.to_string(),
                );
                false
            }
        }
    }

    /// An archive envelope's bytes at `path`.
    pub fn archive(&mut self, tenant: &str, path: &str, bytes: &[u8]) {
        self.seen(Tier::Archive);
        let checked = load_archive_envelope(bytes).and_then(|envelope| {
            let active =
                SubjectKey::new(envelope.capsule.subject_kind, &envelope.capsule.subject_id)?
                    .active_path();
            if envelope.json.get("active_path").and_then(|v| v.as_str()) != Some(active.as_str()) {
                return Err(super::error::ContinuityError::invalid(
                    "active_path mismatch",
                ));
            }
            if archive_path_from_envelope(&envelope)? != path {
                return Err(super::error::ContinuityError::invalid(
                    "archive identity mismatch",
                ));
            }
            Ok(())
        });
        if let Err(err) = checked {
            self.bad(
                tenant,
                Tier::Archive,
                path,
                "invalid_archives",
                "continuity_invalid_archive",
                err.to_string(),
            );
        }
    }

    /// A cold artifact: its stub (path and text) and its payload (`None` when missing).
    pub fn cold(&mut self, tenant: &str, stub_path: &str, stub: &str, payload: Option<&[u8]>) {
        self.seen(Tier::Cold);
        let parsed = match parse_cold_stub(stub_path, stub) {
            Ok(parsed) => parsed,
            Err(err) => {
                return self.bad(
                    tenant,
                    Tier::Cold,
                    stub_path,
                    "invalid_cold_stubs",
                    "continuity_invalid_cold_stub",
                    err.to_string(),
                );
            }
        };
        let payload_path = parsed.get("cold_storage_path").to_owned();
        let Some(payload) = payload else {
            return self.bad(
                tenant,
                Tier::Cold,
                stub_path,
                "unmatched_cold_stubs",
                "continuity_unmatched_cold_stub",
                "cold payload missing".to_owned(),
            );
        };
        let checked = archive_path_from_cold_artifact(&payload_path).and_then(|archive| {
            if cold_stub_path(&archive)? != stub_path {
                return Err(super::error::ContinuityError::invalid(
                    "stub does not match payload",
                ));
            }
            let decoded = cold_gunzip(payload)?;
            rehydrated_envelope(&decoded, &archive).map(drop)
        });
        if let Err(err) = checked {
            self.bad(
                tenant,
                Tier::Cold,
                &payload_path,
                "invalid_cold_payloads",
                "continuity_invalid_cold_payload",
                err.to_string(),
            );
        }
    }

    fn list(&self, name: &str) -> Json {
        Json::Array(
            self.invalid
                .iter()
                .filter(|i| i.list == name)
                .map(|i| Json::from(i.path.as_str()))
                .collect(),
        )
    }

    /// `{"continuity_counts": …, "continuity_validation": …}` in the original's shapes
    /// (each cold artifact is one payload and one stub).
    pub fn body(&self) -> Json {
        let (active, _) = self.count(Tier::Active);
        let (fallback, _) = self.count(Tier::Fallback);
        let (archive, _) = self.count(Tier::Archive);
        let (cold, _) = self.count(Tier::Cold);
        let mut counts = JsonObject::new();
        counts.insert("active_capsules", Json::from(active));
        counts.insert("fallback_snapshots", Json::from(fallback));
        counts.insert("archive_envelopes", Json::from(archive));
        counts.insert("cold_payloads", Json::from(cold));
        counts.insert("cold_stubs", Json::from(cold));
        let mut validation = JsonObject::new();
        validation.insert("ok", Json::Bool(self.ok()));
        validation.insert("cold_payloads", Json::from(cold));
        validation.insert("cold_stubs", Json::from(cold));
        validation.insert("active_capsules", Json::from(active));
        validation.insert("fallback_capsules", Json::from(fallback));
        validation.insert("archive_envelopes", Json::from(archive));
        for name in [
            "invalid_capsules",
            "invalid_fallbacks",
            "invalid_archives",
            "invalid_cold_stubs",
            "invalid_cold_payloads",
            "unmatched_cold_stubs",
            "unmatched_cold_payloads",
            "missing_fallbacks",
        ] {
            validation.insert(name, self.list(name));
        }
        validation.insert(
            "warnings",
            Json::Array(
                self.invalid
                    .iter()
                    .map(|i| Json::from(i.warning.as_str()))
                    .collect(),
            ),
        );
        let mut body = JsonObject::new();
        body.insert("continuity_counts", Json::Object(counts));
        body.insert("continuity_validation", Json::Object(validation));
        Json::Object(body)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::domain::cold::{cold_gzip, render_cold_stub};
    use crate::domain::json::canonical_json;
    use crate::domain::model::{Capsule, SubjectKind};
    use crate::domain::subject::cold_stub_path;
    use crate::domain::timestamp::parse_iso;
    use crate::domain::write::{archive_envelope, fallback_envelope};

    fn capsule() -> Capsule {
        let body = r#"{"subject_kind":"user","subject_id":"ann","updated_at":"2026-01-01T00:00:00Z",
            "verified_at":"2026-01-01T00:00:00Z","source":{"producer":"p","update_reason":"manual"},
            "continuity":{"top_priorities":[],"active_concerns":[],"active_constraints":[],
            "open_loops":[],"stance_summary":"s","drift_signals":[]},
            "confidence":{"continuity":0.5,"relationship_model":0.5}}"#;
        Capsule::from_json_at(&Json::parse(body.as_bytes()).unwrap(), &Default::default()).unwrap()
    }

    /// The archive's name keeps whole seconds, its `archived_at` the request's
    /// microseconds, as the original's (`format_compact(now)`, `format_iso(now)`).
    #[test]
    fn an_archive_is_stamped_to_the_microsecond() {
        let now = parse_iso("2026-06-01T00:00:00.123456Z").unwrap();
        let subject = SubjectKey::new(SubjectKind::User, "ann").unwrap();
        let (path, envelope) = archive_envelope(&subject, &capsule(), "o", "r", now);
        assert_eq!(
            path,
            "memory/continuity/archive/user-ann-20260601T000000Z.json"
        );
        assert_eq!(
            envelope.get("archived_at"),
            Some(&Json::from("2026-06-01T00:00:00.123456Z"))
        );
    }

    #[test]
    fn the_drill_counts_every_tier_and_reports_bad_artifacts() {
        let now = parse_iso("2026-06-01T00:00:00Z").unwrap();
        let subject = SubjectKey::new(SubjectKind::User, "ann").unwrap();
        let c = capsule();
        let mut report = ArtifactReport::default();
        let fallback = canonical_json(&fallback_envelope(&c, &subject.active_path(), now));
        assert!(report.fallback("t", &subject.fallback_path(), fallback.as_bytes()));
        report.active(
            "t",
            &subject.active_path(),
            c.canonical_json().as_bytes(),
            true,
        );
        report.active(
            "t",
            "memory/continuity/user-bob.json",
            c.canonical_json().as_bytes(),
            true,
        );
        let (archive_path, envelope) = archive_envelope(&subject, &c, "o", "r", now);
        let bytes = canonical_json(&envelope).into_bytes();
        report.archive("t", &archive_path, &bytes);
        report.archive("t", &archive_path, b"{}");
        let loaded = load_archive_envelope(&bytes).unwrap();
        let stub = render_cold_stub(
            &loaded.json,
            &loaded.capsule,
            &archive_path,
            "2026-06-01T00:00:00Z",
            now,
        )
        .unwrap();
        let stub_path = cold_stub_path(&archive_path).unwrap();
        report.cold("t", &stub_path, &stub, Some(&cold_gzip(&bytes).unwrap()));
        report.cold("t", &stub_path, &stub, Some(b"garbage"));
        report.cold("t", &stub_path, &stub, None);
        assert_eq!(report.count(Tier::Active), (2, 1));
        assert_eq!(report.count(Tier::Archive), (2, 1));
        assert_eq!(report.count(Tier::Cold), (3, 2));
        assert!(!report.ok());
        let body = report.body();
        let validation = body.get("continuity_validation").unwrap();
        assert_eq!(
            validation.get("invalid_capsules").unwrap(),
            &Json::Array(vec![Json::from("memory/continuity/user-bob.json")])
        );
        assert_eq!(
            validation
                .get("unmatched_cold_stubs")
                .unwrap()
                .as_array()
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            validation
                .get("warnings")
                .unwrap()
                .as_array()
                .unwrap()
                .len(),
            4
        );
    }
}
