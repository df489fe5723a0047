//! The app's MCP client as the official conformance suite (`@modelcontextprotocol/conformance`)
//! runs it: `conformance client --command mcp-conformance-client --scenario X` starts this with
//! the scenario's server URL as the last argument and the scenario's name in
//! `MCP_CONFORMANCE_SCENARIO`. It goes through the crate's own [`Hub`] and [`Connection`], as
//! the app does, so what passes here is what the app runs; only the user is played by code:
//! forms are accepted as their defaults fill them in, and a sign-in the call is held for is
//! made at once (the suite's authorization page redirects straight back with a code, so the
//! page is fetched without following the redirect and the code read from `Location`).
// What it prints is for the suite's log of the run (stdout.txt beside checks.json).
#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;
use std::sync::Arc;

use agent::{ToolOutcome, ToolReturn};
use anyhow::{Context, Result, bail};
use mcp::elicit::AcceptDefaults;
use mcp::oauth::MemoryTokenStore;
use mcp::{CallError, Connection, Credentials, Hub, McpOAuth, Resolved, ServerConfig};
use mcp::{SignIn, TransportConfig};
use serde_json::{Map, Value, json};

/// The one server's id.
const ID: &str = "conformance";

/// Where the sign-in comes back to; nothing listens there, as the code is read off the
/// redirect itself.
const REDIRECT_URI: &str = "http://127.0.0.1:47823/callback";

/// Sign-ins one call may go through here before this client gives up on its own; the
/// credentials' own limit is meant to stop first.
const MAX_SIGN_INS: usize = 4;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let url = std::env::args()
        .skip(1)
        .last()
        .context("usage: mcp-conformance-client <server URL> (the suite appends it)")?;
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO")
        .context("MCP_CONFORMANCE_SCENARIO is not set: run this through `conformance client`")?;
    eprintln!("scenario {scenario} against {url}");

    let oauth = match scenario.starts_with("auth/") {
        true => Some(Arc::new(oauth(&url)?)),
        false => None,
    };
    let mut resolved = server(&url);
    resolved.credentials = oauth.clone().map(|o| o as Arc<dyn Credentials>);
    let hub = Hub::with_elicitor(Arc::new(AcceptDefaults));
    hub.configure(vec![resolved], &BTreeMap::new());
    let conn = hub.connection(ID).context("the hub lost its only server")?;
    let outcome = match scenario.as_str() {
        "initialize" => conn
            .start()
            .await
            .context("could not connect and list the tools"),
        "tools_call" => call(&conn, "add_numbers", json!({"a": 2, "b": 3})).await,
        "sse-retry" => call(&conn, "test_reconnection", json!({})).await,
        "elicitation-sep1034-client-defaults" => {
            call(&conn, "test_client_elicitation_defaults", json!({})).await
        }
        auth if auth.starts_with("auth/") => match &oauth {
            Some(oauth) => signed_in_call(&conn, oauth, "test-tool").await,
            None => bail!("no sign-in for {auth}"),
        },
        other => bail!("scenario {other} is not one this client plays"),
    };
    conn.stop().await;
    outcome
}

/// The server at `url`, as the user would add it.
fn server(url: &str) -> Resolved {
    Resolved {
        config: ServerConfig {
            id: ID.to_owned(),
            name: "Conformance".to_owned(),
            transport: TransportConfig::Http {
                url: url.to_owned(),
                headers: Vec::new(),
            },
            enabled: true,
            trusted: false,
            read_tools: Vec::new(),
            timeout_secs: 20,
        },
        env: BTreeMap::new(),
        headers: BTreeMap::new(),
        credentials: None,
    }
}

/// Calls `tool` with `args` and says what came back.
async fn call(conn: &Connection, tool: &str, args: Value) -> Result<()> {
    let args: Map<String, Value> = match args {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    match conn.call(tool, args, "call-1").await {
        Ok(result) => {
            let text = serde_json::to_string(&result.content).unwrap_or_default();
            if result.is_error == Some(true) {
                bail!("{tool} answered with an error: {text}");
            }
            println!("{tool}: {text}");
            Ok(())
        }
        Err(CallError::NeedsAuth(result)) => bail!("{tool} is held for sign-in: {result:?}"),
        Err(e) => Err(e).with_context(|| format!("calling {tool}")),
    }
}

/// The server's sign-in: a client registered beforehand when the scenario gives one
/// (`MCP_CONFORMANCE_CONTEXT`), else the app registers itself.
fn oauth(url: &str) -> Result<McpOAuth> {
    let oauth = McpOAuth::new(ID, url, Arc::new(MemoryTokenStore::default()));
    let Ok(context) = std::env::var("MCP_CONFORMANCE_CONTEXT") else {
        return Ok(oauth);
    };
    let context: Value =
        serde_json::from_str(&context).context("MCP_CONFORMANCE_CONTEXT is not JSON")?;
    Ok(match context["client_id"].as_str() {
        Some(id) => oauth.with_client(id, context["client_secret"].as_str()),
        None => oauth,
    })
}

/// Calls `tool`, signing in whenever the call is held for it, as the user does at the card.
async fn signed_in_call(conn: &Connection, oauth: &McpOAuth, tool: &str) -> Result<()> {
    for _ in 0..MAX_SIGN_INS {
        match conn.call(tool, Map::new(), "call-1").await {
            Ok(result) => {
                println!("{tool}: {}", serde_json::to_string(&result.content)?);
                return Ok(());
            }
            Err(CallError::NeedsAuth(ToolReturn::Result(held)))
                if held.outcome == ToolOutcome::NeedsUserAuth =>
            {
                println!("held for sign-in: {:?}", held.content);
                sign_in(oauth).await?;
            }
            Err(CallError::NeedsAuth(other)) => {
                bail!("{tool}: {}", agent::coerce_tool_result(other).0)
            }
            Err(e) => return Err(e).with_context(|| format!("calling {tool}")),
        }
    }
    bail!("{tool} was still held after {MAX_SIGN_INS} sign-ins")
}

/// One sign-in, the page fetched in place of the browser.
async fn sign_in(oauth: &McpOAuth) -> Result<()> {
    let SignIn {
        authorize_url,
        state,
    } = oauth
        .begin(REDIRECT_URI)
        .await
        .context("beginning the sign-in")?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let page = browser
        .get(&authorize_url)
        .send()
        .await
        .context("opening the authorization page")?;
    let back = page
        .headers()
        .get(reqwest::header::LOCATION)
        .with_context(|| {
            format!(
                "the authorization page answered {} without a redirect",
                page.status()
            )
        })?
        .to_str()
        .context("the redirect is not text")?;
    oauth
        .complete(back, &state)
        .await
        .context("completing the sign-in")
}
