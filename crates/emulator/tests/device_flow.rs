//! The device authorization grant (RFC 8628) over real HTTP, each answer read the way
//! lark-cli's `auth login` reads it: client authentication, the code and its links on both
//! brands' hosts, pending, slow_down, the person's decision (hook and page), expiry, unknown,
//! used and foreign codes, and the token it ends with.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod lark_cli;

use std::time::Duration;

use emulator::feishu::{App, DEVICE_CODE_GRANT, FeishuEmulator};
use lark_cli::{DevicePoll, poll_device_token, request_device_authorization};
use serde_json::json;

const APP: &str = "cli_device_flow_app";
const SECRET: &str = "device-secret";

async fn emulator(interval: u64) -> FeishuEmulator {
    let emulator = FeishuEmulator::start().await.unwrap();
    emulator.register_app(App {
        app_id: APP.into(),
        app_secret: SECRET.into(),
        redirect_uris: Vec::new(),
        enabled_scopes: vec![
            "calendar:calendar:readonly".into(),
            "task:task:read".into(),
            "offline_access".into(),
        ],
    });
    emulator.set_device_timing(interval, 240);
    emulator
}

fn token(poll: DevicePoll) -> lark_cli::DeviceToken {
    match poll {
        DevicePoll::Done(token) => token,
        other => panic!("no token: {other:?}"),
    }
}

#[tokio::test]
async fn client_authentication_is_checked_before_a_code_is_issued() {
    let emulator = emulator(0).await;
    let base = emulator.base_url();
    let url = format!("{base}/oauth/v1/device_authorization");
    let form = [("client_id", APP), ("scope", "calendar:calendar:readonly")];
    for basic in [None, Some((APP, "wrong")), Some(("cli_nobody", SECRET))] {
        let (status, data) = lark_cli::post_form(&url, &form, basic).await;
        assert_eq!(status, 401, "{basic:?}: {data}");
        assert_eq!(data["error"], "invalid_client", "{data}");
        let read = lark_cli::read_device_authorization(status, &data).unwrap_err();
        assert!(read.starts_with("Device authorization failed: "), "{read}");
    }
    let (status, data) = lark_cli::post_form(
        &url,
        &[
            ("client_id", "cli_other"),
            ("scope", "calendar:calendar:readonly"),
        ],
        Some((APP, SECRET)),
    )
    .await;
    assert_eq!(
        (status, data["error"].as_str()),
        (400, Some("invalid_request")),
        "{data}"
    );
    assert!(emulator.pending_device_authorizations().is_empty());
}

#[tokio::test]
async fn the_code_answers_what_lark_cli_reads_on_both_hosts() {
    let emulator = FeishuEmulator::start().await.unwrap();
    emulator.register_app(App {
        app_id: APP.into(),
        app_secret: SECRET.into(),
        redirect_uris: Vec::new(),
        enabled_scopes: vec!["calendar:calendar:readonly".into()],
    });
    let base = emulator.base_url();
    let auth = request_device_authorization(&base, APP, SECRET, "calendar:calendar:readonly")
        .await
        .unwrap();
    assert_eq!(
        auth.verification_uri,
        format!("{base}/oauth/v1/device/verify")
    );
    assert_eq!(
        auth.verification_uri_complete,
        format!("{base}/oauth/v1/device/verify?user_code={}", auth.user_code)
    );
    // The defaults, present as keys.
    let (_, raw) = lark_cli::post_form(
        &format!("{base}/oauth/v1/device_authorization"),
        &[("client_id", APP), ("scope", "offline_access")],
        Some((APP, SECRET)),
    )
    .await;
    assert_eq!(
        (raw["expires_in"].as_i64(), raw["interval"].as_i64()),
        (Some(240), Some(5))
    );
    assert_eq!((auth.expires_in, auth.interval), (240, 5));

    let pending = emulator.pending_device_authorizations();
    assert_eq!(pending.len(), 2);
    assert_eq!(pending[0].user_code, auth.user_code);
    assert_eq!(pending[0].app_id, APP);
    assert_eq!(
        pending[0].scopes,
        ["calendar:calendar:readonly", "offline_access"]
    );
    let listed = lark_cli::hook_get(&base, "/_emulator/device/pending").await;
    assert_eq!(listed[0]["user_code"], auth.user_code.as_str(), "{listed}");
    assert_eq!(listed[0]["app_id"], APP);
    assert_eq!(
        emulator.latest_device_user_code(),
        Some(listed[1]["user_code"].as_str().unwrap().to_owned()),
        "the newest is last"
    );

    let lark = format!("{base}/lark");
    let on_lark = request_device_authorization(&lark, APP, SECRET, "")
        .await
        .unwrap();
    assert_eq!(
        on_lark.verification_uri,
        format!("{lark}/oauth/v1/device/verify")
    );
    assert!(
        on_lark
            .verification_uri_complete
            .starts_with(&format!("{lark}/oauth/v1/device/verify?user_code=")),
        "{}",
        on_lark.verification_uri_complete
    );
}

#[tokio::test]
async fn pending_then_slow_down_then_allowed_gives_the_v2_token_once() {
    let emulator = emulator(1).await;
    let base = emulator.base_url();
    let slow = request_device_authorization(&base, APP, SECRET, "calendar:calendar:readonly")
        .await
        .unwrap();
    assert_eq!(slow.interval, 1);
    assert_eq!(
        poll_device_token(&base, APP, SECRET, &slow.device_code).await,
        DevicePoll::Pending
    );
    assert_eq!(
        poll_device_token(&base, APP, SECRET, &slow.device_code).await,
        DevicePoll::SlowDown
    );
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert_eq!(
        poll_device_token(&base, APP, SECRET, &slow.device_code).await,
        DevicePoll::SlowDown,
        "the interval grew to 6 s"
    );

    emulator.set_device_timing(0, 240);
    let auth = request_device_authorization(
        &base,
        APP,
        SECRET,
        "calendar:calendar:readonly search:docs:read",
    )
    .await
    .unwrap();
    assert_eq!(
        poll_device_token(&base, APP, SECRET, &auth.device_code).await,
        DevicePoll::Pending
    );
    let (status, answer) = lark_cli::hook(
        &base,
        "/_emulator/device/decide",
        json!({"user_code": auth.user_code, "decision": "allow"}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");

    // A wrong secret is the token endpoint's own answer, and leaves the code alone.
    let (status, raw) = lark_cli::raw_device_poll(&base, APP, "wrong", &auth.device_code).await;
    assert_eq!((status, raw["code"].as_i64()), (400, Some(20002)), "{raw}");
    assert_eq!(raw["error"], "invalid_client");

    let got = token(poll_device_token(&base, APP, SECRET, &auth.device_code).await);
    assert!(got.access_token.starts_with("eyJ"), "{}", got.access_token);
    assert!(
        !got.refresh_token.is_empty(),
        "offline_access was asked for"
    );
    assert_eq!(got.expires_in, 7200);
    assert_eq!(got.refresh_expires_in, 604_800);
    // search:docs:read is not enabled for the app: trimmed, and the scope says so.
    assert_eq!(
        got.scopes(),
        ["calendar:calendar:readonly", "offline_access"]
    );
    assert!(emulator.token_has_scope(&got.access_token, "calendar:calendar:readonly"));
    assert_eq!(
        emulator.token_app_id(&got.access_token).as_deref(),
        Some(APP)
    );

    let (status, raw) = lark_cli::raw_device_poll(&base, APP, SECRET, &auth.device_code).await;
    assert_eq!(
        (status, raw["error"].as_str()),
        (400, Some("invalid_grant")),
        "used: {raw}"
    );
    assert!(matches!(
        lark_cli::read_device_poll(&raw),
        DevicePoll::Failed { error, .. } if error == "expired_token"
    ));
    assert_eq!(
        emulator.count("/open-apis/authen/v2/oauth/token", Some(DEVICE_CODE_GRANT)),
        7,
        "every poll is logged with its grant type"
    );

    // The refresh token is the ordinary rotating one.
    let (status, refreshed) = lark_cli::post_form(
        &format!("{base}/open-apis/authen/v2/oauth/token"),
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", &got.refresh_token),
            ("client_id", APP),
            ("client_secret", SECRET),
        ],
        None,
    )
    .await;
    assert_eq!(status, 200, "{refreshed}");
    assert_ne!(refreshed["refresh_token"], got.refresh_token.as_str());
}

#[tokio::test]
async fn grants_accumulate_across_device_sign_ins_and_user_info_names_the_person() {
    let emulator = emulator(0).await;
    let base = emulator.base_url();
    let first = request_device_authorization(&base, APP, SECRET, "calendar:calendar:readonly")
        .await
        .unwrap();
    emulator.decide_device(&first.user_code, true).unwrap();
    token(poll_device_token(&base, APP, SECRET, &first.device_code).await);

    let second = request_device_authorization(&base, APP, SECRET, "task:task:read")
        .await
        .unwrap();
    let other = emulator.seed().people[1].clone();
    emulator
        .decide_device_as(&second.user_code, true, Some(&other.open_id))
        .unwrap();
    let got = token(poll_device_token(&base, APP, SECRET, &second.device_code).await);
    assert_eq!(
        got.scopes(),
        [
            "calendar:calendar:readonly",
            "offline_access",
            "task:task:read"
        ]
    );
    let (status, info) = lark_cli::open_api(
        &base,
        &got.access_token,
        "GET",
        "/open-apis/authen/v1/user_info",
        None,
    )
    .await;
    assert_eq!(status, 200, "{info}");
    assert_eq!(info["data"]["open_id"], other.open_id.as_str());
}

#[tokio::test]
async fn denied_expired_unknown_and_foreign_codes_end_the_poll() {
    let emulator = emulator(0).await;
    emulator.register_app(App {
        app_id: "cli_other_app".into(),
        app_secret: "other-secret".into(),
        redirect_uris: Vec::new(),
        enabled_scopes: Vec::new(),
    });
    let base = emulator.base_url();

    let denied = request_device_authorization(&base, APP, SECRET, "")
        .await
        .unwrap();
    let (status, _) = lark_cli::hook(
        &base,
        "/_emulator/device/decide",
        json!({"user_code": denied.user_code, "decision": "deny"}),
    )
    .await;
    assert_eq!(status, 200);
    let (_, raw) = lark_cli::raw_device_poll(&base, APP, SECRET, &denied.device_code).await;
    assert_eq!(raw["error"], "access_denied", "{raw}");
    assert!(matches!(
        lark_cli::read_device_poll(&raw),
        DevicePoll::Failed { error, .. } if error == "access_denied"
    ));
    assert!(
        emulator.decide_device(&denied.user_code, true).is_err(),
        "decided already"
    );

    let foreign = request_device_authorization(&base, APP, SECRET, "")
        .await
        .unwrap();
    emulator.decide_device(&foreign.user_code, true).unwrap();
    let (_, raw) =
        lark_cli::raw_device_poll(&base, "cli_other_app", "other-secret", &foreign.device_code)
            .await;
    assert_eq!(
        raw["error"], "invalid_grant",
        "another client's code: {raw}"
    );
    token(poll_device_token(&base, APP, SECRET, &foreign.device_code).await);

    let (status, raw) = lark_cli::raw_device_poll(&base, APP, SECRET, "no-such-code").await;
    assert_eq!(
        (status, raw["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    let (status, _) = lark_cli::hook(
        &base,
        "/_emulator/device/decide",
        json!({"user_code": "BCDF-GHJK", "decision": "allow"}),
    )
    .await;
    assert_eq!(status, 404);
    // A hook asked something it cannot answer says so, for both flows' hooks.
    for path in [
        "/_emulator/device/decide",
        "/_emulator/registration/confirm",
    ] {
        let (status, answer) = lark_cli::hook(
            &base,
            path,
            json!({"user_code": "BCDF-GHJK", "decision": "maybe"}),
        )
        .await;
        assert_eq!(status, 400, "{path}: {answer}");
        assert!(
            answer["error"]
                .as_str()
                .unwrap_or_default()
                .contains("allow or deny"),
            "{path}: {answer}"
        );
        let (status, answer) = lark_cli::hook(&base, path, json!({"decision": "allow"})).await;
        assert_eq!(status, 400, "{path}: {answer}");
        assert!(
            answer["error"]
                .as_str()
                .unwrap_or_default()
                .contains("not a decision"),
            "{path}: {answer}"
        );
    }

    let (status, timing) = lark_cli::hook(
        &base,
        "/_emulator/device_timing",
        json!({"interval_secs": 0, "expires_in_secs": 1}),
    )
    .await;
    assert_eq!(status, 200, "{timing}");
    let expiring = request_device_authorization(&base, APP, SECRET, "")
        .await
        .unwrap();
    assert_eq!(expiring.expires_in, 1);
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let (_, raw) = lark_cli::raw_device_poll(&base, APP, SECRET, &expiring.device_code).await;
    assert_eq!(raw["error"], "expired_token", "{raw}");
    assert!(emulator.decide_device(&expiring.user_code, true).is_err());
    assert!(
        emulator.pending_device_authorizations().is_empty(),
        "expired codes are not pending"
    );
    let (status, page) = lark_cli::get_page(&expiring.verification_uri_complete).await;
    assert_eq!(status, 400);
    assert!(page.contains("data-testid=\"error\""), "{page}");
}

#[tokio::test]
async fn the_verification_page_shows_the_request_and_its_buttons_decide() {
    let emulator = emulator(0).await;
    let base = emulator.base_url();
    let auth = request_device_authorization(
        &base,
        APP,
        SECRET,
        "calendar:calendar:readonly search:docs:read",
    )
    .await
    .unwrap();
    let (status, html) = lark_cli::get_page(&auth.verification_uri_complete).await;
    assert_eq!(status, 200, "{html}");
    for needle in [
        APP,
        "林晓",
        "Lin Xiao",
        "data-testid=\"device-allow\"",
        "data-testid=\"device-deny\"",
        "授权",
        "Allow",
        "calendar:calendar:readonly",
        "data-testid=\"device-scopes-skipped\"",
        "search:docs:read",
        "action=\"/oauth/v1/device/verify/decision\"",
    ] {
        assert!(html.contains(needle), "{needle}: {html}");
    }
    let (status, page) = lark_cli::press(
        &lark_cli::form_action(&base, &html),
        &[("user_code", &auth.user_code), ("decision", "allow")],
    )
    .await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("data-testid=\"device-done\""), "{page}");
    assert!(page.contains("Return to the app"), "{page}");
    let got = token(poll_device_token(&base, APP, SECRET, &auth.device_code).await);
    assert!(!got.scopes().contains(&"search:docs:read"));

    let denied = request_device_authorization(&base, APP, SECRET, "")
        .await
        .unwrap();
    let (_, html) = lark_cli::get_page(&denied.verification_uri_complete).await;
    let (status, page) = lark_cli::press(
        &lark_cli::form_action(&base, &html),
        &[("user_code", &denied.user_code), ("decision", "deny")],
    )
    .await;
    assert_eq!(status, 200);
    assert!(page.contains("data-testid=\"device-denied\""), "{page}");
    let (_, raw) = lark_cli::raw_device_poll(&base, APP, SECRET, &denied.device_code).await;
    assert_eq!(raw["error"], "access_denied");

    // Without a code, the page asks for one; with an unknown one, it says so.
    let (status, entry) = lark_cli::get_page(&auth.verification_uri).await;
    assert_eq!(status, 200);
    assert!(
        entry.contains("data-testid=\"device-user-code\""),
        "{entry}"
    );
    let (status, page) = lark_cli::get_page(&format!(
        "{base}/oauth/v1/device/verify?user_code=ZZZZ-ZZZZ"
    ))
    .await;
    assert_eq!(status, 404);
    assert!(page.contains("data-testid=\"error\""), "{page}");

    // The Lark host's page posts to the Lark host.
    let lark = format!("{base}/lark");
    let on_lark = request_device_authorization(&lark, APP, SECRET, "")
        .await
        .unwrap();
    let (status, html) = lark_cli::get_page(&on_lark.verification_uri_complete).await;
    assert_eq!(status, 200);
    assert!(
        html.contains("action=\"/lark/oauth/v1/device/verify/decision\""),
        "{html}"
    );
    let (status, _) = lark_cli::press(
        &lark_cli::form_action(&base, &html),
        &[("user_code", &on_lark.user_code), ("decision", "allow")],
    )
    .await;
    assert_eq!(status, 200);
    token(poll_device_token(&lark, APP, SECRET, &on_lark.device_code).await);
}

#[tokio::test]
async fn the_token_endpoint_takes_the_device_grant_as_json_too() {
    let emulator = emulator(0).await;
    let base = emulator.base_url();
    let auth = request_device_authorization(&base, APP, SECRET, "")
        .await
        .unwrap();
    emulator.decide_device(&auth.user_code, true).unwrap();
    let (status, answer) = lark_cli::hook(
        &base,
        "/open-apis/authen/v2/oauth/token",
        json!({
            "grant_type": DEVICE_CODE_GRANT,
            "device_code": auth.device_code,
            "client_id": APP,
            "client_secret": SECRET,
        }),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["code"], 0);
    assert_eq!(answer["token_type"], "Bearer");
}
