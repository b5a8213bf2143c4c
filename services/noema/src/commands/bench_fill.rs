//! `noema bench fill`: adds canonical objects to a data directory directly through the
//! ledger's store layer, for measuring `noema up` over many objects (through the API, ten
//! million puts would take hours here).
//!
//! Each object is what a put stores: a submission checked by the ledger's own validation,
//! its payload in the ledger's object store, its row and audit entry committed in groups by
//! the ledger store's batch write. Payloads are small JSON documents (`--payload-bytes`),
//! unique per run.

use std::time::Instant;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use noema_client::ledger::utc_seconds;
use noema_core::content_id::ContentId;
use noema_ledger::LedgerStore;
use noema_ledger::domain::canonical::{self, CanonicalSubmission};
use noema_ledger::store::Write;
use noema_runtime::config::ConfigLoader;
use noema_store::Database;
use serde_json::json;
use time::OffsetDateTime;

use super::bench::FillArgs;
use super::{CommandError, say_json};

/// Objects prepared, stored and committed per round.
const ROUND: usize = 4096;
/// Payload puts in flight at once (the pack store makes each group durable with one flush).
const PUTS_IN_FLIGHT: usize = 1024;
/// Rows per transaction (the group-commit writer's batch).
const ROWS_PER_COMMIT: usize = 256;

pub async fn fill(args: &FillArgs) -> Result<(), CommandError> {
    let registry = crate::registry::builtin().map_err(|e| CommandError::found("registry", e))?;
    let config = ConfigLoader::new(&registry)
        .set("server.data_dir", args.data_dir.display().to_string())
        .load()
        .map_err(|e| CommandError::found("configuration", e))?;
    let spec = registry
        .get("ledger")
        .ok_or_else(|| CommandError::found("registry", "no ledger service"))?;
    let db = Database::connect(&config.database_url(spec))
        .await
        .map_err(|e| CommandError::found("ledger database", e))?;
    db.migrate(spec.migrations)
        .await
        .map_err(|e| CommandError::found("ledger migrations", e))?;
    let url = config
        .object_store_url(spec)
        .ok_or_else(|| CommandError::found("ledger", "no object store configured"))?;
    let objects = noema_store::object::open(&url)
        .await
        .map_err(|e| CommandError::found("ledger object store", e))?;
    let store = LedgerStore::new(db);
    store
        .ensure_initialized()
        .await
        .map_err(|e| CommandError::found("ledger", e))?;

    let mut seed = [0u8; 8];
    getrandom::fill(&mut seed).map_err(|e| CommandError::found("random seed", e))?;
    let run = u64::from_le_bytes(seed);
    let started = Instant::now();
    let mut last_report = Instant::now();
    let mut done = 0u64;
    // Rows of one round are committed while the next round's payloads are stored.
    let mut rows: Option<Vec<Write>> = None;
    while done < args.objects || rows.is_some() {
        let round = usize::try_from(args.objects - done).map_or(ROUND, |left| left.min(ROUND));
        let (writes, payloads) = prepare(run, done, round, args.payload_bytes)?;
        // Payloads before rows, the order of a put.
        let store_payloads = async {
            futures::stream::iter(payloads)
                .map(|(path, body)| {
                    let objects = objects.clone();
                    async move { objects.put(&path, body, "application/json").await }
                })
                .buffer_unordered(PUTS_IN_FLIGHT)
                .try_collect::<Vec<()>>()
                .await
                .map_err(|e| CommandError::found("object store", e))
        };
        let commit_rows = async {
            for chunk in rows.take().unwrap_or_default().chunks(ROWS_PER_COMMIT) {
                for result in store.write_batch(chunk).await {
                    result.map_err(|e| CommandError::found("ledger rows", e))?;
                }
            }
            Ok::<_, CommandError>(())
        };
        let (stored, committed) = tokio::join!(store_payloads, commit_rows);
        stored?;
        committed?;
        rows = (!writes.is_empty()).then_some(writes);
        done += round as u64;
        if last_report.elapsed().as_secs() >= 10 {
            last_report = Instant::now();
            tracing::info!(done, seconds = started.elapsed().as_secs(), "filling");
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    say_json(&json!({
        "objects": done,
        "payload_bytes": args.payload_bytes,
        "seconds": seconds,
        "objects_per_sec": done as f64 / seconds,
    }));
    Ok(())
}

/// The rows and payloads of objects `first..first + count`.
#[allow(clippy::type_complexity)]
fn prepare(
    run: u64,
    first: u64,
    count: usize,
    payload_bytes: usize,
) -> Result<(Vec<Write>, Vec<(String, Bytes)>), CommandError> {
    let now = OffsetDateTime::now_utc();
    let mut writes = Vec::with_capacity(count);
    let mut payloads = Vec::with_capacity(count);
    for n in first..first + count as u64 {
        let mut payload = format!("{{\"fill\":{run},\"n\":{n},\"pad\":\"").into_bytes();
        payload.resize(payload_bytes.saturating_sub(2).max(payload.len()), b'x');
        payload.extend_from_slice(b"\"}");
        let id = ContentId::of_bytes(&payload).as_str().to_owned();
        let submission = CanonicalSubmission {
            schema_version: canonical::SCHEMA_VERSION.to_owned(),
            storage_path: canonical::expected_storage_path("document", now, &id),
            id,
            object_type: "document".into(),
            content_type: "application/json".into(),
            size_bytes: i64::try_from(payload.len()).unwrap_or(i64::MAX),
            created_at: utc_seconds(now),
            created_by: "bench:fill".into(),
            payload,
            metadata: None,
        };
        let (object, payload) =
            canonical::validate(submission, now).map_err(|e| CommandError::found("validate", e))?;
        payloads.push((object.storage_path.clone(), Bytes::from(payload)));
        writes.push(Write::Canonical {
            object,
            submitted_by: "bench:fill".into(),
        });
    }
    Ok((writes, payloads))
}
