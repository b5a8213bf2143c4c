//! A tenant's audit entries counted (migration 0011's index): continuity's hash-chained log is
//! one for every tenant, and each tenant's entry names it in `detail.tenant` (and in
//! `target_id`, `<tenant>:<what>`). The index by that tenant and log order gives its newest
//! entries directly.

use noema_store::Backend;
use noema_store::sql::query;
use noema_store::with_pool;

use super::ContinuityStore;
use crate::domain::metrics::AuditGroup;
use crate::error::Error;

const SQLITE_COUNTS: &str = "SELECT action, actor, COUNT(*), MIN(id) FROM (\
     SELECT id, action, actor FROM audit_log WHERE json_extract(detail, '$.tenant') = $1 \
     ORDER BY id DESC LIMIT $2) AS recent GROUP BY action, actor";

const POSTGRES_COUNTS: &str = "SELECT action, actor, COUNT(*), MIN(id) FROM (\
     SELECT id, action, actor FROM audit_log WHERE detail->>'tenant' = $1 \
     ORDER BY id DESC LIMIT $2) AS recent GROUP BY action, actor";

impl ContinuityStore {
    /// The tenant's last `window` audit entries, counted by action and actor.
    pub async fn audit_counts(&self, tenant: &str, window: i64) -> Result<Vec<AuditGroup>, Error> {
        let sql = match self.database().backend() {
            Backend::Sqlite => SQLITE_COUNTS,
            Backend::Postgres => POSTGRES_COUNTS,
        };
        let rows: Vec<(String, String, i64, i64)> = with_pool!(self.database(), |pool| {
            query(sql).bind(tenant).bind(window).fetch_all(pool).await?
        });
        Ok(rows
            .into_iter()
            .map(|(action, actor, count, first)| AuditGroup {
                action,
                actor,
                count,
                first,
            })
            .collect())
    }
}
