//! One attempted turn, exactly as the seed's "Kernel execution model":
//!
//! 1. take the world's lease and record the attempt `running` (one transaction);
//! 2. load T(N-1) into a working world and plan the turn (subjects in entity-id byte order);
//! 3. run every `once_per_turn` ambient source, then each subject's workflow: its
//!    `before_subject_workflow` sources, then its `llm_tool_loop` node — generations, the
//!    tool calls the model elects, the one retry lane — ending in a WorldPatch that is
//!    validated against the live working world and applied provisionally;
//! 4. commit exactly one turn snapshot, content-addressed and chained to T(N-1), with one
//!    event per accepted patch, and release the lease — or, if anything failed, commit
//!    nothing and record the attempt failed (D11); its traces stay.
//!
//! Every source call is a source invocation written durably before its first byte leaves
//! (with its LLM call for a generation). `per_subject_concurrent` workflows run their
//! subjects concurrently against the turn-start world; their patches are accepted in subject
//! order ([`concurrent`]).

mod concurrent;
mod subject;
mod trace;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use uuid::Uuid;

use super::components::jcs_text;
use super::{Caller, World, now};
use crate::domain::ambient::{AmbientResult, plan_turn};
use crate::domain::assembly::AssembledScenario;
use crate::domain::failure::Failure;
use crate::domain::hash::ContentHash;
use crate::domain::ids::{EntityId, HumanId};
use crate::domain::invocation::{
    InvocationKind, InvocationOutcome, InvocationStart, SourceInvocation,
};
use crate::domain::patch::WorldPatch;
use crate::domain::problem::Problem;
use crate::domain::schema::CompiledSchema;
use crate::domain::source::{
    ResponseSource, SourceInvocationContext, SourceRequest, judge_json_response,
};
use crate::domain::tool_loop::NodeContract;
use crate::domain::turn::{TurnRecord, WorkingTurn};
use crate::domain::workflow::ExecutionMode;
use crate::domain::workflow::template::{
    TurnFacts, format_time, render_template, template_context,
};
use crate::domain::world::WorldState;
use crate::error::WorldError;
use crate::store::attempts::{AttemptFailure, BeginAttempt, Begun, TurnCommit};
use crate::store::events::{Event, Touch};
use crate::store::trace::TraceError;
use crate::store::worlds::{TurnRow, WorldRow};
use crate::store::{StoreError, WorldStore};

pub(crate) use trace::Tracer;

/// How a `RunTurn` ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnOutcome {
    pub attempt_id: Uuid,
    pub result: TurnResult,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnResult {
    Committed {
        turn: u64,
        turn_hash: String,
        /// With `world.anchor`: the turn's ledger anchor, or why anchoring failed.
        anchor: Option<Result<String, String>>,
    },
    Failed(Failure),
}

/// Why an attempt ended without a turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AttemptError {
    /// A source, the LLM provider or the model's output failed it: the attempt's outcome.
    Failed(Failure),
    /// The kernel could not go on (storage, a broken assembly): an error of the request.
    Internal(String),
}

impl From<TraceError> for AttemptError {
    fn from(err: TraceError) -> Self {
        AttemptError::Internal(err.to_string())
    }
}

impl From<StoreError> for AttemptError {
    fn from(err: StoreError) -> Self {
        AttemptError::Internal(err.to_string())
    }
}

impl From<WorldError> for AttemptError {
    fn from(err: WorldError) -> Self {
        AttemptError::Internal(err.to_string())
    }
}

/// Who produced an accepted patch: for its event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PatchProvenance {
    pub subject: EntityId,
    pub workflow_hash: ContentHash,
    pub node_id: HumanId,
    pub llm_source_hash: ContentHash,
    pub source_invocation_id: Uuid,
    pub llm_call_id: Uuid,
}

/// What the working world said to a final patch.
#[derive(Debug, Clone)]
pub(crate) enum Verdict {
    Accepted,
    /// It no longer applies: the problems, and the world it was checked against.
    Rejected {
        problems: Vec<Problem>,
        world: Arc<WorldState>,
    },
}

/// Where a subject hands its final patch.
#[async_trait]
pub(crate) trait PatchSink: Send {
    async fn submit(
        &mut self,
        patch: WorldPatch,
        provenance: PatchProvenance,
    ) -> Result<Verdict, AttemptError>;
}

/// The subjects of an ordered turn accept their patches straight into the working world.
struct OrderedSink {
    working: WorkingTurn,
    accepted: Vec<PatchProvenance>,
}

#[async_trait]
impl PatchSink for OrderedSink {
    async fn submit(
        &mut self,
        patch: WorldPatch,
        provenance: PatchProvenance,
    ) -> Result<Verdict, AttemptError> {
        match self.working.accept(&provenance.subject, patch) {
            Ok(_) => {
                self.accepted.push(provenance);
                Ok(Verdict::Accepted)
            }
            Err(problems) => Ok(Verdict::Rejected {
                problems,
                world: Arc::new(self.working.world().clone()),
            }),
        }
    }
}

/// What one attempt shares between its subjects.
pub(crate) struct TurnContext {
    pub assembled: Arc<AssembledScenario>,
    pub facts: TurnFacts,
    pub tracer: Arc<Tracer>,
    pub sources: BTreeMap<ContentHash, Arc<dyn ResponseSource>>,
    pub contracts: BTreeMap<ContentHash, Arc<NodeContract>>,
    pub turn_results: Vec<AmbientResult>,
    pub model_aliases: BTreeMap<String, String>,
}

/// A JSON source call (ambient or model-elected tool) and its provenance.
pub(crate) struct JsonCall {
    pub kind: InvocationKind,
    pub workflow_hash: ContentHash,
    pub source_hash: ContentHash,
    pub subject: Option<EntityId>,
    pub node: Option<HumanId>,
    pub ambient_source_id: Option<HumanId>,
    pub tool_name: Option<String>,
    pub parent: Option<Uuid>,
    pub round: Option<u32>,
    pub input_schema: Option<ContentHash>,
    pub result_schema: Option<Arc<CompiledSchema>>,
}

impl TurnContext {
    pub fn source(&self, hash: &ContentHash) -> Result<Arc<dyn ResponseSource>, AttemptError> {
        self.sources.get(hash).cloned().ok_or_else(|| {
            AttemptError::Internal(format!("source {hash} is not part of the assembly"))
        })
    }

    pub fn schema(&self, hash: &ContentHash) -> Result<Arc<CompiledSchema>, AttemptError> {
        self.assembled.schemas.get(hash).cloned().ok_or_else(|| {
            AttemptError::Internal(format!("schema {hash} is not part of the assembly"))
        })
    }

    pub fn invocation_context(&self, invocation: &SourceInvocation) -> SourceInvocationContext {
        SourceInvocationContext {
            source_invocation_id: invocation.source_invocation_id,
            attempt_id: invocation.attempt_id,
            world_slug: invocation.world_slug.clone(),
            attempted_turn: invocation.attempted_turn,
            invocation_kind: invocation.invocation_kind,
            source_hash: invocation.source_hash.clone(),
            workflow_node_id: invocation.workflow_node_id.clone(),
            workflow_subject_entity_id: invocation.workflow_subject_entity_id.clone(),
        }
    }

    /// Calls a JSON source: its invocation durable first, then the call, then the answer
    /// judged (status, JSON, declared schema) and recorded. The JSON, or the attempt's
    /// failure.
    pub async fn call_json(&self, call: JsonCall, body: Value) -> Result<Value, AttemptError> {
        let tracer = &self.tracer;
        let start = InvocationStart {
            source_invocation_id: Uuid::new_v4(),
            attempt_id: tracer.attempt_id,
            world_slug: tracer.world_slug.clone(),
            attempted_turn: tracer.attempted_turn,
            invocation_seq: tracer.next_seq(),
            workflow_hash: Some(call.workflow_hash),
            workflow_node_id: call.node,
            workflow_subject_entity_id: call.subject,
            source_hash: call.source_hash,
            invocation_kind: call.kind,
            ambient_source_id: call.ambient_source_id,
            tool_name: call.tool_name,
            parent_source_invocation_id: call.parent,
            input_schema_hash: call.input_schema,
            output_schema_hash: call.result_schema.as_ref().map(|s| s.hash().clone()),
            logical_generation_attempt: None,
            tool_loop_round: call.round,
            request_json: body.clone(),
            metadata: json!({}),
        };
        let invocation = SourceInvocation::start(start, now()).map_err(|problems| {
            AttemptError::Internal(format!(
                "invocation: {}",
                crate::domain::problem::Problems(&problems)
            ))
        })?;
        let source = self.source(&invocation.source_hash)?;
        let mut invocation = tracer.start(invocation).await?;
        let context = self.invocation_context(&invocation);
        let answer = source
            .invoke_json(&context, SourceRequest::Json(body))
            .await;
        let result = match answer {
            Err(error) => {
                let outcome = InvocationOutcome {
                    response_text: error.body.clone(),
                    response_headers: error.headers.clone(),
                    http_status: error.http_status,
                    ..InvocationOutcome::default()
                };
                let _ = invocation.fail(error.failure.clone(), outcome, now());
                Err(AttemptError::Failed(error.failure))
            }
            Ok(output) => {
                let verdict = judge_json_response(&output, call.result_schema.as_deref());
                match verdict.result {
                    Ok(json) => {
                        let _ = invocation.succeed(verdict.outcome, now());
                        Ok(json)
                    }
                    Err(refused) => {
                        let _ = invocation.fail(refused.failure.clone(), verdict.outcome, now());
                        Err(AttemptError::Failed(refused.failure))
                    }
                }
            }
        };
        tracer.finish(&invocation);
        result
    }
}

/// Renews an attempt's lease until dropped; notes when the lease is lost.
struct LeaseKeeper {
    task: tokio::task::JoinHandle<()>,
    lost: Arc<AtomicBool>,
}

impl LeaseKeeper {
    fn start(store: WorldStore, slug: String, attempt_id: Uuid, ttl: Duration) -> LeaseKeeper {
        let lost = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&lost);
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(ttl / 3).await;
                let expires = now() + ttl;
                match store.renew_lease(&slug, attempt_id, expires).await {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!(world = %slug, attempt = %attempt_id, "the attempt lost its lease");
                        flag.store(true, Ordering::Relaxed);
                        return;
                    }
                    Err(err) => {
                        tracing::warn!(world = %slug, attempt = %attempt_id, error = %err, "renewing the lease failed");
                    }
                }
            }
        });
        LeaseKeeper { task, lost }
    }

    fn lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }
}

impl Drop for LeaseKeeper {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A finished run of every subject.
struct Ran {
    working: WorkingTurn,
    provenance: Vec<PatchProvenance>,
    simulation_time: String,
}

impl World {
    /// Runs one attempted turn of world `slug`.
    pub async fn run_turn(&self, slug: &str, caller: &Caller) -> Result<TurnOutcome, WorldError> {
        let slug_id = HumanId::parse(slug)
            .map_err(|why| WorldError::InvalidArgument(format!("slug: {why}")))?;
        let attempt_id = Uuid::new_v4();
        let started = now();
        let ttl = self.options.lease_ttl();
        let begun = self
            .store
            .begin_attempt(&BeginAttempt {
                slug: slug.to_owned(),
                attempt_id,
                lease_owner: self.owner.clone(),
                now: started,
                lease_expires_at: started + ttl,
            })
            .await?;
        let world = match begun {
            Begun::Started(world) => world,
            Begun::LeaseHeld { .. } => {
                return Err(WorldError::LeaseHeld {
                    slug: slug.to_owned(),
                });
            }
            Begun::NoWorld => {
                return Err(WorldError::NotFound(format!(
                    "world {slug:?} does not exist"
                )));
            }
        };
        let keeper = LeaseKeeper::start(self.store.clone(), slug.to_owned(), attempt_id, ttl);
        let tracer = Arc::new(Tracer::new(
            self.trace.clone(),
            attempt_id,
            slug_id.clone(),
            world.current_turn + 1,
        ));
        let ran = self.attempt(&world, Arc::clone(&tracer)).await;
        let elapsed = crate::domain::invocation::duration_ms(started, now());
        match ran {
            Ok(ran) => {
                if keeper.lost() {
                    return Err(WorldError::LeaseLost {
                        slug: slug.to_owned(),
                    });
                }
                drop(keeper);
                self.commit(&world, slug_id, attempt_id, ran, &tracer, elapsed, caller)
                    .await
            }
            Err(error) => {
                drop(keeper);
                // What the calls recorded is made durable before the attempt is closed.
                if let Err(err) = tracer.flush().await {
                    tracing::error!(attempt = %attempt_id, error = ?err, "flushing a failed attempt's traces");
                }
                let (failure, message) = match &error {
                    AttemptError::Failed(failure) => {
                        (Some(failure.clone()), failure.message.clone())
                    }
                    AttemptError::Internal(message) => (None, message.clone()),
                };
                self.store
                    .fail_attempt(&AttemptFailure {
                        slug: slug.to_owned(),
                        attempt_id,
                        failure: failure.clone(),
                        message: message.clone(),
                        ended_at: now(),
                        duration_ms: elapsed,
                    })
                    .await?;
                match failure {
                    Some(failure) => Ok(TurnOutcome {
                        attempt_id,
                        result: TurnResult::Failed(failure),
                    }),
                    None => Err(WorldError::Internal(format!(
                        "attempt {attempt_id} failed: {message}"
                    ))),
                }
            }
        }
    }

    /// Runs the attempt's ambient sources and subjects.
    async fn attempt(&self, world: &WorldRow, tracer: Arc<Tracer>) -> Result<Ran, AttemptError> {
        let (assembled, previous) = self.prepare(world).await?;
        let turn = world.current_turn + 1;
        let clock = assembled.scenario.clock();
        let facts = TurnFacts {
            world_slug: tracer.world_slug.clone(),
            attempted_turn: turn,
            simulation_time: clock.time_of_turn(turn),
        };
        let context = TurnContext {
            sources: BTreeMap::new(),
            contracts: BTreeMap::new(),
            turn_results: Vec::new(),
            model_aliases: self.options.llm.models.clone(),
            assembled,
            facts,
            tracer,
        };
        self.run_subjects(context, previous).await
    }

    async fn prepare(
        &self,
        world: &WorldRow,
    ) -> Result<(Arc<AssembledScenario>, WorldState), AttemptError> {
        let assembled = self.assembled(&world.scenario_hash).await?;
        let row = self
            .store
            .turn(&world.slug, world.current_turn)
            .await?
            .ok_or_else(|| {
                AttemptError::Internal(format!(
                    "world {:?} is at turn {}, which is not stored",
                    world.slug, world.current_turn
                ))
            })?;
        let record: TurnRecord = serde_json::from_str(&row.record).map_err(|e| {
            AttemptError::Internal(format!("stored turn {}: {e}", world.current_turn))
        })?;
        Ok((assembled, record.state))
    }

    async fn run_subjects(
        &self,
        mut context: TurnContext,
        previous: WorldState,
    ) -> Result<Ran, AttemptError> {
        let assembled = Arc::clone(&context.assembled);
        for (hash, definition) in &assembled.sources {
            let source = self.sources.build(definition).map_err(|problems| {
                AttemptError::Internal(format!(
                    "source {hash}: {}",
                    crate::domain::problem::Problems(&problems)
                ))
            })?;
            context.sources.insert(hash.clone(), source);
        }
        let plan = plan_turn(&previous, |_, entity| assembled.workflow_of(entity))
            .map_err(|problem| AttemptError::Internal(problem.to_string()))?;
        let mut concurrent = !plan.subjects.is_empty();
        for subject in &plan.subjects {
            if !context.contracts.contains_key(&subject.workflow_hash) {
                let contract = assembled
                    .node_contract(&subject.workflow_hash)
                    .map_err(|problem| AttemptError::Internal(problem.to_string()))?;
                context
                    .contracts
                    .insert(subject.workflow_hash.clone(), Arc::new(contract));
            }
            let mode = assembled
                .workflows
                .get(&subject.workflow_hash)
                .map(|w| w.execution);
            // A turn whose workflows do not all ask for concurrency runs in order.
            concurrent &= mode == Some(ExecutionMode::PerSubjectConcurrent);
        }

        // Ambient sources that run once per turn, before any subject.
        for key in &plan.once_per_turn {
            let binding = assembled
                .workflows
                .get(&key.workflow_hash)
                .and_then(|w| w.ambient_sources.get(key.binding_index))
                .ok_or_else(|| AttemptError::Internal("an ambient binding vanished".into()))?;
            let request = render_template(
                &binding.request_template,
                &template_context(&context.facts, None),
            )
            .map_err(|e| {
                AttemptError::Internal(format!("ambient source {:?}: {e}", binding.id.as_str()))
            })?;
            let result_schema = binding
                .result_schema_ref
                .as_ref()
                .map(|r| context.schema(&r.hash))
                .transpose()?;
            let value = context
                .call_json(
                    JsonCall {
                        kind: InvocationKind::AmbientContext,
                        workflow_hash: key.workflow_hash.clone(),
                        source_hash: binding.source_ref.hash.clone(),
                        subject: None,
                        node: None,
                        ambient_source_id: Some(binding.id.clone()),
                        tool_name: None,
                        parent: None,
                        round: None,
                        input_schema: None,
                        result_schema,
                    },
                    request,
                )
                .await?;
            context.turn_results.push(AmbientResult {
                key: key.clone(),
                value,
            });
        }

        let turn = context.facts.attempted_turn;
        let simulation_time = format_time(context.facts.simulation_time);
        let working = WorkingTurn::begin(previous, turn);
        if concurrent {
            let limit = usize::try_from(self.options.max_concurrent_subjects.max(1)).unwrap_or(1);
            let (working, provenance) =
                concurrent::run(Arc::new(context), plan.subjects, working, limit).await?;
            return Ok(Ran {
                working,
                provenance,
                simulation_time,
            });
        }
        let mut sink = OrderedSink {
            working,
            accepted: Vec::new(),
        };
        for subject in &plan.subjects {
            let view = Arc::new(sink.working.world().clone());
            subject::run(&context, subject, view, &mut sink).await?;
        }
        Ok(Ran {
            working: sink.working,
            provenance: sink.accepted,
            simulation_time,
        })
    }

    /// Commits the attempt's turn (one snapshot, its events, the attempt's summary) and
    /// anchors it when configured.
    #[allow(clippy::too_many_arguments)]
    async fn commit(
        &self,
        world: &WorldRow,
        slug: HumanId,
        attempt_id: Uuid,
        ran: Ran,
        tracer: &Tracer,
        elapsed: u64,
        caller: &Caller,
    ) -> Result<TurnOutcome, WorldError> {
        let turn = world.current_turn + 1;
        let (state, patches) = ran.working.finish();
        let record = TurnRecord {
            world_slug: slug.clone(),
            turn,
            previous_turn_hash: Some(world.head_hash.clone()),
            simulation_time: ran.simulation_time,
            state,
            patches,
        };
        let turn_hash = record
            .hash()
            .map_err(|e| WorldError::Internal(format!("turn record: {e}")))?;
        let record_json = serde_json::to_value(&record)
            .map_err(|e| WorldError::Internal(format!("turn record: {e}")))?;
        let committed_at = now();
        let events = record
            .patches
            .iter()
            .zip(&ran.provenance)
            .map(|(applied, provenance)| {
                event_of(&record, applied, provenance, attempt_id, committed_at)
            })
            .collect::<Result<Vec<_>, _>>()?;
        tracer
            .flush()
            .await
            .map_err(|e| WorldError::Internal(format!("{e:?}")))?;
        let committed = self
            .store
            .commit_turn(&TurnCommit {
                slug: slug.to_string(),
                attempt_id,
                turn: TurnRow {
                    world_slug: slug.to_string(),
                    turn,
                    turn_hash: turn_hash.to_string(),
                    previous_turn_hash: Some(world.head_hash.to_string()),
                    simulation_time: record.simulation_time.clone(),
                    attempt_id: Some(attempt_id.to_string()),
                    record: jcs_text(&record_json)?,
                    committed_at,
                    anchor_id: None,
                },
                events,
                summary: tracer.summary(),
                ended_at: committed_at,
                duration_ms: elapsed,
                actor: caller.actor.clone(),
            })
            .await?;
        if !committed {
            return Err(WorldError::LeaseLost {
                slug: slug.to_string(),
            });
        }
        let anchor = if self.options.anchor {
            Some(
                self.anchor_turns(slug.as_str(), turn, caller)
                    .await
                    .and_then(|id| id.ok_or_else(|| "the turn was not anchored".to_owned())),
            )
        } else {
            None
        };
        if let Some(Err(why)) = &anchor {
            tracing::warn!(world = %slug, turn, error = %why, "anchoring failed; a later turn retries");
        }
        Ok(TurnOutcome {
            attempt_id,
            result: TurnResult::Committed {
                turn,
                turn_hash: turn_hash.to_string(),
                anchor,
            },
        })
    }
}

fn event_of(
    record: &TurnRecord,
    applied: &crate::domain::turn::AppliedPatch,
    provenance: &PatchProvenance,
    attempt_id: Uuid,
    at: time::OffsetDateTime,
) -> Result<Event, WorldError> {
    let mut touches = Vec::new();
    for (id, change) in &applied.touched_entities {
        touches.push(Touch {
            entity_id: Some(id.to_string()),
            environment_label: None,
            before: json(&change.before)?,
            after: json(&change.after)?,
        });
    }
    for (label, change) in &applied.touched_environments {
        touches.push(Touch {
            entity_id: None,
            environment_label: Some(label.to_string()),
            before: json(&change.before)?,
            after: json(&change.after)?,
        });
    }
    Ok(Event {
        event_id: Uuid::new_v4().to_string(),
        world_slug: record.world_slug.to_string(),
        turn: record.turn,
        patch_seq: applied.patch_seq,
        attempt_id: attempt_id.to_string(),
        subject_entity_id: applied.subject_entity_id.to_string(),
        source_invocation_id: Some(provenance.source_invocation_id.to_string()),
        llm_call_id: Some(provenance.llm_call_id.to_string()),
        cognition_workflow_hash: Some(provenance.workflow_hash.to_string()),
        response_source_hash: Some(provenance.llm_source_hash.to_string()),
        workflow_node_id: Some(provenance.node_id.to_string()),
        narration: applied.patch.narration.clone(),
        patch: json(&applied.patch)?,
        effects: json(&applied.effects)?,
        occurred_at: at,
        touches,
    })
}

fn json<T: serde::Serialize>(value: &T) -> Result<Value, WorldError> {
    serde_json::to_value(value).map_err(|e| WorldError::Internal(format!("event: {e}")))
}
