//! The rmcp handler of the companion's server: each request finds its caller (put there by the
//! HTTP layer, see [`super::http`]) and goes to the gateway. rmcp makes one per request
//! (stateless), so it holds nothing but the gateway.

use std::sync::Arc;

use axum::http::request::Parts;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeRequestParams,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use super::{Caller, Gateway, GatewayError, Progress};

/// What the server tells clients about itself when they connect.
const INSTRUCTIONS: &str = "Feishu Companion: the user's Feishu (Lark) calendar, chats, docs and tasks, \
and their approval inbox. Reads answer at once; every write waits until the user approves it in the \
Feishu Companion app (or on their phone), so a call may take minutes: the request stays open and \
reports progress. A rejection comes back with the user's reason; respect it. `approve` is a \
permission-prompt tool (Claude Code's --permission-prompt-tool) and `request_approval` asks the user \
a yes-or-no question about an action of your own.";

/// The handler: the gateway behind it.
#[derive(Clone)]
pub struct CompanionServer {
    gateway: Arc<dyn Gateway>,
}

impl std::fmt::Debug for CompanionServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompanionServer").finish_non_exhaustive()
    }
}

impl CompanionServer {
    /// A handler answering from `gateway`.
    pub fn new(gateway: Arc<dyn Gateway>) -> CompanionServer {
        CompanionServer { gateway }
    }
}

/// The caller the HTTP layer identified; a request without one never reaches here, so its
/// absence means the handler was served some other way, which this server does not allow.
fn caller(context: &RequestContext<RoleServer>) -> Result<Caller, ErrorData> {
    context
        .extensions
        .get::<Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
        .cloned()
        .ok_or_else(|| ErrorData::invalid_request("the request carries no valid token", None))
}

fn error(e: GatewayError) -> ErrorData {
    match e {
        GatewayError::UnknownTool(_) | GatewayError::InvalidArguments(_) => {
            ErrorData::invalid_params(e.to_string(), None)
        }
        GatewayError::Internal(_) => ErrorData::internal_error(e.to_string(), None),
    }
}

impl ServerHandler for CompanionServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "feishu-companion",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(INSTRUCTIONS)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        caller(&context)?;
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = caller(&context)?;
        Ok(ListToolsResult::with_all_items(
            self.gateway.tools(&caller).await,
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = caller(&context)?;
        let progress = Progress::to(context.peer.clone(), context.meta.get_progress_token());
        let result = self
            .gateway
            .call(
                &caller,
                request.name.as_ref(),
                request.arguments.unwrap_or_default(),
                progress,
                context.ct.clone(),
            )
            .await
            .map_err(error)?;
        Ok(result.into())
    }
}
