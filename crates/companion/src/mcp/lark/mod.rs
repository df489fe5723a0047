//! Feishu's official MCP server, `@larksuiteoapi/lark-mcp`, as a one-switch preset for the rest
//! of Feishu's Open API: a second built-in server, off until the user switches it on in
//! Settings. Its state is kept in `mcp.json` beside the user's servers, under `lark_mcp`
//! (`enabled`, the `tools` chosen, and `package`, a lark-mcp installed elsewhere than the data
//! folder, for development and tests), so a save of the general settings never undoes it.
//!
//! It runs as a stdio server: Node.js 20+ ([`node`]) running lark-mcp from the data folder
//! ([`setup`]) with `mcp -a <app id> -s <placeholder> -d <the runtime's Open API base>
//! --token-mode user_access_token -t <tools>`. The secret is a placeholder: in user-token mode
//! every call carries the user's token and lark-mcp never asks for a tenant token, so the app
//! secret need not appear in the process list. The signed-in user's token reaches it through
//! its environment ([`auth`]), so a refreshed token starts it again; a permission it lacks
//! becomes the app's authorization card and the call runs again after. What only reads is
//! decided by the app from the Feishu API each tool calls ([`reads`]); everything else is held.

mod api;
mod auth;
pub(crate) mod fetch;
pub(crate) mod node;
pub(crate) mod reads;
pub(crate) mod setup;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use feishu::TokenManager;
use mcp::{Credentials, Resolved, ServerConfig, TransportConfig};
use serde::{Deserialize, Serialize};

/// The preset's server id; no server of the user's can take it.
pub(crate) const ID: &str = "lark";

/// What `-s` gets (see the module's notes).
const SECRET_PLACEHOLDER: &str = "unused-in-user-token-mode";

/// The preset as the user set it, in `mcp.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LarkSettings {
    /// Switched on.
    #[serde(default)]
    pub(crate) enabled: bool,
    /// The user's `-t` selection; [`reads::DEFAULT_TOOLS`] when not set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tools: Option<String>,
    /// An npm prefix holding lark-mcp other than the data folder's (development, tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) package: Option<PathBuf>,
}

impl LarkSettings {
    /// The tools to turn on.
    pub(crate) fn selection(&self) -> &str {
        self.tools.as_deref().unwrap_or(reads::DEFAULT_TOOLS)
    }

    /// Where lark-mcp keeps its own files (its log), whichever install runs.
    pub(crate) fn state(data_dir: &Path) -> PathBuf {
        data_dir.join("lark-mcp-state")
    }

    /// Where lark-mcp is installed (an npm prefix).
    pub(crate) fn prefix(&self, data_dir: &Path) -> PathBuf {
        self.package
            .clone()
            .unwrap_or_else(|| data_dir.join("lark-mcp"))
    }
}

/// What the preset takes from the runtime: its Feishu, its app, its sign-in. Made once per
/// runtime, so the server is not started again when nothing of it changed.
#[derive(Clone)]
pub(crate) struct LarkRuntime {
    /// The Open API base, as lark-mcp's `-d` wants it (no trailing slash).
    domain: String,
    app_id: String,
    credentials: Arc<dyn Credentials>,
}

impl std::fmt::Debug for LarkRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LarkRuntime")
            .field("domain", &self.domain)
            .finish_non_exhaustive()
    }
}

impl LarkRuntime {
    /// The runtime's Feishu (the emulator's in demo mode) and sign-in.
    pub(crate) fn new(endpoints: &feishu::Endpoints, tokens: Arc<TokenManager>) -> LarkRuntime {
        LarkRuntime {
            domain: endpoints.open.as_str().trim_end_matches('/').to_owned(),
            app_id: tokens.oauth().app_id().to_owned(),
            credentials: Arc::new(auth::LarkToken { tokens }),
        }
    }
}

/// The server for `runtime`, run by `node` from `prefix`, its own files under `state`.
pub(crate) fn server(
    settings: &LarkSettings,
    runtime: &LarkRuntime,
    node: &Path,
    prefix: &Path,
    state: &Path,
) -> Resolved {
    let selection = settings.selection();
    let args = vec![
        setup::cli_js(prefix).to_string_lossy().into_owned(),
        "mcp".to_owned(),
        "-a".to_owned(),
        runtime.app_id.clone(),
        "-s".to_owned(),
        SECRET_PLACEHOLDER.to_owned(),
        "-d".to_owned(),
        runtime.domain.clone(),
        "--token-mode".to_owned(),
        "user_access_token".to_owned(),
        "-t".to_owned(),
        selection.to_owned(),
    ];
    // lark-mcp writes its log (env-paths' state folder) and could keep tokens under the XDG
    // folders: they stay in the app's data. No token from the app's own environment leaks in
    // before a sign-in gives one.
    let mut env = BTreeMap::from([(auth::TOKEN_ENV.to_owned(), String::new())]);
    for (name, dir) in [
        ("XDG_STATE_HOME", "state"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_CACHE_HOME", "cache"),
    ] {
        env.insert(
            name.to_owned(),
            state.join(dir).to_string_lossy().into_owned(),
        );
    }
    Resolved {
        config: ServerConfig {
            id: ID.to_owned(),
            name: "飞书开放平台 · Feishu Open API (lark-mcp)".to_owned(),
            transport: TransportConfig::Stdio {
                command: node.to_string_lossy().into_owned(),
                args,
                env: Vec::new(),
                // Its folder: lark-mcp reads a `.env` from where it starts, and there is none.
                cwd: Some(prefix.to_string_lossy().into_owned()),
            },
            enabled: true,
            trusted: false,
            read_tools: reads::read_tools(selection).unwrap_or_default(),
            timeout_secs: 60,
        },
        env,
        headers: BTreeMap::new(),
        credentials: Some(runtime.credentials.clone()),
    }
}
