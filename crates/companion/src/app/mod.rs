//! The application core: opens everything, and offers one async function per user action.

mod agents;
mod assistant;
mod chat;
mod connect;
mod mcp;
mod remote;
mod settings;
mod sign_in;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use agent::persist::AuditFilter;
use agent::{CallRecord, Content, Decision, Engine, Event, Rule, TurnOutcome};
use feishu::Account;
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

impl std::ops::Deref for Companion {
    type Target = Context;
    fn deref(&self) -> &Context {
        &self.ctx
    }
}

impl std::fmt::Debug for Companion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Companion")
            .field("paths", self.ctx.paths())
            .field("profile", &self.runtime().profile)
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
        let agents = crate::agents::Agents::new(ctx.clone(), registry.clone(), servers.clone());
        let remote = crate::remote_approval::RemoteApproval::new(ctx.clone(), registry);
        let mcp = crate::mcp::api::Mcp::new(ctx.clone(), servers.clone());
        let assistant = crate::assistant::Assistant::new(
            ctx.clone(),
            python,
            python_host,
            servers,
            agents.clone(),
        );
        let companion = Companion {
            connect: crate::connect::Connect::new(ctx.clone()),
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
        companion.recover(&runtime).await?;
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
            .start_agent_server(companion.options().agents_port)
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

    /// Starts a new conversation.
    pub async fn create_session(&self) -> Result<String, CompanionError> {
        // The person last signed in, or `local` before any sign-in (crate::person).
        let user = crate::person::owner_id(self);
        Ok(self.engine().create_session(&user, &Default::default())?)
    }

    /// The person's conversations (see [`crate::person`]).
    pub async fn list_sessions(&self) -> Result<Vec<store::SessionMeta>, CompanionError> {
        crate::person::owned_sessions(self)
    }

    /// A conversation's stored events.
    pub fn session_events(&self, session_id: &str) -> Result<Vec<Event>, CompanionError> {
        Ok(self.runtime().store.load_session(session_id)?.events)
    }

    /// Sends a message and runs the turn until it completes or waits for the user.
    pub async fn send_message(
        &self,
        session_id: &str,
        text: &str,
    ) -> Result<TurnOutcome, CompanionError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(CompanionError::Other("the message is empty".to_owned()));
        }
        Ok(self
            .engine()
            .send_message(session_id, Content::user_text(text))
            .await?)
    }

    /// Stops the running or waiting turn of a conversation.
    pub async fn cancel_turn(&self, session_id: &str) -> Result<bool, CompanionError> {
        Ok(self.engine().cancel(session_id).await?)
    }

    /// Approves, edits and approves, rejects, or always-allows a held call.
    pub async fn decide(
        &self,
        call_id: &str,
        decision: Decision,
    ) -> Result<TurnOutcome, CompanionError> {
        Ok(self.engine().decide(call_id, decision).await?)
    }

    /// Decides many held calls at once (the inbox's multi-select).
    pub async fn decide_many(
        &self,
        decisions: Vec<(String, Decision)>,
    ) -> Result<Vec<TurnOutcome>, CompanionError> {
        Ok(self.engine().decide_many(decisions).await?)
    }

    /// Everything waiting for the user, across conversations, oldest first.
    pub fn pending(&self) -> Result<Vec<CallRecord>, CompanionError> {
        crate::waiting::pending(&self.ctx, self.agent_registry())
    }

    /// The always/never rules, revoked ones included.
    pub fn rules(&self) -> Result<Vec<Rule>, CompanionError> {
        Ok(self.engine().rules()?)
    }

    /// Revokes a rule.
    pub fn revoke_rule(&self, rule_id: &str) -> Result<Rule, CompanionError> {
        Ok(self.engine().revoke_rule(rule_id)?)
    }

    /// The audit trail, newest first.
    pub fn audit(
        &self,
        filter: &AuditFilter,
    ) -> Result<Vec<agent::persist::AuditEntry>, CompanionError> {
        Ok(self.engine().audit_trail(filter)?)
    }

    /// The signed-in account (no secrets), if any.
    pub async fn account(&self) -> Result<Option<Account>, CompanionError> {
        Ok(self.runtime().tokens.account().await?)
    }

    /// Starts a sign-in for `scopes` (empty: whatever the waiting calls need), returns the page
    /// to open, and finishes in the background: the tokens are stored and every call waiting
    /// for those scopes runs again. Progress arrives as [`UiEvent::SignIn`].
    pub async fn begin_sign_in(&self, scopes: Vec<String>) -> Result<SignInTicket, CompanionError> {
        // A remote MCP server's own sign-in, asked for by its card or its settings row.
        if let Some(server) = crate::mcp::sign_in::server_of_scopes(&scopes) {
            let server = server.to_owned();
            return self.mcp.begin_mcp_sign_in(&server).await;
        }
        let mut wanted: BTreeSet<String> = scopes.into_iter().collect();
        if wanted.is_empty() {
            for call in self.pending()? {
                wanted.extend(call.auth_scopes);
            }
        }
        crate::sign_in::begin(&self.ctx, wanted).await
    }

    /// Stops a sign-in in progress (the listener closes and frees the port).
    pub fn cancel_sign_in(&self) {
        self.ctx.cancel_sign_in()
    }

    /// The user declined to sign in for a call: the model is told it was cancelled.
    pub async fn decline_sign_in(&self, call_id: &str) -> Result<TurnOutcome, CompanionError> {
        Ok(self.engine().auth_declined(call_id).await?)
    }

    /// Signs out of Feishu.
    pub async fn sign_out(&self) -> Result<(), CompanionError> {
        Ok(self.runtime().tokens.sign_out().await?)
    }

    /// The current settings.
    pub fn settings(&self) -> Settings {
        self.ctx.settings()
    }

    /// Saves new settings; the answer says whether what the settings build must be rebuilt
    /// ([`Companion::apply_settings`] does both).
    pub fn update_settings(&self, settings: Settings) -> Result<bool, CompanionError> {
        self.ctx.update_settings(settings)
    }

    /// Stores the Feishu App Secret in the vault (never in the settings file).
    pub fn set_app_secret(&self, secret: &str) -> Result<(), CompanionError> {
        self.ctx.set_app_secret(secret)
    }

    /// Stores a model preset's API key in the vault.
    pub fn set_model_key(&self, preset: &str, key: &str) -> Result<(), CompanionError> {
        self.ctx.set_model_key(preset, key)
    }

    /// Which secrets are set and readable, without their values (one that cannot be read is
    /// asked for again).
    pub fn secrets_present(&self) -> Result<Vec<String>, CompanionError> {
        self.ctx.secrets_present()
    }

    /// How the master key is kept, and a warning if it fell back to a key file.
    pub fn key_source(&self) -> (String, Option<String>) {
        self.ctx.key_source()
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
