//! Model Context Protocol servers as the engine's tools, through the official Rust SDK (`rmcp`).
//!
//! Terms: a *server* is one MCP server the user configured ([`ServerConfig`]): a local program
//! spoken to over stdio, or a remote endpoint over Streamable HTTP. Its *connection*
//! ([`Connection`]) starts it when a tool of it is first needed, keeps its stderr, and starts it
//! again after a crash with a growing pause. The *hub* ([`Hub`]) holds every server and gives the
//! agent their tools ([`McpTool`]), each named `mcp__<server>__<tool>` ([`naming`]). Every call
//! goes through the engine's approval gate like a built-in tool: what counts as a read is
//! decided by the user, never by the server alone ([`gate`]). A remote server that asks the
//! user to sign in holds the call until they have ([`oauth`]); a server that asks the user for
//! input mid-call reaches the app's [`Elicitor`] ([`elicit`]). The other way round, [`serve`]
//! makes the app an MCP server for the user's other agents, behind the same gate.
//!
//! Imports: the engine's vocabulary (`agent`) and `rmcp`; nothing of the app, Feishu, SQLite or
//! Tauri. Secrets come in resolved ([`Resolved`]); where they are kept is the app's business.
//!
//! Imports: only `agent` (the tools it offers the engine); nothing above it.

pub mod config;
pub mod connection;
mod credentials;
pub mod elicit;
pub mod gate;
mod handler;
mod http;
pub mod hub;
pub mod import;
pub mod naming;
pub mod oauth;
pub mod outcome;
pub mod serve;
mod stderr;
pub mod tool;

pub use config::{Resolved, SecretKind, ServerConfig, TransportConfig};
pub use connection::{CallError, Connection, Phase, ServerStatus};
pub use credentials::Credentials;
pub use elicit::{ElicitAnswer, ElicitModes, ElicitRequest, Elicitor};
pub use gate::ToolInfo;
pub use hub::{Hub, HubEvent};
pub use oauth::{McpOAuth, OAuthError, SignIn, StoreError, TokenBlob, TokenStore};
pub use tool::McpTool;
