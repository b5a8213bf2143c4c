//! gRPC adapter: proto ⇄ domain, nothing else.

use std::time::SystemTime;

use noema_proto::common::v1::{self as common, PageResponse};
use noema_proto::ledger::v1 as pb;
use noema_proto::ledger::v1::ledger_service_server::LedgerService;
use tonic::{Request, Response, Status};

use crate::domain::mode::{SystemMode, SystemState, mode_change_actor};
use crate::error::LedgerError;
use crate::store::LedgerStore;
use noema_core::audit::AuditEntry;

/// Default and maximum page sizes for listings (open-cognition's 50 and 200).
pub const DEFAULT_PAGE_SIZE: u32 = 50;
pub const MAX_PAGE_SIZE: u32 = 200;

#[derive(Debug, Clone)]
pub struct LedgerApi {
    store: LedgerStore,
}

impl LedgerApi {
    pub fn new(store: LedgerStore) -> Self {
        LedgerApi { store }
    }

    async fn transition(&self, mode: SystemMode, actor: &str) -> Result<SystemState, LedgerError> {
        let actor = mode_change_actor(actor);
        self.store
            .set_mode(mode, &actor, time::OffsetDateTime::now_utc())
            .await
    }
}

fn timestamp(at: time::OffsetDateTime) -> prost_types::Timestamp {
    prost_types::Timestamp::from(SystemTime::from(at))
}

fn state_to_proto(state: SystemState) -> pb::SystemState {
    let mode = match state.mode {
        SystemMode::Running => pb::SystemMode::Running,
        SystemMode::Stopped => pb::SystemMode::Stopped,
    };
    pb::SystemState {
        mode: mode as i32,
        changed_by: state.changed_by,
        changed_at: Some(timestamp(state.changed_at)),
    }
}

fn audit_to_proto(entry: AuditEntry) -> common::AuditEntry {
    common::AuditEntry {
        id: entry.id,
        occurred_at: Some(timestamp(entry.occurred_at)),
        actor: entry.actor,
        action: entry.action,
        target_id: entry.target_id.unwrap_or_default(),
        target_type: entry.target_type.unwrap_or_default(),
        detail: entry
            .detail
            .as_ref()
            .and_then(noema_proto::json::to_proto_struct),
        prev_hash: entry.prev_hash,
        hash: entry.hash,
    }
}

/// Page size from a request: 0 → default, larger than the maximum → the maximum.
pub fn page_size(requested: u32) -> u32 {
    match requested {
        0 => DEFAULT_PAGE_SIZE,
        n => n.min(MAX_PAGE_SIZE),
    }
}

fn parse_audit_cursor(token: &str) -> Result<Option<i64>, LedgerError> {
    if token.is_empty() {
        return Ok(None);
    }
    token.parse::<i64>().map(Some).map_err(|_| {
        LedgerError::InvalidArgument(
            "page_token is not a token returned by a previous ListAudit call".into(),
        )
    })
}

#[tonic::async_trait]
impl LedgerService for LedgerApi {
    async fn get_status(
        &self,
        _request: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::SystemState>, Status> {
        let state = self.store.system_state().await?;
        Ok(Response::new(state_to_proto(state)))
    }

    async fn stop(
        &self,
        request: Request<pb::SetModeRequest>,
    ) -> Result<Response<pb::SystemState>, Status> {
        let state = self
            .transition(SystemMode::Stopped, &request.get_ref().actor)
            .await?;
        Ok(Response::new(state_to_proto(state)))
    }

    async fn resume(
        &self,
        request: Request<pb::SetModeRequest>,
    ) -> Result<Response<pb::SystemState>, Status> {
        let state = self
            .transition(SystemMode::Running, &request.get_ref().actor)
            .await?;
        Ok(Response::new(state_to_proto(state)))
    }

    async fn list_audit(
        &self,
        request: Request<common::ListAuditRequest>,
    ) -> Result<Response<common::ListAuditResponse>, Status> {
        let page = request.into_inner().page.unwrap_or_default();
        let before_id = parse_audit_cursor(&page.page_token)?;
        let limit = page_size(page.page_size);
        let entries = self.store.list_audit(before_id, limit).await?;
        let next_page_token = match entries.last() {
            Some(last) if entries.len() == limit as usize && last.id > 1 => last.id.to_string(),
            _ => String::new(),
        };
        Ok(Response::new(common::ListAuditResponse {
            entries: entries.into_iter().map(audit_to_proto).collect(),
            page: Some(PageResponse { next_page_token }),
        }))
    }
}
