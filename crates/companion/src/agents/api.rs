//! The user's actions on Settings → Connected agents: list, add (the token is shown once),
//! pause or resume, revoke, and choose an agent's tools.

use super::Agents;
use super::registry::{self, ClientRecord};
use super::view::{
    AgentSetupView, AgentToolChoiceView, AgentToolsInput, ConnectedAgentView, ConnectedAgentsView,
    NewAgentView,
};
use crate::error::CompanionError;
use crate::sync::lock;
use crate::text::Text;

/// The name clients know the server by (`mcp__feishu-companion__approve`).
pub const SERVER_NAME: &str = "feishu-companion";

/// The environment variable the relay takes the token from.
pub const TOKEN_VARIABLE: &str = "FEISHU_COMPANION_TOKEN";

/// The longest name an agent can be given.
const MAX_NAME: usize = 60;

impl Agents {
    /// The page.
    pub fn connected_agents(&self) -> ConnectedAgentsView {
        let mut clients = self.agent_registry().snapshot().clients;
        clients.sort_by_key(|c| c.revoked_at.is_some());
        let (url, problem) = {
            let server = lock(&self.agent_registry().server);
            (
                server
                    .addr
                    .map(|a| format!("http://{a}{}", mcp::serve::http::PATH)),
                server.problem.clone(),
            )
        };
        let default = self.default_tools();
        let tools = self
            .offerable_tools()
            .iter()
            .map(|t| AgentToolChoiceView {
                name: t.name().to_owned(),
                title: crate::labels::tool_title(t.name()),
                read: !t.requires_approval(&serde_json::Map::new()),
                default_on: default(t.name()),
            })
            .collect();
        ConnectedAgentsView {
            agents: clients.iter().map(|c| self.agent_view(c)).collect(),
            url,
            problem,
            relay_command: relay_command(),
            tools,
        }
    }

    fn agent_view(&self, c: &ClientRecord) -> ConnectedAgentView {
        ConnectedAgentView {
            id: c.id.clone(),
            name: c.name.clone(),
            paused: c.paused,
            revoked: c.revoked_at.is_some(),
            created_at: c.created_at,
            tools: c.tools.clone(),
            effective_tools: if c.active() {
                self.agent_tools(c)
                    .iter()
                    .map(|t| t.name().to_owned())
                    .collect()
            } else {
                Vec::new()
            },
        }
    }

    /// Registers an agent; the answer carries its token, which is never shown again.
    pub fn add_connected_agent(&self, name: &str) -> Result<NewAgentView, CompanionError> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME {
            return Err(CompanionError::Other(format!(
                "an agent's name must be 1 to {MAX_NAME} characters"
            )));
        }
        let token = registry::new_token();
        let record = ClientRecord {
            id: registry::new_id(),
            name: name.to_owned(),
            token_sha256: registry::token_hash(&token),
            created_at: agent::now_millis(),
            paused: false,
            revoked_at: None,
            tools: None,
        };
        self.agent_registry().update(|file| {
            file.clients.push(record.clone());
            Ok(())
        })?;
        self.apply_connected_agents()?;
        let url = self
            .connected_agents()
            .url
            .unwrap_or_else(|| format!("http://127.0.0.1:{}/mcp", registry::DEFAULT_PORT));
        Ok(NewAgentView {
            agent: self.agent_view(&record),
            setups: setups(&url, &token),
            token,
        })
    }

    /// Pauses an agent (its requests are refused) or resumes it.
    pub fn set_connected_agent_paused(
        &self,
        id: &str,
        paused: bool,
    ) -> Result<ConnectedAgentsView, CompanionError> {
        self.change_client(id, |c| c.paused = paused)?;
        Ok(self.connected_agents())
    }

    /// Revokes an agent: its token stops working for good, and what it still has waiting is
    /// abandoned.
    pub async fn revoke_connected_agent(
        &self,
        id: &str,
    ) -> Result<ConnectedAgentsView, CompanionError> {
        self.change_client(id, |c| {
            c.revoked_at.get_or_insert_with(agent::now_millis);
        })?;
        for call in self.engine().pending_calls()? {
            if call.agent_name == id {
                self.engine().abandon(&call.session_id).await?;
            }
        }
        self.apply_connected_agents()?;
        Ok(self.connected_agents())
    }

    /// Chooses the tools an agent may call (`None`: back to the default).
    pub fn set_connected_agent_tools(
        &self,
        input: AgentToolsInput,
    ) -> Result<ConnectedAgentsView, CompanionError> {
        let offered: std::collections::HashSet<String> = self
            .offerable_tools()
            .iter()
            .map(|t| t.name().to_owned())
            .collect();
        if let Some(unknown) = input.tools.iter().flatten().find(|t| !offered.contains(*t)) {
            return Err(CompanionError::Other(format!(
                "there is no tool named {unknown}"
            )));
        }
        self.change_client(&input.id, |c| c.tools = input.tools.clone())?;
        self.apply_connected_agents()?;
        Ok(self.connected_agents())
    }

    fn change_client(
        &self,
        id: &str,
        change: impl FnOnce(&mut ClientRecord),
    ) -> Result<(), CompanionError> {
        self.agent_registry().update(|file| {
            let client = file
                .clients
                .iter_mut()
                .find(|c| c.id == id)
                .ok_or_else(|| CompanionError::Other(format!("no connected agent has id {id}")))?;
            change(client);
            Ok(())
        })
    }
}

/// The relay's command as this installation runs it.
fn relay_command() -> String {
    std::env::current_exe()
        .ok()
        .filter(|p| p.file_name().is_some_and(|n| n == SERVER_NAME))
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| SERVER_NAME.to_owned())
}

/// What to paste into each client, token filled in.
fn setups(url: &str, token: &str) -> Vec<AgentSetupView> {
    let relay = relay_command();
    vec![
        AgentSetupView {
            client: "claude-code".to_owned(),
            title: Text::new("Claude Code（在终端运行）", "Claude Code (run in a terminal)"),
            text: format!(
                "claude mcp add --transport http {SERVER_NAME} {url} --header \"Authorization: Bearer {token}\"\n\
                 # 让 Claude Code 的权限请求在飞书助手中审批 / approve Claude Code's own permission prompts here:\n\
                 claude --permission-prompt-tool mcp__{SERVER_NAME}__approve"
            ),
        },
        AgentSetupView {
            client: "codex".to_owned(),
            title: Text::new("Codex（~/.codex/config.toml）", "Codex (~/.codex/config.toml)"),
            text: format!(
                "[mcp_servers.{SERVER_NAME}]\ncommand = \"{relay}\"\nargs = [\"mcp\"]\nenv = {{ {TOKEN_VARIABLE} = \"{token}\" }}"
            ),
        },
        AgentSetupView {
            client: "cursor".to_owned(),
            title: Text::new("Cursor（~/.cursor/mcp.json）", "Cursor (~/.cursor/mcp.json)"),
            text: serde_json::to_string_pretty(&serde_json::json!({
                "mcpServers": {SERVER_NAME: {"url": url, "headers": {"Authorization": format!("Bearer {token}")}}}
            }))
            .unwrap_or_default(),
        },
        AgentSetupView {
            client: "http".to_owned(),
            title: Text::new("其他客户端（HTTP）", "Any other client (HTTP)"),
            text: format!("URL: {url}\nAuthorization: Bearer {token}"),
        },
    ]
}
