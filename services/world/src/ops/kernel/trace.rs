//! An attempt's tracer: numbers its source invocations, writes each `running` row durably
//! before the call (with its LLM call for a generation), queues what finished calls
//! recorded, and keeps the latest state of every invocation for the attempt's summary.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use uuid::Uuid;

use super::AttemptError;
use crate::domain::ids::HumanId;
use crate::domain::invocation::{AttemptSourceSummary, SourceInvocation};
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
    invocations: Mutex<BTreeMap<u32, SourceInvocation>>,
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
            invocations: Mutex::new(BTreeMap::new()),
        }
    }

    /// The next invocation_seq (1, 2, …).
    pub fn next_seq(&self) -> u32 {
        self.seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn remember(&self, invocation: &SourceInvocation) {
        if let Ok(mut all) = self.invocations.lock() {
            all.insert(invocation.invocation_seq, invocation.clone());
        }
    }

    /// Writes a `running` invocation durably; returns once it is committed.
    pub async fn start(&self, invocation: &SourceInvocation) -> Result<(), AttemptError> {
        self.remember(invocation);
        self.writer
            .write_now(vec![TraceWrite::StartInvocation(Box::new(
                invocation.clone(),
            ))])
            .await?;
        Ok(())
    }

    /// Writes a generation's `running` invocation and LLM call durably, together.
    pub async fn start_generation(
        &self,
        invocation: &SourceInvocation,
        call: &LlmCall,
    ) -> Result<(), AttemptError> {
        self.remember(invocation);
        self.writer
            .write_now(vec![TraceWrite::StartGeneration(
                Box::new(invocation.clone()),
                Box::new(call.clone()),
            )])
            .await?;
        Ok(())
    }

    /// Queues an invocation's final state.
    pub fn finish(&self, invocation: &SourceInvocation) {
        self.remember(invocation);
        self.writer
            .write_later(vec![TraceWrite::FinishInvocation(Box::new(
                invocation.clone(),
            ))]);
    }

    /// Queues an LLM call's current state (all but its chunks).
    pub fn update_call(&self, call: &LlmCall) {
        self.writer
            .write_later(vec![TraceWrite::UpdateLlmCall(Box::new(call.clone()))]);
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
        let all: Vec<SourceInvocation> = self
            .invocations
            .lock()
            .map(|all| all.values().cloned().collect())
            .unwrap_or_default();
        AttemptSourceSummary::of(&all)
    }
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
