//! `feishu-companion mcp`: the stdio relay a client starts (Codex, Goose, any client that only
//! runs local servers). It finds the running app through `agents-server.json`, starts the app
//! when none answers, and relays until the client closes stdin. Stdout is the protocol's, so
//! nothing else is ever printed there.

use std::path::Path;
use std::time::{Duration, Instant};

use mcp::serve::relay::{RelayTarget, run};

use super::server::{Discovery, discovery_file};
use crate::AppPaths;
use crate::error::CompanionError;

/// How long a started app may take to answer.
const START_WAIT: Duration = Duration::from_secs(60);

fn read_discovery(path: &Path) -> Option<Discovery> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// Whether something answers at the discovery file's address.
async fn answers(discovery: &Discovery) -> bool {
    let Ok(url) = url::Url::parse(&discovery.url) else {
        return false;
    };
    let (Some(host), Some(port)) = (url.host_str(), url.port()) else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    tokio::time::timeout(
        Duration::from_secs(2),
        tokio::net::TcpStream::connect((host, port)),
    )
    .await
    .is_ok_and(|c| c.is_ok())
}

/// The running app's server, starting the app with `start_app` when none answers.
pub async fn find_or_start(
    paths: &AppPaths,
    start_app: impl FnOnce() -> std::io::Result<()>,
) -> Result<Discovery, CompanionError> {
    let path = discovery_file(paths);
    if let Some(found) = read_discovery(&path)
        && answers(&found).await
    {
        return Ok(found);
    }
    start_app().map_err(|e| {
        CompanionError::Other(format!(
            "Feishu Companion is not running and cannot be started: {e}"
        ))
    })?;
    let deadline = Instant::now() + START_WAIT;
    while Instant::now() < deadline {
        if let Some(found) = read_discovery(&path)
            && answers(&found).await
        {
            return Ok(found);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(CompanionError::Other(format!(
        "Feishu Companion was started but did not answer within {} s",
        START_WAIT.as_secs()
    )))
}

/// Relays stdin/stdout to the app for the client holding `token`, working in `project`.
pub async fn relay(
    paths: &AppPaths,
    token: String,
    project: Option<String>,
    start_app: impl FnOnce() -> std::io::Result<()>,
) -> Result<(), CompanionError> {
    if token.trim().is_empty() {
        return Err(CompanionError::Other(format!(
            "no token: set {} (Feishu Companion → Settings → Connected agents)",
            super::api::TOKEN_VARIABLE
        )));
    }
    let found = find_or_start(paths, start_app).await?;
    run(RelayTarget {
        url: found.url,
        token: token.trim().to_owned(),
        project,
    })
    .await
    .map_err(|e| CompanionError::Other(e.to_string()))
}
