//! `DiaryService`'s `VerifyChain`.

use noema_proto::identity::v1 as pb;
use tonic::Request;

use crate::error::IdentityError;
use crate::ops::Identity;

pub(super) async fn verify_chain(
    ops: &Identity,
    request: Request<pb::VerifyChainRequest>,
) -> Result<pb::VerifyChainResponse, IdentityError> {
    let report = ops.verify_chain(&request.into_inner().agent_id).await?;
    Ok(pb::VerifyChainResponse {
        valid: report.problems.is_empty(),
        length: report.length,
        head_seq: report.head_seq,
        head_hash: report.head_hash,
        problems: report.problems,
    })
}
