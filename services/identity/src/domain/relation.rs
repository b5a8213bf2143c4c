//! Entry relations: six types, three statuses; supersession is an accepted `supersedes`
//! relation from the successor (source) to the replaced entry (target), never a column.

use time::OffsetDateTime;

use crate::error::IdentityError;

pub const RELATIONS: [&str; 6] = [
    "supersedes",
    "elaborates",
    "contradicts",
    "supports",
    "caused_by",
    "references",
];
pub const STATUSES: [&str; 3] = ["proposed", "accepted", "rejected"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    pub id: String,
    pub source_id: String,
    pub target_id: String,
    pub relation: String,
    pub status: String,
    pub source_cid_snapshot: Option<String>,
    pub target_cid_snapshot: Option<String>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

pub fn validate_relation(relation: &str) -> Result<(), IdentityError> {
    if RELATIONS.contains(&relation) {
        Ok(())
    } else {
        Err(IdentityError::InvalidArgument(format!(
            "relation {relation:?} is not one of {}",
            RELATIONS.join(", ")
        )))
    }
}

/// A status for a new relation: proposed (default) or accepted.
pub fn creation_status(status: &str) -> Result<String, IdentityError> {
    match status {
        "" => Ok("proposed".into()),
        "proposed" | "accepted" => Ok(status.to_owned()),
        other => Err(IdentityError::InvalidArgument(format!(
            "status {other:?} for a new relation must be proposed or accepted"
        ))),
    }
}

pub fn validate_status(status: &str) -> Result<(), IdentityError> {
    if STATUSES.contains(&status) {
        Ok(())
    } else {
        Err(IdentityError::InvalidArgument(format!(
            "status {status:?} is not one of proposed, accepted, rejected"
        )))
    }
}

/// as_source | as_target | both (default).
pub fn validate_direction(direction: &str) -> Result<&'static str, IdentityError> {
    match direction {
        "" | "both" => Ok("both"),
        "as_source" => Ok("as_source"),
        "as_target" => Ok("as_target"),
        other => Err(IdentityError::InvalidArgument(format!(
            "direction {other:?} is not one of as_source, as_target, both"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocabularies() {
        for r in RELATIONS {
            assert!(validate_relation(r).is_ok());
        }
        assert!(validate_relation("replaces").is_err());
        assert_eq!(creation_status("").ok().as_deref(), Some("proposed"));
        assert!(creation_status("rejected").is_err());
        assert!(validate_status("rejected").is_ok());
        assert!(validate_direction("up").is_err());
    }
}
