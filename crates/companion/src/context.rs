//! The context every feature of the core works in: the app's folders and options, the settings,
//! the databases and the vault, what the settings built (the [`Runtime`]: engine, tokens, model),
//! the UI's event stream, and the one sign-in slot the redirect port allows. It knows no feature:
//! features are functions and types over it (and never name the facade, [`crate::Companion`]).
//! What a rebuild must also refresh (the assistant's tools, the connected agents) is the
//! [`Wiring`] the facade installs when it opens; features that must react to a sign-in or to
//! saved settings subscribe to its [`Signals`] instead of being called from here.
//!
//! Imports: leaves (`error`, `events`, `options`, `paths`, `settings`, `sync`, `text`) and
//! [`crate::runtime`]'s types only.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};

use agent::Engine;
use feishu::{Account, TokenManager};
use store::Store;
use store::vault::Vault;
use tokio::sync::broadcast;

use crate::error::CompanionError;
use crate::events::{SignInStatus, UiEvent};
use crate::options::{APP_SECRET, OpenOptions};
use crate::paths::AppPaths;
use crate::runtime::{self, Demo, Kept, Runtime};
use crate::settings::Settings;
use crate::sync::{lock, read, write};

/// What a rebuild needs from above the context: building the runtime with the features' tools,
/// and refreshing what hangs on the engine once it is in place.
#[async_trait::async_trait]
pub(crate) trait Wiring: Send + Sync {
    /// Builds what `settings` call for.
    async fn build(
        &self,
        ctx: &Context,
        settings: &Settings,
    ) -> Result<Arc<Runtime>, CompanionError>;
    /// A new runtime is in place: attach what hangs on its engine.
    fn installed(&self, ctx: &Context, runtime: &Arc<Runtime>) -> Result<(), CompanionError>;
    /// The tools changed (a Python file, an MCP server, a setting): the assistant's agent is
    /// built again; the next turn uses it.
    fn compose(&self, ctx: &Context) -> Result<(), CompanionError>;
}

/// One observer of a signal.
type Observer<T> = Box<dyn Fn(&T) + Send + Sync>;

/// Observers of one kind of change, called in the order they subscribed.
pub(crate) struct Signal<T> {
    observers: Mutex<Vec<Observer<T>>>,
}

impl<T> Default for Signal<T> {
    fn default() -> Self {
        Signal {
            observers: Mutex::new(Vec::new()),
        }
    }
}

impl<T> Signal<T> {
    /// Calls `observer` at every change from now on. Observers hold weak handles: a signal
    /// must not keep its subscriber alive.
    pub(crate) fn subscribe(&self, observer: impl Fn(&T) + Send + Sync + 'static) {
        lock(&self.observers).push(Box::new(observer));
    }

    /// Tells every observer.
    pub(crate) fn emit(&self, value: &T) {
        for observer in lock(&self.observers).iter() {
            observer(value);
        }
    }
}

/// The changes features react to.
#[derive(Default)]
pub(crate) struct Signals {
    /// Someone signed in (before the held calls run again).
    pub(crate) signed_in: Signal<Account>,
    /// New settings were saved.
    pub(crate) settings_saved: Signal<Settings>,
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
    /// The sign-in in progress, whichever flow: they share the redirect port and the tokens.
    sign_in: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Conversation titles already worked out, by session id.
    titles: Mutex<HashMap<String, String>>,
    wiring: OnceLock<Arc<dyn Wiring>>,
    signals: Signals,
}

/// The context: cheap to clone, one per open app.
#[derive(Clone)]
pub struct Context {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("paths", &self.inner.paths)
            .finish_non_exhaustive()
    }
}

/// A handle on the context that does not keep the app alive: for tasks the app owns that
/// call back into it.
#[derive(Clone)]
pub(crate) struct WeakContext(Weak<Inner>);

impl WeakContext {
    /// The context, unless the app has closed.
    pub(crate) fn upgrade(&self) -> Option<Context> {
        self.0.upgrade().map(|inner| Context { inner })
    }
}

/// What [`Context::new`] takes: everything opened before the first runtime was built.
pub(crate) struct Parts {
    pub(crate) paths: AppPaths,
    pub(crate) options: OpenOptions,
    pub(crate) settings: Settings,
    pub(crate) main_store: Arc<Store>,
    pub(crate) vault: Arc<Vault>,
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) kept: Kept,
}

impl Context {
    /// The context over what was opened.
    pub(crate) fn new(parts: Parts) -> Context {
        let (events, _) = broadcast::channel(4096);
        let ctx = Context {
            inner: Arc::new(Inner {
                paths: parts.paths,
                options: parts.options,
                settings: RwLock::new(parts.settings),
                main_store: parts.main_store,
                vault: parts.vault,
                runtime: RwLock::new(parts.runtime.clone()),
                kept: Mutex::new(parts.kept),
                rebuilding: tokio::sync::Mutex::new(()),
                events,
                sign_in: Mutex::new(None),
                titles: Mutex::default(),
                wiring: OnceLock::new(),
                signals: Signals::default(),
            }),
        };
        ctx.forward_engine_events(&parts.runtime.engine);
        ctx
    }

    /// Installs what rebuilds call (once, when the app opens).
    pub(crate) fn set_wiring(&self, wiring: Arc<dyn Wiring>) {
        let _ = self.inner.wiring.set(wiring);
    }

    /// The changes features subscribe to.
    pub(crate) fn signals(&self) -> &Signals {
        &self.inner.signals
    }

    /// A handle that does not keep the app alive.
    pub(crate) fn downgrade(&self) -> WeakContext {
        WeakContext(Arc::downgrade(&self.inner))
    }

    /// How the app was opened.
    pub(crate) fn options(&self) -> &OpenOptions {
        &self.inner.options
    }

    /// The app's folders.
    pub(crate) fn paths(&self) -> &AppPaths {
        &self.inner.paths
    }

    /// What lasts across rebuilds (for building a runtime).
    pub(crate) fn kept(&self) -> &Mutex<Kept> {
        &self.inner.kept
    }

    /// What the settings built now.
    pub(crate) fn runtime(&self) -> Arc<Runtime> {
        read(&self.inner.runtime).clone()
    }

    /// Recovers the runtime's database, once per process.
    pub(crate) async fn recover(&self, runtime: &Runtime) -> Result<(), CompanionError> {
        let database = match runtime.profile {
            runtime::Profile::Demo => runtime::demo_database(&self.inner.paths),
            runtime::Profile::Real { .. } => self.inner.paths.database(),
        };
        runtime::recover_once(runtime, &database, &self.inner.kept).await
    }

    /// Rebuilds what depends on the settings and the secrets, and switches to it: new calls use
    /// the new engine, while turns already running finish on the old one. A sign-in in
    /// progress is cancelled when the Feishu side changed, since it was for the old app.
    pub(crate) async fn rebuild(&self) -> Result<(), CompanionError> {
        let Some(wiring) = self.inner.wiring.get().cloned() else {
            return Err(CompanionError::Other("the app is still opening".to_owned()));
        };
        let _one = self.inner.rebuilding.lock().await;
        let fresh = wiring.build(self, &self.settings()).await?;
        let old = self.runtime();
        if old.profile != fresh.profile
            || old.tokens.oauth().endpoints() != fresh.tokens.oauth().endpoints()
        {
            self.stop_sign_in().await;
            lock(&self.inner.titles).clear();
        }
        self.forward_engine_events(&fresh.engine);
        self.recover(&fresh).await?;
        *write(&self.inner.runtime) = fresh.clone();
        wiring.installed(self, &fresh)?;
        tracing::info!(profile = ?fresh.profile, "settings applied");
        Ok(())
    }

    /// The tools changed: the assistant's agent is built again (see [`Wiring::compose`]).
    pub(crate) fn recompose(&self) -> Result<(), CompanionError> {
        match self.inner.wiring.get() {
            Some(wiring) => wiring.compose(self),
            None => Ok(()),
        }
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
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<UiEvent> {
        self.inner.events.subscribe()
    }

    /// Tells the UI anything.
    pub(crate) fn emit(&self, event: UiEvent) {
        let _ = self.inner.events.send(event);
    }

    /// Tells the UI where a sign-in stands.
    pub(crate) fn announce(&self, status: SignInStatus) {
        self.emit(UiEvent::SignIn(status));
    }

    /// The engine now.
    pub(crate) fn engine(&self) -> Engine {
        self.runtime().engine.clone()
    }

    /// Which data the app works on now: the demo's or the user's own Feishu app's.
    pub(crate) fn profile(&self) -> runtime::Profile {
        self.runtime().profile.clone()
    }

    /// Whether the app runs on the built-in emulator and scripted model.
    pub(crate) fn is_demo(&self) -> bool {
        self.runtime().demo.is_some()
    }

    /// The demo's stand-ins, in demo mode.
    pub(crate) fn demo(&self) -> Option<Arc<Demo>> {
        self.runtime().demo.clone()
    }

    /// The database the conversations live in now.
    pub(crate) fn store(&self) -> Arc<Store> {
        self.runtime().store.clone()
    }

    /// The main database (the real data and the vault), whose check Settings shows.
    pub(crate) fn main_store(&self) -> &Arc<Store> {
        &self.inner.main_store
    }

    /// The vault.
    pub(crate) fn vault(&self) -> &Arc<Vault> {
        &self.inner.vault
    }

    /// The token manager of the running profile.
    pub(crate) fn tokens(&self) -> Arc<TokenManager> {
        self.runtime().tokens.clone()
    }

    /// Conversation titles already worked out, by session id.
    pub(crate) fn titles(&self) -> &Mutex<HashMap<String, String>> {
        &self.inner.titles
    }

    /// The current settings.
    pub(crate) fn settings(&self) -> Settings {
        read(&self.inner.settings).clone()
    }

    /// Saves new settings; the answer says whether what the settings build must be rebuilt.
    /// Features watching the settings hear of it ([`Signals::settings_saved`]).
    pub(crate) fn update_settings(&self, settings: Settings) -> Result<bool, CompanionError> {
        settings.save(&self.inner.paths.settings_file())?;
        let mut current = write(&self.inner.settings);
        let rebuild = runtime::needs_rebuild(&current, &settings);
        *current = settings.clone();
        drop(current);
        self.inner.signals.settings_saved.emit(&settings);
        Ok(rebuild)
    }

    /// A secret's value, for the core's own requests (never for the UI).
    pub(crate) fn secret(&self, name: &str) -> Result<Option<String>, CompanionError> {
        Ok(self
            .inner
            .vault
            .get(name)?
            .map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    /// A secret that cannot be read counts as not set (for checks that only look).
    pub(crate) fn vault_secret(&self, name: &str) -> Option<String> {
        self.secret(name).ok().flatten()
    }

    /// Stores the Feishu App Secret in the vault (never in the settings file).
    pub(crate) fn set_app_secret(&self, secret: &str) -> Result<(), CompanionError> {
        Ok(self.inner.vault.put(APP_SECRET, secret.trim().as_bytes())?)
    }

    /// Stores a model preset's API key in the vault.
    pub(crate) fn set_model_key(&self, preset: &str, key: &str) -> Result<(), CompanionError> {
        let name = llm::preset(preset)
            .and_then(|p| p.key_name)
            .ok_or_else(|| {
                CompanionError::Other(format!("the preset {preset:?} takes no API key"))
            })?;
        Ok(self.inner.vault.put(name, key.trim().as_bytes())?)
    }

    /// Which secrets are set and readable, without their values (one that cannot be read is
    /// asked for again).
    pub(crate) fn secrets_present(&self) -> Result<Vec<String>, CompanionError> {
        let unreadable = self.inner.vault.health()?.unreadable;
        let mut names = self.inner.vault.names()?;
        names.retain(|n| !unreadable.iter().any(|u| &u.name == n));
        Ok(names)
    }

    /// How the master key is kept, and a warning if it fell back to a key file.
    pub(crate) fn key_source(&self) -> (String, Option<String>) {
        (
            self.inner.vault.key_source(),
            self.inner.vault.key_notice().map(|n| n.to_string()),
        )
    }

    /// The stand-in Feishu the user's own app is pointed at, if any (tests).
    pub(crate) fn feishu_base_override(&self) -> Option<String> {
        self.inner.options.feishu_base_url.clone()
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

    /// The App ID sign-ins use (the demo app's in demo mode).
    pub(crate) fn feishu_app_id(&self) -> String {
        self.runtime().tokens.oauth().app_id().to_owned()
    }

    /// The sign-in in progress (its task ends the listener or the polling when aborted).
    pub(crate) fn set_sign_in_task(&self, task: tokio::task::JoinHandle<()>) {
        *lock(&self.inner.sign_in) = Some(task);
    }

    /// Whether a sign-in is waiting on the redirect port.
    pub(crate) fn sign_in_waiting(&self) -> bool {
        lock(&self.inner.sign_in)
            .as_ref()
            .is_some_and(|task| !task.is_finished())
    }

    /// Stops a sign-in in progress (the listener closes and frees the port soon after).
    pub(crate) fn cancel_sign_in(&self) {
        if let Some(task) = lock(&self.inner.sign_in).take() {
            task.abort();
        }
    }

    /// Stops a sign-in in progress and waits until its listener has freed the port: the one
    /// way every flow ends the previous sign-in before starting another.
    pub(crate) async fn stop_sign_in(&self) {
        let task = lock(&self.inner.sign_in).take();
        if let Some(task) = task {
            task.abort();
            let _ = task.await;
        }
    }
}
