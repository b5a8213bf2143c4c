//! Diary entries: the six types, validation, the content hash, and the state × constraint
//! matrix of seed 004 (what may change on a draft and on a signed entry).

use noema_core::cid;
use time::OffsetDateTime;

use crate::domain::diary::Visibility;
use crate::error::IdentityError;

pub const MAX_CONTENT_CHARS: usize = 100_000;
/// MoltNet's cap on entries of public diaries.
pub const MAX_PUBLIC_CONTENT_CHARS: usize = 10_000;
pub const MAX_TITLE_CHARS: usize = 255;
pub const MAX_TAGS: usize = 20;
pub const MAX_TAG_CHARS: usize = 128;
pub const DEFAULT_IMPORTANCE: u32 = 5;

/// The message MoltNet returns when a signed entry's CID inputs would change.
pub const IMMUTABLE_MESSAGE: &str = "Entry is content-signed and immutable — content, title, \
     entryType, and tags are included in the content hash. Create a new entry and relate it \
     with a supersedes relation.";
pub const UNDELETABLE_MESSAGE: &str = "Cannot delete a content-signed entry. Create a new entry \
     and relate it with a supersedes relation instead.";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryType {
    Episodic,
    Semantic,
    Procedural,
    Reflection,
    Identity,
    Soul,
}

impl EntryType {
    pub const ALL: [EntryType; 6] = [
        EntryType::Episodic,
        EntryType::Semantic,
        EntryType::Procedural,
        EntryType::Reflection,
        EntryType::Identity,
        EntryType::Soul,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EntryType::Episodic => "episodic",
            EntryType::Semantic => "semantic",
            EntryType::Procedural => "procedural",
            EntryType::Reflection => "reflection",
            EntryType::Identity => "identity",
            EntryType::Soul => "soul",
        }
    }

    /// Parses a request value; empty means MoltNet's default, `semantic`.
    pub fn parse(text: &str) -> Result<EntryType, IdentityError> {
        if text.is_empty() {
            return Ok(EntryType::Semantic);
        }
        EntryType::ALL
            .into_iter()
            .find(|t| t.as_str() == text)
            .ok_or_else(|| {
                IdentityError::InvalidArgument(format!(
                    "entry_type {text:?} is not one of episodic, semantic, procedural, \
                     reflection, identity, soul"
                ))
            })
    }

    pub fn from_stored(text: &str) -> Result<EntryType, IdentityError> {
        EntryType::ALL
            .into_iter()
            .find(|t| t.as_str() == text)
            .ok_or_else(|| IdentityError::Corrupt(format!("entry type {text:?}")))
    }

    /// Whether importance is frozen once an entry of this type is signed (seed 004:
    /// identity, soul and reflection).
    pub fn importance_frozen_when_signed(self) -> bool {
        matches!(
            self,
            EntryType::Reflection | EntryType::Identity | EntryType::Soul
        )
    }
}

/// An entry as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub id: String,
    pub diary_id: String,
    pub title: Option<String>,
    pub content: String,
    pub tags: Option<Vec<String>>,
    pub entry_type: EntryType,
    pub importance: u32,
    pub injection_risk: bool,
    pub access_count: u64,
    pub last_accessed_at: Option<OffsetDateTime>,
    pub content_hash: String,
    pub signature: Option<EntrySignature>,
    pub created_by: String,
    pub creator_public_key: Option<String>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
    pub superseded: bool,
    pub visibility: Visibility,
}

/// What signing stored on an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntrySignature {
    pub signature: String,
    pub nonce: String,
    pub signing_request_id: String,
    pub signed_by: String,
    pub signer_fingerprint: String,
    pub signed_at: OffsetDateTime,
    pub chain_seq: u64,
    pub chain_prev: String,
    pub chain_hash: String,
}

impl Entry {
    pub fn is_signed(&self) -> bool {
        self.signature.is_some()
    }

    /// The CID of the entry's current CID inputs.
    pub fn computed_hash(&self) -> String {
        content_hash(
            self.entry_type,
            self.title.as_deref(),
            &self.content,
            self.tags.as_deref(),
        )
    }
}

/// The MoltNet CID over (type, title, content, tags).
pub fn content_hash(
    entry_type: EntryType,
    title: Option<&str>,
    content: &str,
    tags: Option<&[String]>,
) -> String {
    cid::entry_cid(entry_type.as_str(), title, content, tags)
}

pub fn validate_content(content: &str, visibility: Visibility) -> Result<(), IdentityError> {
    let chars = content.chars().count();
    if chars == 0 {
        return Err(IdentityError::InvalidArgument(
            "content is required (1-100000 characters)".into(),
        ));
    }
    if chars > MAX_CONTENT_CHARS {
        return Err(IdentityError::InvalidArgument(format!(
            "content is {chars} characters; at most {MAX_CONTENT_CHARS} are allowed"
        )));
    }
    if visibility == Visibility::Public && chars > MAX_PUBLIC_CONTENT_CHARS {
        return Err(IdentityError::InvalidArgument(
            "Public diary entries are limited to 10,000 characters".into(),
        ));
    }
    Ok(())
}

pub fn validate_title(title: Option<&str>) -> Result<(), IdentityError> {
    match title {
        Some(t) if t.chars().count() > MAX_TITLE_CHARS => Err(IdentityError::InvalidArgument(
            format!("title must be at most {MAX_TITLE_CHARS} characters"),
        )),
        _ => Ok(()),
    }
}

pub fn validate_tags(field: &str, tags: &[String]) -> Result<(), IdentityError> {
    if tags.len() > MAX_TAGS {
        return Err(IdentityError::InvalidArgument(format!(
            "{field}: at most {MAX_TAGS} tags are allowed, got {}",
            tags.len()
        )));
    }
    for tag in tags {
        let chars = tag.chars().count();
        if chars == 0 || chars > MAX_TAG_CHARS {
            return Err(IdentityError::InvalidArgument(format!(
                "{field}: each tag must be 1-{MAX_TAG_CHARS} characters, got {tag:?}"
            )));
        }
    }
    Ok(())
}

pub fn validate_importance(importance: u32) -> Result<(), IdentityError> {
    if (1..=10).contains(&importance) {
        Ok(())
    } else {
        Err(IdentityError::InvalidArgument(format!(
            "importance must be an integer from 1 to 10, got {importance}"
        )))
    }
}

/// The requested changes of an update, before they are checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntryPatch {
    pub title: Option<Option<String>>,
    pub content: Option<String>,
    pub tags: Option<Vec<String>>,
    pub entry_type: Option<EntryType>,
    pub importance: Option<u32>,
    pub injection_risk: Option<bool>,
    pub record_access: bool,
}

impl EntryPatch {
    fn touches_cid_inputs(&self) -> bool {
        self.title.is_some()
            || self.content.is_some()
            || self.tags.is_some()
            || self.entry_type.is_some()
    }

    pub fn is_empty(&self) -> bool {
        !self.touches_cid_inputs()
            && self.importance.is_none()
            && self.injection_risk.is_none()
            && !self.record_access
    }
}

/// Applies `patch` to `entry` under the seed's rules and returns the updated entry (with
/// its content hash recomputed when a CID input changed). Refusals change nothing.
pub fn apply_patch(
    entry: &Entry,
    patch: &EntryPatch,
    now: OffsetDateTime,
) -> Result<Entry, IdentityError> {
    if patch.is_empty() {
        return Err(IdentityError::InvalidArgument(
            "nothing to update: give at least one of title, content, tags, entryType, \
             importance, injectionRisk or recordAccess"
                .into(),
        ));
    }
    if entry.is_signed() && patch.touches_cid_inputs() {
        return Err(IdentityError::FailedPrecondition(IMMUTABLE_MESSAGE.into()));
    }
    if let Some(importance) = patch.importance {
        validate_importance(importance)?;
        if entry.is_signed()
            && importance != entry.importance
            && entry.entry_type.importance_frozen_when_signed()
        {
            return Err(IdentityError::FailedPrecondition(format!(
                "Importance is immutable on signed {} entries.",
                entry.entry_type.as_str()
            )));
        }
    }
    let mut next = entry.clone();
    if let Some(title) = &patch.title {
        validate_title(title.as_deref())?;
        next.title = title.clone();
    }
    if let Some(content) = &patch.content {
        validate_content(content, entry.visibility)?;
        next.content = content.clone();
    }
    if let Some(tags) = &patch.tags {
        validate_tags("tags", tags)?;
        next.tags = Some(tags.clone());
    }
    if let Some(entry_type) = patch.entry_type {
        next.entry_type = entry_type;
    }
    if let Some(importance) = patch.importance {
        next.importance = importance;
    }
    if let Some(risk) = patch.injection_risk {
        next.injection_risk = risk;
    }
    if patch.record_access {
        next.access_count = next.access_count.saturating_add(1);
        next.last_accessed_at = Some(now);
    }
    if patch.touches_cid_inputs() {
        next.content_hash = next.computed_hash();
    }
    next.updated_at = now;
    Ok(next)
}

/// Refuses deleting a signed entry.
pub fn check_deletable(entry: &Entry) -> Result<(), IdentityError> {
    if entry.is_signed() {
        Err(IdentityError::FailedPrecondition(
            UNDELETABLE_MESSAGE.into(),
        ))
    } else {
        Ok(())
    }
}

/// A new entry's importance: the default for 0, else checked.
pub fn importance_or_default(importance: u32) -> Result<u32, IdentityError> {
    match importance {
        0 => Ok(DEFAULT_IMPORTANCE),
        n => {
            validate_importance(n)?;
            Ok(n)
        }
    }
}

/// MoltNet's create-signed flow: a submitted contentHash must be the computed one, and
/// comes only with the signing request that signed it.
pub fn check_submitted_hash(
    provided: &str,
    computed: &str,
    with_signing_request: bool,
) -> Result<(), IdentityError> {
    if !provided.is_empty() && provided != computed {
        return Err(IdentityError::InvalidArgument(format!(
            "Content hash mismatch: provided {provided}, computed {computed}"
        )));
    }
    if !with_signing_request && !provided.is_empty() {
        return Err(IdentityError::InvalidArgument(
            "contentHash requires signingRequestId to create a signed entry.".into(),
        ));
    }
    Ok(())
}

/// The entry types of a list filter, each checked and spelled as stored.
pub fn type_filters(types: &[String]) -> Result<Vec<String>, IdentityError> {
    types
        .iter()
        .map(|t| {
            if t.is_empty() {
                Err(IdentityError::InvalidArgument(
                    "entry type filters must not be empty".into(),
                ))
            } else {
                EntryType::parse(t).map(|t| t.as_str().to_owned())
            }
        })
        .collect()
}

/// Tags of a list filter: valid tags, without the commas a REST query would split on.
pub fn validate_tag_filter(field: &str, tags: &[String]) -> Result<(), IdentityError> {
    validate_tags(field, tags)?;
    if tags.iter().any(|t| t.contains(',')) {
        return Err(IdentityError::InvalidArgument(format!(
            "{field}: tag filters must not contain commas; repeat the parameter instead"
        )));
    }
    Ok(())
}

/// What verifying a signed entry found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    pub hash_matches: bool,
    pub signature_valid: bool,
    /// Why it is not valid; empty when it is.
    pub reason: String,
}

/// Verifies `signature` of `entry` (its content still hashing to the signed CID, and the
/// signature over MoltNet's signing bytes) under `key`, the signer's key with the recorded
/// fingerprint if one is known.
pub fn verify(
    entry: &Entry,
    signature: &EntrySignature,
    key: Option<&noema_core::keys::PublicKey>,
) -> Verification {
    use noema_core::keys;
    let hash_matches = entry.computed_hash() == entry.content_hash;
    let signature_valid = key.is_some_and(|key| {
        let bytes = keys::moltnet_signing_bytes(&entry.content_hash, &signature.nonce);
        keys::Signature::from_base64(&signature.signature)
            .map(|s| keys::verify(key, &bytes, &s))
            .unwrap_or(false)
    });
    let reason = match (hash_matches, signature_valid, key.is_some()) {
        (true, true, _) => String::new(),
        (false, _, _) => "the content no longer hashes to the signed contentHash".into(),
        (true, false, false) => format!(
            "no key of {:?} with the signer's fingerprint",
            signature.signed_by
        ),
        (true, false, true) => "the signature does not verify against the signer's key".into(),
    };
    Verification {
        hash_matches,
        signature_valid,
        reason,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn entry(entry_type: EntryType, signed: bool) -> Entry {
        let mut e = Entry {
            id: "e".into(),
            diary_id: "d".into(),
            title: Some("Title".into()),
            content: "Content".into(),
            tags: Some(vec!["tag1".into()]),
            entry_type,
            importance: 5,
            injection_risk: false,
            access_count: 0,
            last_accessed_at: None,
            content_hash: String::new(),
            signature: None,
            created_by: "agent:a".into(),
            creator_public_key: None,
            created_at: OffsetDateTime::UNIX_EPOCH,
            updated_at: OffsetDateTime::UNIX_EPOCH,
            superseded: false,
            visibility: Visibility::Private,
        };
        e.content_hash = e.computed_hash();
        if signed {
            e.signature = Some(EntrySignature {
                signature: "sig".into(),
                nonce: "n".into(),
                signing_request_id: "r".into(),
                signed_by: "agent:a".into(),
                signer_fingerprint: "F".into(),
                signed_at: OffsetDateTime::UNIX_EPOCH,
                chain_seq: 1,
                chain_prev: String::new(),
                chain_hash: "h".into(),
            });
        }
        e
    }

    #[test]
    fn the_compat_vector_is_the_entry_hash() {
        assert_eq!(
            entry(EntryType::Semantic, false).content_hash,
            "bafkreidxfykbrvutwidnpsnto4ij6kpe6r3oofqthfc5ohvcmrpsw3irse"
        );
    }

    /// Seed 004's state × constraint matrix: (type, signed) → content, tags, importance
    /// mutable. Visibility affects none of it.
    #[test]
    fn state_constraint_matrix() {
        let now = OffsetDateTime::UNIX_EPOCH + time::Duration::hours(1);
        for entry_type in EntryType::ALL {
            for signed in [false, true] {
                for visibility in [Visibility::Private, Visibility::Moltnet, Visibility::Public] {
                    let mut e = entry(entry_type, signed);
                    e.visibility = visibility;
                    let content = apply_patch(
                        &e,
                        &EntryPatch {
                            content: Some("changed".into()),
                            ..EntryPatch::default()
                        },
                        now,
                    );
                    let tags = apply_patch(
                        &e,
                        &EntryPatch {
                            tags: Some(vec!["other".into()]),
                            ..EntryPatch::default()
                        },
                        now,
                    );
                    let importance = apply_patch(
                        &e,
                        &EntryPatch {
                            importance: Some(9),
                            ..EntryPatch::default()
                        },
                        now,
                    );
                    assert_eq!(content.is_ok(), !signed, "{entry_type:?} {signed}");
                    assert_eq!(tags.is_ok(), !signed, "{entry_type:?} {signed}");
                    let frozen = signed && entry_type.importance_frozen_when_signed();
                    assert_eq!(importance.is_ok(), !frozen, "{entry_type:?} {signed}");
                    // Injection risk and access are always allowed.
                    let always = apply_patch(
                        &e,
                        &EntryPatch {
                            injection_risk: Some(true),
                            record_access: true,
                            ..EntryPatch::default()
                        },
                        now,
                    )
                    .unwrap();
                    assert_eq!(always.access_count, 1);
                    assert_eq!(always.content_hash, e.content_hash);
                    assert_eq!(check_deletable(&e).is_ok(), !signed);
                }
            }
        }
    }

    #[test]
    fn draft_updates_recompute_the_hash_from_merged_fields() {
        let e = entry(EntryType::Semantic, false);
        let now = OffsetDateTime::UNIX_EPOCH;
        let next = apply_patch(
            &e,
            &EntryPatch {
                title: Some(None),
                tags: Some(vec![]),
                ..EntryPatch::default()
            },
            now,
        )
        .unwrap();
        assert_eq!(
            next.content_hash,
            "bafkreid5liobpxc3pneqhqzj55uewevi7ekznbyq2zskfhfla5vb62lqhe"
        );
        let same = apply_patch(
            &e,
            &EntryPatch {
                importance: Some(7),
                ..EntryPatch::default()
            },
            now,
        )
        .unwrap();
        assert_eq!(same.content_hash, e.content_hash);
    }

    #[test]
    fn bad_values_are_refused_with_what_to_fix() {
        let e = entry(EntryType::Semantic, false);
        let now = OffsetDateTime::UNIX_EPOCH;
        let err = apply_patch(&e, &EntryPatch::default(), now).unwrap_err();
        assert!(err.to_string().contains("nothing to update"));
        let err = apply_patch(
            &e,
            &EntryPatch {
                importance: Some(11),
                ..EntryPatch::default()
            },
            now,
        )
        .unwrap_err();
        assert!(err.to_string().contains("1 to 10"));
        assert!(validate_content(&"x".repeat(10_001), Visibility::Public).is_err());
        assert!(validate_content(&"x".repeat(10_001), Visibility::Private).is_ok());
        assert!(validate_tags("tags", &[String::new()]).is_err());
        assert!(EntryType::parse("memo").is_err());
        assert_eq!(EntryType::parse("").unwrap(), EntryType::Semantic);
    }

    #[test]
    fn a_submitted_hash_must_match_and_needs_a_signing_request() {
        assert!(check_submitted_hash("", "bafk", false).is_ok());
        assert!(check_submitted_hash("bafk", "bafk", true).is_ok());
        assert_eq!(
            check_submitted_hash("bafx", "bafk", true)
                .unwrap_err()
                .to_string(),
            "Content hash mismatch: provided bafx, computed bafk"
        );
        // The mismatch is reported first, as MoltNet does.
        assert!(
            check_submitted_hash("bafx", "bafk", false)
                .unwrap_err()
                .to_string()
                .starts_with("Content hash mismatch")
        );
        assert!(
            check_submitted_hash("bafk", "bafk", false)
                .unwrap_err()
                .to_string()
                .starts_with("contentHash requires signingRequestId")
        );
        assert_eq!(importance_or_default(0).unwrap(), DEFAULT_IMPORTANCE);
        assert!(importance_or_default(11).is_err());
        assert_eq!(type_filters(&["semantic".into()]).unwrap(), ["semantic"]);
        assert!(type_filters(&[String::new()]).is_err());
        assert!(validate_tag_filter("tags", &["a,b".into()]).is_err());
    }
}
