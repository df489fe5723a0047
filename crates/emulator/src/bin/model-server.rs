//! Serves a model script on a loopback port for demo mode or manual testing:
//! `model-server [--script FILE] [--port N] [--log FILE]`. Without `--script` it serves the demo
//! script. Prints the base URL to give an OpenAI-compatible client (`http://127.0.0.1:<port>/v1`;
//! an Anthropic client takes it without the `/v1`), then serves until Ctrl-C (SIGINT).
//!
//! With `--log FILE`, every request received is appended to FILE as one JSON line
//! (`{"path", "body", "authorized", "step"}`), within a tenth of a second of its arrival, so a test
//! in another process (tests/agents) can read what its client sent while the server still runs.

use std::io::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context as _, bail};
use emulator::model_server::{ModelServer, Script};
use serde_json::json;

const USAGE: &str = "usage: model-server [--script FILE] [--port N] [--log FILE]";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut script_path = None;
    let mut log_path = None;
    let mut port: u16 = 0;
    let mut args = std::env::args();
    // The first argument is the program's own path.
    args.next();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--script" => script_path = Some(args.next().context("--script needs a file")?),
            "--log" => log_path = Some(args.next().context("--log needs a file")?),
            "--port" => {
                port = args
                    .next()
                    .context("--port needs a number")?
                    .parse()
                    .context("--port needs a number")?;
            }
            other => bail!("unknown argument {other:?}; {USAGE}"),
        }
    }
    let script = match &script_path {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
            Script::from_json(&text).with_context(|| format!("reading {path}"))?
        }
        None => Script::demo().context("the built-in demo script")?,
    };
    let mut log = match &log_path {
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("opening {path}"))?,
        ),
        None => None,
    };
    let server = ModelServer::start_on(script, SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .context("starting the model server")?;
    writeln!(std::io::stdout(), "{}", server.base_url())?;
    std::io::stdout().flush()?;
    let stop = tokio::signal::ctrl_c();
    tokio::pin!(stop);
    let mut written = 0;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            stopped = &mut stop => {
                stopped.context("waiting for Ctrl-C")?;
                break;
            }
            _ = tick.tick() => {}
        }
        if let Some(file) = log.as_mut() {
            written = append_log(&server, file, written)?;
        }
    }
    if let Some(file) = log.as_mut() {
        append_log(&server, file, written)?;
    }
    server.shutdown().await;
    Ok(())
}

/// Appends the requests after the first `written` to the log; returns how many are written now.
fn append_log(
    server: &ModelServer,
    file: &mut std::fs::File,
    written: usize,
) -> anyhow::Result<usize> {
    let requests = server.requests();
    for request in requests.iter().skip(written) {
        let line = json!({
            "path": request.path,
            "body": request.body,
            "authorized": request.authorized,
            "step": request.step,
        });
        writeln!(file, "{line}").context("writing the request log")?;
    }
    Ok(requests.len().max(written))
}
