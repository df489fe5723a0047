//! Settings apply at once: leaving demo mode for a real Feishu app, and coming back, without a
//! restart, while an approval waits in each. Demo data and real data are kept apart: the real
//! account never sees the demo's conversations or approvals, and a demo approval cannot be
//! dispatched to the real tenant (here a second emulator standing in for it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use agent::{CallStatus, Decision};
use companion::{AppPaths, Companion, OpenOptions, Profile, Settings};
use emulator::feishu::{App, FeishuEmulator, PREFERRED_SCOPES};
use emulator::model_server::{ModelServer, Script};

const REAL_APP: &str = "cli_real_tenant_app";

mod common;
use common::free_port;

async fn propose_meeting(app: &Companion) -> (String, String) {
    let session = app.create_session().await.unwrap();
    app.send_message(&session, "帮我约个产品评审会", false)
        .await
        .unwrap();
    let held = app
        .pending()
        .unwrap()
        .into_iter()
        .find(|c| c.session_id == session)
        .expect("the meeting waits for approval");
    assert_eq!(held.status, CallStatus::AwaitingApproval);
    (session, held.call_id)
}

fn pending_ids(app: &Companion) -> Vec<String> {
    app.pending()
        .unwrap()
        .into_iter()
        .map(|c| c.call_id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_to_a_real_app_and_back_keeps_each_side_and_its_approvals() {
    // The real tenant (an emulator standing in for open.feishu.cn) and the real model.
    let real = FeishuEmulator::start().await.unwrap();
    let model = ModelServer::start(Script::demo().unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let paths = AppPaths::under(dir.path());
    paths.create().unwrap();
    let mut settings = Settings::default();
    settings.feishu.redirect_port = free_port();
    settings.time_zone = "Asia/Shanghai".into();
    settings.save(&paths.settings_file()).unwrap();
    real.register_app(App {
        app_id: REAL_APP.into(),
        app_secret: "real-secret".into(),
        redirect_uris: vec![settings.feishu.redirect_url()],
        enabled_scopes: PREFERRED_SCOPES.iter().map(|s| (*s).to_owned()).collect(),
    });
    let app = Companion::open(
        paths,
        OpenOptions {
            memory_keys: true,
            feishu_base_url: Some(real.base_url()),
            ..OpenOptions::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(app.profile(), Profile::Demo);
    let (demo_session, demo_call) = propose_meeting(&app).await;

    // Enter the real app and model: it applies at once.
    let mut real_settings = app.settings();
    real_settings.feishu.app_id = REAL_APP.into();
    real_settings.model.preset = "custom".into();
    real_settings.model.base_url = Some(model.base_url());
    real_settings.model.model = Some("real-model".into());
    app.apply_settings(real_settings.clone()).await.unwrap();
    assert_eq!(app.profile(), Profile::Demo, "no App Secret yet");
    app.apply_app_secret("real-secret").await.unwrap();
    assert_eq!(
        app.profile(),
        Profile::Real {
            brand: feishu::Brand::Feishu,
            app_id: REAL_APP.into()
        }
    );
    assert!(!app.is_demo());
    let sessions: Vec<String> = app
        .list_sessions()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert!(
        !sessions.contains(&demo_session),
        "a real account never sees demo sessions"
    );
    assert!(pending_ids(&app).is_empty(), "nor demo approvals");
    // A demo approval cannot be dispatched to the real tenant.
    assert!(app.decide(&demo_call, Decision::Approve).await.is_err());
    let (real_session, real_call) = propose_meeting(&app).await;
    assert!(model.request_count() > 0, "the real model answered");

    // Back to demo (clearing the App ID), while the real approval waits.
    let mut demo_settings = real_settings.clone();
    demo_settings.feishu.app_id.clear();
    app.apply_settings(demo_settings).await.unwrap();
    assert_eq!(app.profile(), Profile::Demo);
    assert_eq!(
        pending_ids(&app),
        std::slice::from_ref(&demo_call),
        "the demo approval survived"
    );
    let sessions: Vec<String> = app
        .list_sessions()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert!(sessions.contains(&demo_session));
    assert!(!sessions.contains(&real_session));
    // Approving it dispatches to the demo's emulator (which asks for a sign-in), not the real one.
    app.decide(&demo_call, Decision::Approve).await.unwrap();
    assert_eq!(
        app.pending().unwrap()[0].status,
        CallStatus::AwaitingAuth,
        "dispatched to the demo tenant, which wants a sign-in"
    );
    assert_eq!(real.events_created(), 0);
    assert!(
        real.requests().iter().all(|r| !r.write),
        "nothing was written to the real tenant"
    );

    // And to the real app again: its approval is still there.
    app.apply_settings(real_settings).await.unwrap();
    assert!(!app.is_demo());
    assert_eq!(pending_ids(&app), [real_call]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_and_time_zone_apply_to_the_next_call() {
    let dir = tempfile::tempdir().unwrap();
    let app = common::open_demo(dir.path()).await;
    let mut next = app.settings();
    next.approval_expiry_minutes = 7;
    next.time_zone = "Europe/London".into();
    app.apply_settings(next).await.unwrap();
    let (_, call) = propose_meeting(&app).await;
    let held = app
        .pending()
        .unwrap()
        .into_iter()
        .find(|c| c.call_id == call)
        .unwrap();
    let ttl = held.expires_at.unwrap() - held.created_at;
    assert!(
        (Duration::from_secs(7 * 60).as_millis() as i64 - ttl).abs() < 5_000,
        "the new expiry applies: {ttl} ms"
    );
    let when = held
        .preview
        .unwrap()
        .fields
        .into_iter()
        .find(|f| f.label.en == "When")
        .unwrap()
        .value;
    assert!(
        when.ends_with("(Europe/London)"),
        "times shown in the new zone: {when}"
    );
}
