//! The server's life: bound to 127.0.0.1 (never another interface) on the registry's port —
//! fixed, so pasted configurations keep working — or, when that port is taken, on a free one
//! (said in Settings). Where it listens is written to `agents-server.json` in the data folder,
//! where `feishu-companion mcp` finds it.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use async_trait::async_trait;
use mcp::serve::{Caller, Gateway, GatewayError, Progress, Refusal};
use rmcp::model::{CallToolResult, JsonObject, Tool, ToolAnnotations};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::ConnectedAgents;
use super::registry::DEFAULT_PORT;
use super::tools::{APPROVE, approve_schema};
use super::{Agents, WeakAgents};
use crate::sync::lock;

/// Where the server is, as far as the app knows.
#[derive(Debug, Default)]
pub(crate) struct ServerState {
    pub(crate) addr: Option<SocketAddr>,
    /// Why it is not where the registry says (the port was taken), or not running at all.
    pub(crate) problem: Option<String>,
    cancel: Option<CancellationToken>,
}

/// The discovery file the relay reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discovery {
    /// `http://127.0.0.1:<port>/mcp`.
    pub url: String,
    /// The app's process.
    pub pid: u32,
}

/// `agents-server.json` in the data folder.
pub fn discovery_file(paths: &crate::AppPaths) -> std::path::PathBuf {
    paths.data_dir.join("agents-server.json")
}

/// The app's side of the MCP server.
struct AppGateway {
    app: WeakAgents,
    agents: Arc<ConnectedAgents>,
}

#[async_trait]
impl Gateway for AppGateway {
    fn authenticate(&self, token: &str) -> Result<String, Refusal> {
        self.agents.authenticate(token)
    }

    async fn tools(&self, caller: &Caller) -> Vec<Tool> {
        let Some(app) = self.app.upgrade() else {
            return Vec::new();
        };
        let Some(client) = self.agents.client(&caller.client_id) else {
            return Vec::new();
        };
        app.agent_tools(&client)
            .iter()
            .map(|t| {
                let schema = if t.name() == APPROVE {
                    approve_schema()
                } else {
                    t.parameters()
                };
                let schema: JsonObject = schema.as_object().cloned().unwrap_or_default();
                let read = !t.requires_approval(&serde_json::Map::new());
                Tool::new(
                    t.name().to_owned(),
                    t.description().to_owned(),
                    Arc::new(schema),
                )
                .annotate(ToolAnnotations::new().read_only(read))
            })
            .collect()
    }

    async fn call(
        &self,
        caller: &Caller,
        tool: &str,
        args: JsonObject,
        progress: Progress,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, GatewayError> {
        let app = self
            .app
            .upgrade()
            .ok_or_else(|| GatewayError::Internal("the app is closing".to_owned()))?;
        app.agent_call(caller, tool, args, progress, cancel).await
    }
}

impl Agents {
    /// Starts the server for connected agents (once; a second call is a no-op) and closes what
    /// earlier runs of the app left waiting for agents that are gone.
    pub(crate) async fn start_agent_server(&self, port: Option<u16>) {
        if lock(&self.agent_registry().server).cancel.is_some() {
            return;
        }
        self.abandon_orphans().await;
        let wanted = port.unwrap_or_else(|| {
            self.agent_registry()
                .snapshot()
                .port
                .unwrap_or(DEFAULT_PORT)
        });
        let (listener, problem) = match bind(wanted).await {
            Ok(l) => (l, None),
            Err(e) => match bind(0).await {
                Ok(l) => (
                    l,
                    Some(format!(
                        "port {wanted} is in use ({e}); listening on another port instead"
                    )),
                ),
                Err(e) => {
                    lock(&self.agent_registry().server).problem =
                        Some(format!("cannot listen on 127.0.0.1: {e}"));
                    return;
                }
            },
        };
        let addr = listener.local_addr().ok();
        let cancel = CancellationToken::new();
        let gateway: Arc<dyn Gateway> = Arc::new(AppGateway {
            app: self.downgrade(),
            agents: self.agent_registry().clone(),
        });
        let router = mcp::serve::http::router(gateway, cancel.clone());
        let serving = cancel.clone();
        tokio::spawn(async move {
            if let Err(e) = mcp::serve::http::serve(listener, router, serving).await {
                tracing::warn!(error = %e, "the server for connected agents stopped");
            }
        });
        if let Some(addr) = addr {
            let discovery = Discovery {
                url: format!("http://{addr}{}", mcp::serve::http::PATH),
                pid: std::process::id(),
            };
            let path = discovery_file(self.paths());
            let written = serde_json::to_vec_pretty(&discovery)
                .map_err(|e| crate::error::CompanionError::Other(e.to_string()))
                .and_then(|bytes| crate::mcp::file::write_atomic(&path, &bytes));
            if let Err(e) = written {
                tracing::warn!(error = %e, "the relay will not find the server");
            }
            tracing::info!(%addr, "serving MCP to connected agents");
        }
        let mut state = lock(&self.agent_registry().server);
        state.addr = addr;
        state.problem = problem;
        state.cancel = Some(cancel);
    }

    /// Stops the server (the app is closing).
    pub fn stop_agent_server(&self) {
        if let Some(cancel) = lock(&self.agent_registry().server).cancel.take() {
            cancel.cancel();
        }
        let _ = std::fs::remove_file(discovery_file(self.paths()));
    }

    /// Calls of connected agents still waiting from an earlier run: their clients' requests
    /// ended with that run, so nobody would get the answer. Each is abandoned, never run.
    async fn abandon_orphans(&self) {
        let pending = match self.engine().pending_calls() {
            Ok(pending) => pending,
            Err(e) => {
                tracing::warn!(error = %e, "cannot look for abandoned requests");
                return;
            }
        };
        let registry = self.agent_registry();
        for call in pending
            .iter()
            .filter(|c| registry.client(&c.agent_name).is_some())
        {
            if let Err(e) = self.engine().abandon(&call.session_id).await {
                tracing::warn!(error = %e, call = %call.call_id, "cannot abandon a request");
            }
        }
    }
}

async fn bind(port: u16) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).await
}
