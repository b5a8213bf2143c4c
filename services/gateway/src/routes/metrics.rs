//! CogniRelay's `GET /v1/metrics`, answered by the continuity service from the caller's
//! tenant: its tracked deliveries, its audit entries, its recent signed-envelope
//! verification failures and the original's alarms on them.

use noema_proto::continuity::v1 as pb;

use super::continuity::{COGNIRELAY, Original, Passed, call};
use crate::forward::Caller;
use crate::route::{Route, Verb};

async fn metrics(caller: Caller) -> Passed {
    let (mut client, request) = call(&caller, pb::JsonRequest { body: Vec::new() });
    Ok(Original(client.metrics(request).await?.into_inner().body))
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    vec![
        COGNIRELAY
            .route(
                Verb::Get,
                "/v1/metrics",
                "metricsV1",
                "CogniRelay: the tenant's delivery backlog, audit counts, verification failures and alarms",
                metrics,
            )
            .calls("Metrics")
            .tool(
                "metrics.get",
                "Delivery backlog, audit counts and alarms of your tenant",
            ),
    ]
}
