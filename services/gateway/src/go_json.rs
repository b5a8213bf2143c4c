//! JSON bodies written the way Go's `encoding/json` writes them, because open-cognition
//! clients compare bodies from a Go server: `<`, `>`, `&`, U+2028 and U+2029 escaped as
//! `\u003c`-style sequences, and a trailing newline.

use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

pub struct GoJson<T>(pub T);

/// Serialises like Go's encoder. The replaced characters can only occur inside JSON
/// strings, so rewriting the serialised text is exact.
pub fn to_go_json<T: Serialize>(value: &T) -> Result<String, serde_json::Error> {
    let text = serde_json::to_string(value)?;
    let mut out = String::with_capacity(text.len() + 1);
    for ch in text.chars() {
        match ch {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            other => out.push(other),
        }
    }
    out.push('\n');
    Ok(out)
}

impl<T: Serialize> IntoResponse for GoJson<T> {
    fn into_response(self) -> Response {
        match to_go_json(&self.0) {
            Ok(body) => ([(CONTENT_TYPE, "application/json")], body).into_response(),
            Err(err) => {
                tracing::error!(error = %err, "serialising a response failed");
                (
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    [(CONTENT_TYPE, "application/json")],
                    "{\"error\":\"internal error\",\"code\":\"internal\"}\n",
                )
                    .into_response()
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;

    /// The body's keys are in alphabetical order, as in MoltNet's and CogniRelay's bodies
    /// (and in every body the gateway used to build as a JSON map): serialising through a
    /// sorted map changes nothing.
    pub fn assert_sorted<T: Serialize>(body: &T) {
        let direct = serde_json::to_string(body).unwrap();
        let sorted = serde_json::to_string(&serde_json::to_value(body).unwrap()).unwrap();
        assert_eq!(direct, sorted);
    }

    #[test]
    fn escapes_like_go() {
        let text = to_go_json(&serde_json::json!({"a": "<b>&\u{2028}é"})).unwrap();
        assert_eq!(text, "{\"a\":\"\\u003cb\\u003e\\u0026\\u2028é\"}\n");
    }

    proptest::proptest! {
        #![proptest_config(crate::proptest_config())]

        /// Whatever a string holds, Go's escaping reads back as the same value, and none
        /// of the characters Go escapes is left literal.
        #[test]
        fn go_escaped_text_reads_back(s in proptest::prelude::any::<String>(), n in proptest::prelude::any::<i64>()) {
            let value = serde_json::json!({"s": s, "n": n, "list": [s]});
            let text = to_go_json(&value).unwrap();
            proptest::prop_assert!(text.ends_with('\n'));
            let escaped_by_go = ['<', '>', '&', '\u{2028}', '\u{2029}'];
            proptest::prop_assert!(!text.contains(escaped_by_go));
            proptest::prop_assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), value);
        }
    }
}
