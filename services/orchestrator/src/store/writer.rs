//! Group commit: every write unit of a process goes through one writer task, which takes
//! whatever units are waiting (up to [`MAX_BATCH`]) and applies them in one audited
//! transaction — one audit-head lock, one multi-row insert per history table and one
//! commit (one WAL fsync on SQLite) for the batch. Each caller is answered after the
//! commit, so an acknowledged write is durable; 32 concurrent callers share a transaction
//! instead of queueing for 32.
//!
//! Inside the transaction the units are applied in order, each after its expectations are
//! checked (a later unit sees the earlier ones' writes), so a batch is exactly the units
//! one after the other. The versions the units expect of requests, evaluators and
//! reputations are read for the whole batch at once and followed in memory as the units
//! apply; the rows the batch leaves behind are then written with one upsert per table (the
//! last row of each key: what applying the units one after the other leaves), and a
//! suite's changes with one upsert per suite. A unit whose expectation fails writes nothing and is answered
//! with its [`Rejection`]. If the batch fails for any other reason, its units are retried
//! one by one, so one bad unit cannot fail its neighbours.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use noema_store::audit::AuditedTx;
use noema_store::sql::{Builder, Engine, query};
use noema_store::{Backend, Database};
use sqlx::pool::PoolConnection;
use sqlx::{Pool, Sqlite};
use tokio::sync::{mpsc, oneshot};

use super::rows::{EvaluatorRow, EventRow, ObjectRow, ReputationRow, RequestRow, VoteRow};
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
/// The writer connection's page cache on SQLite (32 MiB): a batch touches a page per
/// random key in each index it writes.
const WRITER_SQLITE_CACHE: &str = "PRAGMA cache_size = -32768";
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
                sqlx::query(WRITER_SQLITE_CACHE).execute(conn).await?;
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
    let mut versions = Versions::read(&mut tx, units).await?;
    let mut outcomes = Vec::with_capacity(units.len());
    let mut events: Vec<&EventRow> = Vec::new();
    let mut objects: Vec<&ObjectRow> = Vec::new();
    let mut votes: Vec<&VoteRow> = Vec::new();
    let mut requests: HashMap<&str, &RequestRow> = HashMap::new();
    let mut evaluators: HashMap<&str, &EvaluatorRow> = HashMap::new();
    let mut reputations: HashMap<&str, &ReputationRow> = HashMap::new();
    let mut suites: Vec<SuiteChange> = Vec::new();
    for unit in units {
        if let Some(rejection) = check(&mut tx, &versions, &unit.expect).await? {
            outcomes.push(Err(rejection));
            continue;
        }
        write(&mut tx, unit).await?;
        versions.wrote(unit);
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

/// The versions of the requests, evaluators and reputations a batch expects, as the
/// database holds them at the start of its transaction (absent: 0), then as the batch's
/// units move them.
#[derive(Default)]
struct Versions {
    requests: HashMap<String, i64>,
    evaluators: HashMap<String, i64>,
    reputations: HashMap<String, i64>,
}

impl Versions {
    async fn read<D: Engine>(
        tx: &mut AuditedTx<'_, D>,
        units: &[Unit],
    ) -> Result<Versions, sqlx::Error> {
        let mut requests = BTreeSet::new();
        let mut evaluators = BTreeSet::new();
        let mut reputations = BTreeSet::new();
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
                Expect::SignatureUnused { .. } | Expect::NotServed { .. } => {}
            }
        }
        Ok(Versions {
            requests: read_versions(tx, "requests", "request_id", &requests).await?,
            evaluators: read_versions(tx, "evaluators", "evaluator_id", &evaluators).await?,
            reputations: read_versions(tx, "reputations", "actor_id", &reputations).await?,
        })
    }

    /// Follows the rows a unit just wrote.
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
    }
}

/// The `version` of each of `keys` in `table` (those that exist).
async fn read_versions<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    table: &str,
    key: &str,
    keys: &BTreeSet<&str>,
) -> Result<HashMap<String, i64>, sqlx::Error> {
    let keys: Vec<&str> = keys.iter().copied().collect();
    let mut found = HashMap::with_capacity(keys.len());
    for chunk in keys.chunks(ROWS_PER_INSERT) {
        let mut select = Builder::<D>::new(format!(
            "SELECT {key}, version FROM {table} WHERE {key} IN ("
        ));
        select.push_list(chunk.iter().copied()).push(")");
        let rows: Vec<(String, i64)> = select.build().fetch_all(tx.conn()).await?;
        found.extend(rows);
    }
    Ok(found)
}

/// The first expectation that does not hold, if any.
async fn check<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    versions: &Versions,
    expect: &[Expect],
) -> Result<Option<Rejection>, sqlx::Error> {
    let at = |map: &HashMap<String, i64>, key: &str| map.get(key).copied().unwrap_or(0);
    for e in expect {
        let rejection = match e {
            Expect::Request {
                request_id,
                version,
            } => (at(&versions.requests, request_id) != *version).then_some(Rejection::Moved),
            Expect::Evaluator {
                evaluator_id,
                version,
            } => (at(&versions.evaluators, evaluator_id) != *version).then_some(Rejection::Moved),
            Expect::Reputation { actor_id, version } => {
                (at(&versions.reputations, actor_id) != *version).then_some(Rejection::Moved)
            }
            Expect::SignatureUnused { signature } => {
                let row: Option<(i64,)> =
                    query("SELECT CAST(1 AS BIGINT) FROM approvals WHERE signature = $1")
                        .bind(signature)
                        .fetch_optional(tx.conn())
                        .await?;
                row.is_some().then_some(Rejection::SignatureUsed)
            }
            Expect::NotServed {
                evaluator_id,
                target_id,
            } => {
                let row: Option<(i64,)> = query(
                    "SELECT CAST(1 AS BIGINT) FROM evaluation_items WHERE evaluator_id = $1 AND target_id = $2",
                )
                .bind(evaluator_id)
                .bind(target_id)
                .fetch_optional(tx.conn())
                .await?;
                row.is_some().then_some(Rejection::AlreadyServed)
            }
        };
        if rejection.is_some() {
            return Ok(rejection);
        }
    }
    Ok(None)
}

/// The unit's own row writes (its history rows and the rows the batch leaves behind are
/// written with the batch's).
async fn write<D: Engine>(tx: &mut AuditedTx<'_, D>, unit: &Unit) -> Result<(), sqlx::Error> {
    if let Some(a) = &unit.approval {
        query(
            "INSERT INTO approvals (request_id, seq, approval_object, approval_id, approver, \
             decision, signature, public_key, submitted_by, recorded_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(&a.request_id)
        .bind(a.seq)
        .bind(&a.approval_object)
        .bind(&a.approval_id)
        .bind(&a.approver)
        .bind(&a.decision)
        .bind(&a.signature)
        .bind(&a.public_key)
        .bind(&a.submitted_by)
        .bind(a.recorded_at)
        .execute(tx.conn())
        .await?;
    }
    if let Some(g) = &unit.gold_task {
        query(
            "INSERT INTO gold_tasks (gold_id, plan_object, risk_object, trace_object, \
             answer_pass, min_score, max_score, created_by, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&g.gold_id)
        .bind(&g.plan_object)
        .bind(&g.risk_object)
        .bind(&g.trace_object)
        .bind(g.answer_pass)
        .bind(g.min_score)
        .bind(g.max_score)
        .bind(&g.created_by)
        .bind(g.created_at)
        .execute(tx.conn())
        .await?;
    }
    if let Some(i) = &unit.item {
        query(
            "INSERT INTO evaluation_items (item_id, evaluator_id, target_id, gold, served_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&i.item_id)
        .bind(&i.evaluator_id)
        .bind(&i.target_id)
        .bind(i.gold)
        .bind(i.served_at)
        .execute(tx.conn())
        .await?;
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
    for chunk in rows.chunks(BINDS_PER_UPSERT / 20) {
        let mut upsert = Builder::<D>::new(
            "INSERT INTO requests (request_id, state, actor, version, head_hash, plan_object, \
             rollback_declared, risk_object, risk_level, forbidden, approvals_required, \
             trace_object, trace_id, trace_status, reward_object, approval_count, \
             evaluation_count, waiting_since, created_at, updated_at) ",
        );
        upsert
            .push_values(chunk, |row, r| {
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
            })
            .push(
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
            );
        upsert.build().execute(tx.conn()).await?;
    }
    Ok(())
}

/// The batch's last row of each evaluator, in one upsert per chunk.
async fn upsert_evaluators<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    rows: &[&EvaluatorRow],
) -> Result<(), sqlx::Error> {
    for chunk in rows.chunks(BINDS_PER_UPSERT / 7) {
        let mut upsert = Builder::<D>::new(
            "INSERT INTO evaluators (evaluator_id, version, votes, gold_attempts, gold_matches, \
             consecutive_mismatches, updated_at) ",
        );
        upsert
            .push_values(chunk, |row, e| {
                row.bind(&e.evaluator_id)
                    .bind(e.version)
                    .bind(e.votes)
                    .bind(e.gold_attempts)
                    .bind(e.gold_matches)
                    .bind(e.consecutive_mismatches)
                    .bind(e.updated_at);
            })
            .push(
                " ON CONFLICT (evaluator_id) DO UPDATE SET version = excluded.version, \
                 votes = excluded.votes, gold_attempts = excluded.gold_attempts, \
                 gold_matches = excluded.gold_matches, \
                 consecutive_mismatches = excluded.consecutive_mismatches, \
                 updated_at = excluded.updated_at",
            );
        upsert.build().execute(tx.conn()).await?;
    }
    Ok(())
}

/// The batch's last reputation of each actor, in one upsert per chunk.
async fn upsert_reputations<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    rows: &[&ReputationRow],
) -> Result<(), sqlx::Error> {
    for chunk in rows.chunks(BINDS_PER_UPSERT / 5) {
        let mut upsert = Builder::<D>::new(
            "INSERT INTO reputations (actor_id, version, rep, last_reward_id, updated_at) ",
        );
        upsert
            .push_values(chunk, |row, r| {
                row.bind(&r.actor_id)
                    .bind(r.version)
                    .bind(r.rep)
                    .bind(&r.last_reward_id)
                    .bind(r.updated_at);
            })
            .push(
                " ON CONFLICT (actor_id) DO UPDATE SET version = excluded.version, \
                 rep = excluded.rep, last_reward_id = excluded.last_reward_id, \
                 updated_at = excluded.updated_at",
            );
        upsert.build().execute(tx.conn()).await?;
    }
    Ok(())
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
    query(
        "INSERT INTO suites (suite, baseline, latest_request_id, latest_eval_id, \
         latest_gate_passed, latest_passed_minimum, latest_regression, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (suite) DO UPDATE SET \
         baseline = CASE WHEN excluded.baseline IS NULL THEN suites.baseline \
                         WHEN suites.baseline IS NULL THEN excluded.baseline \
                         WHEN excluded.baseline > suites.baseline THEN excluded.baseline \
                         ELSE suites.baseline END, \
         latest_request_id = excluded.latest_request_id, \
         latest_eval_id = excluded.latest_eval_id, \
         latest_gate_passed = excluded.latest_gate_passed, \
         latest_passed_minimum = excluded.latest_passed_minimum, \
         latest_regression = excluded.latest_regression, updated_at = excluded.updated_at",
    )
    .bind(&s.suite)
    .bind(s.passing_score)
    .bind(&s.request_id)
    .bind(&s.eval_id)
    .bind(s.gate_passed)
    .bind(s.passed_minimum)
    .bind(s.regression)
    .bind(at)
    .execute(tx.conn())
    .await?;
    Ok(())
}

/// Objects are content-addressed: the same bytes stored twice are one row.
async fn insert_objects<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    objects: &[&ObjectRow],
) -> Result<(), sqlx::Error> {
    for chunk in objects.chunks(ROWS_PER_INSERT) {
        let mut insert = Builder::<D>::new(
            "INSERT INTO objects (content_id, object_type, object_id, schema_version, body, \
             created_at) ",
        );
        insert
            .push_values(chunk, |row, o| {
                row.bind(&o.content_id)
                    .bind(&o.object_type)
                    .bind(&o.object_id)
                    .bind(&o.schema_version)
                    .bind(&o.body)
                    .bind(o.created_at);
            })
            .push(" ON CONFLICT (content_id) DO NOTHING");
        insert.build().execute(tx.conn()).await?;
    }
    Ok(())
}

async fn insert_events<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    events: &[&EventRow],
) -> Result<(), sqlx::Error> {
    for chunk in events.chunks(ROWS_PER_INSERT) {
        let mut insert = Builder::<D>::new(
            "INSERT INTO request_events (request_id, seq, event_type, prev_state, next_state, \
             meta, ts, prev_hash, hash) ",
        );
        insert.push_values(chunk, |row, e| {
            row.bind(&e.request_id)
                .bind(e.seq)
                .bind(&e.event_type)
                .bind(&e.prev_state)
                .bind(&e.next_state)
                .bind(&e.meta)
                .bind(&e.ts)
                .bind(&e.prev_hash)
                .bind(&e.hash);
        });
        insert.build().execute(tx.conn()).await?;
    }
    Ok(())
}

async fn insert_votes<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    votes: &[&VoteRow],
) -> Result<(), sqlx::Error> {
    for chunk in votes.chunks(ROWS_PER_INSERT) {
        let mut insert = Builder::<D>::new(
            "INSERT INTO votes (vote_id, target_id, gold, seq, evaluator_id, eval_object, suite, \
             score, gate_passed, regression, suppressed, reason_codes, gold_matched, voted_at) ",
        );
        insert.push_values(chunk, |row, v| {
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
        });
        insert.build().execute(tx.conn()).await?;
    }
    Ok(())
}
