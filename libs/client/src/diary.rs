//! Signed diaries from an agent runtime: the entry CID and the signing bytes computed
//! locally (byte-identical to MoltNet's and to the server's), and the seed's
//! prepare → sign → submit flow with a key that never leaves the agent.

use noema_core::keys::SigningKeyPair;
use noema_proto::identity::v1 as pb;

use crate::{ClientError, DiaryClient};

/// MoltNet's entry CID (`contentHash`) of (type, title, content, tags). An empty
/// `entry_type` is MoltNet's default, `semantic`.
pub fn entry_cid(entry_type: &str, title: Option<&str>, content: &str, tags: &[String]) -> String {
    let entry_type = if entry_type.is_empty() {
        "semantic"
    } else {
        entry_type
    };
    noema_core::cid::entry_cid(entry_type, title, content, Some(tags))
}

/// The exact bytes an agent signs for a signing request: `moltnet:v1` ‖ be32(32) ‖
/// SHA-256(message) ‖ be32(len(nonce)) ‖ nonce.
pub fn signing_bytes(message: &str, nonce: &str) -> Vec<u8> {
    noema_core::keys::moltnet_signing_bytes(message, nonce)
}

/// Signs the draft `entry_id` as the token's agent: prepares a signing request, checks
/// that the server's signing input is what this client computes for the entry's current
/// CID and the request's nonce, signs it locally and submits the signature. Returns the
/// completed request; the entry is then signed and immutable.
pub async fn sign_entry(
    diary: &mut DiaryClient,
    entry_id: &str,
    key: &SigningKeyPair,
) -> Result<pb::SigningRequest, ClientError> {
    let entry = diary
        .get_entry(pb::GetEntryRequest {
            id: entry_id.to_owned(),
            ..Default::default()
        })
        .await?
        .into_inner();
    let local_cid = entry_cid(
        &entry.entry_type,
        entry.title.as_deref(),
        &entry.content,
        &entry.tags,
    );
    if local_cid != entry.content_hash {
        return Err(ClientError::Invalid(format!(
            "the entry's contentHash {} is not the CID of its content ({local_cid}); refusing to sign",
            entry.content_hash
        )));
    }
    let request = diary
        .create_signing_request(pb::CreateSigningRequestRequest {
            entry_id: entry_id.to_owned(),
            ..pb::CreateSigningRequestRequest::default()
        })
        .await?
        .into_inner();
    let bytes = signing_bytes(&request.message, &request.nonce);
    if request.message != local_cid || request.signing_input != bytes {
        return Err(ClientError::Invalid(
            "the server's signing input differs from the locally computed one; refusing to sign"
                .into(),
        ));
    }
    let signature = key.sign(&bytes).to_base64();
    Ok(diary
        .submit_signature(pb::SubmitSignatureRequest {
            id: request.id,
            signature,
        })
        .await?
        .into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_cid_and_signing_bytes_match_the_compat_vectors() {
        assert_eq!(
            entry_cid("", Some("Title"), "Content", &["tag1".to_owned()]),
            "bafkreidxfykbrvutwidnpsnto4ij6kpe6r3oofqthfc5ohvcmrpsw3irse"
        );
        assert_eq!(
            signing_bytes("m", "3f2b8c1e-9a4d-4e6f-8b7a-1c2d3e4f5a6b").len(),
            86
        );
    }
}
