//! TLS for every HTTP client in Noema: rustls with the ring provider, the one the rest of
//! the workspace uses (sqlx, the AWS SDK), verifying servers against the system's roots.
//!
//! reqwest builds its rustls configuration from the process's default crypto provider and
//! has none of its own here (its bundled default is aws-lc-rs, which needs a C toolchain),
//! so the provider must be installed before a client is built: [`client_builder`] does it,
//! and the `noema` binary calls [`install`] at start.

/// Installs ring as the process's default rustls provider (once; later calls do nothing).
pub fn install() {
    // An error means a provider is installed already: the first one stays.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A reqwest client builder that speaks `https://` (and `http://`).
pub fn client_builder() -> reqwest::ClientBuilder {
    install();
    reqwest::Client::builder()
}

/// A reqwest client with the defaults.
pub fn client() -> Result<reqwest::Client, reqwest::Error> {
    client_builder().build()
}
