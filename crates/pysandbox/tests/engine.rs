//! Python tools and callbacks in real turns of `agent::Engine` (scripted model, SQLite store):
//! they drive the turn, their variable changes land in the events' `state_delta`, the six
//! callback kinds run in the engine's order and short-circuit, writes wait for approval, and
//! failures are contained.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};

use agent::{Decision, ExternalResponse, InvocationStatus, StateMap};
use async_trait::async_trait;
use common::{call, engine_with, obj, say};
use pysandbox::{Host, HostCall, HttpRequest, NoHost};
use serde_json::{Value, json};

const WEATHER: &str = r#"
@tool(scopes=["weather:read"])
def get_weather(city: str, days: int = 1) -> dict:
    """Looks up the weather forecast.

    Args:
        city: The city's name.
        days: How many days ahead.
    """
    set_variable('last_city', city)
    return {"city": city, "forecast": ["sunny"] * days}
"#;

const GUARD: &str = r#"
def before_model_callback(callback_context: CallbackContext, llm_request: LlmRequest):
    llm_request.config.hide_tool('send_report')
    calls = callback_context.get_variable('model_calls', 0) + 1
    callback_context.set_variable('model_calls', calls)
    text = callback_context.user_content.parts[0].text
    if 'forbidden' in text:
        return LlmResponse.from_parts([Part.from_text('I cannot help with that.')])
    return None
"#;

const SEND_REPORT: &str = r#"
@tool(requires_approval=True)
def send_report(text: str) -> dict:
    """Posts a report."""
    response = ces_requests.post('https://hooks.test/report', json={'text': text})
    response.raise_for_status()
    return response.json()
"#;

#[tokio::test]
async fn a_python_tool_and_a_python_before_model_callback_drive_a_turn() {
    let h = engine_with(
        &[
            ("guard.py", GUARD),
            ("send_report.py", SEND_REPORT),
            ("weather.py", WEATHER),
        ],
        vec![
            call("get_weather", json!({"city": "Beijing", "days": 2})),
            say("Sunny in Beijing for two days."),
        ],
        Arc::new(NoHost),
        json!({}),
    )
    .await;
    assert!(h.extensions.errors.is_empty(), "{:?}", h.extensions.errors);
    let outcome = h.send("What's the weather in Beijing?").await;
    assert_eq!(outcome.status, InvocationStatus::Completed);

    // The model saw the Python tool's declaration, from its signature and docstring, and not
    // the tool the callback hid.
    let requests = h.model.requests();
    assert_eq!(requests.len(), 2);
    let config = requests[0].config.clone().unwrap();
    let visible: Vec<_> = config.visible_function_declarations().collect();
    assert_eq!(visible.len(), 1, "{visible:?}");
    assert_eq!(visible[0].name, "get_weather");
    assert_eq!(
        visible[0].description.as_deref(),
        Some("Looks up the weather forecast.")
    );
    assert_eq!(
        visible[0].parameters,
        Some(json!({
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city's name."},
                "days": {"type": "integer", "description": "How many days ahead.", "default": 1}
            },
            "required": ["city"],
            "additionalProperties": false
        }))
    );
    assert_eq!(config.excluded_tools, ["send_report"]);

    // The tool's answer reached the model, and the turn ended with the model's text.
    assert_eq!(
        h.last_responses(),
        vec![obj(
            json!({"output": r#"{"city":"Beijing","forecast":["sunny","sunny"]}"#})
        )]
    );
    let events = h.events();
    let last = events.last().unwrap();
    assert_eq!(
        last.content.as_ref().unwrap().text(),
        "Sunny in Beijing for two days."
    );

    // Variable changes became state deltas: the tool's on its response event, the callback's
    // on the model's events.
    let response_event = events
        .iter()
        .find(|e| {
            e.content
                .as_ref()
                .is_some_and(|c| c.function_responses().next().is_some())
        })
        .unwrap();
    assert_eq!(
        response_event.actions.state_delta,
        obj(json!({"last_city": "Beijing"}))
    );
    let deltas: Vec<&StateMap> = events
        .iter()
        .map(|e| &e.actions.state_delta)
        .filter(|d| d.contains_key("model_calls"))
        .collect();
    assert_eq!(
        deltas,
        [
            &obj(json!({"model_calls": 1})),
            &obj(json!({"model_calls": 2}))
        ]
    );
    assert_eq!(
        h.state(),
        obj(json!({"last_city": "Beijing", "model_calls": 2}))
    );

    // The callback can answer instead of the model.
    let outcome = h.send("something forbidden").await;
    assert_eq!(outcome.status, InvocationStatus::Completed);
    assert_eq!(h.model.requests().len(), 2, "the model was not called");
    let events = h.events();
    assert_eq!(
        events.last().unwrap().content.as_ref().unwrap().text(),
        "I cannot help with that."
    );
}

const FLOW: &str = r#"
def before_agent_callback(callback_context):
    if callback_context.user_content.parts[0].text == 'skip':
        return Content(parts=[Part.from_text('Skipped.')], role='model')

def before_tool_callback(tool, input, callback_context):
    if input.get('city') == 'atlantis':
        return {'error': 'There is no such city.'}
    input['city'] = input['city'].title()

def after_tool_callback(tool, input, callback_context, tool_response):
    if tool.name == 'get_weather' and 'forecast' in tool_response:
        tool_response['checked_by'] = 'after_tool'
        return tool_response

def after_model_callback(callback_context, llm_response):
    text = llm_response.content.parts[0].text if llm_response.content.parts else None
    if text and 'secret' in text:
        return LlmResponse.from_parts([Part.from_text('[redacted]')])

def after_agent_callback(callback_context):
    return Content(parts=[Part.from_text('Anything else?')], role='model')
"#;

#[tokio::test]
async fn callbacks_of_every_kind_run_in_the_engines_order_and_short_circuit() {
    let h = engine_with(
        &[("flow.py", FLOW), ("weather.py", WEATHER)],
        vec![
            call("get_weather", json!({"city": "beijing"})),
            say("The secret is sunshine."),
            call("get_weather", json!({"city": "atlantis"})),
            say("Atlantis cannot be found."),
        ],
        Arc::new(NoHost),
        json!({}),
    )
    .await;
    assert!(h.extensions.errors.is_empty(), "{:?}", h.extensions.errors);

    // before_agent answers for the agent: the model is never asked.
    assert_eq!(h.send("skip").await.status, InvocationStatus::Completed);
    assert!(h.model.requests().is_empty());
    assert_eq!(
        h.events().last().unwrap().content.as_ref().unwrap().text(),
        "Skipped."
    );

    // before_tool edits the arguments, after_tool edits the result, after_model rewrites the
    // answer, after_agent adds a closing message.
    assert_eq!(h.send("weather?").await.status, InvocationStatus::Completed);
    assert_eq!(
        h.last_responses(),
        vec![obj(json!({
            "output": r#"{"city":"Beijing","forecast":["sunny"],"checked_by":"after_tool"}"#
        }))]
    );
    let texts: Vec<String> = h
        .events()
        .iter()
        .rev()
        .take(2)
        .map(|e| e.content.as_ref().map(|c| c.text()).unwrap_or_default())
        .collect();
    assert_eq!(texts, ["Anything else?", "[redacted]"]);
    assert_eq!(
        h.state()["last_city"],
        "Beijing",
        "the tool ran with the edited city"
    );

    // before_tool answers instead of the tool: the tool does not run.
    assert_eq!(
        h.send("and atlantis?").await.status,
        InvocationStatus::Completed
    );
    assert_eq!(
        h.last_responses(),
        vec![obj(
            json!({"output": r#"{"error":"There is no such city."}"#})
        )]
    );
    assert_eq!(h.state()["last_city"], "Beijing", "the tool did not run");
}

/// Records the HTTP requests that reach it.
#[derive(Default)]
struct RecordingHost {
    requests: Mutex<Vec<(HttpRequest, Option<String>)>>,
}

#[async_trait]
impl Host for RecordingHost {
    async fn http(&self, request: HttpRequest, call: &HostCall) -> ExternalResponse {
        self.requests
            .lock()
            .unwrap()
            .push((request, call.idempotency_key.clone()));
        ExternalResponse::new(200, r#"{"sent": true}"#)
    }
}

#[tokio::test]
async fn a_write_waits_for_approval_and_an_unapproved_one_does_nothing() {
    let notify = r#"
def notify(text: str) -> dict:
    # Reached by a name the file never spells out, so the tool does not need approval.
    send = getattr(ces_requests, 'po' + 'st')
    response = send('https://hooks.test/notify', json={'text': text})
    return {'status': response.status_code, 'reason': response.reason}
"#;
    let host = Arc::new(RecordingHost::default());
    let h = engine_with(
        &[("notify.py", notify), ("send_report.py", SEND_REPORT)],
        vec![
            call("notify", json!({"text": "hi"})),
            say("I could not send it."),
            call("send_report", json!({"text": "weekly"})),
            say("Sent."),
        ],
        host.clone(),
        json!({}),
    )
    .await;
    assert!(h.extensions.errors.is_empty(), "{:?}", h.extensions.errors);

    // A tool that needs no approval cannot write, however it reaches a write: the POST never
    // leaves.
    assert_eq!(
        h.send("notify the team").await.status,
        InvocationStatus::Completed
    );
    assert_eq!(
        h.last_responses(),
        vec![obj(
            json!({"output": r#"{"status":403,"reason":"Forbidden"}"#})
        )]
    );
    assert!(
        host.requests.lock().unwrap().is_empty(),
        "the refused write was sent"
    );

    // A tool declared requires_approval is held by the engine; nothing is sent until the user
    // approves, and then the write goes out once, with the call's idempotency key.
    assert_eq!(
        h.send("send the report").await.status,
        InvocationStatus::Suspended
    );
    assert!(
        host.requests.lock().unwrap().is_empty(),
        "sent before approval"
    );
    let pending = h.engine.pending_calls().unwrap();
    assert_eq!(pending.len(), 1);
    let held = &pending[0];
    assert_eq!(held.tool, "send_report");
    let outcome = h
        .engine
        .decide(&held.call_id, Decision::Approve)
        .await
        .unwrap();
    assert_eq!(outcome.status, InvocationStatus::Completed);
    let requests = host.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    let (request, key) = &requests[0];
    assert_eq!(request.method, agent::HttpMethod::Post);
    assert_eq!(request.url, "https://hooks.test/report");
    assert_eq!(request.json, Some(json!({"text": "weekly"})));
    assert_eq!(
        key.as_deref(),
        Some(format!("{}:1", held.idempotency_key).as_str())
    );
    assert_eq!(
        h.last_responses(),
        vec![obj(json!({"output": r#"{"sent":true}"#}))]
    );
}

#[tokio::test]
async fn a_failing_after_callback_is_skipped_and_a_failing_tool_answers_with_its_traceback() {
    let broken = "def after_model_callback(callback_context, llm_response):\n    callback_context.set_variable('half_done', True)\n    raise RuntimeError('boom')\n";
    let counting = "def after_model_callback(callback_context, llm_response):\n    callback_context.set_variable('counted', True)\n";
    let divide = "def divide(n: int) -> int:\n    return 10 // n\n";
    let h = engine_with(
        &[
            ("a_broken.py", broken),
            ("b_counting.py", counting),
            ("divide.py", divide),
        ],
        vec![call("divide", json!({"n": 0})), say("Division failed.")],
        Arc::new(NoHost),
        json!({}),
    )
    .await;
    assert_eq!(
        h.send("divide by zero").await.status,
        InvocationStatus::Completed
    );

    // The tool's exception went to the model as FAILED, with the traceback and line.
    let responses = h.last_responses();
    assert_eq!(responses[0]["outcome"], "failed");
    let error = responses[0]["error"].as_str().unwrap();
    assert!(
        error.contains("File \"divide.py\", line 2, in divide"),
        "{error}"
    );
    assert!(
        error.contains("ZeroDivisionError: integer division or modulo by zero"),
        "{error}"
    );

    // The broken callback was skipped (its change dropped), the next one still ran, and the
    // failure was reported with its traceback and line.
    let state = h.state();
    assert_eq!(state.get("counted"), Some(&Value::Bool(true)));
    assert!(!state.contains_key("half_done"), "{state:?}");
    let reports = h.reports.all();
    let callback = reports
        .iter()
        .find(|r| r.file == "a_broken.py")
        .expect("the callback's failure is reported");
    assert_eq!(callback.function, "after_model_callback");
    assert_eq!(callback.line, Some(3));
    assert!(
        callback
            .error
            .as_deref()
            .unwrap()
            .contains("RuntimeError: boom")
    );
    assert!(
        reports
            .iter()
            .any(|r| r.file == "divide.py" && r.line == Some(2))
    );
}

#[tokio::test]
async fn tools_name_calls_the_agents_own_tools_and_writes_among_them_need_approval() {
    use agent::{AgentTool, Approval, FunctionTool, ToolReturn};
    let sent: Arc<Mutex<Vec<(Value, String)>>> = Arc::default();
    let list_events = FunctionTool::new(
        "list_events",
        "Lists the calendar's events.",
        json!({"type": "object"}),
        |_, _| ToolReturn::from(json!({"events": ["standup", "review"]})),
    );
    let recorded = sent.clone();
    let send_message = FunctionTool::new(
        "send_message",
        "Sends a message.",
        json!({"type": "object"}),
        move |args, ctx| {
            recorded
                .lock()
                .unwrap()
                .push((Value::Object(args), ctx.idempotency_key.clone()));
            ToolReturn::from(json!({"message_id": "om_1"}))
        },
    )
    .with_approval(Approval::Always);
    let tools: Vec<Arc<dyn AgentTool>> = vec![Arc::new(list_events), Arc::new(send_message)];
    let host = Arc::new(pysandbox::ToolsHost::new(tools));
    let agenda = r#"
def agenda() -> dict:
    events = tools.list_events({}).json()['events']
    refused = tools.send_message({'text': 'agenda: ' + ', '.join(events)})
    return {'events': events, 'send': [refused.status_code, refused.ok]}
"#;
    let announce = r#"
@tool(requires_approval=True)
def announce(text: str) -> dict:
    response = tools.send_message({'text': text})
    response.raise_for_status()
    return response.json()
"#;
    let h = engine_with(
        &[("agenda.py", agenda), ("announce.py", announce)],
        vec![
            call("agenda", json!({})),
            say("Two events today."),
            call("announce", json!({"text": "standup moved"})),
            say("Announced."),
        ],
        host,
        json!({}),
    )
    .await;
    assert_eq!(
        h.send("what's on?").await.status,
        InvocationStatus::Completed
    );
    assert_eq!(
        h.last_responses(),
        vec![obj(
            json!({"output": r#"{"events":["standup","review"],"send":[403,false]}"#})
        )]
    );
    assert!(
        sent.lock().unwrap().is_empty(),
        "an unapproved tool sent a message"
    );

    assert_eq!(
        h.send("announce it").await.status,
        InvocationStatus::Suspended
    );
    let held = h.engine.pending_calls().unwrap().remove(0);
    h.engine
        .decide(&held.call_id, Decision::Approve)
        .await
        .unwrap();
    assert_eq!(
        h.last_responses(),
        vec![obj(json!({"output": r#"{"message_id":"om_1"}"#}))]
    );
    let sent = sent.lock().unwrap().clone();
    assert_eq!(
        sent,
        [(
            json!({"text": "standup moved"}),
            format!("{}:1", held.idempotency_key)
        )],
        "sent once, with a key derived from the approved call's"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_slow_callback_does_not_hold_up_the_engines_other_work() {
    // One worker thread: if the callback held it, nothing else could run until it returned.
    let slow = "import time\n\ndef before_model_callback(callback_context, llm_request):\n    time.sleep(1.0)\n";
    let h = engine_with(
        &[("slow.py", slow)],
        vec![say("Hello.")],
        Arc::new(NoHost),
        json!({}),
    )
    .await;
    let started = std::time::Instant::now();
    let other = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        started.elapsed()
    });
    assert_eq!(h.send("hi").await.status, InvocationStatus::Completed);
    let turn = started.elapsed();
    let other = other.await.unwrap();
    assert!(
        turn >= std::time::Duration::from_secs(1),
        "the callback ran: {turn:?}"
    );
    assert!(
        other < std::time::Duration::from_millis(600),
        "other work waited for the callback: done after {other:?}, the turn after {turn:?}"
    );
}
