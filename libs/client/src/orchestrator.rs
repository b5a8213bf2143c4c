//! The orchestrator (Cognitive OS's governed runtime): plan → risk → (approve) → execute →
//! evaluate → reward, with the objects as JSON. Approvals are signed locally with the
//! approver's key, which never leaves the process.
//!
//! ```no_run
//! # async fn demo(noema: noema_client::Noema, plan: serde_json::Value) -> Result<(), noema_client::ClientError> {
//! let planned = noema.plan(&plan).await?;
//! let risked = noema.risk(&planned.request_id).await?;
//! if risked.state == "APPROVAL_PENDING" {
//!     noema.wait_for_approval(&planned.request_id, std::time::Duration::from_secs(1),
//!                             std::time::Duration::from_secs(600)).await?;
//! }
//! let executed = noema.execute(&planned.request_id).await?;
//! # let _ = executed; Ok(()) }
//! ```

use std::collections::BTreeSet;
use std::time::Duration;

use noema_core::keys::SigningKeyPair;
use noema_proto::orchestrator::v1 as pb;
use serde_json::{Value, json};

use crate::{ClientError, Noema};

/// The bytes an approver signs: RFC 8785 JSON of `{"approval": …, "request_id": "…"}`.
pub fn approval_signing_bytes(approval: &Value, request_id: &str) -> Result<Vec<u8>, ClientError> {
    noema_core::jcs::canonicalize(&json!({"approval": approval, "request_id": request_id}))
        .map_err(|e| ClientError::Invalid(format!("the approval cannot be canonicalized: {e}")))
}

/// An `Approve` request for `approval` on `request_id`, signed with `key`.
pub fn signed_approval(
    key: &SigningKeyPair,
    approval: &Value,
    request_id: &str,
) -> Result<pb::ApproveRequest, ClientError> {
    let bytes = approval_signing_bytes(approval, request_id)?;
    Ok(pb::ApproveRequest {
        request_id: request_id.to_owned(),
        approval: serde_json::to_vec(approval)
            .map_err(|e| ClientError::Invalid(format!("the approval is not JSON: {e}")))?,
        signature: key.sign(&bytes).to_base64(),
        public_key: key.public_key().to_base64(),
    })
}

/// A JSON object from the bytes of a reply (an empty field is `null`).
pub fn object(bytes: &[u8]) -> Result<Value, ClientError> {
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(bytes).map_err(|e| {
        ClientError::Invalid(format!("the server sent an object that is not JSON: {e}"))
    })
}

fn json_bytes(value: &Value) -> Result<Vec<u8>, ClientError> {
    serde_json::to_vec(value).map_err(|e| ClientError::Invalid(format!("not JSON: {e}")))
}

impl Noema {
    /// Creates a request from a Plan (`POST /plan`).
    pub async fn plan(&self, plan: &Value) -> Result<pb::PlanResponse, ClientError> {
        let request = pb::PlanRequest {
            plan: json_bytes(plan)?,
        };
        Ok(self.orchestrator().plan(request).await?.into_inner())
    }

    /// Has the plan assessed (`POST /risk`).
    pub async fn risk(&self, request_id: &str) -> Result<pb::RiskResponse, ClientError> {
        let request = pb::RiskRequest {
            request_id: request_id.to_owned(),
        };
        Ok(self.orchestrator().risk(request).await?.into_inner())
    }

    /// Records an approval signed locally with `key` (`POST /approve`).
    pub async fn approve(
        &self,
        key: &SigningKeyPair,
        approval: &Value,
        request_id: &str,
    ) -> Result<pb::ApproveResponse, ClientError> {
        let request = signed_approval(key, approval, request_id)?;
        Ok(self.orchestrator().approve(request).await?.into_inner())
    }

    /// Executes the request (`POST /execute`); the reply is TRACED with its ExecTrace.
    pub async fn execute(&self, request_id: &str) -> Result<pb::ExecuteResponse, ClientError> {
        let request = pb::ExecuteRequest {
            request_id: request_id.to_owned(),
        };
        Ok(self.orchestrator().execute(request).await?.into_inner())
    }

    /// Records an EvalResult by `evaluator_id` (`POST /evaluate`).
    pub async fn evaluate(
        &self,
        request_id: &str,
        evaluator_id: &str,
        eval_result: &Value,
    ) -> Result<pb::EvaluateResponse, ClientError> {
        let request = pb::EvaluateRequest {
            request_id: request_id.to_owned(),
            evaluator_id: evaluator_id.to_owned(),
            eval_result: json_bytes(eval_result)?,
        };
        Ok(self.orchestrator().evaluate(request).await?.into_inner())
    }

    /// Computes the actor's reward (`POST /reward/update`).
    pub async fn update_reward(
        &self,
        request_id: &str,
    ) -> Result<pb::UpdateRewardResponse, ClientError> {
        let request = pb::UpdateRewardRequest {
            request_id: request_id.to_owned(),
        };
        Ok(self
            .orchestrator()
            .update_reward(request)
            .await?
            .into_inner())
    }

    /// A request with its objects and first events (`GET /requests/{id}`).
    pub async fn request(&self, request_id: &str) -> Result<pb::RequestDetail, ClientError> {
        let request = pb::GetRequestRequest {
            request_id: request_id.to_owned(),
            from_events: false,
            limit: 0,
        };
        Ok(self.orchestrator().get_request(request).await?.into_inner())
    }

    /// Polls the request every `every` until its approvals are in: `Ok(true)` when as many
    /// distinct approvers as its risk report requires have approved, `Ok(false)` when it
    /// was rejected (BLOCKED) or `patience` ran out. One call per interval, never a burst.
    /// Execution checks the approvals again (they may expire meanwhile).
    pub async fn wait_for_approval(
        &self,
        request_id: &str,
        every: Duration,
        patience: Duration,
    ) -> Result<bool, ClientError> {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            let detail = self.request(request_id).await?;
            match detail.state.as_str() {
                "APPROVAL_PENDING" | "RISKED" => {
                    let report = object(&detail.risk_report)?;
                    let required = report["approvals_required"].as_u64().unwrap_or(0);
                    let mut approvers = BTreeSet::new();
                    for approval in &detail.approvals {
                        let approval = object(approval)?;
                        if approval["decision"] == "approve"
                            && let Some(who) = approval["approver"].as_str()
                        {
                            approvers.insert(who.to_owned());
                        }
                    }
                    if approvers.len() as u64 >= required {
                        return Ok(true);
                    }
                }
                _ => return Ok(false),
            }
            if tokio::time::Instant::now() + every > deadline {
                return Ok(false);
            }
            tokio::time::sleep(every).await;
        }
    }
}
