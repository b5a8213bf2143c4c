//! The public feed: entries of `public` diaries whose creator is a registered agent (the
//! feed names the author by key), newest first by the keyset `(created_at, id)`
//! (`diary_entries_feed_idx`), and their full-text search.

use noema_store::sql::{Builder, Engine};
use noema_store::with_pool;
use time::OffsetDateTime;

use super::IdentityStore;
use super::entries::{
    EntryFilter, push_filters, push_fts_join, push_fts_order, tag_rows, tags_from_text,
};
use crate::domain::entry::EntryType;
use crate::domain::feed::{FeedQuery, PublicEntry, SearchQuery};
use crate::error::IdentityError;

const PUBLIC_SELECT: &str = "SELECT e.id, e.title, e.content, e.tags, e.entry_type, \
     e.injection_risk, e.created_at, a.public_key AS author_public_key \
     FROM diary_entries e JOIN diaries d ON d.id = e.diary_id \
     JOIN agents a ON a.agent_id = d.owner_id";

#[derive(sqlx::FromRow)]
struct PublicRow {
    id: String,
    title: Option<String>,
    content: String,
    tags: Option<String>,
    entry_type: String,
    injection_risk: bool,
    created_at: OffsetDateTime,
    author_public_key: String,
}

impl TryFrom<PublicRow> for PublicEntry {
    type Error = IdentityError;

    fn try_from(row: PublicRow) -> Result<PublicEntry, IdentityError> {
        Ok(PublicEntry {
            id: row.id,
            title: row.title,
            content: row.content,
            tags: tags_from_text(row.tags)?,
            injection_risk: row.injection_risk,
            entry_type: EntryType::from_stored(&row.entry_type)?,
            created_at: row.created_at,
            author_public_key: row.author_public_key,
        })
    }
}

/// Only public diaries; suspicious entries only when asked for.
fn push_public<D: Engine>(qb: &mut Builder<'_, D>, include_suspicious: bool) {
    qb.push(" AND d.visibility = 'public'");
    if !include_suspicious {
        qb.push(" AND NOT e.injection_risk");
    }
}

/// The feed query: public entries after the cursor, newest first, `limit + 1` of them.
fn feed_page<D: Engine>(q: &FeedQuery) -> Builder<'_, D> {
    let mut qb = Builder::new(PUBLIC_SELECT);
    qb.push(" WHERE 1 = 1");
    push_public(&mut qb, q.include_suspicious);
    if let Some(after) = &q.after {
        qb.push(" AND (e.created_at < ").push_bind(after.created_at);
        qb.push(" OR (e.created_at = ").push_bind(after.created_at);
        qb.push(" AND e.id < ").push_bind(after.id.as_str());
        qb.push("))");
    }
    if let Some(tag) = &q.tag {
        qb.push(format!(
            " AND EXISTS (SELECT 1 FROM {} WHERE j.value = ",
            tag_rows(D::BACKEND)
        ));
        qb.push_bind(tag.as_str()).push(")");
    }
    qb.push(" ORDER BY e.created_at DESC, e.id DESC LIMIT ")
        .push_bind(i64::from(q.limit) + 1);
    qb
}

impl IdentityStore {
    /// Up to `limit + 1` feed entries after the query's cursor, newest first: the extra
    /// one tells the caller that another page follows.
    pub async fn list_public(&self, q: &FeedQuery) -> Result<Vec<PublicEntry>, IdentityError> {
        let rows: Vec<PublicRow> = with_pool!(&self.db, |pool| {
            feed_page(q).build().fetch_all(pool).await?
        });
        rows.into_iter().map(PublicEntry::try_from).collect()
    }

    /// Full-text search over the feed, best match first.
    pub async fn search_public(&self, q: &SearchQuery) -> Result<Vec<PublicEntry>, IdentityError> {
        let filter = EntryFilter {
            tags: q.tag.iter().cloned().collect(),
            entry_types: q.entry_types.clone(),
            exclude_superseded: q.exclude_superseded,
            query: Some(q.query.clone()),
            ..EntryFilter::default()
        };
        let rows: Vec<PublicRow> = with_pool!(&self.db, |pool| {
            let mut qb = Builder::new(PUBLIC_SELECT);
            push_fts_join(&mut qb, &q.query);
            push_filters(&mut qb, &filter);
            push_public(&mut qb, q.include_suspicious);
            push_fts_order(&mut qb, &q.query);
            qb.push(" LIMIT ").push_bind(i64::from(q.limit));
            qb.build().fetch_all(pool).await?
        });
        rows.into_iter().map(PublicEntry::try_from).collect()
    }

    /// The entry when its diary is public (MoltNet shows it even when suspicious).
    pub async fn get_public_entry(&self, id: &str) -> Result<Option<PublicEntry>, IdentityError> {
        let sql = format!("{PUBLIC_SELECT} WHERE e.id = $1 AND d.visibility = 'public'");
        self.find::<PublicRow>(&sql, id)
            .await?
            .map(PublicEntry::try_from)
            .transpose()
    }
}
