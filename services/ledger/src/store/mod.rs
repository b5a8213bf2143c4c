//! The only place with SQL, written once for both engines (`noema_store::sql`).

use noema_store::audit::TxError;
use noema_store::{Database, with_pool};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use time::OffsetDateTime;

use crate::domain::canonical::CanonicalObject;
use crate::domain::mode::{SystemMode, SystemState};
use crate::domain::reference::AgentReference;
use crate::error::LedgerError;
use noema_core::audit::{AuditDraft, AuditEntry};

mod queries;
mod writer;

use writer::GroupWriter;

/// Schema migrations for the ledger, per backend.
pub static MIGRATIONS: noema_store::Migrations = noema_store::Migrations {
    service: "ledger",
    sqlite: sqlx::migrate!("../../migrations/ledger/sqlite"),
    postgres: sqlx::migrate!("../../migrations/ledger/postgres"),
};

/// Filters of a listing. For canonical objects `kind` is the object type and `actor` the
/// creator; for references `actor` is the agent and `kind` the canonical object id.
/// `from`/`until` bound `created_at` (unix seconds, `until` exclusive).
#[derive(Debug, Clone)]
pub struct Query {
    pub kind: String,
    pub actor: String,
    pub from: i64,
    pub until: i64,
}

impl Default for Query {
    fn default() -> Self {
        Query {
            kind: String::new(),
            actor: String::new(),
            from: i64::MIN,
            until: i64::MAX,
        }
    }
}

/// Where a listing page starts: strictly before `before` (`(created_at, id)`), skipping
/// `offset` rows.
#[derive(Debug, Clone)]
pub struct Page {
    pub before: (i64, String),
    pub offset: u32,
    pub limit: u32,
}

impl Page {
    pub fn first(limit: u32) -> Page {
        Page {
            before: (i64::MAX, String::new()),
            offset: 0,
            limit,
        }
    }
}

/// A write the group-commit writer carries out (see `writer`).
#[derive(Debug, Clone)]
pub enum Write {
    Canonical {
        object: CanonicalObject,
        submitted_by: String,
    },
    Reference {
        reference: AgentReference,
        public_key: String,
        submitted_by: String,
    },
}

impl Write {
    const CANONICAL: &'static str = "canonical_objects";
    const REFERENCE: &'static str = "agent_references";

    /// The table and primary key the write inserts.
    fn key(&self) -> (&'static str, &str) {
        match self {
            Write::Canonical { object, .. } => (Self::CANONICAL, &object.id),
            Write::Reference { reference, .. } => (Self::REFERENCE, &reference.id),
        }
    }

    fn duplicate(&self) -> LedgerError {
        match self {
            Write::Canonical { .. } => LedgerError::DuplicateCanonical,
            Write::Reference { .. } => LedgerError::DuplicateReference,
        }
    }
}

#[derive(Debug, Clone)]
pub struct LedgerStore {
    db: Database,
    /// SQLite allows one writer per file. Queueing this process's writers here, fairly and
    /// without sleeping, replaces SQLite's busy handler, which backs off in sleeps of up
    /// to 100 ms when writers collide on the file lock. Postgres needs no gate.
    sqlite_writer: Arc<tokio::sync::Mutex<()>>,
    /// The group-commit writer, started on the first write.
    writer: Arc<OnceLock<GroupWriter>>,
    /// Canonical rows by id. Rows are immutable and never deleted, so a cached row is
    /// never stale; only rows that exist are cached (a miss may be written any moment).
    canonicals: Arc<quick_cache::sync::Cache<String, Arc<CanonicalObject>>>,
    /// The mode last read or set here, for the early STOPPED check that precedes
    /// validation. Only a hint: every write re-checks the mode inside its transaction.
    mode_hint: Arc<Mutex<Option<(SystemMode, Instant)>>>,
}

/// How long the mode hint is trusted. Another replica's Stop reaches this one's early check
/// within this time (and its transactions at once).
const MODE_HINT_TTL: Duration = Duration::from_secs(1);
/// Canonical rows kept in memory (about 0.5 KiB each without metadata).
const CACHED_CANONICALS: usize = 16_384;

impl LedgerStore {
    pub fn new(db: Database) -> Self {
        LedgerStore {
            db,
            sqlite_writer: Arc::new(tokio::sync::Mutex::new(())),
            writer: Arc::new(OnceLock::new()),
            mode_hint: Arc::new(Mutex::new(None)),
            canonicals: Arc::new(quick_cache::sync::Cache::new(CACHED_CANONICALS)),
        }
    }

    fn writer(&self) -> &GroupWriter {
        self.writer
            .get_or_init(|| GroupWriter::start(self.db.clone(), Arc::clone(&self.sqlite_writer)))
    }

    fn remember_mode(&self, mode: SystemMode) {
        if let Ok(mut hint) = self.mode_hint.lock() {
            *hint = Some((mode, Instant::now()));
        }
    }

    /// The current mode, from the hint when it is fresh. For the early check only.
    pub async fn mode(&self) -> Result<SystemMode, LedgerError> {
        let fresh = self.mode_hint.lock().ok().and_then(|hint| {
            hint.filter(|(_, at)| at.elapsed() < MODE_HINT_TTL)
                .map(|(mode, _)| mode)
        });
        match fresh {
            Some(mode) => Ok(mode),
            None => Ok(self.system_state().await?.mode),
        }
    }

    /// Held for the length of a write transaction on SQLite; nothing on Postgres.
    async fn write_turn(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        match self.db {
            Database::Sqlite(_) => Some(self.sqlite_writer.lock().await),
            Database::Postgres(_) => None,
        }
    }

    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Writes the chain's first entry (`init`) if the audit log is empty. Safe to race.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn ensure_initialized(&self) -> Result<(), LedgerError> {
        let init = AuditDraft {
            actor: "system:init".into(),
            action: "init".into(),
            target_id: None,
            target_type: Some("system_state".into()),
            detail: Some(serde_json::json!({"mode": "RUNNING"})),
        };
        Ok(self.db.audit_init(init).await?)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn system_state(&self) -> Result<SystemState, LedgerError> {
        let state: SystemState = with_pool!(&self.db, |pool| queries::system_state(pool).await)?;
        self.remember_mode(state.mode);
        Ok(state)
    }

    /// Sets the mode and appends its audit entry in one transaction.
    #[tracing::instrument(level = "debug", skip_all, fields(mode = %mode))]
    pub async fn set_mode(
        &self,
        mode: SystemMode,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<SystemState, LedgerError> {
        let _turn = self.write_turn().await;
        let state: SystemState =
            with_pool!(&self.db, |pool| queries::set_mode(pool, mode, actor, now)
                .await)?;
        self.remember_mode(state.mode);
        Ok(state)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(id = %object.id))]
    pub async fn insert_canonical(
        &self,
        object: &CanonicalObject,
        submitted_by: &str,
    ) -> Result<(), LedgerError> {
        self.writer()
            .write(Write::Canonical {
                object: object.clone(),
                submitted_by: submitted_by.to_owned(),
            })
            .await?;
        self.canonicals
            .insert(object.id.clone(), Arc::new(object.clone()));
        Ok(())
    }

    /// Commits `writes` as one group (what the writer does with each batch), answering
    /// each: a write that fails alone does not fail the others.
    pub async fn write_batch(&self, writes: &[Write]) -> Vec<Result<(), LedgerError>> {
        let _turn = self.write_turn().await;
        writer::commit(&mut writer::Session::new(self.db.clone()), writes).await
    }

    pub async fn get_canonical(&self, id: &str) -> Result<Option<CanonicalObject>, LedgerError> {
        if let Some(object) = self.canonicals.get(id) {
            return Ok(Some(CanonicalObject::clone(&object)));
        }
        let found: Option<CanonicalObject> =
            with_pool!(&self.db, |pool| queries::get_canonical(pool, id).await)?;
        if let Some(object) = &found {
            self.canonicals
                .insert(object.id.clone(), Arc::new(object.clone()));
        }
        Ok(found)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn list_canonicals(
        &self,
        query: &Query,
        page: &Page,
    ) -> Result<Vec<CanonicalObject>, LedgerError> {
        with_pool!(&self.db, |pool| queries::list_canonicals(pool, query, page)
            .await)
    }

    pub async fn canonicals_oldest_first(
        &self,
        after: &(i64, String),
        limit: u32,
    ) -> Result<Vec<CanonicalObject>, LedgerError> {
        with_pool!(&self.db, |pool| queries::canonicals_oldest_first(
            pool, after, limit
        )
        .await)
    }

    pub async fn storage_paths(
        &self,
        after_id: &str,
        limit: u32,
    ) -> Result<Vec<(String, String)>, LedgerError> {
        with_pool!(&self.db, |pool| queries::storage_paths(
            pool, after_id, limit
        )
        .await)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(id = %reference.id))]
    pub async fn insert_reference(
        &self,
        reference: &AgentReference,
        public_key: &str,
        submitted_by: &str,
    ) -> Result<(), LedgerError> {
        self.writer()
            .write(Write::Reference {
                reference: reference.clone(),
                public_key: public_key.to_owned(),
                submitted_by: submitted_by.to_owned(),
            })
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn list_references(
        &self,
        query: &Query,
        page: &Page,
    ) -> Result<Vec<AgentReference>, LedgerError> {
        with_pool!(&self.db, |pool| queries::list_references(pool, query, page)
            .await)
    }

    /// Audit entries newest first, strictly older than `before_id` when given.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn list_audit(
        &self,
        before_id: Option<i64>,
        limit: u32,
    ) -> Result<Vec<AuditEntry>, LedgerError> {
        Ok(self
            .db
            .audit_newest_first(before_id, i64::from(limit))
            .await?)
    }
}

impl From<TxError> for LedgerError {
    fn from(err: TxError) -> Self {
        match err {
            TxError::Database(err) => LedgerError::Database(err),
            TxError::Audit(err) => LedgerError::Audit(err),
        }
    }
}
