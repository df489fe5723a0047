//! Sign-in end to end against the Feishu emulator: a plain HTTP client plays the browser.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use agent::SystemClock;
use emulator::feishu::{App, FeishuEmulator};
use feishu::tokens::MemoryTokenStore;
use feishu::{
    AppCredentials, CallbackOutcome, Endpoints, ListenerError, LoopbackListener, OAuthClient,
    SignInRequest, TokenError, TokenManager, TokenStore,
};
use secrecy::{ExposeSecret as _, SecretString};

const APP_ID: &str = "cli_test_app";
const SECRET: &str = "app-secret-7f3a9c";

struct Setup {
    emulator: FeishuEmulator,
    manager: Arc<TokenManager>,
    store: Arc<MemoryTokenStore>,
}

async fn setup(listener: &LoopbackListener) -> Setup {
    let emulator = FeishuEmulator::start().await.unwrap();
    emulator.register_app(App {
        app_id: APP_ID.into(),
        app_secret: SECRET.into(),
        redirect_uris: vec![listener.redirect_uri()],
        enabled_scopes: vec!["calendar:calendar".into(), "task:task:read".into()],
    });
    let store = Arc::new(MemoryTokenStore::default());
    let manager = Arc::new(
        TokenManager::new(oauth(&emulator), store.clone(), Arc::new(SystemClock))
            .with_retry_delay(Duration::from_millis(20)),
    );
    Setup {
        emulator,
        manager,
        store,
    }
}

fn oauth(emulator: &FeishuEmulator) -> OAuthClient {
    OAuthClient::new(
        Endpoints::single(url::Url::parse(&emulator.base_url()).unwrap()),
        AppCredentials {
            app_id: APP_ID.into(),
            app_secret: SecretString::from(SECRET.to_owned()),
        },
    )
    .unwrap()
}

use common::{browser, consent};

#[tokio::test]
async fn the_whole_sign_in_lands_a_token_and_user_info_answers() {
    let listener = LoopbackListener::bind(0).await.unwrap();
    let s = setup(&listener).await;
    let request = s
        .manager
        .oauth()
        .begin_sign_in(&["calendar:calendar".into()], &listener.redirect_uri())
        .unwrap();
    let state = request.state.secret().clone();
    let waiting =
        tokio::spawn(async move { listener.callback(&state, Duration::from_secs(10)).await });
    let location = consent(&request.url, "allow").await;
    let landing = tokio::spawn(async move { browser().get(&location).send().await.unwrap() });
    let callback = waiting.await.unwrap().unwrap();
    let CallbackOutcome::Code(code) = callback.outcome.clone() else {
        panic!("expected a code")
    };
    // The browser's page waits until the code is exchanged: "signed in" only once it is so.
    let account = s.manager.complete_sign_in(&request, &code).await.unwrap();
    callback.answer(feishu::listener::Answer::SignedIn).await;
    let landing = landing.await.unwrap();
    assert_eq!(landing.status(), 200);
    assert!(landing.text().await.unwrap().contains("登录成功"));
    assert_eq!(account.user.as_ref().unwrap().name, "林晓");
    assert_eq!(account.scopes, ["calendar:calendar", "offline_access"]);
    let stored = s.store.load().unwrap().unwrap();
    assert!(stored.refresh_token.is_some());
    let token = s.manager.access_token().await.unwrap();
    assert_eq!(token.expose_secret(), stored.access_token.expose_secret());
    assert!(
        s.emulator
            .token_has_scope(token.expose_secret(), "calendar:calendar")
    );
    let me = s.manager.oauth().user_info(&token).await.unwrap();
    assert_eq!(me.open_id, "ou_demo_linxiao");
    // Asking again only for what is missing: grants accumulate.
    let missing = s
        .manager
        .missing_scopes(&["calendar:calendar".into(), "task:task:read".into()])
        .await
        .unwrap();
    assert_eq!(missing, ["task:task:read"]);
}

#[tokio::test]
async fn a_wrong_state_is_refused_and_the_listener_keeps_waiting_until_the_time_runs_out() {
    let listener = LoopbackListener::bind(0).await.unwrap();
    let uri = listener.redirect_uri();
    let waiting = tokio::spawn(async move {
        listener
            .wait("the-right-state", Duration::from_millis(600))
            .await
    });
    let forged = browser()
        .get(format!("{uri}?code=abc&state=the-wrong-state"))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 400);
    let missing = browser()
        .get(format!("{uri}?code=abc"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 400);
    assert!(matches!(
        waiting.await.unwrap(),
        Err(ListenerError::Timeout(_))
    ));
}

#[tokio::test]
async fn a_wrong_host_is_refused_and_a_valid_callback_still_lands() {
    let listener = LoopbackListener::bind(0).await.unwrap();
    let uri = listener.redirect_uri();
    let port = listener.port();
    let waiting = tokio::spawn(async move { listener.wait("s1", Duration::from_secs(5)).await });
    let rebound = browser()
        .get(format!("{uri}?code=abc&state=s1"))
        .header("host", format!("evil.example:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 400);
    let ok = browser()
        .get(format!("{uri}?code=the-code&state=s1"))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(
        waiting.await.unwrap().unwrap(),
        CallbackOutcome::Code("the-code".into())
    );
}

#[tokio::test]
async fn denying_consent_reaches_the_app_as_access_denied() {
    let listener = LoopbackListener::bind(0).await.unwrap();
    let s = setup(&listener).await;
    let request = s
        .manager
        .oauth()
        .begin_sign_in(&[], &listener.redirect_uri())
        .unwrap();
    let state = request.state.secret().clone();
    let waiting = tokio::spawn(async move { listener.wait(&state, Duration::from_secs(10)).await });
    let location = consent(&request.url, "deny").await;
    let landing = browser().get(&location).send().await.unwrap();
    assert!(landing.text().await.unwrap().contains("取消"));
    assert_eq!(
        waiting.await.unwrap().unwrap(),
        CallbackOutcome::Denied {
            error: "access_denied".into()
        }
    );
    assert!(s.store.load().unwrap().is_none());
}

/// Runs the browser part and returns the code without exchanging it.
async fn code_for(
    s: &Setup,
    listener: LoopbackListener,
    scopes: &[String],
) -> (SignInRequest, String) {
    let request = s
        .manager
        .oauth()
        .begin_sign_in(scopes, &listener.redirect_uri())
        .unwrap();
    let state = request.state.secret().clone();
    let waiting = tokio::spawn(async move { listener.wait(&state, Duration::from_secs(10)).await });
    let location = consent(&request.url, "allow").await;
    browser().get(&location).send().await.unwrap();
    let CallbackOutcome::Code(code) = waiting.await.unwrap().unwrap() else {
        panic!()
    };
    (request, code)
}

#[tokio::test]
async fn a_replayed_code_and_a_wrong_verifier_are_refused() {
    let listener = LoopbackListener::bind(0).await.unwrap();
    let redirect = listener.redirect_uri();
    let s = setup(&listener).await;
    let (request, code) = code_for(&s, listener, &[]).await;

    // A verifier from another sign-in: PKCE fails (20049) and the code stays usable.
    let other = s.manager.oauth().begin_sign_in(&[], &redirect).unwrap();
    let err = s
        .manager
        .oauth()
        .exchange_code(&code, &other.verifier, &redirect)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(20049));

    s.manager.complete_sign_in(&request, &code).await.unwrap();
    let replay = s
        .manager
        .complete_sign_in(&request, &code)
        .await
        .unwrap_err();
    assert!(
        matches!(replay, TokenError::SignInAgain(ref m) if m.contains("20065")),
        "{replay}"
    );
}

#[tokio::test]
async fn an_unregistered_redirect_uri_is_refused_on_the_authorize_page() {
    let listener = LoopbackListener::bind(0).await.unwrap();
    let s = setup(&listener).await;
    let request = s
        .manager
        .oauth()
        .begin_sign_in(&[], "http://127.0.0.1:1/callback")
        .unwrap();
    let page = browser().get(request.url.clone()).send().await.unwrap();
    assert_eq!(page.status(), 400);
    assert!(page.text().await.unwrap().contains("20029"));
    // And the token endpoint checks the redirect URI matches the authorize request (20071).
    let (request, code) = code_for(&s, listener, &[]).await;
    let err = s
        .manager
        .oauth()
        .exchange_code(&code, &request.verifier, "http://127.0.0.1:2/callback")
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(20071));
}

async fn signed_in(ttl: Duration) -> (Setup, ()) {
    let listener = LoopbackListener::bind(0).await.unwrap();
    let s = setup(&listener).await;
    s.emulator.set_access_token_ttl(ttl);
    let (request, code) = code_for(&s, listener, &["calendar:calendar".into()]).await;
    s.manager.complete_sign_in(&request, &code).await.unwrap();
    (s, ())
}

#[tokio::test]
async fn two_concurrent_refreshes_reach_feishu_once() {
    // A token living one minute is inside the five-minute margin: the next use refreshes it.
    let (s, ()) = signed_in(Duration::from_secs(60)).await;
    // The refreshed token lives long, so only the first caller has a reason to refresh.
    s.emulator.set_access_token_ttl(Duration::from_secs(7200));
    s.emulator.set_token_delay(Duration::from_millis(150));
    let before = s.store.load().unwrap().unwrap();
    let (a, b) = tokio::join!(s.manager.access_token(), s.manager.access_token());
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.expose_secret(), b.expose_secret());
    assert_ne!(a.expose_secret(), before.access_token.expose_secret());
    assert_eq!(
        s.emulator
            .count("/open-apis/authen/v2/oauth/token", Some("refresh_token")),
        1
    );
    // The rotated refresh token was saved.
    let after = s.store.load().unwrap().unwrap();
    assert_ne!(
        after.refresh_token.unwrap().expose_secret(),
        before.refresh_token.unwrap().expose_secret()
    );
}

#[tokio::test]
async fn an_access_token_rejected_mid_call_is_refreshed_once_for_all_callers() {
    let (s, ()) = signed_in(Duration::from_secs(7200)).await;
    let stale = s.manager.access_token().await.unwrap();
    s.emulator.expire_access_tokens();
    assert!(s.manager.oauth().user_info(&stale).await.is_err());
    let (a, b) = tokio::join!(
        s.manager.refresh_after_rejection(&stale),
        s.manager.refresh_after_rejection(&stale)
    );
    assert_eq!(a.unwrap().expose_secret(), b.unwrap().expose_secret());
    assert_eq!(
        s.emulator
            .count("/open-apis/authen/v2/oauth/token", Some("refresh_token")),
        1
    );
    let fresh = s.manager.access_token().await.unwrap();
    assert_eq!(
        s.manager.oauth().user_info(&fresh).await.unwrap().name,
        "林晓"
    );
}

#[tokio::test]
async fn a_transient_server_error_is_retried() {
    let (s, ()) = signed_in(Duration::from_secs(60)).await;
    s.emulator.fail_next_token_requests(1);
    s.manager.access_token().await.unwrap();
    assert_eq!(
        s.emulator
            .count("/open-apis/authen/v2/oauth/token", Some("refresh_token")),
        2
    );
}

#[tokio::test]
async fn a_reused_or_revoked_refresh_token_ends_the_sign_in() {
    let (s, ()) = signed_in(Duration::from_secs(60)).await;
    let old = s.store.load().unwrap().unwrap().refresh_token.unwrap();
    s.manager.access_token().await.unwrap();
    // Using the rotated-away refresh token again is refused (20073).
    let reused = s.manager.oauth().refresh(&old).await.unwrap_err();
    assert_eq!(reused.code(), Some(20073));
    // A revoked one ends the sign-in and forgets the tokens.
    s.emulator.revoke_refresh_tokens();
    s.emulator.expire_access_tokens();
    let stale = s.store.load().unwrap().unwrap().access_token;
    let err = s.manager.refresh_after_rejection(&stale).await.unwrap_err();
    assert!(
        matches!(err, TokenError::SignInAgain(ref m) if m.contains("20064")),
        "{err}"
    );
    assert!(s.store.load().unwrap().is_none());
    assert!(matches!(
        s.manager.access_token().await,
        Err(TokenError::NotSignedIn)
    ));
}

#[test]
fn pkce_matches_rfc_7636_appendix_b() {
    let verifier =
        oauth2::PkceCodeVerifier::new("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk".to_owned());
    let challenge = oauth2::PkceCodeChallenge::from_code_verifier_sha256(&verifier);
    assert_eq!(
        challenge.as_str(),
        "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    );
    assert_eq!(challenge.method().as_str(), "S256");
}

#[tokio::test]
async fn the_listener_answers_on_127_0_0_1_only() {
    let listener = LoopbackListener::bind(0).await.unwrap();
    assert_eq!(
        listener.local_addr().unwrap().ip(),
        std::net::Ipv4Addr::LOCALHOST
    );
    let port = listener.port();
    let waiting = tokio::spawn(async move { listener.wait("x", Duration::from_secs(2)).await });
    // Another loopback address on this machine: a socket bound to 0.0.0.0 would accept this.
    let other = tokio::net::TcpStream::connect(("127.0.0.2", port)).await;
    assert!(other.is_err(), "reachable on 127.0.0.2");
    let ok = tokio::net::TcpStream::connect(("127.0.0.1", port)).await;
    assert!(ok.is_ok());
    waiting.abort();
}

#[tokio::test]
async fn a_busy_port_names_the_port_and_the_setting() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let err = LoopbackListener::bind(port).await.unwrap_err();
    assert!(matches!(err, ListenerError::PortBusy { port: p } if p == port));
    let message = err.to_string();
    assert!(
        message.contains(&port.to_string()) && message.contains("Redirect port"),
        "{message}"
    );
}

#[tokio::test]
async fn the_port_is_free_again_after_the_callback() {
    let listener = LoopbackListener::bind(0).await.unwrap();
    let port = listener.port();
    let uri = listener.redirect_uri();
    let waiting = tokio::spawn(async move { listener.wait("st", Duration::from_secs(5)).await });
    browser()
        .get(format!("{uri}?code=c&state=st"))
        .send()
        .await
        .unwrap();
    waiting.await.unwrap().unwrap();
    assert!(LoopbackListener::bind(port).await.is_ok());
}

/// Captures tracing output for one test.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn no_secret_is_ever_logged_or_shown() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let (s, ()) = signed_in(Duration::from_secs(60)).await;
    s.manager.access_token().await.unwrap();
    s.emulator.revoke_refresh_tokens();
    let stored = s.store.load().unwrap().unwrap();
    let err = s
        .manager
        .refresh_after_rejection(&stored.access_token)
        .await
        .unwrap_err();
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("signed in to Feishu"),
        "the capture works: {logs}"
    );
    let shown = format!(
        "{logs}\n{err}\n{err:?}\n{stored:?}\n{:?}",
        s.manager.account().await.unwrap()
    );
    for secret in [
        SECRET,
        stored.access_token.expose_secret(),
        stored.refresh_token.as_ref().unwrap().expose_secret(),
    ] {
        assert!(!shown.contains(secret), "a secret leaked");
    }
}

#[tokio::test]
async fn sign_in_in_one_call_with_the_page_opened_by_a_callback() {
    let probe = LoopbackListener::bind(0).await.unwrap();
    let port = probe.port();
    let s = setup(&probe).await;
    drop(probe);
    let (opened, mut url) = tokio::sync::mpsc::unbounded_channel();
    let manager = s.manager.clone();
    let signing_in = tokio::spawn(async move {
        manager
            .sign_in(
                &["task:task:read".into()],
                port,
                Duration::from_secs(10),
                |u| opened.send(u.clone()).unwrap(),
            )
            .await
    });
    let authorize = url.recv().await.unwrap();
    let page = browser()
        .get(authorize.clone())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("task:task:read"));
    let location = consent(&authorize, "allow").await;
    browser().get(&location).send().await.unwrap();
    let account = signing_in.await.unwrap().unwrap();
    assert!(account.scopes.contains(&"task:task:read".to_owned()));
    assert_eq!(
        s.emulator.granted_scopes(APP_ID),
        ["task:task:read", "offline_access"]
    );
}

#[tokio::test]
async fn the_sign_in_lives_encrypted_in_the_vault_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("companion.db");
    let keys = store::vault::MemoryKeySource::new();
    let open_vault = |keys: &store::vault::MemoryKeySource| {
        let db = Arc::new(store::Store::open(&path).unwrap());
        Arc::new(store::Vault::open(db, Box::new(keys.clone())).unwrap())
    };
    let listener = LoopbackListener::bind(0).await.unwrap();
    let s = setup(&listener).await;
    let vault_store = Arc::new(feishu::VaultTokenStore::new(open_vault(&keys), APP_ID));
    let manager = TokenManager::new(oauth(&s.emulator), vault_store, Arc::new(SystemClock));
    let (request, code) = code_for(&s, listener, &["calendar:calendar".into()]).await;
    manager.complete_sign_in(&request, &code).await.unwrap();
    let token = manager.access_token().await.unwrap();
    drop(manager);

    // Nothing readable on disk.
    let mut on_disk = std::fs::read(&path).unwrap();
    on_disk.extend(std::fs::read(dir.path().join("companion.db-wal")).unwrap_or_default());
    let needle = token.expose_secret().as_bytes();
    assert!(
        !on_disk.windows(needle.len()).any(|w| w == needle),
        "the token is on disk in the clear"
    );

    // A restart (same master key) finds the sign-in.
    let again = TokenManager::new(
        oauth(&s.emulator),
        Arc::new(feishu::VaultTokenStore::new(open_vault(&keys), APP_ID)),
        Arc::new(SystemClock),
    );
    assert_eq!(
        again.access_token().await.unwrap().expose_secret(),
        token.expose_secret()
    );
    assert_eq!(
        again.account().await.unwrap().unwrap().user.unwrap().name,
        "林晓"
    );
    again.sign_out().await.unwrap();
    assert!(matches!(
        again.access_token().await,
        Err(TokenError::NotSignedIn)
    ));
}
