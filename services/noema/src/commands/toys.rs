//! `noema toys serve`: the world kernel's toys — the scripted OpenAI-compatible LLM and the
//! seed's toy sources — on one loopback port, until SIGTERM or Ctrl-C. It prints their URL
//! and the settings that point a Noema world service at them, and can write those settings
//! as a configuration file for `noema up --config`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Subcommand;
use noema_toys::park::ParkConfig;
use noema_toys::scenario::{PARK_MODEL_ALIAS, PARK_SCRIPT, PARK_URL_ENVS};
use noema_toys::{LlmScript, Park, ScriptedLlm};

use super::{CommandError, say};

#[derive(Debug, Subcommand)]
pub enum ToysCommand {
    /// Serve the scripted LLM (under /v1) and the toy sources on one address.
    Serve {
        /// Where to listen (port 0: any free port).
        #[arg(long, default_value = "127.0.0.1:0")]
        addr: SocketAddr,
        /// The LLM's script (JSON); default: the park's three turns.
        #[arg(long, value_name = "FILE")]
        script: Option<PathBuf>,
        /// Candy bars in the vending machine.
        #[arg(long, default_value_t = 1)]
        candy_bars: u64,
        /// Also write the world settings that point at the toys to FILE (TOML), for
        /// `noema up --config FILE`.
        #[arg(long, value_name = "FILE")]
        write_config: Option<PathBuf>,
    },
}

/// The `[world]` settings pointing the park's sources and LLM at `url`.
pub fn world_settings(url: &str) -> String {
    let mut text = format!(
        "[world.llm]\nbase_url = \"{url}/v1\"\nmodels = {{ \"{PARK_MODEL_ALIAS}\" = \"toy\" }}\n\n[world.source_env]\n"
    );
    for name in PARK_URL_ENVS {
        text.push_str(&format!("{name} = \"{url}\"\n"));
    }
    text
}

pub async fn toys(command: &ToysCommand) -> Result<(), CommandError> {
    let ToysCommand::Serve {
        addr,
        script,
        candy_bars,
        write_config,
    } = command;
    let script = match script {
        Some(path) => LlmScript::from_file(path)
            .map_err(|e| CommandError::Usage(format!("{}: {e}", path.display())))?,
        None => LlmScript::from_json(PARK_SCRIPT)
            .map_err(|e| CommandError::Found(format!("the park script: {e}")))?,
    };
    let llm = ScriptedLlm::new(script);
    let park = Park::new(ParkConfig {
        candy_bars: *candy_bars,
    });
    let server = noema_toys::serve_all(*addr, &llm, &park)
        .await
        .map_err(|source| CommandError::File {
            path: addr.to_string(),
            source,
        })?;
    let url = server.url();
    let settings = world_settings(&url);
    if let Some(path) = write_config {
        std::fs::write(path, &settings).map_err(|source| CommandError::File {
            path: path.display().to_string(),
            source,
        })?;
    }
    say(&format!("TOYS  {url}"));
    say(&format!("NOEMA__WORLD__LLM__BASE_URL={url}/v1"));
    for name in PARK_URL_ENVS {
        say(&format!("{name}={url}"));
    }
    say(&format!(
        "# world settings (noema up --config FILE):\n{settings}"
    ));
    noema_runtime::shutdown::on_signal().cancelled().await;
    server
        .shutdown()
        .await
        .map_err(|source| CommandError::File { path: url, source })
}
