//! CogniRelay's peer registry routes (`GET /v1/peers`, `POST /v1/peers/register`,
//! `POST /v1/peers/{peer_id}/trust`), served by the continuity service per tenant: bodies
//! pass through as the caller's bytes and answers come back as the service wrote them.

use axum::extract::Path;
use noema_proto::continuity::v1 as pb;
use schemars::JsonSchema;
use serde::Deserialize;

use super::continuity::{COGNIRELAY, Original, Passed, body, call};
use crate::features;
use crate::forward::{Caller, RawJson};
use crate::route::{Route, Verb};

/// `POST /v1/peers/register` body.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct PeerRegister {
    pub peer_id: String,
    pub base_url: String,
    #[serde(default)]
    pub public_key: Option<String>,
    /// Default /v1/manifest
    #[serde(default)]
    pub capabilities_url: Option<String>,
    /// trusted, restricted (default) or untrusted
    #[serde(default)]
    pub trust_level: Option<String>,
    #[serde(default)]
    pub allowed_scopes: Vec<String>,
    #[serde(default)]
    pub expected_public_key_fingerprint: Option<String>,
    #[serde(default)]
    pub transition_reason: Option<String>,
}

/// `POST /v1/peers/{peer_id}/trust` body.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct PeerTrust {
    /// trusted, restricted or untrusted
    pub trust_level: String,
    /// 3-500 characters
    pub reason: String,
    #[serde(default)]
    pub expected_public_key_fingerprint: Option<String>,
}

async fn list(caller: Caller) -> Passed {
    let (mut client, request) = call(&caller, pb::JsonRequest { body: Vec::new() });
    Ok(Original(
        client.list_peers(request).await?.into_inner().body,
    ))
}

async fn register(caller: Caller, document: RawJson<PeerRegister>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(
        client.register_peer(request).await?.into_inner().body,
    ))
}

async fn trust(
    caller: Caller,
    Path(peer_id): Path<String>,
    document: RawJson<PeerTrust>,
) -> Passed {
    let message = pb::ItemRequest {
        id: peer_id,
        body: document.bytes.to_vec(),
    };
    let (mut client, request) = call(&caller, message);
    Ok(Original(
        client
            .transition_peer_trust(request)
            .await?
            .into_inner()
            .body,
    ))
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    let r = COGNIRELAY;
    vec![
        r.route(
            Verb::Get,
            "/v1/peers",
            "peersList",
            "CogniRelay: the tenant's peer registry",
            list,
        )
        .calls("ListPeers")
        .tool("peers.list", "List known peer records from registry")
        .feature(features::PEERS_REGISTRY),
        r.route(
            Verb::Post,
            "/v1/peers/register",
            "peersRegister",
            "CogniRelay: create or update a peer record (trust moves by the policy)",
            register,
        )
        .calls("RegisterPeer")
        .tool("peers.register", "Create or update a peer registry record")
        .feature(features::PEERS_REGISTRY)
        .status(400, "Fingerprint or reason missing or mismatched")
        .status(409, "Trust transition not allowed"),
        r.route(
            Verb::Post,
            "/v1/peers/{peer_id}/trust",
            "peersTrust",
            "CogniRelay: move a peer's trust level (untrusted, restricted, trusted)",
            trust,
        )
        .calls("TransitionPeerTrust")
        .tool(
            "peers.trust_transition",
            "Apply a peer trust-level transition with a reason",
        )
        .feature(features::PEERS_REGISTRY)
        .status(404, "Peer not found")
        .status(409, "Trust transition not allowed or fingerprint mismatch"),
    ]
}
