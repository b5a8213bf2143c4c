//! Argument-vector templates: how a command tool's argv is built from a step's arguments
//! without a shell.
//!
//! A template is a list of elements; each element is literal text with `{name}`
//! placeholders (`{{` and `}}` stand for literal braces). Rendering substitutes each
//! placeholder with the step's argument of that name and never splits or joins elements,
//! so an argument value is always exactly one argv element (or part of one), whatever
//! spaces, quotes or semicolons it contains.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::{Map, Value};

/// Why a template or a rendering is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("argv element {index} has an unclosed '{{'")]
    Unclosed { index: usize },
    #[error(
        "argv element {index} has a '}}' without a matching '{{' (write '}}}}' for a literal brace)"
    )]
    StrayClose { index: usize },
    #[error(
        "argv element {index} has an invalid placeholder name {name:?} (letters, digits and '_', not starting with a digit)"
    )]
    BadName { index: usize, name: String },
    #[error("argument {0:?} is required by the tool's argv template but missing")]
    Missing(String),
    #[error("argument {name:?} must be a string, number or boolean, not {found}")]
    NotScalar { name: String, found: &'static str },
    #[error("argument {0:?} contains a NUL byte, which cannot be passed to a program")]
    Nul(String),
    #[error("argument {0:?} is not used by the tool's argv template")]
    Unused(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Arg(String),
}

/// A parsed argv template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgvTemplate {
    elements: Vec<Vec<Piece>>,
}

impl ArgvTemplate {
    /// Parses the template's elements.
    pub fn parse<S: AsRef<str>>(elements: &[S]) -> Result<ArgvTemplate, TemplateError> {
        let elements = elements
            .iter()
            .enumerate()
            .map(|(index, element)| parse_element(index, element.as_ref()))
            .collect::<Result<_, _>>()?;
        Ok(ArgvTemplate { elements })
    }

    /// Every placeholder name, sorted.
    pub fn placeholders(&self) -> BTreeSet<&str> {
        self.elements
            .iter()
            .flatten()
            .filter_map(|piece| match piece {
                Piece::Arg(name) => Some(name.as_str()),
                Piece::Text(_) => None,
            })
            .collect()
    }

    /// The argv for these arguments. Every placeholder must have a scalar argument, and
    /// every argument must be used: an argument the template ignores is a sign the caller
    /// expects something the tool will not do, so it is refused rather than dropped.
    pub fn render(&self, args: &Map<String, Value>) -> Result<Vec<String>, TemplateError> {
        let used = self.placeholders();
        if let Some(unused) = args.keys().find(|k| !used.contains(k.as_str())) {
            return Err(TemplateError::Unused(unused.clone()));
        }
        self.elements
            .iter()
            .map(|pieces| {
                let mut out = String::new();
                for piece in pieces {
                    match piece {
                        Piece::Text(text) => out.push_str(text),
                        Piece::Arg(name) => out.push_str(&scalar(name, args.get(name))?),
                    }
                }
                Ok(out)
            })
            .collect()
    }
}

impl fmt::Display for ArgvTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, pieces) in self.elements.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            for piece in pieces {
                match piece {
                    Piece::Text(text) => {
                        f.write_str(&text.replace('{', "{{").replace('}', "}}"))?
                    }
                    Piece::Arg(name) => write!(f, "{{{name}}}")?,
                }
            }
        }
        Ok(())
    }
}

fn scalar(name: &str, value: Option<&Value>) -> Result<String, TemplateError> {
    let text = match value {
        None => return Err(TemplateError::Missing(name.to_owned())),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(other) => {
            return Err(TemplateError::NotScalar {
                name: name.to_owned(),
                found: match other {
                    Value::Null => "null",
                    Value::Array(_) => "an array",
                    _ => "an object",
                },
            });
        }
    };
    if text.contains('\0') {
        return Err(TemplateError::Nul(name.to_owned()));
    }
    Ok(text)
}

fn parse_element(index: usize, element: &str) -> Result<Vec<Piece>, TemplateError> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut chars = element.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                text.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                text.push('}');
            }
            '}' => return Err(TemplateError::StrayClose { index }),
            '{' => {
                let mut name = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some(c) => name.push(c),
                        None => return Err(TemplateError::Unclosed { index }),
                    }
                }
                if !valid_name(&name) {
                    return Err(TemplateError::BadName { index, name });
                }
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Arg(name));
            }
            c => text.push(c),
        }
    }
    if !text.is_empty() || pieces.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use serde_json::json;

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn renders_each_value_as_exactly_one_element() {
        let t =
            ArgvTemplate::parse(&["--out={path}", "{text}", "-n", "{count}", "{flag}"]).unwrap();
        assert_eq!(
            t.placeholders().into_iter().collect::<Vec<_>>(),
            ["count", "flag", "path", "text"]
        );
        let argv = t
            .render(&args(json!({
                "path": "a b.txt",
                "text": "x; rm -rf / && echo $HOME",
                "count": 3,
                "flag": true
            })))
            .unwrap();
        assert_eq!(
            argv,
            [
                "--out=a b.txt",
                "x; rm -rf / && echo $HOME",
                "-n",
                "3",
                "true"
            ]
        );
    }

    #[test]
    fn literal_braces_and_empty_elements() {
        let t = ArgvTemplate::parse(&["{{literal}}", "", "a{x}b"]).unwrap();
        assert_eq!(
            t.render(&args(json!({"x": "-"}))).unwrap(),
            ["{literal}", "", "a-b"]
        );
        assert_eq!(t.to_string(), "{{literal}}  a{x}b");
    }

    #[test]
    fn malformed_templates_are_refused() {
        assert_eq!(
            ArgvTemplate::parse(&["ok", "{open"]),
            Err(TemplateError::Unclosed { index: 1 })
        );
        assert_eq!(
            ArgvTemplate::parse(&["a}b"]),
            Err(TemplateError::StrayClose { index: 0 })
        );
        assert_eq!(
            ArgvTemplate::parse(&["{1x}"]),
            Err(TemplateError::BadName {
                index: 0,
                name: "1x".into()
            })
        );
        assert!(ArgvTemplate::parse(&["{}"]).is_err());
        assert!(ArgvTemplate::parse(&["{a b}"]).is_err());
    }

    #[test]
    fn arguments_must_fit_the_template() {
        let t = ArgvTemplate::parse(&["{path}"]).unwrap();
        assert_eq!(
            t.render(&args(json!({}))),
            Err(TemplateError::Missing("path".into()))
        );
        assert_eq!(
            t.render(&args(json!({"path": "x", "extra": "-rf"}))),
            Err(TemplateError::Unused("extra".into()))
        );
        assert_eq!(
            t.render(&args(json!({"path": ["a", "b"]}))),
            Err(TemplateError::NotScalar {
                name: "path".into(),
                found: "an array"
            })
        );
        assert_eq!(
            t.render(&args(json!({"path": null}))),
            Err(TemplateError::NotScalar {
                name: "path".into(),
                found: "null"
            })
        );
        assert_eq!(
            t.render(&args(json!({"path": "a\u{0}b"}))),
            Err(TemplateError::Nul("path".into()))
        );
    }
}
