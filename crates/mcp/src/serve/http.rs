//! Streamable HTTP for the companion's server, on a loopback address only: rmcp's server in
//! stateless mode (each request stands alone, so a client that drops its connection cancels
//! exactly its own call), behind a layer that refuses a request without a valid bearer token.
//! rmcp itself refuses a `Host` that is not a loopback name (DNS rebinding) and, as configured
//! here, an `Origin` that is not a loopback page.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::handler::CompanionServer;
use super::{Caller, Gateway, PROJECT_HEADER, Refusal};

/// Where the server answers.
pub const PATH: &str = "/mcp";

/// A comment line on a waiting call's stream this often, so no proxy or client gives up on a
/// request that waits minutes for the user.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The router serving [`PATH`]; `cancel` stops it and every stream it holds.
pub fn router(gateway: Arc<dyn Gateway>, cancel: CancellationToken) -> Router {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(false)
        .with_sse_keep_alive(Some(KEEP_ALIVE))
        .with_allowed_hosts(["127.0.0.1", "localhost", "::1"])
        .with_allowed_origins(["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"])
        .with_cancellation_token(cancel);
    let handler_gateway = gateway.clone();
    let service = StreamableHttpService::new(
        move || Ok(CompanionServer::new(handler_gateway.clone())),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Router::new()
        .route_service(PATH, service)
        .layer(middleware::from_fn_with_state(gateway, authenticate))
}

/// Serves `router` on `listener` until `cancel` fires.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    cancel: CancellationToken,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt as _;
    // Without it, a small answer waits for the client's delayed ACK: 40 ms a request.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY not set");
        }
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { cancel.cancelled().await })
        .await
}

/// The bearer token of a request, if it has one.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
        .filter(|t| !t.is_empty())
}

fn project(headers: &HeaderMap) -> Option<String> {
    let raw = headers.get(PROJECT_HEADER)?.to_str().ok()?;
    let decoded = percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .ok()?
        .trim()
        .to_owned();
    (!decoded.is_empty()).then_some(decoded)
}

/// Refuses what carries no valid token (401, with the reason) or a paused client's (403); puts
/// the [`Caller`] on the request for the handler.
async fn authenticate(
    State(gateway): State<Arc<dyn Gateway>>,
    mut request: Request,
    next: Next,
) -> Response {
    let client = match bearer(request.headers()) {
        None => Err(None),
        Some(token) => gateway.authenticate(token).map_err(Some),
    };
    let client_id = match client {
        Ok(id) => id,
        Err(refusal) => return refused(refusal),
    };
    let caller = Caller {
        client_id,
        project: project(request.headers()),
    };
    request.extensions_mut().insert(caller);
    next.run(request).await
}

fn refused(refusal: Option<Refusal>) -> Response {
    let (status, message) = match &refusal {
        None => (
            StatusCode::UNAUTHORIZED,
            "Feishu Companion needs the agent's token: Authorization: Bearer <token> (Settings → Connected agents)".to_owned(),
        ),
        Some(r @ Refusal::Unknown) => (StatusCode::UNAUTHORIZED, r.to_string()),
        Some(r @ Refusal::Paused { .. }) => (StatusCode::FORBIDDEN, r.to_string()),
    };
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32001, "message": message},
    });
    let mut response = (status, axum::Json(body)).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(r#"Bearer realm="feishu-companion", error="invalid_token""#),
        );
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_case_insensitively_and_empty_ones_refused() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer(&headers), None);
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer abc"),
        );
        assert_eq!(bearer(&headers), Some("abc"));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer   "));
        assert_eq!(bearer(&headers), None);
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert_eq!(bearer(&headers), None);
    }

    #[test]
    fn the_project_header_is_percent_decoded_utf8() {
        let mut headers = HeaderMap::new();
        headers.insert(
            PROJECT_HEADER,
            HeaderValue::from_static("/home/me/%E9%A1%B9%E7%9B%AE"),
        );
        assert_eq!(project(&headers).as_deref(), Some("/home/me/项目"));
        headers.insert(PROJECT_HEADER, HeaderValue::from_static("%FF"));
        assert_eq!(project(&headers), None);
    }
}
