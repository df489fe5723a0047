//! The MCP servers as the settings page shows and edits them. Secret values never come out:
//! the page sees the names of a server's environment variables and headers, and sends a value
//! only when the user typed a new one.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// One tool of a server.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct McpToolView {
    /// Its name on the server.
    pub name: String,
    /// The name the model calls it by (and the audit trail shows).
    pub agent_name: String,
    /// Its title, if the server gave one.
    pub title: Option<String>,
    /// What it does, in the server's words.
    pub description: String,
    /// The server says it only reads.
    pub read_only_hint: Option<bool>,
    /// The server says it may delete or overwrite.
    pub destructive_hint: Option<bool>,
    /// The user marked it a read.
    pub marked_read: bool,
    /// It runs without approval (the user's mark, or a trusted server's read hint).
    pub runs_without_approval: bool,
}

/// One configured server.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct McpServerView {
    /// The app's own Feishu Docs server: always there, reached with the app's sign-in; it
    /// cannot be edited or removed.
    pub builtin: bool,
    /// It asks the user to sign in (a remote server's own sign-in): Settings offers it.
    pub needs_sign_in: bool,
    /// Its id (in tool names and the audit trail).
    pub id: String,
    /// Its name.
    pub name: String,
    /// `stdio` or `http`.
    pub transport: String,
    /// The program (stdio).
    pub command: String,
    /// Its arguments (stdio).
    pub args: Vec<String>,
    /// The folder it starts in (stdio).
    pub cwd: Option<String>,
    /// The endpoint (http).
    pub url: String,
    /// The names of its environment variables (values are in the vault).
    pub env: Vec<String>,
    /// The names of its headers (values are in the vault).
    pub headers: Vec<String>,
    /// Names among those whose value is not stored.
    pub missing_values: Vec<String>,
    /// Its tools are offered to the assistant.
    pub enabled: bool,
    /// Its own "read-only" marks are believed.
    pub trusted: bool,
    /// Seconds a call may go without an answer or progress.
    pub timeout_secs: u32,
    /// `idle`, `starting`, `running` or `failed`.
    pub phase: String,
    /// The last failure.
    pub error: Option<String>,
    /// How many times it was started since the app started.
    pub starts: u32,
    /// The server's own name and version.
    pub server_info: Option<String>,
    /// Its tools, as last listed.
    pub tools: Vec<McpToolView>,
}

/// A secret of a server as the page sends it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, TS)]
pub struct McpSecretInput {
    /// The variable's or header's name.
    pub name: String,
    /// A new value; `null` keeps the stored one.
    pub value: Option<String>,
}

/// A server as the page sends it to be saved.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, TS)]
pub struct McpServerInput {
    /// The server to change; `null` adds one (its id made from the name).
    pub id: Option<String>,
    /// Its name.
    pub name: String,
    /// `stdio` or `http`.
    pub transport: String,
    /// The program (stdio).
    #[serde(default)]
    pub command: String,
    /// Its arguments (stdio).
    #[serde(default)]
    pub args: Vec<String>,
    /// The folder it starts in (stdio).
    #[serde(default)]
    pub cwd: Option<String>,
    /// The endpoint (http).
    #[serde(default)]
    pub url: String,
    /// Environment variables (stdio): all of them, in order; one left out is deleted.
    #[serde(default)]
    pub env: Vec<McpSecretInput>,
    /// Headers (http), likewise.
    #[serde(default)]
    pub headers: Vec<McpSecretInput>,
    /// Its tools are offered to the assistant.
    pub enabled: bool,
    /// Its own "read-only" marks are believed.
    pub trusted: bool,
    /// Seconds a call may go without an answer or progress.
    pub timeout_secs: u32,
}

/// What an import added.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct McpImportView {
    /// The ids of the servers added.
    pub added: Vec<String>,
    /// What was skipped or needs the user's attention.
    pub warnings: Vec<String>,
}

/// Another app's MCP configuration file found on this machine.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct McpImportSourceView {
    /// The app ("Claude Desktop", "Cursor", "VS Code", "Claude Code").
    pub app: String,
    /// The file.
    pub path: String,
    /// How many servers it lists.
    pub servers: u32,
}

/// The lark-mcp preset (Feishu's official MCP server for the rest of the Open API), as the
/// settings page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct LarkMcpView {
    /// Switched on.
    pub enabled: bool,
    /// The tools it turns on (lark-mcp's `-t`: tool names and presets).
    pub tools: String,
    /// What the switch turns on unless the user chose otherwise.
    pub default_tools: String,
    /// The Node.js found (program), if any.
    pub node_path: Option<String>,
    /// Its version.
    pub node_version: Option<String>,
    /// A Node.js 20 or newer with npm is at hand.
    pub node_ready: bool,
    /// The lark-mcp version installed, if any.
    pub installed: Option<String>,
    /// The version the app runs.
    pub version: String,
    /// Where lark-mcp is installed (or goes).
    pub package_dir: String,
    /// What is missing before it can run; `null` when it is ready.
    pub problem: Option<crate::text::Text>,
    /// Of its tools, those that run without approval: what the Feishu API each calls shows to
    /// be a read.
    pub read_tools: Vec<String>,
    /// The server (state, tools), once it is on and ready.
    pub server: Option<McpServerView>,
}
