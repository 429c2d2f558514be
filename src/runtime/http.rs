//! Serving plain HTTP/1.1 on a listener until a stop token: each connection on a task of its
//! own, ended when it closes or at the stop; failed accepts and connections logged at debug
//! level under the server's name (nothing a client does is a warning of the server's). A
//! response body may be whole ([`Full`](http_body_util::Full)) or streamed (the dashboard's Server-Sent Events).

use std::convert::Infallible;
use std::future::Future;

use http::{Request, Response};
use hyper::body::{Body, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::debug;

/// Serves `listener` with `handle` until `stop`; `what` names the server in logs.
pub async fn serve<H, Fut, B>(
    what: &'static str,
    listener: TcpListener,
    stop: CancellationToken,
    handle: H,
) where
    H: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<B>> + Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    loop {
        let (stream, peer) = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    debug!(%err, "{what}: accept failed");
                    continue;
                }
            },
        };
        let handle = handle.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let answer = handle(request);
                async move { Ok::<_, Infallible>(answer.await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = stop.cancelled() => {}
                served = connection => if let Err(err) = served {
                    debug!(%peer, %err, "{what}: connection failed");
                },
            }
        });
    }
}
