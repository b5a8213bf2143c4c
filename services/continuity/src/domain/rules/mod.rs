//! What the service's own rules (its 400s and hand-written 422s, after pydantic's 422s)
//! require of a request, said in JSON Schema for the OpenAPI document: the values a rule
//! accepts as field keywords (`pattern`, lengths), and rules across a model's fields (`anyOf`
//! of `required` sets, `if`/`then`) by model name. A client that writes what the document
//! says is not refused by these rules; each names the rule it states.

mod continuity;
mod coordination;

pub use continuity::*;
pub use coordination::*;

use serde_json::Value;

use super::schema::Model;

/// The rules across `model`'s fields, as subschemas its object schema must also match.
pub fn across_fields(model: &Model) -> Vec<Value> {
    let mut rules = continuity::continuity_rules(model);
    rules.extend(coordination::coordination_rules(model));
    rules
}
