//! The facade: the one `Companion` the UI, the CLI and the tests drive, and the only place
//! with `impl Companion`. `open` opens the context and wires the features over it; each page
//! file here (chat, inbox, audit, sign_in, settings …) holds that page's actions as short
//! delegations, one function per action, named like the UI's command.

mod agents;
mod assistant;
mod audit;
mod chat;
mod connect;
mod inbox;
mod mcp;
mod remote;
mod settings;
mod sign_in;

use std::sync::{Arc, Mutex};

use agent::Engine;
use store::Store;
use store::vault::{OsKeychain, Vault, fallback_chain};
use tokio::sync::broadcast;

use crate::context::{Context, Parts, Wiring};
pub use crate::error::CompanionError;
pub use crate::events::{SignInStatus, SignInTicket, UiEvent};
pub use crate::options::{DEMO_APP_ID, OpenOptions};
use crate::paths::AppPaths;
pub use crate::runtime::Demo;
use crate::runtime::{self, Kept, Runtime};
use crate::settings::Settings;

/// The app, without its window: everything the UI, the tests and a CLI drive.
#[derive(Clone)]
pub struct Companion {
    ctx: Context,
    /// The assistant the user shapes, with their Python files (see [`crate::assistant`]).
    assistant: crate::assistant::Assistant,
    /// Approving from Feishu (see [`crate::remote_approval`]).
    remote: crate::remote_approval::RemoteApproval,
    /// The user's MCP servers (see [`crate::mcp`]); they outlive runtime rebuilds.
    mcp: crate::mcp::api::Mcp,
    /// The user's other agents asking over MCP (see [`crate::agents`]).
    agents: crate::agents::Agents,
    /// "Connect my Feishu" (see [`crate::connect`]).
    connect: crate::connect::Connect,
}

impl std::fmt::Debug for Companion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Companion")
            .field("paths", self.ctx.paths())
            .field("profile", &self.ctx.runtime().profile)
            .finish_non_exhaustive()
    }
}

impl Companion {
    /// Opens the app's data under `paths`: settings, database, vault; starts demo mode when no
    /// Feishu app or no model is configured; builds the engine and recovers what a previous run
    /// left in flight.
    pub async fn open(paths: AppPaths, options: OpenOptions) -> Result<Companion, CompanionError> {
        paths.create().map_err(|e| {
            CompanionError::Other(format!("cannot create {}: {e}", paths.data_dir.display()))
        })?;
        // A reset the user asked for happens first, before anything opens the files it deletes.
        crate::data::perform_pending_reset(&paths)?;
        let settings = Settings::load(&paths.settings_file())?;
        let store = Arc::new(Store::open(paths.database())?);
        store.start_quick_check();
        let keys: Box<dyn store::vault::MasterKeySource> = if options.memory_keys {
            Box::new(store::vault::MemoryKeySource::new())
        } else {
            Box::new(fallback_chain(OsKeychain::new(), paths.key_file()))
        };
        // A lost or damaged key locks the vault instead of stopping the app: Settings says what
        // cannot be read and offers to forget the secrets.
        let vault = Arc::new(Vault::open_or_locked(store.clone(), keys)?);
        let kept = Mutex::new(Kept::default());
        let python = Arc::new(crate::python::PythonTools::for_app(&paths, &options)?);
        let python_host = Arc::new(
            crate::python::host::AppHost::new(python.files.clone())
                .map_err(CompanionError::Other)?,
        );
        let servers = Arc::new(crate::mcp::McpServers::open(&paths, &vault));
        let registry = Arc::new(crate::agents::ConnectedAgents::open(&paths.config_dir));
        let extensions = runtime::Extensions {
            python: &python,
            mcp: &servers,
        };
        let runtime = runtime::build(
            &paths, &settings, &options, &vault, &store, &kept, extensions,
        )
        .await?;
        python_host.attach(&runtime);
        let ctx = Context::new(Parts {
            paths,
            options,
            settings,
            main_store: store,
            vault,
            runtime: runtime.clone(),
            kept: kept
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        });
        let agents = crate::agents::Agents::open(ctx.clone(), registry.clone(), servers.clone());
        let remote = crate::remote_approval::RemoteApproval::open(ctx.clone(), registry);
        let mcp = crate::mcp::api::Mcp::new(ctx.clone(), servers.clone());
        let assistant = crate::assistant::Assistant::open(
            ctx.clone(),
            python,
            python_host,
            servers,
            agents.clone(),
        );
        let companion = Companion {
            connect: crate::connect::Connect::open(ctx.clone()),
            ctx,
            assistant,
            remote,
            mcp,
            agents,
        };
        companion
            .ctx
            .set_wiring(Arc::new(AppWiring(companion.assistant.downgrade())));
        companion.agents.apply_connected_agents()?;
        companion.ctx.recover(&runtime).await?;
        if runtime.demo.is_some() {
            // The emulator starts afresh with every launch and knows no earlier token, so a
            // stored one would only make the status bar claim a sign-in that has ended. The
            // person, and so their conversations, stay (crate::person).
            runtime.tokens.sign_out().await?;
        }
        // In the background: never delays the first window (issue 16).
        companion.assistant.start_python();
        companion.remote.start_remote_approval();
        companion.mcp.forward_mcp_events();
        companion.mcp.list_unknown_mcp_tools();
        companion.mcp.forward_mcp_questions();
        companion
            .agents
            .start_agent_server(companion.ctx.options().agents_port)
            .await;
        Ok(companion)
    }

    /// Which data the app works on now: the demo's or the user's own Feishu app's.
    pub fn profile(&self) -> runtime::Profile {
        self.ctx.profile()
    }

    /// Every event for the UI from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<UiEvent> {
        self.ctx.subscribe()
    }

    /// The app's folders.
    pub fn paths(&self) -> &AppPaths {
        self.ctx.paths()
    }

    /// The engine now (for the application core's own modules and tests).
    pub fn engine(&self) -> Engine {
        self.ctx.engine()
    }

    /// The connected agents (see [`crate::agents`]).
    pub(crate) fn agent_registry(&self) -> &Arc<crate::agents::ConnectedAgents> {
        self.agents.agent_registry()
    }

    /// Whether the app runs on the built-in emulator and scripted model.
    pub fn is_demo(&self) -> bool {
        self.ctx.is_demo()
    }

    /// The demo's stand-ins, in demo mode.
    pub fn demo(&self) -> Option<Arc<Demo>> {
        self.ctx.demo()
    }

    /// About the running app, for the status bar and the demo banner.
    pub fn app_info(&self) -> crate::view::timeline::AppInfo {
        crate::settings_page::app_info(&self.ctx)
    }

    /// Keeps approvals from waiting past their time: every `every`, expired ones are answered
    /// `CANCELLED` ("expired") and their turns move on. Runs until the app closes.
    pub fn start_expiry(&self, every: std::time::Duration) {
        let ctx = self.ctx.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                match ctx.engine().expire_due().await {
                    Ok(expired) if !expired.is_empty() => {
                        tracing::info!(n = expired.len(), "approvals expired")
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "expiring approvals failed"),
                }
            }
        });
    }
}

/// What rebuilds call above the context: the features' tools and what hangs on the engine.
/// It holds the assistant weakly: the context keeps the wiring, and the assistant the context.
struct AppWiring(crate::assistant::WeakAssistant);

impl AppWiring {
    fn assistant(&self) -> Result<crate::assistant::Assistant, CompanionError> {
        self.0
            .upgrade()
            .ok_or_else(|| CompanionError::Other("the app has closed".to_owned()))
    }
}

#[async_trait::async_trait]
impl Wiring for AppWiring {
    async fn build(
        &self,
        ctx: &Context,
        settings: &Settings,
    ) -> Result<Arc<Runtime>, CompanionError> {
        let assistant = self.assistant()?;
        runtime::build(
            ctx.paths(),
            settings,
            ctx.options(),
            ctx.vault(),
            ctx.main_store(),
            ctx.kept(),
            runtime::Extensions {
                python: assistant.python(),
                mcp: assistant.mcp(),
            },
        )
        .await
    }

    fn installed(&self, _ctx: &Context, runtime: &Arc<Runtime>) -> Result<(), CompanionError> {
        let Ok(assistant) = self.assistant() else {
            return Ok(());
        };
        assistant.host().attach(runtime);
        // The new engine knows no connected agent yet.
        assistant.agents().apply_connected_agents()
    }

    fn compose(&self, _ctx: &Context) -> Result<(), CompanionError> {
        match self.assistant() {
            Ok(assistant) => assistant.apply_agent(),
            Err(_) => Ok(()),
        }
    }
}
