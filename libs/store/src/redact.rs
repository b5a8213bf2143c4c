//! Redacting secrets out of connection URLs before they reach an error message or a log line.
//!
//! Works on the raw text, not on a parsed URL, because the URLs that most need redacting are the
//! ones that do not parse. When in doubt it hides too much rather than too little.

/// What replaces a secret.
pub(crate) const MASK: &str = "***";

/// Query parameters whose value is a secret (compared case-insensitively, by substring).
const SECRET_PARAMS: [&str; 4] = ["password", "secret", "token", "key"];

/// A URL with its secrets masked, plus the secrets themselves so that other text (an error from
/// a parser, say) can be scrubbed of them too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Redacted {
    pub(crate) text: String,
    secrets: Vec<String>,
}

impl Redacted {
    /// Replace every occurrence of a secret found in the URL with [`MASK`].
    pub(crate) fn scrub(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in &self.secrets {
            out = out.replace(secret.as_str(), MASK);
        }
        out
    }
}

/// Mask the password of the user-info part (`user:password@`) and the values of secret-looking
/// query parameters (`?password=…`).
pub(crate) fn redact_url(url: &str) -> Redacted {
    let mut secrets = Vec::new();
    let (scheme, rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        None => match url.find(':') {
            Some(i) => url.split_at(i + 1),
            None => ("", url),
        },
    };

    // User info: everything before the last '@' of the part before the query. A password with
    // an unescaped '/' or '?' still ends up masked because we split on the last '@'.
    let (before_query, query) = match rest.find('?') {
        Some(i) if !rest[i..].contains('@') || rest[..i].contains('@') => rest.split_at(i),
        Some(_) | None => (rest, ""),
    };
    let authority_and_path = match before_query.rfind('@') {
        Some(at) => {
            let (user_info, host_and_path) = before_query.split_at(at);
            match user_info.find(':') {
                Some(colon) => {
                    let password = &user_info[colon + 1..];
                    if !password.is_empty() {
                        secrets.push(password.to_owned());
                        if let Some(decoded) = percent_decode(password)
                            && decoded != password
                        {
                            secrets.push(decoded);
                        }
                    }
                    format!("{}:{MASK}{host_and_path}", &user_info[..colon])
                }
                None => before_query.to_owned(),
            }
        }
        None => before_query.to_owned(),
    };

    let query = if query.is_empty() {
        String::new()
    } else {
        let pairs: Vec<String> = query[1..]
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, v)) if is_secret_param(k) && !v.is_empty() => {
                    secrets.push(v.to_owned());
                    format!("{k}={MASK}")
                }
                _ => pair.to_owned(),
            })
            .collect();
        format!("?{}", pairs.join("&"))
    };

    // Longest first, so that scrubbing a secret that contains another one masks it whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    Redacted {
        text: format!("{scheme}{authority_and_path}{query}"),
        secrets,
    }
}

fn is_secret_param(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    SECRET_PARAMS.iter().any(|s| key.contains(s))
}

/// Percent-decode `%XX` escapes; `None` if the result is not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) => hex(h).zip(hex(l)).map(|(h, l)| h * 16 + l),
            _ => None,
        };
        match escaped {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_password_in_user_info() {
        let r = redact_url("postgres://alice:s3cret@db:5432/noema");
        assert_eq!(r.text, "postgres://alice:***@db:5432/noema");
        assert_eq!(r.scrub("bad s3cret here"), "bad *** here");
    }

    #[test]
    fn masks_password_in_unparsable_url() {
        let r = redact_url("postgres://bob:pa/ss?w@[bad/db");
        assert!(!r.text.contains("pa/ss?w"), "{}", r.text);
        assert!(r.text.starts_with("postgres://bob:***@"), "{}", r.text);
    }

    #[test]
    fn masks_percent_encoded_password_both_ways() {
        let r = redact_url("postgres://u:p%40ss@h/d");
        assert_eq!(r.text, "postgres://u:***@h/d");
        assert_eq!(r.scrub("p@ss and p%40ss"), "*** and ***");
    }

    #[test]
    fn masks_secret_query_parameters() {
        let r = redact_url("postgres://h/d?user=u&password=hunter2&sslmode=disable");
        assert_eq!(r.text, "postgres://h/d?user=u&password=***&sslmode=disable");
    }

    #[test]
    fn leaves_urls_without_secrets_alone() {
        for url in [
            "sqlite:///tmp/x.db",
            "sqlite::memory:",
            "",
            "postgres://u@h/d",
            "mysql://x",
        ] {
            assert_eq!(redact_url(url).text, url);
        }
    }
}
