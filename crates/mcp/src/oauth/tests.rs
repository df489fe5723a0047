//! The sign-in against a fake authorization server: one refresh for many callers, the rotated
//! refresh token in the store before its access token goes out, a token the store cannot keep
//! never used, and no token or secret in any log line or `Debug`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent::{ToolOutcome, ToolReturn};
use async_trait::async_trait;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use rmcp::transport::auth::StoredCredentials;
use serde_json::json;

use super::store::{Client, Saved};
use super::*;

const SECRET: &str = "client-secret-Zq";

/// The fake authorization server's state: how many refreshes it made, and the refresh token
/// it accepts now (it rotates them).
struct Fake {
    base: String,
    refreshes: AtomicUsize,
    current: Mutex<String>,
}

fn form(text: &str) -> BTreeMap<String, String> {
    reqwest::Url::parse(&format!("http://x/?{text}"))
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect()
}

async fn token(State(fake): State<Arc<Fake>>, body: String) -> Response {
    let body = form(&body);
    let n = match body.get("grant_type").map(String::as_str) {
        Some("authorization_code") => 0,
        Some("refresh_token") => {
            // Slow enough that callers who did not wait for this refresh would make their own.
            tokio::time::sleep(Duration::from_millis(150)).await;
            if body.get("refresh_token") != Some(&fake.current.lock().unwrap().clone()) {
                return (
                    StatusCode::BAD_REQUEST,
                    axum::Json(json!({"error": "invalid_grant"})),
                )
                    .into_response();
            }
            fake.refreshes.fetch_add(1, Ordering::SeqCst) + 1
        }
        _ => return StatusCode::BAD_REQUEST.into_response(),
    };
    let refresh = format!("refresh-{n}-Zq");
    *fake.current.lock().unwrap() = refresh.clone();
    axum::Json(
        json!({"access_token": format!("access-{n}-Zq"), "token_type": "Bearer",
        "expires_in": 3600, "refresh_token": refresh}),
    )
    .into_response()
}

async fn authorize(RawQuery(query): RawQuery) -> Response {
    let query = form(&query.unwrap_or_default());
    let back = format!(
        "{}?code=code-Zq&state={}",
        query["redirect_uri"], query["state"]
    );
    (StatusCode::FOUND, [(header::LOCATION, back)]).into_response()
}

/// Starts the fake; the MCP server's URL is `<base>/mcp`.
async fn fake() -> Arc<Fake> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let fake = Arc::new(Fake {
        base: base.clone(),
        refreshes: AtomicUsize::new(0),
        current: Mutex::new("refresh-0-Zq".to_owned()),
    });
    let prm = json!({"resource": format!("{base}/mcp"), "authorization_servers": [base]});
    let asm = json!({"issuer": base, "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"), "registration_endpoint": format!("{base}/register"),
        "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["client_secret_post"]});
    let app = Router::new()
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(move || async move { axum::Json(prm) }),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            get(move || async move { axum::Json(asm) }),
        )
        .route(
            "/register",
            post(|| async {
                let client = json!({"client_id": "fake-client", "client_secret": SECRET,
                    "redirect_uris": ["http://127.0.0.1:9/cb"]});
                (StatusCode::CREATED, axum::Json(client))
            }),
        )
        .route("/authorize", get(authorize))
        .route("/token", post(token))
        .with_state(fake.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    fake
}

/// A store that keeps what it is given and when, or refuses to keep anything.
#[derive(Default)]
struct Recording {
    inner: MemoryTokenStore,
    saves: Mutex<Vec<(Instant, String)>>,
    refuse: bool,
}

#[async_trait]
impl TokenStore for Recording {
    async fn load(&self, id: &str) -> Result<Option<TokenBlob>, StoreError> {
        self.inner.load(id).await
    }

    async fn save(&self, id: &str, blob: TokenBlob) -> Result<(), StoreError> {
        if self.refuse {
            return Err(StoreError("the vault is locked".into()));
        }
        let text = blob.expose().to_owned();
        self.inner.save(id, blob).await?;
        self.saves.lock().unwrap().push((Instant::now(), text));
        Ok(())
    }

    async fn clear(&self, id: &str) -> Result<(), StoreError> {
        self.inner.clear(id).await
    }
}

/// A store holding a sign-in whose access token expires in ten seconds.
async fn expiring_store(refuse: bool) -> Arc<Recording> {
    let credentials = serde_json::from_value(json!({
        "client_id": "fake-client",
        "token_response": {"access_token": "access-0-Zq", "token_type": "bearer",
            "expires_in": 3600, "refresh_token": "refresh-0-Zq"},
        "granted_scopes": [],
        "token_received_at": super::token::now() - 3590,
    }))
    .unwrap();
    let saved = Saved {
        client: Some(Client {
            client_id: "fake-client".into(),
            client_secret: Some(SECRET.into()),
            redirect_uri: "http://127.0.0.1:9/cb".into(),
        }),
        credentials: Some(credentials),
        requested: Vec::new(),
    };
    let store = Recording::default();
    let blob = TokenBlob::new(serde_json::to_string(&saved).unwrap());
    store.inner.save("srv", blob).await.unwrap();
    Arc::new(Recording { refuse, ..store })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_callers_wait_for_one_refresh_whose_rotated_token_is_stored_before_it_is_used() {
    let fake = fake().await;
    let store = expiring_store(false).await;
    let oauth = Arc::new(McpOAuth::new(
        "srv",
        &format!("{}/mcp", fake.base),
        store.clone(),
    ));
    let callers: Vec<_> = (0..8)
        .map(|_| {
            let oauth = oauth.clone();
            tokio::spawn(async move {
                let headers = oauth.headers("t").await.unwrap();
                (Instant::now(), headers["Authorization"].clone())
            })
        })
        .collect();
    let mut answers = Vec::new();
    for caller in callers {
        answers.push(caller.await.unwrap());
    }
    assert_eq!(fake.refreshes.load(Ordering::SeqCst), 1, "one refresh");
    assert!(
        answers.iter().all(|(_, h)| h == "Bearer access-1-Zq"),
        "{answers:?}"
    );
    let saves = store.saves.lock().unwrap().clone();
    assert_eq!(saves.len(), 1);
    let (stored_at, blob) = &saves[0];
    assert!(blob.contains("refresh-1-Zq") && !blob.contains("refresh-0-Zq"));
    assert!(
        answers.iter().all(|(at, _)| stored_at <= at),
        "stored before use"
    );
    // Fresh now: used as it is.
    assert_eq!(
        oauth.headers("t").await.unwrap()["Authorization"],
        "Bearer access-1-Zq"
    );
    assert_eq!(fake.refreshes.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_refreshed_token_the_store_cannot_keep_is_not_used() {
    let fake = fake().await;
    let oauth = McpOAuth::new(
        "srv",
        &format!("{}/mcp", fake.base),
        expiring_store(true).await,
    );
    let Err(ToolReturn::Result(result)) = oauth.headers("t").await else {
        panic!("a token went out that is not in the store");
    };
    // Not the user's to fix by signing in: the next call tries again.
    assert_eq!(result.outcome, ToolOutcome::Failed);
    let text = agent::coerce_tool_result(result).0;
    assert!(
        text.contains("could not renew") && text.contains("vault is locked"),
        "{text}"
    );
}

/// Everything written to the log.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn no_token_or_secret_reaches_a_log_line_or_a_debug() {
    let log = Capture::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    // This test's runtime has one thread, so everything it runs logs here.
    let _logging = tracing::subscriber::set_default(subscriber);

    let fake = fake().await;
    let store = Arc::new(MemoryTokenStore::default());
    let oauth = McpOAuth::new("srv", &format!("{}/mcp", fake.base), store.clone());
    assert!(oauth.headers("t").await.unwrap().is_empty(), "never asked");
    let challenge = format!(
        r#"Bearer resource_metadata="{}/.well-known/oauth-protected-resource/mcp""#,
        fake.base
    );
    let Some(ToolReturn::Result(held)) = oauth.on_challenge("t", &challenge).await else {
        panic!("a 401 holds the call");
    };
    assert_eq!(held.outcome, ToolOutcome::NeedsUserAuth);
    assert!(
        oauth.headers("t").await.is_err(),
        "asked now: held until signed in"
    );

    let sign_in = oauth.begin("http://127.0.0.1:9/cb").await.unwrap();
    crate::http::install_crypto();
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let page = browser.get(&sign_in.authorize_url).send().await.unwrap();
    let back = page.headers()[header::LOCATION]
        .to_str()
        .unwrap()
        .to_owned();
    oauth.complete(&back, &sign_in.state).await.unwrap();
    assert_eq!(
        oauth.headers("t").await.unwrap()["Authorization"],
        "Bearer access-0-Zq"
    );
    // The server refuses it: renewed once, without the user.
    assert!(oauth.on_challenge("t", &challenge).await.is_none());
    assert_eq!(
        oauth.headers("t").await.unwrap()["Authorization"],
        "Bearer access-1-Zq"
    );

    let blob = store.load("srv").await.unwrap().unwrap();
    assert!(blob.expose().contains("refresh-1-Zq") && blob.expose().contains(SECRET));
    let debug = format!(
        "{oauth:?} {sign_in:?} {blob:?} {:?}",
        oauth.vault.saved().await.is_ok()
    );
    let log = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    assert!(
        log.contains("signed in to the MCP server"),
        "the log was captured: {log}"
    );
    // Not among them: the authorization code, which rmcp logs at DEBUG ("start exchange code
    // for token") as it spends it; it is single-use, and useless without the PKCE verifier.
    for secret in [
        "access-0-Zq",
        "access-1-Zq",
        "refresh-0-Zq",
        "refresh-1-Zq",
        SECRET,
    ] {
        assert!(!log.contains(secret), "{secret} in the log:\n{log}");
        assert!(!debug.contains(secret), "{secret} in a Debug: {debug}");
    }
}

#[test]
fn a_token_is_refreshed_a_minute_ahead_or_at_half_a_short_life() {
    let credentials = |lifetime: u64, received: u64| -> StoredCredentials {
        serde_json::from_value(json!({"client_id": "c", "token_received_at": received,
            "token_response": {"access_token": "a", "token_type": "bearer", "expires_in": lifetime}}))
        .unwrap()
    };
    let hour = credentials(3600, 1000);
    assert!(!super::token::expiring(&hour, 1000 + 3600 - 61));
    assert!(super::token::expiring(&hour, 1000 + 3600 - 59));
    let short = credentials(40, 1000);
    assert!(!super::token::expiring(&short, 1000 + 19));
    assert!(super::token::expiring(&short, 1000 + 21));
}

#[test]
fn the_browsers_answer_is_read_for_its_code_and_checked_for_its_state() {
    let read = super::sign_in::read_callback;
    assert_eq!(
        read(
            "http://127.0.0.1:9/cb?code=abc&state=s1&iss=https%3A%2F%2Fas",
            "s1"
        )
        .unwrap(),
        ("abc".to_owned(), Some("https://as".to_owned()))
    );
    assert_eq!(read(" abc ", "s1").unwrap(), ("abc".to_owned(), None));
    assert!(matches!(
        read("http://127.0.0.1:9/cb?code=abc&state=other", "s1"),
        Err(OAuthError::UnknownState)
    ));
    assert!(matches!(
        read("http://127.0.0.1:9/cb?error=access_denied&error_description=No+thanks", "s1"),
        Err(OAuthError::Denied(why)) if why == "No thanks"
    ));
}
