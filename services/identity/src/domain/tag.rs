//! Listing a diary's tags (MoltNet's `GET /diaries/:diaryId/tags`, compat §7): the query's
//! rules and the order of the result. The compat digest only names the parameters
//! (`prefix?`, `minCount?` ≥ 1, `entryTypes?`) and the shape `{tags:[{tag, count}], total}`;
//! where it is silent this module decides, as written below.

use crate::domain::entry::MAX_TAG_CHARS;
use crate::error::IdentityError;

/// A checked tag query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagQuery {
    /// Only tags starting with this text. It is compared literally and case-sensitively
    /// (a `%` or `_` is just that character); `None` when no prefix (or an empty one) was
    /// given, since every tag starts with the empty string.
    pub prefix: Option<String>,
    /// Only tags carried by at least this many entries (≥ 1).
    pub min_count: i64,
}

/// One tag and the number of entries carrying it. An entry listing the same tag twice
/// counts once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagCount {
    pub tag: String,
    pub count: u64,
}

/// Checks the query. `min_count` unset means 1; a set value below 1 is refused, as is a
/// prefix longer than a tag may be (it could never match).
pub fn query(prefix: String, min_count: Option<i64>) -> Result<TagQuery, IdentityError> {
    let min_count = match min_count {
        None => 1,
        Some(n) if n >= 1 => n,
        Some(_) => {
            return Err(IdentityError::InvalidArgument(
                "minCount must be an integer of at least 1".into(),
            ));
        }
    };
    if prefix.chars().count() > MAX_TAG_CHARS {
        return Err(IdentityError::InvalidArgument(format!(
            "prefix must be at most {MAX_TAG_CHARS} characters"
        )));
    }
    Ok(TagQuery {
        prefix: (!prefix.is_empty()).then_some(prefix),
        min_count,
    })
}

/// The listing's order, the same on every backend: most used first, ties by tag in byte
/// (code point) order, so `Zeta` sorts before `alpha`.
pub fn order(tags: &mut [TagCount]) {
    tags.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.tag.cmp(&b.tag)));
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn min_count_defaults_to_one_and_refuses_less() {
        assert_eq!(query(String::new(), None).unwrap().min_count, 1);
        assert_eq!(query(String::new(), Some(3)).unwrap().min_count, 3);
        for bad in [0, -1, i64::MIN] {
            let err = query(String::new(), Some(bad)).unwrap_err();
            assert!(matches!(err, IdentityError::InvalidArgument(_)), "{bad}");
        }
    }

    #[test]
    fn empty_prefix_is_no_prefix_and_long_ones_are_refused() {
        assert_eq!(query(String::new(), None).unwrap().prefix, None);
        assert_eq!(
            query("a_%".into(), None).unwrap().prefix.as_deref(),
            Some("a_%")
        );
        assert!(query("x".repeat(MAX_TAG_CHARS), None).is_ok());
        assert!(query("x".repeat(MAX_TAG_CHARS + 1), None).is_err());
    }

    #[test]
    fn most_used_first_then_by_tag() {
        let tc = |tag: &str, count| TagCount {
            tag: tag.into(),
            count,
        };
        let mut tags = vec![tc("b", 1), tc("a", 1), tc("c", 2), tc("Z", 1)];
        order(&mut tags);
        assert_eq!(tags, vec![tc("c", 2), tc("Z", 1), tc("a", 1), tc("b", 1)]);
    }
}
