//! Credentials that change while a server is in use: a signed-in user's token sent as a header
//! (Feishu's hosted MCP server takes the user's token in `X-Lark-MCP-UAT`). Asked before every
//! call, so a refreshed token is used as soon as it exists; a connection whose headers changed is
//! made again. A refusal that signing in can cure becomes the engine's "needs the user's
//! authorization" outcome, so the call waits behind an authorization card and runs again after.

use std::collections::BTreeMap;

use agent::ToolReturn;
use async_trait::async_trait;

/// Where a server's changing credentials come from.
#[async_trait]
pub trait Credentials: Send + Sync + std::fmt::Debug {
    /// The values to send now: headers of an HTTP server's requests, or environment variables
    /// of a stdio server (which is started again when they change). `Err` is the result to give
    /// the engine instead of calling (typically: the user must sign in, with the scopes the tool
    /// needs).
    async fn headers(&self, tool: &str) -> Result<BTreeMap<String, String>, ToolReturn>;

    /// The result to give for a refusal (JSON-RPC `code`, `message`) that the user can cure by
    /// signing in or granting a permission; `None` for any other refusal.
    async fn on_refusal(&self, tool: &str, code: i64, message: &str) -> Option<ToolReturn>;

    /// The result to give for a tool's error result (`isError`, its text) that signing in or
    /// granting a permission cures; `None` passes the error on as it is. Servers that wrap an
    /// API report its refusals this way rather than as protocol errors.
    async fn on_error_result(&self, _tool: &str, _text: &str) -> Option<ToolReturn> {
        None
    }

    /// The result to give when the server refuses a request over HTTP with this
    /// `WWW-Authenticate` challenge (401: sign in; 403 `insufficient_scope`: grant more), at
    /// connection or during a call. `None` leaves the refusal as it is, unless the credentials
    /// renewed themselves meanwhile (a refreshed token): then the request is made once more with
    /// the new `headers`.
    async fn on_challenge(&self, _tool: &str, _www_authenticate: &str) -> Option<ToolReturn> {
        None
    }
}
