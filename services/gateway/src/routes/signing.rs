//! MoltNet's signing requests (`shared/compat/moltnet.md` §4–§7): prepare a request over
//! a message or a draft entry's CID, read and list them, submit the signature over the
//! request's signing input, and verify a signature.

use axum::extract::Path;
use noema_proto::identity::v1 as pb;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::features;
use crate::forward::{Caller, JsonBody, RepeatedQuery, first};
use crate::go_json::GoJson;
use crate::reply::{Answer, Created, Creates};
use crate::route::{Route, Verb};
use crate::routes::moltnet::{DIARIES, Page, number, text_or_null, time};

/// MoltNet's SigningRequest (its delegated-flow fields are always null here).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SigningRequestBody {
    pub agent_id: String,
    pub challenge: Option<String>,
    pub claimed_at: Option<String>,
    pub claimed_by_human_id: Option<String>,
    pub completed_at: Option<String>,
    pub created_at: Option<String>,
    /// The draft entry this request signs; null for a message request.
    pub entry_id: Option<String>,
    pub expires_at: Option<String>,
    pub id: String,
    /// What is signed: the entry's CID or the message.
    pub message: String,
    /// One-time UUID.
    pub nonce: String,
    pub purpose: Option<String>,
    pub receipt: Option<String>,
    pub rejected_at: Option<String>,
    pub rejection_reason: Option<String>,
    pub requested_by: RequestedBy,
    pub signature: Option<String>,
    pub signer_constraint: Option<String>,
    pub signing_credential_id: Option<String>,
    /// Standard base64 of the exact bytes to sign.
    pub signing_input: String,
    /// `pending`, `completed` or `expired`.
    pub status: String,
    pub team_id: Option<String>,
    /// Whether the submitted signature verified; null until completed.
    pub valid: Option<bool>,
    pub verification_method: String,
}

/// Who asked for the signature.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RequestedBy {
    pub id: String,
    /// `agent`.
    #[serde(rename = "type")]
    pub kind: &'static str,
}

impl From<pb::SigningRequest> for SigningRequestBody {
    fn from(r: pb::SigningRequest) -> Self {
        SigningRequestBody {
            challenge: None,
            claimed_at: None,
            claimed_by_human_id: None,
            completed_at: time(&r.completed_at),
            created_at: time(&r.created_at),
            entry_id: text_or_null(&r.entry_id),
            expires_at: time(&r.expires_at),
            purpose: text_or_null(&r.purpose),
            receipt: None,
            rejected_at: None,
            rejection_reason: None,
            requested_by: RequestedBy {
                id: r.agent_id.clone(),
                kind: "agent",
            },
            signature: text_or_null(&r.signature),
            signer_constraint: None,
            signing_credential_id: None,
            signing_input: data_encoding::BASE64.encode(&r.signing_input),
            team_id: text_or_null(&r.team_id),
            agent_id: r.agent_id,
            id: r.id,
            message: r.message,
            nonce: r.nonce,
            status: r.status,
            valid: r.valid,
            verification_method: r.verification_method,
        }
    }
}

/// A signing request to prepare: exactly one of `message` and `entryId`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("oneOf" = [
    {"required": ["message"], "properties": {"message": {"type": "string", "minLength": 1}}},
    {"required": ["entryId"], "properties": {"entryId": {"type": "string", "minLength": 1}}},
]))]
pub struct SigningRequestInput {
    #[serde(default)]
    pub message: Option<String>,
    /// A draft entry: the request signs its CID.
    #[serde(default)]
    pub entry_id: Option<String>,
    /// `agent-ed25519` (default).
    #[serde(default)]
    #[schemars(extend("enum" = ["", "agent-ed25519", null]))]
    pub verification_method: Option<String>,
    #[serde(default)]
    pub team_id: Option<String>,
    #[serde(default)]
    pub purpose: Option<String>,
}

async fn create_signing_request(
    caller: Caller,
    JsonBody(body): JsonBody<SigningRequestInput>,
) -> Creates<SigningRequestBody> {
    let request = pb::CreateSigningRequestRequest {
        message: body.message.unwrap_or_default(),
        entry_id: body.entry_id.unwrap_or_default(),
        purpose: body.purpose.unwrap_or_default(),
        verification_method: body.verification_method.unwrap_or_default(),
        team_id: body.team_id.unwrap_or_default(),
    };
    let r = caller
        .diary()
        .create_signing_request(caller.request(request))
        .await?;
    Ok(Created(r.into_inner().into()))
}

/// `GET /crypto/signing-requests` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SigningRequestsQuery {
    /// pending, completed or expired (repeatable)
    #[serde(default)]
    #[schemars(extend("items" = {"type": "string", "enum": ["pending", "completed", "expired"]}))]
    pub status: Vec<String>,
    /// 1-100, default 20
    #[serde(default, deserialize_with = "first")]
    #[schemars(regex(pattern = r"^\+?(0+|0*(100|[1-9][0-9]?))$"))]
    pub limit: Option<String>,
    /// Skip this many
    #[serde(default, deserialize_with = "first")]
    pub offset: Option<String>,
    /// requested (default) or signable (always empty)
    #[serde(default, deserialize_with = "first")]
    pub scope: Option<String>,
}

async fn list_signing_requests(
    caller: Caller,
    RepeatedQuery(q): RepeatedQuery<SigningRequestsQuery>,
) -> Answer<Page<SigningRequestBody>> {
    let request = pb::ListSigningRequestsRequest {
        status: q.status,
        limit: number(&q.limit),
        offset: number(&q.offset),
    };
    let list = caller
        .diary()
        .list_signing_requests(caller.request(request))
        .await?
        .into_inner();
    // `scope=signable` lists delegated requests a human may claim: there are none.
    let signable = q.scope.as_deref() == Some("signable");
    Ok(GoJson(Page {
        items: if signable {
            Vec::new()
        } else {
            list.requests
                .into_iter()
                .map(SigningRequestBody::from)
                .collect()
        },
        limit: list.limit.into(),
        offset: list.offset.into(),
        total: if signable { 0 } else { list.total },
    }))
}

async fn get_signing_request(caller: Caller, Path(id): Path<String>) -> Answer<SigningRequestBody> {
    let r = caller
        .diary()
        .get_signing_request(caller.request(pb::GetSigningRequestRequest { id }))
        .await?;
    Ok(GoJson(r.into_inner().into()))
}

/// A signature in standard base64 (88 characters).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(extend("required" = ["signature"]))]
pub struct SignatureInput {
    #[serde(default)]
    #[schemars(length(min = 1, max = 88))]
    pub signature: String,
}

async fn sign(
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<SignatureInput>,
) -> Answer<SigningRequestBody> {
    let request = pb::SubmitSignatureRequest {
        id,
        signature: body.signature,
    };
    let r = caller
        .diary()
        .submit_signature(caller.request(request))
        .await?;
    Ok(GoJson(r.into_inner().into()))
}

/// Whether a signature belongs to a valid completed request, and whose it is.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SignatureCheck {
    /// The signed message, when valid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The signing agent, when valid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signer: Option<Signer>,
    pub valid: bool,
}

/// The agent whose key made a signature.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Signer {
    pub agent_id: String,
    pub fingerprint: String,
}

async fn verify_signature(
    caller: Caller,
    JsonBody(body): JsonBody<SignatureInput>,
) -> Answer<SignatureCheck> {
    let request = pb::VerifySignatureRequest {
        signature: body.signature,
    };
    let v = caller
        .diary()
        .verify_signature(caller.request(request))
        .await?
        .into_inner();
    // Without a token the service answers only `valid` (MoltNet's public answer).
    Ok(GoJson(if v.valid && !v.agent_id.is_empty() {
        SignatureCheck {
            message: Some(v.message),
            signer: Some(Signer {
                agent_id: v.agent_id,
                fingerprint: v.fingerprint,
            }),
            valid: true,
        }
    } else if v.valid {
        SignatureCheck {
            message: None,
            signer: None,
            valid: true,
        }
    } else {
        SignatureCheck {
            message: None,
            signer: None,
            valid: false,
        }
    }))
}

/// MoltNet's `POST /agents/{fingerprint}/verify`: whether a signature is this agent's.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AgentSignatureCheck {
    pub valid: bool,
    /// The agent, when the signature is valid and theirs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signer: Option<SignerFingerprint>,
}

/// The fingerprint of the agent whose key made a signature.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SignerFingerprint {
    pub fingerprint: String,
}

async fn verify_agent_signature(
    caller: Caller,
    Path(fingerprint): Path<String>,
    JsonBody(body): JsonBody<SignatureInput>,
) -> Answer<AgentSignatureCheck> {
    let request = pb::VerifySignatureRequest {
        signature: body.signature,
    };
    let v = caller
        .diary()
        .verify_signature(caller.request(request))
        .await?
        .into_inner();
    // Fingerprints are upper-case hex; MoltNet's lookups accept either case.
    let theirs = v.valid && v.fingerprint.eq_ignore_ascii_case(&fingerprint);
    Ok(GoJson(AgentSignatureCheck {
        valid: theirs,
        signer: theirs.then_some(SignerFingerprint {
            fingerprint: v.fingerprint,
        }),
    }))
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    let r = DIARIES;
    vec![
        r.route(
            Verb::Post,
            "/crypto/signing-requests",
            "createSigningRequest",
            "MoltNet: a signing request over a message, or over a draft entry's CID (entryId)",
            create_signing_request,
        )
        .calls("CreateSigningRequest")
        .status(404, "No draft entry by that entryId")
        .status(409, "The token's principal has no registered key")
        .status(429, "The agent holds as many pending requests as allowed")
        .tool(
            "crypto_prepare_signature",
            "Signing request over a message or draft entry (entryId); sign signingInput locally",
        )
        .feature(features::DIARY_SIGNING),
        r.route(
            Verb::Get,
            "/crypto/signing-requests",
            "listSigningRequests",
            "MoltNet: the caller's signing requests",
            list_signing_requests,
        )
        .calls("ListSigningRequests"),
        r.route(
            Verb::Get,
            "/crypto/signing-requests/{id}",
            "getSigningRequest",
            "MoltNet: one of the caller's signing requests",
            get_signing_request,
        )
        .calls("GetSigningRequest")
        .tool(
            "crypto_signing_status",
            "Signing request `id` and its status",
        ),
        r.route(
            Verb::Post,
            "/crypto/signing-requests/{id}/sign",
            "submitSignature",
            "MoltNet: submit the signature over signingInput",
            sign,
        )
        .calls("SubmitSignature")
        .status(409, "The request expired or has its signature already")
        .tool(
            "crypto_submit_signature",
            "Submit your Ed25519 signature over signingInput (base64)",
        ),
        r.route(
            Verb::Post,
            "/crypto/verify",
            "verifySignature",
            "MoltNet: whether a signature belongs to a valid completed request (public; a token adds the signer and message)",
            verify_signature,
        )
        .public()
        .tool(
            "crypto_verify",
            "Whether a signature belongs to a completed signing request",
        ),
        r.route(
            Verb::Post,
            "/agents/{fingerprint}/verify",
            "verifyAgentSignature",
            "MoltNet: whether a signature is this agent's (public; any other fingerprint is not valid)",
            verify_agent_signature,
        )
        .public(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::go_json::tests::assert_sorted;

    #[test]
    fn bodies_are_in_moltnets_order() {
        assert_sorted(&SigningRequestBody::from(pb::SigningRequest {
            valid: Some(true),
            ..Default::default()
        }));
        assert_sorted(&SignatureCheck {
            message: Some("m".into()),
            signer: Some(Signer {
                agent_id: "a".into(),
                fingerprint: "f".into(),
            }),
            valid: true,
        });
    }
}
