//! Diary entries: create (draft or MoltNet's create-signed), read, list, search, tags,
//! update, delete, verify. An entry in a diary the caller cannot read is missing.

use time::OffsetDateTime;

use super::Identity;
use crate::domain::diary::{self, Access, Caller, Visibility};
use crate::domain::entry::{self, Entry, EntryPatch, EntryType};
use crate::domain::tag::{self, TagCount};
use crate::domain::{bulk, input, search, signing, walk};
use crate::error::IdentityError;
use crate::store::{EntryFilter, SignatureInput};

pub(super) const ENTRY_NOT_FOUND: &str = "Diary entry not found";

/// A new entry as submitted; a `content_hash` and `signing_request_id` make it signed.
#[derive(Debug, Clone, Default)]
pub struct NewEntry {
    pub diary_id: String,
    pub entry_type: String,
    pub title: Option<String>,
    pub content: String,
    pub tags: Vec<String>,
    /// 0 for the default.
    pub importance: u32,
    pub content_hash: String,
    pub signing_request_id: String,
}

/// A page of one diary's entries.
#[derive(Debug, Clone, Default)]
pub struct EntryList {
    pub diary_id: String,
    /// 0 for the default.
    pub limit: u32,
    pub offset: u32,
    pub ids: Vec<String>,
    pub tags: Vec<String>,
    pub exclude_tags: Vec<String>,
    pub entry_types: Vec<String>,
    pub exclude_superseded: bool,
}

/// A search, in one diary or (no `diary_id`) every diary the caller reads.
#[derive(Debug, Clone, Default)]
pub struct EntrySearch {
    pub diary_id: String,
    pub query: String,
    /// 0 for the default.
    pub limit: u32,
    pub offset: u32,
    pub tags: Vec<String>,
    pub exclude_tags: Vec<String>,
    pub entry_types: Vec<String>,
    pub exclude_superseded: bool,
}

/// The changes of an update; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct EntryChanges {
    pub title: Option<String>,
    pub content: Option<String>,
    pub tags: Option<Vec<String>>,
    pub entry_type: Option<String>,
    pub importance: Option<u32>,
    pub injection_risk: Option<bool>,
    pub record_access: bool,
}

/// What verifying a signed entry found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryVerification {
    pub content_hash: String,
    pub signer_fingerprint: String,
    pub check: entry::Verification,
}

fn not_found() -> IdentityError {
    IdentityError::NotFound(ENTRY_NOT_FOUND.into())
}

impl Identity {
    /// The entry and the caller's access to its diary; an unreadable entry is missing.
    pub(super) async fn entry_access(
        &self,
        caller: &Caller,
        entry_id: &str,
    ) -> Result<(Entry, Access), IdentityError> {
        let entry = self
            .store
            .get_entry(entry_id)
            .await?
            .ok_or_else(not_found)?;
        let (_, access) = self.diary_access(caller, &entry.diary_id).await?;
        if access == Access::None {
            return Err(not_found());
        }
        Ok((entry, access))
    }

    /// The entry as stored now.
    pub(super) async fn fresh_entry(&self, id: &str) -> Result<Entry, IdentityError> {
        self.store.get_entry(id).await?.ok_or_else(not_found)
    }

    /// Creates an entry, in MoltNet's order of checks: the content, its hash, the signing
    /// request (for a signed entry), then the diary.
    pub async fn create_entry(
        &self,
        caller: &Caller,
        new: NewEntry,
    ) -> Result<Entry, IdentityError> {
        input::required("diary_id", &new.diary_id)?;
        let entry_type = EntryType::parse(&new.entry_type)?;
        entry::validate_title(new.title.as_deref())?;
        entry::validate_content(&new.content, Visibility::Private)?;
        entry::validate_tags("tags", &new.tags)?;
        let importance = entry::importance_or_default(new.importance)?;
        let tags = (!new.tags.is_empty()).then_some(new.tags);
        let computed = entry::content_hash(
            entry_type,
            new.title.as_deref(),
            &new.content,
            tags.as_deref(),
        );
        let signed = !new.signing_request_id.is_empty();
        entry::check_submitted_hash(&new.content_hash, &computed, signed)?;
        let signing = if signed {
            Some(
                self.entry_signature(caller, &new.signing_request_id, &computed)
                    .await?,
            )
        } else {
            None
        };
        let (d, access) = self.diary_access(caller, &new.diary_id).await?;
        diary::require(access, Access::Write)?;
        entry::validate_content(&new.content, d.visibility)?;
        let now = OffsetDateTime::now_utc();
        let e = Entry {
            id: signing::new_uuid(),
            diary_id: d.id.clone(),
            title: new.title,
            content: new.content,
            tags,
            entry_type,
            importance,
            injection_risk: false,
            access_count: 0,
            last_accessed_at: None,
            content_hash: computed,
            signature: None,
            created_by: caller.id.clone(),
            creator_public_key: None,
            created_at: now,
            updated_at: now,
            superseded: false,
            visibility: d.visibility,
        };
        self.store
            .insert_entry(&e, signing.as_ref(), &caller.id, now)
            .await?;
        self.fresh_entry(&e.id).await
    }

    /// The signature a completed signing request gives a new entry with CID `content_hash`.
    async fn entry_signature(
        &self,
        caller: &Caller,
        request_id: &str,
        content_hash: &str,
    ) -> Result<SignatureInput, IdentityError> {
        let request = self
            .store
            .get_signing_request(request_id)
            .await?
            .ok_or_else(|| {
                IdentityError::NotFound(super::signing_requests::REQUEST_NOT_FOUND.into())
            })?;
        signing::check_usable_for_entry(
            &request,
            &caller.id,
            content_hash,
            OffsetDateTime::now_utc(),
        )?;
        let key = self.signer_key(&caller.id).await?;
        Ok(SignatureInput {
            request_id: request.id.clone(),
            signature: request.signature.clone().unwrap_or_default(),
            nonce: request.nonce.clone(),
            signed_by: caller.id.clone(),
            signer_fingerprint: key.fingerprint(),
        })
    }

    /// The entry. MoltNet's `expand` and `depth` are checked after access, like every
    /// other filter; the gateway walks the relations itself.
    pub async fn get_entry(
        &self,
        caller: &Caller,
        id: &str,
        expand: &str,
        depth: Option<u32>,
    ) -> Result<Entry, IdentityError> {
        let (e, _) = self.entry_access(caller, id).await?;
        walk::validate_expand(expand)?;
        walk::validate_depth(depth)?;
        Ok(e)
    }

    /// A page of the diary's entries, the total and the page size used.
    pub async fn list_entries(
        &self,
        caller: &Caller,
        list: EntryList,
    ) -> Result<(Vec<Entry>, u64, u32), IdentityError> {
        let (d, access) = self.diary_access(caller, &list.diary_id).await?;
        diary::require(access, Access::Read)?;
        let limit = input::limit("limit", list.limit, 20, 100)?;
        if list.ids.len() > 50 {
            return Err(IdentityError::InvalidArgument("ids: at most 50".into()));
        }
        entry::validate_tag_filter("tags", &list.tags)?;
        entry::validate_tag_filter("excludeTags", &list.exclude_tags)?;
        let filter = EntryFilter {
            diary_id: Some(d.id),
            ids: list.ids,
            tags: list.tags,
            exclude_tags: list.exclude_tags,
            entry_types: entry::type_filters(&list.entry_types)?,
            exclude_superseded: list.exclude_superseded,
            limit: i64::from(limit),
            offset: i64::from(list.offset),
            ..EntryFilter::default()
        };
        let (entries, total) = self.store.list_entries(&filter).await?;
        Ok((entries, total, limit))
    }

    /// The diary's tags with their entry counts, most used first. Same access check as
    /// `list_entries`, so a missing or unreadable diary is the same NOT_FOUND.
    pub async fn list_diary_tags(
        &self,
        caller: &Caller,
        diary_id: &str,
        prefix: String,
        min_count: Option<i64>,
        entry_types: &[String],
    ) -> Result<Vec<TagCount>, IdentityError> {
        let (d, access) = self.diary_access(caller, diary_id).await?;
        diary::require(access, Access::Read)?;
        let query = tag::query(prefix, min_count)?;
        let types = entry::type_filters(entry_types)?;
        let mut tags = self.store.list_tags(&d.id, &query, &types).await?;
        tag::order(&mut tags);
        Ok(tags)
    }

    pub async fn update_entry(
        &self,
        caller: &Caller,
        id: &str,
        changes: EntryChanges,
    ) -> Result<Entry, IdentityError> {
        let (before, access) = self.entry_access(caller, id).await?;
        diary::require(access, Access::Write)?;
        let patch = EntryPatch {
            title: changes.title.map(Some),
            content: changes.content,
            tags: changes.tags,
            entry_type: changes
                .entry_type
                .as_deref()
                .map(EntryType::parse)
                .transpose()?,
            importance: changes.importance,
            injection_risk: changes.injection_risk,
            record_access: changes.record_access,
        };
        let now = OffsetDateTime::now_utc();
        let after = entry::apply_patch(&before, &patch, now)?;
        self.store
            .update_entry(&before, &after, &caller.id, now)
            .await?;
        self.fresh_entry(&before.id).await
    }

    /// Deletes a draft: the caller needs write access to its diary; a signed entry is
    /// never deleted.
    pub async fn delete_entry(&self, caller: &Caller, id: &str) -> Result<(), IdentityError> {
        let (e, access) = self.entry_access(caller, id).await?;
        diary::require(access, Access::Write)?;
        entry::check_deletable(&e)?;
        self.store
            .delete_entry(&e.id, &caller.id, OffsetDateTime::now_utc())
            .await
    }

    /// MoltNet's bulk delete: each id in request order through `delete_entry`, whose
    /// refusals (missing, not writable, signed, deleted meanwhile) are skips. An invalid
    /// request is refused before anything is deleted. Answers (deleted, skipped).
    pub async fn delete_entries(
        &self,
        caller: &Caller,
        ids: &[String],
    ) -> Result<(Vec<String>, Vec<String>), IdentityError> {
        let ids = bulk::delete_ids(ids)?;
        let (mut deleted, mut skipped) = (Vec::new(), Vec::new());
        for id in ids {
            match self.delete_entry(caller, &id).await {
                Ok(()) => deleted.push(id),
                Err(e) if bulk::is_skip(&e) => {
                    tracing::debug!(entry_id = %id, reason = %e, "bulk delete skipped an entry");
                    skipped.push(id);
                }
                Err(e) => return Err(e),
            }
        }
        Ok((deleted, skipped))
    }

    /// Full-text search (or, without words, a listing), newest or best first; counts one
    /// access of each result.
    pub async fn search_entries(
        &self,
        caller: &Caller,
        search: EntrySearch,
    ) -> Result<(Vec<Entry>, u64), IdentityError> {
        let limit = input::limit("limit", search.limit, 10, 100)?;
        entry::validate_tag_filter("tags", &search.tags)?;
        entry::validate_tag_filter("excludeTags", &search.exclude_tags)?;
        let query = search::validate_query(&search.query)?;
        let (diary_id, reader) = if search.diary_id.is_empty() {
            (None, (!caller.superuser).then(|| caller.id.clone()))
        } else {
            let (d, access) = self.diary_access(caller, &search.diary_id).await?;
            diary::require(access, Access::Read)?;
            (Some(d.id), None)
        };
        let filter = EntryFilter {
            diary_id,
            reader,
            tags: search.tags,
            exclude_tags: search.exclude_tags,
            entry_types: entry::type_filters(&search.entry_types)?,
            exclude_superseded: search.exclude_superseded,
            query,
            limit: i64::from(limit),
            offset: i64::from(search.offset),
            ..EntryFilter::default()
        };
        let (entries, total) = self.store.list_entries(&filter).await?;
        let ids: Vec<String> = entries.iter().map(|e| e.id.clone()).collect();
        if let Err(err) = self
            .store
            .record_access(&ids, OffsetDateTime::now_utc())
            .await
        {
            tracing::warn!(error = %noema_core::ErrorChain(&err), "recording search access failed");
        }
        Ok((entries, total))
    }

    /// Verifies a signed entry against the key its signer held when signing; `None` for a
    /// draft.
    pub async fn verify_entry(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<Option<EntryVerification>, IdentityError> {
        let (e, _) = self.entry_access(caller, id).await?;
        let Some(signature) = e.signature.clone() else {
            return Ok(None);
        };
        let key = self
            .key_with_fingerprint(&signature.signed_by, &signature.signer_fingerprint)
            .await?;
        let check = entry::verify(&e, &signature, key.as_ref());
        Ok(Some(EntryVerification {
            content_hash: e.content_hash,
            signer_fingerprint: signature.signer_fingerprint,
            check,
        }))
    }
}
