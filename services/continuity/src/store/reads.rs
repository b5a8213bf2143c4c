//! Reads: a subject's state, revisions, listings, archives, idempotency keys and plans.
//! Every read names its tenant; no query can reach another tenant's rows.

use std::sync::Arc;

use noema_store::sql::{Builder, Engine, query};
use noema_store::{Database, with_pool};
use time::OffsetDateTime;

use super::ContinuityStore;
use super::read_cache::{Change, ChangeOnDrop};
use crate::domain::subject::SubjectKey;
use crate::error::Error;

/// Rows per statement when fetching revisions by key.
const KEYS_PER_QUERY: usize = 250;
/// How stale a subject's `used_at` may get before a read refreshes it (seconds).
const USED_AT_RESOLUTION: i64 = 3600;

/// A revision's capsule bytes.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct CapsuleRevision {
    pub sequence: i64,
    pub revision_id: String,
    pub capsule: Vec<u8>,
}

/// A subject's row: its chain head and tier pointers (with the active capsule's bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectRow {
    pub subject_kind: String,
    pub subject_key: String,
    pub subject_id: String,
    pub version: i64,
    pub head_sequence: i64,
    pub head_revision: String,
    pub active: Option<CapsuleRevision>,
    pub active_revision: Option<(i64, String)>,
    pub fallback: Option<(i64, String)>,
    pub used_at: i64,
}

#[derive(sqlx::FromRow)]
struct SubjectRecord {
    subject_kind: String,
    subject_key: String,
    subject_id: String,
    version: i64,
    head_sequence: i64,
    head_revision: String,
    active_sequence: Option<i64>,
    active_revision: Option<String>,
    fallback_sequence: Option<i64>,
    fallback_revision: Option<String>,
    used_at: i64,
    active_capsule: Option<Vec<u8>>,
}

impl From<SubjectRecord> for SubjectRow {
    fn from(r: SubjectRecord) -> SubjectRow {
        let active_revision = r.active_sequence.zip(r.active_revision);
        SubjectRow {
            active: match (&active_revision, r.active_capsule) {
                (Some((sequence, revision_id)), Some(capsule)) => Some(CapsuleRevision {
                    sequence: *sequence,
                    revision_id: revision_id.clone(),
                    capsule,
                }),
                _ => None,
            },
            active_revision,
            fallback: r.fallback_sequence.zip(r.fallback_revision),
            subject_kind: r.subject_kind,
            subject_key: r.subject_key,
            subject_id: r.subject_id,
            version: r.version,
            head_sequence: r.head_sequence,
            head_revision: r.head_revision,
            used_at: r.used_at,
        }
    }
}

const SUBJECT_COLUMNS: &str = "s.subject_kind, s.subject_key, s.subject_id, s.version, \
     s.head_sequence, s.head_revision, s.active_sequence, s.active_revision, \
     s.fallback_sequence, s.fallback_revision, s.used_at";

/// A subject's tier pointers: `(sequence, revision id)` of its active capsule and fallback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pointers {
    pub subject_kind: String,
    pub subject_key: String,
    pub active: Option<(i64, String)>,
    pub fallback: Option<(i64, String)>,
}

/// One revision of a subject's history.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct HistoryRow {
    pub sequence: i64,
    pub revision_id: String,
    pub previous_id: String,
    pub operation: String,
    pub capsule_sha256: String,
    pub actor: String,
    pub recorded_at: OffsetDateTime,
    pub capsule: Vec<u8>,
}

/// A stored context snapshot.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SnapshotRow {
    pub snapshot_id: String,
    pub content_id: String,
    pub body: Vec<u8>,
}

/// An archive envelope, hot or cold.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ArchiveRow {
    pub archive_path: String,
    pub subject_kind: String,
    pub subject_key: String,
    pub subject_id: String,
    pub archived_at: String,
    pub revision_id: String,
    pub state: String,
    pub envelope: Option<Vec<u8>>,
    pub cold_key: Option<String>,
    pub cold_sha256: Option<String>,
    pub stub: Option<String>,
    pub cold_stored_at: Option<String>,
}

impl ArchiveRow {
    pub fn is_cold(&self) -> bool {
        self.state == "cold"
    }

    /// The cold tier's facts, when cold.
    pub fn cold(&self) -> Option<ColdRow> {
        match (&self.cold_key, &self.cold_sha256, &self.stub) {
            (Some(key), Some(sha256), Some(stub)) if self.is_cold() => Some(ColdRow {
                key: key.clone(),
                sha256: sha256.clone(),
                stub: stub.clone(),
            }),
            _ => None,
        }
    }
}

/// Where a cold payload is and what its stub says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColdRow {
    /// The payload's object-store key.
    pub key: String,
    /// Hex SHA-256 of the payload.
    pub sha256: String,
    pub stub: String,
}

const ARCHIVE_COLUMNS: &str = "archive_path, subject_kind, subject_key, subject_id, archived_at, \
     revision_id, state, envelope, cold_key, cold_sha256, stub, cold_stored_at";

/// The first result of an idempotency key.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct IdempotencyRecord {
    pub request_sha256: String,
    pub response: Vec<u8>,
    pub subject_kind: String,
    pub subject_id: String,
    pub revision_id: String,
    pub capsule_sha256: String,
}

/// Everything the backup drill walks, for one tenant.
#[derive(Debug, Clone, Default)]
pub struct ArtifactScan {
    pub subjects: Vec<SubjectRow>,
    pub archives: Vec<ArchiveRow>,
}

impl ContinuityStore {
    /// A subject's row with its active capsule, if the subject was ever written. On SQLite
    /// from the read cache when it holds the subject.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn subject(
        &self,
        tenant: &str,
        subject: &SubjectKey,
    ) -> Result<Option<Arc<SubjectRow>>, Error> {
        match &self.db {
            Database::Sqlite(pool) => match self.read_cache.subject(tenant, subject) {
                Ok(kept) => Ok(kept),
                Err(ticket) => {
                    let read = subject_row(pool, tenant, subject).await?.map(Arc::new);
                    self.read_cache
                        .keep_subject(tenant, subject, ticket, read.clone());
                    Ok(read)
                }
            },
            Database::Postgres(pool) => Ok(subject_row(pool, tenant, subject).await?.map(Arc::new)),
        }
    }

    /// Every subject of a tenant (of one kind), without capsule bytes, in key order.
    pub async fn subjects(
        &self,
        tenant: &str,
        kind: Option<&str>,
    ) -> Result<Vec<SubjectRow>, Error> {
        let sql = format!(
            "SELECT {SUBJECT_COLUMNS}, NULL AS active_capsule FROM continuity_subjects s \
             WHERE s.tenant = $1 AND ($2 = '' OR s.subject_kind = $2) \
             ORDER BY s.subject_kind, s.subject_key"
        );
        let rows: Vec<SubjectRecord> = with_pool!(&self.db, |pool| {
            query(&sql)
                .bind(tenant)
                .bind(kind.unwrap_or(""))
                .fetch_all(pool)
                .await?
        });
        Ok(rows.into_iter().map(SubjectRow::from).collect())
    }

    /// Every subject's active and fallback revision (kind, key, pointers), in key order:
    /// what a list needs, and no more (the capsules come from the cache or by key). On
    /// SQLite from the pointer cache when it holds the tenant.
    pub async fn pointers(
        &self,
        tenant: &str,
        kind: Option<&str>,
    ) -> Result<Arc<[Pointers]>, Error> {
        let all = match &self.db {
            Database::Sqlite(pool) => match self.read_cache.pointers(tenant) {
                Ok(kept) => kept,
                Err(ticket) => {
                    let read: Arc<[Pointers]> = pointer_rows(pool, tenant).await?.into();
                    self.read_cache
                        .keep_pointers(tenant, ticket, Arc::clone(&read));
                    read
                }
            },
            Database::Postgres(pool) => pointer_rows(pool, tenant).await?.into(),
        };
        Ok(match kind {
            None => all,
            Some(kind) => all
                .iter()
                .filter(|p| p.subject_kind == kind)
                .cloned()
                .collect(),
        })
    }

    /// One revision's capsule.
    pub async fn revision(
        &self,
        tenant: &str,
        subject: &SubjectKey,
        sequence: i64,
    ) -> Result<Option<CapsuleRevision>, Error> {
        let row: Option<CapsuleRevision> = with_pool!(&self.db, |pool| {
            query(
                "SELECT sequence, revision_id, capsule FROM continuity_revisions \
                 WHERE tenant = $1 AND subject_kind = $2 AND subject_key = $3 AND sequence = $4",
            )
            .bind(tenant)
            .bind(subject.kind.as_str())
            .bind(subject.key.as_str())
            .bind(sequence)
            .fetch_optional(pool)
            .await?
        });
        Ok(row)
    }

    /// Capsules by `(kind, key, sequence)`, in any order.
    pub async fn revisions(
        &self,
        tenant: &str,
        keys: &[(String, String, i64)],
    ) -> Result<Vec<(String, String, CapsuleRevision)>, Error> {
        #[derive(sqlx::FromRow)]
        struct Keyed {
            subject_kind: String,
            subject_key: String,
            sequence: i64,
            revision_id: String,
            capsule: Vec<u8>,
        }
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(KEYS_PER_QUERY) {
            let rows: Vec<Keyed> = with_pool!(&self.db, |pool| {
                let mut select = Builder::new(
                    "SELECT subject_kind, subject_key, sequence, revision_id, capsule \
                     FROM continuity_revisions WHERE tenant = ",
                );
                select.push_bind(tenant);
                select.push(" AND (subject_kind, subject_key, sequence) IN (");
                select.push_values(chunk, |row, (kind, key, sequence)| {
                    row.bind(kind.as_str()).bind(key.as_str()).bind(*sequence);
                });
                select.push(")");
                select.build().fetch_all(pool).await?
            });
            out.extend(rows.into_iter().map(|r| {
                (
                    r.subject_kind,
                    r.subject_key,
                    CapsuleRevision {
                        sequence: r.sequence,
                        revision_id: r.revision_id,
                        capsule: r.capsule,
                    },
                )
            }));
        }
        Ok(out)
    }

    /// A subject's revisions newest first, strictly before `before` (a sequence), with
    /// their capsules (which the chain check hashes).
    pub async fn history(
        &self,
        tenant: &str,
        subject: &SubjectKey,
        before: i64,
        limit: u32,
    ) -> Result<Vec<HistoryRow>, Error> {
        let sql = "SELECT sequence, revision_id, previous_id, operation, capsule_sha256, actor, \
             recorded_at, capsule FROM continuity_revisions \
             WHERE tenant = $1 AND subject_kind = $2 AND subject_key = $3 AND sequence < $4 \
             ORDER BY sequence DESC LIMIT $5";
        let rows: Vec<HistoryRow> = with_pool!(&self.db, |pool| {
            query(sql)
                .bind(tenant)
                .bind(subject.kind.as_str())
                .bind(subject.key.as_str())
                .bind(before)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await?
        });
        Ok(rows)
    }

    /// One archive by its path.
    pub async fn archive(&self, tenant: &str, path: &str) -> Result<Option<ArchiveRow>, Error> {
        let sql = format!(
            "SELECT {ARCHIVE_COLUMNS} FROM continuity_archives WHERE tenant = $1 AND archive_path = $2"
        );
        let row: Option<ArchiveRow> = with_pool!(&self.db, |pool| {
            query(&sql)
                .bind(tenant)
                .bind(path)
                .fetch_optional(pool)
                .await?
        });
        Ok(row)
    }

    /// A tenant's archives (of one subject, of one kind, in one state), in path order.
    pub async fn archives(
        &self,
        tenant: &str,
        subject: Option<&SubjectKey>,
        kind: Option<&str>,
        state: Option<&str>,
    ) -> Result<Vec<ArchiveRow>, Error> {
        let sql = format!(
            "SELECT {ARCHIVE_COLUMNS} FROM continuity_archives WHERE tenant = $1 \
             AND ($2 = '' OR subject_kind = $2) AND ($3 = '' OR subject_key = $3) \
             AND ($4 = '' OR state = $4) ORDER BY archive_path"
        );
        let kind = subject.map(|s| s.kind.as_str()).or(kind).unwrap_or("");
        let key = subject.map_or("", |s| s.key.as_str());
        let rows: Vec<ArchiveRow> = with_pool!(&self.db, |pool| {
            query(&sql)
                .bind(tenant)
                .bind(kind)
                .bind(key)
                .bind(state.unwrap_or(""))
                .fetch_all(pool)
                .await?
        });
        Ok(rows)
    }

    /// The hot archives archived strictly before `cutoff_unix`, in the retention plan's order
    /// (archived_at, kind, key, path), at most `limit`, and how many there are in all.
    pub async fn stale_archives(
        &self,
        tenant: &str,
        kind: Option<&str>,
        cutoff_unix: i64,
        limit: u32,
    ) -> Result<(Vec<ArchiveRow>, u64), Error> {
        let sql = format!(
            "SELECT {ARCHIVE_COLUMNS} FROM continuity_archives WHERE tenant = $1 \
             AND state = 'archived' AND archived_unix < $2 AND ($3 = '' OR subject_kind = $3) \
             ORDER BY archived_at, subject_kind, subject_key, archive_path LIMIT $4"
        );
        let count_sql = "SELECT COUNT(*) FROM continuity_archives WHERE tenant = $1 \
             AND state = 'archived' AND archived_unix < $2 AND ($3 = '' OR subject_kind = $3)";
        let kind = kind.unwrap_or("");
        let (rows, (count,)): (Vec<ArchiveRow>, (i64,)) = with_pool!(&self.db, |pool| {
            let rows = query(&sql)
                .bind(tenant)
                .bind(cutoff_unix)
                .bind(kind)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await?;
            let count = query(count_sql)
                .bind(tenant)
                .bind(cutoff_unix)
                .bind(kind)
                .fetch_one(pool)
                .await?;
            (rows, count)
        });
        Ok((rows, u64::try_from(count).unwrap_or(0)))
    }

    /// The first result of an idempotency key.
    pub async fn idempotency(
        &self,
        tenant: &str,
        key: &str,
    ) -> Result<Option<IdempotencyRecord>, Error> {
        let row: Option<IdempotencyRecord> = with_pool!(&self.db, |pool| {
            query(
                "SELECT request_sha256, response, subject_kind, subject_id, revision_id, \
                 capsule_sha256 FROM continuity_idempotency WHERE tenant = $1 AND idempotency_key = $2",
            )
            .bind(tenant)
            .bind(key)
            .fetch_optional(pool)
            .await?
        });
        Ok(row)
    }

    /// The last persisted plan (`refresh` or `retention`).
    pub async fn plan(&self, tenant: &str, plan: &str) -> Result<Option<Vec<u8>>, Error> {
        let row: Option<(Vec<u8>,)> = with_pool!(&self.db, |pool| {
            query("SELECT body FROM continuity_plans WHERE tenant = $1 AND plan = $2")
                .bind(tenant)
                .bind(plan)
                .fetch_optional(pool)
                .await?
        });
        Ok(row.map(|(body,)| body))
    }

    /// Marks a subject used at `now` (the refresh plan's `recently_used`) unless it was
    /// marked within the last hour. Usage bookkeeping, not a data write: not audited.
    pub async fn touch_used(
        &self,
        tenant: &str,
        subject: &SubjectKey,
        now: i64,
    ) -> Result<(), Error> {
        let _turn = match self.db {
            Database::Sqlite(_) => Some(self.sqlite_writer.lock().await),
            Database::Postgres(_) => None,
        };
        // Dropped (still under the write gate) whether or not the update lands: a failed
        // statement may have committed all the same.
        let _forget = ChangeOnDrop {
            cache: &self.read_cache,
            tenant,
            change: Change::Row(subject),
        };
        with_pool!(&self.db, |pool| {
            query(
                "UPDATE continuity_subjects SET used_at = $4 WHERE tenant = $1 \
                 AND subject_kind = $2 AND subject_key = $3 AND used_at < $5",
            )
            .bind(tenant)
            .bind(subject.kind.as_str())
            .bind(subject.key.as_str())
            .bind(now)
            .bind(now - USED_AT_RESOLUTION)
            .execute(pool)
            .await?
        });
        Ok(())
    }

    /// Whether a read at `now` should refresh a subject's `used_at`.
    pub fn needs_touch(used_at: i64, now: i64) -> bool {
        used_at < now - USED_AT_RESOLUTION
    }

    /// A tenant's context snapshot by id.
    pub async fn snapshot(
        &self,
        tenant: &str,
        snapshot_id: &str,
    ) -> Result<Option<SnapshotRow>, Error> {
        let row: Option<SnapshotRow> = with_pool!(&self.db, |pool| {
            query(
                "SELECT snapshot_id, content_id, body FROM context_snapshots \
                 WHERE tenant = $1 AND snapshot_id = $2",
            )
            .bind(tenant)
            .bind(snapshot_id)
            .fetch_optional(pool)
            .await?
        });
        Ok(row)
    }

    /// Every tenant with continuity data, sorted.
    pub async fn tenants(&self) -> Result<Vec<String>, Error> {
        let rows: Vec<(String,)> = with_pool!(&self.db, |pool| {
            query(
                "SELECT tenant FROM continuity_subjects UNION SELECT tenant FROM continuity_archives \
                 ORDER BY 1",
            )
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().map(|(t,)| t).collect())
    }

    /// Everything of a tenant the backup drill checks.
    pub async fn scan(&self, tenant: &str) -> Result<ArtifactScan, Error> {
        Ok(ArtifactScan {
            subjects: self.subjects(tenant, None).await?,
            archives: self.archives(tenant, None, None, None).await?,
        })
    }
}

/// A tenant's subject pointer rows, in key order.
async fn subject_row<D: Engine>(
    pool: &sqlx::Pool<D>,
    tenant: &str,
    subject: &SubjectKey,
) -> Result<Option<SubjectRow>, Error> {
    let sql = format!(
        "SELECT {SUBJECT_COLUMNS}, r.capsule AS active_capsule FROM continuity_subjects s \
         LEFT JOIN continuity_revisions r ON r.tenant = s.tenant \
         AND r.subject_kind = s.subject_kind AND r.subject_key = s.subject_key \
         AND r.sequence = s.active_sequence \
         WHERE s.tenant = $1 AND s.subject_kind = $2 AND s.subject_key = $3"
    );
    let row: Option<SubjectRecord> = query(&sql)
        .bind(tenant)
        .bind(subject.kind.as_str())
        .bind(subject.key.as_str())
        .fetch_optional(pool)
        .await?;
    Ok(row.map(SubjectRow::from))
}

async fn pointer_rows<D: Engine>(
    pool: &sqlx::Pool<D>,
    tenant: &str,
) -> Result<Vec<Pointers>, Error> {
    #[derive(sqlx::FromRow)]
    struct Row {
        subject_kind: String,
        subject_key: String,
        active_sequence: Option<i64>,
        active_revision: Option<String>,
        fallback_sequence: Option<i64>,
        fallback_revision: Option<String>,
    }
    let rows: Vec<Row> = query(
        "SELECT subject_kind, subject_key, active_sequence, active_revision, \
         fallback_sequence, fallback_revision FROM continuity_subjects \
         WHERE tenant = $1 ORDER BY subject_kind, subject_key",
    )
    .bind(tenant)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Pointers {
            subject_kind: r.subject_kind,
            subject_key: r.subject_key,
            active: r.active_sequence.zip(r.active_revision),
            fallback: r.fallback_sequence.zip(r.fallback_revision),
        })
        .collect())
}
