//! Messages (migration 0006): message rows in append order, tracked delivery records with a
//! version each ack moves, consumed nonces and signing keys, per tenant. A send's message,
//! its delivery record and its nonce land in one transaction (through the group writer), so
//! a nonce is consumed and an idempotency key taken only by a send that committed.

use noema_core::audit::AuditDraft;
use noema_store::audit::AuditedTx;
use noema_store::sql::{Builder, Engine, query};
use noema_store::with_pool;
use time::OffsetDateTime;

use super::ContinuityStore;
use super::writes::Refusal;
use crate::domain::envelope::SigningKey;
use crate::domain::metrics::DeliveryGroup;
use crate::error::Error;

/// A new delivery record.
#[derive(Debug, Clone)]
pub struct DeliveryRow {
    pub message_id: String,
    pub recipient: String,
    pub status: String,
    pub ack_deadline: Option<String>,
    pub sent_at: String,
    /// `<sender>|<recipient>|<key>` when the send carried an idempotency key.
    pub idempotency_scope: Option<String>,
    pub record: String,
    pub revision_id: String,
}

/// A delivery record replacing the version read.
#[derive(Debug, Clone)]
pub struct DeliveryUpdate {
    pub message_id: String,
    pub status: String,
    pub ack_deadline: Option<String>,
    pub record: String,
    pub revision_id: String,
    pub version: i64,
}

/// A nonce to consume: refused while an unexpired entry holds the same key.
#[derive(Debug, Clone)]
pub struct NonceRow {
    pub nonce_key: String,
    pub key_id: String,
    pub nonce: String,
    pub first_seen_at: String,
    pub expires_at: Option<String>,
    pub expires_micros: Option<i64>,
    /// Now, in microseconds: entries that expired before it are replaced.
    pub now_micros: i64,
}

/// A message to append (send, relay forward or replay), with what lands beside it.
#[derive(Debug, Clone)]
pub struct MessageWrite {
    pub tenant: String,
    pub message_id: String,
    pub thread_id: String,
    pub sender: String,
    pub recipient: String,
    /// Appended to the sender's outbox too (not for relayed messages).
    pub outbox: bool,
    pub relay_id: Option<String>,
    pub document: String,
    pub revision_id: String,
    pub delivery: Option<DeliveryRow>,
    pub nonce: Option<NonceRow>,
    /// A replay marks the original record `replayed` (refused if it moved).
    pub replaces: Option<DeliveryUpdate>,
    pub at: OffsetDateTime,
    pub audit: AuditDraft,
}

/// An ack: the record replacing the version read.
#[derive(Debug, Clone)]
pub struct DeliveryWrite {
    pub tenant: String,
    pub update: DeliveryUpdate,
    pub at: OffsetDateTime,
    pub audit: AuditDraft,
}

/// A nonce consumed by `POST /v1/messages/verify`.
#[derive(Debug, Clone)]
pub struct NonceWrite {
    pub tenant: String,
    pub nonce: NonceRow,
    pub at: OffsetDateTime,
    pub audit: AuditDraft,
}

/// A rotated signing key.
#[derive(Debug, Clone)]
pub struct KeyWrite {
    pub tenant: String,
    pub key: SigningKey,
    /// Retire the key that was active (unless it is this one).
    pub retire_previous: bool,
    pub now: String,
    pub at: OffsetDateTime,
    pub audit: AuditDraft,
}

/// A stored delivery record.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DeliveryRead {
    pub record: String,
    pub revision_id: String,
    pub version: i64,
}

/// Which records pending lists (`cutoff`: the latest deadline `now` is past).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingFilter {
    pub cutoff: String,
    pub recipient: Option<String>,
    pub status: Option<String>,
    pub include_terminal: bool,
    pub limit: i64,
}

/// Pending's answer: the count per effective status over all records (first seen first),
/// and the listed records with their effective status.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pending {
    pub summary: Vec<(String, i64)>,
    pub rows: Vec<(String, String)>,
}

/// The effective status in SQL (`domain::messages::effective_status`): `$1` is the cutoff.
const EFFECTIVE: &str = "CASE WHEN status = 'pending_ack' AND ack_deadline IS NOT NULL \
     AND ack_deadline <= ";

const KEY_COLUMNS: &str = "key_id, algorithm, status, created_at, rotated_at, retired_at, \
     secret, secret_sha256, active";

#[derive(sqlx::FromRow)]
struct KeyRow {
    key_id: String,
    algorithm: String,
    status: String,
    created_at: String,
    rotated_at: String,
    retired_at: Option<String>,
    secret: String,
    secret_sha256: String,
    active: bool,
}

impl From<KeyRow> for SigningKey {
    fn from(r: KeyRow) -> Self {
        SigningKey {
            key_id: r.key_id,
            algorithm: r.algorithm,
            status: r.status,
            created_at: r.created_at,
            rotated_at: r.rotated_at,
            retired_at: r.retired_at,
            secret: r.secret,
            secret_sha256: r.secret_sha256,
            active: r.active,
        }
    }
}

impl ContinuityStore {
    /// The tenant's delivery record of `message_id`.
    pub async fn delivery(
        &self,
        tenant: &str,
        message_id: &str,
    ) -> Result<Option<DeliveryRead>, Error> {
        Ok(with_pool!(self.database(), |pool| {
            query(
                "SELECT record, revision_id, version FROM continuity_deliveries \
                 WHERE tenant = $1 AND message_id = $2",
            )
            .bind(tenant)
            .bind(message_id)
            .fetch_optional(pool)
            .await?
        }))
    }

    /// The record an idempotency scope (`<sender>|<recipient>|<key>`) names.
    pub async fn delivery_by_idempotency(
        &self,
        tenant: &str,
        scope: &str,
    ) -> Result<Option<DeliveryRead>, Error> {
        Ok(with_pool!(self.database(), |pool| {
            query(
                "SELECT record, revision_id, version FROM continuity_deliveries \
                 WHERE tenant = $1 AND idempotency_scope = $2",
            )
            .bind(tenant)
            .bind(scope)
            .fetch_optional(pool)
            .await?
        }))
    }

    /// The last `limit` messages to `recipient`, oldest first.
    pub async fn inbox(
        &self,
        tenant: &str,
        recipient: &str,
        limit: i64,
    ) -> Result<Vec<String>, Error> {
        self.last_messages("recipient", tenant, recipient, limit)
            .await
    }

    /// The last `limit` messages of `thread_id`, oldest first.
    pub async fn thread(
        &self,
        tenant: &str,
        thread_id: &str,
        limit: i64,
    ) -> Result<Vec<String>, Error> {
        self.last_messages("thread_id", tenant, thread_id, limit)
            .await
    }

    async fn last_messages(
        &self,
        column: &'static str,
        tenant: &str,
        value: &str,
        limit: i64,
    ) -> Result<Vec<String>, Error> {
        let sql = format!(
            "SELECT document FROM continuity_messages WHERE tenant = $1 AND {column} = $2 \
             ORDER BY seq DESC LIMIT $3"
        );
        let mut rows: Vec<(String,)> = with_pool!(self.database(), |pool| {
            query(&sql)
                .bind(tenant)
                .bind(value)
                .bind(limit)
                .fetch_all(pool)
                .await?
        });
        rows.reverse();
        Ok(rows.into_iter().map(|(d,)| d).collect())
    }

    /// The revision id of the tenant's latest message write, if any.
    pub async fn latest_message_revision(&self, tenant: &str) -> Result<Option<String>, Error> {
        let row: Option<(String,)> = with_pool!(self.database(), |pool| {
            query(
                "SELECT revision_id FROM continuity_messages WHERE tenant = $1 \
                 ORDER BY seq DESC LIMIT 1",
            )
            .bind(tenant)
            .fetch_optional(pool)
            .await?
        });
        Ok(row.map(|(r,)| r))
    }

    /// Pending: the summary over all of the tenant's records, and the records `filter`
    /// keeps, newest `sent_at` first (records sent in the same second in the order made).
    pub async fn pending(&self, tenant: &str, filter: &PendingFilter) -> Result<Pending, Error> {
        let summary: Vec<(String, i64, i64)> = with_pool!(self.database(), |pool| {
            let mut b = Builder::new("SELECT ");
            push_effective(&mut b, &filter.cutoff);
            b.push(" AS effective, COUNT(*), MIN(seq) FROM continuity_deliveries WHERE tenant = ");
            b.push_bind(tenant.to_owned());
            b.push(" GROUP BY effective ORDER BY MIN(seq)");
            b.build().fetch_all(pool).await?
        });
        let rows: Vec<(String, String)> = with_pool!(self.database(), |pool| {
            let mut b =
                Builder::new("SELECT record, effective FROM (SELECT record, sent_at, seq, ");
            push_effective(&mut b, &filter.cutoff);
            b.push(" AS effective FROM continuity_deliveries WHERE tenant = ");
            b.push_bind(tenant.to_owned());
            if let Some(recipient) = &filter.recipient {
                b.push(" AND recipient = ");
                b.push_bind(recipient.clone());
            }
            b.push(") AS tracked WHERE 1 = 1");
            if let Some(status) = &filter.status {
                b.push(" AND effective = ");
                b.push_bind(status.clone());
            }
            if !filter.include_terminal {
                b.push(" AND effective NOT IN ('acked', 'dead_letter', 'delivered')");
            }
            b.push(" ORDER BY sent_at DESC, seq ASC LIMIT ");
            b.push_bind(filter.limit);
            b.build().fetch_all(pool).await?
        });
        Ok(Pending {
            summary: summary.into_iter().map(|(s, n, _)| (s, n)).collect(),
            rows,
        })
    }

    /// Every tracked delivery of the tenant counted by recipient and effective status (past
    /// `cutoff`, a `pending_ack` record reads `dead_letter`), each group with its first record.
    pub async fn delivery_counts(
        &self,
        tenant: &str,
        cutoff: &str,
    ) -> Result<Vec<DeliveryGroup>, Error> {
        let rows: Vec<(String, String, i64, i64)> = with_pool!(self.database(), |pool| {
            let mut b = Builder::new("SELECT recipient, ");
            push_effective(&mut b, cutoff);
            b.push(" AS effective, COUNT(*), MIN(seq) FROM continuity_deliveries WHERE tenant = ");
            b.push_bind(tenant.to_owned());
            b.push(" GROUP BY recipient, effective");
            b.build().fetch_all(pool).await?
        });
        Ok(rows
            .into_iter()
            .map(|(recipient, effective, count, first)| DeliveryGroup {
                recipient,
                effective,
                count,
                first,
            })
            .collect())
    }

    /// The tenant's signing key `key_id`.
    pub async fn signing_key(
        &self,
        tenant: &str,
        key_id: &str,
    ) -> Result<Option<SigningKey>, Error> {
        let sql = format!(
            "SELECT {KEY_COLUMNS} FROM continuity_signing_keys WHERE tenant = $1 AND key_id = $2"
        );
        let row: Option<KeyRow> = with_pool!(self.database(), |pool| {
            query(&sql)
                .bind(tenant)
                .bind(key_id)
                .fetch_optional(pool)
                .await?
        });
        Ok(row.map(SigningKey::from))
    }

    /// The tenant's active signing key id.
    pub async fn active_key_id(&self, tenant: &str) -> Result<Option<String>, Error> {
        let row: Option<(String,)> = with_pool!(self.database(), |pool| {
            query(
                "SELECT key_id FROM continuity_signing_keys WHERE tenant = $1 AND active \
                 ORDER BY rotated_at DESC LIMIT 1",
            )
            .bind(tenant)
            .fetch_optional(pool)
            .await?
        });
        Ok(row.map(|(k,)| k))
    }
}

fn push_effective<D: Engine>(b: &mut Builder<'_, D>, cutoff: &str) {
    b.push(EFFECTIVE);
    b.push_bind(cutoff.to_owned());
    b.push(" THEN 'dead_letter' ELSE status END");
}

/// Consumes `nonce` in `tx`: `false` while an unexpired entry holds its key.
async fn consume_nonce<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    tenant: &str,
    nonce: &NonceRow,
) -> Result<bool, Error> {
    let changed = query(
        "INSERT INTO continuity_message_nonces (tenant, nonce_key, key_id, nonce, first_seen_at, \
         expires_at, expires_micros) VALUES ($1, $2, $3, $4, $5, $6, $7) \
         ON CONFLICT (tenant, nonce_key) DO UPDATE SET key_id = excluded.key_id, \
         nonce = excluded.nonce, first_seen_at = excluded.first_seen_at, \
         expires_at = excluded.expires_at, expires_micros = excluded.expires_micros \
         WHERE continuity_message_nonces.expires_micros IS NOT NULL \
         AND continuity_message_nonces.expires_micros < $8",
    )
    .bind(tenant)
    .bind(nonce.nonce_key.as_str())
    .bind(nonce.key_id.as_str())
    .bind(nonce.nonce.as_str())
    .bind(nonce.first_seen_at.as_str())
    .bind(nonce.expires_at.as_deref())
    .bind(nonce.expires_micros)
    .bind(nonce.now_micros)
    .execute(tx.conn())
    .await?;
    Ok(changed == 1)
}

async fn update_delivery<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    tenant: &str,
    u: &DeliveryUpdate,
) -> Result<bool, Error> {
    let changed = query(
        "UPDATE continuity_deliveries SET status = $3, ack_deadline = $4, record = $5, \
         revision_id = $6, version = version + 1 \
         WHERE tenant = $1 AND message_id = $2 AND version = $7",
    )
    .bind(tenant)
    .bind(u.message_id.as_str())
    .bind(u.status.as_str())
    .bind(u.ack_deadline.as_deref())
    .bind(u.record.as_str())
    .bind(u.revision_id.as_str())
    .bind(u.version)
    .execute(tx.conn())
    .await?;
    Ok(changed == 1)
}

/// Appends a message with its record and nonce. Refusals come before anything is written
/// (or undo what this write did), so a refused write leaves its group untouched.
pub(super) async fn message<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    w: &MessageWrite,
) -> Result<Result<(), Refusal>, Error> {
    if let Some(update) = &w.replaces
        && !update_delivery(tx, &w.tenant, update).await?
    {
        return Ok(Err(Refusal::Moved));
    }
    if let Some(nonce) = &w.nonce
        && !consume_nonce(tx, &w.tenant, nonce).await?
    {
        return Ok(Err(Refusal::NonceUsed));
    }
    if let Some(d) = &w.delivery {
        let inserted = query(
            "INSERT INTO continuity_deliveries (tenant, message_id, recipient, status, \
             ack_deadline, sent_at, idempotency_scope, record, revision_id, version) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 1) ON CONFLICT DO NOTHING",
        )
        .bind(w.tenant.as_str())
        .bind(d.message_id.as_str())
        .bind(d.recipient.as_str())
        .bind(d.status.as_str())
        .bind(d.ack_deadline.as_deref())
        .bind(d.sent_at.as_str())
        .bind(d.idempotency_scope.as_deref())
        .bind(d.record.as_str())
        .bind(d.revision_id.as_str())
        .execute(tx.conn())
        .await?;
        if inserted != 1 {
            // The key was taken by a send committed meanwhile: give the nonce back.
            if let Some(nonce) = &w.nonce {
                query("DELETE FROM continuity_message_nonces WHERE tenant = $1 AND nonce_key = $2")
                    .bind(w.tenant.as_str())
                    .bind(nonce.nonce_key.as_str())
                    .execute(tx.conn())
                    .await?;
            }
            return Ok(Err(Refusal::KeyTaken));
        }
    }
    query(
        "INSERT INTO continuity_messages (tenant, message_id, thread_id, sender, recipient, \
         outbox, relay_id, document, revision_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(w.tenant.as_str())
    .bind(w.message_id.as_str())
    .bind(w.thread_id.as_str())
    .bind(w.sender.as_str())
    .bind(w.recipient.as_str())
    .bind(w.outbox)
    .bind(w.relay_id.as_deref())
    .bind(w.document.as_str())
    .bind(w.revision_id.as_str())
    .execute(tx.conn())
    .await?;
    Ok(Ok(()))
}

pub(super) async fn delivery<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    w: &DeliveryWrite,
) -> Result<Result<(), Refusal>, Error> {
    Ok(if update_delivery(tx, &w.tenant, &w.update).await? {
        Ok(())
    } else {
        Err(Refusal::Moved)
    })
}

pub(super) async fn nonce<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    w: &NonceWrite,
) -> Result<Result<(), Refusal>, Error> {
    Ok(if consume_nonce(tx, &w.tenant, &w.nonce).await? {
        Ok(())
    } else {
        Err(Refusal::NonceUsed)
    })
}

pub(super) async fn key<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    w: &KeyWrite,
) -> Result<Result<(), Refusal>, Error> {
    let k = &w.key;
    if w.retire_previous {
        query(
            "UPDATE continuity_signing_keys SET status = 'retired', retired_at = $3 \
             WHERE tenant = $1 AND active AND key_id <> $2",
        )
        .bind(w.tenant.as_str())
        .bind(k.key_id.as_str())
        .bind(w.now.as_str())
        .execute(tx.conn())
        .await?;
    }
    if k.active {
        query("UPDATE continuity_signing_keys SET active = $2 WHERE tenant = $1 AND active")
            .bind(w.tenant.as_str())
            .bind(false)
            .execute(tx.conn())
            .await?;
    }
    query(
        "INSERT INTO continuity_signing_keys (tenant, key_id, algorithm, status, created_at, \
         rotated_at, retired_at, secret, secret_sha256, active) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
         ON CONFLICT (tenant, key_id) DO UPDATE SET algorithm = excluded.algorithm, \
         status = excluded.status, rotated_at = excluded.rotated_at, \
         retired_at = excluded.retired_at, secret = excluded.secret, \
         secret_sha256 = excluded.secret_sha256, \
         active = (excluded.active OR continuity_signing_keys.active)",
    )
    .bind(w.tenant.as_str())
    .bind(k.key_id.as_str())
    .bind(k.algorithm.as_str())
    .bind(k.status.as_str())
    .bind(k.created_at.as_str())
    .bind(k.rotated_at.as_str())
    .bind(k.retired_at.as_deref())
    .bind(k.secret.as_str())
    .bind(k.secret_sha256.as_str())
    .bind(k.active)
    .execute(tx.conn())
    .await?;
    Ok(Ok(()))
}
