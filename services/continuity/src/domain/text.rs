//! Python's string semantics where the original's rules depend on them.

/// `str.isspace()`: Rust's White_Space plus the information separators U+001C–U+001F.
pub fn is_py_space(c: char) -> bool {
    c.is_whitespace() || matches!(c, '\u{1c}'..='\u{1f}')
}

/// `str.strip()`.
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(is_py_space)
}

/// `len(str)`: code points.
pub fn py_len(s: &str) -> usize {
    s.chars().count()
}

/// `str[:n]`.
pub fn py_prefix(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((at, _)) => &s[..at],
        None => s,
    }
}

/// `re.match(r"^…$", s)`: `$` also matches before one final `\n`, so the checked text is `s`
/// without it.
pub fn dollar_body(s: &str) -> &str {
    s.strip_suffix('\n').unwrap_or(s)
}

/// `posixpath.normpath` for a relative path.
pub fn posix_normpath(path: &str) -> String {
    if path.is_empty() {
        return ".".to_owned();
    }
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if !absolute && (parts.is_empty() || parts.last() == Some(&"..")) {
                    parts.push("..");
                } else if !parts.is_empty() {
                    parts.pop();
                }
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn strip_matches_python() {
        assert_eq!(py_strip("\u{1f} a b\u{a0}\u{3000}"), "a b");
        assert_eq!(py_strip("\u{200b}x"), "\u{200b}x");
        assert_eq!(py_len("é→"), 2);
        assert_eq!(py_prefix("héllo", 2), "hé");
    }

    #[test]
    fn normpath_matches_posixpath() {
        assert_eq!(posix_normpath("a/./b//c/"), "a/b/c");
        assert_eq!(posix_normpath("a/../.."), "..");
        assert_eq!(posix_normpath("a/.."), ".");
        assert_eq!(posix_normpath("../x"), "../x");
    }
}
