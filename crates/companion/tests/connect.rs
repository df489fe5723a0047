//! "Connect my Feishu" end to end against an emulator standing in for the real Feishu: the
//! app is created by self-registration (the phone's scan and confirm played by the emulator's
//! hook), saved and applied without a restart, the first sign-in goes by the device flow for
//! the scopes that need no administrator, and the first question is answered from the tenant.
//! Each way it can fail ends in words and leaves nothing half-configured; a scope the app lacks
//! waits on Feishu's scope-apply page and runs once applied for, approved and signed in for.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use agent::CallStatus;
use companion::connect::{ConnectFailure, ConnectStatus};
use companion::{AppPaths, Companion, OpenOptions, Profile, Settings, SignInStatus, UiEvent};
use emulator::feishu::{FeishuEmulator, RegistrationBrand};
use emulator::model_server::{ModelServer, Script};
use tokio::sync::broadcast::Receiver;

mod common;

struct Setup {
    feishu: FeishuEmulator,
    _model: ModelServer,
    app: Companion,
    events: Receiver<UiEvent>,
    _dir: tempfile::TempDir,
}

/// A fresh install with a model configured (so connecting leaves demo mode at once), pointed at
/// a stand-in Feishu that polls fast.
async fn setup() -> Setup {
    let feishu = FeishuEmulator::start().await.unwrap();
    feishu.set_device_timing(1, 60);
    let model = ModelServer::start(Script::demo().unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let paths = AppPaths::under(dir.path());
    paths.create().unwrap();
    let mut settings = Settings::default();
    settings.feishu.redirect_port = common::free_port();
    settings.time_zone = "Asia/Shanghai".into();
    settings.model.preset = "custom".into();
    settings.model.base_url = Some(model.base_url());
    settings.model.model = Some("real-model".into());
    settings.save(&paths.settings_file()).unwrap();
    let app = Companion::open(
        paths,
        OpenOptions {
            memory_keys: true,
            feishu_base_url: Some(feishu.base_url()),
            ..OpenOptions::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(app.profile(), Profile::Demo, "no Feishu app yet");
    let events = app.subscribe();
    Setup {
        feishu,
        _model: model,
        app,
        events,
        _dir: dir,
    }
}

/// The next event `pick` takes, within 20 s.
async fn next<T>(events: &mut Receiver<UiEvent>, mut pick: impl FnMut(&UiEvent) -> Option<T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let event = events.recv().await.expect("the core's events");
            if let Some(found) = pick(&event) {
                return found;
            }
        }
    })
    .await
    .expect("the event never came")
}

async fn connected(events: &mut Receiver<UiEvent>) -> ConnectStatus {
    next(events, |e| match e {
        UiEvent::Connect(s @ (ConnectStatus::Connected { .. } | ConnectStatus::Failed(_))) => {
            Some(s.clone())
        }
        _ => None,
    })
    .await
}

async fn device_code(events: &mut Receiver<UiEvent>) -> companion::connect::DeviceTicket {
    next(events, |e| match e {
        UiEvent::SignIn(SignInStatus::Waiting {
            device: Some(code), ..
        }) => Some(code.clone()),
        _ => None,
    })
    .await
}

async fn sign_in_result(events: &mut Receiver<UiEvent>) -> SignInStatus {
    next(events, |e| match e {
        UiEvent::SignIn(SignInStatus::Waiting { .. }) => None,
        UiEvent::SignIn(s) => Some(s.clone()),
        _ => None,
    })
    .await
}

/// Connects as a person of a `brand` tenant; answers the new App ID.
async fn connect(s: &mut Setup, brand: RegistrationBrand) -> String {
    let ticket = s.app.connect_feishu().await.unwrap();
    assert!(
        ticket.url.contains("/page/cli?user_code="),
        "{}",
        ticket.url
    );
    assert_eq!(s.app.connect_page().as_deref(), Some(ticket.url.as_str()));
    let created = s
        .feishu
        .confirm_registration(&ticket.user_code, true, brand, None)
        .unwrap()
        .expect("the app was created");
    match connected(&mut s.events).await {
        ConnectStatus::Connected {
            app_id,
            needs_model,
            ..
        } => {
            assert_eq!(app_id, created);
            assert!(!needs_model, "a model is configured");
        }
        other => panic!("{other:?}"),
    }
    created
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_scan_creates_the_app_a_second_signs_in_and_the_first_question_is_answered() {
    let mut s = setup().await;
    let app_id = connect(&mut s, RegistrationBrand::Feishu).await;
    // Applied at once: the real profile, the secret in the vault and not in the settings file.
    assert_eq!(
        s.app.profile(),
        Profile::Real {
            brand: feishu::Brand::Feishu,
            app_id: app_id.clone()
        }
    );
    let settings = s.app.settings();
    assert!(settings.feishu.created_by_app);
    assert!(settings.feishu.uses_device_flow());
    let secret = s.feishu.app(&app_id).unwrap().app_secret;
    let file = std::fs::read_to_string(s.app.paths().settings_file()).unwrap();
    assert!(
        !file.contains(&secret),
        "the App Secret stays out of settings.json"
    );
    assert!(
        s.app
            .secrets_present()
            .unwrap()
            .contains(&"feishu.app_secret".to_owned())
    );

    // The second scan: the first sign-in started by itself, for auto-approved reads only.
    let code = device_code(&mut s.events).await;
    let pending = s.feishu.pending_device_authorizations();
    let asked = &pending.last().expect("a device code").scopes;
    for scope in feishu::FIRST_SIGN_IN_SCOPES {
        assert!(
            asked.iter().any(|a| a == scope),
            "{scope} not asked for: {asked:?}"
        );
    }
    assert!(
        !asked
            .iter()
            .any(|a| a == "search:docs:read" || a.contains("create"))
    );
    s.feishu.decide_device(&code.user_code, true).unwrap();
    match sign_in_result(&mut s.events).await {
        SignInStatus::SignedIn { scopes, .. } => {
            assert!(
                scopes.iter().any(|g| g == "calendar:calendar:readonly"),
                "{scopes:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    // No redirect URL was ever involved.
    assert!(s.feishu.app(&app_id).unwrap().redirect_uris.is_empty());

    // The first real answer: the calendar is read without another card.
    let session = s.app.create_session().await.unwrap();
    let turn = s
        .app
        .send_message(&session, "明天我有什么安排？", false)
        .await
        .unwrap();
    assert_eq!(turn.status, "completed", "{turn:?}");
    assert!(s.app.pending().unwrap().is_empty());
    assert!(common::last_text(&s.app, &session).contains("明天的日程我看过了"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lark_tenant_gets_its_secret_from_larks_host_and_the_lark_brand() {
    let mut s = setup().await;
    let app_id = connect(&mut s, RegistrationBrand::Lark).await;
    assert_eq!(s.app.settings().feishu.brand, feishu::Brand::Lark);
    assert_eq!(
        s.app.profile(),
        Profile::Real {
            brand: feishu::Brand::Lark,
            app_id
        }
    );
    // The sign-in goes to Lark's hosts too.
    let code = device_code(&mut s.events).await;
    assert!(code.url.contains("/lark/"), "{}", code.url);
    s.feishu.decide_device(&code.user_code, true).unwrap();
    assert!(matches!(
        sign_in_result(&mut s.events).await,
        SignInStatus::SignedIn { .. }
    ));
}

/// Waits until nothing waits for the user any more (the held call ran).
async fn nothing_pending(app: &Companion, what: &str) {
    tokio::time::timeout(Duration::from_secs(20), async {
        while !app.pending().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what}: still pending"));
}

/// Nothing of a connect that failed is kept: no App ID, no secret, still demo mode.
fn nothing_kept(app: &Companion) {
    assert!(app.settings().feishu.app_id.is_empty());
    assert!(!app.settings().feishu.created_by_app);
    assert!(
        !app.secrets_present()
            .unwrap()
            .contains(&"feishu.app_secret".to_owned())
    );
    assert_eq!(app.profile(), Profile::Demo);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denied_expired_cancelled_and_offline_each_end_in_words_and_keep_nothing() {
    let mut s = setup().await;
    let ticket = s.app.connect_feishu().await.unwrap();
    s.feishu
        .confirm_registration(&ticket.user_code, false, RegistrationBrand::Feishu, None)
        .unwrap();
    assert_eq!(
        connected(&mut s.events).await,
        ConnectStatus::Failed(ConnectFailure::Denied)
    );
    nothing_kept(&s.app);

    s.feishu.set_device_timing(1, 2);
    s.app.connect_feishu().await.unwrap();
    assert_eq!(
        connected(&mut s.events).await,
        ConnectStatus::Failed(ConnectFailure::Expired)
    );
    nothing_kept(&s.app);

    s.feishu.set_device_timing(1, 60);
    s.app.connect_feishu().await.unwrap();
    s.app.cancel_connect();
    assert_eq!(
        connected(&mut s.events).await,
        ConnectStatus::Failed(ConnectFailure::Cancelled)
    );
    assert!(s.app.connect_page().is_none());
    nothing_kept(&s.app);
    for failure in [
        ConnectFailure::Denied,
        ConnectFailure::Expired,
        ConnectFailure::Cancelled,
        ConnectFailure::Offline,
    ] {
        let words = failure.words();
        assert!(
            !words.zh.is_empty() && words.en.contains('.'),
            "{failure:?}"
        );
    }
    drop(s.feishu);
    // Feishu gone: the begin itself fails, and says so.
    let e = s.app.connect_feishu().await.unwrap_err();
    assert!(e.to_string().contains("Cannot reach Feishu"), "{e}");
    assert_eq!(
        connected(&mut s.events).await,
        ConnectStatus::Failed(ConnectFailure::Offline)
    );
    nothing_kept(&s.app);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_call_resumes_after_a_device_sign_in_and_a_declined_one_says_so() {
    let mut s = setup().await;
    connect(&mut s, RegistrationBrand::Feishu).await;
    // The user does not confirm the first sign-in on the phone: it is declined.
    let code = device_code(&mut s.events).await;
    s.feishu.decide_device(&code.user_code, false).unwrap();
    assert_eq!(sign_in_result(&mut s.events).await, SignInStatus::Declined);

    // So the calendar read waits behind the card; a device sign-in from the card resumes it.
    let session = s.app.create_session().await.unwrap();
    s.app
        .send_message(&session, "明天我有什么安排？", false)
        .await
        .unwrap();
    let held = s.app.pending().unwrap();
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].status, CallStatus::AwaitingAuth);
    let ticket = s.app.begin_sign_in(Vec::new()).await.unwrap();
    let device = ticket.device.expect("a device sign-in");
    assert!(ticket.redirect_uri.is_empty());
    s.feishu.decide_device(&device.user_code, true).unwrap();
    assert!(matches!(
        sign_in_result(&mut s.events).await,
        SignInStatus::SignedIn { .. }
    ));
    nothing_pending(&s.app, "the held call resumed").await;
    assert!(common::last_text(&s.app, &session).contains("明天的日程我看过了"));
    // The audit shows the same sign-in rows a loopback sign-in gives.
    let audit = s.app.audit(&Default::default()).unwrap();
    assert!(audit.iter().any(|a| a.kind == "auth.granted"), "{audit:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scope_the_app_lacks_waits_on_the_scope_apply_page_and_runs_once_granted() {
    let mut s = setup().await;
    let app_id = connect(&mut s, RegistrationBrand::Feishu).await;
    // This tenant's Feishu gave the new app no task scope.
    let mut app = s.feishu.app(&app_id).unwrap();
    app.enabled_scopes.retain(|sc| !sc.starts_with("task:"));
    s.feishu.register_app(app);
    let code = device_code(&mut s.events).await;
    s.feishu.decide_device(&code.user_code, true).unwrap();
    assert!(matches!(
        sign_in_result(&mut s.events).await,
        SignInStatus::SignedIn { .. }
    ));

    let session = s.app.create_session().await.unwrap();
    s.app
        .send_message(&session, "看看我的待办", false)
        .await
        .unwrap();
    let held = s.app.pending_calls().unwrap();
    assert_eq!(held.len(), 1, "{held:?}");
    let page = held[0]
        .scope_apply_url
        .clone()
        .expect("the scope-apply page");
    assert!(page.contains("/page/scope-apply?clientID="), "{page}");
    assert!(
        page.contains(&app_id) && page.contains("task%3Atask%3Aread"),
        "{page}"
    );
    // Retrying before anyone approved only waits again.
    s.app.retry_auth_call(&held[0].call_id).await.unwrap();
    assert!(s.app.pending_calls().unwrap()[0].scope_apply_url.is_some());

    // Applied for on that page, approved by the administrator: Retry runs it, it needs the
    // user's grant now (a normal sign-in card), and after that sign-in it runs.
    s.feishu.apply_for_scope(&app_id, "task:task:read").unwrap();
    s.feishu
        .approve_scope_application(&app_id, "task:task:read")
        .unwrap();
    s.app.retry_auth_call(&held[0].call_id).await.unwrap();
    let waiting = s.app.pending_calls().unwrap();
    assert_eq!(waiting.len(), 1);
    assert!(waiting[0].scope_apply_url.is_none(), "now a sign-in card");
    s.app.begin_sign_in(Vec::new()).await.unwrap();
    let code = device_code(&mut s.events).await;
    s.feishu.decide_device(&code.user_code, true).unwrap();
    assert!(matches!(
        sign_in_result(&mut s.events).await,
        SignInStatus::SignedIn { .. }
    ));
    nothing_pending(&s.app, "the task read ran").await;
    assert!(common::last_text(&s.app, &session).contains("待办已经读到"));
}
