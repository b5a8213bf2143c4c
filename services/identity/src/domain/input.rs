//! Checks every aggregate's requests share: required fields and page sizes.

use crate::error::IdentityError;

pub fn required(field: &str, value: &str) -> Result<(), IdentityError> {
    if value.trim().is_empty() {
        Err(IdentityError::InvalidArgument(format!(
            "{field} is required"
        )))
    } else {
        Ok(())
    }
}

/// `requested` as a page size: `default` for 0, refused above `max`.
pub fn limit(field: &str, requested: u32, default: u32, max: u32) -> Result<u32, IdentityError> {
    match requested {
        0 => Ok(default),
        n if n <= max => Ok(n),
        n => Err(IdentityError::InvalidArgument(format!(
            "{field} must be 1-{max}, got {n}"
        ))),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn limits_default_cap_and_refuse() {
        assert_eq!(limit("limit", 0, 20, 100).unwrap(), 20);
        assert_eq!(limit("limit", 100, 20, 100).unwrap(), 100);
        let err = limit("limit", 101, 20, 100).unwrap_err();
        assert_eq!(err.to_string(), "limit must be 1-100, got 101");
        assert!(required("diary_id", " ").is_err());
        assert!(required("diary_id", "d").is_ok());
    }
}
