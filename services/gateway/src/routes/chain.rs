//! Noema's addition to MoltNet's API: an agent's signed entries form a hash chain, and
//! this route verifies it (a deleted or reordered entry breaks it).

use axum::extract::Path;
use noema_proto::identity::v1 as pb;
use schemars::JsonSchema;
use serde::Serialize;

use crate::forward::Caller;
use crate::go_json::GoJson;
use crate::reply::Answer;
use crate::route::{Route, Verb};
use crate::routes::moltnet::{DIARIES, text_or_null};

/// The verdict on an agent's signature chain.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChainVerdict {
    /// The chain head's hash; null before the agent's first signed entry.
    pub head_hash: Option<String>,
    /// The chain head's recorded length.
    pub head_seq: u64,
    /// Signed entries found in the chain.
    pub length: u64,
    /// Every break found (empty when valid).
    pub problems: Vec<String>,
    pub valid: bool,
}

async fn verify_chain(caller: Caller, Path(agent_id): Path<String>) -> Answer<ChainVerdict> {
    let v = caller
        .diary()
        .verify_chain(caller.request(pb::VerifyChainRequest { agent_id }))
        .await?
        .into_inner();
    Ok(GoJson(ChainVerdict {
        head_hash: text_or_null(&v.head_hash),
        head_seq: v.head_seq,
        length: v.length,
        problems: v.problems,
        valid: v.valid,
    }))
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    vec![
        DIARIES
            .route(
                Verb::Get,
                "/v1/agents/{agent_id}/signature-chain",
                "verifySignatureChain",
                "Noema: verify an agent's signature chain",
                verify_chain,
            )
            .calls("VerifyChain")
            .tool(
                "agents_verify_chain",
                "Verify the hash chain of an agent's signed entries",
            ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::go_json::tests::assert_sorted;

    #[test]
    fn the_verdict_is_in_moltnets_order() {
        assert_sorted(&ChainVerdict {
            head_hash: Some("h".into()),
            head_seq: 2,
            length: 2,
            problems: vec!["p".into()],
            valid: false,
        });
    }
}
