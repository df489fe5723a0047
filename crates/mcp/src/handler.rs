//! The app's side of one connection: what it tells a server about itself, and what it does with
//! the server's notifications and requests. Progress is passed on for the call whose token it
//! names, a changed tool list marks the server's tools for a fresh `tools/list`, and a request
//! for the user's input goes to the app's [`Elicitor`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ErrorData, Implementation,
    NumberOrString, ProgressNotificationParam, ProgressToken, ProtocolVersion,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use tokio::sync::broadcast;

use crate::elicit::{self, Elicitor};
use crate::gate::ToolInfo;
use crate::hub::HubEvent;

/// Which call each progress token belongs to, shared by the connection and its handler.
pub(crate) type ProgressRoutes = Arc<Mutex<HashMap<String, String>>>;

/// The key of a progress token in [`ProgressRoutes`].
pub(crate) fn token_key(token: &ProgressToken) -> String {
    match &token.0 {
        NumberOrString::Number(n) => format!("n:{n}"),
        NumberOrString::String(s) => format!("s:{s}"),
    }
}

/// The handler of one server's connection.
#[derive(Debug, Clone)]
pub(crate) struct Handler {
    pub(crate) server_id: String,
    pub(crate) routes: ProgressRoutes,
    pub(crate) events: broadcast::Sender<HubEvent>,
    /// The server's tools as last listed, refreshed when it says they changed.
    pub(crate) tools: Arc<Mutex<Vec<ToolInfo>>>,
    /// Who answers the server's requests for the user's input.
    pub(crate) elicitor: Arc<dyn Elicitor>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        let mut me = Implementation::new("feishu-companion", env!("CARGO_PKG_VERSION"));
        me.title = Some("Feishu Companion".to_owned());
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = elicit::capability(self.elicitor.modes());
        // rmcp's default is its newest revision, which has no `initialize` (it moved the
        // handshake into each request): the handshake this client makes names the newest
        // revision that has one, and the server answers with the one it speaks.
        ClientConfig::new(capabilities, me)
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(elicit::answer(self.elicitor.as_ref(), &self.server_id, request).await)
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let call_id = self
            .routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&token_key(&params.progress_token))
            .cloned();
        // Progress for a call that already ended (or never was ours) is dropped.
        if let Some(call_id) = call_id {
            let _ = self.events.send(HubEvent::Progress {
                server_id: self.server_id.clone(),
                call_id,
                progress: params.progress,
                total: params.total,
                message: params.message,
            });
        }
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        // Listed off the notification's task: a request answered by the same connection's
        // reader must not wait on the reader.
        let this = self.clone();
        tokio::spawn(async move {
            match context.peer.list_all_tools().await {
                Ok(tools) => {
                    *this.tools.lock().unwrap_or_else(PoisonError::into_inner) =
                        tools.iter().map(ToolInfo::from_mcp).collect();
                    let _ = this.events.send(HubEvent::ToolsChanged {
                        server_id: this.server_id.clone(),
                    });
                }
                Err(e) => {
                    tracing::warn!(server = %this.server_id, error = %e, "tools/list after list_changed failed")
                }
            }
        });
    }
}
