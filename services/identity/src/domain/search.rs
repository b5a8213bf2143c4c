//! Full-text search queries: checked once, then spelled for each engine by the store.

use crate::error::IdentityError;

/// Longest query accepted, in characters.
pub const MAX_QUERY_CHARS: usize = 500;

/// The words of a free-text query as an FTS5 expression: each word quoted (so no operator
/// syntax leaks through), all required. `None` when the query has no word to search for.
pub fn fts5_query(query: &str) -> Option<String> {
    let words: Vec<String> = query
        .split_whitespace()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect();
    if words.is_empty() {
        None
    } else {
        Some(words.join(" "))
    }
}

/// The query to search for, trimmed; `None` for an empty one (list instead of search).
/// A NUL separates words like a space: it would end the query early for SQLite's FTS5
/// parser (an unterminated string, a 500) and is not text to PostgreSQL.
pub fn validate_query(query: &str) -> Result<Option<String>, IdentityError> {
    let spaced = query.replace('\0', " ");
    let query = spaced.trim();
    if query.chars().count() > MAX_QUERY_CHARS {
        return Err(IdentityError::InvalidArgument(format!(
            "query must be at most {MAX_QUERY_CHARS} characters"
        )));
    }
    if !query.is_empty() && fts5_query(query).is_none() {
        return Err(IdentityError::InvalidArgument(
            "query has no words to search for (letters or digits)".into(),
        ));
    }
    Ok((!query.is_empty()).then(|| query.to_owned()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_and_operators_stay_words() {
        assert_eq!(
            fts5_query(r#"cats AND "dogs" -"#).as_deref(),
            Some(r#""cats" "AND" """dogs""""#)
        );
        assert_eq!(fts5_query("  ... -- "), None);
    }

    #[test]
    fn queries_are_trimmed_bounded_and_need_words() {
        assert_eq!(validate_query("  ").unwrap(), None);
        assert_eq!(validate_query(" cats ").unwrap().as_deref(), Some("cats"));
        assert!(validate_query("?!").is_err());
        assert!(validate_query(&"x".repeat(MAX_QUERY_CHARS + 1)).is_err());
    }

    #[test]
    fn a_nul_separates_words() {
        assert_eq!(
            validate_query("\0cats\0dogs\0").unwrap().as_deref(),
            Some("cats dogs")
        );
        assert_eq!(validate_query("\0").unwrap(), None);
    }
}
