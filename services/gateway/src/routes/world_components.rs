//! The world kernel's components (seed 003, issue 19 items 1, 9 and 10): JSON schemas,
//! response sources, cognition workflows and profiles are put as the seed's JSON, verbatim
//! (201 `{"hash"}` when new, 200 when it existed), and browsed by kind, by hash and by
//! what uses them; scenarios are assembled (and forked). Every browse route answers JSON and
//! accepts `?format=json`. Each route is declared once here; its MCP tool (issue 17) is
//! declared on the same value.

use std::borrow::Cow;

use axum::extract::Path;
use noema_proto::common::v1::PageRequest;
use noema_proto::world::v1 as pb;
use noema_world::domain::schema::Builtin;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{ApiError, ErrorStyle};
use crate::forward::{Caller, JsonBody, RepeatedQuery, first};
use crate::go_json::GoJson;
use crate::reply::{Answer, CreatedOrFound};
use crate::route::{Route, Routes, Verb, param_grammar};
use crate::schema_file::{Checked, schema_files};

pub const WORLD: Routes = Routes::new("world", ErrorStyle::Noema, "noema.world.v1.WorldService");

/// `?format=json`: JSON is what every world route serves; asking for it is accepted.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct FormatQuery {
    /// `json` only.
    #[serde(default, deserialize_with = "first")]
    #[schemars(extend("enum" = ["json"]))]
    pub format: Option<String>,
}

impl FormatQuery {
    pub fn check(&self) -> Result<(), ApiError> {
        check_format(self.format.as_deref())
    }
}

pub fn check_format(format: Option<&str>) -> Result<(), ApiError> {
    match format {
        None | Some("json") => Ok(()),
        Some(other) => Err(ApiError::invalid(format!(
            "format {other:?} is not served: the world's routes answer JSON (format=json)"
        ))),
    }
}

/// A listing's page: `page_size` items from `page_token` (the previous page's
/// `next_page_token`).
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct PageQuery {
    /// `json` only.
    #[serde(default, deserialize_with = "first")]
    #[schemars(extend("enum" = ["json"]))]
    pub format: Option<String>,
    /// Items to return (default 100, at most 1000).
    #[serde(default, deserialize_with = "first")]
    pub page_size: Option<String>,
    /// Where to continue: a previous page's `next_page_token`.
    #[serde(default, deserialize_with = "first")]
    pub page_token: Option<String>,
}

impl PageQuery {
    pub fn page(&self) -> Result<PageRequest, ApiError> {
        check_format(self.format.as_deref())?;
        let page_size = match self.page_size.as_deref() {
            None | Some("") => 0,
            Some(text) => text
                .parse::<u32>()
                .map_err(|_| ApiError::invalid(format!("page_size {text:?} is not a number")))?,
        };
        Ok(PageRequest {
            page_size,
            page_token: self.page_token.clone().unwrap_or_default(),
        })
    }
}

/// `routes` with [`PageQuery`]'s grammar documented: a page size is a number (empty is the
/// default) and a page token a decimal offset (the world service's tokens).
pub fn page_grammar(routes: Vec<Route>) -> Vec<Route> {
    let routes = param_grammar(
        routes,
        "page_size",
        &serde_json::json!({"type": "string", "pattern": "^[0-9]{0,9}$"}),
    );
    param_grammar(
        routes,
        "page_token",
        &serde_json::json!({"type": "string", "pattern": "^[0-9]{0,19}$"}),
    )
}

/// The next page's token, or null on the last page.
pub fn next_token(page: Option<noema_proto::common::v1::PageResponse>) -> Option<String> {
    page.map(|p| p.next_page_token).filter(|t| !t.is_empty())
}

/// JSON bytes a service sent, as JSON.
pub fn json_of(bytes: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| {
        tracing::error!(error = %e, "the world service sent bytes that are not JSON");
        ApiError(noema_core::Failure::new(
            noema_core::ErrorCode::Internal,
            "internal error",
        ))
    })
}

/// `{"hash"}` of a stored component.
#[derive(Debug, Serialize, JsonSchema)]
pub struct HashBody {
    /// 64 lowercase hex digits: SHA-256 over the document's RFC 8785 (JCS) bytes.
    pub hash: String,
}

/// A stored component.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ComponentBody {
    /// `json_schema`, `response_source`, `cognition_workflow`, `cognition_profile` or
    /// `scenario`.
    pub kind: &'static str,
    pub hash: String,
    /// RFC 3339.
    pub created_at: String,
    /// Set on components that ship with the kernel (`world-patch`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub builtin_name: Option<String>,
    /// The document, as stored (its JCS form).
    pub content: Value,
}

/// A page of components.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ComponentList {
    pub items: Vec<ComponentBody>,
    /// Null on the last page.
    pub next_page_token: Option<String>,
}

/// Something that references a component.
#[derive(Debug, Serialize, JsonSchema)]
pub struct UseBody {
    /// The referencing component's kind (absent for a world).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// A world created from this scenario.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub world_slug: Option<String>,
    /// JSON Pointer of the reference in the referencing document.
    pub pointer: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct UsesBody {
    pub kind: &'static str,
    pub hash: String,
    pub uses: Vec<UseBody>,
}

/// The WorldPatch schema: the built-in `json_schema` component a workflow's
/// `final_schema_ref` names.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WorldPatchSchemaBody {
    pub hash: String,
    pub schema: Value,
}

/// A fork: the new scenario and where it came from.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ForkBody {
    pub hash: String,
    /// `{"parent_hash", "world_slug", "turn"}`.
    pub lineage: Value,
}

// The components, documented by the schema files the world service checks them with.
schema_files! {
    ResponseSourceFile => "ResponseSource", Builtin::ResponseSource.text();
    LlmChatInterfaceFile => "LlmChatCompletionsInterface", Builtin::LlmChatInterface.text();
    HttpJsonInterfaceFile => "HttpJsonInterface", Builtin::HttpJsonInterface.text();
    CognitionWorkflowFile => "CognitionWorkflow", Builtin::CognitionWorkflow.text();
    CognitionProfileFile => "CognitionProfile", Builtin::CognitionProfile.text();
    ScenarioFile => "Scenario", Builtin::Scenario.text();
}

/// A response source as the world service accepts it: the envelope's schema, with an
/// `interface` of one of the standard kinds (each kind's own schema).
#[derive(Deserialize)]
#[serde(transparent)]
pub struct ResponseSourceInput(pub Value);

impl JsonSchema for ResponseSourceInput {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "ResponseSourceInput".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        if crate::schema_file::for_tools(generator) {
            return Schema::from(true);
        }
        let envelope = generator.subschema_for::<Checked<ResponseSourceFile>>();
        let chat = generator.subschema_for::<Checked<LlmChatInterfaceFile>>();
        let http = generator.subschema_for::<Checked<HttpJsonInterfaceFile>>();
        schemars::json_schema!({
            "allOf": [envelope, {"properties": {"interface": {"oneOf": [chat, http]}}}]
        })
    }
}

/// A JSON Schema (an object or a boolean), checked against the 2020-12 meta-schema by
/// the world service.
#[derive(Deserialize)]
#[serde(transparent)]
pub struct JsonSchemaInput(pub Value);

impl JsonSchema for JsonSchemaInput {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "JsonSchemaInput".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        if crate::schema_file::for_tools(generator) {
            return Schema::from(true);
        }
        schemars::json_schema!({
            "description": "A JSON Schema (draft 2020-12): an object or a boolean",
            "type": ["object", "boolean"]
        })
    }
}

/// What to fork from.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(extend("required" = ["label"]))]
pub struct ForkInput {
    /// The new scenario's label.
    #[serde(default)]
    #[schemars(regex(pattern = "^[a-z0-9][a-z0-9_-]{0,63}$"))]
    pub label: String,
    /// Start from this world's state (the world must come from the forked scenario).
    #[serde(default)]
    pub world_slug: Option<String>,
    /// The committed turn of `world_slug` to start from.
    #[serde(default, deserialize_with = "whole_number")]
    #[schemars(range(max = u64::MAX))]
    pub turn: Option<u64>,
}

/// A JSON number that is a whole number from 0 to `u64::MAX`, however written: JSON Schema's
/// `integer` includes `3.0`, and so does this (serde's `u64` alone refuses it).
fn whole_number<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    let Some(number) = Option::<serde_json::Number>::deserialize(deserializer)? else {
        return Ok(None);
    };
    if let Some(whole) = number.as_u64() {
        return Ok(Some(whole));
    }
    // Below 2^64 (`u64::MAX as f64` is 2^64 itself), an integral f64 converts exactly.
    match number.as_f64() {
        Some(float) if float.fract() == 0.0 && (0.0..u64::MAX as f64).contains(&float) => {
            Ok(Some(float as u64))
        }
        _ => Err(serde::de::Error::custom(format!(
            "invalid value: {number}, expected a whole number from 0 to {}",
            u64::MAX
        ))),
    }
}

/// The component kinds by their REST collection.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    JsonSchema,
    ResponseSource,
    CognitionWorkflow,
    CognitionProfile,
    Scenario,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::JsonSchema => "json_schema",
            Kind::ResponseSource => "response_source",
            Kind::CognitionWorkflow => "cognition_workflow",
            Kind::CognitionProfile => "cognition_profile",
            Kind::Scenario => "scenario",
        }
    }

    /// The kind a caller names (`json_schema`, `response_source`, `cognition_workflow`,
    /// `cognition_profile` or `scenario`): the kind-generic routes take it as an argument.
    pub fn parse(name: &str) -> Result<Kind, ApiError> {
        [
            Kind::JsonSchema,
            Kind::ResponseSource,
            Kind::CognitionWorkflow,
            Kind::CognitionProfile,
            Kind::Scenario,
        ]
        .into_iter()
        .find(|kind| kind.name() == name)
        .ok_or_else(|| {
            ApiError::invalid(format!(
                "kind {name:?} is not a component kind (json_schema, response_source, \
                 cognition_workflow, cognition_profile, scenario)"
            ))
        })
    }

    fn proto(self) -> pb::ComponentKind {
        match self {
            Kind::JsonSchema => pb::ComponentKind::JsonSchema,
            Kind::ResponseSource => pb::ComponentKind::ResponseSource,
            Kind::CognitionWorkflow => pb::ComponentKind::CognitionWorkflow,
            Kind::CognitionProfile => pb::ComponentKind::CognitionProfile,
            Kind::Scenario => pb::ComponentKind::Scenario,
        }
    }

    fn of(kind: i32) -> Option<Kind> {
        match pb::ComponentKind::try_from(kind).ok()? {
            pb::ComponentKind::JsonSchema => Some(Kind::JsonSchema),
            pb::ComponentKind::ResponseSource => Some(Kind::ResponseSource),
            pb::ComponentKind::CognitionWorkflow => Some(Kind::CognitionWorkflow),
            pb::ComponentKind::CognitionProfile => Some(Kind::CognitionProfile),
            pb::ComponentKind::Scenario => Some(Kind::Scenario),
            pb::ComponentKind::Unspecified => None,
        }
    }
}

fn component(c: pb::Component) -> Result<ComponentBody, ApiError> {
    Ok(ComponentBody {
        kind: Kind::of(c.kind).map_or("", Kind::name),
        content: json_of(&c.document_jcs)?,
        hash: c.hash,
        created_at: c.created_at,
        builtin_name: Some(c.builtin_name).filter(|n| !n.is_empty()),
    })
}

fn document_bytes(document: &Value) -> Result<Vec<u8>, ApiError> {
    serde_json::to_vec(document).map_err(|e| ApiError::invalid(format!("the body: {e}")))
}

async fn put(
    caller: &Caller,
    kind: Kind,
    document: &Value,
) -> Result<CreatedOrFound<HashBody>, ApiError> {
    let request = pb::PutComponentRequest {
        kind: kind.proto().into(),
        document_json: document_bytes(document)?,
    };
    let reply = caller
        .world()
        .put_component(caller.request(request))
        .await?
        .into_inner();
    Ok(CreatedOrFound {
        created: reply.created,
        body: HashBody { hash: reply.hash },
    })
}

async fn get(
    caller: &Caller,
    kind: Kind,
    hash: String,
    query: &FormatQuery,
) -> Answer<ComponentBody> {
    query.check()?;
    let request = pb::GetComponentRequest {
        kind: kind.proto().into(),
        hash,
    };
    let reply = caller
        .world()
        .get_component(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(component(reply)?))
}

async fn list(caller: &Caller, kind: Kind, query: &PageQuery) -> Answer<ComponentList> {
    let request = pb::ListComponentsRequest {
        kind: kind.proto().into(),
        page: Some(query.page()?),
    };
    let reply = caller
        .world()
        .list_components(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(ComponentList {
        items: reply
            .components
            .into_iter()
            .map(component)
            .collect::<Result<_, _>>()?,
        next_page_token: next_token(reply.page),
    }))
}

async fn uses(caller: &Caller, kind: Kind, hash: String, query: &FormatQuery) -> Answer<UsesBody> {
    query.check()?;
    let request = pb::ListComponentUsesRequest {
        kind: kind.proto().into(),
        hash: hash.clone(),
    };
    let reply = caller
        .world()
        .list_component_uses(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(UsesBody {
        kind: kind.name(),
        hash,
        uses: reply
            .uses
            .into_iter()
            .map(|u| UseBody {
                kind: Kind::of(u.kind).map(Kind::name),
                hash: Some(u.hash).filter(|h| !h.is_empty()),
                world_slug: Some(u.world_slug).filter(|s| !s.is_empty()),
                pointer: u.pointer,
            })
            .collect(),
    }))
}

/// The handler of a put of one kind, whose body is read (and documented) as `$body`.
macro_rules! put_route {
    ($kind:expr, $put:ident, $body:ty, $document:ident => $value:expr) => {
        async fn $put(
            caller: Caller,
            JsonBody($document): JsonBody<$body>,
        ) -> Result<CreatedOrFound<HashBody>, ApiError> {
            put(&caller, $kind, &$value).await
        }
    };
}

/// The handlers of one kind's collection, its item and its uses.
macro_rules! read_routes {
    ($kind:expr, $list:ident, $get:ident, $uses:ident) => {
        async fn $list(
            caller: Caller,
            RepeatedQuery(query): RepeatedQuery<PageQuery>,
        ) -> Answer<ComponentList> {
            list(&caller, $kind, &query).await
        }

        async fn $get(
            caller: Caller,
            Path(hash): Path<String>,
            RepeatedQuery(query): RepeatedQuery<FormatQuery>,
        ) -> Answer<ComponentBody> {
            get(&caller, $kind, hash, &query).await
        }

        async fn $uses(
            caller: Caller,
            Path(hash): Path<String>,
            RepeatedQuery(query): RepeatedQuery<FormatQuery>,
        ) -> Answer<UsesBody> {
            uses(&caller, $kind, hash, &query).await
        }
    };
}

put_route!(Kind::JsonSchema, put_json_schema, JsonSchemaInput, body => body.0);
put_route!(Kind::ResponseSource, put_response_source, ResponseSourceInput, body => body.0);
put_route!(
    Kind::CognitionWorkflow,
    put_cognition_workflow,
    Checked<CognitionWorkflowFile>,
    body => body.document
);
put_route!(
    Kind::CognitionProfile,
    put_cognition_profile,
    Checked<CognitionProfileFile>,
    body => body.document
);
read_routes!(
    Kind::JsonSchema,
    list_json_schemas,
    get_json_schema,
    json_schema_uses
);
read_routes!(
    Kind::ResponseSource,
    list_response_sources,
    get_response_source,
    response_source_uses
);
read_routes!(
    Kind::CognitionWorkflow,
    list_cognition_workflows,
    get_cognition_workflow,
    cognition_workflow_uses
);
read_routes!(
    Kind::CognitionProfile,
    list_cognition_profiles,
    get_cognition_profile,
    cognition_profile_uses
);
read_routes!(Kind::Scenario, list_scenarios, get_scenario, scenario_uses);

// The kind-generic routes (the seed's `get_component`, `list_components`, `list_uses_of`):
// one tool each for every kind, the kind an argument.

async fn list_components(
    caller: Caller,
    Path(kind): Path<String>,
    RepeatedQuery(query): RepeatedQuery<PageQuery>,
) -> Answer<ComponentList> {
    list(&caller, authorised_kind(&caller, &kind).await?, &query).await
}

async fn get_component(
    caller: Caller,
    Path((kind, hash)): Path<(String, String)>,
    RepeatedQuery(query): RepeatedQuery<FormatQuery>,
) -> Answer<ComponentBody> {
    get(
        &caller,
        authorised_kind(&caller, &kind).await?,
        hash,
        &query,
    )
    .await
}

async fn list_uses_of(
    caller: Caller,
    Path((kind, hash)): Path<(String, String)>,
    RepeatedQuery(query): RepeatedQuery<FormatQuery>,
) -> Answer<UsesBody> {
    uses(
        &caller,
        authorised_kind(&caller, &kind).await?,
        hash,
        &query,
    )
    .await
}

/// The component kind named in a path. An unknown kind is refused only after the world
/// service has authorised the caller (every kind-generic route needs `world:read`), so a
/// token without the scope learns 403, not which kinds exist.
async fn authorised_kind(caller: &Caller, name: &str) -> Result<Kind, ApiError> {
    let refusal = match Kind::parse(name) {
        Ok(kind) => return Ok(kind),
        Err(refusal) => refusal,
    };
    let probe = pb::ListComponentsRequest {
        kind: pb::ComponentKind::Unspecified.into(),
        page: None,
    };
    match caller.world().list_components(caller.request(probe)).await {
        Err(status) if status.code() != tonic::Code::InvalidArgument => Err(status.into()),
        _ => Err(refusal),
    }
}

async fn world_patch_schema(
    caller: Caller,
    RepeatedQuery(query): RepeatedQuery<FormatQuery>,
) -> Answer<WorldPatchSchemaBody> {
    query.check()?;
    let request = pb::GetBuiltinComponentRequest {
        name: "world-patch".into(),
    };
    let reply = caller
        .world()
        .get_builtin_component(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(WorldPatchSchemaBody {
        schema: json_of(&reply.document_jcs)?,
        hash: reply.hash,
    }))
}

async fn assemble_scenario(
    caller: Caller,
    JsonBody(body): JsonBody<Checked<ScenarioFile>>,
) -> Result<CreatedOrFound<HashBody>, ApiError> {
    let request = pb::AssembleScenarioRequest {
        document_json: document_bytes(&body.document)?,
    };
    let reply = caller
        .world()
        .assemble_scenario(caller.request(request))
        .await?
        .into_inner();
    Ok(CreatedOrFound {
        created: reply.created,
        body: HashBody { hash: reply.hash },
    })
}

async fn fork_scenario(
    caller: Caller,
    Path(hash): Path<String>,
    JsonBody(input): JsonBody<ForkInput>,
) -> Result<CreatedOrFound<ForkBody>, ApiError> {
    let request = pb::ForkScenarioRequest {
        parent_hash: hash,
        label: input.label,
        world_slug: input.world_slug.unwrap_or_default(),
        turn: input.turn.unwrap_or_default(),
    };
    let reply = caller
        .world()
        .fork_scenario(caller.request(request))
        .await?
        .into_inner();
    Ok(CreatedOrFound {
        created: reply.created,
        body: ForkBody {
            lineage: json_of(&reply.lineage_json)?,
            hash: reply.hash,
        },
    })
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    let r = WORLD;
    let routes = vec![
        r.route(
            Verb::Post,
            "/json-schemas",
            "putJsonSchema",
            "Store a JSON Schema (201 new, 200 existing)",
            put_json_schema,
        )
        .calls("PutComponent")
        .tool("put_json_schema", "Store a JSON Schema component"),
        r.route(
            Verb::Get,
            "/json-schemas",
            "listJsonSchemas",
            "JSON Schemas, oldest first",
            list_json_schemas,
        )
        .calls("ListComponents"),
        r.route(
            Verb::Get,
            "/json-schemas/world-patch",
            "getWorldPatchSchema",
            "The built-in WorldPatch schema: {hash, schema}",
            world_patch_schema,
        )
        .calls("GetBuiltinComponent")
        .tool(
            "get_world_patch_schema",
            "The built-in WorldPatch JSON Schema",
        ),
        r.route(
            Verb::Get,
            "/json-schemas/hash/{hash}",
            "getJsonSchema",
            "A JSON Schema by hash",
            get_json_schema,
        )
        .calls("GetComponent")
        .tool("get_json_schema", "A JSON Schema component by hash"),
        r.route(
            Verb::Get,
            "/json-schemas/hash/{hash}/uses",
            "listJsonSchemaUses",
            "What references a JSON Schema",
            json_schema_uses,
        )
        .calls("ListComponentUses"),
        r.route(
            Verb::Post,
            "/response-sources",
            "putResponseSource",
            "Store a response source (201 new, 200 existing)",
            put_response_source,
        )
        .calls("PutComponent")
        .tool(
            "put_response_source",
            "Store a response source component",
        ),
        r.route(
            Verb::Get,
            "/response-sources",
            "listResponseSources",
            "Response sources, oldest first",
            list_response_sources,
        )
        .calls("ListComponents"),
        r.route(
            Verb::Get,
            "/response-sources/hash/{hash}",
            "getResponseSource",
            "A response source by hash",
            get_response_source,
        )
        .calls("GetComponent")
        .tool("get_response_source", "A response source component by hash"),
        r.route(
            Verb::Get,
            "/response-sources/hash/{hash}/uses",
            "listResponseSourceUses",
            "What references a response source",
            response_source_uses,
        )
        .calls("ListComponentUses"),
        r.route(
            Verb::Post,
            "/cognition-workflows",
            "putCognitionWorkflow",
            "Store a cognition workflow after its structure checks (201 new, 200 existing)",
            put_cognition_workflow,
        )
        .calls("PutComponent")
        .describe("Node ids are unique, and edges and references resolve (400 otherwise).")
        .tool(
            "put_cognition_workflow",
            "Store a cognition workflow component",
        ),
        r.route(
            Verb::Get,
            "/cognition-workflows",
            "listCognitionWorkflows",
            "Cognition workflows, oldest first",
            list_cognition_workflows,
        )
        .calls("ListComponents"),
        r.route(
            Verb::Get,
            "/cognition-workflows/hash/{hash}",
            "getCognitionWorkflow",
            "A cognition workflow by hash",
            get_cognition_workflow,
        )
        .calls("GetComponent")
        .tool(
            "get_cognition_workflow",
            "A cognition workflow component by hash",
        ),
        r.route(
            Verb::Get,
            "/cognition-workflows/hash/{hash}/uses",
            "listCognitionWorkflowUses",
            "What references a cognition workflow",
            cognition_workflow_uses,
        )
        .calls("ListComponentUses"),
        r.route(
            Verb::Post,
            "/cognition-profiles",
            "putCognitionProfile",
            "Store a cognition profile: {\"workflow_ref\": {\"hash\"}} (201 new, 200 existing)",
            put_cognition_profile,
        )
        .calls("PutComponent")
        .describe("workflow_ref names a stored workflow (400 otherwise).")
        .tool(
            "put_cognition_profile",
            "Store a cognition profile component",
        ),
        r.route(
            Verb::Get,
            "/cognition-profiles",
            "listCognitionProfiles",
            "Cognition profiles, oldest first",
            list_cognition_profiles,
        )
        .calls("ListComponents"),
        r.route(
            Verb::Get,
            "/cognition-profiles/hash/{hash}",
            "getCognitionProfile",
            "A cognition profile by hash",
            get_cognition_profile,
        )
        .calls("GetComponent")
        .tool(
            "get_cognition_profile",
            "A cognition profile component by hash",
        ),
        r.route(
            Verb::Get,
            "/cognition-profiles/hash/{hash}/uses",
            "listCognitionProfileUses",
            "What references a cognition profile",
            cognition_profile_uses,
        )
        .calls("ListComponentUses"),
        r.route(
            Verb::Post,
            "/scenarios",
            "assembleScenario",
            "Assemble and store a scenario (201 new, 200 existing; 422 when it does not assemble)",
            assemble_scenario,
        )
        .calls("AssembleScenario")
        .describe(
            "Its profiles are stored, its ids and labels unique, and its environment_labels \
             name its environments (422 otherwise).",
        )
        .tool("assemble_scenario", "Assemble and store a scenario")
        .status(
            422,
            "The scenario does not assemble: every problem, the first one's path",
        ),
        r.route(
            Verb::Get,
            "/scenarios",
            "listScenarios",
            "Scenarios, oldest first",
            list_scenarios,
        )
        .calls("ListComponents"),
        r.route(
            Verb::Get,
            "/scenarios/hash/{hash}",
            "getScenario",
            "A scenario by hash",
            get_scenario,
        )
        .calls("GetComponent")
        .tool("get_scenario", "A scenario by hash"),
        r.route(
            Verb::Get,
            "/scenarios/hash/{hash}/uses",
            "listScenarioUses",
            "Worlds created from a scenario",
            scenario_uses,
        )
        .calls("ListComponentUses"),
        r.route(
            Verb::Post,
            "/scenarios/hash/{hash}/fork",
            "forkScenario",
            "A new scenario from this one, or from a world's state at a turn, with its lineage",
            fork_scenario,
        )
        .calls("ForkScenario")
        .tool(
            "fork_scenario",
            "Fork a scenario, or a world at a turn",
        )
        .status(422, "The fork does not assemble"),
        r.route(
            Verb::Get,
            "/components/{kind}",
            "listComponents",
            "Components of one kind (json_schema, response_source, cognition_workflow, \
             cognition_profile, scenario), oldest first",
            list_components,
        )
        .calls("ListComponents")
        .tool(
            "list_components",
            "Components of one kind, oldest first (kind: json_schema|response_source|cognition_workflow|cognition_profile|scenario)",
        ),
        r.route(
            Verb::Get,
            "/components/{kind}/hash/{hash}",
            "getComponent",
            "A component of the given kind by hash",
            get_component,
        )
        .calls("GetComponent")
        .tool(
            "get_component",
            "A component by kind and hash (kind: json_schema|response_source|cognition_workflow|cognition_profile|scenario)",
        ),
        r.route(
            Verb::Get,
            "/components/{kind}/hash/{hash}/uses",
            "listUsesOf",
            "What references a component of the given kind",
            list_uses_of,
        )
        .calls("ListComponentUses")
        .tool(
            "list_uses_of",
            "What references a component, by kind and hash (kind: json_schema|response_source|cognition_workflow|cognition_profile|scenario)",
        ),
    ];
    // The grammars the handlers check (the world's `ContentHash` and component kinds).
    let routes = page_grammar(routes);
    let routes = param_grammar(
        routes,
        "hash",
        &serde_json::json!({"type": "string", "pattern": "^(sha256:)?[0-9a-f]{64}$"}),
    );
    param_grammar(
        routes,
        "kind",
        &serde_json::json!({"type": "string", "enum": [
            "json_schema", "response_source", "cognition_workflow", "cognition_profile", "scenario"
        ]}),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn turn(body: &str) -> Result<Option<u64>, ApiError> {
        crate::forward::json_body::<ForkInput>(body.as_bytes()).map(|input| input.turn)
    }

    #[test]
    fn a_fork_turn_is_any_whole_number_the_document_allows() {
        assert_eq!(turn(r#"{"label": "a"}"#).unwrap(), None);
        assert_eq!(turn(r#"{"label": "a", "turn": null}"#).unwrap(), None);
        assert_eq!(turn(r#"{"label": "a", "turn": 7}"#).unwrap(), Some(7));
        assert_eq!(
            turn(r#"{"label": "a", "turn": 20232164.0}"#).unwrap(),
            Some(20_232_164)
        );
        assert_eq!(
            turn(r#"{"label": "a", "turn": 18446744073709551615}"#).unwrap(),
            Some(u64::MAX)
        );
        for refused in [
            "1.5",
            "-1",
            "-1.0",
            "18446744073709551616",
            "3.1e19",
            "\"1\"",
        ] {
            let body = format!(r#"{{"label": "a", "turn": {refused}}}"#);
            assert!(turn(&body).is_err(), "{refused}");
        }
    }

    #[test]
    fn the_fork_turn_is_documented_up_to_u64_max() {
        let mut schemas = crate::route::Schemas::for_openapi();
        schemas.requests.subschema_for::<ForkInput>();
        let definitions = schemas.definitions();
        let turn = &definitions["ForkInput"]["properties"]["turn"];
        assert_eq!(turn["maximum"], u64::MAX, "{turn}");
        assert_eq!(turn["minimum"], 0, "{turn}");
    }
}
