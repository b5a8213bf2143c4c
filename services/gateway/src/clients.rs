//! Typed clients of the fronted services, made from the state's channels. A route module
//! calls `state.ledger()` (etc.) for a client of its service.

use noema_proto::continuity::v1::continuity_service_client::ContinuityServiceClient;
use noema_proto::identity::v1::diary_service_client::DiaryServiceClient;
use noema_proto::identity::v1::identity_service_client::IdentityServiceClient;
use noema_proto::ledger::v1::ledger_service_client::LedgerServiceClient;
use noema_proto::orchestrator::v1::orchestrator_service_client::OrchestratorServiceClient;
use noema_proto::world::v1::world_service_client::WorldServiceClient;
use noema_runtime::client::TracedChannel;

use crate::GatewayState;

/// Largest ledger message (a 16 MiB payload and its fields), as the ledger allows.
const LEDGER_MESSAGE_LIMIT: usize = 20 * 1024 * 1024;
/// Largest orchestrator message (plans and traces), as the orchestrator allows.
const ORCHESTRATOR_MESSAGE_LIMIT: usize = 16 * 1024 * 1024;

/// Largest world message (a big world's turn record), as the world service allows.
const WORLD_MESSAGE_LIMIT: usize = 32 * 1024 * 1024;

impl GatewayState {
    pub fn identity(&self) -> IdentityServiceClient<TracedChannel> {
        IdentityServiceClient::new(self.channel("identity"))
    }

    /// Signed diaries, served by the identity service.
    pub fn diary(&self) -> DiaryServiceClient<TracedChannel> {
        DiaryServiceClient::new(self.channel("identity"))
    }

    /// CogniRelay's continuity capsules.
    pub fn continuity(&self) -> ContinuityServiceClient<TracedChannel> {
        ContinuityServiceClient::new(self.channel("continuity"))
    }

    pub fn ledger(&self) -> LedgerServiceClient<TracedChannel> {
        LedgerServiceClient::new(self.channel("ledger"))
            .max_decoding_message_size(LEDGER_MESSAGE_LIMIT)
            .max_encoding_message_size(LEDGER_MESSAGE_LIMIT)
    }

    pub fn world(&self) -> WorldServiceClient<TracedChannel> {
        WorldServiceClient::new(self.channel("world"))
            .max_decoding_message_size(WORLD_MESSAGE_LIMIT)
            .max_encoding_message_size(WORLD_MESSAGE_LIMIT)
    }

    pub fn orchestrator(&self) -> OrchestratorServiceClient<TracedChannel> {
        OrchestratorServiceClient::new(self.channel("orchestrator"))
            .max_decoding_message_size(ORCHESTRATOR_MESSAGE_LIMIT)
            .max_encoding_message_size(ORCHESTRATOR_MESSAGE_LIMIT)
    }
}
