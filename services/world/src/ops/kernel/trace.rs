//! An attempt's tracer: numbers its source invocations, writes each `running` row durably
//! before the call (with its LLM call for a generation), queues what finished calls
//! recorded, and keeps the latest mark (status, kind) of every invocation for the attempt's
//! summary.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use uuid::Uuid;

use super::AttemptError;
use crate::domain::ids::HumanId;
use crate::domain::invocation::{AttemptSourceSummary, InvocationMark, SourceInvocation};
use crate::domain::llm_call::LlmCall;
use crate::domain::source::invoke::GenerationObserver;
use crate::ops::now;
use crate::store::{TraceWrite, TraceWriter};

pub(crate) struct Tracer {
    writer: TraceWriter,
    pub attempt_id: Uuid,
    pub world_slug: HumanId,
    pub attempted_turn: u64,
    seq: AtomicU32,
    marks: Mutex<BTreeMap<u32, InvocationMark>>,
}

impl Tracer {
    pub fn new(
        writer: TraceWriter,
        attempt_id: Uuid,
        world_slug: HumanId,
        attempted_turn: u64,
    ) -> Tracer {
        Tracer {
            writer,
            attempt_id,
            world_slug,
            attempted_turn,
            seq: AtomicU32::new(0),
            marks: Mutex::new(BTreeMap::new()),
        }
    }

    /// The next invocation_seq (1, 2, …).
    pub fn next_seq(&self) -> u32 {
        self.seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn remember(&self, invocation: &SourceInvocation) {
        if let Ok(mut marks) = self.marks.lock() {
            marks.insert(invocation.invocation_seq, InvocationMark::of(invocation));
        }
    }

    /// Writes a `running` invocation durably; returns it once it is committed.
    pub async fn start(
        &self,
        invocation: SourceInvocation,
    ) -> Result<SourceInvocation, AttemptError> {
        self.remember(&invocation);
        let shared = Arc::new(invocation);
        self.writer
            .write_now(vec![TraceWrite::StartInvocation(Arc::clone(&shared))])
            .await?;
        Ok(unshare(shared))
    }

    /// Writes a generation's `running` invocation and LLM call durably, together; returns
    /// them once they are committed.
    pub async fn start_generation(
        &self,
        invocation: SourceInvocation,
        call: LlmCall,
    ) -> Result<(SourceInvocation, LlmCall), AttemptError> {
        self.remember(&invocation);
        let (invocation, call) = (Arc::new(invocation), Arc::new(call));
        self.writer
            .write_now(vec![TraceWrite::StartGeneration(
                Arc::clone(&invocation),
                Arc::clone(&call),
            )])
            .await?;
        Ok((unshare(invocation), unshare(call)))
    }

    /// Queues an invocation's final state.
    pub fn finish(&self, invocation: &SourceInvocation) {
        self.remember(invocation);
        self.writer
            .write_later(vec![TraceWrite::finish(invocation)]);
    }

    /// Queues an LLM call's current state (all but its request and its chunks).
    pub fn update_call(&self, call: &LlmCall) {
        self.writer.write_later(vec![TraceWrite::update_call(call)]);
    }

    /// An observer that records a generation's chunks as they stream in.
    pub fn chunk_recorder(&self, call: Arc<Mutex<LlmCall>>, llm_call_id: Uuid) -> ChunkRecorder {
        ChunkRecorder {
            call,
            llm_call_id,
            writer: self.writer.clone(),
        }
    }

    /// Makes everything queued durable.
    pub async fn flush(&self) -> Result<(), AttemptError> {
        self.writer.flush().await?;
        Ok(())
    }

    /// The attempt's summary fields, from every invocation so far.
    pub fn summary(&self) -> AttemptSourceSummary {
        let marks: Vec<InvocationMark> = self
            .marks
            .lock()
            .map(|marks| marks.values().copied().collect())
            .unwrap_or_default();
        AttemptSourceSummary::of_marks(marks)
    }
}

/// The value back from the writer, which has let go of it once its batch committed (a copy
/// only if it still holds it).
fn unshare<T: Clone>(shared: Arc<T>) -> T {
    Arc::try_unwrap(shared).unwrap_or_else(|still| (*still).clone())
}

/// Records each streamed piece on the LLM call and queues it for the store, so a running
/// call's text so far is visible (and survives a crash up to the last flush).
pub(crate) struct ChunkRecorder {
    call: Arc<Mutex<LlmCall>>,
    llm_call_id: Uuid,
    writer: TraceWriter,
}

#[async_trait]
impl GenerationObserver for ChunkRecorder {
    async fn chunk(&self, text: &str) {
        let chunk = self
            .call
            .lock()
            .ok()
            .and_then(|mut call| call.push_chunk(text, now()).ok().cloned());
        if let Some(chunk) = chunk {
            self.writer.write_later(vec![TraceWrite::AppendChunks(
                self.llm_call_id,
                vec![chunk],
            )]);
        }
    }
}
