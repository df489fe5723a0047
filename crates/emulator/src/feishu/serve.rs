//! Serving the emulator's router over HTTP/1.1 with header names in title case
//! (`Content-Type`, not `content-type`), as Feishu's own servers answer. Header names are
//! case-insensitive by the HTTP standard, but Feishu's official Python SDK (`lark-oapi`) looks
//! `Content-Type` up in a plain dict: with lowercase names it does not parse error bodies at all.

use axum::Router;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// Accepts connections until `stop` fires (or its sender is dropped).
pub(crate) async fn serve(listener: TcpListener, router: Router, mut stop: oneshot::Receiver<()>) {
    loop {
        tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        tracing::warn!(error = %e, "the Feishu emulator could not accept a connection");
                        continue;
                    }
                };
                let service = TowerToHyperService::new(router.clone());
                tokio::spawn(async move {
                    let served = hyper::server::conn::http1::Builder::new()
                        .title_case_headers(true)
                        .serve_connection(TokioIo::new(stream), service)
                        // The long connection's WebSocket starts as an HTTP upgrade.
                        .with_upgrades()
                        .await;
                    if let Err(e) = served {
                        tracing::debug!(error = %e, "an emulator connection ended early");
                    }
                });
            }
        }
    }
}
