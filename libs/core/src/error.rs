//! The one small error vocabulary every service speaks.
//!
//! Each service's own error enum says which `ErrorCode` it is; this module knows how
//! each code travels on the wire (gRPC status code, HTTP status), so the mapping is
//! written exactly once.

use std::fmt;

/// The category of a failure, independent of transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    InvalidArgument,
    NotFound,
    AlreadyExists,
    FailedPrecondition,
    Unauthenticated,
    PermissionDenied,
    Unavailable,
    ResourceExhausted,
    Internal,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 9] = [
        ErrorCode::InvalidArgument,
        ErrorCode::NotFound,
        ErrorCode::AlreadyExists,
        ErrorCode::FailedPrecondition,
        ErrorCode::Unauthenticated,
        ErrorCode::PermissionDenied,
        ErrorCode::Unavailable,
        ErrorCode::ResourceExhausted,
        ErrorCode::Internal,
    ];

    pub fn grpc_code(self) -> tonic::Code {
        match self {
            ErrorCode::InvalidArgument => tonic::Code::InvalidArgument,
            ErrorCode::NotFound => tonic::Code::NotFound,
            ErrorCode::AlreadyExists => tonic::Code::AlreadyExists,
            ErrorCode::FailedPrecondition => tonic::Code::FailedPrecondition,
            ErrorCode::Unauthenticated => tonic::Code::Unauthenticated,
            ErrorCode::PermissionDenied => tonic::Code::PermissionDenied,
            ErrorCode::Unavailable => tonic::Code::Unavailable,
            ErrorCode::ResourceExhausted => tonic::Code::ResourceExhausted,
            ErrorCode::Internal => tonic::Code::Internal,
        }
    }

    /// HTTP status for this code. `FailedPrecondition` is 422 because the seed systems
    /// answer semantic validation failures (e.g. `public key mismatch`) with 422.
    pub fn http_status(self) -> http::StatusCode {
        use http::StatusCode as S;
        match self {
            ErrorCode::InvalidArgument => S::BAD_REQUEST,
            ErrorCode::NotFound => S::NOT_FOUND,
            ErrorCode::AlreadyExists => S::CONFLICT,
            ErrorCode::FailedPrecondition => S::UNPROCESSABLE_ENTITY,
            ErrorCode::Unauthenticated => S::UNAUTHORIZED,
            ErrorCode::PermissionDenied => S::FORBIDDEN,
            ErrorCode::Unavailable => S::SERVICE_UNAVAILABLE,
            ErrorCode::ResourceExhausted => S::TOO_MANY_REQUESTS,
            ErrorCode::Internal => S::INTERNAL_SERVER_ERROR,
        }
    }

    /// Inverse of [`ErrorCode::grpc_code`], used by the gateway on a status from a
    /// downstream service. Codes we never send map to the nearest category.
    pub fn from_grpc(code: tonic::Code) -> ErrorCode {
        use tonic::Code as C;
        match code {
            C::InvalidArgument | C::OutOfRange => ErrorCode::InvalidArgument,
            C::NotFound => ErrorCode::NotFound,
            C::AlreadyExists | C::Aborted => ErrorCode::AlreadyExists,
            C::FailedPrecondition => ErrorCode::FailedPrecondition,
            C::Unauthenticated => ErrorCode::Unauthenticated,
            C::PermissionDenied => ErrorCode::PermissionDenied,
            C::Unavailable | C::DeadlineExceeded | C::Cancelled => ErrorCode::Unavailable,
            C::ResourceExhausted => ErrorCode::ResourceExhausted,
            C::Ok | C::Unknown | C::Unimplemented | C::Internal | C::DataLoss => {
                ErrorCode::Internal
            }
        }
    }

    /// Stable snake_case name used in REST error bodies (`"code"`).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgument => "invalid_argument",
            ErrorCode::NotFound => "not_found",
            ErrorCode::AlreadyExists => "already_exists",
            ErrorCode::FailedPrecondition => "failed_precondition",
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::PermissionDenied => "permission_denied",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::ResourceExhausted => "resource_exhausted",
            ErrorCode::Internal => "internal",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Declares [`Reason`] from one table: each variant with its wire name.
macro_rules! reasons {
    ($( $(#[$doc:meta])* $variant:ident = $wire:literal, )*) => {
        /// Why a request failed, stable across releases. Callers (the gateway, the SDK,
        /// other services) decide on this, never on the message text. It travels as
        /// `google.rpc.ErrorInfo.reason` in the domain [`REASON_DOMAIN`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Reason {
            $( $(#[$doc])* $variant, )*
        }

        impl Reason {
            /// Every reason, in declaration order.
            pub const ALL: &'static [Reason] = &[$(Reason::$variant),*];

            /// The wire name (`SYSTEM_STOPPED`).
            pub fn as_str(self) -> &'static str {
                match self {
                    $( Reason::$variant => $wire, )*
                }
            }
        }
    };
}

reasons! {
    // One generic reason per code, for failures with nothing more specific to say.
    /// The request is malformed or a value is out of range.
    InvalidArgument = "INVALID_ARGUMENT",
    /// The named thing does not exist (or the caller may not know that it does).
    NotFound = "NOT_FOUND",
    /// The thing to create exists already.
    AlreadyExists = "ALREADY_EXISTS",
    /// The request is well formed but the current state refuses it.
    FailedPrecondition = "FAILED_PRECONDITION",
    /// No valid token.
    Unauthenticated = "UNAUTHENTICATED",
    /// The token lacks a scope or the caller lacks access.
    PermissionDenied = "PERMISSION_DENIED",
    /// A dependency is down or the process is shutting down; retry.
    Unavailable = "UNAVAILABLE",
    /// A quota or limit is exhausted.
    ResourceExhausted = "RESOURCE_EXHAUSTED",
    /// A bug or corrupt data; details are in the server's logs only.
    Internal = "INTERNAL",

    // Specific reasons.
    /// The request body is not JSON of the expected shape (decided by the gateway).
    MalformedBody = "MALFORMED_BODY",
    /// A query parameter cannot be read (decided by the gateway), e.g. a time filter
    /// that is not RFC 3339.
    MalformedQuery = "MALFORMED_QUERY",
    /// Writes are halted (open-cognition's STOPPED mode); [`STOPPED_MESSAGE`] says so.
    SystemStopped = "SYSTEM_STOPPED",
    /// Trust on first use: the agent is registered with another public key.
    PublicKeyMismatch = "PUBLIC_KEY_MISMATCH",
    /// Too many requests; `RetryInfo` says when to try again and the metadata names the
    /// quota (`quota`, `quota_limit`).
    RateLimited = "RATE_LIMITED",
    /// The request is in a state that does not allow the call (the orchestrator's 409);
    /// metadata `state` and `allowed` (the calls that would be accepted).
    WrongState = "WRONG_STATE",
    /// A document does not match its JSON Schema; metadata `schema` and `field`.
    SchemaViolation = "SCHEMA_VIOLATION",
    /// A document names a `schema_version` the server does not know.
    UnknownSchemaVersion = "UNKNOWN_SCHEMA_VERSION",
    /// The risk policy is missing or invalid ("risk matrix not loaded").
    PolicyNotLoaded = "POLICY_NOT_LOADED",
    /// An approval does not count; metadata `check` names the failed check.
    ApprovalRefused = "APPROVAL_REFUSED",
    /// An evaluation names a suite the risk policy does not declare.
    UnknownEvalSuite = "UNKNOWN_EVAL_SUITE",
    /// A signing request's time ran out before a signature was submitted.
    SigningRequestExpired = "SIGNING_REQUEST_EXPIRED",
    /// A signing request already has its signature; its nonce is spent.
    SigningRequestCompleted = "SIGNING_REQUEST_COMPLETED",
    /// The signature (hence its signing request) already signed another entry.
    SignatureReused = "SIGNATURE_REUSED",
    /// The object's bytes are in storage without a ledger row (an orphaned write), so
    /// this is not a harmless duplicate: reconcile.
    StorageConflict = "STORAGE_CONFLICT",
    /// CogniRelay's request-model validation failed (its 422 with pydantic's error list;
    /// the exact body is in the metadata).
    RequestModelInvalid = "REQUEST_MODEL_INVALID",
    /// The write is older than what is stored (CogniRelay's stale-write 409).
    StaleWrite = "STALE_WRITE",
    /// The write has the stored timestamp but other content (CogniRelay's 409).
    TimestampConflict = "TIMESTAMP_CONFLICT",
    /// Concurrent writers kept moving the record while this write retried; retry.
    LockTimeout = "LOCK_TIMEOUT",
    /// An idempotency key was used before with another request body.
    IdempotencyKeyReused = "IDEMPOTENCY_KEY_REUSED",
    /// The path is outside the token's read or write namespaces (CogniRelay's 403).
    NamespaceDenied = "NAMESPACE_DENIED",
    /// The token lacks the scope the call needs; metadata [`REQUIRED_SCOPE_KEY`] names the
    /// scopes any one of which would do, `|`-separated.
    ScopeMissing = "SCOPE_MISSING",
    /// Another attempt holds the world's lease (the world kernel's 409); retry when it ends.
    LeaseHeld = "LEASE_HELD",
    /// A component is not valid on its own; metadata `path` names the first problem.
    InvalidComponent = "INVALID_COMPONENT",
    /// A scenario's references do not assemble into executable workflows; metadata `path`.
    ScenarioNotExecutable = "SCENARIO_NOT_EXECUTABLE",
    /// No `Authorization` header (a 401).
    TokenMissing = "TOKEN_MISSING",
    /// An `Authorization` header that is not `Bearer <token>` (a 401).
    TokenMalformed = "TOKEN_MALFORMED",
    /// A bearer token that names no token (a 401).
    TokenInvalid = "TOKEN_INVALID",
    /// A revoked token (a 401).
    TokenRevoked = "TOKEN_REVOKED",
    /// An expired token (a 401).
    TokenExpired = "TOKEN_EXPIRED",
}

/// `ErrorInfo.metadata` key of a [`Reason::ScopeMissing`] failure: the scopes any one of
/// which the call accepts, `|`-separated (an RPC's declared `required_scope`).
pub const REQUIRED_SCOPE_KEY: &str = "required_scope";

/// The ledger's text for [`Reason::SystemStopped`] (open-cognition's own words), shared by
/// the ledger and by the gateway, which answers it before decoding a write.
pub const STOPPED_MESSAGE: &str = "system is STOPPED; no writes accepted";

/// `ErrorInfo.metadata` key naming the quota of a [`Reason::RateLimited`] failure.
pub const QUOTA_KEY: &str = "quota";
/// `ErrorInfo.metadata` key with the quota's limit, a decimal number.
pub const QUOTA_LIMIT_KEY: &str = "quota_limit";
/// The quota of pending signing requests per agent (MoltNet's signing-request limit).
pub const PENDING_SIGNING_REQUESTS: &str = "pending_signing_requests";

/// `ErrorInfo.metadata` key: the HTTP status the original system answers a refusal with
/// (decimal), sent by a service that reproduces the original's error bodies exactly.
pub const ORIGINAL_STATUS_KEY: &str = "http_status";
/// `ErrorInfo.metadata` key: the original's exact JSON error body for that refusal, which a
/// REST front sends byte for byte with [`ORIGINAL_STATUS_KEY`]'s status.
pub const ORIGINAL_BODY_KEY: &str = "body";

/// The `ErrorInfo` domain of every reason Noema sends.
pub const REASON_DOMAIN: &str = "noema";

impl Reason {
    /// The generic reason of a code.
    pub fn generic(code: ErrorCode) -> Reason {
        match code {
            ErrorCode::InvalidArgument => Reason::InvalidArgument,
            ErrorCode::NotFound => Reason::NotFound,
            ErrorCode::AlreadyExists => Reason::AlreadyExists,
            ErrorCode::FailedPrecondition => Reason::FailedPrecondition,
            ErrorCode::Unauthenticated => Reason::Unauthenticated,
            ErrorCode::PermissionDenied => Reason::PermissionDenied,
            ErrorCode::Unavailable => Reason::Unavailable,
            ErrorCode::ResourceExhausted => Reason::ResourceExhausted,
            ErrorCode::Internal => Reason::Internal,
        }
    }

    /// The reason with this wire name, if this build knows it.
    pub fn parse(wire: &str) -> Option<Reason> {
        Reason::ALL.iter().copied().find(|r| r.as_str() == wire)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Implemented by every service error: which category it is, why, and the message that
/// is safe to send to a caller. Internal causes are logged by the conversion, never sent.
pub trait ServiceError: std::error::Error {
    fn code(&self) -> ErrorCode;

    /// The stable machine reason. Defaults to the code's generic reason.
    fn reason(&self) -> Reason {
        Reason::generic(self.code())
    }

    /// Structured facts a caller may act on (`ErrorInfo.metadata`), e.g. the field at
    /// fault. Keys are `snake_case`.
    fn metadata(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// How long to wait before retrying, sent as `google.rpc.RetryInfo`.
    fn retry_after(&self) -> Option<std::time::Duration> {
        None
    }

    /// The text a caller sees. Defaults to the `Display` text, except for `Internal`,
    /// whose cause stays in the logs.
    fn public_message(&self) -> String {
        match self.code() {
            ErrorCode::Internal => "internal error".to_owned(),
            _ => self.to_string(),
        }
    }

    /// A suggestion on how to fix the request, sent as a `google.rpc.Help` detail (the
    /// gateway shows it as the seed systems' `hint` field).
    fn hint(&self) -> Option<String> {
        None
    }

    /// What crosses the hop: the parts above, put together.
    fn failure(&self) -> Failure {
        Failure {
            code: self.code(),
            reason: self.reason(),
            message: self.public_message(),
            metadata: self
                .metadata()
                .into_iter()
                .map(|(key, value)| (key.to_owned(), value))
                .collect(),
            retry_after: self.retry_after(),
            hint: self.hint(),
        }
    }
}

/// The single conversion from a service error to a `tonic::Status`: code, public message,
/// `ErrorInfo` (reason and metadata), `RetryInfo` and `Help` where they apply. Internal
/// causes are logged here, once, with their full chain; only the public message is sent.
pub fn to_status<E: ServiceError + ?Sized>(err: &E) -> tonic::Status {
    let code = err.code();
    if code == ErrorCode::Internal {
        tracing::error!(code = %code, error = %ErrorChain(err), "request failed");
    }
    err.failure().to_status()
}

/// A failure as it crosses a network hop: what [`to_status`] sends and what a caller reads
/// back with [`Failure::from_status`]. Callers branch on `reason`, never on `message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: ErrorCode,
    pub reason: Reason,
    pub message: String,
    pub metadata: std::collections::BTreeMap<String, String>,
    pub retry_after: Option<std::time::Duration>,
    pub hint: Option<String>,
}

impl Failure {
    /// A failure with the code's generic reason and nothing else attached.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Failure {
        Failure {
            code,
            reason: Reason::generic(code),
            message: message.into(),
            metadata: std::collections::BTreeMap::new(),
            retry_after: None,
            hint: None,
        }
    }

    /// The same failure with a specific reason.
    #[must_use]
    pub fn with_reason(mut self, reason: Reason) -> Failure {
        self.reason = reason;
        self
    }

    /// The same failure with one more `ErrorInfo.metadata` entry.
    #[must_use]
    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Failure {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// The metadata value under `key`, if any.
    pub fn metadata_value(&self, key: &str) -> Option<&str> {
        self.metadata.get(key).map(String::as_str)
    }

    /// The status carrying this failure and its details.
    pub fn to_status(&self) -> tonic::Status {
        use tonic_types::{ErrorDetails, StatusExt};
        let mut details = ErrorDetails::new();
        details.set_error_info(
            self.reason.as_str(),
            REASON_DOMAIN,
            self.metadata
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<std::collections::HashMap<_, _>>(),
        );
        if let Some(delay) = self.retry_after {
            details.set_retry_info(Some(delay));
        }
        if let Some(hint) = &self.hint {
            details.add_help_link(hint.clone(), "");
        }
        tonic::Status::with_error_details(self.code.grpc_code(), self.message.clone(), details)
    }

    /// Reads a status back. A status without Noema's `ErrorInfo` (a transport failure, a
    /// peer of another kind, a reason this build does not know) gets its code's generic
    /// reason.
    pub fn from_status(status: &tonic::Status) -> Failure {
        use tonic_types::StatusExt;
        let code = match ErrorCode::from_grpc(status.code()) {
            // A status with a source was made by this side's transport, not answered by the
            // peer: the connection failed mid-call (a peer that went away resets it), which
            // a retry against a running peer gets past.
            ErrorCode::Internal if std::error::Error::source(status).is_some() => {
                ErrorCode::Unavailable
            }
            code => code,
        };
        let details = status.get_error_details();
        let info = details
            .error_info()
            .filter(|info| info.domain == REASON_DOMAIN);
        Failure {
            code,
            reason: info
                .and_then(|info| Reason::parse(&info.reason))
                .unwrap_or_else(|| Reason::generic(code)),
            message: status.message().to_owned(),
            metadata: info
                .map(|info| {
                    info.metadata
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                })
                .unwrap_or_default(),
            retry_after: details.retry_info().and_then(|retry| retry.retry_delay),
            hint: details
                .help()
                .and_then(|help| help.links.first())
                .map(|link| link.description.clone())
                .filter(|hint| !hint.is_empty()),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// A failure read back from a peer passes on unchanged: its reason, metadata and retry
/// delay cross the next hop too.
impl ServiceError for Failure {
    fn code(&self) -> ErrorCode {
        self.code
    }
    fn reason(&self) -> Reason {
        self.reason
    }
    fn retry_after(&self) -> Option<std::time::Duration> {
        self.retry_after
    }
    fn public_message(&self) -> String {
        self.message.clone()
    }
    fn hint(&self) -> Option<String> {
        self.hint.clone()
    }
    /// Itself, metadata included (whose keys came off the wire, so `metadata()` cannot
    /// list them).
    fn failure(&self) -> Failure {
        self.clone()
    }
}

/// The hint carried by a status made by [`to_status`], if any.
pub fn status_hint(status: &tonic::Status) -> Option<String> {
    Failure::from_status(status).hint
}

/// Displays an error followed by its `source()` chain: `outer: inner: innermost`.
pub struct ErrorChain<'a, E: ?Sized>(pub &'a E);

impl<E: std::error::Error + ?Sized> fmt::Display for ErrorChain<'_, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_round_trip_is_identity_for_every_code() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_grpc(code.grpc_code()), code);
        }
    }

    #[derive(Debug, thiserror::Error)]
    #[error("bad thing")]
    struct Hinted;

    impl ServiceError for Hinted {
        fn code(&self) -> ErrorCode {
            ErrorCode::InvalidArgument
        }
        fn hint(&self) -> Option<String> {
            Some("do it right".into())
        }
    }

    #[test]
    fn hints_travel_in_status_details() {
        let status = to_status(&Hinted);
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert_eq!(status.message(), "bad thing");
        assert_eq!(status_hint(&status).as_deref(), Some("do it right"));
        assert_eq!(status_hint(&tonic::Status::internal("x")), None);
    }

    #[derive(Debug, thiserror::Error)]
    #[error("slow down")]
    struct Throttled;

    impl ServiceError for Throttled {
        fn code(&self) -> ErrorCode {
            ErrorCode::ResourceExhausted
        }
        fn reason(&self) -> Reason {
            Reason::RateLimited
        }
        fn metadata(&self) -> Vec<(&'static str, String)> {
            vec![("limit", "10".into())]
        }
        fn retry_after(&self) -> Option<std::time::Duration> {
            Some(std::time::Duration::from_secs(7))
        }
    }

    #[test]
    fn reasons_metadata_and_retry_info_cross_the_hop() {
        let failure = Failure::from_status(&to_status(&Throttled));
        assert_eq!(failure.code, ErrorCode::ResourceExhausted);
        assert_eq!(failure.reason, Reason::RateLimited);
        assert_eq!(failure.message, "slow down");
        assert_eq!(
            failure.metadata.get("limit").map(String::as_str),
            Some("10")
        );
        assert_eq!(failure.retry_after, Some(std::time::Duration::from_secs(7)));
        assert_eq!(failure.hint, None);
    }

    #[test]
    fn a_status_without_details_gets_its_codes_generic_reason() {
        let failure = Failure::from_status(&tonic::Status::not_found("gone"));
        assert_eq!(failure.reason, Reason::NotFound);
        assert_eq!(failure.message, "gone");
        assert!(failure.metadata.is_empty());
        let hinted = Failure::from_status(&to_status(&Hinted));
        assert_eq!(hinted.reason, Reason::InvalidArgument);
        assert_eq!(hinted.hint.as_deref(), Some("do it right"));
    }

    #[test]
    fn a_call_its_transport_failed_is_unavailable_and_a_peers_internal_answer_is_not() {
        let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset by peer");
        let failed = Failure::from_status(&tonic::Status::from_error(Box::new(reset)));
        assert_eq!(failed.code, ErrorCode::Unavailable);
        assert_eq!(failed.reason, Reason::generic(ErrorCode::Unavailable));
        let answered = Failure::from_status(&tonic::Status::internal("broken"));
        assert_eq!(answered.code, ErrorCode::Internal);
    }

    #[test]
    fn a_failure_read_back_crosses_the_next_hop_unchanged() {
        let first = Failure::from_status(&to_status(&Throttled));
        let second = Failure::from_status(&to_status(&first));
        assert_eq!(second, first);
        let stopped = Failure::new(ErrorCode::Unavailable, STOPPED_MESSAGE)
            .with_reason(Reason::SystemStopped)
            .with_metadata(QUOTA_KEY, "none");
        let back = Failure::from_status(&stopped.to_status());
        assert_eq!(back.reason, Reason::SystemStopped);
        assert_eq!(back.metadata_value(QUOTA_KEY), Some("none"));
        assert_eq!(back.to_string(), STOPPED_MESSAGE);
    }

    #[test]
    fn wire_names_are_unique_and_parse_back() {
        let mut seen = std::collections::BTreeSet::new();
        for reason in Reason::ALL {
            let wire = reason.as_str();
            assert!(seen.insert(wire), "{wire} is declared twice");
            assert!(
                wire.len() <= 63
                    && wire
                        .bytes()
                        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'),
                "{wire} is not a google.rpc.ErrorInfo reason"
            );
            assert_eq!(Reason::parse(wire), Some(*reason));
        }
        for code in ErrorCode::ALL {
            assert_eq!(
                Reason::parse(Reason::generic(code).as_str()),
                Some(Reason::generic(code))
            );
        }
        assert_eq!(Reason::parse("NOT_A_REASON"), None);
    }

    #[test]
    fn http_statuses_match_the_seed_systems() {
        assert_eq!(ErrorCode::FailedPrecondition.http_status().as_u16(), 422);
        assert_eq!(ErrorCode::Unavailable.http_status().as_u16(), 503);
        assert_eq!(ErrorCode::AlreadyExists.http_status().as_u16(), 409);
        assert_eq!(ErrorCode::Unauthenticated.http_status().as_u16(), 401);
        assert_eq!(ErrorCode::PermissionDenied.http_status().as_u16(), 403);
    }
}
