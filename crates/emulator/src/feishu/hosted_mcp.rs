//! Feishu's hosted MCP server (`https://mcp.feishu.cn/mcp`, Lark's
//! `https://mcp.larksuite.com/mcp`), served at `/mcp` (and `/lark/mcp`) over the emulator's
//! tenant: the document tools `create-doc`, `fetch-doc`, `update-doc` and `locate-doc`.
//!
//! It is rmcp's Streamable HTTP server, stateless and answering plain JSON, so both of its
//! callers are served: an MCP client doing the handshake (`initialize`, `tools/list`,
//! `tools/call`), and lark-cli, which posts a bare `tools/call` with no handshake, no session and
//! no `Accept` header and parses the body as JSON.
//!
//! Who calls is the raw token in `X-Lark-MCP-UAT` (a user) or `X-Lark-MCP-TAT` (an app's bot),
//! checked as the Open API's gateway checks tokens; failures carry Feishu's code in the
//! JSON-RPC `error.code` (99991661 no token, 99991668 unknown, 99991677 expired, 99991663 a bad
//! tenant token, 99991679 a scope the user has not granted, 99991672 one the app lacks), which
//! is where lark-cli reads it. `X-Lark-MCP-Allowed-Tools` (comma-separated), when sent, is the
//! only tools listed and callable.
//!
//! Results are one text item holding JSON, the item lark-cli parses.

mod args;
mod selection;
mod tools;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode,
    Implementation, InitializeRequestParams, InitializeResult, JsonObject, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::api::scopes::{DOCX_CREATE, DOCX_READ, DOCX_WRITE, ScopeGroup};
use super::api::{self, ApiError};
use super::oauth::AccessToken;
use super::page::LarkHost;
use super::{LoggedRequest, Shared, now_millis};

/// Where the server answers (the hosted server's path on its own host).
pub const PATH: &str = "/mcp";

/// The user's access token, sent raw (no `Bearer `).
pub const USER_TOKEN_HEADER: &str = "x-lark-mcp-uat";
/// A tenant access token, when an app calls as its bot.
pub const TENANT_TOKEN_HEADER: &str = "x-lark-mcp-tat";
/// The tools the caller may see and call, comma-separated.
pub const ALLOWED_TOOLS_HEADER: &str = "x-lark-mcp-allowed-tools";

/// One tool: its name, what it needs and its input schema.
struct Spec {
    name: &'static str,
    description: &'static str,
    read_only: bool,
    destructive: bool,
    /// One scope of each group, as the Open API endpoints the tool stands for need.
    scopes: &'static [ScopeGroup],
    schema: fn() -> Value,
}

const TOOLS: [Spec; 4] = [
    Spec {
        name: "create-doc",
        description: "Create a Feishu docx document from Lark-flavored Markdown, in a drive folder \
                      (folder_token), under a wiki node (wiki_node) or at a wiki space's root \
                      (wiki_space; my_library is the user's own). Returns doc_id and doc_url.",
        read_only: false,
        destructive: false,
        scopes: &[DOCX_CREATE],
        schema: || {
            object(
                json!({
                    "markdown": {"type": "string", "description": "The content, without the title as a heading."},
                    "title": {"type": "string", "description": "The document's title, 1-800 characters."},
                    "folder_token": {"type": "string", "description": "The drive folder (exclusive with wiki_node and wiki_space)."},
                    "wiki_node": {"type": "string", "description": "A wiki node's token or URL to create under."},
                    "wiki_space": {"type": "string", "description": "A wiki space id, or my_library."},
                }),
                &["markdown"],
            )
        },
    },
    Spec {
        name: "fetch-doc",
        description: "Fetch a Feishu document's title and content as Markdown (a docx or wiki \
                      URL or token), a page of characters at a time with offset and limit.",
        read_only: true,
        destructive: false,
        scopes: &[DOCX_READ],
        schema: || {
            object(
                json!({
                    "doc_id": {"type": "string", "description": "The document's URL or token."},
                    "skip_task_detail": {"type": "boolean", "description": "Leave embedded tasks unexpanded."},
                    "offset": {"type": "integer", "minimum": 0, "description": "Characters to skip."},
                    "limit": {"type": "integer", "minimum": 1, "description": "Characters to return at most."},
                }),
                &["doc_id"],
            )
        },
    },
    Spec {
        name: "update-doc",
        description: "Update a Feishu document: append, overwrite, or replace_range / replace_all \
                      / insert_before / insert_after / delete_range at a selection (\
                      selection_with_ellipsis \"start...end\" or selection_by_title \"## Title\"); \
                      new_title renames it.",
        read_only: false,
        destructive: true,
        scopes: &[DOCX_WRITE, DOCX_READ],
        schema: || {
            object(
                json!({
                    "doc_id": {"type": "string", "description": "The document's URL or token."},
                    "mode": {"type": "string", "enum": tools::MODES},
                    "markdown": {"type": "string", "description": "The new content (not for delete_range)."},
                    "selection_with_ellipsis": {"type": "string", "description": "\"start...end\" or exact text; \\.\\.\\. is three literal dots."},
                    "selection_by_title": {"type": "string", "description": "A heading, e.g. \"## Section\": it and its section."},
                    "new_title": {"type": "string", "description": "A new title, 1-800 characters."},
                }),
                &["doc_id", "mode"],
            )
        },
    },
    Spec {
        name: "locate-doc",
        description: "Find where text is in a Feishu document: the blocks each match of \
                      selection_with_ellipsis touches, with their ids and Markdown.",
        read_only: true,
        destructive: false,
        scopes: &[DOCX_READ],
        schema: || {
            object(
                json!({
                    "doc_id": {"type": "string", "description": "The document's URL or token."},
                    "selection_with_ellipsis": {"type": "string", "description": "\"start...end\" or exact text."},
                    "limit": {"type": "integer", "minimum": 1, "description": "Matches to return at most."},
                }),
                &["doc_id", "selection_with_ellipsis"],
            )
        },
    },
];

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

impl Spec {
    fn tool(&self) -> Tool {
        let schema = match (self.schema)() {
            Value::Object(map) => map,
            _ => JsonObject::new(),
        };
        let mut annotations = ToolAnnotations::new().read_only(self.read_only);
        if !self.read_only {
            annotations = annotations.destructive(self.destructive);
        }
        Tool::new(self.name, self.description, Arc::new(schema)).annotate(annotations)
    }
}

/// The `/mcp` route, with the gate that lets lark-cli's bare posts through and logs each one.
pub(crate) fn routes(shared: Shared) -> Router<Shared> {
    let handler_state = shared.clone();
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None);
    let service = StreamableHttpService::new(
        move || {
            Ok(HostedMcp {
                shared: handler_state.clone(),
            })
        },
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Router::new()
        .route_service(PATH, service)
        .layer(middleware::from_fn_with_state(shared, gate))
}

/// lark-cli sends no `Accept` and reads the answer as JSON; rmcp refuses (406) a post that
/// does not accept both JSON and SSE. With JSON answers on, it answers such a post in JSON.
async fn gate(State(shared): State<Shared>, mut request: Request, next: Next) -> Response {
    let method = request.method().clone();
    if method == Method::POST && !accepts_json_and_sse(request.headers()) {
        request.headers_mut().insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
    }
    let response = next.run(request).await;
    shared.lock().log.push(LoggedRequest {
        method: method.as_str().to_owned(),
        path: PATH.to_owned(),
        grant_type: None,
        at: now_millis(),
        route: Some(PATH.to_owned()),
        write: false,
        idempotency_key: None,
        status: Some(response.status().as_u16()),
        code: None,
    });
    response
}

fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
    let accept: String = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(",")
        .to_ascii_lowercase();
    accept.contains("application/json") && accept.contains("text/event-stream")
}

/// Who calls, from the request's headers.
struct Caller {
    identity: Identity,
    /// `X-Lark-MCP-Allowed-Tools`, when sent.
    allowed: Option<Vec<String>>,
    /// Came in on the Lark brand's host (links say larksuite.com).
    lark: bool,
}

enum Identity {
    User(AccessToken),
    Bot { app_id: String },
}

impl Caller {
    fn allows(&self, tool: &str) -> bool {
        self.allowed
            .as_ref()
            .is_none_or(|allowed| allowed.iter().any(|a| a == tool))
    }
}

/// A Feishu error as a JSON-RPC error: the code where lark-cli reads it, and the `error`
/// object (log id, permission violations) as its data.
fn feishu_error(error: &ApiError) -> ErrorData {
    let code = i32::try_from(error.code()).unwrap_or(ErrorCode::INTERNAL_ERROR.0);
    ErrorData::new(
        ErrorCode(code),
        error.msg().to_owned(),
        error.detail().cloned(),
    )
}

/// The hosted server's handler; rmcp makes one per request (stateless).
#[derive(Clone)]
struct HostedMcp {
    shared: Shared,
}

impl HostedMcp {
    fn caller(&self, context: &RequestContext<RoleServer>) -> Result<Caller, ErrorData> {
        let parts = context.extensions.get::<Parts>();
        let header = |name: &str| {
            parts
                .and_then(|p| p.headers.get(name))
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
                .filter(|v| !v.is_empty())
        };
        let state = self.shared.lock();
        let identity = if let Some(token) = header(USER_TOKEN_HEADER) {
            Identity::User(api::user_access(&state, token).map_err(|e| feishu_error(&e))?)
        } else if let Some(token) = header(TENANT_TOKEN_HEADER) {
            let app_id = api::tenant_access(&state, token).map_err(|e| feishu_error(&e))?;
            Identity::Bot { app_id }
        } else {
            return Err(feishu_error(&ApiError::new(
                400,
                99991661,
                "Missing access token for authorization. Please make a request with token attached.",
            )));
        };
        let allowed = header(ALLOWED_TOOLS_HEADER).map(|list| {
            list.split(',')
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty())
                .collect()
        });
        let lark = parts.is_some_and(|p| p.extensions.get::<LarkHost>().is_some());
        Ok(Caller {
            identity,
            allowed,
            lark,
        })
    }
}

impl ServerHandler for HostedMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            Implementation::new("feishu-mcp-emulator", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        self.caller(&context)?;
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = self.caller(&context)?;
        Ok(ListToolsResult::with_all_items(
            TOOLS
                .iter()
                .filter(|spec| caller.allows(spec.name))
                .map(Spec::tool)
                .collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = self.caller(&context)?;
        let name = request.name.as_ref();
        let Some(spec) = TOOLS
            .iter()
            .find(|spec| spec.name == name && caller.allows(name))
        else {
            return Err(ErrorData::invalid_params(
                format!("tool not found: {name}"),
                None,
            ));
        };
        let args = request.arguments.unwrap_or_default();
        let mut state = self.shared.lock();
        match &caller.identity {
            Identity::User(access) => api::check_scopes(&state, spec.scopes, access),
            Identity::Bot { app_id } => api::check_app_scopes(&state, app_id, spec.scopes),
        }
        .map_err(|e| feishu_error(&e))?;
        let result = match tools::call(&mut state, spec.name, &args, caller.lark) {
            Ok(value) => CallToolResult::success(vec![ContentBlock::text(value.to_string())]),
            Err(error) => CallToolResult::error(vec![ContentBlock::text(error.body().to_string())]),
        };
        Ok(result.into())
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        TOOLS.iter().find(|spec| spec.name == name).map(Spec::tool)
    }
}
