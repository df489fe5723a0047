//! What depends on the settings, built from them and rebuilt live when they change: the Feishu
//! client (brand, App ID and Secret, redirect port), the model provider (preset, base URL,
//! model, key), the approval expiry and the time zone, which together make the engine. A change
//! takes effect at once, without a restart; sessions, pending approvals and rules stay, because
//! they live in the database the new engine opens again, not in the engine.
//!
//! Demo data is kept apart from real data: demo mode works on its own database file beside the
//! real one, with its own sessions, approvals and rules. A real account never lists a demo
//! conversation, and an approval given in demo mode can only ever be dispatched by the demo
//! engine, to the emulator: the real engine has no record of it. The demo's emulator and model
//! server start once and are kept, so going back to demo finds its tenant as it was left.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent::{Engine, EngineConfig};
use emulator::feishu::{App, FeishuEmulator};
use emulator::model_server::{ModelServer, Script};
use feishu::{
    ApiClient, AppCredentials, Endpoints, OAuthClient, RetryPolicy, TokenManager, ToolEnv,
    VaultTokenStore,
};
use secrecy::SecretString;
use store::Store;
use store::vault::Vault;

use crate::error::CompanionError;
use crate::options::{APP_SECRET, DEMO_APP_ID, OpenOptions};
use crate::paths::AppPaths;
use crate::settings::Settings;
use crate::sync::lock;

/// Which data a runtime works on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Profile {
    /// The built-in emulator and scripted model, on the demo database.
    Demo,
    /// The user's own Feishu app, on the real database.
    Real {
        /// Feishu or Lark.
        brand: feishu::Brand,
        /// The App ID.
        app_id: String,
    },
}

/// The demo's stand-ins, running in-process.
#[derive(Debug)]
pub struct Demo {
    /// The Feishu emulator.
    pub feishu: FeishuEmulator,
    /// The scripted model server.
    pub model: ModelServer,
}

/// Everything built from the settings, replaced whole when they change.
pub(crate) struct Runtime {
    pub(crate) profile: Profile,
    pub(crate) store: Arc<Store>,
    pub(crate) tokens: Arc<TokenManager>,
    pub(crate) engine: Engine,
    pub(crate) demo: Option<Arc<Demo>>,
    /// What the agent is made of, kept so the user's changes (Settings → Assistant, Python
    /// files) rebuild only the agent ([`agent::Engine::set_agent`]), not the runtime.
    pub(crate) model: Arc<dyn agent::Model>,
    /// Every built-in tool, the ones the user turned off included.
    pub(crate) builtin: Vec<Arc<dyn agent::AgentTool>>,
    /// Feishu's Open API, which a Python file may call as the user when allowed to.
    pub(crate) feishu_open: url::Url,
}

/// What lasts across rebuilds: the databases opened so far, the demo's servers once started,
/// and which databases this process has already recovered.
#[derive(Default)]
pub(crate) struct Kept {
    demo: Option<Arc<Demo>>,
    demo_store: Option<Arc<Store>>,
    recovered: HashSet<PathBuf>,
}

/// The demo's database, beside the real one.
pub fn demo_database(paths: &AppPaths) -> PathBuf {
    paths.data_dir.join("demo.db")
}

/// The user's own tools, which outlive runtime rebuilds: each new agent is given them.
#[derive(Clone, Copy)]
pub(crate) struct Extensions<'a> {
    /// The Python files' tools and callbacks.
    pub(crate) python: &'a crate::python::PythonTools,
    /// The MCP servers' tools.
    pub(crate) mcp: &'a crate::mcp::McpServers,
}

/// The settings whose change needs a new runtime (language and theme do not).
pub(crate) fn needs_rebuild(old: &Settings, new: &Settings) -> bool {
    old.model != new.model
        || old.feishu != new.feishu
        || old.time_zone != new.time_zone
        || old.approval_expiry_minutes != new.approval_expiry_minutes
}

/// Builds the runtime the settings (and the secrets in the vault) call for. The main store
/// holds the vault and the real data.
pub(crate) async fn build(
    paths: &AppPaths,
    settings: &Settings,
    options: &OpenOptions,
    vault: &Arc<Vault>,
    main_store: &Arc<Store>,
    kept: &Mutex<Kept>,
    extensions: Extensions<'_>,
) -> Result<Arc<Runtime>, CompanionError> {
    let Extensions { python, mcp } = extensions;
    let Connection {
        profile,
        store,
        endpoints,
        credentials,
        model,
        demo,
    } = connection(paths, settings, options, vault, main_store, kept).await?;

    let oauth = OAuthClient::new(endpoints.clone(), credentials.clone())
        .map_err(|e| CompanionError::Other(e.to_string()))?;
    let token_store = Arc::new(VaultTokenStore::new(vault.clone(), &credentials.app_id));
    let tokens = Arc::new(TokenManager::new(
        oauth,
        token_store,
        Arc::new(agent::SystemClock),
    ));
    let feishu_open = endpoints.open.clone();
    // Feishu's hosted docs server, with this runtime's Feishu and sign-in.
    mcp.set_builtin(
        crate::mcp::feishu::server(&endpoints, tokens.clone()),
        crate::mcp::lark::LarkRuntime::new(&endpoints, tokens.clone()),
        vault,
    );
    let api = ApiClient::new(endpoints, tokens.clone(), RetryPolicy::default())
        .map_err(|e| CompanionError::Other(e.to_string()))?;
    let builtin: Vec<Arc<dyn agent::AgentTool>> = feishu::all_tools(ToolEnv {
        api,
        tz: settings.tz(),
    })
    .into_iter()
    .map(|t| Arc::new(t) as Arc<dyn agent::AgentTool>)
    .collect();
    let agent = crate::compose::build_agent(
        &settings.assistant,
        model.clone(),
        &builtin,
        &python.extensions(),
        &mcp.tools(),
    )?;
    let engine = Engine::new(
        agent,
        store.clone(),
        EngineConfig {
            approval_ttl_ms: Some(i64::from(settings.approval_expiry_minutes) * 60_000),
            ..EngineConfig::default()
        },
    )?;
    Ok(Arc::new(Runtime {
        profile,
        store,
        tokens,
        engine,
        demo,
        model,
        builtin,
        feishu_open,
    }))
}

/// What a runtime talks to: the demo's emulator and scripted model on the demo database, or
/// the user's Feishu app and model on the real one. Everything else in a runtime is built the
/// same way on either.
struct Connection {
    profile: Profile,
    store: Arc<Store>,
    endpoints: Endpoints,
    credentials: AppCredentials,
    model: Arc<dyn agent::Model>,
    demo: Option<Arc<Demo>>,
}

/// Decides between demo and real: real only when the Feishu app and the model are both set up
/// (and the options do not force the demo), so a half-configured app still runs, in demo mode.
async fn connection(
    paths: &AppPaths,
    settings: &Settings,
    options: &OpenOptions,
    vault: &Vault,
    main_store: &Arc<Store>,
    kept: &Mutex<Kept>,
) -> Result<Connection, CompanionError> {
    let app_secret = stored_secret(vault, APP_SECRET)?;
    let preset = llm::preset(&settings.model.preset).ok_or_else(|| {
        CompanionError::Other(format!("unknown model preset {}", settings.model.preset))
    })?;
    let model_key = match preset.key_name {
        Some(name) => stored_secret(vault, name)?,
        None => None,
    };
    let feishu_ready = !settings.feishu.app_id.is_empty() && app_secret.is_some();
    let model_ready = model_key.is_some() || !preset.key_required;
    let demo_mode = options.force_demo || !feishu_ready || !model_ready;

    if demo_mode {
        demo_connection(paths, settings, kept).await
    } else {
        real_connection(settings, options, main_store, preset, app_secret, model_key)
    }
}

/// A secret from the vault. One that cannot be read (a damaged row, a locked vault) counts as
/// not set: the app asks for it again instead of stopping. Only a database failure is an error.
fn stored_secret(vault: &Vault, name: &str) -> Result<Option<String>, CompanionError> {
    match vault.get(name) {
        Ok(value) => Ok(value.map(|b| String::from_utf8_lossy(&b).into_owned())),
        Err(store::VaultError::Store(e)) => Err(e.into()),
        Err(e) => {
            tracing::warn!(secret = name, error = %e, "a stored secret cannot be read");
            Ok(None)
        }
    }
}

/// The demo: its emulator and scripted model (started once, then kept) on its own database,
/// as the demo's App ID, whatever the settings hold.
async fn demo_connection(
    paths: &AppPaths,
    settings: &Settings,
    kept: &Mutex<Kept>,
) -> Result<Connection, CompanionError> {
    let (demo, store) = demo_parts(paths, settings, kept).await?;
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
    Ok(Connection {
        profile: Profile::Demo,
        store,
        endpoints,
        credentials,
        model,
        demo: Some(demo),
    })
}

/// The user's own Feishu app (or an emulator standing in for it, when the options say) and
/// model as the settings describe them, on the main database.
fn real_connection(
    settings: &Settings,
    options: &OpenOptions,
    main_store: &Arc<Store>,
    preset: &llm::Preset,
    app_secret: Option<String>,
    model_key: Option<String>,
) -> Result<Connection, CompanionError> {
    // A stand-in for the real Feishu serves Lark's hosts under `/lark` of the same base.
    let endpoints = match &options.feishu_base_url {
        Some(base) => Endpoints::emulated(&parse_url(base)?, settings.feishu.brand),
        None => Endpoints::for_brand(settings.feishu.brand),
    };
    let credentials = AppCredentials {
        app_id: settings.feishu.app_id.clone(),
        app_secret: SecretString::from(app_secret.unwrap_or_default()),
    };
    // The preset's own options (usage chunk, reasoning sent back) come with it.
    let mut config = preset.config(model_key.map(llm::ApiKey::new));
    if let Some(base_url) = settings.model.base_url.clone() {
        config.base_url = base_url;
    }
    if let Some(model) = settings.model.model.clone() {
        config.model = model;
    }
    let model = llm::connect(config).map_err(|e| CompanionError::Other(e.to_string()))?;
    let profile = Profile::Real {
        brand: settings.feishu.brand,
        app_id: settings.feishu.app_id.clone(),
    };
    Ok(Connection {
        profile,
        store: main_store.clone(),
        endpoints,
        credentials,
        model,
        demo: None,
    })
}

/// Recovers what a previous run left in flight in this runtime's database, once per database
/// and process (a database switched back to was recovered when first opened).
pub(crate) async fn recover_once(
    runtime: &Runtime,
    database: &Path,
    kept: &Mutex<Kept>,
) -> Result<(), CompanionError> {
    if !lock(kept).recovered.insert(database.to_path_buf()) {
        return Ok(());
    }
    let report = runtime.engine.recover().await?;
    if !report.outcome_unknown.is_empty() || !report.interrupted.is_empty() {
        tracing::warn!(?report, "recovered from an earlier run");
    }
    Ok(())
}

/// The demo's servers and database, started and opened once.
async fn demo_parts(
    paths: &AppPaths,
    settings: &Settings,
    kept: &Mutex<Kept>,
) -> Result<(Arc<Demo>, Arc<Store>), CompanionError> {
    let existing = {
        let kept = lock(kept);
        kept.demo.clone().zip(kept.demo_store.clone())
    };
    if let Some((demo, store)) = existing {
        // The redirect port may have changed since: the demo app accepts the current URL.
        register_demo_app(&demo.feishu, settings);
        return Ok((demo, store));
    }
    let store = Arc::new(Store::open(demo_database(paths))?);
    // Checked like the main database: the demo's conversations are the user's too, and damage
    // found here is reported in Settings with this file's path.
    store.start_quick_check();
    let demo = Arc::new(start_demo(settings).await?);
    let mut kept = lock(kept);
    kept.demo = Some(demo.clone());
    kept.demo_store = Some(store.clone());
    Ok((demo, store))
}

fn register_demo_app(feishu: &FeishuEmulator, settings: &Settings) {
    feishu.register_app(App {
        app_id: DEMO_APP_ID.to_owned(),
        app_secret: DEMO_APP_ID.to_owned(),
        redirect_uris: vec![settings.feishu.redirect_url()],
        // Base's scopes too: the lark-mcp preset's Base tools ask for them.
        enabled_scopes: emulator::feishu::api::scopes::PREFERRED_SCOPES
            .iter()
            .chain(emulator::feishu::api::bitable::SCOPES)
            .map(|s| (*s).to_owned())
            .collect(),
    });
}

/// Starts the emulator (with the demo app registered for the configured redirect port) and the
/// scripted model server.
async fn start_demo(settings: &Settings) -> Result<Demo, CompanionError> {
    let feishu = FeishuEmulator::start()
        .await
        .map_err(|e| CompanionError::Other(format!("cannot start the Feishu emulator: {e}")))?;
    register_demo_app(&feishu, settings);
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

fn parse_url(text: &str) -> Result<url::Url, CompanionError> {
    url::Url::parse(text).map_err(|e| CompanionError::Other(format!("bad URL {text}: {e}")))
}
