//! What every Noema service process shares: layered configuration, telemetry, the gRPC
//! server assembly (health, reflection, graceful shutdown), metrics, and channels to
//! other services.

pub mod auth;
pub mod client;
pub mod config;
pub mod convert;
pub mod metrics;
pub mod registry;
pub mod server;
pub mod shutdown;
pub mod telemetry;
pub mod trace_context;

pub use config::{ConfigError, NoemaConfig, ServiceSettings};
pub use registry::{Registry, ServiceSpec};
pub use server::GrpcServer;
