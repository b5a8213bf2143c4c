//! The gRPC adapter: `noema.world.v1.WorldService` ⇄ the operations layer, nothing else.
//! Components come in as JSON and go out as their JCS bytes; records go out as the JSON
//! the REST gateway serves.

use std::sync::Arc;

use noema_core::time::rfc3339;
use noema_core::to_status;
use noema_proto::common::v1 as common;
use noema_proto::world::v1 as pb;
use noema_runtime::auth::principal;
use noema_runtime::convert::list_audit;
use serde::Serialize;
use serde_json::{Value, json};
use tonic::{Request, Response, Status};

use crate::domain::component::ComponentKind;
use crate::domain::hash::ContentHash;
use crate::error::WorldError;
use crate::ops::kernel::TurnResult;
use crate::ops::worlds::{TurnView, WorldView};
use crate::ops::{Caller, Page, World};
use crate::store::components::{ComponentUse, Lineage, StoredComponent};
use crate::store::invocations::InvocationFilter;
use crate::store::worlds::WorldRow;

pub struct WorldApi {
    world: Arc<World>,
}

impl WorldApi {
    pub fn new(world: Arc<World>) -> WorldApi {
        WorldApi { world }
    }
}

fn status(err: WorldError) -> Status {
    to_status(&err)
}

fn caller<T>(request: &Request<T>) -> Result<Caller, Status> {
    Ok(Caller {
        actor: principal(request)?.peer_id.clone(),
        authorization: request.metadata().get("authorization").cloned(),
    })
}

fn kind_of(kind: i32) -> Result<ComponentKind, Status> {
    match pb::ComponentKind::try_from(kind) {
        Ok(pb::ComponentKind::JsonSchema) => Ok(ComponentKind::JsonSchema),
        Ok(pb::ComponentKind::ResponseSource) => Ok(ComponentKind::ResponseSource),
        Ok(pb::ComponentKind::CognitionWorkflow) => Ok(ComponentKind::CognitionWorkflow),
        Ok(pb::ComponentKind::CognitionProfile) => Ok(ComponentKind::CognitionProfile),
        Ok(pb::ComponentKind::Scenario) => Ok(ComponentKind::Scenario),
        _ => Err(status(WorldError::InvalidArgument(
            "kind must name a component kind".into(),
        ))),
    }
}

fn kind_to_proto(kind: ComponentKind) -> pb::ComponentKind {
    match kind {
        ComponentKind::JsonSchema => pb::ComponentKind::JsonSchema,
        ComponentKind::ResponseSource => pb::ComponentKind::ResponseSource,
        ComponentKind::CognitionWorkflow => pb::ComponentKind::CognitionWorkflow,
        ComponentKind::CognitionProfile => pb::ComponentKind::CognitionProfile,
        ComponentKind::Scenario => pb::ComponentKind::Scenario,
    }
}

fn hash_of(text: &str, field: &str) -> Result<ContentHash, Status> {
    ContentHash::parse(text)
        .map_err(|e| status(WorldError::InvalidArgument(format!("{field}: {e}"))))
}

fn json_of(bytes: &[u8], field: &str) -> Result<Value, Status> {
    serde_json::from_slice(bytes).map_err(|e| {
        status(WorldError::InvalidArgument(format!(
            "{field} is not JSON: {e}"
        )))
    })
}

fn to_json<T: Serialize>(value: &T) -> Result<Vec<u8>, Status> {
    serde_json::to_vec(value)
        .map_err(|e| status(WorldError::Internal(format!("serialising a reply: {e}"))))
}

/// A listing's page from the request (the token is the next offset).
fn page_of(page: Option<common::PageRequest>) -> Result<Page, Status> {
    let page = page.unwrap_or_default();
    let offset = if page.page_token.is_empty() {
        0
    } else {
        page.page_token.parse::<u64>().map_err(|_| {
            status(WorldError::InvalidArgument(
                "page_token is not a token returned by a previous call".into(),
            ))
        })?
    };
    Ok(Page::new(offset, page.page_size))
}

fn page_reply(page: Page, returned: usize) -> Option<common::PageResponse> {
    Some(common::PageResponse {
        next_page_token: page
            .next(returned)
            .map(|n| n.to_string())
            .unwrap_or_default(),
    })
}

fn non_empty(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

fn component(stored: StoredComponent) -> pb::Component {
    pb::Component {
        kind: kind_to_proto(stored.kind).into(),
        hash: stored.hash.to_string(),
        document_jcs: stored.content.into_bytes(),
        created_at: rfc3339(stored.created_at),
        builtin_name: stored.builtin_name.unwrap_or_default(),
    }
}

fn lineage_json(lineage: &Lineage) -> Value {
    json!({
        "parent_hash": lineage.parent_hash,
        "world_slug": lineage.world_slug,
        "turn": lineage.turn,
    })
}

fn world(view: WorldView) -> Result<pb::World, Status> {
    Ok(pb::World {
        world_json: to_json(&view)?,
        slug: view.slug,
        scenario_hash: view.scenario_hash,
        current_turn: view.current_turn,
        head_hash: view.head_hash,
        created_at: rfc3339(view.created_at),
    })
}

fn world_summary(row: WorldRow) -> Result<pb::World, Status> {
    let created_at = rfc3339(row.created_at);
    let summary = json!({
        "slug": row.slug,
        "scenario_hash": row.scenario_hash,
        "current_turn": row.current_turn,
        "head_hash": row.head_hash,
        "created_at": created_at,
    });
    Ok(pb::World {
        world_json: to_json(&summary)?,
        slug: row.slug,
        scenario_hash: row.scenario_hash.to_string(),
        current_turn: row.current_turn,
        head_hash: row.head_hash.to_string(),
        created_at,
    })
}

fn turn(view: TurnView) -> pb::Turn {
    pb::Turn {
        world_slug: view.world_slug,
        turn: view.turn,
        hash: view.hash,
        previous_turn_hash: view.previous_turn_hash.unwrap_or_default(),
        simulation_time: view.simulation_time,
        attempt_id: view.attempt_id.unwrap_or_default(),
        committed_at: rfc3339(view.committed_at),
        anchor_id: view.anchor_id.unwrap_or_default(),
        record_jcs: view.record_jcs.into_bytes(),
    }
}

fn invocation(
    i: crate::domain::invocation::SourceInvocation,
) -> Result<pb::SourceInvocation, Status> {
    Ok(pb::SourceInvocation {
        invocation_json: to_json(&i)?,
        source_invocation_id: i.source_invocation_id.to_string(),
        attempt_id: i.attempt_id.to_string(),
        world_slug: i.world_slug.to_string(),
        attempted_turn: i.attempted_turn,
        invocation_seq: i.invocation_seq,
        invocation_kind: i.invocation_kind.as_str().to_owned(),
        status: i.status.as_str().to_owned(),
        llm_call_id: i.llm_call_id.map(|id| id.to_string()).unwrap_or_default(),
    })
}

fn llm_call(call: crate::domain::llm_call::LlmCall) -> Result<pb::LlmCall, Status> {
    Ok(pb::LlmCall {
        llm_call_json: to_json(&call)?,
        llm_call_id: call.llm_call_id.to_string(),
        source_invocation_id: call.source_invocation_id.to_string(),
        attempt_id: call.attempt_id.to_string(),
        status: call.status.as_str().to_owned(),
    })
}

fn attempt(record: crate::domain::attempt::AttemptRecord) -> Result<pb::Attempt, Status> {
    Ok(pb::Attempt {
        attempt_json: to_json(&record)?,
        attempt_id: record.attempt_id.to_string(),
        world_slug: record.world_slug,
        attempted_turn: record.attempted_turn,
        status: record.status.as_str().to_owned(),
        failure_class: record
            .failure_class
            .map(|c| c.as_str().to_owned())
            .unwrap_or_default(),
    })
}

#[tonic::async_trait]
impl pb::world_service_server::WorldService for WorldApi {
    async fn put_component(
        &self,
        request: Request<pb::PutComponentRequest>,
    ) -> Result<Response<pb::PutComponentReply>, Status> {
        let caller = caller(&request)?;
        let request = request.into_inner();
        let kind = kind_of(request.kind)?;
        let document = json_of(&request.document_json, "document_json")?;
        let (hash, created) = self
            .world
            .put_component(kind, &document, &caller)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::PutComponentReply {
            hash: hash.to_string(),
            created,
        }))
    }

    async fn get_component(
        &self,
        request: Request<pb::GetComponentRequest>,
    ) -> Result<Response<pb::Component>, Status> {
        let request = request.into_inner();
        let kind = kind_of(request.kind)?;
        let hash = hash_of(&request.hash, "hash")?;
        let stored = self
            .world
            .get_component(kind, &hash)
            .await
            .map_err(status)?;
        Ok(Response::new(component(stored)))
    }

    async fn get_builtin_component(
        &self,
        request: Request<pb::GetBuiltinComponentRequest>,
    ) -> Result<Response<pb::Component>, Status> {
        let stored = self
            .world
            .builtin_component(&request.into_inner().name)
            .await
            .map_err(status)?;
        Ok(Response::new(component(stored)))
    }

    async fn list_components(
        &self,
        request: Request<pb::ListComponentsRequest>,
    ) -> Result<Response<pb::ListComponentsReply>, Status> {
        let request = request.into_inner();
        let kind = kind_of(request.kind)?;
        let page = page_of(request.page)?;
        let stored = self
            .world
            .list_components(kind, page)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::ListComponentsReply {
            page: page_reply(page, stored.len()),
            components: stored.into_iter().map(component).collect(),
        }))
    }

    async fn list_component_uses(
        &self,
        request: Request<pb::ListComponentUsesRequest>,
    ) -> Result<Response<pb::ListComponentUsesReply>, Status> {
        let request = request.into_inner();
        let kind = kind_of(request.kind)?;
        let hash = hash_of(&request.hash, "hash")?;
        let uses = self
            .world
            .component_uses(kind, &hash)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::ListComponentUsesReply {
            uses: uses
                .into_iter()
                .map(|u| match u {
                    ComponentUse::Component(r) => pb::ComponentUse {
                        kind: kind_to_proto(r.kind).into(),
                        hash: r.hash.to_string(),
                        pointer: r.pointer,
                        world_slug: String::new(),
                    },
                    ComponentUse::World { slug } => pb::ComponentUse {
                        kind: pb::ComponentKind::Unspecified.into(),
                        hash: String::new(),
                        pointer: "/scenario_hash".into(),
                        world_slug: slug,
                    },
                })
                .collect(),
        }))
    }

    async fn assemble_scenario(
        &self,
        request: Request<pb::AssembleScenarioRequest>,
    ) -> Result<Response<pb::PutComponentReply>, Status> {
        let caller = caller(&request)?;
        let document = json_of(&request.into_inner().document_json, "document_json")?;
        let (hash, created) = self
            .world
            .assemble_scenario(&document, &caller)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::PutComponentReply {
            hash: hash.to_string(),
            created,
        }))
    }

    async fn fork_scenario(
        &self,
        request: Request<pb::ForkScenarioRequest>,
    ) -> Result<Response<pb::ForkScenarioReply>, Status> {
        let caller = caller(&request)?;
        let request = request.into_inner();
        let parent = hash_of(&request.parent_hash, "parent_hash")?;
        let from_world = non_empty(request.world_slug);
        let (hash, created, lineage) = self
            .world
            .fork_scenario(
                &parent,
                &request.label,
                from_world.as_deref().map(|slug| (slug, request.turn)),
                &caller,
            )
            .await
            .map_err(status)?;
        Ok(Response::new(pb::ForkScenarioReply {
            hash: hash.to_string(),
            created,
            lineage_json: to_json(&lineage_json(&lineage))?,
        }))
    }

    async fn create_world(
        &self,
        request: Request<pb::CreateWorldRequest>,
    ) -> Result<Response<pb::World>, Status> {
        let caller = caller(&request)?;
        let request = request.into_inner();
        let scenario = hash_of(&request.scenario_hash, "scenario_hash")?;
        let view = self
            .world
            .create_world(&request.slug, &scenario, &caller)
            .await
            .map_err(status)?;
        Ok(Response::new(world(view)?))
    }

    async fn get_world(
        &self,
        request: Request<pb::GetWorldRequest>,
    ) -> Result<Response<pb::World>, Status> {
        let view = self
            .world
            .get_world(&request.into_inner().slug)
            .await
            .map_err(status)?;
        Ok(Response::new(world(view)?))
    }

    async fn list_worlds(
        &self,
        request: Request<pb::ListWorldsRequest>,
    ) -> Result<Response<pb::ListWorldsReply>, Status> {
        let page = page_of(request.into_inner().page)?;
        let rows = self.world.list_worlds(page).await.map_err(status)?;
        Ok(Response::new(pb::ListWorldsReply {
            page: page_reply(page, rows.len()),
            worlds: rows
                .into_iter()
                .map(world_summary)
                .collect::<Result<_, _>>()?,
        }))
    }

    async fn run_turn(
        &self,
        request: Request<pb::RunTurnRequest>,
    ) -> Result<Response<pb::RunTurnReply>, Status> {
        let caller = caller(&request)?;
        let outcome = self
            .world
            .run_turn(&request.into_inner().slug, &caller)
            .await
            .map_err(status)?;
        let attempt_id = outcome.attempt_id.to_string();
        let reply = match outcome.result {
            TurnResult::Committed {
                turn,
                turn_hash,
                anchor,
            } => {
                let (anchor_id, anchor_error) = match anchor {
                    Some(Ok(id)) => (id, String::new()),
                    Some(Err(why)) => (String::new(), why),
                    None => (String::new(), String::new()),
                };
                pb::RunTurnReply {
                    attempt_id,
                    status: "committed".into(),
                    turn,
                    failure_class: String::new(),
                    failure_message: String::new(),
                    turn_hash,
                    anchor_id,
                    anchor_error,
                }
            }
            TurnResult::Failed(failure) => pb::RunTurnReply {
                attempt_id,
                status: "failed".into(),
                turn: 0,
                failure_class: failure.class.as_str().to_owned(),
                failure_message: failure.message,
                turn_hash: String::new(),
                anchor_id: String::new(),
                anchor_error: String::new(),
            },
        };
        Ok(Response::new(reply))
    }

    async fn get_turn(
        &self,
        request: Request<pb::GetTurnRequest>,
    ) -> Result<Response<pb::Turn>, Status> {
        let request = request.into_inner();
        let view = self
            .world
            .get_turn(&request.slug, request.turn)
            .await
            .map_err(status)?;
        Ok(Response::new(turn(view)))
    }

    async fn list_turns(
        &self,
        request: Request<pb::ListTurnsRequest>,
    ) -> Result<Response<pb::ListTurnsReply>, Status> {
        let request = request.into_inner();
        let page = page_of(request.page)?;
        let views = self
            .world
            .list_turns(&request.slug, page)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::ListTurnsReply {
            page: page_reply(page, views.len()),
            turns: views.into_iter().map(turn).collect(),
        }))
    }

    async fn get_turn_diff(
        &self,
        request: Request<pb::GetTurnRequest>,
    ) -> Result<Response<pb::TurnDiff>, Status> {
        let request = request.into_inner();
        let diff = self
            .world
            .turn_diff(&request.slug, request.turn)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::TurnDiff {
            diff_json: to_json(&diff)?,
            world_slug: request.slug,
            turn: request.turn,
        }))
    }

    async fn verify_world(
        &self,
        request: Request<pb::VerifyWorldRequest>,
    ) -> Result<Response<pb::VerifyWorldReply>, Status> {
        let caller = caller(&request)?;
        let report = self
            .world
            .verify_world(&request.into_inner().slug, &caller)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::VerifyWorldReply {
            ok: report.ok,
            turns_checked: report.turns_checked,
            head_hash: report.head_hash,
            broken_turn: report.broken_turn.unwrap_or_default(),
            problem: report.problem.unwrap_or_default(),
            anchors_checked: report.anchors_checked,
        }))
    }

    async fn get_attempt(
        &self,
        request: Request<pb::GetAttemptRequest>,
    ) -> Result<Response<pb::Attempt>, Status> {
        let record = self
            .world
            .get_attempt(&request.into_inner().attempt_id)
            .await
            .map_err(status)?;
        Ok(Response::new(attempt(record)?))
    }

    async fn list_attempts(
        &self,
        request: Request<pb::ListAttemptsRequest>,
    ) -> Result<Response<pb::ListAttemptsReply>, Status> {
        let request = request.into_inner();
        let page = page_of(request.page)?;
        let records = self
            .world
            .list_attempts(&request.slug, page)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::ListAttemptsReply {
            page: page_reply(page, records.len()),
            attempts: records.into_iter().map(attempt).collect::<Result<_, _>>()?,
        }))
    }

    async fn list_source_invocations(
        &self,
        request: Request<pb::ListSourceInvocationsRequest>,
    ) -> Result<Response<pb::ListSourceInvocationsReply>, Status> {
        let request = request.into_inner();
        let page = page_of(request.page)?;
        let filter = InvocationFilter {
            world_slug: non_empty(request.world_slug),
            attempt_id: non_empty(request.attempt_id),
            invocation_kind: non_empty(request.invocation_kind),
            source_hash: non_empty(request.source_hash),
            workflow_hash: non_empty(request.workflow_hash),
            subject_entity_id: non_empty(request.subject_entity_id),
            status: non_empty(request.status),
        };
        let invocations = self
            .world
            .list_invocations(&filter, page)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::ListSourceInvocationsReply {
            page: page_reply(page, invocations.len()),
            invocations: invocations
                .into_iter()
                .map(invocation)
                .collect::<Result<_, _>>()?,
        }))
    }

    async fn get_source_invocation(
        &self,
        request: Request<pb::GetSourceInvocationRequest>,
    ) -> Result<Response<pb::SourceInvocation>, Status> {
        let found = self
            .world
            .get_invocation(&request.into_inner().source_invocation_id)
            .await
            .map_err(status)?;
        Ok(Response::new(invocation(found)?))
    }

    async fn get_llm_call(
        &self,
        request: Request<pb::GetLlmCallRequest>,
    ) -> Result<Response<pb::LlmCall>, Status> {
        let call = self
            .world
            .get_llm_call(&request.into_inner().llm_call_id)
            .await
            .map_err(status)?;
        Ok(Response::new(llm_call(call)?))
    }

    async fn list_llm_calls(
        &self,
        request: Request<pb::ListLlmCallsRequest>,
    ) -> Result<Response<pb::ListLlmCallsReply>, Status> {
        let request = request.into_inner();
        let page = page_of(request.page)?;
        let world_slug = non_empty(request.world_slug);
        let attempt_id = non_empty(request.attempt_id);
        let calls = self
            .world
            .list_llm_calls(world_slug.as_deref(), attempt_id.as_deref(), page)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::ListLlmCallsReply {
            page: page_reply(page, calls.len()),
            llm_calls: calls.into_iter().map(llm_call).collect::<Result<_, _>>()?,
        }))
    }

    async fn list_events(
        &self,
        request: Request<pb::ListEventsRequest>,
    ) -> Result<Response<pb::ListEventsReply>, Status> {
        let request = request.into_inner();
        let page = page_of(request.page)?;
        let turn = (request.turn > 0).then_some(request.turn);
        let events = self
            .world
            .list_events(&request.slug, turn, page)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::ListEventsReply {
            page: page_reply(page, events.len()),
            events: events
                .into_iter()
                .map(|e| {
                    Ok(pb::Event {
                        event_json: to_json(&e)?,
                        event_id: e.event_id,
                        world_slug: e.world_slug,
                        turn: e.turn,
                        patch_seq: e.patch_seq,
                        subject_entity_id: e.subject_entity_id,
                    })
                })
                .collect::<Result<_, Status>>()?,
        }))
    }

    async fn get_entity_history(
        &self,
        request: Request<pb::GetEntityHistoryRequest>,
    ) -> Result<Response<pb::EntityHistory>, Status> {
        let request = request.into_inner();
        let history = self
            .world
            .entity_history(&request.slug, &request.entity_id)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::EntityHistory {
            history_json: to_json(&history)?,
            world_slug: request.slug,
            entity_id: request.entity_id,
        }))
    }

    async fn list_audit(
        &self,
        request: Request<common::ListAuditRequest>,
    ) -> Result<Response<common::ListAuditResponse>, Status> {
        let response = list_audit(self.world.store().database(), request.into_inner()).await?;
        Ok(Response::new(response))
    }
}
