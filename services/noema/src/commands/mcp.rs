//! `noema mcp tools`: what an MCP client sees for a token, asked of the running gateway's
//! MCP endpoint itself (`tools/list`, every page), so it shows exactly the tools the
//! token's scopes allow.

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::connect::ClientFlags;
use super::{CommandError, say, say_json};

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// The MCP tools a token may call (names and descriptions; --json: the full list).
    Tools(ToolsArgs),
}

#[derive(Debug, Args)]
pub struct ToolsArgs {
    /// REST base URL of the gateway (the MCP endpoint is its /v1/mcp).
    #[arg(long, env = "NOEMA_REST", default_value = "http://127.0.0.1:8080")]
    pub rest: String,
    /// Print the tools as tools/list returns them (input schemas included), as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub client: ClientFlags,
}

pub async fn mcp(command: &McpCommand) -> Result<(), CommandError> {
    match command {
        McpCommand::Tools(args) => {
            let tools = list_tools(args).await?;
            if args.json {
                say_json(&Value::Array(tools));
            } else {
                for tool in &tools {
                    say(&format!(
                        "{:<32} {}",
                        tool["name"].as_str().unwrap_or_default(),
                        tool["description"].as_str().unwrap_or_default()
                    ));
                }
            }
            Ok(())
        }
    }
}

/// Every tool `tools/list` shows the token, page after page.
async fn list_tools(args: &ToolsArgs) -> Result<Vec<Value>, CommandError> {
    let url = format!("{}/v1/mcp", args.rest.trim_end_matches('/'));
    let token = args.client.token()?;
    let failed = |what: String| CommandError::found(&url, what);
    let http = noema_tools::tls::client().map_err(|e| failed(e.to_string()))?;
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    // A server that never stops paging must not loop forever.
    for page in 0..1000 {
        let params = cursor.map_or_else(|| json!({}), |c| json!({"cursor": c}));
        let response = http
            .post(&url)
            .bearer_auth(&token)
            .header("accept", "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": page, "method": "tools/list", "params": params}))
            .send()
            .await
            .map_err(|e| failed(e.to_string()))?;
        let status = response.status();
        let body: Value = response.json().await.map_err(|e| failed(e.to_string()))?;
        if !status.is_success() {
            return Err(failed(format!("{status}: {body}")));
        }
        if let Some(error) = body.get("error") {
            return Err(failed(format!("tools/list failed: {error}")));
        }
        let result = &body["result"];
        tools.extend(result["tools"].as_array().cloned().unwrap_or_default());
        match result["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return Ok(tools),
        }
    }
    Err(failed("tools/list kept paging".into()))
}
