//! The real app (state, commands, plugins, capabilities, embedded UI) on Tauri's mock runtime,
//! with a demo-mode core in a temporary folder, and IPC calls as a window would send them.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use feishu_companion::{Launch, Shell};
use serde_json::{Value, json};
use tauri::ipc::{CallbackFn, InvokeBody};
use tauri::test::{INVOKE_KEY, MockRuntime, get_ipc_response, mock_builder};
use tauri::webview::InvokeRequest;
use tauri::{App, Listener as _, Manager as _, WebviewWindow};

/// The origin of the app's own page on Linux and macOS.
pub const APP_ORIGIN: &str = "tauri://localhost";

/// Builds the app as `run` does (minus the plugins that need a desktop session), opens the
/// main window and starts the core on `dir`, with a free redirect port so tests can sign in
/// side by side.
pub fn app(dir: &Path) -> App<MockRuntime> {
    let paths = companion::AppPaths::under(dir);
    paths.create().unwrap();
    let mut settings = companion::Settings::default();
    settings.feishu.redirect_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    settings.save(&paths.settings_file()).unwrap();

    let launch = Launch {
        data_dir: Some(dir.to_path_buf()),
        ephemeral_keys: true,
        demo: true,
        feishu_base_url: None,
        agents_port: Some(0),
    };
    let shell = Shell::new(launch, Instant::now()).without_native_windows();
    let app = feishu_companion::configure(mock_builder(), shell)
        .build(feishu_companion::context())
        .expect("the app builds with its real context");
    feishu_companion::windows::create_main(app.handle()).unwrap();
    feishu_companion::start(app.handle().clone());
    app
}

/// Invokes `cmd` with `args` from `window`, as a page at `origin` would.
pub fn invoke(
    window: &WebviewWindow<MockRuntime>,
    cmd: &str,
    args: Value,
    origin: &str,
) -> Result<Value, Value> {
    get_ipc_response(
        window,
        InvokeRequest {
            cmd: cmd.into(),
            callback: CallbackFn(0),
            error: CallbackFn(1),
            url: origin.parse().unwrap(),
            body: InvokeBody::Json(args),
            headers: Default::default(),
            invoke_key: INVOKE_KEY.to_string(),
        },
    )
    .map(|body| body.deserialize::<Value>().unwrap())
}

/// Invokes from the main window's own page.
pub fn call(app: &App<MockRuntime>, cmd: &str, args: Value) -> Result<Value, Value> {
    invoke(&main(app), cmd, args, APP_ORIGIN)
}

pub fn main(app: &App<MockRuntime>) -> WebviewWindow<MockRuntime> {
    app.get_webview_window("main")
        .expect("the main window is open")
}

/// Every `companion://event` payload `window` receives, from now on.
pub fn events(window: &WebviewWindow<MockRuntime>) -> mpsc::Receiver<Value> {
    let (tx, rx) = mpsc::channel();
    window.listen("companion://event", move |event| {
        let _ = tx.send(serde_json::from_str(event.payload()).unwrap_or(json!(null)));
    });
    rx
}

/// Waits up to `within` for an event matching `want`, returning it.
pub fn wait_for(
    rx: &mpsc::Receiver<Value>,
    within: Duration,
    want: impl Fn(&Value) -> bool,
) -> Option<Value> {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        match rx.recv_timeout(left) {
            Ok(event) if want(&event) => return Some(event),
            Ok(_) => continue,
            Err(_) => return None,
        }
    }
}

/// Plays the user on the emulator's consent page and delivers its redirect to the listener,
/// as the sign-in window does; returns the callback URL it followed.
pub fn consent(authorize_url: &str) -> String {
    tauri::async_runtime::block_on(async {
        let location = emulator::feishu::press_consent(authorize_url, true)
            .await
            .unwrap();
        let _ = rustls::crypto::ring::default_provider().install_default();
        let page = reqwest::get(&location).await.unwrap();
        assert!(page.status().is_success(), "callback: {}", page.status());
        location
    })
}
