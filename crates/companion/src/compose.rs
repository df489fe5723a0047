//! The agent as the user shaped it (Settings → Assistant): the instruction, the built-in tools
//! left on, the Python tools and callbacks, the MCP servers' tools. A leaf the runtime and the
//! assistant feature both build with.

use std::collections::HashSet;
use std::sync::Arc;

use agent::{AgentTool, LlmAgent};

use crate::error::CompanionError;
use crate::settings::assistant::AssistantSettings;

/// The instruction the assistant starts with (Settings → Assistant can replace it).
pub(crate) const SYSTEM_INSTRUCTION: &str = "你是飞书助手（Feishu Companion），替用户查看日历、聊天、文档和任务，并在需要时提出写操作。\
所有写操作都会先交给用户确认；被拒绝时尊重用户的理由。回答简洁，使用用户的语言。\n\
You are Feishu Companion: you read the user's calendar, chats, docs and tasks and propose writes, \
each of which the user approves first; respect a rejection and its reason. Answer briefly, in the user's language.";

/// The agent as the user shaped it: the instruction, the built-in tools left on, the Python
/// tools and callbacks.
pub(crate) fn build_agent(
    settings: &AssistantSettings,
    model: Arc<dyn agent::Model>,
    builtin: &[Arc<dyn AgentTool>],
    python: &pysandbox::PythonExtensions,
    mcp: &[Arc<dyn AgentTool>],
) -> Result<LlmAgent, CompanionError> {
    let instruction = settings
        .instruction
        .clone()
        .unwrap_or_else(|| SYSTEM_INSTRUCTION.to_owned());
    let disabled: HashSet<&str> = settings.disabled_tools.iter().map(String::as_str).collect();
    let mut builder = LlmAgent::builder("assistant", model).instruction(instruction);
    for tool in builtin {
        if !disabled.contains(tool.name()) {
            builder = builder.shared_tool(tool.clone());
        }
    }
    builder = python.add_to(builder);
    // The MCP servers' tools: the gate holds their calls like any other tool's.
    for tool in mcp {
        builder = builder.shared_tool(tool.clone());
    }
    builder
        .build()
        .map_err(|e| CompanionError::Other(e.to_string()))
}
