//! What the user set for the assistant (Settings → Assistant), as the settings file keeps it;
//! [`crate::assistant`] acts on it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What the user set for the assistant (part of the settings file).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, ts_rs::TS)]
#[serde(default)]
pub struct AssistantSettings {
    /// The instruction; `None` is the built-in one.
    pub instruction: Option<String>,
    /// Built-in tools the assistant may not use.
    pub disabled_tools: Vec<String>,
    /// Per Python file (by name): what it may reach.
    pub python_files: BTreeMap<String, PythonFileSettings>,
}

/// What one Python file may reach over HTTP.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, ts_rs::TS)]
#[serde(default)]
pub struct PythonFileSettings {
    /// Hosts it may call (`api.example.com`, or `*.example.com` for every subdomain); none by
    /// default.
    pub allowed_hosts: Vec<String>,
    /// Whether it may call Feishu's Open API with the signed-in user's token.
    pub feishu_api: bool,
}
