//! App self-registration ("create an app for me") over real HTTP, each answer read the way
//! lark-cli's `config init` reads it: begin, pending, slow_down, the person's confirm or cancel
//! (hook and page), expiry, unknown and used codes, and a Lark tenant's second poll on the Lark
//! host for the secret.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod lark_cli;

use std::time::Duration;

use emulator::feishu::{
    AUTO_APPROVED_SCOPES, FeishuEmulator, RegistrationBrand, RegistrationStatus,
};
use lark_cli::{RegistrationPoll, begin_registration, poll_registration};
use serde_json::json;

async fn fast_emulator() -> FeishuEmulator {
    let emulator = FeishuEmulator::start().await.unwrap();
    emulator.set_device_timing(0, 300);
    emulator
}

fn done(poll: &RegistrationPoll) -> (String, String, Option<String>, Option<String>) {
    match poll {
        RegistrationPoll::Done {
            client_id,
            client_secret,
            open_id,
            tenant_brand,
        } => (
            client_id.clone(),
            client_secret.clone(),
            open_id.clone(),
            tenant_brand.clone(),
        ),
        other => panic!("not done: {other:?}"),
    }
}

#[tokio::test]
async fn begin_answers_what_lark_cli_reads_and_refuses_other_archetypes() {
    let emulator = FeishuEmulator::start().await.unwrap();
    let base = emulator.base_url();
    let begun = begin_registration(&base, &base).await.unwrap();
    assert_eq!(begun.verification_uri, format!("{base}/page/cli"));
    assert_eq!(
        begun.verification_uri_complete,
        format!("{base}/page/cli?user_code={}", begun.user_code)
    );
    // The documented defaults, not lark-cli's fallbacks by accident: the keys are there.
    let (_, raw) = lark_cli::post_form(
        &format!("{base}/oauth/v1/app/registration"),
        &[
            ("action", "begin"),
            ("archetype", "PersonalAgent"),
            ("auth_method", "client_secret"),
        ],
        None,
    )
    .await;
    assert_eq!(raw["expires_in"], 300, "{raw}");
    assert_eq!(raw["interval"], 5, "{raw}");
    assert_eq!(begun.expires_in, 300);
    assert_eq!(begun.interval, 5);
    let code = &begun.user_code;
    assert_eq!(code.len(), 9, "{code}");
    assert_eq!(&code[4..5], "-", "{code}");
    assert!(
        code.chars().all(|c| c == '-' || c.is_ascii_uppercase()),
        "{code}"
    );
    assert!(begun.device_code.len() >= 32, "{}", begun.device_code);

    for (archetype, method) in [("Other", "client_secret"), ("PersonalAgent", "private_key")] {
        let (status, data) = lark_cli::post_form(
            &format!("{base}/oauth/v1/app/registration"),
            &[
                ("action", "begin"),
                ("archetype", archetype),
                ("auth_method", method),
            ],
            None,
        )
        .await;
        assert_eq!(status, 400, "{data}");
        assert_eq!(data["error"], "invalid_request", "{data}");
        let read = lark_cli::read_begin(status, &data, &base).unwrap_err();
        assert!(read.starts_with("app registration failed: "), "{read}");
    }
    let (status, data) = lark_cli::post_form(
        &format!("{base}/oauth/v1/app/registration"),
        &[("action", "begin")],
        None,
    )
    .await;
    assert_eq!(
        (status, data["error"].as_str()),
        (400, Some("invalid_request"))
    );
}

#[tokio::test]
async fn pending_then_slow_down_and_the_interval_grows_by_five_seconds() {
    let emulator = FeishuEmulator::start().await.unwrap();
    emulator.set_device_timing(1, 300);
    let base = emulator.base_url();
    let begun = begin_registration(&base, &base).await.unwrap();
    assert_eq!(begun.interval, 1);
    assert_eq!(
        poll_registration(&base, &begun.device_code).await,
        RegistrationPoll::Pending
    );
    assert_eq!(
        poll_registration(&base, &begun.device_code).await,
        RegistrationPoll::SlowDown,
        "polled again at once"
    );
    // A client keeping the old 1 s interval is still too fast: it is now 6 s.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert_eq!(
        poll_registration(&base, &begun.device_code).await,
        RegistrationPoll::SlowDown
    );
}

#[tokio::test]
async fn a_confirmed_registration_answers_a_working_app_once() {
    let emulator = fast_emulator().await;
    let base = emulator.base_url();
    let begun = begin_registration(&base, &base).await.unwrap();
    assert_eq!(
        poll_registration(&base, &begun.device_code).await,
        RegistrationPoll::Pending
    );
    let (status, answer) = lark_cli::hook(
        &base,
        "/_emulator/registration/confirm",
        json!({"user_code": begun.user_code, "decision": "allow"}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let app_id = answer["app_id"].as_str().unwrap().to_owned();

    let poll = poll_registration(&base, &begun.device_code).await;
    let (client_id, secret, open_id, brand) = done(&poll);
    assert_eq!(client_id, app_id);
    // init_interactive.go refuses an answer without either.
    assert!(!secret.is_empty());
    assert_eq!(open_id.as_deref(), Some(emulator.seed().demo_user.as_str()));
    assert_eq!(brand.as_deref(), Some("feishu"));

    assert!(app_id.starts_with("cli_"), "{app_id}");
    assert_eq!(app_id.len(), 20, "{app_id}");
    assert!(
        app_id[4..].chars().all(|c| c.is_ascii_hexdigit()),
        "{app_id}"
    );
    let app = emulator.app(&app_id).unwrap();
    assert_eq!(app.app_secret, secret);
    assert!(app.redirect_uris.is_empty());
    let mut expected: Vec<String> = AUTO_APPROVED_SCOPES
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    expected.push("offline_access".to_owned());
    assert_eq!(app.enabled_scopes, expected);

    // The answer that carried the secret used the code up.
    let (status, raw) = lark_cli::raw_registration_poll(&base, &begun.device_code).await;
    assert_eq!(
        (status, raw["error"].as_str()),
        (400, Some("invalid_grant")),
        "{raw}"
    );
    assert_eq!(
        lark_cli::read_registration_poll(&raw),
        RegistrationPoll::Failed("device code expired, please try again".to_owned())
    );
    assert_eq!(
        emulator.registrations()[0].status,
        RegistrationStatus::Consumed
    );
    let listed = lark_cli::hook_get(&base, "/_emulator/registrations").await;
    assert_eq!(listed[0]["status"], "consumed", "{listed}");
    assert_eq!(listed[0]["app_id"], app_id.as_str(), "{listed}");
    // The app token of a self-built app works with the secret handed out.
    let (_, token) = lark_cli::hook(
        &base,
        "/open-apis/auth/v3/app_access_token/internal",
        json!({"app_id": app_id, "app_secret": secret}),
    )
    .await;
    assert_eq!(token["code"], 0, "{token}");
}

#[tokio::test]
async fn cancel_expiry_and_unknown_codes_end_the_poll_as_lark_cli_expects() {
    let emulator = fast_emulator().await;
    let base = emulator.base_url();

    let cancelled = begin_registration(&base, &base).await.unwrap();
    let (status, answer) = lark_cli::hook(
        &base,
        "/_emulator/registration/confirm",
        json!({"user_code": cancelled.user_code, "decision": "deny"}),
    )
    .await;
    assert_eq!(
        (status, answer["app_id"].clone()),
        (200, json!(null)),
        "{answer}"
    );
    let (_, raw) = lark_cli::raw_registration_poll(&base, &cancelled.device_code).await;
    assert_eq!(raw["error"], "access_denied", "{raw}");
    assert_eq!(
        lark_cli::read_registration_poll(&raw),
        RegistrationPoll::Failed("app registration denied by user".to_owned())
    );
    // Deciding twice is refused.
    let again =
        emulator.confirm_registration(&cancelled.user_code, true, RegistrationBrand::Feishu, None);
    assert!(again.is_err(), "{again:?}");

    let (status, unknown) = lark_cli::raw_registration_poll(&base, "no-such-code").await;
    assert_eq!(
        (status, unknown["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    let (status, answer) = lark_cli::hook(
        &base,
        "/_emulator/registration/confirm",
        json!({"user_code": "BCDF-GHJK", "decision": "allow"}),
    )
    .await;
    assert_eq!(status, 404, "{answer}");

    emulator.set_device_timing(0, 1);
    let expiring = begin_registration(&base, &base).await.unwrap();
    assert_eq!(expiring.expires_in, 1);
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let (status, raw) = lark_cli::raw_registration_poll(&base, &expiring.device_code).await;
    assert_eq!(
        (status, raw["error"].as_str()),
        (400, Some("expired_token")),
        "{raw}"
    );
    let (status, answer) = lark_cli::hook(
        &base,
        "/_emulator/registration/confirm",
        json!({"user_code": expiring.user_code, "decision": "allow"}),
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    let (status, page) = lark_cli::get_page(&expiring.verification_uri_complete).await;
    assert_eq!(status, 400);
    assert!(page.contains("data-testid=\"error\""), "{page}");
    assert!(page.contains("expired"), "{page}");
    assert_eq!(
        emulator.registrations()[1].status,
        RegistrationStatus::Expired
    );
}

#[tokio::test]
async fn a_lark_tenant_gets_the_secret_only_from_the_lark_host() {
    let emulator = fast_emulator().await;
    let base = emulator.base_url();
    let lark = format!("{base}/lark");
    // lark-cli begins on Feishu's accounts host whatever the brand.
    let begun = begin_registration(&base, &lark).await.unwrap();
    let app_id = emulator
        .confirm_registration(&begun.user_code, true, RegistrationBrand::Lark, None)
        .unwrap()
        .unwrap();

    let (status, raw) = lark_cli::raw_registration_poll(&base, &begun.device_code).await;
    assert_eq!(status, 200, "{raw}");
    assert!(
        raw.get("client_secret").is_none(),
        "no secret key at all: {raw}"
    );
    let (client_id, secret, _, brand) = done(&lark_cli::read_registration_poll(&raw));
    assert_eq!(client_id, app_id);
    // init_interactive.go: `ClientSecret == "" && TenantBrand == "lark"` → poll the Lark host.
    assert!(secret.is_empty());
    assert_eq!(brand.as_deref(), Some("lark"));
    assert_eq!(
        emulator.registrations()[0].status,
        RegistrationStatus::Created
    );

    let (client_id, secret, _, brand) = done(&poll_registration(&lark, &begun.device_code).await);
    assert_eq!(client_id, app_id);
    assert_eq!(secret, emulator.app(&app_id).unwrap().app_secret);
    assert_eq!(brand.as_deref(), Some("lark"));
    // Used up on both hosts.
    for host in [&base, &lark] {
        let (_, raw) = lark_cli::raw_registration_poll(host, &begun.device_code).await;
        assert_eq!(raw["error"], "invalid_grant", "{host}: {raw}");
    }
    // Begun on the Lark host, the link points there.
    let on_lark = begin_registration(&lark, &lark).await.unwrap();
    assert_eq!(on_lark.verification_uri, format!("{lark}/page/cli"));
}

#[tokio::test]
async fn the_page_shows_the_app_and_its_buttons_decide() {
    let emulator = fast_emulator().await;
    let base = emulator.base_url();
    let begun = begin_registration(&base, &base).await.unwrap();
    let url = lark_cli::with_tracking(&begun.verification_uri_complete);
    let (status, html) = lark_cli::get_page(&url).await;
    assert_eq!(status, 200, "{html}");
    for needle in [
        "飞书助手 Feishu Companion",
        "PersonalAgent",
        "林晓",
        "Lin Xiao",
        "data-testid=\"registration-confirm\"",
        "data-testid=\"registration-cancel\"",
        "创建并授权",
        "取消",
        "calendar:calendar:readonly",
        "offline_access",
        "action=\"/page/cli/decision\"",
    ] {
        assert!(html.contains(needle), "{needle}: {html}");
    }
    assert!(!html.contains("search:docs:read"), "not auto-approved");
    let (status, done_page) = lark_cli::press(
        &lark_cli::form_action(&base, &html),
        &[("user_code", &begun.user_code), ("decision", "allow")],
    )
    .await;
    assert_eq!(status, 200, "{done_page}");
    assert!(
        done_page.contains("data-testid=\"registration-done\""),
        "{done_page}"
    );
    assert!(done_page.contains("Return to the app"), "{done_page}");
    let (client_id, secret, _, brand) = done(&poll_registration(&base, &begun.device_code).await);
    assert!(client_id.starts_with("cli_") && !secret.is_empty());
    assert_eq!(brand.as_deref(), Some("feishu"));
    // The page of a decided code says so.
    let (status, _) = lark_cli::get_page(&url).await;
    assert_eq!(status, 400);

    let cancelled = begin_registration(&base, &base).await.unwrap();
    // As typed by a person: lower case, without the dash.
    let typed = cancelled.user_code.to_lowercase().replace('-', "");
    let (status, html) = lark_cli::get_page(&format!("{base}/page/cli?user_code={typed}")).await;
    assert_eq!(status, 200, "{html}");
    let (status, page) = lark_cli::press(
        &lark_cli::form_action(&base, &html),
        &[("user_code", &cancelled.user_code), ("decision", "deny")],
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        page.contains("data-testid=\"registration-cancelled\""),
        "{page}"
    );
    assert_eq!(
        poll_registration(&base, &cancelled.device_code).await,
        RegistrationPoll::Failed("app registration denied by user".to_owned())
    );

    let (status, page) = lark_cli::get_page(&format!("{base}/page/cli?user_code=ZZZZ-ZZZZ")).await;
    assert_eq!(status, 404);
    assert!(page.contains("data-testid=\"error\""), "{page}");

    // The Lark host's page confirms for a Lark tenant.
    let lark = format!("{base}/lark");
    let on_lark = begin_registration(&base, &lark).await.unwrap();
    let (status, html) = lark_cli::get_page(&on_lark.verification_uri_complete).await;
    assert_eq!(status, 200);
    assert!(
        html.contains("action=\"/lark/page/cli/decision\""),
        "{html}"
    );
    let (status, _) = lark_cli::press(
        &lark_cli::form_action(&base, &html),
        &[("user_code", &on_lark.user_code), ("decision", "allow")],
    )
    .await;
    assert_eq!(status, 200);
    let (_, _, _, brand) = done(&poll_registration(&base, &on_lark.device_code).await);
    assert_eq!(brand.as_deref(), Some("lark"));
}

#[tokio::test]
async fn another_person_confirming_becomes_the_signed_in_user() {
    let emulator = fast_emulator().await;
    let base = emulator.base_url();
    let other = emulator.seed().people[1].clone();
    let begun = begin_registration(&base, &base).await.unwrap();
    let (status, answer) = lark_cli::hook(
        &base,
        "/_emulator/registration/confirm",
        json!({"user_code": begun.user_code, "decision": "allow", "open_id": other.open_id}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let (_, _, open_id, _) = done(&poll_registration(&base, &begun.device_code).await);
    assert_eq!(open_id.as_deref(), Some(other.open_id.as_str()));
    let info = emulator.registrations();
    assert_eq!(info[0].open_id.as_deref(), Some(other.open_id.as_str()));

    let stranger = begin_registration(&base, &base).await.unwrap();
    let refused = emulator.confirm_registration(
        &stranger.user_code,
        true,
        RegistrationBrand::Feishu,
        Some("ou_nobody"),
    );
    assert!(refused.is_err(), "{refused:?}");
}
