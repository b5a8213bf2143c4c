//! What a REST request passes on to the gRPC call made for it: the caller's own bearer
//! token (the gateway never substitutes a privileged one), and request bodies parsed
//! with the route's error conventions.

use axum::http::HeaderMap;
use noema_core::ErrorCode;
use serde::de::DeserializeOwned;

use crate::error::{ApiError, ErrorStyle};

/// A gRPC request carrying the REST caller's `Authorization` header.
pub fn grpc<T>(headers: &HeaderMap, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(value) = headers.get(axum::http::header::AUTHORIZATION)
        && let Ok(value) = tonic::metadata::MetadataValue::try_from(value.as_bytes())
    {
        request.metadata_mut().insert("authorization", value);
    }
    request
}

/// Parses a JSON body. Only the first JSON value counts and unknown fields are ignored,
/// as the seed systems do; a decode failure is `invalid JSON: …` (400), or 422 on
/// CogniRelay routes, whose framework answers malformed bodies with 422.
pub fn json_body<T: DeserializeOwned>(bytes: &[u8], style: ErrorStyle) -> Result<T, ApiError> {
    let mut stream = serde_json::Deserializer::from_slice(bytes).into_iter::<T>();
    let parsed = match stream.next() {
        Some(result) => result.map_err(|e| e.to_string()),
        None => Err("EOF".to_owned()),
    };
    parsed.map_err(|reason| match style {
        ErrorStyle::CogniRelay => ApiError::new(
            ErrorCode::FailedPrecondition,
            format!("invalid JSON: {reason}"),
        )
        .styled(style),
        _ => ApiError::bad_request(format!("invalid JSON: {reason}")).styled(style),
    })
}
