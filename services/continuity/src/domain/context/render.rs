//! The retrieve token estimate (digest §10.1): `ceil(len(render(value)) / 4)`.
//!
//! The original renders a value for token accounting with Python's own text forms: a dict is
//! `key: <render(value)>` lines, a list is `- <str(item)>` lines and anything else is `str(v)`.
//! List items go through `str()`, so a nested dict or list inside a list is its Python `repr`
//! (`{'a': 1, 'b': True}`, `['x', None]`), and every budget decision depends on those lengths;
//! this module reproduces them exactly, Python's quote choice and escapes included.

use unicode_general_category::{GeneralCategory, get_general_category};

use crate::domain::json::{Json, py_float_repr};

/// The original's token estimate of a value: `ceil(len(render(value)) / 4)` in code points.
pub fn estimate_tokens(value: &Json) -> i64 {
    tokens_of_len(render(value).chars().count())
}

/// The token estimate of a rendered text of `chars` code points.
pub fn tokens_of_len(chars: usize) -> i64 {
    chars.div_ceil(4) as i64
}

/// `_render_value`: dicts as `key: value` lines, lists as `- item` lines, scalars as `str`.
pub fn render(value: &Json) -> String {
    let mut out = String::new();
    render_into(value, &mut out);
    out
}

fn render_into(value: &Json, out: &mut String) {
    match value {
        Json::Object(object) => {
            for (i, (key, item)) in object.iter().enumerate() {
                if i > 0 {
                    out.push('\n');
                }
                out.push_str(key);
                out.push_str(": ");
                render_into(item, out);
            }
        }
        Json::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push('\n');
                }
                out.push_str("- ");
                py_str_into(item, out);
            }
        }
        scalar => py_str_into(scalar, out),
    }
}

/// Python's `str(value)` of a JSON value as `json.loads` builds it.
pub fn py_str(value: &Json) -> String {
    let mut out = String::new();
    py_str_into(value, &mut out);
    out
}

fn py_str_into(value: &Json, out: &mut String) {
    match value {
        Json::String(s) => out.push_str(s),
        other => py_repr_into(other, out),
    }
}

/// Python's `repr(value)`.
pub fn py_repr(value: &Json) -> String {
    let mut out = String::new();
    py_repr_into(value, &mut out);
    out
}

fn py_repr_into(value: &Json, out: &mut String) {
    match value {
        Json::Null => out.push_str("None"),
        Json::Bool(true) => out.push_str("True"),
        Json::Bool(false) => out.push_str("False"),
        Json::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => out.push_str(&i.to_string()),
            (None, Some(u), _) => out.push_str(&u.to_string()),
            (None, None, Some(f)) => out.push_str(&py_float_repr(f)),
            _ => out.push_str(&n.to_string()),
        },
        Json::String(s) => py_str_repr_into(s, out),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_repr_into(item, out);
            }
            out.push(']');
        }
        Json::Object(object) => {
            out.push('{');
            for (i, (key, item)) in object.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_str_repr_into(key, out);
                out.push_str(": ");
                py_repr_into(item, out);
            }
            out.push('}');
        }
    }
}

/// Python's `repr(str)`: single quotes unless the text has a `'` and no `"`; backslash, the
/// quote, `\t \n \r` escaped; other non-printable characters as `\xhh`, `\uhhhh`, `\Uhhhhhhhh`.
fn py_str_repr_into(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if (c as u32) < 0x7f => out.push(c),
            c if py_isprintable(c) => out.push(c),
            c if (c as u32) <= 0xff => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) <= 0xffff => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push(quote);
}

/// `str.isprintable` for one character: not in Other (Cc, Cf, Cs, Co, Cn) or Separator
/// (Zl, Zp, Zs), the ASCII space excepted.
fn py_isprintable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    !matches!(
        get_general_category(c),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::Surrogate
            | GeneralCategory::PrivateUse
            | GeneralCategory::Unassigned
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
            | GeneralCategory::SpaceSeparator
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn json(text: &str) -> Json {
        Json::parse(text.as_bytes()).unwrap()
    }

    #[test]
    fn scalars_render_as_python_str() {
        assert_eq!(render(&json("true")), "True");
        assert_eq!(render(&json("null")), "None");
        assert_eq!(render(&json("1.0")), "1.0");
        assert_eq!(render(&json("0.85")), "0.85");
        assert_eq!(render(&json("12")), "12");
        assert_eq!(render(&json("\"plain\"")), "plain");
    }

    #[test]
    fn dicts_are_key_lines_and_lists_are_dash_lines() {
        let value = json(r#"{"a": 1, "b": {"c": [ "x", "y" ], "d": []}, "e": "t"}"#);
        assert_eq!(render(&value), "a: 1\nb: c: - x\n- y\nd: \ne: t");
    }

    #[test]
    fn list_items_are_python_reprs_of_nested_values() {
        let value = json(r#"[{"k": "v", "n": null, "ok": true, "f": 0.5}, ["a", 2]]"#);
        assert_eq!(
            render(&value),
            "- {'k': 'v', 'n': None, 'ok': True, 'f': 0.5}\n- ['a', 2]"
        );
    }

    #[test]
    fn string_reprs_choose_quotes_and_escape_like_python() {
        assert_eq!(py_repr(&json(r#""it's""#)), "\"it's\"");
        assert_eq!(py_repr(&json(r#""both ' and \"""#)), "'both \\' and \"'");
        assert_eq!(py_repr(&json(r#""a\nb\\c""#)), "'a\\nb\\\\c'");
        assert_eq!(py_repr(&json(r#""\u0001\u007f""#)), "'\\x01\\x7f'");
        // Non-printable non-ASCII: no-break space, zero-width space; printable é stays.
        assert_eq!(py_repr(&json(r#""\u00a0\u200bé""#)), "'\\xa0\\u200bé'");
    }

    #[test]
    fn tokens_are_code_points_over_four_rounded_up() {
        assert_eq!(estimate_tokens(&json(r#""""#)), 0);
        assert_eq!(estimate_tokens(&json(r#""abcd""#)), 1);
        assert_eq!(estimate_tokens(&json(r#""abcde""#)), 2);
        // Four code points, eight bytes.
        assert_eq!(estimate_tokens(&json(r#""éééé""#)), 1);
    }
}
