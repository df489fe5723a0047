//! The other direction: the companion as an MCP *server* for the user's other agents (Claude
//! Code, Codex, Cursor, Goose…), so their requests meet the same approval gate as its own.
//!
//! Terms: a *client* is one of those agents, registered by the user with its own secret token;
//! the *gateway* ([`Gateway`]) is the app's side — who a token belongs to, which tools a client
//! sees, and what becomes of a call (answered at once, or held in the app's inbox until the user
//! decides). This module is only the protocol: Streamable HTTP on a loopback address
//! ([`http`]), the rmcp handler that turns requests into gateway calls with progress
//! ([`handler`]), and the stdio relay for clients that only start local servers ([`relay`]).
//!
//! Imports: rmcp and axum; the gateway is a trait, so nothing here knows the app.

pub mod handler;
pub mod http;
pub mod relay;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use async_trait::async_trait;
use rmcp::RoleServer;
use rmcp::model::{CallToolResult, JsonObject, ProgressNotificationParam, ProgressToken, Tool};
use rmcp::service::Peer;
use tokio_util::sync::CancellationToken;

/// The header a client may send to say which project (folder) it works in, percent-encoded
/// UTF-8; the relay sends its working folder. Rules can be scoped to it.
pub const PROJECT_HEADER: &str = "x-companion-project";

/// Who is calling: the registered client the token belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The client's id in the app's registry.
    pub client_id: String,
    /// The project folder the client said it works in, if any.
    pub project: Option<String>,
}

/// Why a token was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No client has this token (never issued, or revoked).
    #[error(
        "this token is not valid: add the agent again in Feishu Companion → Settings → Connected agents"
    )]
    Unknown,
    /// The client is paused in the app.
    #[error("{name} is paused in Feishu Companion (Settings → Connected agents)")]
    Paused {
        /// The client's name.
        name: String,
    },
}

/// What went wrong with a call before any tool ran.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GatewayError {
    /// The client may not use a tool of that name (none exists, or the user did not choose it
    /// for this client).
    #[error("no tool named {0} is available to this agent")]
    UnknownTool(String),
    /// The arguments were refused before anything was held.
    #[error("{0}")]
    InvalidArguments(String),
    /// The app failed (its database, its engine).
    #[error("Feishu Companion could not take the request: {0}")]
    Internal(String),
}

/// The app's side of the server.
#[async_trait]
pub trait Gateway: Send + Sync + 'static {
    /// The client holding `token`, or why it is refused. Called for every HTTP request.
    fn authenticate(&self, token: &str) -> Result<String, Refusal>;

    /// The tools this client may call.
    async fn tools(&self, caller: &Caller) -> Vec<Tool>;

    /// Runs a call through the gate and returns its result: at once for a read, after the
    /// user's decision for a write (reporting through `progress` while it waits). When `cancel`
    /// fires, the client has gone: a call still waiting must be abandoned, never run.
    async fn call(
        &self,
        caller: &Caller,
        tool: &str,
        args: JsonObject,
        progress: Progress,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, GatewayError>;
}

/// Reports a waiting call's progress to the client, when it asked for progress.
#[derive(Clone, Default)]
pub struct Progress {
    target: Option<(Peer<RoleServer>, ProgressToken)>,
    step: Arc<AtomicU32>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("wanted", &self.target.is_some())
            .finish_non_exhaustive()
    }
}

impl Progress {
    pub(crate) fn to(peer: Peer<RoleServer>, token: Option<ProgressToken>) -> Progress {
        Progress {
            target: token.map(|t| (peer, t)),
            step: Arc::default(),
        }
    }

    /// Whether the client asked for progress.
    pub fn wanted(&self) -> bool {
        self.target.is_some()
    }

    /// Sends one progress notification (the count rises by one each time, as the protocol
    /// requires). A client gone missing is not an error here: the call's cancel says so.
    pub async fn report(&self, message: &str) {
        let Some((peer, token)) = &self.target else {
            return;
        };
        let step = self.step.fetch_add(1, Ordering::Relaxed) + 1;
        let param = ProgressNotificationParam::new(token.clone(), f64::from(step))
            .with_message(message.to_owned());
        if let Err(e) = peer.notify_progress(param).await {
            tracing::debug!(error = %e, "a progress notification was not delivered");
        }
    }
}
