//! The application core: opens everything, and offers one async function per user action.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, RwLock};

use agent::persist::AuditFilter;
use agent::{
    CallRecord, Content, Decision, Engine, EngineConfig, EngineEvent, Event, LlmAgent, Rule,
    TurnOutcome,
};
use emulator::feishu::{App, FeishuEmulator};
use emulator::model_server::{ModelServer, Script};
use feishu::{
    Account, ApiClient, AppCredentials, CallbackOutcome, Endpoints, LoopbackListener, OAuthClient,
    RetryPolicy, TokenManager, ToolEnv, VaultTokenStore,
};
use secrecy::SecretString;
use store::Store;
use store::vault::{OsKeychain, Vault, fallback_chain};
use tokio::sync::broadcast;

use crate::paths::AppPaths;
use crate::settings::{Settings, SettingsError};

/// The vault entry of the Feishu App Secret.
pub const APP_SECRET: &str = "feishu.app_secret";

/// Requested with every sign-in, so approval cards can name the people a write involves.
pub const PEOPLE_NAMES_SCOPE: &str = "contact:contact.base:readonly";

/// The demo app's id in the emulator.
pub const DEMO_APP_ID: &str = "cli_demo_companion";

const SYSTEM_INSTRUCTION: &str = "你是飞书助手（Feishu Companion），替用户查看日历、聊天、文档和任务，并在需要时提出写操作。\
所有写操作都会先交给用户确认；被拒绝时尊重用户的理由。回答简洁，使用用户的语言。\n\
You are Feishu Companion: you read the user's calendar, chats, docs and tasks and propose writes, \
each of which the user approves first; respect a rejection and its reason. Answer briefly, in the user's language.";

/// What the UI hears about, as it happens.
#[derive(Debug, Clone, PartialEq)]
pub enum UiEvent {
    /// The engine: streamed text, stored events, calls held or decided, turns suspended or done.
    Engine(Box<EngineEvent>),
    /// A sign-in moved on.
    SignIn(SignInStatus),
}

/// Where a sign-in stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignInStatus {
    /// Waiting for the user on Feishu's page.
    Waiting {
        /// The authorize page.
        url: String,
    },
    /// Signed in; held calls are running again.
    SignedIn {
        /// Who.
        name: String,
        /// Every scope granted.
        scopes: Vec<String>,
    },
    /// The user declined on Feishu's page.
    Declined,
    /// It failed; the message says why and what to do.
    Failed {
        /// For the user.
        message: String,
    },
}

/// A sign-in in progress: what to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignInTicket {
    /// The authorize page to show in the sign-in window (or the system browser).
    pub url: String,
    /// The redirect URL the listener waits on.
    pub redirect_uri: String,
}

/// How to open the app.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Use this master-key source instead of the OS keychain (tests).
    pub memory_keys: bool,
    /// Force demo mode even when Feishu and a model are configured.
    pub force_demo: bool,
}

/// An application failure, worded for the person using the app.
#[derive(Debug, thiserror::Error)]
pub enum CompanionError {
    /// Settings.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// The database.
    #[error(transparent)]
    Store(#[from] store::StoreError),
    /// The vault.
    #[error(transparent)]
    Vault(#[from] store::VaultError),
    /// The engine.
    #[error(transparent)]
    Engine(#[from] agent::EngineError),
    /// Sign-in.
    #[error(transparent)]
    SignIn(#[from] feishu::SignInError),
    /// Tokens.
    #[error(transparent)]
    Token(#[from] feishu::TokenError),
    /// Anything else, already worded.
    #[error("{0}")]
    Other(String),
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
    settings: RwLock<Settings>,
    store: Arc<Store>,
    vault: Arc<Vault>,
    tokens: Arc<TokenManager>,
    engine: Engine,
    demo: Option<Demo>,
    events: broadcast::Sender<UiEvent>,
    sign_in: Mutex<Option<tokio::task::JoinHandle<()>>>,
    titles: Mutex<std::collections::HashMap<String, String>>,
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
            .field("demo", &self.inner.demo.is_some())
            .finish_non_exhaustive()
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Companion {
    /// Opens the app's data under `paths`: settings, database, vault; starts demo mode when no
    /// Feishu app or no model is configured; builds the engine and recovers what a previous run
    /// left in flight.
    pub async fn open(paths: AppPaths, options: OpenOptions) -> Result<Companion, CompanionError> {
        paths.create().map_err(|e| {
            CompanionError::Other(format!("cannot create {}: {e}", paths.data_dir.display()))
        })?;
        let settings = Settings::load(&paths.settings_file())?;
        let store = Arc::new(Store::open(paths.database())?);
        let keys: Box<dyn store::vault::MasterKeySource> = if options.memory_keys {
            Box::new(store::vault::MemoryKeySource::new())
        } else {
            Box::new(fallback_chain(OsKeychain::new(), paths.key_file()))
        };
        let vault = Arc::new(Vault::open(store.clone(), keys)?);

        let app_secret = vault
            .get(APP_SECRET)?
            .map(|b| String::from_utf8_lossy(&b).into_owned());
        let preset = llm::preset(&settings.model.preset).ok_or_else(|| {
            CompanionError::Other(format!("unknown model preset {}", settings.model.preset))
        })?;
        let model_key = match preset.key_name {
            Some(name) => vault
                .get(name)?
                .map(|b| String::from_utf8_lossy(&b).into_owned()),
            None => None,
        };
        let feishu_ready = !settings.feishu.app_id.is_empty() && app_secret.is_some();
        let model_ready = model_key.is_some() || !preset.key_required;
        let demo_mode = options.force_demo || !feishu_ready || !model_ready;

        let (endpoints, credentials, model, demo) = if demo_mode {
            let demo = start_demo(&settings).await?;
            let endpoints = Endpoints::single(parse_url(&demo.feishu.base_url())?);
            let credentials = AppCredentials {
                app_id: DEMO_APP_ID.to_owned(),
                app_secret: SecretString::from(DEMO_APP_ID.to_owned()),
            };
            let config = llm::ProviderConfig::new(
                llm::ProviderKind::OpenAiCompatible,
                "Demo",
                demo.model.base_url(),
                "demo-model",
                None,
            );
            let model = llm::connect(config).map_err(|e| CompanionError::Other(e.to_string()))?;
            (endpoints, credentials, model, Some(demo))
        } else {
            let endpoints = Endpoints::for_brand(settings.feishu.brand);
            let credentials = AppCredentials {
                app_id: settings.feishu.app_id.clone(),
                app_secret: SecretString::from(app_secret.unwrap_or_default()),
            };
            let config = llm::ProviderConfig::new(
                preset.kind,
                preset.name_en,
                settings
                    .model
                    .base_url
                    .clone()
                    .unwrap_or_else(|| preset.base_url.to_owned()),
                settings
                    .model
                    .model
                    .clone()
                    .unwrap_or_else(|| preset.default_model.to_owned()),
                model_key.map(llm::ApiKey::new),
            );
            let model = llm::connect(config).map_err(|e| CompanionError::Other(e.to_string()))?;
            (endpoints, credentials, model, None)
        };

        let oauth = OAuthClient::new(endpoints.clone(), credentials.clone())
            .map_err(|e| CompanionError::Other(e.to_string()))?;
        let token_store = Arc::new(VaultTokenStore::new(vault.clone(), &credentials.app_id));
        let tokens = Arc::new(TokenManager::new(
            oauth,
            token_store,
            Arc::new(agent::SystemClock),
        ));
        let api = ApiClient::new(endpoints, tokens.clone(), RetryPolicy::default())
            .map_err(|e| CompanionError::Other(e.to_string()))?;
        let mut builder = LlmAgent::builder("assistant", model).instruction(SYSTEM_INSTRUCTION);
        for tool in feishu::all_tools(ToolEnv {
            api,
            tz: settings.tz(),
        }) {
            builder = builder.tool(tool);
        }
        let agent = builder
            .build()
            .map_err(|e| CompanionError::Other(e.to_string()))?;
        let engine = Engine::new(
            agent,
            store.clone(),
            EngineConfig {
                approval_ttl_ms: Some(i64::from(settings.approval_expiry_minutes) * 60_000),
                ..EngineConfig::default()
            },
        )?;
        let (events, _) = broadcast::channel(4096);
        let companion = Companion {
            inner: Arc::new(Inner {
                paths,
                settings: RwLock::new(settings),
                store,
                vault,
                tokens,
                engine: engine.clone(),
                demo,
                events,
                sign_in: Mutex::new(None),
                titles: Mutex::default(),
            }),
        };
        companion.forward_engine_events();
        let report = engine.recover().await?;
        if !report.outcome_unknown.is_empty() || !report.interrupted.is_empty() {
            tracing::warn!(?report, "recovered from an earlier run");
        }
        Ok(companion)
    }

    fn forward_engine_events(&self) {
        let mut from_engine = self.inner.engine.subscribe();
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

    /// The engine (for the application core's own modules and tests).
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// Conversation titles already worked out, by session id.
    pub(crate) fn titles(&self) -> &Mutex<std::collections::HashMap<String, String>> {
        &self.inner.titles
    }

    /// Whether the app runs on the built-in emulator and scripted model.
    pub fn is_demo(&self) -> bool {
        self.inner.demo.is_some()
    }

    /// The demo's stand-ins, in demo mode.
    pub fn demo(&self) -> Option<&Demo> {
        self.inner.demo.as_ref()
    }

    /// The user id sessions are kept under: the signed-in user, or `local` before any sign-in.
    async fn user_id(&self) -> String {
        match self.inner.tokens.account().await {
            Ok(Some(Account {
                user: Some(user), ..
            })) => user.open_id,
            _ => "local".to_owned(),
        }
    }

    /// Starts a new conversation.
    pub async fn create_session(&self) -> Result<String, CompanionError> {
        let user = self.user_id().await;
        Ok(self
            .inner
            .engine
            .create_session(&user, &Default::default())?)
    }

    /// The user's conversations, most recent first.
    pub async fn list_sessions(&self) -> Result<Vec<store::SessionMeta>, CompanionError> {
        let user = self.user_id().await;
        let mut sessions = self
            .inner
            .store
            .list_sessions(&EngineConfig::default().app_name, &user)?;
        if user != "local" {
            sessions.extend(
                self.inner
                    .store
                    .list_sessions(&EngineConfig::default().app_name, "local")?,
            );
        }
        Ok(sessions)
    }

    /// A conversation's stored events.
    pub fn session_events(&self, session_id: &str) -> Result<Vec<Event>, CompanionError> {
        Ok(self.inner.store.load_session(session_id)?.events)
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
            .inner
            .engine
            .send_message(session_id, Content::user_text(text))
            .await?)
    }

    /// Stops the running or waiting turn of a conversation.
    pub async fn cancel_turn(&self, session_id: &str) -> Result<bool, CompanionError> {
        Ok(self.inner.engine.cancel(session_id).await?)
    }

    /// Approves, edits and approves, rejects, or always-allows a held call.
    pub async fn decide(
        &self,
        call_id: &str,
        decision: Decision,
    ) -> Result<TurnOutcome, CompanionError> {
        Ok(self.inner.engine.decide(call_id, decision).await?)
    }

    /// Decides many held calls at once (the inbox's multi-select).
    pub async fn decide_many(
        &self,
        decisions: Vec<(String, Decision)>,
    ) -> Result<Vec<TurnOutcome>, CompanionError> {
        Ok(self.inner.engine.decide_many(decisions).await?)
    }

    /// Everything waiting for the user, across conversations, oldest first.
    pub fn pending(&self) -> Result<Vec<CallRecord>, CompanionError> {
        Ok(self.inner.engine.pending_calls()?)
    }

    /// The always/never rules, revoked ones included.
    pub fn rules(&self) -> Result<Vec<Rule>, CompanionError> {
        Ok(self.inner.engine.rules()?)
    }

    /// Revokes a rule.
    pub fn revoke_rule(&self, rule_id: &str) -> Result<Rule, CompanionError> {
        Ok(self.inner.engine.revoke_rule(rule_id)?)
    }

    /// The audit trail, newest first.
    pub fn audit(
        &self,
        filter: &AuditFilter,
    ) -> Result<Vec<agent::persist::AuditEntry>, CompanionError> {
        Ok(self.inner.engine.audit_trail(filter)?)
    }

    /// The signed-in account (no secrets), if any.
    pub async fn account(&self) -> Result<Option<Account>, CompanionError> {
        Ok(self.inner.tokens.account().await?)
    }

    /// Starts a sign-in for `scopes` (empty: whatever the waiting calls need), returns the page
    /// to open, and finishes in the background: the tokens are stored and every call waiting
    /// for those scopes runs again. Progress arrives as [`UiEvent::SignIn`].
    pub async fn begin_sign_in(&self, scopes: Vec<String>) -> Result<SignInTicket, CompanionError> {
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
        let port = lock_read(&self.inner.settings).feishu.redirect_port;
        let listener = LoopbackListener::bind(port)
            .await
            .map_err(feishu::SignInError::from)?;
        let request = self
            .inner
            .tokens
            .oauth()
            .begin_sign_in(&wanted, &listener.redirect_uri())
            .map_err(feishu::SignInError::from)?;
        let ticket = SignInTicket {
            url: request.url.to_string(),
            redirect_uri: request.redirect_uri.clone(),
        };
        let _ = self
            .inner
            .events
            .send(UiEvent::SignIn(SignInStatus::Waiting {
                url: ticket.url.clone(),
            }));
        let me = self.clone();
        let task = tokio::spawn(async move {
            let status = me.finish_sign_in(listener, request).await;
            let _ = me.inner.events.send(UiEvent::SignIn(status));
        });
        *lock(&self.inner.sign_in) = Some(task);
        Ok(ticket)
    }

    async fn finish_sign_in(
        &self,
        listener: LoopbackListener,
        request: feishu::SignInRequest,
    ) -> SignInStatus {
        let outcome = match listener
            .wait(request.state.secret(), feishu::flow::SIGN_IN_TIMEOUT)
            .await
        {
            Ok(outcome) => outcome,
            Err(e) => {
                return SignInStatus::Failed {
                    message: e.to_string(),
                };
            }
        };
        let code = match outcome {
            CallbackOutcome::Code(code) => code,
            CallbackOutcome::Denied { .. } => return SignInStatus::Declined,
        };
        let account = match self.inner.tokens.complete_sign_in(&request, &code).await {
            Ok(account) => account,
            Err(e) => {
                return SignInStatus::Failed {
                    message: e.to_string(),
                };
            }
        };
        if let Err(e) = self.inner.engine.auth_completed(&account.scopes).await {
            tracing::warn!(error = %e, "resuming calls after sign-in failed");
        }
        SignInStatus::SignedIn {
            name: account.user.map(|u| u.name).unwrap_or_default(),
            scopes: account.scopes,
        }
    }

    /// Stops a sign-in in progress (the listener closes and frees the port).
    pub fn cancel_sign_in(&self) {
        if let Some(task) = lock(&self.inner.sign_in).take() {
            task.abort();
        }
    }

    /// The user declined to sign in for a call: the model is told it was cancelled.
    pub async fn decline_sign_in(&self, call_id: &str) -> Result<TurnOutcome, CompanionError> {
        Ok(self.inner.engine.auth_declined(call_id).await?)
    }

    /// Signs out of Feishu.
    pub async fn sign_out(&self) -> Result<(), CompanionError> {
        Ok(self.inner.tokens.sign_out().await?)
    }

    /// The current settings.
    pub fn settings(&self) -> Settings {
        lock_read(&self.inner.settings).clone()
    }

    /// Saves new settings. Model and Feishu changes take effect at the next start; the answer
    /// says whether a restart is needed.
    pub fn update_settings(&self, settings: Settings) -> Result<bool, CompanionError> {
        settings.save(&self.inner.paths.settings_file())?;
        let mut current = self
            .inner
            .settings
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let restart = current.model != settings.model || current.feishu != settings.feishu;
        *current = settings;
        Ok(restart)
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

    /// Which secrets are set, without their values.
    pub fn secrets_present(&self) -> Result<Vec<String>, CompanionError> {
        Ok(self.inner.vault.names()?)
    }

    /// How the master key is kept, and a warning if it fell back to a key file.
    pub fn key_source(&self) -> (String, Option<String>) {
        (
            self.inner.vault.key_source(),
            self.inner.vault.key_notice().map(|n| n.to_string()),
        )
    }
}

fn lock_read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn parse_url(text: &str) -> Result<url::Url, CompanionError> {
    url::Url::parse(text).map_err(|e| CompanionError::Other(format!("bad URL {text}: {e}")))
}

/// Starts the emulator (with the demo app registered for the configured redirect port) and the
/// scripted model server.
async fn start_demo(settings: &Settings) -> Result<Demo, CompanionError> {
    let feishu = FeishuEmulator::start()
        .await
        .map_err(|e| CompanionError::Other(format!("cannot start the Feishu emulator: {e}")))?;
    feishu.register_app(App {
        app_id: DEMO_APP_ID.to_owned(),
        app_secret: DEMO_APP_ID.to_owned(),
        redirect_uris: vec![settings.feishu.redirect_url()],
        enabled_scopes: emulator::feishu::api::scopes::PREFERRED_SCOPES
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
    });
    let mut script = Script::demo()
        .map_err(|e| CompanionError::Other(format!("the demo script is broken: {e}")))?;
    // The script's replies name times ("明天 15:00") in this offset, and the approval card shows
    // them in the user's zone: the two must agree wherever the user is.
    script.utc_offset_minutes = settings.tz().to_offset(jiff::Timestamp::now()).seconds() / 60;
    let model = ModelServer::start(script)
        .await
        .map_err(|e| CompanionError::Other(format!("cannot start the demo model: {e}")))?;
    tracing::info!(feishu = %feishu.base_url(), model = %model.base_url(), "demo mode");
    Ok(Demo { feishu, model })
}
