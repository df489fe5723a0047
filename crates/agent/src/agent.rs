//! Agents: a model with an instruction, tools, sub-agents and callbacks.
//!
//! Callbacks come in the seed's six kinds. Several of one kind run in order, and the first that
//! returns a value short-circuits: `before_agent` skips the agent with that content,
//! `before_model` replaces the model's response, `after_model` replaces what the model said,
//! `before_tool` replaces the tool's result, `after_tool` replaces the result, `after_agent`
//! adds a closing message.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::content::Content;
use crate::context::{CallbackContext, ToolContext};
use crate::llm::{GenerateContentConfig, LlmRequest, LlmResponse};
use crate::model::Model;
use crate::result::ToolReturn;
use crate::tool::AgentTool;

/// Runs before the agent; `Some(content)` skips the agent and answers with that content.
pub type BeforeAgentCallback = Arc<dyn Fn(&mut CallbackContext) -> Option<Content> + Send + Sync>;
/// Runs after the agent; `Some(content)` adds it as the agent's closing message.
pub type AfterAgentCallback = Arc<dyn Fn(&mut CallbackContext) -> Option<Content> + Send + Sync>;
/// Runs before each model call and may edit the request; `Some(response)` replaces the call.
pub type BeforeModelCallback =
    Arc<dyn Fn(&mut CallbackContext, &mut LlmRequest) -> Option<LlmResponse> + Send + Sync>;
/// Runs after each model call; `Some(response)` replaces what the model said.
pub type AfterModelCallback =
    Arc<dyn Fn(&mut CallbackContext, &LlmResponse) -> Option<LlmResponse> + Send + Sync>;
/// Runs before each tool call with the tool's name and arguments; `Some(result)` replaces the
/// call. A write's approved arguments cannot be changed here: the engine refuses the dispatch.
pub type BeforeToolCallback = Arc<
    dyn Fn(&mut ToolContext, &str, &mut Map<String, Value>) -> Option<ToolReturn> + Send + Sync,
>;
/// Runs after each tool call; `Some(result)` replaces the tool's result.
pub type AfterToolCallback = Arc<
    dyn Fn(&mut ToolContext, &str, &Map<String, Value>, &ToolReturn) -> Option<ToolReturn>
        + Send
        + Sync,
>;

/// The callbacks of one agent, by kind, each list run in order.
#[derive(Clone, Default)]
pub struct Callbacks {
    /// Before the agent runs.
    pub before_agent: Vec<BeforeAgentCallback>,
    /// After the agent has run.
    pub after_agent: Vec<AfterAgentCallback>,
    /// Before each model call.
    pub before_model: Vec<BeforeModelCallback>,
    /// After each model call.
    pub after_model: Vec<AfterModelCallback>,
    /// Before each tool call.
    pub before_tool: Vec<BeforeToolCallback>,
    /// After each tool call.
    pub after_tool: Vec<AfterToolCallback>,
}

impl fmt::Debug for Callbacks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Callbacks")
            .field("before_agent", &self.before_agent.len())
            .field("after_agent", &self.after_agent.len())
            .field("before_model", &self.before_model.len())
            .field("after_model", &self.after_model.len())
            .field("before_tool", &self.before_tool.len())
            .field("after_tool", &self.after_tool.len())
            .finish()
    }
}

/// A tool with its compiled argument validator.
pub(crate) struct ToolEntry {
    pub(crate) tool: Arc<dyn AgentTool>,
    pub(crate) validator: jsonschema::Validator,
}

/// An agent: a model, an instruction, tools, sub-agents and callbacks.
pub struct LlmAgent {
    /// Unique among the agent tree; authors its events.
    pub name: String,
    /// What the agent is for (shown to a parent choosing where to transfer).
    pub description: String,
    /// The system instruction.
    pub instruction: String,
    /// The model.
    pub model: Arc<dyn Model>,
    /// Model settings; its `excluded_tools` hide tools from the model.
    pub config: GenerateContentConfig,
    /// The callbacks.
    pub callbacks: Callbacks,
    /// Agents this one can transfer to.
    pub sub_agents: Vec<Arc<LlmAgent>>,
    pub(crate) tools: HashMap<String, ToolEntry>,
    pub(crate) tool_order: Vec<String>,
}

impl fmt::Debug for LlmAgent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmAgent")
            .field("name", &self.name)
            .field("model", &self.model.name())
            .field("tools", &self.tool_order)
            .field(
                "sub_agents",
                &self.sub_agents.iter().map(|a| &a.name).collect::<Vec<_>>(),
            )
            .field("callbacks", &self.callbacks)
            .finish_non_exhaustive()
    }
}

/// An agent definition that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    /// Two tools share a name.
    #[error("agent {agent}: two tools are named {tool}")]
    DuplicateTool {
        /// The agent.
        agent: String,
        /// The name.
        tool: String,
    },
    /// A tool's parameter schema is not a valid JSON Schema.
    #[error("agent {agent}: the parameters of tool {tool} are not a valid JSON Schema: {message}")]
    InvalidSchema {
        /// The agent.
        agent: String,
        /// The tool.
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// A tool uses a name the engine reserves.
    #[error("agent {agent}: the tool name {tool} is reserved by the engine")]
    ReservedName {
        /// The agent.
        agent: String,
        /// The name.
        tool: String,
    },
    /// Two agents in one tree share a name.
    #[error("two agents are named {0}")]
    DuplicateAgent(String),
}

/// Function names the engine answers itself.
pub(crate) const RESERVED_TOOLS: [&str; 3] = [
    crate::content::TRANSFER_TO_AGENT,
    crate::content::END_SESSION,
    crate::content::CUSTOMIZED_RESPONSE,
];

/// Builds an [`LlmAgent`].
#[derive(Debug)]
pub struct LlmAgentBuilder {
    agent: LlmAgent,
    tools: Vec<Arc<dyn AgentTool>>,
}

impl fmt::Debug for dyn AgentTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AgentTool({})", self.name())
    }
}

impl LlmAgent {
    /// Starts building an agent called `name` that uses `model`.
    pub fn builder(name: impl Into<String>, model: Arc<dyn Model>) -> LlmAgentBuilder {
        LlmAgentBuilder {
            agent: LlmAgent {
                name: name.into(),
                description: String::new(),
                instruction: String::new(),
                model,
                config: GenerateContentConfig::default(),
                callbacks: Callbacks::default(),
                sub_agents: Vec::new(),
                tools: HashMap::new(),
                tool_order: Vec::new(),
            },
            tools: Vec::new(),
        }
    }

    /// The tool called `name`, if the agent has it.
    pub fn tool(&self, name: &str) -> Option<&Arc<dyn AgentTool>> {
        self.tools.get(name).map(|entry| &entry.tool)
    }

    /// The agent's tools in the order they were added.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<dyn AgentTool>> {
        self.tool_order.iter().filter_map(|name| self.tool(name))
    }

    /// Validates arguments against the tool's schema; the errors name each failing path.
    pub(crate) fn validate_args(
        &self,
        tool: &str,
        args: &Map<String, Value>,
    ) -> Result<(), String> {
        let Some(entry) = self.tools.get(tool) else {
            return Err(format!("unknown tool {tool}"));
        };
        // The tool's own check names the argument and what it should look like, which says more
        // than the schema's `pattern` failing on the same value.
        entry.tool.check_args(args)?;
        let instance = Value::Object(args.clone());
        let errors: Vec<String> = entry
            .validator
            .iter_errors(&instance)
            .map(|e| {
                let path = e.instance_path().to_string();
                if path.is_empty() {
                    e.to_string()
                } else {
                    format!("{path}: {e}")
                }
            })
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }
}

impl LlmAgentBuilder {
    /// What the agent is for.
    #[must_use]
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.agent.description = description.into();
        self
    }

    /// The system instruction.
    #[must_use]
    pub fn instruction(mut self, instruction: impl Into<String>) -> Self {
        self.agent.instruction = instruction.into();
        self
    }

    /// Model settings.
    #[must_use]
    pub fn config(mut self, config: GenerateContentConfig) -> Self {
        self.agent.config = config;
        self
    }

    /// Adds a tool.
    #[must_use]
    pub fn tool(mut self, tool: impl AgentTool + 'static) -> Self {
        self.tools.push(Arc::new(tool));
        self
    }

    /// Adds a shared tool.
    #[must_use]
    pub fn shared_tool(mut self, tool: Arc<dyn AgentTool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// The tools added so far, in order (callbacks added later may want to know them).
    pub fn tools(&self) -> impl Iterator<Item = &Arc<dyn AgentTool>> {
        self.tools.iter()
    }

    /// Adds a sub-agent this agent can transfer to.
    #[must_use]
    pub fn sub_agent(mut self, agent: LlmAgent) -> Self {
        self.agent.sub_agents.push(Arc::new(agent));
        self
    }

    /// Sets all callbacks.
    #[must_use]
    pub fn callbacks(mut self, callbacks: Callbacks) -> Self {
        self.agent.callbacks = callbacks;
        self
    }

    /// Adds a `before_agent` callback.
    #[must_use]
    pub fn before_agent(
        mut self,
        callback: impl Fn(&mut CallbackContext) -> Option<Content> + Send + Sync + 'static,
    ) -> Self {
        self.agent.callbacks.before_agent.push(Arc::new(callback));
        self
    }

    /// Adds an `after_agent` callback.
    #[must_use]
    pub fn after_agent(
        mut self,
        callback: impl Fn(&mut CallbackContext) -> Option<Content> + Send + Sync + 'static,
    ) -> Self {
        self.agent.callbacks.after_agent.push(Arc::new(callback));
        self
    }

    /// Adds a `before_model` callback.
    #[must_use]
    pub fn before_model(
        mut self,
        callback: impl Fn(&mut CallbackContext, &mut LlmRequest) -> Option<LlmResponse>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.agent.callbacks.before_model.push(Arc::new(callback));
        self
    }

    /// Adds an `after_model` callback.
    #[must_use]
    pub fn after_model(
        mut self,
        callback: impl Fn(&mut CallbackContext, &LlmResponse) -> Option<LlmResponse>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.agent.callbacks.after_model.push(Arc::new(callback));
        self
    }

    /// Adds a `before_tool` callback.
    #[must_use]
    pub fn before_tool(
        mut self,
        callback: impl Fn(&mut ToolContext, &str, &mut Map<String, Value>) -> Option<ToolReturn>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.agent.callbacks.before_tool.push(Arc::new(callback));
        self
    }

    /// Adds an `after_tool` callback.
    #[must_use]
    pub fn after_tool(
        mut self,
        callback: impl Fn(
            &mut ToolContext,
            &str,
            &Map<String, Value>,
            &ToolReturn,
        ) -> Option<ToolReturn>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.agent.callbacks.after_tool.push(Arc::new(callback));
        self
    }

    /// Checks the tools (unique names, valid schemas) and builds the agent.
    pub fn build(mut self) -> Result<LlmAgent, AgentError> {
        let agent_name = self.agent.name.clone();
        for tool in self.tools {
            let name = tool.name().to_owned();
            if RESERVED_TOOLS.contains(&name.as_str()) {
                return Err(AgentError::ReservedName {
                    agent: agent_name,
                    tool: name,
                });
            }
            if self.agent.tools.contains_key(&name) {
                return Err(AgentError::DuplicateTool {
                    agent: agent_name,
                    tool: name,
                });
            }
            let validator = jsonschema::validator_for(&tool.parameters()).map_err(|e| {
                AgentError::InvalidSchema {
                    agent: agent_name.clone(),
                    tool: name.clone(),
                    message: e.to_string(),
                }
            })?;
            self.agent.tool_order.push(name.clone());
            self.agent.tools.insert(name, ToolEntry { tool, validator });
        }
        Ok(self.agent)
    }
}
