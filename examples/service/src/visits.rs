//! The one use case: check the name, count the visit, keep a postcard, ask the ledger.

use std::sync::Arc;

use bytes::Bytes;
use noema_proto::ledger::v1 as ledger;
use noema_proto::ledger::v1::ledger_service_client::LedgerServiceClient;
use noema_runtime::client::TracedChannel;
use noema_store::ObjectStore;
use noema_store::object::WriteRetry;
use tonic::metadata::{Ascii, MetadataValue};

use crate::error::ExampleError;
use crate::store::VisitStore;

/// What a visit answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Visit {
    pub name: String,
    pub visits: i64,
    pub greeting: String,
    pub ledger_mode: String,
    pub postcard_key: String,
}

pub struct Visits {
    store: VisitStore,
    objects: Arc<dyn ObjectStore>,
    ledger: LedgerServiceClient<TracedChannel>,
    greeting: String,
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

impl Visits {
    pub fn new(
        store: VisitStore,
        objects: Arc<dyn ObjectStore>,
        ledger: LedgerServiceClient<TracedChannel>,
        greeting: String,
    ) -> Self {
        Visits {
            store,
            objects,
            ledger,
            greeting,
        }
    }

    /// Counts a visit under `name`; the ledger is asked with the caller's `authorization`.
    pub async fn visit(
        &self,
        name: String,
        authorization: Option<MetadataValue<Ascii>>,
    ) -> Result<Visit, ExampleError> {
        if !valid_name(&name) {
            return Err(ExampleError::InvalidName);
        }
        let visits = self.store.visit(&name).await?;
        let postcard_key = format!("postcards/{name}/{visits}");
        let postcard = Bytes::from(format!("{}, {name}", self.greeting));
        WriteRetry::STANDARD
            .put(self.objects.as_ref(), &postcard_key, postcard, "text/plain")
            .await?;
        let mut request = tonic::Request::new(ledger::GetStatusRequest {});
        if let Some(value) = authorization {
            request.metadata_mut().insert("authorization", value);
        }
        let status = self
            .ledger
            .clone()
            .get_status(request)
            .await
            .map_err(ExampleError::Ledger)?
            .into_inner();
        let ledger_mode = ledger::SystemMode::try_from(status.mode)
            .map_or("UNKNOWN", |mode| mode.as_str_name())
            .trim_start_matches("SYSTEM_MODE_")
            .to_owned();
        Ok(Visit {
            name,
            visits,
            greeting: self.greeting.clone(),
            ledger_mode,
            postcard_key,
        })
    }
}
