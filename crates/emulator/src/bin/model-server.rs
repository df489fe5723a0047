//! Serves a model script on a loopback port for demo mode or manual testing:
//! `model-server [--script FILE] [--port N]`. Without `--script` it serves the demo script.
//! Prints the base URL to give an OpenAI-compatible client, then serves until Ctrl-C.

use std::io::Write as _;
use std::net::SocketAddr;

use anyhow::{Context as _, bail};
use emulator::model_server::{ModelServer, Script};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut script_path = None;
    let mut port: u16 = 0;
    let mut args = std::env::args();
    // The first argument is the program's own path.
    args.next();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--script" => script_path = Some(args.next().context("--script needs a file")?),
            "--port" => {
                port = args
                    .next()
                    .context("--port needs a number")?
                    .parse()
                    .context("--port needs a number")?;
            }
            other => {
                bail!("unknown argument {other:?}; usage: model-server [--script FILE] [--port N]")
            }
        }
    }
    let script = match &script_path {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
            Script::from_json(&text).with_context(|| format!("reading {path}"))?
        }
        None => Script::demo().context("the built-in demo script")?,
    };
    let server = ModelServer::start_on(script, SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .context("starting the model server")?;
    writeln!(std::io::stdout(), "{}", server.base_url())?;
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    server.shutdown().await;
    Ok(())
}
