//! CogniRelay's help surfaces (`/v1/help`, its onboarding and validation-limit views),
//! answering for what Noema serves: the tool help comes from the MCP tool table, the
//! endpoint lists from the route table; the validation-limit table is `help_limits`, the
//! hook, topic and error guides are `help_guides`. Unauthenticated, as in the
//! original; an unknown topic is a 400 naming the known ones (CogniRelay's error shape).

use axum::extract::{Path, State};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

use crate::GatewayState;
use crate::error::ErrorStyle;
use crate::key_order::{KeyOrders, Ordered};
use crate::mcp;
use crate::reply::FastApiJson;
use crate::route::{Route, Routes, Verb};

use super::discovery;
use super::help_guides::{self, Lookup, ValidationError};
use super::help_limits;

const HELP: Routes = Routes::new("help", ErrorStyle::CogniRelay, "");

/// Onboarding sections, in reading order: id, title, purpose, body, bullets.
const SECTIONS: [(&str, &str, &str, &str, &[&str]); 4] = [
    (
        "bootstrap",
        "Bootstrap",
        "The first calls of a new agent runtime",
        "Read `GET /v1/discovery` and `GET /v1/capabilities` to learn what this instance \
         serves, then either call the REST routes `GET /v1/manifest` lists or connect an MCP \
         client to `POST /v1/mcp` with the same bearer token.",
        &[
            "Every route except the discovery and help surfaces needs `Authorization: Bearer <token>`.",
            "The owner token is in <data_dir>/owner.token; issue narrower tokens with security.tokens_issue.",
            "Unknown keys in /v1/capabilities are to be tolerated.",
        ],
    ),
    (
        "auth",
        "Tokens and scopes",
        "What a token may call",
        "A token carries scopes: Noema's `<service>:<read|write|admin>` and the original \
         systems' names (`diary:write`, `crypto:sign`, `read:files`, …). `/v1/manifest` names \
         the scope of each route; `/v1/governance/policy` lists the token templates.",
        &[
            "401: missing, unknown, revoked or expired token.",
            "403: the token lacks the route's scope.",
            "admin:peers (the owner) passes every scope check.",
        ],
    ),
    (
        "mcp",
        "MCP",
        "Using the tools over MCP",
        "`POST /v1/mcp` speaks MCP over streamable HTTP without sessions. `tools/list` (paged \
         with `nextCursor`) shows the tools this token may call; each tool runs one REST route \
         with the same checks, so a failing call is a result with `isError: true` carrying the \
         route's error body.",
        &[
            "Arguments: the route's path and query parameters and its JSON body's fields.",
            "structuredContent is the route's JSON answer (an array answer as {items}).",
            "A tool the token may not call is reported as an unknown tool.",
        ],
    ),
    (
        "errors",
        "Errors",
        "Reading failures",
        "Errors carry a stable machine code; decide on it, never on the message text. Each \
         route answers in its system's shape: Noema's `{code, error}`, MoltNet's problem \
         details, CogniRelay's `{detail}`, open-cognition's `{code, error, hint}`.",
        &[
            "Codes: invalid_argument, not_found, already_exists, failed_precondition, unauthenticated, permission_denied, unavailable, resource_exhausted, internal.",
            "503 with code unavailable and a STOPPED message: ledger writes are halted.",
        ],
    ),
];

fn help_paths() -> Vec<String> {
    discovery::served_routes()
        .iter()
        .filter(|r| r.path.starts_with("/v1/help"))
        .map(|r| format!("{} {}", r.verb.as_str(), r.path))
        .collect()
}

/// The help index.
pub fn index() -> Value {
    let tools: Vec<&str> = mcp::tools::table().tools.iter().map(|t| t.name()).collect();
    json!({
        "errors": help_guides::error_ids(),
        "hook_ids": help_guides::hook_ids(),
        "http_endpoints": help_paths(),
        "kind": "help_index",
        "mcp_methods": mcp::METHODS,
        "non_tool_topics": help_guides::topic_ids(),
        "tool_topics": tools,
    })
}

async fn get_index() -> FastApiJson<Ordered> {
    const ORDER: KeyOrders = &[(
        "",
        &[
            "http_endpoints",
            "mcp_methods",
            "tool_topics",
            "non_tool_topics",
            "hook_ids",
            "errors",
        ],
    )];
    FastApiJson(Ordered {
        value: index(),
        orders: ORDER,
    })
}

/// `{http, mcp_tool}` for the help route at `path` (its MCP tool, if it declares one).
fn help_route(path: &str) -> Value {
    let tool = discovery::served_routes()
        .iter()
        .find(|r| r.verb == Verb::Get && r.path == path)
        .and_then(|r| r.tool);
    json!({"http": format!("GET {path}"), "mcp_tool": tool})
}

/// How to use one tool.
/// The route that describes one MCP tool by name.
pub const TOOL_PATH: &str = "/v1/help/tools/{name}";

async fn get_tool(Path(name): Path<String>) -> Lookup<Value> {
    let table = mcp::tools::table();
    let Some(spec) = table.get(&name) else {
        return Lookup::Unsupported(ValidationError::unsupported_see(
            "name",
            "Unsupported tool name.",
            table.tools.iter().map(|t| t.name()).collect(),
            "Use one of the tool names returned by GET /v1/help.".to_owned(),
        ));
    };
    Lookup::Found(json!({
        "http": format!("{} {}", spec.verb.as_str(), spec.path),
        "id": spec.name(),
        "input_schema": spec.tool.input_schema.as_ref(),
        "kind": "tool",
        "purpose": spec.description(),
        "scope": spec.scope,
    }))
}

async fn onboarding() -> FastApiJson<Value> {
    FastApiJson(json!({
        "kind": "onboarding_index",
        "recommended_first_section": "bootstrap",
        "sections": SECTIONS.iter().map(|(id, title, purpose, _, _)| json!({
            "http_path": format!("/v1/help/onboarding/sections/{id}"),
            "id": id,
            "purpose": purpose,
            "title": title,
        })).collect::<Vec<_>>(),
    }))
}

async fn bootstrap() -> FastApiJson<Ordered> {
    const ORDER: KeyOrders = &[
        (
            "",
            &[
                "kind",
                "recommended_first_section",
                "startup_route",
                "retrieval_route",
                "help_routes",
                "discover_more",
                "next_sections",
                "warnings",
            ],
        ),
        ("/startup_route", &["http", "mcp_tool", "params"]),
        ("/startup_route/params", &["view", "allow_fallback"]),
        ("/retrieval_route", &["http", "mcp_tool", "when_to_use"]),
        (
            "/help_routes",
            &["tools", "topics", "hooks", "errors", "limits"],
        ),
        ("/help_routes/tools", &["http", "mcp_tool"]),
        ("/help_routes/topics", &["http", "mcp_tool"]),
        ("/help_routes/hooks", &["http", "mcp_tool"]),
        ("/help_routes/errors", &["http", "mcp_tool"]),
        ("/help_routes/limits", &["http", "mcp_tool"]),
        ("/discover_more", &["http", "mcp_tool"]),
    ];
    FastApiJson(Ordered {
        value: json!({
            "discover_more": help_route("/v1/help/onboarding"),
            "first_calls": ["GET /v1/discovery", "GET /v1/capabilities", "GET /v1/manifest"],
            "help_routes": {
                "errors": help_route("/v1/help/errors/{code}"),
                "hooks": help_route("/v1/help/hooks"),
                "limits": help_route("/v1/help/limits"),
                "tools": help_route(TOOL_PATH),
                "topics": help_route("/v1/help/topics/{id}"),
            },
            "startup_route": {
                "http": "POST /v1/continuity/read",
                "mcp_tool": "continuity.read",
                "params": {"view": "startup", "allow_fallback": true},
            },
            "retrieval_route": {
                "http": "POST /v1/context/retrieve",
                "mcp_tool": "context.retrieve",
                "when_to_use": "when the task needs more than the startup view: a token-budgeted bundle of memory, continuity and tasks",
            },
            "kind": "onboarding_bootstrap",
            "mcp": {"endpoint": format!("POST {}", mcp::PATH), "protocol_version": mcp::handshake_version()},
            "next_sections": SECTIONS.iter().skip(1).map(|s| s.0).collect::<Vec<_>>(),
            "recommended_first_section": "bootstrap",
            "warnings": [
                "Do not preload every help section; look up a tool or limit when needed.",
                "Decide on error codes, never on message text.",
            ],
        }),
        orders: ORDER,
    })
}

async fn section(Path(id): Path<String>) -> Lookup<Value> {
    let Some((id, title, _, body, bullets)) = SECTIONS.iter().find(|s| s.0 == id) else {
        return Lookup::Unsupported(ValidationError::unsupported_see(
            "id",
            "Unsupported onboarding section id.",
            SECTIONS.iter().map(|s| s.0).collect(),
            "Use one of the onboarding section ids returned by GET /v1/help/onboarding.".to_owned(),
        ));
    };
    Lookup::Found(json!({
        "body_md": body,
        "bullets": bullets,
        "format": "markdown_and_bullets",
        "id": id,
        "kind": "onboarding_section",
        "title": title,
    }))
}

async fn limits_index() -> FastApiJson<Ordered> {
    FastApiJson(Ordered {
        value: json!({
            "field_paths": help_limits::field_paths(),
            "groups": help_limits::groups(),
            "kind": "validation_limits_index",
        }),
        orders: &[
            ("", &["kind", "groups", "field_paths"]),
            ("/groups/*", &["id", "title", "purpose", "field_paths"]),
        ],
    })
}

/// `{kind, limit}`, in the original's order.
#[derive(Serialize, JsonSchema)]
struct LimitAnswer {
    kind: &'static str,
    #[schemars(with = "Value")]
    limit: help_limits::Entry,
}

async fn limit(
    State(state): State<GatewayState>,
    Path(field_path): Path<String>,
) -> Lookup<LimitAnswer> {
    find_limit(help_limits::table(state.max_body_bytes), &field_path)
}

/// The limit at `field_path` in `table`, or the original's 400 listing every path.
fn find_limit(mut table: Vec<help_limits::Entry>, field_path: &str) -> Lookup<LimitAnswer> {
    let Some(at) = table.iter().position(|l| l.field_path() == field_path) else {
        return Lookup::Unsupported(ValidationError::unsupported_see(
            "field_path",
            "Unsupported validation limit field path.",
            table.iter().map(help_limits::Entry::field_path).collect(),
            "Use one of the field_path values returned by GET /v1/help/limits.".to_owned(),
        ));
    };
    Lookup::Found(LimitAnswer {
        kind: "validation_limit",
        limit: table.swap_remove(at),
    })
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    let r = HELP;
    vec![
        r.route(
            Verb::Get,
            "/v1/help",
            "help",
            "CogniRelay: help index (tools, topics, endpoints)",
            get_index,
        )
        .public()
        .tool(
            "system.help",
            "Help index: tools, onboarding topics, error codes",
        ),
        r.route(
            Verb::Get,
            TOOL_PATH,
            "helpTool",
            "CogniRelay: how to use one tool",
            get_tool,
        )
        .public()
        .tool(
            "system.tool_usage",
            "How to use tool `name`: route, scope, input schema",
        ),
        r.route(
            Verb::Get,
            "/v1/help/topics/{id}",
            "helpTopic",
            "CogniRelay: guide to one topic",
            help_guides::get_topic,
        )
        .public()
        .param(
            "id",
            json!({"type": "string", "enum": help_guides::topic_ids()}),
        ),
        r.route(
            Verb::Get,
            "/v1/help/hooks",
            "helpHooks",
            "CogniRelay: what to call at each point of an agent's loop",
            help_guides::get_hooks,
        )
        .public()
        .tool(
            "system.hook_guide",
            "What to call at each point of an agent loop",
        ),
        r.route(
            Verb::Get,
            "/v1/help/errors/{code}",
            "helpError",
            "CogniRelay: what an error code means and how to recover",
            help_guides::get_error,
        )
        .public()
        .param(
            "code",
            json!({"type": "string", "enum": help_guides::error_ids()}),
        )
        .tool(
            "system.error_guide",
            "What error `code` means, how to recover",
        ),
        r.route(
            Verb::Get,
            "/v1/help/onboarding",
            "helpOnboarding",
            "CogniRelay: onboarding sections",
            onboarding,
        )
        .public(),
        r.route(
            Verb::Get,
            "/v1/help/onboarding/bootstrap",
            "helpOnboardingBootstrap",
            "CogniRelay: the first calls of a new agent",
            bootstrap,
        )
        .public()
        .tool(
            "system.onboarding_bootstrap",
            "The first calls of a new agent runtime",
        ),
        r.route(
            Verb::Get,
            "/v1/help/onboarding/sections/{id}",
            "helpOnboardingSection",
            "CogniRelay: one onboarding section",
            section,
        )
        .public()
        .param(
            "id",
            json!({"type": "string", "enum": SECTIONS.iter().map(|s| s.0).collect::<Vec<_>>()}),
        ),
        r.route(
            Verb::Get,
            "/v1/help/limits",
            "helpLimits",
            "CogniRelay: the limits Noema enforces",
            limits_index,
        )
        .public(),
        r.route(
            Verb::Get,
            "/v1/help/limits/{field_path}",
            "helpLimit",
            "CogniRelay: one limit",
            limit,
        )
        .public()
        .param(
            "field_path",
            json!({"type": "string", "enum": help_limits::field_paths()}),
        )
        .tool(
            "system.validation_limit",
            "One enforced limit by field_path",
        ),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_bootstrap_and_index_keep_cognirelays_key_order() {
        let FastApiJson(bootstrap) = bootstrap().await;
        let text = serde_json::to_string(&bootstrap).unwrap();
        // CogniRelay 1.4.15's bootstrap opens with these, in this order.
        assert!(
            text.starts_with(
                r#"{"kind":"onboarding_bootstrap","recommended_first_section":"bootstrap","startup_route":{"http":"POST /v1/continuity/read","mcp_tool":"continuity.read","params":{"view":"startup","allow_fallback":true}},"retrieval_route":{"http":"POST /v1/context/retrieve","mcp_tool":"context.retrieve","when_to_use":"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#""help_routes":{"tools":{"http":"GET /v1/help/tools/{name}","mcp_tool":"system.tool_usage"},"topics":"#),
            "{text}"
        );
        let FastApiJson(index) = get_index().await;
        let text = serde_json::to_string(&index).unwrap();
        assert!(text.starts_with(r#"{"http_endpoints":["#), "{text}");
        let order: Vec<usize> = [
            "\"mcp_methods\"",
            "\"tool_topics\"",
            "\"non_tool_topics\"",
            "\"hook_ids\"",
            "\"errors\"",
        ]
        .iter()
        .map(|key| text.find(key).unwrap())
        .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
    }

    /// `GET /v1/help/limits` as recorded from CogniRelay 1.4.15 (Noema appends its own three
    /// paths to `field_paths`).
    const RECORDED_INDEX: &str = r##"{"kind":"validation_limits_index","groups":[{"id":"continuity_orientation","title":"Continuity Orientation","purpose":"Startup-critical continuity orientation fields.","field_paths":["continuity.top_priorities","continuity.open_loops","continuity.active_constraints","continuity.session_trajectory","continuity.negative_decisions","continuity.rationale_entries","continuity.related_documents","continuity.stance_summary"]},{"id":"session_end_snapshot","title":"Session-End Snapshot","purpose":"Bounded session-end snapshot helper fields.","field_paths":["session_end_snapshot.open_loops","session_end_snapshot.top_priorities","session_end_snapshot.active_constraints","session_end_snapshot.stance_summary","session_end_snapshot.negative_decisions","session_end_snapshot.session_trajectory","session_end_snapshot.rationale_entries"]},{"id":"patch_targets","title":"Patch Targets","purpose":"Continuity patch operation and target limits.","field_paths":["patch.operations","patch.target.continuity.open_loops","patch.target.continuity.top_priorities","patch.target.continuity.active_constraints","patch.target.continuity.active_concerns","patch.target.continuity.drift_signals","patch.target.continuity.working_hypotheses","patch.target.continuity.long_horizon_commitments","patch.target.continuity.session_trajectory","patch.target.continuity.trailing_notes","patch.target.continuity.curiosity_queue","patch.target.continuity.negative_decisions","patch.target.continuity.rationale_entries","patch.target.stable_preferences","patch.target.thread_descriptor.keywords","patch.target.thread_descriptor.scope_anchors","patch.target.thread_descriptor.identity_anchors"]},{"id":"retrieval_budget","title":"Retrieval Budget","purpose":"Context retrieval budget and capsule-count limits.","field_paths":["context.retrieve.max_tokens_estimate","context.retrieve.continuity_max_capsules"]},{"id":"response_orientation_caps","title":"Response Orientation Caps","purpose":"Derived graph response caps separate from validation limits and the 20 KB capsule write cap.","field_paths":["context.retrieve.graph_context.nodes","context.retrieve.graph_context.edges","context.retrieve.graph_context.related_documents","context.retrieve.graph_context.blockers","continuity.read.startup.graph_summary.nodes","continuity.read.startup.graph_summary.edges","continuity.read.startup.graph_summary.related_documents","continuity.read.startup.graph_summary.blockers"]},{"id":"capsule_write_cap","title":"Capsule Write Cap","purpose":"Serialized continuity capsule write cap.","field_paths":["continuity.capsule_serialized_utf8"]},{"id":"continuity_payload","title":"Continuity Payload","purpose":"Additional public continuity/context payload limits.","field_paths":["context.retrieve.continuity_mode","context.retrieve.continuity_resilience_policy","context.retrieve.continuity_selectors","context.retrieve.continuity_selectors.subject_id","context.retrieve.continuity_selectors.subject_kind","context.retrieve.continuity_verification_policy","context.retrieve.limit","context.retrieve.subject_id","context.retrieve.subject_kind","context.retrieve.time_window_days","continuity.active_concerns","continuity.attention_policy.early_load","continuity.attention_policy.presence_bias_overrides","continuity.canonical_sources","continuity.confidence.continuity","continuity.confidence.relationship_model","continuity.curiosity_queue","continuity.drift_signals","continuity.freshness.expires_at","continuity.freshness.freshness_class","continuity.freshness.stale_after_seconds","continuity.long_horizon_commitments","continuity.metadata","continuity.patch.commit_message","continuity.patch.subject_id","continuity.patch.subject_kind","continuity.patch.updated_at","continuity.relationship_model.preferred_style","continuity.relationship_model.sensitivity_notes","continuity.relationship_model.trust_level","continuity.retrieval_hints.avoid","continuity.retrieval_hints.load_next","continuity.retrieval_hints.must_include","continuity.schema_version","continuity.source.inputs","continuity.source.producer","continuity.source.update_reason","continuity.stable_preferences","continuity.subject_id","continuity.subject_kind","continuity.thread_descriptor.identity_anchors","continuity.thread_descriptor.keywords","continuity.thread_descriptor.label","continuity.thread_descriptor.scope_anchors","continuity.trailing_notes","continuity.updated_at","continuity.upsert.commit_message","continuity.upsert.idempotency_key","continuity.upsert.lifecycle_transition","continuity.upsert.merge_mode","continuity.upsert.subject_id","continuity.upsert.subject_kind","continuity.upsert.superseded_by","continuity.verification_kind","continuity.verified_at","continuity.working_hypotheses"]}],"field_paths":["continuity.top_priorities","continuity.open_loops","continuity.active_constraints","continuity.session_trajectory","continuity.negative_decisions","continuity.rationale_entries","continuity.related_documents","continuity.stance_summary","session_end_snapshot.open_loops","session_end_snapshot.top_priorities","session_end_snapshot.active_constraints","session_end_snapshot.stance_summary","session_end_snapshot.negative_decisions","session_end_snapshot.session_trajectory","session_end_snapshot.rationale_entries","patch.operations","patch.target.continuity.open_loops","patch.target.continuity.top_priorities","patch.target.continuity.active_constraints","patch.target.continuity.active_concerns","patch.target.continuity.drift_signals","patch.target.continuity.working_hypotheses","patch.target.continuity.long_horizon_commitments","patch.target.continuity.session_trajectory","patch.target.continuity.trailing_notes","patch.target.continuity.curiosity_queue","patch.target.continuity.negative_decisions","patch.target.continuity.rationale_entries","patch.target.stable_preferences","patch.target.thread_descriptor.keywords","patch.target.thread_descriptor.scope_anchors","patch.target.thread_descriptor.identity_anchors","context.retrieve.max_tokens_estimate","context.retrieve.continuity_max_capsules","context.retrieve.graph_context.nodes","context.retrieve.graph_context.edges","context.retrieve.graph_context.related_documents","context.retrieve.graph_context.blockers","continuity.read.startup.graph_summary.nodes","continuity.read.startup.graph_summary.edges","continuity.read.startup.graph_summary.related_documents","continuity.read.startup.graph_summary.blockers","continuity.capsule_serialized_utf8","context.retrieve.continuity_mode","context.retrieve.continuity_resilience_policy","context.retrieve.continuity_selectors","context.retrieve.continuity_selectors.subject_id","context.retrieve.continuity_selectors.subject_kind","context.retrieve.continuity_verification_policy","context.retrieve.limit","context.retrieve.subject_id","context.retrieve.subject_kind","context.retrieve.time_window_days","continuity.active_concerns","continuity.attention_policy.early_load","continuity.attention_policy.presence_bias_overrides","continuity.canonical_sources","continuity.confidence.continuity","continuity.confidence.relationship_model","continuity.curiosity_queue","continuity.drift_signals","continuity.freshness.expires_at","continuity.freshness.freshness_class","continuity.freshness.stale_after_seconds","continuity.long_horizon_commitments","continuity.metadata","continuity.patch.commit_message","continuity.patch.subject_id","continuity.patch.subject_kind","continuity.patch.updated_at","continuity.relationship_model.preferred_style","continuity.relationship_model.sensitivity_notes","continuity.relationship_model.trust_level","continuity.retrieval_hints.avoid","continuity.retrieval_hints.load_next","continuity.retrieval_hints.must_include","continuity.schema_version","continuity.source.inputs","continuity.source.producer","continuity.source.update_reason","continuity.stable_preferences","continuity.subject_id","continuity.subject_kind","continuity.thread_descriptor.identity_anchors","continuity.thread_descriptor.keywords","continuity.thread_descriptor.label","continuity.thread_descriptor.scope_anchors","continuity.trailing_notes","continuity.updated_at","continuity.upsert.commit_message","continuity.upsert.idempotency_key","continuity.upsert.lifecycle_transition","continuity.upsert.merge_mode","continuity.upsert.subject_id","continuity.upsert.subject_kind","continuity.upsert.superseded_by","continuity.verification_kind","continuity.verified_at","continuity.working_hypotheses"]}"##;

    /// `GET /v1/help/limits/no.such.path` (400) as recorded from CogniRelay 1.4.15.
    const RECORDED_UNKNOWN: &str = r##"{"error":{"code":"validation","detail":"Unsupported validation limit field path.","validation_hints":[{"field":"field_path","area":"request.path","reason":"unsupported_value","limit":null,"allowed_values":["continuity.top_priorities","continuity.open_loops","continuity.active_constraints","continuity.session_trajectory","continuity.negative_decisions","continuity.rationale_entries","continuity.related_documents","continuity.stance_summary","session_end_snapshot.open_loops","session_end_snapshot.top_priorities","session_end_snapshot.active_constraints","session_end_snapshot.stance_summary","session_end_snapshot.negative_decisions","session_end_snapshot.session_trajectory","session_end_snapshot.rationale_entries","patch.operations","patch.target.continuity.open_loops","patch.target.continuity.top_priorities","patch.target.continuity.active_constraints","patch.target.continuity.active_concerns","patch.target.continuity.drift_signals","patch.target.continuity.working_hypotheses","patch.target.continuity.long_horizon_commitments","patch.target.continuity.session_trajectory","patch.target.continuity.trailing_notes","patch.target.continuity.curiosity_queue","patch.target.continuity.negative_decisions","patch.target.continuity.rationale_entries","patch.target.stable_preferences","patch.target.thread_descriptor.keywords","patch.target.thread_descriptor.scope_anchors","patch.target.thread_descriptor.identity_anchors","context.retrieve.max_tokens_estimate","context.retrieve.continuity_max_capsules","context.retrieve.graph_context.nodes","context.retrieve.graph_context.edges","context.retrieve.graph_context.related_documents","context.retrieve.graph_context.blockers","continuity.read.startup.graph_summary.nodes","continuity.read.startup.graph_summary.edges","continuity.read.startup.graph_summary.related_documents","continuity.read.startup.graph_summary.blockers","continuity.capsule_serialized_utf8","context.retrieve.continuity_mode","context.retrieve.continuity_resilience_policy","context.retrieve.continuity_selectors","context.retrieve.continuity_selectors.subject_id","context.retrieve.continuity_selectors.subject_kind","context.retrieve.continuity_verification_policy","context.retrieve.limit","context.retrieve.subject_id","context.retrieve.subject_kind","context.retrieve.time_window_days","continuity.active_concerns","continuity.attention_policy.early_load","continuity.attention_policy.presence_bias_overrides","continuity.canonical_sources","continuity.confidence.continuity","continuity.confidence.relationship_model","continuity.curiosity_queue","continuity.drift_signals","continuity.freshness.expires_at","continuity.freshness.freshness_class","continuity.freshness.stale_after_seconds","continuity.long_horizon_commitments","continuity.metadata","continuity.patch.commit_message","continuity.patch.subject_id","continuity.patch.subject_kind","continuity.patch.updated_at","continuity.relationship_model.preferred_style","continuity.relationship_model.sensitivity_notes","continuity.relationship_model.trust_level","continuity.retrieval_hints.avoid","continuity.retrieval_hints.load_next","continuity.retrieval_hints.must_include","continuity.schema_version","continuity.source.inputs","continuity.source.producer","continuity.source.update_reason","continuity.stable_preferences","continuity.subject_id","continuity.subject_kind","continuity.thread_descriptor.identity_anchors","continuity.thread_descriptor.keywords","continuity.thread_descriptor.label","continuity.thread_descriptor.scope_anchors","continuity.trailing_notes","continuity.updated_at","continuity.upsert.commit_message","continuity.upsert.idempotency_key","continuity.upsert.lifecycle_transition","continuity.upsert.merge_mode","continuity.upsert.subject_id","continuity.upsert.subject_kind","continuity.upsert.superseded_by","continuity.verification_kind","continuity.verified_at","continuity.working_hypotheses"],"correction_hint":"Use one of the field_path values returned by GET /v1/help/limits."}]}}"##;

    /// `GET /v1/help/limits/{field_path}` bodies as recorded from CogniRelay 1.4.15.
    const RECORDED_LIMITS: [(&str, &str); 10] = [
        (
            "continuity.top_priorities",
            r##"{"kind":"validation_limit","limit":{"field_path":"continuity.top_priorities","category":"continuity_orientation","value_type":"string_list","max_items":8,"max_length":null,"per_item_max_length":160,"subfield_limits":{},"applies_to":["POST /v1/continuity/upsert","continuity.upsert"],"correction_guidance":"Keep at most 8 items, shorten each item to at most 160 characters, and retry with field_path \"continuity.top_priorities\".","reference":"docs/payload-reference.md"}}"##,
        ),
        (
            "continuity.stance_summary",
            r##"{"kind":"validation_limit","limit":{"field_path":"continuity.stance_summary","category":"continuity_orientation","value_type":"string","max_items":null,"max_length":240,"per_item_max_length":null,"subfield_limits":{},"applies_to":["POST /v1/continuity/upsert","continuity.upsert"],"correction_guidance":"Shorten this value to at most 240 characters and retry with field_path \"continuity.stance_summary\".","reference":"docs/payload-reference.md"}}"##,
        ),
        (
            "session_end_snapshot.rationale_entries",
            r##"{"kind":"validation_limit","limit":{"field_path":"session_end_snapshot.rationale_entries","category":"session_end_snapshot","value_type":"object_list","max_items":6,"max_length":null,"per_item_max_length":null,"subfield_limits":{"tag":{"max_length":80},"kind":{"allowed_values":["decision","assumption","tension"]},"status":{"allowed_values":["active","superseded","retired"]},"summary":{"max_length":320},"reasoning":{"max_length":560},"alternatives_considered":{"max_items":3,"per_item_max_length":160},"depends_on":{"max_items":3,"per_item_max_length":120},"supersedes":{"max_length":80},"timestamps":{"require_utc_when_present":true}},"applies_to":["POST /v1/continuity/upsert","continuity.upsert"],"correction_guidance":"Keep at most 6 items, apply the documented subfield limits, and retry with field_path \"session_end_snapshot.rationale_entries\". Use null only when preserving the existing capsule value is intended.","reference":"docs/payload-reference.md#session-end-snapshot-helper"}}"##,
        ),
        (
            "patch.target.stable_preferences",
            r##"{"kind":"validation_limit","limit":{"field_path":"patch.target.stable_preferences","category":"patch_targets","value_type":"object_list","max_items":12,"max_length":null,"per_item_max_length":null,"subfield_limits":{"tag":{"max_length":80},"content":{"max_length":240},"match_key":"tag","timestamps":{"require_utc_when_present":true},"subject_kind":{"allowed_values":["user","peer"]}},"applies_to":["POST /v1/continuity/patch","continuity.patch"],"correction_guidance":"Keep at most 12 items, apply the documented subfield limits, and retry with field_path \"patch.target.stable_preferences\".","reference":"docs/payload-reference.md#patch--post-v1continuitypatch"}}"##,
        ),
        (
            "patch.operations",
            r##"{"kind":"validation_limit","limit":{"field_path":"patch.operations","category":"patch_targets","value_type":"operation_list","max_items":10,"max_length":null,"per_item_max_length":null,"subfield_limits":{"min_items":1,"max_items":10,"actions":["append","remove","replace_at"]},"applies_to":["POST /v1/continuity/patch","continuity.patch"],"correction_guidance":"Send between 1 and 10 patch operations and retry with field_path \"patch.operations\".","reference":"docs/payload-reference.md#patch--post-v1continuitypatch"}}"##,
        ),
        (
            "context.retrieve.max_tokens_estimate",
            r##"{"kind":"validation_limit","limit":{"field_path":"context.retrieve.max_tokens_estimate","category":"retrieval_budget","value_type":"integer_budget","max_items":null,"max_length":null,"per_item_max_length":null,"subfield_limits":{"default":12000,"minimum":256,"maximum":100000},"applies_to":["POST /v1/context/retrieve","context.retrieve"],"correction_guidance":"Use a value between 256 and 100000 and retry with field_path \"context.retrieve.max_tokens_estimate\".","reference":"docs/payload-reference.md#retrieve--post-v1contextretrieve"}}"##,
        ),
        (
            "context.retrieve.continuity_max_capsules",
            r##"{"kind":"validation_limit","limit":{"field_path":"context.retrieve.continuity_max_capsules","category":"retrieval_budget","value_type":"integer_budget","max_items":null,"max_length":null,"per_item_max_length":null,"subfield_limits":{"default":1,"minimum":1,"maximum":4},"applies_to":["POST /v1/context/retrieve","context.retrieve"],"correction_guidance":"Use a value between 1 and 4 and retry with field_path \"context.retrieve.continuity_max_capsules\".","reference":"docs/payload-reference.md#retrieve--post-v1contextretrieve"}}"##,
        ),
        (
            "continuity.confidence.continuity",
            r##"{"kind":"validation_limit","limit":{"field_path":"continuity.confidence.continuity","category":"continuity_payload","value_type":"number","max_items":null,"max_length":null,"per_item_max_length":null,"subfield_limits":{"minimum":0.0,"maximum":1.0},"applies_to":["POST /v1/continuity/upsert","continuity.upsert"],"correction_guidance":"Use a value within the documented numeric bounds and retry with field_path \"continuity.confidence.continuity\".","reference":"docs/payload-reference.md"}}"##,
        ),
        (
            "continuity.capsule_serialized_utf8",
            r##"{"kind":"validation_limit","limit":{"field_path":"continuity.capsule_serialized_utf8","category":"capsule_write_cap","value_type":"serialized_bytes","max_items":null,"max_length":20480,"per_item_max_length":null,"subfield_limits":{"label":"20 KB","serialization":"canonical_json_utf8"},"applies_to":["POST /v1/continuity/upsert","continuity.upsert","POST /v1/continuity/patch","continuity.patch"],"correction_guidance":"Reduce the serialized capsule below 20 KB (20480 bytes) and retry with field_path \"continuity.capsule_serialized_utf8\".","reference":"app.continuity.constants.CAPSULE_SIZE_LIMIT_BYTES"}}"##,
        ),
        (
            "continuity.related_documents",
            r##"{"kind":"validation_limit","limit":{"field_path":"continuity.related_documents","category":"continuity_orientation","value_type":"object_list","max_items":8,"max_length":null,"per_item_max_length":null,"subfield_limits":{"path":{"max_length":240,"pattern":"repo_relative_lexical_path"},"kind":{"max_length":32,"pattern":"^[a-z][a-z0-9_]*$"},"label":{"max_length":120},"relevance":{"max_length":32,"allowed_values":["primary","supporting","background"]},"required":["path","kind","label"],"additional_properties":false,"reserved_embedded_content_keys":["body","content","excerpt","html","markdown","payload","text"]},"applies_to":["POST /v1/continuity/upsert","continuity.upsert"],"correction_guidance":"Keep at most 8 items, apply the documented subfield limits, and retry with field_path \"continuity.related_documents\".","reference":"docs/payload-reference.md#continuityrelated_documents"}}"##,
        ),
    ];

    /// Noema's own limits, after the original's paths.
    const NOEMA_SUFFIX: &str =
        r#","request.body_bytes","mcp.tools_list.page_size","ledger.list.limit"]"#;

    #[tokio::test]
    async fn the_limits_index_is_cognirelays_with_noemas_paths_appended() {
        let FastApiJson(index) = limits_index().await;
        let text = serde_json::to_string(&index).unwrap();
        let expected = format!(
            "{}{NOEMA_SUFFIX}}}",
            RECORDED_INDEX.strip_suffix("]}").unwrap()
        );
        assert_eq!(text, expected);
    }

    #[test]
    fn each_recorded_limit_answers_cognirelays_bytes() {
        for (path, recorded) in RECORDED_LIMITS {
            let Lookup::Found(answer) = find_limit(help_limits::table(1024), path) else {
                panic!("{path} is not served");
            };
            assert_eq!(serde_json::to_string(&answer).unwrap(), recorded, "{path}");
        }
    }

    #[test]
    fn an_unknown_path_lists_every_path() {
        let Lookup::Unsupported(error) = find_limit(help_limits::table(1024), "no.such.path")
        else {
            panic!("no.such.path is served");
        };
        let (head, tail) = RECORDED_UNKNOWN
            .split_once("],\"correction_hint\"")
            .unwrap();
        let expected = format!("{head}{NOEMA_SUFFIX},\"correction_hint\"{tail}");
        assert_eq!(serde_json::to_string(&error).unwrap(), expected);
    }

    #[test]
    fn noemas_own_limits_keep_their_answers() {
        let Lookup::Found(answer) = find_limit(help_limits::table(1024), "request.body_bytes")
        else {
            panic!("request.body_bytes is not served");
        };
        assert_eq!(
            serde_json::to_string(&answer).unwrap(),
            r#"{"kind":"validation_limit","limit":{"description":"Largest REST (and MCP) request body, in bytes","field_path":"request.body_bytes","maximum":1024}}"#
        );
    }

    #[test]
    fn every_patch_target_has_its_limit() {
        assert!(help_limits::covers_patch_targets());
    }
}
