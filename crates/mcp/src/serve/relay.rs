//! The stdio relay (`feishu-companion mcp`): for clients that only start local servers, an MCP
//! server on stdin/stdout that passes every request on to the running app's HTTP server and
//! every answer, progress notification and tool-list change back. Both ends are rmcp: a
//! server towards the client, a client towards the app. A request the client cancels is
//! cancelled at the app too, so a call still waiting there is abandoned, not run.

use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CancelledNotificationParam,
    ClientCapabilities, ClientConfig, ClientRequest, Implementation, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion, ServerCapabilities,
    ServerConfig, ServerResult,
};
use rmcp::service::{
    NotificationContext, Peer, PeerRequestOptions, RequestContext, RoleClient, RunningService,
    ServiceError,
};
use rmcp::{ClientHandler, ErrorData, RoleServer, ServerHandler, ServiceExt};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::PROJECT_HEADER;
use crate::handler::token_key;

/// Where the relay passes requests on to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayTarget {
    /// The app's server, `http://127.0.0.1:<port>/mcp`.
    pub url: String,
    /// The client's token.
    pub token: String,
    /// The folder the relay was started in (the client's project).
    pub project: Option<String>,
}

/// Why the relay stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// The app's server could not be reached or refused the handshake.
    #[error("cannot reach Feishu Companion at {url}: {reason}")]
    Upstream {
        /// Where.
        url: String,
        /// Why.
        reason: String,
    },
    /// The client's side (stdin/stdout) failed.
    #[error("the MCP client's connection failed: {0}")]
    Downstream(String),
    /// The relay's own thread or runtime could not start, or stopped without finishing.
    #[error("the relay could not run: {0}")]
    Start(String),
}

/// Progress tokens of the app's requests → the relayed request that hears its progress.
type Routes = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<ProgressNotificationParam>>>>;

/// The client towards the app: hands progress to the relayed request it belongs to, and passes
/// tool-list changes on to the client side.
#[derive(Clone)]
struct Upstream {
    downstream: Arc<OnceLock<Peer<RoleServer>>>,
    routes: Routes,
}

impl ClientHandler for Upstream {
    fn get_info(&self) -> ClientConfig {
        let me = Implementation::new("feishu-companion-relay", env!("CARGO_PKG_VERSION"));
        // A handshake, so the app's description (instructions, version) can be passed on.
        ClientConfig::new(ClientCapabilities::default(), me)
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        // rmcp hands each notification to a task of its own, so this can run after the
        // request's answer has come: the request itself passes its progress on, in order,
        // before its answer (see `Relay::call_tool`).
        let routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(route) = routes.get(&token_key(&params.progress_token)) {
            let _ = route.send(params);
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(peer) = self.downstream.get()
            && let Err(e) = peer.notify_tool_list_changed().await
        {
            tracing::debug!(error = %e, "tool-list change not passed on");
        }
    }
}

/// The server towards the client.
#[derive(Clone)]
struct Relay {
    upstream: Peer<RoleClient>,
    routes: Routes,
    /// Fired when the client closes stdin (see [`WatchedStdin`]).
    closed: CancellationToken,
}

/// Stdin that says when the client closed it. On EOF rmcp lets in-flight handlers finish for up
/// to 5 s before cancelling them, and a call held for the user would stay open that long after
/// its client left: approved then, it would run with nobody to hear the answer. With this the
/// relay cancels it upstream at once, so the app abandons it.
struct WatchedStdin<R> {
    inner: R,
    closed: CancellationToken,
}

impl<R: AsyncRead + Unpin> AsyncRead for WatchedStdin<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let room = buf.remaining() > 0;
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        let ended = match &polled {
            Poll::Ready(Ok(())) => room && buf.filled().len() == before,
            Poll::Ready(Err(_)) => true,
            Poll::Pending => false,
        };
        if ended {
            this.closed.cancel();
        }
        polled
    }
}

fn passed_on(e: ServiceError) -> ErrorData {
    match e {
        ServiceError::McpError(error) => error,
        other => {
            ErrorData::internal_error(format!("Feishu Companion did not answer: {other}"), None)
        }
    }
}

impl ServerHandler for Relay {
    fn get_info(&self) -> ServerConfig {
        // The app's own description, so the client sees one server whichever way it connects.
        match self.upstream.peer_info() {
            Some(info) => {
                let mut config = ServerConfig::new(info.capabilities.clone());
                if let Some(server) = info.server_info.clone() {
                    config = config.with_server_info(server);
                }
                match info.instructions.clone() {
                    Some(text) => config.with_instructions(text),
                    None => config,
                }
            }
            None => ServerConfig::new(ServerCapabilities::builder().enable_tools().build()),
        }
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.upstream.list_tools(request).await.map_err(passed_on)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(request));
        // No timeout of its own: the user may take minutes, and the client keeps its own.
        let handle = self
            .upstream
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
            .map_err(passed_on)?;
        let key = token_key(&handle.progress_token);
        let (route, mut heard) = mpsc::unbounded_channel();
        let client_token = context.meta.get_progress_token();
        if client_token.is_some() {
            self.routes
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(key.clone(), route);
        }
        let pass_on = |mut param: ProgressNotificationParam| {
            let token = client_token.clone();
            let peer = context.peer.clone();
            async move {
                let Some(token) = token else { return };
                param.progress_token = token;
                if let Err(e) = peer.notify_progress(param).await {
                    tracing::debug!(error = %e, "progress not passed on");
                }
            }
        };
        let mut answer_rx = handle.rx;
        let answer = loop {
            tokio::select! {
                answer = &mut answer_rx => break answer
                    .map_err(|_| passed_on(ServiceError::TransportClosed))
                    .and_then(|r| r.map_err(passed_on)),
                Some(param) = heard.recv() => pass_on(param).await,
                () = gone(&context.ct, &self.closed) => {
                    // The client cancelled or left: the app abandons the call (never runs it).
                    let cancel = CancelledNotificationParam::new(
                        Some(handle.id.clone()),
                        Some("cancelled by the client".to_owned()),
                    );
                    let _ = self.upstream.notify_cancelled(cancel).await;
                    break Err(ErrorData::internal_error("cancelled", None));
                }
            }
        };
        // The app sent its progress before its answer, but rmcp may not have handed it over
        // yet: on this one-thread runtime (see `serve_on`) its task was queued before this one
        // woke, so one yield lets it run, and what it handed over goes to the client first.
        tokio::task::yield_now().await;
        self.routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key);
        while let Ok(param) = heard.try_recv() {
            pass_on(param).await;
        }
        match answer? {
            ServerResult::CallToolResult(result) => Ok(result.into()),
            other => Err(ErrorData::internal_error(
                format!("Feishu Companion answered a tool call with {other:?}"),
                None,
            )),
        }
    }
}

/// When the client cancelled its request or closed the relay's stdin.
async fn gone(request: &CancellationToken, closed: &CancellationToken) {
    tokio::select! {
        () = request.cancelled() => {}
        () = closed.cancelled() => {}
    }
}

/// Connects to the app's server as `target` says.
async fn connect(
    target: &RelayTarget,
) -> Result<(RunningService<RoleClient, impl ClientHandler>, Connected), RelayError> {
    let upstream_error = |reason: String| RelayError::Upstream {
        url: target.url.clone(),
        reason,
    };
    let mut headers = BTreeMap::new();
    headers.insert(
        "authorization".to_owned(),
        format!("Bearer {}", target.token),
    );
    if let Some(project) = &target.project {
        let encoded =
            percent_encoding::utf8_percent_encode(project, percent_encoding::NON_ALPHANUMERIC);
        headers.insert(PROJECT_HEADER.to_owned(), encoded.to_string());
    }
    let transport = crate::http::transport(&target.url, &headers).map_err(upstream_error)?;
    let connected = Connected {
        downstream: Arc::default(),
        routes: Arc::default(),
    };
    let handler = Upstream {
        downstream: connected.downstream.clone(),
        routes: connected.routes.clone(),
    };
    let service = handler
        .serve(transport)
        .await
        .map_err(|e| upstream_error(e.to_string()))?;
    Ok((service, connected))
}

/// What [`connect`] shares with [`run`].
struct Connected {
    downstream: Arc<OnceLock<Peer<RoleServer>>>,
    routes: Routes,
}

/// Relays between stdin/stdout and the app until the client closes its end.
///
/// The relay runs on a runtime of one thread of its own, whatever runtime calls it: there a
/// task runs in the order it was woken, which is what keeps a call's progress ahead of its
/// answer (see `Relay::call_tool`). One client needs no more.
pub async fn run(target: RelayTarget) -> Result<(), RelayError> {
    let (done, result) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("mcp-relay".to_owned())
        .spawn(move || {
            let _ = done.send(serve_on(target, tokio::io::stdin(), tokio::io::stdout()));
        })
        .map_err(|e| RelayError::Start(e.to_string()))?;
    result
        .await
        .map_err(|_| RelayError::Start("its thread stopped before it finished".to_owned()))?
}

/// Relays between `input`/`output` (the client's side) and the app on a one-thread runtime
/// until the client closes `input`. Blocks the calling thread.
fn serve_on<R, W>(target: RelayTarget, input: R, output: W) -> Result<(), RelayError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| RelayError::Start(e.to_string()))?;
    let result = runtime.block_on(relay_on(target, input, output));
    // A read of stdin cannot be cancelled: when the app went away first, waiting for it would
    // keep the relay alive until the client wrote again.
    runtime.shutdown_background();
    result
}

async fn relay_on<R, W>(target: RelayTarget, input: R, output: W) -> Result<(), RelayError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (upstream, connected) = connect(&target).await?;
    let closed = CancellationToken::new();
    let relay = Relay {
        upstream: upstream.peer().clone(),
        routes: connected.routes.clone(),
        closed: closed.clone(),
    };
    let input = WatchedStdin {
        inner: input,
        closed,
    };
    let server = relay
        .serve((input, output))
        .await
        .map_err(|e| RelayError::Downstream(e.to_string()))?;
    let _ = connected.downstream.set(server.peer().clone());
    let quit = server.waiting().await;
    tracing::debug!(?quit, "the client closed the relay");
    let _ = upstream.cancel().await;
    Ok(())
}

#[cfg(test)]
#[path = "relay_tests.rs"]
mod tests;
