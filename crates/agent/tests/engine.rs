//! Scenario tests of the engine with a scripted model and the real SQLite store.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use agent::persist::{AuditFilter, CallFilter, Commit, JournalEntry, JournalOp};
use agent::{
    Approval, CallStatus, Content, Decision, Engine, EngineConfig, EngineError, EngineEvent,
    EngineStore, FunctionCall, FunctionTool, InvocationStatus, LlmAgent, LlmRequest, LlmResponse,
    MalformedCall, ManualClock, Part, RecordingModel, RuleEffect, ScriptedModel, Settlement,
    ToolOutcome, ToolResult, ToolReturn, Verdict,
};
use serde_json::{Map, Value, json};

const T0: i64 = 1_800_000_000_000;

fn obj(value: Value) -> Map<String, Value> {
    value.as_object().unwrap().clone()
}

fn say(text: &str) -> LlmResponse {
    LlmResponse::from_parts(vec![Part::from_text(text)])
}

fn call(name: &str, args: Value) -> LlmResponse {
    calls(&[(name, args)])
}

fn calls(list: &[(&str, Value)]) -> LlmResponse {
    LlmResponse::from_parts(
        list.iter()
            .map(|(name, args)| Part::FunctionCall(FunctionCall::new(*name, obj(args.clone()))))
            .collect(),
    )
}

/// Every run of a tool: (idempotency key, arguments).
type Runs = Arc<Mutex<Vec<(String, Map<String, Value>)>>>;

fn recording_tool(name: &str, approval: Approval, runs: &Runs) -> FunctionTool {
    let runs = runs.clone();
    FunctionTool::new(
        name,
        format!("test tool {name}"),
        json!({"type": "object", "properties": {"chat": {"type": "string"}, "chat_id": {"type": "string"}, "text": {"type": "string"}, "members": {"type": "integer"}}, "additionalProperties": false}),
        move |args, ctx| {
            runs.lock().unwrap().push((ctx.idempotency_key.clone(), args.clone()));
            ToolReturn::from(json!({"ok": true, "args": args}))
        },
    )
    .with_approval(approval)
}

struct Harness {
    engine: Engine,
    store: Arc<store::Store>,
    model: Arc<RecordingModel>,
    clock: ManualClock,
    _server: Option<ScriptedServer>,
    session: String,
    writes: Runs,
    reads: Runs,
}

/// The scripted model server on a thread of its own, so a synchronous harness can start it.
struct ScriptedServer {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The script as the OpenAI-compatible scripted server's steps, in order.
fn server_steps(script: &[LlmResponse]) -> Vec<emulator::model_server::Step> {
    use emulator::model_server::{Reply, Step, ToolCall};
    script
        .iter()
        .map(|response| {
            let mut tool_calls: Vec<ToolCall> = response
                .content
                .function_calls()
                .map(|c| ToolCall {
                    name: c.name.clone(),
                    arguments: Value::Object(c.args.clone()),
                    id: None,
                })
                .collect();
            tool_calls.extend(response.malformed_calls.iter().map(|m| ToolCall {
                name: m.name.clone(),
                arguments: Value::String(m.arguments.clone()),
                id: None,
            }));
            Step::reply(Reply {
                text: response.content.text(),
                tool_calls,
            })
        })
        .collect()
}

/// The model the scenario tests run against: the in-process scripted model, or — with
/// `ENGINE_TEST_PROVIDER=openai` — the real OpenAI-compatible provider talking HTTP to the
/// scripted model server, answering the same script.
fn scripted(script: Vec<LlmResponse>) -> (Arc<dyn agent::Model>, Option<ScriptedServer>) {
    if std::env::var("ENGINE_TEST_PROVIDER").as_deref() != Ok("openai") {
        return (Arc::new(ScriptedModel::new(script)), None);
    }
    let steps = server_steps(&script);
    let (url_tx, url_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let server = emulator::model_server::ModelServer::start(
                emulator::model_server::Script::of_steps(steps),
            )
            .await
            .unwrap();
            url_tx.send(server.base_url()).unwrap();
            let _ = tokio::task::spawn_blocking(move || stop_rx.recv()).await;
            server.shutdown().await;
        });
    });
    let base_url = url_rx.recv().unwrap();
    let config = llm::ProviderConfig::new(
        llm::ProviderKind::OpenAiCompatible,
        "scripted server",
        base_url,
        "scripted-over-http",
        None,
    );
    let model = llm::connect(config).unwrap();
    (
        model,
        Some(ScriptedServer {
            stop: Some(stop_tx),
            thread: Some(thread),
        }),
    )
}

fn harness(script: Vec<LlmResponse>) -> Harness {
    let (model, server) = scripted(script);
    build_harness(model, server, |b| b)
}

fn harness_with(
    model: ScriptedModel,
    extend: impl FnOnce(agent::LlmAgentBuilder) -> agent::LlmAgentBuilder,
) -> Harness {
    build_harness(Arc::new(model), None, extend)
}

fn build_harness(
    model: Arc<dyn agent::Model>,
    server: Option<ScriptedServer>,
    extend: impl FnOnce(agent::LlmAgentBuilder) -> agent::LlmAgentBuilder,
) -> Harness {
    let store = Arc::new(store::Store::open_in_memory().unwrap());
    let model = Arc::new(RecordingModel::new(model));
    let writes: Runs = Arc::default();
    let reads: Runs = Arc::default();
    let builder = LlmAgent::builder("assistant", model.clone())
        .instruction("You help with Feishu.")
        .tool(recording_tool("list_events", Approval::Never, &reads))
        .tool(recording_tool("send_message", Approval::Always, &writes));
    let agent = extend(builder).build().unwrap();
    let clock = ManualClock::at(T0);
    let config = EngineConfig {
        approval_ttl_ms: Some(60_000),
        ..EngineConfig::default()
    };
    let engine = Engine::with_clock(agent, store.clone(), config, Arc::new(clock.clone())).unwrap();
    let session = engine.create_session("u1", &Map::new()).unwrap();
    Harness {
        engine,
        store,
        model,
        clock,
        _server: server,
        session,
        writes,
        reads,
    }
}

impl Harness {
    async fn send(&self, text: &str) -> agent::TurnOutcome {
        self.engine
            .send_message(&self.session, Content::user_text(text))
            .await
            .unwrap()
    }

    fn pending(&self) -> Vec<agent::CallRecord> {
        self.engine.pending_calls().unwrap()
    }

    fn only_pending(&self) -> agent::CallRecord {
        let pending = self.pending();
        assert_eq!(pending.len(), 1, "{pending:?}");
        pending.into_iter().next().unwrap()
    }

    fn events(&self) -> Vec<agent::Event> {
        self.store.load_session(&self.session).unwrap().events
    }

    /// The function responses the model was shown in its last request.
    fn last_responses(&self) -> Vec<Map<String, Value>> {
        let requests = self.model.requests();
        let last = requests.last().unwrap();
        last.contents
            .iter()
            .flat_map(|c| c.function_responses())
            .map(|r| r.response.clone())
            .collect()
    }

    fn audit_kinds(&self) -> Vec<String> {
        let mut kinds: Vec<String> = self
            .engine
            .audit_trail(&AuditFilter::default())
            .unwrap()
            .into_iter()
            .map(|a| a.kind)
            .collect();
        kinds.reverse();
        kinds
    }
}

#[tokio::test]
async fn a_read_tool_runs_at_once_and_the_model_sees_its_output() {
    let h = harness(vec![call("list_events", json!({})), say("明天有两个会。")]);
    let outcome = h.send("明天有什么会？").await;
    assert_eq!(outcome.status, InvocationStatus::Completed);
    assert_eq!(h.reads.lock().unwrap().len(), 1);
    let responses = h.last_responses();
    assert_eq!(responses.len(), 1);
    assert!(
        responses[0]["output"]
            .as_str()
            .unwrap()
            .contains("\"ok\":true")
    );
    let events = h.events();
    assert_eq!(events.len(), 4, "user, call, response, answer");
    assert!(events[3].turn_complete);
    assert_eq!(events[3].content.as_ref().unwrap().text(), "明天有两个会。");
    // The engine gives every call its own id, and the response answers that id.
    let call_id = events[1].parts()[0]
        .function_call()
        .unwrap()
        .id
        .clone()
        .unwrap();
    assert_eq!(
        events[2].parts()[0]
            .function_response()
            .unwrap()
            .id
            .as_deref(),
        Some(call_id.as_str())
    );
}

#[tokio::test]
async fn a_write_is_held_before_dispatch_and_runs_once_when_approved() {
    let h = harness(vec![
        call("send_message", json!({"chat": "产品周会", "text": "hi"})),
        say("已发送。"),
    ]);
    let outcome = h.send("给产品周会发 hi").await;
    assert_eq!(outcome.status, InvocationStatus::Suspended);
    assert!(
        h.writes.lock().unwrap().is_empty(),
        "the write ran before approval"
    );
    let held = h.only_pending();
    assert_eq!(held.status, CallStatus::AwaitingApproval);
    assert_eq!(held.expires_at, Some(T0 + 60_000));
    assert!(h.events()[1].long_running_tool_ids.contains(&held.call_id));
    assert_eq!(
        h.model.requests().len(),
        1,
        "the model must wait for the decision"
    );

    let outcome = h
        .engine
        .decide(&held.call_id, Decision::Approve)
        .await
        .unwrap();
    assert_eq!(outcome.status, InvocationStatus::Completed);
    let writes = h.writes.lock().unwrap().clone();
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].0, held.idempotency_key);
    assert_eq!(writes[0].1, held.args);
    assert!(h.pending().is_empty());
    let done = h.store.call(&held.call_id).unwrap().unwrap();
    assert_eq!(
        (done.status, done.outcome),
        (CallStatus::Done, Some(ToolOutcome::Completed))
    );
    let journal = h.store.dispatches(&held.call_id).unwrap();
    assert_eq!(journal.len(), 1);
    assert_eq!(journal[0].idempotency_key, held.idempotency_key);
    assert!(journal[0].finished_at.is_some());
    assert_eq!(
        h.audit_kinds(),
        [
            "approval.requested",
            "approval.approved",
            "call.dispatched",
            "call.completed"
        ]
    );
    // Deciding again is refused.
    let again = h.engine.decide(&held.call_id, Decision::Approve).await;
    assert!(matches!(
        again,
        Err(EngineError::NotPending {
            status: CallStatus::Done,
            ..
        })
    ));
    assert!(matches!(
        h.engine.decide("fc_nope", Decision::Approve).await,
        Err(EngineError::CallNotFound(_))
    ));
}

#[tokio::test]
async fn edited_arguments_are_validated_and_what_runs_is_what_everyone_sees() {
    let h = harness(vec![
        call("send_message", json!({"chat": "a", "text": "draft"})),
        say("ok"),
    ]);
    h.send("send it").await;
    let held = h.only_pending();
    let bad = h
        .engine
        .decide(
            &held.call_id,
            Decision::ApproveEdited(obj(json!({"text": 5}))),
        )
        .await;
    assert!(
        matches!(bad, Err(EngineError::InvalidArguments { ref message, .. }) if message.contains("/text")),
        "{bad:?}"
    );
    assert_eq!(
        h.only_pending().status,
        CallStatus::AwaitingApproval,
        "a bad edit changes nothing"
    );

    let edited = obj(json!({"chat": "a", "text": "final wording"}));
    h.engine
        .decide(&held.call_id, Decision::ApproveEdited(edited.clone()))
        .await
        .unwrap();
    assert_eq!(h.writes.lock().unwrap()[0].1, edited);
    let response = &h.last_responses()[0];
    assert_eq!(response["edited_args"], Value::Object(edited.clone()));
    assert_eq!(response["original_args"]["text"], "draft");
    let record = h.store.call(&held.call_id).unwrap().unwrap();
    assert_eq!(record.decision.unwrap().verdict, Verdict::ApprovedEdited);
    let audit = h
        .engine
        .audit_trail(&AuditFilter {
            kind_prefix: Some("approval.approved_edited".into()),
            ..AuditFilter::default()
        })
        .unwrap();
    assert_eq!(audit[0].detail["args"], Value::Object(edited));
    assert_eq!(audit[0].detail["original_args"]["text"], "draft");
}

#[tokio::test]
async fn a_rejection_with_a_reason_reaches_the_model_as_blocked() {
    let h = harness(vec![
        call("send_message", json!({"chat": "a", "text": "x"})),
        say("好的，不发了。"),
    ]);
    h.send("send").await;
    let held = h.only_pending();
    let outcome = h
        .engine
        .decide(
            &held.call_id,
            Decision::Reject {
                reason: Some("时间不对".into()),
            },
        )
        .await
        .unwrap();
    assert_eq!(outcome.status, InvocationStatus::Completed);
    assert!(h.writes.lock().unwrap().is_empty());
    let response = &h.last_responses()[0];
    assert_eq!(response["outcome"], "blocked");
    assert!(response["error"].as_str().unwrap().contains("时间不对"));
    let record = h.store.call(&held.call_id).unwrap().unwrap();
    assert_eq!(record.outcome, Some(ToolOutcome::Blocked));
    assert_eq!(record.decision.unwrap().reason.as_deref(), Some("时间不对"));
}

#[tokio::test]
async fn an_unanswered_approval_expires_as_cancelled_not_rejected() {
    let h = harness(vec![
        call("send_message", json!({"chat": "a"})),
        say("它过期了。"),
    ]);
    h.send("send").await;
    let held = h.only_pending();
    h.clock.advance(59_999);
    assert!(h.engine.expire_due().await.unwrap().is_empty());
    h.clock.advance(1);
    assert_eq!(
        h.engine.expire_due().await.unwrap(),
        vec![held.call_id.clone()]
    );
    let record = h.store.call(&held.call_id).unwrap().unwrap();
    assert_eq!(record.outcome, Some(ToolOutcome::Cancelled));
    assert_eq!(record.decision.unwrap().verdict, Verdict::Expired);
    let response = &h.last_responses()[0];
    assert_eq!(response["outcome"], "cancelled");
    assert!(response["error"].as_str().unwrap().contains("expired"));
    assert!(h.writes.lock().unwrap().is_empty());
    assert!(matches!(
        h.engine.decide(&held.call_id, Decision::Approve).await,
        Err(EngineError::NotPending { .. })
    ));
}

#[tokio::test]
async fn always_allow_from_the_card_creates_a_constrained_rule_that_can_expire_and_be_revoked() {
    let script = vec![
        call("send_message", json!({"chat": "oc_1", "text": "1"})),
        say("sent 1"),
        call("send_message", json!({"chat": "oc_1", "text": "2"})),
        say("sent 2"),
        call("send_message", json!({"chat": "oc_2", "text": "3"})),
        say("other chat held"),
    ];
    let h = harness(script);
    h.send("one").await;
    let held = h.only_pending();
    let until = T0 + 3_600_000;
    h.engine
        .decide(
            &held.call_id,
            Decision::AlwaysAllow {
                constraints: obj(json!({"chat": "oc_1"})),
                expires_at: Some(until),
            },
        )
        .await
        .unwrap();
    let rules = h.engine.rules().unwrap();
    assert_eq!(rules.len(), 1);
    let rule = &rules[0];
    assert_eq!(
        (rule.tool.as_str(), rule.effect, rule.created_by.as_str()),
        ("send_message", RuleEffect::AlwaysAllow, "user")
    );
    assert_eq!(rule.from_call_id.as_deref(), Some(held.call_id.as_str()));

    // Same chat: runs without asking, approved by the rule.
    assert_eq!(h.send("two").await.status, InvocationStatus::Completed);
    assert_eq!(h.writes.lock().unwrap().len(), 2);
    let second = h
        .store
        .calls(&CallFilter::default())
        .unwrap()
        .into_iter()
        // Found by its arguments: with a manual clock every call has the same creation time.
        .find(|c| c.args.get("text") == Some(&json!("2")))
        .unwrap();
    assert_eq!(
        second.decision.unwrap().decided_by,
        format!("rule:{}", rule.id)
    );

    // Another chat: held.
    assert_eq!(h.send("three").await.status, InvocationStatus::Suspended);
    assert_eq!(h.writes.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn rules_lapse_at_their_expiry_and_when_revoked() {
    let script = vec![
        call("send_message", json!({"chat": "a"})),
        say("auto"),
        call("send_message", json!({"chat": "a"})),
        call("send_message", json!({"chat": "a"})),
    ];
    let h = harness(script);
    let rule = h
        .engine
        .add_rule(
            "send_message",
            RuleEffect::AlwaysAllow,
            Map::new(),
            Some(T0 + 1000),
        )
        .unwrap();
    assert_eq!(h.send("1").await.status, InvocationStatus::Completed);
    h.clock.advance(1000);
    assert_eq!(
        h.send("2").await.status,
        InvocationStatus::Suspended,
        "an expired rule must not apply"
    );
    let revoked = h.engine.revoke_rule(&rule.id).unwrap();
    assert_eq!(revoked.revoked_at, Some(T0 + 1000));
    assert!(
        h.engine.rules().unwrap()[0].revoked_at.is_some(),
        "revoked rules stay listed"
    );
    assert!(matches!(
        h.engine.revoke_rule("rule_nope"),
        Err(EngineError::RuleNotFound(_))
    ));
    assert!(h.audit_kinds().contains(&"rule.revoked".to_owned()));
}

#[tokio::test]
async fn a_never_allow_rule_blocks_without_asking() {
    let h = harness(vec![
        call("send_message", json!({"chat": "boss"})),
        say("blocked"),
    ]);
    h.engine
        .add_rule(
            "send_message",
            RuleEffect::NeverAllow,
            obj(json!({"chat": "boss"})),
            None,
        )
        .unwrap();
    assert_eq!(h.send("send").await.status, InvocationStatus::Completed);
    assert!(h.pending().is_empty());
    assert!(h.writes.lock().unwrap().is_empty());
    assert_eq!(h.last_responses()[0]["outcome"], "blocked");
}

#[tokio::test]
async fn approval_can_depend_on_the_arguments() {
    let runs: Runs = Arc::default();
    let big_chats = Approval::When(Arc::new(|args| {
        args.get("members").and_then(Value::as_i64).unwrap_or(0) > 50
    }));
    let h = harness_with(
        ScriptedModel::new(vec![
            call("notify", json!({"members": 10})),
            say("small"),
            call("notify", json!({"members": 51})),
        ]),
        |b| b.tool(recording_tool("notify", big_chats, &runs)),
    );
    assert_eq!(
        h.send("small chat").await.status,
        InvocationStatus::Completed
    );
    assert_eq!(h.send("big chat").await.status, InvocationStatus::Suspended);
    assert_eq!(runs.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn parallel_calls_run_what_needs_nothing_and_resume_when_all_are_resolved() {
    let h = harness(vec![
        calls(&[
            ("list_events", json!({})),
            ("send_message", json!({"chat": "a"})),
            ("send_message", json!({"chat": "b"})),
            ("list_events", json!({"chat": "x"})),
        ]),
        say("done"),
    ]);
    assert_eq!(h.send("do both").await.status, InvocationStatus::Suspended);
    assert_eq!(
        h.reads.lock().unwrap().len(),
        2,
        "reads run while writes wait"
    );
    let pending = h.pending();
    assert_eq!(pending.len(), 2);
    assert_eq!(
        h.engine
            .decide(&pending[0].call_id, Decision::Approve)
            .await
            .unwrap()
            .status,
        InvocationStatus::Suspended
    );
    assert_eq!(h.model.requests().len(), 1, "one write is still pending");
    let outcome = h
        .engine
        .decide(&pending[1].call_id, Decision::Reject { reason: None })
        .await
        .unwrap();
    assert_eq!(outcome.status, InvocationStatus::Completed);
    // The model sees all four answers together, after its four calls.
    let last = h.model.requests().pop().unwrap();
    let answer = last.contents.last().unwrap();
    assert_eq!(answer.function_responses().count(), 4);
}

#[tokio::test]
async fn batch_decisions_resolve_calls_across_sessions() {
    let h = harness(vec![
        call("send_message", json!({"chat": "a"})),
        call("send_message", json!({"chat": "b"})),
        say("1"),
        say("2"),
    ]);
    let other = h.engine.create_session("u1", &Map::new()).unwrap();
    h.send("first").await;
    h.engine
        .send_message(&other, Content::user_text("second"))
        .await
        .unwrap();
    let decisions = h
        .pending()
        .into_iter()
        .map(|c| (c.call_id, Decision::Approve))
        .collect();
    let outcomes = h.engine.decide_many(decisions).await.unwrap();
    assert!(
        outcomes
            .iter()
            .all(|o| o.status == InvocationStatus::Completed),
        "{outcomes:?}"
    );
    assert_eq!(h.writes.lock().unwrap().len(), 2);
}

/// A model that never answers until the test lets it.
#[derive(Debug)]
struct StuckModel;

#[async_trait::async_trait]
impl agent::Model for StuckModel {
    fn name(&self) -> &str {
        "stuck"
    }
    async fn generate(
        &self,
        _request: LlmRequest,
    ) -> Result<agent::ModelStream, agent::ModelError> {
        futures::future::pending::<()>().await;
        unreachable!()
    }
}

#[tokio::test]
async fn the_user_can_cancel_a_running_turn_and_a_suspended_one() {
    let store = Arc::new(store::Store::open_in_memory().unwrap());
    let agent = LlmAgent::builder("assistant", Arc::new(StuckModel))
        .build()
        .unwrap();
    let engine = Engine::new(agent, store.clone(), EngineConfig::default()).unwrap();
    let session = engine.create_session("u", &Map::new()).unwrap();
    let running = {
        let engine = engine.clone();
        let session = session.clone();
        tokio::spawn(async move {
            engine
                .send_message(&session, Content::user_text("hi"))
                .await
        })
    };
    while !engine.is_running(&session) {
        tokio::task::yield_now().await;
    }
    assert!(matches!(
        engine
            .send_message(&session, Content::user_text("again"))
            .await,
        Err(EngineError::Busy(_))
    ));
    assert!(engine.cancel(&session).await.unwrap());
    let outcome = running.await.unwrap().unwrap();
    assert_eq!(outcome.status, InvocationStatus::Cancelled);
    let events = store.load_session(&session).unwrap().events;
    assert!(events.last().unwrap().interrupted);

    // A suspended turn is closed and its held calls answered.
    let h = harness(vec![call("send_message", json!({"chat": "a"}))]);
    h.send("send").await;
    let held = h.only_pending();
    assert!(h.engine.cancel(&h.session).await.unwrap());
    assert!(h.pending().is_empty());
    assert_eq!(
        h.store
            .call(&held.call_id)
            .unwrap()
            .unwrap()
            .decision
            .unwrap()
            .verdict,
        Verdict::Cancelled
    );
    assert!(
        !h.engine.cancel(&h.session).await.unwrap(),
        "nothing left to cancel"
    );
}

fn auth_tool(
    name: &str,
    approval: Approval,
    granted: &Arc<Mutex<bool>>,
    runs: &Runs,
) -> FunctionTool {
    let granted = granted.clone();
    let runs = runs.clone();
    FunctionTool::new(
        name,
        "needs calendar permission",
        json!({"type": "object"}),
        move |args, ctx| {
            runs.lock()
                .unwrap()
                .push((ctx.idempotency_key.clone(), args.clone()));
            if *granted.lock().unwrap() {
                ToolReturn::from("created")
            } else {
                ToolResult::new(ToolOutcome::NeedsUserAuth)
                    .with_content("需要日历权限")
                    .with_auth_scopes(["calendar:calendar", "offline_access"])
                    .with_authorize_url("https://accounts.example/authorize")
                    .into()
            }
        },
    )
    .with_approval(approval)
    .with_scopes(["calendar:calendar"])
}

#[tokio::test]
async fn needing_a_permission_suspends_and_signing_in_reruns_the_original_call() {
    let granted = Arc::new(Mutex::new(false));
    let runs: Runs = Arc::default();
    let h = harness_with(
        ScriptedModel::new(vec![
            call("create_event", json!({"summary": "周会"})),
            say("已创建。"),
        ]),
        |b| b.tool(auth_tool("create_event", Approval::Always, &granted, &runs)),
    );
    h.send("建个周会").await;
    let held = h.only_pending();
    assert_eq!(
        h.engine
            .decide(&held.call_id, Decision::Approve)
            .await
            .unwrap()
            .status,
        InvocationStatus::Suspended
    );
    let waiting = h.only_pending();
    assert_eq!(waiting.status, CallStatus::AwaitingAuth);
    assert_eq!(waiting.auth_scopes, ["calendar:calendar", "offline_access"]);
    let auth_event = h
        .events()
        .into_iter()
        .rev()
        .find(|e| !e.actions.requested_auth_configs.is_empty())
        .unwrap();
    let config = &auth_event.actions.requested_auth_configs[&held.call_id];
    assert_eq!(
        config["scopes"],
        json!(["calendar:calendar", "offline_access"])
    );
    assert_eq!(
        config["authorize_url"],
        "https://accounts.example/authorize"
    );

    // Not enough scopes: nothing happens.
    assert!(
        h.engine
            .auth_completed(&["calendar:calendar".into()])
            .await
            .unwrap()
            .is_empty()
    );
    *granted.lock().unwrap() = true;
    let outcomes = h
        .engine
        .auth_completed(&["calendar:calendar".into(), "offline_access".into()])
        .await
        .unwrap();
    assert_eq!(outcomes[0].status, InvocationStatus::Completed);
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), 2);
    assert_eq!(
        runs[0], runs[1],
        "the same call, same arguments and key, without asking again"
    );
    assert_eq!(h.store.dispatches(&held.call_id).unwrap().len(), 2);
    assert_eq!(
        h.store.call(&held.call_id).unwrap().unwrap().outcome,
        Some(ToolOutcome::Completed)
    );
}

#[tokio::test]
async fn declining_to_sign_in_gives_the_model_cancelled() {
    let granted = Arc::new(Mutex::new(false));
    let runs: Runs = Arc::default();
    let h = harness_with(
        ScriptedModel::new(vec![
            call("list_calendar", json!({})),
            say("没有权限就算了。"),
        ]),
        |b| b.tool(auth_tool("list_calendar", Approval::Never, &granted, &runs)),
    );
    assert_eq!(h.send("看日历").await.status, InvocationStatus::Suspended);
    let waiting = h.only_pending();
    let outcome = h.engine.auth_declined(&waiting.call_id).await.unwrap();
    assert_eq!(outcome.status, InvocationStatus::Completed);
    assert_eq!(h.last_responses()[0]["outcome"], "cancelled");
}

#[tokio::test]
async fn before_agent_can_answer_for_the_agent_and_after_agent_adds_a_message() {
    let h = harness_with(ScriptedModel::new(vec![say("model answer")]), |b| {
        b.before_agent(|ctx| {
            ctx.set_variable("seen", json!(true));
            (ctx.get_last_user_input()[0].text() == Some("skip"))
                .then(|| Content::model_text("skipped by callback"))
        })
        .before_agent(|_| Some(Content::model_text("never reached")))
        .after_agent(|_| Some(Content::model_text("after")))
    });
    h.send("skip").await;
    assert!(
        h.model.requests().is_empty(),
        "the model must not be called"
    );
    let events = h.events();
    assert_eq!(
        events.last().unwrap().content.as_ref().unwrap().text(),
        "skipped by callback"
    );
    assert_eq!(events.last().unwrap().actions.state_delta["seen"], true);
}

#[tokio::test]
async fn before_model_replaces_the_call_and_after_model_replaces_the_answer() {
    let h = harness_with(
        ScriptedModel::new(vec![say("from the model"), say("second")]),
        |b| {
            b.before_model(|_, request| {
                let text = request.contents.last().unwrap().text();
                (text == "canned").then(|| say("canned answer"))
            })
            .after_model(|ctx, response| {
                ctx.set_variable("temp:scratch", json!(1));
                (response.content.text() == "second").then(|| say("rewritten"))
            })
            .after_agent(|_| Some(Content::model_text("after")))
        },
    );
    h.send("canned").await;
    assert!(h.model.requests().is_empty());
    h.send("real").await;
    h.send("again").await;
    let texts: Vec<String> = h
        .events()
        .iter()
        .filter(|e| !e.is_user())
        .filter_map(|e| e.content.as_ref().map(Content::text))
        .collect();
    assert_eq!(
        texts,
        [
            "canned answer",
            "after",
            "from the model",
            "after",
            "rewritten",
            "after"
        ]
    );
    assert!(
        h.events()
            .iter()
            .all(|e| !e.actions.state_delta.contains_key("temp:scratch")),
        "temp: is never stored"
    );
}

#[tokio::test]
async fn before_tool_replaces_the_call_and_after_tool_replaces_the_result() {
    let h = harness_with(
        ScriptedModel::new(vec![
            call("list_events", json!({"chat": "cached"})),
            say("a"),
            call("list_events", json!({})),
            say("b"),
        ]),
        |b| {
            b.before_tool(|ctx, name, args| {
                ctx.set_variable("last_tool", json!(name));
                (args.get("chat") == Some(&json!("cached"))).then(|| ToolReturn::from("from cache"))
            })
            .after_tool(|_, _, _, result| {
                matches!(result, ToolReturn::Value(_)).then(|| ToolReturn::from("rewritten result"))
            })
        },
    );
    h.send("cached").await;
    assert!(
        h.reads.lock().unwrap().is_empty(),
        "before_tool short-circuits the tool"
    );
    assert_eq!(h.last_responses()[0]["output"], "rewritten result");
    h.send("live").await;
    assert_eq!(h.reads.lock().unwrap().len(), 1);
    let state = h.store.load_state(&h.session).unwrap();
    assert_eq!(state["last_tool"], "list_events");
}

#[tokio::test]
async fn a_callback_cannot_change_approved_arguments() {
    let h = harness_with(
        ScriptedModel::new(vec![call("send_message", json!({"chat": "a"})), say("x")]),
        |b| {
            b.before_tool(|_, _, args| {
                args.insert("chat".into(), json!("someone else"));
                None
            })
        },
    );
    h.send("send").await;
    let held = h.only_pending();
    h.engine
        .decide(&held.call_id, Decision::Approve)
        .await
        .unwrap();
    assert!(h.writes.lock().unwrap().is_empty());
    assert!(
        h.last_responses()[0]["error"]
            .as_str()
            .unwrap()
            .contains("changed the approved arguments")
    );
}

#[tokio::test]
async fn invalid_arguments_unknown_tools_and_malformed_json_go_back_to_the_model() {
    let malformed = LlmResponse {
        malformed_calls: vec![MalformedCall {
            id: Some("x".into()),
            name: "list_events".into(),
            arguments: "{\"chat\":".into(),
            error: "EOF while parsing".into(),
        }],
        ..LlmResponse::from_parts(vec![])
    };
    let h = harness(vec![
        calls(&[
            ("list_events", json!({"chat": 7})),
            ("no_such_tool", json!({})),
        ]),
        malformed,
        say("I fixed it"),
    ]);
    assert_eq!(h.send("go").await.status, InvocationStatus::Completed);
    assert!(h.reads.lock().unwrap().is_empty());
    let requests = h.model.requests();
    assert_eq!(requests.len(), 3);
    let second: Vec<_> = requests[1]
        .contents
        .iter()
        .flat_map(|c| c.function_responses())
        .collect();
    assert!(
        second[0].response["error"]
            .as_str()
            .unwrap()
            .contains("/chat"),
        "{:?}",
        second[0]
    );
    assert!(
        second[1].response["error"]
            .as_str()
            .unwrap()
            .contains("no tool named")
    );
    let third = h.last_responses();
    assert!(
        third.last().unwrap()["error"]
            .as_str()
            .unwrap()
            .contains("not valid JSON")
    );
    let kinds = h.audit_kinds();
    for kind in [
        "call.invalid_arguments",
        "call.unknown_tool",
        "call.malformed_arguments",
    ] {
        assert!(kinds.contains(&kind.to_owned()), "{kinds:?}");
    }
}

#[tokio::test]
async fn a_model_error_fails_the_turn_with_its_code_and_the_next_message_works() {
    let model = ScriptedModel::with_results(vec![
        Err(agent::ModelError::new("rate_limited", "slow down")),
        Ok(say("back")),
    ]);
    let h = harness_with(model, |b| b);
    let outcome = h.send("hi").await;
    assert_eq!(outcome.status, InvocationStatus::Failed);
    let last = h.events().pop().unwrap();
    assert_eq!(last.error_code.as_deref(), Some("rate_limited"));
    assert_eq!(h.send("again").await.status, InvocationStatus::Completed);
}

#[tokio::test]
async fn a_runaway_turn_is_stopped() {
    let model = ScriptedModel::from_fn(|_| Ok(call("list_events", json!({}))));
    let store = Arc::new(store::Store::open_in_memory().unwrap());
    let runs: Runs = Arc::default();
    let agent = LlmAgent::builder("a", Arc::new(model))
        .tool(recording_tool("list_events", Approval::Never, &runs))
        .build()
        .unwrap();
    let engine = Engine::new(
        agent,
        store.clone(),
        EngineConfig {
            max_model_calls: 3,
            ..EngineConfig::default()
        },
    )
    .unwrap();
    let session = engine.create_session("u", &Map::new()).unwrap();
    let outcome = engine
        .send_message(&session, Content::user_text("loop"))
        .await
        .unwrap();
    assert_eq!(outcome.status, InvocationStatus::Failed);
    assert_eq!(runs.lock().unwrap().len(), 3);
    assert_eq!(
        store
            .load_session(&session)
            .unwrap()
            .events
            .last()
            .unwrap()
            .error_code
            .as_deref(),
        Some("too_many_steps")
    );
}

#[tokio::test]
async fn a_panicking_tool_fails_its_call_not_the_engine() {
    let h = harness_with(
        ScriptedModel::new(vec![call("explode", json!({})), say("it failed")]),
        |b| {
            b.tool(FunctionTool::new(
                "explode",
                "panics",
                json!({"type": "object"}),
                |_, _| panic!("boom"),
            ))
        },
    );
    assert_eq!(h.send("go").await.status, InvocationStatus::Completed);
    assert!(
        h.last_responses()[0]["error"]
            .as_str()
            .unwrap()
            .contains("crashed")
    );
}

#[tokio::test]
async fn tools_change_state_and_end_the_invocation() {
    let h = harness_with(
        ScriptedModel::new(vec![call("finish", json!({})), say("never asked")]),
        |b| {
            b.tool(FunctionTool::new(
                "finish",
                "ends the turn",
                json!({"type": "object"}),
                |_, ctx| {
                    ctx.set_variable("user:lang", json!("zh"));
                    ctx.set_variable("temp:t", json!(1));
                    ctx.actions.end_invocation = true;
                    ToolReturn::from("bye")
                },
            ))
        },
    );
    assert_eq!(h.send("go").await.status, InvocationStatus::Completed);
    assert_eq!(h.model.requests().len(), 1, "end_invocation stops the loop");
    let state = h.store.load_state(&h.session).unwrap();
    assert_eq!(Value::Object(state), json!({"user:lang": "zh"}));
}

#[tokio::test]
async fn transfer_hands_over_to_a_sub_agent_whose_events_carry_the_branch_and_escalate_returns() {
    let store = Arc::new(store::Store::open_in_memory().unwrap());
    let root_model = Arc::new(ScriptedModel::new(vec![
        call("transfer_to_agent", json!({"agent_name": "calendar"})),
        say("back at the root"),
    ]));
    let child_model = Arc::new(ScriptedModel::new(vec![call("give_up", json!({}))]));
    let child = LlmAgent::builder("calendar", child_model.clone())
        .tool(FunctionTool::new(
            "give_up",
            "escalate",
            json!({"type": "object"}),
            |_, ctx| {
                ctx.actions.escalate = true;
                ToolReturn::from("escalating")
            },
        ))
        .build()
        .unwrap();
    let root = LlmAgent::builder("root", root_model.clone())
        .sub_agent(child)
        .build()
        .unwrap();
    let engine = Engine::new(root, store.clone(), EngineConfig::default()).unwrap();
    let session = engine.create_session("u", &Map::new()).unwrap();
    let outcome = engine
        .send_message(&session, Content::user_text("看日历"))
        .await
        .unwrap();
    assert_eq!(outcome.status, InvocationStatus::Completed);
    // The root offers the transfer function; the child was asked once.
    let offered = root_model.requests()[0]
        .config
        .as_ref()
        .unwrap()
        .visible_function_declarations()
        .any(|d| d.name == "transfer_to_agent");
    assert!(offered);
    assert_eq!(child_model.requests().len(), 1);
    assert_eq!(root_model.requests().len(), 2);
    let events = store.load_session(&session).unwrap().events;
    let transfer = events
        .iter()
        .find(|e| e.actions.transfer_to_agent.is_some())
        .unwrap();
    assert_eq!(
        transfer.actions.transfer_to_agent.as_deref(),
        Some("calendar")
    );
    let child_events: Vec<_> = events.iter().filter(|e| e.author == "calendar").collect();
    assert!(!child_events.is_empty());
    assert!(
        child_events
            .iter()
            .all(|e| e.branch.as_deref() == Some("root.calendar"))
    );
    assert!(
        events
            .iter()
            .filter(|e| e.author == "root")
            .all(|e| e.branch.is_none())
    );
}

#[tokio::test]
async fn ending_the_session_refuses_further_messages() {
    let h = harness_with(ScriptedModel::new(vec![]), |b| {
        b.before_model(|_, _| {
            Some(LlmResponse::from_parts(vec![Part::from_end_session(
                "用户说再见",
                false,
            )]))
        })
    });
    assert_eq!(h.send("再见").await.status, InvocationStatus::Completed);
    let state = h.store.load_state(&h.session).unwrap();
    assert_eq!(
        state[agent::engine::SESSION_ENDED_VARIABLE]["reason"],
        "用户说再见"
    );
    let again = h
        .engine
        .send_message(&h.session, Content::user_text("还在吗"))
        .await;
    assert!(matches!(again, Err(EngineError::SessionEnded(_))));
}

#[tokio::test]
async fn subscribers_see_streamed_chunks_before_the_stored_answer() {
    let h = harness(vec![say("这是一段会被分块流式输出的回答。")]);
    let mut rx = h.engine.subscribe();
    h.send("hi").await;
    let mut partial = String::new();
    let mut final_text = None;
    while let Ok(event) = rx.try_recv() {
        if let EngineEvent::Event { event, .. } = event {
            if event.partial {
                assert!(
                    final_text.is_none(),
                    "a chunk arrived after the final answer"
                );
                partial.push_str(&event.content.unwrap().text());
            } else if !event.is_user() && event.content.is_some() {
                final_text = Some(event.content.unwrap().text());
            }
        }
    }
    assert_eq!(
        final_text.as_deref(),
        Some("这是一段会被分块流式输出的回答。")
    );
    assert_eq!(partial, "这是一段会被分块流式输出的回答。");
    assert!(
        h.events().iter().all(|e| !e.partial),
        "chunks are never stored"
    );
}

fn file_engine(
    path: &std::path::Path,
    script: Vec<LlmResponse>,
    writes: &Runs,
    dedup: bool,
) -> (Engine, Arc<store::Store>, Arc<ScriptedModel>) {
    let store = Arc::new(store::Store::open(path).unwrap());
    let model = Arc::new(ScriptedModel::new(script));
    let mut tool = recording_tool("send_message", Approval::Always, writes);
    if dedup {
        tool = tool.deduplicated();
    }
    let agent = LlmAgent::builder("assistant", model.clone())
        .tool(tool)
        .build()
        .unwrap();
    (
        Engine::new(agent, store.clone(), EngineConfig::default()).unwrap(),
        store,
        model,
    )
}

#[tokio::test]
async fn a_pending_approval_survives_a_restart_and_the_decision_resumes_the_turn() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("engine.db");
    let writes: Runs = Arc::default();
    let session;
    {
        let (engine, _, _) = file_engine(
            &path,
            vec![call("send_message", json!({"chat": "a"}))],
            &writes,
            false,
        );
        session = engine.create_session("u", &Map::new()).unwrap();
        engine
            .send_message(&session, Content::user_text("send"))
            .await
            .unwrap();
    }
    let (engine, store, model) =
        file_engine(&path, vec![say("sent after restart")], &writes, false);
    let report = engine.recover().await.unwrap();
    let pending = engine.pending_calls().unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(report.pending, vec![pending[0].call_id.clone()]);
    let outcome = engine
        .decide(&pending[0].call_id, Decision::Approve)
        .await
        .unwrap();
    assert_eq!(outcome.status, InvocationStatus::Completed);
    assert_eq!(writes.lock().unwrap().len(), 1);
    assert_eq!(model.requests().len(), 1);
    assert_eq!(
        store
            .load_session(&session)
            .unwrap()
            .events
            .last()
            .unwrap()
            .content
            .as_ref()
            .unwrap()
            .text(),
        "sent after restart"
    );
}

/// Leaves a write as a crash would: approved, journal `started`, never `finished`.
async fn crash_mid_write(path: &std::path::Path, writes: &Runs, dedup: bool) -> (String, String) {
    let (engine, store, _) = file_engine(
        path,
        vec![call("send_message", json!({"chat": "a"}))],
        writes,
        dedup,
    );
    let session = engine.create_session("u", &Map::new()).unwrap();
    engine
        .send_message(&session, Content::user_text("send"))
        .await
        .unwrap();
    let mut call = engine.pending_calls().unwrap().remove(0);
    call.status = CallStatus::Dispatching;
    call.decision = Some(agent::persist::ApprovalDecision {
        verdict: Verdict::Approved,
        decided_by: "user".into(),
        // Decided in time: dispatch refuses an approval recorded after the request expired.
        decided_at: call.created_at,
        reason: None,
        args_hash: Some(agent::engine::args_hash(&call.args)),
    });
    call.version += 1;
    let entry = JournalEntry {
        call_id: call.call_id.clone(),
        attempt: 1,
        session_id: session.clone(),
        tool: call.tool.clone(),
        idempotency_key: call.idempotency_key.clone(),
        args_hash: agent::engine::args_hash(&call.args),
        started_at: T0,
        finished_at: None,
        outcome: None,
    };
    let id = call.call_id.clone();
    store
        .commit(&Commit {
            session_id: session.clone(),
            calls: vec![call],
            journal: vec![JournalOp::Start(entry)],
            ..Commit::default()
        })
        .unwrap();
    (session, id)
}

#[tokio::test]
async fn after_a_crash_a_deduplicated_write_is_retried_with_the_same_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("engine.db");
    let writes: Runs = Arc::default();
    let (_, call_id) = crash_mid_write(&path, &writes, true).await;
    let (engine, store, _) = file_engine(&path, vec![say("done")], &writes, true);
    let report = engine.recover().await.unwrap();
    assert_eq!(report.retried, vec![call_id.clone()]);
    let record = store.call(&call_id).unwrap().unwrap();
    assert_eq!(record.status, CallStatus::Done);
    let writes = writes.lock().unwrap().clone();
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].0, record.idempotency_key);
    let journal = store.dispatches(&call_id).unwrap();
    assert_eq!(journal.len(), 2);
    assert!(
        journal
            .iter()
            .all(|j| j.idempotency_key == record.idempotency_key && j.finished_at.is_some())
    );
    // The interrupted attempt is closed as "never learned", not as a failure or a cancellation.
    assert_eq!(journal[0].outcome, None);
    assert_eq!(journal[1].outcome, Some(ToolOutcome::Completed));
}

#[tokio::test]
async fn after_a_crash_a_write_without_deduplication_waits_for_the_user_to_settle_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("engine.db");
    let writes: Runs = Arc::default();
    let (_, call_id) = crash_mid_write(&path, &writes, false).await;
    let (engine, store, _) = file_engine(&path, vec![say("ok, it was sent")], &writes, false);
    let report = engine.recover().await.unwrap();
    assert_eq!(report.outcome_unknown, vec![call_id.clone()]);
    assert!(writes.lock().unwrap().is_empty(), "never re-run silently");
    let listed = engine.pending_calls().unwrap();
    assert_eq!(
        (listed[0].call_id.as_str(), listed[0].status),
        (call_id.as_str(), CallStatus::OutcomeUnknown)
    );
    // A second recovery changes nothing.
    assert!(engine.recover().await.unwrap().outcome_unknown.is_empty());
    let outcome = engine.settle(&call_id, Settlement::Happened).await.unwrap();
    assert_eq!(outcome.status, InvocationStatus::Completed);
    assert!(writes.lock().unwrap().is_empty());
    assert_eq!(
        store.call(&call_id).unwrap().unwrap().outcome,
        Some(ToolOutcome::Completed)
    );
    // The journal now says how the write ended, and recovery has nothing left to reread.
    let journal = store.dispatches(&call_id).unwrap();
    assert_eq!(journal[0].outcome, Some(ToolOutcome::Completed));
    assert!(store.unfinished_dispatches().unwrap().is_empty());
}

#[tokio::test]
async fn parallel_calls_are_listed_in_the_order_the_model_made_them() {
    let list: Vec<(&str, Value)> = (0..12)
        .map(|i| ("send_message", json!({"text": i.to_string()})))
        .collect();
    let h = harness(vec![calls(&list)]);
    h.send("many").await;
    let texts: Vec<String> = h
        .pending()
        .iter()
        .map(|c| c.args["text"].as_str().unwrap().to_owned())
        .collect();
    let expected: Vec<String> = (0..12).map(|i| i.to_string()).collect();
    assert_eq!(texts, expected);
}

/// A write that describes itself for the approval card.
struct Greeter;

#[async_trait::async_trait]
impl agent::AgentTool for Greeter {
    fn name(&self) -> &str {
        "greet"
    }
    fn description(&self) -> &str {
        "greets someone"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]})
    }
    fn requires_approval(&self, _args: &Map<String, Value>) -> bool {
        true
    }
    async fn preview(&self, args: &Map<String, Value>) -> Option<agent::Preview> {
        let who = args["who"].as_str()?.to_owned();
        Some(agent::Preview {
            summary: agent::Localized::new(format!("向{who}问好"), format!("Say hello to {who}")),
            risk: if who == "全员" {
                agent::Risk::High
            } else {
                agent::Risk::Normal
            },
            fields: Vec::new(),
            changes: Vec::new(),
        })
    }
    async fn verify(&self, args: &Map<String, Value>) -> Result<(), agent::Localized> {
        match args.get("who").and_then(Value::as_str) {
            Some("无名氏") => Err(agent::Localized::new(
                "找不到无名氏",
                "No one is called 无名氏",
            )),
            _ => Ok(()),
        }
    }
    async fn run(&self, _args: Map<String, Value>, _ctx: &mut agent::ToolContext) -> ToolReturn {
        ToolReturn::from("hello")
    }
}

#[tokio::test]
async fn an_edit_naming_someone_the_service_does_not_know_is_refused_in_the_editor_and_at_approval()
{
    let h = harness_with(
        ScriptedModel::new(vec![call("greet", json!({"who": "小王"})), say("done")]),
        |b| b.tool(Greeter),
    );
    h.send("greet 小王").await;
    let held = h.only_pending();
    let ghost = obj(json!({"who": "无名氏"}));
    let checked = h.engine.preview_edit(&held.call_id, &ghost).await;
    assert!(
        matches!(&checked, Err(EngineError::EditRefused { reason, .. }) if reason.zh == "找不到无名氏"),
        "{checked:?}"
    );
    let approved = h
        .engine
        .decide(&held.call_id, Decision::ApproveEdited(ghost))
        .await;
    assert!(
        matches!(approved, Err(EngineError::EditRefused { .. })),
        "{approved:?}"
    );
    let record = h.store.call(&held.call_id).unwrap().unwrap();
    assert_eq!(
        record.status,
        CallStatus::AwaitingApproval,
        "nothing changed"
    );
    assert_eq!(record.args["who"], "小王");
    let fine = h
        .engine
        .preview_edit(&held.call_id, &obj(json!({"who": "小李"})))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(fine.summary.en, "Say hello to 小李");
}

#[tokio::test]
async fn a_held_call_carries_the_tools_preview_and_an_edit_updates_it() {
    let h = harness_with(
        ScriptedModel::new(vec![call("greet", json!({"who": "全员"})), say("done")]),
        |b| b.tool(Greeter),
    );
    h.send("greet everyone").await;
    let held = h.only_pending();
    let preview = held.preview.clone().expect("a preview");
    assert_eq!(preview.summary.zh, "向全员问好");
    assert_eq!(preview.summary.en, "Say hello to 全员");
    assert_eq!(preview.risk, agent::Risk::High);
    h.engine
        .decide(
            &held.call_id,
            Decision::ApproveEdited(obj(json!({"who": "小王"}))),
        )
        .await
        .unwrap();
    let record = h.store.call(&held.call_id).unwrap().unwrap();
    assert_eq!(record.preview.unwrap().summary.en, "Say hello to 小王");
}

#[tokio::test]
async fn the_provider_switch_really_puts_http_in_the_path() {
    let over_http = std::env::var("ENGINE_TEST_PROVIDER").as_deref() == Ok("openai");
    let h = harness(vec![say("你好")]);
    assert_eq!(h._server.is_some(), over_http);
    assert_eq!(
        agent::Model::name(h.model.as_ref()),
        if over_http {
            "scripted-over-http"
        } else {
            "scripted"
        }
    );
    assert_eq!(h.send("hi").await.status, InvocationStatus::Completed);
    assert_eq!(
        h.events().last().unwrap().content.as_ref().unwrap().text(),
        "你好"
    );
}

// Issue 13: expiry at every decision and at dispatch, waiting approvals and new messages, Stop.
#[path = "engine/waiting.rs"]
mod waiting;

#[path = "engine/autonomy.rs"]
mod autonomy;

#[path = "engine/swap.rs"]
mod swap;

#[path = "engine/source.rs"]
mod source;

#[path = "engine/detached.rs"]
mod detached;
