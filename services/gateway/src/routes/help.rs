//! CogniRelay's help surfaces (`/v1/help`, its onboarding and validation-limit views),
//! answering for what Noema serves: the tool help comes from the MCP tool table, the
//! endpoint lists from the route table, the limits from the constants that enforce
//! them; the hook, topic and error guides are `help_guides`. Unauthenticated, as in the
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

/// A limit Noema enforces: its field path, value and what it bounds.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Limit {
    pub description: &'static str,
    pub field_path: &'static str,
    pub maximum: u64,
}

/// The field paths of [`limits`], in its order.
const LIMIT_PATHS: [&str; 3] = [
    "request.body_bytes",
    "mcp.tools_list.page_size",
    "ledger.list.limit",
];

/// The limits this gateway enforces itself (the services' own validation answers with
/// its reason and message).
fn limits(state: &GatewayState) -> Vec<Limit> {
    vec![
        Limit {
            description: "Largest REST (and MCP) request body, in bytes",
            field_path: LIMIT_PATHS[0],
            maximum: u64::try_from(state.max_body_bytes).unwrap_or(u64::MAX),
        },
        Limit {
            description: "Tools per MCP tools/list page",
            field_path: LIMIT_PATHS[1],
            maximum: u64::try_from(mcp::PAGE_SIZE).unwrap_or(u64::MAX),
        },
        Limit {
            description: "Items per open-cognition list (limit; default 50)",
            field_path: LIMIT_PATHS[2],
            maximum: u64::from(crate::routes::ledger::MAX_LIST_LIMIT),
        },
    ]
}

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

async fn limits_index(State(state): State<GatewayState>) -> FastApiJson<Ordered> {
    let limits = limits(&state);
    FastApiJson(Ordered {
        value: json!({
            "field_paths": limits.iter().map(|l| l.field_path).collect::<Vec<_>>(),
            "kind": "validation_limits_index",
        }),
        orders: &[("", &["kind", "field_paths"])],
    })
}

async fn limit(State(state): State<GatewayState>, Path(field_path): Path<String>) -> Lookup<Value> {
    let limits = limits(&state);
    let Some(found) = limits.iter().find(|l| l.field_path == field_path) else {
        return Lookup::Unsupported(ValidationError::unsupported_see(
            "field_path",
            "Unsupported validation limit field path.",
            limits.iter().map(|l| l.field_path).collect(),
            "Use one of the field_path values returned by GET /v1/help/limits.".to_owned(),
        ));
    };
    Lookup::Found(json!({"kind": "validation_limit", "limit": found}))
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
        .param("field_path", json!({"type": "string", "enum": LIMIT_PATHS}))
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
}
