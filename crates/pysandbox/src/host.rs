//! What sandboxed Python can reach outside itself, and who decides: the [`Host`].
//!
//! Python code calls the agent's tools (`tools.NAME(args)`, `async_tools.NAME(args)`) and makes
//! HTTP requests (`ces_requests.get(...)`); each becomes a call of the [`Host`] the tool or
//! callback was loaded with. The sandbox applies the approval gate before the host sees anything: a
//! write (POST, PUT, DELETE, PATCH) is only passed on for a Python tool that was declared
//! `requires_approval` — which the engine runs only once the user has approved the call — and is
//! otherwise answered `403` without reaching the host. [`ToolsHost`] applies the same rule to tools
//! that need approval.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use agent::{
    AgentTool, CallbackContext, ExternalResponse, HttpMethod, ToolContext, ToolOutcome,
    coerce_tool_result,
};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// An HTTP request made by Python code through `ces_requests`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpRequest {
    /// The method.
    pub method: HttpMethod,
    /// The URL, without `params`.
    pub url: String,
    /// Query parameters to add to the URL: each value a string, or a list of strings for a key
    /// that repeats (`params={"tag": ["a", "b"]}` is `?tag=a&tag=b`).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub params: Map<String, Value>,
    /// Request headers.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub headers: Map<String, Value>,
    /// A JSON body (`json=`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<Value>,
    /// A text body (`data="..."`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// A form body (`data={...}`): values as in `params`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<Map<String, Value>>,
    /// A body of bytes that are not UTF-8 text (`data=b"..."`), base64-encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_base64: Option<String>,
    /// `allow_redirects=False`: answer a redirect rather than follow it.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub allow_redirects: bool,
    /// The caller's timeout in seconds (the sandbox's deadline applies regardless).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
}

fn yes() -> bool {
    true
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_true(value: &bool) -> bool {
    *value
}

/// Who is calling the host, and what they may do.
#[derive(Debug, Clone)]
pub struct HostCall {
    /// `tool NAME` or the callback kind, with the file: for logs and audit.
    pub caller: String,
    /// The file the calling code is in (what the user allowed hosts for).
    pub file: String,
    /// Whether writes may be sent: true only inside a Python tool declared `requires_approval`,
    /// which the engine dispatches only after the user approved the call.
    pub writes_approved: bool,
    /// The key a write of this request should be deduplicated by, when the caller is a tool:
    /// the tool call's idempotency key and the request's position in the call (`KEY:1`, `KEY:2`,
    /// …), so a retried call sends the same keys.
    pub idempotency_key: Option<String>,
    /// The session as the caller sees it (state before the caller's own changes).
    pub context: CallbackContext,
}

/// What Python code can reach: the agent's tools and the network, as the app decides.
///
/// Both methods run on the sandbox's worker threads while the Python call waits (bounded by its
/// deadline). The defaults answer that nothing is there.
#[async_trait]
pub trait Host: Send + Sync {
    /// `tools.NAME(args)`.
    async fn call_tool(
        &self,
        name: &str,
        args: Map<String, Value>,
        call: &HostCall,
    ) -> ExternalResponse {
        let _ = (args, call);
        ExternalResponse::new(404, format!("no tool named {name}")).with_reason("Not Found")
    }

    /// `ces_requests.METHOD(url, ...)`. Writes arrive here only when `call.writes_approved`.
    async fn http(&self, request: HttpRequest, call: &HostCall) -> ExternalResponse {
        let _ = (request, call);
        ExternalResponse::new(503, "this app gives Python code no network access")
            .with_reason("Service Unavailable")
    }
}

impl fmt::Debug for dyn Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Host(..)")
    }
}

/// A host with no tools and no network.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHost;

impl Host for NoHost {}

/// The answer to a write that was not approved; the host never sees the request.
pub(crate) fn refused_write(what: &str) -> ExternalResponse {
    ExternalResponse::new(
        403,
        format!(
            "{what} was not sent: writes from Python need a tool declared with \
             @tool(requires_approval=True), called with the user's approval"
        ),
    )
    .with_reason("Forbidden")
}

/// A host whose `tools.NAME` are the agent's tools, and whose HTTP goes to another host.
///
/// A tool needing approval is refused (`403`) unless the Python caller itself is an approved
/// write. The called tool gets a context over the caller's session; its state changes are not
/// kept (a tool called from Python is a helper, not a step of the conversation).
pub struct ToolsHost {
    tools: HashMap<String, Arc<dyn AgentTool>>,
    http: Arc<dyn Host>,
}

impl fmt::Debug for ToolsHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&String> = self.tools.keys().collect();
        names.sort();
        f.debug_struct("ToolsHost")
            .field("tools", &names)
            .finish_non_exhaustive()
    }
}

impl ToolsHost {
    /// These tools, and no network.
    pub fn new(tools: impl IntoIterator<Item = Arc<dyn AgentTool>>) -> Self {
        ToolsHost {
            tools: tools
                .into_iter()
                .map(|t| (t.name().to_owned(), t))
                .collect(),
            http: Arc::new(NoHost),
        }
    }

    /// Sends `ces_requests` to `http`.
    #[must_use]
    pub fn with_http(mut self, http: Arc<dyn Host>) -> Self {
        self.http = http;
        self
    }
}

/// The HTTP status that says what a tool outcome means to code that checks `ok`.
fn status_of(outcome: ToolOutcome, is_error: bool) -> (u16, &'static str) {
    match outcome {
        ToolOutcome::NeedsUserAuth => (401, "Unauthorized"),
        ToolOutcome::Blocked => (403, "Forbidden"),
        ToolOutcome::Cancelled => (409, "Cancelled"),
        _ if is_error => (500, "Tool Failed"),
        _ => (200, ""),
    }
}

#[async_trait]
impl Host for ToolsHost {
    async fn call_tool(
        &self,
        name: &str,
        args: Map<String, Value>,
        call: &HostCall,
    ) -> ExternalResponse {
        let Some(tool) = self.tools.get(name) else {
            return NoHost.call_tool(name, args, call).await;
        };
        if tool.requires_approval(&args) && !call.writes_approved {
            return refused_write(&format!("tools.{name}"));
        }
        let key = call
            .idempotency_key
            .clone()
            .unwrap_or_else(|| format!("py-{}", uuid::Uuid::new_v4().simple()));
        let mut ctx = ToolContext::new(call.context.clone(), key);
        let result = tool.run(args, &mut ctx).await;
        let (text, is_error, structured) = coerce_tool_result(result);
        let outcome = structured.map_or(ToolOutcome::Completed, |r| r.outcome);
        let (status, reason) = status_of(outcome, is_error);
        ExternalResponse::new(status, text).with_reason(reason)
    }

    async fn http(&self, request: HttpRequest, call: &HostCall) -> ExternalResponse {
        self.http.http(request, call).await
    }
}
