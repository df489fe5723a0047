//! Every configured server, by id: the one place the app asks for the servers' tools, their
//! state and their stderr, and hands a changed configuration to. A server whose configuration
//! (or secrets) did not change keeps its connection; a changed or removed one is stopped.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use agent::AgentTool;
use tokio::sync::broadcast;

use crate::config::Resolved;
use crate::connection::Connection;
use crate::elicit::{DeclineAll, Elicitor};
use crate::gate::ToolInfo;
use crate::tool::McpTool;

/// What happens on the servers, for whoever shows it.
#[derive(Debug, Clone, PartialEq)]
pub enum HubEvent {
    /// A call reported progress.
    Progress {
        /// The server.
        server_id: String,
        /// The engine's call.
        call_id: String,
        /// How far it is.
        progress: f64,
        /// Of how much, if known.
        total: Option<f64>,
        /// What it is doing.
        message: Option<String>,
    },
    /// A server's tools were listed anew (it started, or said they changed).
    ToolsChanged {
        /// The server.
        server_id: String,
    },
    /// A server started, stopped or failed.
    Status {
        /// The server.
        server_id: String,
    },
}

/// The configured servers.
#[derive(Debug)]
pub struct Hub {
    connections: RwLock<BTreeMap<String, Arc<Connection>>>,
    events: broadcast::Sender<HubEvent>,
    elicitor: Arc<dyn Elicitor>,
}

impl Default for Hub {
    fn default() -> Self {
        Hub::new()
    }
}

impl Hub {
    /// No servers yet; their requests for the user's input are declined.
    pub fn new() -> Hub {
        Hub::with_elicitor(Arc::new(DeclineAll))
    }

    /// No servers yet; `elicitor` puts their requests for the user's input before the user.
    pub fn with_elicitor(elicitor: Arc<dyn Elicitor>) -> Hub {
        Hub {
            connections: RwLock::new(BTreeMap::new()),
            events: broadcast::channel(256).0,
            elicitor,
        }
    }

    /// Progress, tool and state changes from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<HubEvent> {
        self.events.subscribe()
    }

    /// Takes the servers as now configured. `known` holds each server's tools as listed in an
    /// earlier run, offered until the server is started.
    pub fn configure(&self, servers: Vec<Resolved>, known: &BTreeMap<String, Vec<ToolInfo>>) {
        let mut stopped = Vec::new();
        {
            let mut connections = self
                .connections
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            let mut next = BTreeMap::new();
            for resolved in servers {
                let id = resolved.config.id.clone();
                match connections.remove(&id) {
                    Some(conn) if conn.resolved() == &resolved => {
                        next.insert(id, conn);
                    }
                    old => {
                        let tools = match &old {
                            Some(conn) => conn.tools(),
                            None => known.get(&id).cloned().unwrap_or_default(),
                        };
                        stopped.extend(old);
                        let conn = Connection::new(resolved, tools, self.events.clone())
                            .with_elicitor(self.elicitor.clone());
                        next.insert(id, Arc::new(conn));
                    }
                }
            }
            stopped.extend(connections.values().cloned());
            *connections = next;
        }
        for conn in stopped {
            // Stopping waits for the connection's lock; nothing here should.
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move { conn.stop().await });
            }
        }
    }

    /// The connection of server `id`.
    pub fn connection(&self, id: &str) -> Option<Arc<Connection>> {
        self.connections
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned()
    }

    /// Every connection, by id.
    pub fn connections(&self) -> Vec<Arc<Connection>> {
        self.connections
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// The enabled servers' tools, as engine tools.
    pub fn tools(&self) -> Vec<Arc<dyn AgentTool>> {
        let mut out: Vec<Arc<dyn AgentTool>> = Vec::new();
        for conn in self.connections() {
            if !conn.resolved().config.enabled {
                continue;
            }
            for info in conn.tools() {
                out.push(Arc::new(McpTool::new(conn.clone(), info)));
            }
        }
        out
    }

    /// Each server's tools as last listed, to keep for the next run.
    pub fn catalogue(&self) -> BTreeMap<String, Vec<ToolInfo>> {
        self.connections()
            .into_iter()
            .map(|c| (c.resolved().config.id.clone(), c.tools()))
            .collect()
    }
}
