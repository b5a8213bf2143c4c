//! Route declarations: one value per REST route builds both the axum route and its
//! OpenAPI operation, so a route cannot be served undocumented and the two cannot
//! disagree.
//!
//! A declaration names the method once, the path, the operation id, the summary, the
//! RPCs it calls (their `required_scope` options are the route's scope) or that it is
//! public, and the documented statuses beyond the common ones; the module's [`Routes`]
//! gives its tag and its system's [`ErrorStyle`]. Everything else the document says
//! comes from the handler's own types: its query parameters from a `Query<T>` or
//! [`RepeatedQuery<T>`](crate::forward::RepeatedQuery) argument, its request body from
//! a [`JsonBody<T>`](crate::forward::JsonBody) argument, its responses from its return
//! type ([`crate::reply`]), each schema derived from the serde type by `schemars`.
//!
//! The same value declares the route's MCP tool, if it has one ([`Route::tool`]: a name
//! and a short description; its input schema is the [`OperationDoc`]'s path and query
//! parameters and body, and a call runs this route's handler, see `crate::mcp`), and the
//! CogniRelay capability features it implements ([`Route::feature`]), which
//! `/v1/capabilities` lists only while a route declaring them is served.

use std::future::Future;

use axum::handler::Handler;
use axum::routing::{MethodFilter, MethodRouter};
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value};

use crate::GatewayState;
use crate::error::{ErrorStyle, restyle};

/// The HTTP methods the gateway serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    Post,
    Patch,
    Delete,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::Post => "POST",
            Verb::Patch => "PATCH",
            Verb::Delete => "DELETE",
        }
    }

    fn filter(self) -> MethodFilter {
        match self {
            Verb::Get => MethodFilter::GET,
            Verb::Post => MethodFilter::POST,
            Verb::Patch => MethodFilter::PATCH,
            Verb::Delete => MethodFilter::DELETE,
        }
    }
}

/// Who may call a route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// Anyone, without a token (operations endpoints).
    Public,
    /// The caller's token, with the scope of the first of these RPCs (gRPC paths) that
    /// the route calls; the services check it.
    Rpcs(Vec<String>),
}

/// An MCP tool declared on a route: what `tools/list` shows besides the input schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolDecl {
    /// MCP tool name (`[A-Za-z0-9_.-]`, 1-128 characters); the original system's own
    /// tool name where it has one.
    pub name: &'static str,
    /// One short sentence: every token's `tools/list` carries it.
    pub description: &'static str,
}

/// A capability feature (CogniRelay's `/v1/capabilities` key) a route implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feature {
    pub key: &'static str,
    pub summary: &'static str,
}

/// One REST route: its document and its handler.
pub struct Route {
    pub verb: Verb,
    pub path: &'static str,
    pub operation_id: &'static str,
    pub summary: &'static str,
    pub tag: &'static str,
    pub errors: ErrorStyle,
    pub access: Access,
    /// Statuses documented besides the handler's own and the common error statuses.
    pub statuses: Vec<(u16, &'static str)>,
    /// The grammar of path and query parameters the handler checks (a JSON Schema by
    /// name), for the OpenAPI document only (MCP tools keep their arguments' plain types:
    /// every token's `tools/list` carries them); any other path parameter is a string.
    pub param_schemas: Vec<(&'static str, Value)>,
    /// The continuity service's model of the query (CogniRelay's query parameters, which it
    /// validates as FastAPI does): the document's parameter types and required flags.
    pub query_model: Option<&'static noema_continuity::domain::schema::Model>,
    /// The operation's description: a rule on its input that OpenAPI cannot state (one
    /// short sentence).
    pub description: Option<&'static str>,
    /// The MCP tool that calls this route, if any.
    pub tool: Option<ToolDecl>,
    /// The capability features this route implements.
    pub features: Vec<Feature>,
    service: &'static str,
    document: fn(&mut OperationDoc, &mut Schemas),
    handler: MethodRouter<GatewayState>,
}

impl Route {
    /// The route calls `method` of its module's service (e.g. `GetStatus`).
    #[must_use]
    pub fn calls(self, method: &'static str) -> Self {
        let service = self.service;
        self.calls_rpc(&format!("/{service}/{method}"))
    }

    /// The route calls the RPC at the gRPC path `rpc`.
    #[must_use]
    pub fn calls_rpc(mut self, rpc: &str) -> Self {
        match &mut self.access {
            Access::Rpcs(rpcs) => rpcs.push(rpc.to_owned()),
            Access::Public => self.access = Access::Rpcs(vec![rpc.to_owned()]),
        }
        self
    }

    /// The route needs no token.
    #[must_use]
    pub fn public(mut self) -> Self {
        self.access = Access::Public;
        self
    }

    /// Documents one more status this route answers with an error body.
    #[must_use]
    pub fn status(mut self, status: u16, description: &'static str) -> Self {
        self.statuses.push((status, description));
        self
    }

    /// The path or query parameter `name` follows `schema` (what the handler refuses with
    /// 400 or 422 otherwise).
    #[must_use]
    pub fn param(mut self, name: &'static str, schema: Value) -> Self {
        self.param_schemas.push((name, schema));
        self
    }

    /// The query parameters are read as the continuity service's `model` (their types,
    /// limits and required flags in the document).
    #[must_use]
    pub fn query_model(mut self, model: &'static noema_continuity::domain::schema::Model) -> Self {
        self.query_model = Some(model);
        self
    }

    /// Says a rule on the route's input that the document's schemas cannot (one across two
    /// query parameters, or one on stored state), in one short sentence.
    #[must_use]
    pub fn describe(mut self, rule: &'static str) -> Self {
        self.description = Some(rule);
        self
    }

    /// The route is also the MCP tool `name`: its arguments are the route's path and
    /// query parameters and its JSON body's fields, and a call runs this route's handler
    /// with the caller's token. Keep `description` to one short sentence.
    #[must_use]
    pub fn tool(mut self, name: &'static str, description: &'static str) -> Self {
        self.tool = Some(ToolDecl { name, description });
        self
    }

    /// The route implements the capability `feature`.
    #[must_use]
    pub fn feature(mut self, feature: Feature) -> Self {
        self.features.push(feature);
        self
    }

    /// The names of the path's parameters (`/diaries/{id}` → `id`), in order.
    pub fn path_params(&self) -> Vec<&'static str> {
        self.path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .collect()
    }

    /// The RPCs the route calls, by gRPC path (none for a public route).
    pub fn rpcs(&self) -> &[String] {
        match &self.access {
            Access::Public => &[],
            Access::Rpcs(rpcs) => rpcs,
        }
    }

    /// The scope a token needs (alternatives separated by `|`), from the first RPC's
    /// contract; `None` for a public route or an RPC the contracts do not have.
    pub fn scope(&self) -> Option<&'static str> {
        self.rpcs()
            .first()
            .and_then(|rpc| noema_proto::required_scope(rpc))
    }

    /// What the handler's types say about the operation.
    pub fn operation(&self, schemas: &mut Schemas) -> OperationDoc {
        let mut doc = OperationDoc::default();
        (self.document)(&mut doc, schemas);
        doc
    }

    /// The axum handler for this route's method (its errors rendered in its style).
    pub fn method_router(&self) -> MethodRouter<GatewayState> {
        self.handler.clone()
    }
}

/// `routes`, with the path or query parameter `name` documented by `schema` wherever a
/// route has it.
pub fn param_grammar(routes: Vec<Route>, name: &'static str, schema: &Value) -> Vec<Route> {
    routes
        .into_iter()
        .map(|route| route.param(name, schema.clone()))
        .collect()
}

/// Declares a module's routes: their OpenAPI tag, their system's error conventions and
/// the gRPC service (`package.Service`) they call.
#[derive(Debug, Clone, Copy)]
pub struct Routes {
    tag: &'static str,
    errors: ErrorStyle,
    service: &'static str,
}

impl Routes {
    pub const fn new(tag: &'static str, errors: ErrorStyle, service: &'static str) -> Routes {
        Routes {
            tag,
            errors,
            service,
        }
    }

    /// The route `verb path`, served by `handler`.
    pub fn route<H, T, D>(
        &self,
        verb: Verb,
        path: &'static str,
        operation_id: &'static str,
        summary: &'static str,
        handler: H,
    ) -> Route
    where
        H: Handler<T, GatewayState> + Documented<D>,
        T: 'static,
    {
        let mut method_router = axum::routing::on(verb.filter(), handler);
        if self.errors == ErrorStyle::CogniRelay && verb == Verb::Get {
            // FastAPI serves no HEAD where axum would answer it with the GET handler.
            method_router =
                method_router.on(MethodFilter::HEAD, crate::unrouted::method_not_allowed);
        }
        let method_router = method_router.layer(axum::middleware::map_response_with_state(
            self.errors,
            restyle,
        ));
        Route {
            verb,
            path,
            operation_id,
            summary,
            tag: self.tag,
            errors: self.errors,
            access: Access::Rpcs(Vec::new()),
            statuses: Vec::new(),
            param_schemas: Vec::new(),
            query_model: None,
            description: None,
            tool: None,
            features: Vec::new(),
            service: self.service,
            document: <H as Documented<D>>::document,
            handler: method_router,
        }
    }
}

/// Where an MCP tool's input schema keeps its definitions; a generator with this path
/// makes tool schemas, which every token's `tools/list` carries (see
/// [`crate::schema_file::for_tools`]).
pub const TOOL_DEFINITIONS: &str = "/$defs";

/// The JSON Schema generators of one document: request types are described as they
/// are read, response types as they are written.
pub struct Schemas {
    pub requests: SchemaGenerator,
    pub responses: SchemaGenerator,
}

impl Schemas {
    /// Generators whose `$ref`s point into the OpenAPI document's components.
    pub fn for_openapi() -> Schemas {
        let settings = || {
            SchemaSettings::draft2020_12().with(|s| {
                s.definitions_path = "/components/schemas".into();
                s.meta_schema = None;
            })
        };
        Schemas {
            requests: settings().for_deserialize().into_generator(),
            responses: settings().for_serialize().into_generator(),
        }
    }

    /// Generators for MCP tool input schemas: `$ref`s point into the tool's own `$defs`
    /// ([`TOOL_DEFINITIONS`]).
    pub fn for_tools() -> Schemas {
        let settings = || {
            SchemaSettings::draft2020_12().with(|s| {
                s.definitions_path = TOOL_DEFINITIONS.into();
                s.meta_schema = None;
            })
        };
        Schemas {
            requests: settings().for_deserialize().into_generator(),
            responses: settings().for_serialize().into_generator(),
        }
    }

    /// Every named schema either generator made.
    pub fn definitions(&mut self) -> Map<String, Value> {
        let mut all = self.requests.take_definitions(true);
        all.extend(self.responses.take_definitions(true));
        all
    }
}

/// One query parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryParam {
    pub name: String,
    pub description: Option<String>,
    pub required: bool,
    pub schema: Value,
}

/// One documented response.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseDoc {
    pub status: u16,
    pub description: &'static str,
    /// Media type and schema of the body, if it has one.
    pub content: Option<(&'static str, Value)>,
}

/// What an operation's handler types say about it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OperationDoc {
    pub query: Vec<QueryParam>,
    /// The JSON request body's schema.
    pub body: Option<Value>,
    /// The body's schema as an MCP tool's arguments, where it differs from `body`: every
    /// token's `tools/list` carries it, so a body whose full model is large (CogniRelay's
    /// capsules) is an argument object there, checked by the service when called.
    pub tool_body: Option<Value>,
    pub responses: Vec<ResponseDoc>,
}

impl OperationDoc {
    /// Query parameters from the properties of `T` (a struct read from the query).
    pub fn query_from<T: JsonSchema>(&mut self) {
        let schema = SchemaSettings::draft2020_12()
            .with(|s| s.inline_subschemas = true)
            .for_deserialize()
            .into_generator()
            .into_root_schema_for::<T>();
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            return;
        };
        for (name, property) in properties {
            let mut property = property.clone();
            let description = property
                .as_object_mut()
                .and_then(|p| p.remove("description"))
                .and_then(|d| d.as_str().map(str::to_owned));
            self.query.push(QueryParam {
                name: name.clone(),
                description,
                required: required.contains(&name.as_str()),
                schema: without_null(property),
            });
        }
    }

    /// A JSON response with `T`'s schema.
    pub fn json_response<T: JsonSchema>(
        &mut self,
        schemas: &mut Schemas,
        status: u16,
        description: &'static str,
    ) {
        let schema = schemas.responses.subschema_for::<T>().to_value();
        self.responses.push(ResponseDoc {
            status,
            description,
            content: Some(("application/json", schema)),
        });
    }
}

/// A query value is a string or absent, never JSON null: `["string", "null"]` → `"string"`,
/// and no `null` default.
fn without_null(mut schema: Value) -> Value {
    if let Some(object) = schema.as_object_mut()
        && object.get("default") == Some(&Value::Null)
    {
        object.remove("default");
    }
    if let Some(Value::Array(types)) = schema.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            schema["type"] = only;
        }
    }
    schema
}

/// A handler argument's contribution to the document (most say nothing).
pub trait Input {
    fn document(_doc: &mut OperationDoc, _schemas: &mut Schemas) {}
}

/// A handler's return type's contribution: its success responses.
pub trait Reply {
    fn document(doc: &mut OperationDoc, schemas: &mut Schemas);
}

/// A handler whose argument and return types document it.
pub trait Documented<Args> {
    fn document(doc: &mut OperationDoc, schemas: &mut Schemas);
}

macro_rules! documented {
    ($($arg:ident),*) => {
        impl<F, Fut, R, $($arg,)*> Documented<($($arg,)*)> for F
        where
            F: FnOnce($($arg,)*) -> Fut,
            Fut: Future<Output = R>,
            R: Reply,
            $($arg: Input,)*
        {
            fn document(doc: &mut OperationDoc, schemas: &mut Schemas) {
                $(<$arg as Input>::document(doc, schemas);)*
                R::document(doc, schemas);
            }
        }
    };
}

documented!();
documented!(A1);
documented!(A1, A2);
documented!(A1, A2, A3);
documented!(A1, A2, A3, A4);
documented!(A1, A2, A3, A4, A5);

impl<S> Input for axum::extract::State<S> {}
impl<T> Input for axum::extract::Extension<T> {}
impl<T> Input for axum::extract::Path<T> {}
impl Input for axum::http::HeaderMap {}

impl<T: JsonSchema> Input for axum::extract::Query<T> {
    fn document(doc: &mut OperationDoc, _schemas: &mut Schemas) {
        doc.query_from::<T>();
    }
}

impl<T: Reply, E> Reply for Result<T, E> {
    fn document(doc: &mut OperationDoc, schemas: &mut Schemas) {
        T::document(doc, schemas);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Query parameters of the test below.
    #[derive(serde::Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Filters {
        /// Items to return.
        limit: Option<String>,
        /// Only this kind.
        #[serde(rename = "objectType")]
        object_type: String,
    }

    #[test]
    fn query_parameters_come_from_the_query_type() {
        let mut doc = OperationDoc::default();
        doc.query_from::<Filters>();
        assert_eq!(
            doc.query,
            [
                QueryParam {
                    name: "limit".into(),
                    description: Some("Items to return.".into()),
                    required: false,
                    schema: serde_json::json!({"type": "string"}),
                },
                QueryParam {
                    name: "objectType".into(),
                    description: Some("Only this kind.".into()),
                    required: true,
                    schema: serde_json::json!({"type": "string"}),
                },
            ]
        );
    }
}
