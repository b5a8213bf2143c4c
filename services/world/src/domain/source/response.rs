//! How a JSON source's answer becomes context: a 2xx status, a JSON body, and — when the
//! binding declares a result schema — a body that matches it (D3, D6, D18). Anything else is
//! a classified failure that fails the attempt before commit; an empty result that matches
//! its schema (`{"announcements": []}`) is a success like any other.

use serde_json::Value;

use crate::domain::failure::{Failure, FailureClass};
use crate::domain::invocation::{InvocationOutcome, ValidationStatus};
use crate::domain::problem::{Problem, Problems};
use crate::domain::schema::CompiledSchema;

use super::invoke::SourceOutput;

/// Longest body excerpt quoted in a failure message (the whole body is in the trace).
const EXCERPT_CHARS: usize = 200;

/// The verdict on a JSON source's answer: the outcome to record on its invocation, and the
/// JSON to inject — or why the answer is refused (which fails the attempt).
#[derive(Debug, Clone, PartialEq)]
pub struct JsonVerdict {
    pub outcome: InvocationOutcome,
    pub result: Result<Value, RefusedResponse>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedResponse {
    pub failure: Failure,
    /// Where the JSON broke its schema (`source_schema_invalid` only).
    pub violations: Vec<Problem>,
}

pub fn judge_json_response(
    output: &SourceOutput,
    result_schema: Option<&CompiledSchema>,
) -> JsonVerdict {
    let mut outcome = InvocationOutcome {
        response_json: None,
        response_text: Some(output.text.clone()),
        response_headers: output.headers.clone(),
        http_status: output.http_status,
        validation_status: None,
        model_output_kind: None,
    };
    let refuse = |outcome, class, message: String, violations| JsonVerdict {
        outcome,
        result: Err(RefusedResponse {
            failure: Failure::new(class, message),
            violations,
        }),
    };
    if let Some(status) = output.http_status
        && !(200..300).contains(&status)
    {
        return refuse(
            outcome,
            FailureClass::SourceHttpError,
            format!(
                "the source answered HTTP {status}: {}",
                excerpt(&output.text)
            ),
            Vec::new(),
        );
    }
    let json: Value = match serde_json::from_str(&output.text) {
        Ok(json) => json,
        Err(e) => {
            outcome.validation_status = Some(ValidationStatus::Invalid);
            return refuse(
                outcome,
                FailureClass::SourceInvalidJson,
                format!(
                    "the source's body is not JSON ({e}): {}",
                    excerpt(&output.text)
                ),
                Vec::new(),
            );
        }
    };
    outcome.response_json = Some(json.clone());
    let Some(schema) = result_schema else {
        outcome.validation_status = Some(ValidationStatus::NoSchema);
        return JsonVerdict {
            outcome,
            result: Ok(json),
        };
    };
    match schema.check(&json) {
        Ok(()) => {
            outcome.validation_status = Some(ValidationStatus::Valid);
            JsonVerdict {
                outcome,
                result: Ok(json),
            }
        }
        Err(violations) => {
            outcome.validation_status = Some(ValidationStatus::Invalid);
            let message = format!(
                "the source's JSON does not match its result schema {}: {}",
                schema.hash().short(),
                Problems(&violations)
            );
            refuse(
                outcome,
                FailureClass::SourceSchemaInvalid,
                message,
                violations,
            )
        }
    }
}

fn excerpt(text: &str) -> String {
    let mut out: String = text.chars().take(EXCERPT_CHARS).collect();
    if text.chars().count() > EXCERPT_CHARS {
        out.push('…');
    }
    if out.is_empty() {
        "(empty body)".to_owned()
    } else {
        out
    }
}
