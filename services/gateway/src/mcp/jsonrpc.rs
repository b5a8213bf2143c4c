//! The JSON-RPC envelope checks the SDK's transport does not make the way the
//! specifications ask, made before a message reaches it: an unparsable body is a Parse
//! error (-32700) and a message that is no JSON-RPC 2.0 request, notification or response
//! an Invalid Request (-32600), both as a JSON-RPC error in a 400 (the transport would
//! answer 415 with text); `tools/call` without a tool name and `tools/list` with a
//! non-string cursor are Invalid params (-32602; the transport would call them unknown
//! methods). And a batch (a JSON array) is split into single messages for a 2025-03-26
//! client, the one revision of streamable HTTP that allows batches; later revisions
//! forbid them, so theirs is refused as an Invalid Request.

use serde_json::{Value, json};

/// JSON-RPC's error codes used here.
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;

/// The protocol revision whose clients may send batches (and the one a server assumes
/// when a request carries no `MCP-Protocol-Version` header).
pub const BATCH_REVISION: &str = "2025-03-26";

/// A JSON-RPC error response (`id` null when the message had none or was unreadable).
pub fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// Whether a client speaking `revision` (its `MCP-Protocol-Version`, if it sent one) may
/// send a batch.
pub fn batches_allowed(revision: Option<&str>) -> bool {
    revision.is_none_or(|revision| revision == BATCH_REVISION)
}

/// Checks one message (not a batch): `Err` is the error response to send in its place.
pub fn check(message: &Value) -> Result<(), Value> {
    let Value::Object(fields) = message else {
        return Err(error(
            Value::Null,
            INVALID_REQUEST,
            "Invalid Request: not a JSON-RPC message",
        ));
    };
    let id = fields.get("id").cloned().unwrap_or(Value::Null);
    let invalid = |message: &str| Err(error(id.clone(), INVALID_REQUEST, message));
    if fields.get("jsonrpc") != Some(&Value::from("2.0")) {
        return invalid("Invalid Request: jsonrpc must be \"2.0\"");
    }
    let readable_id = match fields.get("id") {
        None | Some(Value::String(_)) => true,
        Some(Value::Number(number)) => integer_id(number).is_some(),
        Some(_) => false,
    };
    if !readable_id {
        return invalid("Invalid Request: id must be a string or an integer");
    }
    let method = match fields.get("method") {
        Some(Value::String(method)) => method.as_str(),
        Some(_) => return invalid("Invalid Request: method must be a string"),
        None if fields.contains_key("result") || fields.contains_key("error") => return Ok(()),
        None => return invalid("Invalid Request: no method"),
    };
    let params = fields.get("params");
    // JSON-RPC also allows params by position (an array); every MCP message names them.
    if !matches!(params, None | Some(Value::Object(_))) {
        return invalid("Invalid Request: params must be an object");
    }
    let invalid_params = |message: &str| Err(error(id.clone(), INVALID_PARAMS, message));
    match method {
        "tools/call"
            if !params
                .and_then(|p| p.get("name"))
                .is_some_and(Value::is_string) =>
        {
            invalid_params("Invalid params: tools/call needs the tool's name")
        }
        "tools/call"
            if !matches!(
                params.and_then(|p| p.get("arguments")),
                None | Some(Value::Null | Value::Object(_))
            ) =>
        {
            invalid_params("Invalid params: arguments must be an object")
        }
        "tools/list"
            if !matches!(
                params.and_then(|p| p.get("cursor")),
                None | Some(Value::Null | Value::String(_))
            ) =>
        {
            invalid_params("Invalid params: cursor must be a string")
        }
        _ => Ok(()),
    }
}

/// A numeric request id as the SDK reads it: an integer in `i64`'s range, also one written
/// as a float (`1.0`, the same JSON number) within ±2^53, where a float is exact (beyond,
/// `-9223372036854775809` would round into range).
fn integer_id(number: &serde_json::Number) -> Option<i64> {
    if let Some(id) = number.as_i64() {
        return Some(id);
    }
    const TWO_POW_53: f64 = 9_007_199_254_740_992.0;
    let id = number.as_f64()?;
    #[allow(clippy::cast_possible_truncation)]
    (id.fract() == 0.0 && id.abs() < TWO_POW_53).then_some(id as i64)
}

/// Rewrites a checked message's id written as a float (`1.0`) as the integer the SDK
/// reads, and says whether it did; the answer then carries the id as `1`.
pub fn normalise_id(message: &mut Value) -> bool {
    match message.get_mut("id") {
        Some(id @ Value::Number(_)) => {
            let integer = id.as_number().filter(|n| !n.is_i64()).and_then(integer_id);
            integer.is_some_and(|integer| {
                *id = Value::from(integer);
                true
            })
        }
        _ => false,
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    fn code(result: Result<(), Value>) -> Option<i64> {
        result.err().and_then(|e| e["error"]["code"].as_i64())
    }

    #[test]
    fn requests_notifications_and_responses_pass() {
        for message in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": "a", "method": "tools/list", "params": {"cursor": "5"}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "x"}}),
            json!({"jsonrpc": "2.0", "id": 3, "result": {}}),
        ] {
            assert_eq!(check(&message), Ok(()), "{message}");
        }
    }

    #[test]
    fn malformed_envelopes_are_invalid_requests_with_their_id() {
        let cases = [
            (
                json!({"jsonrpc": "1.0", "id": 1, "method": "ping"}),
                json!(1),
            ),
            (json!({"id": 2, "method": "ping"}), json!(2)),
            (json!({"jsonrpc": "2.0", "id": 3}), json!(3)),
            (json!({"jsonrpc": "2.0", "id": 4, "method": 7}), json!(4)),
            (
                json!({"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}),
                json!({"x": 1}),
            ),
            (
                json!({"jsonrpc": "2.0", "id": 5, "method": "ping", "params": 3}),
                json!(5),
            ),
            (
                json!({"jsonrpc": "2.0", "id": 6, "method": "ping", "params": [1]}),
                json!(6),
            ),
            (json!("ping"), Value::Null),
            (
                json!({"jsonrpc": "2.0", "id": 2.5, "method": "ping"}),
                json!(2.5),
            ),
            (
                json!({"jsonrpc": "2.0", "id": 1e300, "method": "ping"}),
                json!(1e300),
            ),
            (
                json!({"jsonrpc": "2.0", "id": -9.223_372_036_854_776e18, "method": "ping"}),
                json!(-9.223_372_036_854_776e18),
            ),
        ];
        for (message, id) in cases {
            let err = check(&message).expect_err(&message.to_string());
            assert_eq!(err["error"]["code"], INVALID_REQUEST, "{message}");
            assert_eq!(err["id"], id, "{message}");
        }
    }

    #[test]
    fn an_integer_id_written_as_a_float_is_read_as_the_integer() {
        let mut message = json!({"jsonrpc": "2.0", "id": 7.0, "method": "ping"});
        assert_eq!(check(&message), Ok(()));
        assert!(normalise_id(&mut message));
        assert_eq!(message["id"], json!(7));
        assert_eq!(message["id"].to_string(), "7");
        for id in [json!(7), json!("7"), json!(-3)] {
            let mut message = json!({"jsonrpc": "2.0", "id": id, "method": "ping"});
            assert_eq!(check(&message), Ok(()));
            assert!(!normalise_id(&mut message));
            assert_eq!(message["id"], id);
        }
    }

    #[test]
    fn tool_methods_with_bad_params_are_invalid_params() {
        for message in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": 3}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "x", "arguments": [1]}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": 50}}),
        ] {
            assert_eq!(code(check(&message)), Some(INVALID_PARAMS), "{message}");
        }
    }

    #[test]
    fn only_2025_03_26_clients_batch() {
        assert!(batches_allowed(None));
        assert!(batches_allowed(Some("2025-03-26")));
        assert!(!batches_allowed(Some("2025-06-18")));
        assert!(!batches_allowed(Some("2025-11-25")));
    }
}
