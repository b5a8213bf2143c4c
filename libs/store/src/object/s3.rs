//! `s3://` object store on any S3-compatible service, through aws-sdk-s3.
//!
//! Credentials come from the standard AWS chain (environment, shared profile, web identity
//! token as used on Kubernetes, ECS/IMDS). TLS is rustls with the ring provider (no C crypto
//! build), trusting the system's root certificates; plain `http://` endpoints work too.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use aws_config::BehaviorVersion;
use aws_config::meta::region::RegionProviderChain;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::{Region, RequestChecksumCalculation, ResponseChecksumValidation};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{BucketLocationConstraint, CreateBucketConfiguration};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use bytes::Bytes;

use super::key::{validate_key, validate_prefix};
use super::page::PageBuilder;
use super::{BoxError, ListPage, ObjectBody, ObjectError, ObjectMeta, ObjectStore, PutOutcome};
use crate::redact::redact_url;

/// Region used when neither the URL nor the AWS chain names one.
pub const DEFAULT_REGION: &str = "us-east-1";

/// Most keys one ListObjectsV2 call returns.
const S3_MAX_KEYS: usize = 1000;

/// Where an [`S3ObjectStore`] keeps its objects, parsed from
/// `s3://bucket[/prefix][?endpoint=…&region=…&force_path_style=…&create_bucket=…]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Location {
    pub bucket: String,
    /// Prepended to every key: empty, or ending with `/`.
    pub prefix: String,
    /// A custom endpoint (MinIO, Ceph, moto, R2, …): `http://host:port` or `https://…`.
    pub endpoint: Option<String>,
    /// Overrides the region from the AWS chain.
    pub region: Option<String>,
    /// Path-style addressing (`endpoint/bucket/key`). Defaults to `true` when an endpoint is
    /// given (what S3-compatible servers expect), `false` otherwise.
    pub force_path_style: bool,
    /// Create the bucket when it does not exist.
    pub create_bucket: bool,
}

impl S3Location {
    /// Parse an `s3://` URL.
    pub fn parse(url: &str) -> Result<Self, ObjectError> {
        let invalid = |reason: String| ObjectError::InvalidUrl {
            url_redacted: redact_url(url).text,
            reason,
        };
        let parsed = url::Url::parse(url).map_err(|e| invalid(format!("malformed URL: {e}")))?;
        if parsed.scheme() != "s3" {
            return Err(invalid("not an s3:// URL".into()));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(invalid(
                "credentials do not belong in the URL; they come from the AWS chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, profile, web identity)".into(),
            ));
        }
        if parsed.port().is_some() {
            return Err(invalid(
                "the host part is the bucket name; put a server address in ?endpoint=".into(),
            ));
        }
        let bucket = parsed.host_str().unwrap_or_default().to_owned();
        validate_bucket(&bucket).map_err(|r| invalid(r.into()))?;

        let path = parsed.path().trim_matches('/');
        if path.contains('%') {
            return Err(invalid(
                "percent-escapes are not supported in the prefix".into(),
            ));
        }
        let prefix = if path.is_empty() {
            String::new()
        } else {
            validate_key(path).map_err(|e| invalid(format!("bad prefix: {e}")))?;
            format!("{path}/")
        };

        let mut location = S3Location {
            bucket,
            prefix,
            endpoint: None,
            region: None,
            force_path_style: false,
            create_bucket: false,
        };
        let mut path_style = None;
        for (name, value) in parsed.query_pairs() {
            match &*name {
                "endpoint" => {
                    let ep = url::Url::parse(&value)
                        .map_err(|e| invalid(format!("bad endpoint: {e}")))?;
                    if !matches!(ep.scheme(), "http" | "https") || ep.host_str().is_none() {
                        return Err(invalid(
                            "the endpoint must be an http:// or https:// URL with a host".into(),
                        ));
                    }
                    location.endpoint = Some(value.trim_end_matches('/').to_owned());
                }
                "region" if !value.is_empty() => location.region = Some(value.into_owned()),
                "force_path_style" => {
                    path_style = Some(parse_bool(&name, &value).map_err(invalid)?)
                }
                "create_bucket" => {
                    location.create_bucket = parse_bool(&name, &value).map_err(invalid)?;
                }
                other => return Err(invalid(format!("unknown parameter `{other}`"))),
            }
        }
        location.force_path_style = path_style.unwrap_or(location.endpoint.is_some());
        Ok(location)
    }
}

fn parse_bool(name: &str, value: &str) -> Result<bool, String> {
    match value {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(format!("`{name}` must be true or false, not `{value}`")),
    }
}

fn validate_bucket(bucket: &str) -> Result<(), &'static str> {
    if bucket.is_empty() {
        return Err("the URL has no bucket (s3://<bucket>/…)");
    }
    if !(3..=63).contains(&bucket.len()) {
        return Err("a bucket name is 3 to 63 characters long");
    }
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "-._".contains(c);
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !bucket.chars().all(ok_char)
        || !alnum(bucket.chars().next())
        || !alnum(bucket.chars().last())
    {
        return Err(
            "a bucket name is lowercase letters, digits, '-', '.' and '_', starting and ending with a letter or digit",
        );
    }
    Ok(())
}

/// An object store in an S3 bucket, optionally under a key prefix.
#[derive(Debug, Clone)]
pub struct S3ObjectStore {
    client: aws_sdk_s3::Client,
    /// The same client without the SDK's retries: writes are retried by the one policy
    /// above the store (`super::retry`), so the SDK's must not nest inside it. A client of
    /// its own rather than a per-request override, which rebuilds the SDK's configuration
    /// on every call.
    write_client: aws_sdk_s3::Client,
    bucket: String,
    prefix: String,
    /// Cleared the first time the server answers a conditional write (`If-None-Match: *`)
    /// with 501 Not Implemented; from then on `put_if_absent` is a HEAD and a PUT.
    conditional_writes: Arc<AtomicBool>,
}

impl S3ObjectStore {
    /// Open the store named by an `s3://` URL (see [`S3Location`]).
    pub async fn open(url: &str) -> Result<Self, ObjectError> {
        let location = S3Location::parse(url)?;
        Self::connect(&location).await
    }

    /// Build a client for `location`, creating the bucket if asked to. Does not otherwise
    /// contact the service: use [`ObjectStore::check`] for that.
    #[tracing::instrument(skip_all, fields(bucket = %location.bucket, prefix = %location.prefix))]
    pub async fn connect(location: &S3Location) -> Result<Self, ObjectError> {
        let http_client = aws_smithy_http_client::Builder::new()
            .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
            .build_https();
        let region = match &location.region {
            Some(r) => RegionProviderChain::first_try(Region::new(r.clone())),
            None => RegionProviderChain::default_provider().or_else(Region::new(DEFAULT_REGION)),
        };
        let sdk_config = aws_config::defaults(BehaviorVersion::latest())
            .http_client(http_client)
            .region(region)
            .load()
            .await;

        let mut builder = aws_sdk_s3::config::Builder::from(&sdk_config)
            .force_path_style(location.force_path_style);
        if let Some(endpoint) = &location.endpoint {
            // S3-compatible servers vary in their support for the newer flexible checksums
            // (aws-chunked uploads with trailing CRCs); send and check them only where the API
            // requires them. AWS itself keeps the SDK's default (always).
            builder = builder
                .endpoint_url(endpoint)
                .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
                .response_checksum_validation(ResponseChecksumValidation::WhenRequired);
        }
        let region_name = sdk_config
            .region()
            .map_or_else(|| DEFAULT_REGION.to_owned(), |r| r.as_ref().to_owned());
        let store = S3ObjectStore {
            client: aws_sdk_s3::Client::from_conf(builder.clone().build()),
            write_client: aws_sdk_s3::Client::from_conf(
                builder.retry_config(RetryConfig::disabled()).build(),
            ),
            bucket: location.bucket.clone(),
            prefix: location.prefix.clone(),
            conditional_writes: Arc::new(AtomicBool::new(true)),
        };
        if location.create_bucket {
            store.create_bucket_if_missing(&region_name).await?;
        }
        Ok(store)
    }

    /// The bucket.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The key prefix inside the bucket (empty or ending with `/`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn full_key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    async fn bucket_exists(&self) -> Result<bool, ObjectError> {
        match self.client.head_bucket().bucket(&self.bucket).send().await {
            Ok(_) => Ok(true),
            Err(e) if e.raw_response().is_some_and(|r| r.status().as_u16() == 404) => Ok(false),
            Err(e) => Err(self.map_err("head bucket", &self.bucket, e)),
        }
    }

    async fn create_bucket_if_missing(&self, region: &str) -> Result<(), ObjectError> {
        if self.bucket_exists().await? {
            return Ok(());
        }
        let mut request = self.client.create_bucket().bucket(&self.bucket);
        if region != DEFAULT_REGION {
            request = request.create_bucket_configuration(
                CreateBucketConfiguration::builder()
                    .location_constraint(BucketLocationConstraint::from(region))
                    .build(),
            );
        }
        match request.send().await {
            Ok(_) => {
                tracing::info!(bucket = %self.bucket, "created bucket");
                Ok(())
            }
            // "Already owned by you", or a race with another creator: fine if we can see it now.
            Err(e) => {
                if e.code() == Some("BucketAlreadyOwnedByYou") || self.bucket_exists().await? {
                    Ok(())
                } else {
                    Err(self.map_err("create bucket", &self.bucket, e))
                }
            }
        }
    }

    /// A PUT of `body` under `key`, one attempt (see `write_client`).
    fn put_request(
        &self,
        key: &str,
        body: Bytes,
        content_type: &str,
    ) -> aws_sdk_s3::operation::put_object::builders::PutObjectFluentBuilder {
        let request = self
            .write_client
            .put_object()
            .bucket(&self.bucket)
            .key(self.full_key(key))
            .body(ByteStream::from(body));
        if content_type.is_empty() {
            request
        } else {
            request.content_type(content_type)
        }
    }

    /// Bytes `start..start + len` of the object at `key` (a ranged GET); `len` must be at
    /// least 1. What the packed store reads one object out of a pack with.
    pub(crate) async fn get_range(
        &self,
        key: &str,
        start: u64,
        len: u64,
    ) -> Result<Bytes, ObjectError> {
        let last = start.saturating_add(len.saturating_sub(1));
        let output = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(self.full_key(key))
            .range(format!("bytes={start}-{last}"))
            .send()
            .await
            .map_err(|e| self.map_err("get", key, e))?;
        let bytes = output
            .body
            .collect()
            .await
            .map_err(|e| ObjectError::unavailable("get", key, e))?
            .into_bytes();
        if u64::try_from(bytes.len()).ok() != Some(len) {
            return Err(ObjectError::backend(
                "get",
                key,
                format!("asked for {len} bytes at {start}, got {}", bytes.len()),
            ));
        }
        Ok(bytes)
    }

    /// Classify an SDK error; `target` is the caller's key (or the bucket). A 404 that is not
    /// `NoSuchBucket` becomes `NotFound { key: target }`.
    fn map_err<E>(
        &self,
        op: &'static str,
        target: &str,
        err: SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
    ) -> ObjectError
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let status = err.raw_response().map(|r| r.status().as_u16());
        let code = err.code().map(str::to_owned);
        let transient = match &err {
            SdkError::TimeoutError(_)
            | SdkError::DispatchFailure(_)
            | SdkError::ResponseError(_) => true,
            SdkError::ServiceError(_) => {
                status.is_some_and(|s| s >= 500 || s == 429)
                    || matches!(
                        code.as_deref(),
                        Some(
                            "SlowDown"
                                | "ServiceUnavailable"
                                | "InternalError"
                                | "RequestTimeout"
                                // A concurrent conditional write of the same key: the next
                                // attempt finds the object there.
                                | "ConditionalRequestConflict"
                                | "Throttling"
                                | "ThrottlingException"
                        )
                    )
            }
            _ => false,
        };
        let missing_key = matches!(&err, SdkError::ServiceError(_))
            && code.as_deref() != Some("NoSuchBucket")
            && (status == Some(404) || matches!(code.as_deref(), Some("NoSuchKey" | "NotFound")));
        if missing_key {
            return ObjectError::NotFound {
                key: target.to_owned(),
            };
        }
        let failure = S3Failure {
            bucket: self.bucket.clone(),
            status,
            code,
            message: err.message().map(str::to_owned),
            source: Box::new(err),
        };
        if transient {
            ObjectError::unavailable(op, target, failure)
        } else {
            ObjectError::backend(op, target, failure)
        }
    }
}

/// What S3 said, kept in the error chain above the SDK's own error.
#[derive(Debug)]
struct S3Failure {
    bucket: String,
    status: Option<u16>,
    code: Option<String>,
    message: Option<String>,
    source: BoxError,
}

impl fmt::Display for S3Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s3 bucket {:?}", self.bucket)?;
        if let Some(status) = self.status {
            write!(f, ", HTTP {status}")?;
        }
        if let Some(code) = &self.code {
            write!(f, ", {code}")?;
        }
        if let Some(message) = &self.message {
            write!(f, ": {message}")?;
        }
        Ok(())
    }
}

impl std::error::Error for S3Failure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.source.as_ref())
    }
}

fn to_time(t: Option<&aws_smithy_types::DateTime>) -> Option<time::OffsetDateTime> {
    t.and_then(|t| time::OffsetDateTime::from_unix_timestamp_nanos(t.as_nanos()).ok())
}

fn to_size(n: Option<i64>) -> u64 {
    n.and_then(|n| u64::try_from(n).ok()).unwrap_or_default()
}

#[async_trait]
impl ObjectStore for S3ObjectStore {
    #[tracing::instrument(level = "debug", skip_all, fields(key = %key, size = body.len()))]
    async fn put(&self, key: &str, body: Bytes, content_type: &str) -> Result<(), ObjectError> {
        validate_key(key)?;
        self.put_request(key, body, content_type)
            .send()
            .await
            .map(drop)
            .map_err(|e| self.map_err("put", key, e))
    }

    /// One conditional PUT (`If-None-Match: *`): 412 means the key is taken. A server that
    /// answers 501 gets a HEAD and a PUT from then on; one that ignores the header
    /// overwrites, as the trait allows.
    #[tracing::instrument(level = "debug", skip_all, fields(key = %key))]
    async fn put_if_absent(
        &self,
        key: &str,
        body: Bytes,
        content_type: &str,
    ) -> Result<PutOutcome, ObjectError> {
        validate_key(key)?;
        if !self.conditional_writes.load(Ordering::Relaxed) {
            return super::head_then_put(self, key, body, content_type).await;
        }
        let err = match self
            .put_request(key, body.clone(), content_type)
            .if_none_match("*")
            .send()
            .await
        {
            Ok(_) => return Ok(PutOutcome::Created),
            Err(err) => err,
        };
        let status = err.raw_response().map(|r| r.status().as_u16());
        match (status, err.code()) {
            (Some(412), _) | (_, Some("PreconditionFailed")) => Ok(PutOutcome::Exists),
            (Some(501), _) | (_, Some("NotImplemented")) => {
                tracing::warn!(bucket = %self.bucket, "the S3 server does not take conditional writes (If-None-Match); writing with a HEAD and a PUT");
                self.conditional_writes.store(false, Ordering::Relaxed);
                super::head_then_put(self, key, body, content_type).await
            }
            _ => Err(self.map_err("put", key, err)),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(key = %key))]
    async fn get(&self, key: &str) -> Result<ObjectBody, ObjectError> {
        validate_key(key)?;
        let output = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(self.full_key(key))
            .send()
            .await
            .map_err(|e| self.map_err("get", key, e))?;
        let meta = ObjectMeta {
            key: key.to_owned(),
            size: to_size(output.content_length()),
            content_type: output.content_type().map(str::to_owned),
            last_modified: to_time(output.last_modified()),
        };
        let owned_key = key.to_owned();
        let stream = futures::stream::try_unfold(output.body, move |mut body| {
            let key = owned_key.clone();
            async move {
                match body.try_next().await {
                    Ok(Some(chunk)) => Ok(Some((chunk, body))),
                    Ok(None) => Ok(None),
                    Err(e) => Err(ObjectError::unavailable("get", key, e)),
                }
            }
        });
        Ok(ObjectBody {
            meta,
            stream: Box::pin(stream),
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(key = %key))]
    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>, ObjectError> {
        validate_key(key)?;
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(self.full_key(key))
            .send()
            .await
        {
            Ok(output) => Ok(Some(ObjectMeta {
                key: key.to_owned(),
                size: to_size(output.content_length()),
                content_type: output.content_type().map(str::to_owned),
                last_modified: to_time(output.last_modified()),
            })),
            Err(e) => match self.map_err("head", key, e) {
                ObjectError::NotFound { .. } => Ok(None),
                other => Err(other),
            },
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(prefix = %prefix, start_after = ?start_after, limit = limit))]
    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<ListPage, ObjectError> {
        validate_prefix(prefix)?;
        let mut page = PageBuilder::new(prefix, start_after, limit);
        let full_prefix = self.full_key(prefix);
        // ListObjectsV2 applies the same rule server side (prefix, StartAfter, key order);
        // the builder decides what the page holds and when it is complete.
        let mut after = start_after.map(|s| self.full_key(s));
        loop {
            let want = page.still_wanted().min(S3_MAX_KEYS);
            let output = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(&full_prefix)
                .set_start_after(after.clone())
                .max_keys(i32::try_from(want).unwrap_or(1000))
                .send()
                .await
                .map_err(|e| self.map_err("list", prefix, e))?;
            let truncated = output.is_truncated().unwrap_or(false);
            let mut last_full_key = None;
            for object in output.contents() {
                let Some(full) = object.key() else { continue };
                last_full_key = Some(full.to_owned());
                let Some(key) = full.strip_prefix(&self.prefix) else {
                    continue;
                };
                page.offer(ObjectMeta {
                    key: key.to_owned(),
                    size: to_size(object.size()),
                    content_type: None,
                    last_modified: to_time(object.last_modified()),
                });
            }
            match last_full_key.filter(|_| truncated) {
                Some(last) if !page.is_complete() => after = Some(last),
                _ => return Ok(page.finish()),
            }
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(key = %key))]
    async fn delete(&self, key: &str) -> Result<(), ObjectError> {
        validate_key(key)?;
        match self
            .client
            .delete_object()
            .bucket(&self.bucket)
            .key(self.full_key(key))
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => match self.map_err("delete", key, e) {
                ObjectError::NotFound { .. } => Ok(()),
                other => Err(other),
            },
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(bucket = %self.bucket))]
    async fn check(&self) -> Result<(), ObjectError> {
        if self.bucket_exists().await? {
            Ok(())
        } else {
            Err(ObjectError::backend(
                "check",
                self.bucket.clone(),
                format!("bucket {:?} does not exist", self.bucket),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_full_url() {
        let loc = S3Location::parse(
            "s3://noema-test/prod/ledger?endpoint=http://127.0.0.1:9000&region=eu-west-1&create_bucket=true",
        );
        assert_eq!(
            loc.ok(),
            Some(S3Location {
                bucket: "noema-test".into(),
                prefix: "prod/ledger/".into(),
                endpoint: Some("http://127.0.0.1:9000".into()),
                region: Some("eu-west-1".into()),
                force_path_style: true,
                create_bucket: true,
            })
        );
    }

    #[test]
    fn plain_aws_urls_use_virtual_hosted_style() {
        let loc = S3Location::parse("s3://my-bucket").ok();
        assert_eq!(loc.as_ref().map(|l| l.force_path_style), Some(false));
        assert_eq!(loc.map(|l| l.prefix), Some(String::new()));
    }

    #[test]
    fn rejects_bad_urls_with_reasons() {
        for (url, needle) in [
            ("s3://", "no bucket"),
            ("s3://ab", "3 to 63"),
            ("s3://Bad_Bucket", "lowercase"),
            ("s3://b-1/x?endpoint=ftp://h", "http://"),
            (
                "s3://b-1/x?endpoint=http://h&bogus=1",
                "unknown parameter `bogus`",
            ),
            ("s3://b-1/x?create_bucket=maybe", "true or false"),
            ("s3://key:secret@b-1/x", "credentials"),
            ("s3://b-1/a//b", "bad prefix"),
        ] {
            match S3Location::parse(url) {
                Err(ObjectError::InvalidUrl {
                    reason,
                    url_redacted,
                }) => {
                    assert!(reason.contains(needle), "{url}: {reason}");
                    assert!(!url_redacted.contains("secret"), "{url_redacted}");
                }
                other => panic!("{url}: {other:?}"),
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(crate::proptest_config())]

        #[test]
        fn any_url_is_read_or_refused(
            url in "s3://[a-z.\\-]{0,8}(/[a-z%]{0,4}){0,2}(\\?([a-z_]{0,14}=[a-z0-9:/.%]{0,12}&?){0,4})?",
            other in proptest::prelude::any::<String>(),
        ) {
            let _ = S3Location::parse(&url);
            let _ = S3Location::parse(&other);
        }
    }
}
