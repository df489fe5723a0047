//! The facade's Settings → MCP servers page (the lark-mcp preset among them): delegations to
//! [`crate::mcp`].

use super::Companion;
use crate::error::CompanionError;
use crate::mcp::questions::{McpAnswerInput, McpQuestionView};
use crate::mcp::view::{
    LarkMcpView, McpImportSourceView, McpImportView, McpServerInput, McpServerView,
};

impl Companion {
    /// Every configured server with its state and tools.
    pub fn mcp_servers(&self) -> Vec<McpServerView> {
        self.mcp.mcp_servers()
    }

    /// Adds or changes a server; its secrets go to the vault, only names to `mcp.json`.
    pub async fn save_mcp_server(
        &self,
        input: McpServerInput,
    ) -> Result<McpServerView, CompanionError> {
        self.mcp.save_mcp_server(input).await
    }

    /// Removes a server, its secrets and its tools.
    pub async fn remove_mcp_server(&self, id: &str) -> Result<(), CompanionError> {
        self.mcp.remove_mcp_server(id).await
    }

    /// Adds the servers of another app's configuration (Claude Desktop, Cursor, VS Code).
    /// Imported servers are never trusted and start only when first needed.
    pub async fn import_mcp_servers(&self, text: &str) -> Result<McpImportView, CompanionError> {
        self.mcp.import_mcp_servers(text).await
    }

    /// Imports the servers of the configuration file at `path`.
    pub async fn import_mcp_file(&self, path: &str) -> Result<McpImportView, CompanionError> {
        self.mcp.import_mcp_file(path).await
    }

    /// Other apps' MCP configuration files found on this machine, with how many servers each.
    pub fn mcp_import_sources(&self) -> Vec<McpImportSourceView> {
        self.mcp.mcp_import_sources()
    }

    /// Stops the server if it runs and starts it again now, listing its tools.
    pub async fn restart_mcp_server(&self, id: &str) -> Result<McpServerView, CompanionError> {
        self.mcp.restart_mcp_server(id).await
    }

    /// What a server wrote to stderr lately.
    pub fn mcp_server_log(&self, id: &str) -> Result<String, CompanionError> {
        self.mcp.mcp_server_log(id)
    }

    /// Marks a tool of a server as a read (it runs without approval) or not.
    pub async fn set_mcp_tool_read(
        &self,
        id: &str,
        tool: &str,
        read: bool,
    ) -> Result<McpServerView, CompanionError> {
        self.mcp.set_mcp_tool_read(id, tool, read).await
    }

    /// What servers ask the user now (elicitation), oldest first.
    pub fn mcp_questions(&self) -> Vec<McpQuestionView> {
        self.mcp.mcp_questions()
    }

    /// The user's answer to a server's question: the form's values (checked against the
    /// server's schema; a mistake is said and the question keeps waiting), or a refusal.
    pub fn answer_mcp_question(
        &self,
        id: &str,
        input: McpAnswerInput,
    ) -> Result<(), CompanionError> {
        self.mcp.answer_mcp_question(id, input)
    }

    /// The lark-mcp preset: switched on or not, what it needs, its server.
    pub async fn lark_mcp(&self) -> LarkMcpView {
        self.mcp.lark_mcp().await
    }

    /// Switches the preset on or off; `tools` is lark-mcp's `-t` selection (`None` keeps the
    /// current one, an empty one goes back to the default). Switched on and ready, it is started
    /// at once so the assistant has its tools.
    pub async fn set_lark_mcp(
        &self,
        enabled: bool,
        tools: Option<String>,
    ) -> Result<LarkMcpView, CompanionError> {
        self.mcp.set_lark_mcp(enabled, tools).await
    }

    /// Gets the preset ready: fetches Node.js from the npm registry into the data folder when
    /// none will do, then installs lark-mcp there with npm; each step reports its progress.
    pub async fn install_lark_mcp(&self) -> Result<LarkMcpView, CompanionError> {
        self.mcp.install_lark_mcp().await
    }
}
