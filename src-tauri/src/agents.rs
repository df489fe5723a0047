//! The commands of Settings → Connected agents (each is one call to the core), and the stdio
//! relay `feishu-companion mcp` that clients which only start local servers run.

use std::ffi::OsString;

use companion::agents::view::{AgentToolsInput, ConnectedAgentsView, NewAgentView};
use tauri::State;

use crate::answer::{Answer, blocking, text};
use crate::launch::Launch;
use crate::state::Shell;

#[tauri::command]
pub(crate) async fn connected_agents(shell: State<'_, Shell>) -> Answer<ConnectedAgentsView> {
    let c = shell.companion().await?;
    blocking(move || Ok(c.connected_agents())).await
}

#[tauri::command]
pub(crate) async fn add_connected_agent(
    shell: State<'_, Shell>,
    name: String,
) -> Answer<NewAgentView> {
    let c = shell.companion().await?;
    blocking(move || c.add_connected_agent(&name).map_err(text)).await
}

#[tauri::command]
pub(crate) async fn set_connected_agent_paused(
    shell: State<'_, Shell>,
    id: String,
    paused: bool,
) -> Answer<ConnectedAgentsView> {
    let c = shell.companion().await?;
    blocking(move || c.set_connected_agent_paused(&id, paused).map_err(text)).await
}

#[tauri::command]
pub(crate) async fn revoke_connected_agent(
    shell: State<'_, Shell>,
    id: String,
) -> Answer<ConnectedAgentsView> {
    let c = shell.companion().await?;
    c.revoke_connected_agent(&id).await.map_err(text)
}

#[tauri::command]
pub(crate) async fn set_connected_agent_tools(
    shell: State<'_, Shell>,
    input: AgentToolsInput,
) -> Answer<ConnectedAgentsView> {
    let c = shell.companion().await?;
    blocking(move || c.set_connected_agent_tools(input).map_err(text)).await
}

/// What `feishu-companion mcp --help` prints.
pub const RELAY_USAGE: &str = "\
Usage: feishu-companion mcp [--token <token>] [--data-dir <dir>] [--demo] [--ephemeral-keys]

Relays MCP over stdin/stdout to the running Feishu Companion (starting it when it is not
running), for agents that only start local MCP servers. The token comes from Settings →
Connected agents; pass it with --token or the environment variable FEISHU_COMPANION_TOKEN.
The other options are the app's own, used when the relay has to start it.
";

/// Runs the relay: `args` are those after `mcp`. Nothing is printed on stdout but the
/// protocol.
pub fn relay(args: Vec<OsString>) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let mut token = std::env::var(companion::agents::api::TOKEN_VARIABLE).unwrap_or_default();
    let mut app_args = Vec::new();
    let mut rest = args.into_iter();
    while let Some(arg) = rest.next() {
        match arg.to_string_lossy().as_ref() {
            "--help" | "-h" => {
                eprint!("{RELAY_USAGE}");
                return Ok(());
            }
            "--token" => {
                token = rest
                    .next()
                    .context("--token needs the token")?
                    .to_string_lossy()
                    .into_owned();
            }
            other => match other.strip_prefix("--token=") {
                Some(t) => token = t.to_owned(),
                None => app_args.push(arg),
            },
        }
    }
    let launch = Launch::parse(app_args.clone(), |name| std::env::var_os(name))
        .map_err(|e| anyhow::anyhow!("{e}\n\n{RELAY_USAGE}"))?;
    let paths = crate::app_paths(&launch).map_err(anyhow::Error::msg)?;
    let project = std::env::current_dir()
        .ok()
        .map(|d| d.display().to_string());
    let start_app = move || start_app(app_args);
    tauri::async_runtime::block_on(companion::agents::relay::relay(
        &paths, token, project, start_app,
    ))
    .context("feishu-companion mcp")
}

/// Starts the app itself, detached from the client that started the relay (it outlives it).
fn start_app(args: Vec<OsString>) -> std::io::Result<()> {
    let exe = std::env::current_exe()?;
    let mut command = std::process::Command::new(exe);
    command
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt as _;
        // Its own process group: the client ending the relay must not take the app with it.
        command.process_group(0);
    }
    command.spawn().map(|_| ())
}
