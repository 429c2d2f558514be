//! The addon kinds' conversion webhook on a real hub (`fleetform hub --webhook-addr`). The CRDs
//! fleetform installs convert ManagedClusterAddOns and ClusterManagementAddOns between `v1alpha1`
//! and `v1beta1` through a webhook at `POST /convert` of Service `fleetform-hub` in
//! `fleetform-system`; this module serves it over HTTPS, answering each `apiextensions.k8s.io/v1`
//! ConversionReview with [`convert_addon`]'s objects ([`review`]). An embedded control plane
//! converts in-process instead ([`crate::embedded`]).
//!
//! The webhook owns its TLS, as OCM's operators and cert-manager's cainjector do, with no
//! installer step: [`certificate`] decides when the CA and serving certificate are due and which
//! CRDs get the CA; [`keeper`] keeps them in Secret [`certificate::WEBHOOK_SECRET`], shared by
//! every hub replica, serves the current one and writes the CA into the CRDs fleetform installed.

pub mod certificate;
mod keeper;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Body, Bytes};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use kube::core::Status;
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use kube::{Api, Client};
use time::OffsetDateTime;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use self::certificate::{CA_CERT_KEY, TLS_CERT_KEY, TLS_KEY_KEY, WEBHOOK_SECRET};
use self::keeper::{CHECK_INTERVAL, Keeper, ServedCertificate, current_certificate};
use super::run::RETRY_DELAY;
use crate::api::conversion::convert_addon;
use crate::api::fleet::SYSTEM_NAMESPACE;
use crate::api::schema::{CONVERSION_PATH, CONVERSION_SERVICE};
use crate::runtime::retry::Retry;

/// `apiVersion` and `kind` of the ConversionReviews the CRDs ask for (`conversionReviewVersions:
/// [v1]`).
const REVIEW_API_VERSION: &str = "apiextensions.k8s.io/v1";
const REVIEW_KIND: &str = "ConversionReview";
/// The largest ConversionReview read: a list read converts every object of the list in one
/// review, so a hub with many addons sends large ones.
pub const MAX_REVIEW_BYTES: usize = 64 << 20;
/// How long a client has to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the webhook runs with.
#[derive(Clone)]
pub struct WebhookConfig {
    /// The hub (the hub ServiceAccount's client): the Secret and the CRDs live there.
    pub client: Client,
    /// Where to listen (port 0 picks one).
    pub addr: SocketAddr,
    /// Names (DNS names or IP addresses) the serving certificate carries besides the Service's
    /// ([`dns_names`]).
    pub extra_names: Vec<String>,
}

impl std::fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookConfig")
            .field("addr", &self.addr)
            .field("extra_names", &self.extra_names)
            .finish_non_exhaustive()
    }
}

/// Why the webhook cannot serve, or a step of keeping its certificate failed.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("Secret {SYSTEM_NAMESPACE}/{WEBHOOK_SECRET}: cannot {action}: {source}")]
    Secret {
        action: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error(
        "Secret {SYSTEM_NAMESPACE}/{WEBHOOK_SECRET} holds no certificate that can be served \
         ({0}); one fleetform did not write must have {CA_CERT_KEY}, {TLS_CERT_KEY} and \
         {TLS_KEY_KEY} (delete it and fleetform creates its own)"
    )]
    Unservable(String),
    #[error(
        "Secret {SYSTEM_NAMESPACE}/{WEBHOOK_SECRET}: other hub replicas keep rewriting it (do \
         they run with other --webhook-dns-name flags?)"
    )]
    Contended,
    #[error("cannot issue the webhook's certificate: {0}")]
    Issue(#[from] rcgen::Error),
    #[error("the webhook's certificate cannot be served: {0}")]
    Tls(#[from] rustls::Error),
    #[error("CustomResourceDefinition {name}: cannot {action}: {source}")]
    Crd {
        name: String,
        action: &'static str,
        #[source]
        source: kube::Error,
    },
}

/// The DNS names kube-apiserver reaches the webhook at (the Service's, as its `clientConfig`
/// names it), then `extra`, without repeats.
pub fn dns_names(extra: &[String]) -> Vec<String> {
    let service = format!("{CONVERSION_SERVICE}.{SYSTEM_NAMESPACE}.svc");
    let mut names = vec![service.clone(), format!("{service}.cluster.local")];
    for name in extra {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    names
}

/// The answer to the body of a `POST /convert`: a ConversionReview whose `response` carries the
/// request's `uid`, the objects converted to `desiredAPIVersion` in their order and `result`
/// Success — or, when any object cannot be converted, no objects and `result` Failure saying
/// which and why (kube-apiserver then fails the read or write with that message). A body that
/// is not an `apiextensions.k8s.io/v1` ConversionReview with a request is refused with why.
pub fn review(body: &[u8]) -> Result<ConversionReview, String> {
    let review: ConversionReview = serde_json::from_slice(body)
        .map_err(|err| format!("the body is not a ConversionReview: {err}"))?;
    if review.types.api_version != REVIEW_API_VERSION || review.types.kind != REVIEW_KIND {
        return Err(format!(
            "expected a {REVIEW_API_VERSION} {REVIEW_KIND} (the version the CRDs ask for), got \
             {:?} {:?}",
            review.types.api_version, review.types.kind
        ));
    }
    let mut request = ConversionRequest::from_review(review)
        .map_err(|_| "the ConversionReview has no request".to_string())?;
    if request.uid.is_empty() {
        return Err("the ConversionReview's request.uid is empty".into());
    }
    let desired = request.desired_api_version.clone();
    let objects = std::mem::take(&mut request.objects);
    let response = ConversionResponse::for_request(request);
    let converted: Result<Vec<_>, String> = objects
        .into_iter()
        .map(|object| convert_addon(object, &desired))
        .collect();
    let response = match converted {
        Ok(objects) => response.success(objects),
        Err(message) => response.failure(Status::failure(&message, "")),
    };
    Ok(response.into_review())
}

/// Answers one HTTP request: `POST /convert` with a ConversionReview, `GET /healthz`.
async fn answer<B>(request: Request<B>) -> Response<Full<Bytes>>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    match (request.method(), request.uri().path()) {
        (&Method::POST, CONVERSION_PATH) => {}
        (&Method::GET, "/healthz") => return text(StatusCode::OK, "ok".into()),
        (_, CONVERSION_PATH) => {
            return text(
                StatusCode::METHOD_NOT_ALLOWED,
                format!("{CONVERSION_PATH} takes a POST of a ConversionReview"),
            );
        }
        (_, path) => return text(StatusCode::NOT_FOUND, format!("{path}: not found")),
    }
    let body = match Limited::new(request.into_body(), MAX_REVIEW_BYTES)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(err) if err.is::<LengthLimitError>() => {
            return text(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "a ConversionReview may be at most {} MiB",
                    MAX_REVIEW_BYTES >> 20
                ),
            );
        }
        Err(err) => {
            return text(
                StatusCode::BAD_REQUEST,
                format!("cannot read the request: {err}"),
            );
        }
    };
    let answered = review(&body).and_then(|review| {
        serde_json::to_vec(&review).map_err(|err| format!("cannot write the answer: {err}"))
    });
    match answered {
        Ok(json) => Response::builder()
            .status(StatusCode::OK)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(json)))
            .unwrap_or_else(|_| text(StatusCode::INTERNAL_SERVER_ERROR, String::new())),
        Err(why) => {
            debug!(%why, "conversion webhook: bad request");
            text(StatusCode::BAD_REQUEST, why)
        }
    }
}

fn text(status: StatusCode, message: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(message + "\n")));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// A running conversion webhook.
#[derive(Debug)]
pub struct ConversionWebhook {
    addr: SocketAddr,
    tasks: Vec<JoinHandle<()>>,
}

impl ConversionWebhook {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Waits until it has stopped (its shutdown token cancelled): no longer listening, its
    /// certificate no longer kept.
    pub async fn stopped(self) {
        for task in self.tasks {
            if let Err(err) = task.await {
                warn!(%err, "conversion webhook ended abnormally");
            }
        }
    }
}

/// Starts the conversion webhook: binds `config.addr`, takes the certificate from
/// [`WEBHOOK_SECRET`] (creating or renewing it), writes its CA into the CRDs that are
/// fleetform's, and serves HTTPS until `shutdown` while keeping certificate and CRDs in line.
/// It returns once it serves, or, when the CA cannot be written yet (the hub's rights not in
/// force yet, say), once the listener is bound: it serves only after the CA is in the CRDs, so
/// kube-apiserver never meets a certificate it cannot trust (each conversion meanwhile failed
/// with `x509: certificate signed by unknown authority`). Without a certificate it does not
/// start.
pub async fn serve(
    config: WebhookConfig,
    shutdown: CancellationToken,
) -> Result<ConversionWebhook, WebhookError> {
    let listen = |source| WebhookError::Listen {
        addr: config.addr,
        source,
    };
    let listener = TcpListener::bind(config.addr).await.map_err(listen)?;
    let addr = listener.local_addr().map_err(listen)?;
    let names = dns_names(&config.extra_names);
    let secrets = Api::namespaced(config.client.clone(), SYSTEM_NAMESPACE);
    let held = current_certificate(&secrets, &names, OffsetDateTime::now_utc()).await?;
    let served = Arc::new(ServedCertificate::new(&held).map_err(WebhookError::Unservable)?);
    let keeper = Keeper {
        secrets,
        crds: Api::all(config.client),
        names,
        held,
        served: served.clone(),
    };
    let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_cert_resolver(served);
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tls = TlsAcceptor::from(Arc::new(tls));
    // The CA goes into the CRDs before anything it signed is served.
    let serving = match keeper.inject_all(&keeper.held.ca_bundle).await {
        Ok(()) => tokio::spawn(serve_published(listener, tls, keeper, shutdown)),
        Err(err) => tokio::spawn(async move {
            if publish(&keeper, err, &shutdown).await {
                serve_published(listener, tls, keeper, shutdown).await;
            }
        }),
    };
    Ok(ConversionWebhook {
        addr,
        tasks: vec![serving],
    })
}

/// The longest the webhook waits before it tries again to write its CA into the CRDs.
const MAX_PUBLISH_DELAY: Duration = Duration::from_secs(60);

/// Writes the keeper's CA into the CRDs after a first attempt failed with `failed`, backing off
/// and saying each failure once, until it is there (`true`) or `shutdown` (`false`).
async fn publish(keeper: &Keeper, failed: WebhookError, shutdown: &CancellationToken) -> bool {
    let mut retry = Retry::new(
        "conversion webhook: writing its CA into the CRDs (it serves once they hold it)",
        WEBHOOK_SECRET,
        RETRY_DELAY,
        MAX_PUBLISH_DELAY,
    );
    let mut wait = retry.failed(&failed);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return false,
            _ = tokio::time::sleep(wait) => {}
        }
        match keeper.inject_all(&keeper.held.ca_bundle).await {
            Ok(()) => {
                retry.succeeded();
                return true;
            }
            Err(err) => wait = retry.failed(&err),
        }
    }
}

/// Serves HTTPS on `listener` with the keeper's certificate, whose CA the CRDs hold, and keeps
/// both in line, until `shutdown`.
async fn serve_published(
    listener: TcpListener,
    tls: TlsAcceptor,
    keeper: Keeper,
    shutdown: CancellationToken,
) {
    if let Ok(addr) = listener.local_addr() {
        info!(%addr, "conversion webhook serving");
    }
    let next_check = tokio::time::Instant::now() + CHECK_INTERVAL;
    futures::join!(
        accept(listener, tls, shutdown.clone()),
        keeper.run(next_check, shutdown)
    );
}

/// Accepts connections until `shutdown`; each is served until it closes or `shutdown`.
async fn accept(listener: TcpListener, tls: TlsAcceptor, shutdown: CancellationToken) {
    loop {
        let stream = tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) => {
                    debug!(%err, "conversion webhook: accept failed");
                    continue;
                }
            },
        };
        let tls = tls.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(stream)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(err)) => {
                    debug!(%err, "conversion webhook: TLS handshake failed");
                    return;
                }
                Err(_) => {
                    debug!("conversion webhook: TLS handshake timed out");
                    return;
                }
            };
            let service =
                service_fn(|request| async { Ok::<_, Infallible>(answer(request).await) });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            let ended = tokio::select! {
                ended = connection.as_mut() => ended,
                _ = shutdown.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(err) = ended {
                debug!(%err, "conversion webhook: connection ended");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::conversion::{ADDON_V1ALPHA1, ADDON_V1BETA1};

    fn body(value: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&value).unwrap()
    }

    fn addon(api_version: &str) -> serde_json::Value {
        json!({
            "apiVersion": api_version,
            "kind": "ManagedClusterAddOn",
            "metadata": {"name": "observability", "namespace": "spoke-1", "uid": "u-1"},
            "spec": {"installNamespace": "open-cluster-management-agent-addon"},
        })
    }

    fn review_of(objects: Vec<serde_json::Value>, desired: &str) -> Vec<u8> {
        body(json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": "r-1", "desiredAPIVersion": desired, "objects": objects},
        }))
    }

    #[test]
    fn a_review_answers_the_request_uid_with_the_converted_objects() {
        let answer = review(&review_of(vec![addon(ADDON_V1ALPHA1)], ADDON_V1BETA1)).unwrap();
        let answer = serde_json::to_value(answer).unwrap();
        assert_eq!(answer["apiVersion"], "apiextensions.k8s.io/v1");
        assert_eq!(answer["kind"], "ConversionReview");
        assert_eq!(answer["response"]["uid"], "r-1");
        assert_eq!(answer["response"]["result"]["status"], "Success");
        let converted = &answer["response"]["convertedObjects"][0];
        assert_eq!(converted["apiVersion"], ADDON_V1BETA1);
        assert_eq!(converted["metadata"]["uid"], "u-1");
        assert!(answer.get("request").is_none());
    }

    #[test]
    fn a_review_with_an_object_that_cannot_be_converted_fails_saying_which() {
        let mut other = addon(ADDON_V1ALPHA1);
        other["kind"] = "ManifestWork".into();
        let answer = review(&review_of(
            vec![addon(ADDON_V1ALPHA1), other],
            ADDON_V1BETA1,
        ))
        .unwrap();
        let answer = serde_json::to_value(answer).unwrap();
        assert_eq!(answer["response"]["uid"], "r-1");
        assert_eq!(answer["response"]["result"]["status"], "Failure");
        let message = answer["response"]["result"]["message"].as_str().unwrap();
        assert!(message.contains("ManifestWork"), "{message}");
        assert_eq!(answer["response"]["convertedObjects"], json!([]));
    }

    #[test]
    fn what_is_not_a_v1_conversion_review_is_refused() {
        for (bad, says) in [
            (b"{".to_vec(), "not a ConversionReview"),
            (
                body(
                    json!({"apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "ConversionReview",
                "request": {"uid": "r", "desiredAPIVersion": ADDON_V1BETA1, "objects": []}}),
                ),
                "apiextensions.k8s.io/v1",
            ),
            (
                body(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"})),
                "no request",
            ),
            (
                body(
                    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "request": {"uid": "", "desiredAPIVersion": ADDON_V1BETA1, "objects": []}}),
                ),
                "uid",
            ),
        ] {
            let err = review(&bad).unwrap_err();
            assert!(err.contains(says), "{err}");
        }
    }

    async fn status_of(request: Request<Full<Bytes>>) -> StatusCode {
        answer(request).await.status()
    }

    fn post(path: &str, body: Vec<u8>) -> Request<Full<Bytes>> {
        Request::post(path)
            .body(Full::new(Bytes::from(body)))
            .unwrap()
    }

    #[tokio::test]
    async fn requests_other_than_a_review_get_their_status() {
        let review = review_of(vec![addon(ADDON_V1ALPHA1)], ADDON_V1BETA1);
        assert_eq!(status_of(post("/convert", review)).await, StatusCode::OK);
        assert_eq!(
            status_of(post("/convert", vec![b'x'; 10])).await,
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            status_of(post("/convert", vec![b' '; MAX_REVIEW_BYTES + 1])).await,
            StatusCode::PAYLOAD_TOO_LARGE
        );
        let get = |path: &str| Request::get(path).body(Full::new(Bytes::new())).unwrap();
        assert_eq!(
            status_of(get("/convert")).await,
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(status_of(get("/healthz")).await, StatusCode::OK);
        assert_eq!(status_of(get("/other")).await, StatusCode::NOT_FOUND);
    }

    #[test]
    fn the_service_names_come_first_and_extra_names_once() {
        assert_eq!(
            dns_names(&[
                "fleetform-hub.fleetform-system.svc".into(),
                "a.example".into()
            ]),
            [
                "fleetform-hub.fleetform-system.svc",
                "fleetform-hub.fleetform-system.svc.cluster.local",
                "a.example"
            ]
        );
    }
}
