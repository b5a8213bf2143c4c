//! Object store calls counted and timed per service, for `/metrics`.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use bytes::Bytes;
use noema_store::object::PutOutcome;
use noema_store::{ListPage, ObjectBody, ObjectError, ObjectMeta, ObjectStore};

/// Wraps a store and records every call in the process's metrics.
#[derive(Debug)]
pub struct InstrumentedObjectStore {
    inner: Arc<dyn ObjectStore>,
    service: &'static str,
}

impl InstrumentedObjectStore {
    pub fn wrap(inner: Arc<dyn ObjectStore>, service: &'static str) -> Arc<dyn ObjectStore> {
        Arc::new(InstrumentedObjectStore { inner, service })
    }

    fn record<T>(&self, op: &str, started: Instant, result: &Result<T, ObjectError>) {
        if let Some(m) = noema_runtime::metrics::global() {
            let outcome = match result {
                Ok(_) => "ok",
                Err(e) if e.is_not_found() => "not_found",
                Err(_) => "error",
            };
            m.object_store_requests
                .with_label_values(&[self.service, op, outcome])
                .inc();
            m.object_store_latency
                .with_label_values(&[self.service, op])
                .observe(started.elapsed().as_secs_f64());
        }
    }
}

#[async_trait]
impl ObjectStore for InstrumentedObjectStore {
    async fn put(&self, key: &str, body: Bytes, content_type: &str) -> Result<(), ObjectError> {
        let started = Instant::now();
        let result = self.inner.put(key, body, content_type).await;
        self.record("put", started, &result);
        result
    }

    async fn put_if_absent(
        &self,
        key: &str,
        body: Bytes,
        content_type: &str,
    ) -> Result<PutOutcome, ObjectError> {
        let started = Instant::now();
        let result = self.inner.put_if_absent(key, body, content_type).await;
        self.record("put_if_absent", started, &result);
        result
    }

    async fn get(&self, key: &str) -> Result<ObjectBody, ObjectError> {
        let started = Instant::now();
        let result = self.inner.get(key).await;
        self.record("get", started, &result);
        result
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>, ObjectError> {
        let started = Instant::now();
        let result = self.inner.head(key).await;
        self.record("head", started, &result);
        result
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<ListPage, ObjectError> {
        let started = Instant::now();
        let result = self.inner.list(prefix, start_after, limit).await;
        self.record("list", started, &result);
        result
    }

    async fn delete(&self, key: &str) -> Result<(), ObjectError> {
        let started = Instant::now();
        let result = self.inner.delete(key).await;
        self.record("delete", started, &result);
        result
    }

    async fn check(&self) -> Result<(), ObjectError> {
        let started = Instant::now();
        let result = self.inner.check().await;
        self.record("check", started, &result);
        result
    }
}
