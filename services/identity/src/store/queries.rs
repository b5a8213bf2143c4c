//! The identity service's SQL, expanded once per backend by `backend_queries!`.

macro_rules! backend_queries {
    ($module:ident, $db:ty) => {
        pub mod $module {
            use noema_core::audit::AuditDraft;
            use noema_core::keys::{PublicKey, Signature};
            use noema_store::audit::$module as audit;
            use serde_json::json;
            use sqlx::Row as _;
            use sqlx::types::Json;
            use time::OffsetDateTime;

            use crate::domain::agent::{Agent, Registration, registration};
            use crate::domain::token::{OWNER_PEER_ID, OWNER_TOKEN_ID, TokenRecord, TokenStatus};
            use crate::error::IdentityError;
            use crate::store::{RevokeSelector, is_unique_violation};

            type Db = $db;
            type Pool = sqlx::Pool<Db>;
            type DbRow = <Db as sqlx::Database>::Row;

            const AGENT_COLUMNS: &str =
                "agent_id, public_key, first_object_id, registered_at, key_version, key_rotated_at";
            const TOKEN_COLUMNS: &str = "token_id, token_sha256, peer_id, scopes, read_namespaces, \
                 write_namespaces, superuser, status, issued_at, expires_at, revoked_at, revoked_reason, \
                 rotated_at, rotated_to_token_id, rotated_from_token_id, description";

            fn agent_from_row(row: &DbRow) -> Result<Agent, IdentityError> {
                let key: String = row.try_get("public_key")?;
                let version: i32 = row.try_get("key_version")?;
                Ok(Agent {
                    agent_id: row.try_get("agent_id")?,
                    public_key: PublicKey::parse(&key)
                        .map_err(|e| IdentityError::Corrupt(format!("stored key: {e}")))?,
                    first_object_id: row.try_get("first_object_id")?,
                    registered_at: row.try_get("registered_at")?,
                    key_version: u32::try_from(version).unwrap_or(0),
                    key_rotated_at: row.try_get("key_rotated_at")?,
                })
            }

            fn token_from_row(row: &DbRow) -> Result<TokenRecord, IdentityError> {
                let status: String = row.try_get("status")?;
                let scopes: Json<Vec<String>> = row.try_get("scopes")?;
                let read: Json<Vec<String>> = row.try_get("read_namespaces")?;
                let write: Json<Vec<String>> = row.try_get("write_namespaces")?;
                Ok(TokenRecord {
                    token_id: row.try_get("token_id")?,
                    token_sha256: row.try_get("token_sha256")?,
                    peer_id: row.try_get("peer_id")?,
                    scopes: scopes.0,
                    read_namespaces: read.0,
                    write_namespaces: write.0,
                    superuser: row.try_get("superuser")?,
                    status: TokenStatus::parse(&status)?,
                    issued_at: row.try_get("issued_at")?,
                    expires_at: row.try_get("expires_at")?,
                    revoked_at: row.try_get("revoked_at")?,
                    revoked_reason: row.try_get("revoked_reason")?,
                    rotated_at: row.try_get("rotated_at")?,
                    rotated_to_token_id: row.try_get("rotated_to_token_id")?,
                    rotated_from_token_id: row.try_get("rotated_from_token_id")?,
                    description: row.try_get("description")?,
                })
            }

            pub async fn get_agent(pool: &Pool, agent_id: &str) -> Result<Option<Agent>, IdentityError> {
                let sql = format!("SELECT {AGENT_COLUMNS} FROM agents WHERE agent_id = $1");
                let row = sqlx::query(&sql).bind(agent_id).fetch_optional(pool).await?;
                row.as_ref().map(agent_from_row).transpose()
            }

            pub async fn get_agent_by_fingerprint(
                pool: &Pool,
                fingerprint: &str,
            ) -> Result<Option<Agent>, IdentityError> {
                let sql = format!(
                    "SELECT {AGENT_COLUMNS} FROM agents WHERE fingerprint = $1 \
                     ORDER BY registered_at, agent_id LIMIT 1"
                );
                let row = sqlx::query(&sql).bind(fingerprint).fetch_optional(pool).await?;
                row.as_ref().map(agent_from_row).transpose()
            }

            pub async fn list_agents(
                pool: &Pool,
                after: &str,
                limit: i64,
            ) -> Result<Vec<Agent>, IdentityError> {
                let sql = format!(
                    "SELECT {AGENT_COLUMNS} FROM agents WHERE agent_id > $1 ORDER BY agent_id LIMIT $2"
                );
                let rows = sqlx::query(&sql).bind(after).bind(limit).fetch_all(pool).await?;
                rows.iter().map(agent_from_row).collect()
            }

            /// Trust on first use. The INSERT decides the race: of two concurrent first
            /// registrations exactly one inserts; the other sees its row and compares.
            pub async fn register_agent(
                pool: &Pool,
                agent_id: &str,
                key: &PublicKey,
                first_object_id: &str,
                actor: &str,
                now: OffsetDateTime,
            ) -> Result<(Agent, bool), IdentityError> {
                let mut tx = pool.begin().await?;
                let sql = format!(
                    "INSERT INTO agents (agent_id, public_key, fingerprint, first_object_id, registered_at, key_version) \
                     VALUES ($1, $2, $3, $4, $5, 1) ON CONFLICT (agent_id) DO NOTHING RETURNING {AGENT_COLUMNS}"
                );
                let inserted = sqlx::query(&sql)
                    .bind(agent_id)
                    .bind(key.to_prefixed())
                    .bind(key.fingerprint())
                    .bind(first_object_id)
                    .bind(now)
                    .fetch_optional(&mut *tx)
                    .await?;
                if let Some(row) = inserted {
                    let agent = agent_from_row(&row)?;
                    sqlx::query(
                        "INSERT INTO agent_key_history (agent_id, key_version, public_key, fingerprint, valid_from) \
                         VALUES ($1, 1, $2, $3, $4)",
                    )
                    .bind(agent_id)
                    .bind(key.to_prefixed())
                    .bind(key.fingerprint())
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                    let draft = AuditDraft {
                        actor: actor.to_owned(),
                        action: "register_key".into(),
                        target_id: Some(agent_id.to_owned()),
                        target_type: Some("agent".into()),
                        detail: Some(json!({
                            "public_key": key.to_prefixed(),
                            "fingerprint": key.fingerprint(),
                            "first_object_id": first_object_id,
                        })),
                    };
                    audit::append(&mut tx, draft, now).await?;
                    tx.commit().await?;
                    return Ok((agent, true));
                }
                tx.rollback().await?;
                let existing = get_agent(pool, agent_id).await?.ok_or_else(|| {
                    IdentityError::Corrupt(format!("agent {agent_id:?} vanished during registration"))
                })?;
                match registration(Some(&existing.public_key), key) {
                    Registration::AlreadyRegistered => Ok((existing, false)),
                    _ => Err(IdentityError::KeyMismatch {
                        agent_id: agent_id.to_owned(),
                    }),
                }
            }

            /// Replaces the key if it is still at `expected_version` (a concurrent
            /// rotation makes this fail rather than silently win).
            pub async fn rotate_key(
                pool: &Pool,
                agent_id: &str,
                expected_version: u32,
                new_key: &PublicKey,
                proof: &Signature,
                actor: &str,
                now: OffsetDateTime,
            ) -> Result<Agent, IdentityError> {
                let mut tx = pool.begin().await?;
                let sql = format!(
                    "UPDATE agents SET public_key = $1, fingerprint = $2, key_version = key_version + 1, \
                     key_rotated_at = $3 WHERE agent_id = $4 AND key_version = $5 RETURNING {AGENT_COLUMNS}"
                );
                let row = sqlx::query(&sql)
                    .bind(new_key.to_prefixed())
                    .bind(new_key.fingerprint())
                    .bind(now)
                    .bind(agent_id)
                    .bind(i32::try_from(expected_version).unwrap_or(i32::MAX))
                    .fetch_optional(&mut *tx)
                    .await?
                    .ok_or_else(|| {
                        IdentityError::FailedPrecondition(
                            "the agent's key changed while rotating; fetch it and sign a new proof".into(),
                        )
                    })?;
                let agent = agent_from_row(&row)?;
                sqlx::query(
                    "INSERT INTO agent_key_history \
                     (agent_id, key_version, public_key, fingerprint, valid_from, proof_signature) \
                     VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(agent_id)
                .bind(i32::try_from(agent.key_version).unwrap_or(i32::MAX))
                .bind(new_key.to_prefixed())
                .bind(new_key.fingerprint())
                .bind(now)
                .bind(proof.to_base64())
                .execute(&mut *tx)
                .await?;
                let draft = AuditDraft {
                    actor: actor.to_owned(),
                    action: "rotate_key".into(),
                    target_id: Some(agent_id.to_owned()),
                    target_type: Some("agent".into()),
                    detail: Some(json!({
                        "new_public_key": new_key.to_prefixed(),
                        "key_version": agent.key_version,
                        "proof_signature": proof.to_base64(),
                    })),
                };
                audit::append(&mut tx, draft, now).await?;
                tx.commit().await?;
                Ok(agent)
            }

            async fn insert_token_row(
                tx: &mut sqlx::Transaction<'_, Db>,
                token: &TokenRecord,
            ) -> Result<(), IdentityError> {
                let result = sqlx::query(
                    "INSERT INTO tokens (token_id, token_sha256, peer_id, scopes, read_namespaces, \
                     write_namespaces, superuser, status, issued_at, expires_at, rotated_from_token_id, description) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
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
                .execute(&mut **tx)
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

            fn token_audit(action: &str, actor: &str, token: &TokenRecord) -> AuditDraft {
                AuditDraft {
                    actor: actor.to_owned(),
                    action: action.to_owned(),
                    target_id: Some(token.token_id.clone()),
                    target_type: Some("token".into()),
                    detail: Some(json!({
                        "peer_id": token.peer_id,
                        "scopes": token.scopes,
                        "token_sha256": token.token_sha256,
                    })),
                }
            }

            pub async fn insert_token(
                pool: &Pool,
                token: &TokenRecord,
                actor: &str,
                now: OffsetDateTime,
            ) -> Result<(), IdentityError> {
                let mut tx = pool.begin().await?;
                insert_token_row(&mut tx, token).await?;
                audit::append(&mut tx, token_audit("issue_token", actor, token), now).await?;
                tx.commit().await?;
                Ok(())
            }

            pub async fn token_by_sha256(
                pool: &Pool,
                sha256: &str,
            ) -> Result<Option<TokenRecord>, IdentityError> {
                let sql = format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE token_sha256 = $1");
                let row = sqlx::query(&sql).bind(sha256).fetch_optional(pool).await?;
                row.as_ref().map(token_from_row).transpose()
            }

            pub async fn token_by_id(
                pool: &Pool,
                token_id: &str,
            ) -> Result<Option<TokenRecord>, IdentityError> {
                let sql = format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE token_id = $1");
                let row = sqlx::query(&sql).bind(token_id).fetch_optional(pool).await?;
                row.as_ref().map(token_from_row).transpose()
            }

            /// Tokens newest issued first, optionally of one peer.
            pub async fn list_tokens(
                pool: &Pool,
                peer_id: Option<&str>,
            ) -> Result<Vec<TokenRecord>, IdentityError> {
                let sql = format!(
                    "SELECT {TOKEN_COLUMNS} FROM tokens WHERE ($1 = '' OR peer_id = $1) \
                     ORDER BY issued_at DESC, token_id DESC"
                );
                let rows = sqlx::query(&sql)
                    .bind(peer_id.unwrap_or(""))
                    .fetch_all(pool)
                    .await?;
                rows.iter().map(token_from_row).collect()
            }

            async fn select_for_revoke(
                tx: &mut sqlx::Transaction<'_, Db>,
                selector: &RevokeSelector,
            ) -> Result<Vec<TokenRecord>, IdentityError> {
                let (column, value) = match selector {
                    RevokeSelector::TokenId(id) => ("token_id", id.as_str()),
                    RevokeSelector::Sha256(sha) => ("token_sha256", sha.as_str()),
                    RevokeSelector::Peer(peer) => ("peer_id", peer.as_str()),
                };
                let sql = format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE {column} = $1");
                let rows = sqlx::query(&sql).bind(value).fetch_all(&mut **tx).await?;
                rows.iter().map(token_from_row).collect()
            }

            /// Revokes the active tokens matching `selector`; returns (matched, revoked ids).
            pub async fn revoke(
                pool: &Pool,
                selector: &RevokeSelector,
                reason: &str,
                actor: &str,
                now: OffsetDateTime,
            ) -> Result<(Vec<TokenRecord>, Vec<String>), IdentityError> {
                let mut tx = pool.begin().await?;
                let matched = select_for_revoke(&mut tx, selector).await?;
                let mut revoked = Vec::new();
                for token in &matched {
                    if token.token_id == OWNER_TOKEN_ID {
                        continue;
                    }
                    let done = sqlx::query(
                        "UPDATE tokens SET status = 'revoked', revoked_at = $1, revoked_reason = $2 \
                         WHERE token_id = $3 AND status = 'active'",
                    )
                    .bind(now)
                    .bind(reason)
                    .bind(&token.token_id)
                    .execute(&mut *tx)
                    .await?;
                    if done.rows_affected() == 1 {
                        audit::append(&mut tx, token_audit("revoke_token", actor, token), now).await?;
                        revoked.push(token.token_id.clone());
                    }
                }
                tx.commit().await?;
                Ok((matched, revoked))
            }

            /// Revokes `old` (if still active) and inserts `new` in one transaction.
            pub async fn rotate_token(
                pool: &Pool,
                old: &TokenRecord,
                new: &TokenRecord,
                reason: &str,
                actor: &str,
                now: OffsetDateTime,
            ) -> Result<(), IdentityError> {
                let mut tx = pool.begin().await?;
                let done = sqlx::query(
                    "UPDATE tokens SET status = 'revoked', revoked_at = $1, revoked_reason = $2, \
                     rotated_at = $1, rotated_to_token_id = $3 WHERE token_id = $4 AND status = 'active'",
                )
                .bind(now)
                .bind(reason)
                .bind(&new.token_id)
                .bind(&old.token_id)
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() != 1 {
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
                audit::append(&mut tx, draft, now).await?;
                tx.commit().await?;
                Ok(())
            }

            /// Makes the owner token's hash `sha256`: created on first start, replaced
            /// when the configured secret changes. Returns whether anything changed.
            pub async fn ensure_owner(
                pool: &Pool,
                owner: &TokenRecord,
                now: OffsetDateTime,
            ) -> Result<bool, IdentityError> {
                let mut tx = pool.begin().await?;
                let updated = sqlx::query(
                    "UPDATE tokens SET token_sha256 = $1 WHERE token_id = $2 AND token_sha256 <> $1",
                )
                .bind(&owner.token_sha256)
                .bind(OWNER_TOKEN_ID)
                .execute(&mut *tx)
                .await?;
                let changed = if updated.rows_affected() == 1 {
                    audit::append(&mut tx, token_audit("replace_owner_token", "system:init", owner), now)
                        .await?;
                    true
                } else {
                    let exists = sqlx::query("SELECT 1 FROM tokens WHERE token_id = $1")
                        .bind(OWNER_TOKEN_ID)
                        .fetch_optional(&mut *tx)
                        .await?
                        .is_some();
                    if !exists {
                        insert_token_row(&mut tx, owner).await?;
                        audit::append(&mut tx, token_audit("create_owner_token", "system:init", owner), now)
                            .await?;
                    }
                    !exists
                };
                tx.commit().await?;
                debug_assert_eq!(owner.peer_id, OWNER_PEER_ID);
                Ok(changed)
            }
        }
    };
}

backend_queries!(sqlite, sqlx::Sqlite);
backend_queries!(postgres, sqlx::Postgres);
