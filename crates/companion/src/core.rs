//! The application core: opens everything, and offers one async function per user action.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, RwLock};

use agent::persist::AuditFilter;
use agent::{CallRecord, Content, Decision, Engine, Event, Rule, TurnOutcome};
use emulator::feishu::FeishuEmulator;
use emulator::model_server::ModelServer;
use feishu::listener::Answer;
use feishu::{Account, LoopbackListener, TokenManager};
use store::Store;
use store::vault::{OsKeychain, Vault, fallback_chain};
use tokio::sync::broadcast;

use crate::paths::AppPaths;
use crate::runtime::{self, Kept, Runtime};
use crate::settings::Settings;
pub use crate::error::CompanionError;
pub use crate::events::{SignInStatus, SignInTicket, UiEvent};
pub(crate) use crate::sync::lock;
use crate::sync::read as lock_read;

/// The vault entry of the Feishu App Secret.
pub const APP_SECRET: &str = "feishu.app_secret";

/// Requested with every sign-in, so approval cards can name the people a write involves.
pub const PEOPLE_NAMES_SCOPE: &str = "contact:contact.base:readonly";

/// The demo app's id in the emulator.
pub const DEMO_APP_ID: &str = "cli_demo_companion";

/// How to open the app.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Use this master-key source instead of the OS keychain (tests).
    pub memory_keys: bool,
    /// Force demo mode even when Feishu and a model are configured.
    pub force_demo: bool,
    /// Where the user's own Feishu app is served, instead of the brand's hosts (tests, and a
    /// local emulator standing in for a real tenant).
    pub feishu_base_url: Option<String>,
    /// The shell's folder of packaged resources (Tauri's resource folder), where an installed
    /// app finds the Python sandbox's component (see [`crate::resources`]).
    pub resource_dir: Option<std::path::PathBuf>,
    /// Keep the compiled Python sandbox here instead of the data folder (tests share one).
    pub python_cache_dir: Option<std::path::PathBuf>,
    /// Serve connected agents on this port instead of the registry's (`Some(0)`: any free
    /// port; tests).
    pub agents_port: Option<u16>,
}

/// The demo's stand-ins, running in-process.
#[derive(Debug)]
pub struct Demo {
    /// The Feishu emulator.
    pub feishu: FeishuEmulator,
    /// The scripted model server.
    pub model: ModelServer,
}

struct Inner {
    paths: AppPaths,
    options: OpenOptions,
    settings: RwLock<Settings>,
    /// The real data and the vault.
    main_store: Arc<Store>,
    vault: Arc<Vault>,
    /// What the settings built (see [`crate::runtime`]); replaced whole when they change.
    runtime: RwLock<Arc<Runtime>>,
    kept: Mutex<Kept>,
    /// One rebuild at a time.
    rebuilding: tokio::sync::Mutex<()>,
    events: broadcast::Sender<UiEvent>,
    sign_in: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The "Connect my Feishu" in progress, and its code.
    connect: Mutex<Option<(tokio::task::JoinHandle<()>, crate::connect::DeviceTicket)>>,
    titles: Mutex<std::collections::HashMap<String, String>>,
    /// The user's Python files, loaded into the sandbox (see [`crate::python`]); they outlive
    /// runtime rebuilds.
    python: Arc<crate::python::PythonTools>,
    /// What that Python reaches outside the sandbox; re-attached to each new runtime.
    python_host: Arc<crate::python::host::AppHost>,
    /// Approving from Feishu (see [`crate::remote_approval`]).
    remote: Arc<crate::remote_approval::Remote>,
    /// The user's MCP servers (see [`crate::mcp`]); they outlive runtime rebuilds.
    mcp: Arc<crate::mcp::McpServers>,
    /// The user's other agents asking over MCP (see [`crate::agents`]).
    agents: Arc<crate::agents::ConnectedAgents>,
}

/// The app, without its window: everything the UI, the tests and a CLI drive.
#[derive(Clone)]
pub struct Companion {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Companion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Companion")
            .field("paths", &self.inner.paths)
            .field("profile", &self.runtime().profile)
            .finish_non_exhaustive()
    }
}

/// A handle on the app that does not keep it alive: for what the app itself owns and that
/// calls back into it (the Python folder's watcher).
#[derive(Clone)]
pub(crate) struct WeakCompanion(std::sync::Weak<Inner>);

impl WeakCompanion {
    /// The app, unless it has closed.
    pub(crate) fn upgrade(&self) -> Option<Companion> {
        self.0.upgrade().map(|inner| Companion { inner })
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
        let mcp = Arc::new(crate::mcp::McpServers::open(&paths, &vault));
        let agents = Arc::new(crate::agents::ConnectedAgents::open(&paths.config_dir));
        let extensions = runtime::Extensions {
            python: &python,
            mcp: &mcp,
        };
        let runtime = runtime::build(
            &paths, &settings, &options, &vault, &store, &kept, extensions,
        )
        .await?;
        python_host.attach(&runtime);
        let (events, _) = broadcast::channel(4096);
        let companion = Companion {
            inner: Arc::new(Inner {
                paths,
                options,
                settings: RwLock::new(settings),
                main_store: store,
                vault,
                runtime: RwLock::new(runtime.clone()),
                kept,
                rebuilding: tokio::sync::Mutex::new(()),
                events,
                sign_in: Mutex::new(None),
                connect: Mutex::new(None),
                titles: Mutex::default(),
                python,
                python_host,
                remote: Arc::default(),
                mcp,
                agents,
            }),
        };
        companion.forward_engine_events(&runtime.engine);
        companion.apply_connected_agents()?;
        companion.recover(&runtime).await?;
        if runtime.demo.is_some() {
            // The emulator starts afresh with every launch and knows no earlier token, so a
            // stored one would only make the status bar claim a sign-in that has ended. The
            // person, and so their conversations, stay (crate::person).
            runtime.tokens.sign_out().await?;
        }
        // In the background: never delays the first window (issue 16).
        companion.start_python();
        companion.start_remote_approval();
        companion.forward_mcp_events();
        companion.list_unknown_mcp_tools();
        companion.forward_mcp_questions();
        companion
            .start_agent_server(companion.inner.options.agents_port)
            .await;
        Ok(companion)
    }

    /// Recovers the runtime's database, once per process.
    async fn recover(&self, runtime: &Runtime) -> Result<(), CompanionError> {
        let database = match runtime.profile {
            runtime::Profile::Demo => runtime::demo_database(&self.inner.paths),
            runtime::Profile::Real { .. } => self.inner.paths.database(),
        };
        runtime::recover_once(runtime, &database, &self.inner.kept).await
    }

    /// What the settings built now.
    pub(crate) fn runtime(&self) -> Arc<Runtime> {
        lock_read(&self.inner.runtime).clone()
    }

    /// Rebuilds what depends on the settings and the secrets, and switches to it: new calls use
    /// the new engine, while turns already running finish on the old one. A sign-in in
    /// progress is cancelled when the Feishu side changed, since it was for the old app.
    pub(crate) async fn rebuild(&self) -> Result<(), CompanionError> {
        let _one = self.inner.rebuilding.lock().await;
        let settings = self.settings();
        let fresh = runtime::build(
            &self.inner.paths,
            &settings,
            &self.inner.options,
            &self.inner.vault,
            &self.inner.main_store,
            &self.inner.kept,
            runtime::Extensions {
                python: &self.inner.python,
                mcp: &self.inner.mcp,
            },
        )
        .await?;
        let old = self.runtime();
        if old.profile != fresh.profile
            || old.tokens.oauth().endpoints() != fresh.tokens.oauth().endpoints()
        {
            self.stop_sign_in().await;
            lock(&self.inner.titles).clear();
        }
        self.forward_engine_events(&fresh.engine);
        self.recover(&fresh).await?;
        self.inner.python_host.attach(&fresh);
        *self
            .inner
            .runtime
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = fresh.clone();
        // The new engine knows no connected agent yet.
        self.apply_connected_agents()?;
        tracing::info!(profile = ?fresh.profile, "settings applied");
        Ok(())
    }

    /// Which data the app works on now: the demo's or the user's own Feishu app's.
    pub fn profile(&self) -> runtime::Profile {
        self.runtime().profile.clone()
    }

    fn forward_engine_events(&self, engine: &Engine) {
        let mut from_engine = engine.subscribe();
        let to_ui = self.inner.events.clone();
        tokio::spawn(async move {
            loop {
                match from_engine.recv().await {
                    Ok(event) => {
                        let _ = to_ui.send(UiEvent::Engine(Box::new(event)));
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(n, "the UI missed engine events")
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
    }

    /// Every event for the UI from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<UiEvent> {
        self.inner.events.subscribe()
    }

    /// The app's folders.
    pub fn paths(&self) -> &AppPaths {
        &self.inner.paths
    }

    /// The engine now (for the application core's own modules and tests).
    pub fn engine(&self) -> Engine {
        self.runtime().engine.clone()
    }

    /// A handle that does not keep the app alive.
    pub(crate) fn downgrade(&self) -> WeakCompanion {
        WeakCompanion(Arc::downgrade(&self.inner))
    }

    /// The user's Python (for the application core's own modules).
    pub(crate) fn python(&self) -> &Arc<crate::python::PythonTools> {
        &self.inner.python
    }

    /// The user's MCP servers (for the application core's own modules).
    pub(crate) fn mcp(&self) -> &Arc<crate::mcp::McpServers> {
        &self.inner.mcp
    }

    /// The connected agents (see [`crate::agents`]).
    pub(crate) fn agent_registry(&self) -> &Arc<crate::agents::ConnectedAgents> {
        &self.inner.agents
    }

    /// What Python code reaches outside the sandbox.
    pub(crate) fn python_host(&self) -> Arc<dyn pysandbox::Host> {
        self.inner.python_host.clone()
    }

    /// Conversation titles already worked out, by session id.
    pub(crate) fn titles(&self) -> &Mutex<std::collections::HashMap<String, String>> {
        &self.inner.titles
    }

    /// Whether the app runs on the built-in emulator and scripted model.
    pub fn is_demo(&self) -> bool {
        self.runtime().demo.is_some()
    }

    /// The demo's stand-ins, in demo mode.
    pub fn demo(&self) -> Option<Arc<Demo>> {
        self.runtime().demo.clone()
    }

    /// The user id sessions are kept under: the person last signed in (whether or not the
    /// sign-in still holds), or `local` before any sign-in.
    async fn user_id(&self) -> String {
        self.owner_id()
    }

    /// The vault (for the application core's own modules).
    pub(crate) fn vault(&self) -> &Vault {
        &self.inner.vault
    }

    /// The database the conversations live in now (for the application core's own modules).
    pub(crate) fn store(&self) -> Arc<Store> {
        self.runtime().store.clone()
    }

    /// Starts a new conversation.
    pub async fn create_session(&self) -> Result<String, CompanionError> {
        let user = self.user_id().await;
        Ok(self.engine().create_session(&user, &Default::default())?)
    }

    /// The person's conversations (see [`crate::person`]).
    pub async fn list_sessions(&self) -> Result<Vec<store::SessionMeta>, CompanionError> {
        self.owned_sessions()
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
        // Only the person's: another person's waiting approvals stay apart (crate::person).
        let users = self.users_calls()?;
        Ok(self
            .engine()
            .pending_calls()?
            .into_iter()
            .filter(|c| users(c))
            .collect())
    }

    /// Which calls are the person's: those of their conversations, and their connected agents'
    /// (which wait in the same inbox and on the same Feishu cards).
    pub(crate) fn users_calls(
        &self,
    ) -> Result<impl Fn(&CallRecord) -> bool + use<>, CompanionError> {
        let owned = self.owned_session_ids()?;
        let agents: BTreeSet<String> = self
            .agent_registry()
            .snapshot()
            .clients
            .into_iter()
            .map(|a| a.id)
            .collect();
        Ok(move |c: &CallRecord| owned.contains(&c.session_id) || agents.contains(&c.agent_name))
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
            return self.begin_mcp_sign_in(&server).await;
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
        let previous = lock(&self.inner.sign_in).take();
        if let Some(task) = previous {
            task.abort();
            let _ = task.await;
        }
        if self.settings().feishu.uses_device_flow() {
            let ticket = self.begin_device_sign_in(wanted).await?;
            return Ok(SignInTicket {
                url: ticket.url.clone(),
                redirect_uri: String::new(),
                device: Some(ticket),
            });
        }
        let port = lock_read(&self.inner.settings).feishu.redirect_port;
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
            Some(user) => match self.remember_person(crate::person::Person {
                open_id: user.open_id.clone(),
                name: user.name.clone(),
            }) {
                Ok(previous) => previous.map(|p| p.name),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot remember who signed in");
                    None
                }
            },
            None => None,
        };
        self.wake_remote_approval();
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

    /// Approving from Feishu (for its own module).
    pub(crate) fn remote(&self) -> Arc<crate::remote_approval::Remote> {
        self.inner.remote.clone()
    }

    /// Asks the window to show a call ("Open in app" on its card in Feishu).
    pub(crate) fn emit_open_call(&self, call_id: &str) {
        let _ = self.inner.events.send(UiEvent::OpenCall {
            call_id: call_id.to_owned(),
        });
    }

    /// Asks the window to show the inbox ("Open in app" on the summary card in Feishu).
    pub(crate) fn emit_open_inbox(&self) {
        let _ = self.inner.events.send(UiEvent::OpenInbox);
    }

    /// Tells the UI which calls' cards wait in Feishu now.
    pub(crate) fn emit_remote_cards(&self, call_ids: Vec<String>) {
        let _ = self.inner.events.send(UiEvent::RemoteCards { call_ids });
    }

    /// Tells the UI where a sign-in stands.
    pub(crate) fn announce(&self, status: SignInStatus) {
        self.emit(UiEvent::SignIn(status));
    }

    /// Tells the UI anything.
    pub(crate) fn emit(&self, event: UiEvent) {
        let _ = self.inner.events.send(event);
    }

    /// The sign-in in progress (its task ends the listener or the polling when aborted).
    pub(crate) fn set_sign_in_task(&self, task: tokio::task::JoinHandle<()>) {
        *lock(&self.inner.sign_in) = Some(task);
    }

    /// The "Connect my Feishu" in progress (see [`crate::connect`]).
    pub(crate) fn connect_slot(
        &self,
    ) -> &Mutex<Option<(tokio::task::JoinHandle<()>, crate::connect::DeviceTicket)>> {
        &self.inner.connect
    }

    /// The stand-in Feishu the user's own app is pointed at, if any (tests).
    pub(crate) fn feishu_base_override(&self) -> Option<String> {
        self.inner.options.feishu_base_url.clone()
    }

    /// The App ID sign-ins use (the demo app's in demo mode).
    pub(crate) fn feishu_app_id(&self) -> String {
        self.runtime().tokens.oauth().app_id().to_owned()
    }

    /// Stops a sign-in in progress (the listener closes and frees the port).
    pub fn cancel_sign_in(&self) {
        if let Some(task) = lock(&self.inner.sign_in).take() {
            task.abort();
        }
    }

    /// Stops a sign-in in progress and waits until its listener has freed the port.
    pub(crate) async fn stop_sign_in(&self) {
        let task = lock(&self.inner.sign_in).take();
        if let Some(task) = task {
            task.abort();
            let _ = task.await;
        }
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
        lock_read(&self.inner.settings).clone()
    }

    /// Saves new settings; the answer says whether what the settings build must be rebuilt
    /// ([`Companion::apply_settings`] does both).
    pub fn update_settings(&self, settings: Settings) -> Result<bool, CompanionError> {
        settings.save(&self.inner.paths.settings_file())?;
        let mut current = self
            .inner
            .settings
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let rebuild = runtime::needs_rebuild(&current, &settings);
        *current = settings;
        drop(current);
        self.wake_remote_approval();
        Ok(rebuild)
    }

    /// Stores the Feishu App Secret in the vault (never in the settings file).
    pub fn set_app_secret(&self, secret: &str) -> Result<(), CompanionError> {
        Ok(self.inner.vault.put(APP_SECRET, secret.trim().as_bytes())?)
    }

    /// Stores a model preset's API key in the vault.
    pub fn set_model_key(&self, preset: &str, key: &str) -> Result<(), CompanionError> {
        let name = llm::preset(preset)
            .and_then(|p| p.key_name)
            .ok_or_else(|| {
                CompanionError::Other(format!("the preset {preset:?} takes no API key"))
            })?;
        Ok(self.inner.vault.put(name, key.trim().as_bytes())?)
    }

    /// A secret from the vault, for the core's own checks (never for the UI).
    pub(crate) fn vault_secret(&self, name: &str) -> Option<String> {
        self.inner
            .vault
            .get(name)
            .ok()
            .flatten()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    /// The Open API base of the user's own Feishu app (not the demo's emulator).
    pub(crate) fn feishu_base_url(&self, brand: feishu::Brand) -> String {
        match &self.inner.options.feishu_base_url {
            Some(base) => base.trim_end_matches('/').to_owned(),
            None => feishu::Endpoints::for_brand(brand)
                .open
                .as_str()
                .trim_end_matches('/')
                .to_owned(),
        }
    }

    /// Whether a sign-in is waiting on the redirect port.
    pub(crate) fn sign_in_waiting(&self) -> bool {
        lock(&self.inner.sign_in)
            .as_ref()
            .is_some_and(|task| !task.is_finished())
    }

    /// Which secrets are set and readable, without their values (one that cannot be read is
    /// asked for again).
    pub fn secrets_present(&self) -> Result<Vec<String>, CompanionError> {
        let unreadable = self.inner.vault.health()?.unreadable;
        let mut names = self.inner.vault.names()?;
        names.retain(|n| !unreadable.iter().any(|u| &u.name == n));
        Ok(names)
    }

    /// The token manager of the running profile (for the application core's own modules).
    pub(crate) fn tokens(&self) -> Arc<TokenManager> {
        self.runtime().tokens.clone()
    }

    /// The main database, whose check Settings shows (for the application core's own modules).
    pub(crate) fn main_store(&self) -> &Arc<Store> {
        &self.inner.main_store
    }

    /// A secret's value, for the core's own requests (never for the UI).
    pub(crate) fn secret(&self, name: &str) -> Result<Option<String>, CompanionError> {
        Ok(self
            .inner
            .vault
            .get(name)?
            .map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    /// How the master key is kept, and a warning if it fell back to a key file.
    pub fn key_source(&self) -> (String, Option<String>) {
        (
            self.inner.vault.key_source(),
            self.inner.vault.key_notice().map(|n| n.to_string()),
        )
    }
}
