//! The facade's Settings → Connected agents page: delegations to [`crate::agents`].

use super::Companion;
use crate::agents::view::{AgentToolsInput, ConnectedAgentsView, NewAgentView};
use crate::error::CompanionError;

impl Companion {
    /// The page.
    pub fn connected_agents(&self) -> ConnectedAgentsView {
        self.agents.connected_agents()
    }

    /// Registers an agent; the answer carries its token, which is never shown again.
    pub fn add_connected_agent(&self, name: &str) -> Result<NewAgentView, CompanionError> {
        self.agents.add_connected_agent(name)
    }

    /// Pauses an agent (its requests are refused) or resumes it.
    pub fn set_connected_agent_paused(
        &self,
        id: &str,
        paused: bool,
    ) -> Result<ConnectedAgentsView, CompanionError> {
        self.agents.set_connected_agent_paused(id, paused)
    }

    /// Revokes an agent: its token stops working for good, and what it still has waiting is
    /// abandoned.
    pub async fn revoke_connected_agent(
        &self,
        id: &str,
    ) -> Result<ConnectedAgentsView, CompanionError> {
        self.agents.revoke_connected_agent(id).await
    }

    /// Chooses the tools an agent may call (`None`: back to the default).
    pub fn set_connected_agent_tools(
        &self,
        input: AgentToolsInput,
    ) -> Result<ConnectedAgentsView, CompanionError> {
        self.agents.set_connected_agent_tools(input)
    }

    /// Stops the server (the app is closing).
    pub fn stop_agent_server(&self) {
        self.agents.stop_agent_server()
    }
}
