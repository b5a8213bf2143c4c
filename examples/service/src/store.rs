//! The example's SQL: one table of visit counts.

use noema_store::sql::query;
use noema_store::{Database, with_pool};

/// Counts visits per name.
#[derive(Debug, Clone)]
pub struct VisitStore {
    db: Database,
}

/// Adds one visit and returns the new count (the same SQL on both backends).
const VISIT: &str = "INSERT INTO visits (name, count) VALUES ($1, 1) \
                     ON CONFLICT (name) DO UPDATE SET count = visits.count + 1 \
                     RETURNING count";

impl VisitStore {
    pub fn new(db: Database) -> Self {
        VisitStore { db }
    }

    /// Records a visit under `name`; returns how many there have been.
    pub async fn visit(&self, name: &str) -> Result<i64, sqlx::Error> {
        let (count,): (i64,) = with_pool!(&self.db, |pool| {
            query(VISIT).bind(name).fetch_one(pool).await?
        });
        Ok(count)
    }
}
