//! `noema request …`, `noema approvals` and `noema release check`: the orchestrator from
//! the command line. Objects are JSON files; answers are JSON on stdout. Approvals are
//! signed here with the approver's key file (from `noema keygen`), never sent.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use noema_client::orchestrator::object;
use noema_client::pb::common::PageRequest;
use noema_client::pb::orchestrator as pb;
use serde_json::{Value, json};

use super::connect::ClientFlags;
use super::ledger::read_key;
use super::{CommandError, say_json};

#[derive(Debug, Subcommand)]
pub enum RequestCommand {
    /// Create a request from a Plan (JSON file): RECEIVED → PLANNED.
    Plan {
        plan: PathBuf,
        #[command(flatten)]
        client: ClientFlags,
    },
    /// Assess a request's plan under the policy in force.
    Risk {
        request_id: String,
        #[command(flatten)]
        client: ClientFlags,
    },
    /// Approve (or reject) a request, signing the Approval with the approver's key. The
    /// key must be the one registered to the approver in identity.
    Approve {
        request_id: String,
        /// Ed25519 seed file of the approver (`noema keygen --out`).
        #[arg(long, value_name = "FILE")]
        key_file: PathBuf,
        /// An Approval (JSON file); or build one from the flags below.
        #[arg(long, value_name = "FILE")]
        approval: Option<PathBuf>,
        #[arg(long, value_name = "ID")]
        approver: Option<String>,
        /// approve or reject.
        #[arg(long, default_value = "approve")]
        decision: String,
        #[arg(long, default_value = "")]
        reason: String,
        /// Scopes the approval covers (comma-separated): every scope the plan's steps declare.
        #[arg(long, value_delimiter = ',')]
        scope: Vec<String>,
        #[command(flatten)]
        client: ClientFlags,
    },
    /// Execute a request: its ExecTrace, in state TRACED.
    Execute {
        request_id: String,
        #[command(flatten)]
        client: ClientFlags,
    },
    /// Record an EvalResult (JSON file) for a request.
    Evaluate {
        request_id: String,
        eval_result: PathBuf,
        #[arg(long)]
        evaluator: String,
        #[command(flatten)]
        client: ClientFlags,
    },
    /// Compute the actor's reward for an evaluated request.
    Reward {
        request_id: String,
        #[command(flatten)]
        client: ClientFlags,
    },
    /// A request: state, objects and events.
    Show {
        request_id: String,
        /// Rebuild it from its events and compare with the live state.
        #[arg(long)]
        from_events: bool,
        #[command(flatten)]
        client: ClientFlags,
    },
    /// Rebuild requests from their events and compare with the live state; exits 1 on any
    /// difference. One request, or `--all` of them.
    Replay {
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        request_id: Option<String>,
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        client: ClientFlags,
    },
}

#[derive(Debug, Args)]
pub struct ApprovalsArgs {
    /// Requests to list.
    #[arg(long, default_value_t = 50)]
    pub limit: u32,
    #[command(flatten)]
    pub client: ClientFlags,
}

#[derive(Debug, Subcommand)]
pub enum ReleaseCommand {
    /// The seed's seven release blockers; exits 1 naming each failing item.
    Check(ClientFlags),
}

fn read_json(path: &Path) -> Result<Value, CommandError> {
    let text = std::fs::read_to_string(path).map_err(|source| CommandError::File {
        path: path.display().to_string(),
        source,
    })?;
    serde_json::from_str(&text)
        .map_err(|e| CommandError::Usage(format!("{}: not JSON: {e}", path.display())))
}

fn now_rfc3339() -> String {
    noema_core::time::rfc3339(time::OffsetDateTime::now_utc())
}

/// The JSON the REST routes answer, for a state-changing call.
fn state_reply(
    request_id: &str,
    state: &str,
    key: &str,
    bytes: &[u8],
) -> Result<Value, CommandError> {
    Ok(json!({"request_id": request_id, "state": state, key: object(bytes)?}))
}

pub async fn request(command: &RequestCommand) -> Result<(), CommandError> {
    match command {
        RequestCommand::Plan { plan, client } => {
            let plan = read_json(plan)?;
            let r = client.connect().await?.plan(&plan).await?;
            say_json(&state_reply(&r.request_id, &r.state, "plan", &r.plan)?);
        }
        RequestCommand::Risk { request_id, client } => {
            let r = client.connect().await?.risk(request_id).await?;
            say_json(&state_reply(
                &r.request_id,
                &r.state,
                "risk_report",
                &r.risk_report,
            )?);
        }
        RequestCommand::Approve {
            request_id,
            key_file,
            approval,
            approver,
            decision,
            reason,
            scope,
            client,
        } => {
            let key = read_key(key_file)?;
            let approval = match (approval, approver) {
                (Some(path), _) => read_json(path)?,
                (None, Some(approver)) => json!({
                    "schema_version": "0.1",
                    "id": format!("approval-{}", uuid::Uuid::new_v4().simple()),
                    "ts": now_rfc3339(),
                    "source": approver,
                    "decision": decision,
                    "approver": approver,
                    "reason": reason,
                    "scope": scope,
                }),
                (None, None) => {
                    return Err(CommandError::Usage(
                        "give --approval FILE or --approver ID".into(),
                    ));
                }
            };
            let r = client
                .connect()
                .await?
                .approve(&key, &approval, request_id)
                .await?;
            let mut reply = state_reply(&r.request_id, &r.state, "approval", &r.approval)?;
            reply["valid_approvers"] = json!(r.valid_approvers);
            reply["approvals_required"] = json!(r.approvals_required);
            say_json(&reply);
        }
        RequestCommand::Execute { request_id, client } => {
            let r = client.connect().await?.execute(request_id).await?;
            say_json(&state_reply(
                &r.request_id,
                &r.state,
                "exec_trace",
                &r.exec_trace,
            )?);
        }
        RequestCommand::Evaluate {
            request_id,
            eval_result,
            evaluator,
            client,
        } => {
            let eval = read_json(eval_result)?;
            let r = client
                .connect()
                .await?
                .evaluate(request_id, evaluator, &eval)
                .await?;
            let mut reply = state_reply(&r.request_id, &r.state, "eval_result", &r.eval_result)?;
            if let Some(gate) = r.gate {
                reply["gate"] = json!({"gate_passed": gate.gate_passed, "regression": gate.regression,
                                       "baseline": gate.baseline, "reasons": gate.reasons});
            }
            if let Some(s) = r.screening {
                reply["screening"] =
                    json!({"suppressed": s.suppressed, "reason_codes": s.reason_codes});
            }
            say_json(&reply);
        }
        RequestCommand::Reward { request_id, client } => {
            let r = client.connect().await?.update_reward(request_id).await?;
            say_json(&state_reply(
                &r.request_id,
                &r.state,
                "reward_update",
                &r.reward_update,
            )?);
        }
        RequestCommand::Show {
            request_id,
            from_events,
            client,
        } => {
            let detail = get(client, request_id, *from_events).await?;
            say_json(&detail_json(&detail)?);
        }
        RequestCommand::Replay {
            request_id,
            all,
            client,
        } => {
            if *all {
                let report = client
                    .connect()
                    .await?
                    .orchestrator()
                    .replay_all(pb::ReplayAllRequest {})
                    .await?
                    .into_inner();
                say_json(&json!({
                    "ok": report.ok, "requests": report.requests, "events": report.events,
                    "mismatched": report.mismatched,
                    "mismatches": report.mismatches.iter().map(|m| json!({
                        "request_id": m.request_id, "differences": m.differences})).collect::<Vec<_>>(),
                }));
                if !report.ok {
                    return Err(CommandError::Found(format!(
                        "{} request(s) do not replay to their live state",
                        report.mismatched
                    )));
                }
            } else if let Some(id) = request_id {
                let detail = get(client, id, true).await?;
                let replay = detail.replay.unwrap_or_default();
                say_json(
                    &json!({"request_id": detail.request_id, "state": detail.state,
                                 "events": detail.event_count, "matches": replay.matches,
                                 "differences": replay.differences}),
                );
                if !replay.matches {
                    return Err(CommandError::Found(format!(
                        "request {id} does not replay to its live state: {}",
                        replay.differences.join("; ")
                    )));
                }
            }
        }
    }
    Ok(())
}

async fn get(
    client: &ClientFlags,
    request_id: &str,
    from_events: bool,
) -> Result<pb::RequestDetail, CommandError> {
    Ok(client
        .connect()
        .await?
        .orchestrator()
        .get_request(pb::GetRequestRequest {
            request_id: request_id.to_owned(),
            from_events,
            limit: 0,
        })
        .await?
        .into_inner())
}

fn detail_json(d: &pb::RequestDetail) -> Result<Value, CommandError> {
    let objects = |list: &[Vec<u8>]| -> Result<Vec<Value>, CommandError> {
        list.iter().map(|b| Ok(object(b)?)).collect()
    };
    let events: Vec<Value> = d
        .events
        .iter()
        .map(|e| {
            json!({"seq": e.seq, "event_type": e.event_type, "entity_id": e.entity_id,
                   "prev_state": (!e.prev_state.is_empty()).then_some(&e.prev_state),
                   "next_state": e.next_state,
                   "meta": object(&e.meta).unwrap_or(Value::Null), "ts": e.ts,
                   "prev_hash": e.prev_hash, "hash": e.hash})
        })
        .collect();
    let mut out = json!({
        "request_id": d.request_id, "state": d.state, "actor": d.actor,
        "allowed_next": d.allowed_next, "plan": object(&d.plan)?,
        "risk_report": object(&d.risk_report)?, "approvals": objects(&d.approvals)?,
        "exec_trace": object(&d.exec_trace)?, "evaluations": objects(&d.evaluations)?,
        "evaluation_count": d.evaluation_count, "reward_update": object(&d.reward_update)?,
        "event_count": d.event_count, "head_hash": d.head_hash, "events": events,
    });
    if let Some(replay) = &d.replay {
        out["replay"] = json!({"matches": replay.matches, "differences": replay.differences});
    }
    Ok(out)
}

pub async fn approvals(args: &ApprovalsArgs) -> Result<(), CommandError> {
    let pending = args
        .client
        .connect()
        .await?
        .orchestrator()
        .list_pending_approvals(pb::ListPendingApprovalsRequest {
            page: Some(PageRequest {
                page_size: args.limit,
                page_token: String::new(),
            }),
        })
        .await?
        .into_inner()
        .pending;
    let mut list = Vec::with_capacity(pending.len());
    for p in pending {
        let since = p
            .waiting_since
            .as_ref()
            .map(noema_core::time::proto::rfc3339_seconds)
            .unwrap_or_default();
        list.push(json!({
            "request_id": p.request_id, "actor": p.actor, "risk_level": p.risk_level,
            "approvals_required": p.approvals_required, "valid_approvers": p.valid_approvers,
            "required_scope": p.required_scope, "waiting_since": since,
            "goal": object(&p.plan)?["goal"],
        }));
    }
    say_json(&Value::Array(list));
    Ok(())
}

pub async fn release(command: &ReleaseCommand) -> Result<(), CommandError> {
    let ReleaseCommand::Check(client) = command;
    let report = client
        .connect()
        .await?
        .orchestrator()
        .check_release(pb::CheckReleaseRequest {})
        .await?
        .into_inner();
    say_json(&json!({
        "ok": report.ok,
        "items": report.items.iter().map(|i| json!({"item": i.item, "title": i.title, "ok": i.ok,
                                                    "details": i.details})).collect::<Vec<_>>(),
    }));
    if report.ok {
        return Ok(());
    }
    let failing: Vec<String> = report
        .items
        .iter()
        .filter(|i| !i.ok)
        .map(|i| format!("{} ({})", i.item, i.details.join("; ")))
        .collect();
    Err(CommandError::Found(format!(
        "release blocked: {}",
        failing.join(", ")
    )))
}
