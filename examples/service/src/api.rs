//! The gRPC adapter: proto ⇄ [`Visits`], nothing else.

use noema_core::to_status;
use tonic::{Request, Response, Status};

use crate::pb;
use crate::visits::Visits;

pub struct ExampleApi {
    visits: Visits,
}

impl ExampleApi {
    pub fn new(visits: Visits) -> Self {
        ExampleApi { visits }
    }
}

#[tonic::async_trait]
impl pb::example_service_server::ExampleService for ExampleApi {
    async fn visit(
        &self,
        request: Request<pb::VisitRequest>,
    ) -> Result<Response<pb::VisitReply>, Status> {
        let authorization = request.metadata().get("authorization").cloned();
        let visit = self
            .visits
            .visit(request.into_inner().name, authorization)
            .await
            .map_err(|e| to_status(&e))?;
        Ok(Response::new(pb::VisitReply {
            name: visit.name,
            visits: visit.visits,
            greeting: visit.greeting,
            ledger_mode: visit.ledger_mode,
            postcard_key: visit.postcard_key,
        }))
    }
}
