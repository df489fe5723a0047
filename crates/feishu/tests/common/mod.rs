//! Shared by the feishu crate's tests: a browser that presses the emulator's consent button.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::sync::Arc;
use std::time::Duration;

use agent::SystemClock;
use emulator::feishu::{App, FeishuEmulator};
use feishu::{
    AppCredentials, CallbackOutcome, Endpoints, LoopbackListener, MemoryTokenStore, OAuthClient,
    TokenManager, TokenStore,
};
use secrecy::SecretString;

/// A browser that does not follow redirects, so each hop can be checked.
pub fn browser() -> reqwest::Client {
    feishu::oauth::install_crypto_provider();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Opens the authorize page, presses a button, and returns where Feishu redirects.
pub async fn consent(url: &url::Url, decision: &str) -> String {
    emulator::feishu::press_consent(url.as_str(), decision == "allow")
        .await
        .unwrap()
}

pub fn oauth(emulator: &FeishuEmulator, app_id: &str, secret: &str) -> OAuthClient {
    OAuthClient::new(
        Endpoints::single(url::Url::parse(&emulator.base_url()).unwrap()),
        AppCredentials {
            app_id: app_id.into(),
            app_secret: SecretString::from(secret.to_owned()),
        },
    )
    .unwrap()
}

/// Registers `app` (with a fresh loopback redirect), signs in through the real flow (authorize
/// page, consent, redirect, exchange) granting `scopes`, and returns the token manager.
pub async fn sign_in(emulator: &FeishuEmulator, app: App, scopes: &[&str]) -> Arc<TokenManager> {
    sign_in_with_store(emulator, app, scopes, Arc::new(MemoryTokenStore::default())).await
}

/// [`sign_in`], keeping the tokens in `store`.
pub async fn sign_in_with_store(
    emulator: &FeishuEmulator,
    app: App,
    scopes: &[&str],
    store: Arc<dyn TokenStore>,
) -> Arc<TokenManager> {
    let manager = Arc::new(
        TokenManager::new(
            oauth(emulator, &app.app_id, &app.app_secret),
            store,
            Arc::new(SystemClock),
        )
        .with_retry_delay(Duration::from_millis(20)),
    );
    sign_in_again(emulator, app, scopes, &manager).await;
    manager
}

/// Signs `manager` in through the real flow (authorize page, consent, redirect, exchange).
pub async fn sign_in_again(
    emulator: &FeishuEmulator,
    mut app: App,
    scopes: &[&str],
    manager: &TokenManager,
) {
    let listener = LoopbackListener::bind(0).await.unwrap();
    app.redirect_uris.push(listener.redirect_uri());
    emulator.register_app(app.clone());
    let scopes: Vec<String> = scopes.iter().map(|s| (*s).to_owned()).collect();
    let request = manager
        .oauth()
        .begin_sign_in(&scopes, &listener.redirect_uri())
        .unwrap();
    let state = request.state.secret().clone();
    let waiting = tokio::spawn(async move { listener.wait(&state, Duration::from_secs(10)).await });
    let location = consent(&request.url, "allow").await;
    browser().get(&location).send().await.unwrap();
    let CallbackOutcome::Code(code) = waiting.await.unwrap().unwrap() else {
        panic!("expected a code")
    };
    manager.complete_sign_in(&request, &code).await.unwrap();
}
