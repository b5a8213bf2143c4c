//! A rehearsal of the seed's Phase I park tests at the domain level: a test-only turn driver
//! runs the kernel's pure rules (plan, templates, judging, ambient injection, prompts, the tool
//! loop, patch acceptance, the turn chain) against the toys over real HTTP on 127.0.0.1 —
//! the scripted LLM and the toy sources. The transports here are minimal test stand-ins; the
//! service's real sources (libs/tools' HTTP JSON caller, the streaming LLM source) and the
//! durable store come with the wiring, which will run these same scenarios through the API.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use common::{Park as Components, seed, set};
use noema_toys::park::ParkConfig;
use noema_toys::{LlmScript, Park, ScriptedLlm, ToyServer, serve_all};
use noema_world::domain::ambient::{AmbientResult, plan_turn, subject_ambient};
use noema_world::domain::assembly::AssembledScenario;
use noema_world::domain::chat::ChatMessage;
use noema_world::domain::component::ComponentKind;
use noema_world::domain::failure::{Failure, FailureClass};
use noema_world::domain::hash::ContentHash;
use noema_world::domain::ids::{EntityId, HumanId};
use noema_world::domain::invocation::{
    InvocationKind, InvocationOutcome, InvocationStart, InvocationStatus, ModelOutputKind,
    SourceInvocation,
};
use noema_world::domain::schema::CompiledSchema;
use noema_world::domain::source::kinds::{HTTP_JSON, LLM_CHAT_COMPLETIONS};
use noema_world::domain::source::{
    ChatRequest, HttpJsonInterface, LlmChatInterface, ResponseSource, SourceError,
    SourceInvocationContext, SourceOutput, SourceRequest, judge_json_response,
};
use noema_world::domain::tool_loop::{Step, ToolLoop};
use noema_world::domain::turn::{StoredTurn, TurnRecord, WorkingTurn, verify_chain};
use noema_world::domain::workflow::prompt::{PromptValues, render_prompt};
use noema_world::domain::workflow::template::{
    TurnFacts, format_time, render_template, template_context,
};
use noema_world::domain::world::WorldState;
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

// --- test-only transports ------------------------------------------------------------------

/// POSTs the JSON body to one URL; what comes back is judged by the kernel's rules.
struct TestHttpJson {
    url: String,
    timeout: Duration,
    client: reqwest::Client,
}

#[async_trait]
impl ResponseSource for TestHttpJson {
    async fn invoke_json(
        &self,
        _: &SourceInvocationContext,
        request: SourceRequest,
    ) -> Result<SourceOutput, SourceError> {
        let SourceRequest::Json(body) = request else {
            return Err(SourceError::new(Failure::new(
                FailureClass::SourceHttpError,
                "not a JSON request",
            )));
        };
        let response = self
            .client
            .post(&self.url)
            .timeout(self.timeout)
            .json(&body)
            .send()
            .await
            .map_err(|e| {
                SourceError::new(Failure::new(FailureClass::SourceHttpError, e.to_string()))
            })?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect();
        let text = response.text().await.unwrap_or_default();
        Ok(SourceOutput {
            http_status: Some(status),
            headers,
            text,
            tokens: None,
        })
    }
}

/// A non-streaming chat completion with the request's response_format.
struct TestChat {
    url: String,
    client: reqwest::Client,
}

#[async_trait]
impl ResponseSource for TestChat {
    async fn invoke_json(
        &self,
        ctx: &SourceInvocationContext,
        request: SourceRequest,
    ) -> Result<SourceOutput, SourceError> {
        let SourceRequest::Chat(chat) = request else {
            return Err(SourceError::new(Failure::new(
                FailureClass::LlmProviderError,
                "not a chat request",
            )));
        };
        let mut body =
            json!({"model": chat.model, "messages": chat.messages, "stream": chat.stream});
        if let Some(schema) = &chat.response_schema {
            body["response_format"] = schema.response_format();
        }
        let mut post = self.client.post(&self.url).json(&body);
        for (name, value) in ctx.provenance_headers() {
            post = post.header(name, value);
        }
        let response = post.send().await.map_err(|e| {
            SourceError::new(Failure::new(FailureClass::LlmProviderError, e.to_string()))
        })?;
        let status = response.status().as_u16();
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        if status == 400 && answer["error"]["param"] == json!("response_format") {
            return Err(SourceError::new(Failure::new(
                FailureClass::StructuredOutputRejected,
                answer["error"]["message"].as_str().unwrap_or_default(),
            )));
        }
        if !(200..300).contains(&status) {
            let mut error = SourceError::new(Failure::new(
                FailureClass::LlmProviderError,
                format!("HTTP {status}"),
            ));
            error.http_status = Some(status);
            return Err(error);
        }
        let text = answer["choices"][0]["message"]["content"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        Ok(SourceOutput {
            http_status: Some(status),
            headers: BTreeMap::new(),
            text,
            tokens: None,
        })
    }
}

// --- a test-only turn driver over the domain -------------------------------------------------

struct Driver<'a> {
    assembled: &'a AssembledScenario,
    sources: HashMap<ContentHash, Arc<dyn ResponseSource>>,
    slug: HumanId,
    attempt_id: Uuid,
    invocations: Vec<SourceInvocation>,
}

struct Provenance {
    kind: InvocationKind,
    workflow_hash: ContentHash,
    source_hash: ContentHash,
    node: Option<HumanId>,
    subject: Option<EntityId>,
    ambient_source_id: Option<HumanId>,
    tool_name: Option<String>,
    parent: Option<Uuid>,
    attempt: Option<u32>,
    round: Option<u32>,
}

impl<'a> Driver<'a> {
    fn new(assembled: &'a AssembledScenario, toys_url: &str) -> Driver<'a> {
        let client = noema_tools::tls::client().unwrap();
        let sources = assembled
            .sources
            .iter()
            .map(|(hash, definition)| {
                let source: Arc<dyn ResponseSource> = match definition.kind() {
                    LLM_CHAT_COMPLETIONS => Arc::new(TestChat {
                        url: format!("{toys_url}/v1/chat/completions"),
                        client: client.clone(),
                    }),
                    HTTP_JSON => {
                        // Every CHUKWA_TOY_*_URL names the toys' base URL here.
                        let interface = HttpJsonInterface::of(definition).unwrap();
                        Arc::new(TestHttpJson {
                            url: interface.url(toys_url),
                            timeout: Duration::from_millis(interface.timeout_ms),
                            client: client.clone(),
                        })
                    }
                    other => panic!("no test transport for {other}"),
                };
                (hash.clone(), source)
            })
            .collect();
        Driver {
            assembled,
            sources,
            slug: HumanId::parse("park-demo").unwrap(),
            attempt_id: Uuid::from_u128(1),
            invocations: Vec::new(),
        }
    }

    fn start(
        &mut self,
        turn: u64,
        p: Provenance,
        request: Value,
    ) -> (usize, SourceInvocationContext) {
        let seq = u32::try_from(self.invocations.len() + 1).unwrap();
        let id = Uuid::from_u128(u128::from(turn) << 32 | u128::from(seq));
        let invocation = SourceInvocation::start(
            InvocationStart {
                source_invocation_id: id,
                attempt_id: self.attempt_id,
                world_slug: self.slug.clone(),
                attempted_turn: turn,
                invocation_seq: seq,
                workflow_hash: Some(p.workflow_hash),
                workflow_node_id: p.node.clone(),
                workflow_subject_entity_id: p.subject.clone(),
                source_hash: p.source_hash.clone(),
                invocation_kind: p.kind,
                ambient_source_id: p.ambient_source_id,
                tool_name: p.tool_name,
                parent_source_invocation_id: p.parent,
                input_schema_hash: None,
                output_schema_hash: None,
                logical_generation_attempt: p.attempt,
                tool_loop_round: p.round,
                request_json: request,
                metadata: json!({}),
            },
            OffsetDateTime::now_utc(),
        )
        .unwrap();
        self.invocations.push(invocation);
        let ctx = SourceInvocationContext {
            source_invocation_id: id,
            attempt_id: self.attempt_id,
            world_slug: self.slug.clone(),
            attempted_turn: turn,
            invocation_kind: p.kind,
            source_hash: p.source_hash,
            workflow_node_id: p.node,
            workflow_subject_entity_id: p.subject,
        };
        (self.invocations.len() - 1, ctx)
    }

    /// An ambient or tool call: invoke, judge, record; the JSON or the attempt's failure.
    async fn call_json(
        &mut self,
        turn: u64,
        p: Provenance,
        body: Value,
        schema: Option<&CompiledSchema>,
    ) -> Result<Value, Failure> {
        let source = self.sources[&p.source_hash].clone();
        let (index, ctx) = self.start(turn, p, body.clone());
        let record =
            |invocation: &mut SourceInvocation,
             result: Result<InvocationOutcome, (Failure, InvocationOutcome)>| {
                match result {
                    Ok(outcome) => invocation
                        .succeed(outcome, OffsetDateTime::now_utc())
                        .unwrap(),
                    Err((failure, outcome)) => invocation
                        .fail(failure, outcome, OffsetDateTime::now_utc())
                        .unwrap(),
                }
            };
        match source.invoke_json(&ctx, SourceRequest::Json(body)).await {
            Err(error) => {
                record(
                    &mut self.invocations[index],
                    Err((error.failure.clone(), InvocationOutcome::default())),
                );
                Err(error.failure)
            }
            Ok(output) => {
                let verdict = judge_json_response(&output, schema);
                match verdict.result {
                    Ok(json) => {
                        record(&mut self.invocations[index], Ok(verdict.outcome));
                        Ok(json)
                    }
                    Err(refused) => {
                        record(
                            &mut self.invocations[index],
                            Err((refused.failure.clone(), verdict.outcome)),
                        );
                        Err(refused.failure)
                    }
                }
            }
        }
    }

    fn schema(
        &self,
        reference: Option<&noema_world::domain::hash::HashRef>,
    ) -> Option<Arc<CompiledSchema>> {
        reference.map(|r| self.assembled.schemas[&r.hash].clone())
    }

    /// One attempted turn, exactly as the seed's kernel execution model (ordered subjects).
    async fn run_turn(&mut self, previous: &WorldState, turn: u64) -> Result<WorkingTurn, Failure> {
        let assembled = self.assembled;
        let facts = TurnFacts {
            world_slug: self.slug.clone(),
            attempted_turn: turn,
            simulation_time: assembled.scenario.clock().time_of_turn(turn),
        };
        let plan = plan_turn(previous, |_, e| assembled.workflow_of(e)).unwrap();
        let mut turn_results = Vec::new();
        for key in &plan.once_per_turn {
            let binding =
                &assembled.workflows[&key.workflow_hash].ambient_sources[key.binding_index];
            let request =
                render_template(&binding.request_template, &template_context(&facts, None))
                    .unwrap();
            let provenance = Provenance {
                kind: InvocationKind::AmbientContext,
                workflow_hash: key.workflow_hash.clone(),
                source_hash: binding.source_ref.hash.clone(),
                node: None,
                subject: None,
                ambient_source_id: Some(binding.id.clone()),
                tool_name: None,
                parent: None,
                attempt: None,
                round: None,
            };
            let schema = self.schema(binding.result_schema_ref.as_ref());
            let value = self
                .call_json(turn, provenance, request, schema.as_deref())
                .await?;
            turn_results.push(AmbientResult {
                key: key.clone(),
                value,
            });
        }

        let mut working = WorkingTurn::begin(previous.clone(), turn);
        for subject in &plan.subjects {
            let workflow = &assembled.workflows[&subject.workflow_hash];
            let facts_json = working
                .world()
                .subject_facts(subject.entity_id.as_str())
                .unwrap();
            let mut subject_results = Vec::new();
            for key in &subject.before_subject {
                let binding = &workflow.ambient_sources[key.binding_index];
                let request = render_template(
                    &binding.request_template,
                    &template_context(&facts, Some(&facts_json)),
                )
                .unwrap();
                let provenance = Provenance {
                    kind: InvocationKind::AmbientContext,
                    workflow_hash: key.workflow_hash.clone(),
                    source_hash: binding.source_ref.hash.clone(),
                    node: None,
                    subject: Some(subject.entity_id.clone()),
                    ambient_source_id: Some(binding.id.clone()),
                    tool_name: None,
                    parent: None,
                    attempt: None,
                    round: None,
                };
                let schema = self.schema(binding.result_schema_ref.as_ref());
                let value = self
                    .call_json(turn, provenance, request, schema.as_deref())
                    .await?;
                subject_results.push(AmbientResult {
                    key: key.clone(),
                    value,
                });
            }
            let entity = working
                .world()
                .entity(subject.entity_id.as_str())
                .unwrap()
                .clone();
            let ambient = subject_ambient(
                &subject.workflow_hash,
                workflow,
                &subject.entity_id,
                &entity,
                &turn_results,
                &subject_results,
            )
            .unwrap();
            let node = workflow.applied_node().unwrap();
            let contract = Arc::new(assembled.node_contract(&subject.workflow_hash).unwrap());
            let values = PromptValues {
                world_projection: serde_json::to_string_pretty(&working.world().projection())
                    .unwrap(),
                subject_rendered: serde_json::to_string_pretty(&facts_json).unwrap(),
                ambient_visible: serde_json::to_string_pretty(&ambient).unwrap(),
                tools_available: serde_json::to_string_pretty(&contract.tools_available()).unwrap(),
                world_slug: self.slug.to_string(),
                world_attempted_turn: turn.to_string(),
                world_simulation_time: format_time(facts.simulation_time),
                subject_entity_id: subject.entity_id.to_string(),
            };
            let prompt = render_prompt(&node.prompt_template, &values).unwrap();
            let llm = &assembled.sources[&node.llm_source_ref.hash];
            let delivery = LlmChatInterface::of(llm).unwrap().schema_delivery;
            let mut tool_loop = ToolLoop::new(node, contract, prompt, delivery);
            loop {
                let generation = tool_loop.generation().unwrap();
                let provenance = Provenance {
                    kind: InvocationKind::LlmGeneration,
                    workflow_hash: subject.workflow_hash.clone(),
                    source_hash: node.llm_source_ref.hash.clone(),
                    node: Some(node.id.clone()),
                    subject: Some(subject.entity_id.clone()),
                    ambient_source_id: None,
                    tool_name: None,
                    parent: None,
                    attempt: Some(generation.logical_generation_attempt),
                    round: Some(generation.tool_loop_round),
                };
                let request = ChatRequest {
                    model: "toy".to_owned(),
                    messages: generation.messages.to_vec(),
                    response_schema: generation.response_schema.cloned(),
                    stream: false,
                    observer: None,
                };
                let request_json = json!({"messages": request.messages});
                let (index, ctx) = self.start(turn, provenance, request_json);
                let parent = ctx.source_invocation_id;
                let output = match self.sources[&node.llm_source_ref.hash]
                    .invoke_json(&ctx, SourceRequest::Chat(request))
                    .await
                {
                    Ok(output) => output,
                    Err(error) => {
                        self.invocations[index]
                            .fail(
                                error.failure.clone(),
                                InvocationOutcome::default(),
                                OffsetDateTime::now_utc(),
                            )
                            .unwrap();
                        return Err(error.failure);
                    }
                };
                let judged = tool_loop.judge(&output.text, working.world()).unwrap();
                let outcome = InvocationOutcome {
                    response_json: judged.parsed.clone(),
                    response_text: Some(output.text.clone()),
                    http_status: output.http_status,
                    model_output_kind: Some(judged.model_output_kind),
                    ..InvocationOutcome::default()
                };
                let now = OffsetDateTime::now_utc();
                if judged.model_output_kind == ModelOutputKind::Invalid {
                    self.invocations[index]
                        .fail(
                            Failure::new(FailureClass::ModelOutputInvalid, "refused"),
                            outcome,
                            now,
                        )
                        .unwrap();
                } else {
                    self.invocations[index].succeed(outcome, now).unwrap();
                }
                match judged.step {
                    Step::CallTool {
                        name,
                        arguments,
                        source_ref,
                        result_schema_ref,
                        ..
                    } => {
                        let provenance = Provenance {
                            kind: InvocationKind::ModelElectedTool,
                            workflow_hash: subject.workflow_hash.clone(),
                            source_hash: source_ref.hash.clone(),
                            node: Some(node.id.clone()),
                            subject: Some(subject.entity_id.clone()),
                            ambient_source_id: None,
                            tool_name: Some(name),
                            parent: Some(parent),
                            attempt: None,
                            round: Some(generation_round(&tool_loop)),
                        };
                        let schema = self.schema(result_schema_ref.as_ref());
                        let result = self
                            .call_json(turn, provenance, arguments, schema.as_deref())
                            .await?;
                        tool_loop.tool_result(&result).unwrap();
                    }
                    Step::Final(patch) => match working.accept(&subject.entity_id, patch.clone()) {
                        Ok(_) => break,
                        Err(problems) => match tool_loop.reject_final(&patch, problems).unwrap() {
                            Step::Failed(failure) => return Err(failure),
                            _ => continue,
                        },
                    },
                    Step::Retry => continue,
                    Step::Failed(failure) => return Err(failure),
                }
            }
        }
        Ok(working)
    }

    fn of_kind(&self, kind: InvocationKind) -> Vec<&SourceInvocation> {
        self.invocations
            .iter()
            .filter(|i| i.invocation_kind == kind)
            .collect()
    }

    fn ambient(&self, id: &str) -> Vec<&SourceInvocation> {
        self.invocations
            .iter()
            .filter(|i| {
                i.ambient_source_id
                    .as_ref()
                    .is_some_and(|a| a.as_str() == id)
            })
            .collect()
    }
}

fn generation_round(tool_loop: &ToolLoop) -> u32 {
    // The call belongs to the round of the generation that emitted it.
    tool_loop.tool_calls_made() - 1
}

// --- the park --------------------------------------------------------------------------------

struct Stage {
    llm: ScriptedLlm,
    park: Park,
    server: ToyServer,
    assembled: AssembledScenario,
}

async fn stage_with(
    script: Value,
    reject_format: bool,
    edit: impl FnOnce(&mut Components, &mut Value),
) -> Stage {
    let mut script: LlmScript = serde_json::from_value(script).unwrap();
    script.reject_response_format = reject_format;
    let llm = ScriptedLlm::new(script);
    let park = Park::new(ParkConfig::default());
    let server = serve_all("127.0.0.1:0".parse().unwrap(), &llm, &park)
        .await
        .unwrap();
    let mut components = Components::new();
    let mut workflow = components.workflow();
    edit(&mut components, &mut workflow);
    let assembled = components.assemble_workflow(&workflow).await.unwrap();
    Stage {
        llm,
        park,
        server,
        assembled,
    }
}

async fn stage(script: Value) -> Stage {
    stage_with(script, false, |_, _| {}).await
}

fn park_script() -> Value {
    let path = format!(
        "{}/../../libs/toys/scripts/park.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn final_patch(patch: Value) -> Value {
    json!({"json": {"kind": "final_patch", "patch": patch}})
}

#[tokio::test]
async fn three_turns_in_the_park() {
    let stage = stage(park_script()).await;
    let mut driver = Driver::new(&stage.assembled, &stage.server.url());
    let slug = HumanId::parse("park-demo").unwrap();
    let t0 = TurnRecord {
        world_slug: slug.clone(),
        turn: 0,
        previous_turn_hash: None,
        simulation_time: format_time(stage.assembled.scenario.clock().start),
        state: stage.assembled.initial_world(),
        patches: Vec::new(),
    };
    let mut history = vec![StoredTurn {
        hash: t0.hash().unwrap(),
        record: t0,
    }];
    for turn in 1..=3 {
        let previous = history.last().unwrap();
        let working = driver
            .run_turn(&previous.record.state, turn)
            .await
            .unwrap_or_else(|f| panic!("turn {turn}: {f}"));
        let (state, patches) = working.finish();
        let record = TurnRecord {
            world_slug: slug.clone(),
            turn,
            previous_turn_hash: Some(previous.hash.clone()),
            simulation_time: format_time(stage.assembled.scenario.clock().time_of_turn(turn)),
            state,
            patches,
        };
        history.push(StoredTurn {
            hash: record.hash().unwrap(),
            record,
        });
    }
    // One committed record per turn; the world's history replays from its patches alone, so
    // nothing but the WorldPatches changed it (A4, A5).
    assert_eq!(verify_chain(&history), Ok(()));
    let t1 = &history[1].record;
    let patches: Vec<(u32, &str)> = t1
        .patches
        .iter()
        .map(|p| (p.patch_seq, p.subject_entity_id.as_str()))
        .collect();
    assert_eq!(patches, [(1, "ant"), (2, "bob")]);
    assert_eq!(t1.state.entity("bob").unwrap().state, "holding a candy bar");
    assert_eq!(t1.state.entity("vending_machine").unwrap().state, "empty");
    assert_eq!(t1.state.entity("crumb").unwrap().state, "gone");
    assert_eq!(
        t1.state.entity("ant").unwrap().state,
        "fed, standing where the crumb was"
    );

    // Weather: one invocation per turn, colder each time (A6, A9).
    let weather: Vec<i64> = driver
        .ambient("park_weather")
        .iter()
        .map(|i| {
            i.response_json.as_ref().unwrap()["temperature_f"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(weather, [72, 64, 55]);
    // PA: traced every turn, empty or not (A10).
    let pa: Vec<usize> = driver
        .ambient("park_pa")
        .iter()
        .map(|i| {
            i.response_json.as_ref().unwrap()["announcements"]
                .as_array()
                .unwrap()
                .len()
        })
        .collect();
    assert_eq!(pa, [0, 1, 0]);
    // Phone: before Bob only, spam on turn 3 (A11).
    let inbox = driver.ambient("bob_phone_inbox");
    assert_eq!(inbox.len(), 3);
    assert!(
        inbox
            .iter()
            .all(|i| i.workflow_subject_entity_id.as_ref().unwrap().as_str() == "bob")
    );
    assert_eq!(
        inbox[2].response_json.as_ref().unwrap(),
        &seed("example6_phone_inbox")
    );

    // What the model saw: the announcement on turn 2 (both subjects), the spam on turn 3
    // (Bob only), the candy bar's tool result on Bob's second turn-1 generation.
    let requests = stage.llm.requests();
    let seen = |subject: &str, turn: u64, needle: &str| {
        requests
            .iter()
            .filter(|r| r.subject.as_deref() == Some(subject) && r.turn == Some(turn))
            .any(|r| r.body.to_string().contains(needle))
    };
    assert!(seen("bob", 2, "east vending area is closed"));
    assert!(seen("ant", 2, "east vending area is closed"));
    assert!(!seen("ant", 1, "east vending area is closed"));
    assert!(seen("bob", 3, "free candy coupons"));
    assert!(!seen("ant", 3, "free candy coupons"));
    assert!(seen("bob", 1, "A candy bar was dispensed."));
    assert!(
        requests
            .iter()
            .all(|r| r.body["response_format"]["type"] == json!("json_schema"))
    );

    // The tool ran once, because Bob's model asked for it, as a child of that generation (A7, A8).
    let tools = driver.of_kind(InvocationKind::ModelElectedTool);
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].tool_name.as_deref(), Some("buy_candy"));
    let parent = driver
        .invocations
        .iter()
        .find(|i| Some(i.source_invocation_id) == tools[0].parent_source_invocation_id)
        .unwrap();
    assert_eq!(parent.invocation_kind, InvocationKind::LlmGeneration);
    assert_eq!(parent.model_output_kind, Some(ModelOutputKind::ToolCall));
    assert_eq!(
        tools[0].response_json.as_ref().unwrap(),
        &seed("example1_vending_result_dispensed")
    );
    assert_eq!(stage.park.calls("/buy_candy").len(), 1);

    // Turn 2: Bob's first generation was not JSON; the retry is a new invocation (A13).
    let bob_turn2: Vec<(u32, InvocationStatus, Option<ModelOutputKind>)> = driver
        .invocations
        .iter()
        .filter(|i| {
            i.attempted_turn == 2
                && i.invocation_kind == InvocationKind::LlmGeneration
                && i.workflow_subject_entity_id.as_ref().unwrap().as_str() == "bob"
        })
        .map(|i| {
            (
                i.logical_generation_attempt.unwrap(),
                i.status,
                i.model_output_kind,
            )
        })
        .collect();
    assert_eq!(
        bob_turn2,
        [
            (1, InvocationStatus::Failed, Some(ModelOutputKind::Invalid)),
            (
                2,
                InvocationStatus::Succeeded,
                Some(ModelOutputKind::FinalPatch)
            )
        ]
    );
    assert_eq!(driver.invocations.len(), 7 + 6 + 5);
    assert!(
        driver
            .invocations
            .iter()
            .all(|i| i.status != InvocationStatus::Running)
    );
    assert_eq!(stage.llm.remaining(), 0);
}

#[tokio::test]
async fn available_tools_go_unused_when_the_model_does_not_call_them() {
    let script = json!({"scripts": [
        {"subject": "ant", "outputs": [final_patch(seed("d9_world_patch_cooler"))]},
        {"subject": "bob", "outputs": [final_patch(seed("example3_world_patch"))]}
    ]});
    let stage = stage(script).await;
    let mut driver = Driver::new(&stage.assembled, &stage.server.url());
    let working = driver
        .run_turn(&stage.assembled.initial_world(), 1)
        .await
        .unwrap();
    assert_eq!(working.patches().len(), 2);
    assert!(driver.of_kind(InvocationKind::ModelElectedTool).is_empty());
    for path in ["/buy_candy", "/drinking_fountain", "/send"] {
        assert!(stage.park.calls(path).is_empty(), "{path} was called");
    }
    // Ambient context ran anyway: it is the workflow's choice, not the model's.
    assert_eq!(driver.of_kind(InvocationKind::AmbientContext).len(), 3);
    assert_eq!(driver.of_kind(InvocationKind::LlmGeneration).len(), 2);
}

#[tokio::test]
async fn two_agents_and_one_candy_bar() {
    let buy = |actor: &str| json!({"json": {"kind": "tool_call", "tool_call": {"name": "buy_candy", "arguments": {"actor_id": actor, "machine_id": "vending_machine", "button": "C"}}}});
    let script = json!({"scripts": [
        {"subject": "ant", "outputs": [buy("ant"), final_patch(json!({"narration": "The ant gets a candy bar.", "effects": [
            {"op": "set_entity_state", "entity_id": "ant", "state": "next to a candy bar"},
            {"op": "set_entity_state", "entity_id": "vending_machine", "state": "empty"}]}))]},
        {"subject": "bob", "outputs": [buy("bob"), final_patch(seed("example2_world_patch"))]}
    ]});
    let stage = stage(script).await;
    let mut driver = Driver::new(&stage.assembled, &stage.server.url());
    let working = driver
        .run_turn(&stage.assembled.initial_world(), 1)
        .await
        .unwrap();
    let results: Vec<&str> = driver
        .of_kind(InvocationKind::ModelElectedTool)
        .iter()
        .map(|i| {
            i.response_json.as_ref().unwrap()["status"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(results, ["dispensed", "empty"]);
    assert_eq!(
        working.world().entity("vending_machine").unwrap().state,
        "empty"
    );
    assert_eq!(
        working.world().entity("bob").unwrap().memory.as_deref(),
        Some("I tried the vending machine, but it was empty.")
    );
}

#[tokio::test]
async fn send_text_runs_only_when_the_model_sends_one() {
    let send = json!({"json": {"kind": "tool_call", "tool_call": {"name": "send_text", "arguments": {"from_phone_id": "bob_phone", "to": "alice", "body": "Candy?"}}}});
    let script = json!({"scripts": [
        {"subject": "ant", "outputs": [final_patch(seed("d9_world_patch_cooler"))]},
        {"subject": "bob", "outputs": [send, final_patch(json!({"narration": "Bob texts Alice.", "effects": [
            {"op": "append_entity_memory", "entity_id": "bob", "content": "I texted Alice about candy."}]}))]}
    ]});
    let stage = stage(script).await;
    let mut driver = Driver::new(&stage.assembled, &stage.server.url());
    driver
        .run_turn(&stage.assembled.initial_world(), 1)
        .await
        .unwrap();
    let sends = stage.park.calls("/send");
    assert_eq!(sends.len(), 1);
    assert_eq!(
        sends[0].body,
        json!({"from_phone_id": "bob_phone", "to": "alice", "body": "Candy?"})
    );
    let tool = &driver.of_kind(InvocationKind::ModelElectedTool)[0];
    assert_eq!(tool.request_json, sends[0].body);
    assert_eq!(
        tool.response_json.as_ref().unwrap()["status"],
        json!("sent")
    );
}

#[tokio::test]
async fn a_source_that_answers_no_json_fails_the_attempt_before_commit() {
    let broken = json!({"version": 1, "label": "broken_inbox", "interface": {"name": "http_json", "method": "POST",
        "url_env": "CHUKWA_TOY_PHONE_URL", "path": "/faults/not_json", "timeout_ms": 5000}});
    let script = json!({"scripts": [{"subject": "ant", "outputs": [final_patch(seed("d9_world_patch_cooler"))]}]});
    let stage = stage_with(script, false, |components, workflow| {
        let hash = components.name("broken-inbox", ComponentKind::ResponseSource, &broken);
        set(
            workflow,
            "/ambient_sources/2/source_ref/hash",
            json!(hash.as_str()),
        );
    })
    .await;
    let mut driver = Driver::new(&stage.assembled, &stage.server.url());
    let failure = driver
        .run_turn(&stage.assembled.initial_world(), 1)
        .await
        .unwrap_err();
    assert_eq!(failure.class, FailureClass::SourceInvalidJson);
    assert_eq!(failure.class.http_status().as_u16(), 502);
    let failed = driver.invocations.last().unwrap();
    assert_eq!(failed.status, InvocationStatus::Failed);
    assert_eq!(
        failed.response_text.as_deref(),
        Some("service temporarily unavailable")
    );
    // The ant's patch had been accepted into the working world; nothing of it is committed
    // because the attempt produced no turn record (D11).
    assert_eq!(driver.of_kind(InvocationKind::LlmGeneration).len(), 1);
}

#[tokio::test]
async fn a_provider_that_refuses_response_format_fails_loudly() {
    let script = json!({"scripts": [{"outputs": [final_patch(seed("d9_world_patch_cooler"))]}]});
    let stage = stage_with(script, true, |_, _| {}).await;
    let mut driver = Driver::new(&stage.assembled, &stage.server.url());
    let failure = driver
        .run_turn(&stage.assembled.initial_world(), 1)
        .await
        .unwrap_err();
    assert_eq!(failure.class, FailureClass::StructuredOutputRejected);
    // One generation, refused; no second call without response_format (D14).
    assert_eq!(stage.llm.requests().len(), 1);
    assert_eq!(driver.of_kind(InvocationKind::LlmGeneration).len(), 1);
}

#[tokio::test]
async fn invalid_generations_exhaust_the_retry_lane() {
    let script = json!({"scripts": [{"subject": "ant", "outputs": [
        {"text": "no"}, {"json": {"kind": "tool_call", "tool_call": {"name": "fly", "arguments": {}}}},
        final_patch(json!({"narration": "n", "effects": [{"op": "set_entity_state", "entity_id": "ghost", "state": "x"}]}))
    ]}]});
    let stage = stage(script).await;
    let mut driver = Driver::new(&stage.assembled, &stage.server.url());
    let failure = driver
        .run_turn(&stage.assembled.initial_world(), 1)
        .await
        .unwrap_err();
    assert_eq!(failure.class, FailureClass::ModelOutputInvalid);
    let attempts: Vec<u32> = driver
        .of_kind(InvocationKind::LlmGeneration)
        .iter()
        .map(|i| i.logical_generation_attempt.unwrap())
        .collect();
    assert_eq!(attempts, [1, 2, 3]);
    // Each retry carried the corrective context of the one before.
    let requests = stage.llm.requests();
    assert!(
        requests[1]
            .body
            .to_string()
            .contains("the reply is not JSON")
    );
    assert!(requests[2].body.to_string().contains("/tool_call/name"));
}

#[test]
fn the_rehearsal_uses_the_seeds_own_workflow() {
    let components = Components::new();
    let workflow: Value = components.workflow();
    assert_eq!(
        workflow["nodes"][0]["available_tools"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    let messages: Vec<ChatMessage> =
        serde_json::from_value(workflow["nodes"][0]["prompt_template"]["messages"].clone())
            .unwrap();
    assert_eq!(messages.len(), 2);
}
