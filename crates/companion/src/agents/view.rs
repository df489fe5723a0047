//! Settings → Connected agents, as the page shows it. A token leaves the core exactly once, in
//! [`NewAgentView`], right after the user added the agent.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::text::Text;

/// One registered agent.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct ConnectedAgentView {
    /// Its id (also its name in the audit trail: `agent:<id>`).
    pub id: String,
    /// What the user called it.
    pub name: String,
    /// Its requests are refused until resumed.
    pub paused: bool,
    /// Revoked: its token never works again (kept so old cards and audit rows name it).
    pub revoked: bool,
    /// When it was added (milliseconds since the Unix epoch).
    #[ts(type = "number")]
    pub created_at: i64,
    /// The tools chosen for it; `null`: Feishu's built-in tools (the default).
    pub tools: Option<Vec<String>>,
    /// The tools it can call now, the approval tools included.
    pub effective_tools: Vec<String>,
}

/// A tool the user can give an agent.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct AgentToolChoiceView {
    /// Its name (what the agent calls).
    pub name: String,
    /// In words.
    pub title: Text,
    /// It only reads: it answers at once. Everything else waits for approval.
    pub read: bool,
    /// Given by default (Feishu's own tools).
    pub default_on: bool,
}

/// The page.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct ConnectedAgentsView {
    /// Every agent, in the order added; revoked ones last.
    pub agents: Vec<ConnectedAgentView>,
    /// Where the server answers (`http://127.0.0.1:<port>/mcp`), when it runs.
    pub url: Option<String>,
    /// Why it is not running, or not on its usual port.
    pub problem: Option<String>,
    /// The command of the stdio relay (`feishu-companion mcp`), as installed.
    pub relay_command: String,
    /// The tools an agent can be given.
    pub tools: Vec<AgentToolChoiceView>,
}

/// How to set one client up.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct AgentSetupView {
    /// `claude-code`, `codex`, `cursor` or `http`.
    pub client: String,
    /// Its name and where the lines go.
    pub title: Text,
    /// The lines to paste or run, with the token in them.
    pub text: String,
}

/// The answer to adding an agent: the only time its token is shown.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct NewAgentView {
    /// The agent.
    pub agent: ConnectedAgentView,
    /// Its token: shown once, kept only as a hash.
    pub token: String,
    /// The configuration for each client, token filled in.
    pub setups: Vec<AgentSetupView>,
}

/// A change of an agent's tools.
#[derive(Debug, Clone, PartialEq, Deserialize, TS)]
pub struct AgentToolsInput {
    /// The agent.
    pub id: String,
    /// The tools; `null` goes back to the default.
    pub tools: Option<Vec<String>>,
}
