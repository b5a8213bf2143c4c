//! How client commands find Noema and authenticate.

use std::path::PathBuf;

use clap::Args;
use noema_client::Noema;

use super::CommandError;

#[derive(Debug, Args, Clone)]
pub struct ClientFlags {
    /// gRPC endpoint of Noema.
    #[arg(long, env = "NOEMA_ENDPOINT", default_value = "http://127.0.0.1:50051")]
    pub endpoint: String,
    /// Bearer token. Default: the owner token in --data-dir (the embedded default).
    #[arg(long, env = "NOEMA_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Where `noema up` keeps owner.token, used when no token is given.
    #[arg(long, value_name = "DIR", default_value = "./noema-data")]
    pub data_dir: PathBuf,
}

impl ClientFlags {
    pub fn token(&self) -> Result<String, CommandError> {
        if let Some(token) = &self.token {
            return Ok(token.clone());
        }
        let path = self.data_dir.join("owner.token");
        std::fs::read_to_string(&path)
            .map(|t| t.trim().to_owned())
            .map_err(|_| {
                CommandError::Usage(format!(
                    "no token: pass --token or set NOEMA_TOKEN (or run where {} exists)",
                    path.display()
                ))
            })
    }

    pub async fn connect(&self) -> Result<Noema, CommandError> {
        Ok(Noema::connect(&self.endpoint, &self.token()?).await?)
    }
}
