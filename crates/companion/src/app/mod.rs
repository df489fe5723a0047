//! The application core: opens everything, and offers one async function per user action.

mod agents;
mod chat;
mod mcp;
mod remote;
mod settings;
mod sign_in;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use agent::persist::AuditFilter;
use agent::{CallRecord, Content, Decision, Engine, Event, Rule, TurnOutcome};
use feishu::listener::Answer;
use feishu::{Account, LoopbackListener};
use store::Store;
use store::vault::{OsKeychain, Vault, fallback_chain};
use tokio::sync::broadcast;

use crate::context::{Context, Parts, Wiring};
pub use crate::error::CompanionError;
pub use crate::events::{SignInStatus, SignInTicket, UiEvent};
pub use crate::options::{DEMO_APP_ID, OpenOptions, PEOPLE_NAMES_SCOPE};
use crate::paths::AppPaths;
pub use crate::runtime::Demo;
use crate::runtime::{self, Kept, Runtime};
use crate::settings::Settings;

/// The "Connect my Feishu" in progress, and its code.
type ConnectSlot = Mutex<Option<(tokio::task::JoinHandle<()>, crate::connect::DeviceTicket)>>;

/// The app, without its window: everything the UI, the tests and a CLI drive.
#[derive(Clone)]
pub struct Companion {
    ctx: Context,
    /// The user's Python files, loaded into the sandbox (see [`crate::python`]); they outlive
    /// runtime rebuilds.
    python: Arc<crate::python::PythonTools>,
    /// What that Python reaches outside the sandbox; re-attached to each new runtime.
    python_host: Arc<crate::python::host::AppHost>,
    /// Approving from Feishu (see [`crate::remote_approval`]).
    remote: crate::remote_approval::RemoteApproval,
    /// The user's MCP servers (see [`crate::mcp`]); they outlive runtime rebuilds.
    mcp: crate::mcp::api::Mcp,
    /// The user's other agents asking over MCP (see [`crate::agents`]).
    agents: crate::agents::Agents,
    /// The "Connect my Feishu" in progress, and its code.
    connect: Arc<ConnectSlot>,
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

/// A handle on the app that does not keep it alive: for what the app itself owns and that
/// calls back into it (the Python folder's watcher).
#[derive(Clone)]
pub(crate) struct WeakCompanion {
    ctx: crate::context::WeakContext,
    python: std::sync::Weak<crate::python::PythonTools>,
    python_host: std::sync::Weak<crate::python::host::AppHost>,
    remote: crate::remote_approval::WeakRemoteApproval,
    mcp: crate::mcp::api::WeakMcp,
    agents: crate::agents::WeakAgents,
    connect: std::sync::Weak<ConnectSlot>,
}

impl WeakCompanion {
    /// The app, unless it has closed.
    pub(crate) fn upgrade(&self) -> Option<Companion> {
        Some(Companion {
            ctx: self.ctx.upgrade()?,
            python: self.python.upgrade()?,
            python_host: self.python_host.upgrade()?,
            remote: self.remote.upgrade()?,
            mcp: self.mcp.upgrade()?,
            agents: self.agents.upgrade()?,
            connect: self.connect.upgrade()?,
        })
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
        let mcp = crate::mcp::api::Mcp::new(ctx.clone(), servers);
        let companion = Companion {
            ctx,
            python,
            python_host,
            remote,
            mcp,
            agents,
            connect: Arc::default(),
        };
        companion
            .ctx
            .set_wiring(Arc::new(AppWiring(companion.downgrade())));
        companion.agents.apply_connected_agents()?;
        companion.recover(&runtime).await?;
        if runtime.demo.is_some() {
            // The emulator starts afresh with every launch and knows no earlier token, so a
            // stored one would only make the status bar claim a sign-in that has ended. The
            // person, and so their conversations, stay (crate::person).
            runtime.tokens.sign_out().await?;
        }
        // In the background: never delays the first window (issue 16).
        companion.start_python();
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

    /// A handle that does not keep the app alive.
    pub(crate) fn downgrade(&self) -> WeakCompanion {
        WeakCompanion {
            ctx: self.ctx.downgrade(),
            python: Arc::downgrade(&self.python),
            python_host: Arc::downgrade(&self.python_host),
            remote: self.remote.downgrade(),
            mcp: self.mcp.downgrade(),
            agents: self.agents.downgrade(),
            connect: Arc::downgrade(&self.connect),
        }
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

    /// The user's Python (for the application core's own modules).
    pub(crate) fn python(&self) -> &Arc<crate::python::PythonTools> {
        &self.python
    }

    /// The user's MCP servers (for the application core's own modules).
    pub(crate) fn mcp(&self) -> &Arc<crate::mcp::McpServers> {
        self.mcp.mcp()
    }

    /// The connected agents feature.
    pub(crate) fn agents(&self) -> &crate::agents::Agents {
        &self.agents
    }

    /// The connected agents (see [`crate::agents`]).
    pub(crate) fn agent_registry(&self) -> &Arc<crate::agents::ConnectedAgents> {
        self.agents.agent_registry()
    }

    /// What Python code reaches outside the sandbox.
    pub(crate) fn python_host(&self) -> Arc<dyn pysandbox::Host> {
        self.python_host.clone()
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
        // Asked for with every sign-in: approval cards name people instead of showing open_ids.
        wanted.insert(PEOPLE_NAMES_SCOPE.to_owned());
        let wanted: Vec<String> = wanted.into_iter().collect();
        // A sign-in already waiting holds the redirect port until its task has really ended;
        // aborting only asks for that, so wait for it before binding the port again.
        self.stop_sign_in().await;
        if self.settings().feishu.uses_device_flow() {
            let ticket = self.begin_device_sign_in(wanted).await?;
            return Ok(SignInTicket {
                url: ticket.url.clone(),
                redirect_uri: String::new(),
                device: Some(ticket),
            });
        }
        let port = self.settings().feishu.redirect_port;
        let listener = LoopbackListener::bind(port)
            .await
            .map_err(feishu::SignInError::from)?;
        let request = self
            .runtime()
            .tokens
            .oauth()
            .begin_sign_in(&wanted, &listener.redirect_uri())
            .map_err(feishu::SignInError::from)?;
        let ticket = SignInTicket {
            url: request.url.to_string(),
            redirect_uri: request.redirect_uri.clone(),
            device: None,
        };
        self.announce(SignInStatus::Waiting {
            url: ticket.url.clone(),
            device: None,
        });
        let me = self.clone();
        let task = tokio::spawn(async move {
            let status = me.finish_sign_in(listener, request).await;
            me.announce(status);
        });
        self.set_sign_in_task(task);
        Ok(ticket)
    }

    async fn finish_sign_in(
        &self,
        listener: LoopbackListener,
        request: feishu::SignInRequest,
    ) -> SignInStatus {
        let callback = match listener
            .callback(request.state.secret(), feishu::flow::SIGN_IN_TIMEOUT)
            .await
        {
            Ok(callback) => callback,
            Err(feishu::ListenerError::Timeout(waited)) => {
                return SignInStatus::Refused {
                    problem: self.describe(&crate::sign_in_help::SignInProblem::TimedOut {
                        minutes: waited.as_secs().div_ceil(60),
                    }),
                };
            }
            Err(e) => {
                return SignInStatus::Failed {
                    message: e.to_string(),
                };
            }
        };
        let Some((code, callback)) = callback.code_or_decline().await else {
            return SignInStatus::Declined;
        };
        // The browser's page waits for this: it says "signed in" only once it is so.
        let account = match self
            .runtime()
            .tokens
            .complete_sign_in(&request, &code)
            .await
        {
            Ok(account) => {
                callback.answer(Answer::SignedIn).await;
                account
            }
            Err(e) => {
                callback.answer(Answer::Failed(e.to_string())).await;
                return SignInStatus::Failed {
                    message: e.to_string(),
                };
            }
        };
        self.after_sign_in(account).await
    }

    /// What follows every sign-in, loopback or device: who it is, then the held calls run again.
    pub(crate) async fn after_sign_in(&self, account: Account) -> SignInStatus {
        // Remembered before the held calls run again, so what they add is the person's.
        let switched_from = match &account.user {
            Some(user) => match crate::person::remember_person(
                self,
                crate::person::Person {
                    open_id: user.open_id.clone(),
                    name: user.name.clone(),
                },
            ) {
                Ok(previous) => previous.map(|p| p.name),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot remember who signed in");
                    None
                }
            },
            None => None,
        };
        self.signals().signed_in.emit(&account);
        if let Err(e) = self.engine().auth_completed(&account.scopes).await {
            tracing::warn!(error = %e, "resuming calls after sign-in failed");
        }
        // Names the previews could not look up before the sign-in can be looked up now.
        if let Err(e) = self.engine().refresh_previews().await {
            tracing::warn!(error = %e, "refreshing previews after sign-in failed");
        }
        SignInStatus::SignedIn {
            name: account.user.map(|u| u.name).unwrap_or_default(),
            scopes: account.scopes,
            switched_from,
        }
    }

    /// The "Connect my Feishu" in progress (see [`crate::connect`]).
    pub(crate) fn connect_slot(&self) -> &ConnectSlot {
        &self.connect
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
struct AppWiring(WeakCompanion);

#[async_trait::async_trait]
impl Wiring for AppWiring {
    async fn build(
        &self,
        ctx: &Context,
        settings: &Settings,
    ) -> Result<Arc<Runtime>, CompanionError> {
        let app = self
            .0
            .upgrade()
            .ok_or_else(|| CompanionError::Other("the app has closed".to_owned()))?;
        runtime::build(
            ctx.paths(),
            settings,
            ctx.options(),
            ctx.vault(),
            ctx.main_store(),
            ctx.kept(),
            runtime::Extensions {
                python: &app.python,
                mcp: app.mcp.mcp(),
            },
        )
        .await
    }

    fn installed(&self, _ctx: &Context, runtime: &Arc<Runtime>) -> Result<(), CompanionError> {
        let Some(app) = self.0.upgrade() else {
            return Ok(());
        };
        app.python_host.attach(runtime);
        // The new engine knows no connected agent yet.
        app.agents.apply_connected_agents()
    }

    fn compose(&self, _ctx: &Context) -> Result<(), CompanionError> {
        match self.0.upgrade() {
            Some(app) => app.apply_agent(),
            None => Ok(()),
        }
    }
}
