//! The commands the UI invokes: each is one call to the application core, answering its value
//! or the error's user-facing text. JavaScript passes arguments in camelCase (`sessionId`).
//!
//! All are async, so none runs on the main thread (Tauri runs synchronous commands there,
//! where a slow one would freeze every window); the core's synchronous functions, which read
//! SQLite, run on the blocking pool.

use std::path::PathBuf;

use companion::Settings;
use companion::check::CheckView;
use companion::connect::view::ConnectView;
use companion::data::{DataView, ForgetSecretsResult};
use companion::user_error::UiError;
use companion::view::{
    AccountView, AppInfo, AuditQuery, AuditView, AutonomyInput, AutonomyView, BatchDecision,
    CallView, DecisionInput, EditCheckView, ExportFormat, ModelListView, RuleView, SavedSettings,
    SessionView, SettingsView, SettlementInput, SignInTicketView, TimelineView, TurnView,
};
use tauri::ipc::Invoke;
use tauri::{AppHandle, Runtime, State};
use tauri_plugin_opener::OpenerExt as _;

use crate::answer::{Answer, blocking, text};
use crate::state::Shell;
use crate::{signin, windows};

/// The invoke handler with every command of [`crate::COMMANDS`].
pub fn handler<R: Runtime>() -> impl Fn(Invoke<R>) -> bool + Send + Sync + 'static {
    tauri::generate_handler![
        app_info,
        startup_error,
        ui_ready,
        list_sessions,
        create_session,
        timeline,
        send_message,
        cancel_turn,
        decide,
        decide_many,
        settle,
        pending,
        rules,
        revoke_rule,
        audit,
        export_audit,
        reveal_path,
        account,
        sign_out,
        sign_in,
        open_sign_in_in_browser,
        open_link,
        cancel_sign_in,
        connect_feishu,
        open_connect_page,
        cancel_connect,
        open_sign_in_window,
        open_scope_apply,
        retry_auth_call,
        decline_sign_in,
        settings,
        save_settings,
        set_app_secret,
        set_model_key,
        crate::updates::update_status,
        crate::updates::check_for_update,
        crate::updates::install_update,
        crate::updates::restart_to_update,
        check_connection,
        remote_approval_status,
        set_autonomy,
        check_edit,
        list_models,
        data_status,
        forget_secrets,
        reset_app,
        crate::assistant::assistant,
        crate::assistant::save_assistant,
        crate::assistant::python_source,
        crate::assistant::save_python_file,
        crate::assistant::create_python_file,
        crate::assistant::delete_python_file,
        crate::assistant::set_python_file_settings,
        crate::assistant::python_template,
        crate::assistant::run_python_tool,
        crate::assistant::try_python_callback,
        crate::agents::connected_agents,
        crate::agents::add_connected_agent,
        crate::agents::set_connected_agent_paused,
        crate::agents::revoke_connected_agent,
        crate::agents::set_connected_agent_tools,
        crate::mcp::mcp_servers,
        crate::mcp::save_mcp_server,
        crate::mcp::remove_mcp_server,
        crate::mcp::import_mcp_servers,
        crate::mcp::import_mcp_file,
        crate::mcp::mcp_import_sources,
        crate::mcp::restart_mcp_server,
        crate::mcp::mcp_server_log,
        crate::mcp::set_mcp_tool_read,
        crate::mcp::lark_mcp,
        crate::mcp::set_lark_mcp,
        crate::mcp::install_lark_mcp,
        crate::mcp::mcp_questions,
        crate::mcp::answer_mcp_question,
    ]
}

#[tauri::command]
async fn app_info(shell: State<'_, Shell>) -> Answer<AppInfo> {
    Ok(shell.companion().await?.app_info())
}

/// Why the core could not open (corrupt database, newer version, vault), naming the data
/// folder; `null` once it is open. The UI shows this instead of its normal page.
#[tauri::command]
async fn startup_error(shell: State<'_, Shell>) -> Answer<Option<String>> {
    Ok(shell.companion().await.err())
}

/// The UI painted its first frame; answers the milliseconds since the process started.
#[tauri::command]
async fn ui_ready(shell: State<'_, Shell>) -> Answer<u64> {
    Ok(shell.timing.ui_ready())
}

#[tauri::command]
async fn list_sessions(shell: State<'_, Shell>) -> Answer<Vec<SessionView>> {
    shell.companion().await?.list_sessions().await.map_err(text)
}

#[tauri::command]
async fn create_session(shell: State<'_, Shell>) -> Answer<String> {
    shell
        .companion()
        .await?
        .create_session()
        .await
        .map_err(text)
}

#[tauri::command]
async fn timeline(shell: State<'_, Shell>, session_id: String) -> Answer<TimelineView> {
    let c = shell.companion().await?;
    blocking(move || c.timeline(&session_id).map_err(text)).await
}

#[tauri::command]
async fn send_message(
    shell: State<'_, Shell>,
    session_id: String,
    text: String,
    cancel_waiting: Option<bool>,
) -> Answer<TurnView> {
    let c = shell.companion().await?;
    c.send_message(&session_id, &text, cancel_waiting.unwrap_or(false))
        .await
        .map_err(self::text)
}

#[tauri::command]
async fn cancel_turn(shell: State<'_, Shell>, session_id: String) -> Answer<bool> {
    let c = shell.companion().await?;
    c.cancel_turn(&session_id).await.map_err(text)
}

#[tauri::command]
async fn decide(
    shell: State<'_, Shell>,
    call_id: String,
    decision: DecisionInput,
) -> Answer<TurnView> {
    let c = shell.companion().await?;
    c.decide(&call_id, decision).await.map_err(text)
}

#[tauri::command]
async fn decide_many(
    shell: State<'_, Shell>,
    decisions: Vec<BatchDecision>,
) -> Answer<Vec<TurnView>> {
    let c = shell.companion().await?;
    c.decide_many(decisions).await.map_err(text)
}

#[tauri::command]
async fn settle(
    shell: State<'_, Shell>,
    call_id: String,
    settlement: SettlementInput,
) -> Answer<TurnView> {
    let c = shell.companion().await?;
    c.settle(&call_id, settlement).await.map_err(text)
}

#[tauri::command]
async fn pending(shell: State<'_, Shell>) -> Answer<Vec<CallView>> {
    let c = shell.companion().await?;
    blocking(move || c.pending_calls().map_err(text)).await
}

#[tauri::command]
async fn rules(shell: State<'_, Shell>) -> Answer<Vec<RuleView>> {
    let c = shell.companion().await?;
    blocking(move || c.rules().map_err(text)).await
}

#[tauri::command]
async fn revoke_rule(shell: State<'_, Shell>, rule_id: String) -> Answer<RuleView> {
    let c = shell.companion().await?;
    blocking(move || c.revoke_rule(&rule_id).map_err(text)).await
}

#[tauri::command]
async fn audit(shell: State<'_, Shell>, query: AuditQuery) -> Answer<Vec<AuditView>> {
    let c = shell.companion().await?;
    blocking(move || c.audit_views(&query).map_err(text)).await
}

/// Writes the audit trail to the user's Downloads folder (else the data folder) and answers
/// the file's path, which `reveal_path` may then show.
#[tauri::command]
async fn export_audit(
    shell: State<'_, Shell>,
    query: AuditQuery,
    format: ExportFormat,
) -> Answer<String> {
    let c = shell.companion().await?;
    let dir = directories::UserDirs::new()
        .and_then(|dirs| dirs.download_dir().map(PathBuf::from))
        .unwrap_or_else(|| c.paths().data_dir.clone());
    let path = blocking(move || c.export_audit(&query, format, &dir).map_err(text)).await?;
    let shown = path.display().to_string();
    shell.remember_export(path);
    Ok(shown)
}

/// Shows a file in the file manager: only a file `export_audit` wrote in this run, so the UI
/// (or a script injected into it) cannot probe or open arbitrary paths.
#[tauri::command]
async fn reveal_path<R: Runtime>(
    app: AppHandle<R>,
    shell: State<'_, Shell>,
    path: String,
) -> Answer<()> {
    let path = PathBuf::from(path);
    if !shell.was_exported(&path) {
        return Err(UiError::worded(
            "refused",
            "只能打开本次导出的文件。",
            "Only a file exported in this session can be shown.",
        ));
    }
    app.opener()
        .reveal_item_in_dir(&path)
        .map_err(UiError::other)
}

#[tauri::command]
async fn account(shell: State<'_, Shell>) -> Answer<Option<AccountView>> {
    shell.companion().await?.account_view().await.map_err(text)
}

#[tauri::command]
async fn sign_out(shell: State<'_, Shell>) -> Answer<()> {
    shell.companion().await?.sign_out().await.map_err(text)
}

/// Starts a sign-in for `scopes` (empty: what the waiting calls need) and shows Feishu's page
/// in the embedded sign-in window, or in the system browser when `embedded` is false.
#[tauri::command]
async fn sign_in<R: Runtime>(
    app: AppHandle<R>,
    shell: State<'_, Shell>,
    scopes: Vec<String>,
    embedded: bool,
) -> Answer<SignInTicketView> {
    // A sign-in already waiting is replaced; the core frees its redirect port first.
    let ticket = shell
        .companion()
        .await?
        .sign_in(scopes)
        .await
        .map_err(text)?;
    signin::started(&app, &shell, &ticket, embedded)?;
    Ok(ticket)
}

/// The waiting sign-in's page, in the system browser (the embedded window closes).
#[tauri::command]
async fn open_sign_in_in_browser<R: Runtime>(
    app: AppHandle<R>,
    shell: State<'_, Shell>,
) -> Answer<()> {
    signin::open_in_browser(&app, &shell).map_err(UiError::from)
}

/// Opens a web link (from an assistant's answer) in the system browser: http(s) only, so a
/// rendered link cannot launch a local program through a custom scheme or open a file.
#[tauri::command]
async fn open_link<R: Runtime>(app: AppHandle<R>, url: String) -> Answer<()> {
    let url = windows::external_link(&url).ok_or_else(|| {
        UiError::worded(
            "refused",
            "只能在浏览器中打开 http(s) 链接。",
            "Only http(s) links open in the browser.",
        )
    })?;
    app.opener()
        .open_url(url.as_str(), None::<&str>)
        .map_err(|e| {
            UiError::worded(
                "other",
                format!("无法打开系统浏览器：{e}"),
                format!("Cannot open the system browser: {e}"),
            )
        })
}

#[tauri::command]
async fn cancel_sign_in<R: Runtime>(app: AppHandle<R>, shell: State<'_, Shell>) -> Answer<()> {
    shell.companion().await?.cancel_sign_in();
    signin::cancelled(&app, &shell);
    Ok(())
}

/// "Connect my Feishu": starts creating the user's own app; the QR code is in the answer.
#[tauri::command]
async fn connect_feishu(shell: State<'_, Shell>) -> Answer<ConnectView> {
    let c = shell.companion().await?;
    c.connect_feishu_view().await.map_err(text)
}

/// The waiting connect's confirmation page, in the sign-in window.
#[tauri::command]
async fn open_connect_page<R: Runtime>(app: AppHandle<R>, shell: State<'_, Shell>) -> Answer<()> {
    let url =
        shell.companion().await?.connect_page().ok_or_else(|| {
            UiError::worded("other", "没有等待中的连接。", "No connect is waiting.")
        })?;
    signin::verification(&app, &shell, &url, true).map_err(UiError::from)
}

#[tauri::command]
async fn cancel_connect<R: Runtime>(app: AppHandle<R>, shell: State<'_, Shell>) -> Answer<()> {
    shell.companion().await?.cancel_connect();
    signin::cancelled(&app, &shell);
    Ok(())
}

/// The waiting device sign-in's verification page, in the sign-in window.
#[tauri::command]
async fn open_sign_in_window<R: Runtime>(app: AppHandle<R>, shell: State<'_, Shell>) -> Answer<()> {
    signin::open_waiting(&app, &shell).map_err(UiError::from)
}

/// Feishu's page to apply for the scope a call's app lacks, in the sign-in window.
#[tauri::command]
async fn open_scope_apply<R: Runtime>(
    app: AppHandle<R>,
    shell: State<'_, Shell>,
    call_id: String,
) -> Answer<()> {
    let c = shell.companion().await?;
    let url = c
        .pending_calls()
        .map_err(text)?
        .into_iter()
        .find(|call| call.call_id == call_id)
        .and_then(|call| call.scope_apply_url)
        .ok_or_else(|| {
            UiError::worded(
                "other",
                "这个调用不再等待权限。",
                "This call no longer waits for a permission.",
            )
        })?;
    signin::verification(&app, &shell, &url, true).map_err(UiError::from)
}

/// Runs a call that waits for a permission again (after it was granted).
#[tauri::command]
async fn retry_auth_call(shell: State<'_, Shell>, call_id: String) -> Answer<TurnView> {
    let c = shell.companion().await?;
    c.retry_auth_call(&call_id).await.map_err(text)
}

#[tauri::command]
async fn decline_sign_in(shell: State<'_, Shell>, call_id: String) -> Answer<TurnView> {
    let c = shell.companion().await?;
    c.decline_sign_in(&call_id).await.map_err(text)
}

#[tauri::command]
async fn settings(shell: State<'_, Shell>) -> Answer<SettingsView> {
    let c = shell.companion().await?;
    blocking(move || c.settings_view().map_err(text)).await
}

/// Saves the settings and applies them at once; the tray follows a change of language.
#[tauri::command]
async fn save_settings(shell: State<'_, Shell>, settings: Settings) -> Answer<SavedSettings> {
    let c = shell.companion().await?;
    let saved = c.save_settings(settings).await.map_err(text)?;
    shell.tray_dirty.notify_one();
    Ok(saved)
}

#[tauri::command]
async fn set_app_secret(shell: State<'_, Shell>, secret: String) -> Answer<()> {
    let c = shell.companion().await?;
    c.apply_app_secret(&secret).await.map_err(text)?;
    shell.tray_dirty.notify_one();
    Ok(())
}

#[tauri::command]
async fn set_model_key(shell: State<'_, Shell>, preset: String, key: String) -> Answer<()> {
    let c = shell.companion().await?;
    c.apply_model_key(&preset, &key).await.map_err(text)?;
    shell.tray_dirty.notify_one();
    Ok(())
}

/// Checks the App ID and Secret, the redirect port and the model, each in words.
#[tauri::command]
async fn check_connection(shell: State<'_, Shell>) -> Answer<CheckView> {
    Ok(shell.companion().await?.check_connection().await)
}

/// Where approving from Feishu stands: the long connection, cards queued and waiting.
#[tauri::command]
async fn remote_approval_status(
    shell: State<'_, Shell>,
) -> Answer<companion::remote_approval::RemoteApprovalView> {
    Ok(shell.companion().await?.remote_approval_view())
}

/// Sets how writes are treated in a conversation (ask, allow what it touches for 30 minutes,
/// read-only).
#[tauri::command]
async fn set_autonomy(
    shell: State<'_, Shell>,
    session_id: String,
    mode: AutonomyInput,
) -> Answer<AutonomyView> {
    let c = shell.companion().await?;
    c.set_autonomy(&session_id, mode).await.map_err(text)
}

/// Checks an approval's edited arguments and previews them, before the user approves the edit.
#[tauri::command]
async fn check_edit(
    shell: State<'_, Shell>,
    call_id: String,
    args: serde_json::Map<String, serde_json::Value>,
) -> Answer<EditCheckView> {
    let c = shell.companion().await?;
    c.check_edit(&call_id, args).await.map_err(text)
}

/// The models a preset's service offers, for the model picker (the stored key is used).
#[tauri::command]
async fn list_models(
    shell: State<'_, Shell>,
    preset: String,
    base_url: Option<String>,
) -> Answer<ModelListView> {
    shell
        .companion()
        .await?
        .list_models(&preset, base_url)
        .await
        .map_err(text)
}

/// The Settings page's "Data" section: what cannot be read, the database check, what a reset
/// deletes.
#[tauri::command]
async fn data_status(shell: State<'_, Shell>) -> Answer<DataView> {
    let c = shell.companion().await?;
    c.data_view().await.map_err(text)
}

/// The answer to a destructive command called without the UI's confirmation.
fn unconfirmed() -> UiError {
    UiError::worded(
        "unconfirmed",
        "这个操作需要先确认。",
        "This needs the user's confirmation first.",
    )
}

/// "Sign out and forget all secrets", once the user confirmed; conversations, rules and the
/// audit trail are kept.
#[tauri::command]
async fn forget_secrets(shell: State<'_, Shell>, confirmed: bool) -> Answer<ForgetSecretsResult> {
    if !confirmed {
        return Err(unconfirmed());
    }
    let c = shell.companion().await?;
    c.forget_secrets().await.map_err(text)
}

/// "Reset the app", after the UI's confirmation: the next start deletes the app's files, and the
/// app restarts now. Works also when the core could not open (that may be why the user resets).
#[tauri::command]
async fn reset_app<R: Runtime>(
    app: AppHandle<R>,
    shell: State<'_, Shell>,
    confirmed: bool,
) -> Answer<()> {
    if !confirmed {
        return Err(unconfirmed());
    }
    match shell.companion_now() {
        Some(c) => blocking(move || c.reset_app().map(drop).map_err(text)).await?,
        None => {
            let paths = crate::app_paths(&shell.launch)?;
            companion::data::request_reset(&paths).map_err(text)?;
        }
    }
    log::warn!("the user reset the app; restarting");
    app.restart()
}
