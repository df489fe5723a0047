//! What the UI hears about MCP servers.

/// What the UI hears about MCP servers.
#[derive(Debug, Clone, PartialEq)]
pub enum McpEvent {
    /// A server started, stopped, failed or listed its tools: the page reads them again.
    Servers,
    /// A server's question to the user arrived or went: the cards read them again.
    Questions,
    /// Getting the lark-mcp preset ready (Node.js, lark-mcp) moved on.
    Setup {
        /// `node`, `npm` (downloads) or `lark-mcp` (the install).
        step: String,
        /// Bytes, or packages fetched.
        done: u64,
        /// Of how many, when known.
        total: Option<u64>,
        /// What it is doing.
        message: crate::text::Text,
    },
    /// A call reported progress.
    Progress {
        /// The engine's call.
        call_id: String,
        /// How far.
        progress: f64,
        /// Of how much, if known.
        total: Option<f64>,
        /// What it is doing.
        message: Option<String>,
    },
}
