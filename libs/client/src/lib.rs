//! The Rust SDK for agent runtimes: one authenticated connection to Noema's gRPC port,
//! typed clients per service, and local signing (keys never leave the agent).
//!
//! ```no_run
//! # async fn demo() -> Result<(), noema_client::ClientError> {
//! let noema = noema_client::Noema::connect("http://127.0.0.1:50051", "noema_…").await?;
//! let status = noema.ledger().get_status(noema_client::pb::ledger::GetStatusRequest {}).await?;
//! # let _ = status; Ok(()) }
//! ```

pub mod continuity;
pub mod diary;
pub mod ledger;
pub mod orchestrator;
pub mod world;

use std::time::Duration;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

/// Generated messages, by service.
pub mod pb {
    pub use noema_proto::common::v1 as common;
    pub use noema_proto::continuity::v1 as continuity;
    pub use noema_proto::identity::v1 as identity;
    pub use noema_proto::ledger::v1 as ledger;
    pub use noema_proto::orchestrator::v1 as orchestrator;
    pub use noema_proto::world::v1 as world;
}

pub use noema_core::keys::{PublicKey, Signature, SigningKeyPair};
pub use noema_core::{ErrorCode, Failure, Reason};
pub use tonic::{Code, Status};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("invalid endpoint {endpoint:?}: {reason}")]
    Endpoint { endpoint: String, reason: String },
    #[error("cannot connect to {endpoint}: {source}")]
    Connect {
        endpoint: String,
        source: tonic::transport::Error,
    },
    #[error("the token is not a valid header value")]
    Token,
    #[error(transparent)]
    Status(#[from] tonic::Status),
    #[error("{0}")]
    Invalid(String),
    /// The ledger is STOPPED: writes are refused until an operator resumes it. Poll
    /// [`Noema::wait_until_running`]; do not retry in a loop.
    #[error("the system is STOPPED; writes are refused until it is resumed")]
    Stopped,
}

impl ClientError {
    /// The server's stable reason for refusing the call (`google.rpc.ErrorInfo`), when
    /// it refused one: decide on this, never on the message text. `None` for failures
    /// on this side (endpoint, connection, token, local checks).
    pub fn reason(&self) -> Option<Reason> {
        match self {
            ClientError::Status(status) => Some(Failure::from_status(status).reason),
            ClientError::Stopped => Some(Reason::SystemStopped),
            _ => None,
        }
    }

    /// Everything the server said about a refused call: code, reason, message,
    /// metadata, retry delay and hint.
    pub fn failure(&self) -> Option<Failure> {
        match self {
            ClientError::Status(status) => Some(Failure::from_status(status)),
            ClientError::Stopped => Some(
                Failure::new(ErrorCode::Unavailable, noema_core::STOPPED_MESSAGE)
                    .with_reason(Reason::SystemStopped),
            ),
            _ => None,
        }
    }
}

/// Adds `authorization: Bearer <token>` to every call, and `x-noema-tenant` when the
/// connection acts in a named tenant.
#[derive(Clone)]
pub struct Bearer {
    token: MetadataValue<Ascii>,
    tenant: Option<MetadataValue<Ascii>>,
}

impl Interceptor for Bearer {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        request
            .metadata_mut()
            .insert("authorization", self.token.clone());
        if let Some(tenant) = &self.tenant {
            request
                .metadata_mut()
                .insert(noema_core::scopes::TENANT_METADATA, tenant.clone());
        }
        Ok(request)
    }
}

/// An authenticated channel.
pub type AuthedChannel = InterceptedService<Channel, Bearer>;

pub type LedgerClient =
    noema_proto::ledger::v1::ledger_service_client::LedgerServiceClient<AuthedChannel>;
pub type IdentityClient =
    noema_proto::identity::v1::identity_service_client::IdentityServiceClient<AuthedChannel>;

pub type ContinuityClient =
    noema_proto::continuity::v1::continuity_service_client::ContinuityServiceClient<AuthedChannel>;
pub type OrchestratorClient =
    noema_proto::orchestrator::v1::orchestrator_service_client::OrchestratorServiceClient<
        AuthedChannel,
    >;

pub type DiaryClient =
    noema_proto::identity::v1::diary_service_client::DiaryServiceClient<AuthedChannel>;

pub type WorldClient =
    noema_proto::world::v1::world_service_client::WorldServiceClient<AuthedChannel>;
/// Largest message the orchestrator client sends or accepts (plans and traces).
const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// A connection to Noema. Cheap to clone; clients share one HTTP/2 connection.
#[derive(Clone)]
pub struct Noema {
    channel: AuthedChannel,
    raw: Channel,
    bearer: Bearer,
}

impl Noema {
    /// Connects to `endpoint` (e.g. `http://127.0.0.1:50051`) presenting `token`.
    pub async fn connect(endpoint: &str, token: &str) -> Result<Noema, ClientError> {
        let channel = Endpoint::from_shared(endpoint.to_owned())
            .map_err(|e| ClientError::Endpoint {
                endpoint: endpoint.to_owned(),
                reason: e.to_string(),
            })?
            .connect_timeout(Duration::from_secs(10))
            .tcp_nodelay(true)
            .connect()
            .await
            .map_err(|source| ClientError::Connect {
                endpoint: endpoint.to_owned(),
                source,
            })?;
        Self::with_channel(channel, token)
    }

    /// Uses an existing channel (e.g. one with TLS configured by the caller).
    pub fn with_channel(channel: Channel, token: &str) -> Result<Noema, ClientError> {
        let header = format!("Bearer {token}")
            .parse()
            .map_err(|_| ClientError::Token)?;
        let bearer = Bearer {
            token: header,
            tenant: None,
        };
        Ok(Noema {
            channel: InterceptedService::new(channel.clone(), bearer.clone()),
            raw: channel,
            bearer,
        })
    }

    /// The same connection acting in `tenant` (sent as `x-noema-tenant` on every call).
    /// Only a superuser token (the owner, `admin:peers`) may name a tenant other than its
    /// own; the data of other tenants is otherwise invisible.
    pub fn in_tenant(&self, tenant: &str) -> Result<Noema, ClientError> {
        let value = tenant.parse().map_err(|_| {
            ClientError::Invalid(format!("tenant {tenant:?} is not a valid header value"))
        })?;
        let bearer = Bearer {
            tenant: Some(value),
            ..self.bearer.clone()
        };
        Ok(Noema {
            channel: InterceptedService::new(self.raw.clone(), bearer.clone()),
            raw: self.raw.clone(),
            bearer,
        })
    }

    pub fn ledger(&self) -> LedgerClient {
        LedgerClient::new(self.channel.clone())
    }

    pub fn identity(&self) -> IdentityClient {
        IdentityClient::new(self.channel.clone())
    }

    /// The governed runtime; see [`orchestrator`] for the calls and approval signing.
    pub fn orchestrator(&self) -> OrchestratorClient {
        OrchestratorClient::new(self.channel.clone())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }

    /// Signed diaries (served by the identity service); see [`diary`] for local signing.
    pub fn diary(&self) -> DiaryClient {
        DiaryClient::new(self.channel.clone())
    }

    /// The world kernel; see [`world`] for its calls.
    pub fn world(&self) -> WorldClient {
        WorldClient::new(self.channel.clone())
    }
}
