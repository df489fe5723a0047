//! A new user tries the whole flow in demo mode, through the same functions the UI calls: read
//! the agenda (which first needs a sign-in), propose a meeting (which needs approval, then one
//! more permission), and see it created — on the built-in emulator and scripted model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agent::{CallStatus, Decision};
use companion::{AppPaths, Companion, OpenOptions, Settings};

mod common;
use common::last_text;

/// Signs in the way the auth card does, and waits until the held calls have run again.
async fn sign_in(app: &Companion) -> Vec<String> {
    common::sign_in(app).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_user_tries_agenda_approval_and_sign_in_in_demo_mode() {
    let dir = tempfile::tempdir().unwrap();
    let app = common::open_demo(dir.path()).await;
    assert!(app.is_demo(), "nothing configured: demo mode");
    let session = app.create_session().await.unwrap();

    // The agenda needs a permission first: the turn waits on an auth card.
    let outcome = app
        .send_message(&session, "明天我有什么安排？", false)
        .await
        .unwrap();
    assert_eq!(outcome.status, "suspended");
    let waiting = app.pending().unwrap();
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].status, CallStatus::AwaitingAuth);
    assert_eq!(waiting[0].auth_scopes, ["calendar:calendar:readonly"]);

    // Signing in runs the call again, and the turn completes.
    let scopes = sign_in(&app).await;
    assert!(scopes.contains(&"calendar:calendar:readonly".to_owned()));
    assert!(app.pending().unwrap().is_empty());
    assert!(
        last_text(&app, &session).contains("明天的日程我看过了"),
        "{}",
        last_text(&app, &session)
    );
    assert_eq!(
        app.account().await.unwrap().unwrap().user.unwrap().name,
        "林晓"
    );

    // Proposing a meeting: held for approval, described in both languages.
    let outcome = app
        .send_message(&session, "好，帮我约这个评审会", false)
        .await
        .unwrap();
    assert_eq!(outcome.status, "suspended");
    let held = app.pending().unwrap().remove(0);
    assert_eq!(held.status, CallStatus::AwaitingApproval);
    let preview = held.preview.clone().unwrap();
    assert_eq!(
        preview.summary.zh,
        "在你的日历中创建日程「产品评审会」并发送邀请"
    );
    let attendees = preview
        .fields
        .iter()
        .find(|f| f.label.en == "Attendees")
        .unwrap();
    assert_eq!(attendees.value, "张伟、李娜");

    // Approved — then creating events needs one more permission; the approval still holds.
    let outcome = app.decide(&held.call_id, Decision::Approve).await.unwrap();
    assert_eq!(outcome.status, "suspended");
    let again = app.pending().unwrap().remove(0);
    assert_eq!(
        (again.call_id.as_str(), again.status),
        (held.call_id.as_str(), CallStatus::AwaitingAuth)
    );
    sign_in(&app).await;
    let demo = app.demo().unwrap();
    assert_eq!(demo.feishu.events_created(), 1, "created exactly once");
    assert!(
        last_text(&app, &session).starts_with("已创建「产品评审会」"),
        "{}",
        last_text(&app, &session)
    );
    assert!(app.pending().unwrap().is_empty());

    // The audit trail tells the story.
    let kinds: Vec<String> = app
        .audit(&Default::default())
        .unwrap()
        .into_iter()
        .map(|a| a.kind)
        .collect();
    for kind in [
        "auth.requested",
        "auth.granted",
        "approval.requested",
        "approval.approved",
        "call.completed",
    ] {
        assert!(
            kinds.contains(&kind.to_owned()),
            "{kind} missing from {kinds:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_round_trip_secrets_stay_out_and_bad_values_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let paths = AppPaths::under(dir.path());
    let app = Companion::open(
        paths.clone(),
        OpenOptions {
            memory_keys: true,
            ..OpenOptions::default()
        },
    )
    .await
    .unwrap();
    let mut settings = app.settings();
    assert_eq!(
        settings.feishu.redirect_url(),
        "http://127.0.0.1:9768/callback"
    );
    settings.feishu.app_id = "cli_a1b2c3".into();
    settings.feishu.redirect_port = 18_080;
    assert!(
        app.update_settings(settings.clone()).unwrap(),
        "a Feishu change needs a restart"
    );
    app.set_app_secret("s3cr3t-app-secret").unwrap();
    app.set_model_key("deepseek", "sk-live-0123456789").unwrap();
    assert_eq!(Settings::load(&paths.settings_file()).unwrap(), settings);
    let on_disk = std::fs::read_to_string(paths.settings_file()).unwrap();
    assert!(
        !on_disk.contains("s3cr3t") && !on_disk.contains("sk-live"),
        "secrets never reach the settings file"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(paths.settings_file())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
    }
    let names = app.secrets_present().unwrap();
    assert!(names.iter().any(|n| n.contains("app_secret")), "{names:?}");

    let mut bad = settings.clone();
    bad.feishu.redirect_port = 80;
    assert!(
        app.update_settings(bad)
            .unwrap_err()
            .to_string()
            .contains("1024")
    );
    let mut bad = settings.clone();
    bad.feishu.app_id = "abc".into();
    assert!(app.update_settings(bad).is_err());
    assert_eq!(app.settings(), settings, "a refused change changes nothing");

    // A damaged settings file is reported, not silently replaced.
    std::fs::write(
        paths.settings_file(),
        "{\"approval_expiry_minutes\": \"soon\"}",
    )
    .unwrap();
    let err = Settings::load(&paths.settings_file()).unwrap_err();
    assert!(err.to_string().contains("approval_expiry_minutes"), "{err}");
}

/// Issue 13, item 4 and 8: the names on a card are looked up again once a sign-in allows it, an
/// edit naming someone Feishu does not know is refused in the editor, and after an edited
/// approval the demo's model speaks of the edited time, not the one it proposed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_user_edits_is_checked_named_and_spoken_of() {
    let dir = tempfile::tempdir().unwrap();
    let app = common::open_demo(dir.path()).await;
    let session = app.create_session().await.unwrap();

    // Not signed in: the card cannot name the invited people yet.
    app.send_message(&session, "帮我约个产品评审会", false)
        .await
        .unwrap();
    let held = app.pending().unwrap().remove(0);
    let names = |call: &agent::CallRecord| {
        call.preview
            .as_ref()
            .unwrap()
            .fields
            .iter()
            .find(|f| f.label.en == "Attendees")
            .unwrap()
            .value
            .clone()
    };
    assert!(names(&held).contains("ou_"), "{}", names(&held));

    // After a sign-in the same card names them.
    sign_in(&app).await;
    let held = app.pending().unwrap().remove(0);
    assert_eq!(names(&held), "张伟、李娜");

    // Someone who does not exist is refused in the editor, in both languages.
    let mut args = held.args.clone();
    args.insert(
        "attendees".into(),
        serde_json::json!(["ou_00000000000000000000000000000000"]),
    );
    let check = app.check_edit(&held.call_id, args.clone()).await.unwrap();
    let error = check.error.expect("refused");
    assert!(error.zh.contains("找不到"), "{}", error.zh);
    assert!(error.en.contains("ou_00000000000000000000000000000000"));
    assert!(check.preview.is_none(), "no preview to approve from");

    // A real edit (an hour later) previews, is approved, and the model speaks of 16:00.
    let mut args = held.args.clone();
    let start = args["start"].as_str().unwrap().replace("15:00", "16:00");
    let end = args["end"].as_str().unwrap().replace("16:00", "17:00");
    args.insert("start".into(), serde_json::json!(start));
    args.insert("end".into(), serde_json::json!(end));
    let check = app.check_edit(&held.call_id, args.clone()).await.unwrap();
    assert!(check.error.is_none(), "{:?}", check.error);
    app.decide(&held.call_id, Decision::ApproveEdited(args))
        .await
        .unwrap();
    if !app.pending().unwrap().is_empty() {
        // Creating events may need one more permission.
        sign_in(&app).await;
    }
    let said = last_text(&app, &session);
    assert!(said.starts_with("已创建「产品评审会」"), "{said}");
    assert!(said.contains("16:00") && said.contains("17:00"), "{said}");
    assert!(
        !said.contains("15:00"),
        "the proposed time is not spoken of: {said}"
    );
}
