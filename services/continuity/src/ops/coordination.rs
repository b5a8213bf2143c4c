//! Coordination (CogniRelay's `/v1/peers*` and `/v1/coordination/*`): the peer registry and
//! the artifacts agents of one tenant exchange. Every write is one audited transaction that
//! lands only on the version it read; a writer that lost the race reads again and decides
//! again (a replay, a 409, or its write on the new state).

use serde_json::json;

use super::{Continuity, WRITE_ATTEMPTS, audit, bytes_of, now, subject_of};
use crate::domain::access::{ADMIN, Caller, READ, WRITE};
use crate::domain::coordination::handoff::{self, Consumed, Handoff, HandoffQuery};
use crate::domain::coordination::peers::{self, Peer, REGISTRY_PATH};
use crate::domain::coordination::reconciliation::{
    self, Claim, Reconciliation, ReconciliationQuery, Resolved, Source,
};
use crate::domain::coordination::shared::{self, Shared, SharedQuery};
use crate::domain::coordination::signing::{self, BindingChange};
use crate::domain::coordination::{
    check_commit_message, check_id, check_lock_id, is_admin, read_body, text, written_body,
};
use crate::domain::error::ContinuityError;
use crate::domain::json::{Json, JsonObject, to_py_json};
use crate::domain::model::SubjectKind;
use crate::domain::request::parse_body;
use crate::error::Error;
use crate::store::{ArtifactFilter, ArtifactRow, ArtifactWrite, PeerRow, PeerWrite, Superseded};

const HANDOFF: &str = "handoff";

/// A stored JSON object, or `Corrupt` when the row does not hold one.
fn object_of(document: &str, what: &str) -> Result<JsonObject, Error> {
    match Json::parse(document.as_bytes()) {
        Ok(Json::Object(object)) => Ok(object),
        _ => Err(Error::Corrupt(format!("{what} is not a JSON object"))),
    }
}

fn peer_of(row: &PeerRow) -> Result<Peer, Error> {
    Ok(Peer {
        peer_id: row.peer_id.clone(),
        record: object_of(&row.document, &format!("peer {}", row.peer_id))?,
    })
}

fn handoff_of(row: &ArtifactRow) -> Result<Handoff, Error> {
    Ok(Handoff {
        document: object_of(&row.document, &format!("handoff {}", row.artifact_id))?,
    })
}

/// A fresh artifact id: `<prefix><32 hex>`.
pub(super) fn new_id(prefix: &str) -> String {
    format!("{prefix}{}", uuid::Uuid::new_v4().simple())
}

/// The revision id of an artifact's new content (it names the previous revision, so an
/// artifact's writes chain like the original's commits).
fn revision(previous: Option<&str>, path: &str, document: &str) -> String {
    crate::domain::memory::revision_id(previous, path, document)
}

impl Continuity {
    /// The tenant's peer `peer_id`, if registered.
    pub(super) async fn registered_peer(
        &self,
        tenant: &str,
        peer_id: &str,
    ) -> Result<Option<Peer>, Error> {
        match self.store().peer(tenant, peer_id).await? {
            Some(row) => Ok(Some(peer_of(&row)?)),
            None => Ok(None),
        }
    }

    /// 404 / 409 unless `peer_id` is registered in the tenant and not untrusted.
    pub(super) async fn require_usable_peer(
        &self,
        tenant: &str,
        peer_id: &str,
    ) -> Result<(), Error> {
        let peer = self.registered_peer(tenant, peer_id).await?;
        Ok(peers::require_usable(peer_id, peer.as_ref())?)
    }

    /// `GET /v1/peers`.
    pub async fn list_peers(&self, caller: &Caller) -> Result<Vec<u8>, Error> {
        caller.require(READ)?;
        caller.require_read_path(REGISTRY_PATH)?;
        let peers = self
            .store()
            .peers(&caller.tenant)
            .await?
            .iter()
            .map(peer_of)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(bytes_of(&peers::list_body(&peers)))
    }

    /// `POST /v1/peers/register`: creates the peer or updates its record (trust moving by
    /// the policy).
    pub async fn register_peer(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let request = peers::check_register(&parse_body(body)?)?;
        caller.require(ADMIN)?;
        caller.require_write_path(REGISTRY_PATH)?;
        let peer_id = text(&request, "peer_id").unwrap_or_default();
        for _ in 0..WRITE_ATTEMPTS {
            let row = self.store().peer(&caller.tenant, &peer_id).await?;
            let previous = row.as_ref().map(peer_of).transpose()?;
            let at = now();
            let peer = peers::register(&request, previous.as_ref(), caller.peer_id(), at)?;
            let (document, revision_id) = self.peer_document(&peer, row.as_ref());
            let landed = self
                .store()
                .peer_write(PeerWrite {
                    tenant: caller.tenant.clone(),
                    peer_id: peer_id.clone(),
                    trust_level: peer.trust_level(),
                    updated_at: peer.updated_at(),
                    document,
                    revision_id: revision_id.clone(),
                    expected_version: row.as_ref().map(|r| r.version),
                    at,
                    audit: audit(
                        caller,
                        "peers.register",
                        REGISTRY_PATH,
                        json!({
                            "peer_id": peer_id,
                            "created": previous.is_none(),
                            "trust_from": previous.as_ref().map_or_else(|| "untrusted".to_owned(), Peer::trust_level),
                            "trust_to": peer.trust_level(),
                        }),
                    ),
                })
                .await?;
            if landed {
                return Ok(bytes_of(&peers::registered_body(
                    &peer,
                    previous.is_none(),
                    &revision_id,
                )));
            }
        }
        Err(ContinuityError::lock_timeout("registry:peers_registry", WRITE_ATTEMPTS).into())
    }

    /// `POST /v1/peers/{peer_id}/trust`.
    pub async fn transition_peer(
        &self,
        caller: &Caller,
        peer_id: &str,
        body: &[u8],
    ) -> Result<Vec<u8>, Error> {
        let parsed = parse_body(body)?;
        let request = peers::check_transition_request(&parsed)?;
        let binding = signing::binding_change(&parsed)?;
        caller.require(ADMIN)?;
        caller.require_write_path(REGISTRY_PATH)?;
        if let BindingChange::Bind { agent_id, .. } = &binding {
            self.check_agent(caller, agent_id).await?;
        }
        for _ in 0..WRITE_ATTEMPTS {
            let row = self
                .store()
                .peer(&caller.tenant, peer_id)
                .await?
                .ok_or_else(|| ContinuityError::not_found(format!("Peer not found: {peer_id}")))?;
            let before = peer_of(&row)?;
            let at = now();
            let mut after = peers::transition(&before, &request, caller.peer_id(), at)?;
            signing::apply_binding(&mut after.record, &binding, caller.peer_id(), at)?;
            let (document, revision_id) = self.peer_document(&after, Some(&row));
            let landed = self
                .store()
                .peer_write(PeerWrite {
                    tenant: caller.tenant.clone(),
                    peer_id: peer_id.to_owned(),
                    trust_level: after.trust_level(),
                    updated_at: after.updated_at(),
                    document,
                    revision_id: revision_id.clone(),
                    expected_version: Some(row.version),
                    at,
                    audit: audit(
                        caller,
                        "peers.trust_transition",
                        REGISTRY_PATH,
                        json!({
                            "peer_id": peer_id,
                            "from": before.trust_level(),
                            "to": after.trust_level(),
                            "reason": text(&request, "reason"),
                            "agent_binding": after.record.get(signing::BINDING).map(Json::to_value),
                        }),
                    ),
                })
                .await?;
            if landed {
                return Ok(bytes_of(&peers::transitioned_body(&after, &revision_id)));
            }
        }
        Err(ContinuityError::lock_timeout("registry:peers_registry", WRITE_ATTEMPTS).into())
    }

    fn peer_document(&self, peer: &Peer, previous: Option<&PeerRow>) -> (String, String) {
        let document = to_py_json(&Json::Object(peer.record.clone()));
        let path = format!("{REGISTRY_PATH}#{}", peer.peer_id);
        let revision_id = revision(previous.map(|r| r.revision_id.as_str()), &path, &document);
        (document, revision_id)
    }

    /// `POST /v1/coordination/handoff/create`: the caller hands a registered, trusted
    /// recipient the shareable part of an active capsule it may read.
    pub async fn create_handoff(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let (parsed, presented) = signing::take(parse_body(body)?)?;
        let request = handoff::check_create(&parsed)?;
        caller.require(WRITE)?;
        caller.require_write_path(&handoff::path("x"))?;
        let recipient = text(&request, "recipient_peer").unwrap_or_default();
        self.require_usable_peer(&caller.tenant, &recipient).await?;
        check_commit_message(&Json::Object(request.clone()), "handoff")?;
        let subject_id = text(&request, "subject_id").unwrap_or_default();
        let kind = text(&request, "subject_kind")
            .and_then(|k| SubjectKind::parse(&k))
            .ok_or_else(|| ContinuityError::invalid("Invalid subject_kind"))?;
        let subject = subject_of(kind, &subject_id)?;
        let source_path = subject.active_path();
        // Unlike the original (digest §16), the sender must be allowed to read the capsule
        // it projects.
        caller.require(READ)?;
        caller.require_read_path(&source_path)?;
        let active = self
            .store()
            .subject(&caller.tenant, &subject)
            .await?
            .and_then(|row| row.active.clone())
            .ok_or_else(|| ContinuityError::not_found("Continuity capsule not found"))?;
        let (capsule, _) = self.load_as(
            &active.revision_id,
            &active.capsule,
            kind,
            &subject_id,
            "Continuity capsule subject does not match requested subject",
        )?;
        let signature = self.signature_of(caller, &parsed, presented).await?;
        let at = now();
        let handoff_id = new_id(handoff::PREFIX);
        let mut created = handoff::create(
            &request,
            &handoff_id,
            caller.peer_id(),
            &capsule,
            &source_path,
            at,
        )?;
        let signed_by = signed_by(signature.as_ref());
        signing::stamp(&mut created.document, signature);
        let path = created.path();
        let document = to_py_json(&Json::Object(created.document.clone()));
        let revision_id = revision(None, &path, &document);
        let landed = self
            .store()
            .coordination_write(ArtifactWrite {
                tenant: caller.tenant.clone(),
                kind: HANDOFF,
                artifact_id: handoff_id.clone(),
                party: created.sender(),
                counterparty: Some(created.recipient()),
                status: Some(created.status()),
                task_id: text(&created.document, "task_id"),
                thread_id: text(&created.document, "thread_id"),
                created_at: created.created_at(),
                updated_at: created.created_at(),
                document,
                revision_id: revision_id.clone(),
                expected_version: None,
                superseded: None,
                at,
                audit: audit(
                    caller,
                    "coordination.handoff_create",
                    &path,
                    json!({
                        "handoff_id": handoff_id,
                        "sender_peer": created.sender(),
                        "recipient_peer": created.recipient(),
                        "source_selector": {"subject_kind": kind.as_str(), "subject_id": subject_id},
                        "signed_by": signed_by,
                    }),
                ),
            })
            .await?;
        if !landed {
            return Err(Error::Corrupt(format!("handoff id {handoff_id} taken")));
        }
        Ok(bytes_of(&written_body(
            "handoff",
            &created.document,
            &path,
            "created",
            true,
            &revision_id,
        )))
    }

    async fn handoff_row(
        &self,
        caller: &Caller,
        handoff_id: &str,
    ) -> Result<(ArtifactRow, Handoff), Error> {
        let row = self
            .store()
            .coordination_artifact(&caller.tenant, HANDOFF, handoff_id)
            .await?
            .ok_or_else(|| ContinuityError::not_found(handoff::NOT_FOUND))?;
        let handoff = handoff_of(&row)?;
        Ok((row, handoff))
    }

    /// `GET /v1/coordination/handoff/{id}`: sender, recipient or admin.
    pub async fn read_handoff(&self, caller: &Caller, handoff_id: &str) -> Result<Vec<u8>, Error> {
        if check_id(handoff_id, handoff::PREFIX, handoff::INVALID_ID).is_err() {
            // The original probes the file by this name: no such artifact.
            return Err(ContinuityError::not_found(handoff::NOT_FOUND).into());
        }
        let (_, found) = self.handoff_row(caller, handoff_id).await?;
        found.check_visible(caller.peer_id(), is_admin(caller))?;
        Ok(bytes_of(&read_body(
            "handoff",
            &found.document,
            &found.path(),
        )))
    }

    /// `GET /v1/coordination/handoffs/query`.
    pub async fn query_handoffs(&self, caller: &Caller, params: &[u8]) -> Result<Vec<u8>, Error> {
        let admin = is_admin(caller);
        let query = HandoffQuery::from_json(&parse_body(params)?, caller.peer_id(), admin)?;
        caller.require(READ)?;
        let filter = ArtifactFilter {
            party: query.sender_peer.clone(),
            counterparty: query.recipient_peer.clone(),
            status: query.status.clone(),
            ..ArtifactFilter::default()
        };
        let mut found = Vec::new();
        for row in self
            .store()
            .coordination_artifacts(&caller.tenant, HANDOFF, &filter)
            .await?
        {
            let handoff = handoff_of(&row)?;
            if handoff.visible_to(caller.peer_id(), admin) {
                found.push(handoff);
            }
        }
        Ok(bytes_of(&handoff::query_body(found, &query)))
    }

    /// `POST /v1/coordination/handoff/{id}/consume`: the recipient, once.
    pub async fn consume_handoff(
        &self,
        caller: &Caller,
        handoff_id: &str,
        body: &[u8],
    ) -> Result<Vec<u8>, Error> {
        let request = handoff::check_consume(&parse_body(body)?)?;
        check_id(handoff_id, handoff::PREFIX, handoff::INVALID_ID)?;
        for _ in 0..WRITE_ATTEMPTS {
            let (row, before) = self.handoff_row(caller, handoff_id).await?;
            let at = now();
            let after = match handoff::consume(&before, &request, caller.peer_id(), at)? {
                Consumed::Replay => {
                    return Ok(bytes_of(&written_body(
                        "handoff",
                        &before.document,
                        &before.path(),
                        "updated",
                        false,
                        &row.revision_id,
                    )));
                }
                Consumed::Updated(after) => after,
            };
            let path = after.path();
            let document = to_py_json(&Json::Object(after.document.clone()));
            let revision_id = revision(Some(&row.revision_id), &path, &document);
            let landed = self
                .store()
                .coordination_write(ArtifactWrite {
                    tenant: caller.tenant.clone(),
                    kind: HANDOFF,
                    artifact_id: handoff_id.to_owned(),
                    party: after.sender(),
                    counterparty: Some(after.recipient()),
                    status: Some(after.status()),
                    task_id: text(&after.document, "task_id"),
                    thread_id: text(&after.document, "thread_id"),
                    created_at: after.created_at(),
                    updated_at: text(&after.document, "consumed_at").unwrap_or_default(),
                    document,
                    revision_id: revision_id.clone(),
                    expected_version: Some(row.version),
                    superseded: None,
                    at,
                    audit: audit(
                        caller,
                        "coordination.handoff_consume",
                        &path,
                        json!({
                            "handoff_id": handoff_id,
                            "recipient_status": after.status(),
                            "consumed_by": caller.peer_id(),
                        }),
                    ),
                })
                .await?;
            if landed {
                return Ok(bytes_of(&written_body(
                    "handoff",
                    &after.document,
                    &path,
                    "updated",
                    true,
                    &revision_id,
                )));
            }
        }
        Err(ContinuityError::lock_timeout(&format!("artifact:{handoff_id}"), WRITE_ATTEMPTS).into())
    }
}

const SHARED: &str = "shared";
const RECONCILIATION: &str = "reconciliation";

fn shared_of(row: &ArtifactRow) -> Result<Shared, Error> {
    Ok(Shared {
        document: object_of(&row.document, &format!("shared {}", row.artifact_id))?,
    })
}

fn reconciliation_of(row: &ArtifactRow) -> Result<Reconciliation, Error> {
    Ok(Reconciliation {
        document: object_of(
            &row.document,
            &format!("reconciliation {}", row.artifact_id),
        )?,
    })
}

/// The store's write of a shared artifact (`superseded`: the version it replaces).
fn shared_write(
    caller: &Caller,
    shared: &Shared,
    revision_id: &str,
    previous: Option<&ArtifactRow>,
    at: time::OffsetDateTime,
    audit: noema_core::audit::AuditDraft,
) -> ArtifactWrite {
    ArtifactWrite {
        tenant: caller.tenant.clone(),
        kind: SHARED,
        artifact_id: shared.id(),
        party: shared.owner(),
        counterparty: None,
        status: None,
        task_id: shared.task_id(),
        thread_id: shared.thread_id(),
        created_at: shared.created_at(),
        updated_at: shared.updated_at(),
        document: to_py_json(&Json::Object(shared.document.clone())),
        revision_id: revision_id.to_owned(),
        expected_version: previous.map(|r| r.version),
        superseded: previous.map(|r| Superseded {
            version: r.version,
            document: r.document.clone(),
            revision_id: r.revision_id.clone(),
        }),
        at,
        audit,
    }
}

fn reconciliation_write(
    caller: &Caller,
    record: &Reconciliation,
    revision_id: &str,
    previous: Option<&ArtifactRow>,
    at: time::OffsetDateTime,
    audit: noema_core::audit::AuditDraft,
) -> ArtifactWrite {
    ArtifactWrite {
        tenant: caller.tenant.clone(),
        kind: RECONCILIATION,
        artifact_id: record.id(),
        party: record.owner(),
        counterparty: None,
        status: Some(record.status()),
        task_id: text(&record.document, "task_id"),
        thread_id: text(&record.document, "thread_id"),
        created_at: record.created_at(),
        updated_at: record.updated_at(),
        document: to_py_json(&Json::Object(record.document.clone())),
        revision_id: revision_id.to_owned(),
        expected_version: previous.map(|r| r.version),
        superseded: None,
        at,
        audit,
    }
}

impl Continuity {
    /// `POST /v1/coordination/shared/create`.
    pub async fn create_shared(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let (parsed, presented) = signing::take(parse_body(body)?)?;
        let request = shared::check_create(&parsed)?;
        caller.require(WRITE)?;
        caller.require_write_path(&shared::path("x"))?;
        let named = shared::participants(&request);
        for (index, peer) in named.iter().enumerate() {
            shared::check_participant(&named, index, caller.peer_id())?;
            self.require_usable_peer(&caller.tenant, peer).await?;
        }
        shared::check_create_state(&request)?;
        let signature = self.signature_of(caller, &parsed, presented).await?;
        let signed_by = signed_by(signature.as_ref());
        let at = now();
        let mut created = shared::create(&request, &new_id(shared::PREFIX), caller.peer_id(), at);
        signing::stamp(&mut created.document, signature);
        let path = created.path();
        let document = to_py_json(&Json::Object(created.document.clone()));
        let revision_id = revision(None, &path, &document);
        let write = shared_write(
            caller,
            &created,
            &revision_id,
            None,
            at,
            audit(
                caller,
                "coordination.shared_create",
                &path,
                json!({
                    "shared_id": created.id(),
                    "owner_peer": created.owner(),
                    "participant_peers": named,
                    "signed_by": signed_by,
                }),
            ),
        );
        if !self.store().coordination_write(write).await? {
            return Err(Error::Corrupt(format!("shared id {} taken", created.id())));
        }
        Ok(bytes_of(&written_body(
            "shared",
            &created.document,
            &path,
            "created",
            true,
            &revision_id,
        )))
    }

    async fn shared_row(
        &self,
        caller: &Caller,
        shared_id: &str,
    ) -> Result<(ArtifactRow, Shared), Error> {
        check_id(shared_id, shared::PREFIX, shared::INVALID_ID)?;
        let row = self
            .store()
            .coordination_artifact(&caller.tenant, SHARED, shared_id)
            .await?
            .ok_or_else(|| ContinuityError::not_found(shared::NOT_FOUND))?;
        let found = shared_of(&row)?;
        Ok((row, found))
    }

    /// `GET /v1/coordination/shared/{id}`: owner, participant or admin.
    pub async fn read_shared(&self, caller: &Caller, shared_id: &str) -> Result<Vec<u8>, Error> {
        let (_, found) = self.shared_row(caller, shared_id).await?;
        found.check_visible(caller.peer_id(), is_admin(caller))?;
        Ok(bytes_of(&read_body(
            "shared",
            &found.document,
            &found.path(),
        )))
    }

    /// The superseded versions of a shared artifact the caller may see, oldest first
    /// (Noema's: the original archives them but serves no route for them).
    pub async fn shared_history(&self, caller: &Caller, shared_id: &str) -> Result<Vec<u8>, Error> {
        let (row, found) = self.shared_row(caller, shared_id).await?;
        found.check_visible(caller.peer_id(), is_admin(caller))?;
        let mut versions = Vec::new();
        for version in self
            .store()
            .coordination_history(&caller.tenant, SHARED, shared_id)
            .await?
        {
            let document = object_of(&version.document, &format!("shared {shared_id} history"))?;
            let mut entry = JsonObject::new();
            entry.insert("version", Json::from(version.version));
            entry.insert("latest_commit", Json::from(version.revision_id));
            entry.insert("shared", Json::Object(document));
            versions.push(Json::Object(entry));
        }
        let mut o = JsonObject::new();
        o.insert("ok", Json::Bool(true));
        o.insert("shared_id", Json::from(shared_id));
        o.insert("current_version", Json::from(found.version()));
        o.insert("latest_commit", Json::from(row.revision_id));
        o.insert("count", Json::from(versions.len()));
        o.insert("versions", Json::Array(versions));
        Ok(bytes_of(&Json::Object(o)))
    }

    /// `GET /v1/coordination/shared/query`.
    pub async fn query_shared(&self, caller: &Caller, params: &[u8]) -> Result<Vec<u8>, Error> {
        let admin = is_admin(caller);
        let query = SharedQuery::from_json(&parse_body(params)?, caller.peer_id(), admin)?;
        caller.require(READ)?;
        let filter = ArtifactFilter {
            party: query.owner_peer.clone(),
            task_id: query.task_id.clone(),
            thread_id: query.thread_id.clone(),
            ..ArtifactFilter::default()
        };
        let mut found = Vec::new();
        for row in self
            .store()
            .coordination_artifacts(&caller.tenant, SHARED, &filter)
            .await?
        {
            let artifact = shared_of(&row)?;
            if query.keeps(&artifact) && artifact.visible_to(caller.peer_id(), admin) {
                found.push(artifact);
            }
        }
        Ok(bytes_of(&shared::query_body(found, &query)))
    }

    /// `POST /v1/coordination/shared/{id}/update`: the owner, at the version it read; the
    /// superseded version is kept in the same transaction.
    pub async fn update_shared(
        &self,
        caller: &Caller,
        shared_id: &str,
        body: &[u8],
    ) -> Result<Vec<u8>, Error> {
        let (parsed, presented) = signing::take(parse_body(body)?)?;
        // A signature covers the artifact's id too, so it cannot be replayed onto another.
        let (parsed, covered) = signing::bind_target(
            parsed,
            presented.is_some(),
            signing::SHARED_TARGET,
            shared_id,
        )?;
        let request = shared::check_update(&parsed)?;
        caller.require(WRITE)?;
        caller.require_write_path(&shared::path("x"))?;
        let signature = self.signature_of(caller, &covered, presented).await?;
        // The original takes the artifact's lock before it reads the id's form.
        check_lock_id(shared_id)?;
        for _ in 0..WRITE_ATTEMPTS {
            let (row, before) = self.shared_row(caller, shared_id).await?;
            let at = now();
            let mut after = shared::update(&before, &request, caller.peer_id(), at)?;
            // This version's signature, or none: the one before signed another version.
            signing::stamp(&mut after.document, signature.clone());
            let path = after.path();
            let document = to_py_json(&Json::Object(after.document.clone()));
            let revision_id = revision(Some(&row.revision_id), &path, &document);
            let write = shared_write(
                caller,
                &after,
                &revision_id,
                Some(&row),
                at,
                audit(
                    caller,
                    "coordination.shared_update",
                    &path,
                    json!({
                        "shared_id": shared_id,
                        "owner_peer": after.owner(),
                        "version": after.version(),
                        "signed_by": signed_by(signature.as_ref()),
                    }),
                ),
            );
            if self.store().coordination_write(write).await? {
                return Ok(bytes_of(&shared::updated_body(&after, &revision_id)));
            }
            // Another update landed first: the next round answers the version conflict
            // (the caller named the version it read).
        }
        Err(ContinuityError::lock_timeout(&format!("artifact:{shared_id}"), WRITE_ATTEMPTS).into())
    }

    /// A claim's source, loaded (404 when missing, 400 for an id of the wrong form).
    async fn claim_source(&self, caller: &Caller, claim: &Claim) -> Result<Source, Error> {
        reconciliation::check_source_id(claim)?;
        let kind = if claim.source_kind == "shared" {
            SHARED
        } else {
            HANDOFF
        };
        let row = self
            .store()
            .coordination_artifact(&caller.tenant, kind, &claim.source_id)
            .await?
            .ok_or_else(|| ContinuityError::not_found("Referenced source artifact not found"))?;
        Ok(if kind == SHARED {
            Source::Shared(shared_of(&row)?)
        } else {
            Source::Handoff(handoff_of(&row)?)
        })
    }

    /// `POST /v1/coordination/reconciliation/open`.
    pub async fn open_reconciliation(
        &self,
        caller: &Caller,
        body: &[u8],
    ) -> Result<Vec<u8>, Error> {
        let (parsed, presented) = signing::take(parse_body(body)?)?;
        // The model first (422), as FastAPI validates it before the handler runs.
        crate::domain::coordination::validated(&reconciliation::OPEN_REQUEST, &parsed)?;
        caller.require(WRITE)?;
        caller.require_write_path(&reconciliation::path("x"))?;
        let request = reconciliation::check_open(&parsed)?;
        for claim in &request.claims {
            self.require_usable_peer(&caller.tenant, &claim.claimant_peer)
                .await?;
        }
        let mut sources = Vec::new();
        for claim in &request.claims {
            sources.push(self.claim_source(caller, claim).await?);
        }
        let admin = is_admin(caller);
        for (claim, source) in request.claims.iter().zip(&sources) {
            reconciliation::check_source(claim, source, caller.peer_id(), admin)?;
        }
        let signature = self.signature_of(caller, &parsed, presented).await?;
        let signed_by = signed_by(signature.as_ref());
        let at = now();
        let mut opened = reconciliation::open(
            &request,
            &new_id(reconciliation::PREFIX),
            caller.peer_id(),
            at,
        );
        signing::stamp(&mut opened.document, signature);
        let path = opened.path();
        let document = to_py_json(&Json::Object(opened.document.clone()));
        let revision_id = revision(None, &path, &document);
        let write = reconciliation_write(
            caller,
            &opened,
            &revision_id,
            None,
            at,
            audit(
                caller,
                "coordination.reconciliation_open",
                &path,
                json!({
                    "reconciliation_id": opened.id(),
                    "owner_peer": opened.owner(),
                    "participant_peers": opened.participants(),
                    "classification": opened.classification(),
                    "signed_by": signed_by,
                }),
            ),
        );
        if !self.store().coordination_write(write).await? {
            return Err(Error::Corrupt(format!(
                "reconciliation id {} taken",
                opened.id()
            )));
        }
        Ok(bytes_of(&written_body(
            "reconciliation",
            &opened.document,
            &path,
            "created",
            true,
            &revision_id,
        )))
    }

    async fn reconciliation_row(
        &self,
        caller: &Caller,
        reconciliation_id: &str,
    ) -> Result<(ArtifactRow, Reconciliation), Error> {
        check_id(
            reconciliation_id,
            reconciliation::PREFIX,
            reconciliation::INVALID_ID,
        )?;
        let row = self
            .store()
            .coordination_artifact(&caller.tenant, RECONCILIATION, reconciliation_id)
            .await?
            .ok_or_else(|| ContinuityError::not_found(reconciliation::NOT_FOUND))?;
        let found = reconciliation_of(&row)?;
        Ok((row, found))
    }

    /// `GET /v1/coordination/reconciliation/{id}`: owner, participant or admin.
    pub async fn read_reconciliation(
        &self,
        caller: &Caller,
        reconciliation_id: &str,
    ) -> Result<Vec<u8>, Error> {
        let (_, found) = self.reconciliation_row(caller, reconciliation_id).await?;
        found.check_visible(caller.peer_id(), is_admin(caller))?;
        Ok(bytes_of(&read_body(
            "reconciliation",
            &found.document,
            &found.path(),
        )))
    }

    /// `GET /v1/coordination/reconciliations/query`.
    pub async fn query_reconciliations(
        &self,
        caller: &Caller,
        params: &[u8],
    ) -> Result<Vec<u8>, Error> {
        let admin = is_admin(caller);
        let query = ReconciliationQuery::from_json(&parse_body(params)?, caller.peer_id(), admin)?;
        caller.require(READ)?;
        let filter = ArtifactFilter {
            party: query.owner_peer.clone(),
            status: query.status.clone(),
            task_id: query.task_id.clone(),
            thread_id: query.thread_id.clone(),
            ..ArtifactFilter::default()
        };
        let mut found = Vec::new();
        for row in self
            .store()
            .coordination_artifacts(&caller.tenant, RECONCILIATION, &filter)
            .await?
        {
            let record = reconciliation_of(&row)?;
            if query.keeps(&record) && record.visible_to(caller.peer_id(), admin) {
                found.push(record);
            }
        }
        Ok(bytes_of(&reconciliation::query_body(found, &query)))
    }

    /// `POST /v1/coordination/reconciliation/{id}/resolve`: owner or admin, once, at the
    /// version read.
    pub async fn resolve_reconciliation(
        &self,
        caller: &Caller,
        reconciliation_id: &str,
        body: &[u8],
    ) -> Result<Vec<u8>, Error> {
        let (parsed, presented) = signing::take(parse_body(body)?)?;
        // A signature covers the reconciliation's id too, so it cannot be replayed onto another.
        let (parsed, covered) = signing::bind_target(
            parsed,
            presented.is_some(),
            signing::RECONCILIATION_TARGET,
            reconciliation_id,
        )?;
        let request = reconciliation::check_resolve(&parsed)?;
        caller.require(WRITE)?;
        caller.require_write_path(&reconciliation::path("x"))?;
        check_id(
            reconciliation_id,
            reconciliation::PREFIX,
            reconciliation::INVALID_ID,
        )?;
        let admin = is_admin(caller);
        let signature = self.signature_of(caller, &covered, presented).await?;
        for _ in 0..WRITE_ATTEMPTS {
            let (row, before) = self.reconciliation_row(caller, reconciliation_id).await?;
            let at = now();
            let mut after =
                match reconciliation::resolve(&before, &request, caller.peer_id(), admin, at)? {
                    Resolved::Replay => {
                        return Ok(bytes_of(&written_body(
                            "reconciliation",
                            &before.document,
                            &before.path(),
                            "updated",
                            false,
                            &row.revision_id,
                        )));
                    }
                    Resolved::Updated(after) => after,
                };
            // The resolver's signature beside the opener's, which it does not replace.
            signing::stamp_as(
                &mut after.document,
                signing::RESOLVER_FIELD,
                signature.clone(),
            );
            let path = after.path();
            let document = to_py_json(&Json::Object(after.document.clone()));
            let revision_id = revision(Some(&row.revision_id), &path, &document);
            let write = reconciliation_write(
                caller,
                &after,
                &revision_id,
                Some(&row),
                at,
                audit(
                    caller,
                    "coordination.reconciliation_resolve",
                    &path,
                    json!({
                        "reconciliation_id": reconciliation_id,
                        "outcome": text(&after.document, "resolution_outcome"),
                        "version": after.version(),
                        "signed_by": signed_by(signature.as_ref()),
                    }),
                ),
            );
            if self.store().coordination_write(write).await? {
                return Ok(bytes_of(&written_body(
                    "reconciliation",
                    &after.document,
                    &path,
                    "updated",
                    true,
                    &revision_id,
                )));
            }
        }
        Err(
            ContinuityError::lock_timeout(&format!("artifact:{reconciliation_id}"), WRITE_ATTEMPTS)
                .into(),
        )
    }
}

/// The agent a stored `sender_signature` names (for the audit entry; null when unsigned).
fn signed_by(signature: Option<&Json>) -> serde_json::Value {
    signature
        .and_then(|s| s.get(signing::AGENT_ID))
        .and_then(Json::as_str)
        .map_or(serde_json::Value::Null, serde_json::Value::from)
}
