//! The connected agents the user registered, in `agents.json` beside the settings: a name, the
//! SHA-256 of the agent's token (the token itself is shown once and never kept), paused or
//! revoked, and the tools chosen for it. A revoked agent stays listed (marked) so the audit
//! trail and old cards still name it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{OnceLock, RwLock};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::error::CompanionError;

/// The prefix of every agent token, so one pasted in the wrong place is recognisable.
pub(crate) const TOKEN_PREFIX: &str = "fca_";

/// The port the server listens on unless the user's file says otherwise: fixed, so the
/// configuration lines the user pasted into their agents stay right across restarts.
pub(crate) const DEFAULT_PORT: u16 = 47821;

/// One registered agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ClientRecord {
    /// Also the name of its agent in the engine (`agent_<hex>`), so audit rows carry it.
    pub(crate) id: String,
    /// What the user called it ("Claude Code").
    pub(crate) name: String,
    /// SHA-256 (hex) of its token.
    pub(crate) token_sha256: String,
    /// Milliseconds since the Unix epoch.
    pub(crate) created_at: i64,
    /// Its requests are refused until resumed.
    #[serde(default)]
    pub(crate) paused: bool,
    /// When it was revoked; its token never works again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) revoked_at: Option<i64>,
    /// The companion's tools it may call besides the approval tools; `None`: Feishu's built-in
    /// tools (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tools: Option<Vec<String>>,
}

impl ClientRecord {
    pub(crate) fn active(&self) -> bool {
        self.revoked_at.is_none()
    }
}

/// The file's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AgentsFile {
    /// Where the server listens; `None`: [`DEFAULT_PORT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) port: Option<u16>,
    /// Every agent ever registered, in the order added.
    #[serde(default)]
    pub(crate) clients: Vec<ClientRecord>,
}

/// `agents.json` beside the settings.
pub(crate) fn file_path(config_dir: &Path) -> PathBuf {
    config_dir.join("agents.json")
}

/// Reads the file; a missing one is no agents. A damaged one is an error naming it, and is left
/// as it is (nobody's token is silently forgotten).
pub(crate) fn load(path: &Path) -> Result<AgentsFile, CompanionError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(AgentsFile::default()),
        Err(e) => {
            return Err(CompanionError::Other(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    serde_json::from_slice(&bytes).map_err(|e| {
        CompanionError::Other(format!(
            "{} is not a valid list of connected agents: {e}",
            path.display()
        ))
    })
}

/// Writes the file whole, readable by the owner only.
pub(crate) fn save(path: &Path, file: &AgentsFile) -> Result<(), CompanionError> {
    let text = serde_json::to_vec_pretty(file).map_err(|e| CompanionError::Other(e.to_string()))?;
    crate::mcp::file::write_atomic(path, &text)
}

/// A new token: 256 random bits (two v4 UUIDs' worth of randomness) behind [`TOKEN_PREFIX`].
pub(crate) fn new_token() -> String {
    format!(
        "{TOKEN_PREFIX}{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// What is kept of a token.
pub(crate) fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.trim().as_bytes()))
}

/// A new agent id, also a valid engine agent name.
pub(crate) fn new_id() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("agent_{}", &id[..12])
}

/// Every registered agent's name by id, for the views that only have a call's agent name
/// (the approval card, the audit). Shared by the process: ids are random, so two apps in one
/// process (tests) never clash.
fn names() -> &'static RwLock<HashMap<String, String>> {
    static NAMES: OnceLock<RwLock<HashMap<String, String>>> = OnceLock::new();
    NAMES.get_or_init(RwLock::default)
}

/// Records the names of `clients`.
pub(crate) fn publish_names(clients: &[ClientRecord]) {
    let mut map = names()
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for c in clients {
        map.insert(c.id.clone(), c.name.clone());
    }
}

/// The name of the connected agent an engine agent stands for, if it is one.
pub fn requester_name(agent_name: &str) -> Option<String> {
    names()
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(agent_name)
        .cloned()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_random_and_kept_only_as_their_hash() {
        let a = new_token();
        let b = new_token();
        assert_ne!(a, b);
        assert!(a.starts_with(TOKEN_PREFIX) && a.len() == TOKEN_PREFIX.len() + 64);
        assert_eq!(token_hash(&a), token_hash(&format!(" {a}\n")));
        assert_ne!(token_hash(&a), token_hash(&b));
        assert!(!token_hash(&a).contains(&a[TOKEN_PREFIX.len()..]));
    }

    #[test]
    fn a_damaged_file_is_an_error_naming_it_and_a_missing_one_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = file_path(dir.path());
        assert_eq!(load(&path).unwrap(), AgentsFile::default());
        std::fs::write(&path, b"{not json").unwrap();
        let e = load(&path).unwrap_err().to_string();
        assert!(e.contains("agents.json"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), b"{not json");
    }

    #[test]
    fn ids_are_agent_names() {
        let id = new_id();
        assert!(id.starts_with("agent_") && id.len() == 18);
        assert!(id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    }
}
