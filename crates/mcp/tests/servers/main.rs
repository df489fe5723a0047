//! The client against real MCP servers from the npm registry: the official reference servers
//! (`@modelcontextprotocol/server-everything` over stdio and Streamable HTTP,
//! `server-filesystem`) and a probe server on the official TypeScript SDK whose tools crash,
//! hang, notice cancellations and change the tool list (`tests/mcp/probe-server.mjs`). The
//! packages are installed by `scripts/bootstrap` (`npm ci` in `tests/mcp`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod credentials;
mod gate;
mod lifecycle;
mod reference;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use mcp::{Connection, Hub, Resolved, ServerConfig, TransportConfig};

/// `tests/mcp` of the repository.
pub fn peers() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/server-everything")
            .is_dir(),
        "the MCP test servers are not installed: run scripts/bootstrap (npm ci in tests/mcp)"
    );
    dir
}

/// A stdio server running `node` on `script` (under `tests/mcp`) with `args`.
pub fn node_server(id: &str, script: &str, args: &[&str], env: &[(&str, &str)]) -> Resolved {
    let mut all = vec![peers().join(script).to_string_lossy().into_owned()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    Resolved {
        config: ServerConfig {
            id: id.into(),
            name: id.into(),
            transport: TransportConfig::Stdio {
                command: "node".into(),
                args: all,
                env: env.iter().map(|(k, _)| (*k).to_owned()).collect(),
                cwd: None,
            },
            enabled: true,
            trusted: false,
            read_tools: vec![],
            timeout_secs: 30,
        },
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        headers: BTreeMap::new(),
        credentials: None,
    }
}

pub const EVERYTHING: &str = "node_modules/@modelcontextprotocol/server-everything/dist/index.js";
pub const FILESYSTEM: &str = "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js";
pub const PROBE: &str = "probe-server.mjs";

/// A hub with the one server `resolved`, and its connection.
pub fn one(resolved: Resolved) -> (Hub, Arc<Connection>) {
    let id = resolved.config.id.clone();
    let hub = Hub::new();
    hub.configure(vec![resolved], &BTreeMap::new());
    let conn = hub.connection(&id).expect("configured");
    (hub, conn)
}

/// Waits until `check` holds, failing after `secs`.
pub async fn until(secs: u64, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn args(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    v.as_object().cloned().unwrap_or_default()
}
