//! The store's own SQLite connections for its reads, kept between reads without sqlx's
//! pool.
//!
//! A pooled connection is tested when it comes back (sqlx pings it: a round trip to the
//! connection's thread, on a task spawned for it), so every pooled read costs two hand-offs
//! to SQLite's thread where one would do — and the hot path reads twice per request
//! lifecycle. These connections come back untested after a read that finished; one whose
//! read failed or was abandoned half way (its caller's future dropped) is closed instead,
//! and a new one is opened on demand, so no connection in an unknown state is reused.
//!
//! Only for a SQLite file: a private in-memory database (a pool of one connection) is
//! visible to its one connection only, and Postgres keeps its pool.

use std::sync::{Mutex, PoisonError};

use sqlx::pool::Pool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{ConnectOptions, Sqlite};
use tokio::sync::{Semaphore, SemaphorePermit};

/// Connections for reads, at most as many as the database's pool allows.
pub(crate) struct Readers {
    options: SqliteConnectOptions,
    idle: Mutex<Vec<SqliteConnection>>,
    permits: Semaphore,
}

impl Readers {
    /// Readers for `pool`'s database; `None` for a pool of one connection (a private
    /// in-memory database, which another connection would not see).
    pub fn for_pool(pool: &Pool<Sqlite>) -> Option<Readers> {
        let size = pool.options().get_max_connections();
        if size <= 1 {
            return None;
        }
        Some(Readers {
            options: pool.connect_options().as_ref().clone(),
            idle: Mutex::new(Vec::new()),
            permits: Semaphore::new(usize::try_from(size).unwrap_or(1)),
        })
    }

    /// A connection to read on (its statements run outside any transaction): an idle one, or a new one when none is idle.
    pub async fn get(&self) -> Result<Reader<'_>, sqlx::Error> {
        let permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| sqlx::Error::PoolClosed)?;
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let conn = match idle {
            Some(conn) => conn,
            None => self.options.connect().await?,
        };
        Ok(Reader {
            readers: self,
            conn,
            _permit: permit,
        })
    }
}

/// A connection taken for one read. It goes back to the idle ones only when the read
/// [`Reader::finished`]; dropped otherwise (an error or an abandoned read), it is closed.
pub(crate) struct Reader<'r> {
    readers: &'r Readers,
    conn: SqliteConnection,
    _permit: SemaphorePermit<'r>,
}

impl Reader<'_> {
    /// The connection to run the read on.
    pub fn conn(&mut self) -> &mut SqliteConnection {
        &mut self.conn
    }

    /// The read completed: the connection may be reused as it is.
    pub fn finished(self) {
        let Reader {
            readers,
            conn,
            _permit,
        } = self;
        readers
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(conn);
    }
}
