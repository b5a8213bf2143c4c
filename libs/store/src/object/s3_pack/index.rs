//! Where each object of an `s3+pack://` store lives: one row per key (its pack, offset, size,
//! content type), in the service's own database, in a table the store creates itself. The
//! database decides every race: a conditional write is an `INSERT … ON CONFLICT DO NOTHING`.

use std::collections::HashSet;

use sqlx::pool::PoolConnection;
use sqlx::{Postgres, Sqlite};

use crate::Database;
use crate::sql::{Builder, Conn, Engine, is_unique_violation, query};
use crate::with_pool;

use super::super::ObjectError;

/// The table, keyed by store (bucket and prefix, so stores never share rows) and key. Keys
/// compare byte by byte, as listings must: Postgres gets the `C` collation, SQLite's default
/// is already binary.
const CREATE_POSTGRES: [&str; 2] = [
    "CREATE TABLE IF NOT EXISTS noema_pack_objects (\
        store TEXT NOT NULL, key TEXT COLLATE \"C\" NOT NULL, pack TEXT NOT NULL, \
        pack_offset BIGINT NOT NULL, size BIGINT NOT NULL, content_type TEXT, \
        stored_at_ms BIGINT NOT NULL, PRIMARY KEY (store, key))",
    "CREATE INDEX IF NOT EXISTS noema_pack_objects_by_pack ON noema_pack_objects (store, pack)",
];
const CREATE_SQLITE: [&str; 2] = [
    "CREATE TABLE IF NOT EXISTS noema_pack_objects (\
        store TEXT NOT NULL, key TEXT NOT NULL, pack TEXT NOT NULL, \
        pack_offset INTEGER NOT NULL, size INTEGER NOT NULL, content_type TEXT, \
        stored_at_ms INTEGER NOT NULL, PRIMARY KEY (store, key))",
    "CREATE INDEX IF NOT EXISTS noema_pack_objects_by_pack ON noema_pack_objects (store, pack)",
];

// A pack is recorded by one multi-row INSERT: 7 bound values per object, within SQLite's
// limit of 32,766 bound parameters (Postgres takes 65,535).
const _: () = assert!(super::batcher::MAX_OBJECTS_PER_PACK * 7 <= 32_766);

/// The Postgres connection a pack writer keeps between packs (none on SQLite, whose pool
/// does not ping).
#[derive(Debug, Default)]
pub(super) struct HeldConnection(Option<PoolConnection<Postgres>>);

/// Where an object is: its pack and its bytes in it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub(super) struct Location {
    pub pack: String,
    pub pack_offset: i64,
    pub size: i64,
    pub content_type: Option<String>,
    pub stored_at_ms: i64,
}

/// A listed key.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct Listed {
    pub key: String,
    pub size: i64,
    pub stored_at_ms: i64,
}

/// One object of a pack being recorded.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub key: String,
    pub offset: i64,
    pub size: i64,
    /// `None` for an empty content type.
    pub content_type: Option<String>,
}

/// The index of one store.
#[derive(Debug, Clone)]
pub(super) struct Index {
    db: Database,
    /// The store's identity in the table: `bucket/prefix`.
    store: String,
}

fn unavailable(op: &'static str, target: &str, err: sqlx::Error) -> ObjectError {
    ObjectError::unavailable(op, target, err)
}

impl Index {
    /// The index of `store` in `db`, its table created if missing.
    pub(super) async fn open(db: Database, store: String) -> Result<Index, ObjectError> {
        let statements = match &db {
            Database::Postgres(_) => CREATE_POSTGRES,
            Database::Sqlite(_) => CREATE_SQLITE,
        };
        for sql in statements {
            let created = with_pool!(&db, |pool| query(sql).execute(pool).await);
            match created {
                Ok(_) => {}
                // Two replicas creating the table at once: Postgres lets one of them fail on
                // its catalog's unique index; the table is there either way.
                Err(e) if is_unique_violation(&e) => {}
                Err(e) => return Err(unavailable("open", &store, e)),
            }
        }
        Ok(Index { db, store })
    }

    pub(super) async fn ping(&self) -> Result<(), ObjectError> {
        self.db
            .ping()
            .await
            .map_err(|e| ObjectError::unavailable("check", self.store.clone(), e))
    }

    pub(super) async fn locate(&self, key: &str) -> Result<Option<Location>, ObjectError> {
        let sql = "SELECT pack, pack_offset, size, content_type, stored_at_ms \
                   FROM noema_pack_objects WHERE store = $1 AND key = $2";
        with_pool!(&self.db, |pool| query(sql)
            .bind(&self.store)
            .bind(key)
            .fetch_optional(pool)
            .await)
        .map_err(|e| unavailable("get", key, e))
    }

    /// Keys from `from` on (`inclusive` or not), in byte order, at most `limit` of them.
    pub(super) async fn scan(
        &self,
        from: &str,
        inclusive: bool,
        limit: usize,
    ) -> Result<Vec<Listed>, ObjectError> {
        let comparison = if inclusive { ">=" } else { ">" };
        let sql = format!(
            "SELECT key, size, stored_at_ms FROM noema_pack_objects \
             WHERE store = $1 AND key {comparison} $2 ORDER BY key LIMIT $3"
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        with_pool!(&self.db, |pool| query(&sql)
            .bind(&self.store)
            .bind(from)
            .bind(limit)
            .fetch_all(pool)
            .await)
        .map_err(|e| unavailable("list", from, e))
    }

    /// Records the objects of `pack`, atomically: `if_absent` entries only where their key
    /// is free, `replacing` entries whatever was there. Returns the keys of `if_absent` that
    /// were recorded, and the packs `replacing` took keys from. On Postgres it runs on
    /// `held`, the connection the pack writer keeps from one pack to the next (a pooled
    /// connection is pinged each time it is taken: a round trip per pack); after a failure
    /// the connection is let go, since it may be the cause.
    pub(super) async fn record(
        &self,
        held: &mut HeldConnection,
        pack: &str,
        stored_at_ms: i64,
        if_absent: &[Entry],
        replacing: &[Entry],
    ) -> Result<(HashSet<String>, Vec<String>), ObjectError> {
        let recorded = match &self.db {
            Database::Postgres(pool) => {
                let mut conn = match held.0.take() {
                    Some(conn) => conn,
                    None => pool
                        .acquire()
                        .await
                        .map_err(|e| unavailable("put", pack, e))?,
                };
                let recorded = self
                    .record_in::<Postgres>(&mut conn, pack, stored_at_ms, if_absent, replacing)
                    .await;
                if recorded.is_ok() {
                    held.0 = Some(conn);
                }
                recorded
            }
            Database::Sqlite(pool) => {
                let mut conn = pool
                    .acquire()
                    .await
                    .map_err(|e| unavailable("put", pack, e))?;
                self.record_in::<Sqlite>(&mut conn, pack, stored_at_ms, if_absent, replacing)
                    .await
            }
        };
        recorded.map_err(|e| unavailable("put", pack, e))
    }

    async fn record_in<D: Engine>(
        &self,
        conn: &mut D::Connection,
        pack: &str,
        stored_at_ms: i64,
        if_absent: &[Entry],
        replacing: &[Entry],
    ) -> Result<(HashSet<String>, Vec<String>), sqlx::Error> {
        if replacing.is_empty() {
            // The common case, conditional writes only: one statement, atomic by itself.
            let created = self
                .insert_if_absent::<D>(Conn::Transaction(conn), pack, stored_at_ms, if_absent)
                .await?;
            return Ok((created, Vec::new()));
        }
        let mut tx = sqlx::Connection::begin(conn).await?;
        let created = if if_absent.is_empty() {
            HashSet::new()
        } else {
            self.insert_if_absent(&mut tx, pack, stored_at_ms, if_absent)
                .await?
        };
        let mut before =
            Builder::<D>::new("SELECT DISTINCT pack FROM noema_pack_objects WHERE store = ");
        before.push_bind(self.store.clone()).push(" AND key IN (");
        before
            .push_list(replacing.iter().map(|e| e.key.clone()))
            .push(")");
        let rows: Vec<(String,)> = before.build().fetch_all(&mut tx).await?;
        let mut displaced: Vec<String> = rows.into_iter().map(|(pack,)| pack).collect();
        let mut insert = self.insert(pack, stored_at_ms, replacing);
        insert.push(
            " ON CONFLICT (store, key) DO UPDATE SET pack = excluded.pack, \
             pack_offset = excluded.pack_offset, size = excluded.size, \
             content_type = excluded.content_type, stored_at_ms = excluded.stored_at_ms",
        );
        insert.build().execute(&mut tx).await?;
        tx.commit().await?;
        displaced.retain(|p| p != pack);
        Ok((created, displaced))
    }

    /// Records `entries` where their key is free; returns the keys it recorded.
    async fn insert_if_absent<'c, D: Engine>(
        &self,
        conn: impl Into<Conn<'c, D>>,
        pack: &str,
        stored_at_ms: i64,
        entries: &[Entry],
    ) -> Result<HashSet<String>, sqlx::Error> {
        let mut insert = self.insert::<D>(pack, stored_at_ms, entries);
        insert.push(" ON CONFLICT (store, key) DO NOTHING RETURNING key");
        let rows: Vec<(String,)> = insert.build().fetch_all(conn).await?;
        Ok(rows.into_iter().map(|(key,)| key).collect())
    }

    fn insert<'a, D: Engine>(
        &self,
        pack: &str,
        stored_at_ms: i64,
        entries: &'a [Entry],
    ) -> Builder<'a, D> {
        let mut insert = Builder::<D>::new(
            "INSERT INTO noema_pack_objects \
             (store, key, pack, pack_offset, size, content_type, stored_at_ms) ",
        );
        insert.push_values(entries, |row, entry| {
            row.bind(self.store.clone())
                .bind(entry.key.clone())
                .bind(pack.to_owned())
                .bind(entry.offset)
                .bind(entry.size)
                .bind(entry.content_type.clone())
                .bind(stored_at_ms);
        });
        insert
    }

    /// Removes `key`; returns the pack it was in, if it was there.
    pub(super) async fn remove(&self, key: &str) -> Result<Option<String>, ObjectError> {
        let sql = "DELETE FROM noema_pack_objects WHERE store = $1 AND key = $2 RETURNING pack";
        let row: Option<(String,)> = with_pool!(&self.db, |pool| query(sql)
            .bind(&self.store)
            .bind(key)
            .fetch_optional(pool)
            .await)
        .map_err(|e| unavailable("delete", key, e))?;
        Ok(row.map(|(pack,)| pack))
    }

    /// Whether any key still lives in `pack`. A pack gets rows only when it is written, so
    /// one that holds none never will again.
    pub(super) async fn is_referenced(&self, pack: &str) -> Result<bool, ObjectError> {
        let sql = "SELECT 1 FROM noema_pack_objects WHERE store = $1 AND pack = $2 LIMIT 1";
        let row: Option<(i32,)> = with_pool!(&self.db, |pool| query(sql)
            .bind(&self.store)
            .bind(pack)
            .fetch_optional(pool)
            .await)
        .map_err(|e| unavailable("delete", pack, e))?;
        Ok(row.is_some())
    }
}
