//! Audit entries and the hash chain that makes tampering detectable. Every service keeps
//! its own chained log of its writes; this module holds the rules they share.
//!
//! Each entry's hash is `sha256:` over the RFC 8785 (JCS) bytes of the entry's fields,
//! including the previous entry's hash, so deleting, reordering or editing any row
//! breaks every link after it.

use crate::content_id::ContentId;
use crate::jcs::{self, JcsError};
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// An entry about to be appended: what happened, not yet placed in the chain.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditDraft {
    pub actor: String,
    pub action: String,
    pub target_id: Option<String>,
    pub target_type: Option<String>,
    pub detail: Option<Value>,
}

/// An entry as stored: placed in the chain with its id, time and hashes.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    pub id: i64,
    pub occurred_at: OffsetDateTime,
    pub actor: String,
    pub action: String,
    pub target_id: Option<String>,
    pub target_type: Option<String>,
    pub detail: Option<Value>,
    pub prev_hash: String,
    pub hash: String,
}

/// Stored timestamps keep microseconds (Postgres' precision) so a hash recomputed from
/// a row read back equals the hash computed at append time.
pub fn truncate_to_micros(at: OffsetDateTime) -> OffsetDateTime {
    let micros = at.microsecond();
    at.replace_microsecond(micros).unwrap_or(at)
}

impl AuditDraft {
    /// Places the draft in the chain after `(prev_id, prev_hash)`.
    pub fn chain(
        self,
        prev_id: i64,
        prev_hash: &str,
        occurred_at: OffsetDateTime,
    ) -> Result<AuditEntry, JcsError> {
        let mut entry = AuditEntry {
            id: prev_id + 1,
            occurred_at: truncate_to_micros(occurred_at),
            actor: self.actor,
            action: self.action,
            target_id: self.target_id,
            target_type: self.target_type,
            detail: self.detail,
            prev_hash: prev_hash.to_owned(),
            hash: String::new(),
        };
        entry.hash = entry.compute_hash()?;
        Ok(entry)
    }
}

impl AuditEntry {
    /// The hash this entry should carry, from its own fields.
    pub fn compute_hash(&self) -> Result<String, JcsError> {
        Ok(ContentId::of_bytes(self.canonical_text()?.as_bytes()).into_string())
    }

    /// The RFC 8785 form of the entry's fields. Assembled by hand because it is computed
    /// for every write, inside the serialised append: the keys are fixed, so they are
    /// written in their sorted order, and only `id` and `detail` go through the general
    /// canonicalizer (`id` because JCS writes every number as an ECMAScript double).
    fn canonical_text(&self) -> Result<String, JcsError> {
        fn optional(out: &mut String, value: Option<&str>) {
            match value {
                Some(text) => jcs::write_string(out, text),
                None => out.push_str("null"),
            }
        }
        let occurred_at = self
            .occurred_at
            .format(&Rfc3339)
            .unwrap_or_else(|_| self.occurred_at.unix_timestamp_nanos().to_string());
        let mut out = String::with_capacity(256);
        out.push_str("{\"action\":");
        jcs::write_string(&mut out, &self.action);
        out.push_str(",\"actor\":");
        jcs::write_string(&mut out, &self.actor);
        out.push_str(",\"detail\":");
        match &self.detail {
            Some(detail) => out.push_str(&jcs::canonical_string(detail)?),
            None => out.push_str("null"),
        }
        out.push_str(",\"id\":");
        out.push_str(&jcs::canonical_string(&Value::from(self.id))?);
        out.push_str(",\"occurred_at\":");
        jcs::write_string(&mut out, &occurred_at);
        out.push_str(",\"prev_hash\":");
        jcs::write_string(&mut out, &self.prev_hash);
        out.push_str(",\"target_id\":");
        optional(&mut out, self.target_id.as_deref());
        out.push_str(",\"target_type\":");
        optional(&mut out, self.target_type.as_deref());
        out.push('}');
        Ok(out)
    }
}

/// Where a chain walk found the first broken link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainBreak {
    /// The entry's stored hash is not the hash of its fields: it was edited.
    HashMismatch { id: i64 },
    /// The entry does not point at the previous entry's hash: a row was removed or reordered.
    BrokenLink { id: i64, expected_prev_hash: String },
    /// Ids are not consecutive: a row was removed.
    Gap { after_id: i64, next_id: i64 },
}

/// Checks entries given oldest first, continuing from `(prev_id, prev_hash)`.
/// Returns the id and hash of the last good entry, or the first break.
pub fn verify_chain<'a>(
    mut prev_id: i64,
    mut prev_hash: String,
    entries: impl IntoIterator<Item = &'a AuditEntry>,
) -> Result<(i64, String), ChainBreak> {
    for entry in entries {
        if entry.id != prev_id + 1 {
            return Err(ChainBreak::Gap {
                after_id: prev_id,
                next_id: entry.id,
            });
        }
        if entry.prev_hash != prev_hash {
            return Err(ChainBreak::BrokenLink {
                id: entry.id,
                expected_prev_hash: prev_hash,
            });
        }
        if entry.compute_hash().ok().as_deref() != Some(entry.hash.as_str()) {
            return Err(ChainBreak::HashMismatch { id: entry.id });
        }
        prev_id = entry.id;
        prev_hash = entry.hash.clone();
    }
    Ok((prev_id, prev_hash))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn draft(action: &str) -> AuditDraft {
        AuditDraft {
            actor: "human:test".into(),
            action: action.into(),
            target_id: None,
            target_type: Some("system_state".into()),
            detail: Some(json!({"mode": "STOPPED"})),
        }
    }

    /// The entry's fields as a JSON object, canonicalized by the general JCS code: what
    /// the hand-assembled text must equal byte for byte.
    fn reference_text(e: &AuditEntry) -> String {
        let value = json!({
            "id": e.id,
            "occurred_at": e.occurred_at.format(&Rfc3339).unwrap(),
            "actor": e.actor,
            "action": e.action,
            "target_id": e.target_id,
            "target_type": e.target_type,
            "detail": e.detail,
            "prev_hash": e.prev_hash,
        });
        String::from_utf8(crate::jcs::canonicalize(&value).unwrap()).unwrap()
    }

    #[test]
    fn the_hashed_text_is_the_jcs_form_of_the_fields() {
        let base = draft("create_canonical")
            .chain(41, "sha256:ab", OffsetDateTime::UNIX_EPOCH)
            .unwrap();
        let ids = [
            0,
            1,
            42,
            (1 << 53) - 1,
            1 << 53,
            (1 << 53) + 1,
            i64::MAX,
            -7,
        ];
        let details = [
            None,
            Some(json!({})),
            Some(
                json!({"b": [1.5, 1e21, -0.0, null], "a": {"é": "x", "\u{1f600}": "y", "z": true}}),
            ),
            Some(json!("text")),
        ];
        let texts = [
            "",
            "human:\"quoted\"\n\u{0}\u{7f}",
            "agent:ünïcode \u{2028}/",
        ];
        for (n, id) in ids.into_iter().enumerate() {
            for (m, detail) in details.iter().enumerate() {
                let text = texts[(n + m) % texts.len()];
                let entry = AuditEntry {
                    id,
                    actor: text.into(),
                    action: texts[(n + m + 1) % texts.len()].into(),
                    target_id: (m % 2 == 0).then(|| text.to_owned()),
                    target_type: (n % 2 == 0).then(|| "canonical_object".to_owned()),
                    detail: detail.clone(),
                    occurred_at: OffsetDateTime::from_unix_timestamp_nanos(
                        1_700_000_000_123_456_000 + i128::from(id % 1000),
                    )
                    .unwrap(),
                    ..base.clone()
                };
                let text = entry.canonical_text().unwrap();
                assert_eq!(text, reference_text(&entry), "id {id}, detail {m}");
                assert_eq!(
                    entry.compute_hash().unwrap(),
                    ContentId::of_bytes(reference_text(&entry).as_bytes()).into_string()
                );
            }
        }
    }

    fn chain_of(n: usize) -> Vec<AuditEntry> {
        let mut out: Vec<AuditEntry> = Vec::new();
        for i in 0..n {
            let (id, hash) = out
                .last()
                .map(|e| (e.id, e.hash.clone()))
                .unwrap_or((0, String::new()));
            out.push(
                draft(&format!("a{i}"))
                    .chain(id, &hash, OffsetDateTime::UNIX_EPOCH)
                    .unwrap(),
            );
        }
        out
    }

    #[test]
    fn an_intact_chain_verifies() {
        let entries = chain_of(4);
        let (last_id, last_hash) = verify_chain(0, String::new(), &entries).unwrap();
        assert_eq!(last_id, 4);
        assert_eq!(last_hash, entries[3].hash);
    }

    #[test]
    fn an_edited_entry_is_found() {
        let mut entries = chain_of(4);
        entries[2].actor = "human:mallory".into();
        assert_eq!(
            verify_chain(0, String::new(), &entries),
            Err(ChainBreak::HashMismatch { id: 3 })
        );
    }

    #[test]
    fn a_removed_entry_is_found() {
        let mut entries = chain_of(4);
        entries.remove(1);
        assert_eq!(
            verify_chain(0, String::new(), &entries),
            Err(ChainBreak::Gap {
                after_id: 1,
                next_id: 3
            })
        );
    }

    #[test]
    fn a_rehashed_but_relinked_entry_is_found() {
        let mut entries = chain_of(3);
        entries[1].actor = "human:mallory".into();
        entries[1].hash = entries[1].compute_hash().unwrap();
        assert!(matches!(
            verify_chain(0, String::new(), &entries),
            Err(ChainBreak::BrokenLink { id: 3, .. })
        ));
    }

    #[test]
    fn hashes_ignore_sub_microsecond_time() {
        let at = OffsetDateTime::UNIX_EPOCH + time::Duration::nanoseconds(1_234_567);
        let a = draft("x").chain(0, "", at).unwrap();
        let micros = OffsetDateTime::UNIX_EPOCH + time::Duration::microseconds(1_234);
        let b = draft("x").chain(0, "", micros).unwrap();
        assert_eq!(a.hash, b.hash);
    }
}
