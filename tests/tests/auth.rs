//! Every RPC of every service in the cluster refuses a missing token and a token without
//! the scope it declares; every non-public REST route does the same, and refuses a missing,
//! unknown or malformed token before it reads the body. The RPC list comes
//! from the descriptor set, so a new RPC is covered without editing this test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use noema_e2e::{TestCluster, anonymous, client_as, cluster_cases, concrete_path};
use prost::Message;
use tonic::codegen::http::uri::PathAndQuery;

cluster_cases!(
    every_rpc_requires_a_token_and_its_scope,
    every_rest_route_requires_a_token_and_its_scope,
);

/// `(service, method path)` for every Noema RPC in the descriptor set.
fn every_rpc() -> Vec<(String, String)> {
    let set = prost_types::FileDescriptorSet::decode(noema_proto::FILE_DESCRIPTOR_SET).unwrap();
    let mut out = Vec::new();
    for file in set.file {
        let package = file.package().to_owned();
        if !package.starts_with("noema.") {
            continue;
        }
        for service in &file.service {
            let full = format!("{package}.{}", service.name());
            for method in &service.method {
                out.push((full.clone(), format!("/{full}/{}", method.name())));
            }
        }
    }
    assert!(
        out.len() >= 17,
        "descriptor set lists too few RPCs: {out:?}"
    );
    out
}

/// Calls `path` with an empty request and the given bearer token (if any).
async fn call(
    channel: tonic::transport::Channel,
    path: &str,
    token: Option<&str>,
) -> tonic::Status {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let mut request = tonic::Request::new(());
    if let Some(token) = token {
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    let codec = tonic_prost::ProstCodec::<(), ()>::default();
    match grpc
        .unary(request, PathAndQuery::try_from(path).unwrap(), codec)
        .await
    {
        Ok(_) => tonic::Status::ok(""),
        Err(status) => status,
    }
}

/// A scope a token may hold that no Noema RPC accepts (checked here, so a new RPC that
/// starts accepting it makes this test say so instead of passing vacuously).
fn unrelated_scope() -> &'static str {
    const SCOPE: &str = "replication:sync";
    for (_, path) in every_rpc() {
        let required = noema_proto::required_scope(&path).unwrap();
        assert!(
            !required.split('|').any(|scope| scope == SCOPE),
            "{path} accepts {SCOPE}: pick another scope no RPC accepts"
        );
    }
    SCOPE
}

async fn every_rpc_requires_a_token_and_its_scope(cluster: &TestCluster) {
    let unrelated = cluster
        .issue_token("peer:unrelated", &[unrelated_scope()])
        .await
        .unwrap();
    for (service, path) in every_rpc() {
        let endpoint = cluster
            .endpoint_of(&service)
            .unwrap_or_else(|| panic!("the test cluster does not know where {service} is served"));
        let channel = cluster.channel(endpoint).await.unwrap();

        let required = noema_proto::required_scope(&path).unwrap();
        let status = call(channel.clone(), &path, None).await;
        if required == noema_core::scopes::PUBLIC {
            assert_ne!(
                status.code(),
                tonic::Code::Unauthenticated,
                "{path} is public: {status:?}"
            );
        } else {
            assert_eq!(
                status.code(),
                tonic::Code::Unauthenticated,
                "{path} without a token: {status:?}"
            );
        }

        let status = call(channel.clone(), &path, Some("noema_not_a_real_token")).await;
        assert_eq!(
            status.code(),
            tonic::Code::Unauthenticated,
            "{path} with a bogus token"
        );
        assert_eq!(status.message(), "invalid token", "{path}");

        let status = call(channel, &path, Some(&unrelated)).await;
        if required == noema_core::scopes::AUTHENTICATED || required == noema_core::scopes::PUBLIC {
            assert!(
                !matches!(
                    status.code(),
                    tonic::Code::Unauthenticated | tonic::Code::PermissionDenied
                ),
                "{path} needs only a valid token: {status:?}"
            );
        } else {
            assert_eq!(
                status.code(),
                tonic::Code::PermissionDenied,
                "{path} without {required}"
            );
            assert!(
                status.message().contains(required),
                "{path}: {}",
                status.message()
            );
        }
    }
}

async fn every_rest_route_requires_a_token_and_its_scope(cluster: &TestCluster) {
    let unrelated = cluster
        .issue_token("peer:unrelated", &[unrelated_scope()])
        .await
        .unwrap();
    let doc: serde_json::Value = anonymous()
        .get(format!("{}/openapi.json", cluster.rest_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut checked = 0;
    let mut cognirelay = 0;
    for (path, ops) in doc["paths"].as_object().unwrap() {
        // Any value fills a path parameter: authentication happens before validation.
        let concrete = concrete_path(path);
        for (method, op) in ops.as_object().unwrap() {
            let url = format!("{}{concrete}", cluster.rest_url);
            let public = op["security"].as_array().is_some_and(|s| s.is_empty());
            let send = |client: reqwest::Client, body: &'static str| {
                let request = match method.as_str() {
                    "get" => client.get(&url),
                    "post" => client.post(&url).body(body),
                    "patch" => client.patch(&url).body(body),
                    "delete" => client.delete(&url).body(body),
                    other => panic!("untested method {other}"),
                };
                request.header("content-type", "application/json").send()
            };
            // A body that cannot be valid anywhere: the missing token is said first.
            let status = send(anonymous(), "{not json")
                .await
                .unwrap()
                .status()
                .as_u16();
            if public {
                assert_ne!(status, 401, "{method} {path} is documented as public");
                continue;
            }
            assert_eq!(
                status, 401,
                "{method} {path} without a token (and a malformed body)"
            );
            // A token the identity service does not know is refused before the body is
            // read too, as is a header that is not a bearer token.
            let status = send(client_as("not-a-token-anyone-issued"), "{not json")
                .await
                .unwrap()
                .status()
                .as_u16();
            assert_eq!(
                status, 401,
                "{method} {path} with an unknown token (and a malformed body)"
            );
            let basic = {
                let mut headers = reqwest::header::HeaderMap::new();
                headers.insert(
                    reqwest::header::AUTHORIZATION,
                    reqwest::header::HeaderValue::from_static("Basic YTpi"),
                );
                reqwest::Client::builder()
                    .default_headers(headers)
                    .build()
                    .unwrap()
            };
            let status = send(basic, "{not json").await.unwrap().status().as_u16();
            assert_eq!(
                status, 401,
                "{method} {path} with a Basic authorization header (and a malformed body)"
            );
            let refused = send(client_as(&unrelated), "{}").await.unwrap();
            let status = refused.status().as_u16();
            let body = refused.text().await.unwrap();
            // These two need only a valid token: /crypto/identity answers who it is, and
            // the MCP endpoint lists and calls only the tools the token's scopes allow
            // (tests/tests/mcp.rs checks that).
            if !["/crypto/identity", "/v1/mcp"].contains(&path.as_str()) {
                assert_eq!(
                    status, 403,
                    "{method} {path} with a token lacking the scope"
                );
                // CogniRelay's routes answer as the original does, naming its scope.
                if op["responses"]["403"]["content"]["application/json"]["schema"]["$ref"]
                    == "#/components/schemas/CogniRelayError"
                {
                    let required = op["x-required-scope"].as_str().unwrap();
                    let scope = noema_core::scopes::cognirelay_scope(required);
                    assert_eq!(
                        body,
                        format!(r#"{{"detail":"Missing scope: {scope}"}}"#),
                        "{method} {path} with a token lacking {required}"
                    );
                    cognirelay += 1;
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 12, "only {checked} protected routes found");
    assert!(
        cognirelay >= 40,
        "only {cognirelay} CogniRelay routes checked"
    );
}
