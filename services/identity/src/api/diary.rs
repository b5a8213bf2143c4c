//! gRPC adapter of `DiaryService`: proto ⇄ domain, the order of checks, nothing else.
//! The rules live in `crate::domain::{diary, entry, signing, relation, chain}`.

use noema_core::keys::PublicKey;
use noema_proto::identity::v1 as pb;
use noema_proto::identity::v1::diary_service_server::DiaryService;
use noema_runtime::auth::principal;
use time::OffsetDateTime;
use tonic::{Request, Response, Status};

use super::timestamp;
use crate::domain::diary::{
    self, Access, Caller, Diary, Share, ShareRole, ShareStatus, Visibility,
};
use crate::domain::entry::{self, Entry, EntryPatch, EntryType};
use crate::domain::relation::{self, Relation};
use crate::domain::signing::{self, SigningRequest};
use crate::domain::{agent, bulk, chain, tag, walk};
use crate::error::IdentityError;
use crate::domain::search::fts5_query;
use crate::store::{EntryFilter, IdentityStore, RelationFilter, SignatureInput};

const ENTRY_NOT_FOUND: &str = "Diary entry not found";
const REQUEST_NOT_FOUND: &str = "Signing request not found";
const RELATION_NOT_FOUND: &str = "Relation not found";

#[derive(Debug, Clone)]
pub struct DiaryApi {
    store: IdentityStore,
}

impl DiaryApi {
    pub fn new(store: IdentityStore) -> Self {
        DiaryApi { store }
    }
}

fn caller<T>(request: &Request<T>) -> Result<Caller, Status> {
    let p = principal(request)?;
    Ok(Caller {
        id: p.peer_id.clone(),
        superuser: p.superuser,
    })
}

fn fingerprint_of(key: Option<&str>) -> String {
    key.and_then(|k| PublicKey::parse(k).ok())
        .map(|k| k.fingerprint())
        .unwrap_or_default()
}

fn diary_to_proto(d: Diary) -> pb::Diary {
    pb::Diary {
        owner_fingerprint: fingerprint_of(d.owner_public_key.as_deref()),
        owner_public_key: d.owner_public_key.unwrap_or_default(),
        id: d.id,
        owner_id: d.owner_id,
        name: d.name,
        visibility: d.visibility.as_str().to_owned(),
        signed: d.signed,
        team_id: d.team_id,
        created_at: Some(timestamp(d.created_at)),
        updated_at: Some(timestamp(d.updated_at)),
    }
}

fn share_to_proto(s: Share) -> pb::DiaryShare {
    pb::DiaryShare {
        diary_id: s.diary_id,
        agent_id: s.agent_id,
        role: s.role.as_str().to_owned(),
        status: s.status.as_str().to_owned(),
        invited_by: s.invited_by,
        created_at: Some(timestamp(s.created_at)),
        updated_at: Some(timestamp(s.updated_at)),
    }
}

pub fn entry_to_proto(e: Entry) -> pb::Entry {
    let sig = e.signature.clone();
    pb::Entry {
        creator_fingerprint: fingerprint_of(e.creator_public_key.as_deref()),
        creator_public_key: e.creator_public_key.unwrap_or_default(),
        id: e.id,
        diary_id: e.diary_id,
        title: e.title,
        content: e.content,
        tags: e.tags.unwrap_or_default(),
        entry_type: e.entry_type.as_str().to_owned(),
        importance: e.importance,
        injection_risk: e.injection_risk,
        access_count: e.access_count,
        last_accessed_at: e.last_accessed_at.map(timestamp),
        content_hash: e.content_hash,
        content_signature: sig
            .as_ref()
            .map(|s| s.signature.clone())
            .unwrap_or_default(),
        signing_nonce: sig.as_ref().map(|s| s.nonce.clone()).unwrap_or_default(),
        signing_request_id: sig
            .as_ref()
            .map(|s| s.signing_request_id.clone())
            .unwrap_or_default(),
        signed_by: sig
            .as_ref()
            .map(|s| s.signed_by.clone())
            .unwrap_or_default(),
        signer_fingerprint: sig
            .as_ref()
            .map(|s| s.signer_fingerprint.clone())
            .unwrap_or_default(),
        signed_at: sig.as_ref().map(|s| timestamp(s.signed_at)),
        created_by: e.created_by,
        created_at: Some(timestamp(e.created_at)),
        updated_at: Some(timestamp(e.updated_at)),
        superseded: e.superseded,
        chain_seq: sig.as_ref().map_or(0, |s| s.chain_seq),
        chain_prev: sig
            .as_ref()
            .map(|s| s.chain_prev.clone())
            .unwrap_or_default(),
        chain_hash: sig
            .as_ref()
            .map(|s| s.chain_hash.clone())
            .unwrap_or_default(),
        visibility: e.visibility.as_str().to_owned(),
    }
}

fn request_to_proto(r: SigningRequest, now: OffsetDateTime) -> pb::SigningRequest {
    pb::SigningRequest {
        signing_input: r.signing_input(),
        status: r.effective_status(now).as_str().to_owned(),
        id: r.id,
        agent_id: r.agent_id,
        message: r.message,
        nonce: r.nonce,
        signature: r.signature.unwrap_or_default(),
        valid: r.valid,
        entry_id: r.entry_id.unwrap_or_default(),
        purpose: r.purpose,
        verification_method: r.verification_method,
        created_at: Some(timestamp(r.created_at)),
        expires_at: Some(timestamp(r.expires_at)),
        completed_at: r.completed_at.map(timestamp),
        team_id: r.team_id,
    }
}

fn relation_to_proto(r: Relation) -> pb::EntryRelation {
    pb::EntryRelation {
        id: r.id,
        source_id: r.source_id,
        target_id: r.target_id,
        relation: r.relation,
        status: r.status,
        source_cid_snapshot: r.source_cid_snapshot.unwrap_or_default(),
        target_cid_snapshot: r.target_cid_snapshot.unwrap_or_default(),
        created_at: Some(timestamp(r.created_at)),
        updated_at: Some(timestamp(r.updated_at)),
    }
}

fn required(field: &str, value: &str) -> Result<(), IdentityError> {
    if value.trim().is_empty() {
        Err(IdentityError::InvalidArgument(format!(
            "{field} is required"
        )))
    } else {
        Ok(())
    }
}

/// `requested` clamped to 1..=max, `default` for 0; more than max is refused.
fn limit(field: &str, requested: u32, default: u32, max: u32) -> Result<u32, IdentityError> {
    match requested {
        0 => Ok(default),
        n if n <= max => Ok(n),
        n => Err(IdentityError::InvalidArgument(format!(
            "{field} must be 1-{max}, got {n}"
        ))),
    }
}

fn entry_types(types: &[String]) -> Result<Vec<String>, IdentityError> {
    types
        .iter()
        .map(|t| {
            if t.is_empty() {
                Err(IdentityError::InvalidArgument(
                    "entry type filters must not be empty".into(),
                ))
            } else {
                EntryType::parse(t).map(|t| t.as_str().to_owned())
            }
        })
        .collect()
}

fn tag_filter(field: &str, tags: &[String]) -> Result<(), IdentityError> {
    entry::validate_tags(field, tags)?;
    if tags.iter().any(|t| t.contains(',')) {
        return Err(IdentityError::InvalidArgument(format!(
            "{field}: tag filters must not contain commas; repeat the parameter instead"
        )));
    }
    Ok(())
}

impl DiaryApi {
    /// The diary and the caller's access to it; NOT_FOUND when missing.
    async fn diary_access(
        &self,
        caller: &Caller,
        diary_id: &str,
    ) -> Result<(Diary, Access), IdentityError> {
        let diary = self
            .store
            .get_diary(diary_id)
            .await?
            .ok_or_else(diary::not_found)?;
        let share = if caller.superuser || caller.id == diary.owner_id {
            None
        } else {
            self.store.get_share(&diary.id, &caller.id).await?
        };
        let access = diary::access(caller, &diary, share.as_ref());
        Ok((diary, access))
    }

    /// The entry and the caller's access to its diary; an unreadable entry is missing.
    async fn entry_access(
        &self,
        caller: &Caller,
        entry_id: &str,
    ) -> Result<(Entry, Access), IdentityError> {
        let not_found = || IdentityError::NotFound(ENTRY_NOT_FOUND.into());
        let entry = self
            .store
            .get_entry(entry_id)
            .await?
            .ok_or_else(not_found)?;
        let (_, access) = self.diary_access(caller, &entry.diary_id).await?;
        if access == Access::None {
            return Err(not_found());
        }
        Ok((entry, access))
    }

    /// DeleteEntry: the caller needs write access to the entry's diary, the entry must be
    /// unsigned; the store deletes it and appends the audit entry. DeleteEntries reuses it
    /// for every id.
    async fn delete_one(&self, caller: &Caller, id: &str) -> Result<(), IdentityError> {
        let (e, access) = self.entry_access(caller, id).await?;
        diary::require(access, Access::Write)?;
        entry::check_deletable(&e)?;
        self.store
            .delete_entry(&e.id, &caller.id, OffsetDateTime::now_utc())
            .await
    }

    async fn fresh_entry(&self, id: &str) -> Result<Entry, IdentityError> {
        self.store
            .get_entry(id)
            .await?
            .ok_or_else(|| IdentityError::NotFound(ENTRY_NOT_FOUND.into()))
    }

    /// The caller's registered key: signing needs a registered agent.
    async fn signer_key(&self, agent_id: &str) -> Result<PublicKey, IdentityError> {
        self.store
            .get_agent(agent_id)
            .await?
            .map(|a| a.public_key)
            .ok_or_else(|| {
                IdentityError::FailedPrecondition(format!(
                    "the token acts as {agent_id:?}, which is not a registered agent; register its \
                     Ed25519 key (RegisterAgent / POST /v1/agents) and use a token whose peer_id is \
                     that agent id"
                ))
            })
    }

    /// The key `agent_id` held with `fingerprint` (it may have rotated since).
    async fn key_with_fingerprint(
        &self,
        agent_id: &str,
        fingerprint: &str,
    ) -> Result<Option<PublicKey>, IdentityError> {
        if let Some(agent) = self.store.get_agent(agent_id).await?
            && (fingerprint.is_empty() || agent.public_key.fingerprint() == fingerprint)
        {
            return Ok(Some(agent.public_key));
        }
        Ok(self
            .store
            .historic_key(agent_id, fingerprint)
            .await?
            .and_then(|k| PublicKey::parse(&k).ok()))
    }

    async fn get_request_of(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<SigningRequest, IdentityError> {
        let not_found = || IdentityError::NotFound(REQUEST_NOT_FOUND.into());
        let request = self
            .store
            .get_signing_request(id)
            .await?
            .ok_or_else(not_found)?;
        if request.agent_id != caller.id && !caller.superuser {
            return Err(not_found());
        }
        Ok(request)
    }

    async fn relation_with_write(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<Relation, IdentityError> {
        let not_found = || IdentityError::NotFound(RELATION_NOT_FOUND.into());
        let relation = self.store.get_relation(id).await?.ok_or_else(not_found)?;
        let (_, access) = self
            .entry_access(caller, &relation.source_id)
            .await
            .map_err(|_| not_found())?;
        diary::require(access, Access::Write)?;
        Ok(relation)
    }
}

#[tonic::async_trait]
impl DiaryService for DiaryApi {
    async fn create_diary(
        &self,
        request: Request<pb::CreateDiaryRequest>,
    ) -> Result<Response<pb::Diary>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        diary::validate_name(&req.name)?;
        let visibility = Visibility::parse(&req.visibility)?;
        let now = OffsetDateTime::now_utc();
        let d = Diary {
            id: signing::new_uuid(),
            owner_id: caller.id.clone(),
            name: req.name,
            visibility,
            signed: false,
            team_id: req.team_id,
            created_at: now,
            updated_at: now,
            owner_public_key: None,
        };
        self.store.insert_diary(&d, &caller.id, now).await?;
        let stored = self.store.get_diary(&d.id).await?.unwrap_or(d);
        Ok(Response::new(diary_to_proto(stored)))
    }

    async fn get_diary(
        &self,
        request: Request<pb::GetDiaryRequest>,
    ) -> Result<Response<pb::Diary>, Status> {
        let caller = caller(&request)?;
        let (d, access) = self.diary_access(&caller, &request.into_inner().id).await?;
        diary::require(access, Access::Read)?;
        Ok(Response::new(diary_to_proto(d)))
    }

    async fn list_diaries(
        &self,
        request: Request<pb::ListDiariesRequest>,
    ) -> Result<Response<pb::ListDiariesResponse>, Status> {
        let caller = caller(&request)?;
        let filter = (!caller.superuser).then_some(caller.id.as_str());
        let diaries = self.store.list_diaries(filter).await?;
        Ok(Response::new(pb::ListDiariesResponse {
            diaries: diaries.into_iter().map(diary_to_proto).collect(),
        }))
    }

    async fn update_diary(
        &self,
        request: Request<pb::UpdateDiaryRequest>,
    ) -> Result<Response<pb::Diary>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        let (mut d, access) = self.diary_access(&caller, &req.id).await?;
        diary::require(access, Access::Manage)?;
        if req.name.is_none() && req.visibility.is_none() {
            return Err(IdentityError::InvalidArgument(
                "give name and/or visibility to update".into(),
            )
            .into());
        }
        if let Some(name) = req.name {
            diary::validate_name(&name)?;
            d.name = name;
        }
        if let Some(visibility) = req.visibility {
            d.visibility = Visibility::parse(&visibility)?;
        }
        let now = OffsetDateTime::now_utc();
        self.store.update_diary(&d, &caller.id, now).await?;
        let stored = self
            .store
            .get_diary(&d.id)
            .await?
            .ok_or_else(diary::not_found)?;
        Ok(Response::new(diary_to_proto(stored)))
    }

    async fn delete_diary(
        &self,
        request: Request<pb::DeleteDiaryRequest>,
    ) -> Result<Response<pb::DeleteDiaryResponse>, Status> {
        let caller = caller(&request)?;
        let (d, access) = self.diary_access(&caller, &request.into_inner().id).await?;
        diary::require(access, Access::Manage)?;
        let deleted = self
            .store
            .delete_diary(&d.id, &caller.id, OffsetDateTime::now_utc())
            .await?;
        Ok(Response::new(pb::DeleteDiaryResponse {
            deleted_entries: u32::try_from(deleted).unwrap_or(u32::MAX),
        }))
    }

    async fn share_diary(
        &self,
        request: Request<pb::ShareDiaryRequest>,
    ) -> Result<Response<pb::DiaryShare>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        let (d, access) = self.diary_access(&caller, &req.diary_id).await?;
        diary::require(access, Access::Manage)?;
        agent::validate_agent_id(&req.agent_id)?;
        let role = ShareRole::parse(&req.role)?;
        if req.agent_id == d.owner_id {
            return Err(IdentityError::InvalidArgument(
                "the owner already has full access; share with another agent".into(),
            )
            .into());
        }
        let now = OffsetDateTime::now_utc();
        let existing = self.store.get_share(&d.id, &req.agent_id).await?;
        let share = match existing {
            Some(s) if matches!(s.status, ShareStatus::Pending | ShareStatus::Accepted) => Share {
                role,
                updated_at: now,
                invited_by: caller.id.clone(),
                ..s
            },
            Some(s) => Share {
                role,
                status: ShareStatus::Pending,
                updated_at: now,
                invited_by: caller.id.clone(),
                ..s
            },
            None => Share {
                diary_id: d.id.clone(),
                agent_id: req.agent_id.clone(),
                role,
                status: ShareStatus::Pending,
                invited_by: caller.id.clone(),
                created_at: now,
                updated_at: now,
            },
        };
        self.store
            .put_share(&share, "share_diary", &caller.id, now)
            .await?;
        Ok(Response::new(share_to_proto(share)))
    }

    async fn respond_to_share(
        &self,
        request: Request<pb::RespondToShareRequest>,
    ) -> Result<Response<pb::DiaryShare>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        required("diary_id", &req.diary_id)?;
        let share = self
            .store
            .get_share(&req.diary_id, &caller.id)
            .await?
            .ok_or_else(|| {
                IdentityError::NotFound(format!(
                    "{:?} has no share of diary {:?} to answer",
                    caller.id, req.diary_id
                ))
            })?;
        let status = diary::respond(&share, req.accept)?;
        let now = OffsetDateTime::now_utc();
        let share = Share {
            status,
            updated_at: now,
            ..share
        };
        let action = if req.accept {
            "accept_share"
        } else {
            "decline_share"
        };
        self.store
            .put_share(&share, action, &caller.id, now)
            .await?;
        Ok(Response::new(share_to_proto(share)))
    }

    async fn revoke_share(
        &self,
        request: Request<pb::RevokeShareRequest>,
    ) -> Result<Response<pb::DiaryShare>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        let (d, access) = self.diary_access(&caller, &req.diary_id).await?;
        diary::require(access, Access::Manage)?;
        let share = self
            .store
            .get_share(&d.id, &req.agent_id)
            .await?
            .ok_or_else(|| {
                IdentityError::NotFound(format!("diary has no share for {:?}", req.agent_id))
            })?;
        if share.status == ShareStatus::Revoked {
            return Ok(Response::new(share_to_proto(share)));
        }
        let now = OffsetDateTime::now_utc();
        let share = Share {
            status: ShareStatus::Revoked,
            updated_at: now,
            ..share
        };
        self.store
            .put_share(&share, "revoke_share", &caller.id, now)
            .await?;
        Ok(Response::new(share_to_proto(share)))
    }

    async fn list_shares(
        &self,
        request: Request<pb::ListSharesRequest>,
    ) -> Result<Response<pb::ListSharesResponse>, Status> {
        let caller = caller(&request)?;
        let (d, access) = self
            .diary_access(&caller, &request.into_inner().diary_id)
            .await?;
        let shares = if access == Access::Manage {
            self.store.list_shares(&d.id, None).await?
        } else {
            let own = self.store.list_shares(&d.id, Some(&caller.id)).await?;
            if own.is_empty() && access == Access::None {
                return Err(diary::not_found().into());
            }
            own
        };
        Ok(Response::new(pb::ListSharesResponse {
            shares: shares.into_iter().map(share_to_proto).collect(),
        }))
    }

    async fn create_entry(
        &self,
        request: Request<pb::CreateEntryRequest>,
    ) -> Result<Response<pb::Entry>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        required("diary_id", &req.diary_id)?;
        let entry_type = EntryType::parse(&req.entry_type)?;
        entry::validate_title(req.title.as_deref())?;
        entry::validate_content(&req.content, Visibility::Private)?;
        entry::validate_tags("tags", &req.tags)?;
        let importance = match req.importance {
            0 => entry::DEFAULT_IMPORTANCE,
            n => {
                entry::validate_importance(n)?;
                n
            }
        };
        let tags = (!req.tags.is_empty()).then_some(req.tags);
        // MoltNet's order: hash, the signing request, then the diary.
        let computed = entry::content_hash(
            entry_type,
            req.title.as_deref(),
            &req.content,
            tags.as_deref(),
        );
        if !req.content_hash.is_empty() && req.content_hash != computed {
            return Err(IdentityError::InvalidArgument(format!(
                "Content hash mismatch: provided {}, computed {computed}",
                req.content_hash
            ))
            .into());
        }
        let signing = if req.signing_request_id.is_empty() {
            if !req.content_hash.is_empty() {
                return Err(IdentityError::InvalidArgument(
                    "contentHash requires signingRequestId to create a signed entry.".into(),
                )
                .into());
            }
            None
        } else {
            let sr = self
                .store
                .get_signing_request(&req.signing_request_id)
                .await?
                .ok_or_else(|| IdentityError::NotFound(REQUEST_NOT_FOUND.into()))?;
            if sr.agent_id != caller.id {
                return Err(IdentityError::PermissionDenied(
                    "Signing request belongs to a different agent".into(),
                )
                .into());
            }
            let status = sr.effective_status(OffsetDateTime::now_utc());
            if status != signing::RequestStatus::Completed {
                return Err(IdentityError::InvalidArgument(format!(
                    "Signing request is {}, expected completed",
                    status.as_str()
                ))
                .into());
            }
            if sr.valid != Some(true) {
                return Err(IdentityError::InvalidArgument(
                    "Signing request signature was not verified as valid".into(),
                )
                .into());
            }
            if sr.message != computed {
                return Err(IdentityError::InvalidArgument(
                    "Signing request message does not match content hash".into(),
                )
                .into());
            }
            let key = self.signer_key(&caller.id).await?;
            Some(SignatureInput {
                request_id: sr.id.clone(),
                signature: sr.signature.clone().unwrap_or_default(),
                nonce: sr.nonce.clone(),
                signed_by: caller.id.clone(),
                signer_fingerprint: key.fingerprint(),
            })
        };
        let (d, access) = self.diary_access(&caller, &req.diary_id).await?;
        diary::require(access, Access::Write)?;
        entry::validate_content(&req.content, d.visibility)?;
        let now = OffsetDateTime::now_utc();
        let e = Entry {
            id: signing::new_uuid(),
            diary_id: d.id.clone(),
            title: req.title,
            content: req.content,
            tags,
            entry_type,
            importance,
            injection_risk: false,
            access_count: 0,
            last_accessed_at: None,
            content_hash: computed,
            signature: None,
            created_by: caller.id.clone(),
            creator_public_key: None,
            created_at: now,
            updated_at: now,
            superseded: false,
            visibility: d.visibility,
        };
        self.store
            .insert_entry(&e, signing.as_ref(), &caller.id, now)
            .await?;
        Ok(Response::new(entry_to_proto(
            self.fresh_entry(&e.id).await?,
        )))
    }

    async fn get_entry(
        &self,
        request: Request<pb::GetEntryRequest>,
    ) -> Result<Response<pb::Entry>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        let (e, _) = self.entry_access(&caller, &req.id).await?;
        // MoltNet's query on GET /entries/:entryId, checked after access like every other
        // filter; the gateway fetches the walk itself with WalkRelations.
        if !matches!(req.expand.as_str(), "" | "relations") {
            return Err(IdentityError::InvalidArgument(format!(
                "expand {:?} is not one of relations",
                req.expand
            ))
            .into());
        }
        walk::validate_depth(req.depth)?;
        Ok(Response::new(entry_to_proto(e)))
    }

    async fn list_entries(
        &self,
        request: Request<pb::ListEntriesRequest>,
    ) -> Result<Response<pb::ListEntriesResponse>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        let (d, access) = self.diary_access(&caller, &req.diary_id).await?;
        diary::require(access, Access::Read)?;
        let limit = limit("limit", req.limit, 20, 100)?;
        if req.ids.len() > 50 {
            return Err(IdentityError::InvalidArgument("ids: at most 50".into()).into());
        }
        tag_filter("tags", &req.tags)?;
        tag_filter("excludeTags", &req.exclude_tags)?;
        let filter = EntryFilter {
            diary_id: Some(d.id),
            ids: req.ids,
            tags: req.tags,
            exclude_tags: req.exclude_tags,
            entry_types: entry_types(&req.entry_types)?,
            exclude_superseded: req.exclude_superseded,
            limit: i64::from(limit),
            offset: i64::from(req.offset),
            ..EntryFilter::default()
        };
        let (entries, total) = self.store.list_entries(&filter).await?;
        Ok(Response::new(pb::ListEntriesResponse {
            entries: entries.into_iter().map(entry_to_proto).collect(),
            total,
            limit,
            offset: req.offset,
        }))
    }

    /// Same access check as `list_entries` (so a missing or unreadable diary is the same
    /// NOT_FOUND), then the query's rules from `domain::tag`.
    async fn list_diary_tags(
        &self,
        request: Request<pb::ListDiaryTagsRequest>,
    ) -> Result<Response<pb::ListDiaryTagsResponse>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        let (d, access) = self.diary_access(&caller, &req.diary_id).await?;
        diary::require(access, Access::Read)?;
        let query = tag::query(req.prefix, req.min_count)?;
        let types = entry_types(&req.entry_types)?;
        let mut tags = self.store.list_tags(&d.id, &query, &types).await?;
        tag::order(&mut tags);
        Ok(Response::new(pb::ListDiaryTagsResponse {
            total: tags.len() as u64,
            tags: tags
                .into_iter()
                .map(|t| pb::DiaryTag {
                    tag: t.tag,
                    count: t.count,
                })
                .collect(),
        }))
    }

    async fn update_entry(
        &self,
        request: Request<pb::UpdateEntryRequest>,
    ) -> Result<Response<pb::Entry>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        let (before, access) = self.entry_access(&caller, &req.id).await?;
        diary::require(access, Access::Write)?;
        let patch = EntryPatch {
            title: req.title.map(Some),
            content: req.content,
            tags: req.set_tags.then_some(req.tags),
            entry_type: req
                .entry_type
                .as_deref()
                .map(EntryType::parse)
                .transpose()?,
            importance: req.importance,
            injection_risk: req.injection_risk,
            record_access: req.record_access,
        };
        let now = OffsetDateTime::now_utc();
        let after = entry::apply_patch(&before, &patch, now)?;
        self.store
            .update_entry(&before, &after, &caller.id, now)
            .await?;
        Ok(Response::new(entry_to_proto(
            self.fresh_entry(&before.id).await?,
        )))
    }

    async fn delete_entry(
        &self,
        request: Request<pb::DeleteEntryRequest>,
    ) -> Result<Response<pb::DeleteEntryResponse>, Status> {
        let caller = caller(&request)?;
        self.delete_one(&caller, &request.into_inner().id).await?;
        Ok(Response::new(pb::DeleteEntryResponse {}))
    }

    /// Each id in request order through `delete_one`, the single delete; its refusals
    /// (missing, not writable, signed, deleted meanwhile) are skips. An invalid request
    /// is refused before anything is deleted.
    async fn delete_entries(
        &self,
        request: Request<pb::DeleteEntriesRequest>,
    ) -> Result<Response<pb::DeleteEntriesResponse>, Status> {
        let caller = caller(&request)?;
        let ids = bulk::delete_ids(&request.into_inner().ids)?;
        let mut reply = pb::DeleteEntriesResponse::default();
        for id in ids {
            match self.delete_one(&caller, &id).await {
                Ok(()) => reply.deleted.push(id),
                Err(e) if bulk::is_skip(&e) => {
                    tracing::debug!(entry_id = %id, reason = %e, "bulk delete skipped an entry");
                    reply.skipped.push(id);
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Response::new(reply))
    }

    async fn search_entries(
        &self,
        request: Request<pb::SearchEntriesRequest>,
    ) -> Result<Response<pb::SearchEntriesResponse>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        let limit = limit("limit", req.limit, 10, 100)?;
        tag_filter("tags", &req.tags)?;
        tag_filter("excludeTags", &req.exclude_tags)?;
        let query = req.query.trim();
        if query.chars().count() > 500 {
            return Err(IdentityError::InvalidArgument(
                "query must be at most 500 characters".into(),
            )
            .into());
        }
        if !query.is_empty() && fts5_query(query).is_none() {
            return Err(IdentityError::InvalidArgument(
                "query has no words to search for (letters or digits)".into(),
            )
            .into());
        }
        let (diary_id, reader) = if req.diary_id.is_empty() {
            (None, (!caller.superuser).then(|| caller.id.clone()))
        } else {
            let (d, access) = self.diary_access(&caller, &req.diary_id).await?;
            diary::require(access, Access::Read)?;
            (Some(d.id), None)
        };
        let filter = EntryFilter {
            diary_id,
            reader,
            tags: req.tags,
            exclude_tags: req.exclude_tags,
            entry_types: entry_types(&req.entry_types)?,
            exclude_superseded: req.exclude_superseded,
            query: (!query.is_empty()).then(|| query.to_owned()),
            limit: i64::from(limit),
            offset: i64::from(req.offset),
            ..EntryFilter::default()
        };
        let (entries, total) = self.store.list_entries(&filter).await?;
        let ids: Vec<String> = entries.iter().map(|e| e.id.clone()).collect();
        if let Err(err) = self
            .store
            .record_access(&ids, OffsetDateTime::now_utc())
            .await
        {
            tracing::warn!(error = %noema_core::ErrorChain(&err), "recording search access failed");
        }
        Ok(Response::new(pb::SearchEntriesResponse {
            results: entries.into_iter().map(entry_to_proto).collect(),
            total,
        }))
    }

    async fn verify_entry(
        &self,
        request: Request<pb::VerifyEntryRequest>,
    ) -> Result<Response<pb::VerifyEntryResponse>, Status> {
        let caller = caller(&request)?;
        let (e, _) = self.entry_access(&caller, &request.into_inner().id).await?;
        let Some(sig) = e.signature.clone() else {
            return Ok(Response::new(pb::VerifyEntryResponse::default()));
        };
        let hash_matches = e.computed_hash() == e.content_hash;
        let key = self
            .key_with_fingerprint(&sig.signed_by, &sig.signer_fingerprint)
            .await?;
        let signature_valid = match &key {
            Some(key) => {
                let bytes = noema_core::keys::moltnet_signing_bytes(&e.content_hash, &sig.nonce);
                noema_core::keys::Signature::from_base64(&sig.signature)
                    .map(|s| noema_core::keys::verify(key, &bytes, &s))
                    .unwrap_or(false)
            }
            None => false,
        };
        let reason = match (hash_matches, signature_valid, key.is_some()) {
            (true, true, _) => String::new(),
            (false, _, _) => "the content no longer hashes to the signed contentHash".into(),
            (true, false, false) => format!(
                "no key of {:?} with the signer's fingerprint",
                sig.signed_by
            ),
            (true, false, true) => "the signature does not verify against the signer's key".into(),
        };
        Ok(Response::new(pb::VerifyEntryResponse {
            signed: true,
            hash_matches,
            signature_valid,
            valid: hash_matches && signature_valid,
            content_hash: e.content_hash,
            agent_fingerprint: sig.signer_fingerprint,
            reason,
        }))
    }

    async fn create_relation(
        &self,
        request: Request<pb::CreateRelationRequest>,
    ) -> Result<Response<pb::CreateRelationResponse>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        let missing = || IdentityError::InvalidArgument("One or both entries not found".into());
        let (source, access) =
            self.entry_access(&caller, &req.source_id)
                .await
                .map_err(|e| match e {
                    IdentityError::NotFound(_) => missing(),
                    other => other,
                })?;
        if access < Access::Write {
            return Err(IdentityError::PermissionDenied(
                "Not authorized to edit this entry".into(),
            )
            .into());
        }
        relation::validate_relation(&req.relation)?;
        let status = relation::creation_status(&req.status)?;
        if req.source_id == req.target_id {
            return Err(missing().into());
        }
        let target = self
            .store
            .get_entry(&req.target_id)
            .await?
            .ok_or_else(missing)?;
        if target.diary_id != source.diary_id {
            return Err(IdentityError::InvalidArgument(
                "Both entries must belong to the same diary".into(),
            )
            .into());
        }
        let now = OffsetDateTime::now_utc();
        let r = Relation {
            id: signing::new_uuid(),
            source_id: source.id,
            target_id: target.id,
            relation: req.relation,
            status,
            source_cid_snapshot: Some(source.content_hash),
            target_cid_snapshot: Some(target.content_hash),
            created_at: now,
            updated_at: now,
        };
        let (stored, created) = self.store.insert_relation(&r, &caller.id, now).await?;
        Ok(Response::new(pb::CreateRelationResponse {
            relation: Some(relation_to_proto(stored)),
            created,
        }))
    }

    async fn list_relations(
        &self,
        request: Request<pb::ListRelationsRequest>,
    ) -> Result<Response<pb::ListRelationsResponse>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        let (e, _) = self.entry_access(&caller, &req.entry_id).await?;
        if !req.relation.is_empty() {
            relation::validate_relation(&req.relation)?;
        }
        if !req.status.is_empty() {
            relation::validate_status(&req.status)?;
        }
        let limit = limit("limit", req.limit, 50, 100)?;
        let filter = RelationFilter {
            entry_id: e.id,
            relation: (!req.relation.is_empty()).then_some(req.relation),
            status: (!req.status.is_empty()).then_some(req.status),
            direction: relation::validate_direction(&req.direction)?,
            limit: i64::from(limit),
            offset: i64::from(req.offset),
        };
        let (relations, total) = self.store.list_relations(&filter).await?;
        Ok(Response::new(pb::ListRelationsResponse {
            relations: relations.into_iter().map(relation_to_proto).collect(),
            total,
            limit,
            offset: req.offset,
        }))
    }

    /// Same access check as ListRelations. Relations only ever join entries of one diary
    /// (CreateRelation refuses others and entries never change diary), so every entry the
    /// walk reaches is in the starting entry's diary, which the caller can read: no
    /// per-entry check is needed.
    async fn walk_relations(
        &self,
        request: Request<pb::WalkRelationsRequest>,
    ) -> Result<Response<pb::WalkRelationsResponse>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        let (e, _) = self.entry_access(&caller, &req.entry_id).await?;
        let depth = walk::validate_depth(req.depth)?;
        if !req.status.is_empty() {
            relation::validate_status(&req.status)?;
        }
        let status = (!req.status.is_empty()).then_some(req.status.as_str());
        let store = &self.store;
        let result = walk::walk(&e.id, depth, |frontier: Vec<String>| async move {
            store.relations_touching(&frontier, status).await
        })
        .await?;
        Ok(Response::new(pb::WalkRelationsResponse {
            requested_depth: depth,
            max_depth: result.max_depth,
            items: result
                .items
                .into_iter()
                .map(|w| pb::WalkedRelation {
                    relation: Some(relation_to_proto(w.relation)),
                    depth: w.depth,
                    parent_relation_id: w.parent_relation_id.unwrap_or_default(),
                })
                .collect(),
        }))
    }

    async fn update_relation(
        &self,
        request: Request<pb::UpdateRelationRequest>,
    ) -> Result<Response<pb::EntryRelation>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        let r = self.relation_with_write(&caller, &req.id).await?;
        relation::validate_status(&req.status)?;
        self.store
            .update_relation_status(&r.id, &req.status, &caller.id, OffsetDateTime::now_utc())
            .await?;
        let stored = self
            .store
            .get_relation(&r.id)
            .await?
            .ok_or_else(|| IdentityError::NotFound(RELATION_NOT_FOUND.into()))?;
        Ok(Response::new(relation_to_proto(stored)))
    }

    async fn delete_relation(
        &self,
        request: Request<pb::DeleteRelationRequest>,
    ) -> Result<Response<pb::DeleteRelationResponse>, Status> {
        let caller = caller(&request)?;
        let r = self
            .relation_with_write(&caller, &request.into_inner().id)
            .await?;
        self.store
            .delete_relation(&r.id, &caller.id, OffsetDateTime::now_utc())
            .await?;
        Ok(Response::new(pb::DeleteRelationResponse {}))
    }

    async fn create_signing_request(
        &self,
        request: Request<pb::CreateSigningRequestRequest>,
    ) -> Result<Response<pb::SigningRequest>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        signing::validate_method(&req.verification_method)?;
        signing::validate_purpose(&req.purpose)?;
        let (message, entry_id) = match (req.message.is_empty(), req.entry_id.is_empty()) {
            (false, true) => {
                signing::validate_message(&req.message)?;
                (req.message, None)
            }
            (true, false) => {
                let (e, access) = self.entry_access(&caller, &req.entry_id).await?;
                diary::require(access, Access::Write)?;
                if e.is_signed() {
                    return Err(IdentityError::FailedPrecondition(
                        "the entry is already signed; supersede it with a new entry instead".into(),
                    )
                    .into());
                }
                (e.content_hash, Some(e.id))
            }
            _ => {
                return Err(IdentityError::InvalidArgument(
                    "give exactly one of message (arbitrary message signing) and entryId (sign a draft entry)"
                        .into(),
                )
                .into());
            }
        };
        self.signer_key(&caller.id).await?;
        let now = OffsetDateTime::now_utc();
        let sr = signing::new_request(&caller.id, message, entry_id, req.purpose, req.team_id, now);
        if let Err(wait) = self
            .store
            .insert_signing_request(&sr, signing::MAX_PENDING_PER_AGENT, now)
            .await?
        {
            return Err(IdentityError::SigningRequestLimit {
                max_pending: signing::MAX_PENDING_PER_AGENT,
                retry_after_secs: wait,
            }
            .into());
        }
        Ok(Response::new(request_to_proto(sr, now)))
    }

    async fn get_signing_request(
        &self,
        request: Request<pb::GetSigningRequestRequest>,
    ) -> Result<Response<pb::SigningRequest>, Status> {
        let caller = caller(&request)?;
        let sr = self
            .get_request_of(&caller, &request.into_inner().id)
            .await?;
        Ok(Response::new(request_to_proto(
            sr,
            OffsetDateTime::now_utc(),
        )))
    }

    async fn list_signing_requests(
        &self,
        request: Request<pb::ListSigningRequestsRequest>,
    ) -> Result<Response<pb::ListSigningRequestsResponse>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        let limit = limit("limit", req.limit, 20, 100)?;
        for status in &req.status {
            signing::RequestStatus::parse(status)?;
        }
        let (requests, total) = self
            .store
            .list_signing_requests(
                &caller.id,
                &req.status,
                i64::from(limit),
                i64::from(req.offset),
            )
            .await?;
        let now = OffsetDateTime::now_utc();
        Ok(Response::new(pb::ListSigningRequestsResponse {
            requests: requests
                .into_iter()
                .map(|r| request_to_proto(r, now))
                .collect(),
            total,
            limit,
            offset: req.offset,
        }))
    }

    async fn submit_signature(
        &self,
        request: Request<pb::SubmitSignatureRequest>,
    ) -> Result<Response<pb::SigningRequest>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        let sr = self.get_request_of(&caller, &req.id).await?;
        let now = OffsetDateTime::now_utc();
        signing::check_submittable(&sr, now)?;
        if req.signature.is_empty() || req.signature.len() > 88 {
            return Err(IdentityError::InvalidArgument(
                "signature must be 1-88 characters: the 64-byte Ed25519 signature in standard base64"
                    .into(),
            )
            .into());
        }
        match sr.entry_id.clone() {
            None => {
                // MoltNet: one shot; the request completes with the verdict.
                let key = self
                    .store
                    .get_agent(&sr.agent_id)
                    .await?
                    .map(|a| a.public_key);
                let valid = key.is_some_and(|k| signing::verifies(&sr, &k, &req.signature));
                self.store
                    .complete_message_request(&sr, &req.signature, valid, now)
                    .await?;
            }
            Some(entry_id) => {
                // The seed: a refused signature changes nothing.
                signing::parse_signature(&req.signature)?;
                let key = self.signer_key(&sr.agent_id).await?;
                if !signing::verifies(&sr, &key, &req.signature) {
                    return Err(signing::refused_signature(&sr.agent_id, &key).into());
                }
                let e = self.fresh_entry(&entry_id).await?;
                if e.is_signed() || e.content_hash != sr.message {
                    return Err(IdentityError::FailedPrecondition(
                        "the entry changed since the signing request was prepared (edited or \
                         signed); prepare a new signing request for its current contentHash"
                            .into(),
                    )
                    .into());
                }
                let input = SignatureInput {
                    request_id: sr.id.clone(),
                    signature: req.signature.clone(),
                    nonce: sr.nonce.clone(),
                    signed_by: sr.agent_id.clone(),
                    signer_fingerprint: key.fingerprint(),
                };
                self.store.sign_entry(&sr, &entry_id, &input, now).await?;
            }
        }
        let stored = self.get_request_of(&caller, &sr.id).await?;
        Ok(Response::new(request_to_proto(
            stored,
            OffsetDateTime::now_utc(),
        )))
    }

    async fn verify_signature(
        &self,
        request: Request<pb::VerifySignatureRequest>,
    ) -> Result<Response<pb::VerifySignatureResponse>, Status> {
        let signature = request.into_inner().signature;
        if signature.is_empty() || signature.len() > 88 {
            return Err(IdentityError::InvalidArgument(
                "signature must be 1-88 characters of standard base64".into(),
            )
            .into());
        }
        let Some(sr) = self.store.signing_request_by_signature(&signature).await? else {
            return Ok(Response::new(pb::VerifySignatureResponse::default()));
        };
        let key = self
            .store
            .get_agent(&sr.agent_id)
            .await?
            .map(|a| a.public_key);
        let valid = sr.valid == Some(true)
            && key
                .as_ref()
                .is_some_and(|k| signing::verifies(&sr, k, &signature));
        Ok(Response::new(if valid {
            pb::VerifySignatureResponse {
                valid,
                fingerprint: key.map(|k| k.fingerprint()).unwrap_or_default(),
                agent_id: sr.agent_id,
                message: sr.message,
            }
        } else {
            pb::VerifySignatureResponse::default()
        }))
    }

    async fn verify_chain(
        &self,
        request: Request<pb::VerifyChainRequest>,
    ) -> Result<Response<pb::VerifyChainResponse>, Status> {
        let agent_id = request.into_inner().agent_id;
        agent::validate_agent_id(&agent_id)?;
        let (links, head) = self.store.chain_links(&agent_id).await?;
        let problems = chain::verify(&agent_id, &links, head.clone());
        let (head_seq, head_hash) = head.unwrap_or_default();
        Ok(Response::new(pb::VerifyChainResponse {
            valid: problems.is_empty(),
            length: links.len() as u64,
            head_seq,
            head_hash,
            problems,
        }))
    }
}
