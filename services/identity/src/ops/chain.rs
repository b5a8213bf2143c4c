//! Each agent's signature chain, checked link by link.

use super::Identity;
use crate::domain::{agent, chain};
use crate::error::IdentityError;

/// What checking an agent's chain found; `problems` is empty when it is whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainReport {
    pub length: u64,
    pub head_seq: u64,
    pub head_hash: String,
    pub problems: Vec<String>,
}

impl Identity {
    pub async fn verify_chain(&self, agent_id: &str) -> Result<ChainReport, IdentityError> {
        agent::validate_agent_id(agent_id)?;
        let (links, head) = self.store.chain_links(agent_id).await?;
        let problems = chain::verify(agent_id, &links, head.clone());
        let (head_seq, head_hash) = head.unwrap_or_default();
        Ok(ChainReport {
            length: links.len() as u64,
            head_seq,
            head_hash,
            problems,
        })
    }
}
