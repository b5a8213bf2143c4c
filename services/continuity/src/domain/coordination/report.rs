//! pydantic v2's text for a `ValidationError` (`str(exc)`), which the original puts in a
//! 400's `detail` when a coordination query model refuses its parameters, and in a 500's
//! error detail when an artifact model refuses what the service built.

use super::super::context::render::py_repr;
use super::super::error::FieldError;
use super::super::json::Json;

/// The pydantic release whose error URLs the original's answers carry.
const PYDANTIC_DOCS: &str = "https://errors.pydantic.dev/2.14/v";

/// One error of a report.
pub struct Failure {
    /// The location, dotted (`shared_continuity.active_constraints`).
    pub loc: String,
    /// The message (`String should have at most 200 characters`).
    pub msg: String,
    /// The error type (`string_too_long`).
    pub kind: &'static str,
    /// The input, shown as Python's repr.
    pub input: Json,
    /// The input's Python type name (`str`, `list`, `dict`).
    pub input_type: &'static str,
}

impl Failure {
    /// An error the request-model interpreter found, located within its model.
    pub fn of(error: &FieldError) -> Failure {
        Failure {
            loc: error.loc.dotted(),
            msg: error.msg.clone(),
            kind: error.kind,
            input: error.input.clone(),
            input_type: py_type(&error.input),
        }
    }

    /// A string longer than `max` characters.
    pub fn string_too_long(loc: &str, value: &str, max: usize) -> Failure {
        Failure {
            loc: loc.to_owned(),
            msg: format!("String should have at most {max} characters"),
            kind: "string_too_long",
            input: Json::from(value),
            input_type: "str",
        }
    }

    /// A list with more than `max` items.
    pub fn list_too_long(loc: &str, items: &[String], max: usize) -> Failure {
        Failure {
            loc: loc.to_owned(),
            msg: format!(
                "List should have at most {max} items after validation, not {}",
                items.len()
            ),
            kind: "too_long",
            input: Json::Array(items.iter().map(|item| Json::from(item.as_str())).collect()),
            input_type: "list",
        }
    }
}

/// `N validation error(s) for <model>`, then per error its location, its message with type
/// and input, and the documentation link.
pub fn validation_error(model: &str, failures: &[Failure]) -> String {
    let mut text = format!(
        "{} validation error{} for {model}",
        failures.len(),
        if failures.len() == 1 { "" } else { "s" }
    );
    for failure in failures {
        text.push_str(&format!(
            "\n{}\n  {} [type={}, input_value={}, input_type={}]\n    \
             For further information visit {PYDANTIC_DOCS}/{}",
            failure.loc,
            failure.msg,
            failure.kind,
            shown(&py_repr(&failure.input)),
            failure.input_type,
            failure.kind,
        ));
    }
    text
}

/// An input's repr as pydantic shows it: over 50 bytes, the first 25 and last 24 bytes
/// (widened or narrowed to whole characters) around `...`.
pub fn shown(repr: &str) -> String {
    if repr.len() <= 50 {
        return repr.to_owned();
    }
    let mut head = 25;
    while !repr.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = repr.len() - 24;
    while !repr.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{}...{}", &repr[..head], &repr[tail..])
}

/// The Python type name of a JSON value as `json.loads` gives it.
pub fn py_type(value: &Json) -> &'static str {
    match value {
        Json::Null => "NoneType",
        Json::Bool(_) => "bool",
        Json::Number(n) if n.is_f64() => "float",
        Json::Number(_) => "int",
        Json::String(_) => "str",
        Json::Array(_) => "list",
        Json::Object(_) => "dict",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_reprs_are_cut_at_byte_offsets_on_character_boundaries() {
        let ascii = format!("'{}'", "p".repeat(201));
        assert_eq!(
            shown(&ascii),
            format!("'{}...{}'", "p".repeat(24), "p".repeat(23))
        );
        // 'é' is two bytes: 12 of them after the quote fill the 25 bytes exactly.
        let accents = format!("'{}{}'", "é".repeat(30), "x".repeat(180));
        assert_eq!(
            shown(&accents),
            format!("'{}...{}'", "é".repeat(12), "x".repeat(23))
        );
        // A four-byte character: the head ends before it, the tail starts after it.
        let emoji = format!("'{}'", "🙂".repeat(201));
        assert_eq!(
            shown(&emoji),
            format!("'{}...{}'", "🙂".repeat(6), "🙂".repeat(5))
        );
        assert_eq!(shown("'short'"), "'short'");
    }
}
