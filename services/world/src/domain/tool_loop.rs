//! The `llm_tool_loop` node's rules (D4–D6, D13), as a state machine the runner drives:
//!
//! 1. [`ToolLoop::generation`] — the messages (and response schema) of the next generation,
//!    with its `logical_generation_attempt` and `tool_loop_round`.
//! 2. [`ToolLoop::judge`] — what the model wrote: a permitted tool call with valid arguments
//!    ([`Step::CallTool`]: the runner invokes that source, and only that one), a final patch
//!    that applies to the live working world ([`Step::Final`]), or a model-content failure.
//! 3. [`ToolLoop::tool_result`] — the validated tool result goes back to the model as an
//!    ordinary JSON-bearing message (no native provider tool protocol, D5).
//!
//! A model-content failure (not JSON, wrong shape, unknown tool, bad arguments, a patch of
//! the wrong shape or naming unknown things or disallowed ops) is retried by the one retry
//! lane: same node, same source, same contract, the rejected output and a corrective message
//! appended, a new generation (and so a new source invocation and LLM call) —
//! `max_generation_attempts` generations per round. When they are used up, or the model asks
//! for more than `max_tool_calls` tools, the attempt fails with `model_output_invalid`.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::chat::ChatMessage;
use super::failure::{Failure, FailureClass};
use super::hash::{ContentHash, HashRef};
use super::invocation::ModelOutputKind;
use super::llm_call::normalize_assistant_text;
use super::patch::WorldPatch;
use super::problem::{Problem, Problems};
use super::schema::{Builtin, CompiledSchema};
use super::source::{ResponseSchema, SchemaDelivery};
use super::workflow::{AvailableTool, LlmToolLoopNode};
use super::world::WorldState;

/// What a generation returns (the seed's JSON, verbatim).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToolLoopOutput {
    ToolCall { tool_call: ToolCall },
    FinalPatch { patch: Value },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    pub name: String,
    pub arguments: Map<String, Value>,
}

/// Why a generation's text is not a ToolLoopOutput.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputRefusal {
    /// The text does not parse as JSON (a parse error of the LLM call).
    NotJson(String),
    /// The JSON breaks the envelope (validation errors, pointers into the output).
    Shape(Vec<Problem>),
}

impl OutputRefusal {
    /// The refusal as problems, for the corrective message.
    pub fn problems(&self) -> Vec<Problem> {
        match self {
            OutputRefusal::NotJson(message) => {
                vec![Problem::new(
                    "",
                    format!("the reply is not JSON: {message}"),
                )]
            }
            OutputRefusal::Shape(problems) => problems.clone(),
        }
    }
}

impl ToolLoopOutput {
    /// Parses a generation's (normalised) text: JSON, then the envelope.
    pub fn parse(text: &str) -> Result<(Value, ToolLoopOutput), OutputRefusal> {
        let json: Value =
            serde_json::from_str(text).map_err(|e| OutputRefusal::NotJson(e.to_string()))?;
        Builtin::ToolLoopOutput
            .check(&json)
            .map_err(OutputRefusal::Shape)?;
        let output = serde_json::from_value(json.clone())
            .map_err(|e| OutputRefusal::Shape(vec![Problem::new("", e.to_string())]))?;
        Ok((json, output))
    }
}

/// A model-elected tool with its compiled contracts.
#[derive(Debug, Clone)]
pub struct ToolContract {
    pub tool: AvailableTool,
    pub arguments: Arc<CompiledSchema>,
    pub result: Option<Arc<CompiledSchema>>,
}

/// A node's compiled contracts: its tools and its final schema.
#[derive(Debug, Clone)]
pub struct NodeContract {
    pub tools: BTreeMap<String, ToolContract>,
    /// Declaration order of the tools, for prompts.
    pub tool_order: Vec<String>,
    pub final_schema: Arc<CompiledSchema>,
    /// The schema of a generation's reply, built once: every subject's generations send it.
    response: ResponseSchema,
}

impl NodeContract {
    /// The node's contracts from the compiled schemas of its assembly (every reference of an
    /// assembled workflow resolves, so a missing schema is reported, not expected).
    pub fn new(
        node: &LlmToolLoopNode,
        schemas: &BTreeMap<ContentHash, Arc<CompiledSchema>>,
    ) -> Result<NodeContract, Problem> {
        let get = |reference: &HashRef, at: String| {
            schemas.get(&reference.hash).cloned().ok_or_else(|| {
                Problem::new(
                    at,
                    format!("schema {} is not part of the assembly", reference.hash),
                )
            })
        };
        let mut tools = BTreeMap::new();
        let mut tool_order = Vec::new();
        for (k, tool) in node.available_tools.iter().enumerate() {
            let at = format!("/available_tools/{k}");
            let arguments = get(
                &tool.arguments_schema_ref,
                format!("{at}/arguments_schema_ref"),
            )?;
            let result = match &tool.result_schema_ref {
                Some(reference) => Some(get(reference, format!("{at}/result_schema_ref"))?),
                None => None,
            };
            tool_order.push(tool.name.clone());
            tools.insert(
                tool.name.clone(),
                ToolContract {
                    tool: tool.clone(),
                    arguments,
                    result,
                },
            );
        }
        let mut contract = NodeContract {
            tools,
            tool_order,
            final_schema: get(&node.final_schema_ref, "/final_schema_ref".to_owned())?,
            response: ResponseSchema {
                name: String::new(),
                schema: Value::Null,
            },
        };
        contract.response = contract.build_response_schema();
        Ok(contract)
    }

    /// `{{tools.available}}`: name, description and arguments schema of each tool.
    pub fn tools_available(&self) -> Value {
        Value::Array(
            self.ordered_tools()
                .map(|t| {
                    json!({
                        "name": t.tool.name,
                        "description": t.tool.description,
                        "arguments_schema": t.arguments.document(),
                    })
                })
                .collect(),
        )
    }

    fn ordered_tools(&self) -> impl Iterator<Item = &ToolContract> {
        self.tool_order
            .iter()
            .filter_map(|name| self.tools.get(name))
    }

    /// The schema of a generation's reply, for `response_format`: a final patch matching the
    /// final schema, or a call to one of the tools with its arguments. A schema with `$ref`s
    /// cannot be embedded safely and is sent as "any object" (the kernel validates it anyway).
    pub fn response_schema(&self) -> ResponseSchema {
        self.response.clone()
    }

    fn build_response_schema(&self) -> ResponseSchema {
        let mut branches: Vec<Value> = self
            .ordered_tools()
            .map(|t| {
                json!({
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["kind", "tool_call"],
                    "properties": {
                        "kind": {"const": "tool_call"},
                        "tool_call": {
                            "type": "object",
                            "additionalProperties": false,
                            "required": ["name", "arguments"],
                            "properties": {
                                "name": {"const": t.tool.name},
                                "arguments": embeddable(t.arguments.document()),
                            }
                        }
                    }
                })
            })
            .collect();
        branches.push(json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["kind", "patch"],
            "properties": {
                "kind": {"const": "final_patch"},
                "patch": embeddable(self.final_schema.document()),
            }
        }));
        let schema = if branches.len() == 1 {
            branches.pop().unwrap_or_default()
        } else {
            json!({"anyOf": branches})
        };
        ResponseSchema {
            name: "tool_loop_output".to_owned(),
            schema,
        }
    }
}

fn embeddable(schema: &Value) -> Value {
    fn has_ref(value: &Value) -> bool {
        match value {
            Value::Object(map) => {
                map.contains_key("$ref")
                    || map.contains_key("$dynamicRef")
                    || map.values().any(has_ref)
            }
            Value::Array(items) => items.iter().any(has_ref),
            _ => false,
        }
    }
    if has_ref(schema) {
        return json!({"type": "object"});
    }
    let mut schema = schema.clone();
    if let Value::Object(map) = &mut schema {
        map.remove("$schema");
        map.remove("$id");
    }
    schema
}

/// The next generation to request.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation<'a> {
    /// 1, 2, … within the round; a retry is the next attempt.
    pub logical_generation_attempt: u32,
    /// 0 before the first tool call; +1 after each tool result.
    pub tool_loop_round: u32,
    pub messages: &'a [ChatMessage],
    /// `None` when the source delivers the contract in the prompt.
    pub response_schema: Option<&'a ResponseSchema>,
}

/// What the runner does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Invoke this tool's source with `arguments` as its JSON body, then report the result
    /// with [`ToolLoop::tool_result`].
    CallTool {
        name: String,
        arguments: Value,
        source_ref: HashRef,
        arguments_schema_ref: HashRef,
        result_schema_ref: Option<HashRef>,
    },
    /// The node's final output; the caller accepts it into the working turn.
    Final(WorldPatch),
    /// The output was rejected and the corrective context appended: request the next
    /// generation.
    Retry,
    /// The node failed; the attempt fails.
    Failed(Failure),
}

/// A judged generation: what it was (for its source invocation and LLM call) and what next.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub model_output_kind: ModelOutputKind,
    /// The parsed ToolLoopOutput, if the reply parsed (an artifact of the LLM call).
    pub parsed: Option<Value>,
    /// Why the reply did not parse as JSON.
    pub parse_errors: Vec<String>,
    /// Why a parsed reply was refused.
    pub validation_errors: Vec<Problem>,
    pub step: Step,
}

/// One run of an `llm_tool_loop` node for one subject.
#[derive(Debug, Clone)]
pub struct ToolLoop {
    contract: Arc<NodeContract>,
    max_generation_attempts: u32,
    max_tool_calls: u32,
    messages: Vec<ChatMessage>,
    response_schema: Option<ResponseSchema>,
    round: u32,
    attempt: u32,
    tool_calls: u32,
    pending_tool: Option<String>,
    done: bool,
    /// The loop ended with a final patch (which the caller may still reject).
    final_given: bool,
}

/// A call on the loop that its state does not allow (a runner bug, reported not panicked).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoopError {
    #[error("no tool call is waiting for a result")]
    NoPendingTool,
    #[error("a tool call is waiting for its result")]
    ToolPending,
    #[error("the loop has finished")]
    Finished,
    #[error("there is no accepted final patch to reject")]
    NoFinalPatch,
}

impl ToolLoop {
    /// Starts the loop with the rendered prompt. With `prompt_only` delivery the contract is
    /// appended to the prompt as a system message instead of being sent as `response_format`.
    pub fn new(
        node: &LlmToolLoopNode,
        contract: Arc<NodeContract>,
        prompt: Vec<ChatMessage>,
        delivery: SchemaDelivery,
    ) -> ToolLoop {
        let schema = contract.response_schema();
        let mut messages = prompt;
        let response_schema = match delivery {
            SchemaDelivery::ResponseFormat => Some(schema),
            SchemaDelivery::PromptOnly => {
                messages.push(ChatMessage::system(format!(
                    "Reply with exactly one JSON object matching this JSON Schema, and nothing else:\n{}",
                    schema.schema
                )));
                None
            }
        };
        ToolLoop {
            contract,
            max_generation_attempts: node.max_generation_attempts,
            max_tool_calls: node.max_tool_calls,
            messages,
            response_schema,
            round: 0,
            attempt: 1,
            tool_calls: 0,
            pending_tool: None,
            done: false,
            final_given: false,
        }
    }

    pub fn generation(&self) -> Result<Generation<'_>, LoopError> {
        if self.done {
            return Err(LoopError::Finished);
        }
        if self.pending_tool.is_some() {
            return Err(LoopError::ToolPending);
        }
        Ok(Generation {
            logical_generation_attempt: self.attempt,
            tool_loop_round: self.round,
            messages: &self.messages,
            response_schema: self.response_schema.as_ref(),
        })
    }

    pub fn tool_calls_made(&self) -> u32 {
        self.tool_calls
    }

    pub fn messages(&self) -> &[ChatMessage] {
        &self.messages
    }

    /// Judges the assistant's raw text against the node's contract and the live working world.
    pub fn judge(&mut self, raw_text: &str, world: &WorldState) -> Result<Judged, LoopError> {
        self.generation()?;
        let text = normalize_assistant_text(raw_text);
        let (json, output) = match ToolLoopOutput::parse(&text) {
            Ok(parsed) => parsed,
            Err(refusal) => {
                let (parse_errors, validation_errors) = match &refusal {
                    OutputRefusal::NotJson(message) => (
                        vec![format!("the reply is not JSON: {message}")],
                        Vec::new(),
                    ),
                    OutputRefusal::Shape(problems) => (Vec::new(), problems.clone()),
                };
                return Ok(Judged {
                    model_output_kind: ModelOutputKind::Invalid,
                    parsed: None,
                    parse_errors,
                    validation_errors,
                    step: self.reject(&text, refusal.problems()),
                });
            }
        };
        match output {
            ToolLoopOutput::ToolCall { tool_call } => {
                Ok(self.judge_tool_call(&text, json, tool_call))
            }
            ToolLoopOutput::FinalPatch { patch } => {
                Ok(self.judge_patch(&text, json, &patch, world))
            }
        }
    }

    fn judge_tool_call(&mut self, text: &str, json: Value, call: ToolCall) -> Judged {
        let judged = |step, validation_errors, parsed| Judged {
            model_output_kind: ModelOutputKind::ToolCall,
            parsed,
            parse_errors: Vec::new(),
            validation_errors,
            step,
        };
        if self.tool_calls >= self.max_tool_calls {
            self.done = true;
            let failure = Failure::new(
                FailureClass::ModelOutputInvalid,
                format!(
                    "the model asked for another tool call after using all {} of max_tool_calls without a final patch",
                    self.max_tool_calls
                ),
            );
            return judged(Step::Failed(failure), Vec::new(), Some(json));
        }
        let Some(tool) = self.contract.tools.get(&call.name) else {
            let problems = vec![Problem::new(
                "/tool_call/name",
                format!(
                    "{:?} is not an available tool (available: {})",
                    call.name,
                    if self.contract.tool_order.is_empty() {
                        "none".to_owned()
                    } else {
                        self.contract.tool_order.join(", ")
                    }
                ),
            )];
            let step = self.reject(text, problems.clone());
            return judged(step, problems, Some(json));
        };
        let arguments = Value::Object(call.arguments);
        if let Err(problems) = tool.arguments.check(&arguments) {
            let problems: Vec<Problem> = problems
                .into_iter()
                .map(|p| p.under("/tool_call/arguments"))
                .collect();
            let step = self.reject(text, problems.clone());
            return judged(step, problems, Some(json));
        }
        let step = Step::CallTool {
            name: tool.tool.name.clone(),
            arguments,
            source_ref: tool.tool.source_ref.clone(),
            arguments_schema_ref: tool.tool.arguments_schema_ref.clone(),
            result_schema_ref: tool.tool.result_schema_ref.clone(),
        };
        self.messages.push(ChatMessage::assistant(text));
        self.tool_calls += 1;
        self.pending_tool = Some(call.name);
        judged(step, Vec::new(), Some(json))
    }

    fn judge_patch(
        &mut self,
        text: &str,
        json: Value,
        patch: &Value,
        world: &WorldState,
    ) -> Judged {
        let problems = match self.contract.final_schema.check(patch) {
            Err(problems) => problems,
            Ok(()) => match WorldPatch::from_json(patch) {
                Err(problems) => problems,
                Ok(parsed) => {
                    let problems = parsed.problems_against(world);
                    if problems.is_empty() {
                        self.done = true;
                        self.final_given = true;
                        return Judged {
                            model_output_kind: ModelOutputKind::FinalPatch,
                            parsed: Some(json),
                            parse_errors: Vec::new(),
                            validation_errors: Vec::new(),
                            step: Step::Final(parsed),
                        };
                    }
                    problems
                }
            },
        };
        let problems: Vec<Problem> = problems.into_iter().map(|p| p.under("/patch")).collect();
        let step = self.reject(text, problems.clone());
        Judged {
            model_output_kind: ModelOutputKind::Invalid,
            parsed: Some(json),
            parse_errors: Vec::new(),
            validation_errors: problems,
            step,
        }
    }

    /// A final patch that judged valid but no longer applies when its turn comes (subjects
    /// that ran concurrently changed the world first): the same retry lane.
    pub fn reject_final(
        &mut self,
        patch: &WorldPatch,
        problems: Vec<Problem>,
    ) -> Result<Step, LoopError> {
        if !self.done || self.pending_tool.is_some() || !self.final_given {
            return Err(LoopError::NoFinalPatch);
        }
        self.final_given = false;
        self.done = false;
        let text = serde_json::to_string(&json!({"kind": "final_patch", "patch": patch}))
            .unwrap_or_default();
        let problems = problems.into_iter().map(|p| p.under("/patch")).collect();
        Ok(self.reject(&text, problems))
    }

    /// The model-content failure path: retry with corrective context while attempts remain.
    fn reject(&mut self, text: &str, problems: Vec<Problem>) -> Step {
        if self.attempt >= self.max_generation_attempts {
            self.done = true;
            return Step::Failed(Failure::new(
                FailureClass::ModelOutputInvalid,
                format!(
                    "no valid output after {} generation attempt(s) (round {}): {}",
                    self.attempt,
                    self.round,
                    Problems(&problems)
                ),
            ));
        }
        self.messages.push(ChatMessage::assistant(text));
        self.messages
            .push(ChatMessage::user(corrective_message(&problems)));
        self.attempt += 1;
        Step::Retry
    }

    /// The called tool's validated result, appended to the context as JSON.
    pub fn tool_result(&mut self, result: &Value) -> Result<(), LoopError> {
        let name = self.pending_tool.take().ok_or(LoopError::NoPendingTool)?;
        self.messages.push(ChatMessage::user(
            json!({"tool_result": {"name": name, "result": result}}).to_string(),
        ));
        self.round += 1;
        self.attempt = 1;
        Ok(())
    }
}

/// The corrective context of a retry: what was wrong, where, and the shape to return.
pub fn corrective_message(problems: &[Problem]) -> String {
    let mut text =
        String::from("Your previous reply was not accepted, and nothing it asked for was done:\n");
    for problem in problems {
        text.push_str("- ");
        text.push_str(&problem.to_string());
        text.push('\n');
    }
    text.push_str(
        "Reply with exactly one JSON object: {\"kind\": \"tool_call\", \"tool_call\": {\"name\": …, \"arguments\": {…}}} \
         or {\"kind\": \"final_patch\", \"patch\": {\"narration\": …, \"effects\": […]}}.",
    );
    text
}
