//! Connected agents: the user's other agents (Claude Code, Codex, Cursor, Goose…) asking the
//! companion over MCP, so their Feishu reads and writes, and their own shell commands and file
//! edits, meet the app's gate: one inbox, one sign-in, one audit trail for every agent on the
//! desk.
//!
//! Terms: a *connected agent* (client) is registered by the user with a name and a token
//! ([`registry`]); it appears to the engine as a *detached* agent of the same id, with the
//! tools chosen for it plus the approval tools ([`tools`]), and a relay model that proposes
//! exactly the call the client made ([`call`]). The server listens on 127.0.0.1 only
//! ([`server`]); `feishu-companion mcp` relays stdio to it.

pub mod api;
mod call;
pub(crate) mod registry;
pub mod relay;
mod server;
pub mod tools;
pub mod view;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent::{AgentTool, LlmAgent};

use crate::context::Context;
use crate::error::CompanionError;
use crate::feature::{Feature, WeakFeature};
use crate::mcp::McpServers;
use crate::sync::lock;
use registry::{AgentsFile, ClientRecord};

pub use registry::requester_name;
pub use server::{Discovery, discovery_file};

/// The registry and the server's state, kept for the app's life.
pub(crate) struct ConnectedAgents {
    file: PathBuf,
    state: Mutex<AgentsFile>,
    /// What [`registry::load`] said, when the file could not be read: shown in Settings, and
    /// nothing is written over it.
    damaged: Option<String>,
    pub(crate) server: Mutex<server::ServerState>,
}

impl std::fmt::Debug for ConnectedAgents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectedAgents")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

impl ConnectedAgents {
    /// Reads `agents.json` from the config folder.
    pub(crate) fn open(config_dir: &std::path::Path) -> ConnectedAgents {
        let file = registry::file_path(config_dir);
        let (state, damaged) = match registry::load(&file) {
            Ok(state) => (state, None),
            Err(e) => {
                tracing::warn!(error = %e, "the connected agents cannot be read");
                (AgentsFile::default(), Some(e.to_string()))
            }
        };
        registry::publish_names(&state.clients);
        ConnectedAgents {
            file,
            state: Mutex::new(state),
            damaged,
            server: Mutex::default(),
        }
    }

    pub(crate) fn snapshot(&self) -> AgentsFile {
        lock(&self.state).clone()
    }

    pub(crate) fn client(&self, id: &str) -> Option<ClientRecord> {
        lock(&self.state)
            .clients
            .iter()
            .find(|c| c.id == id)
            .cloned()
    }

    /// Changes the registry and saves it; a damaged file is never overwritten.
    pub(crate) fn update<T>(
        &self,
        change: impl FnOnce(&mut AgentsFile) -> Result<T, CompanionError>,
    ) -> Result<T, CompanionError> {
        if let Some(damage) = &self.damaged {
            return Err(CompanionError::Other(format!(
                "{damage}; fix or remove the file, then restart the app"
            )));
        }
        let mut state = lock(&self.state);
        let mut next = state.clone();
        let out = change(&mut next)?;
        registry::save(&self.file, &next)?;
        registry::publish_names(&next.clients);
        *state = next;
        Ok(out)
    }

    /// The client holding `token`, unless it is unknown, revoked or paused.
    pub(crate) fn authenticate(&self, token: &str) -> Result<String, mcp::serve::Refusal> {
        let hash = registry::token_hash(token);
        let state = lock(&self.state);
        let client = state
            .clients
            .iter()
            .find(|c| c.active() && c.token_sha256 == hash)
            .ok_or(mcp::serve::Refusal::Unknown)?;
        if client.paused {
            return Err(mcp::serve::Refusal::Paused {
                name: client.name.clone(),
            });
        }
        Ok(client.id.clone())
    }
}

/// What the connected agents feature keeps: the registry, and the MCP servers whose tools a
/// client may be given.
pub(crate) struct AgentsState {
    registry: Arc<ConnectedAgents>,
    mcp: Arc<McpServers>,
}

/// The connected agents feature (see [`crate::feature`]). Cheap to clone; the app keeps one.
pub(crate) type Agents = Feature<AgentsState>;
/// [`Agents`] that does not keep the app alive (for the server's tasks).
pub(crate) type WeakAgents = WeakFeature<AgentsState>;

impl Agents {
    pub(crate) fn open(
        ctx: Context,
        registry: Arc<ConnectedAgents>,
        mcp: Arc<McpServers>,
    ) -> Agents {
        Feature::new(ctx, AgentsState { registry, mcp })
    }

    /// The registry of clients.
    pub(crate) fn agent_registry(&self) -> &Arc<ConnectedAgents> {
        &self.state().registry
    }

    fn mcp(&self) -> &Arc<McpServers> {
        &self.state().mcp
    }

    /// Whose sessions connected agents' requests are kept in: the person's, set apart so they
    /// never crowd the conversation list.
    pub(crate) fn agents_user_id(&self) -> String {
        format!("{}#agents", crate::person::owner_id(self))
    }

    /// The tools a client can choose from: Feishu's built-in ones and the MCP servers' (the
    /// hosted Feishu docs server's among them).
    pub(crate) fn offerable_tools(&self) -> Vec<Arc<dyn AgentTool>> {
        let mut tools = self.runtime().builtin.clone();
        tools.extend(self.mcp().tools());
        tools
    }

    /// Whether a tool is given to an agent that chose none: Feishu's built-in tools and the
    /// built-in Feishu docs server's.
    pub(crate) fn default_tools(&self) -> impl Fn(&str) -> bool + use<> {
        let builtin: HashSet<String> = self
            .runtime()
            .builtin
            .iter()
            .map(|t| t.name().to_owned())
            .collect();
        let docs = format!("{}{}__", mcp::naming::PREFIX, crate::mcp::feishu::ID);
        move |name| builtin.contains(name) || name.starts_with(&docs)
    }

    /// What `client` may call: its chosen tools (Feishu's built-in ones unless it chose), then
    /// the approval tools.
    pub(crate) fn agent_tools(&self, client: &ClientRecord) -> Vec<Arc<dyn AgentTool>> {
        let default = self.default_tools();
        let chosen = |name: &str| match &client.tools {
            Some(list) => list.iter().any(|t| t == name),
            None => default(name),
        };
        let mut tools: Vec<Arc<dyn AgentTool>> = self
            .offerable_tools()
            .into_iter()
            .filter(|t| chosen(t.name()))
            .collect();
        tools.extend(tools::all());
        tools
    }

    /// Gives the engine one detached agent per active client, with its tools as they are now.
    /// Called whenever the engine, the tools or the registry change.
    pub(crate) fn apply_connected_agents(&self) -> Result<(), CompanionError> {
        let model = call::relay_model();
        let mut agents = Vec::new();
        for client in self
            .agent_registry()
            .snapshot()
            .clients
            .iter()
            .filter(|c| c.active())
        {
            let mut builder = LlmAgent::builder(client.id.clone(), model.clone())
                .description(format!("Connected agent: {}", client.name));
            for tool in self.agent_tools(client) {
                builder = builder.shared_tool(tool);
            }
            agents.push(
                builder
                    .build()
                    .map_err(|e| CompanionError::Other(e.to_string()))?,
            );
        }
        self.engine().set_detached_agents(agents)?;
        Ok(())
    }
}
