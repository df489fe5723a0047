//! Issue 13: approvals are never lost, never stale, never late — expiry enforced at every
//! decision and at dispatch, waiting approvals surviving a new message, Stop keeping what the
//! model had written.

use super::*;
use agent::WaitingCalls;
use agent::engine::notice;

/// Every function call in the request is answered by a function response right after it (in
/// the next content), and no response answers a call that is not there: what every provider's
/// API requires of a history.
fn assert_well_formed(request: &LlmRequest) {
    let contents = &request.contents;
    for (i, content) in contents.iter().enumerate() {
        let ids: Vec<String> = content
            .function_calls()
            .map(|c| c.id.clone().unwrap())
            .collect();
        if ids.is_empty() {
            continue;
        }
        let next = contents
            .get(i + 1)
            .unwrap_or_else(|| panic!("calls {ids:?} are the last content: {contents:#?}"));
        let answered: Vec<String> = next
            .function_responses()
            .map(|r| r.id.clone().unwrap())
            .collect();
        for id in &ids {
            assert!(
                answered.contains(id),
                "call {id} is not answered right after it: {contents:#?}"
            );
        }
    }
    let asked: Vec<String> = contents
        .iter()
        .flat_map(|c| c.function_calls())
        .map(|c| c.id.clone().unwrap())
        .collect();
    for response in contents.iter().flat_map(|c| c.function_responses()) {
        let id = response.id.clone().unwrap();
        assert!(asked.contains(&id), "response {id} answers no call");
    }
    let answers = contents.iter().flat_map(|c| c.function_responses()).count();
    assert_eq!(
        answers,
        asked.len(),
        "a call is answered twice: {contents:#?}"
    );
}

#[tokio::test]
async fn an_approve_after_expiry_expires_the_call_instead_of_running_it() {
    let h = harness(vec![
        call("send_message", json!({"chat": "a"})),
        say("它过期了。"),
    ]);
    h.send("send").await;
    let held = h.only_pending();
    // 16 s past the 60 s expiry, and the sweep has not come round.
    h.clock.advance(76_000);
    let err = h
        .engine
        .decide(&held.call_id, Decision::Approve)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, EngineError::Expired { call_ids } if call_ids == &vec![held.call_id.clone()]),
        "{err:?}"
    );
    assert!(
        h.writes.lock().unwrap().is_empty(),
        "an expired approval ran"
    );
    let record = h.store.call(&held.call_id).unwrap().unwrap();
    assert_eq!(record.status, CallStatus::Done);
    assert_eq!(record.outcome, Some(ToolOutcome::Cancelled));
    let decision = record.decision.unwrap();
    assert_eq!(decision.verdict, Verdict::Expired);
    assert_eq!(decision.reason.as_deref(), Some(notice::EXPIRED));
    // The model is told, and the turn moves on.
    assert!(
        h.last_responses()[0]["error"]
            .as_str()
            .unwrap()
            .contains("expired")
    );
    assert!(h.pending().is_empty());
    let kinds = h.audit_kinds();
    assert!(kinds.contains(&"approval.expired".to_owned()), "{kinds:?}");
    assert!(
        !kinds.contains(&"approval.approved".to_owned()),
        "{kinds:?}"
    );
    // The same at the very second of expiry.
    let h = harness(vec![call("send_message", json!({"chat": "a"})), say("x")]);
    h.send("send").await;
    let held = h.only_pending();
    h.clock.advance(60_000);
    assert!(matches!(
        h.engine.decide(&held.call_id, Decision::Approve).await,
        Err(EngineError::Expired { .. })
    ));
    assert!(h.writes.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_batch_decision_expires_the_late_ones_and_decides_the_rest() {
    let h = harness(vec![
        call("send_message", json!({"chat": "a"})),
        call("send_message", json!({"chat": "b"})),
        say("1"),
        say("2"),
    ]);
    h.send("first").await;
    let early = h.only_pending();
    h.clock.advance(30_000);
    let other = h.engine.create_session("u1", &Map::new()).unwrap();
    h.engine
        .send_message(&other, Content::user_text("second"))
        .await
        .unwrap();
    let late = h
        .pending()
        .into_iter()
        .find(|c| c.call_id != early.call_id)
        .unwrap();
    h.clock.advance(35_000);
    let err = h
        .engine
        .decide_many(vec![
            (early.call_id.clone(), Decision::Approve),
            (late.call_id.clone(), Decision::Approve),
        ])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, EngineError::Expired { call_ids } if call_ids == &vec![early.call_id.clone()]),
        "{err:?}"
    );
    let writes = h.writes.lock().unwrap().clone();
    assert_eq!(writes.len(), 1, "only the one still in time ran");
    assert_eq!(writes[0].1["chat"], "b");
    assert_eq!(
        h.store
            .call(&early.call_id)
            .unwrap()
            .unwrap()
            .decision
            .unwrap()
            .verdict,
        Verdict::Expired
    );
}

#[tokio::test]
async fn dispatch_refuses_an_approval_recorded_after_the_request_expired() {
    let h = harness(vec![
        call("send_message", json!({"chat": "a"})),
        say("not sent"),
    ]);
    h.send("send").await;
    let mut call = h.only_pending();
    let expires_at = call.expires_at.unwrap();
    // What the old sweep-only check let through: an Approve 16 s after expiry, recorded.
    call.status = CallStatus::Approved;
    call.decision = Some(agent::persist::ApprovalDecision {
        verdict: Verdict::Approved,
        decided_by: "user".into(),
        decided_at: expires_at + 16_000,
        reason: None,
        args_hash: Some(agent::engine::args_hash(&call.args)),
    });
    call.version += 1;
    let id = call.call_id.clone();
    h.store
        .commit(&Commit {
            session_id: h.session.clone(),
            calls: vec![call],
            ..Commit::default()
        })
        .unwrap();
    h.clock.advance(76_000);
    h.engine.recover().await.unwrap();
    assert!(
        h.writes.lock().unwrap().is_empty(),
        "a late approval was dispatched"
    );
    let record = h.store.call(&id).unwrap().unwrap();
    assert_eq!(record.outcome, Some(ToolOutcome::Cancelled));
    assert!(
        h.store.dispatches(&id).unwrap().is_empty(),
        "nothing journalled"
    );
}

#[tokio::test]
async fn a_new_message_keeps_a_waiting_approval_the_model_is_told_and_approving_later_runs_it() {
    let h = harness(vec![
        call("send_message", json!({"chat": "a", "text": "hi"})),
        say("好的，换个话题：明天没有会。"),
        say("消息已发出。"),
    ]);
    let first = h.send("给 a 发 hi").await;
    let held = h.only_pending();
    let second = h.send("算了，明天有会吗？").await;
    assert_eq!(second.status, InvocationStatus::Completed);
    // Still waiting, its turn still suspended, nothing cancelled.
    let record = h.store.call(&held.call_id).unwrap().unwrap();
    assert_eq!(record.status, CallStatus::AwaitingApproval);
    assert!(record.decision.is_none());
    assert_eq!(
        h.store
            .invocation(&first.invocation_id)
            .unwrap()
            .unwrap()
            .status,
        InvocationStatus::Suspended
    );
    assert_eq!(h.pending().len(), 1);
    // The model was told it still waits, in a history every provider accepts.
    let requests = h.model.requests();
    let second_request = &requests[1];
    assert_well_formed(second_request);
    let told = second_request
        .contents
        .iter()
        .flat_map(|c| c.function_responses())
        .find(|r| r.id.as_deref() == Some(held.call_id.as_str()))
        .expect("the waiting call is answered in the request");
    assert!(
        told.response["output"]
            .as_str()
            .unwrap()
            .contains("waiting for the user's approval"),
        "{told:?}"
    );
    assert!(h.writes.lock().unwrap().is_empty());

    // Approving it now runs it, and the model hears the result as an update.
    let outcome = h
        .engine
        .decide(&held.call_id, Decision::Approve)
        .await
        .unwrap();
    assert_eq!(outcome.status, InvocationStatus::Completed);
    assert_eq!(h.writes.lock().unwrap().len(), 1);
    let requests = h.model.requests();
    let last = requests.last().unwrap();
    assert_well_formed(last);
    let update = last.contents.last().unwrap();
    assert!(update.is_user());
    assert!(
        update.text().contains(&held.call_id) && update.text().contains("output"),
        "{update:?}"
    );
}

#[tokio::test]
async fn choosing_to_cancel_waiting_approvals_records_it_as_the_users_choice() {
    let h = harness(vec![
        call("send_message", json!({"chat": "a"})),
        say("new turn"),
    ]);
    let first = h.send("send").await;
    let held = h.only_pending();
    let second = h
        .engine
        .send_message_with(
            &h.session,
            Content::user_text("算了，换个话题"),
            WaitingCalls::Cancel,
        )
        .await
        .unwrap();
    assert_eq!(second.status, InvocationStatus::Completed);
    let record = h.store.call(&held.call_id).unwrap().unwrap();
    assert_eq!(record.outcome, Some(ToolOutcome::Cancelled));
    let decision = record.decision.unwrap();
    assert_eq!(decision.verdict, Verdict::Cancelled);
    assert_eq!(decision.decided_by, "user");
    assert_eq!(
        decision.reason.as_deref(),
        Some(notice::CANCELLED_FOR_NEW_MESSAGE)
    );
    assert_eq!(
        h.store
            .invocation(&first.invocation_id)
            .unwrap()
            .unwrap()
            .status,
        InvocationStatus::Cancelled
    );
    assert!(h.pending().is_empty());
    assert!(h.writes.lock().unwrap().is_empty());
    assert_well_formed(h.model.requests().last().unwrap());
}

/// A model that streams two chunks and then never finishes.
#[derive(Debug)]
struct HalfAnswer;

#[async_trait::async_trait]
impl agent::Model for HalfAnswer {
    fn name(&self) -> &str {
        "half"
    }
    async fn generate(
        &self,
        _request: LlmRequest,
    ) -> Result<agent::ModelStream, agent::ModelError> {
        let chunk = |text: &str| {
            Ok(LlmResponse {
                partial: Some(true),
                ..LlmResponse::from_parts(vec![Part::from_text(text)])
            })
        };
        let chunks = futures::stream::iter(vec![chunk("本周完成了"), chunk("三件事：")]);
        Ok(Box::pin(futures::StreamExt::chain(
            chunks,
            futures::stream::pending(),
        )))
    }
}

#[tokio::test]
async fn stop_keeps_the_partial_answer_marked_as_stopped() {
    let store = Arc::new(store::Store::open_in_memory().unwrap());
    let agent = LlmAgent::builder("assistant", Arc::new(HalfAnswer))
        .build()
        .unwrap();
    let engine = Engine::new(agent, store.clone(), EngineConfig::default()).unwrap();
    let session = engine.create_session("u", &Map::new()).unwrap();
    let mut events = engine.subscribe();
    let running = {
        let engine = engine.clone();
        let session = session.clone();
        tokio::spawn(async move {
            engine
                .send_message(&session, Content::user_text("写周报"))
                .await
        })
    };
    // Wait for the second chunk to reach subscribers, then press Stop.
    let mut streamed = String::new();
    while !streamed.contains("三件事") {
        if let EngineEvent::Event { event, .. } = events.recv().await.unwrap()
            && event.partial
        {
            streamed.push_str(&event.content.unwrap().text());
        }
    }
    assert!(engine.cancel(&session).await.unwrap());
    let outcome = running.await.unwrap().unwrap();
    assert_eq!(outcome.status, InvocationStatus::Cancelled);
    let stored = store.load_session(&session).unwrap().events;
    let kept = stored
        .iter()
        .find(|e| e.content.as_ref().is_some_and(|c| c.is_model()))
        .expect("the partial answer is kept");
    assert_eq!(kept.content.as_ref().unwrap().text(), "本周完成了三件事：");
    assert!(kept.interrupted);
    assert_eq!(kept.error_code.as_deref(), Some(notice::STOPPED_CODE));
    assert!(!kept.partial);
    let closing = stored.last().unwrap();
    assert_eq!(
        closing.error_message.as_deref(),
        Some(notice::CANCELLED_BY_USER)
    );
}
