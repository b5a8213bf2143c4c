//! Replay (seed §10): a request's events, checked link by link against their hash chain
//! and folded by the state machine, rebuild its state; the result is compared with the
//! live state. `ReplayAll` does it for every request in one pass over the history.

use noema_core::content_id::ContentId;
use serde_json::{Map, Value};

use super::Orchestrator;
use crate::domain::events::{CHAIN_START, Event, EventType, Replay, RequestView, StoredEvent};
use crate::domain::state::State;
use crate::error::OrchestratorError;
use crate::store::{EventRow, RequestRow};

/// Events read per page of the whole-store replay.
const PAGE: u32 = 10_000;
/// Mismatches reported in full.
const REPORTED: usize = 100;

/// How a live request compares with its replay.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReplayCheck {
    pub differences: Vec<String>,
}

impl ReplayCheck {
    pub fn matches(&self) -> bool {
        self.differences.is_empty()
    }
}

/// The whole store replayed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReplayReport {
    pub requests: u64,
    pub events: u64,
    pub mismatched: u64,
    /// The first [`REPORTED`]: request id and differences.
    pub mismatches: Vec<(String, Vec<String>)>,
}

/// The event of a stored row (its meta read; its chain checked apart, from the text).
fn event_of(row: &EventRow) -> Result<Event, String> {
    let event_type = EventType::parse(&row.event_type)
        .ok_or_else(|| format!("event {} has an unknown type {:?}", row.seq, row.event_type))?;
    let state = |text: &str| {
        State::parse(text).ok_or_else(|| format!("event {} has an unknown state {text:?}", row.seq))
    };
    let meta: Map<String, Value> = serde_json::from_str(&row.meta)
        .map_err(|e| format!("event {} has unreadable meta: {e}", row.seq))?;
    Ok(Event {
        event_type,
        entity_id: row.request_id.clone(),
        prev_state: row.prev_state.as_deref().map(state).transpose()?,
        next_state: state(&row.next_state)?,
        meta,
    })
}

/// Folds one request's events, in order, checking their chain as it goes.
#[derive(Debug, Default)]
pub(super) struct Fold {
    replay: Replay,
    last: (u64, String),
    /// The hashed bytes of the event being checked (one buffer for all).
    scratch: String,
    started: bool,
    broken: Option<String>,
    /// What the events say beyond the view: the report's level, the trace's id and status.
    pub risk_level: Option<String>,
    pub trace_id: Option<String>,
    pub trace_status: Option<String>,
}

impl Fold {
    pub fn new() -> Fold {
        Fold {
            last: (0, CHAIN_START.to_owned()),
            ..Fold::default()
        }
    }

    pub fn push(&mut self, row: &EventRow) {
        if self.broken.is_some() {
            return;
        }
        let seq = u64::try_from(row.seq).unwrap_or_default();
        let stored = StoredEvent {
            entity_id: &row.request_id,
            event_type: &row.event_type,
            meta: &row.meta,
            next_state: &row.next_state,
            prev_hash: &row.prev_hash,
            prev_state: row.prev_state.as_deref(),
            seq,
            ts: &row.ts,
            hash: &row.hash,
        };
        if let Err(e) = stored.verify_after(self.last.0, &self.last.1, &mut self.scratch) {
            self.broken = Some(format!("hash chain: {e}"));
            return;
        }
        self.last.0 = seq;
        self.last.1.clone_from(&row.hash);
        let event = match event_of(row) {
            Ok(event) => event,
            Err(e) => {
                self.broken = Some(e);
                return;
            }
        };
        self.started = true;
        let text = |key: &str| {
            event
                .meta
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        match event.event_type {
            EventType::Risked => self.risk_level = text("risk_level"),
            EventType::Traced => {
                self.trace_id = text("trace_id");
                self.trace_status = text("status");
            }
            _ => {}
        }
        if let Err(e) = self.replay.apply(&event) {
            self.broken = Some(format!("state machine: {e}"));
        }
    }

    /// The rebuilt view, or why the history does not replay.
    pub fn view(&self) -> Result<&RequestView, String> {
        if let Some(broken) = &self.broken {
            return Err(broken.clone());
        }
        self.replay.view().ok_or_else(|| "no events".to_owned())
    }

    /// The last event's hash.
    pub fn head(&self) -> &str {
        &self.last.1
    }

    /// Every difference between the live row and the replay.
    pub fn compare(&self, row: &RequestRow) -> Vec<String> {
        let view = match self.view() {
            Ok(view) => view,
            Err(e) => return vec![e],
        };
        let mut out = Vec::new();
        let mut differ = |what: &str, live: String, replayed: String| {
            if live != replayed {
                out.push(format!("{what}: live {live}, replayed {replayed}"));
            }
        };
        let id = |c: &Option<ContentId>| c.as_ref().map(ToString::to_string);
        let text = |o: &Option<String>| format!("{o:?}");
        differ("state", row.state.clone(), view.state.as_str().to_owned());
        differ("actor", row.actor.clone(), view.actor.clone());
        differ("events", row.version.to_string(), view.events.to_string());
        differ("head_hash", row.head_hash.clone(), self.head().to_owned());
        differ(
            "plan",
            text(&Some(row.plan_object.clone())),
            text(&id(&view.plan)),
        );
        differ(
            "risk_report",
            text(&row.risk_object),
            text(&id(&view.risk_report)),
        );
        differ(
            "exec_trace",
            text(&row.trace_object),
            text(&id(&view.trace)),
        );
        differ(
            "reward_update",
            text(&row.reward_object),
            text(&id(&view.reward)),
        );
        differ(
            "approvals",
            row.approval_count.to_string(),
            view.approvals.len().to_string(),
        );
        differ(
            "evaluations",
            row.evaluation_count.to_string(),
            view.evaluations.len().to_string(),
        );
        differ("risk_level", text(&row.risk_level), text(&self.risk_level));
        differ("trace_id", text(&row.trace_id), text(&self.trace_id));
        differ(
            "trace_status",
            text(&row.trace_status),
            text(&self.trace_status),
        );
        out
    }
}

impl Orchestrator {
    /// Replays one request from all its events.
    pub(super) async fn fold_request(&self, request_id: &str) -> Result<Fold, OrchestratorError> {
        let mut fold = Fold::new();
        let mut page = self.store.events(request_id, 0, PAGE).await?;
        while let Some(last) = page.last() {
            // The next page is read while this one is folded.
            let next = (page.len() == PAGE as usize).then(|| {
                let (store, id, after) = (self.store.clone(), request_id.to_owned(), last.seq);
                tokio::spawn(async move { store.events(&id, after, PAGE).await })
            });
            for row in &page {
                fold.push(row);
            }
            match next {
                Some(next) => page = joined(next.await)??,
                None => break,
            }
        }
        Ok(fold)
    }

    /// Replays every request and compares each with its live state: one pass over the
    /// events in (request, seq) order, merged with the requests in id order.
    pub async fn replay_all(&self) -> Result<ReplayReport, OrchestratorError> {
        let mut report = ReplayReport::default();
        let mut requests = RequestCursor::default();
        let mut fold: Option<(String, Fold)> = None;
        let mut page = self.store.all_events(("", 0), PAGE).await?;
        while let Some(last) = page.last() {
            // The next page is read while this one is folded.
            let next = (page.len() == PAGE as usize).then(|| {
                let (store, id, seq) = (self.store.clone(), last.request_id.clone(), last.seq);
                tokio::spawn(async move { store.all_events((&id, seq), PAGE).await })
            });
            for row in &page {
                if fold.as_ref().is_none_or(|(id, _)| *id != row.request_id) {
                    if let Some((id, done)) = fold.take() {
                        self.finish(&mut report, &mut requests, &id, Some(&done))
                            .await?;
                    }
                    fold = Some((row.request_id.clone(), Fold::new()));
                }
                if let Some((_, f)) = fold.as_mut() {
                    f.push(row);
                }
                report.events += 1;
            }
            match next {
                Some(next) => page = joined(next.await)??,
                None => break,
            }
        }
        if let Some((id, done)) = fold.take() {
            self.finish(&mut report, &mut requests, &id, Some(&done))
                .await?;
        }
        // Live requests past the last one with events have none.
        while let Some(row) = requests.next(&self.store).await? {
            note(&mut report, &row.request_id, vec!["no events".into()]);
            report.requests += 1;
        }
        Ok(report)
    }

    /// Compares the request `id` (replayed as `fold`) with its row, noting any live
    /// request before it that has no events.
    async fn finish(
        &self,
        report: &mut ReplayReport,
        requests: &mut RequestCursor,
        id: &str,
        fold: Option<&Fold>,
    ) -> Result<(), OrchestratorError> {
        loop {
            match requests.peek(&self.store).await? {
                Some(row) if row.request_id.as_str() < id => {
                    let row = requests.take();
                    if let Some(row) = row {
                        note(report, &row.request_id, vec!["no events".into()]);
                        report.requests += 1;
                    }
                }
                Some(row) if row.request_id == id => {
                    let differences = fold.map(|f| f.compare(row)).unwrap_or_default();
                    let row_id = row.request_id.clone();
                    requests.take();
                    note(report, &row_id, differences);
                    report.requests += 1;
                    return Ok(());
                }
                _ => {
                    note(report, id, vec!["events without a live request".into()]);
                    report.requests += 1;
                    return Ok(());
                }
            }
        }
    }
}

/// A page read by a task of its own: the task's failure is an internal error.
fn joined<T>(result: Result<T, tokio::task::JoinError>) -> Result<T, OrchestratorError> {
    result.map_err(|e| OrchestratorError::Corrupt(format!("a replay read stopped: {e}")))
}

fn note(report: &mut ReplayReport, id: &str, differences: Vec<String>) {
    if differences.is_empty() {
        return;
    }
    report.mismatched += 1;
    if report.mismatches.len() < REPORTED {
        report.mismatches.push((id.to_owned(), differences));
    }
}

/// The live requests in id order, a page at a time.
#[derive(Default)]
struct RequestCursor {
    buffered: std::collections::VecDeque<RequestRow>,
    after: String,
    done: bool,
}

impl RequestCursor {
    async fn fill(
        &mut self,
        store: &crate::store::OrchestratorStore,
    ) -> Result<(), OrchestratorError> {
        if self.buffered.is_empty() && !self.done {
            let page = store.list_requests(None, &self.after, PAGE).await?;
            if let Some(last) = page.last() {
                self.after = last.request_id.clone();
            }
            self.done = page.len() < PAGE as usize;
            self.buffered.extend(page);
        }
        Ok(())
    }

    async fn peek(
        &mut self,
        store: &crate::store::OrchestratorStore,
    ) -> Result<Option<&RequestRow>, OrchestratorError> {
        self.fill(store).await?;
        Ok(self.buffered.front())
    }

    fn take(&mut self) -> Option<RequestRow> {
        self.buffered.pop_front()
    }

    async fn next(
        &mut self,
        store: &crate::store::OrchestratorStore,
    ) -> Result<Option<RequestRow>, OrchestratorError> {
        self.fill(store).await?;
        Ok(self.take())
    }
}
