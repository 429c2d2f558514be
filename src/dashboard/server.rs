//! The dashboard's HTTP side: routes to the pages, the embedded assets, the Server-Sent Events
//! stream of [`Update`]s, the token check (when there is a token) and the security headers every
//! response carries. It reads the view model and never calls the API server.

use std::convert::Infallible;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame};
use k8s_openapi::jiff::Timestamp;
use maud::Markup;
use tokio::sync::broadcast;

use super::fleet_query::FleetQuery;
use super::model::Model;
use super::pages;
use super::watch::Update;

/// A response body: a page at once, or the stream of live updates.
pub type Body = BoxBody<Bytes, Infallible>;

/// The cookie a `?token=` sign-in sets.
const COOKIE: &str = "fleetform-dashboard";
/// How often an idle live-update stream says it is there (so a closed one is noticed).
const HEARTBEAT: Duration = Duration::from_secs(15);

const SCRIPT: &str = include_str!("assets/dashboard.js");
const STYLE: &str = include_str!("assets/dashboard.css");

/// Who may look.
#[derive(Clone)]
pub enum Access {
    /// Anyone who reaches the address (`up`'s loopback default, or behind a port-forward).
    Open,
    /// Whoever presents the token (kept as its SHA-256), which may change while the dashboard
    /// runs ([`Access::replace`]); none admits nobody.
    Token(Arc<RwLock<Option<Vec<u8>>>>),
}

impl Access {
    pub fn token(token: &str) -> Access {
        Access::Token(Arc::new(RwLock::new(Some(digest(token)))))
    }

    /// Admits the bearers of `token` from now on, and nobody else (nobody at all for `None`).
    /// An open dashboard stays open.
    pub fn replace(&self, token: Option<&str>) {
        if let Access::Token(expected) = self {
            *expected
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = token.map(digest);
        }
    }

    fn admits(&self, presented: Option<&str>) -> bool {
        match self {
            Access::Open => true,
            // Digests of equal length compared in full: the time taken says nothing of the token.
            Access::Token(expected) => {
                let expected = expected
                    .read()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                match (expected.as_ref(), presented) {
                    (Some(expected), Some(presented)) => {
                        digest(presented)
                            .iter()
                            .zip(expected)
                            .fold(0u8, |differ, (a, b)| differ | (a ^ b))
                            == 0
                    }
                    _ => false,
                }
            }
        }
    }
}

fn digest(token: &str) -> Vec<u8> {
    ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
        .as_ref()
        .to_vec()
}

/// What every request is served from.
pub struct Dashboard {
    pub model: Arc<RwLock<Model>>,
    pub updates: broadcast::Sender<Arc<Update>>,
    pub access: Access,
    /// The stylesheet with the timeline's segment classes.
    style: String,
}

impl Dashboard {
    pub fn new(
        model: Arc<RwLock<Model>>,
        updates: broadcast::Sender<Arc<Update>>,
        access: Access,
    ) -> Self {
        Dashboard {
            model,
            updates,
            access,
            style: format!("{STYLE}{}", pages::segment_css()),
        }
    }

    /// Answers `request`.
    pub fn handle<B>(&self, request: &Request<B>) -> Response<Body> {
        if request.method() != Method::GET && request.method() != Method::HEAD {
            let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "only GET");
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return response;
        }
        let path = request.uri().path();
        let query = request.uri().query().unwrap_or_default();
        match path {
            "/assets/dashboard.js" => return asset("text/javascript; charset=utf-8", SCRIPT),
            "/assets/dashboard.css" => {
                return asset("text/css; charset=utf-8", self.style.clone());
            }
            _ => {}
        }
        if let Some(refused) = self.check_access(request, path, query) {
            return refused;
        }
        let now = Timestamp::now();
        if path == "/events" {
            return self.live_updates();
        }
        let model = self
            .model
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let page = match segments.as_slice() {
            [""] => Some(pages::fleet_page(&model, &FleetQuery::parse(query), now)),
            ["sync"] => Some(pages::sync_page(&model, now)),
            ["hubs", hub, "spokes", spoke] => pages::spoke_page(&model, hub, spoke, now),
            ["hubs", hub, "rollout"] => pages::rollout_page(&model, hub, now),
            _ => None,
        };
        match page {
            Some(page) => html(StatusCode::OK, page),
            None => html(StatusCode::NOT_FOUND, pages::not_found(&model, path, now)),
        }
    }

    /// `None` when the request may go on; else the answer: the sign-in page (401), or a
    /// redirect setting the cookie after a good `?token=`.
    fn check_access<B>(
        &self,
        request: &Request<B>,
        path: &str,
        query: &str,
    ) -> Option<Response<Body>> {
        if matches!(self.access, Access::Open) {
            return None;
        }
        let bearer = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        let cookie = request
            .headers()
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(';'))
            .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='));
        if self.access.admits(bearer) || self.access.admits(cookie) {
            return None;
        }
        let given = form_urlencoded::parse(query.as_bytes())
            .find(|(key, _)| key == "token")
            .map(|(_, value)| value.into_owned());
        match given {
            Some(token) if self.access.admits(Some(&token)) => {
                let rest: String = form_urlencoded::Serializer::new(String::new())
                    .extend_pairs(
                        form_urlencoded::parse(query.as_bytes()).filter(|(key, _)| key != "token"),
                    )
                    .finish();
                let location = if rest.is_empty() {
                    path.to_string()
                } else {
                    format!("{path}?{rest}")
                };
                let mut response = empty(StatusCode::SEE_OTHER);
                let headers = response.headers_mut();
                if let Ok(location) = HeaderValue::from_str(&location) {
                    headers.insert(header::LOCATION, location);
                }
                if let Ok(cookie) = HeaderValue::from_str(&format!(
                    "{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
                )) {
                    headers.insert(header::SET_COOKIE, cookie);
                }
                Some(response)
            }
            given => {
                let mut response =
                    html(StatusCode::UNAUTHORIZED, pages::login_page(given.is_some()));
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                Some(response)
            }
        }
    }

    /// The Server-Sent Events stream: `hello` with the model's version (a page of another
    /// version fetches itself again), one `update` event per batch of changes, `reload` when
    /// this viewer fell behind, a comment now and then.
    fn live_updates(&self) -> Response<Body> {
        let receiver = self.updates.subscribe();
        // Read after subscribing: an update in between is in the stream, or in this version.
        let version = self
            .model
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .version;
        let opening = futures::stream::once(async move {
            format!("retry: 2000\n\nevent: hello\ndata: {version}\n\n")
        });
        let updates = futures::stream::unfold(receiver, |mut receiver| async move {
            let text = tokio::select! {
                received = receiver.recv() => match received {
                    Ok(update) => sse_event(&update),
                    Err(broadcast::error::RecvError::Lagged(_)) => "event: reload\ndata: {}\n\n".to_string(),
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
                _ = tokio::time::sleep(HEARTBEAT) => ": still here\n\n".to_string(),
            };
            Some((text, receiver))
        });
        let frames = futures::StreamExt::map(futures::StreamExt::chain(opening, updates), |text| {
            Ok::<_, Infallible>(Frame::data(Bytes::from(text)))
        });
        let mut response = Response::new(BodyExt::boxed(StreamBody::new(frames)));
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        secure(headers);
        response
    }
}

/// One update as an SSE `update` event (JSON: topics, rows, summary).
pub fn sse_event(update: &Update) -> String {
    let data = serde_json::json!({
        "topics": update.topics,
        "rows": update.rows,
        "summary": update.summary,
    });
    format!("event: update\ndata: {data}\n\n")
}

/// The headers every response carries: no inline script or style, no framing, no sniffing, no
/// referrer, nothing cached.
fn secure(headers: &mut http::HeaderMap) {
    for (name, value) in [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'self'; script-src 'self'; style-src 'self'; frame-ancestors 'none'",
        ),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

fn respond(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut response = Response::new(BodyExt::boxed(Full::new(body.into())));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    secure(headers);
    response
}

fn html(status: StatusCode, page: Markup) -> Response<Body> {
    respond(status, "text/html; charset=utf-8", page.into_string())
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    respond(status, "text/plain; charset=utf-8", text)
}

fn empty(status: StatusCode) -> Response<Body> {
    respond(status, "text/plain; charset=utf-8", "")
}

fn asset(content_type: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    respond(StatusCode::OK, content_type, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dashboard::model::tests::{model_with, spoke};
    use serde_json::json;

    fn dashboard(access: Access) -> Dashboard {
        let model = model_with(&[spoke("edge", json!({}))]);
        Dashboard::new(
            Arc::new(RwLock::new(model)),
            broadcast::channel(4).0,
            access,
        )
    }

    fn get(dashboard: &Dashboard, uri: &str, header: Option<(&str, &str)>) -> Response<Body> {
        let mut request = Request::get(uri);
        if let Some((name, value)) = header {
            request = request.header(name, value);
        }
        dashboard.handle(&request.body(()).unwrap())
    }

    async fn text(response: Response<Body>) -> String {
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn every_page_carries_the_security_headers_and_unknown_paths_are_404() {
        let dashboard = dashboard(Access::Open);
        for (uri, status) in [
            ("/", 200),
            ("/sync", 200),
            ("/hubs/hub/spokes/edge", 200),
            ("/hubs/hub/rollout", 200),
            ("/assets/dashboard.js", 200),
            ("/hubs/hub/spokes/nope", 404),
            ("/nope", 404),
        ] {
            let response = get(&dashboard, uri, None);
            assert_eq!(response.status().as_u16(), status, "{uri}");
            let headers = response.headers();
            assert_eq!(
                headers[header::CONTENT_SECURITY_POLICY],
                "default-src 'self'; script-src 'self'; style-src 'self'; frame-ancestors 'none'"
            );
            assert_eq!(headers[header::X_FRAME_OPTIONS], "DENY");
            assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
            assert_eq!(headers[header::REFERRER_POLICY], "no-referrer");
        }
        let post = dashboard.handle(&Request::post("/").body(()).unwrap());
        assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
        let page = text(get(&dashboard, "/", None)).await;
        assert!(page.contains("edge"), "{page}");
        assert!(!page.contains("<script>"), "no inline script: {page}");
    }

    #[tokio::test]
    async fn with_a_token_only_its_bearer_or_a_signed_in_cookie_sees_the_pages() {
        let dashboard = dashboard(Access::token("s3cret"));
        let refused = get(&dashboard, "/", None);
        assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(refused.headers()[header::WWW_AUTHENTICATE], "Bearer");
        assert!(!text(refused).await.contains("edge"));
        for path in ["/events", "/hubs/hub/spokes/edge", "/sync"] {
            assert_eq!(
                get(&dashboard, path, None).status(),
                StatusCode::UNAUTHORIZED,
                "{path}"
            );
        }
        let wrong = get(&dashboard, "/", Some(("authorization", "Bearer guess")));
        assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
        let bearer = get(&dashboard, "/", Some(("authorization", "Bearer s3cret")));
        assert_eq!(bearer.status(), StatusCode::OK);
        assert_eq!(
            get(&dashboard, "/assets/dashboard.css", None).status(),
            StatusCode::OK,
            "the sign-in page's stylesheet"
        );
        let signed_in = get(&dashboard, "/sync?token=s3cret&x=1", None);
        assert_eq!(signed_in.status(), StatusCode::SEE_OTHER);
        assert_eq!(signed_in.headers()[header::LOCATION], "/sync?x=1");
        let cookie = signed_in.headers()[header::SET_COOKIE].to_str().unwrap();
        assert!(
            cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
            "{cookie}"
        );
        let pair = cookie.split(';').next().unwrap();
        assert_eq!(
            get(
                &dashboard,
                "/sync",
                Some(("cookie", &format!("other=1; {pair}")))
            )
            .status(),
            StatusCode::OK
        );
        let bad = get(&dashboard, "/?token=guess", None);
        assert_eq!(bad.status(), StatusCode::UNAUTHORIZED);
        assert!(text(bad).await.contains("not this dashboard"));
    }

    #[tokio::test]
    async fn the_live_stream_carries_each_update_as_one_event() {
        let dashboard = dashboard(Access::Open);
        let response = get(&dashboard, "/events", None);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/event-stream"
        );
        let mut body = response.into_body();
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(first, "retry: 2000\n\nevent: hello\ndata: 0\n\n");
        dashboard
            .updates
            .send(Arc::new(Update {
                topics: vec!["fleet".into()],
                rows: vec![("row:hub/edge".into(), "<tr>\n</tr>".into())],
                summary: None,
            }))
            .unwrap();
        let event = body.frame().await.unwrap().unwrap().into_data().unwrap();
        let event = String::from_utf8(event.to_vec()).unwrap();
        let data = event
            .strip_prefix("event: update\ndata: ")
            .and_then(|rest| rest.strip_suffix("\n\n"))
            .unwrap();
        assert!(!data.contains('\n'), "one data line: {event}");
        let data: serde_json::Value = serde_json::from_str(data).unwrap();
        assert_eq!(data["rows"][0][0], "row:hub/edge");
        assert_eq!(data["topics"], json!(["fleet"]));
    }
}
