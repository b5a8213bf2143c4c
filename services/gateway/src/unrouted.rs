//! What a request no route serves gets. CogniRelay's FastAPI answers an unknown path with
//! 404 `{"detail":"Not Found"}` and a known path with another method with 405
//! `{"detail":"Method Not Allowed"}`; clients of the original read `detail`. A path is
//! judged by the routes nearest to it (the most leading segments in common): where most of
//! those are CogniRelay's, it gets FastAPI's body; elsewhere the status alone, as before.
//! There, as Starlette does, a path that is served but for a trailing slash is redirected
//! (307, which keeps the method and body) to the served path; a 405 names in `Allow` the
//! methods the path's routes serve (not HEAD: FastAPI's routes do not serve it, and HEAD is
//! such a 405). Starlette names only its first matching route's method, which differs on a
//! path with two routes (`/v1/schedule/items`: `POST`); RFC 9110, and the OpenAPI checks CI
//! runs, want them all.

use std::sync::LazyLock;

use axum::http::header::{ALLOW, CONTENT_TYPE, LOCATION};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use crate::error::ErrorStyle;
use crate::route::Verb;

/// Each route's path segments, error style and method.
static ROUTES: LazyLock<Vec<(Vec<&'static str>, ErrorStyle, Verb)>> = LazyLock::new(|| {
    crate::route_table()
        .into_iter()
        .map(|route| (segments(route.path).collect(), route.errors, route.verb))
        .collect()
});

fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|s| !s.is_empty())
}

/// How many leading segments of `path` a route's segments match (`{param}` matches any).
fn common(route: &[&str], path: &[&str]) -> usize {
    route
        .iter()
        .zip(path)
        .take_while(|(r, p)| r == p || is_param(r))
        .count()
}

fn is_param(segment: &str) -> bool {
    segment.starts_with('{') && segment.ends_with('}')
}

/// The methods of the route pattern the router matches `path` to (a literal segment before
/// a parameter, as the router prefers: `/handoff/create` is not `/handoff/{handoff_id}`),
/// in table order.
fn serving(path: &str) -> Vec<Verb> {
    let path: Vec<&str> = segments(path).collect();
    let matching: Vec<&(Vec<&str>, ErrorStyle, Verb)> = ROUTES
        .iter()
        .filter(|(route, _, _)| route.len() == path.len() && common(route, &path) == path.len())
        .collect();
    let literals = |route: &[&str]| route.iter().map(|s| !is_param(s)).collect::<Vec<bool>>();
    let Some(best) = matching.iter().map(|(route, _, _)| literals(route)).max() else {
        return Vec::new();
    };
    matching
        .into_iter()
        .filter(|(route, _, _)| literals(route) == best)
        .map(|(_, _, verb)| *verb)
        .collect()
}

/// Whether a route serves `path` (any method).
fn served(path: &str) -> bool {
    !serving(path).is_empty()
}

/// Whether most of the routes nearest to `path` are CogniRelay's.
fn near_cognirelay(path: &str) -> bool {
    let path: Vec<&str> = segments(path).collect();
    let best = ROUTES
        .iter()
        .map(|(route, _, _)| common(route, &path))
        .max()
        .unwrap_or(0);
    if best == 0 {
        return false;
    }
    let (ours, others) = ROUTES
        .iter()
        .filter(|(route, _, _)| common(route, &path) == best)
        .fold((0usize, 0usize), |(ours, others), (_, style, _)| {
            if *style == ErrorStyle::CogniRelay {
                (ours + 1, others)
            } else {
                (ours, others + 1)
            }
        });
    ours > others
}

fn answer(status: StatusCode, detail: &str, uri: &Uri) -> Response {
    if near_cognirelay(uri.path()) {
        let body = serde_json::json!({ "detail": detail }).to_string();
        (status, [(CONTENT_TYPE, "application/json")], body).into_response()
    } else {
        status.into_response()
    }
}

/// A path no route serves.
pub async fn not_found(uri: Uri) -> Response {
    let path = uri.path();
    if let Some(trimmed) = path.strip_suffix('/')
        && !trimmed.is_empty()
        && near_cognirelay(trimmed)
        && served(trimmed)
    {
        let location = match uri.query() {
            Some(query) => format!("{trimmed}?{query}"),
            None => trimmed.to_owned(),
        };
        return (StatusCode::TEMPORARY_REDIRECT, [(LOCATION, location)]).into_response();
    }
    answer(StatusCode::NOT_FOUND, "Not Found", &uri)
}

/// A served path asked with a method it does not serve.
pub async fn method_not_allowed(uri: Uri) -> Response {
    let mut response = answer(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed", &uri);
    let verbs = serving(uri.path());
    if near_cognirelay(uri.path()) && !verbs.is_empty() {
        let allow: Vec<&str> = verbs.iter().map(|verb| verb.as_str()).collect();
        // Set here, axum keeps it rather than adding HEAD.
        if let Ok(value) = axum::http::HeaderValue::from_str(&allow.join(", ")) {
            response.headers_mut().insert(ALLOW, value);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cognirelay_paths_are_told_apart_from_the_others() {
        for path in [
            "/v1/continuity/nope",
            "/v1/metrics",
            "/v1/discovery/workflows",
            "/v1/help/hooks",
            "/v1/messages/inbox/x",
        ] {
            assert!(near_cognirelay(path), "{path}");
        }
        for path in ["/", "/nope", "/diaries/x/y/z/w", "/plan/x"] {
            assert!(!near_cognirelay(path), "{path}");
        }
        assert!(served("/v1/capabilities"));
        assert!(served("/v1/coordination/handoff/h-1"));
        assert!(!served("/v1/coordination/handoff/h-1/nope"));
        assert_eq!(serving("/v1/schedule/items"), [Verb::Post, Verb::Get]);
        assert_eq!(serving("/v1/schedule/items/s-1"), [Verb::Get, Verb::Patch]);
        assert!(serving("/v1/nope").is_empty());
        assert_eq!(serving("/v1/coordination/handoff/create"), [Verb::Post]);
        assert_eq!(serving("/v1/coordination/handoff/h-1"), [Verb::Get]);
        assert_eq!(serving("/v1/tasks/query"), [Verb::Get]);
    }
}
