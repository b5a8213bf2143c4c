//! Coordination (migration 0005): the peer registry and the coordination artifacts
//! (handoffs, shared artifacts, reconciliations), per tenant. Every write is one audited
//! transaction guarded by the version it read, so concurrent writers never lose an update:
//! the one that finds the version moved gets `Ok(false)` and decides again.

use noema_core::audit::AuditDraft;
use noema_store::audit::AuditedTx;
use noema_store::sql::{Builder, query};
use noema_store::with_pool;
use time::OffsetDateTime;

use super::ContinuityStore;
use crate::error::Error;

/// A registered peer.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PeerRow {
    pub peer_id: String,
    pub trust_level: String,
    pub updated_at: String,
    /// The original's peer record (JSON, its key order, without `peer_id`).
    pub document: String,
    pub revision_id: String,
    pub version: i64,
}

/// A peer record to store: new (`expected_version: None`) or replacing the version read.
#[derive(Debug, Clone)]
pub struct PeerWrite {
    pub tenant: String,
    pub peer_id: String,
    pub trust_level: String,
    pub updated_at: String,
    pub document: String,
    pub revision_id: String,
    pub expected_version: Option<i64>,
    pub at: OffsetDateTime,
    pub audit: AuditDraft,
}

/// A stored coordination artifact.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ArtifactRow {
    pub artifact_id: String,
    /// The original's artifact (JSON, its model's key order).
    pub document: String,
    pub revision_id: String,
    pub version: i64,
}

/// The version an update replaces, kept in the artifact's history.
#[derive(Debug, Clone)]
pub struct Superseded {
    pub version: i64,
    pub document: String,
    pub revision_id: String,
}

/// A coordination artifact to store.
#[derive(Debug, Clone)]
pub struct ArtifactWrite {
    pub tenant: String,
    /// `handoff`, `shared` or `reconciliation`.
    pub kind: &'static str,
    pub artifact_id: String,
    /// The sender (handoff) or owner.
    pub party: String,
    /// The recipient (handoff).
    pub counterparty: Option<String>,
    pub status: Option<String>,
    pub task_id: Option<String>,
    pub thread_id: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub document: String,
    pub revision_id: String,
    /// `None` creates; `Some(v)` replaces version `v` only.
    pub expected_version: Option<i64>,
    /// The replaced version, to keep in the history (shared artifacts).
    pub superseded: Option<Superseded>,
    pub at: OffsetDateTime,
    pub audit: AuditDraft,
}

/// Which of a tenant's artifacts of one kind to list (all when empty).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ArtifactFilter {
    pub party: Option<String>,
    pub counterparty: Option<String>,
    pub status: Option<String>,
    pub task_id: Option<String>,
    pub thread_id: Option<String>,
}

/// One superseded version of an artifact.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct HistoryVersion {
    pub version: i64,
    pub document: String,
    pub revision_id: String,
}

const PEER_COLUMNS: &str = "peer_id, trust_level, updated_at, document, revision_id, version";
const ARTIFACT_COLUMNS: &str = "artifact_id, document, revision_id, version";

impl ContinuityStore {
    /// The tenant's peer `peer_id`.
    pub async fn peer(&self, tenant: &str, peer_id: &str) -> Result<Option<PeerRow>, Error> {
        let sql = format!(
            "SELECT {PEER_COLUMNS} FROM coordination_peers WHERE tenant = $1 AND peer_id = $2"
        );
        Ok(with_pool!(self.database(), |pool| {
            query(&sql)
                .bind(tenant)
                .bind(peer_id)
                .fetch_optional(pool)
                .await?
        }))
    }

    /// The tenant's peers, by peer id.
    pub async fn peers(&self, tenant: &str) -> Result<Vec<PeerRow>, Error> {
        let sql = format!(
            "SELECT {PEER_COLUMNS} FROM coordination_peers WHERE tenant = $1 ORDER BY peer_id"
        );
        Ok(with_pool!(self.database(), |pool| {
            query(&sql).bind(tenant).fetch_all(pool).await?
        }))
    }

    /// Stores `write`: `Ok(false)` when the peer already exists (new) or moved since it was
    /// read (replace).
    pub async fn peer_write(&self, write: PeerWrite) -> Result<bool, Error> {
        let _turn = match self.database() {
            noema_store::Database::Sqlite(_) => Some(self.sqlite_writer.lock().await),
            noema_store::Database::Postgres(_) => None,
        };
        with_pool!(self.database(), |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            let statement = match write.expected_version {
                None => query(
                    "INSERT INTO coordination_peers (tenant, peer_id, trust_level, updated_at, \
                     document, revision_id, version) VALUES ($1, $2, $3, $4, $5, $6, 1) \
                     ON CONFLICT DO NOTHING",
                ),
                Some(_) => query(
                    "UPDATE coordination_peers SET trust_level = $3, updated_at = $4, \
                     document = $5, revision_id = $6, version = version + 1 \
                     WHERE tenant = $1 AND peer_id = $2 AND version = $7",
                ),
            };
            let statement = statement
                .bind(write.tenant.as_str())
                .bind(write.peer_id.as_str())
                .bind(write.trust_level.as_str())
                .bind(write.updated_at.as_str())
                .bind(write.document.as_str())
                .bind(write.revision_id.as_str());
            let statement = match write.expected_version {
                Some(version) => statement.bind(version),
                None => statement,
            };
            let landed = statement.execute(tx.conn()).await? == 1;
            if landed {
                tx.record(write.audit.clone(), write.at);
                tx.commit().await?;
            } else {
                tx.rollback().await?;
            }
            Ok(landed)
        })
    }

    /// The tenant's artifact `artifact_id` of `kind`.
    pub async fn coordination_artifact(
        &self,
        tenant: &str,
        kind: &str,
        artifact_id: &str,
    ) -> Result<Option<ArtifactRow>, Error> {
        let sql = format!(
            "SELECT {ARTIFACT_COLUMNS} FROM coordination_artifacts \
             WHERE tenant = $1 AND kind = $2 AND artifact_id = $3"
        );
        Ok(with_pool!(self.database(), |pool| {
            query(&sql)
                .bind(tenant)
                .bind(kind)
                .bind(artifact_id)
                .fetch_optional(pool)
                .await?
        }))
    }

    /// The tenant's artifacts of `kind` matching `filter`, by artifact id (the domain orders
    /// them as each query answers).
    pub async fn coordination_artifacts(
        &self,
        tenant: &str,
        kind: &str,
        filter: &ArtifactFilter,
    ) -> Result<Vec<ArtifactRow>, Error> {
        Ok(with_pool!(self.database(), |pool| {
            let mut b = Builder::new(format!(
                "SELECT {ARTIFACT_COLUMNS} FROM coordination_artifacts WHERE tenant = "
            ));
            b.push_bind(tenant);
            b.push(" AND kind = ");
            b.push_bind(kind);
            for (column, value) in [
                ("party", &filter.party),
                ("counterparty", &filter.counterparty),
                ("status", &filter.status),
                ("task_id", &filter.task_id),
                ("thread_id", &filter.thread_id),
            ] {
                if let Some(value) = value {
                    b.push(format!(" AND {column} = "));
                    b.push_bind(value.as_str());
                }
            }
            b.push(" ORDER BY artifact_id");
            b.build().fetch_all(pool).await?
        }))
    }

    /// The superseded versions of an artifact, oldest first.
    pub async fn coordination_history(
        &self,
        tenant: &str,
        kind: &str,
        artifact_id: &str,
    ) -> Result<Vec<HistoryVersion>, Error> {
        Ok(with_pool!(self.database(), |pool| {
            query(
                "SELECT version, document, revision_id FROM coordination_history \
                 WHERE tenant = $1 AND kind = $2 AND artifact_id = $3 ORDER BY version",
            )
            .bind(tenant)
            .bind(kind)
            .bind(artifact_id)
            .fetch_all(pool)
            .await?
        }))
    }

    /// Stores `write` (and the version it supersedes) in one audited transaction:
    /// `Ok(false)` when the id is taken (create) or the artifact moved since it was read.
    pub async fn coordination_write(&self, write: ArtifactWrite) -> Result<bool, Error> {
        let _turn = match self.database() {
            noema_store::Database::Sqlite(_) => Some(self.sqlite_writer.lock().await),
            noema_store::Database::Postgres(_) => None,
        };
        with_pool!(self.database(), |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            let statement = match write.expected_version {
                None => query(
                    "INSERT INTO coordination_artifacts (tenant, kind, artifact_id, party, \
                     counterparty, status, task_id, thread_id, created_at, updated_at, document, \
                     revision_id, version) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 1) \
                     ON CONFLICT DO NOTHING",
                ),
                Some(_) => query(
                    "UPDATE coordination_artifacts SET party = $4, counterparty = $5, \
                     status = $6, task_id = $7, thread_id = $8, created_at = $9, \
                     updated_at = $10, document = $11, revision_id = $12, version = version + 1 \
                     WHERE tenant = $1 AND kind = $2 AND artifact_id = $3 AND version = $13",
                ),
            };
            let statement = statement
                .bind(write.tenant.as_str())
                .bind(write.kind)
                .bind(write.artifact_id.as_str())
                .bind(write.party.as_str())
                .bind(write.counterparty.as_deref())
                .bind(write.status.as_deref())
                .bind(write.task_id.as_deref())
                .bind(write.thread_id.as_deref())
                .bind(write.created_at.as_str())
                .bind(write.updated_at.as_str())
                .bind(write.document.as_str())
                .bind(write.revision_id.as_str());
            let statement = match write.expected_version {
                Some(version) => statement.bind(version),
                None => statement,
            };
            let landed = statement.execute(tx.conn()).await? == 1;
            if !landed {
                tx.rollback().await?;
                return Ok(false);
            }
            if let Some(previous) = &write.superseded {
                query(
                    "INSERT INTO coordination_history (tenant, kind, artifact_id, version, \
                     document, revision_id) VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(write.tenant.as_str())
                .bind(write.kind)
                .bind(write.artifact_id.as_str())
                .bind(previous.version)
                .bind(previous.document.as_str())
                .bind(previous.revision_id.as_str())
                .execute(tx.conn())
                .await?;
            }
            tx.record(write.audit.clone(), write.at);
            tx.commit().await?;
            Ok(true)
        })
    }
}
