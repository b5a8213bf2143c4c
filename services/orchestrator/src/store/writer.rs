//! Group commit: every write unit of a process goes through one writer task, which takes
//! whatever units are waiting (up to [`MAX_BATCH`]) and applies them in one audited
//! transaction — one audit-head lock, one multi-row insert per history table and one
//! commit (one WAL fsync on SQLite) for the batch. Each caller is answered after the
//! commit, so an acknowledged write is durable; 32 concurrent callers share a transaction
//! instead of queueing for 32.
//!
//! Inside the transaction the units are checked in order, each against what the earlier
//! ones wrote, so a batch is exactly the units one after the other. What the units expect
//! (versions of requests, evaluators and reputations; signatures unused; items not served)
//! is read for the whole batch with one query and followed in memory as the units apply.
//! The batch's rows are then written together: one insert per history table, one upsert
//! per table of the rows the batch leaves behind (the last row of each key), one per
//! suite, each a query of its own (joined into one SQLite query, the batch's ever-changing
//! text had to be prepared for every batch, which cost more than the hand-offs it saved).
//! A unit whose expectation fails writes nothing and is answered with its [`Rejection`].
//! If the batch fails for any other reason, its units are retried one by one, so one bad
//! unit cannot fail its neighbours.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use noema_store::audit::AuditedTx;
use noema_store::sql::{Builder, Engine, Row};
use noema_store::{Backend, Database};
use sqlx::pool::PoolConnection;
use sqlx::{Pool, Sqlite};
use tokio::sync::{mpsc, oneshot};

use super::rows::{
    ApprovalRow, EvaluatorRow, EventRow, GoldTaskRow, ItemRow, ObjectRow, ReputationRow,
    RequestRow, VoteRow,
};
use super::{StoreError, Written};

use super::unit::{Expect, Rejection, SuiteUpdate, Unit};

/// Most units in one transaction: bounds the time the write lock is held.
const MAX_BATCH: usize = 256;
/// Units waiting for the writer before callers wait to hand theirs over.
const QUEUE: usize = 4 * MAX_BATCH;
/// Rows per multi-row insert (well under both engines' bind limits).
const ROWS_PER_INSERT: usize = 500;
/// Values bound by one multi-row upsert (well under both engines' bind limits).
const BINDS_PER_UPSERT: usize = 10_000;
/// Prepared statements the writer's SQLite connection keeps. A multi-row statement's text
/// changes with its row count, so a batch of up to one unit per caller uses a few hundred
/// texts; at sqlx's default of 100 they evicted one another and most were parsed and
/// planned again in every batch.
const WRITER_STATEMENTS: usize = 1024;

type Outcome = Result<(), Rejection>;

struct Pending {
    unit: Unit,
    done: oneshot::Sender<Result<Outcome, StoreError>>,
}

/// The handle callers send units through; the task ends when every handle is dropped.
#[derive(Debug, Clone)]
pub(super) struct GroupWriter {
    queue: mpsc::Sender<Pending>,
}

impl GroupWriter {
    pub fn start(db: &Database, written: Arc<Written>) -> GroupWriter {
        let (queue, incoming) = mpsc::channel(QUEUE);
        const NAME: &str = "orchestrator-writer";
        match db {
            Database::Sqlite(pool) => {
                let task = match writer_pool(pool) {
                    Some(own) => run(own, Hold::Keep, incoming, written),
                    None => run(pool.clone(), Hold::PerBatch, incoming, written),
                };
                noema_store::spawn_writer(Backend::Sqlite, NAME, task);
            }
            // The pool is the readers' too: a connection held for good would be one less
            // for them (and a pool of one would starve them).
            Database::Postgres(pool) => noema_store::spawn_writer(
                Backend::Postgres,
                NAME,
                run(pool.clone(), Hold::PerBatch, incoming, written),
            ),
        }
        GroupWriter { queue }
    }

    /// Hands `unit` to the writer and waits for its commit.
    pub async fn write(&self, unit: Unit) -> Result<Outcome, StoreError> {
        let (done, answer) = oneshot::channel();
        self.queue
            .send(Pending { unit, done })
            .await
            .map_err(|_| StoreError::WriterGone)?;
        answer.await.map_err(|_| StoreError::WriterGone)?
    }
}

/// A pool of one connection of the writer's own on SQLite, so its page cache stays warm
/// and no reader ever waits behind it for a pooled connection; `None` for a pool of one
/// connection, a private in-memory database which another connection would not see (the
/// writer shares that one).
fn writer_pool(pool: &Pool<Sqlite>) -> Option<Pool<Sqlite>> {
    if pool.options().get_max_connections() <= 1 {
        return None;
    }
    let own = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        // A local file's connection cannot drop away; testing it costs a round trip to its
        // thread.
        .test_before_acquire(false)
        .after_connect(|conn, _| {
            Box::pin(async move {
                sqlx::query(noema_store::SQLITE_WRITER_CACHE)
                    .execute(conn)
                    .await?;
                Ok(())
            })
        })
        .connect_lazy_with(
            pool.connect_options()
                .as_ref()
                .clone()
                .statement_cache_capacity(WRITER_STATEMENTS),
        );
    Some(own)
}

/// Whether the writer keeps its connection between batches (its own pool: taking and
/// returning it costs two round trips to the connection's thread per batch) or takes one
/// from a shared pool for each batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    Keep,
    PerBatch,
}

async fn run<D: Engine>(
    pool: Pool<D>,
    hold: Hold,
    mut incoming: mpsc::Receiver<Pending>,
    written: Arc<Written>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut held = None;
    while incoming.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let (units, replies): (Vec<Unit>, Vec<_>) =
            batch.drain(..).map(|p| (p.unit, p.done)).unzip();
        let outcomes = commit(&pool, &mut held, &units).await;
        if hold == Hold::PerBatch {
            held = None;
        }
        tracing::debug!(units = units.len(), "group commit");
        // Remembered before anyone is answered, so a caller's next read sees its write.
        for (unit, outcome) in units.iter().zip(&outcomes) {
            match outcome {
                Ok(Ok(())) => written.committed(unit),
                Ok(Err(Rejection::Moved)) => written.moved(unit),
                _ => {}
            }
        }
        for (reply, outcome) in replies.into_iter().zip(outcomes) {
            // A caller that went away still had its unit committed; nobody to tell.
            let _ = reply.send(outcome);
        }
    }
}

/// Commits `units` as one group, answering each; a unit that fails alone does not fail
/// the others.
/// `held` is the writer's connection, taken from `pool` when it has none (and let go after
/// a failed transaction, so the retries start on a fresh one).
pub(super) async fn commit<D: Engine>(
    pool: &Pool<D>,
    held: &mut Option<PoolConnection<D>>,
    units: &[Unit],
) -> Vec<Result<Outcome, StoreError>> {
    match apply(pool, held, units).await {
        Ok(outcomes) => outcomes.into_iter().map(Ok).collect(),
        Err(err) if units.len() == 1 => vec![Err(err)],
        Err(err) => {
            tracing::warn!(units = units.len(), error = %noema_core::ErrorChain(&err), "group commit failed; retrying its units one by one");
            let mut outcomes = Vec::with_capacity(units.len());
            for unit in units {
                outcomes.push(
                    apply(pool, held, std::slice::from_ref(unit))
                        .await
                        .map(|mut o| o.pop().unwrap_or(Ok(()))),
                );
            }
            outcomes
        }
    }
}

/// One transaction over `units`, on the held connection; a failure lets it go.
async fn apply<D: Engine>(
    pool: &Pool<D>,
    held: &mut Option<PoolConnection<D>>,
    units: &[Unit],
) -> Result<Vec<Outcome>, StoreError> {
    let conn = match held {
        Some(conn) => conn,
        None => held.insert(pool.acquire().await?),
    };
    let result = apply_on(conn, units).await;
    if result.is_err() {
        *held = None;
    }
    result
}

async fn apply_on<D: Engine>(
    conn: &mut PoolConnection<D>,
    units: &[Unit],
) -> Result<Vec<Outcome>, StoreError> {
    let mut tx = AuditedTx::begin(conn).await?;
    let mut known = Known::read(&mut tx, units).await?;
    let mut outcomes = Vec::with_capacity(units.len());
    let mut approvals: Vec<&ApprovalRow> = Vec::new();
    let mut gold_tasks: Vec<&GoldTaskRow> = Vec::new();
    let mut items: Vec<&ItemRow> = Vec::new();
    let mut events: Vec<&EventRow> = Vec::new();
    let mut objects: Vec<&ObjectRow> = Vec::new();
    let mut votes: Vec<&VoteRow> = Vec::new();
    let mut requests: HashMap<&str, &RequestRow> = HashMap::new();
    let mut evaluators: HashMap<&str, &EvaluatorRow> = HashMap::new();
    let mut reputations: HashMap<&str, &ReputationRow> = HashMap::new();
    let mut suites: Vec<SuiteChange> = Vec::new();
    for unit in units {
        if let Some(rejection) = known.check(&unit.expect) {
            outcomes.push(Err(rejection));
            continue;
        }
        known.wrote(unit);
        approvals.extend(&unit.approval);
        gold_tasks.extend(&unit.gold_task);
        items.extend(&unit.item);
        if let Some(r) = &unit.request {
            requests.insert(&r.row.request_id, &r.row);
        }
        if let Some(e) = &unit.evaluator {
            evaluators.insert(&e.evaluator_id, e);
        }
        if let Some(r) = &unit.reputation {
            reputations.insert(&r.actor_id, r);
        }
        if let Some(update) = &unit.suite {
            merge_suite(&mut suites, update, unit_time(unit));
        }
        events.extend(&unit.events);
        objects.extend(&unit.objects);
        votes.extend(&unit.votes);
        let at = unit.at.unwrap_or_else(time::OffsetDateTime::now_utc);
        for draft in &unit.audit {
            tx.record(draft.clone(), at);
        }
        outcomes.push(Ok(()));
    }
    insert_approvals(&mut tx, &approvals).await?;
    insert_gold_tasks(&mut tx, &gold_tasks).await?;
    insert_items(&mut tx, &items).await?;
    upsert_requests(&mut tx, &requests.into_values().collect::<Vec<_>>()).await?;
    upsert_evaluators(&mut tx, &evaluators.into_values().collect::<Vec<_>>()).await?;
    upsert_reputations(&mut tx, &reputations.into_values().collect::<Vec<_>>()).await?;
    for change in &suites {
        write_suite(&mut tx, &change.update, change.at).await?;
    }
    insert_objects(&mut tx, &objects).await?;
    insert_events(&mut tx, &events).await?;
    insert_votes(&mut tx, &votes).await?;
    tx.commit().await?;
    Ok(outcomes)
}

/// What a batch's units expect, as the database holds it at the start of its transaction
/// (one query for the whole batch), then as the batch's units change it: the versions of
/// requests, evaluators and reputations (absent: 0), the approval signatures accepted and
/// the items served.
#[derive(Default)]
struct Known {
    requests: HashMap<String, i64>,
    evaluators: HashMap<String, i64>,
    reputations: HashMap<String, i64>,
    signatures: HashSet<String>,
    served: HashSet<(String, String)>,
}

/// The kinds of row [`Known::read`] answers, in its first column.
const REQUEST: &str = "request";
const EVALUATOR: &str = "evaluator";
const REPUTATION: &str = "reputation";
const SIGNATURE: &str = "signature";
const SERVED: &str = "served";

impl Known {
    async fn read<D: Engine>(
        tx: &mut AuditedTx<'_, D>,
        units: &[Unit],
    ) -> Result<Known, sqlx::Error> {
        let mut requests = BTreeSet::new();
        let mut evaluators = BTreeSet::new();
        let mut reputations = BTreeSet::new();
        let mut signatures = BTreeSet::new();
        let mut served_by = BTreeSet::new();
        let mut served_targets = BTreeSet::new();
        for e in units.iter().flat_map(|u| &u.expect) {
            match e {
                Expect::Request { request_id, .. } => {
                    requests.insert(request_id.as_str());
                }
                Expect::Evaluator { evaluator_id, .. } => {
                    evaluators.insert(evaluator_id.as_str());
                }
                Expect::Reputation { actor_id, .. } => {
                    reputations.insert(actor_id.as_str());
                }
                Expect::SignatureUnused { signature } => {
                    signatures.insert(signature.as_str());
                }
                Expect::NotServed {
                    evaluator_id,
                    target_id,
                } => {
                    served_by.insert(evaluator_id.as_str());
                    served_targets.insert(target_id.as_str());
                }
            }
        }
        let mut select = Builder::<D>::new("");
        let mut selects = 0;
        let mut union = |select: &mut Builder<'_, D>, sql: String| {
            if selects > 0 {
                select.push(" UNION ALL ");
            }
            selects += 1;
            select.push(sql);
        };
        for (kind, table, key, keys) in [
            (REQUEST, "requests", "request_id", &requests),
            (EVALUATOR, "evaluators", "evaluator_id", &evaluators),
            (REPUTATION, "reputations", "actor_id", &reputations),
        ] {
            let keys: Vec<&str> = keys.iter().copied().collect();
            for chunk in keys.chunks(ROWS_PER_INSERT) {
                union(
                    &mut select,
                    format!("SELECT '{kind}', {key}, '', version FROM {table} WHERE {key} IN ("),
                );
                select.push_list(chunk.iter().copied()).push(")");
            }
        }
        let signatures: Vec<&str> = signatures.into_iter().collect();
        for chunk in signatures.chunks(ROWS_PER_INSERT) {
            union(
                &mut select,
                format!(
                    "SELECT '{SIGNATURE}', signature, '', CAST(0 AS BIGINT) FROM approvals \
                     WHERE signature IN ("
                ),
            );
            select.push_list(chunk.iter().copied()).push(")");
        }
        if !served_by.is_empty() {
            // Every pair of the evaluators and targets asked about: a superset of the pairs,
            // which the checks look up exactly.
            union(
                &mut select,
                format!(
                    "SELECT '{SERVED}', evaluator_id, target_id, CAST(0 AS BIGINT) \
                     FROM evaluation_items WHERE evaluator_id IN ("
                ),
            );
            select
                .push_list(served_by)
                .push(") AND target_id IN (")
                .push_list(served_targets)
                .push(")");
        }
        let mut known = Known::default();
        if selects == 0 {
            return Ok(known);
        }
        let rows: Vec<(String, String, String, i64)> = select.build().fetch_all(tx.conn()).await?;
        for (kind, key, second, version) in rows {
            match kind.as_str() {
                REQUEST => {
                    known.requests.insert(key, version);
                }
                EVALUATOR => {
                    known.evaluators.insert(key, version);
                }
                REPUTATION => {
                    known.reputations.insert(key, version);
                }
                SIGNATURE => {
                    known.signatures.insert(key);
                }
                _ => {
                    known.served.insert((key, second));
                }
            }
        }
        Ok(known)
    }

    /// The first expectation that does not hold, if any.
    fn check(&self, expect: &[Expect]) -> Option<Rejection> {
        let at = |map: &HashMap<String, i64>, key: &str| map.get(key).copied().unwrap_or(0);
        expect.iter().find_map(|e| match e {
            Expect::Request {
                request_id,
                version,
            } => (at(&self.requests, request_id) != *version).then_some(Rejection::Moved),
            Expect::Evaluator {
                evaluator_id,
                version,
            } => (at(&self.evaluators, evaluator_id) != *version).then_some(Rejection::Moved),
            Expect::Reputation { actor_id, version } => {
                (at(&self.reputations, actor_id) != *version).then_some(Rejection::Moved)
            }
            Expect::SignatureUnused { signature } => self
                .signatures
                .contains(signature)
                .then_some(Rejection::SignatureUsed),
            Expect::NotServed {
                evaluator_id,
                target_id,
            } => self
                .served
                .contains(&(evaluator_id.clone(), target_id.clone()))
                .then_some(Rejection::AlreadyServed),
        })
    }

    /// Follows what a unit just wrote.
    fn wrote(&mut self, unit: &Unit) {
        if let Some(r) = &unit.request {
            self.requests
                .insert(r.row.request_id.clone(), r.row.version);
        }
        if let Some(e) = &unit.evaluator {
            self.evaluators.insert(e.evaluator_id.clone(), e.version);
        }
        if let Some(r) = &unit.reputation {
            self.reputations.insert(r.actor_id.clone(), r.version);
        }
        if let Some(a) = &unit.approval {
            self.signatures.insert(a.signature.clone());
        }
        if let Some(i) = &unit.item {
            self.served
                .insert((i.evaluator_id.clone(), i.target_id.clone()));
        }
    }
}

async fn insert_approvals<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    rows: &[&ApprovalRow],
) -> Result<(), sqlx::Error> {
    insert_rows(
        tx,
        "INSERT INTO approvals (request_id, seq, approval_object, approval_id, approver, \
                 decision, signature, public_key, submitted_by, recorded_at) ",
        "",
        rows,
        ROWS_PER_INSERT,
        |row, a| {
            row.bind(&a.request_id)
                .bind(a.seq)
                .bind(&a.approval_object)
                .bind(&a.approval_id)
                .bind(&a.approver)
                .bind(&a.decision)
                .bind(&a.signature)
                .bind(&a.public_key)
                .bind(&a.submitted_by)
                .bind(a.recorded_at);
        },
    )
    .await
}

async fn insert_gold_tasks<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    rows: &[&GoldTaskRow],
) -> Result<(), sqlx::Error> {
    insert_rows(
        tx,
        "INSERT INTO gold_tasks (gold_id, plan_object, risk_object, trace_object, \
                 answer_pass, min_score, max_score, created_by, created_at) ",
        "",
        rows,
        ROWS_PER_INSERT,
        |row, g| {
            row.bind(&g.gold_id)
                .bind(&g.plan_object)
                .bind(&g.risk_object)
                .bind(&g.trace_object)
                .bind(g.answer_pass)
                .bind(g.min_score)
                .bind(g.max_score)
                .bind(&g.created_by)
                .bind(g.created_at);
        },
    )
    .await
}

async fn insert_items<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    rows: &[&ItemRow],
) -> Result<(), sqlx::Error> {
    insert_rows(
        tx,
        "INSERT INTO evaluation_items (item_id, evaluator_id, target_id, gold, \
                 served_at) ",
        "",
        rows,
        ROWS_PER_INSERT,
        |row, i| {
            row.bind(&i.item_id)
                .bind(&i.evaluator_id)
                .bind(&i.target_id)
                .bind(i.gold)
                .bind(i.served_at);
        },
    )
    .await
}

/// Writes `rows`, `per` rows to a statement: `head` (`INSERT INTO table (columns) `), each
/// row's values as `bind` binds them, then `tail` (an `ON CONFLICT` clause, or nothing).
async fn insert_rows<'r, D: Engine, T>(
    tx: &mut AuditedTx<'_, D>,
    head: &str,
    tail: &str,
    rows: &'r [&'r T],
    per: usize,
    bind: impl Fn(&mut Row<'_, 'r, D>, &'r T),
) -> Result<(), sqlx::Error> {
    for chunk in rows.chunks(per) {
        let mut statement = Builder::<D>::new(head);
        statement
            .push_values(chunk, |row, item| bind(row, item))
            .push(tail);
        statement.build().execute(tx.conn()).await?;
    }
    Ok(())
}

fn unit_time(unit: &Unit) -> i64 {
    super::micros(unit.at.unwrap_or_else(time::OffsetDateTime::now_utc))
}

/// The batch's last row of each request (new or moved on), in one upsert per chunk.
async fn upsert_requests<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    rows: &[&RequestRow],
) -> Result<(), sqlx::Error> {
    insert_rows(
        tx,
        "INSERT INTO requests (request_id, state, actor, version, head_hash, plan_object, \
             rollback_declared, risk_object, risk_level, forbidden, approvals_required, \
             trace_object, trace_id, trace_status, reward_object, approval_count, \
             evaluation_count, waiting_since, created_at, updated_at) ",
        " ON CONFLICT (request_id) DO UPDATE SET state = excluded.state, \
                 actor = excluded.actor, version = excluded.version, \
                 head_hash = excluded.head_hash, plan_object = excluded.plan_object, \
                 rollback_declared = excluded.rollback_declared, \
                 risk_object = excluded.risk_object, risk_level = excluded.risk_level, \
                 forbidden = excluded.forbidden, \
                 approvals_required = excluded.approvals_required, \
                 trace_object = excluded.trace_object, trace_id = excluded.trace_id, \
                 trace_status = excluded.trace_status, reward_object = excluded.reward_object, \
                 approval_count = excluded.approval_count, \
                 evaluation_count = excluded.evaluation_count, \
                 waiting_since = excluded.waiting_since, created_at = excluded.created_at, \
                 updated_at = excluded.updated_at",
        rows,
        BINDS_PER_UPSERT / 20,
        |row, r| {
            row.bind(&r.request_id)
                .bind(&r.state)
                .bind(&r.actor)
                .bind(r.version)
                .bind(&r.head_hash)
                .bind(&r.plan_object)
                .bind(r.rollback_declared)
                .bind(&r.risk_object)
                .bind(&r.risk_level)
                .bind(r.forbidden)
                .bind(r.approvals_required)
                .bind(&r.trace_object)
                .bind(&r.trace_id)
                .bind(&r.trace_status)
                .bind(&r.reward_object)
                .bind(r.approval_count)
                .bind(r.evaluation_count)
                .bind(r.waiting_since)
                .bind(r.created_at)
                .bind(r.updated_at);
        },
    )
    .await
}

/// The batch's last row of each evaluator, in one upsert per chunk.
async fn upsert_evaluators<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    rows: &[&EvaluatorRow],
) -> Result<(), sqlx::Error> {
    insert_rows(
        tx,
        "INSERT INTO evaluators (evaluator_id, version, votes, gold_attempts, gold_matches, \
             consecutive_mismatches, updated_at) ",
        " ON CONFLICT (evaluator_id) DO UPDATE SET version = excluded.version, \
                 votes = excluded.votes, gold_attempts = excluded.gold_attempts, \
                 gold_matches = excluded.gold_matches, \
                 consecutive_mismatches = excluded.consecutive_mismatches, \
                 updated_at = excluded.updated_at",
        rows,
        BINDS_PER_UPSERT / 7,
        |row, e| {
            row.bind(&e.evaluator_id)
                .bind(e.version)
                .bind(e.votes)
                .bind(e.gold_attempts)
                .bind(e.gold_matches)
                .bind(e.consecutive_mismatches)
                .bind(e.updated_at);
        },
    )
    .await
}

/// The batch's last reputation of each actor, in one upsert per chunk.
async fn upsert_reputations<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    rows: &[&ReputationRow],
) -> Result<(), sqlx::Error> {
    insert_rows(
        tx,
        "INSERT INTO reputations (actor_id, version, rep, last_reward_id, updated_at) ",
        " ON CONFLICT (actor_id) DO UPDATE SET version = excluded.version, \
                 rep = excluded.rep, last_reward_id = excluded.last_reward_id, \
                 updated_at = excluded.updated_at",
        rows,
        BINDS_PER_UPSERT / 5,
        |row, r| {
            row.bind(&r.actor_id)
                .bind(r.version)
                .bind(r.rep)
                .bind(&r.last_reward_id)
                .bind(r.updated_at);
        },
    )
    .await
}

/// A suite's change merged into the batch's: the baseline candidate is the best passing
/// score, the latest evaluation the last one (what the units' upserts one after the other
/// would leave).
fn merge_suite(suites: &mut Vec<SuiteChange>, update: &SuiteUpdate, at: i64) {
    match suites.iter_mut().find(|s| s.update.suite == update.suite) {
        Some(s) => {
            let best = match (s.update.passing_score, update.passing_score) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            s.update = SuiteUpdate {
                passing_score: best,
                ..update.clone()
            };
            s.at = at;
        }
        None => suites.push(SuiteChange {
            update: update.clone(),
            at,
        }),
    }
}

/// A suite's change in a batch, and when its last evaluation happened.
struct SuiteChange {
    update: SuiteUpdate,
    at: i64,
}

/// The suite's baseline rises to a passing score (never falls), and the evaluation
/// becomes its latest: commutative in the baseline, last-committed-wins for the latest.
async fn write_suite<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    s: &SuiteUpdate,
    at: i64,
) -> Result<(), sqlx::Error> {
    let mut statement = Builder::<D>::new(
        "INSERT INTO suites (suite, baseline, latest_request_id, latest_eval_id, \
             latest_gate_passed, latest_passed_minimum, latest_regression, updated_at) ",
    );
    statement
        .push_values([s], |row, s| {
            row.bind(&s.suite)
                .bind(s.passing_score)
                .bind(&s.request_id)
                .bind(&s.eval_id)
                .bind(s.gate_passed)
                .bind(s.passed_minimum)
                .bind(s.regression)
                .bind(at);
        })
        .push(
            " ON CONFLICT (suite) DO UPDATE SET \
             baseline = CASE WHEN excluded.baseline IS NULL THEN suites.baseline \
                             WHEN suites.baseline IS NULL THEN excluded.baseline \
                             WHEN excluded.baseline > suites.baseline THEN excluded.baseline \
                             ELSE suites.baseline END, \
             latest_request_id = excluded.latest_request_id, \
             latest_eval_id = excluded.latest_eval_id, \
             latest_gate_passed = excluded.latest_gate_passed, \
             latest_passed_minimum = excluded.latest_passed_minimum, \
             latest_regression = excluded.latest_regression, updated_at = excluded.updated_at",
        );
    statement.build().execute(tx.conn()).await?;
    Ok(())
}

/// Objects are content-addressed: the same bytes stored twice are one row.
async fn insert_objects<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    objects: &[&ObjectRow],
) -> Result<(), sqlx::Error> {
    insert_rows(
        tx,
        "INSERT INTO objects (content_id, object_type, object_id, schema_version, body, \
             created_at) ",
        " ON CONFLICT (content_id) DO NOTHING",
        objects,
        ROWS_PER_INSERT,
        |row, o| {
            row.bind(&o.content_id)
                .bind(&o.object_type)
                .bind(&o.object_id)
                .bind(&o.schema_version)
                .bind(&o.body)
                .bind(o.created_at);
        },
    )
    .await
}

async fn insert_events<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    events: &[&EventRow],
) -> Result<(), sqlx::Error> {
    insert_rows(
        tx,
        "INSERT INTO request_events (request_id, seq, event_type, prev_state, next_state, \
             meta, ts, prev_hash, hash) ",
        "",
        events,
        ROWS_PER_INSERT,
        |row, e| {
            row.bind(&e.request_id)
                .bind(e.seq)
                .bind(&e.event_type)
                .bind(&e.prev_state)
                .bind(&e.next_state)
                .bind(&e.meta)
                .bind(&e.ts)
                .bind(&e.prev_hash)
                .bind(&e.hash);
        },
    )
    .await
}

async fn insert_votes<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    votes: &[&VoteRow],
) -> Result<(), sqlx::Error> {
    insert_rows(
        tx,
        "INSERT INTO votes (vote_id, target_id, gold, seq, evaluator_id, eval_object, suite, \
             score, gate_passed, regression, suppressed, reason_codes, gold_matched, voted_at) ",
        "",
        votes,
        ROWS_PER_INSERT,
        |row, v| {
            row.bind(&v.vote_id)
                .bind(&v.target_id)
                .bind(v.gold)
                .bind(v.seq)
                .bind(&v.evaluator_id)
                .bind(&v.eval_object)
                .bind(&v.suite)
                .bind(v.score)
                .bind(v.gate_passed)
                .bind(v.regression)
                .bind(v.suppressed)
                .bind(&v.reason_codes)
                .bind(v.gold_matched)
                .bind(v.voted_at);
        },
    )
    .await
}

#[cfg(test)]
#[allow(clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use noema_store::testing::TestDatabase;

    use super::super::MIGRATIONS;
    use super::super::unit::RequestWrite;
    use super::*;

    fn approval(request_id: &str, seq: i64, signature: &str) -> Unit {
        Unit {
            expect: vec![Expect::SignatureUnused {
                signature: signature.into(),
            }],
            approval: Some(ApprovalRow {
                request_id: request_id.into(),
                seq,
                approval_object: "{}".into(),
                approval_id: format!("approval-{signature}"),
                approver: "approver".into(),
                decision: "approve".into(),
                signature: signature.into(),
                public_key: "key".into(),
                submitted_by: "agent".into(),
                recorded_at: 1,
            }),
            ..Unit::default()
        }
    }

    fn served(evaluator_id: &str, target_id: &str) -> Unit {
        Unit {
            expect: vec![Expect::NotServed {
                evaluator_id: evaluator_id.into(),
                target_id: target_id.into(),
            }],
            item: Some(ItemRow {
                item_id: format!("{evaluator_id}/{target_id}"),
                evaluator_id: evaluator_id.into(),
                target_id: target_id.into(),
                gold: false,
                served_at: 1,
            }),
            ..Unit::default()
        }
    }

    /// Moves `request_id` from `version` to the next.
    fn request(request_id: &str, version: i64) -> Unit {
        Unit {
            expect: vec![Expect::Request {
                request_id: request_id.into(),
                version,
            }],
            request: Some(RequestWrite {
                row: RequestRow {
                    request_id: request_id.into(),
                    state: format!("STATE_{}", version + 1),
                    actor: "agent".into(),
                    version: version + 1,
                    head_hash: String::new(),
                    plan_object: "plan".into(),
                    rollback_declared: false,
                    risk_object: None,
                    risk_level: None,
                    forbidden: None,
                    approvals_required: None,
                    trace_object: None,
                    trace_id: None,
                    trace_status: None,
                    reward_object: None,
                    approval_count: 0,
                    evaluation_count: 0,
                    waiting_since: None,
                    created_at: 1,
                    updated_at: 1,
                },
                insert: version == 0,
            }),
            ..Unit::default()
        }
    }

    /// One transaction over `units`, without [`commit`]'s retry one by one (which would
    /// answer the same outcomes had the batch failed).
    async fn batch<D: Engine>(pool: &Pool<D>, units: &[Unit]) -> Vec<Outcome> {
        apply(pool, &mut None, units)
            .await
            .expect("the batch commits")
    }

    /// A batch's units are checked one after the other, each seeing what the earlier ones
    /// (and the batches before) wrote, though the batch writes them all at once.
    async fn a_batch_is_its_units_one_after_the_other<D: Engine>(pool: Pool<D>) {
        let outcomes = batch(
            &pool,
            &[
                request("r1", 0),
                request("r1", 1),
                request("r1", 1),
                approval("r1", 1, "sig-a"),
                approval("r1", 1, "sig-a"),
                served("e1", "t1"),
                served("e1", "t1"),
                served("e1", "t2"),
            ],
        )
        .await;
        assert_eq!(
            outcomes,
            [
                Ok(()),
                Ok(()),
                Err(Rejection::Moved),
                Ok(()),
                Err(Rejection::SignatureUsed),
                Ok(()),
                Err(Rejection::AlreadyServed),
                Ok(()),
            ]
        );
        // The next batch reads what the first committed. Its items are looked up in one
        // query of every evaluator and target asked about, which also finds (e1, t1):
        // neither (e2, t1) nor (e1, t3) was served.
        let outcomes = batch(
            &pool,
            &[
                request("r1", 2),
                request("r1", 1),
                approval("r1", 1, "sig-a"),
                approval("r1", 2, "sig-b"),
                served("e1", "t2"),
                served("e2", "t1"),
                served("e1", "t3"),
            ],
        )
        .await;
        assert_eq!(
            outcomes,
            [
                Ok(()),
                Err(Rejection::Moved),
                Err(Rejection::SignatureUsed),
                Ok(()),
                Err(Rejection::AlreadyServed),
                Ok(()),
                Ok(()),
            ]
        );
        let count =
            |sql: &'static str| noema_store::sql::query::<D>(sql).fetch_one::<(i64,)>(&pool);
        assert_eq!(
            count("SELECT COUNT(*) FROM approvals")
                .await
                .expect("count"),
            (2,)
        );
        assert_eq!(
            count("SELECT COUNT(*) FROM evaluation_items")
                .await
                .expect("count"),
            (4,)
        );
        let (state, version): (String, i64) = noema_store::sql::query::<D>(
            "SELECT state, version FROM requests WHERE request_id = 'r1'",
        )
        .fetch_one(&pool)
        .await
        .expect("request");
        assert_eq!((state.as_str(), version), ("STATE_3", 3));
    }

    #[tokio::test]
    async fn sqlite_a_batch_is_its_units_one_after_the_other() {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("o.db").display());
        let db = Database::connect(&url).await.expect("connect");
        db.migrate(&MIGRATIONS).await.expect("migrate");
        let Database::Sqlite(pool) = db else {
            panic!("not sqlite")
        };
        a_batch_is_its_units_one_after_the_other(pool).await;
    }

    #[tokio::test]
    async fn postgres_a_batch_is_its_units_one_after_the_other() {
        let admin = std::env::var("NOEMA_TEST_DATABASE_URL").expect(
            "NOEMA_TEST_DATABASE_URL is not set: run through scripts/test, which starts Postgres",
        );
        let database = TestDatabase::create(&admin, "orchestrator_writer")
            .await
            .expect("test database");
        let db = Database::connect(database.url()).await.expect("connect");
        db.migrate(&MIGRATIONS).await.expect("migrate");
        let Database::Postgres(pool) = db else {
            panic!("not postgres")
        };
        a_batch_is_its_units_one_after_the_other(pool).await;
    }
}
