//! An app made by self-registration does what lark-cli then does with it: signs in by the
//! device flow as the person who created it, reads the calendar, meets 99991672 for a scope
//! outside the auto-approved set, applies for it on the scope-apply page, and, once the admin
//! approves and the person signs in again for it, uses it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod lark_cli;

use emulator::feishu::{FeishuEmulator, RegistrationBrand, ScopeApplicationStatus};
use lark_cli::{DevicePoll, RegistrationPoll};
use serde_json::{Value, json};

/// Creates an app as the demo user; answers its id and secret.
async fn create_app(emulator: &FeishuEmulator) -> (String, String) {
    let base = emulator.base_url();
    let begun = lark_cli::begin_registration(&base, &base).await.unwrap();
    emulator
        .confirm_registration(&begun.user_code, true, RegistrationBrand::Feishu, None)
        .unwrap();
    match lark_cli::poll_registration(&base, &begun.device_code).await {
        RegistrationPoll::Done {
            client_id,
            client_secret,
            ..
        } => (client_id, client_secret),
        other => panic!("{other:?}"),
    }
}

/// Signs in by the device flow for `scope`, the person allowing; answers the token's access
/// token and scopes.
async fn sign_in(
    emulator: &FeishuEmulator,
    app: &(String, String),
    scope: &str,
) -> (String, String) {
    let base = emulator.base_url();
    let auth = lark_cli::request_device_authorization(&base, &app.0, &app.1, scope)
        .await
        .unwrap();
    assert_eq!(
        emulator.latest_device_user_code().as_deref(),
        Some(auth.user_code.as_str())
    );
    emulator.decide_device(&auth.user_code, true).unwrap();
    match lark_cli::poll_device_token(&base, &app.0, &app.1, &auth.device_code).await {
        DevicePoll::Done(token) => (token.access_token, token.scope),
        other => panic!("{other:?}"),
    }
}

async fn search_docs(base: &str, token: &str) -> Value {
    lark_cli::open_api(
        base,
        token,
        "POST",
        "/open-apis/search/v2/doc_wiki/search",
        Some(json!({"query": "周报", "doc_filter": {}})),
    )
    .await
    .1
}

#[tokio::test]
async fn a_created_app_signs_in_reads_and_applies_for_what_it_lacks() {
    let emulator = FeishuEmulator::start().await.unwrap();
    emulator.set_device_timing(0, 240);
    let base = emulator.base_url();
    let app = create_app(&emulator).await;

    let (token, scope) = sign_in(
        &emulator,
        &app,
        "calendar:calendar:readonly search:docs:read",
    )
    .await;
    assert_eq!(
        scope, "calendar:calendar:readonly offline_access",
        "trimmed"
    );
    let (status, info) =
        lark_cli::open_api(&base, &token, "GET", "/open-apis/authen/v1/user_info", None).await;
    assert_eq!(
        (status, info["data"]["open_id"].clone()),
        (200, json!(emulator.seed().demo_user))
    );
    let (status, calendar) = lark_cli::open_api(
        &base,
        &token,
        "POST",
        "/open-apis/calendar/v4/calendars/primary",
        None,
    )
    .await;
    assert_eq!(
        (status, calendar["code"].as_i64()),
        (200, Some(0)),
        "{calendar}"
    );

    let refused = search_docs(&base, &token).await;
    assert_eq!(
        refused["code"], 99991672,
        "not enabled for the app: {refused}"
    );

    // The page lark-cli points at (cmd/root.go), with its query escaped the same way.
    let url = format!(
        "{base}/page/scope-apply?clientID={}&scopes={}",
        url::form_urlencoded::byte_serialize(app.0.as_bytes()).collect::<String>(),
        url::form_urlencoded::byte_serialize(b"search:docs:read").collect::<String>(),
    );
    let (status, html) = lark_cli::get_page(&url).await;
    assert_eq!(status, 200, "{html}");
    for needle in [
        "飞书助手 Feishu Companion",
        "search:docs:read",
        "data-testid=\"scope-apply-submit\"",
        "data-status=\"not_enabled\"",
        "action=\"/page/scope-apply/submit\"",
    ] {
        assert!(html.contains(needle), "{needle}: {html}");
    }
    let (status, filed) = lark_cli::press(
        &lark_cli::form_action(&base, &html),
        &[("clientID", &app.0), ("scopes", "search:docs:read")],
    )
    .await;
    assert_eq!(status, 200, "{filed}");
    assert!(
        filed.contains("data-testid=\"scope-apply-filed\""),
        "{filed}"
    );
    assert!(filed.contains("data-status=\"pending\""), "{filed}");

    let listed = lark_cli::hook_get(&base, "/_emulator/scope_applications").await;
    assert_eq!(
        listed,
        json!([{"app_id": app.0, "scope": "search:docs:read", "status": "pending"}])
    );
    assert_eq!(
        search_docs(&base, &token).await["code"],
        99991672,
        "still waiting"
    );

    let (status, approved) = lark_cli::hook(
        &base,
        "/_emulator/scope_applications/approve",
        json!({"app_id": app.0, "scope": "search:docs:read"}),
    )
    .await;
    assert_eq!(status, 200, "{approved}");
    assert!(
        emulator
            .app(&app.0)
            .unwrap()
            .enabled_scopes
            .iter()
            .any(|s| s == "search:docs:read")
    );
    assert_eq!(
        emulator.scope_applications()[0].status,
        ScopeApplicationStatus::Approved
    );
    // Enabled, but this token's user never granted it.
    assert_eq!(search_docs(&base, &token).await["code"], 99991679);

    let (token, scope) = sign_in(&emulator, &app, "search:docs:read").await;
    assert_eq!(
        scope, "calendar:calendar:readonly offline_access search:docs:read",
        "cumulative"
    );
    let found = search_docs(&base, &token).await;
    assert_eq!(found["code"], 0, "{found}");
}

#[tokio::test]
async fn applications_wait_for_the_admin_unless_the_tenant_approves_at_once() {
    let emulator = FeishuEmulator::start().await.unwrap();
    let base = emulator.base_url();
    let app = create_app(&emulator).await;

    assert_eq!(
        emulator.apply_for_scope(&app.0, "drive:drive:readonly"),
        Ok(ScopeApplicationStatus::Pending)
    );
    assert_eq!(
        emulator.apply_for_scope(&app.0, "drive:drive:readonly"),
        Ok(ScopeApplicationStatus::Pending),
        "not filed twice"
    );
    assert_eq!(emulator.scope_applications().len(), 1);
    assert_eq!(
        emulator.apply_for_scope(&app.0, "calendar:calendar:readonly"),
        Ok(ScopeApplicationStatus::Approved),
        "already enabled"
    );
    assert!(
        emulator
            .approve_scope_application(&app.0, "im:chat")
            .is_err(),
        "never filed"
    );
    let (status, _) = lark_cli::hook(
        &base,
        "/_emulator/scope_applications/approve",
        json!({"app_id": app.0, "scope": "im:chat"}),
    )
    .await;
    assert_eq!(status, 404);

    let (status, policy) = lark_cli::hook(
        &base,
        "/_emulator/scope_apply_policy",
        json!({"auto_approve": true}),
    )
    .await;
    assert_eq!(status, 200, "{policy}");
    let (_, html) = lark_cli::get_page(&format!(
        "{base}/page/scope-apply?clientID={}&scopes=im:chat",
        app.0
    ))
    .await;
    let (status, filed) = lark_cli::press(
        &lark_cli::form_action(&base, &html),
        &[("clientID", &app.0), ("scopes", "im:chat")],
    )
    .await;
    assert_eq!(status, 200);
    assert!(filed.contains("data-status=\"enabled\""), "{filed}");
    assert!(
        emulator
            .app(&app.0)
            .unwrap()
            .enabled_scopes
            .iter()
            .any(|s| s == "im:chat")
    );
    let listed = lark_cli::hook_get(&base, "/_emulator/scope_applications").await;
    assert_eq!(
        listed[1],
        json!({"app_id": app.0, "scope": "im:chat", "status": "approved"})
    );
    assert_eq!(
        emulator
            .app(&app.0)
            .unwrap()
            .enabled_scopes
            .iter()
            .filter(|s| *s == "drive:drive:readonly")
            .count(),
        0,
        "the earlier one still waits"
    );

    let (status, page) = lark_cli::get_page(&format!(
        "{base}/page/scope-apply?clientID=cli_nobody&scopes=im:chat"
    ))
    .await;
    assert_eq!(status, 404);
    assert!(page.contains("data-testid=\"error\""), "{page}");
    let (status, _) = lark_cli::press(
        &format!("{base}/page/scope-apply/submit"),
        &[("clientID", "cli_nobody"), ("scopes", "im:chat")],
    )
    .await;
    assert_eq!(status, 404);
    // On the Lark host the form posts there.
    let (status, html) = lark_cli::get_page(&format!(
        "{base}/lark/page/scope-apply?clientID={}&scopes=task:task:writeonly",
        app.0
    ))
    .await;
    assert_eq!(status, 200);
    assert!(
        html.contains("action=\"/lark/page/scope-apply/submit\""),
        "{html}"
    );
}

#[tokio::test]
async fn the_lark_host_serves_the_open_api_and_sign_in_over_the_same_tenant() {
    let emulator = FeishuEmulator::start().await.unwrap();
    emulator.set_device_timing(0, 240);
    let base = emulator.base_url();
    let lark = format!("{base}/lark");
    let app = create_app(&emulator).await;
    let auth = lark_cli::request_device_authorization(&lark, &app.0, &app.1, "task:task:read")
        .await
        .unwrap();
    emulator.decide_device(&auth.user_code, true).unwrap();
    let token = match lark_cli::poll_device_token(&lark, &app.0, &app.1, &auth.device_code).await {
        DevicePoll::Done(token) => token.access_token,
        other => panic!("{other:?}"),
    };
    let (status, tasks) =
        lark_cli::open_api(&lark, &token, "GET", "/open-apis/task/v2/tasks", None).await;
    assert_eq!((status, tasks["code"].as_i64()), (200, Some(0)), "{tasks}");
    // The gateway checks scopes on the Lark host too.
    let refused = search_docs(&lark, &token).await;
    assert_eq!(refused["code"], 99991672, "{refused}");
    let (status, missing) = lark_cli::open_api(&lark, &token, "GET", "/open-apis/nope", None).await;
    assert_eq!((status, missing["code"].as_i64()), (404, Some(99991201)));
    assert!(
        emulator
            .requests()
            .iter()
            .any(|r| r.path == "/open-apis/task/v2/tasks"
                && r.route.as_deref() == Some("/open-apis/task/v2/tasks")),
        "logged under the unprefixed route"
    );
}
