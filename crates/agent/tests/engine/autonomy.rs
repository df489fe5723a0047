//! Issue 13: session autonomy modes — loud, bounded, audited.

use super::*;
use agent::Autonomy;

#[tokio::test]
async fn read_only_refuses_every_write_without_asking_and_audits_it() {
    let h = harness(vec![
        call("send_message", json!({"chat": "a"})),
        say("好的，不发了。"),
    ]);
    h.engine
        .set_autonomy(&h.session, Autonomy::ReadOnly)
        .await
        .unwrap();
    let outcome = h.send("给 a 发消息").await;
    assert_eq!(outcome.status, InvocationStatus::Completed);
    assert!(
        h.pending().is_empty(),
        "a read-only conversation held a write"
    );
    assert!(h.writes.lock().unwrap().is_empty());
    let response = &h.last_responses()[0];
    assert_eq!(response["outcome"], "blocked");
    let audit = h.engine.audit_trail(&AuditFilter::default()).unwrap();
    let blocked = audit
        .iter()
        .find(|a| a.kind == "approval.blocked_by_mode")
        .expect("audited");
    assert_eq!(blocked.actor, "mode:read_only");
    assert!(audit.iter().any(|a| a.kind == "autonomy.set"));
}

#[tokio::test]
async fn allow_touched_lets_through_only_what_the_user_already_approved_and_only_for_its_time() {
    let h = harness(vec![
        call("send_message", json!({"chat_id": "oc_a", "text": "1"})),
        say("发了。"),
        call("send_message", json!({"chat_id": "oc_a", "text": "2"})),
        say("又发了。"),
        call("send_message", json!({"chat_id": "oc_b", "text": "3"})),
        say("b 要确认。"),
        call("send_message", json!({"chat_id": "oc_a", "text": "4"})),
        say("过期后又要确认。"),
    ]);
    h.send("给 a 发 1").await;
    let first = h.only_pending();
    h.engine
        .decide(&first.call_id, Decision::Approve)
        .await
        .unwrap();
    let mode = h
        .engine
        .set_autonomy(
            &h.session,
            Autonomy::AllowTouched {
                until: T0 + 3 * 60 * 60 * 1000,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        mode,
        Autonomy::AllowTouched {
            until: T0 + 30 * 60 * 1000
        },
        "the mode is cut to 30 minutes"
    );
    // The same chat: runs without asking, audited as allowed by the mode.
    let outcome = h.send("再给 a 发 2").await;
    assert_eq!(outcome.status, InvocationStatus::Completed);
    assert_eq!(h.writes.lock().unwrap().len(), 2);
    let audit = h.engine.audit_trail(&AuditFilter::default()).unwrap();
    let allowed = audit
        .iter()
        .find(|a| a.kind == "approval.approved" && a.actor == "mode:allow_touched")
        .expect("the mode's approval is audited");
    assert_eq!(allowed.detail["allowed_by_mode"], "mode:allow_touched");
    // Another chat: held.
    assert_eq!(
        h.send("给 b 发 3").await.status,
        InvocationStatus::Suspended
    );
    let held = h.only_pending();
    assert_eq!(held.args["chat_id"], "oc_b");
    h.engine
        .decide(&held.call_id, Decision::Reject { reason: None })
        .await
        .unwrap();
    // Once its time is up the mode is over: the familiar chat waits again.
    h.clock.advance(30 * 60 * 1000);
    assert_eq!(h.engine.autonomy(&h.session).await.unwrap(), Autonomy::Ask);
    assert_eq!(
        h.send("再给 a 发 4").await.status,
        InvocationStatus::Suspended
    );
    assert_eq!(h.writes.lock().unwrap().len(), 2);
}
