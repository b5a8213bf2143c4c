//! CogniRelay's discovery surfaces (seed 001's bootstrap sequence; `shared/compat/
//! cognirelay.md` §0, §13, §14): capabilities, health, discovery, the tool catalog,
//! manifest, contracts, governance policy and the two well-known documents. Every value
//! is generated from the route table and the MCP tool table that serve requests, so they
//! cannot drift. They need no token, as in the original, and say nothing about any
//! tenant: only what this build serves.
//!
//! `service` stays `"cognirelay"` in `/health` and `/v1/manifest`: these are CogniRelay's
//! surfaces and a client that checks the name is checking for its contract, which Noema
//! serves; `implementation` says it is Noema. Nothing Noema has no equivalent for is
//! invented: `repo_root` and `latest_commit` are null and `git_initialized` false (no git
//! repository; durability is the ledger's), `signed_ingress_required` is false (message
//! sends take an envelope when they carry one; no configuration requires it). Bodies are
//! written as FastAPI writes them, top-level keys in the original's order.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use noema_core::scopes::TOKEN_TEMPLATES;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

use crate::error::ErrorStyle;
use crate::features;
use crate::key_order::{KeyOrders, Ordered, OrderedMap};
use crate::mcp;
use crate::reply::FastApiJson;
use crate::route::{Access, Route, Routes, Verb};

const DISCOVERY: Routes = Routes::new("discovery", ErrorStyle::CogniRelay, "");

/// The contract version of the CogniRelay surfaces served (its `contract_version`).
pub const CONTRACT_VERSION: &str = "2026-02-25";

/// What `service` says in CogniRelay's bodies (see the module doc).
pub const SERVICE: &str = "cognirelay";

const AUTH_HEADER: &str = "Authorization: Bearer <token>";

/// What every discovery surface is generated from, computed once from the route table.
struct Surfaces {
    /// `verb path` → route summary, scope, tool.
    routes: Vec<RouteInfo>,
    features: BTreeMap<&'static str, &'static str>,
}

pub(crate) struct RouteInfo {
    pub verb: Verb,
    pub path: &'static str,
    scope: Option<&'static str>,
    pub tool: Option<&'static str>,
}

impl Surfaces {
    fn serves(&self, verb: Verb, path: &str) -> bool {
        self.routes.iter().any(|r| r.verb == verb && r.path == path)
    }
}

/// Every route served, in table order (computed once).
pub(crate) fn served_routes() -> &'static [RouteInfo] {
    &surfaces().routes
}

fn surfaces() -> &'static Surfaces {
    static SURFACES: LazyLock<Surfaces> = LazyLock::new(|| {
        let table = crate::route_table();
        let mut features = BTreeMap::new();
        for feature in table.iter().flat_map(|r| r.features.iter()) {
            features.insert(feature.key, feature.summary);
        }
        let routes = table
            .iter()
            .map(|route| RouteInfo {
                verb: route.verb,
                path: route.path,
                scope: match route.access {
                    Access::Public => None,
                    Access::Rpcs(_) => {
                        Some(route.scope().unwrap_or(noema_core::scopes::AUTHENTICATED))
                    }
                },
                tool: route.tool.map(|t| t.name),
            })
            .collect();
        Surfaces { routes, features }
    });
    &SURFACES
}

/// One feature of the v1 map.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FeatureSummary {
    pub summary: &'static str,
}

/// `{"version": "1", "features": {key: {summary}}}`, CogniRelay's keys first in its order,
/// then Noema's by key: the same bytes on every call of a build.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CapabilitiesV1 {
    /// Changes only with an incompatible change of this shape.
    pub version: &'static str,
    #[schemars(with = "BTreeMap<String, FeatureSummary>")]
    pub features: OrderedMap<FeatureSummary>,
}

/// The features of the routes this instance serves with their summaries, in the order
/// they are listed ([`features::listing_rank`]).
fn listed_features() -> Vec<(&'static str, &'static str)> {
    let mut listed: Vec<(&'static str, &'static str)> = surfaces()
        .features
        .iter()
        .map(|(key, summary)| (*key, *summary))
        .collect();
    listed.sort_by(|(a, _), (b, _)| features::listing_rank(a).cmp(&features::listing_rank(b)));
    listed
}

/// The features of the routes this instance serves.
pub fn capabilities_v1() -> CapabilitiesV1 {
    CapabilitiesV1 {
        version: "1",
        features: OrderedMap(
            listed_features()
                .into_iter()
                .map(|(key, summary)| (key, FeatureSummary { summary }))
                .collect(),
        ),
    }
}

async fn get_capabilities_v1() -> FastApiJson<CapabilitiesV1> {
    FastApiJson(capabilities_v1())
}

/// The legacy flat list: the same keys.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CapabilitiesLegacy {
    pub features: Vec<&'static str>,
}

async fn get_capabilities() -> FastApiJson<CapabilitiesLegacy> {
    FastApiJson(CapabilitiesLegacy {
        features: listed_features().into_iter().map(|(key, _)| key).collect(),
    })
}

/// CogniRelay's health body in its key order, with Noema's values (see the module doc);
/// `implementation` is Noema's, last.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Health {
    pub ok: bool,
    /// `cognirelay`.
    pub service: &'static str,
    /// Noema's version.
    pub version: &'static str,
    pub contract_version: &'static str,
    /// Always null: no repository path is published.
    pub repo_root: Option<String>,
    /// Always false: Noema keeps no git repository.
    pub git_initialized: bool,
    /// Always null (no git repository).
    pub latest_commit: Option<String>,
    /// Whether message sends must carry a signed envelope: false.
    pub signed_ingress_required: bool,
    /// Now, UTC seconds (`2026-01-31T12:00:00Z`).
    pub time: String,
    /// `noema`: what answers under CogniRelay's name.
    pub implementation: &'static str,
}

async fn health() -> FastApiJson<Health> {
    FastApiJson(Health {
        ok: true,
        service: SERVICE,
        version: env!("CARGO_PKG_VERSION"),
        contract_version: CONTRACT_VERSION,
        repo_root: None,
        git_initialized: false,
        latest_commit: None,
        signed_ingress_required: false,
        time: noema_core::time::rfc3339_seconds(time::OffsetDateTime::now_utc()),
        implementation: "noema",
    })
}

/// The MCP versions the endpoint negotiates, oldest first.
fn mcp_versions() -> Vec<&'static str> {
    mcp::protocol_versions()
}

/// Entry points this build serves, by CogniRelay's names.
fn entrypoints() -> BTreeMap<&'static str, &'static str> {
    const NAMED: [(&str, Verb, &str); 11] = [
        ("capabilities", Verb::Get, "/v1/capabilities"),
        ("contracts", Verb::Get, "/v1/contracts"),
        ("governance_policy", Verb::Get, "/v1/governance/policy"),
        ("help", Verb::Get, "/v1/help"),
        ("manifest", Verb::Get, "/v1/manifest"),
        ("mcp_rpc", Verb::Post, mcp::PATH),
        ("mcp_well_known", Verb::Get, "/.well-known/mcp.json"),
        ("openapi", Verb::Get, "/openapi.json"),
        ("tools", Verb::Get, "/v1/discovery/tools"),
        ("workflows", Verb::Get, super::workflows::PATH),
        ("health", Verb::Get, "/health"),
    ];
    NAMED
        .iter()
        .filter(|(_, verb, path)| surfaces().serves(*verb, path))
        .map(|(name, _, path)| (*name, *path))
        .collect()
}

/// `GET /v1/discovery` (and `/.well-known/cognirelay.json`).
pub fn discovery() -> Value {
    let versions = mcp_versions();
    let handshake = mcp::handshake_version();
    json!({
        "agent_guidance": {
            "first_calls": ["GET /v1/discovery", "GET /v1/capabilities", "GET /v1/manifest", "GET /health"],
            "mcp_first_calls": [
                "GET /.well-known/mcp.json",
                format!(
                    "POST {} {{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":\
                     {{\"protocolVersion\":\"{handshake}\",\"capabilities\":{{}},\
                     \"clientInfo\":{{\"name\":\"agent\",\"version\":\"1\"}}}}}}",
                    mcp::PATH
                ),
            ],
            "help": "GET /v1/help/onboarding/bootstrap",
        },
        "auth": {
            "header": AUTH_HEADER,
            "notes": [
                "Every route but these discovery surfaces, /healthz, /readyz, /metrics and /openapi.json needs a token.",
                "Scopes are checked per route: /v1/manifest names each route's scope.",
                "MCP tools/list shows only the tools the token's scopes allow.",
            ],
            "type": "bearer",
        },
        "counts": {
            "routes": surfaces().routes.len(),
            "tools": mcp::tools::table().tools.len(),
            "workflows": super::workflows::workflows().len(),
        },
        "entrypoints": entrypoints(),
        "ok": true,
        "protocol": {
            "get_endpoint": {"allow": "POST", "path": mcp::PATH, "posture": "deferred", "status": 405},
            "mcp_protocol_version": handshake,
            "name": "cognirelay-http",
            "post_endpoint": {"method": "POST", "path": mcp::PATH, "posture": "active"},
            "style": format!("mcp-{handshake}"),
            "supported_mcp_protocol_versions": versions,
            "transport": "streamable-http",
            "version": CONTRACT_VERSION,
        },
    })
}

/// The original's key order of `/v1/discovery` (and the well-known copy).
const DISCOVERY_ORDER: KeyOrders = &[
    (
        "",
        &[
            "ok",
            "protocol",
            "auth",
            "entrypoints",
            "agent_guidance",
            "counts",
        ],
    ),
    (
        "/protocol",
        &[
            "name",
            "style",
            "version",
            "transport",
            "mcp_protocol_version",
            "supported_mcp_protocol_versions",
            "post_endpoint",
            "get_endpoint",
        ],
    ),
    ("/protocol/post_endpoint", &["path", "method", "posture"]),
    (
        "/protocol/get_endpoint",
        &["path", "status", "allow", "posture"],
    ),
    ("/auth", &["type", "header", "notes"]),
    (
        "/entrypoints",
        &[
            "manifest",
            "contracts",
            "governance_policy",
            "tools",
            "workflows",
            "mcp_rpc",
            "mcp_well_known",
        ],
    ),
    ("/agent_guidance", &["first_calls", "mcp_first_calls"]),
    ("/counts", &["tools", "workflows"]),
];

async fn get_discovery() -> FastApiJson<Ordered> {
    FastApiJson(Ordered {
        value: discovery(),
        orders: DISCOVERY_ORDER,
    })
}

/// One tool of the catalog: its route, scope and input schema.
pub fn catalog() -> Vec<Value> {
    mcp::tools::table()
        .tools
        .iter()
        .map(|spec| {
            json!({
                "description": spec.description(),
                "idempotent": spec.verb == Verb::Get,
                "input_schema": spec.tool.input_schema.as_ref(),
                "method": spec.verb.as_str(),
                "name": spec.name(),
                "path": spec.path,
                "scopes": spec.scope.map(|s| vec![s]).unwrap_or_default(),
            })
        })
        .collect()
}

async fn discovery_tools() -> FastApiJson<Ordered> {
    let tools = catalog();
    const ORDER: KeyOrders = &[
        ("", &["ok", "protocol", "count", "tools"]),
        ("/protocol", &["name", "style", "version"]),
        (
            "/tools/*",
            &[
                "name",
                "description",
                "method",
                "path",
                "scopes",
                "idempotent",
                "input_schema",
            ],
        ),
    ];
    FastApiJson(Ordered {
        value: json!({
            "count": tools.len(),
            "ok": true,
            "protocol": {
                "name": "cognirelay-http",
                "style": format!("mcp-{}", mcp::handshake_version()),
                "version": CONTRACT_VERSION,
            },
            "tools": tools,
        }),
        orders: ORDER,
    })
}

/// `GET /v1/manifest`: every route with the scope it needs (null: none) and its tool.
pub fn manifest() -> Value {
    let mut endpoints = serde_json::Map::new();
    for route in &surfaces().routes {
        let mut entry = json!({"scope": route.scope});
        if let Some(tool) = route.tool {
            entry["mcp_tool"] = json!(tool);
        }
        endpoints.insert(format!("{} {}", route.verb.as_str(), route.path), entry);
    }
    json!({
        "auth": {"header": AUTH_HEADER, "type": "bearer"},
        "endpoints": endpoints,
        "implementation": "noema",
        "service": SERVICE,
        "version": env!("CARGO_PKG_VERSION"),
    })
}

async fn get_manifest() -> FastApiJson<Ordered> {
    const ORDER: KeyOrders = &[
        ("", &["service", "version", "auth", "endpoints"]),
        ("/auth", &["type", "header"]),
    ];
    FastApiJson(Ordered {
        value: manifest(),
        orders: ORDER,
    })
}

async fn contracts() -> FastApiJson<Ordered> {
    const ORDER: KeyOrders = &[
        (
            "",
            &[
                "ok",
                "contract_version",
                "compatibility",
                "tool_catalog_hash",
            ],
        ),
        ("/compatibility", &["policy", "breaking_change_rule"]),
    ];
    let hash = noema_core::jcs::canonicalize(&Value::Array(catalog()))
        .map(|bytes| noema_core::content_id::sha256_hex(&bytes))
        .unwrap_or_default();
    FastApiJson(Ordered {
        value: json!({
            "compatibility": {
                "breaking_change_rule": "increment contract_version before breaking fields/methods",
                "policy": "backward-compatible additive changes within same contract_version",
            },
            "contract_version": CONTRACT_VERSION,
            "ok": true,
            "openapi": "/openapi.json",
            "tool_catalog_hash": hash,
        }),
        orders: ORDER,
    })
}

/// `GET /v1/governance/policy`'s body, its keys in the original's order (§13).
#[derive(Serialize, JsonSchema)]
struct GovernanceAnswer {
    ok: bool,
    policy: GovernancePolicy,
}

#[derive(Serialize, JsonSchema)]
struct GovernancePolicy {
    schema_version: &'static str,
    authority_model: AuthorityModel,
    #[schemars(with = "BTreeMap<String, TemplateBody>")]
    scope_templates: OrderedMap<TemplateBody>,
    incident_response: IncidentResponse,
    audit_retention: AuditRetention,
}

#[derive(Serialize, JsonSchema)]
struct AuthorityModel {
    issuer: &'static str,
    description: &'static str,
}

#[derive(Serialize, JsonSchema)]
struct IncidentResponse {
    token_compromise: [&'static str; 3],
    agent_key_compromise: [&'static str; 2],
}

/// The original's retention periods in days; null, as Noema's audit logs are append-only
/// and hash-chained, never pruned: there is no period to state.
#[derive(Serialize, JsonSchema)]
struct AuditRetention {
    api_audit_days: Option<u32>,
    security_events_days: Option<u32>,
    audit_logs: &'static str,
}

/// One token template, its keys in the original's order.
#[derive(Serialize, JsonSchema)]
struct TemplateBody {
    scopes: &'static [&'static str],
    read_namespaces: &'static [&'static str],
    write_namespaces: &'static [&'static str],
}

/// CogniRelay's templates, in its order.
const COGNIRELAY_TEMPLATES: [&str; 2] = ["collaboration_peer", "replication_peer"];

/// The templates identity issues tokens with, keyed by name: CogniRelay's two in its order,
/// then Noema's own.
fn templates() -> OrderedMap<TemplateBody> {
    let originals = COGNIRELAY_TEMPLATES
        .iter()
        .filter_map(|name| TOKEN_TEMPLATES.iter().find(|t| t.name == *name));
    let own = TOKEN_TEMPLATES
        .iter()
        .filter(|t| !COGNIRELAY_TEMPLATES.contains(&t.name));
    OrderedMap(
        originals
            .chain(own)
            .map(|t| {
                let body = TemplateBody {
                    scopes: t.scopes,
                    read_namespaces: t.read_namespaces,
                    write_namespaces: t.write_namespaces,
                };
                (t.name, body)
            })
            .collect(),
    )
}

async fn governance_policy() -> FastApiJson<GovernanceAnswer> {
    FastApiJson(GovernanceAnswer {
        ok: true,
        policy: GovernancePolicy {
            schema_version: "1.0",
            authority_model: AuthorityModel {
                issuer: "owner",
                description: "The owner token (admin:peers) is the only issuer of tokens; tokens are stored only as SHA-256.",
            },
            scope_templates: templates(),
            incident_response: IncidentResponse {
                token_compromise: [
                    "revoke impacted token(s)",
                    "verify the audit chains",
                    "issue replacement token(s)",
                ],
                agent_key_compromise: [
                    "rotate the agent's key (signed by the current key)",
                    "verify the agent's signature chain",
                ],
            },
            audit_retention: AuditRetention {
                api_audit_days: None,
                security_events_days: None,
                audit_logs: "append-only and hash-chained; never deleted",
            },
        },
    })
}

async fn well_known_mcp() -> FastApiJson<Ordered> {
    const ORDER: KeyOrders = &[
        (
            "",
            &[
                "ok",
                "protocol",
                "transport",
                "endpoint",
                "contract_version",
                "mcp_protocol_version",
                "supported_mcp_protocol_versions",
                "supplemental",
                "get_endpoint",
                "methods",
                "auth",
            ],
        ),
        ("/get_endpoint", &["path", "status", "allow"]),
        ("/auth", &["type", "header"]),
    ];
    FastApiJson(Ordered {
        value: well_known_mcp_document(),
        orders: ORDER,
    })
}

/// `GET /.well-known/mcp.json`.
pub fn well_known_mcp_document() -> Value {
    let names: Vec<&str> = mcp::tools::table().tools.iter().map(|t| t.name()).collect();
    json!({
        "auth": {"header": AUTH_HEADER, "type": "bearer"},
        "contract_version": CONTRACT_VERSION,
        "endpoint": mcp::PATH,
        "get_endpoint": {"allow": "POST", "path": mcp::PATH, "status": 405},
        "mcp_protocol_version": mcp::handshake_version(),
        "methods": mcp::METHODS,
        "ok": true,
        "protocol": "jsonrpc-2.0",
        "supplemental": true,
        "supported_mcp_protocol_versions": mcp_versions(),
        "tools": {"count": names.len(), "names": names, "listed": "per token: only the tools its scopes allow"},
        "transport": "streamable-http",
    })
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    let r = DISCOVERY;
    vec![
        r.route(
            Verb::Get,
            "/v1/capabilities",
            "capabilitiesV1",
            "CogniRelay: versioned feature map of what this instance serves",
            get_capabilities_v1,
        )
        .public()
        .tool(
            "system.capabilities_v1",
            "Features this instance serves (versioned map)",
        ),
        r.route(
            Verb::Get,
            "/capabilities",
            "capabilities",
            "CogniRelay: legacy flat feature list",
            get_capabilities,
        )
        .public(),
        r.route(
            Verb::Get,
            "/health",
            "health",
            "CogniRelay: service health and contract version",
            health,
        )
        .public()
        .tool("system.health", "Service health and contract version"),
        r.route(
            Verb::Get,
            "/v1/discovery",
            "discovery",
            "CogniRelay: entry points, auth and MCP bootstrap",
            get_discovery,
        )
        .public()
        .feature(features::DISCOVERY_TOOLS),
        r.route(
            Verb::Get,
            "/v1/discovery/tools",
            "discoveryTools",
            "CogniRelay: the MCP tool catalog with input schemas",
            discovery_tools,
        )
        .public()
        .feature(features::DISCOVERY_TOOLS),
        r.route(
            Verb::Get,
            "/v1/manifest",
            "manifest",
            "CogniRelay: every route with its scope and MCP tool",
            get_manifest,
        )
        .public()
        .tool(
            "system.manifest",
            "Every route with the scope it needs and its tool",
        ),
        r.route(
            Verb::Get,
            "/v1/contracts",
            "contracts",
            "CogniRelay: contract version and tool catalog hash",
            contracts,
        )
        .public(),
        r.route(
            Verb::Get,
            "/v1/governance/policy",
            "governancePolicy",
            "CogniRelay: token templates and authority model",
            governance_policy,
        )
        .public()
        .tool(
            "system.governance_policy",
            "Token templates (scopes, namespaces) and authority model",
        ),
        r.route(
            Verb::Get,
            "/.well-known/cognirelay.json",
            "wellKnownCognirelay",
            "CogniRelay: the discovery document",
            get_discovery,
        )
        .public(),
        r.route(
            Verb::Get,
            "/.well-known/mcp.json",
            "wellKnownMcp",
            "CogniRelay: MCP endpoint, versions, methods and tools",
            well_known_mcp,
        )
        .public(),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Top-level keys of a JSON object's text, in the order written.
    fn keys_in_order(text: &str) -> Vec<String> {
        let mut keys = Vec::new();
        let mut de = serde_json::Deserializer::from_str(text);
        struct Keys<'a>(&'a mut Vec<String>);
        impl<'de> serde::de::Visitor<'de> for Keys<'_> {
            type Value = ();
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
                while let Some(key) = map.next_key::<String>()? {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    self.0.push(key);
                }
                Ok(())
            }
        }
        serde::Deserializer::deserialize_map(&mut de, Keys(&mut keys)).unwrap();
        keys
    }

    #[tokio::test]
    async fn discovery_documents_keep_cognirelays_key_order() {
        let FastApiJson(discovery) = get_discovery().await;
        let text = serde_json::to_string(&discovery).unwrap();
        assert_eq!(
            keys_in_order(&text),
            [
                "ok",
                "protocol",
                "auth",
                "entrypoints",
                "agent_guidance",
                "counts"
            ]
        );
        // The original's protocol block, as CogniRelay 1.4.15 writes it.
        assert!(
            text.contains(
                r#""protocol":{"name":"cognirelay-http","style":"mcp-2025-11-25","version":"2026-02-25","transport":"streamable-http","mcp_protocol_version":"2025-11-25","supported_mcp_protocol_versions":["#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#""post_endpoint":{"path":"/v1/mcp","method":"POST","posture":"active"},"get_endpoint":{"path":"/v1/mcp","status":405,"allow":"POST","posture":"deferred"}}"#
            ),
            "{text}"
        );
        let FastApiJson(tools) = discovery_tools().await;
        let text = serde_json::to_string(&tools).unwrap();
        assert_eq!(keys_in_order(&text), ["ok", "protocol", "count", "tools"]);
        assert!(text.contains(r#"{"name":"#), "{text}");
        let FastApiJson(contracts) = contracts().await;
        let text = serde_json::to_string(&contracts).unwrap();
        assert_eq!(
            keys_in_order(&text)[..4],
            [
                "ok",
                "contract_version",
                "compatibility",
                "tool_catalog_hash"
            ]
        );
        let FastApiJson(manifest) = get_manifest().await;
        let text = serde_json::to_string(&manifest).unwrap();
        assert_eq!(
            keys_in_order(&text)[..4],
            ["service", "version", "auth", "endpoints"]
        );
        let FastApiJson(well_known) = well_known_mcp().await;
        let text = serde_json::to_string(&well_known).unwrap();
        assert_eq!(keys_in_order(&text)[..3], ["ok", "protocol", "transport"]);
    }

    #[tokio::test]
    async fn the_governance_policy_keeps_cognirelays_keys_order_and_templates() {
        let FastApiJson(answer) = governance_policy().await;
        let policy = serde_json::to_string(&answer.policy).unwrap();
        assert_eq!(
            keys_in_order(&policy),
            [
                "schema_version",
                "authority_model",
                "scope_templates",
                "incident_response",
                "audit_retention"
            ]
        );
        let templates = serde_json::to_string(&answer.policy.scope_templates).unwrap();
        assert_eq!(
            keys_in_order(&templates),
            ["collaboration_peer", "replication_peer", "owner"]
        );
        // CogniRelay 1.4.15's two templates, as its /v1/governance/policy writes them.
        assert!(templates.starts_with(
            r#"{"collaboration_peer":{"scopes":["read:files","search","write:messages","write:projects"],"read_namespaces":["memory/coordination","messages","tasks"],"write_namespaces":["memory/coordination/handoffs","memory/coordination/shared","memory/coordination/reconciliations","messages","tasks"]},"replication_peer":{"scopes":["replication:sync","read:files","write:messages"],"read_namespaces":["*"],"write_namespaces":["archive","essays","journal","memory","messages","patches","peers","projects","runs","snapshots","tasks"]},"#
        ));
        let retention = serde_json::to_string(&answer.policy.audit_retention).unwrap();
        assert_eq!(
            keys_in_order(&retention)[..2],
            ["api_audit_days", "security_events_days"]
        );
    }
}
