//! gRPC adapters: proto ⇄ domain, nothing else. This module serves `IdentityService`;
//! [`diary`] serves `DiaryService`.

pub mod diary;

use noema_core::keys::{self, PublicKey};
use noema_core::scopes::Principal;
use noema_proto::common::v1::{self as common, PageResponse};
use noema_proto::identity::v1 as pb;
use noema_proto::identity::v1::identity_service_server::IdentityService;
use noema_runtime::auth::principal;
pub(crate) use noema_runtime::convert::{list_audit, page_size, timestamp};
use time::OffsetDateTime;
use tonic::{Request, Response, Status};

use crate::domain::agent::{self, Agent};
use crate::domain::token::{self, OWNER_TOKEN_ID, TokenRecord, TokenRequest, TokenStatus};
use crate::error::IdentityError;
use crate::store::{IdentityStore, RevokeSelector};

#[derive(Debug, Clone)]
pub struct IdentityApi {
    store: IdentityStore,
}

impl IdentityApi {
    pub fn new(store: IdentityStore) -> Self {
        IdentityApi { store }
    }
}

fn from_timestamp(
    field: &str,
    at: &prost_types::Timestamp,
) -> Result<OffsetDateTime, IdentityError> {
    noema_core::time::proto::to_time(at)
        .ok_or_else(|| IdentityError::InvalidArgument(format!("{field} is out of range")))
}

fn agent_to_proto(agent: Agent) -> pb::Agent {
    pb::Agent {
        fingerprint: agent.fingerprint(),
        public_key: agent.public_key.to_prefixed(),
        agent_id: agent.agent_id,
        first_object_id: agent.first_object_id,
        registered_at: Some(timestamp(agent.registered_at)),
        key_version: agent.key_version,
        key_rotated_at: agent.key_rotated_at.map(timestamp),
    }
}

pub fn token_to_proto(token: &TokenRecord, now: OffsetDateTime) -> pb::TokenMeta {
    pb::TokenMeta {
        token_id: token.token_id.clone(),
        peer_id: token.peer_id.clone(),
        scopes: token.scopes.clone(),
        read_namespaces: token.read_namespaces.clone(),
        write_namespaces: token.write_namespaces.clone(),
        status: token.status.as_str().to_owned(),
        effective_status: token.effective_status(now).to_owned(),
        issued_at: Some(timestamp(token.issued_at)),
        expires_at: token.expires_at.map(timestamp),
        revoked_at: token.revoked_at.map(timestamp),
        revoked_reason: token.revoked_reason.clone().unwrap_or_default(),
        rotated_at: token.rotated_at.map(timestamp),
        rotated_to_token_id: token.rotated_to_token_id.clone().unwrap_or_default(),
        rotated_from_token_id: token.rotated_from_token_id.clone().unwrap_or_default(),
        description: token.description.clone(),
        token_sha256: token.token_sha256.clone(),
    }
}

fn principal_to_proto(p: &Principal) -> pb::Principal {
    pb::Principal {
        token_id: p.token_id.clone(),
        peer_id: p.peer_id.clone(),
        scopes: p.scopes.clone(),
        read_namespaces: p.read_namespaces.clone(),
        write_namespaces: p.write_namespaces.clone(),
        superuser: p.superuser,
        expires_at: None,
    }
}

fn validate_token_id(token_id: &str) -> Result<(), IdentityError> {
    let ok = !token_id.is_empty()
        && token_id.len() <= 128
        && token_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'));
    if ok {
        Ok(())
    } else {
        Err(IdentityError::InvalidArgument(
            "token_id must be 1-128 characters of letters, digits, '_', '-', '.', ':'".into(),
        ))
    }
}

const OWNER_IMMUTABLE: &str = "the owner token cannot be revoked or rotated through the API; \
     replace <data_dir>/owner.token (or auth.owner_token_sha256) and restart";

impl IdentityApi {
    /// A new token record and its secret from a validated spec.
    fn mint(
        &self,
        spec: token::TokenSpec,
        token_id: &str,
        rotated_from: Option<String>,
        now: OffsetDateTime,
    ) -> Result<(String, TokenRecord), IdentityError> {
        let token_id = if token_id.is_empty() {
            token::generate_token_id(now)?
        } else {
            validate_token_id(token_id)?;
            token_id.to_owned()
        };
        let secret = token::generate_secret()?;
        let record = TokenRecord {
            token_id,
            token_sha256: token::token_sha256(&secret),
            peer_id: spec.peer_id,
            scopes: spec.scopes,
            read_namespaces: spec.read_namespaces,
            write_namespaces: spec.write_namespaces,
            superuser: false,
            status: TokenStatus::Active,
            issued_at: now,
            expires_at: spec.expires_at,
            revoked_at: None,
            revoked_reason: None,
            rotated_at: None,
            rotated_to_token_id: None,
            rotated_from_token_id: rotated_from,
            description: spec.description,
        };
        Ok((secret, record))
    }

    async fn find_token(&self, token_id: &str, sha256: &str) -> Result<TokenRecord, IdentityError> {
        let found = if !token_id.is_empty() {
            self.store.token_by_id(token_id).await?
        } else if !sha256.is_empty() {
            self.store
                .token_by_sha256(&token::normalize_sha256(sha256)?)
                .await?
        } else {
            return Err(IdentityError::InvalidArgument(
                "give token_id or token_sha256".into(),
            ));
        };
        found.ok_or_else(|| IdentityError::NotFound("no token matched".into()))
    }
}

#[tonic::async_trait]
impl IdentityService for IdentityApi {
    async fn register_agent(
        &self,
        request: Request<pb::RegisterAgentRequest>,
    ) -> Result<Response<pb::RegisterAgentResponse>, Status> {
        let actor = principal(&request)?.peer_id.clone();
        let req = request.into_inner();
        agent::validate_agent_id(&req.agent_id)?;
        let key = agent::parse_public_key("public_key", &req.public_key)?;
        let (agent, created) = self
            .store
            .register_agent(
                &req.agent_id,
                &key,
                &req.first_object_id,
                &actor,
                OffsetDateTime::now_utc(),
            )
            .await?;
        Ok(Response::new(pb::RegisterAgentResponse {
            agent: Some(agent_to_proto(agent)),
            created,
        }))
    }

    async fn get_agent(
        &self,
        request: Request<pb::GetAgentRequest>,
    ) -> Result<Response<pb::Agent>, Status> {
        let agent_id = request.into_inner().agent_id;
        agent::validate_agent_id(&agent_id)?;
        let agent = self.store.get_agent(&agent_id).await?.ok_or_else(|| {
            IdentityError::NotFound(format!("agent {agent_id:?} is not registered"))
        })?;
        Ok(Response::new(agent_to_proto(agent)))
    }

    async fn get_agent_by_fingerprint(
        &self,
        request: Request<pb::GetAgentByFingerprintRequest>,
    ) -> Result<Response<pb::Agent>, Status> {
        let fingerprint = keys::parse_fingerprint(&request.into_inner().fingerprint)
            .map_err(|e| IdentityError::InvalidArgument(format!("fingerprint: {e}")))?;
        let agent = self
            .store
            .get_agent_by_fingerprint(&fingerprint)
            .await?
            .ok_or_else(|| {
                IdentityError::NotFound(format!("no agent has fingerprint {fingerprint}"))
            })?;
        Ok(Response::new(agent_to_proto(agent)))
    }

    async fn list_agents(
        &self,
        request: Request<pb::ListAgentsRequest>,
    ) -> Result<Response<pb::ListAgentsResponse>, Status> {
        let page = request.into_inner().page.unwrap_or_default();
        let after = if page.page_token.is_empty() {
            String::new()
        } else {
            data_encoding::BASE64URL_NOPAD
                .decode(page.page_token.as_bytes())
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| {
                    IdentityError::InvalidArgument(
                        "page_token is not a token returned by a previous ListAgents call".into(),
                    )
                })?
        };
        let limit = page_size(page.page_size);
        let agents = self.store.list_agents(&after, limit).await?;
        let next_page_token = match agents.last() {
            Some(last) if agents.len() == limit as usize => {
                data_encoding::BASE64URL_NOPAD.encode(last.agent_id.as_bytes())
            }
            _ => String::new(),
        };
        Ok(Response::new(pb::ListAgentsResponse {
            agents: agents.into_iter().map(agent_to_proto).collect(),
            page: Some(PageResponse { next_page_token }),
        }))
    }

    async fn rotate_key(
        &self,
        request: Request<pb::RotateKeyRequest>,
    ) -> Result<Response<pb::Agent>, Status> {
        let actor = principal(&request)?.peer_id.clone();
        let req = request.into_inner();
        agent::validate_agent_id(&req.agent_id)?;
        let new_key = agent::parse_public_key("new_public_key", &req.new_public_key)?;
        let proof = agent::parse_signature("proof_signature", &req.proof_signature)?;
        let current = self.store.get_agent(&req.agent_id).await?.ok_or_else(|| {
            IdentityError::NotFound(format!("agent {:?} is not registered", req.agent_id))
        })?;
        agent::check_rotation_proof(&current, &new_key, &proof)?;
        let rotated = self
            .store
            .rotate_key(
                &req.agent_id,
                current.key_version,
                &new_key,
                &proof,
                &actor,
                OffsetDateTime::now_utc(),
            )
            .await?;
        Ok(Response::new(agent_to_proto(rotated)))
    }

    async fn verify(
        &self,
        request: Request<pb::VerifyRequest>,
    ) -> Result<Response<pb::VerifyResponse>, Status> {
        let req = request.into_inner();
        agent::validate_agent_id(&req.agent_id)?;
        let signature = agent::parse_signature("signature", &req.signature)?;
        let registered = self
            .store
            .get_agent(&req.agent_id)
            .await?
            .map(|a| a.public_key);
        let presented: Option<PublicKey> = if req.public_key.is_empty() {
            None
        } else {
            Some(agent::parse_public_key("public_key", &req.public_key)?)
        };
        let (key, status) = match (presented, registered) {
            (Some(p), None) => (p, pb::KeyStatus::Unregistered),
            (Some(p), Some(r)) if p == r => (p, pb::KeyStatus::Registered),
            (Some(p), Some(_)) => (p, pb::KeyStatus::Mismatch),
            (None, Some(r)) => (r, pb::KeyStatus::Registered),
            (None, None) => {
                return Err(IdentityError::NotFound(format!(
                    "agent {:?} has no registered key; pass public_key to verify against a presented key",
                    req.agent_id
                ))
                .into());
            }
        };
        Ok(Response::new(pb::VerifyResponse {
            valid: keys::verify(&key, &req.message, &signature),
            key_status: status as i32,
            fingerprint: key.fingerprint(),
        }))
    }

    async fn get_caller_identity(
        &self,
        request: Request<pb::GetCallerIdentityRequest>,
    ) -> Result<Response<pb::Agent>, Status> {
        let peer_id = principal(&request)?.peer_id.clone();
        let agent = self.store.get_agent(&peer_id).await?.ok_or_else(|| {
            IdentityError::NotFound(format!(
                "the token acts as {peer_id:?}, which is not a registered agent; issue a token \
                 whose peer_id is a registered agent id"
            ))
        })?;
        Ok(Response::new(agent_to_proto(agent)))
    }

    async fn authenticate(
        &self,
        request: Request<pb::AuthenticateRequest>,
    ) -> Result<Response<pb::Principal>, Status> {
        Ok(Response::new(principal_to_proto(principal(&request)?)))
    }

    async fn issue_token(
        &self,
        request: Request<pb::IssueTokenRequest>,
    ) -> Result<Response<pb::IssueTokenResponse>, Status> {
        let actor = principal(&request)?.peer_id.clone();
        let req = request.into_inner();
        let now = OffsetDateTime::now_utc();
        let expires_at = req
            .expires_at
            .as_ref()
            .map(|t| from_timestamp("expires_at", t))
            .transpose()?;
        let spec = token::token_spec(
            TokenRequest {
                peer_id: req.peer_id,
                scopes: req.scopes,
                read_namespaces: req.read_namespaces,
                write_namespaces: req.write_namespaces,
                expires_at,
                ttl_seconds: req.ttl_seconds,
                description: req.description,
                template: req.template,
            },
            now,
        )?;
        let (secret, record) = self.mint(spec, &req.token_id, None, now)?;
        self.store.insert_token(&record, &actor, now).await?;
        Ok(Response::new(pb::IssueTokenResponse {
            token: secret,
            token_meta: Some(token_to_proto(&record, now)),
        }))
    }

    async fn list_tokens(
        &self,
        request: Request<pb::ListTokensRequest>,
    ) -> Result<Response<pb::ListTokensResponse>, Status> {
        let req = request.into_inner();
        if !matches!(req.status.as_str(), "" | "active" | "revoked" | "expired") {
            return Err(IdentityError::InvalidArgument(
                "status must be active, revoked or expired".into(),
            )
            .into());
        }
        let now = OffsetDateTime::now_utc();
        let peer = (!req.peer_id.is_empty()).then_some(req.peer_id.as_str());
        let tokens = self
            .store
            .list_tokens(peer)
            .await?
            .into_iter()
            .filter(|t| {
                let status = t.effective_status(now);
                if !req.status.is_empty() {
                    status == req.status
                } else {
                    req.include_inactive || status == "active"
                }
            })
            .map(|t| token_to_proto(&t, now))
            .collect();
        Ok(Response::new(pb::ListTokensResponse { tokens }))
    }

    async fn revoke_token(
        &self,
        request: Request<pb::RevokeTokenRequest>,
    ) -> Result<Response<pb::RevokeTokenResponse>, Status> {
        let actor = principal(&request)?.peer_id.clone();
        let req = request.into_inner();
        let selector = if !req.token_id.is_empty() {
            RevokeSelector::TokenId(req.token_id)
        } else if !req.token_sha256.is_empty() {
            RevokeSelector::Sha256(token::normalize_sha256(&req.token_sha256)?)
        } else if !req.peer_id.is_empty() {
            RevokeSelector::Peer(req.peer_id)
        } else {
            return Err(IdentityError::InvalidArgument(
                "give token_id, token_sha256 or peer_id".into(),
            )
            .into());
        };
        if selector == RevokeSelector::TokenId(OWNER_TOKEN_ID.into()) {
            return Err(IdentityError::FailedPrecondition(OWNER_IMMUTABLE.into()).into());
        }
        let reason = if req.reason.is_empty() {
            "revoked"
        } else {
            req.reason.as_str()
        };
        let now = OffsetDateTime::now_utc();
        let (matched, revoked) = self.store.revoke(&selector, reason, &actor, now).await?;
        if matched.is_empty() {
            return Err(IdentityError::NotFound("no token matched".into()).into());
        }
        let refreshed = match &selector {
            RevokeSelector::Peer(peer) => self.store.list_tokens(Some(peer)).await?,
            _ => {
                let mut out = Vec::new();
                for token in &matched {
                    if let Some(t) = self.store.token_by_id(&token.token_id).await? {
                        out.push(t);
                    }
                }
                out
            }
        };
        Ok(Response::new(pb::RevokeTokenResponse {
            matched: u32::try_from(matched.len()).unwrap_or(u32::MAX),
            revoked: u32::try_from(revoked.len()).unwrap_or(u32::MAX),
            tokens: refreshed.iter().map(|t| token_to_proto(t, now)).collect(),
        }))
    }

    async fn rotate_token(
        &self,
        request: Request<pb::RotateTokenRequest>,
    ) -> Result<Response<pb::RotateTokenResponse>, Status> {
        let actor = principal(&request)?.peer_id.clone();
        let req = request.into_inner();
        let old = self.find_token(&req.token_id, &req.token_sha256).await?;
        if old.token_id == OWNER_TOKEN_ID {
            return Err(IdentityError::FailedPrecondition(OWNER_IMMUTABLE.into()).into());
        }
        let now = OffsetDateTime::now_utc();
        if old.effective_status(now) != "active" {
            return Err(IdentityError::FailedPrecondition(format!(
                "token {:?} is {} and cannot be rotated",
                old.token_id,
                old.effective_status(now)
            ))
            .into());
        }
        let inherit = |given: Vec<String>, old: &Vec<String>| {
            if given.is_empty() { old.clone() } else { given }
        };
        let expires_at = req
            .expires_at
            .as_ref()
            .map(|t| from_timestamp("expires_at", t))
            .transpose()?;
        let inherited_expiry = if expires_at.is_none() && req.ttl_seconds == 0 {
            old.expires_at
        } else {
            expires_at
        };
        let spec = token::token_spec(
            TokenRequest {
                peer_id: old.peer_id.clone(),
                scopes: inherit(req.scopes, &old.scopes),
                read_namespaces: inherit(req.read_namespaces, &old.read_namespaces),
                write_namespaces: inherit(req.write_namespaces, &old.write_namespaces),
                expires_at: inherited_expiry,
                ttl_seconds: req.ttl_seconds,
                description: if req.description.is_empty() {
                    old.description.clone()
                } else {
                    req.description
                },
                template: String::new(),
            },
            now,
        )?;
        let (secret, new) = self.mint(spec, &req.new_token_id, Some(old.token_id.clone()), now)?;
        let reason = if req.reason.is_empty() {
            format!("rotated_to:{}", new.token_id)
        } else {
            req.reason
        };
        self.store
            .rotate_token(&old, &new, &reason, &actor, now)
            .await?;
        let from = self.store.token_by_id(&old.token_id).await?.unwrap_or(old);
        Ok(Response::new(pb::RotateTokenResponse {
            token: secret,
            from_token: Some(token_to_proto(&from, now)),
            token_meta: Some(token_to_proto(&new, now)),
        }))
    }

    async fn list_audit(
        &self,
        request: Request<common::ListAuditRequest>,
    ) -> Result<Response<common::ListAuditResponse>, Status> {
        let response = list_audit(self.store.database(), request.into_inner()).await?;
        Ok(Response::new(response))
    }
}
