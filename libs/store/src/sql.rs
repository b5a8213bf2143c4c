//! SQL written once for both engines.
//!
//! sqlx types every statement by its engine (`sqlx::Sqlite`, `sqlx::Postgres`). A function
//! generic over the engine would have to restate, for every type it binds or reads, that
//! the engine can encode and decode it: Rust does not carry such bounds from a trait to the
//! code that uses it. [`Engine`] states them once, against both concrete engines, so code
//! generic over `D: Engine` needs no other bound: [`query`] and [`Builder`] bind any
//! [`Value`] and read any [`Record`] (a `#[derive(sqlx::FromRow)]` struct or a tuple such as
//! `(i64,)`), on a pool or in a transaction ([`Conn`]). Both engines take `$1` placeholders.
//!
//! A store holds a [`Database`](crate::Database) and picks the engine for each call with
//! [`with_pool!`](crate::with_pool); writes go through [`audit::AuditedTx`](crate::audit::AuditedTx).

use std::future::Future;

use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{Encode, Executor, FromRow, IntoArguments, Pool, Postgres, Sqlite, Type};

use crate::Backend;

/// A value both engines can bind.
pub trait Value<'q>:
    Send + 'q + Encode<'q, Sqlite> + Type<Sqlite> + Encode<'q, Postgres> + Type<Postgres>
{
}

impl<'q, T> Value<'q> for T where
    T: Send + 'q + Encode<'q, Sqlite> + Type<Sqlite> + Encode<'q, Postgres> + Type<Postgres>
{
}

/// A row both engines can read into: `#[derive(sqlx::FromRow)]` structs and tuples.
pub trait Record:
    Send + Unpin + for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow>
{
}

impl<T> Record for T where
    T: Send + Unpin + for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow>
{
}

/// sqlx's statement type for engine `D`.
type Raw<'q, D> = sqlx::query::Query<'q, D, <D as sqlx::Database>::Arguments<'q>>;

/// Where a statement runs: any free connection of a pool, or an open transaction.
pub enum Conn<'c, D: sqlx::Database> {
    Pool(&'c Pool<D>),
    Transaction(&'c mut D::Connection),
}

impl<'c, D: sqlx::Database> From<&'c Pool<D>> for Conn<'c, D> {
    fn from(pool: &'c Pool<D>) -> Self {
        Conn::Pool(pool)
    }
}

impl<'c, D: sqlx::Database> From<&'c mut sqlx::Transaction<'_, D>> for Conn<'c, D> {
    fn from(tx: &'c mut sqlx::Transaction<'_, D>) -> Self {
        Conn::Transaction(&mut **tx)
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for sqlx::Sqlite {}
    impl Sealed for sqlx::Postgres {}
}

/// SQLite or Postgres. The methods hand a statement to sqlx with the engine's concrete
/// types; code generic over the engine calls them through [`Query`] and [`Builder`].
pub trait Engine: sqlx::Database + sealed::Sealed {
    const BACKEND: Backend;

    #[doc(hidden)]
    fn bind<'q, T: Value<'q>>(query: Raw<'q, Self>, value: T) -> Raw<'q, Self>;

    #[doc(hidden)]
    fn push_bind<'a, T: Value<'a>>(builder: &mut sqlx::QueryBuilder<'a, Self>, value: T);

    #[doc(hidden)]
    fn build<'b, 'a: 'b>(builder: &'b mut sqlx::QueryBuilder<'a, Self>) -> Raw<'b, Self>;

    #[doc(hidden)]
    fn execute(
        query: Raw<'_, Self>,
        conn: Conn<'_, Self>,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

    #[doc(hidden)]
    fn fetch_all<R: Record>(
        query: Raw<'_, Self>,
        conn: Conn<'_, Self>,
    ) -> impl Future<Output = Result<Vec<R>, sqlx::Error>> + Send;

    #[doc(hidden)]
    fn fetch_optional<R: Record>(
        query: Raw<'_, Self>,
        conn: Conn<'_, Self>,
    ) -> impl Future<Output = Result<Option<R>, sqlx::Error>> + Send;

    #[doc(hidden)]
    fn fetch_one<R: Record>(
        query: Raw<'_, Self>,
        conn: Conn<'_, Self>,
    ) -> impl Future<Output = Result<R, sqlx::Error>> + Send;
}

/// Both engines' impls are the same text over their own types (sqlx's bounds are
/// per concrete database), so it is written once.
macro_rules! impl_engine {
    ($db:ty, $backend:expr) => {
        impl Engine for $db {
            const BACKEND: Backend = $backend;

            fn bind<'q, T: Value<'q>>(query: Raw<'q, Self>, value: T) -> Raw<'q, Self> {
                query.bind(value)
            }

            fn push_bind<'a, T: Value<'a>>(builder: &mut sqlx::QueryBuilder<'a, Self>, value: T) {
                builder.push_bind(value);
            }

            fn build<'b, 'a: 'b>(builder: &'b mut sqlx::QueryBuilder<'a, Self>) -> Raw<'b, Self> {
                builder.build()
            }

            async fn execute(
                query: Raw<'_, Self>,
                conn: Conn<'_, Self>,
            ) -> Result<u64, sqlx::Error> {
                Ok(run::execute(query, conn).await?.rows_affected())
            }

            async fn fetch_all<R: Record>(
                query: Raw<'_, Self>,
                conn: Conn<'_, Self>,
            ) -> Result<Vec<R>, sqlx::Error> {
                run::fetch_all(query, conn).await
            }

            async fn fetch_optional<R: Record>(
                query: Raw<'_, Self>,
                conn: Conn<'_, Self>,
            ) -> Result<Option<R>, sqlx::Error> {
                run::fetch_optional(query, conn).await
            }

            async fn fetch_one<R: Record>(
                query: Raw<'_, Self>,
                conn: Conn<'_, Self>,
            ) -> Result<R, sqlx::Error> {
                run::fetch_one(query, conn).await
            }
        }
    };
}

impl_engine!(Sqlite, Backend::Sqlite);
impl_engine!(Postgres, Backend::Postgres);

/// The engine implementations' shared bodies: generic, with sqlx's own bounds, which each
/// engine's impl proves for its concrete types.
mod run {
    use super::*;

    pub(super) async fn execute<D>(
        query: Raw<'_, D>,
        conn: Conn<'_, D>,
    ) -> Result<D::QueryResult, sqlx::Error>
    where
        D: sqlx::Database,
        for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
        for<'q> D::Arguments<'q>: IntoArguments<'q, D>,
    {
        match conn {
            Conn::Pool(pool) => query.execute(pool).await,
            Conn::Transaction(tx) => query.execute(tx).await,
        }
    }

    pub(super) async fn fetch_all<D, R>(
        query: Raw<'_, D>,
        conn: Conn<'_, D>,
    ) -> Result<Vec<R>, sqlx::Error>
    where
        D: sqlx::Database,
        for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
        for<'q> D::Arguments<'q>: IntoArguments<'q, D>,
        R: Send + Unpin + for<'r> FromRow<'r, D::Row>,
    {
        let query = query.try_map(|row: D::Row| R::from_row(&row));
        match conn {
            Conn::Pool(pool) => query.fetch_all(pool).await,
            Conn::Transaction(tx) => query.fetch_all(tx).await,
        }
    }

    pub(super) async fn fetch_optional<D, R>(
        query: Raw<'_, D>,
        conn: Conn<'_, D>,
    ) -> Result<Option<R>, sqlx::Error>
    where
        D: sqlx::Database,
        for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
        for<'q> D::Arguments<'q>: IntoArguments<'q, D>,
        R: Send + Unpin + for<'r> FromRow<'r, D::Row>,
    {
        let query = query.try_map(|row: D::Row| R::from_row(&row));
        match conn {
            Conn::Pool(pool) => query.fetch_optional(pool).await,
            Conn::Transaction(tx) => query.fetch_optional(tx).await,
        }
    }

    pub(super) async fn fetch_one<D, R>(
        query: Raw<'_, D>,
        conn: Conn<'_, D>,
    ) -> Result<R, sqlx::Error>
    where
        D: sqlx::Database,
        for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
        for<'q> D::Arguments<'q>: IntoArguments<'q, D>,
        R: Send + Unpin + for<'r> FromRow<'r, D::Row>,
    {
        let query = query.try_map(|row: D::Row| R::from_row(&row));
        match conn {
            Conn::Pool(pool) => query.fetch_one(pool).await,
            Conn::Transaction(tx) => query.fetch_one(tx).await,
        }
    }
}

/// A statement for engine `D` and the values bound to its placeholders.
#[must_use = "a query does nothing until it is executed or fetched"]
pub struct Query<'q, D: Engine>(Raw<'q, D>);

/// The statement `sql`, to bind values to and run.
pub fn query<D: Engine>(sql: &str) -> Query<'_, D> {
    Query(sqlx::query(sql))
}

impl<'q, D: Engine> Query<'q, D> {
    /// Binds the next placeholder.
    pub fn bind(self, value: impl Value<'q>) -> Self {
        Query(D::bind(self.0, value))
    }

    /// Runs the statement; answers the number of rows it changed.
    pub fn execute<'c>(
        self,
        conn: impl Into<Conn<'c, D>>,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send {
        D::execute(self.0, conn.into())
    }

    /// Every row of the result.
    pub fn fetch_all<'c, R: Record>(
        self,
        conn: impl Into<Conn<'c, D>>,
    ) -> impl Future<Output = Result<Vec<R>, sqlx::Error>> + Send {
        D::fetch_all(self.0, conn.into())
    }

    /// The first row of the result, if there is one.
    pub fn fetch_optional<'c, R: Record>(
        self,
        conn: impl Into<Conn<'c, D>>,
    ) -> impl Future<Output = Result<Option<R>, sqlx::Error>> + Send {
        D::fetch_optional(self.0, conn.into())
    }

    /// The first row of the result; `sqlx::Error::RowNotFound` when there is none.
    pub fn fetch_one<'c, R: Record>(
        self,
        conn: impl Into<Conn<'c, D>>,
    ) -> impl Future<Output = Result<R, sqlx::Error>> + Send {
        D::fetch_one(self.0, conn.into())
    }
}

/// A statement assembled piece by piece (optional filters, `IN` lists, multi-row inserts).
pub struct Builder<'a, D: Engine>(sqlx::QueryBuilder<'a, D>);

impl<'a, D: Engine> Builder<'a, D> {
    pub fn new(sql: impl Into<String>) -> Self {
        Builder(sqlx::QueryBuilder::new(sql))
    }

    /// Appends SQL text as it is.
    pub fn push(&mut self, sql: impl std::fmt::Display) -> &mut Self {
        self.0.push(sql);
        self
    }

    /// Appends a placeholder bound to `value`.
    pub fn push_bind(&mut self, value: impl Value<'a>) -> &mut Self {
        D::push_bind(&mut self.0, value);
        self
    }

    /// Appends `$n, $n+1, …`, one placeholder per value (the inside of an `IN (…)`).
    pub fn push_list<V: Value<'a>>(&mut self, values: impl IntoIterator<Item = V>) -> &mut Self {
        for (n, value) in values.into_iter().enumerate() {
            if n > 0 {
                self.0.push(", ");
            }
            D::push_bind(&mut self.0, value);
        }
        self
    }

    /// Appends `VALUES (…), (…)`: one row per item, whose values `row` binds in order.
    pub fn push_values<I>(
        &mut self,
        items: impl IntoIterator<Item = I>,
        mut row: impl FnMut(&mut Row<'_, 'a, D>, I),
    ) -> &mut Self {
        self.0.push("VALUES ");
        for (n, item) in items.into_iter().enumerate() {
            self.0.push(if n > 0 { ", (" } else { "(" });
            row(
                &mut Row {
                    builder: &mut self.0,
                    first: true,
                },
                item,
            );
            self.0.push(")");
        }
        self
    }

    /// The statement built so far, to run.
    pub fn build(&mut self) -> Query<'_, D> {
        Query(D::build(&mut self.0))
    }
}

/// One row of [`Builder::push_values`].
pub struct Row<'b, 'a, D: Engine> {
    builder: &'b mut sqlx::QueryBuilder<'a, D>,
    first: bool,
}

impl<'a, D: Engine> Row<'_, 'a, D> {
    /// Binds the row's next value.
    pub fn bind(&mut self, value: impl Value<'a>) -> &mut Self {
        if !self.first {
            self.builder.push(", ");
        }
        self.first = false;
        D::push_bind(self.builder, value);
        self
    }
}

/// Whether `err` is a unique-constraint violation (on either engine).
pub fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}

/// Runs `$body` with `$pool` bound to the pool of `$db` (a `&Database`), whichever engine it
/// is. The body is compiled once per engine, as a function generic over [`sql::Engine`]
/// would be, so it reads as engine-independent code:
///
/// ```no_run
/// use noema_store::sql::query;
/// use noema_store::{Database, with_pool};
///
/// async fn diary_name(db: &Database, id: &str) -> Result<Option<String>, sqlx::Error> {
///     let row: Option<(String,)> = with_pool!(db, |pool| {
///         query("SELECT name FROM diaries WHERE id = $1")
///             .bind(id)
///             .fetch_optional(pool)
///             .await?
///     });
///     Ok(row.map(|(name,)| name))
/// }
/// ```
///
/// [`sql::Engine`]: crate::sql::Engine
#[macro_export]
macro_rules! with_pool {
    ($db:expr, |$pool:ident| $body:expr) => {
        match $db {
            $crate::Database::Sqlite($pool) => $body,
            $crate::Database::Postgres($pool) => $body,
        }
    };
}
