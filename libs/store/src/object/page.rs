//! The one listing rule every object store follows, and the page builder that applies it.
//!
//! A listing holds the keys that start with a plain string prefix and sort strictly after
//! the cursor (`start_after`), in byte order. A store scans its keys in that order and hands
//! each candidate to a [`PageBuilder`], which keeps the wanted ones and stops the scan one
//! key past the limit: that extra key is how a page knows that more follow, so a listing
//! that ends exactly on a full page says it is complete instead of sending the caller for
//! an empty one.

use std::ops::Bound;

use super::{ListPage, ObjectMeta};

/// Collects one page of a listing.
#[derive(Debug)]
pub(crate) struct PageBuilder<'a> {
    prefix: &'a str,
    start_after: Option<&'a str>,
    limit: usize,
    objects: Vec<ObjectMeta>,
}

impl<'a> PageBuilder<'a> {
    /// A page of at most `limit` keys (a `limit` of 0 is treated as 1).
    pub(crate) fn new(prefix: &'a str, start_after: Option<&'a str>, limit: usize) -> Self {
        PageBuilder {
            prefix,
            start_after,
            limit: limit.max(1),
            objects: Vec::new(),
        }
    }

    /// Whether `key` belongs in the listing: under the prefix and after the cursor.
    pub(crate) fn wants(&self, key: &str) -> bool {
        key.starts_with(self.prefix) && self.start_after.is_none_or(|after| key > after)
    }

    /// Where a scan in key order starts: just after the cursor, or at the prefix when the
    /// cursor sorts before it. From there the first key [`Self::wants`] refuses ends the scan.
    pub(crate) fn scan_from(&self) -> Bound<&'a str> {
        match self.start_after {
            Some(after) if after >= self.prefix => Bound::Excluded(after),
            _ => Bound::Included(self.prefix),
        }
    }

    /// Whether some key starting with `key_prefix` (a directory's keys) may be wanted, so
    /// that a walk can skip a subtree that lies wholly outside the prefix or at or before
    /// the cursor.
    pub(crate) fn may_want_under(&self, key_prefix: &str) -> bool {
        let overlaps = key_prefix.starts_with(self.prefix) || self.prefix.starts_with(key_prefix);
        let all_at_or_before_cursor = self
            .start_after
            .is_some_and(|after| key_prefix < after && !after.starts_with(key_prefix));
        overlaps && !all_at_or_before_cursor
    }

    /// How many more keys the scan should fetch (one more than the page holds).
    pub(crate) fn still_wanted(&self) -> usize {
        self.limit
            .saturating_add(1)
            .saturating_sub(self.objects.len())
    }

    /// Adds the next key in order if [`Self::wants`] it and the page is not complete yet;
    /// `true` once the page is complete and the scan should stop.
    pub(crate) fn offer(&mut self, meta: ObjectMeta) -> bool {
        if !self.is_complete() && self.wants(&meta.key) {
            self.objects.push(meta);
        }
        self.is_complete()
    }

    /// Whether the page has found its extra key.
    pub(crate) fn is_complete(&self) -> bool {
        self.still_wanted() == 0
    }

    /// The page: its first `limit` keys, and the cursor of the next page when the extra key
    /// was found.
    pub(crate) fn finish(mut self) -> ListPage {
        let next_start_after = if self.objects.len() > self.limit {
            self.objects.truncate(self.limit);
            self.objects.last().map(|m| m.key.clone())
        } else {
            None
        };
        ListPage {
            objects: self.objects,
            next_start_after,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(key: &str) -> ObjectMeta {
        ObjectMeta {
            key: key.to_owned(),
            size: 0,
            content_type: None,
            last_modified: None,
        }
    }

    fn keys(page: &ListPage) -> Vec<&str> {
        page.objects.iter().map(|m| m.key.as_str()).collect()
    }

    /// Runs a scan over sorted `stored` keys the way a store does.
    fn scan(stored: &[&str], prefix: &str, start_after: Option<&str>, limit: usize) -> ListPage {
        let mut page = PageBuilder::new(prefix, start_after, limit);
        let from = page.scan_from();
        for key in stored.iter().filter(|k| match from {
            Bound::Included(b) => **k >= b,
            Bound::Excluded(b) => **k > b,
            Bound::Unbounded => true,
        }) {
            if !page.wants(key) || page.offer(meta(key)) {
                break;
            }
        }
        page.finish()
    }

    const STORED: [&str; 6] = ["a/1", "a/2", "a/3", "a0", "b/1", "b/2"];

    #[test]
    fn pages_end_with_a_cursor_only_when_more_follow() {
        let page = scan(&STORED, "a/", None, 2);
        assert_eq!(keys(&page), ["a/1", "a/2"]);
        assert_eq!(page.next_start_after.as_deref(), Some("a/2"));
        let page = scan(&STORED, "a/", Some("a/2"), 2);
        assert_eq!(keys(&page), ["a/3"]);
        assert_eq!(page.next_start_after, None);
        // Exactly full: complete, no cursor to an empty page.
        let page = scan(&STORED, "a/", None, 3);
        assert_eq!(keys(&page), ["a/1", "a/2", "a/3"]);
        assert_eq!(page.next_start_after, None);
    }

    #[test]
    fn the_cursor_need_not_be_a_key_nor_under_the_prefix() {
        assert_eq!(keys(&scan(&STORED, "a/", Some("a/10"), 5)), ["a/2", "a/3"]);
        assert_eq!(keys(&scan(&STORED, "b/", Some("a"), 5)), ["b/1", "b/2"]);
        assert!(scan(&STORED, "a/", Some("b"), 5).objects.is_empty());
        assert_eq!(scan(&STORED, "", None, 0).objects.len(), 1, "limit 0 is 1");
    }

    #[test]
    fn subtrees_are_skipped_only_when_nothing_in_them_can_be_wanted() {
        let page = PageBuilder::new("a/b", Some("a/bc/2"), 10);
        assert!(page.may_want_under("a/"), "holds the prefix");
        assert!(page.may_want_under("a/bc/"), "holds the cursor");
        assert!(page.may_want_under("a/bd/"));
        assert!(!page.may_want_under("a/bb/"), "wholly before the cursor");
        assert!(!page.may_want_under("a/c/"), "outside the prefix");
        assert_eq!(page.still_wanted(), 11);
    }
}
