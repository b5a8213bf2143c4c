//! CogniRelay's peer registry routes (`GET /v1/peers`, `POST /v1/peers/register`,
//! `POST /v1/peers/{peer_id}/trust`), served by the continuity service per tenant: bodies
//! pass through as the caller's bytes and answers come back as the service wrote them.

use axum::extract::Path;
use noema_proto::continuity::v1 as pb;

use super::continuity::{COGNIRELAY, Document, Original, Passed, body, call, request_models};
use crate::features;
use crate::forward::Caller;
use crate::route::{Route, Verb};

request_models! {
    PeerRegister => noema_continuity::domain::coordination::peers::PEER_REGISTER_REQUEST;
    PeerTrust => noema_continuity::domain::coordination::peers::PEER_TRUST_TRANSITION_REQUEST;
}

async fn list(caller: Caller) -> Passed {
    let (mut client, request) = call(&caller, pb::JsonRequest { body: Vec::new() });
    Ok(Original(
        client.list_peers(request).await?.into_inner().body,
    ))
}

async fn register(caller: Caller, document: Document<PeerRegister>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(
        client.register_peer(request).await?.into_inner().body,
    ))
}

async fn trust(
    caller: Caller,
    Path(peer_id): Path<String>,
    document: Document<PeerTrust>,
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
        .describe("Registering a known peer at another trust level needs transition_reason (400 otherwise).")
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
        .tool("peers.trust_transition", "Move a peer's trust level")
        .feature(features::PEERS_REGISTRY)
        .status(400, "Noema: agent_id not registered in identity")
        .status(404, "Peer not found")
        .status(409, "Trust transition not allowed or fingerprint mismatch"),
    ]
}
