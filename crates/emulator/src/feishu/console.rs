//! What a tenant's admin and the app's developer set in Feishu's consoles, as far as sign-in is
//! concerned: whether the app is published, enabled and available to the user, and whether the
//! tenant signs in through its own identity provider (enterprise single sign-on). Tests set
//! these through [`super::FeishuEmulator`] or `POST /_emulator/apps/{app_id}` and
//! `POST /_emulator/identity_provider`; the authorize page then fails, or detours, as Feishu's
//! does. Also a stand-in identity provider on another loopback port, and an open redirector, for
//! testing where the sign-in window may go.

use std::collections::{HashMap, HashSet};
use std::net::{Ipv4Addr, SocketAddr};

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::Shared;

/// Where an app stands for the signed-in user, as the authorize page sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AppRelease {
    /// Published, enabled, and available to the user.
    #[default]
    Available,
    /// Created but no version published (so not installed in the tenant): 20009.
    Unpublished,
    /// Disabled (停用) by the developer or the admin: 20069.
    Disabled,
    /// Published, but the user is outside its availability range (可用范围): 20010.
    UserOutsideAvailability,
}

#[derive(Debug, Default)]
pub(crate) struct ConsoleState {
    pub(crate) releases: HashMap<String, AppRelease>,
    /// The tenant's identity provider: the authorize page sends the browser there first.
    pub(crate) identity_provider: Option<String>,
    /// Tickets the identity provider brings back, each good once.
    pub(crate) sso_tickets: HashSet<String>,
    /// The stand-in identity provider's server, kept running while the emulator runs.
    pub(crate) stand_in: Option<StandIn>,
}

#[derive(Debug)]
pub(crate) struct StandIn {
    pub(crate) url: String,
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// The body of `POST /_emulator/apps/{app_id}`: any of the app's console settings.
#[derive(Debug, Default, Deserialize)]
struct AppChange {
    release: Option<AppRelease>,
    enabled_scopes: Option<Vec<String>>,
    /// Scopes taken away from the app (what it has otherwise stays).
    revoke_scopes: Option<Vec<String>>,
    redirect_uris: Option<Vec<String>>,
    /// The bot capability (机器人): on by default.
    bot: Option<bool>,
    bot_name: Option<String>,
    /// Receiving events and callbacks through the long connection (on by default).
    long_connection: Option<bool>,
}

/// The body of `POST /_emulator/identity_provider`: a URL, none, or the stand-in.
#[derive(Debug, Default, Deserialize)]
struct IdentityProviderChange {
    url: Option<String>,
    #[serde(default)]
    stand_in: bool,
}

pub(crate) fn routes() -> Router<Shared> {
    Router::new()
        .route("/_emulator/apps/{app_id}", axum::routing::post(change_app))
        .route(
            "/_emulator/identity_provider",
            axum::routing::post(change_identity_provider),
        )
        .route("/_emulator/redirect", get(open_redirect))
}

fn bad(message: String) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({"error": message}))).into_response()
}

async fn change_app(
    State(shared): State<Shared>,
    Path(app_id): Path<String>,
    body: Bytes,
) -> Response {
    let change: AppChange = match serde_json::from_slice(&body) {
        Ok(change) => change,
        Err(e) => return bad(format!("not an app change: {e}")),
    };
    let mut state = shared.lock();
    let Some(app) = state.apps.get_mut(&app_id) else {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({"error": format!("no app {app_id}")})),
        )
            .into_response();
    };
    if let Some(revoked) = change.revoke_scopes {
        app.enabled_scopes.retain(|s| !revoked.contains(s));
    }
    if let Some(scopes) = change.enabled_scopes {
        app.enabled_scopes = scopes;
    }
    if let Some(uris) = change.redirect_uris {
        app.redirect_uris = uris;
    }
    if let Some(bot) = change.bot {
        if bot {
            state.bot.bot_off.remove(&app_id);
        } else {
            state.bot.bot_off.insert(app_id.clone());
        }
    }
    if let Some(on) = change.long_connection {
        state.longconn.set_enabled(&app_id, on);
    }
    if let Some(name) = change.bot_name {
        state.bot.names.insert(app_id.clone(), name);
    }
    if let Some(release) = change.release {
        state.console.releases.insert(app_id, release);
    }
    StatusCode::NO_CONTENT.into_response()
}

async fn change_identity_provider(State(shared): State<Shared>, body: Bytes) -> Response {
    let change: IdentityProviderChange = match serde_json::from_slice(&body) {
        Ok(change) => change,
        Err(e) => return bad(format!("not an identity provider change: {e}")),
    };
    let url = if change.stand_in {
        match start_stand_in(&shared).await {
            Ok(url) => Some(url),
            Err(e) => return bad(format!("cannot start the stand-in identity provider: {e}")),
        }
    } else {
        change.url
    };
    shared.lock().console.identity_provider = url.clone();
    Json(json!({ "url": url })).into_response()
}

/// Starts (once) the stand-in identity provider on another loopback port and answers its URL.
pub(crate) async fn start_stand_in(shared: &Shared) -> std::io::Result<String> {
    if let Some(stand_in) = &shared.lock().console.stand_in {
        return Ok(stand_in.url.clone());
    }
    let listener =
        tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await?;
    let url = format!("http://{}/sso/login", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let router = Router::new().route("/sso/login", get(stand_in_login));
    tokio::spawn(async move {
        let server = axum::serve(listener, router).with_graceful_shutdown(async {
            let _ = stopped.await;
        });
        if let Err(e) = server.await {
            tracing::warn!(error = %e, "the stand-in identity provider stopped");
        }
    });
    shared.lock().console.stand_in = Some(StandIn {
        url: url.clone(),
        _stop: stop,
    });
    Ok(url)
}

/// The company's sign-in page, already signed in: straight back to Feishu with the ticket (a
/// real identity provider would ask for a password first).
async fn stand_in_login(Query(query): Query<HashMap<String, String>>) -> Response {
    match query.get("return").and_then(|r| url::Url::parse(r).ok()) {
        Some(back) if matches!(back.scheme(), "http" | "https") => {
            (StatusCode::FOUND, [(header::LOCATION, back.to_string())]).into_response()
        }
        _ => (StatusCode::BAD_REQUEST, "return must be an http(s) URL").into_response(),
    }
}

/// `GET /_emulator/redirect?to=…`: an open redirector, like the ones real sites have, to test
/// that the sign-in window checks every hop of a redirect chain.
async fn open_redirect(Query(query): Query<HashMap<String, String>>) -> Response {
    match query.get("to") {
        Some(to) => (StatusCode::FOUND, [(header::LOCATION, to.clone())]).into_response(),
        None => (StatusCode::BAD_REQUEST, "to is required").into_response(),
    }
}
