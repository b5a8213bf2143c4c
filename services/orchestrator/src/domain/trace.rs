//! Execution traces (seed §3.4, §5.5): every execution emits one, refused ones included.
//!
//! A call's `args_hash` and `result_digest` are content ids of the JCS bytes of its
//! arguments and of its result (or error), so a trace proves what ran without holding
//! the data. The status follows the calls: all succeeded → `success`; a step failed and
//! the plan's rollback steps all ran and succeeded → `rolled_back`; a step failed with no
//! rollback steps, or a rollback step failed → `failed`; refused → `blocked`.

use noema_core::content_id::ContentId;
use serde_json::{Value, json};

use super::objects::{CallStatus, ExecTrace, SCHEMA_VERSION, Step, ToolCall, TraceStatus};

/// Content id of the JCS bytes of `value`. Values built from JSON are always
/// canonicalizable; the `null` fallback cannot occur for them.
pub fn digest(value: &Value) -> ContentId {
    ContentId::of_json(value).unwrap_or_else(|_| ContentId::of_bytes(b"null"))
}

/// `args_hash` of a step: its arguments, `{}` when it has none.
pub fn args_hash(step: &Step) -> ContentId {
    digest(&Value::Object(step.args.clone().unwrap_or_default()))
}

/// What identifies a trace and what it belongs to.
#[derive(Debug, Clone)]
pub struct TraceHeader {
    pub id: String,
    pub ts: String,
    pub source: String,
    pub request_id: String,
    pub plan_id: String,
    pub risk_report_id: String,
}

/// The trace of a refused execution.
pub fn blocked(header: TraceHeader, reasons: Vec<String>) -> ExecTrace {
    ExecTrace {
        schema_version: SCHEMA_VERSION.to_owned(),
        id: header.id.clone(),
        ts: header.ts,
        source: header.source,
        trace_id: header.id,
        plan_id: header.plan_id,
        risk_report_id: header.risk_report_id,
        request_id: Some(header.request_id),
        approval_ids: None,
        blocked_reasons: Some(reasons),
        tool_calls: Vec::new(),
        artifacts: Vec::new(),
        status: TraceStatus::Blocked,
    }
}

/// Collects an execution's calls and decides its status.
#[derive(Debug, Clone)]
pub struct TraceBuilder {
    header: TraceHeader,
    approval_ids: Vec<String>,
    calls: Vec<ToolCall>,
    artifacts: Vec<Value>,
    step_failed: bool,
    rollback_ran: bool,
    rollback_failed: bool,
}

impl TraceBuilder {
    pub fn new(header: TraceHeader, approval_ids: Vec<String>) -> TraceBuilder {
        TraceBuilder {
            header,
            approval_ids,
            calls: Vec::new(),
            artifacts: Vec::new(),
            step_failed: false,
            rollback_ran: false,
            rollback_failed: false,
        }
    }

    /// Whether a step has failed, so the executor stops and turns to the rollback steps.
    pub fn step_failed(&self) -> bool {
        self.step_failed
    }

    /// Records one call. `result` is the tool's JSON result, or an error text that
    /// travels in the trace (already scrubbed of secrets by the runner).
    pub fn record(
        &mut self,
        step: &Step,
        rollback: bool,
        started_ts: String,
        ended_ts: String,
        result: Result<Value, String>,
    ) {
        let (status, digest_of, error) = match result {
            Ok(value) => (CallStatus::Success, value, None),
            Err(message) => (CallStatus::Failed, json!({"error": message}), Some(message)),
        };
        if rollback {
            self.rollback_ran = true;
            self.rollback_failed |= status == CallStatus::Failed;
        } else {
            self.step_failed |= status == CallStatus::Failed;
        }
        self.calls.push(ToolCall {
            tool: step.tool.clone(),
            args_hash: args_hash(step).into_string(),
            started_ts,
            ended_ts,
            result_digest: digest(&digest_of).into_string(),
            step_id: Some(step.step_id.clone()),
            rollback: Some(rollback),
            status: Some(status),
            error,
        });
    }

    /// Adds an artifact reference (e.g. the content id of a stored canonical object).
    pub fn artifact(&mut self, artifact: Value) {
        self.artifacts.push(artifact);
    }

    pub fn status(&self) -> TraceStatus {
        match (self.step_failed, self.rollback_ran, self.rollback_failed) {
            (false, _, _) => TraceStatus::Success,
            (true, true, false) => TraceStatus::RolledBack,
            (true, _, _) => TraceStatus::Failed,
        }
    }

    pub fn finish(self) -> ExecTrace {
        let status = self.status();
        let h = self.header;
        ExecTrace {
            schema_version: SCHEMA_VERSION.to_owned(),
            id: h.id.clone(),
            ts: h.ts,
            source: h.source,
            trace_id: h.id,
            plan_id: h.plan_id,
            risk_report_id: h.risk_report_id,
            request_id: Some(h.request_id),
            approval_ids: Some(self.approval_ids),
            blocked_reasons: None,
            tool_calls: self.calls,
            artifacts: self.artifacts,
            status,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use crate::domain::schema::{SchemaName, validate};

    fn header() -> TraceHeader {
        TraceHeader {
            id: "tr-1".into(),
            ts: "2026-02-14T10:00:02Z".into(),
            source: "orchestrator".into(),
            request_id: "req-1".into(),
            plan_id: "plan-1".into(),
            risk_report_id: "rr-1".into(),
        }
    }

    fn step(id: &str, args: Option<Value>) -> Step {
        Step {
            step_id: id.into(),
            action: String::new(),
            tool: "noema.noop".into(),
            expected_output: String::new(),
            scope: None,
            args: args.and_then(|a| a.as_object().cloned()),
        }
    }

    const T0: &str = "2026-02-14T10:00:02Z";
    const T1: &str = "2026-02-14T10:00:03Z";

    #[test]
    fn hashes_are_content_ids_of_the_jcs_bytes() {
        let s = step("s1", Some(json!({"b": 2, "a": 1})));
        assert_eq!(args_hash(&s), ContentId::of_bytes(br#"{"a":1,"b":2}"#));
        assert_eq!(args_hash(&step("s2", None)), ContentId::of_bytes(b"{}"));
    }

    #[test]
    fn status_follows_the_calls() {
        let ok = Ok(json!({"done": true}));
        let failed = || Err::<Value, _>("boom".to_owned());

        let mut b = TraceBuilder::new(header(), vec!["a1".into()]);
        b.record(&step("s1", None), false, T0.into(), T1.into(), ok.clone());
        assert_eq!(b.status(), TraceStatus::Success);
        let trace = b.finish();
        assert_eq!(
            trace.tool_calls[0].result_digest,
            digest(&json!({"done": true})).to_string()
        );
        assert_eq!(trace.approval_ids.as_deref(), Some(&["a1".to_owned()][..]));
        validate(
            SchemaName::ExecTrace,
            &serde_json::to_value(&trace).unwrap(),
        )
        .unwrap();

        let mut b = TraceBuilder::new(header(), vec![]);
        b.record(&step("s1", None), false, T0.into(), T1.into(), failed());
        assert!(b.step_failed());
        assert_eq!(b.status(), TraceStatus::Failed);
        b.record(&step("r1", None), true, T0.into(), T1.into(), ok.clone());
        assert_eq!(b.status(), TraceStatus::RolledBack);
        b.record(&step("r2", None), true, T0.into(), T1.into(), failed());
        assert_eq!(b.status(), TraceStatus::Failed);
        let trace = b.finish();
        assert_eq!(trace.tool_calls[0].error.as_deref(), Some("boom"));
        assert_eq!(trace.tool_calls[0].status, Some(CallStatus::Failed));
        assert_eq!(trace.tool_calls[1].rollback, Some(true));
        validate(
            SchemaName::ExecTrace,
            &serde_json::to_value(&trace).unwrap(),
        )
        .unwrap();

        let blocked = blocked(header(), vec!["no approval".into()]);
        assert_eq!(blocked.status, TraceStatus::Blocked);
        assert!(blocked.tool_calls.is_empty());
        validate(
            SchemaName::ExecTrace,
            &serde_json::to_value(&blocked).unwrap(),
        )
        .unwrap();
    }
}
