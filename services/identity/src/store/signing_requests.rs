//! Signing requests, and signing a draft entry with a verified one.

use noema_store::audit::AuditedTx;
use noema_store::sql::{Builder, Engine, is_unique_violation, query};
use noema_store::with_pool;
use serde_json::json;
use time::OffsetDateTime;

use super::{IdentityStore, SignatureInput, chain, draft, signed, unsigned};
use crate::domain::signing::{RequestStatus, SigningRequest};
use crate::error::IdentityError;

const REQUEST_COLUMNS: &str = "id, agent_id, message, nonce, entry_id, purpose, team_id, \
     verification_method, status, signature, valid, created_at, expires_at, completed_at";

#[derive(sqlx::FromRow)]
struct RequestRow {
    id: String,
    agent_id: String,
    message: String,
    nonce: String,
    entry_id: Option<String>,
    purpose: String,
    team_id: String,
    verification_method: String,
    status: String,
    signature: Option<String>,
    valid: Option<bool>,
    created_at: OffsetDateTime,
    expires_at: OffsetDateTime,
    completed_at: Option<OffsetDateTime>,
}

impl TryFrom<RequestRow> for SigningRequest {
    type Error = IdentityError;

    fn try_from(row: RequestRow) -> Result<SigningRequest, IdentityError> {
        Ok(SigningRequest {
            status: RequestStatus::parse(&row.status)
                .map_err(|_| IdentityError::Corrupt(format!("request status {:?}", row.status)))?,
            id: row.id,
            agent_id: row.agent_id,
            message: row.message,
            nonce: row.nonce,
            entry_id: row.entry_id,
            purpose: row.purpose,
            team_id: row.team_id,
            verification_method: row.verification_method,
            signature: row.signature,
            valid: row.valid,
            created_at: row.created_at,
            expires_at: row.expires_at,
            completed_at: row.completed_at,
        })
    }
}

/// Completes a pending, unexpired request with `signature` and its verdict.
async fn complete<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    id: &str,
    signature: &str,
    valid: bool,
    now: OffsetDateTime,
) -> Result<(), IdentityError> {
    let completed = query(
        "UPDATE signing_requests SET status = 'completed', signature = $1, valid = $2, \
         completed_at = $3 WHERE id = $4 AND status = 'pending' AND expires_at > $3",
    )
    .bind(signature)
    .bind(valid)
    .bind(now)
    .bind(id)
    .execute(tx.conn())
    .await?;
    if completed != 1 {
        return Err(IdentityError::SigningRequestCompleted);
    }
    Ok(())
}

impl IdentityStore {
    /// Stores a new pending request unless the agent already holds `max_pending` unexpired
    /// ones; then returns the seconds until the earliest expires.
    pub async fn insert_signing_request(
        &self,
        request: &SigningRequest,
        max_pending: u64,
        now: OffsetDateTime,
    ) -> Result<Result<(), i64>, IdentityError> {
        with_pool!(&self.db, |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            query(
                "UPDATE signing_requests SET status = 'expired' WHERE agent_id = $1 \
                 AND status = 'pending' AND expires_at <= $2",
            )
            .bind(&request.agent_id)
            .bind(now)
            .execute(tx.conn())
            .await?;
            let pending: Vec<(OffsetDateTime,)> = query(
                "SELECT expires_at FROM signing_requests WHERE agent_id = $1 \
                 AND status = 'pending' ORDER BY expires_at",
            )
            .bind(&request.agent_id)
            .fetch_all(tx.conn())
            .await?;
            if pending.len() as u64 >= max_pending {
                // Refused: the expiries above are rolled back too.
                tx.rollback().await?;
                let earliest = pending.first().map_or(now, |(at,)| *at);
                return Ok(Err((earliest - now).whole_seconds().max(1)));
            }
            query(
                "INSERT INTO signing_requests (id, agent_id, message, nonce, entry_id, \
                 purpose, team_id, verification_method, status, created_at, expires_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', $9, $10)",
            )
            .bind(&request.id)
            .bind(&request.agent_id)
            .bind(&request.message)
            .bind(&request.nonce)
            .bind(&request.entry_id)
            .bind(&request.purpose)
            .bind(&request.team_id)
            .bind(&request.verification_method)
            .bind(request.created_at)
            .bind(request.expires_at)
            .execute(tx.conn())
            .await?;
            let detail = json!({
                "agent_id": request.agent_id,
                "entry_id": request.entry_id,
                "message_sha256": noema_core::content_id::sha256_hex(request.message.as_bytes()),
            });
            let audit = draft(
                &request.agent_id,
                "create_signing_request",
                "signing_request",
                &request.id,
                detail,
            );
            tx.record(audit, now);
            tx.commit().await?;
            Ok(Ok(()))
        })
    }

    pub async fn get_signing_request(
        &self,
        id: &str,
    ) -> Result<Option<SigningRequest>, IdentityError> {
        let sql = format!("SELECT {REQUEST_COLUMNS} FROM signing_requests WHERE id = $1");
        self.find::<RequestRow>(&sql, id)
            .await?
            .map(SigningRequest::try_from)
            .transpose()
    }

    /// The newest completed request carrying `signature`.
    pub async fn signing_request_by_signature(
        &self,
        signature: &str,
    ) -> Result<Option<SigningRequest>, IdentityError> {
        let sql = format!(
            "SELECT {REQUEST_COLUMNS} FROM signing_requests WHERE signature = $1 \
             AND status = 'completed' ORDER BY completed_at DESC LIMIT 1"
        );
        self.find::<RequestRow>(&sql, signature)
            .await?
            .map(SigningRequest::try_from)
            .transpose()
    }

    /// An agent's requests, newest first, filtered by stored status.
    pub async fn list_signing_requests(
        &self,
        agent_id: &str,
        statuses: &[String],
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<SigningRequest>, u64), IdentityError> {
        fn push_where<'a, D: Engine>(
            qb: &mut Builder<'a, D>,
            agent_id: &'a str,
            statuses: &'a [String],
        ) {
            qb.push(" WHERE agent_id = ").push_bind(agent_id);
            if !statuses.is_empty() {
                qb.push(" AND status IN (")
                    .push_list(statuses.iter().map(String::as_str))
                    .push(")");
            }
        }
        let (rows, total): (Vec<RequestRow>, i64) = with_pool!(&self.db, |pool| {
            let mut count = Builder::new("SELECT COUNT(*) AS n FROM signing_requests");
            push_where(&mut count, agent_id, statuses);
            let (total,): (i64,) = count.build().fetch_one(pool).await?;
            let mut page = Builder::new(format!("SELECT {REQUEST_COLUMNS} FROM signing_requests"));
            push_where(&mut page, agent_id, statuses);
            page.push(" ORDER BY created_at DESC, id DESC LIMIT ")
                .push_bind(limit);
            page.push(" OFFSET ").push_bind(offset);
            (page.build().fetch_all(pool).await?, total)
        });
        let requests = rows
            .into_iter()
            .map(SigningRequest::try_from)
            .collect::<Result<Vec<_>, _>>()?;
        Ok((requests, unsigned(total)))
    }

    /// Completes a message request with its verification result (one shot).
    pub async fn complete_message_request(
        &self,
        request: &SigningRequest,
        signature: &str,
        valid: bool,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        with_pool!(&self.db, |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            complete(&mut tx, &request.id, signature, valid, now).await?;
            let detail = json!({"valid": valid, "signature": signature});
            let audit = draft(
                &request.agent_id,
                "submit_signature",
                "signing_request",
                &request.id,
                detail,
            );
            tx.record(audit, now);
            tx.commit().await?;
            Ok(())
        })
    }

    /// Signs draft `entry_id` with a verified signature: completes the request, stores the
    /// signature and nonce on the entry (only if it still has the prepared CID and is
    /// unsigned) and extends the signer's chain, atomically.
    pub async fn sign_entry(
        &self,
        request: &SigningRequest,
        entry_id: &str,
        signing: &SignatureInput,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        with_pool!(&self.db, |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            complete(&mut tx, &request.id, &signing.signature, true, now).await?;
            let link = chain::extend(
                &mut tx,
                &signing.signed_by,
                entry_id,
                &request.message,
                &signing.signature,
                now,
            )
            .await?;
            let updated = query(
                "UPDATE diary_entries SET content_signature = $1, signing_nonce = $2, \
                 signing_request_id = $3, signed_by = $4, signer_fingerprint = $5, \
                 signed_at = $6, chain_seq = $7, chain_prev = $8, chain_hash = $9, \
                 updated_at = $6 WHERE id = $10 AND content_signature IS NULL \
                 AND content_hash = $11",
            )
            .bind(&signing.signature)
            .bind(&signing.nonce)
            .bind(&signing.request_id)
            .bind(&signing.signed_by)
            .bind(&signing.signer_fingerprint)
            .bind(now)
            .bind(signed(link.seq))
            .bind(&link.prev)
            .bind(&link.hash)
            .bind(entry_id)
            .bind(&request.message)
            .execute(tx.conn())
            .await;
            match updated {
                Ok(1) => {}
                Ok(_) => {
                    return Err(IdentityError::FailedPrecondition(
                        "the entry changed since the signing request was prepared (edited, \
                         signed or deleted); prepare a new signing request for its current \
                         contentHash"
                            .into(),
                    ));
                }
                Err(err) if is_unique_violation(&err) => {
                    return Err(IdentityError::SignatureReused);
                }
                Err(err) => return Err(err.into()),
            }
            let detail = json!({
                "content_hash": request.message,
                "signature": signing.signature,
                "signing_request_id": request.id,
                "chain_seq": link.seq,
                "chain_hash": link.hash,
            });
            tx.record(
                draft(&signing.signed_by, "sign_entry", "entry", entry_id, detail),
                now,
            );
            tx.commit().await?;
            Ok(())
        })
    }
}
