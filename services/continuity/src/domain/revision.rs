//! A subject's history (Noema's addition): every capsule write is an immutable revision whose
//! id is the content id of a canonical record naming its predecessor, so a subject's history
//! is a hash chain — an edited, dropped or reordered revision breaks it.

use noema_core::content_id::ContentId;
use serde_json::json;

use super::json::sha256_hex;
use super::subject::SubjectKey;

/// What wrote a revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Upsert,
    Patch,
    Lifecycle,
    Revalidate,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Upsert => "upsert",
            Operation::Patch => "patch",
            Operation::Lifecycle => "lifecycle",
            Operation::Revalidate => "revalidate",
        }
    }

    pub fn parse(text: &str) -> Option<Operation> {
        [
            Operation::Upsert,
            Operation::Patch,
            Operation::Lifecycle,
            Operation::Revalidate,
        ]
        .into_iter()
        .find(|op| op.as_str() == text)
    }
}

/// The fields a revision id commits to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionRecord<'a> {
    pub tenant: &'a str,
    pub subject: &'a SubjectKey,
    /// 1 for the subject's first revision.
    pub sequence: i64,
    /// The predecessor's id, `""` for the first.
    pub previous: &'a str,
    pub operation: Operation,
    /// Hex SHA-256 of the capsule bytes.
    pub capsule_sha256: &'a str,
}

impl RevisionRecord<'_> {
    /// `sha256:<hex>` of the record's RFC 8785 bytes.
    pub fn id(&self) -> String {
        let record = json!({
            "capsule_sha256": self.capsule_sha256,
            "operation": self.operation.as_str(),
            "previous": self.previous,
            "sequence": self.sequence,
            "subject": format!("{}:{}", self.subject.kind, self.subject.key),
            "tenant": self.tenant,
        });
        // Strings and an integer: canonicalisation cannot fail.
        ContentId::of_json(&record)
            .map(ContentId::into_string)
            .unwrap_or_default()
    }
}

/// One stored revision as history lists it (newest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRevision {
    pub revision_id: String,
    pub previous: String,
    pub sequence: i64,
    pub operation: String,
    pub capsule_sha256: String,
    pub capsule: Vec<u8>,
}

/// Whether `revisions` (newest first, a contiguous run ending at the subject's first
/// revision or not) recompute to their ids, hash their capsules and link to each other.
pub fn chain_intact(tenant: &str, subject: &SubjectKey, revisions: &[StoredRevision]) -> bool {
    revisions.iter().enumerate().all(|(i, revision)| {
        let Some(operation) = Operation::parse(&revision.operation) else {
            return false;
        };
        let record = RevisionRecord {
            tenant,
            subject,
            sequence: revision.sequence,
            previous: &revision.previous,
            operation,
            capsule_sha256: &revision.capsule_sha256,
        };
        let links = match revisions.get(i + 1) {
            Some(older) => {
                older.revision_id == revision.previous && older.sequence + 1 == revision.sequence
            }
            None => revision.sequence > 1 || revision.previous.is_empty(),
        };
        record.id() == revision.revision_id
            && (revision.capsule.is_empty()
                || sha256_hex(&revision.capsule) == revision.capsule_sha256)
            && links
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::domain::model::SubjectKind;

    fn revision(
        subject: &SubjectKey,
        sequence: i64,
        previous: &str,
        capsule: &[u8],
    ) -> StoredRevision {
        let sha = sha256_hex(capsule);
        let id = RevisionRecord {
            tenant: "t",
            subject,
            sequence,
            previous,
            operation: Operation::Upsert,
            capsule_sha256: &sha,
        }
        .id();
        StoredRevision {
            revision_id: id,
            previous: previous.to_owned(),
            sequence,
            operation: "upsert".into(),
            capsule_sha256: sha,
            capsule: capsule.to_vec(),
        }
    }

    #[test]
    fn a_history_is_a_hash_chain() {
        let subject = SubjectKey::new(SubjectKind::User, "alice").unwrap();
        let first = revision(&subject, 1, "", b"{\"a\":1}");
        let second = revision(&subject, 2, &first.revision_id, b"{\"a\":2}");
        assert!(first.revision_id.starts_with("sha256:"));
        let history = vec![second.clone(), first.clone()];
        assert!(chain_intact("t", &subject, &history));
        // Another tenant's chain does not recompute.
        assert!(!chain_intact("u", &subject, &history));
        // A changed capsule, a dropped revision or a reordering breaks it.
        let mut edited = history.clone();
        edited[1].capsule = b"{\"a\":3}".to_vec();
        assert!(!chain_intact("t", &subject, &edited));
        let third = revision(&subject, 3, &second.revision_id, b"{}");
        assert!(!chain_intact(
            "t",
            &subject,
            &[third.clone(), first.clone()]
        ));
        assert!(!chain_intact("t", &subject, &[first, second]));
        // A page that ends before the first revision still checks its own links.
        assert!(chain_intact("t", &subject, &[third]));
    }
}
