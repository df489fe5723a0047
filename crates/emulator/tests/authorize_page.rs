//! The emulator's authorize page fails as Feishu's does, with Feishu's codes on the page, for
//! each console setting a real tenant gets wrong; and with enterprise single sign-on it detours
//! through the tenant's identity provider on another port and comes back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use emulator::feishu::{App, AppRelease, FeishuEmulator};

const APP: &str = "cli_authorize_page";
const REDIRECT: &str = "http://127.0.0.1:9768/callback";

fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn emulator() -> FeishuEmulator {
    let emulator = FeishuEmulator::start().await.unwrap();
    emulator.register_app(App {
        app_id: APP.into(),
        app_secret: "s".into(),
        redirect_uris: vec![REDIRECT.into()],
        enabled_scopes: vec!["calendar:calendar:readonly".into()],
    });
    emulator
}

fn authorize(emulator: &FeishuEmulator, redirect: &str, scope: &str) -> String {
    let mut url = url::Url::parse(&format!(
        "{}/open-apis/authen/v1/authorize",
        emulator.base_url()
    ))
    .unwrap();
    url.query_pairs_mut()
        .append_pair("client_id", APP)
        .append_pair("response_type", "code")
        .append_pair("redirect_uri", redirect)
        .append_pair("scope", scope)
        .append_pair("state", "st4te");
    url.to_string()
}

/// The page's status and text.
async fn open(url: &str) -> (u16, String) {
    let answer = http().get(url).send().await.unwrap();
    (answer.status().as_u16(), answer.text().await.unwrap())
}

fn assert_refused(page: &(u16, String), code: i64) {
    assert_eq!(page.0, 400, "{}", page.1);
    assert!(page.1.contains(&format!("错误码：{code}")), "{}", page.1);
    assert!(
        page.1.contains(&format!("Error code: {code}")),
        "{}",
        page.1
    );
    assert!(page.1.contains("Log ID: "), "{}", page.1);
}

#[tokio::test]
async fn each_console_mistake_fails_with_its_code() {
    let emulator = emulator().await;
    let fine = authorize(
        &emulator,
        REDIRECT,
        "calendar:calendar:readonly offline_access",
    );
    assert_eq!(open(&fine).await.0, 200, "the consent page");

    let unregistered = authorize(
        &emulator,
        "http://127.0.0.1:9769/callback",
        "calendar:calendar:readonly",
    );
    assert_refused(&open(&unregistered).await, 20029);

    let page = open(&authorize(
        &emulator,
        REDIRECT,
        "calendar:calendar:readonly task:task:read",
    ))
    .await;
    assert_refused(&page, 20027);
    assert!(
        page.1.contains("task:task:read"),
        "names the scope: {}",
        page.1
    );
    assert!(!page.1.contains("calendar:calendar:readonly"), "{}", page.1);

    for (release, code) in [
        (AppRelease::Unpublished, 20009),
        (AppRelease::Disabled, 20069),
        (AppRelease::UserOutsideAvailability, 20010),
    ] {
        emulator.set_app_release(APP, release);
        assert_refused(&open(&fine).await, code);
    }
    emulator.set_app_release(APP, AppRelease::Available);
    assert_eq!(open(&fine).await.0, 200);
}

#[tokio::test]
async fn the_console_is_also_reachable_over_http() {
    let emulator = emulator().await;
    let answer = http()
        .post(format!("{}/_emulator/apps/{APP}", emulator.base_url()))
        .json(&serde_json::json!({"release": "disabled"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 204);
    let fine = authorize(&emulator, REDIRECT, "calendar:calendar:readonly");
    assert_refused(&open(&fine).await, 20069);
    let answer = http()
        .post(format!("{}/_emulator/apps/{APP}", emulator.base_url()))
        .json(&serde_json::json!({"release": "available", "redirect_uris": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 204);
    assert_refused(&open(&fine).await, 20029);
}

#[tokio::test]
async fn single_sign_on_detours_through_the_identity_provider_and_back() {
    let emulator = emulator().await;
    let idp = emulator.use_stand_in_identity_provider().await.unwrap();
    let idp_url = url::Url::parse(&idp).unwrap();
    let emulator_url = url::Url::parse(&emulator.base_url()).unwrap();
    assert_ne!(idp_url.port(), emulator_url.port(), "another loopback port");

    let start = authorize(&emulator, REDIRECT, "calendar:calendar:readonly");
    let first = http().get(&start).send().await.unwrap();
    assert_eq!(first.status().as_u16(), 302);
    let to_idp = first.headers()["location"].to_str().unwrap().to_owned();
    assert!(to_idp.starts_with(&idp), "{to_idp}");
    let back = http().get(&to_idp).send().await.unwrap();
    assert_eq!(back.status().as_u16(), 302);
    let back = back.headers()["location"].to_str().unwrap().to_owned();
    assert!(back.starts_with(&emulator.base_url()), "{back}");
    assert!(back.contains("state=st4te"), "the same sign-in: {back}");
    let (status, page) = open(&back).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("request_id"), "the consent page: {page}");
    // A ticket is good once.
    let again = http().get(&back).send().await.unwrap();
    assert_eq!(again.status().as_u16(), 302);
}

#[tokio::test]
async fn the_lark_hosts_authorize_page_stays_on_the_lark_host() {
    let emulator = emulator().await;
    let feishu = authorize(&emulator, REDIRECT, "calendar:calendar:readonly");
    let lark = feishu.replacen("/open-apis/", "/lark/open-apis/", 1);
    let (status, page) = open(&lark).await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("action=\"/lark/open-apis/authen/v1/authorize/decision\""),
        "{page}"
    );
    let callback = emulator::feishu::press_consent(&lark, true).await.unwrap();
    assert!(callback.starts_with(REDIRECT), "{callback}");
    let code = url::Url::parse(&callback)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .unwrap();
    let answer = http()
        .post(format!(
            "{}/lark/open-apis/authen/v2/oauth/token",
            emulator.base_url()
        ))
        .json(&serde_json::json!({
            "grant_type": "authorization_code",
            "client_id": APP,
            "client_secret": "s",
            "code": code,
            "redirect_uri": REDIRECT,
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    assert_eq!(
        emulator.count("/open-apis/authen/v1/authorize/decision", None),
        1,
        "logged under the unprefixed path"
    );
}
