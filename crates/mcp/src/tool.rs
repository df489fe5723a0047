//! One tool of one server as an engine tool. The engine validates the arguments against the
//! server's JSON Schema, decides approval through [`crate::gate`], and runs the call through the
//! server's [`Connection`]; the tool itself never decides whether it may write.

use std::sync::Arc;

use agent::{AgentTool, Preview, ToolContext, ToolReturn};
use async_trait::async_trait;
use serde_json::{Map, Value, json};

use crate::connection::Connection;
use crate::gate::{self, ToolInfo};
use crate::naming;
use crate::outcome;

/// A server's tool, offered to the model under [`naming::tool_name`].
#[derive(Debug, Clone)]
pub struct McpTool {
    connection: Arc<Connection>,
    info: ToolInfo,
    name: String,
    description: String,
    parameters: Value,
}

impl McpTool {
    /// The tool `info` of the server behind `connection`.
    pub fn new(connection: Arc<Connection>, info: ToolInfo) -> McpTool {
        let config = &connection.resolved().config;
        let name = naming::tool_name(&config.id, &info.name);
        let description = format!(
            "[MCP server {}] {}",
            config.display_name(),
            if info.description.is_empty() {
                info.display_title()
            } else {
                info.description.as_str()
            }
        );
        let parameters = object_schema(&info.input_schema);
        McpTool {
            connection,
            info,
            name,
            description,
            parameters,
        }
    }

    /// What the server said of the tool.
    pub fn info(&self) -> &ToolInfo {
        &self.info
    }

    /// The server's id.
    pub fn server_id(&self) -> &str {
        &self.connection.resolved().config.id
    }
}

/// The schema as the engine and the model need it: an object schema, even when the server
/// left out `"type": "object"` or `properties` (some do for tools without arguments).
fn object_schema(schema: &Value) -> Value {
    let mut schema = match schema {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    schema
        .entry("type")
        .or_insert_with(|| Value::String("object".to_owned()));
    schema
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    Value::Object(schema)
}

#[async_trait]
impl AgentTool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    fn requires_approval(&self, _args: &Map<String, Value>) -> bool {
        !gate::is_read(&self.connection.resolved().config, &self.info)
    }

    async fn preview(&self, args: &Map<String, Value>) -> Option<Preview> {
        Some(gate::preview(
            &self.connection.resolved().config,
            &self.info,
            args,
        ))
    }

    fn source(&self) -> Option<Value> {
        let config = &self.connection.resolved().config;
        Some(json!({
            "mcp_server": config.id,
            "mcp_server_name": config.display_name(),
            "mcp_tool": self.info.name,
        }))
    }

    async fn run(&self, args: Map<String, Value>, ctx: &mut ToolContext) -> ToolReturn {
        match self
            .connection
            .call(&self.info.name, args, &ctx.function_call_id)
            .await
        {
            Ok(result) => outcome::from_result(result),
            Err(crate::CallError::NeedsAuth(result)) => result,
            Err(e) => outcome::from_error(self.connection.resolved().config.display_name(), &e),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn schemas_without_type_or_properties_become_object_schemas() {
        assert_eq!(
            object_schema(&json!({})),
            json!({"type": "object", "properties": {}})
        );
        let full =
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]});
        assert_eq!(object_schema(&full), full);
    }
}
