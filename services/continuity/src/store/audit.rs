//! A tenant's audit entries counted (migration 0009's index): continuity's hash-chained log is
//! one for every tenant, and each tenant's entry names it in `target_id` (`<tenant>:<what>`)
//! and in `detail.tenant`. The range of the index finds the tenant's entries; the detail
//! tells them apart from those of a tenant whose name extends this one's past a `:`.

use noema_store::Backend;
use noema_store::sql::query;
use noema_store::with_pool;

use super::ContinuityStore;
use crate::domain::metrics::AuditGroup;
use crate::error::Error;

const SQLITE_COUNTS: &str = "SELECT action, actor, COUNT(*), MIN(id) FROM (\
     SELECT id, action, actor FROM audit_log \
     WHERE target_id >= $1 AND target_id < $2 AND json_extract(detail, '$.tenant') = $3 \
     ORDER BY id DESC LIMIT $4) AS recent GROUP BY action, actor";

const POSTGRES_COUNTS: &str = "SELECT action, actor, COUNT(*), MIN(id) FROM (\
     SELECT id, action, actor FROM audit_log \
     WHERE target_id COLLATE \"C\" >= $1 AND target_id COLLATE \"C\" < $2 \
     AND detail->>'tenant' = $3 \
     ORDER BY id DESC LIMIT $4) AS recent GROUP BY action, actor";

impl ContinuityStore {
    /// The tenant's last `window` audit entries, counted by action and actor.
    pub async fn audit_counts(&self, tenant: &str, window: i64) -> Result<Vec<AuditGroup>, Error> {
        // Every target of the tenant sorts in [`<tenant>:`, `<tenant>;`): `;` follows `:`.
        let from = format!("{tenant}:");
        let until = format!("{tenant};");
        let sql = match self.database().backend() {
            Backend::Sqlite => SQLITE_COUNTS,
            Backend::Postgres => POSTGRES_COUNTS,
        };
        let rows: Vec<(String, String, i64, i64)> = with_pool!(self.database(), |pool| {
            query(sql)
                .bind(from.as_str())
                .bind(until.as_str())
                .bind(tenant)
                .bind(window)
                .fetch_all(pool)
                .await?
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
