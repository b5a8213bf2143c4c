//! A governed agent on the Rust SDK: it plans a step, has it assessed, waits for a human's
//! approval when the policy asks for one, and executes, printing what happened. It never
//! executes a plan the policy blocks, and it polls politely while it waits.
//!
//! Usage: governed_agent <grpc-endpoint> <token> <agent-id> <tool> <scope>
//!
//! Prints `planned <request-id>` as soon as the request exists (so an approver can find
//! it, e.g. with `noema approvals`), then `executed <trace status>`.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use noema_client::orchestrator::object;
use noema_client::{ClientError, Noema};
use serde_json::json;

fn say(line: &str) {
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

async fn act(noema: &Noema, agent: &str, tool: &str, scope: &str) -> Result<String, ClientError> {
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let plan = json!({
        "schema_version": "0.1",
        "id": format!("plan-{agent}-{}", time::OffsetDateTime::now_utc().unix_timestamp_nanos()),
        "ts": now,
        "source": agent,
        "goal": "tell the team the nightly report is ready",
        "steps": [{
            "step_id": "notify",
            "action": "post the report link to the team's channel",
            "tool": tool,
            "expected_output": "the channel accepted the message",
            "scope": [scope],
            "args": {"text": format!("{agent}: the nightly report is ready")},
        }],
        "assumptions": ["the channel is up"],
        "rollback_plan": "post a correction if the message was wrong",
    });
    let planned = noema.plan(&plan).await?;
    let id = planned.request_id;
    say(&format!("planned {id}"));
    let risked = noema.risk(&id).await?;
    match risked.state.as_str() {
        "BLOCKED" => {
            let report = object(&risked.risk_report)?;
            return Err(ClientError::Invalid(format!(
                "the policy blocks the plan: {}",
                report["reasons"]
            )));
        }
        "APPROVAL_PENDING" => {
            say(&format!("waiting for approval of {id}"));
            let approved = noema
                .wait_for_approval(&id, Duration::from_millis(200), Duration::from_secs(120))
                .await?;
            if !approved {
                return Err(ClientError::Invalid(format!(
                    "request {id} was not approved"
                )));
            }
        }
        _ => {}
    }
    let executed = noema.execute(&id).await?;
    let trace = object(&executed.exec_trace)?;
    Ok(trace["status"].as_str().unwrap_or("unknown").to_owned())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, endpoint, token, agent, tool, scope] = args.as_slice() else {
        let _ = writeln!(
            std::io::stderr(),
            "usage: governed_agent <grpc-endpoint> <token> <agent-id> <tool> <scope>"
        );
        return ExitCode::from(2);
    };
    let result = match Noema::connect(endpoint, token).await {
        Ok(noema) => act(&noema, agent, tool, scope).await,
        Err(err) => Err(err),
    };
    match result {
        Ok(status) => {
            say(&format!("executed {status}"));
            ExitCode::SUCCESS
        }
        Err(err) => {
            let _ = writeln!(std::io::stderr(), "governed_agent: {err}");
            ExitCode::FAILURE
        }
    }
}
