//! Request-model validation with pydantic v2's rules and reports.
//!
//! The original declares its request bodies as pydantic models and FastAPI answers a body that
//! does not fit with 422 and every error pydantic found. This module is a small interpreter for
//! such declarations ([`Model`], [`Field`], [`Ty`]): it walks the body in field order, coerces
//! values the way pydantic's lax mode does (`"0.5"` → 0.5, `1.0` → 1, `"yes"` → true), drops
//! ignored extra keys, and reports each failure with pydantic's `type`, `msg` and `ctx`. Its
//! output is the coerced body, ready for serde into the typed models.

use super::error::{FieldError, Loc};
use super::json::{Json, JsonObject, py_float_repr};
use super::text::py_strip;

/// The type of one field, with its pydantic constraints.
#[derive(Debug)]
pub enum Ty {
    /// `str` with `min_length` (0 = none) and `max_length`.
    Str {
        min: usize,
        max: Option<usize>,
    },
    /// `float` with `ge`/`le`.
    Float {
        ge: Option<f64>,
        le: Option<f64>,
    },
    /// `int` with `ge`/`le`.
    Int {
        ge: Option<i64>,
        le: Option<i64>,
    },
    Bool,
    /// `Literal[...]` of strings.
    Literal(&'static [&'static str]),
    /// `List[item]` with `min_length`/`max_length`.
    List {
        item: &'static Ty,
        min: Option<usize>,
        max: Option<usize>,
    },
    /// `Dict[str, Any]`.
    Dict,
    /// `Any`.
    Any,
    /// A nested model.
    Model(&'static Model),
    /// `Optional[...]`: `null` accepted.
    Nullable(&'static Ty),
    /// `inner`, validated as such, with JSON Schema keywords for what the service's own rules
    /// (its 400s) go on to require of the value: a `pattern`, or `if`/`then` across a nested
    /// model's fields. Only the document reads them.
    Documented(&'static Ty, fn() -> serde_json::Value),
}

/// One model field; `required` fields have no default.
#[derive(Debug)]
pub struct Field {
    pub name: &'static str,
    pub ty: Ty,
    pub required: bool,
}

/// A pydantic model: its fields in declaration order, whether unknown keys are forbidden
/// (`extra="forbid"`; otherwise they are dropped) and an optional `model_validator(mode="after")`
/// returning the `ValueError` text.
#[derive(Debug)]
pub struct Model {
    pub name: &'static str,
    pub fields: &'static [Field],
    pub forbid_extra: bool,
    pub after: Option<fn(&JsonObject) -> Option<&'static str>>,
}

impl Model {
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// Validates a request body (FastAPI's `loc` root is `body`).
pub fn validate_body(model: &'static Model, body: &Json) -> Result<Json, Vec<FieldError>> {
    validate_at(model, body, &Loc::body())
}

/// Validates `input` against `model` with errors located under `loc`.
pub fn validate_at(
    model: &'static Model,
    input: &Json,
    loc: &Loc,
) -> Result<Json, Vec<FieldError>> {
    let mut errors = Vec::new();
    let out = validate(&Ty::Model(model), input, loc, &mut errors);
    match out {
        Some(value) if errors.is_empty() => Ok(value),
        _ => Err(errors),
    }
}

fn error(kind: &'static str, loc: &Loc, msg: impl Into<String>, input: &Json) -> FieldError {
    FieldError {
        kind,
        loc: loc.clone(),
        msg: msg.into(),
        input: input.clone(),
        ctx: Vec::new(),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// How pydantic prints a constraint number inside a message (`1.0` → `1`).
fn number_text(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e16 {
        format!("{}", x as i64)
    } else {
        py_float_repr(x)
    }
}

fn float_json(x: f64) -> Json {
    serde_json::Number::from_f64(x)
        .map(Json::Number)
        .unwrap_or(Json::Null)
}

fn validate(ty: &Ty, input: &Json, loc: &Loc, errors: &mut Vec<FieldError>) -> Option<Json> {
    match ty {
        Ty::Nullable(inner) => {
            if input.is_null() {
                Some(Json::Null)
            } else {
                validate(inner, input, loc, errors)
            }
        }
        Ty::Any => Some(input.clone()),
        Ty::Documented(inner, _) => validate(inner, input, loc, errors),
        Ty::Str { min, max } => {
            let Json::String(s) = input else {
                errors.push(error(
                    "string_type",
                    loc,
                    "Input should be a valid string",
                    input,
                ));
                return None;
            };
            let len = s.chars().count();
            if len < *min {
                let mut e = error(
                    "string_too_short",
                    loc,
                    format!(
                        "String should have at least {min} character{}",
                        plural(*min)
                    ),
                    input,
                );
                e.ctx.push(("min_length", Json::from(*min)));
                errors.push(e);
                return None;
            }
            if let Some(max) = max
                && len > *max
            {
                let mut e = error(
                    "string_too_long",
                    loc,
                    format!("String should have at most {max} character{}", plural(*max)),
                    input,
                );
                e.ctx.push(("max_length", Json::from(*max)));
                errors.push(e);
                return None;
            }
            Some(input.clone())
        }
        Ty::Literal(allowed) => match input {
            Json::String(s) if allowed.contains(&s.as_str()) => Some(input.clone()),
            _ => {
                let expected = literal_expected(allowed);
                let mut e = error(
                    "literal_error",
                    loc,
                    format!("Input should be {expected}"),
                    input,
                );
                e.ctx.push(("expected", Json::String(expected)));
                errors.push(e);
                None
            }
        },
        Ty::Bool => match coerce_bool(input) {
            Ok(b) => Some(Json::Bool(b)),
            Err(kind) => {
                let msg = if kind == "bool_type" {
                    "Input should be a valid boolean"
                } else {
                    "Input should be a valid boolean, unable to interpret input"
                };
                errors.push(error(kind, loc, msg, input));
                None
            }
        },
        Ty::Float { ge, le } => {
            let value = match coerce_float(input) {
                Ok(v) => v,
                Err(kind) => {
                    let msg = if kind == "float_type" {
                        "Input should be a valid number"
                    } else {
                        "Input should be a valid number, unable to parse string as a number"
                    };
                    errors.push(error(kind, loc, msg, input));
                    return None;
                }
            };
            if let Some(ge) = ge
                && value
                    .partial_cmp(ge)
                    .is_none_or(|o| o == std::cmp::Ordering::Less)
            {
                let mut e = error(
                    "greater_than_equal",
                    loc,
                    format!(
                        "Input should be greater than or equal to {}",
                        number_text(*ge)
                    ),
                    input,
                );
                e.ctx.push(("ge", float_json(*ge)));
                errors.push(e);
                return None;
            }
            if let Some(le) = le
                && value
                    .partial_cmp(le)
                    .is_none_or(|o| o == std::cmp::Ordering::Greater)
            {
                let mut e = error(
                    "less_than_equal",
                    loc,
                    format!("Input should be less than or equal to {}", number_text(*le)),
                    input,
                );
                e.ctx.push(("le", float_json(*le)));
                errors.push(e);
                return None;
            }
            Some(float_json(value))
        }
        Ty::Int { ge, le } => {
            let value = match coerce_int(input) {
                Ok(v) => v,
                Err(kind) => {
                    let msg = match kind {
                        "int_type" => "Input should be a valid integer",
                        "int_from_float" => {
                            "Input should be a valid integer, got a number with a fractional part"
                        }
                        "int_parsing_size" => {
                            "Unable to parse input string as an integer, exceeded maximum size"
                        }
                        _ => {
                            "Input should be a valid integer, unable to parse string as an integer"
                        }
                    };
                    errors.push(error(kind, loc, msg, input));
                    return None;
                }
            };
            if let Some(ge) = ge
                && value < *ge
            {
                let mut e = error(
                    "greater_than_equal",
                    loc,
                    format!("Input should be greater than or equal to {ge}"),
                    input,
                );
                e.ctx.push(("ge", Json::from(*ge)));
                errors.push(e);
                return None;
            }
            if let Some(le) = le
                && value > *le
            {
                let mut e = error(
                    "less_than_equal",
                    loc,
                    format!("Input should be less than or equal to {le}"),
                    input,
                );
                e.ctx.push(("le", Json::from(*le)));
                errors.push(e);
                return None;
            }
            Some(Json::from(value))
        }
        Ty::Dict => match input {
            Json::Object(_) => Some(input.clone()),
            _ => {
                errors.push(error(
                    "dict_type",
                    loc,
                    "Input should be a valid dictionary",
                    input,
                ));
                None
            }
        },
        Ty::List { item, min, max } => {
            let Json::Array(items) = input else {
                errors.push(error(
                    "list_type",
                    loc,
                    "Input should be a valid list",
                    input,
                ));
                return None;
            };
            // pydantic stops at the first item past `max_length` and reports only that.
            if let Some(max) = max
                && items.len() > *max
            {
                let mut e = error(
                    "too_long",
                    loc,
                    format!(
                        "List should have at most {max} item{} after validation, not {}",
                        plural(*max),
                        items.len()
                    ),
                    input,
                );
                e.ctx.push(("field_type", Json::from("List")));
                e.ctx.push(("max_length", Json::from(*max)));
                e.ctx.push(("actual_length", Json::from(items.len())));
                errors.push(e);
                return None;
            }
            let before = errors.len();
            let mut out = Vec::with_capacity(items.len());
            for (i, element) in items.iter().enumerate() {
                if let Some(v) = validate(item, element, &loc.index(i), errors) {
                    out.push(v);
                }
            }
            if errors.len() != before {
                return None;
            }
            if let Some(min) = min
                && items.len() < *min
            {
                let mut e = error(
                    "too_short",
                    loc,
                    format!(
                        "List should have at least {min} item{} after validation, not {}",
                        plural(*min),
                        items.len()
                    ),
                    input,
                );
                e.ctx.push(("field_type", Json::from("List")));
                e.ctx.push(("min_length", Json::from(*min)));
                e.ctx.push(("actual_length", Json::from(items.len())));
                errors.push(e);
                return None;
            }
            Some(Json::Array(out))
        }
        Ty::Model(model) => {
            let Json::Object(object) = input else {
                errors.push(error(
                    "model_attributes_type",
                    loc,
                    "Input should be a valid dictionary or object to extract fields from",
                    input,
                ));
                return None;
            };
            let before = errors.len();
            let mut out = JsonObject::new();
            for field in model.fields {
                match object.get(field.name) {
                    Some(value) => {
                        if let Some(v) = validate(&field.ty, value, &loc.key(field.name), errors) {
                            out.insert(field.name, v);
                        }
                    }
                    None if field.required => {
                        errors.push(error(
                            "missing",
                            &loc.key(field.name),
                            "Field required",
                            input,
                        ));
                    }
                    None => {}
                }
            }
            if model.forbid_extra {
                for (key, value) in object.iter() {
                    if model.field(key).is_none() {
                        errors.push(error(
                            "extra_forbidden",
                            &loc.key(key),
                            "Extra inputs are not permitted",
                            value,
                        ));
                    }
                }
            }
            if errors.len() != before {
                return None;
            }
            if let Some(check) = model.after
                && let Some(message) = check(&out)
            {
                let mut e = error("value_error", loc, format!("Value error, {message}"), input);
                e.ctx.push(("error", Json::Object(JsonObject::new())));
                errors.push(e);
                return None;
            }
            Some(Json::Object(out))
        }
    }
}

/// pydantic's `expected` text: `'a'`, `'a' or 'b'`, `'a', 'b' or 'c'`.
fn literal_expected(allowed: &[&str]) -> String {
    let quoted: Vec<String> = allowed.iter().map(|a| format!("'{a}'")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

fn coerce_bool(input: &Json) -> Result<bool, &'static str> {
    match input {
        Json::Bool(b) => Ok(*b),
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                match i {
                    0 => Ok(false),
                    1 => Ok(true),
                    _ => Err("bool_parsing"),
                }
            } else if let Some(f) = n.as_f64() {
                if f == 0.0 {
                    Ok(false)
                } else if f == 1.0 {
                    Ok(true)
                } else if f.fract() == 0.0 {
                    Err("bool_parsing")
                } else {
                    Err("bool_type")
                }
            } else {
                Err("bool_parsing")
            }
        }
        Json::String(s) => match s.to_ascii_lowercase().as_str() {
            "0" | "off" | "f" | "false" | "n" | "no" => Ok(false),
            "1" | "on" | "t" | "true" | "y" | "yes" => Ok(true),
            _ => Err("bool_parsing"),
        },
        _ => Err("bool_type"),
    }
}

/// Python's `float(str)` digits: underscores only between digits.
fn strip_underscores(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    for (i, c) in chars.iter().enumerate() {
        if *c == '_' {
            let before = i > 0 && chars[i - 1].is_ascii_digit();
            let after = chars.get(i + 1).is_some_and(|c| c.is_ascii_digit());
            if !(before && after) {
                return None;
            }
        } else {
            out.push(*c);
        }
    }
    Some(out)
}

fn coerce_float(input: &Json) -> Result<f64, &'static str> {
    match input {
        Json::Bool(b) => Ok(if *b { 1.0 } else { 0.0 }),
        Json::Number(n) => n.as_f64().ok_or("float_type"),
        Json::String(s) => {
            let text = strip_underscores(py_strip(s)).ok_or("float_parsing")?;
            let valid = !text.is_empty()
                && text
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-'));
            if !valid {
                return Err("float_parsing");
            }
            text.parse::<f64>().map_err(|_| "float_parsing")
        }
        _ => Err("float_type"),
    }
}

fn coerce_int(input: &Json) -> Result<i64, &'static str> {
    match input {
        Json::Bool(b) => Ok(i64::from(*b)),
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                Ok(i)
            } else if n.as_u64().is_some() {
                Err("int_parsing_size")
            } else {
                let f = n.as_f64().ok_or("int_type")?;
                if f.fract() != 0.0 {
                    Err("int_from_float")
                } else if f.abs() >= 9.223_372_036_854_776e18 {
                    Err("int_parsing_size")
                } else {
                    Ok(f as i64)
                }
            }
        }
        Json::String(s) => {
            let text = strip_underscores(py_strip(s)).ok_or("int_parsing")?;
            let (sign, digits) = match text.strip_prefix('-') {
                Some(rest) => (-1i64, rest),
                None => (1, text.strip_prefix('+').unwrap_or(&text)),
            };
            // "5.0" and "5.000" are integers to pydantic; "5.5" is not.
            let whole = match digits.split_once('.') {
                Some((whole, zeros)) if zeros.chars().all(|c| c == '0') => whole,
                Some(_) => return Err("int_parsing"),
                None => digits,
            };
            if whole.is_empty() || !whole.chars().all(|c| c.is_ascii_digit()) {
                return Err("int_parsing");
            }
            whole
                .parse::<i64>()
                .map(|v| sign * v)
                .map_err(|_| "int_parsing_size")
        }
        _ => Err("int_type"),
    }
}

/// A number type with its inclusive bounds, where it has them.
fn bounded(
    kind: &str,
    minimum: Option<serde_json::Value>,
    maximum: Option<serde_json::Value>,
) -> serde_json::Value {
    let mut schema = serde_json::json!({ "type": kind });
    if let Some(minimum) = minimum {
        schema["minimum"] = minimum;
    }
    if let Some(maximum) = maximum {
        schema["maximum"] = maximum;
    }
    schema
}

/// An integer field's JSON number, bounded by its `ge`/`le` or else by `i64`'s range (an
/// integer past it is `int_parsing_size` here), without the lax booleans [`json_schema`]
/// adds for a body: a query parameter's, where `true` is text, not an integer.
pub fn integer_schema(ge: Option<i64>, le: Option<i64>) -> serde_json::Value {
    bounded(
        "integer",
        Some(serde_json::json!(ge.unwrap_or(i64::MIN))),
        Some(serde_json::json!(le.unwrap_or(i64::MAX))),
    )
}

/// `number` or the booleans pydantic's lax numbers read as 0 and 1 (`false`, `true`), each
/// where `admits` takes its number.
fn or_lax_flags(number: serde_json::Value, admits: impl Fn(bool) -> bool) -> serde_json::Value {
    let flags: Vec<bool> = [false, true]
        .into_iter()
        .filter(|flag| admits(*flag))
        .collect();
    if flags.is_empty() {
        number
    } else {
        serde_json::json!({"anyOf": [number, {"enum": flags}]})
    }
}

/// The JSON Schema (2020-12) of what `ty` accepts without coercion: the document a client
/// reads to write a body this module accepts. pydantic's lax mode accepts more (numbers as
/// strings, `"yes"` as true); the schema names the plain form. A nested model is whatever
/// `reference` makes of it (a `$ref` to a shared definition, for the OpenAPI document); a
/// model validator's cross-field rule has no JSON Schema and is left to the 422.
pub fn json_schema(
    ty: &Ty,
    reference: &mut dyn FnMut(&'static Model) -> serde_json::Value,
) -> serde_json::Value {
    use serde_json::json;
    match ty {
        Ty::Str { min, max } => {
            let mut schema = json!({"type": "string"});
            if *min > 0 {
                schema["minLength"] = json!(min);
            }
            if let Some(max) = max {
                schema["maxLength"] = json!(max);
            }
            schema
        }
        // (A float is never a query parameter, where the words would be text.)
        Ty::Float { ge, le } => or_lax_flags(
            bounded("number", ge.map(|v| json!(v)), le.map(|v| json!(v))),
            |flag| {
                let x = f64::from(u8::from(flag));
                ge.is_none_or(|ge| x >= ge) && le.is_none_or(|le| x <= le)
            },
        ),
        Ty::Int { ge, le } => {
            let (min, max) = (ge.unwrap_or(i64::MIN), le.unwrap_or(i64::MAX));
            or_lax_flags(integer_schema(*ge, *le), |flag| {
                (min..=max).contains(&i64::from(flag))
            })
        }
        // pydantic's lax booleans: 0/1 and these words (in any case) are read as booleans.
        Ty::Bool => json!({"anyOf": [
            {"type": "boolean"},
            {"enum": [0, 1, "0", "1", "false", "true", "f", "t", "no", "yes", "n", "y", "off", "on"]}
        ]}),
        Ty::Literal(allowed) => json!({"type": "string", "enum": allowed}),
        Ty::List { item, min, max } => {
            let mut schema = json!({"type": "array", "items": json_schema(item, reference)});
            if let Some(min) = min {
                schema["minItems"] = json!(min);
            }
            if let Some(max) = max {
                schema["maxItems"] = json!(max);
            }
            schema
        }
        Ty::Dict => json!({"type": "object"}),
        Ty::Any => json!({}),
        Ty::Model(model) => reference(model),
        Ty::Nullable(inner) => json!({"anyOf": [json_schema(inner, reference), {"type": "null"}]}),
        Ty::Documented(inner, keywords) => {
            let mut schema = json_schema(inner, reference);
            // A `$ref` takes no sibling keywords in every reader: the rules join it.
            if schema.get("$ref").is_some() {
                schema = json!({"allOf": [schema]});
            }
            if let (Some(schema), serde_json::Value::Object(keywords)) =
                (schema.as_object_mut(), keywords())
            {
                schema.extend(keywords);
            }
            schema
        }
    }
}

impl Model {
    /// This model's own JSON Schema: an object with its fields, the required ones listed,
    /// unknown keys refused where the model forbids them ([`json_schema`] for the rest).
    pub fn object_schema(
        &self,
        reference: &mut dyn FnMut(&'static Model) -> serde_json::Value,
    ) -> serde_json::Value {
        let mut properties = serde_json::Map::new();
        let mut required = Vec::new();
        for field in self.fields {
            properties.insert(field.name.to_owned(), json_schema(&field.ty, reference));
            if field.required {
                required.push(serde_json::Value::from(field.name));
            }
        }
        let mut schema = serde_json::json!({"type": "object", "properties": properties});
        if !required.is_empty() {
            schema["required"] = serde_json::Value::Array(required);
        }
        if self.forbid_extra {
            schema["additionalProperties"] = serde_json::Value::Bool(false);
        }
        let rules = super::rules::across_fields(self);
        if !rules.is_empty() {
            schema["allOf"] = serde_json::Value::Array(rules);
        }
        schema
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    static PROBE_FIELDS: [Field; 3] = [
        Field {
            name: "n",
            ty: Ty::Int {
                ge: Some(1),
                le: Some(200),
            },
            required: false,
        },
        Field {
            name: "f",
            ty: Ty::Float {
                ge: Some(0.0),
                le: Some(1.0),
            },
            required: false,
        },
        Field {
            name: "b",
            ty: Ty::Bool,
            required: false,
        },
    ];
    static PROBE: Model = Model {
        name: "Probe",
        fields: &PROBE_FIELDS,
        forbid_extra: false,
        after: None,
    };

    fn one(field: &str, value: Json) -> Result<Json, (&'static str, String)> {
        let mut body = JsonObject::new();
        body.insert(field, value);
        match validate_body(&PROBE, &Json::Object(body)) {
            Ok(out) => Ok(out.get(field).cloned().unwrap_or(Json::Null)),
            Err(errors) => Err((errors[0].kind, errors[0].msg.clone())),
        }
    }

    fn j(text: &str) -> Json {
        Json::parse(text.as_bytes()).unwrap()
    }

    /// Coercions and error types as pydantic 2.14 (`TypeAdapter(int|float|bool)`) reports them.
    #[test]
    fn lax_coercion_follows_pydantic() {
        let ok: &[(&str, &str, &str)] = &[
            ("n", r#"" 5 ""#, "5"),
            ("n", r#""5.0""#, "5"),
            ("n", r#""+5""#, "5"),
            ("n", r#""1_0""#, "10"),
            ("n", "true", "1"),
            ("n", "5.0", "5"),
            ("n", r#""00012""#, "12"),
            ("f", r#"" 0.5 ""#, "0.5"),
            ("f", "true", "1.0"),
            ("f", "1", "1.0"),
            ("f", r#""1e-1""#, "0.1"),
            ("b", r#""YES""#, "true"),
            ("b", r#""off""#, "false"),
            ("b", "1", "true"),
            ("b", "0.0", "false"),
            ("b", r#""t""#, "true"),
        ];
        for (field, input, want) in ok {
            let got = one(field, j(input)).unwrap_or_else(|e| panic!("{field}={input}: {e:?}"));
            assert_eq!(
                super::super::json::to_py_json(&got),
                *want,
                "{field}={input}"
            );
        }
        let bad: &[(&str, &str, &str)] = &[
            ("n", r#""5.5""#, "int_parsing"),
            ("n", r#""1e3""#, "int_parsing"),
            ("n", "5.5", "int_from_float"),
            ("n", "1e20", "int_parsing_size"),
            ("n", "null", "int_type"),
            ("n", "[1]", "int_type"),
            ("n", "0", "greater_than_equal"),
            ("n", "201", "less_than_equal"),
            ("f", r#""0x10""#, "float_parsing"),
            ("f", r#""""#, "float_parsing"),
            ("f", "null", "float_type"),
            ("f", "2", "less_than_equal"),
            ("f", "-0.5", "greater_than_equal"),
            ("b", "2", "bool_parsing"),
            ("b", "5.0", "bool_parsing"),
            ("b", "1.5", "bool_type"),
            ("b", r#""maybe""#, "bool_parsing"),
            ("b", "null", "bool_type"),
        ];
        for (field, input, want) in bad {
            let got = one(field, j(input));
            assert_eq!(got.map_err(|e| e.0), Err(*want), "{field}={input}");
        }
    }

    #[test]
    fn literal_texts_join_like_pydantic() {
        assert_eq!(literal_expected(&["startup"]), "'startup'");
        assert_eq!(literal_expected(&["a", "b"]), "'a' or 'b'");
        assert_eq!(
            literal_expected(&["user", "peer", "thread", "task"]),
            "'user', 'peer', 'thread' or 'task'"
        );
    }

    #[test]
    fn the_json_schema_names_the_fields_and_their_limits() {
        let schema = PROBE.object_schema(&mut |model| serde_json::json!({"$ref": model.name}));
        assert_eq!(schema["type"], "object");
        assert_eq!(
            schema["properties"]["b"]["anyOf"][0],
            serde_json::json!({"type": "boolean"})
        );
        assert_eq!(schema["properties"]["b"]["anyOf"][1]["enum"][0], 0);
        assert_eq!(
            schema["properties"]["f"],
            serde_json::json!({"anyOf": [
                {"type": "number", "minimum": 0.0, "maximum": 1.0},
                {"enum": [false, true]}
            ]})
        );
        static NESTED: Ty = Ty::Nullable(&Ty::List {
            item: &Ty::Model(&PROBE),
            min: Some(1),
            max: Some(3),
        });
        assert_eq!(
            json_schema(
                &NESTED,
                &mut |model| serde_json::json!({"$ref": model.name})
            ),
            serde_json::json!({"anyOf": [
                {"type": "array", "items": {"$ref": "Probe"}, "minItems": 1, "maxItems": 3},
                {"type": "null"}
            ]})
        );
    }
}
