//! The commands of Settings → Assistant and the Python editor: each is one call to the core.

use companion::PythonFileSettings;
use companion::python::view::{
    AssistantInput, AssistantView, CallbackTryView, PythonFileView, PythonRunView,
};
use tauri::State;

use crate::answer::{Answer, blocking, text};
use crate::state::Shell;

#[tauri::command]
pub(crate) async fn assistant(shell: State<'_, Shell>) -> Answer<AssistantView> {
    let c = shell.companion().await?;
    blocking(move || Ok(c.assistant())).await
}

#[tauri::command]
pub(crate) async fn save_assistant(
    shell: State<'_, Shell>,
    input: AssistantInput,
) -> Answer<AssistantView> {
    let c = shell.companion().await?;
    blocking(move || c.save_assistant(input).map_err(text)).await
}

#[tauri::command]
pub(crate) async fn python_source(shell: State<'_, Shell>, name: String) -> Answer<String> {
    let c = shell.companion().await?;
    blocking(move || c.python_source(&name).map_err(text)).await
}

#[tauri::command]
pub(crate) async fn save_python_file(
    shell: State<'_, Shell>,
    name: String,
    source: String,
) -> Answer<PythonFileView> {
    let c = shell.companion().await?;
    c.save_python_file(&name, &source).await.map_err(text)
}

#[tauri::command]
pub(crate) async fn create_python_file(
    shell: State<'_, Shell>,
    name: String,
) -> Answer<PythonFileView> {
    let c = shell.companion().await?;
    c.create_python_file(&name).await.map_err(text)
}

#[tauri::command]
pub(crate) async fn delete_python_file(shell: State<'_, Shell>, name: String) -> Answer<()> {
    let c = shell.companion().await?;
    c.delete_python_file(&name).await.map_err(text)
}

#[tauri::command]
pub(crate) async fn set_python_file_settings(
    shell: State<'_, Shell>,
    name: String,
    settings: PythonFileSettings,
) -> Answer<PythonFileView> {
    let c = shell.companion().await?;
    blocking(move || c.set_python_file_settings(&name, settings).map_err(text)).await
}

#[tauri::command]
pub(crate) async fn python_template(shell: State<'_, Shell>) -> Answer<String> {
    Ok(shell.companion().await?.python_template().to_owned())
}

#[tauri::command]
pub(crate) async fn run_python_tool(
    shell: State<'_, Shell>,
    file: String,
    tool: String,
    args: String,
    approved: bool,
) -> Answer<PythonRunView> {
    let c = shell.companion().await?;
    c.run_python_tool(&file, &tool, &args, approved)
        .await
        .map_err(text)
}

#[tauri::command]
pub(crate) async fn try_python_callback(
    shell: State<'_, Shell>,
    file: String,
    kind: String,
) -> Answer<CallbackTryView> {
    let c = shell.companion().await?;
    c.try_python_callback(&file, &kind).await.map_err(text)
}
