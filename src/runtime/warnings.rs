//! What an API server warns about: the `Warning` headers of its answers (`299 - "text"`), which
//! kubectl prints as `Warning: text` and kube-rs drops. [`recording`] wraps a client so that a
//! caller that writes on a person's behalf (`fleetform install`) can say them too.

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::{Request, Response};
use kube::Client;
use kube::client::Body;

/// The warnings a [`recording`] client was answered with, in order, until taken.
#[derive(Clone, Debug, Default)]
pub struct Warnings(Arc<Mutex<Vec<String>>>);

impl Warnings {
    /// The warnings received since the last call.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A client that sends through `client` and keeps every warning its answers carry.
pub fn recording(client: &Client) -> (Client, Warnings) {
    let warnings = Warnings::default();
    let service = Recorder {
        inner: client.clone(),
        warnings: warnings.clone(),
    };
    (
        Client::new(service, client.default_namespace().to_string()),
        warnings,
    )
}

/// The service under a [`recording`] client.
#[derive(Clone)]
struct Recorder {
    inner: Client,
    warnings: Warnings,
}

impl tower_service::Service<Request<Body>> for Recorder {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<Response<Body>, kube::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), kube::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let inner = self.inner.clone();
        let warnings = self.warnings.clone();
        Box::pin(async move {
            let response = inner.send(request).await?;
            let texts = response
                .headers()
                .get_all(http::header::WARNING)
                .iter()
                .filter_map(|value| value.to_str().ok())
                .flat_map(warning_texts);
            warnings.lock().extend(texts);
            Ok(response)
        })
    }
}

/// The texts of one `Warning` header value: `code agent "text" ["date"]`, several separated by
/// commas (RFC 7234 §5.5). What does not parse is kept as it is rather than lost.
pub fn warning_texts(header: &str) -> Vec<String> {
    let mut texts = Vec::new();
    let mut rest = header.trim();
    while !rest.is_empty() {
        match one_warning(rest) {
            Some((text, after)) => {
                texts.push(text);
                rest = after.trim_start().trim_start_matches(',').trim_start();
            }
            None => {
                texts.push(rest.to_string());
                break;
            }
        }
    }
    texts
}

/// The first warning of `header` and what follows it.
fn one_warning(header: &str) -> Option<(String, &str)> {
    let (code, rest) = header.split_once(' ')?;
    if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (_agent, rest) = rest.trim_start().split_once(' ')?;
    let (text, rest) = quoted(rest.trim_start())?;
    // An optional date, quoted too.
    let rest = match quoted(rest.trim_start()) {
        Some((_date, after)) => after,
        None => rest,
    };
    Some((text, rest))
}

/// The quoted string `text` begins with (backslash escapes undone) and what follows it.
fn quoted(text: &str) -> Option<(String, &str)> {
    let body = text.strip_prefix('"')?;
    let mut unquoted = String::new();
    let mut chars = body.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            '\\' => unquoted.push(chars.next()?.1),
            '"' => return Some((unquoted, &body[at + 1..])),
            c => unquoted.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Api;
    use kube::api::DynamicObject;
    use kube::discovery::ApiResource;

    #[test]
    fn a_warning_header_gives_its_texts() {
        assert_eq!(
            warning_texts(r#"299 - "unrecognized format \"uint32\"""#),
            [r#"unrecognized format "uint32""#]
        );
        assert_eq!(
            warning_texts(
                r#"299 - "one", 299 kube-apiserver "two, with a comma" "Wed, 21 Oct 2015 07:28:00 GMT""#
            ),
            ["one", "two, with a comma"]
        );
        assert_eq!(warning_texts("not a warning"), ["not a warning"]);
    }

    /// A server that answers every request with one ConfigMap and two warnings.
    #[derive(Clone)]
    struct Warning;

    impl tower_service::Service<Request<Body>> for Warning {
        type Response = Response<Body>;
        type Error = kube::Error;
        type Future = BoxFuture<'static, Result<Response<Body>, kube::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), kube::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<Body>) -> Self::Future {
            Box::pin(async {
                Response::builder()
                    .status(200)
                    .header("content-type", "application/json")
                    .header("warning", r#"299 - "unrecognized format \"uint32\"""#)
                    .header("warning", r#"299 - "unknown field \"spec.x\"""#)
                    .body(Body::from(
                        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}"#
                            .to_vec(),
                    ))
                    .map_err(|err| kube::Error::Service(err.into()))
            })
        }
    }

    #[tokio::test]
    async fn a_recording_client_keeps_what_the_server_warns_about() {
        let (client, warnings) = recording(&Client::new(Warning, "default"));
        let resource = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
        api.get("c").await.unwrap();
        assert_eq!(
            warnings.take(),
            [
                r#"unrecognized format "uint32""#,
                r#"unknown field "spec.x""#
            ]
        );
        assert!(warnings.take().is_empty(), "taken");
    }
}
