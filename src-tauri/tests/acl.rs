//! Which window may call what, through the app's real ACL (its capabilities and every plugin's
//! permissions, compiled in by `tauri::generate_context!`): the main window's page may call the
//! app's commands; the sign-in window, showing a remote page, may call nothing at all.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;

use common::{APP_ORIGIN, app, call, invoke, main};
use feishu_companion::COMMANDS;
use serde_json::{Value, json};
use tauri::Manager as _;

/// The ACL manifests tauri-build resolved for this app: `__app-acl__` (its own commands),
/// `core:*` and each plugin, with every permission and the commands it allows.
const ACL_MANIFESTS: &str = include_str!(concat!(env!("OUT_DIR"), "/acl-manifests.json"));

/// Every command any permission names, as IPC spells it: `app_info`, `plugin:event|listen`,
/// `plugin:opener|open_url`…
fn every_command() -> BTreeSet<String> {
    let manifests: Value = serde_json::from_str(ACL_MANIFESTS).unwrap();
    let mut commands = BTreeSet::new();
    for (key, manifest) in manifests.as_object().unwrap() {
        let prefix = match key.as_str() {
            "__app-acl__" => String::new(),
            core if core.starts_with("core:") => format!("plugin:{}|", &core["core:".len()..]),
            plugin => format!("plugin:{plugin}|"),
        };
        for permission in manifest["permissions"].as_object().into_iter().flatten() {
            let allowed = permission.1["commands"]["allow"].as_array();
            for command in allowed.into_iter().flatten() {
                commands.insert(format!("{prefix}{}", command.as_str().unwrap()));
            }
        }
    }
    commands
}

fn denied(result: &Result<Value, Value>) -> bool {
    matches!(result, Err(Value::String(message)) if message.contains("not allowed"))
}

/// The sign-in window as the shell opens it, on a Feishu authorize page.
fn sign_in_window(
    app: &tauri::App<tauri::test::MockRuntime>,
    url: &str,
) -> tauri::WebviewWindow<tauri::test::MockRuntime> {
    let shell = app.state::<feishu_companion::Shell>();
    feishu_companion::signin::open_window(app.handle(), &shell, url).unwrap()
}

#[test]
fn the_main_window_calls_the_app_s_commands() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());

    let info = call(&app, "app_info", json!({})).expect("app_info is allowed");
    assert_eq!(info["demo"], json!(true));
    assert_eq!(info["model"], json!("Demo"));
    assert_eq!(call(&app, "startup_error", json!({})), Ok(Value::Null));
    // A core plugin permission the capability grants.
    assert_eq!(
        call(&app, "plugin:app|version", json!({})),
        Ok(json!(env!("CARGO_PKG_VERSION")))
    );
    // Arguments arrive in camelCase.
    let session = call(&app, "create_session", json!({})).unwrap();
    let timeline = call(&app, "timeline", json!({"sessionId": session})).unwrap();
    assert_eq!(timeline["session_id"], session);
    assert_eq!(timeline["items"], json!([]));
}

#[test]
fn every_app_command_is_granted_to_the_main_window_and_handled() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    // No arguments: commands that need some fail to deserialise them, and none of the rest
    // does anything a test cannot afford (no sign-in starts without its arguments).
    for command in COMMANDS {
        let result = call(&app, command, json!({}));
        assert!(!denied(&result), "{command} is refused: {result:?}");
        if let Err(Value::String(message)) = &result {
            assert!(
                !message.contains("not found"),
                "{command} is not handled: {message}"
            );
        }
    }
    // What the main window's page is not granted.
    for command in [
        "plugin:opener|open_url",
        "plugin:opener|reveal_item_in_dir",
        "plugin:window|close",
        "plugin:webview|create_webview_window",
        "plugin:window-state|save_window_state",
        "plugin:log|log",
    ] {
        let result = call(&app, command, json!({}));
        assert!(denied(&result), "{command} should be refused: {result:?}");
    }
}

#[test]
fn the_main_window_showing_a_remote_page_calls_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let window = main(&app);
    for command in [
        "app_info",
        "pending",
        "set_app_secret",
        "plugin:event|listen",
    ] {
        let result = invoke(&window, command, json!({}), "https://evil.example/");
        assert!(denied(&result), "{command} from a remote page: {result:?}");
    }
}

#[test]
fn the_sign_in_window_calls_no_command_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let authorize =
        "https://accounts.feishu.cn/open-apis/authen/v1/authorize?client_id=cli_x&state=s";
    let window = sign_in_window(&app, authorize);
    assert_eq!(window.label(), "signin");

    let commands = every_command();
    for command in COMMANDS {
        assert!(commands.contains(*command), "{command} has no permission");
    }
    assert!(commands.contains("plugin:notification|notify"));
    assert!(commands.contains("plugin:opener|open_url"));
    assert!(commands.contains("plugin:event|listen"));
    assert!(
        commands.len() > 100,
        "only {} commands found",
        commands.len()
    );

    // From the page it shows, and from a page claiming the app's own origin.
    for origin in [authorize, APP_ORIGIN, "http://127.0.0.1:9768/callback"] {
        for command in &commands {
            let result = invoke(&window, command, json!({}), origin);
            assert!(
                denied(&result),
                "the sign-in window at {origin} called {command}: {result:?}"
            );
        }
    }
}
