//! Issue 18: a decision says where it was made (the app or Feishu), and the first one wins.

use super::*;
use agent::DecisionSource;

#[tokio::test]
async fn a_decision_from_feishu_is_recorded_and_audited_as_such_and_only_the_first_counts() {
    let h = harness(vec![
        call("send_message", json!({"chat": "产品周会", "text": "hi"})),
        say("已发送。"),
    ]);
    h.send("给产品周会发 hi").await;
    let held = h.only_pending();
    let outcome = h
        .engine
        .decide_from(&held.call_id, Decision::Approve, DecisionSource::Feishu)
        .await
        .unwrap();
    assert_eq!(outcome.status, InvocationStatus::Completed);
    assert_eq!(
        h.writes.lock().unwrap().len(),
        1,
        "the approved write ran once"
    );
    let done = h.store.call(&held.call_id).unwrap().unwrap();
    assert_eq!(done.decision.unwrap().decided_by, "user:feishu");
    let audit = h.engine.audit_trail(&AuditFilter::default()).unwrap();
    let approved = audit
        .iter()
        .find(|a| a.kind == "approval.approved")
        .expect("audited");
    assert_eq!(approved.actor, "user:feishu");
    assert_eq!(approved.detail["via"], "feishu");
    // The app's click after Feishu's is refused: the write does not run twice.
    assert!(matches!(
        h.engine.decide(&held.call_id, Decision::Approve).await,
        Err(EngineError::NotPending { .. })
    ));
    assert_eq!(h.writes.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_decision_in_the_app_says_so() {
    let h = harness(vec![
        call("send_message", json!({"chat": "a", "text": "hi"})),
        say("好的。"),
    ]);
    h.send("发 hi").await;
    let held = h.only_pending();
    h.engine
        .decide(
            &held.call_id,
            Decision::Reject {
                reason: Some("不发".into()),
            },
        )
        .await
        .unwrap();
    let audit = h.engine.audit_trail(&AuditFilter::default()).unwrap();
    let rejected = audit
        .iter()
        .find(|a| a.kind == "approval.rejected")
        .unwrap();
    assert_eq!(
        (rejected.actor.as_str(), &rejected.detail["via"]),
        ("user", &json!("app"))
    );
    assert!(agent::decided_by_user("user:feishu") && agent::decided_by_user("user"));
    assert!(!agent::decided_by_user("rule:r1") && !agent::decided_by_user("engine"));
}
