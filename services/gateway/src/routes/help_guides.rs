//! CogniRelay's guide surfaces beside its help index: `GET /v1/help/hooks` (what to call at
//! each point of an agent's loop), `GET /v1/help/topics/{id}` and `GET /v1/help/errors/{code}`,
//! in the original's shapes and ids, written for what Noema serves. Each operation a guide
//! names is a tool of the tool table, listed as the original lists it (`"VERB /path"`, then
//! the tool), so a guide cannot point at a route this build lacks. An id the guides do not
//! have is the original's 400 `{"error": {"code": "validation", …}}` naming the allowed ones.

use axum::extract::Path;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use noema_core::ErrorCode;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::value::RawValue;

use crate::mcp;
use crate::reply::FastApiJson;
use crate::route::{OperationDoc, Reply, ResponseDoc, Schemas};

/// One point of an agent's loop and what to call there.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Hook {
    pub id: &'static str,
    pub purpose: &'static str,
    pub when_to_use: &'static [&'static str],
    pub read_operations: Vec<String>,
    pub write_operations: Vec<String>,
    /// Only on `pre_compaction_or_handoff`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_operations_for_real_handoff: Option<Vec<String>>,
    /// A request body the write (or else the read) operation accepts as it is.
    #[schemars(with = "serde_json::Value")]
    pub minimal_payload: &'static RawValue,
    pub common_mistakes: &'static [&'static str],
    pub correction_hints: &'static [&'static str],
}

/// `GET /v1/help/hooks`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Hooks {
    pub hooks: Vec<Hook>,
}

/// One topic's guide.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Topic {
    /// `topic`.
    pub kind: &'static str,
    pub id: &'static str,
    pub purpose: &'static str,
    pub when_to_use: &'static [&'static str],
    pub read_operations: Vec<String>,
    pub write_operations: Vec<String>,
    /// A request body the write (or else the read) operation accepts as it is; for
    /// `last-mile-adapter`, what the hooks are set up with.
    #[schemars(with = "serde_json::Value")]
    pub minimal_payload: &'static RawValue,
    pub common_mistakes: &'static [&'static str],
    pub correction_hints: &'static [&'static str],
}

/// One error code's guide.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ErrorGuide {
    /// `error`.
    pub kind: &'static str,
    pub id: &'static str,
    pub purpose: &'static str,
    pub when_to_use: &'static [&'static str],
    pub common_mistakes: &'static [&'static str],
    pub correction_hints: &'static [&'static str],
}

// Example bodies: a thread whose capsule the post_prompt upsert creates; each is accepted as
// it is by the operation it illustrates (tests/tests/mcp.rs sends them).

const READ_STARTUP: &str =
    r#"{"subject_kind":"thread","subject_id":"release-42","view":"startup","allow_fallback":true}"#;

const RETRIEVE: &str = r#"{"task":"Finish the release notes for 4.2","subject_kind":"thread","subject_id":"release-42","continuity_mode":"auto"}"#;

const UPSERT: &str = r#"{"subject_kind":"thread","subject_id":"release-42","capsule":{"subject_kind":"thread","subject_id":"release-42","updated_at":"2026-05-04T09:30:00Z","verified_at":"2026-05-04T09:30:00Z","source":{"producer":"my-agent","update_reason":"interaction_boundary","inputs":[]},"continuity":{"top_priorities":["Ship the 4.2 release notes"],"active_concerns":[],"active_constraints":[],"open_loops":["Changelog review"],"stance_summary":"Drafting the 4.2 notes; the changelog review comes next.","drift_signals":[]},"confidence":{"continuity":0.8,"relationship_model":0.0},"metadata":{"interaction_boundary_kind":"task_switch"}}}"#;

const UPSERT_SESSION_END: &str = r#"{"subject_kind":"thread","subject_id":"release-42","capsule":{"subject_kind":"thread","subject_id":"release-42","updated_at":"2026-05-04T18:00:00Z","verified_at":"2026-05-04T18:00:00Z","source":{"producer":"my-agent","update_reason":"pre_compaction","inputs":[]},"continuity":{"top_priorities":["Ship the 4.2 release notes"],"active_concerns":[],"active_constraints":[],"open_loops":["Changelog review"],"stance_summary":"Drafting the 4.2 notes; the changelog review comes next.","drift_signals":[]},"confidence":{"continuity":0.8,"relationship_model":0.0}},"session_end_snapshot":{"open_loops":["Changelog review"],"top_priorities":["Ship the 4.2 release notes"],"active_constraints":["No release before the review"],"stance_summary":"Notes drafted; waiting for the changelog review.","negative_decisions":[],"session_trajectory":["Drafted the notes"],"rationale_entries":[]}}"#;

const ADAPTER: &str = r#"{"package":"cognirelay==1.4.15","hooks":["cognirelay_retrieval_hook.py","cognirelay_continuity_save_hook.py"],"flow":["facts","template","agent-authors-semantic-fields","dry-run","write","readback"]}"#;

/// `text` as a JSON value written as it is (its keys in their order); the constants above
/// are checked by a test, and one that did not parse would read as null.
fn raw(text: &'static str) -> &'static RawValue {
    serde_json::from_str(text).unwrap_or(RawValue::NULL)
}

/// `"VERB /path"` and the tool, for each of `tools` the tool table has.
fn operations(tools: &[&str]) -> Vec<String> {
    let table = mcp::tools::table();
    tools
        .iter()
        .filter_map(|name| table.get(name))
        .flat_map(|spec| {
            [
                format!("{} {}", spec.verb.as_str(), spec.path),
                spec.name().to_owned(),
            ]
        })
        .collect()
}

const SESSION_END_FIELDS: &str = "Only open_loops, top_priorities, active_constraints, \
     stance_summary, negative_decisions, session_trajectory and rationale_entries go in \
     session_end_snapshot.";

/// A hook as declared: its operations by tool name.
struct HookDef {
    id: &'static str,
    purpose: &'static str,
    when_to_use: &'static [&'static str],
    reads: &'static [&'static str],
    writes: &'static [&'static str],
    handoff: Option<&'static [&'static str]>,
    payload: &'static str,
    mistakes: &'static [&'static str],
    hints: &'static [&'static str],
}

const HOOKS: [HookDef; 4] = [
    HookDef {
        id: "startup",
        purpose: "Get oriented again when a session starts or the agent comes back.",
        when_to_use: &["Before the first step of a session, to read where the subject stood."],
        reads: &["continuity.read"],
        writes: &[],
        handoff: None,
        payload: READ_STARTUP,
        mistakes: &["Naming a hook that is not one of the four ids listed here."],
        hints: &["Use the id startup, and read with view startup."],
    },
    HookDef {
        id: "pre_prompt",
        purpose: "Fetch the context a large work step needs, within a token budget.",
        when_to_use: &["Right before a large work step on a subject."],
        reads: &["context.retrieve"],
        writes: &[],
        handoff: None,
        payload: RETRIEVE,
        mistakes: &[
            "Sending continuity.read's fields (view, allow_fallback) to context.retrieve.",
            "Storing the prompt or the retrieved text anywhere: this hook only reads.",
        ],
        hints: &[
            "Send task, subject_kind, subject_id and continuity_mode; required answers 404 when no capsule of the subject can be used (none, or too old), auto answers without it.",
            "Write nothing here; durable changes belong to post_prompt.",
        ],
    },
    HookDef {
        id: "post_prompt",
        purpose: "Store what a finished work step changed in the subject's orientation.",
        when_to_use: &["After a work step that changed priorities, open loops or stance."],
        reads: &[],
        writes: &["continuity.upsert"],
        handoff: None,
        payload: UPSERT,
        mistakes: &[
            "Using the capsule as a log of prompts and answers.",
            "An interaction_boundary update without metadata.interaction_boundary_kind (400).",
        ],
        hints: &[
            "Upsert only orientation that should outlive the session.",
            "Name the boundary kind (person_switch, thread_switch, task_switch, public_reply, manual_checkpoint).",
        ],
    },
    HookDef {
        id: "pre_compaction_or_handoff",
        purpose: "Save a bounded checkpoint just before context is lost or work passes to another agent.",
        when_to_use: &["Before compacting the context window, or before a real handoff to a peer."],
        reads: &[],
        writes: &["continuity.upsert"],
        handoff: Some(&["coordination.handoff_create"]),
        payload: UPSERT_SESSION_END,
        mistakes: &[
            "Spelling the id pre_compaction_handoff.",
            "Putting other fields in session_end_snapshot.",
            "Creating the handoff before the checkpoint is stored.",
        ],
        hints: &[
            "Use the id pre_compaction_or_handoff.",
            SESSION_END_FIELDS,
            "Store the checkpoint first; the handoff carries the stored capsule's constraints.",
        ],
    },
];

impl HookDef {
    fn guide(&self) -> Hook {
        Hook {
            id: self.id,
            purpose: self.purpose,
            when_to_use: self.when_to_use,
            read_operations: operations(self.reads),
            write_operations: operations(self.writes),
            additional_operations_for_real_handoff: self.handoff.map(operations),
            minimal_payload: raw(self.payload),
            common_mistakes: self.mistakes,
            correction_hints: self.hints,
        }
    }
}

fn hooks() -> Hooks {
    Hooks {
        hooks: HOOKS.iter().map(HookDef::guide).collect(),
    }
}

/// A topic as declared: its operations by tool name.
struct TopicDef {
    id: &'static str,
    purpose: &'static str,
    when_to_use: &'static [&'static str],
    reads: &'static [&'static str],
    writes: &'static [&'static str],
    payload: &'static str,
    mistakes: &'static [&'static str],
    hints: &'static [&'static str],
}

const TOPICS: [TopicDef; 4] = [
    TopicDef {
        id: "continuity.read.startup_view",
        purpose: "What the startup view of a continuity read returns, and when to ask for it.",
        when_to_use: &[
            "When a session starts and needs orientation rather than the whole capsule.",
        ],
        reads: &["continuity.read"],
        writes: &[],
        payload: READ_STARTUP,
        mistakes: &[
            "Sending view: startup_view; the value is startup.",
            "Turning allow_fallback off when the last good snapshot would do.",
        ],
        hints: &[
            "Send view: startup.",
            "Keep allow_fallback true unless only the active capsule will do.",
        ],
    },
    TopicDef {
        id: "continuity.read.trust_signals",
        purpose: "How far to rely on a capsule: the trust signals every continuity read carries.",
        when_to_use: &[
            "When deciding whether a read capsule is fresh, complete and conflict-free enough to act on.",
        ],
        reads: &["continuity.read"],
        writes: &[],
        payload: READ_STARTUP,
        mistakes: &[
            "Asking for trust signals in the request: they come with every read.",
            "Acting on a degraded or conflicted capsule as if it were healthy.",
        ],
        hints: &[
            "Read trust_signals from the answer.",
            "On degraded signals, verify first (continuity.revalidate) or proceed with care.",
        ],
    },
    TopicDef {
        id: "continuity.upsert.session_end_snapshot",
        purpose: "Closing a session with session_end_snapshot: a few startup fields merged into the capsule on upsert.",
        when_to_use: &["At the end of a session, to refresh what the next startup read will show."],
        reads: &["continuity.read"],
        writes: &["continuity.upsert"],
        payload: UPSERT_SESSION_END,
        mistakes: &[
            "Sending session_end_snapshot without the capsule it applies to.",
            "Putting other fields in session_end_snapshot.",
        ],
        hints: &[
            "Send the capsule and the snapshot together.",
            SESSION_END_FIELDS,
        ],
    },
    TopicDef {
        id: "last-mile-adapter",
        purpose: "CogniRelay's adapter hooks (its PyPI package's retrieval and continuity-save hooks) run unchanged against Noema: the agent writes the meaning, the hooks and Noema validate, store and read it back.",
        when_to_use: &[
            "When wiring an agent runtime to Noema with CogniRelay's own hooks instead of custom code.",
        ],
        reads: &["continuity.read", "context.retrieve"],
        writes: &["continuity.upsert"],
        payload: ADAPTER,
        mistakes: &[
            "Expecting the hooks or Noema to infer stance, priorities or open loops.",
            "Writing through the retrieval hook, which only reads.",
        ],
        hints: &[
            "Let the agent author the semantic fields; the save hook's dry-run shows what would be stored.",
            "Point the hooks' base URL and token at this instance.",
        ],
    },
];

impl TopicDef {
    fn guide(&self) -> Topic {
        Topic {
            kind: "topic",
            id: self.id,
            purpose: self.purpose,
            when_to_use: self.when_to_use,
            read_operations: operations(self.reads),
            write_operations: operations(self.writes),
            minimal_payload: raw(self.payload),
            common_mistakes: self.mistakes,
            correction_hints: self.hints,
        }
    }
}

/// What Noema's own error code `code` means, and what to do about it.
fn noema_code(code: ErrorCode) -> ErrorGuide {
    let (purpose, when, mistake, hint): (&str, &[&str], &[&str], &[&str]) = match code {
        ErrorCode::InvalidArgument => (
            "The request was refused as it is (400).",
            &["A 400 whose code is invalid_argument."],
            &["Sending the same request again unchanged."],
            &["Fix the value the detail names; GET /v1/help/limits lists limits Noema enforces."],
        ),
        ErrorCode::NotFound => (
            "Nothing by that name, or nothing the caller's tenant may see (404).",
            &["A 404 whose code is not_found."],
            &["Assuming the thing exists in another tenant's view."],
            &["Check the id, and that the token acts in the tenant that holds it."],
        ),
        ErrorCode::AlreadyExists => (
            "A conflicting write: the name is taken or the version moved (409).",
            &["A 409 whose code is already_exists."],
            &["Retrying with the old version or the same key."],
            &["Read the current state, then write again against its version."],
        ),
        ErrorCode::FailedPrecondition => (
            "The request is well-formed but the current state refuses it (422).",
            &["A 422 whose code is failed_precondition."],
            &["Treating it as a malformed request."],
            &["Change the state the detail names (or the request) before retrying."],
        ),
        ErrorCode::Unauthenticated => (
            "No valid token: missing, unknown, revoked or expired (401).",
            &["A 401."],
            &["Retrying with the same token."],
            &["Send Authorization: Bearer <token> with a live token."],
        ),
        ErrorCode::PermissionDenied => (
            "The token lacks the route's scope or namespace (403).",
            &["A 403 whose code is permission_denied."],
            &["Retrying with the same token."],
            &["GET /v1/manifest names each route's scope; ask the owner for a token that has it."],
        ),
        ErrorCode::Unavailable => (
            "A service cannot answer now, or ledger writes are halted (STOPPED) (503).",
            &["A 503 whose code is unavailable."],
            &["Retrying at once in a tight loop."],
            &["Retry later with backoff; a STOPPED ledger takes writes again when resumed."],
        ),
        ErrorCode::ResourceExhausted => (
            "A limit was reached, such as a rate or a pending count (429).",
            &["A 429 whose code is resource_exhausted."],
            &["Retrying before the time the answer gives."],
            &["Wait for Retry-After when it is given, then retry."],
        ),
        ErrorCode::Internal => (
            "Noema failed; the cause is in its logs, not in the answer (500).",
            &["A 500 whose code is internal."],
            &["Changing a request that was valid."],
            &["Retry once; if it persists, report it with the time and route."],
        ),
    };
    ErrorGuide {
        kind: "error",
        id: code.as_str(),
        purpose,
        when_to_use: when,
        common_mistakes: mistake,
        correction_hints: hint,
    }
}

/// The original's error guide ids, in Noema's words.
const OWN_ERRORS: [ErrorGuide; 3] = [
    ErrorGuide {
        kind: "error",
        id: "validation",
        purpose: "Correcting a request refused for its content.",
        when_to_use: &[
            "A 400 or 422 whose body names the field at fault (FastAPI's detail list, or error.validation_hints on these help routes).",
        ],
        common_mistakes: &["Guessing the fix from the message text."],
        correction_hints: &[
            "Correct the field that loc or validation_hints[].field names, within the limit or allowed_values given.",
        ],
    },
    ErrorGuide {
        kind: "error",
        id: "tool_not_found",
        purpose: "An MCP tools/call naming a tool this token's tools/list does not show.",
        when_to_use: &["A JSON-RPC error Unknown tool: <name> from POST /v1/mcp."],
        common_mistakes: &[
            "Assuming every tool of /v1/discovery/tools is callable with any token.",
        ],
        correction_hints: &[
            "Call tools/list with the same token; a tool whose scope the token lacks is not listed.",
        ],
    },
    ErrorGuide {
        kind: "error",
        id: "unknown_help_topic",
        purpose: "A help route given an id it does not have.",
        when_to_use: &["A 400 from /v1/help/… whose error.validation_hints lists allowed_values."],
        common_mistakes: &["Expecting this code in the answer: the answer's code is validation."],
        correction_hints: &[
            "Use one of allowed_values; GET /v1/help lists every topic, hook and error id.",
        ],
    },
];

/// Every error guide: the original's ids, then Noema's codes.
fn errors() -> impl Iterator<Item = ErrorGuide> {
    OWN_ERRORS
        .into_iter()
        .chain(ErrorCode::ALL.into_iter().map(noema_code))
}

/// The topic ids, in order (the help index's `non_tool_topics`).
pub fn topic_ids() -> Vec<&'static str> {
    TOPICS.iter().map(|t| t.id).collect()
}

/// The hook ids, in order.
pub fn hook_ids() -> Vec<&'static str> {
    HOOKS.iter().map(|h| h.id).collect()
}

/// The error guide ids, in order.
pub fn error_ids() -> Vec<&'static str> {
    errors().map(|e| e.id).collect()
}

/// The original's `validation_hints` item.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ValidationHint {
    pub field: &'static str,
    /// `request.path`.
    pub area: &'static str,
    /// `unsupported_value`.
    pub reason: &'static str,
    /// Always null.
    pub limit: Option<u64>,
    pub allowed_values: Vec<&'static str>,
    pub correction_hint: String,
}

/// `{code: "validation", detail, validation_hints}`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ValidationDetail {
    pub code: &'static str,
    pub detail: &'static str,
    pub validation_hints: Vec<ValidationHint>,
}

/// The original's 400 for an id a help route does not have.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ValidationError {
    pub error: ValidationDetail,
}

impl ValidationError {
    fn unsupported(field: &'static str, detail: &'static str, allowed: Vec<&'static str>) -> Self {
        let correction_hint = format!("Use one of: {}.", allowed.join(", "));
        Self::unsupported_see(field, detail, allowed, correction_hint)
    }

    /// The same refusal with the original's hint naming where the ids are listed.
    pub fn unsupported_see(
        field: &'static str,
        detail: &'static str,
        allowed: Vec<&'static str>,
        correction_hint: String,
    ) -> Self {
        ValidationError {
            error: ValidationDetail {
                code: "validation",
                detail,
                validation_hints: vec![ValidationHint {
                    field,
                    area: "request.path",
                    reason: "unsupported_value",
                    limit: None,
                    allowed_values: allowed,
                    correction_hint,
                }],
            },
        }
    }
}

/// A guide, or the original's 400 naming the ids there are.
pub enum Lookup<T> {
    Found(T),
    Unsupported(ValidationError),
}

impl<T: Serialize> IntoResponse for Lookup<T> {
    fn into_response(self) -> Response {
        match self {
            Lookup::Found(body) => FastApiJson(body).into_response(),
            Lookup::Unsupported(body) => match serde_json::to_vec(&body) {
                Ok(bytes) => (
                    StatusCode::BAD_REQUEST,
                    [(CONTENT_TYPE, "application/json")],
                    bytes,
                )
                    .into_response(),
                Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
            },
        }
    }
}

impl<T: JsonSchema> Reply for Lookup<T> {
    fn document(doc: &mut OperationDoc, schemas: &mut Schemas) {
        doc.json_response::<T>(schemas, 200, "OK");
        let schema = schemas
            .responses
            .subschema_for::<ValidationError>()
            .to_value();
        doc.responses.push(ResponseDoc {
            status: 400,
            description: "Unsupported id: the ones there are in allowed_values",
            content: Some(("application/json", schema)),
        });
    }
}

pub async fn get_hooks() -> FastApiJson<Hooks> {
    FastApiJson(hooks())
}

pub async fn get_topic(Path(id): Path<String>) -> Lookup<Topic> {
    match TOPICS.iter().find(|t| t.id == id) {
        Some(topic) => Lookup::Found(topic.guide()),
        None => Lookup::Unsupported(ValidationError::unsupported(
            "id",
            "Unsupported topic id.",
            topic_ids(),
        )),
    }
}

pub async fn get_error(Path(code): Path<String>) -> Lookup<ErrorGuide> {
    match errors().find(|e| e.id == code) {
        Some(guide) => Lookup::Found(guide),
        None => Lookup::Unsupported(ValidationError::unsupported(
            "code",
            "Unsupported error code.",
            error_ids(),
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_example_parses_and_every_operation_is_a_served_tool() {
        for text in [READ_STARTUP, RETRIEVE, UPSERT, UPSERT_SESSION_END, ADAPTER] {
            serde_json::from_str::<&RawValue>(text).unwrap();
        }
        let table = mcp::tools::table();
        let named = |ops: &[String]| {
            for pair in ops.chunks(2) {
                let spec = table.get(&pair[1]).unwrap();
                assert_eq!(pair[0], format!("{} {}", spec.verb.as_str(), spec.path));
            }
        };
        for hook in &hooks().hooks {
            assert!(!(hook.read_operations.is_empty() && hook.write_operations.is_empty()));
            named(&hook.read_operations);
            named(&hook.write_operations);
        }
        assert_eq!(
            hooks().hooks[3].additional_operations_for_real_handoff,
            Some(vec![
                "POST /v1/coordination/handoff/create".to_owned(),
                "coordination.handoff_create".to_owned()
            ])
        );
        for topic in TOPICS.iter().map(TopicDef::guide) {
            named(&topic.read_operations);
            named(&topic.write_operations);
        }
    }

    #[test]
    fn ids_are_the_originals_where_noema_has_the_concept() {
        assert_eq!(
            hook_ids(),
            [
                "startup",
                "pre_prompt",
                "post_prompt",
                "pre_compaction_or_handoff"
            ]
        );
        assert_eq!(
            topic_ids(),
            [
                "continuity.read.startup_view",
                "continuity.read.trust_signals",
                "continuity.upsert.session_end_snapshot",
                "last-mile-adapter"
            ]
        );
        assert_eq!(
            error_ids()[..3],
            ["validation", "tool_not_found", "unknown_help_topic"]
        );
    }

    fn text<T: Serialize>(value: &T) -> String {
        serde_json::to_string(value).unwrap()
    }

    #[test]
    fn bodies_have_the_originals_key_order() {
        // CogniRelay 1.4.15's key order (its texts are its own).
        let hook = text(&hooks().hooks[3]);
        let keys = [
            "\"id\"",
            "\"purpose\"",
            "\"when_to_use\"",
            "\"read_operations\"",
            "\"write_operations\"",
            "\"additional_operations_for_real_handoff\"",
            "\"minimal_payload\"",
            "\"common_mistakes\"",
            "\"correction_hints\"",
        ];
        let at: Vec<usize> = keys.iter().map(|k| hook.find(k).unwrap()).collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{hook}");
        assert!(!text(&hooks().hooks[0]).contains("additional_operations"));
        assert!(text(&hooks()).starts_with(r#"{"hooks":[{"id":"startup","#));
        assert!(
            text(&TOPICS[0].guide())
                .starts_with(r#"{"kind":"topic","id":"continuity.read.startup_view","purpose":"#)
        );
        let topic = text(&TOPICS[0].guide());
        assert!(topic.contains(r#","read_operations":["POST /v1/continuity/read","continuity.read"],"write_operations":[],"minimal_payload":{"subject_kind":"thread","subject_id":"release-42","view":"startup","allow_fallback":true},"common_mistakes":["#), "{topic}");
        let error = text(&OWN_ERRORS[0]);
        assert!(error.starts_with(r#"{"kind":"error","id":"validation","purpose":"#));
        let at: Vec<usize> = [
            "\"when_to_use\"",
            "\"common_mistakes\"",
            "\"correction_hints\"",
        ]
        .iter()
        .map(|k| error.find(k).unwrap())
        .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{error}");
    }

    #[test]
    fn an_unknown_id_is_the_originals_validation_error() {
        // Recorded from CogniRelay 1.4.15 (`GET /v1/help/errors/nope`), with its codes.
        let body = ValidationError::unsupported(
            "code",
            "Unsupported error code.",
            vec!["validation", "tool_not_found", "unknown_help_topic"],
        );
        assert_eq!(
            text(&body),
            r#"{"error":{"code":"validation","detail":"Unsupported error code.","validation_hints":[{"field":"code","area":"request.path","reason":"unsupported_value","limit":null,"allowed_values":["validation","tool_not_found","unknown_help_topic"],"correction_hint":"Use one of: validation, tool_not_found, unknown_help_topic."}]}}"#
        );
        // `GET /v1/help/topics/nope`, with its topic ids (Noema serves the same four).
        let body = ValidationError::unsupported("id", "Unsupported topic id.", topic_ids());
        assert_eq!(
            text(&body),
            r#"{"error":{"code":"validation","detail":"Unsupported topic id.","validation_hints":[{"field":"id","area":"request.path","reason":"unsupported_value","limit":null,"allowed_values":["continuity.read.startup_view","continuity.read.trust_signals","continuity.upsert.session_end_snapshot","last-mile-adapter"],"correction_hint":"Use one of: continuity.read.startup_view, continuity.read.trust_signals, continuity.upsert.session_end_snapshot, last-mile-adapter."}]}}"#
        );
    }
}
