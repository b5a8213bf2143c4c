//! Approvals (seed §3.3, §4 L2, §5.4; issue 18 item 5): what makes an approval count,
//! when it is recorded and again when the request executes.
//!
//! An approval is bound to one request by the approver's Ed25519 signature over the JCS
//! bytes of `{"approval": <Approval>, "request_id": "<id>"}` ([`signing_bytes`]); the
//! signature and public key travel as standard base64 of the raw 64 and 32 bytes. A
//! token alone cannot approve: identity must also say the key belongs to the approver
//! (an input here, asked by the service). Approvals expire `ttl_seconds` after their
//! `ts`, must cover every scope the plan's steps declare, and in dual mode come from two
//! distinct approvers. Every way an approval can fail has its own error, and each fails
//! closed: nothing is recorded and nothing executes.

use std::collections::BTreeSet;

use noema_core::jcs;
use noema_core::keys::{self, PublicKey, Signature};
use serde::Serialize;
use serde_json::json;
use time::{Duration, OffsetDateTime};

use super::objects::{Approval, Decision, Plan, RiskReport};
use super::policy::ApprovalRules;
use super::timestamp;

/// Why an approval does not count.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalError {
    #[error("request {request_id} does not wait for an approval")]
    NotRequired { request_id: String },
    #[error("public_key is not standard base64 of a 32-byte Ed25519 key: {0}")]
    MalformedPublicKey(String),
    #[error("signature is not standard base64 of a 64-byte Ed25519 signature: {0}")]
    MalformedSignature(String),
    #[error(
        "the signature does not verify over this request's approval bytes \
         (JCS of {{\"approval\": …, \"request_id\": \"{request_id}\"}})"
    )]
    BadSignature { request_id: String },
    #[error("the public key is not registered to approver {approver}")]
    KeyNotRegistered { approver: String },
    #[error("approval {approval_id} is already recorded (replay)")]
    Replayed { approval_id: String },
    #[error("approval ts {ts:?} is not an RFC 3339 date-time")]
    BadTimestamp { ts: String },
    #[error("approval ts {ts} lies in the future beyond the allowed clock skew")]
    FromTheFuture { ts: String },
    #[error("approval {approval_id} expired at {expired_at}")]
    Expired {
        approval_id: String,
        expired_at: String,
    },
    #[error("approver {approver} is the plan's own source; self-approval is not allowed")]
    SelfApproval { approver: String },
    #[error("approval scope does not cover step {step_id}: missing {}", .missing.join(", "))]
    ScopeNotCovered {
        step_id: String,
        missing: Vec<String>,
    },
    #[error(
        "approver {approver} has already approved this request; dual mode needs a distinct approver"
    )]
    SameApprover { approver: String },
    #[error("the request has no approval; it needs {required}")]
    Missing { required: u8 },
    #[error(
        "the request has {valid} valid approval(s) from distinct approvers; it needs {required}"
    )]
    NotEnoughApprovers { valid: u8, required: u8 },
    #[error("approver {approver} rejected the request")]
    Rejected { approver: String },
}

impl ApprovalError {
    /// A stable name for the failed check (`ErrorInfo` metadata, trace reasons).
    pub fn check(&self) -> &'static str {
        match self {
            ApprovalError::NotRequired { .. } => "not_required",
            ApprovalError::MalformedPublicKey(_) => "malformed_public_key",
            ApprovalError::MalformedSignature(_) => "malformed_signature",
            ApprovalError::BadSignature { .. } => "bad_signature",
            ApprovalError::KeyNotRegistered { .. } => "key_not_registered",
            ApprovalError::Replayed { .. } => "replayed",
            ApprovalError::BadTimestamp { .. } => "bad_timestamp",
            ApprovalError::FromTheFuture { .. } => "from_the_future",
            ApprovalError::Expired { .. } => "expired",
            ApprovalError::SelfApproval { .. } => "self_approval",
            ApprovalError::ScopeNotCovered { .. } => "scope_not_covered",
            ApprovalError::SameApprover { .. } => "same_approver",
            ApprovalError::Missing { .. } => "missing",
            ApprovalError::NotEnoughApprovers { .. } => "not_enough_approvers",
            ApprovalError::Rejected { .. } => "rejected",
        }
    }
}

/// The bytes an approver signs: RFC 8785 JSON of
/// `{"approval": <Approval>, "request_id": "<id>"}`.
pub fn signing_bytes(approval: &Approval, request_id: &str) -> Result<Vec<u8>, jcs::JcsError> {
    jcs::canonicalize(&json!({"approval": approval, "request_id": request_id}))
}

/// An approval as submitted to `POST /approve`.
#[derive(Debug, Clone, Copy)]
pub struct Submission<'a> {
    pub approval: &'a Approval,
    /// Standard base64 of the 64 raw signature bytes.
    pub signature: &'a str,
    /// Standard base64 of the 32 raw public key bytes.
    pub public_key: &'a str,
}

/// What the check needs to know about the request and the world.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub request_id: &'a str,
    pub plan: &'a Plan,
    pub report: &'a RiskReport,
    /// Approvals already recorded on this request, oldest first.
    pub recorded: &'a [Approval],
    /// Identity's answer: is the submitted key registered to `approval.approver`?
    pub key_registered_to_approver: bool,
    /// Whether the policy makes an approval optional at the report's level (L1's
    /// "optional single confirm"): such a request takes an approval without needing one.
    pub approval_optional: bool,
    pub rules: &'a ApprovalRules,
    pub now: OffsetDateTime,
}

/// What a valid approval does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// Recorded; the request stays APPROVAL_PENDING (or RISKED, where the approval was
    /// optional) until `execute`.
    Approved {
        /// Distinct approvers with a valid approval, this one included.
        valid_approvers: u8,
        required: u8,
    },
    /// Recorded; the request moves to BLOCKED.
    Rejected,
}

/// Checks a submitted approval before it is recorded.
pub fn check_submission(sub: Submission<'_>, ctx: Context<'_>) -> Result<Verdict, ApprovalError> {
    let approval = sub.approval;
    let awaited = ctx.report.requires_approval || ctx.approval_optional;
    if !awaited || ctx.report.forbidden {
        return Err(ApprovalError::NotRequired {
            request_id: ctx.request_id.to_owned(),
        });
    }
    let key = PublicKey::from_base64(sub.public_key)
        .map_err(|e| ApprovalError::MalformedPublicKey(e.to_string()))?;
    if key.is_weak() {
        return Err(ApprovalError::MalformedPublicKey(
            "the key is a weak (small-order) point".into(),
        ));
    }
    let signature = Signature::from_base64(sub.signature)
        .map_err(|e| ApprovalError::MalformedSignature(e.to_string()))?;
    let bad_signature = || ApprovalError::BadSignature {
        request_id: ctx.request_id.to_owned(),
    };
    let message = signing_bytes(approval, ctx.request_id).map_err(|_| bad_signature())?;
    if !keys::verify(&key, &message, &signature) {
        return Err(bad_signature());
    }
    if !ctx.key_registered_to_approver {
        return Err(ApprovalError::KeyNotRegistered {
            approver: approval.approver.clone(),
        });
    }
    if ctx.recorded.iter().any(|a| a.id == approval.id) {
        return Err(ApprovalError::Replayed {
            approval_id: approval.id.clone(),
        });
    }
    check_time(approval, ctx.rules, ctx.now)?;
    if approval.decision == Decision::Reject {
        return Ok(Verdict::Rejected);
    }
    if !ctx.rules.allow_self_approval && approval.approver == ctx.plan.source {
        return Err(ApprovalError::SelfApproval {
            approver: approval.approver.clone(),
        });
    }
    check_scope(approval, ctx.plan)?;
    let earlier = valid_approvers(ctx.plan, ctx.recorded, ctx.rules, ctx.now);
    if earlier.contains(approval.approver.as_str()) {
        return Err(ApprovalError::SameApprover {
            approver: approval.approver.clone(),
        });
    }
    Ok(Verdict::Approved {
        valid_approvers: u8::try_from(earlier.len() + 1).unwrap_or(u8::MAX),
        required: ctx.report.approvals_required,
    })
}

/// What an execution may go ahead with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    /// The approvals the execution relies on (empty when none is needed).
    pub approval_ids: Vec<String>,
}

/// Why an execution is refused (the request moves to BLOCKED with these reasons).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the plan is forbidden by the risk policy")]
    Forbidden { reasons: Vec<String> },
    #[error("execution refused: {0}")]
    Approval(#[from] ApprovalError),
}

impl Refusal {
    /// The reasons a blocked trace records.
    pub fn reasons(&self) -> Vec<String> {
        match self {
            Refusal::Forbidden { reasons } => reasons.clone(),
            Refusal::Approval(err) => vec![err.to_string()],
        }
    }
}

/// Decides at `execute` whether the request may run: not forbidden, and, when approval
/// is required, enough distinct approvers whose approvals are still valid and cover
/// every declared scope, with no rejection.
pub fn authorize_execution(
    plan: &Plan,
    report: &RiskReport,
    recorded: &[Approval],
    rules: &ApprovalRules,
    now: OffsetDateTime,
) -> Result<Authorization, Refusal> {
    if report.forbidden {
        return Err(Refusal::Forbidden {
            reasons: report.reasons.clone(),
        });
    }
    if !report.requires_approval {
        return Ok(Authorization {
            approval_ids: Vec::new(),
        });
    }
    if let Some(rejection) = recorded.iter().find(|a| a.decision == Decision::Reject) {
        return Err(ApprovalError::Rejected {
            approver: rejection.approver.clone(),
        }
        .into());
    }
    let required = report.approvals_required.max(1);
    let approving: Vec<&Approval> = recorded
        .iter()
        .filter(|a| a.decision == Decision::Approve)
        .collect();
    if approving.is_empty() {
        return Err(ApprovalError::Missing { required }.into());
    }
    let mut approvers = BTreeSet::new();
    let mut ids = Vec::new();
    let mut last_failure = None;
    for approval in approving {
        let check = check_time(approval, rules, now)
            .and_then(|()| check_scope(approval, plan))
            .and_then(|()| {
                if !rules.allow_self_approval && approval.approver == plan.source {
                    Err(ApprovalError::SelfApproval {
                        approver: approval.approver.clone(),
                    })
                } else {
                    Ok(())
                }
            });
        match check {
            Ok(()) => {
                if approvers.insert(approval.approver.as_str()) {
                    ids.push(approval.id.clone());
                }
            }
            Err(err) => last_failure = Some(err),
        }
    }
    let valid = u8::try_from(approvers.len()).unwrap_or(u8::MAX);
    if valid >= required {
        return Ok(Authorization { approval_ids: ids });
    }
    // Name the most telling failure: an expired or mis-scoped approval explains more
    // than a count.
    Err(match (valid, last_failure) {
        (0, Some(err)) => err,
        _ => ApprovalError::NotEnoughApprovers { valid, required },
    }
    .into())
}

/// Distinct approvers of recorded approvals that still count.
fn valid_approvers<'a>(
    plan: &Plan,
    recorded: &'a [Approval],
    rules: &ApprovalRules,
    now: OffsetDateTime,
) -> BTreeSet<&'a str> {
    recorded
        .iter()
        .filter(|a| a.decision == Decision::Approve)
        .filter(|a| check_time(a, rules, now).is_ok() && check_scope(a, plan).is_ok())
        .map(|a| a.approver.as_str())
        .collect()
}

/// Not in the future beyond the skew, not expired.
fn check_time(
    approval: &Approval,
    rules: &ApprovalRules,
    now: OffsetDateTime,
) -> Result<(), ApprovalError> {
    let at = timestamp::parse(&approval.ts).ok_or_else(|| ApprovalError::BadTimestamp {
        ts: approval.ts.clone(),
    })?;
    let skew = Duration::seconds(i64::try_from(rules.max_clock_skew_seconds).unwrap_or(i64::MAX));
    // Checked arithmetic: a timestamp near the end of the calendar must not panic.
    if now.checked_add(skew).is_none_or(|latest| at > latest) {
        return Err(ApprovalError::FromTheFuture {
            ts: approval.ts.clone(),
        });
    }
    let ttl = Duration::seconds(i64::try_from(rules.ttl_seconds).unwrap_or(i64::MAX));
    let Some(expires) = at.checked_add(ttl) else {
        return Err(ApprovalError::FromTheFuture {
            ts: approval.ts.clone(),
        });
    };
    if now >= expires {
        return Err(ApprovalError::Expired {
            approval_id: approval.id.clone(),
            expired_at: timestamp::format(expires),
        });
    }
    Ok(())
}

/// Every scope each step (rollback steps included) declares is in the approval's scope.
fn check_scope(approval: &Approval, plan: &Plan) -> Result<(), ApprovalError> {
    let granted: BTreeSet<&str> = approval.scope.iter().map(String::as_str).collect();
    for (step, _) in plan.all_steps() {
        let missing: Vec<String> = step
            .scope()
            .iter()
            .filter(|s| !granted.contains(s.as_str()))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(ApprovalError::ScopeNotCovered {
                step_id: step.step_id.clone(),
                missing,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use crate::domain::objects::{RiskLevel, SCHEMA_VERSION, Step};
    use crate::domain::policy::ApprovalMode;
    use noema_core::keys::SigningKeyPair;
    use time::macros::datetime;

    const REQUEST: &str = "req-7";
    const NOW: OffsetDateTime = datetime!(2026-02-14 10:30:00 UTC);

    fn rules(mode: ApprovalMode) -> ApprovalRules {
        ApprovalRules {
            mode,
            ttl_seconds: 3600,
            max_clock_skew_seconds: 60,
            allow_self_approval: false,
        }
    }

    fn plan() -> Plan {
        let step = |id: &str, scope: &[&str]| Step {
            step_id: id.into(),
            action: String::new(),
            tool: "notify.webhook".into(),
            expected_output: String::new(),
            scope: Some(scope.iter().map(|s| (*s).to_owned()).collect()),
            args: None,
        };
        Plan {
            schema_version: SCHEMA_VERSION.into(),
            id: "plan-1".into(),
            ts: "2026-02-14T10:00:00Z".into(),
            source: "agent:alice".into(),
            goal: "tell the team".into(),
            steps: vec![step("s1", &["notify:team"]), step("s2", &["ledger:write"])],
            assumptions: vec![],
            rollback_plan: "none".into(),
            rollback_steps: None,
        }
    }

    fn report(required: u8) -> RiskReport {
        RiskReport {
            schema_version: SCHEMA_VERSION.into(),
            id: "rr-1".into(),
            ts: "2026-02-14T10:00:01Z".into(),
            source: "orchestrator".into(),
            plan_id: "plan-1".into(),
            risk_level: RiskLevel::L2,
            reasons: vec!["external send".into()],
            required_permission: "orchestrator:write".into(),
            requires_approval: true,
            forbidden: false,
            policy_version: "p".into(),
            policy_hash: noema_core::content_id::ContentId::from_digest(&[0; 32]).into_string(),
            approvals_required: required,
            required_scope: vec!["ledger:write".into(), "notify:team".into()],
            steps: vec![],
        }
    }

    fn approval(id: &str, approver: &str, decision: Decision, ts: &str) -> Approval {
        Approval {
            schema_version: SCHEMA_VERSION.into(),
            id: id.into(),
            ts: ts.into(),
            source: approver.into(),
            decision,
            approver: approver.into(),
            reason: "looked at it".into(),
            scope: vec!["notify:team".into(), "ledger:write".into()],
        }
    }

    struct Signed {
        approval: Approval,
        signature: String,
        public_key: String,
    }

    fn sign(approval: Approval, key: &SigningKeyPair, request_id: &str) -> Signed {
        let bytes = signing_bytes(&approval, request_id).unwrap();
        Signed {
            signature: key.sign(&bytes).to_base64(),
            public_key: key.public_key().to_base64(),
            approval,
        }
    }

    fn check(
        signed: &Signed,
        recorded: &[Approval],
        registered: bool,
        mode: ApprovalMode,
    ) -> Result<Verdict, ApprovalError> {
        let plan = plan();
        let report = report(mode.approvers());
        let rules = rules(mode);
        check_submission(
            Submission {
                approval: &signed.approval,
                signature: &signed.signature,
                public_key: &signed.public_key,
            },
            Context {
                request_id: REQUEST,
                plan: &plan,
                report: &report,
                recorded,
                key_registered_to_approver: registered,
                approval_optional: false,
                rules: &rules,
                now: NOW,
            },
        )
    }

    fn key() -> SigningKeyPair {
        SigningKeyPair::from_seed(&[7; 32])
    }

    #[test]
    fn the_signed_bytes_are_the_jcs_of_approval_and_request_id() {
        let a = approval("a1", "human:bob", Decision::Approve, "2026-02-14T10:00:00Z");
        let text = String::from_utf8(signing_bytes(&a, REQUEST).unwrap()).unwrap();
        assert_eq!(
            text,
            "{\"approval\":{\"approver\":\"human:bob\",\"decision\":\"approve\",\"id\":\"a1\",\
             \"reason\":\"looked at it\",\"schema_version\":\"0.1\",\"scope\":[\"notify:team\",\
             \"ledger:write\"],\"source\":\"human:bob\",\"ts\":\"2026-02-14T10:00:00Z\"},\
             \"request_id\":\"req-7\"}"
        );
    }

    #[test]
    fn a_valid_signed_approval_is_recorded() {
        let signed = sign(
            approval("a1", "human:bob", Decision::Approve, "2026-02-14T10:00:00Z"),
            &key(),
            REQUEST,
        );
        assert_eq!(
            check(&signed, &[], true, ApprovalMode::Single),
            Ok(Verdict::Approved {
                valid_approvers: 1,
                required: 1
            })
        );
        let rejection = sign(
            approval("a2", "human:bob", Decision::Reject, "2026-02-14T10:00:00Z"),
            &key(),
            REQUEST,
        );
        assert_eq!(
            check(&rejection, &[], true, ApprovalMode::Single),
            Ok(Verdict::Rejected)
        );
    }

    /// The forgery cases of issue 18: each fails closed with its own error.
    #[test]
    fn forgeries_fail_closed() {
        let good = approval("a1", "human:bob", Decision::Approve, "2026-02-14T10:00:00Z");
        let single = ApprovalMode::Single;

        // A token holder without the approver's key: a key identity does not know.
        let signed = sign(good.clone(), &SigningKeyPair::from_seed(&[9; 32]), REQUEST);
        assert_eq!(
            check(&signed, &[], false, single),
            Err(ApprovalError::KeyNotRegistered {
                approver: "human:bob".into()
            })
        );

        // A signature over another request.
        let other = sign(good.clone(), &key(), "req-8");
        assert_eq!(
            check(&other, &[], true, single),
            Err(ApprovalError::BadSignature {
                request_id: REQUEST.into()
            })
        );

        // The approval edited after signing (scope widened, decision flipped).
        let mut edited = sign(good.clone(), &key(), REQUEST);
        edited.approval.scope.push("admin:peers".into());
        assert!(matches!(
            check(&edited, &[], true, single),
            Err(ApprovalError::BadSignature { .. })
        ));

        // A tampered signature; garbage encodings.
        let mut tampered = sign(good.clone(), &key(), REQUEST);
        let mut raw = Signature::from_base64(&tampered.signature)
            .unwrap()
            .as_bytes()
            .to_owned();
        raw[10] ^= 1;
        tampered.signature = Signature::from_bytes(raw).to_base64();
        assert!(matches!(
            check(&tampered, &[], true, single),
            Err(ApprovalError::BadSignature { .. })
        ));
        let mut unsigned = sign(good.clone(), &key(), REQUEST);
        unsigned.signature = String::new();
        assert!(matches!(
            check(&unsigned, &[], true, single),
            Err(ApprovalError::MalformedSignature(_))
        ));
        let mut bad_key = sign(good.clone(), &key(), REQUEST);
        bad_key.public_key = "bm90IGEga2V5".into();
        assert!(matches!(
            check(&bad_key, &[], true, single),
            Err(ApprovalError::MalformedPublicKey(_))
        ));
        let mut prefixed = sign(good.clone(), &key(), REQUEST);
        prefixed.public_key = format!("ed25519:{}", prefixed.public_key);
        assert!(matches!(
            check(&prefixed, &[], true, single),
            Err(ApprovalError::MalformedPublicKey(_))
        ));

        // A replayed approval (same id already recorded on this request).
        let replay = sign(good.clone(), &key(), REQUEST);
        assert_eq!(
            check(&replay, std::slice::from_ref(&good), true, single),
            Err(ApprovalError::Replayed {
                approval_id: "a1".into()
            })
        );

        // Expired: ts + ttl ≤ now. Exactly at the boundary counts as expired.
        let old = sign(
            approval("a3", "human:bob", Decision::Approve, "2026-02-14T09:30:00Z"),
            &key(),
            REQUEST,
        );
        assert_eq!(
            check(&old, &[], true, single),
            Err(ApprovalError::Expired {
                approval_id: "a3".into(),
                expired_at: "2026-02-14T10:30:00Z".into()
            })
        );
        let fresh = sign(
            approval("a4", "human:bob", Decision::Approve, "2026-02-14T09:30:01Z"),
            &key(),
            REQUEST,
        );
        assert!(check(&fresh, &[], true, single).is_ok());

        // Dated in the future to stretch its validity.
        let future = sign(
            approval("a5", "human:bob", Decision::Approve, "2026-02-14T10:31:01Z"),
            &key(),
            REQUEST,
        );
        assert!(matches!(
            check(&future, &[], true, single),
            Err(ApprovalError::FromTheFuture { .. })
        ));
        let within_skew = sign(
            approval("a6", "human:bob", Decision::Approve, "2026-02-14T10:31:00Z"),
            &key(),
            REQUEST,
        );
        assert!(check(&within_skew, &[], true, single).is_ok());

        // Mis-scoped: one step's scope is not covered.
        let mut narrow = approval("a7", "human:bob", Decision::Approve, "2026-02-14T10:00:00Z");
        narrow.scope = vec!["notify:team".into(), "something:else".into()];
        assert_eq!(
            check(&sign(narrow, &key(), REQUEST), &[], true, single),
            Err(ApprovalError::ScopeNotCovered {
                step_id: "s2".into(),
                missing: vec!["ledger:write".into()]
            })
        );

        // The actor approving its own plan.
        let selfish = sign(
            approval(
                "a8",
                "agent:alice",
                Decision::Approve,
                "2026-02-14T10:00:00Z",
            ),
            &key(),
            REQUEST,
        );
        assert_eq!(
            check(&selfish, &[], true, single),
            Err(ApprovalError::SelfApproval {
                approver: "agent:alice".into()
            })
        );
    }

    #[test]
    fn dual_mode_needs_two_distinct_approvers() {
        let dual = ApprovalMode::Dual;
        let first = approval("a1", "human:bob", Decision::Approve, "2026-02-14T10:00:00Z");
        assert_eq!(
            check(&sign(first.clone(), &key(), REQUEST), &[], true, dual),
            Ok(Verdict::Approved {
                valid_approvers: 1,
                required: 2
            })
        );
        // The same approver twice, under a new approval id.
        let again = approval("a2", "human:bob", Decision::Approve, "2026-02-14T10:05:00Z");
        assert_eq!(
            check(
                &sign(again.clone(), &key(), REQUEST),
                std::slice::from_ref(&first),
                true,
                dual
            ),
            Err(ApprovalError::SameApprover {
                approver: "human:bob".into()
            })
        );
        let second = approval(
            "a3",
            "human:carol",
            Decision::Approve,
            "2026-02-14T10:05:00Z",
        );
        assert_eq!(
            check(
                &sign(
                    second.clone(),
                    &SigningKeyPair::from_seed(&[8; 32]),
                    REQUEST
                ),
                std::slice::from_ref(&first),
                true,
                dual
            ),
            Ok(Verdict::Approved {
                valid_approvers: 2,
                required: 2
            })
        );

        // At execution: one approver twice is not two.
        let plan = plan();
        let report = report(2);
        let rules = rules(dual);
        let err =
            authorize_execution(&plan, &report, &[first.clone(), again], &rules, NOW).unwrap_err();
        assert_eq!(
            err,
            Refusal::Approval(ApprovalError::NotEnoughApprovers {
                valid: 1,
                required: 2
            })
        );
        let ok = authorize_execution(&plan, &report, &[first, second], &rules, NOW).unwrap();
        assert_eq!(ok.approval_ids, ["a1", "a3"]);
    }

    #[test]
    fn execution_rechecks_every_approval_and_fails_closed() {
        let plan = plan();
        let rules = rules(ApprovalMode::Single);
        let good = approval("a1", "human:bob", Decision::Approve, "2026-02-14T10:00:00Z");

        // Missing.
        assert_eq!(
            authorize_execution(&plan, &report(1), &[], &rules, NOW),
            Err(Refusal::Approval(ApprovalError::Missing { required: 1 }))
        );
        // Valid.
        assert_eq!(
            authorize_execution(&plan, &report(1), std::slice::from_ref(&good), &rules, NOW)
                .unwrap()
                .approval_ids,
            ["a1"]
        );
        // Expired by the time of execution.
        let later = NOW + Duration::minutes(31);
        assert!(matches!(
            authorize_execution(
                &plan,
                &report(1),
                std::slice::from_ref(&good),
                &rules,
                later
            ),
            Err(Refusal::Approval(ApprovalError::Expired { .. }))
        ));
        // Rejected.
        let no = approval(
            "a2",
            "human:carol",
            Decision::Reject,
            "2026-02-14T10:00:00Z",
        );
        assert_eq!(
            authorize_execution(&plan, &report(1), &[good.clone(), no], &rules, NOW),
            Err(Refusal::Approval(ApprovalError::Rejected {
                approver: "human:carol".into()
            }))
        );
        // Forbidden plans never run, approvals or not.
        let mut forbidden = report(1);
        forbidden.forbidden = true;
        assert!(matches!(
            authorize_execution(&plan, &forbidden, std::slice::from_ref(&good), &rules, NOW),
            Err(Refusal::Forbidden { .. })
        ));
        // No approval needed: runs without one.
        let mut low = report(0);
        low.requires_approval = false;
        assert_eq!(
            authorize_execution(&plan, &low, &[], &rules, NOW)
                .unwrap()
                .approval_ids,
            Vec::<String>::new()
        );
        // A mis-scoped recorded approval (e.g. recorded under an older plan check) does
        // not count.
        let mut narrow = good.clone();
        narrow.scope = vec!["notify:team".into()];
        assert!(matches!(
            authorize_execution(&plan, &report(1), &[narrow], &rules, NOW),
            Err(Refusal::Approval(ApprovalError::ScopeNotCovered { .. }))
        ));
    }

    #[test]
    fn approvals_are_refused_where_none_is_awaited() {
        let signed = sign(
            approval("a1", "human:bob", Decision::Approve, "2026-02-14T10:00:00Z"),
            &key(),
            REQUEST,
        );
        let plan = plan();
        let mut report = report(0);
        report.requires_approval = false;
        report.risk_level = RiskLevel::L0;
        let rules = rules(ApprovalMode::Single);
        let check_with = |report: &RiskReport, optional: bool| {
            check_submission(
                Submission {
                    approval: &signed.approval,
                    signature: &signed.signature,
                    public_key: &signed.public_key,
                },
                Context {
                    request_id: REQUEST,
                    plan: &plan,
                    report,
                    recorded: &[],
                    key_registered_to_approver: true,
                    approval_optional: optional,
                    rules: &rules,
                    now: NOW,
                },
            )
        };
        let result = check_with(&report, false);
        assert!(matches!(result, Err(ApprovalError::NotRequired { .. })));
        assert_eq!(result.unwrap_err().check(), "not_required");

        // L1's optional confirm: recorded, nothing required.
        report.risk_level = RiskLevel::L1;
        assert_eq!(
            check_with(&report, true),
            Ok(Verdict::Approved {
                valid_approvers: 1,
                required: 0
            })
        );
        // A forbidden plan takes none, optional or not.
        report.forbidden = true;
        assert!(matches!(
            check_with(&report, true),
            Err(ApprovalError::NotRequired { .. })
        ));
    }
}
