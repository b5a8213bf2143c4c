//! A problem found in a JSON document, named by the JSON Pointer (RFC 6901) of the offending
//! value — the one shape every validation in the world kernel reports, so a caller (and a
//! model being corrected) always learns *where* as well as *what*.

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Problem {
    /// JSON Pointer into the document; `""` is the whole document.
    pub pointer: String,
    pub message: String,
}

impl Problem {
    pub fn new(pointer: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem {
            pointer: pointer.into(),
            message: message.into(),
        }
    }

    /// The same problem inside a document found at `prefix` of an outer one.
    pub fn under(mut self, prefix: &str) -> Problem {
        self.pointer = format!("{prefix}{}", self.pointer);
        self
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pointer = if self.pointer.is_empty() {
            "(document)"
        } else {
            &self.pointer
        };
        write!(f, "{pointer}: {}", self.message)
    }
}

/// Problems, one per line, for an error message.
pub struct Problems<'a>(pub &'a [Problem]);

impl fmt::Display for Problems<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, problem) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{problem}")?;
        }
        Ok(())
    }
}

/// Appends one reference token to a JSON Pointer, escaping `~` and `/` (RFC 6901 §3).
pub fn pointer_push(pointer: &str, token: &str) -> String {
    let escaped = token.replace('~', "~0").replace('/', "~1");
    format!("{pointer}/{escaped}")
}

/// The reference tokens of a JSON Pointer, unescaped; `None` if it is not a pointer (a
/// non-empty pointer starts with `/`, and `~` is only followed by `0` or `1`).
pub fn pointer_tokens(pointer: &str) -> Option<Vec<String>> {
    if pointer.is_empty() {
        return Some(Vec::new());
    }
    let rest = pointer.strip_prefix('/')?;
    rest.split('/')
        .map(|token| {
            let mut out = String::with_capacity(token.len());
            let mut chars = token.chars();
            while let Some(c) = chars.next() {
                if c == '~' {
                    match chars.next() {
                        Some('0') => out.push('~'),
                        Some('1') => out.push('/'),
                        _ => return None,
                    }
                } else {
                    out.push(c);
                }
            }
            Some(out)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_escape_and_unescape() {
        assert_eq!(pointer_push("/a", "b/c~d"), "/a/b~1c~0d");
        assert_eq!(
            pointer_tokens("/a/b~1c~0d"),
            Some(vec!["a".to_owned(), "b/c~d".to_owned()])
        );
        assert_eq!(pointer_tokens(""), Some(vec![]));
        assert_eq!(pointer_tokens("/"), Some(vec![String::new()]));
        assert_eq!(pointer_tokens("a/b"), None);
        assert_eq!(pointer_tokens("/a~2"), None);
        assert_eq!(pointer_tokens("/a~"), None);
    }

    #[test]
    fn display_names_the_place() {
        assert_eq!(
            Problem::new("/nodes/0/max_tool_calls", "is required").to_string(),
            "/nodes/0/max_tool_calls: is required"
        );
        assert_eq!(Problem::new("", "x").to_string(), "(document): x");
        assert_eq!(
            Problem::new("/id", "bad").under("/nodes/1").pointer,
            "/nodes/1/id"
        );
        let list = [Problem::new("/a", "x"), Problem::new("/b", "y")];
        assert_eq!(Problems(&list).to_string(), "/a: x; /b: y");
    }
}
