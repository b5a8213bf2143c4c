//! The backup drill (`POST /v1/backup/create` counts, `/v1/backup/restore-test`
//! validation): every artifact of every tier read back and checked.

use std::collections::HashMap;

use super::{Continuity, bytes_of, now};
use crate::domain::access::{ADMIN, Caller};
use crate::domain::artifacts::ArtifactReport;
use crate::domain::error::ContinuityError;
use crate::domain::json::canonical_json;
use crate::domain::model::SubjectKind;
use crate::domain::subject::{SubjectKey, cold_stub_path};
use crate::domain::write::fallback_envelope;
use crate::error::Error;

/// What the drill found.
#[derive(Debug, Clone)]
pub struct ArtifactCheck {
    pub report: ArtifactReport,
    /// `{"continuity_counts", "continuity_validation"}`.
    pub body: Vec<u8>,
}

impl Continuity {
    /// Counts and validates the artifacts of the caller's tenant, or of every tenant.
    #[tracing::instrument(skip_all, fields(tenant = %caller.tenant))]
    pub async fn check_artifacts(
        &self,
        caller: &Caller,
        all_tenants: bool,
    ) -> Result<ArtifactCheck, Error> {
        caller.require(ADMIN)?;
        let tenants = if all_tenants {
            if !caller.principal.superuser {
                return Err(ContinuityError::missing_scope("admin:peers").into());
            }
            self.store.tenants().await?
        } else {
            vec![caller.tenant.clone()]
        };
        let mut report = ArtifactReport::default();
        let at = now();
        for tenant in tenants {
            let scan = self.store.scan(&tenant).await?;
            let mut keys = Vec::new();
            for s in &scan.subjects {
                for (sequence, _) in s.active_revision.iter().chain(s.fallback.iter()) {
                    keys.push((s.subject_kind.clone(), s.subject_key.clone(), *sequence));
                }
            }
            let capsules: HashMap<(String, String, i64), Vec<u8>> = self
                .store
                .revisions(&tenant, &keys)
                .await?
                .into_iter()
                .map(|(kind, key, r)| ((kind, key, r.sequence), r.capsule))
                .collect();
            for s in &scan.subjects {
                let Some(kind) = SubjectKind::parse(&s.subject_kind) else {
                    continue;
                };
                let subject = SubjectKey {
                    kind,
                    key: s.subject_key.clone(),
                };
                let bytes = |sequence: i64| {
                    capsules
                        .get(&(s.subject_kind.clone(), s.subject_key.clone(), sequence))
                        .map(Vec::as_slice)
                        .unwrap_or_default()
                };
                let mut has_fallback = false;
                if let Some((sequence, id)) = &s.fallback {
                    // The fallback snapshot is its revision's capsule in the original's
                    // envelope.
                    let envelope = self
                        .capsule(id, bytes(*sequence))
                        .map(|c| canonical_json(&fallback_envelope(&c, &subject.active_path(), at)))
                        .unwrap_or_default();
                    has_fallback =
                        report.fallback(&tenant, &subject.fallback_path(), envelope.as_bytes());
                }
                if let Some((sequence, _)) = &s.active_revision {
                    report.active(
                        &tenant,
                        &subject.active_path(),
                        bytes(*sequence),
                        has_fallback,
                    );
                }
            }
            for archive in &scan.archives {
                match (archive.cold(), archive.envelope.as_deref()) {
                    (Some(cold), _) => {
                        let payload = match self.objects.get(&cold.key).await {
                            Ok(body) => Some(body.bytes().await?),
                            Err(err) if err.is_not_found() => None,
                            Err(err) => return Err(err.into()),
                        };
                        let stub_path = cold_stub_path(&archive.archive_path)?;
                        report.cold(&tenant, &stub_path, &cold.stub, payload.as_deref());
                    }
                    (None, envelope) => {
                        report.archive(
                            &tenant,
                            &archive.archive_path,
                            envelope.unwrap_or_default(),
                        );
                    }
                }
            }
        }
        let body = bytes_of(&report.body());
        Ok(ArtifactCheck { report, body })
    }
}
