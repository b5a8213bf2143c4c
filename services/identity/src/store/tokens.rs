//! API tokens, stored only as the SHA-256 of their secret. Every committed token write
//! tells the local authenticator (`crate::auth::token_written`), so its cache is never
//! stale in this process.

use noema_core::audit::AuditDraft;
use noema_store::audit::AuditedTx;
use noema_store::sql::{Engine, is_unique_violation, query};
use noema_store::with_pool;
use serde_json::json;
use sqlx::types::Json;
use time::OffsetDateTime;

use super::IdentityStore;
use crate::domain::token::{OWNER_PEER_ID, OWNER_TOKEN_ID, TokenRecord, TokenStatus};
use crate::error::IdentityError;

const TOKEN_COLUMNS: &str = "token_id, token_sha256, peer_id, scopes, read_namespaces, \
     write_namespaces, superuser, status, issued_at, expires_at, revoked_at, revoked_reason, \
     rotated_at, rotated_to_token_id, rotated_from_token_id, description, tenant";

/// Which tokens a revoke call targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevokeSelector {
    TokenId(String),
    Sha256(String),
    Peer(String),
}

#[derive(sqlx::FromRow)]
struct TokenRow {
    token_id: String,
    token_sha256: String,
    peer_id: String,
    scopes: Json<Vec<String>>,
    read_namespaces: Json<Vec<String>>,
    write_namespaces: Json<Vec<String>>,
    superuser: bool,
    status: String,
    issued_at: OffsetDateTime,
    expires_at: Option<OffsetDateTime>,
    revoked_at: Option<OffsetDateTime>,
    revoked_reason: Option<String>,
    rotated_at: Option<OffsetDateTime>,
    rotated_to_token_id: Option<String>,
    rotated_from_token_id: Option<String>,
    description: String,
    tenant: String,
}

impl TryFrom<TokenRow> for TokenRecord {
    type Error = IdentityError;

    fn try_from(row: TokenRow) -> Result<TokenRecord, IdentityError> {
        Ok(TokenRecord {
            token_id: row.token_id,
            token_sha256: row.token_sha256,
            peer_id: row.peer_id,
            scopes: row.scopes.0,
            read_namespaces: row.read_namespaces.0,
            write_namespaces: row.write_namespaces.0,
            superuser: row.superuser,
            status: TokenStatus::parse(&row.status)?,
            issued_at: row.issued_at,
            expires_at: row.expires_at,
            revoked_at: row.revoked_at,
            revoked_reason: row.revoked_reason,
            rotated_at: row.rotated_at,
            rotated_to_token_id: row.rotated_to_token_id,
            rotated_from_token_id: row.rotated_from_token_id,
            description: row.description,
            tenant: row.tenant,
        })
    }
}

fn token_audit(action: &str, actor: &str, token: &TokenRecord) -> AuditDraft {
    AuditDraft {
        actor: actor.to_owned(),
        action: action.to_owned(),
        target_id: Some(token.token_id.clone()),
        target_type: Some("token".into()),
        detail: Some(json!({
            "peer_id": token.peer_id,
            "scopes": token.scopes,
            "tenant": token.tenant,
            "token_sha256": token.token_sha256,
        })),
    }
}

async fn insert_token_row<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    token: &TokenRecord,
) -> Result<(), IdentityError> {
    let result = query(
        "INSERT INTO tokens (token_id, token_sha256, peer_id, scopes, read_namespaces, \
         write_namespaces, superuser, status, issued_at, expires_at, rotated_from_token_id, \
         description, tenant) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
    )
    .bind(&token.token_id)
    .bind(&token.token_sha256)
    .bind(&token.peer_id)
    .bind(Json(&token.scopes))
    .bind(Json(&token.read_namespaces))
    .bind(Json(&token.write_namespaces))
    .bind(token.superuser)
    .bind(token.status.as_str())
    .bind(token.issued_at)
    .bind(token.expires_at)
    .bind(&token.rotated_from_token_id)
    .bind(&token.description)
    .bind(&token.tenant)
    .execute(tx.conn())
    .await;
    match result {
        Ok(_) => Ok(()),
        Err(err) if is_unique_violation(&err) => Err(IdentityError::AlreadyExists(format!(
            "a token with token_id {:?} already exists",
            token.token_id
        ))),
        Err(err) => Err(err.into()),
    }
}

impl IdentityStore {
    pub async fn token_by_sha256(
        &self,
        sha256: &str,
    ) -> Result<Option<TokenRecord>, IdentityError> {
        self.token_where("token_sha256", sha256).await
    }

    pub async fn token_by_id(&self, token_id: &str) -> Result<Option<TokenRecord>, IdentityError> {
        self.token_where("token_id", token_id).await
    }

    async fn token_where(
        &self,
        column: &str,
        value: &str,
    ) -> Result<Option<TokenRecord>, IdentityError> {
        let sql = format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE {column} = $1");
        self.find::<TokenRow>(&sql, value)
            .await?
            .map(TokenRecord::try_from)
            .transpose()
    }

    /// Tokens newest issued first, optionally of one peer.
    pub async fn list_tokens(
        &self,
        peer_id: Option<&str>,
    ) -> Result<Vec<TokenRecord>, IdentityError> {
        let sql = format!(
            "SELECT {TOKEN_COLUMNS} FROM tokens WHERE ($1 = '' OR peer_id = $1) \
             ORDER BY issued_at DESC, token_id DESC"
        );
        let rows: Vec<TokenRow> = with_pool!(&self.db, |pool| {
            query(&sql)
                .bind(peer_id.unwrap_or(""))
                .fetch_all(pool)
                .await?
        });
        rows.into_iter().map(TokenRecord::try_from).collect()
    }

    #[tracing::instrument(skip_all, fields(token_id = %token.token_id))]
    pub async fn insert_token(
        &self,
        token: &TokenRecord,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        with_pool!(&self.db, |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            insert_token_row(&mut tx, token).await?;
            tx.record(token_audit("issue_token", actor, token), now);
            tx.commit().await?;
        });
        crate::auth::token_written();
        Ok(())
    }

    /// Revokes the active tokens matching `selector`; returns (matched, revoked ids).
    #[tracing::instrument(skip_all)]
    pub async fn revoke(
        &self,
        selector: &RevokeSelector,
        reason: &str,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(Vec<TokenRecord>, Vec<String>), IdentityError> {
        let (column, value) = match selector {
            RevokeSelector::TokenId(id) => ("token_id", id.as_str()),
            RevokeSelector::Sha256(sha) => ("token_sha256", sha.as_str()),
            RevokeSelector::Peer(peer) => ("peer_id", peer.as_str()),
        };
        let select = format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE {column} = $1");
        let written = with_pool!(&self.db, |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            let rows: Vec<TokenRow> = query(&select).bind(value).fetch_all(tx.conn()).await?;
            let matched = rows
                .into_iter()
                .map(TokenRecord::try_from)
                .collect::<Result<Vec<_>, _>>()?;
            let mut revoked = Vec::new();
            for token in matched.iter().filter(|t| t.token_id != OWNER_TOKEN_ID) {
                let changed = query(
                    "UPDATE tokens SET status = 'revoked', revoked_at = $1, revoked_reason = $2 \
                     WHERE token_id = $3 AND status = 'active'",
                )
                .bind(now)
                .bind(reason)
                .bind(&token.token_id)
                .execute(tx.conn())
                .await?;
                if changed == 1 {
                    tx.record(token_audit("revoke_token", actor, token), now);
                    revoked.push(token.token_id.clone());
                }
            }
            tx.commit().await?;
            (matched, revoked)
        });
        crate::auth::token_written();
        Ok(written)
    }

    /// Revokes `old` (if still active) and inserts `new` in one transaction.
    #[tracing::instrument(skip_all, fields(from = %old.token_id, to = %new.token_id))]
    pub async fn rotate_token(
        &self,
        old: &TokenRecord,
        new: &TokenRecord,
        reason: &str,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        with_pool!(&self.db, |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            let changed = query(
                "UPDATE tokens SET status = 'revoked', revoked_at = $1, revoked_reason = $2, \
                 rotated_at = $1, rotated_to_token_id = $3 \
                 WHERE token_id = $4 AND status = 'active'",
            )
            .bind(now)
            .bind(reason)
            .bind(&new.token_id)
            .bind(&old.token_id)
            .execute(tx.conn())
            .await?;
            if changed != 1 {
                return Err(IdentityError::FailedPrecondition(format!(
                    "token {:?} is not active and cannot be rotated",
                    old.token_id
                )));
            }
            insert_token_row(&mut tx, new).await?;
            let mut draft = token_audit("rotate_token", actor, new);
            if let Some(detail) = draft.detail.as_mut() {
                detail["rotated_from_token_id"] = json!(old.token_id);
            }
            tx.record(draft, now);
            tx.commit().await?;
        });
        crate::auth::token_written();
        Ok(())
    }

    /// Makes the owner token's hash `owner.token_sha256`: created on first start, replaced
    /// when the configured secret changes. Returns whether anything changed.
    pub async fn ensure_owner(
        &self,
        owner: &TokenRecord,
        now: OffsetDateTime,
    ) -> Result<bool, IdentityError> {
        debug_assert_eq!(owner.peer_id, OWNER_PEER_ID);
        let changed = with_pool!(&self.db, |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            let replaced = query(
                "UPDATE tokens SET token_sha256 = $1 WHERE token_id = $2 AND token_sha256 <> $1",
            )
            .bind(&owner.token_sha256)
            .bind(OWNER_TOKEN_ID)
            .execute(tx.conn())
            .await?;
            let changed = if replaced == 1 {
                tx.record(
                    token_audit("replace_owner_token", "system:init", owner),
                    now,
                );
                true
            } else {
                let exists: Option<(i32,)> = query("SELECT 1 FROM tokens WHERE token_id = $1")
                    .bind(OWNER_TOKEN_ID)
                    .fetch_optional(tx.conn())
                    .await?;
                if exists.is_none() {
                    insert_token_row(&mut tx, owner).await?;
                    tx.record(token_audit("create_owner_token", "system:init", owner), now);
                }
                exists.is_none()
            };
            tx.commit().await?;
            changed
        });
        crate::auth::token_written();
        Ok(changed)
    }
}
