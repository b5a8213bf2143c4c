//! The key rules, checked once here for every backend so that a key is valid everywhere or
//! nowhere.
//!
//! A key is a relative, `/`-separated path of at most 1024 bytes. Segments are non-empty, are not
//! `.` or `..`, and are at most 255 bytes (a file name's limit, so file:// and s3:// accept the
//! same keys). NUL and backslash are refused. Anything else is fine, `:` included
//! (`canonical/observation/2026/04/14/sha256:<hex>.json`).

use super::ObjectError;

/// The longest key, in bytes (S3's limit).
pub const MAX_KEY_LEN: usize = 1024;

/// The longest segment, in bytes (`NAME_MAX` on common file systems).
pub const MAX_SEGMENT_LEN: usize = 255;

/// Check an object key.
pub fn validate_key(key: &str) -> Result<(), ObjectError> {
    let invalid = |reason| {
        Err(ObjectError::InvalidKey {
            key: key.to_owned(),
            reason,
        })
    };
    if key.is_empty() {
        return invalid("the key is empty");
    }
    if let Err(reason) = common(key) {
        return invalid(reason);
    }
    for segment in key.split('/') {
        if let Err(reason) = check_segment(segment) {
            return invalid(reason);
        }
    }
    Ok(())
}

/// Check a list prefix: like a key, except that it may be empty and its last segment may be
/// partial (`canonical/obs` matches `canonical/observation/…`) and so may be empty or dotted.
pub fn validate_prefix(prefix: &str) -> Result<(), ObjectError> {
    let invalid = |reason| {
        Err(ObjectError::InvalidKey {
            key: prefix.to_owned(),
            reason,
        })
    };
    if let Err(reason) = common(prefix) {
        return invalid(reason);
    }
    let mut segments: Vec<&str> = prefix.split('/').collect();
    let last = segments.pop().unwrap_or_default();
    if last.len() > MAX_SEGMENT_LEN {
        return invalid("a segment is longer than 255 bytes");
    }
    for segment in segments {
        if let Err(reason) = check_segment(segment) {
            return invalid(reason);
        }
    }
    Ok(())
}

fn common(s: &str) -> Result<(), &'static str> {
    if s.len() > MAX_KEY_LEN {
        return Err("longer than 1024 bytes");
    }
    if s.contains('\0') {
        return Err("contains a NUL byte");
    }
    if s.contains('\\') {
        return Err("contains a backslash");
    }
    if s.starts_with('/') {
        return Err("must be relative (starts with '/')");
    }
    Ok(())
}

fn check_segment(segment: &str) -> Result<(), &'static str> {
    match segment {
        "" => Err("has an empty segment ('//' or a trailing '/')"),
        "." | ".." => Err("has a '.' or '..' segment"),
        s if s.len() > MAX_SEGMENT_LEN => Err("a segment is longer than 255 bytes"),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_keys() {
        for key in [
            "a",
            "canonical/observation/2026/04/14/sha256:0123abcd.json",
            "..a/b..",
            ".hidden/x",
            "spaces are fine/and ünïcode",
        ] {
            assert!(validate_key(key).is_ok(), "{key}");
        }
        assert!(validate_key(&"k".repeat(255)).is_ok());
        let long = format!("{}/{}", vec!["s".repeat(200); 5].join("/"), "e".repeat(19));
        assert_eq!(long.len(), MAX_KEY_LEN);
        assert!(validate_key(&long).is_ok());
    }

    #[test]
    fn rejects_bad_keys() {
        let long = format!("{}/{}", vec!["s".repeat(200); 5].join("/"), "e".repeat(20));
        for key in [
            "",
            "/abs",
            "a//b",
            "a/",
            "./a",
            "a/../b",
            "..",
            "a\0b",
            "a\\b",
            &long,
            &"k".repeat(256),
        ] {
            assert!(
                matches!(validate_key(key), Err(ObjectError::InvalidKey { .. })),
                "{key:?} should be invalid"
            );
        }
    }

    #[test]
    fn prefixes_may_be_partial() {
        for p in ["", "a", "a/", "a/b", "a/b/", "a/.", "a/.."] {
            assert!(validate_prefix(p).is_ok(), "{p:?}");
        }
        for p in ["/a", "a//", "../a", "a/../b/", "a\\", "a\0"] {
            assert!(validate_prefix(p).is_err(), "{p:?}");
        }
    }

    proptest::proptest! {
        #![proptest_config(crate::proptest_config())]

        /// A valid key is a valid prefix, has only non-empty, non-dot segments and fits
        /// S3's and the file system's limits.
        #[test]
        fn keys_accepted_meet_every_rule(key in "[a-z./\\\\:\u{0}\u{e9}]{0,12}|[a-z/]{250,260}|(x{200}/){5,6}") {
            let _ = validate_prefix(&key);
            if validate_key(&key).is_ok() {
                proptest::prop_assert!(validate_prefix(&key).is_ok());
                proptest::prop_assert!(key.len() <= MAX_KEY_LEN && !key.starts_with('/'));
                let refused = ['\\', '\u{0}'];
                proptest::prop_assert!(!key.contains(refused));
                proptest::prop_assert!(key.split('/').all(|s| !s.is_empty() && s != "." && s != ".." && s.len() <= MAX_SEGMENT_LEN));
            }
        }

        #[test]
        fn any_text_is_a_key_or_refused(key in proptest::prelude::any::<String>()) {
            let _ = validate_key(&key);
            let _ = validate_prefix(&key);
        }
    }
}
