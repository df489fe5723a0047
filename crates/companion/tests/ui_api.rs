//! The functions the desktop UI calls, in demo mode: what a conversation, a held call, the audit
//! trail, its export and the settings page look like to the UI, and the events it hears.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use companion::view::{AuditQuery, DecisionInput, ExportFormat, TimelineItem, UiEventView};

mod common;
use common::open_demo as open;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proposal_rejected_with_a_reason_as_the_ui_sees_it() {
    let dir = tempfile::tempdir().unwrap();
    let app = open(dir.path()).await;
    let info = app.app_info();
    assert!(info.demo);
    assert_eq!(info.model, "Demo");
    assert!(info.redirect_url.starts_with("http://127.0.0.1:"));

    let session = app.create_session().await.unwrap();
    assert_eq!(app.list_sessions().await.unwrap()[0].title, "");
    let mut events = app.subscribe();
    let turn = app
        .send_message(&session, "帮我约个产品评审会", false)
        .await
        .unwrap();
    assert_eq!(turn.status, "suspended");

    // What the UI heard while the turn ran: streamed text, the held call, the turn's status.
    let mut heard = Vec::new();
    while let Ok(Ok(event)) = tokio::time::timeout(Duration::from_millis(200), events.recv()).await
    {
        if let Some(view) = UiEventView::from_event(&event) {
            heard.push(view);
        }
    }
    let streamed: String = heard
        .iter()
        .filter_map(|e| match e {
            UiEventView::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(streamed.contains("产品评审会"), "streamed: {streamed}");
    assert!(heard.iter().any(|e| matches!(
        e,
        UiEventView::Call { call } if call.status == "awaiting_approval" && call.pending
    )));
    assert!(heard.iter().any(|e| matches!(
        e,
        UiEventView::Turn { status, .. } if status == "suspended"
    )));

    // The sessions list names the conversation and counts what waits in it.
    let sessions = app.list_sessions().await.unwrap();
    assert_eq!(sessions[0].title, "帮我约个产品评审会");
    assert_eq!(sessions[0].pending, 1);

    // The conversation: the message, the assistant's words, the proposed call and its card.
    let view = app.timeline(&session).unwrap();
    assert!(
        matches!(&view.items[0], TimelineItem::User { text, .. } if text == "帮我约个产品评审会")
    );
    assert!(view.items.iter().any(
        |i| matches!(i, TimelineItem::Assistant { text, .. } if text.contains("邀请张伟和李娜"))
    ));
    let call_id = view
        .items
        .iter()
        .find_map(|i| match i {
            TimelineItem::Tool { call_id, tool, .. } if tool == "create_calendar_event" => {
                Some(call_id.clone())
            }
            _ => None,
        })
        .expect("a tool entry");
    let card = view.calls.iter().find(|c| c.call_id == call_id).unwrap();
    assert_eq!(card.title.en, "Create a calendar event");
    assert_eq!(
        card.preview.as_ref().unwrap().summary.zh,
        "在你的日历中创建日程「产品评审会」并发送邀请"
    );
    let pending = app.pending_calls().unwrap();
    assert_eq!(pending.len(), 1);
    assert!(pending[0].expires_at.unwrap() > pending[0].created_at);

    // Rejected with a reason: the model is told, the card says so, the reply acknowledges it.
    let turn = app
        .decide(
            &call_id,
            DecisionInput::Reject {
                reason: Some(" 改到周五再说 ".into()),
            },
        )
        .await
        .unwrap();
    assert_eq!(turn.status, "completed");
    let view = app.timeline(&session).unwrap();
    let card = view.calls.iter().find(|c| c.call_id == call_id).unwrap();
    assert_eq!(card.verdict.as_deref(), Some("rejected"));
    assert_eq!(card.reason.as_deref(), Some("改到周五再说"));
    assert!(!card.pending);
    assert!(view.items.iter().any(|i| matches!(
        i,
        TimelineItem::Tool { call_id: id, result: Some(r), .. } if *id == call_id && r.is_error
    )));
    // The last entry but the turn's token usage, which follows it.
    assert!(matches!(
        view.items.iter().rev().find(|i| !matches!(i, TimelineItem::Usage { .. })),
        Some(TimelineItem::Assistant { text, .. }) if text.contains("这次先不创建")
    ));
    assert!(matches!(
        view.items.last(),
        Some(TimelineItem::Usage { .. })
    ));
    assert!(app.pending_calls().unwrap().is_empty());

    // The audit trail, filtered, and exported both ways.
    let approvals = app
        .audit_views(&AuditQuery {
            kind_prefix: Some("approval.".into()),
            ..AuditQuery::default()
        })
        .unwrap();
    assert!(approvals.iter().any(|a| a.kind == "approval.rejected"));
    assert!(approvals.iter().all(|a| a.kind.starts_with("approval.")));
    let out = dir.path().join("exports");
    let json = app
        .export_audit(&AuditQuery::default(), ExportFormat::Json, &out)
        .unwrap();
    let parsed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(parsed.as_array().unwrap().len() >= approvals.len());
    let csv = app
        .export_audit(&AuditQuery::default(), ExportFormat::Csv, &out)
        .unwrap();
    let csv = std::fs::read_to_string(csv).unwrap();
    assert!(csv.starts_with("time,kind,actor,tool,session_id,call_id,detail\n"));
    assert!(csv.contains("approval.rejected"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_settings_page_saves_and_applies_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let app = open(dir.path()).await;
    let page = app.settings_view().unwrap();
    assert!(!page.app_secret_set);
    assert!(
        page.presets
            .iter()
            .any(|p| p.id == "deepseek" && !p.key_set)
    );
    assert_eq!(page.redirect_url, page.settings.feishu.redirect_url());

    let mut settings = page.settings.clone();
    settings.approval_expiry_minutes = 30;
    app.save_settings(settings.clone()).await.unwrap();
    assert_eq!(app.settings().approval_expiry_minutes, 30);
    settings.feishu.app_id = "cli_a1b2c3".into();
    app.save_settings(settings.clone()).await.unwrap();
    assert_eq!(
        app.settings().feishu.app_id,
        "cli_a1b2c3",
        "settings apply at once"
    );
    settings.feishu.app_id = "not-an-app".into();
    let refused = app.save_settings(settings).await.unwrap_err().to_string();
    assert!(refused.contains("cli_"), "{refused}");
    assert_eq!(
        app.settings().feishu.app_id,
        "cli_a1b2c3",
        "nothing half-saved"
    );

    app.set_app_secret("s3cret").unwrap();
    app.set_model_key("deepseek", "sk-test").unwrap();
    let page = app.settings_view().unwrap();
    assert!(page.app_secret_set);
    assert!(page.presets.iter().any(|p| p.id == "deepseek" && p.key_set));
    let text = serde_json::to_string(&page).unwrap();
    assert!(
        !text.contains("s3cret") && !text.contains("sk-test"),
        "no secret reaches the UI"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starting_a_sign_in_again_reuses_the_redirect_port_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let app = open(dir.path()).await;
    let first = app.sign_in(Vec::new()).await.unwrap();
    // A second click on "Sign in" replaces the first sign-in on the same fixed port.
    let second = app.sign_in(Vec::new()).await.unwrap();
    assert_eq!(first.redirect_uri, second.redirect_uri);
    assert_ne!(first.url, second.url, "a new state for the new sign-in");
    app.cancel_sign_in();
}
