//! Signing requests: MoltNet's sign-then-create flow (a message, verified once) and the
//! seed's prepare → sign → submit for drafts. Another agent's request is missing.

use time::OffsetDateTime;

use super::Identity;
use crate::domain::diary::{self, Access, Caller};
use crate::domain::input;
use crate::domain::signing::{self, RequestStatus, SigningRequest};
use crate::error::IdentityError;
use crate::store::SignatureInput;

pub(super) const REQUEST_NOT_FOUND: &str = "Signing request not found";

/// A request to sign either an arbitrary `message` or the draft `entry_id` (its CID).
#[derive(Debug, Clone, Default)]
pub struct NewSigningRequest {
    pub message: String,
    pub entry_id: String,
    pub purpose: String,
    pub team_id: String,
    pub verification_method: String,
}

impl Identity {
    /// The caller's request `id`; another agent's is missing (a superuser sees all).
    async fn request_of(&self, caller: &Caller, id: &str) -> Result<SigningRequest, IdentityError> {
        let not_found = || IdentityError::NotFound(REQUEST_NOT_FOUND.into());
        let request = self
            .store
            .get_signing_request(id)
            .await?
            .ok_or_else(not_found)?;
        if request.agent_id != caller.id && !caller.superuser {
            return Err(not_found());
        }
        Ok(request)
    }

    pub async fn create_signing_request(
        &self,
        caller: &Caller,
        new: NewSigningRequest,
    ) -> Result<SigningRequest, IdentityError> {
        signing::validate_method(&new.verification_method)?;
        signing::validate_purpose(&new.purpose)?;
        let (message, entry_id) = match (new.message.is_empty(), new.entry_id.is_empty()) {
            (false, true) => {
                signing::validate_message(&new.message)?;
                (new.message, None)
            }
            (true, false) => {
                let (e, access) = self.entry_access(caller, &new.entry_id).await?;
                diary::require(access, Access::Write)?;
                if e.is_signed() {
                    return Err(IdentityError::FailedPrecondition(
                        "the entry is already signed; supersede it with a new entry instead".into(),
                    ));
                }
                (e.content_hash, Some(e.id))
            }
            _ => {
                return Err(IdentityError::InvalidArgument(
                    "give exactly one of message (arbitrary message signing) and entryId (sign a draft entry)"
                        .into(),
                ));
            }
        };
        self.signer_key(&caller.id).await?;
        let now = OffsetDateTime::now_utc();
        let request =
            signing::new_request(&caller.id, message, entry_id, new.purpose, new.team_id, now);
        self.store
            .insert_signing_request(&request, signing::MAX_PENDING_PER_AGENT, now)
            .await?
            .map_err(signing::limit_reached)?;
        Ok(request)
    }

    pub async fn get_signing_request(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<SigningRequest, IdentityError> {
        self.request_of(caller, id).await
    }

    /// A page of the caller's requests, the total and the page size used.
    pub async fn list_signing_requests(
        &self,
        caller: &Caller,
        statuses: &[String],
        limit: u32,
        offset: u32,
    ) -> Result<(Vec<SigningRequest>, u64, u32), IdentityError> {
        let limit = input::limit("limit", limit, 20, 100)?;
        for status in statuses {
            RequestStatus::parse(status)?;
        }
        let (requests, total) = self
            .store
            .list_signing_requests(&caller.id, statuses, i64::from(limit), i64::from(offset))
            .await?;
        Ok((requests, total, limit))
    }

    /// Submits the signature of a request. A message request completes with the verdict
    /// (MoltNet: one shot); an entry request takes only a valid signature, which signs the
    /// draft (the seed: a refused signature changes nothing).
    pub async fn submit_signature(
        &self,
        caller: &Caller,
        id: &str,
        signature: &str,
    ) -> Result<SigningRequest, IdentityError> {
        let request = self.request_of(caller, id).await?;
        let now = OffsetDateTime::now_utc();
        signing::check_submittable(&request, now)?;
        signing::check_submitted_length(signature)?;
        match request.entry_id.clone() {
            None => {
                let key = self
                    .store
                    .get_agent(&request.agent_id)
                    .await?
                    .map(|a| a.public_key);
                let valid = key.is_some_and(|k| signing::verifies(&request, &k, signature));
                self.store
                    .complete_message_request(&request, signature, valid, now)
                    .await?;
            }
            Some(entry_id) => {
                signing::parse_signature(signature)?;
                let key = self.signer_key(&request.agent_id).await?;
                if !signing::verifies(&request, &key, signature) {
                    return Err(signing::refused_signature(&request.agent_id, &key));
                }
                let entry = self.fresh_entry(&entry_id).await?;
                signing::check_entry_unchanged(&request, &entry)?;
                let input = SignatureInput {
                    request_id: request.id.clone(),
                    signature: signature.to_owned(),
                    nonce: request.nonce.clone(),
                    signed_by: request.agent_id.clone(),
                    signer_fingerprint: key.fingerprint(),
                };
                self.store
                    .sign_entry(&request, &entry_id, &input, now)
                    .await?;
            }
        }
        self.request_of(caller, &request.id).await
    }

    /// The completed, valid request that `signature` signed, and its signer's fingerprint;
    /// `None` when there is none (or it no longer verifies).
    pub async fn verify_signature(
        &self,
        signature: &str,
    ) -> Result<Option<(SigningRequest, String)>, IdentityError> {
        signing::check_presented_length(signature)?;
        let Some(request) = self.store.signing_request_by_signature(signature).await? else {
            return Ok(None);
        };
        let key = self
            .store
            .get_agent(&request.agent_id)
            .await?
            .map(|a| a.public_key);
        let valid = request.valid == Some(true)
            && key
                .as_ref()
                .is_some_and(|k| signing::verifies(&request, k, signature));
        Ok(match key {
            Some(key) if valid => Some((request, key.fingerprint())),
            _ => None,
        })
    }
}
