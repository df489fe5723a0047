//! The desktop shell of Feishu Companion (飞书助手): a Tauri 2 app around the application core
//! (`companion`). It opens the core, exposes one command per core function to the embedded
//! Svelte UI in the main window, forwards the core's events to that window, shows Feishu's
//! sign-in page in a locked-down second webview (see [`signin`]), and keeps a tray icon and
//! desktop notifications for what waits on the user. Nothing here decides anything about
//! approvals or tokens: the core does, and no token ever reaches the UI or the log.
//!
//! The binary calls [`run`]; the tests build the same app on Tauri's mock runtime with
//! [`configure`] and [`context`].
//!
//! Imports: `companion` only, through its public API; inside, the command files and the
//! window/tray/notification files import shared leaves (`answer`, `state`, `windows`) and never
//! each other in a circle (`crates/companion/tests/architecture.rs` checks).

mod agents;
mod answer;
mod assistant;
pub mod commands;
mod events;
pub mod launch;
mod mcp;
mod notify;
pub mod signin;
pub mod signin_policy;
mod state;
mod timing;
pub mod tray;
pub mod updates;
pub mod windows;

use std::time::{Duration, Instant};

use anyhow::Context as _;
use companion::{AppPaths, Companion, OpenOptions};
use tauri::webview::PageLoadEvent;
use tauri::{AppHandle, Builder, Manager as _, Runtime, WindowEvent};

pub use launch::{Launch, LaunchError};
pub use notify::notification_text;
pub use state::Shell;
pub use windows::OpenTarget;

include!("command_names.rs");

/// How often approvals past their time are expired.
const EXPIRY_EVERY: Duration = Duration::from_secs(30);

/// The app's configuration, capabilities and embedded UI (`ui/dist`), compiled in.
pub fn context<R: Runtime>() -> tauri::Context<R> {
    tauri::generate_context!()
}

/// Everything of the app that runs on any Tauri runtime: state, commands, the plugins the UI
/// or the shell calls, and the window and page hooks. The setup opens the main window, the
/// tray and the core; under the mock runtime (which runs no setup) the tests call
/// [`windows::create_main`] and [`start`] themselves.
pub fn configure<R: Runtime>(builder: Builder<R>, shell: Shell) -> Builder<R> {
    builder
        .manage(shell)
        // The shell opens links itself; the UI gets no opener command and no injected script.
        .plugin(
            tauri_plugin_opener::Builder::new()
                .open_js_links_on_click(false)
                .build(),
        )
        .plugin(tauri_plugin_notification::init())
        // Signed updates; the UI reaches it only through the shell's own update commands.
        .plugin(tauri_plugin_updater::Builder::new().build())
        .manage(updates::Updates::default())
        .invoke_handler(commands::handler())
        .on_page_load(|webview, payload| {
            if webview.label() == windows::MAIN && payload.event() == PageLoadEvent::Finished {
                webview.state::<Shell>().timing.page_loaded();
            }
        })
        .on_window_event(|window, event| {
            let app = window.app_handle();
            let shell = app.state::<Shell>();
            // "Away" for approving from Feishu counts from when the main window lost focus.
            if let (windows::MAIN, WindowEvent::Focused(focused)) = (window.label(), event)
                && let Some(companion) = shell.companion_now()
            {
                companion.window_focus_changed(*focused);
            }
            match (window.label(), event) {
                (windows::MAIN, WindowEvent::Focused(true)) => notify::on_main_focused(app, &shell),
                // The sign-in window must not outlive the app's own window.
                (windows::MAIN, WindowEvent::Destroyed) => app.exit(0),
                (signin::LABEL, WindowEvent::Destroyed) => signin::on_destroyed(app, &shell),
                _ => {}
            }
        })
        .setup(|app| {
            let handle = app.handle().clone();
            windows::create_main(&handle)?;
            if let Err(e) = tray::create(&handle) {
                log::warn!("no tray icon (the desktop may have no tray): {e}");
            }
            notify::listen_for_clicks(&handle);
            start(handle);
            Ok(())
        })
}

/// Opens the application core in the background, so the window paints meanwhile; commands
/// wait for it. If it cannot open, every command (and `startup_error`) answers why.
pub fn start<R: Runtime>(app: AppHandle<R>) {
    tauri::async_runtime::spawn(async move {
        let shell = app.state::<Shell>();
        // Where an installed app keeps the Python sandbox's component (packaging/).
        let resource_dir = app.path().resource_dir().ok();
        match open(&shell.launch, resource_dir).await {
            Ok(companion) => {
                // Subscribed before anything else runs, so no event is missed.
                let events = companion.subscribe();
                companion.start_expiry(EXPIRY_EVERY);
                events::forward(app.clone(), companion.clone(), events);
                events::update_tray(app.clone(), companion.clone());
                updates::check_at_start(app.clone(), companion.settings().check_for_updates);
                log::info!(
                    "the core is open ({} ms after process start){}",
                    shell.timing.elapsed().as_millis(),
                    if companion.is_demo() {
                        ", demo mode"
                    } else {
                        ""
                    }
                );
                shell.set_ready(Ok(companion));
            }
            Err(message) => {
                log::error!("{message}");
                shell.set_ready(Err(message));
            }
        }
    });
}

/// Where this run keeps its data: `--data-dir`, or the platform's folders.
pub(crate) fn app_paths(launch: &Launch) -> Result<AppPaths, String> {
    match &launch.data_dir {
        Some(dir) => Ok(AppPaths::under(dir)),
        None => AppPaths::system().ok_or_else(|| {
            "飞书助手找不到你的主目录，无法保存数据。/ Feishu Companion cannot find your home folder to keep its data in.".to_owned()
        }),
    }
}

async fn open(
    launch: &Launch,
    resource_dir: Option<std::path::PathBuf>,
) -> Result<Companion, String> {
    let paths = app_paths(launch)?;
    let data_dir = paths.data_dir.clone();
    let options = OpenOptions {
        memory_keys: launch.ephemeral_keys,
        force_demo: launch.demo,
        feishu_base_url: launch.feishu_base_url.clone(),
        resource_dir,
        python_cache_dir: None,
        agents_port: launch.agents_port,
    };
    Companion::open(paths, options).await.map_err(|e| {
        format!(
            "飞书助手无法打开数据 / Feishu Companion could not open its data ({}): {e}",
            data_dir.display()
        )
    })
}

/// Runs the desktop app: reads the command line, then the event loop until the user quits.
pub fn run() -> anyhow::Result<()> {
    let started = Instant::now();
    let mut args = std::env::args_os();
    // The first argument is the program's own path.
    let _ = args.next();
    let args: Vec<std::ffi::OsString> = args.collect();
    // `feishu-companion mcp`: the stdio relay for connected agents, no window.
    if args.first().is_some_and(|a| a == "mcp") {
        return agents::relay(args[1..].to_vec());
    }
    let launch = match Launch::parse(args, |name| std::env::var_os(name)) {
        Ok(launch) => launch,
        Err(LaunchError::Help) => {
            eprint!("{}", launch::USAGE);
            return Ok(());
        }
        Err(e) => return Err(e).context("reading the command line"),
    };
    let mut builder = tauri::Builder::default();
    // A second launch focuses the running app. A different data folder is a separate app
    // (tests, portable installs), which must not hand itself over to the installed one.
    if launch.data_dir.is_none() {
        builder = builder.plugin(tauri_plugin_single_instance::init(|app, _argv, _cwd| {
            windows::show_main(app)
        }));
    }
    let log = tauri_plugin_log::Builder::new()
        .level(log::LevelFilter::Info)
        // zbus logs every D-Bus call at info, with its arguments.
        .level_for("zbus", log::LevelFilter::Warn)
        .targets([
            tauri_plugin_log::Target::new(tauri_plugin_log::TargetKind::Stdout),
            tauri_plugin_log::Target::new(tauri_plugin_log::TargetKind::LogDir { file_name: None }),
        ])
        .build();
    let window_state = tauri_plugin_window_state::Builder::new()
        // Size and place only: a window saved hidden or minimised must not come back so.
        .with_state_flags(
            tauri_plugin_window_state::StateFlags::SIZE
                | tauri_plugin_window_state::StateFlags::POSITION
                | tauri_plugin_window_state::StateFlags::MAXIMIZED,
        )
        .with_denylist(&[signin::LABEL])
        .build();
    let app = configure(
        builder.plugin(log).plugin(window_state),
        Shell::new(launch, started),
    )
    .build(context())
    .context("starting the window system and the webview")?;
    app.run(|app, event| {
        // The relay must not find a server that is gone (agents-server.json).
        if let tauri::RunEvent::Exit = event
            && let Some(companion) = app.state::<Shell>().companion_now()
        {
            companion.stop_agent_server();
        }
    });
    Ok(())
}
