//! The user's MCP servers (Settings → Tools → MCP servers): kept in `mcp.json`, their secrets in
//! the vault, connected through the `mcp` crate's hub, and their tools given to the agent beside
//! the built-in ones and the user's Python. The hub outlives runtime rebuilds (a server keeps
//! running when the model or the Feishu app changes); a change of servers or of a server's
//! tools rebuilds the agent for the next turn.

pub(crate) mod api;
pub(crate) mod event;
pub(crate) mod feishu;
pub use event::McpEvent;
pub(crate) mod file;
pub(crate) mod lark;
pub mod questions;
pub(crate) mod sign_in;
pub mod view;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use mcp::config::{SecretKind, secret_name};
use mcp::{Hub, Resolved, ServerConfig, TransportConfig};
use store::vault::Vault;

use crate::error::CompanionError;
use crate::sync::lock;
use file::McpFile;
use view::{McpServerView, McpToolView};

/// The MCP side of the app.
pub(crate) struct McpServers {
    config_path: PathBuf,
    catalogue_path: PathBuf,
    /// Each server's tools as last listed (read from `mcp-tools.json` once, kept as they are
    /// saved): what a server the hub has not met yet offers until it is started.
    known: Mutex<BTreeMap<String, Vec<mcp::ToolInfo>>>,
    file: Mutex<McpFile>,
    /// Why `mcp.json` could not be read: the page says so, and nothing overwrites the file.
    damaged: Option<String>,
    /// The built-in Feishu Docs server of the current runtime (see [`feishu`]).
    builtin: Mutex<Option<Resolved>>,
    /// What the lark-mcp preset takes from the current runtime (see [`lark`]).
    lark_runtime: Mutex<Option<lark::LarkRuntime>>,
    /// The Node.js the preset runs on, as last looked for.
    lark_node: Mutex<Option<Result<lark::node::Node, lark::node::NodeProblem>>>,
    data_dir: PathBuf,
    /// Each remote server's sign-in, by id, with the URL it is for: kept across configurations
    /// (the hub keeps a connection whose credentials are the same object).
    sign_ins: Mutex<BTreeMap<String, (String, Arc<sign_in::ServerSignIn>)>>,
    vault: Arc<Vault>,
    /// What servers ask the user in the middle of a call (elicitation).
    questions: Arc<questions::Questions>,
    hub: Hub,
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServers")
            .field("config_path", &self.config_path)
            .finish_non_exhaustive()
    }
}

impl McpServers {
    /// Reads the servers of `paths` and connects none of them yet.
    pub(crate) fn open(paths: &crate::paths::AppPaths, vault: &Arc<Vault>) -> McpServers {
        let config_path = paths.config_dir.join("mcp.json");
        let catalogue_path = paths.data_dir.join("mcp-tools.json");
        let (loaded, damaged) = match file::load(&config_path) {
            Ok(f) => (f, None),
            Err(e) => {
                tracing::warn!(error = %e, "the MCP server list cannot be read; it is left as it is");
                (McpFile::default(), Some(e.to_string()))
            }
        };
        // Looked for at once only when the preset is on: its server is configured at start.
        let lark_node = loaded
            .lark_mcp
            .as_ref()
            .filter(|l| l.enabled)
            .map(|_| lark::node::find(&paths.data_dir));
        let questions = questions::Questions::new();
        let servers = McpServers {
            config_path,
            known: Mutex::new(file::load_catalogue(&catalogue_path)),
            catalogue_path,
            file: Mutex::new(loaded),
            damaged,
            builtin: Mutex::new(None),
            lark_runtime: Mutex::new(None),
            lark_node: Mutex::new(lark_node),
            data_dir: paths.data_dir.clone(),
            sign_ins: Mutex::new(BTreeMap::new()),
            vault: vault.clone(),
            questions: questions.clone(),
            hub: Hub::with_elicitor(questions),
        };
        servers.configure(vault);
        servers
    }

    /// The hub (events, connections).
    pub(crate) fn hub(&self) -> &Hub {
        &self.hub
    }

    /// The user's servers as configured.
    pub(crate) fn configs(&self) -> Vec<ServerConfig> {
        lock(&self.file).servers.clone()
    }

    /// Every server: the built-in ones first, then the user's.
    fn all_configs(&self) -> Vec<ServerConfig> {
        let builtin = lock(&self.builtin).as_ref().map(|r| r.config.clone());
        let lark = self.lark_server().map(|r| r.config);
        builtin
            .into_iter()
            .chain(lark)
            .chain(self.configs())
            .collect()
    }

    /// The built-in servers for a new runtime (its Feishu, its app, its sign-in), then the hub.
    pub(crate) fn set_builtin(&self, server: Resolved, lark: lark::LarkRuntime, vault: &Vault) {
        *lock(&self.builtin) = Some(server);
        *lock(&self.lark_runtime) = Some(lark);
        self.configure(vault);
    }

    /// The preset as set in `mcp.json`.
    pub(crate) fn lark_settings(&self) -> lark::LarkSettings {
        lock(&self.file).lark_mcp.clone().unwrap_or_default()
    }

    /// The data folder (where the preset's Node.js and lark-mcp go).
    pub(crate) fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Looks for Node.js again (blocking while each answers `--version`), keeps and answers it.
    pub(crate) fn find_lark_node(&self) -> Result<lark::node::Node, lark::node::NodeProblem> {
        let found = lark::node::find(&self.data_dir);
        *lock(&self.lark_node) = Some(found.clone());
        found
    }

    /// The Node.js last found, if any was usable.
    pub(crate) fn lark_node(&self) -> Option<lark::node::Node> {
        lock(&self.lark_node).clone().and_then(Result::ok)
    }

    /// What the last look for Node.js found (nothing looked for yet: missing).
    pub(crate) fn find_lark_node_cached(
        &self,
    ) -> Result<lark::node::Node, lark::node::NodeProblem> {
        lock(&self.lark_node)
            .clone()
            .unwrap_or(Err(lark::node::NodeProblem::Missing))
    }

    /// The preset's server, when it is on and ready (Node.js found, lark-mcp installed).
    fn lark_server(&self) -> Option<Resolved> {
        let settings = self.lark_settings();
        let runtime = lock(&self.lark_runtime).clone()?;
        let node = self.lark_node()?;
        let prefix = settings.prefix(&self.data_dir);
        (settings.enabled
            && lark::setup::installed_version(&prefix).as_deref() == Some(lark::setup::VERSION))
        .then(|| {
            lark::server(
                &settings,
                &runtime,
                &node.path,
                &prefix,
                &lark::LarkSettings::state(&self.data_dir),
            )
        })
    }

    /// Changes the preset with `change` and writes it; refused while the file is damaged.
    pub(crate) fn update_lark(
        &self,
        change: impl FnOnce(&mut lark::LarkSettings),
    ) -> Result<(), CompanionError> {
        self.refuse_if_damaged()?;
        let mut current = lock(&self.file);
        let mut next = current.clone();
        change(next.lark_mcp.get_or_insert_with(Default::default));
        file::save(&self.config_path, &next)?;
        *current = next;
        Ok(())
    }

    /// Hands the configured servers, with their secrets, to the hub.
    pub(crate) fn configure(&self, vault: &Vault) {
        let builtin = lock(&self.builtin).clone();
        let resolved: Vec<Resolved> = builtin
            .into_iter()
            .chain(self.lark_server())
            .chain(
                self.configs()
                    .into_iter()
                    .map(|c| self.with_sign_in(resolve(c, vault))),
            )
            .collect();
        let mut known = lock(&self.known).clone();
        known
            .entry(feishu::ID.to_owned())
            .or_insert_with(feishu::known_tools);
        // A question waits as long as the call that asked it would.
        let waits = resolved_waits(&resolved);
        self.questions.set_waits(waits);
        self.hub.configure(resolved, &known);
    }

    /// What servers ask the user.
    pub(crate) fn questions(&self) -> &Arc<questions::Questions> {
        &self.questions
    }

    /// `server` with its sign-in, if it is a remote server the user gave no `Authorization`
    /// header: one that asks for a sign-in gets one (MCP authorization), the others never hear
    /// of it (no header is sent before a server asks).
    fn with_sign_in(&self, mut server: Resolved) -> Resolved {
        let TransportConfig::Http { url, headers } = &server.config.transport else {
            return server;
        };
        if headers
            .iter()
            .any(|h| h.eq_ignore_ascii_case("authorization"))
        {
            return server;
        }
        let id = server.config.id.clone();
        let mut sign_ins = lock(&self.sign_ins);
        let kept = sign_ins.get(&id).filter(|(for_url, _)| for_url == url);
        let sign_in = match kept {
            Some((_, sign_in)) => sign_in.clone(),
            None => {
                let store = Arc::new(sign_in::VaultTokens(self.vault.clone()));
                let oauth = Arc::new(mcp::McpOAuth::new(&id, url, store));
                let sign_in = Arc::new(sign_in::ServerSignIn::new(&id, oauth));
                sign_ins.insert(id, (url.clone(), sign_in.clone()));
                sign_in
            }
        };
        server.credentials = Some(sign_in);
        server
    }

    /// The sign-in of remote server `id`.
    pub(crate) fn sign_in_of(&self, id: &str) -> Option<Arc<sign_in::ServerSignIn>> {
        lock(&self.sign_ins).get(id).map(|(_, s)| s.clone())
    }

    /// Forgets the sign-in of a removed server (its tokens go with its vault entries).
    pub(crate) fn forget_sign_in(&self, id: &str) {
        lock(&self.sign_ins).remove(id);
    }

    /// The enabled servers' tools for the agent.
    pub(crate) fn tools(&self) -> Vec<Arc<dyn agent::AgentTool>> {
        self.hub.tools()
    }

    /// Keeps what each server listed, for the next start.
    pub(crate) fn save_catalogue(&self) {
        let catalogue = self.hub.catalogue();
        if let Err(e) = file::save_catalogue(&self.catalogue_path, &catalogue) {
            tracing::warn!(error = %e, "the MCP tool list cannot be kept");
        }
        *lock(&self.known) = catalogue;
    }

    /// Changes the server list with `change` and writes it; refused while the file is damaged.
    pub(crate) fn update<T>(
        &self,
        change: impl FnOnce(&mut Vec<ServerConfig>) -> Result<T, CompanionError>,
    ) -> Result<T, CompanionError> {
        self.refuse_if_damaged()?;
        let mut current = lock(&self.file);
        let mut next = current.clone();
        let out = change(&mut next.servers)?;
        file::save(&self.config_path, &next)?;
        *current = next;
        Ok(out)
    }

    /// An unreadable `mcp.json` is never overwritten.
    fn refuse_if_damaged(&self) -> Result<(), CompanionError> {
        match &self.damaged {
            Some(why) => Err(CompanionError::Other(format!(
                "{why}. Repair or remove the file, then restart the app."
            ))),
            None => Ok(()),
        }
    }

    /// Every server as the page shows it.
    pub(crate) fn views(&self, vault: &Vault) -> Vec<McpServerView> {
        self.all_configs()
            .into_iter()
            .map(|config| self.view(&config, vault))
            .collect()
    }

    /// One server as the page shows it.
    pub(crate) fn view(&self, config: &ServerConfig, vault: &Vault) -> McpServerView {
        let conn = self.hub.connection(&config.id);
        let status = conn.as_ref().map(|c| c.status());
        let tools = conn.as_ref().map(|c| c.tools()).unwrap_or_default();
        let (transport, command, args, cwd, url, env, headers) = match &config.transport {
            TransportConfig::Stdio {
                command,
                args,
                env,
                cwd,
            } => (
                "stdio",
                command.clone(),
                args.clone(),
                cwd.clone(),
                String::new(),
                env.clone(),
                vec![],
            ),
            TransportConfig::Http { url, headers } => (
                "http",
                String::new(),
                vec![],
                None,
                url.clone(),
                vec![],
                headers.clone(),
            ),
        };
        let missing_values = env
            .iter()
            .map(|n| (SecretKind::Env, n))
            .chain(headers.iter().map(|n| (SecretKind::Header, n)))
            .filter(|(kind, n)| {
                !matches!(vault.get(&secret_name(&config.id, *kind, n)), Ok(Some(_)))
            })
            .map(|(_, n)| n.clone())
            .collect();
        McpServerView {
            needs_sign_in: status.as_ref().is_some_and(|s| s.wants_sign_in),
            builtin: config.id == feishu::ID || config.id == lark::ID,
            id: config.id.clone(),
            name: config.display_name().to_owned(),
            transport: transport.to_owned(),
            command,
            args,
            cwd,
            url,
            env,
            headers,
            missing_values,
            enabled: config.enabled,
            trusted: config.trusted,
            timeout_secs: config.timeout_secs,
            phase: status
                .as_ref()
                .map_or(mcp::Phase::Idle, |s| s.phase)
                .as_str()
                .to_owned(),
            error: status.as_ref().and_then(|s| s.error.clone()),
            starts: status.as_ref().map_or(0, |s| s.starts),
            server_info: status.and_then(|s| s.server_info),
            tools: tools
                .iter()
                .map(|t| McpToolView {
                    agent_name: mcp::naming::tool_name(&config.id, &t.name),
                    marked_read: config.read_tools.contains(&t.name),
                    runs_without_approval: mcp::gate::is_read(config, t),
                    name: t.name.clone(),
                    title: t.title.clone(),
                    description: t.description.clone(),
                    read_only_hint: t.read_only_hint,
                    destructive_hint: t.destructive_hint,
                })
                .collect(),
        }
    }
}

/// A server with its secrets read from the vault; a value that cannot be read is left unset
/// (the page lists it as missing).
fn resolve(config: ServerConfig, vault: &Vault) -> Resolved {
    let read = |kind: SecretKind, names: &[String]| -> BTreeMap<String, String> {
        names
            .iter()
            .filter_map(|n| {
                let value = vault
                    .get(&secret_name(&config.id, kind, n))
                    .ok()
                    .flatten()?;
                Some((n.clone(), String::from_utf8_lossy(&value).into_owned()))
            })
            .collect()
    };
    let (env, headers) = match &config.transport {
        TransportConfig::Stdio { env, .. } => (read(SecretKind::Env, env), BTreeMap::new()),
        TransportConfig::Http { headers, .. } => {
            (BTreeMap::new(), read(SecretKind::Header, headers))
        }
    };
    Resolved {
        config,
        env,
        headers,
        credentials: None,
    }
}

/// Each server's timeout, by id.
fn resolved_waits(servers: &[Resolved]) -> BTreeMap<String, std::time::Duration> {
    servers
        .iter()
        .map(|s| {
            let secs = u64::from(s.config.timeout_secs);
            (s.config.id.clone(), std::time::Duration::from_secs(secs))
        })
        .collect()
}
