//! The commands of Settings → Tools → MCP servers: each is one call to the core.

use companion::mcp::view::{McpImportSourceView, McpImportView, McpServerInput, McpServerView};
use tauri::State;

use crate::answer::{Answer, blocking, text};
use crate::state::Shell;

#[tauri::command]
pub(crate) async fn mcp_servers(shell: State<'_, Shell>) -> Answer<Vec<McpServerView>> {
    let c = shell.companion().await?;
    blocking(move || Ok(c.mcp_servers())).await
}

#[tauri::command]
pub(crate) async fn save_mcp_server(
    shell: State<'_, Shell>,
    input: McpServerInput,
) -> Answer<McpServerView> {
    let c = shell.companion().await?;
    c.save_mcp_server(input).await.map_err(text)
}

#[tauri::command]
pub(crate) async fn remove_mcp_server(shell: State<'_, Shell>, id: String) -> Answer<()> {
    let c = shell.companion().await?;
    c.remove_mcp_server(&id).await.map_err(text)
}

#[tauri::command]
pub(crate) async fn import_mcp_servers(
    shell: State<'_, Shell>,
    config: String,
) -> Answer<McpImportView> {
    let c = shell.companion().await?;
    c.import_mcp_servers(&config).await.map_err(text)
}

#[tauri::command]
pub(crate) async fn import_mcp_file(
    shell: State<'_, Shell>,
    path: String,
) -> Answer<McpImportView> {
    let c = shell.companion().await?;
    c.import_mcp_file(&path).await.map_err(text)
}

#[tauri::command]
pub(crate) async fn mcp_import_sources(
    shell: State<'_, Shell>,
) -> Answer<Vec<McpImportSourceView>> {
    let c = shell.companion().await?;
    blocking(move || Ok(c.mcp_import_sources())).await
}

#[tauri::command]
pub(crate) async fn restart_mcp_server(
    shell: State<'_, Shell>,
    id: String,
) -> Answer<McpServerView> {
    let c = shell.companion().await?;
    c.restart_mcp_server(&id).await.map_err(text)
}

#[tauri::command]
pub(crate) async fn mcp_server_log(shell: State<'_, Shell>, id: String) -> Answer<String> {
    let c = shell.companion().await?;
    blocking(move || c.mcp_server_log(&id).map_err(text)).await
}

#[tauri::command]
pub(crate) async fn set_mcp_tool_read(
    shell: State<'_, Shell>,
    id: String,
    tool: String,
    read: bool,
) -> Answer<McpServerView> {
    let c = shell.companion().await?;
    c.set_mcp_tool_read(&id, &tool, read).await.map_err(text)
}

#[tauri::command]
pub(crate) async fn lark_mcp(shell: State<'_, Shell>) -> Answer<companion::mcp::view::LarkMcpView> {
    let c = shell.companion().await?;
    Ok(c.lark_mcp().await)
}

#[tauri::command]
pub(crate) async fn set_lark_mcp(
    shell: State<'_, Shell>,
    enabled: bool,
    tools: Option<String>,
) -> Answer<companion::mcp::view::LarkMcpView> {
    let c = shell.companion().await?;
    c.set_lark_mcp(enabled, tools).await.map_err(text)
}

#[tauri::command]
pub(crate) async fn install_lark_mcp(
    shell: State<'_, Shell>,
) -> Answer<companion::mcp::view::LarkMcpView> {
    let c = shell.companion().await?;
    c.install_lark_mcp().await.map_err(text)
}

#[tauri::command]
pub(crate) async fn mcp_questions(
    shell: State<'_, Shell>,
) -> Answer<Vec<companion::mcp::questions::McpQuestionView>> {
    let c = shell.companion().await?;
    Ok(c.mcp_questions())
}

#[tauri::command]
pub(crate) async fn answer_mcp_question(
    shell: State<'_, Shell>,
    id: String,
    input: companion::mcp::questions::McpAnswerInput,
) -> Answer<()> {
    let c = shell.companion().await?;
    c.answer_mcp_question(&id, input).map_err(text)
}
