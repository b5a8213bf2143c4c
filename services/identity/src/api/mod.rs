//! The gRPC adapter: proto ⇄ domain, and the call to the operation (`crate::ops`), one file
//! per aggregate. Each handler answers an `IdentityError`, made a `tonic::Status` in one
//! place (`serve!` below, through `noema_core::to_status`).

mod agents;
mod chain;
mod diaries;
mod entries;
mod feed;
mod grants;
mod relations;
mod signing_requests;
mod tokens;

use noema_core::scopes::Principal;
use noema_proto::common::v1 as common;
use noema_proto::identity::v1 as pb;
use noema_proto::identity::v1::diary_service_server::DiaryService;
use noema_proto::identity::v1::identity_service_server::IdentityService;
use tonic::{Request, Response, Status};

use crate::domain::diary::Caller;
use crate::error::IdentityError;
use crate::ops::Identity;

/// Serves `IdentityService`: agents, keys, tokens, the audit log.
#[derive(Debug, Clone)]
pub struct IdentityApi {
    ops: Identity,
}

impl IdentityApi {
    pub fn new(ops: Identity) -> Self {
        IdentityApi { ops }
    }
}

/// Serves `DiaryService`: diaries, shares, entries, signing requests, relations, chains.
#[derive(Debug, Clone)]
pub struct DiaryApi {
    ops: Identity,
}

impl DiaryApi {
    pub fn new(ops: Identity) -> Self {
        DiaryApi { ops }
    }
}

/// The principal the auth layer resolved for this request.
fn principal<T>(request: &Request<T>) -> Result<&Principal, IdentityError> {
    noema_runtime::auth::principal(request)
        .map_err(|status| IdentityError::Unauthenticated(status.message().to_owned()))
}

/// Who is calling, for the diary rules.
fn caller<T>(request: &Request<T>) -> Result<Caller, IdentityError> {
    let p = principal(request)?;
    Ok(Caller {
        id: p.peer_id.clone(),
        superuser: p.superuser,
    })
}

/// The audit log, read the same way by every service.
mod audit {
    use super::*;

    pub(super) async fn list_audit(
        ops: &Identity,
        request: Request<common::ListAuditRequest>,
    ) -> Result<common::ListAuditResponse, Status> {
        noema_runtime::convert::list_audit(ops.database(), request.into_inner()).await
    }
}

/// Implements a gRPC service by handing each RPC to the function of the same name in its
/// aggregate's module, and making its error the status.
macro_rules! serve {
    ($service:ident for $api:ident {
        $($module:ident { $($rpc:ident($request:ty) -> $response:ty;)* })*
    }) => {
        #[tonic::async_trait]
        impl $service for $api {
            $($(
                async fn $rpc(
                    &self,
                    request: Request<$request>,
                ) -> Result<Response<$response>, Status> {
                    Ok(Response::new($module::$rpc(&self.ops, request).await?))
                }
            )*)*
        }
    };
}

serve! {
    IdentityService for IdentityApi {
        agents {
            register_agent(pb::RegisterAgentRequest) -> pb::RegisterAgentResponse;
            get_agent(pb::GetAgentRequest) -> pb::Agent;
            get_agent_by_fingerprint(pb::GetAgentByFingerprintRequest) -> pb::Agent;
            list_agents(pb::ListAgentsRequest) -> pb::ListAgentsResponse;
            rotate_key(pb::RotateKeyRequest) -> pb::Agent;
            verify(pb::VerifyRequest) -> pb::VerifyResponse;
            get_caller_identity(pb::GetCallerIdentityRequest) -> pb::Agent;
        }
        tokens {
            authenticate(pb::AuthenticateRequest) -> pb::Principal;
            issue_token(pb::IssueTokenRequest) -> pb::IssueTokenResponse;
            list_tokens(pb::ListTokensRequest) -> pb::ListTokensResponse;
            revoke_token(pb::RevokeTokenRequest) -> pb::RevokeTokenResponse;
            rotate_token(pb::RotateTokenRequest) -> pb::RotateTokenResponse;
        }
        audit {
            list_audit(common::ListAuditRequest) -> common::ListAuditResponse;
        }
    }
}

serve! {
    DiaryService for DiaryApi {
        diaries {
            create_diary(pb::CreateDiaryRequest) -> pb::Diary;
            get_diary(pb::GetDiaryRequest) -> pb::Diary;
            list_diaries(pb::ListDiariesRequest) -> pb::ListDiariesResponse;
            update_diary(pb::UpdateDiaryRequest) -> pb::Diary;
            delete_diary(pb::DeleteDiaryRequest) -> pb::DeleteDiaryResponse;
            share_diary(pb::ShareDiaryRequest) -> pb::DiaryShare;
            respond_to_share(pb::RespondToShareRequest) -> pb::DiaryShare;
            revoke_share(pb::RevokeShareRequest) -> pb::DiaryShare;
            list_shares(pb::ListSharesRequest) -> pb::ListSharesResponse;
        }
        grants {
            grant_diary(pb::GrantDiaryRequest) -> pb::DiaryGrant;
            list_grants(pb::ListGrantsRequest) -> pb::ListGrantsResponse;
            revoke_grant(pb::RevokeGrantRequest) -> pb::RevokeGrantResponse;
        }
        feed {
            list_public_feed(pb::ListPublicFeedRequest) -> pb::ListPublicFeedResponse;
            search_public_feed(pb::SearchPublicFeedRequest) -> pb::SearchPublicFeedResponse;
            get_public_entry(pb::GetPublicEntryRequest) -> pb::PublicEntry;
        }
        entries {
            create_entry(pb::CreateEntryRequest) -> pb::Entry;
            get_entry(pb::GetEntryRequest) -> pb::Entry;
            list_entries(pb::ListEntriesRequest) -> pb::ListEntriesResponse;
            list_diary_tags(pb::ListDiaryTagsRequest) -> pb::ListDiaryTagsResponse;
            update_entry(pb::UpdateEntryRequest) -> pb::Entry;
            delete_entry(pb::DeleteEntryRequest) -> pb::DeleteEntryResponse;
            delete_entries(pb::DeleteEntriesRequest) -> pb::DeleteEntriesResponse;
            search_entries(pb::SearchEntriesRequest) -> pb::SearchEntriesResponse;
            verify_entry(pb::VerifyEntryRequest) -> pb::VerifyEntryResponse;
        }
        relations {
            create_relation(pb::CreateRelationRequest) -> pb::CreateRelationResponse;
            list_relations(pb::ListRelationsRequest) -> pb::ListRelationsResponse;
            walk_relations(pb::WalkRelationsRequest) -> pb::WalkRelationsResponse;
            update_relation(pb::UpdateRelationRequest) -> pb::EntryRelation;
            delete_relation(pb::DeleteRelationRequest) -> pb::DeleteRelationResponse;
        }
        signing_requests {
            create_signing_request(pb::CreateSigningRequestRequest) -> pb::SigningRequest;
            get_signing_request(pb::GetSigningRequestRequest) -> pb::SigningRequest;
            list_signing_requests(pb::ListSigningRequestsRequest) -> pb::ListSigningRequestsResponse;
            submit_signature(pb::SubmitSignatureRequest) -> pb::SigningRequest;
            verify_signature(pb::VerifySignatureRequest) -> pb::VerifySignatureResponse;
        }
        chain {
            verify_chain(pb::VerifyChainRequest) -> pb::VerifyChainResponse;
        }
    }
}
