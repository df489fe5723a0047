//! Where the MCP servers are kept: their configuration in `mcp.json` beside the settings (a file
//! of its own, so a save of the general settings from an older copy never undoes a server), and
//! each server's tools as last listed in `mcp-tools.json` in the data folder, so the agent knows
//! them at start without starting every server.

use std::collections::BTreeMap;
use std::path::Path;

use mcp::{ServerConfig, ToolInfo};
use serde::{Deserialize, Serialize};

use crate::error::CompanionError;

/// The configuration file's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct McpFile {
    /// The servers, in the order the user added them.
    #[serde(default)]
    pub(crate) servers: Vec<ServerConfig>,
    /// The lark-mcp preset (see [`super::lark`]); absent until first switched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) lark_mcp: Option<super::lark::LarkSettings>,
}

/// Reads `path`; a missing file is no servers. A damaged one is an error naming the file and
/// what is wrong, and is left as it is.
pub(crate) fn load(path: &Path) -> Result<McpFile, CompanionError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(McpFile::default()),
        Err(e) => {
            return Err(CompanionError::Other(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    let file: McpFile = serde_json::from_slice(&bytes).map_err(|e| {
        CompanionError::Other(format!(
            "{} is not a valid MCP server list: {e}",
            path.display()
        ))
    })?;
    mcp::config::validate_all(&file.servers)
        .map_err(|e| CompanionError::Other(format!("{}: {e}", path.display())))?;
    Ok(file)
}

/// Writes `file` to `path` whole (a temporary file renamed over it), readable by the owner only.
pub(crate) fn save(path: &Path, file: &McpFile) -> Result<(), CompanionError> {
    mcp::config::validate_all(&file.servers).map_err(|e| CompanionError::Other(e.to_string()))?;
    let text = serde_json::to_vec_pretty(file).map_err(|e| CompanionError::Other(e.to_string()))?;
    write_atomic(path, &text)
}

/// Each server's tools as last listed; nothing when the file is missing or unreadable (the
/// servers list them again when started).
pub(crate) fn load_catalogue(path: &Path) -> BTreeMap<String, Vec<ToolInfo>> {
    std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// Keeps each server's tools for the next start.
pub(crate) fn save_catalogue(
    path: &Path,
    catalogue: &BTreeMap<String, Vec<ToolInfo>>,
) -> Result<(), CompanionError> {
    let text = serde_json::to_vec(catalogue).map_err(|e| CompanionError::Other(e.to_string()))?;
    write_atomic(path, &text)
}

pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CompanionError> {
    crate::settings::write_private(path, bytes)
        .map_err(|e| CompanionError::Other(format!("cannot write {}: {e}", path.display())))
}
