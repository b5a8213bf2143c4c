//! Group commit of the packed store's writes: the puts that arrive while a pack is being
//! written wait together and go out as the next pack (one S3 PUT, one index statement).
//! Nothing waits on purpose: a lone put is a pack of one, written at once.

use std::collections::HashSet;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::sync::{mpsc, oneshot};

use super::super::{ObjectError, ObjectStore, PutOutcome};
use super::Shared;
use super::index::{Entry, HeldConnection};

/// Most objects in one pack.
pub(super) const MAX_OBJECTS_PER_PACK: usize = 256;
/// A pack is closed before an object would take it past this size (a bigger object is a
/// pack of its own).
const MAX_PACK_BYTES: usize = 8 * 1024 * 1024;
/// Puts waiting for a pack before callers wait to queue.
const QUEUE: usize = 4096;

/// One put waiting for its pack.
pub(super) struct Pending {
    pub key: String,
    pub body: Bytes,
    pub content_type: String,
    /// `put_if_absent` (keep what is there) rather than `put` (replace it).
    pub if_absent: bool,
    pub reply: oneshot::Sender<Result<PutOutcome, ObjectError>>,
}

pub(super) fn queue() -> (mpsc::Sender<Pending>, mpsc::Receiver<Pending>) {
    mpsc::channel(QUEUE)
}

/// Runs until every sender is gone: takes the queued puts, a pack's worth at a time, and
/// writes them, one pack at a time: while one is written, the next fills up. Packs written
/// side by side would overlap their round trips but be smaller, each with its own S3
/// request and index statement: in the ledger's split bench at 32 clients, 2 at a time cost
/// a quarter more CPU per put than 1, and 4 half as much more, for less throughput.
pub(super) async fn run(mut queue: mpsc::Receiver<Pending>, shared: Arc<Shared>) {
    let mut carried: Option<Pending> = None;
    let mut held = HeldConnection::default();
    loop {
        let first = match carried.take() {
            Some(pending) => pending,
            None => match queue.recv().await {
                Some(pending) => pending,
                None => return,
            },
        };
        let mut bytes = first.body.len();
        let mut keys = HashSet::from([first.key.clone()]);
        let mut batch = vec![first];
        while batch.len() < MAX_OBJECTS_PER_PACK {
            let Ok(next) = queue.try_recv() else { break };
            // A key twice in one pack would make its outcome depend on row order: the
            // second write goes in the next pack, after the first has landed.
            if bytes.saturating_add(next.body.len()) > MAX_PACK_BYTES || keys.contains(&next.key) {
                carried = Some(next);
                break;
            }
            bytes += next.body.len();
            keys.insert(next.key.clone());
            batch.push(next);
        }
        write_pack(&shared, &mut held, batch, bytes).await;
    }
}

/// Writes `batch` as one pack, records it, and answers every put in it.
async fn write_pack(shared: &Shared, held: &mut HeldConnection, batch: Vec<Pending>, bytes: usize) {
    let mut body = BytesMut::with_capacity(bytes);
    let mut if_absent = Vec::new();
    let mut replacing = Vec::new();
    for pending in &batch {
        let entry = Entry {
            key: pending.key.clone(),
            offset: i64::try_from(body.len()).unwrap_or(i64::MAX),
            size: i64::try_from(pending.body.len()).unwrap_or(i64::MAX),
            content_type: (!pending.content_type.is_empty()).then(|| pending.content_type.clone()),
        };
        body.extend_from_slice(&pending.body);
        if pending.if_absent {
            if_absent.push(entry);
        } else {
            replacing.push(entry);
        }
    }
    let pack = super::new_pack_name();
    let stored_at_ms = super::now_ms();
    let outcome = match shared.s3.put(&pack, body.freeze(), "").await {
        Ok(()) => {
            shared
                .index
                .record(held, &pack, stored_at_ms, &if_absent, &replacing)
                .await
        }
        Err(err) => Err(err),
    };
    let (created, displaced) = match outcome {
        Ok(recorded) => recorded,
        Err(err) => {
            // The pack (if it was written) is left as it is: an index transaction whose
            // answer was lost may have committed, and its rows must keep their bytes. A pack
            // no row names is never read.
            tracing::warn!(%pack, objects = batch.len(), error = %noema_core::ErrorChain(&err), "a pack could not be written");
            for pending in batch {
                let _ = pending.reply.send(Err(copy_error(&err, &pending.key)));
            }
            return;
        }
    };
    if created.is_empty() && replacing.is_empty() {
        // Every key was taken already: nothing points into this pack.
        shared.drop_if_unreferenced(&pack).await;
    }
    for pending in batch {
        let outcome = if !pending.if_absent || created.contains(&pending.key) {
            PutOutcome::Created
        } else {
            PutOutcome::Exists
        };
        // A caller that gave up waiting is no reason to stop answering the others.
        let _ = pending.reply.send(Ok(outcome));
    }
    for old in displaced {
        shared.drop_if_unreferenced(&old).await;
    }
}

/// `err` for one of the puts of a failed pack: the same kind (retryable or not), naming its
/// key, with the pack's failure as its reason.
fn copy_error(err: &ObjectError, key: &str) -> ObjectError {
    let reason = noema_core::ErrorChain(err).to_string();
    if err.is_retryable() {
        ObjectError::unavailable("put", key, reason)
    } else {
        ObjectError::backend("put", key, reason)
    }
}
