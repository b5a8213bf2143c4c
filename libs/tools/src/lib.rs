//! Tool runners shared by Noema services: the orchestrator executes plan steps with them,
//! and the world kernel's HTTP JSON sources call out through the same [`http_json`].
//!
//! - [`http_json`]: POST a JSON body to a configured URL, read a JSON answer; timeout,
//!   size cap, no redirects, failures as data.
//! - [`command`]: an allowlisted program without a shell, argv from a template, in a
//!   sandbox directory with a cleared environment, a deadline that kills its process
//!   group, capped output and protected paths checked on every path argument.
//! - [`secret`]: secrets come from the environment or secret files only and are scrubbed
//!   from everything a tool returns.
//! - [`tls`]: every HTTP client's TLS (rustls with the ring provider).

pub mod command;
pub mod http_json;
pub mod secret;
pub mod tls;
