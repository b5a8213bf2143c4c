//! What handlers return, each type documenting its own status and body: a JSON body is
//! written the Go way ([`GoJson`]), or as FastAPI writes it on CogniRelay's routes
//! ([`FastApiJson`]).

use axum::body::Body;
use axum::http::StatusCode;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use schemars::JsonSchema;
use serde::Serialize;

use crate::error::ApiError;
use crate::go_json::GoJson;
use crate::route::{OperationDoc, Reply, ResponseDoc, Schemas};

/// A handler's result: a body of type `T`, or a failure.
pub type Answer<T> = Result<GoJson<T>, ApiError>;

/// A handler's result that creates something (201).
pub type Creates<T> = Result<Created<T>, ApiError>;

impl<T: JsonSchema> Reply for GoJson<T> {
    fn document(doc: &mut OperationDoc, schemas: &mut Schemas) {
        doc.json_response::<T>(schemas, 200, "OK");
    }
}

/// A CogniRelay route's body as FastAPI writes it: compact, the fields in their declaration
/// order (the original's dict order), non-ASCII text as it is, no trailing newline.
pub struct FastApiJson<T>(pub T);

/// A CogniRelay route's result built by the gateway.
pub type FastApiAnswer<T> = Result<FastApiJson<T>, ApiError>;

impl<T: Serialize> IntoResponse for FastApiJson<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

impl<T: JsonSchema> Reply for FastApiJson<T> {
    fn document(doc: &mut OperationDoc, schemas: &mut Schemas) {
        doc.json_response::<T>(schemas, 200, "OK");
    }
}

/// 200 with a body that shared caches may keep for `max_age` seconds (MoltNet's public
/// routes: `Cache-Control: public, max-age=N`).
pub struct Cached<T> {
    pub max_age: u32,
    pub body: T,
}

/// A handler's result that may be cached publicly.
pub type CachedAnswer<T> = Result<Cached<T>, ApiError>;

impl<T: Serialize> IntoResponse for Cached<T> {
    fn into_response(self) -> Response {
        let cache = format!("public, max-age={}", self.max_age);
        ([(CACHE_CONTROL, cache)], GoJson(self.body)).into_response()
    }
}

impl<T: JsonSchema> Reply for Cached<T> {
    fn document(doc: &mut OperationDoc, schemas: &mut Schemas) {
        doc.json_response::<T>(schemas, 200, "OK");
    }
}

/// 201 with the created thing.
pub struct Created<T>(pub T);

impl<T: Serialize> IntoResponse for Created<T> {
    fn into_response(self) -> Response {
        (StatusCode::CREATED, GoJson(self.0)).into_response()
    }
}

impl<T: JsonSchema> Reply for Created<T> {
    fn document(doc: &mut OperationDoc, schemas: &mut Schemas) {
        doc.json_response::<T>(schemas, 201, "Created");
    }
}

/// 201 when the request created the thing, 200 when it existed already (idempotent
/// creation: the same agent key, the same relation).
pub struct CreatedOrFound<T> {
    pub created: bool,
    pub body: T,
}

impl<T: Serialize> IntoResponse for CreatedOrFound<T> {
    fn into_response(self) -> Response {
        let status = if self.created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        (status, GoJson(self.body)).into_response()
    }
}

impl<T: JsonSchema> Reply for CreatedOrFound<T> {
    fn document(doc: &mut OperationDoc, schemas: &mut Schemas) {
        doc.json_response::<T>(schemas, 201, "Created");
        doc.json_response::<T>(schemas, 200, "It existed already");
    }
}

/// 204 without a body.
pub struct NoContent;

impl IntoResponse for NoContent {
    fn into_response(self) -> Response {
        StatusCode::NO_CONTENT.into_response()
    }
}

impl Reply for NoContent {
    fn document(doc: &mut OperationDoc, _schemas: &mut Schemas) {
        doc.responses.push(ResponseDoc {
            status: 204,
            description: "Done",
            content: None,
        });
    }
}

/// Stored bytes, streamed with their own content type.
pub struct Payload {
    pub content_type: String,
    pub body: Body,
}

impl IntoResponse for Payload {
    fn into_response(self) -> Response {
        ([(CONTENT_TYPE, self.content_type)], self.body).into_response()
    }
}

impl Reply for Payload {
    fn document(doc: &mut OperationDoc, _schemas: &mut Schemas) {
        doc.responses.push(ResponseDoc {
            status: 200,
            description: "The bytes, with the content type they were stored with",
            content: Some((
                "application/octet-stream",
                serde_json::json!({"type": "string", "contentMediaType": "application/octet-stream"}),
            )),
        });
    }
}

/// Prometheus' text exposition format.
pub struct PrometheusText(pub String);

impl IntoResponse for PrometheusText {
    fn into_response(self) -> Response {
        (
            [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
            self.0,
        )
            .into_response()
    }
}

impl Reply for PrometheusText {
    fn document(doc: &mut OperationDoc, _schemas: &mut Schemas) {
        doc.responses.push(ResponseDoc {
            status: 200,
            description: "Metrics in Prometheus' text format",
            content: Some(("text/plain", serde_json::json!({"type": "string"}))),
        });
    }
}
