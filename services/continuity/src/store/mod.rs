//! The only place with SQL. Each query is written once for both engines
//! (`noema_store::sql`); every write is part of one audited transaction
//! (`noema_store::audit::AuditedTx`), committed in groups by [`writer`].
//!
//! The layout (migrations/continuity): per tenant and subject, append-only
//! `continuity_revisions` (each a capsule's exact bytes, chained by id) and one
//! `continuity_subjects` row holding the chain head and the active and fallback pointers,
//! moved only by a writer that still sees the version it read. Archive envelopes live in
//! `continuity_archives`, hot (their bytes) or cold (the gzip payload in the object store,
//! named by the row, and the stub). Nothing here decides a rule: the operations layer reads,
//! asks the domain, and hands the store a [`Write`].

mod audit;
mod coordination;
mod memory;
mod memory_postings;
mod memory_terms;
mod messages;
mod read_cache;
mod reads;
mod schedule;
mod tasks;
mod writer;
mod writes;

use std::sync::{Arc, OnceLock};

use noema_store::Database;

pub use coordination::{
    ArtifactFilter, ArtifactRow, ArtifactWrite, HistoryVersion, PeerRow, PeerWrite, Superseded,
};
pub use memory::{
    HitQuery, HitRow, IndexState, MemoryChange, MemoryDocument, MemoryWrite, MemoryWritten,
};
pub use messages::{
    DeliveryRead, DeliveryRow, DeliveryUpdate, DeliveryWrite, KeyWrite, MessageWrite, NonceRow,
    NonceWrite, Pending, PendingFilter,
};
pub use reads::{
    ArchiveRow, ArtifactScan, CapsuleRevision, ColdRow, HistoryRow, IdempotencyRecord, Pointers,
    SnapshotRow, SubjectRow,
};
pub use schedule::ScheduleWrite;
pub use tasks::{TaskFilter, TaskRow, TaskWrite};
pub use writes::{
    ArchiveWrite, CapsuleWrite, ColdStoreWrite, DeleteWrite, IdempotencyWrite, PlanWrite, Refusal,
    RehydrateWrite, RevisionWrite, SnapshotWrite, Write,
};

use writer::GroupWriter;

use crate::error::Error;

/// Continuity's schema migrations, per backend.
pub static MIGRATIONS: noema_store::Migrations = noema_store::Migrations {
    service: "continuity",
    sqlite: sqlx::migrate!("../../migrations/continuity/sqlite"),
    postgres: sqlx::migrate!("../../migrations/continuity/postgres"),
};

#[derive(Debug, Clone)]
pub struct ContinuityStore {
    db: Database,
    /// SQLite allows one writer per file: this process's writers queue here (fairly, without
    /// SQLite's sleeping busy handler). Postgres needs no gate.
    sqlite_writer: Arc<tokio::sync::Mutex<()>>,
    /// The group-commit writer, started on the first write.
    writer: Arc<OnceLock<GroupWriter>>,
    /// SQLite: search's in-memory index of the loaded tenants, changed by the writer.
    memory_postings: Arc<memory_postings::MemoryPostings>,
    /// SQLite: subject rows and the listed tenants' pointers, dropped by the writer.
    read_cache: Arc<read_cache::ReadCache>,
    /// SQLite: counts appended lines before they reach the writer.
    line_counter: Arc<memory_terms::LineCounter>,
}

impl ContinuityStore {
    pub fn new(db: Database) -> Self {
        ContinuityStore {
            db,
            sqlite_writer: Arc::new(tokio::sync::Mutex::new(())),
            writer: Arc::new(OnceLock::new()),
            memory_postings: Arc::default(),
            read_cache: Arc::default(),
            line_counter: Arc::default(),
        }
    }

    pub fn database(&self) -> &Database {
        &self.db
    }

    fn writer(&self) -> &GroupWriter {
        self.writer.get_or_init(|| {
            GroupWriter::start(
                self.db.clone(),
                Arc::clone(&self.sqlite_writer),
                Arc::clone(&self.memory_postings),
                Arc::clone(&self.read_cache),
            )
        })
    }

    /// Commits `write` (in a group with whatever other writes are waiting) and answers
    /// whether it landed: `Ok(Err(refusal))` when the state it was computed against moved.
    pub async fn write(&self, write: Write) -> Result<Result<(), Refusal>, Error> {
        Ok(self.writer().write(write).await?.map(drop))
    }

    /// [`ContinuityStore::write`] in two steps: hands `write` over now (so writes handed
    /// over one after the other land in that order) and returns the wait for its commit.
    pub async fn submit(
        &self,
        write: Write,
    ) -> Result<impl Future<Output = Result<Result<(), Refusal>, Error>> + use<>, Error> {
        let wait = self.writer().submit(write).await?;
        Ok(async move { Ok(wait.await?.map(drop)) })
    }

    /// Commits `writes` as one group, now, answering each.
    pub async fn write_batch(&self, writes: Vec<Write>) -> Vec<Result<Result<(), Refusal>, Error>> {
        let _turn = match self.db {
            Database::Sqlite(_) => Some(self.sqlite_writer.lock().await),
            Database::Postgres(_) => None,
        };
        let mut connection = writer::WriterConnection::default();
        writer::commit(
            &self.db,
            &mut connection,
            &self.memory_postings,
            &self.read_cache,
            writes,
        )
        .await
        .into_iter()
        .map(|outcome| outcome.map(|landed| landed.map(drop)))
        .collect()
    }

    /// Writes the audit chain's first entry if the log is empty. Safe to race.
    pub async fn ensure_initialized(&self) -> Result<(), Error> {
        let init = noema_core::audit::AuditDraft {
            actor: "system:init".into(),
            action: "init".into(),
            target_id: None,
            target_type: Some("continuity".into()),
            detail: None,
        };
        Ok(self.db.audit_init(init).await?)
    }

    /// Audit entries newest first (or oldest first), from a cursor.
    pub async fn list_audit(
        &self,
        cursor: Option<i64>,
        limit: u32,
        oldest_first: bool,
    ) -> Result<Vec<noema_core::audit::AuditEntry>, Error> {
        Ok(if oldest_first {
            self.db
                .audit_oldest_first(cursor.unwrap_or(0), i64::from(limit))
                .await?
        } else {
            self.db.audit_newest_first(cursor, i64::from(limit)).await?
        })
    }
}
