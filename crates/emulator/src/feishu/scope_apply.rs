//! Applying for a scope the app has not enabled: the page lark-cli sends people to when an API
//! answers 99991672 (`cmd/root.go` prints `https://{open host}/page/scope-apply?clientID=…&
//! scopes=…`). Submitting files an application; the tenant admin approves it (a test hook
//! here), and the scope is enabled for the app at once. A tenant policy may approve every
//! submission at once (scopes Feishu grants without an admin). The user still has to grant the
//! newly enabled scope in a new sign-in before their token carries it (99991679 until then).
//!
//! Hooks: `GET /_emulator/scope_applications`, `POST /_emulator/scope_applications/approve`,
//! `POST /_emulator/scope_apply_policy`; and [`FeishuEmulator`] methods for each.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::page::{self, DEMO_NOTE, Host, escape};
use super::{EmulatorState, FeishuEmulator, Shared};

/// Where an application stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeApplicationStatus {
    /// Waiting for the tenant admin.
    Pending,
    /// Approved: the scope is enabled for the app.
    Approved,
}

/// One application for a scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScopeApplication {
    /// The app applying.
    pub app_id: String,
    /// The scope applied for.
    pub scope: String,
    /// Where it stands.
    pub status: ScopeApplicationStatus,
}

#[derive(Debug, Default)]
pub(crate) struct ScopeApplyState {
    applications: Vec<ScopeApplication>,
    /// The tenant's policy: approve every submission at once.
    auto_approve: bool,
}

/// Why an application was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ApplyError {
    #[error("no app {0}")]
    UnknownApp(String),
    #[error("no scope to apply for")]
    NoScope,
    #[error("no pending application of {0} for {1}")]
    NoApplication(String, String),
}

pub(crate) fn routes() -> Router<Shared> {
    Router::new()
        .route("/page/scope-apply", get(show_page))
        .route("/page/scope-apply/submit", post(submit))
        .route("/_emulator/scope_applications", get(list_hook))
        .route("/_emulator/scope_applications/approve", post(approve_hook))
        .route("/_emulator/scope_apply_policy", post(policy_hook))
}

/// The scopes of a `scopes` parameter: lark-cli sends one, but a list (comma or space
/// separated) reads as several.
fn split_scopes(raw: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for scope in raw.split(|c: char| c == ',' || c.is_whitespace()) {
        if !scope.is_empty() && !out.iter().any(|s| s == scope) {
            out.push(scope.to_owned());
        }
    }
    out
}

fn enable(state: &mut EmulatorState, app_id: &str, scope: &str) {
    if let Some(app) = state.apps.get_mut(app_id)
        && !app.enabled_scopes.iter().any(|s| s == scope)
    {
        app.enabled_scopes.push(scope.to_owned());
    }
}

/// Files an application of `app_id` for `scope`; answers where it stands (approved at once if
/// the scope is already enabled or the policy says so; an application already waiting is not
/// filed twice).
pub(crate) fn apply(
    state: &mut EmulatorState,
    app_id: &str,
    scope: &str,
) -> Result<ScopeApplicationStatus, ApplyError> {
    let Some(app) = state.apps.get(app_id) else {
        return Err(ApplyError::UnknownApp(app_id.to_owned()));
    };
    if scope.is_empty() {
        return Err(ApplyError::NoScope);
    }
    if app.enabled_scopes.iter().any(|s| s == scope) {
        return Ok(ScopeApplicationStatus::Approved);
    }
    let waiting = state.scope_apply.applications.iter().any(|a| {
        a.app_id == app_id && a.scope == scope && a.status == ScopeApplicationStatus::Pending
    });
    if waiting {
        return Ok(ScopeApplicationStatus::Pending);
    }
    let status = if state.scope_apply.auto_approve {
        enable(state, app_id, scope);
        ScopeApplicationStatus::Approved
    } else {
        ScopeApplicationStatus::Pending
    };
    state.scope_apply.applications.push(ScopeApplication {
        app_id: app_id.to_owned(),
        scope: scope.to_owned(),
        status,
    });
    Ok(status)
}

/// The admin approves the waiting application: the scope is enabled at once.
pub(crate) fn approve(
    state: &mut EmulatorState,
    app_id: &str,
    scope: &str,
) -> Result<(), ApplyError> {
    let Some(application) = state.scope_apply.applications.iter_mut().find(|a| {
        a.app_id == app_id && a.scope == scope && a.status == ScopeApplicationStatus::Pending
    }) else {
        return Err(ApplyError::NoApplication(
            app_id.to_owned(),
            scope.to_owned(),
        ));
    };
    application.status = ScopeApplicationStatus::Approved;
    enable(state, app_id, scope);
    Ok(())
}

fn unknown_app_page() -> Response {
    page::invalid(
        StatusCode::NOT_FOUND,
        "应用不存在，无法申请权限。",
        "The app does not exist, so no scope can be applied for.",
    )
}

/// What each scope's line on the pages says about it.
fn scope_lines(state: &EmulatorState, app_id: &str, scopes: &[String]) -> String {
    let enabled = state
        .apps
        .get(app_id)
        .map(|a| a.enabled_scopes.clone())
        .unwrap_or_default();
    scopes
        .iter()
        .map(|scope| {
            let waiting = state.scope_apply.applications.iter().any(|a| {
                a.app_id == app_id
                    && a.scope == *scope
                    && a.status == ScopeApplicationStatus::Pending
            });
            let (status, words) = if enabled.contains(scope) {
                ("enabled", "已开通 · enabled")
            } else if waiting {
                (
                    "pending",
                    "等待管理员审批 · waiting for the admin's approval",
                )
            } else {
                ("not_enabled", "未开通 · not enabled")
            };
            format!(
                "<li data-scope=\"{s}\" data-status=\"{status}\"><code>{s}</code> {words}</li>",
                s = escape(scope)
            )
        })
        .collect()
}

/// `GET /page/scope-apply?clientID=…&scopes=…`.
async fn show_page(
    State(shared): State<Shared>,
    host: Host,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    shared.log("GET", "/page/scope-apply", None);
    let state = shared.lock();
    let app_id = query.get("clientID").cloned().unwrap_or_default();
    if !state.apps.contains_key(&app_id) {
        return unknown_app_page();
    }
    let scopes = split_scopes(query.get("scopes").map_or("", String::as_str));
    if scopes.is_empty() {
        return page::invalid(
            StatusCode::BAD_REQUEST,
            "链接中没有要申请的权限。",
            "The link names no scope to apply for.",
        );
    }
    let main = format!(
        "<h1>申请权限 · Apply for permissions</h1>\
         <p class=\"who\" id=\"scope-apply-summary\">为应用 <b>{app}</b> 申请以下权限，提交后由企业管理员审批。<br>\
         Apply for these permissions for the app <b>{app}</b>; the tenant admin reviews the \
         application.</p><ul id=\"scope-apply-scopes\">{lines}</ul>\
         <form method=\"post\" action=\"{prefix}/page/scope-apply/submit\">\
         <input type=\"hidden\" name=\"clientID\" value=\"{id}\">\
         <input type=\"hidden\" name=\"scopes\" value=\"{scopes}\">\
         <button class=\"primary\" id=\"submit\" data-testid=\"scope-apply-submit\" type=\"submit\">\
         提交申请 Submit</button></form>{DEMO_NOTE}",
        app = escape(&super::registration::app_name(&state, &app_id)),
        lines = scope_lines(&state, &app_id, &scopes),
        prefix = host.prefix(),
        id = escape(&app_id),
        scopes = escape(&scopes.join(",")),
    );
    page::respond(StatusCode::OK, "申请权限 · Apply for permissions", &main)
}

/// `POST /page/scope-apply/submit`: files the applications.
async fn submit(State(shared): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    shared.log("POST", "/page/scope-apply/submit", None);
    let form = super::oauth::form_or_json(&headers, &body);
    let app_id = form.get("clientID").cloned().unwrap_or_default();
    let scopes = split_scopes(form.get("scopes").map_or("", String::as_str));
    let mut state = shared.lock();
    if !state.apps.contains_key(&app_id) {
        return unknown_app_page();
    }
    if scopes.is_empty() {
        return page::invalid(
            StatusCode::BAD_REQUEST,
            "没有要申请的权限。",
            "No scope to apply for.",
        );
    }
    for scope in &scopes {
        if let Err(e) = apply(&mut state, &app_id, scope) {
            return page::invalid(StatusCode::BAD_REQUEST, "申请失败。", &e.to_string());
        }
    }
    let main = format!(
        "<h1 id=\"done\" data-testid=\"scope-apply-filed\">申请已提交 · Application submitted</h1>\
         <ul id=\"scope-apply-result\">{lines}</ul>\
         <p class=\"who\">开通后，请回到应用重新授权。<br>\
         Once enabled, return to the app and authorize it again.</p>{DEMO_NOTE}",
        lines = scope_lines(&state, &app_id, &scopes),
    );
    page::respond(StatusCode::OK, "申请已提交 · Application submitted", &main)
}

async fn list_hook(State(shared): State<Shared>) -> Json<Vec<ScopeApplication>> {
    Json(shared.lock().scope_apply.applications.clone())
}

/// The body of `POST /_emulator/scope_applications/approve`.
#[derive(Debug, Deserialize)]
struct ApproveBody {
    app_id: String,
    scope: String,
}

async fn approve_hook(State(shared): State<Shared>, body: Bytes) -> Response {
    let body: ApproveBody = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"error": format!("not an approval: {e}")})),
            )
                .into_response();
        }
    };
    match approve(&mut shared.lock(), &body.app_id, &body.scope) {
        Ok(()) => Json(json!({
            "app_id": body.app_id,
            "scope": body.scope,
            "status": ScopeApplicationStatus::Approved,
        }))
        .into_response(),
        Err(e) => (StatusCode::NOT_FOUND, Json(json!({"error": e.to_string()}))).into_response(),
    }
}

/// The body of `POST /_emulator/scope_apply_policy`.
#[derive(Debug, Deserialize)]
struct PolicyBody {
    auto_approve: bool,
}

async fn policy_hook(State(shared): State<Shared>, body: Bytes) -> Response {
    match serde_json::from_slice::<PolicyBody>(&body) {
        Ok(policy) => {
            shared.lock().scope_apply.auto_approve = policy.auto_approve;
            Json(json!({"auto_approve": policy.auto_approve})).into_response()
        }
        Err(e) => (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": format!("not a policy: {e}")})),
        )
            .into_response(),
    }
}

/// Applying for scopes: the applications and the tenant admin's side.
impl FeishuEmulator {
    /// Every application filed so far, oldest first (also `GET /_emulator/scope_applications`).
    pub fn scope_applications(&self) -> Vec<ScopeApplication> {
        self.shared.lock().scope_apply.applications.clone()
    }

    /// Files an application as the scope-apply page's Submit does; answers where it stands.
    pub fn apply_for_scope(
        &self,
        app_id: &str,
        scope: &str,
    ) -> Result<ScopeApplicationStatus, String> {
        apply(&mut self.shared.lock(), app_id, scope).map_err(|e| e.to_string())
    }

    /// The tenant admin approves the waiting application: the scope is enabled for the app at
    /// once (also `POST /_emulator/scope_applications/approve`).
    pub fn approve_scope_application(&self, app_id: &str, scope: &str) -> Result<(), String> {
        approve(&mut self.shared.lock(), app_id, scope).map_err(|e| e.to_string())
    }

    /// The tenant's policy: `true` approves every later submission at once, as for scopes
    /// Feishu grants without an admin; off by default (also `POST /_emulator/scope_apply_policy`).
    pub fn set_scope_apply_auto_approve(&self, auto_approve: bool) {
        self.shared.lock().scope_apply.auto_approve = auto_approve;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_list_reads_comma_or_space_separated_without_repeats() {
        assert_eq!(
            split_scopes("search:docs:read, drive:drive:readonly search:docs:read"),
            ["search:docs:read", "drive:drive:readonly"]
        );
        assert!(split_scopes(" , ").is_empty());
    }
}
