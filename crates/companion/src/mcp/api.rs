//! The MCP servers page's actions: one function each, used by the UI, the CLI and the tests.

use mcp::config::{SecretKind, secret_name, secret_prefix, slug};
use mcp::{ServerConfig, TransportConfig};

use super::McpEvent;
use super::McpServers;
use super::view::{
    McpImportSourceView, McpImportView, McpSecretInput, McpServerInput, McpServerView,
};
use crate::error::CompanionError;
use crate::events::UiEvent;
use crate::feature::Feature;

/// The MCP feature (see [`crate::feature`]): the context and the user's servers.
pub(crate) type Mcp = Feature<std::sync::Arc<McpServers>>;

impl Mcp {
    /// The user's servers.
    pub(crate) fn mcp(&self) -> &std::sync::Arc<McpServers> {
        self.state()
    }
}

impl Mcp {
    /// Every configured server with its state and tools.
    pub fn mcp_servers(&self) -> Vec<McpServerView> {
        self.mcp().views(self.vault())
    }

    /// Adds or changes a server; its secrets go to the vault, only names to `mcp.json`.
    pub async fn save_mcp_server(
        &self,
        input: McpServerInput,
    ) -> Result<McpServerView, CompanionError> {
        let env_names: Vec<String> = input.env.iter().map(|s| s.name.clone()).collect();
        let header_names: Vec<String> = input.headers.iter().map(|s| s.name.clone()).collect();
        let transport = match input.transport.as_str() {
            "stdio" => TransportConfig::Stdio {
                command: input.command.trim().to_owned(),
                args: input.args.clone(),
                env: env_names,
                cwd: input.cwd.clone().filter(|c| !c.trim().is_empty()),
            },
            "http" => TransportConfig::Http {
                url: input.url.trim().to_owned(),
                headers: header_names,
            },
            other => {
                return Err(CompanionError::Other(format!(
                    "unknown transport {other:?}"
                )));
            }
        };
        let saved = self.mcp().update(|servers| {
            let id = match &input.id {
                Some(id) => id.clone(),
                None => unique_id(&slug(&input.name), &taken_ids(servers)),
            };
            if id == super::feishu::ID || id == super::lark::ID {
                return Err(CompanionError::Other(
                    "内置的 MCP 服务器不能修改 / a built-in MCP server cannot be changed"
                        .to_owned(),
                ));
            }
            let old = servers.iter().position(|s| s.id == id);
            if input.id.is_some() && old.is_none() {
                return Err(CompanionError::Other(format!("no MCP server {id}")));
            }
            let config = ServerConfig {
                id: id.clone(),
                name: input.name.trim().to_owned(),
                transport,
                enabled: input.enabled,
                trusted: input.trusted,
                // The user's marks stay with tools that keep their names.
                read_tools: old
                    .map(|i| servers[i].read_tools.clone())
                    .unwrap_or_default(),
                timeout_secs: input.timeout_secs,
            };
            config
                .validate()
                .map_err(|e| CompanionError::Other(e.to_string()))?;
            match old {
                Some(i) => servers[i] = config.clone(),
                None => servers.push(config.clone()),
            }
            Ok(config)
        })?;
        self.store_secrets(&saved.id, SecretKind::Env, &input.env)?;
        self.store_secrets(&saved.id, SecretKind::Header, &input.headers)?;
        self.mcp_changed()?;
        Ok(self.mcp().view(&saved, self.vault()))
    }

    /// Writes the new values, and deletes the stored values of names no longer listed.
    fn store_secrets(
        &self,
        id: &str,
        kind: SecretKind,
        inputs: &[McpSecretInput],
    ) -> Result<(), CompanionError> {
        let prefix = secret_name(id, kind, "");
        for name in self.vault().names()? {
            if let Some(key) = name.strip_prefix(&prefix)
                && !inputs.iter().any(|i| i.name == key)
            {
                self.vault().delete(&name)?;
            }
        }
        for input in inputs {
            if let Some(value) = &input.value {
                self.vault()
                    .put(&secret_name(id, kind, &input.name), value.as_bytes())?;
            }
        }
        Ok(())
    }

    /// Writes `values` as server `id`'s secrets of `kind`.
    fn put_secrets(
        &self,
        id: &str,
        kind: SecretKind,
        values: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), CompanionError> {
        for (key, value) in values {
            self.vault()
                .put(&secret_name(id, kind, key), value.as_bytes())?;
        }
        Ok(())
    }

    /// Removes a server, its secrets and its tools.
    pub async fn remove_mcp_server(&self, id: &str) -> Result<(), CompanionError> {
        self.mcp().update(|servers| {
            let before = servers.len();
            servers.retain(|s| s.id != id);
            if servers.len() == before {
                return Err(CompanionError::Other(format!("no MCP server {id}")));
            }
            Ok(())
        })?;
        self.mcp().forget_sign_in(id);
        let prefix = secret_prefix(id);
        for name in self.vault().names()? {
            if name.starts_with(&prefix) {
                self.vault().delete(&name)?;
            }
        }
        self.mcp_changed()
    }

    /// Adds the servers of another app's configuration (Claude Desktop, Cursor, VS Code).
    /// Imported servers are never trusted and start only when first needed.
    pub async fn import_mcp_servers(&self, text: &str) -> Result<McpImportView, CompanionError> {
        let imported = mcp::import::parse(text, &taken_ids(&self.mcp().configs()))
            .map_err(|e| CompanionError::Other(e.to_string()))?;
        let configs: Vec<ServerConfig> =
            imported.servers.iter().map(|s| s.config.clone()).collect();
        self.mcp().update(|servers| {
            servers.extend(configs.iter().cloned());
            Ok(())
        })?;
        for server in &imported.servers {
            let id = &server.config.id;
            self.put_secrets(id, SecretKind::Env, &server.env)?;
            self.put_secrets(id, SecretKind::Header, &server.headers)?;
        }
        self.mcp_changed()?;
        Ok(McpImportView {
            added: configs.into_iter().map(|c| c.id).collect(),
            warnings: imported.warnings,
        })
    }

    /// Imports the servers of the configuration file at `path`.
    pub async fn import_mcp_file(&self, path: &str) -> Result<McpImportView, CompanionError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| CompanionError::Other(format!("cannot read {path}: {e}")))?;
        self.import_mcp_servers(&text).await
    }

    /// Other apps' MCP configuration files found on this machine, with how many servers each.
    pub fn mcp_import_sources(&self) -> Vec<McpImportSourceView> {
        let Some(home) = directories::BaseDirs::new() else {
            return Vec::new();
        };
        let config = home.config_dir().to_path_buf();
        let home = home.home_dir().to_path_buf();
        let candidates = [
            (
                "Claude Desktop",
                config.join("Claude/claude_desktop_config.json"),
            ),
            ("Cursor", home.join(".cursor/mcp.json")),
            ("VS Code", config.join("Code/User/mcp.json")),
            ("Claude Code", home.join(".claude.json")),
        ];
        candidates
            .into_iter()
            .filter_map(|(app, path)| {
                let text = std::fs::read_to_string(&path).ok()?;
                let found = mcp::import::parse(&text, &[]).ok()?;
                Some(McpImportSourceView {
                    app: app.to_owned(),
                    path: path.to_string_lossy().into_owned(),
                    servers: u32::try_from(found.servers.len()).unwrap_or(u32::MAX),
                })
            })
            .collect()
    }

    /// Stops the server if it runs and starts it again now, listing its tools.
    pub async fn restart_mcp_server(&self, id: &str) -> Result<McpServerView, CompanionError> {
        let conn = self
            .mcp()
            .hub()
            .connection(id)
            .ok_or_else(|| CompanionError::Other(format!("no MCP server {id}")))?;
        conn.stop().await;
        let started = conn.start().await;
        let config = conn.resolved().config.clone();
        // The page shows a failure on the server itself; the call succeeds either way.
        if let Err(e) = started {
            tracing::info!(server = id, error = %e, "an MCP server did not start");
        }
        // Its tools as listed now, for this turn's agent and the next start (the hub's event
        // does the same a moment later; this caller should not have to wait for it).
        self.mcp().save_catalogue();
        self.recompose()?;
        Ok(self.mcp().view(&config, self.vault()))
    }

    /// What a server wrote to stderr lately.
    pub fn mcp_server_log(&self, id: &str) -> Result<String, CompanionError> {
        self.mcp()
            .hub()
            .connection(id)
            .map(|c| c.stderr())
            .ok_or_else(|| CompanionError::Other(format!("no MCP server {id}")))
    }

    /// Marks a tool of a server as a read (it runs without approval) or not.
    pub async fn set_mcp_tool_read(
        &self,
        id: &str,
        tool: &str,
        read: bool,
    ) -> Result<McpServerView, CompanionError> {
        let config = self.mcp().update(|servers| {
            let server = servers
                .iter_mut()
                .find(|s| s.id == id)
                .ok_or_else(|| CompanionError::Other(format!("no MCP server {id}")))?;
            server.read_tools.retain(|t| t != tool);
            if read {
                server.read_tools.push(tool.to_owned());
            }
            Ok(server.clone())
        })?;
        self.mcp_changed()?;
        Ok(self.mcp().view(&config, self.vault()))
    }

    /// The servers changed: the hub takes them, the agent is rebuilt, the page reads again.
    pub(crate) fn mcp_changed(&self) -> Result<(), CompanionError> {
        self.mcp().configure(self.vault());
        self.recompose()?;
        self.emit(UiEvent::Mcp(McpEvent::Servers));
        self.list_unknown_mcp_tools();
        Ok(())
    }

    /// Starts, in the background, each enabled server whose tools the app has never seen (one
    /// just added, imported or signed in to): the assistant cannot call a tool it does not
    /// know, so this is the first time the server is needed. Its tools then reach the agent
    /// through the hub's event; a failure or a request to sign in shows on the server in
    /// Settings.
    pub(crate) fn list_unknown_mcp_tools(&self) {
        for conn in self.mcp().hub().connections() {
            let config = &conn.resolved().config;
            if config.id == super::feishu::ID || !config.enabled || !conn.tools().is_empty() {
                continue;
            }
            tokio::spawn(async move {
                if let Err(e) = conn.start().await {
                    let id = &conn.resolved().config.id;
                    tracing::info!(server = %id, error = %e, "an MCP server did not list its tools");
                }
            });
        }
    }

    /// What servers ask the user now (elicitation), oldest first.
    pub fn mcp_questions(&self) -> Vec<super::questions::McpQuestionView> {
        self.mcp().questions().views()
    }

    /// The user's answer to a server's question: the form's values (checked against the
    /// server's schema; a mistake is said and the question keeps waiting), or a refusal.
    pub fn answer_mcp_question(
        &self,
        id: &str,
        input: super::questions::McpAnswerInput,
    ) -> Result<(), CompanionError> {
        self.mcp()
            .questions()
            .answer(id, input)
            .map_err(CompanionError::Other)
    }

    /// Tells the UI when servers' questions change.
    pub(crate) fn forward_mcp_questions(&self) {
        let mut changed = self.mcp().questions().subscribe();
        let weak = self.downgrade();
        tokio::spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            loop {
                match changed.recv().await {
                    Ok(()) | Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return,
                }
                let Some(me) = weak.upgrade() else {
                    return;
                };
                me.emit(UiEvent::Mcp(McpEvent::Questions));
            }
        });
    }

    /// Passes the hub's events on: new tools rebuild the agent (and are kept for the next
    /// start), progress goes to the call's card.
    pub(crate) fn forward_mcp_events(&self) {
        let mut events = self.mcp().hub().subscribe();
        let weak = self.downgrade();
        tokio::spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            loop {
                let event = match events.recv().await {
                    Ok(event) => event,
                    Err(RecvError::Lagged(_)) => mcp::HubEvent::Status {
                        server_id: String::new(),
                    },
                    Err(RecvError::Closed) => return,
                };
                let Some(me) = weak.upgrade() else {
                    return;
                };
                let ui = match event {
                    mcp::HubEvent::ToolsChanged { .. } => {
                        me.mcp().save_catalogue();
                        if let Err(e) = me.recompose() {
                            tracing::warn!(error = %e, "the agent was not rebuilt with the new MCP tools");
                        }
                        McpEvent::Servers
                    }
                    mcp::HubEvent::Status { .. } => McpEvent::Servers,
                    mcp::HubEvent::Progress {
                        call_id,
                        progress,
                        total,
                        message,
                        ..
                    } => McpEvent::Progress {
                        call_id,
                        progress,
                        total,
                        message,
                    },
                };
                me.emit(UiEvent::Mcp(ui));
            }
        });
    }
}

/// The ids `servers` and the built-in servers have: a new server takes none of them.
fn taken_ids(servers: &[ServerConfig]) -> Vec<String> {
    servers
        .iter()
        .map(|s| s.id.clone())
        .chain([super::feishu::ID.to_owned(), super::lark::ID.to_owned()])
        .collect()
}

/// `base`, or `base-2`, `base-3`… whichever no server has.
fn unique_id(base: &str, taken: &[String]) -> String {
    if !taken.iter().any(|t| t == base) {
        return base.to_owned();
    }
    (2..)
        .map(|n| format!("{base}-{n}"))
        .find(|id| !taken.contains(id) && mcp::config::valid_id(id))
        .unwrap_or_else(|| base.to_owned())
}
