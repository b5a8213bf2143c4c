//! The per-agent signature chain (beyond MoltNet): every signed entry records the hash
//! of its signer's previous chain link, so deleting or reordering a signed entry breaks
//! the chain. A link's hash is SHA-256 over the RFC 8785 form of
//! `{"agent","cid","entry","prev","seq","signature","v":"noema:signature-chain:v1"}`, and
//! the newest link is also kept as the agent's chain head. Verifying also recomputes each
//! linked entry's CID from its stored type, title, content and tags, so an entry edited
//! under the service (its CID left as it was) breaks the chain too.

use noema_core::content_id::ContentId;

use crate::error::IdentityError;

pub const CHAIN_VERSION: &str = "noema:signature-chain:v1";

/// One link as stored on a signed entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub entry_id: String,
    pub content_hash: String,
    pub signature: String,
    pub seq: u64,
    pub prev: String,
    pub hash: String,
    /// The CID of the entry's stored type, title, content and tags, recomputed when read
    /// (equal to `content_hash` unless the row was edited under the service).
    pub content_cid: String,
}

/// The hash of a link: `sha256:<hex>`.
pub fn link_hash(
    agent_id: &str,
    seq: u64,
    entry_id: &str,
    content_hash: &str,
    signature: &str,
    prev: &str,
) -> Result<String, IdentityError> {
    let bytes = noema_core::jcs::canonicalize(&serde_json::json!({
        "agent": agent_id,
        "cid": content_hash,
        "entry": entry_id,
        "prev": prev,
        "seq": seq,
        "signature": signature,
        "v": CHAIN_VERSION,
    }))
    .map_err(|e| IdentityError::Corrupt(format!("chain link: {e}")))?;
    Ok(ContentId::of_bytes(&bytes).into_string())
}

/// The next link after `head` (`None` for an agent's first signature).
pub fn next_link(
    agent_id: &str,
    head: Option<(u64, String)>,
    entry_id: &str,
    content_hash: &str,
    signature: &str,
) -> Result<Link, IdentityError> {
    let (seq, prev) = match head {
        Some((seq, hash)) => (seq + 1, hash),
        None => (1, String::new()),
    };
    Ok(Link {
        entry_id: entry_id.to_owned(),
        content_hash: content_hash.to_owned(),
        signature: signature.to_owned(),
        seq,
        prev: prev.clone(),
        hash: link_hash(agent_id, seq, entry_id, content_hash, signature, &prev)?,
        content_cid: content_hash.to_owned(),
    })
}

/// Checks `links` (ordered by seq) against the recorded head. Returns every problem
/// found; empty means the chain is whole.
pub fn verify(agent_id: &str, links: &[Link], head: Option<(u64, String)>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut expected_prev = String::new();
    for (index, link) in links.iter().enumerate() {
        let expected_seq = index as u64 + 1;
        if link.seq != expected_seq {
            problems.push(format!(
                "entry {} is at position {} but position {expected_seq} was expected: a signed \
                 entry before it is missing",
                link.entry_id, link.seq
            ));
        }
        if link.prev != expected_prev {
            problems.push(format!(
                "entry {} (position {}) does not link to the previous signed entry: the chain \
                 was reordered or an entry was removed",
                link.entry_id, link.seq
            ));
        }
        match link_hash(
            agent_id,
            link.seq,
            &link.entry_id,
            &link.content_hash,
            &link.signature,
            &link.prev,
        ) {
            Ok(hash) if hash == link.hash => {}
            _ => problems.push(format!(
                "entry {} (position {}) has a chain hash that does not match its content",
                link.entry_id, link.seq
            )),
        }
        if link.content_cid != link.content_hash {
            problems.push(format!(
                "entry {} (position {}) no longer matches its signed content hash: its stored \
                 content was changed",
                link.entry_id, link.seq
            ));
        }
        expected_prev = link.hash.clone();
    }
    let last = links.last().map(|l| (l.seq, l.hash.clone()));
    match (head, last) {
        (None, None) => {}
        (Some((seq, hash)), Some((last_seq, last_hash))) => {
            if seq != last_seq || hash != last_hash {
                problems.push(format!(
                    "the chain head records {seq} signed entries but the newest one found is at \
                     position {last_seq}: signed entries were deleted"
                ));
            }
        }
        (Some((seq, _)), None) => problems.push(format!(
            "the chain head records {seq} signed entries but none were found"
        )),
        (None, Some(_)) => {
            problems.push("signed entries exist but the agent has no chain head".into())
        }
    }
    problems
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn chain(n: usize) -> Vec<Link> {
        let mut links: Vec<Link> = Vec::new();
        for i in 0..n {
            let head = links.last().map(|l| (l.seq, l.hash.clone()));
            links.push(next_link("a", head, &format!("e{i}"), "bafk", &format!("s{i}")).unwrap());
        }
        links
    }

    fn head(links: &[Link]) -> Option<(u64, String)> {
        links.last().map(|l| (l.seq, l.hash.clone()))
    }

    #[test]
    fn a_whole_chain_verifies() {
        let links = chain(3);
        assert!(verify("a", &links, head(&links)).is_empty());
        assert!(verify("a", &[], None).is_empty());
    }

    #[test]
    fn deletions_and_reorders_are_detected() {
        let links = chain(4);
        let h = head(&links);
        let mut deleted = links.clone();
        deleted.remove(1);
        assert!(!verify("a", &deleted, h.clone()).is_empty());
        let mut tail_deleted = links.clone();
        tail_deleted.pop();
        assert!(!verify("a", &tail_deleted, h.clone()).is_empty());
        let mut swapped = links.clone();
        swapped.swap(1, 2);
        assert!(!verify("a", &swapped, h.clone()).is_empty());
        // Renumbering after a swap does not help: the prev links and hashes break.
        let (s1, s2) = (swapped[1].seq, swapped[2].seq);
        swapped[1].seq = s2;
        swapped[2].seq = s1;
        assert!(!verify("a", &swapped, h).is_empty());
    }

    #[test]
    fn an_entry_edited_under_its_hash_is_detected() {
        let mut links = chain(3);
        let h = head(&links);
        links[1].content_cid = "bafkother".into();
        let problems = verify("a", &links, h);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("e1"), "{problems:?}");
    }
}
