//! The shell's own flows on the mock runtime: the core's events reach the main window (and no
//! other), a sign-in in the embedded window completes through the loopback listener, and a
//! sign-in window closed by hand cancels the sign-in and tells the UI.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{app, call, consent, events, main, wait_for};
use feishu_companion::Shell;
use feishu_companion::signin::{CLOSED_MESSAGE, LABEL, SignInPolicy, navigation_allowed};
use serde_json::{Value, json};
use tauri::Manager as _;

const WAIT: Duration = Duration::from_secs(20);

fn is_sign_in(event: &Value, state: &str) -> bool {
    event["type"] == "sign_in" && event["status"]["state"] == state
}

#[test]
fn the_core_s_events_reach_the_main_window_only() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let to_main = events(&main(&app));
    // Another window listening for the same event hears nothing of it.
    let shell = app.state::<Shell>();
    let other = feishu_companion::signin::open_window(
        app.handle(),
        &shell,
        "https://accounts.feishu.cn/open-apis/authen/v1/authorize",
    )
    .unwrap();
    let to_other = events(&other);

    let session = call(&app, "create_session", json!({})).unwrap();
    let turn = call(
        &app,
        "send_message",
        json!({"sessionId": session, "text": "帮我约个产品评审会"}),
    )
    .unwrap();
    assert_eq!(turn["status"], "suspended", "{turn}");

    let held = wait_for(&to_main, WAIT, |e| {
        e["type"] == "call" && e["call"]["pending"] == true
    })
    .expect("the held call reached the main window");
    assert_eq!(held["call"]["session_id"], session);
    let pending = call(&app, "pending", json!({})).unwrap();
    assert_eq!(pending.as_array().map(Vec::len), Some(1));
    assert_eq!(pending[0]["call_id"], held["call"]["call_id"]);
    assert!(
        wait_for(&to_other, Duration::from_millis(500), |_| true).is_none(),
        "the sign-in window heard an event"
    );
}

#[test]
fn a_sign_in_in_the_embedded_window_completes_through_the_listener() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let heard = events(&main(&app));

    let ticket = call(&app, "sign_in", json!({"scopes": [], "embedded": true})).unwrap();
    let url = ticket["url"].as_str().unwrap();
    let redirect = ticket["redirect_uri"].as_str().unwrap();
    let window = app
        .get_webview_window(LABEL)
        .expect("the sign-in window opened");
    assert_eq!(window.url().unwrap().as_str(), url);
    assert!(wait_for(&heard, WAIT, |e| is_sign_in(e, "waiting")).is_some());

    // The window's policy lets the page and its redirect through.
    let policy = SignInPolicy::new(url, redirect).unwrap();
    assert!(navigation_allowed(&url.parse().unwrap(), &policy));
    let callback = consent(url);
    assert!(callback.starts_with(redirect), "{callback}");
    assert!(navigation_allowed(&callback.parse().unwrap(), &policy));

    let signed_in = wait_for(&heard, WAIT, |e| is_sign_in(e, "signed_in")).expect("signed in");
    assert_eq!(signed_in["status"]["name"], "林晓");
    let account = call(&app, "account", json!({})).unwrap();
    assert_eq!(account["name"], "林晓");
    // Finished: nothing waits to be opened in the browser any more.
    assert!(call(&app, "open_sign_in_in_browser", json!({})).is_err());

    // The shell closes the window itself now; its closing is not the user cancelling.
    feishu_companion::signin::on_destroyed(app.handle(), &app.state::<Shell>());
    assert!(
        wait_for(&heard, Duration::from_millis(500), |e| is_sign_in(
            e, "failed"
        ))
        .is_none(),
        "closing the finished sign-in's window reported a failure"
    );
}

#[test]
fn closing_the_sign_in_window_by_hand_cancels_the_sign_in() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let heard = events(&main(&app));

    let ticket = call(&app, "sign_in", json!({"scopes": [], "embedded": true})).unwrap();
    let port = ticket["redirect_uri"]
        .as_str()
        .and_then(|r| url::Url::parse(r).ok())
        .and_then(|r| r.port())
        .unwrap();
    assert!(app.get_webview_window(LABEL).is_some());
    // While it waits, the page can also go to the system browser (not pressed here: it would
    // open one), and a second sign-in reuses the same window.
    let again = call(&app, "sign_in", json!({"scopes": [], "embedded": true})).unwrap();
    assert_eq!(again["redirect_uri"], ticket["redirect_uri"]);

    feishu_companion::signin::on_destroyed(app.handle(), &app.state::<Shell>());
    let failed = wait_for(&heard, WAIT, |e| is_sign_in(e, "failed")).expect("the UI is told");
    assert_eq!(failed["status"]["message"], CLOSED_MESSAGE);
    let waiting = call(&app, "open_sign_in_in_browser", json!({}));
    assert!(
        matches!(&waiting, Err(e) if e["en"].as_str().is_some_and(|m| m.contains("No sign-in is waiting"))),
        "{waiting:?}"
    );
    // The core stopped listening: the redirect port is free again.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "port {port} is still held"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn reveal_path_shows_only_what_export_audit_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let refused = call(&app, "reveal_path", json!({"path": "/etc/passwd"}));
    assert!(
        matches!(&refused, Err(e) if e["code"] == "refused"
            && e["en"].as_str().is_some_and(|m| m.contains("Only a file exported"))
            && e["zh"].as_str().is_some_and(|m| m.contains("只能打开本次导出的文件"))),
        "{refused:?}"
    );
    let path = call(&app, "export_audit", json!({"query": {}, "format": "csv"})).unwrap();
    let path = path.as_str().unwrap();
    assert!(
        std::fs::read_to_string(path)
            .unwrap()
            .starts_with("time,kind,actor")
    );
    std::fs::remove_file(path).unwrap();
}

#[test]
fn a_core_that_cannot_open_is_reported_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("data")).unwrap();
    let database = dir.path().join("data").join("companion.db");
    std::fs::write(&database, [0x5a_u8; 4096]).unwrap();
    let app = app(dir.path());

    let error = call(&app, "startup_error", json!({})).unwrap();
    let message = error.as_str().expect("startup_error names the problem");
    assert!(
        message.contains(&database.display().to_string()),
        "{message}"
    );
    // Every other command answers the same, rather than hang or crash.
    for command in ["app_info", "pending"] {
        let answer = call(&app, command, json!({})).expect_err(command);
        assert_eq!(answer["zh"], error, "{command}");
        assert_eq!(answer["en"], error, "{command}");
    }
    // The damaged file is left for the user to rescue.
    assert_eq!(std::fs::read(&database).unwrap(), vec![0x5a_u8; 4096]);
}
