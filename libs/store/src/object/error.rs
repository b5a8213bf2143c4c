//! The one error type of every object store.

/// Any error, boxed so that its source chain survives.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The URL forms [`crate::object::open`] accepts, quoted in every URL error.
pub const ACCEPTED_OBJECT_STORE_URLS: &str = "file:///<absolute dir>, file://<relative dir>, \
     pack:///<absolute dir>, pack://<relative dir>, \
     s3://<bucket>[/<prefix>][?endpoint=<http(s) URL>&region=<region>&force_path_style=<bool>&create_bucket=<bool>], or \
     s3+pack://<bucket>[/<prefix>][?<the parameters of s3://>] (a service's store only)";

/// Errors from an [`crate::object::ObjectStore`].
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// The store URL is malformed or names an unsupported backend.
    #[error(
        "invalid object store URL `{url_redacted}`: {reason}; accepted forms: {ACCEPTED_OBJECT_STORE_URLS}"
    )]
    InvalidUrl {
        url_redacted: String,
        reason: String,
    },

    /// The key (or list prefix) breaks the key rules; nothing was sent to the backend.
    #[error("invalid object key {key:?}: {reason}")]
    InvalidKey { key: String, reason: &'static str },

    /// No object under this key.
    #[error("object {key:?} not found")]
    NotFound { key: String },

    /// The backend could not be reached or failed transiently (network, timeout, 5xx,
    /// throttling, injected fault). Retrying may succeed. For a `put`, the bytes may or may not
    /// have been stored.
    #[error("object store unavailable during {op} of {target:?}")]
    Unavailable {
        op: &'static str,
        target: String,
        #[source]
        source: BoxError,
    },

    /// The backend refused or failed permanently (permission denied, missing bucket, full disk,
    /// a key that conflicts with a directory on file://, …). Retrying will not help.
    #[error("object store failed during {op} of {target:?}")]
    Backend {
        op: &'static str,
        target: String,
        #[source]
        source: BoxError,
    },
}

impl ObjectError {
    /// `true` for [`ObjectError::NotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, ObjectError::NotFound { .. })
    }

    /// `true` for [`ObjectError::Unavailable`]: the operation may succeed if retried.
    pub fn is_retryable(&self) -> bool {
        matches!(self, ObjectError::Unavailable { .. })
    }

    pub(crate) fn unavailable(
        op: &'static str,
        target: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> Self {
        ObjectError::Unavailable {
            op,
            target: target.into(),
            source: source.into(),
        }
    }

    pub(crate) fn backend(
        op: &'static str,
        target: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> Self {
        ObjectError::Backend {
            op,
            target: target.into(),
            source: source.into(),
        }
    }
}
