//! The only place with SQL. Reads run on the pool; every write is a [`Unit`] applied by the
//! group-commit writer (`writer`) in an audited transaction.
//!
//! Requests are rebuilt from `request_events`; `requests` holds their live state, written
//! in the same transaction as the events that lead to it. Objects are immutable by
//! content id, so a read one is cached for good.

pub mod rows;
pub mod unit;
mod writer;

use std::sync::{Arc, OnceLock};

use noema_core::audit::{AuditDraft, AuditEntry};
use noema_store::Database;
use time::OffsetDateTime;

pub use rows::{
    ApprovalRow, EvaluatorRow, EventRow, GoldTaskRow, ItemRow, ObjectRow, ReputationRow,
    RequestRow, SuiteRow, VoteCounts, VoteRow, VoteStanding,
};
pub use unit::{Expect, Rejection, RequestWrite, SuiteUpdate, Unit};

use noema_store::audit::TxError;
use noema_store::sql::{Builder, query};
use noema_store::with_pool;
use writer::GroupWriter;

/// Schema migrations for the orchestrator, per backend.
pub static MIGRATIONS: noema_store::Migrations = noema_store::Migrations {
    service: "orchestrator",
    sqlite: sqlx::migrate!("../../migrations/orchestrator/sqlite"),
    postgres: sqlx::migrate!("../../migrations/orchestrator/postgres"),
};

/// Objects kept in memory (a few KiB each at most).
const CACHED_OBJECTS: usize = 16_384;
/// Rows of requests, evaluators and reputations this process wrote last, kept in memory
/// (under a KiB each).
const CACHED_ROWS: usize = 16_384;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database query failed")]
    Database(#[from] sqlx::Error),
    #[error("audited transaction failed")]
    Transaction(#[from] TxError),
    #[error("audit log query failed")]
    Audit(#[from] noema_store::audit::AuditError),
    #[error("the store's writer has stopped")]
    WriterGone,
}

impl StoreError {
    /// Whether the database was out of reach (a retry may succeed), not a bug.
    pub fn is_unavailable(&self) -> bool {
        let db = match self {
            StoreError::Database(err) => Some(err),
            StoreError::Transaction(TxError::Database(err)) => Some(err),
            StoreError::Audit(noema_store::audit::AuditError::Database(err)) => Some(err),
            _ => None,
        };
        matches!(
            db,
            Some(sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed)
        ) || matches!(self, StoreError::WriterGone)
    }
}

/// Unix microseconds of `at`.
pub fn micros(at: OffsetDateTime) -> i64 {
    i64::try_from(at.unix_timestamp_nanos() / 1000).unwrap_or(i64::MAX)
}

/// The time of unix microseconds `us`.
pub fn from_micros(us: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(us) * 1000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

const REQUEST_COLUMNS: &str = "request_id, state, actor, version, head_hash, plan_object, \
     rollback_declared, risk_object, risk_level, forbidden, approvals_required, trace_object, \
     trace_id, trace_status, reward_object, approval_count, evaluation_count, waiting_since, \
     created_at, updated_at";
const EVENT_COLUMNS: &str =
    "request_id, seq, event_type, prev_state, next_state, meta, ts, prev_hash, hash";
const VOTE_COLUMNS: &str = "vote_id, target_id, gold, seq, evaluator_id, eval_object, suite, \
     score, gate_passed, regression, suppressed, reason_codes, gold_matched, voted_at";
const EVALUATOR_COLUMNS: &str = "evaluator_id, version, votes, gold_attempts, gold_matches, \
     consecutive_mismatches, updated_at";

#[derive(Clone)]
pub struct OrchestratorStore {
    db: Database,
    /// The group-commit writer, started on the first write.
    writer: Arc<OnceLock<GroupWriter>>,
    objects: Arc<quick_cache::sync::Cache<String, Arc<ObjectRow>>>,
    written: Arc<Written>,
}

/// The rows this process committed last, by key: what the write path reads before the
/// database. They are hints, never trusted: each row is versioned and every write expects
/// the version it read inside its transaction, so a row another replica has moved on since
/// is refused at commit ([`Rejection::Moved`]) and the caller reads the database again.
/// The writer task updates them after each commit, in commit order.
pub(crate) struct Written {
    pub requests: quick_cache::sync::Cache<String, RequestRow>,
    pub evaluators: quick_cache::sync::Cache<String, EvaluatorRow>,
    pub reputations: quick_cache::sync::Cache<String, ReputationRow>,
}

impl Written {
    fn new() -> Written {
        Written {
            requests: quick_cache::sync::Cache::new(CACHED_ROWS),
            evaluators: quick_cache::sync::Cache::new(CACHED_ROWS),
            reputations: quick_cache::sync::Cache::new(CACHED_ROWS),
        }
    }

    /// Remembers what a committed unit wrote.
    pub fn committed(&self, unit: &Unit) {
        if let Some(r) = &unit.request {
            self.requests
                .insert(r.row.request_id.clone(), r.row.clone());
        }
        if let Some(e) = &unit.evaluator {
            self.evaluators.insert(e.evaluator_id.clone(), e.clone());
        }
        if let Some(r) = &unit.reputation {
            self.reputations.insert(r.actor_id.clone(), r.clone());
        }
    }

    /// Forgets the rows a unit refused as moved on expected: they are stale here.
    pub fn moved(&self, unit: &Unit) {
        for e in &unit.expect {
            match e {
                Expect::Request { request_id, .. } => {
                    self.requests.remove(request_id);
                }
                Expect::Evaluator { evaluator_id, .. } => {
                    self.evaluators.remove(evaluator_id);
                }
                Expect::Reputation { actor_id, .. } => {
                    self.reputations.remove(actor_id);
                }
                Expect::SignatureUnused { .. } | Expect::NotServed { .. } => {}
            }
        }
    }
}

impl std::fmt::Debug for OrchestratorStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrchestratorStore").finish_non_exhaustive()
    }
}

impl OrchestratorStore {
    pub fn new(db: Database) -> OrchestratorStore {
        OrchestratorStore {
            db,
            writer: Arc::new(OnceLock::new()),
            objects: Arc::new(quick_cache::sync::Cache::new(CACHED_OBJECTS)),
            written: Arc::new(Written::new()),
        }
    }

    pub fn database(&self) -> &Database {
        &self.db
    }

    fn writer(&self) -> &GroupWriter {
        self.writer
            .get_or_init(|| GroupWriter::start(&self.db, Arc::clone(&self.written)))
    }

    /// The request's row as this process last committed it, if it still remembers it: a
    /// hint for a write, which expects its version (see [`Written`]).
    pub fn written_request(&self, request_id: &str) -> Option<RequestRow> {
        self.written.requests.get(request_id)
    }

    /// The evaluator's row as this process last committed it (a hint, as
    /// [`OrchestratorStore::written_request`]).
    pub fn written_evaluator(&self, evaluator_id: &str) -> Option<EvaluatorRow> {
        self.written.evaluators.get(evaluator_id)
    }

    /// The actor's reputation as this process last committed it (a hint, as
    /// [`OrchestratorStore::written_request`]).
    pub fn written_reputation(&self, actor_id: &str) -> Option<ReputationRow> {
        self.written.reputations.get(actor_id)
    }

    /// Applies `unit` atomically (with the batch it joins): `Ok(Err(rejection))` when one
    /// of its expectations did not hold, in which case nothing of it was written.
    pub async fn commit(&self, unit: Unit) -> Result<Result<(), Rejection>, StoreError> {
        self.writer().write(unit).await
    }

    /// Appends audit entries alone (a policy load).
    pub async fn audit(
        &self,
        drafts: Vec<AuditDraft>,
        at: OffsetDateTime,
    ) -> Result<(), StoreError> {
        self.commit(Unit {
            audit: drafts,
            at: Some(at),
            ..Unit::default()
        })
        .await
        .map(drop)
    }

    pub async fn request(&self, request_id: &str) -> Result<Option<RequestRow>, StoreError> {
        let sql = format!("SELECT {REQUEST_COLUMNS} FROM requests WHERE request_id = $1");
        Ok(with_pool!(&self.db, |pool| {
            query(&sql).bind(request_id).fetch_optional(pool).await?
        }))
    }

    pub async fn request_by_trace(&self, trace_id: &str) -> Result<Option<RequestRow>, StoreError> {
        let sql = format!("SELECT {REQUEST_COLUMNS} FROM requests WHERE trace_id = $1");
        Ok(with_pool!(&self.db, |pool| {
            query(&sql).bind(trace_id).fetch_optional(pool).await?
        }))
    }

    /// Requests after `after` in id order (which is creation order), in `state` if given.
    pub async fn list_requests(
        &self,
        state: Option<&str>,
        after: &str,
        limit: u32,
    ) -> Result<Vec<RequestRow>, StoreError> {
        let limit = i64::from(limit);
        Ok(match state {
            Some(state) => {
                let sql = format!(
                    "SELECT {REQUEST_COLUMNS} FROM requests WHERE state = $1 AND request_id > $2 \
                     ORDER BY state, request_id LIMIT $3"
                );
                with_pool!(&self.db, |pool| {
                    query(&sql)
                        .bind(state)
                        .bind(after)
                        .bind(limit)
                        .fetch_all(pool)
                        .await?
                })
            }
            None => {
                let sql = format!(
                    "SELECT {REQUEST_COLUMNS} FROM requests WHERE request_id > $1 \
                     ORDER BY request_id LIMIT $2"
                );
                with_pool!(&self.db, |pool| {
                    query(&sql).bind(after).bind(limit).fetch_all(pool).await?
                })
            }
        })
    }

    /// An object by content id (cached: objects never change).
    pub async fn object(&self, content_id: &str) -> Result<Option<Arc<ObjectRow>>, StoreError> {
        if let Some(found) = self.objects.get(content_id) {
            return Ok(Some(found));
        }
        let row: Option<ObjectRow> = with_pool!(&self.db, |pool| {
            query(
                "SELECT content_id, object_type, object_id, schema_version, body, created_at \
                 FROM objects WHERE content_id = $1",
            )
            .bind(content_id)
            .fetch_optional(pool)
            .await?
        });
        Ok(row.map(|row| {
            let row = Arc::new(row);
            self.objects
                .insert(row.content_id.clone(), Arc::clone(&row));
            row
        }))
    }

    /// Objects by content id, in the order asked (cached ones from memory, the others in
    /// one read per chunk); `None` where one is not stored.
    pub async fn objects(
        &self,
        content_ids: &[&str],
    ) -> Result<Vec<Option<Arc<ObjectRow>>>, StoreError> {
        let mut found: std::collections::HashMap<&str, Arc<ObjectRow>> =
            std::collections::HashMap::with_capacity(content_ids.len());
        let mut missing = Vec::new();
        for &id in content_ids {
            match self.objects.get(id) {
                Some(row) => {
                    found.insert(id, row);
                }
                None => missing.push(id),
            }
        }
        missing.sort_unstable();
        missing.dedup();
        for chunk in missing.chunks(500) {
            let rows: Vec<ObjectRow> = with_pool!(&self.db, |pool| {
                let mut select = Builder::new(
                    "SELECT content_id, object_type, object_id, schema_version, body, created_at \
                     FROM objects WHERE content_id IN (",
                );
                select.push_list(chunk.iter().copied()).push(")");
                select.build().fetch_all(pool).await?
            });
            for row in rows {
                let row = Arc::new(row);
                self.objects
                    .insert(row.content_id.clone(), Arc::clone(&row));
                if let Some(&id) = chunk.iter().find(|id| **id == row.content_id) {
                    found.insert(id, row);
                }
            }
        }
        Ok(content_ids
            .iter()
            .map(|id| found.get(id).cloned())
            .collect())
    }

    /// Remembers objects just written, so the next reads of them cost nothing.
    pub fn remember(&self, objects: &[ObjectRow]) {
        for o in objects {
            self.objects
                .insert(o.content_id.clone(), Arc::new(o.clone()));
        }
    }

    /// A request's approvals, oldest first.
    pub async fn approvals(&self, request_id: &str) -> Result<Vec<ApprovalRow>, StoreError> {
        Ok(with_pool!(&self.db, |pool| {
            query(
                "SELECT request_id, seq, approval_object, approval_id, approver, decision, \
                 signature, public_key, submitted_by, recorded_at FROM approvals \
                 WHERE request_id = $1 ORDER BY seq",
            )
            .bind(request_id)
            .fetch_all(pool)
            .await?
        }))
    }

    /// A request's events after `after_seq`, oldest first.
    pub async fn events(
        &self,
        request_id: &str,
        after_seq: i64,
        limit: u32,
    ) -> Result<Vec<EventRow>, StoreError> {
        let sql = format!(
            "SELECT {EVENT_COLUMNS} FROM request_events WHERE request_id = $1 AND seq > $2 \
             ORDER BY seq LIMIT $3"
        );
        Ok(with_pool!(&self.db, |pool| {
            query(&sql)
                .bind(request_id)
                .bind(after_seq)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await?
        }))
    }

    /// Every request's events after `(request_id, seq)`, in (request, seq) order: the whole
    /// store's history, a page at a time.
    pub async fn all_events(
        &self,
        after: (&str, i64),
        limit: u32,
    ) -> Result<Vec<EventRow>, StoreError> {
        let sql = format!(
            "SELECT {EVENT_COLUMNS} FROM request_events WHERE (request_id, seq) > ($1, $2) \
             ORDER BY request_id, seq LIMIT $3"
        );
        Ok(with_pool!(&self.db, |pool| {
            query(&sql)
                .bind(after.0)
                .bind(after.1)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await?
        }))
    }

    /// A request's evaluations (not gold judgements) after `after_seq`, oldest first.
    pub async fn votes_on(
        &self,
        request_id: &str,
        after_seq: i64,
        limit: u32,
    ) -> Result<Vec<VoteRow>, StoreError> {
        let sql = format!(
            "SELECT {VOTE_COLUMNS} FROM votes WHERE target_id = $1 AND seq > $2 \
             ORDER BY seq LIMIT $3"
        );
        Ok(with_pool!(&self.db, |pool| {
            query(&sql)
                .bind(request_id)
                .bind(after_seq)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await?
        }))
    }

    /// A request's evaluations after `after_seq`, oldest first, each with its evaluator's
    /// gold record now: what a reward weighs, in one read.
    pub async fn votes_with_standing(
        &self,
        request_id: &str,
        after_seq: i64,
        limit: u32,
    ) -> Result<Vec<VoteStanding>, StoreError> {
        Ok(with_pool!(&self.db, |pool| {
            query(
                "SELECT v.vote_id, v.target_id, v.gold, v.seq, v.evaluator_id, v.eval_object, \
                 v.suite, v.score, v.gate_passed, v.regression, v.suppressed, v.reason_codes, \
                 v.gold_matched, v.voted_at, e.gold_attempts, e.gold_matches, \
                 e.consecutive_mismatches FROM votes v \
                 LEFT JOIN evaluators e ON e.evaluator_id = v.evaluator_id \
                 WHERE v.target_id = $1 AND v.seq > $2 ORDER BY v.seq LIMIT $3",
            )
            .bind(request_id)
            .bind(after_seq)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
        }))
    }

    pub async fn evaluator(&self, evaluator_id: &str) -> Result<Option<EvaluatorRow>, StoreError> {
        let sql = format!("SELECT {EVALUATOR_COLUMNS} FROM evaluators WHERE evaluator_id = $1");
        Ok(with_pool!(&self.db, |pool| {
            query(&sql).bind(evaluator_id).fetch_optional(pool).await?
        }))
    }

    /// The evaluators named, those that exist.
    pub async fn evaluators(&self, ids: &[&str]) -> Result<Vec<EvaluatorRow>, StoreError> {
        let mut found = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let rows: Vec<EvaluatorRow> = with_pool!(&self.db, |pool| {
                let mut select = Builder::new(format!(
                    "SELECT {EVALUATOR_COLUMNS} FROM evaluators WHERE evaluator_id IN ("
                ));
                select.push_list(chunk.iter().copied()).push(")");
                select.build().fetch_all(pool).await?
            });
            found.extend(rows);
        }
        Ok(found)
    }

    /// What anti-abuse screening needs about `evaluator_id`'s votes before `at` — its
    /// latest vote, its votes since `window_start` (exclusive), and its votes on
    /// `target_id` — and the baseline of `suite`, in one read.
    pub async fn vote_counts(
        &self,
        evaluator_id: &str,
        target_id: &str,
        suite: &str,
        window_start: i64,
        at: i64,
    ) -> Result<VoteCounts, StoreError> {
        let (last_vote_at, in_window, on_target, baseline): (Option<i64>, i64, i64, Option<f64>) =
            with_pool!(&self.db, |pool| {
                query(
                    "SELECT \
                     (SELECT MAX(voted_at) FROM votes WHERE evaluator_id = $1 AND voted_at <= $4), \
                     (SELECT COUNT(*) FROM votes WHERE evaluator_id = $1 AND voted_at > $3 \
                      AND voted_at <= $4), \
                     (SELECT COUNT(*) FROM votes WHERE evaluator_id = $1 AND target_id = $2), \
                     (SELECT baseline FROM suites WHERE suite = $5)",
                )
                .bind(evaluator_id)
                .bind(target_id)
                .bind(window_start)
                .bind(at)
                .bind(suite)
                .fetch_one(pool)
                .await?
            });
        Ok(VoteCounts {
            last_vote_at,
            in_window,
            on_target,
            baseline,
        })
    }

    pub async fn reputation(&self, actor_id: &str) -> Result<Option<ReputationRow>, StoreError> {
        Ok(with_pool!(&self.db, |pool| {
            query(
                "SELECT actor_id, version, rep, last_reward_id, updated_at FROM reputations \
                 WHERE actor_id = $1",
            )
            .bind(actor_id)
            .fetch_optional(pool)
            .await?
        }))
    }

    pub async fn suite(&self, suite: &str) -> Result<Option<SuiteRow>, StoreError> {
        Ok(self.suites().await?.into_iter().find(|s| s.suite == suite))
    }

    pub async fn suites(&self) -> Result<Vec<SuiteRow>, StoreError> {
        Ok(with_pool!(&self.db, |pool| {
            query(
                "SELECT suite, baseline, latest_request_id, latest_eval_id, latest_gate_passed, \
                 latest_passed_minimum, latest_regression, updated_at FROM suites ORDER BY suite",
            )
            .fetch_all(pool)
            .await?
        }))
    }

    pub async fn gold_task(&self, gold_id: &str) -> Result<Option<GoldTaskRow>, StoreError> {
        Ok(with_pool!(&self.db, |pool| {
            query(
                "SELECT gold_id, plan_object, risk_object, trace_object, answer_pass, min_score, \
                 max_score, created_by, created_at FROM gold_tasks WHERE gold_id = $1",
            )
            .bind(gold_id)
            .fetch_optional(pool)
            .await?
        }))
    }

    /// Whether `target_id` was served to `evaluator_id`.
    pub async fn served(&self, evaluator_id: &str, target_id: &str) -> Result<bool, StoreError> {
        let row: Option<(i64,)> = with_pool!(&self.db, |pool| {
            query("SELECT CAST(1 AS BIGINT) FROM evaluation_items WHERE evaluator_id = $1 AND target_id = $2")
                .bind(evaluator_id)
                .bind(target_id)
                .fetch_optional(pool)
                .await?
        });
        Ok(row.is_some())
    }

    /// A gold task never served to `evaluator_id`.
    pub async fn unserved_gold(&self, evaluator_id: &str) -> Result<Option<String>, StoreError> {
        let row: Option<(String,)> = with_pool!(&self.db, |pool| {
            query(
                "SELECT gold_id FROM gold_tasks g WHERE NOT EXISTS (SELECT 1 FROM \
                 evaluation_items i WHERE i.evaluator_id = $1 AND i.target_id = g.gold_id) \
                 ORDER BY gold_id LIMIT 1",
            )
            .bind(evaluator_id)
            .fetch_optional(pool)
            .await?
        });
        Ok(row.map(|(id,)| id))
    }

    /// The oldest traced request `evaluator_id` may judge: not its own, never served to it,
    /// never voted on by it.
    pub async fn next_real_target(&self, evaluator_id: &str) -> Result<Option<String>, StoreError> {
        let row: Option<(String,)> = with_pool!(&self.db, |pool| {
            query(
                "SELECT request_id FROM requests r WHERE state IN ('TRACED', 'EVALUATED') \
                 AND actor <> $1 \
                 AND NOT EXISTS (SELECT 1 FROM evaluation_items i WHERE i.evaluator_id = $1 \
                                 AND i.target_id = r.request_id) \
                 AND NOT EXISTS (SELECT 1 FROM votes v WHERE v.evaluator_id = $1 \
                                 AND v.target_id = r.request_id) \
                 ORDER BY request_id LIMIT 1",
            )
            .bind(evaluator_id)
            .fetch_optional(pool)
            .await?
        });
        Ok(row.map(|(id,)| id))
    }

    /// Stored objects whose `schema_version` is not `known` (the first `limit`).
    pub async fn schema_mismatches(
        &self,
        known: &str,
        limit: u32,
    ) -> Result<Vec<(String, String, String)>, StoreError> {
        Ok(with_pool!(&self.db, |pool| {
            query(
                "SELECT content_id, object_type, schema_version FROM objects \
                 WHERE schema_version <> $1 ORDER BY content_id LIMIT $2",
            )
            .bind(known)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
        }))
    }

    /// Requests that ran (a trace other than `blocked`) although their report forbade them
    /// or needed approvals: the ones whose approvals the release check re-examines.
    pub async fn ran_under_approval_rules(&self) -> Result<Vec<RequestRow>, StoreError> {
        let sql = format!(
            "SELECT {REQUEST_COLUMNS} FROM requests WHERE trace_status IS NOT NULL \
             AND trace_status <> 'blocked' \
             AND (forbidden = $1 OR approvals_required > 0 OR risk_level IN ('L2', 'L3')) \
             ORDER BY request_id"
        );
        Ok(with_pool!(&self.db, |pool| {
            query(&sql).bind(true).fetch_all(pool).await?
        }))
    }

    /// Requests past execution without a trace: claimed and never traced.
    pub async fn untraced_executions(&self) -> Result<Vec<RequestRow>, StoreError> {
        let sql = format!(
            "SELECT {REQUEST_COLUMNS} FROM requests WHERE state = 'EXECUTED' \
             OR (state IN ('TRACED', 'EVALUATED', 'REWARDED') AND trace_object IS NULL) \
             ORDER BY request_id"
        );
        Ok(with_pool!(&self.db, |pool| {
            query(&sql).fetch_all(pool).await?
        }))
    }

    /// Requests whose rollback path may be unavailable: a failed trace, or an L1+ plan that
    /// ran without declaring a rollback.
    pub async fn rollback_candidates(&self) -> Result<Vec<RequestRow>, StoreError> {
        let sql = format!(
            "SELECT {REQUEST_COLUMNS} FROM requests WHERE trace_status = 'failed' \
             OR (trace_status IN ('success', 'rolled_back') AND rollback_declared = $1 \
                 AND risk_level <> 'L0') ORDER BY request_id"
        );
        Ok(with_pool!(&self.db, |pool| {
            query(&sql).bind(false).fetch_all(pool).await?
        }))
    }

    /// Audit entries newest first, strictly older than `before_id` when given.
    pub async fn list_audit(
        &self,
        before_id: Option<i64>,
        limit: u32,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        Ok(self
            .db
            .audit_newest_first(before_id, i64::from(limit))
            .await?)
    }

    pub async fn list_audit_oldest_first(
        &self,
        after_id: i64,
        limit: u32,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        Ok(self
            .db
            .audit_oldest_first(after_id, i64::from(limit))
            .await?)
    }
}
