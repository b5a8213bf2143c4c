//! Each agent's signature chain: its signed entries' links and the recorded head.

use noema_store::audit::AuditedTx;
use noema_store::sql::{Conn, Engine, query};
use noema_store::with_pool;
use time::OffsetDateTime;

use super::entries::tags_from_text;
use super::{IdentityStore, signed, unsigned};
use crate::domain::chain::{self, Link};
use crate::domain::entry::{self, EntryType};
use crate::error::IdentityError;

#[derive(sqlx::FromRow)]
struct LinkRow {
    id: String,
    entry_type: String,
    title: Option<String>,
    content: String,
    tags: Option<String>,
    content_hash: String,
    content_signature: Option<String>,
    chain_seq: i64,
    chain_prev: Option<String>,
    chain_hash: Option<String>,
}

impl TryFrom<LinkRow> for Link {
    type Error = IdentityError;

    fn try_from(row: LinkRow) -> Result<Link, IdentityError> {
        let tags = tags_from_text(row.tags)?;
        let content_cid = entry::content_hash(
            EntryType::from_stored(&row.entry_type)?,
            row.title.as_deref(),
            &row.content,
            tags.as_deref(),
        );
        Ok(Link {
            entry_id: row.id,
            content_hash: row.content_hash,
            signature: row.content_signature.unwrap_or_default(),
            seq: unsigned(row.chain_seq),
            prev: row.chain_prev.unwrap_or_default(),
            hash: row.chain_hash.unwrap_or_default(),
            content_cid,
        })
    }
}

/// The recorded head of `agent_id`'s chain: `(seq, hash)`.
async fn head<D: Engine>(
    conn: impl Into<Conn<'_, D>>,
    agent_id: &str,
) -> Result<Option<(u64, String)>, IdentityError> {
    let head: Option<(i64, String)> =
        query("SELECT seq, head_hash FROM signature_chain_heads WHERE agent_id = $1")
            .bind(agent_id)
            .fetch_optional(conn)
            .await?;
    Ok(head.map(|(seq, hash)| (unsigned(seq), hash)))
}

/// Appends an entry's signature to its signer's chain, inside the signing transaction,
/// and returns the new link.
pub(super) async fn extend<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    signer: &str,
    entry_id: &str,
    content_hash: &str,
    signature: &str,
    now: OffsetDateTime,
) -> Result<Link, IdentityError> {
    let head = head(tx.conn(), signer).await?;
    let link = chain::next_link(signer, head, entry_id, content_hash, signature)?;
    query(
        "INSERT INTO signature_chain_heads (agent_id, seq, head_hash, updated_at) \
         VALUES ($1, $2, $3, $4) ON CONFLICT (agent_id) DO UPDATE SET seq = excluded.seq, \
         head_hash = excluded.head_hash, updated_at = excluded.updated_at",
    )
    .bind(signer)
    .bind(signed(link.seq))
    .bind(&link.hash)
    .bind(now)
    .execute(tx.conn())
    .await?;
    Ok(link)
}

impl IdentityStore {
    /// `agent_id`'s signed entries in chain order, and the recorded head.
    pub async fn chain_links(
        &self,
        agent_id: &str,
    ) -> Result<(Vec<Link>, Option<(u64, String)>), IdentityError> {
        with_pool!(&self.db, |pool| {
            let rows: Vec<LinkRow> = query(
                "SELECT id, entry_type, title, content, tags, content_hash, content_signature, chain_seq, chain_prev, chain_hash \
                 FROM diary_entries WHERE signed_by = $1 AND chain_seq IS NOT NULL \
                 ORDER BY chain_seq, id",
            )
            .bind(agent_id)
            .fetch_all(pool)
            .await?;
            let head = head(pool, agent_id).await?;
            let links = rows
                .into_iter()
                .map(Link::try_from)
                .collect::<Result<Vec<_>, _>>()?;
            Ok((links, head))
        })
    }
}
