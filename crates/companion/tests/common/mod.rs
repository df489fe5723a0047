//! What the core's integration tests share: a free redirect port, a data folder with settings for
//! demo mode in a fixed time zone, the core opened on it with keys in memory, and a sign-in
//! played the way the user's browser would (Allow on the emulator's page, then the redirect).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use companion::{AppPaths, Companion, OpenOptions, Settings, SignInStatus, UiEvent};

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The app's folders under `dir`, with settings that leave it in demo mode (a free redirect port,
/// Asia/Shanghai).
pub fn demo_paths(dir: &Path) -> AppPaths {
    let paths = AppPaths::under(dir);
    paths.create().unwrap();
    let mut settings = Settings::default();
    settings.feishu.redirect_port = free_port();
    settings.time_zone = "Asia/Shanghai".into();
    settings.save(&paths.settings_file()).unwrap();
    paths
}

/// The core opened on `paths`, its vault's key in memory.
pub async fn open(paths: AppPaths) -> Companion {
    Companion::open(
        paths,
        OpenOptions {
            memory_keys: true,
            // Any free port: tests run side by side, and never on the user's.
            agents_port: Some(0),
            ..OpenOptions::default()
        },
    )
    .await
    .unwrap()
}

/// The core in demo mode on a fresh folder under `dir`.
pub async fn open_demo(dir: &Path) -> Companion {
    open(demo_paths(dir)).await
}

/// Signs in the way the auth card does and waits for the answer: the scopes granted, and who was
/// signed in before if it was someone else.
pub async fn sign_in(app: &Companion) -> (Vec<String>, Option<String>) {
    sign_in_for(app, Vec::new()).await
}

/// [`sign_in`], asking for `scopes` (as an auth card for a call held for them does).
pub async fn sign_in_for(app: &Companion, scopes: Vec<String>) -> (Vec<String>, Option<String>) {
    let mut events = app.subscribe();
    let ticket = app.begin_sign_in(scopes).await.unwrap();
    let location = emulator::feishu::press_consent(&ticket.url, true)
        .await
        .unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    assert!(reqwest::get(location).await.unwrap().status().is_success());
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match events.recv().await.unwrap() {
                UiEvent::SignIn(SignInStatus::SignedIn {
                    scopes,
                    switched_from,
                    ..
                }) => return (scopes, switched_from),
                UiEvent::SignIn(SignInStatus::Failed { message }) => {
                    panic!("sign-in failed: {message}")
                }
                _ => {}
            }
        }
    })
    .await
    .expect("the sign-in finished")
}

/// The last thing the assistant said in `session`.
pub fn last_text(app: &Companion, session: &str) -> String {
    app.session_events(session)
        .unwrap()
        .iter()
        .rev()
        .find_map(|e| {
            e.content
                .as_ref()
                .filter(|c| c.is_model())
                .map(|c| c.text())
                .filter(|t| !t.is_empty())
        })
        .unwrap_or_default()
}
