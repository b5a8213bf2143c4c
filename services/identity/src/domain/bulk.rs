//! Deleting many entries at once (MoltNet's `DELETE /entries`, compat §7): the request's
//! rules and which per-entry refusals are skips. Each id is then handled exactly as a single
//! `DeleteEntry` (the api layer reuses its access check and the store's deletion).
//!
//! Where the compat digest is silent this module decides: ids are UUIDs in the hyphenated
//! form (either case, as JSON Schema's `uuid` format allows, without the `urn:uuid:` prefix);
//! they are compared and answered in their canonical lowercase form, so `A…` and `a…` are
//! duplicates.

use std::collections::HashMap;

use uuid::Uuid;

use crate::error::IdentityError;

/// At most this many ids per request.
pub const MAX_IDS: usize = 100;

/// Checks the ids (1-[`MAX_IDS`], each a UUID, no repeats) and returns them canonical, in
/// request order. The first rule broken is reported.
pub fn delete_ids(ids: &[String]) -> Result<Vec<String>, IdentityError> {
    if ids.is_empty() || ids.len() > MAX_IDS {
        return Err(IdentityError::InvalidArgument(format!(
            "ids must list 1-{MAX_IDS} entry ids, got {}",
            ids.len()
        )));
    }
    let mut seen: HashMap<String, usize> = HashMap::with_capacity(ids.len());
    let mut canonical = Vec::with_capacity(ids.len());
    for (i, id) in ids.iter().enumerate() {
        let parsed = (id.len() == 36)
            .then(|| Uuid::try_parse(id).ok())
            .flatten()
            .ok_or_else(|| {
                IdentityError::InvalidArgument(format!("ids[{i}] must be a UUID, got {id:?}"))
            })?;
        let id = parsed.hyphenated().to_string();
        if let Some(first) = seen.insert(id.clone(), i) {
            return Err(IdentityError::InvalidArgument(format!(
                "ids must be unique: ids[{i}] repeats ids[{first}] ({id})"
            )));
        }
        canonical.push(id);
    }
    Ok(canonical)
}

/// Whether a single delete's refusal makes the id skipped rather than failing the request:
/// missing or unreadable (not found), not writable (permission denied), signed or gone
/// meanwhile (failed precondition). Anything else (storage, audit) is a real error.
pub fn is_skip(err: &IdentityError) -> bool {
    matches!(
        err,
        IdentityError::NotFound(_)
            | IdentityError::PermissionDenied(_)
            | IdentityError::FailedPrecondition(_)
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const A: &str = "0b7f3c1e-5d2a-4c8e-9f10-2a3b4c5d6e7f";
    const B: &str = "00000000-0000-4000-8000-000000000000";

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    fn message(err: IdentityError) -> String {
        match err {
            IdentityError::InvalidArgument(m) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn keeps_request_order_and_canonicalises_case() {
        let upper = A.to_uppercase();
        assert_eq!(
            delete_ids(&ids(&[B, &upper])).unwrap(),
            ids(&[B, A]),
            "lowercase, same order"
        );
    }

    #[test]
    fn counts_from_one_to_a_hundred() {
        assert_eq!(
            message(delete_ids(&[]).unwrap_err()),
            "ids must list 1-100 entry ids, got 0"
        );
        let hundred: Vec<String> = (0..100)
            .map(|n| format!("00000000-0000-4000-8000-{n:012}"))
            .collect();
        assert_eq!(delete_ids(&hundred).unwrap().len(), 100);
        let mut too_many = hundred;
        too_many.push(A.into());
        assert_eq!(
            message(delete_ids(&too_many).unwrap_err()),
            "ids must list 1-100 entry ids, got 101"
        );
    }

    #[test]
    fn refuses_what_is_not_a_hyphenated_uuid() {
        let simple = A.replace('-', "");
        let braced = format!("{{{A}}}");
        let urn = format!("urn:uuid:{A}");
        for bad in [
            "",
            "nope",
            "0b7f3c1e-5d2a-4c8e-9f10-2a3b4c5d6e7g",
            &simple,
            &braced,
            &urn,
        ] {
            assert_eq!(
                message(delete_ids(&ids(&[A, bad])).unwrap_err()),
                format!("ids[1] must be a UUID, got {bad:?}")
            );
        }
    }

    #[test]
    fn refuses_repeats_in_any_case() {
        let upper = A.to_uppercase();
        assert_eq!(
            message(delete_ids(&ids(&[A, B, &upper])).unwrap_err()),
            format!("ids must be unique: ids[2] repeats ids[0] ({A})")
        );
    }

    #[test]
    fn only_refusals_of_a_single_delete_are_skips() {
        assert!(is_skip(&IdentityError::NotFound("x".into())));
        assert!(is_skip(&IdentityError::PermissionDenied("x".into())));
        assert!(is_skip(&IdentityError::FailedPrecondition("x".into())));
        assert!(!is_skip(&IdentityError::InvalidArgument("x".into())));
        assert!(!is_skip(&IdentityError::Corrupt("x".into())));
        assert!(!is_skip(&IdentityError::Database(sqlx::Error::PoolClosed)));
    }
}
