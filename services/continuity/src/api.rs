//! gRPC adapter: proto ⇄ the operations layer, nothing else. CogniRelay's documents cross as
//! JSON bytes (see the contract), so this layer names the caller and its tenant, hands the
//! bytes on and wraps the answer.

use std::sync::Arc;

use noema_core::scopes::TENANT_METADATA;
use noema_proto::common::v1 as common;
use noema_proto::continuity::v1 as pb;
use noema_proto::continuity::v1::continuity_service_server::ContinuityService;
use noema_runtime::auth::principal;
use noema_runtime::convert::{list_audit, page_size, timestamp};
use tonic::{Request, Response, Status};

use crate::domain::access::Caller;
use crate::domain::artifacts::Tier;
use crate::error::Error;
use crate::ops::{Continuity, Written};

#[derive(Clone)]
pub struct ContinuityApi {
    continuity: Arc<Continuity>,
}

impl ContinuityApi {
    pub fn new(continuity: Arc<Continuity>) -> Self {
        ContinuityApi { continuity }
    }
}

/// The caller of a request: its principal, acting in its own tenant or (a superuser) in the
/// one `x-noema-tenant` names.
fn caller<T>(request: &Request<T>) -> Result<Caller, Status> {
    let principal = principal(request)?.clone();
    let named = match request.metadata().get(TENANT_METADATA) {
        Some(value) => Some(value.to_str().map_err(|_| {
            Error::InvalidArgument(format!("{TENANT_METADATA} is not a valid tenant name"))
        })?),
        None => None,
    };
    let mut caller = Caller::resolve(principal, named).map_err(|e| Status::from(Error::from(e)))?;
    caller.authorization = request
        .metadata()
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    Ok(caller)
}

fn written(w: Written) -> pb::WriteResponse {
    pb::WriteResponse {
        body: w.body,
        subject_kind: w.subject_kind,
        subject_id: w.subject_id,
        revision_id: w.revision_id,
        capsule_sha256: w.capsule_sha256,
        written: w.written,
        replayed: w.replayed,
    }
}

fn json(body: Vec<u8>) -> Response<pb::JsonResponse> {
    Response::new(pb::JsonResponse { body })
}

#[tonic::async_trait]
impl ContinuityService for ContinuityApi {
    async fn upsert(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let caller = caller(&request)?;
        let answer = self
            .continuity
            .upsert(&caller, &request.get_ref().body)
            .await?;
        Ok(Response::new(written(answer)))
    }

    async fn patch(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let caller = caller(&request)?;
        let answer = self
            .continuity
            .patch(&caller, &request.get_ref().body)
            .await?;
        Ok(Response::new(written(answer)))
    }

    async fn lifecycle(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let caller = caller(&request)?;
        let answer = self
            .continuity
            .lifecycle(&caller, &request.get_ref().body)
            .await?;
        Ok(Response::new(written(answer)))
    }

    async fn revalidate(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let caller = caller(&request)?;
        let answer = self
            .continuity
            .revalidate(&caller, &request.get_ref().body)
            .await?;
        Ok(Response::new(written(answer)))
    }

    async fn archive(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .archive(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn delete(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .delete(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn read(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::ReadResponse>, Status> {
        let caller = caller(&request)?;
        let answer = self
            .continuity
            .read(&caller, &request.get_ref().body)
            .await?;
        Ok(Response::new(pb::ReadResponse {
            body: answer.body,
            source_state: answer.source_state.to_owned(),
            revision_id: answer.revision_id,
            capsule_sha256: answer.capsule_sha256,
        }))
    }

    async fn list(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .list(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn compare(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .compare(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn retrieve(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .retrieve(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn create_snapshot(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .create_snapshot(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn get_snapshot(
        &self,
        request: Request<pb::GetSnapshotRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .read_snapshot(&caller, &request.get_ref().snapshot_id)
                .await?,
        ))
    }

    async fn refresh_plan(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .refresh_plan(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn retention_plan(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .retention_plan(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn write_file(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .write_file(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn append_record(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .append_record(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn read_file(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .read_file(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn search(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .search(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn recent(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .recent(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn index_status(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(self.continuity.index_status(&caller).await?))
    }

    async fn metrics(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(self.continuity.metrics(&caller).await?))
    }

    async fn rebuild_index(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .index_rebuild(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn create_task(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .create_task(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn update_task(
        &self,
        request: Request<pb::TaskUpdateRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        let message = request.get_ref();
        Ok(json(
            self.continuity
                .update_task(&caller, &message.task_id, &message.body)
                .await?,
        ))
    }

    async fn query_tasks(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .query_tasks(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn create_schedule_item(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::ScheduleCreateResponse>, Status> {
        let caller = caller(&request)?;
        let answer = self
            .continuity
            .create_schedule_item(&caller, &request.get_ref().body)
            .await?;
        Ok(Response::new(pb::ScheduleCreateResponse {
            body: answer.body,
            created: answer.created,
        }))
    }

    async fn list_peers(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(self.continuity.list_peers(&caller).await?))
    }

    async fn register_peer(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .register_peer(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn transition_peer_trust(
        &self,
        request: Request<pb::ItemRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        let message = request.get_ref();
        Ok(json(
            self.continuity
                .transition_peer(&caller, &message.id, &message.body)
                .await?,
        ))
    }

    async fn create_handoff(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .create_handoff(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn get_handoff(
        &self,
        request: Request<pb::ItemRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        let message = request.get_ref();
        Ok(json(
            self.continuity.read_handoff(&caller, &message.id).await?,
        ))
    }

    async fn query_handoffs(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .query_handoffs(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn consume_handoff(
        &self,
        request: Request<pb::ItemRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        let message = request.get_ref();
        Ok(json(
            self.continuity
                .consume_handoff(&caller, &message.id, &message.body)
                .await?,
        ))
    }

    async fn create_shared(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .create_shared(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn get_shared(
        &self,
        request: Request<pb::ItemRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        let message = request.get_ref();
        Ok(json(
            self.continuity.read_shared(&caller, &message.id).await?,
        ))
    }

    async fn get_shared_history(
        &self,
        request: Request<pb::ItemRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        let message = request.get_ref();
        Ok(json(
            self.continuity.shared_history(&caller, &message.id).await?,
        ))
    }

    async fn query_shared(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .query_shared(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn update_shared(
        &self,
        request: Request<pb::ItemRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        let message = request.get_ref();
        Ok(json(
            self.continuity
                .update_shared(&caller, &message.id, &message.body)
                .await?,
        ))
    }

    async fn open_reconciliation(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .open_reconciliation(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn get_reconciliation(
        &self,
        request: Request<pb::ItemRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        let message = request.get_ref();
        Ok(json(
            self.continuity
                .read_reconciliation(&caller, &message.id)
                .await?,
        ))
    }

    async fn query_reconciliations(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .query_reconciliations(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn resolve_reconciliation(
        &self,
        request: Request<pb::ItemRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        let message = request.get_ref();
        Ok(json(
            self.continuity
                .resolve_reconciliation(&caller, &message.id, &message.body)
                .await?,
        ))
    }

    async fn get_schedule_item(
        &self,
        request: Request<pb::ItemRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .get_schedule_item(&caller, &request.get_ref().id)
                .await?,
        ))
    }

    async fn list_schedule_items(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .list_schedule_items(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn update_schedule_item(
        &self,
        request: Request<pb::ItemRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        let message = request.get_ref();
        Ok(json(
            self.continuity
                .update_schedule_item(&caller, &message.id, &message.body)
                .await?,
        ))
    }

    async fn acknowledge_schedule_item(
        &self,
        request: Request<pb::ItemRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        let message = request.get_ref();
        Ok(json(
            self.continuity
                .acknowledge_schedule_item(&caller, &message.id, &message.body)
                .await?,
        ))
    }

    async fn retire_schedule_item(
        &self,
        request: Request<pb::ItemRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        let message = request.get_ref();
        Ok(json(
            self.continuity
                .retire_schedule_item(&caller, &message.id, &message.body)
                .await?,
        ))
    }

    async fn send_message(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .send_message(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn ack_message(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .ack_message(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn pending_messages(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .pending_messages(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn inbox_messages(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .inbox_messages(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn thread_messages(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .thread_messages(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn verify_message(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .verify_message(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn relay_forward(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .relay_forward(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn replay_message(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .replay_message(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn rotate_signing_key(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .rotate_signing_key(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn history(
        &self,
        request: Request<pb::HistoryRequest>,
    ) -> Result<Response<pb::HistoryResponse>, Status> {
        let caller = caller(&request)?;
        let r = request.get_ref();
        let page = r.page.clone().unwrap_or_default();
        let before = if page.page_token.is_empty() {
            None
        } else {
            Some(page.page_token.parse::<i64>().map_err(|_| {
                Error::InvalidArgument(
                    "page_token is not a token returned by a previous History call".to_owned(),
                )
            })?)
        };
        let history = self
            .continuity
            .history(
                &caller,
                &r.subject_kind,
                &r.subject_id,
                before,
                page_size(page.page_size),
            )
            .await?;
        let revisions = history
            .revisions
            .into_iter()
            .map(|h| pb::Revision {
                revision_id: h.revision_id,
                previous_revision_id: h.previous_id,
                sequence: u64::try_from(h.sequence).unwrap_or_default(),
                capsule_sha256: h.capsule_sha256,
                operation: h.operation,
                actor: h.actor,
                recorded_at: Some(timestamp(h.recorded_at)),
                capsule: if r.include_capsules {
                    h.capsule
                } else {
                    Vec::new()
                },
            })
            .collect();
        Ok(Response::new(pb::HistoryResponse {
            revisions,
            page: Some(common::PageResponse {
                next_page_token: history.next.map(|n| n.to_string()).unwrap_or_default(),
            }),
            chain_intact: history.chain_intact,
        }))
    }

    async fn cold_store(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .cold_store(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn cold_rehydrate(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .cold_rehydrate(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn retention_apply(
        &self,
        request: Request<pb::JsonRequest>,
    ) -> Result<Response<pb::JsonResponse>, Status> {
        let caller = caller(&request)?;
        Ok(json(
            self.continuity
                .retention_apply(&caller, &request.get_ref().body)
                .await?,
        ))
    }

    async fn check_artifacts(
        &self,
        request: Request<pb::CheckArtifactsRequest>,
    ) -> Result<Response<pb::CheckArtifactsResponse>, Status> {
        let caller = caller(&request)?;
        let check = self
            .continuity
            .check_artifacts(&caller, request.get_ref().all_tenants)
            .await?;
        let tiers = Tier::ALL
            .into_iter()
            .map(|tier| {
                let (total, invalid) = check.report.count(tier);
                pb::TierCount {
                    tier: tier.as_str().to_owned(),
                    total,
                    valid: total - invalid,
                    invalid,
                }
            })
            .collect();
        let invalid = check
            .report
            .invalid
            .iter()
            .map(|i| pb::InvalidArtifact {
                tenant: i.tenant.clone(),
                tier: i.tier.as_str().to_owned(),
                path: i.path.clone(),
                reason: i.reason.clone(),
            })
            .collect();
        Ok(Response::new(pb::CheckArtifactsResponse {
            tiers,
            invalid,
            ok: check.report.ok(),
            body: check.body,
        }))
    }

    async fn list_audit(
        &self,
        request: Request<common::ListAuditRequest>,
    ) -> Result<Response<common::ListAuditResponse>, Status> {
        // The log spans every tenant: only a superuser reads it.
        if !caller(&request)?.principal.superuser {
            return Err(
                Error::from(crate::domain::error::ContinuityError::missing_scope(
                    "admin:peers",
                ))
                .into(),
            );
        }
        let response = list_audit(self.continuity.store().database(), request.into_inner()).await?;
        Ok(Response::new(response))
    }
}
