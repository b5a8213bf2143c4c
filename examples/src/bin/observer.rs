//! An observer agent, the way open-cognition's reference client behaves, on the Rust SDK:
//! check the mode, record an observation, then sign a reference to it with the agent's
//! own key. While the system is STOPPED it waits politely instead of retrying.
//!
//! Usage: observer <grpc-endpoint> <token> <agent-id> [<seed-base64>]

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use noema_client::ledger::{canonical_request, signed_reference};
use noema_client::{ClientError, Noema, Reason, SigningKeyPair};
use time::OffsetDateTime;

async fn observe(noema: &Noema, agent: &str, key: &SigningKeyPair) -> Result<String, ClientError> {
    if !noema
        .wait_until_running(Duration::from_secs(1), Duration::from_secs(30))
        .await?
    {
        return Err(ClientError::Stopped);
    }
    let now = OffsetDateTime::now_utc();
    let observation = serde_json::json!({"observer": agent, "seen_at": now.unix_timestamp()});
    let request = canonical_request(
        observation.to_string().into_bytes(),
        "observation",
        "application/json",
        agent,
        now,
    );
    // Content addressing: the same bytes already recorded is as good as recording them.
    let id = match noema.put_canonical(request.clone()).await {
        Ok(object) => object.id,
        Err(e) if e.reason() == Some(Reason::AlreadyExists) => request.id,
        Err(e) => return Err(e),
    };
    let mut reference = signed_reference(key, agent, &id, "observed by the example observer", now)?;
    reference.relevance = Some(1.0);
    reference.trust_weight = Some(1.0);
    noema.put_reference(reference).await?;
    Ok(id)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(endpoint), Some(token), Some(agent)) = (args.get(1), args.get(2), args.get(3)) else {
        let _ = writeln!(
            std::io::stderr(),
            "usage: observer <grpc-endpoint> <token> <agent-id> [<seed-base64>]"
        );
        return ExitCode::from(2);
    };
    let key = match args.get(4) {
        Some(seed) => SigningKeyPair::from_seed_base64(seed),
        None => SigningKeyPair::generate(),
    };
    let key = match key {
        Ok(key) => key,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "key: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match Noema::connect(endpoint, token).await {
        Ok(noema) => observe(&noema, agent, &key).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(id) => {
            let _ = writeln!(std::io::stdout(), "{id}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "observer: {e}");
            ExitCode::FAILURE
        }
    }
}
