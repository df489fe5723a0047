//! Issue 24: agents outside the tree (the app's connected agents) run turns of their own with
//! their own model and tools through the same gate, no model can transfer to one, and a turn
//! whose asker went away is abandoned: its held call never runs.

use super::*;

fn detached(name: &str, model: ScriptedModel, writes: &Runs) -> LlmAgent {
    LlmAgent::builder(name, Arc::new(model))
        .tool(recording_tool("send_message", Approval::Always, writes))
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_detached_agent_s_write_is_held_decided_and_run_under_its_own_name() {
    let h = harness(vec![]);
    let writes: Runs = Arc::default();
    let model = ScriptedModel::new(vec![call("send_message", json!({"text": "hi"})), say("")]);
    h.engine
        .set_detached_agents(vec![detached("agent_cc", model, &writes)])
        .unwrap();
    let outcome = h
        .engine
        .send_message_as(&h.session, "agent_cc", Content::user_text("relay"))
        .await
        .unwrap();
    assert_eq!(outcome.status, InvocationStatus::Suspended);
    let held = h.only_pending();
    assert_eq!(held.agent_name, "agent_cc");
    assert!(writes.lock().unwrap().is_empty(), "held, not run");
    h.engine
        .decide(&held.call_id, Decision::Approve)
        .await
        .unwrap();
    assert_eq!(writes.lock().unwrap().len(), 1);
    // The root's own model was never asked, and the audit names the detached agent.
    assert!(h.model.requests().is_empty());
    let actors: Vec<String> = h
        .engine
        .audit_trail(&AuditFilter::default())
        .unwrap()
        .into_iter()
        .map(|a| a.actor)
        .collect();
    assert!(actors.contains(&"agent:agent_cc".to_owned()), "{actors:?}");
}

#[tokio::test]
async fn detached_agents_are_named_apart_from_the_tree_and_unreachable_by_transfer() {
    let writes: Runs = Arc::default();
    let h = harness(vec![
        call("transfer_to_agent", json!({"agent_name": "agent_cc"})),
        say("still me"),
    ]);
    // A name of the tree is refused.
    let clash = h.engine.set_detached_agents(vec![detached(
        "assistant",
        ScriptedModel::new(vec![]),
        &writes,
    )]);
    assert!(clash.is_err());
    let unknown = h
        .engine
        .send_message_as(&h.session, "nobody", Content::user_text("x"))
        .await;
    assert!(matches!(unknown, Err(EngineError::AgentNotFound(_))));
    let other = Arc::new(ScriptedModel::new(vec![say("should never speak")]));
    h.engine
        .set_detached_agents(vec![
            LlmAgent::builder("agent_cc", other.clone())
                .build()
                .unwrap(),
        ])
        .unwrap();
    h.send("hand over").await;
    assert!(
        other.requests().is_empty(),
        "the root's model cannot transfer to a detached agent"
    );
    let answer = serde_json::to_string(&h.last_responses()[0]).unwrap();
    assert!(answer.contains("no agent named"), "{answer}");
}

#[tokio::test]
async fn abandoning_closes_the_held_call_without_running_it() {
    let h = harness(vec![]);
    let writes: Runs = Arc::default();
    let model = ScriptedModel::new(vec![call("send_message", json!({"text": "hi"})), say("")]);
    h.engine
        .set_detached_agents(vec![detached("agent_cc", model, &writes)])
        .unwrap();
    h.engine
        .send_message_as(&h.session, "agent_cc", Content::user_text("relay"))
        .await
        .unwrap();
    let held = h.only_pending();
    assert!(h.engine.abandon(&h.session).await.unwrap());
    let closed = h.store.call(&held.call_id).unwrap().unwrap();
    assert_eq!(closed.status, CallStatus::Done);
    let decision = closed.decision.unwrap();
    assert_eq!(decision.verdict, Verdict::Cancelled);
    assert_eq!(
        decision.reason.as_deref(),
        Some(agent::engine::notice::ABANDONED)
    );
    assert!(
        h.engine
            .decide(&held.call_id, Decision::Approve)
            .await
            .is_err()
    );
    assert!(writes.lock().unwrap().is_empty());
}
