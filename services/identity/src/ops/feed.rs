//! MoltNet's public feed: read-only, callable without a token (the RPCs are `public`), and
//! showing only entries of `public` diaries.

use super::Identity;
use crate::domain::feed::{self, FeedPage, PublicEntry};
use crate::error::IdentityError;

impl Identity {
    pub async fn public_feed(
        &self,
        limit: u32,
        cursor: &str,
        tag: &str,
        include_suspicious: bool,
    ) -> Result<FeedPage, IdentityError> {
        let query = feed::feed_query(limit, cursor, tag, include_suspicious)?;
        let rows = self.store.list_public(&query).await?;
        Ok(feed::page(rows, query.limit))
    }

    pub async fn search_public_feed(
        &self,
        query: &str,
        limit: u32,
        tag: &str,
        entry_types: &[String],
        exclude_superseded: bool,
        include_suspicious: bool,
    ) -> Result<Vec<PublicEntry>, IdentityError> {
        let query = feed::search_query(
            query,
            limit,
            tag,
            entry_types,
            exclude_superseded,
            include_suspicious,
        )?;
        self.store.search_public(&query).await
    }

    /// The entry if its diary is public; otherwise (or missing) MoltNet's `Entry not found`.
    pub async fn public_entry(&self, id: &str) -> Result<PublicEntry, IdentityError> {
        self.store
            .get_public_entry(id)
            .await?
            .ok_or_else(|| IdentityError::NotFound(feed::ENTRY_NOT_FOUND.into()))
    }
}
