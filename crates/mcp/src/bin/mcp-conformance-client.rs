//! The app's MCP client as the official conformance suite (`@modelcontextprotocol/conformance`)
//! runs it: `conformance client --command mcp-conformance-client --scenario X` starts this with
//! the scenario's server URL as the last argument and the scenario's name in
//! `MCP_CONFORMANCE_SCENARIO`. It goes through the crate's own [`Hub`] and [`Connection`], as
//! the app does, so what passes here is what the app runs; only the user is played by code:
//! forms are accepted as their defaults fill them in.
// What it prints is for the suite's log of the run (stdout.txt beside checks.json).
#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use mcp::elicit::AcceptDefaults;
use mcp::{CallError, Connection, Hub, Resolved, ServerConfig, TransportConfig};
use serde_json::{Map, Value, json};

/// The one server's id.
const ID: &str = "conformance";

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let url = std::env::args()
        .skip(1)
        .last()
        .context("usage: mcp-conformance-client <server URL> (the suite appends it)")?;
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO")
        .context("MCP_CONFORMANCE_SCENARIO is not set: run this through `conformance client`")?;
    eprintln!("scenario {scenario} against {url}");

    let hub = Hub::with_elicitor(Arc::new(AcceptDefaults));
    hub.configure(vec![server(&url)], &BTreeMap::new());
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
