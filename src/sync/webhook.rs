//! The push receiver of `fleetform sync --webhook-addr`: `POST /hooks/NAME` for the FleetSync
//! NAME (in the sync's namespace) whose `spec.webhook.secretRef` names a Secret with a `token`.
//!
//! A request is authenticated as GitHub sends it (`X-Hub-Signature-256: sha256=HMAC`), as
//! GitLab does (`X-Gitlab-Token: TOKEN`), or as any other sender can (`X-Signature:
//! sha256=HMAC`, the HMAC-SHA256 of the body keyed with the token); anything else gets 401 and is
//! counted. A push for the FleetSync's repository and ref asks for a fetch by setting the
//! annotation [`FETCH_REQUESTED`] on the FleetSync, which whichever replica leads sees at once;
//! within [`DEFAULT_COALESCE`] of one request, further pushes make at most one more, at the
//! window's end, so a burst makes one or two fetches, never one per push. Bodies over
//! [`MAX_BODY_BYTES`] get 413, and more than [`RATE_BURST`] requests at once 429.
//!
//! This module must not fetch or apply: the controller does, when it sees the annotation.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{HeaderMap, Method, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use ring::hmac;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::metrics::Metrics;
use crate::api::fleet::FleetSync;

/// The annotation a valid push sets (to the time of the request) to ask for a fetch.
pub const FETCH_REQUESTED: &str = "fleetform.io/fetch-requested";
/// The key of the webhook Secret that holds the shared token.
pub const TOKEN_KEY: &str = "token";
/// The largest body accepted (GitHub's push payloads are far smaller).
pub const MAX_BODY_BYTES: usize = 1 << 20;
/// How long after one fetch request further pushes are folded into one more.
pub const DEFAULT_COALESCE: Duration = Duration::from_secs(1);
/// Requests the receiver takes at once; then [`RATE_PER_SECOND`] more each second.
pub const RATE_BURST: f64 = 100.0;
/// Requests per second the receiver takes once its burst is spent.
pub const RATE_PER_SECOND: f64 = 20.0;

const PATH_PREFIX: &str = "/hooks/";

/// Who sent a push, by the headers it came with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sender {
    GitHub,
    GitLab,
    Generic,
}

/// Why a request is not taken, and what it is answered.
#[derive(Debug, PartialEq, Eq)]
struct Rejection {
    status: StatusCode,
    /// The `result` label of the requests counter.
    result: &'static str,
    message: String,
}

impl Rejection {
    fn new(status: StatusCode, result: &'static str, message: impl Into<String>) -> Self {
        Rejection {
            status,
            result,
            message: message.into(),
        }
    }

    fn unauthorized(message: impl Into<String>) -> Self {
        Rejection::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }
}

/// Checks that the request was made with `token`; returns its sender.
fn authenticate(headers: &HeaderMap, body: &[u8], token: &[u8]) -> Result<Sender, Rejection> {
    let header = |name: &str| headers.get(name).map(|value| value.as_bytes());
    let signed = |signature: Option<&[u8]>, name: &str| {
        let signature = signature.ok_or_else(|| Rejection::unauthorized(format!("no {name}")))?;
        let hex = signature
            .strip_prefix(b"sha256=")
            .ok_or_else(|| Rejection::unauthorized(format!("{name} is not sha256=HEX")))?;
        let tag = decode_hex(hex)
            .ok_or_else(|| Rejection::unauthorized(format!("{name} is not sha256=HEX")))?;
        hmac::verify(&hmac::Key::new(hmac::HMAC_SHA256, token), body, &tag)
            .map_err(|_| Rejection::unauthorized(format!("{name} does not match the body")))
    };
    if header("x-github-event").is_some() {
        signed(header("x-hub-signature-256"), "X-Hub-Signature-256")?;
        Ok(Sender::GitHub)
    } else if header("x-gitlab-event").is_some() {
        let given =
            header("x-gitlab-token").ok_or_else(|| Rejection::unauthorized("no X-Gitlab-Token"))?;
        // Compared as HMACs, so the comparison takes as long whatever the token.
        let key = hmac::Key::new(hmac::HMAC_SHA256, b"fleetform gitlab token");
        hmac::verify(&key, given, hmac::sign(&key, token).as_ref())
            .map_err(|_| Rejection::unauthorized("X-Gitlab-Token is not the token"))?;
        Ok(Sender::GitLab)
    } else {
        signed(header("x-signature"), "X-Signature")?;
        Ok(Sender::Generic)
    }
}

fn decode_hex(hex: &[u8]) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    hex.chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect()
}

/// What an authenticated request asks for.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// A push for the FleetSync's repository and ref (or a generic request): fetch.
    Fetch,
    /// Nothing to fetch for; the reason is the answer.
    Ignore(String),
}

/// Whether an authenticated request from `sender` concerns the FleetSync's `repo` at `git_ref`.
fn judge(sender: Sender, headers: &HeaderMap, body: &[u8], repo: &str, git_ref: &str) -> Verdict {
    let event = headers
        .get(match sender {
            Sender::GitHub => "x-github-event",
            Sender::GitLab => "x-gitlab-event",
            Sender::Generic => "x-event",
        })
        .and_then(|value| value.to_str().ok())
        .unwrap_or("push");
    let push = match sender {
        Sender::GitHub => event == "push",
        Sender::GitLab => matches!(event, "Push Hook" | "Tag Push Hook"),
        Sender::Generic => true,
    };
    if !push {
        return Verdict::Ignore(format!("event {event:?} is not a push"));
    }
    let payload: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let urls: Vec<&str> = [
        "/repository/clone_url",
        "/repository/ssh_url",
        "/repository/git_url",
        "/repository/html_url",
        "/project/git_http_url",
        "/project/git_ssh_url",
        "/project/web_url",
        "/repository",
    ]
    .iter()
    .filter_map(|pointer| payload.pointer(pointer)?.as_str())
    .collect();
    let ours = normalize_repo(repo);
    if !urls.is_empty() && !urls.iter().any(|url| normalize_repo(url) == ours) {
        return Verdict::Ignore(format!("the push is for {}, not {repo}", urls[0]));
    }
    let Some(pushed) = payload.pointer("/ref").and_then(Value::as_str) else {
        return Verdict::Fetch;
    };
    let short = pushed
        .strip_prefix("refs/heads/")
        .or_else(|| pushed.strip_prefix("refs/tags/"))
        .unwrap_or(pushed);
    let default_branch = ["/repository/default_branch", "/project/default_branch"]
        .iter()
        .find_map(|pointer| payload.pointer(pointer)?.as_str());
    let follows = match git_ref {
        "" | "HEAD" => default_branch.is_none_or(|branch| branch == short),
        git_ref => git_ref == pushed || git_ref == short,
    };
    if follows {
        Verdict::Fetch
    } else {
        Verdict::Ignore(format!("the push is for {pushed}, not {git_ref}"))
    }
}

/// A repository URL reduced to host and path: scheme, user, `.git` and case set aside, an
/// scp-like `git@host:path` read as `host/path`.
fn normalize_repo(url: &str) -> String {
    let url = url.trim().trim_end_matches('/');
    let url = url.strip_suffix(".git").unwrap_or(url);
    let rest = match url.split_once("://") {
        Some((_, rest)) => rest.to_string(),
        None => match url.split_once(':') {
            Some((host, path)) if !host.contains('/') && !path.starts_with("//") => {
                format!("{host}/{}", path.trim_start_matches('/'))
            }
            _ => url.to_string(),
        },
    };
    let rest = rest
        .rsplit_once('@')
        .map_or(rest.as_str(), |(_, host)| host);
    rest.to_ascii_lowercase()
}

/// A token bucket: [`RATE_BURST`] at once, [`RATE_PER_SECOND`] after.
#[derive(Debug)]
struct RateLimit {
    tokens: f64,
    at: Instant,
}

impl RateLimit {
    fn new() -> Self {
        RateLimit {
            tokens: RATE_BURST,
            at: Instant::now(),
        }
    }

    fn take(&mut self, now: Instant) -> bool {
        let refill = now.saturating_duration_since(self.at).as_secs_f64() * RATE_PER_SECOND;
        self.tokens = (self.tokens + refill).min(RATE_BURST);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The fetch requests of one FleetSync: when the last was made and whether one more waits for
/// the window's end.
#[derive(Debug, Default)]
struct Requests {
    last: Option<Instant>,
    trailing: bool,
}

/// What a push does to the fetch requests of its FleetSync.
#[derive(Debug, PartialEq, Eq)]
enum Coalesced {
    /// Ask now.
    Now,
    /// Ask at this instant, the end of the window of the last request.
    At(Instant),
    /// A request at the window's end is already waiting: it covers this push too.
    Folded,
}

impl Requests {
    fn push(&mut self, now: Instant, window: Duration) -> Coalesced {
        match self.last {
            Some(last) if now < last + window => {
                if self.trailing {
                    Coalesced::Folded
                } else {
                    self.trailing = true;
                    Coalesced::At(last + window)
                }
            }
            _ => {
                self.last = Some(now);
                Coalesced::Now
            }
        }
    }

    /// The request waiting for the window's end was made.
    fn trailing_made(&mut self, at: Instant) {
        self.last = Some(at);
        self.trailing = false;
    }
}

/// The receiver's state; one per process.
pub struct Receiver {
    client: Client,
    namespace: String,
    coalesce: Duration,
    metrics: Metrics,
    limit: Mutex<RateLimit>,
    requests: Mutex<HashMap<String, Requests>>,
    stop: CancellationToken,
}

impl Receiver {
    /// A receiver for the FleetSyncs of `namespace`, folding pushes within `coalesce`.
    pub fn new(
        client: Client,
        namespace: String,
        coalesce: Duration,
        metrics: Metrics,
        stop: CancellationToken,
    ) -> Arc<Self> {
        Arc::new(Receiver {
            client,
            namespace,
            coalesce,
            metrics,
            limit: Mutex::new(RateLimit::new()),
            requests: Mutex::default(),
            stop,
        })
    }

    async fn handle(self: Arc<Self>, request: hyper::Request<Incoming>) -> Response<Full<Bytes>> {
        let (status, result, message) = match self.clone().receive(request).await {
            Ok(message) => (StatusCode::ACCEPTED, "accepted", message),
            Err(Rejection {
                status,
                result,
                message,
            }) => (status, result, message),
        };
        if result == "unauthorized" {
            warn!(%message, "webhook: rejected a request");
        } else {
            debug!(%status, %message, "webhook");
        }
        self.metrics.webhook_request(result);
        let mut response = Response::new(Full::new(Bytes::from(format!("{message}\n"))));
        *response.status_mut() = status;
        response
    }

    async fn receive(
        self: Arc<Self>,
        request: hyper::Request<Incoming>,
    ) -> Result<String, Rejection> {
        let granted = self
            .limit
            .lock()
            .unwrap_or_else(|err| err.into_inner())
            .take(Instant::now());
        if !granted {
            return Err(Rejection::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                "too many requests",
            ));
        }
        let name = request
            .uri()
            .path()
            .strip_prefix(PATH_PREFIX)
            .filter(|name| !name.is_empty() && !name.contains('/'))
            .map(str::to_string)
            .ok_or_else(|| {
                Rejection::new(
                    StatusCode::NOT_FOUND,
                    "not_found",
                    format!("not found: POST {PATH_PREFIX}FLEETSYNC"),
                )
            })?;
        if request.method() != Method::POST {
            return Err(Rejection::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "bad_request",
                "only POST",
            ));
        }
        let (parts, body) = request.into_parts();
        let body = Limited::new(body, MAX_BODY_BYTES)
            .collect()
            .await
            .map_err(|_| {
                Rejection::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "too_large",
                    format!("the body is larger than {MAX_BODY_BYTES} bytes, or was cut off"),
                )
            })?
            .to_bytes();
        let not_found = || {
            Rejection::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!(
                    "no FleetSync {name} with spec.webhook in {}",
                    self.namespace
                ),
            )
        };
        let unavailable = |err: kube::Error| {
            Rejection::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                format!("cannot read the hub: {err}"),
            )
        };
        let fleetsyncs: Api<FleetSync> = Api::namespaced(self.client.clone(), &self.namespace);
        let fleetsync = fleetsyncs
            .get_opt(&name)
            .await
            .map_err(unavailable)?
            .ok_or_else(not_found)?;
        let webhook = fleetsync.spec.webhook.as_ref().ok_or_else(not_found)?;
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let token = secrets
            .get_opt(&webhook.secret_ref.name)
            .await
            .map_err(unavailable)?
            .and_then(|secret| secret.data?.remove(TOKEN_KEY))
            .filter(|token| !token.0.is_empty())
            .ok_or_else(|| {
                Rejection::unauthorized(format!(
                    "the Secret {} has no {TOKEN_KEY}",
                    webhook.secret_ref.name
                ))
            })?;
        let sender = authenticate(&parts.headers, &body, &token.0)?;
        match judge(
            sender,
            &parts.headers,
            &body,
            &fleetsync.spec.repo,
            &fleetsync.spec.git_ref,
        ) {
            Verdict::Ignore(reason) => Err(Rejection::new(StatusCode::OK, "ignored", reason)),
            Verdict::Fetch => Ok(self.request_fetch(&name)),
        }
    }

    /// Asks for a fetch of `name` now, at the end of its window, or not at all (one waits).
    fn request_fetch(self: Arc<Self>, name: &str) -> String {
        let now = Instant::now();
        let decision = self
            .requests
            .lock()
            .unwrap_or_else(|err| err.into_inner())
            .entry(name.to_string())
            .or_default()
            .push(now, self.coalesce);
        let name = name.to_string();
        match decision {
            Coalesced::Now => {
                tokio::spawn(async move { self.annotate(&name).await });
                "fetch requested".to_string()
            }
            Coalesced::At(at) => {
                tokio::spawn(async move {
                    tokio::select! {
                        _ = self.stop.cancelled() => return,
                        _ = tokio::time::sleep_until(at) => {}
                    }
                    self.requests
                        .lock()
                        .unwrap_or_else(|err| err.into_inner())
                        .entry(name.clone())
                        .or_default()
                        .trailing_made(Instant::now());
                    self.annotate(&name).await;
                });
                "fetch requested at the end of the coalescing window".to_string()
            }
            Coalesced::Folded => "folded into the fetch requested next".to_string(),
        }
    }

    async fn annotate(&self, name: &str) {
        let requested = k8s_openapi::jiff::Timestamp::now().to_string();
        let patch = json!({"metadata": {"annotations": {FETCH_REQUESTED: requested}}});
        let api: Api<FleetSync> = Api::namespaced(self.client.clone(), &self.namespace);
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => info!(fleetsync = name, "webhook: fetch requested"),
            Err(err) => warn!(fleetsync = name, %err, "webhook: cannot request a fetch"),
        }
    }
}

/// The fetch request a push left on `fleetsync`, if any: a fetch is due when it is not the one
/// the last fetch answered.
pub fn fetch_request(fleetsync: &FleetSync) -> Option<String> {
    fleetsync.annotations().get(FETCH_REQUESTED).cloned()
}

/// Serves the receiver on `listener` until its stop token is cancelled.
pub async fn serve(listener: TcpListener, receiver: Arc<Receiver>) {
    let stop = receiver.stop.clone();
    crate::runtime::http::serve("webhook", listener, stop, move |request| {
        receiver.clone().handle(request)
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    fn sign(token: &[u8], body: &[u8]) -> String {
        let tag = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, token), body);
        let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        format!("sha256={hex}")
    }

    #[test]
    fn each_sender_is_authenticated_its_own_way() {
        let body = br#"{"ref":"refs/heads/main"}"#;
        let good = sign(b"s3cret", body);
        let github = |signature: &str| {
            headers(&[
                ("x-github-event", "push"),
                ("x-hub-signature-256", signature),
            ])
        };
        assert_eq!(
            authenticate(&github(&good), body, b"s3cret"),
            Ok(Sender::GitHub)
        );
        let wrong = sign(b"other", body);
        assert_eq!(
            authenticate(&github(&wrong), body, b"s3cret")
                .unwrap_err()
                .status,
            StatusCode::UNAUTHORIZED
        );
        assert!(authenticate(&headers(&[("x-github-event", "push")]), body, b"s3cret").is_err());
        let gitlab =
            |token: &str| headers(&[("x-gitlab-event", "Push Hook"), ("x-gitlab-token", token)]);
        assert_eq!(
            authenticate(&gitlab("s3cret"), body, b"s3cret"),
            Ok(Sender::GitLab)
        );
        assert!(authenticate(&gitlab("s3cre"), body, b"s3cret").is_err());
        let generic = headers(&[("x-signature", &good)]);
        assert_eq!(authenticate(&generic, body, b"s3cret"), Ok(Sender::Generic));
        assert!(authenticate(&generic, b"{}", b"s3cret").is_err());
        assert!(authenticate(&headers(&[("x-signature", "sha256=zz")]), body, b"s3cret").is_err());
    }

    #[test]
    fn a_push_counts_for_its_repository_and_ref_only() {
        let push = headers(&[("x-github-event", "push")]);
        let body = |repo: &str, git_ref: &str| {
            serde_json::to_vec(&json!({
                "ref": git_ref,
                "repository": {"clone_url": repo, "default_branch": "main"},
            }))
            .unwrap()
        };
        let repo = "git@github.com:Example/fleet.git";
        let at = |url: &str, git_ref: &str, follows: &str| {
            judge(Sender::GitHub, &push, &body(url, git_ref), repo, follows)
        };
        assert_eq!(
            at(
                "https://github.com/example/fleet.git",
                "refs/heads/main",
                "main"
            ),
            Verdict::Fetch
        );
        assert_eq!(
            at(
                "https://github.com/example/fleet",
                "refs/heads/main",
                "HEAD"
            ),
            Verdict::Fetch
        );
        assert_eq!(
            at("https://github.com/example/fleet", "refs/tags/v1", "v1"),
            Verdict::Fetch
        );
        assert!(matches!(
            at("https://github.com/example/fleet", "refs/heads/dev", "main"),
            Verdict::Ignore(_)
        ));
        assert!(matches!(
            at("https://github.com/example/fleet", "refs/heads/dev", "HEAD"),
            Verdict::Ignore(_)
        ));
        assert!(matches!(
            at(
                "https://github.com/example/other",
                "refs/heads/main",
                "main"
            ),
            Verdict::Ignore(_)
        ));
        let ping = headers(&[("x-github-event", "ping")]);
        assert!(matches!(
            judge(Sender::GitHub, &ping, b"{}", repo, "main"),
            Verdict::Ignore(_)
        ));
        assert_eq!(
            judge(Sender::Generic, &HeaderMap::new(), b"", repo, "main"),
            Verdict::Fetch
        );
    }

    #[test]
    fn pushes_within_a_window_make_one_more_request_at_its_end() {
        let window = Duration::from_secs(1);
        let start = Instant::now();
        let mut requests = Requests::default();
        assert_eq!(requests.push(start, window), Coalesced::Now);
        assert_eq!(requests.push(start, window), Coalesced::At(start + window));
        for _ in 0..48 {
            assert_eq!(requests.push(start, window), Coalesced::Folded);
        }
        requests.trailing_made(start + window);
        assert_eq!(
            requests.push(start + window, window),
            Coalesced::At(start + window * 2)
        );
        assert_eq!(requests.push(start + window * 3, window), Coalesced::Now);
    }

    #[test]
    fn the_rate_limit_takes_a_burst_then_refills() {
        let start = Instant::now();
        let mut limit = RateLimit {
            tokens: RATE_BURST,
            at: start,
        };
        let taken = (0..200).filter(|_| limit.take(start)).count();
        assert_eq!(taken, RATE_BURST as usize);
        assert!(limit.take(start + Duration::from_secs(1)));
    }
}
