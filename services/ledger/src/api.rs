//! gRPC adapter: proto ⇄ domain, nothing else.

use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use noema_core::time::rfc3339_seconds;
use noema_proto::common::v1::{self as common, PageResponse};
use noema_proto::ledger::v1 as pb;
use noema_proto::ledger::v1::ledger_service_server::LedgerService;
use noema_runtime::auth::principal;
use noema_runtime::convert::{list_audit, next_page_token, page_size, timestamp};
use tonic::{Request, Response, Status};

use crate::domain::canonical::{CanonicalObject, CanonicalSubmission, SCHEMA_VERSION};
use crate::domain::mode::{SystemMode, SystemState, mode_change_actor};
use crate::domain::reference::{AgentReference, ReferenceSubmission};
use crate::error::LedgerError;
use crate::ledger::{Ledger, ReconcileReport};
use crate::store::{Page, Query};

#[derive(Clone)]
pub struct LedgerApi {
    ledger: Arc<Ledger>,
}

impl LedgerApi {
    pub fn new(ledger: Arc<Ledger>) -> Self {
        LedgerApi { ledger }
    }
}

/// A bound in whole seconds: the smallest second not before `at`.
fn ceil_seconds(at: &prost_types::Timestamp) -> i64 {
    if at.nanos > 0 {
        at.seconds.saturating_add(1)
    } else {
        at.seconds
    }
}

fn struct_to_json(s: Option<prost_types::Struct>) -> Option<serde_json::Value> {
    s.as_ref().map(noema_proto::json::from_proto_struct)
}

fn json_to_struct(v: &Option<serde_json::Value>) -> Option<prost_types::Struct> {
    v.as_ref().and_then(noema_proto::json::to_proto_struct)
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

/// `created_at` as submitted (create echo) or normalised (reads).
fn canonical_to_proto(object: CanonicalObject, echo: bool) -> pb::CanonicalObject {
    pb::CanonicalObject {
        schema_version: SCHEMA_VERSION.into(),
        created_at: if echo {
            object.created_at_text.clone()
        } else {
            rfc3339_seconds(object.created_at)
        },
        metadata: json_to_struct(&object.metadata),
        recorded_at: Some(timestamp(object.recorded_at)),
        id: object.id,
        object_type: object.object_type,
        content_type: object.content_type,
        size_bytes: object.size_bytes,
        created_by: object.created_by,
        storage_path: object.storage_path,
    }
}

fn reference_to_proto(r: AgentReference, echo_key: Option<String>) -> pb::AgentReference {
    pb::AgentReference {
        schema_version: SCHEMA_VERSION.into(),
        created_at: if echo_key.is_some() {
            r.signed_created_at.clone()
        } else {
            rfc3339_seconds(r.created_at)
        },
        public_key: echo_key.unwrap_or_default(),
        metadata: json_to_struct(&r.metadata),
        recorded_at: Some(timestamp(r.recorded_at)),
        id: r.id,
        canonical_object_id: r.canonical_object_id,
        agent_id: r.agent_id,
        context: r.context,
        relevance: r.relevance,
        trust_weight: r.trust_weight,
        time_horizon: r.time_horizon,
        signature: r.signature,
        signed_created_at: r.signed_created_at,
    }
}

fn report_to_proto(report: ReconcileReport) -> pb::ReconcileReport {
    pb::ReconcileReport {
        checked: report.checked,
        ok: report.ok(),
        checked_at: report.checked_at.map(timestamp),
        hashes_verified: report.hashes_verified,
        missing_in_storage: report
            .missing_in_storage
            .into_iter()
            .map(|(id, storage_path)| pb::MissingObject { id, storage_path })
            .collect(),
        orphans_in_storage: report
            .orphans_in_storage
            .into_iter()
            .map(|(storage_path, size_bytes)| pb::OrphanObject {
                storage_path,
                size_bytes,
            })
            .collect(),
        corrupt: report
            .corrupt
            .into_iter()
            .map(|(id, storage_path, actual_hash)| pb::CorruptObject {
                id,
                storage_path,
                actual_hash,
            })
            .collect(),
    }
}

const BAD_TOKEN: &str = "page_token is not a token returned by a previous call of this RPC";

fn encode_cursor(created_at: time::OffsetDateTime, id: &str) -> String {
    data_encoding::BASE64URL_NOPAD
        .encode(format!("{}|{id}", created_at.unix_timestamp()).as_bytes())
}

fn decode_cursor(token: &str) -> Result<(i64, String), LedgerError> {
    let bytes = data_encoding::BASE64URL_NOPAD
        .decode(token.as_bytes())
        .map_err(|_| LedgerError::invalid(BAD_TOKEN))?;
    let text = String::from_utf8(bytes).map_err(|_| LedgerError::invalid(BAD_TOKEN))?;
    let (seconds, id) = text
        .split_once('|')
        .ok_or_else(|| LedgerError::invalid(BAD_TOKEN))?;
    let seconds = seconds
        .parse()
        .map_err(|_| LedgerError::invalid(BAD_TOKEN))?;
    Ok((seconds, id.to_owned()))
}

fn listing_page(page: Option<common::PageRequest>, offset: u32) -> Result<Page, LedgerError> {
    let page = page.unwrap_or_default();
    let mut result = Page::first(page_size(page.page_size));
    if page.page_token.is_empty() {
        result.offset = offset;
    } else {
        result.before = decode_cursor(&page.page_token)?;
    }
    Ok(result)
}

fn time_bounds(
    after: Option<prost_types::Timestamp>,
    before: Option<prost_types::Timestamp>,
) -> (i64, i64) {
    (
        after.as_ref().map_or(i64::MIN, ceil_seconds),
        before.as_ref().map_or(i64::MAX, ceil_seconds),
    )
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl LedgerService for LedgerApi {
    async fn get_status(
        &self,
        _request: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::SystemState>, Status> {
        let state = self.ledger.store().system_state().await?;
        Ok(Response::new(state_to_proto(state)))
    }

    async fn stop(
        &self,
        request: Request<pb::SetModeRequest>,
    ) -> Result<Response<pb::SystemState>, Status> {
        let actor = mode_change_actor(&request.get_ref().actor);
        let state = self
            .ledger
            .store()
            .set_mode(SystemMode::Stopped, &actor, time::OffsetDateTime::now_utc())
            .await?;
        Ok(Response::new(state_to_proto(state)))
    }

    async fn resume(
        &self,
        request: Request<pb::SetModeRequest>,
    ) -> Result<Response<pb::SystemState>, Status> {
        let actor = mode_change_actor(&request.get_ref().actor);
        let state = self
            .ledger
            .store()
            .set_mode(SystemMode::Running, &actor, time::OffsetDateTime::now_utc())
            .await?;
        Ok(Response::new(state_to_proto(state)))
    }

    async fn put_canonical(
        &self,
        request: Request<pb::PutCanonicalRequest>,
    ) -> Result<Response<pb::CanonicalObject>, Status> {
        let submitted_by = principal(&request)?.peer_id.clone();
        let r = request.into_inner();
        let submission = CanonicalSubmission {
            schema_version: r.schema_version,
            id: r.id,
            object_type: r.object_type,
            content_type: r.content_type,
            size_bytes: r.size_bytes,
            created_at: r.created_at,
            created_by: r.created_by,
            storage_path: r.storage_path,
            payload: r.payload,
            metadata: struct_to_json(r.metadata),
        };
        let object = self.ledger.put_canonical(submission, &submitted_by).await?;
        Ok(Response::new(canonical_to_proto(object, true)))
    }

    async fn get_canonical(
        &self,
        request: Request<pb::GetCanonicalRequest>,
    ) -> Result<Response<pb::CanonicalObject>, Status> {
        let object = self.ledger.get_canonical(&request.get_ref().id).await?;
        Ok(Response::new(canonical_to_proto(object, false)))
    }

    type GetCanonicalPayloadStream = BoxStream<pb::PayloadChunk>;

    async fn get_canonical_payload(
        &self,
        request: Request<pb::GetCanonicalRequest>,
    ) -> Result<Response<Self::GetCanonicalPayloadStream>, Status> {
        let (_, body) = self.ledger.payload(&request.get_ref().id).await?;
        let stream = body.stream.map(|chunk| {
            chunk
                .map(|data| pb::PayloadChunk {
                    data: data.to_vec(),
                })
                .map_err(|err| Status::from(LedgerError::StorageRead(err)))
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn list_canonicals(
        &self,
        request: Request<pb::ListCanonicalsRequest>,
    ) -> Result<Response<pb::ListCanonicalsResponse>, Status> {
        let r = request.into_inner();
        let page = listing_page(r.page, r.offset)?;
        let (from, until) = time_bounds(r.created_after, r.created_before);
        let query = Query {
            kind: r.object_type,
            actor: r.created_by,
            from,
            until,
        };
        let objects = self.ledger.list_canonicals(&query, &page).await?;
        let next_page_token =
            next_page_token(&objects, page.limit, |o| encode_cursor(o.created_at, &o.id));
        Ok(Response::new(pb::ListCanonicalsResponse {
            objects: objects
                .into_iter()
                .map(|o| canonical_to_proto(o, false))
                .collect(),
            page: Some(PageResponse { next_page_token }),
        }))
    }

    async fn put_reference(
        &self,
        request: Request<pb::PutReferenceRequest>,
    ) -> Result<Response<pb::AgentReference>, Status> {
        let submitted_by = principal(&request)?.peer_id.clone();
        let authorization = request.metadata().get("authorization").cloned();
        let r = request.into_inner();
        let public_key = r.public_key.clone();
        let submission = ReferenceSubmission {
            schema_version: r.schema_version,
            id: r.id,
            canonical_object_id: r.canonical_object_id,
            agent_id: r.agent_id,
            created_at: r.created_at,
            context: r.context,
            relevance: r.relevance,
            trust_weight: r.trust_weight,
            time_horizon: r.time_horizon,
            signature: r.signature,
            public_key: r.public_key,
            metadata: struct_to_json(r.metadata),
        };
        let reference = self
            .ledger
            .put_reference(submission, authorization, &submitted_by)
            .await?;
        Ok(Response::new(reference_to_proto(
            reference,
            Some(public_key),
        )))
    }

    async fn list_references(
        &self,
        request: Request<pb::ListReferencesRequest>,
    ) -> Result<Response<pb::ListReferencesResponse>, Status> {
        let r = request.into_inner();
        let page = listing_page(r.page, r.offset)?;
        let (from, until) = time_bounds(r.created_after, r.created_before);
        let query = Query {
            kind: r.canonical_object_id,
            actor: r.agent_id,
            from,
            until,
        };
        let references = self.ledger.list_references(&query, &page).await?;
        let next_page_token = next_page_token(&references, page.limit, |x| {
            encode_cursor(x.created_at, &x.id)
        });
        Ok(Response::new(pb::ListReferencesResponse {
            references: references
                .into_iter()
                .map(|x| reference_to_proto(x, None))
                .collect(),
            page: Some(PageResponse { next_page_token }),
        }))
    }

    async fn reconcile(
        &self,
        request: Request<pb::ReconcileRequest>,
    ) -> Result<Response<pb::ReconcileReport>, Status> {
        let report = self
            .ledger
            .reconcile(request.get_ref().verify_hashes)
            .await?;
        Ok(Response::new(report_to_proto(report)))
    }

    type ExportCanonicalsStream = BoxStream<pb::ExportRecord>;

    async fn export_canonicals(
        &self,
        _request: Request<pb::ExportCanonicalsRequest>,
    ) -> Result<Response<Self::ExportCanonicalsStream>, Status> {
        let stream = self.ledger.export().map(|item| {
            item.map(|(object, payload)| pb::ExportRecord {
                object: Some(canonical_to_proto(object, false)),
                payload: payload.to_vec(),
            })
            .map_err(Status::from)
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn list_audit(
        &self,
        request: Request<common::ListAuditRequest>,
    ) -> Result<Response<common::ListAuditResponse>, Status> {
        let response = list_audit(self.ledger.store().database(), request.into_inner()).await?;
        Ok(Response::new(response))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod properties {
    use super::*;

    proptest::proptest! {
        #![proptest_config(crate::proptest_config())]

        #[test]
        fn any_page_token_is_read_or_invalid(token in proptest::prelude::any::<String>()) {
            if let Err(err) = decode_cursor(&token) {
                let invalid = matches!(err, LedgerError::Invalid { .. });
                proptest::prop_assert!(invalid);
            }
        }

        #[test]
        fn a_cursor_round_trips(
            seconds in -62_135_596_800i64..253_402_300_799,
            id in proptest::prelude::any::<String>(),
        ) {
            let at = time::OffsetDateTime::from_unix_timestamp(seconds).unwrap();
            proptest::prop_assert_eq!(decode_cursor(&encode_cursor(at, &id)).unwrap(), (seconds, id));
        }
    }
}
