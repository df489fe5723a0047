//! Every code example of the seed (python-runtime-reference), run unchanged in the sandbox, doing
//! what the seed says it does; and the seed's classes, methods and globals, all present, speaking
//! the engine's JSON.
//!
//! The samples are copied byte for byte (the first test checks them against the seed when the
//! seed is at hand). Samples that are statements rather than functions are run as the body of a
//! function (indented, nothing else changed), and placeholders like `<TOOL_DISPLAY_NAME>` are
//! filled in; what a test adds to look at the results comes after the sample.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};

use agent::{
    Blob, CallbackContext, Content, CustomizedResponse, Event, ExternalResponse, LlmResponse, Part,
};
use async_trait::async_trait;
use common::{obj, run_tool, tool_context, tool_of};
use pysandbox::{
    CallbackKind, Host, HostCall, HttpRequest, PythonCallback, PythonModule, Reporter,
};
use serde_json::{Value, json};

const BLOB_SAMPLE: &str = r#"# Create a blob from raw bytes
blob = Blob(mime_type='text/plain')
blob.raw_data = b'hello world'

# Create a blob from a JSON string
Blob.from_json(data='{"key": "value"}')"#;

const LLM_RESPONSE_SAMPLE: &str = r#"response = LlmResponse.from_parts(
  parts=[
    Part.from_text(text="hello world")
  ]
)"#;

const PART_SAMPLE: &str = r#"text_part = ces_public.Part.from_text(text="Hello from the user!")

tool_part = ces_public.Part.from_function_call(
  name="get_weather",
  args={"location": "Mountain View"}
)"#;

const GET_VARIABLE_SAMPLE: &str = r#"def get_a_value() -> int:
  # Retrieve the value of 'my_key' from the state
  my_value = get_variable('my_key')
  return my_value + 5"#;

const REMOVE_VARIABLE_SAMPLE: &str = r#"def remove_a_value() -> None:
  # Delete 'my_key' from the state
  remove_variable('my_key')"#;

const SET_VARIABLE_SAMPLE: &str = r#"def set_a_value() -> None:
  # Set the value of 'my_key' to 10
  set_variable('my_key', 10)"#;

const SESSION_TOOL_SAMPLE: &str = r#"def check_order_status(order_id: str) -> str:
  # Resolve modality and channel from the session state
  session_vars = context.variables.get('_session', {})
  modality = session_vars.get('modality', 'TEXT')
  channel = session_vars.get('channel', 'API')

  status = get_raw_order_status(order_id)  # Internal API lookup

  if modality == 'VOICE':
    # Keep response concise and remove markdown/links for natural TTS playback
    return "Your order has shipped and is estimated to arrive tomorrow."
  else:
    # Rich text with markdown links for Chat/Web interfaces
    return f"Your order shipped [Track it](https://shipper.com/{order_id})."
"#;

const SESSION_CALLBACK_SAMPLE: &str = r#"def before_agent_callback(callback_context: CallbackContext) -> None:
  session_vars = callback_context.get_variable('_session', {})
  modality = session_vars.get('modality', 'TEXT')
  channel = session_vars.get('channel', 'API')
  callback_context.set_variable('active_modality', modality)"#;

const ASYNC_TOOLS_SAMPLE: &str = r#"response_future = async_tools.<TOOL_DISPLAY_NAME>(<ARGS_AS_DICT>)
# ... misc work
response = response_future() # poll for response

# Check if the tool call was successful
try:
  response.raise_for_status()
except StatusError:
  print(f"Request failed with status {response.status_code}")

# Convert the response to json
data = response.json()"#;

const CES_REQUESTS_SAMPLE: &str = r#"# Make a GET request
response = ces_requests.get('https://api.example.com/data')

# Check if the request was successful
try:
  response.raise_for_status()
except StatusError:
  print(f"Request failed with status {response.status_code}")

# Convert the response to json
data = response.json()"#;

const TOOLS_SAMPLE: &str = r#"response = tools.<TOOL_DISPLAY_NAME>(<ARGS_AS_DICT>)

# Check if the tool call was successful
try:
  response.raise_for_status()
except StatusError:
  print(f"Request failed with status {response.status_code}")

# Convert the response to json
data = response.json()"#;

/// The sample as the body of `def sample():`, then `tail` (also indented).
fn as_function(sample: &str, tail: &str) -> String {
    let mut source = String::from("def sample():\n");
    for line in sample.lines().chain(tail.lines()) {
        source.push_str("    ");
        source.push_str(line);
        source.push('\n');
    }
    source
}

/// Fills the seed's placeholders in.
fn fill(sample: &str, tool: &str, args: &str) -> String {
    sample
        .replace("<TOOL_DISPLAY_NAME>", tool)
        .replace("<ARGS_AS_DICT>", args)
}

#[test]
fn the_samples_here_are_the_seeds_own() {
    let seed = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/seeds/python-runtime-reference.zh-TW.txt");
    let Ok(seed) = std::fs::read_to_string(&seed) else {
        // The seed lives beside the repository (shared/), not in it; a checkout without it
        // still has the copies below to test.
        eprintln!(
            "seed not found at {}; skipping the comparison",
            seed.display()
        );
        return;
    };
    for sample in [
        BLOB_SAMPLE,
        LLM_RESPONSE_SAMPLE,
        PART_SAMPLE,
        GET_VARIABLE_SAMPLE,
        REMOVE_VARIABLE_SAMPLE,
        SET_VARIABLE_SAMPLE,
        SESSION_TOOL_SAMPLE,
        SESSION_CALLBACK_SAMPLE,
        ASYNC_TOOLS_SAMPLE,
        CES_REQUESTS_SAMPLE,
        TOOLS_SAMPLE,
    ] {
        assert!(seed.contains(sample), "not in the seed verbatim:\n{sample}");
    }
}

#[tokio::test]
async fn blob_samples_make_the_blobs_the_seed_describes() {
    let source = as_function(
        BLOB_SAMPLE,
        r#"from_json = Blob.from_json(data='{"key": "value"}')
assert blob.mime_type == 'text/plain' and blob.raw_data == b'hello world'
assert blob.data == b'aGVsbG8gd29ybGQ=', blob.data
assert from_json.mime_type == 'application/json'
assert from_json.raw_data == b'{"key": "value"}'
assert blob.transcript() is None
audio = Blob(mime_type='audio/wav', raw_data=b'..', transcript='hi there')
assert audio.transcript() == 'hi there'
return [blob, from_json, audio]"#,
    );
    let (run, _) = run_tool(&source, "sample", json!({}), json!({})).await;
    let blobs: Vec<Blob> = serde_json::from_value(run.unwrap().value).unwrap();
    assert_eq!(blobs[0], Blob::from_bytes(*b"hello world", "text/plain"));
    assert_eq!(blobs[1], Blob::from_json(r#"{"key": "value"}"#));
    assert_eq!(blobs[2].transcript(), Some("hi there"));
}

#[tokio::test]
async fn part_samples_and_constructors_match_the_engines_parts() {
    let source = as_function(
        PART_SAMPLE,
        r#"assert text_part.text == "Hello from the user!" and text_part.function_call is None
assert tool_part.has_function_call("get_weather") and not tool_part.has_function_call("x")
assert tool_part.function_call.args == {"location": "Mountain View"}
response = Part.from_function_response(name="get_weather", response={"output": "sunny"})
assert response.has_function_response("get_weather")
assert text_part.text_or_transcript() == "Hello from the user!"
audio = Part(inline_data=Blob(mime_type="audio/ogg", raw_data=b"..", transcript="spoken"))
assert audio.text_or_transcript() == "spoken"
try:
    Part(text="a", inline_data=Blob(mime_type="text/plain"))
    raise AssertionError("a Part with two fields was accepted")
except ValueError as e:
    assert "only one field" in str(e)
return [
    text_part,
    tool_part,
    response,
    Part.from_inline_data(data=b"\x00\x01", mime_type="image/png"),
    Part.from_json(data='{"a": 1}'),
    Part.from_agent_transfer(agent="calendar_agent"),
    Part.from_end_session(reason="done", escalated=True),
    Part.from_customized_response(content="Press 1", enable_dtmf=True),
]"#,
    );
    let (run, _) = run_tool(&source, "sample", json!({}), json!({})).await;
    let parts: Vec<Part> = serde_json::from_value(run.unwrap().value).unwrap();
    let mut dtmf = CustomizedResponse::new("Press 1");
    dtmf.enable_dtmf = true;
    assert_eq!(
        parts,
        vec![
            Part::from_text("Hello from the user!"),
            Part::from_function_call("get_weather", obj(json!({"location": "Mountain View"}))),
            Part::from_function_response("get_weather", obj(json!({"output": "sunny"}))),
            Part::from_inline_data(vec![0u8, 1], "image/png"),
            Part::from_json(r#"{"a": 1}"#),
            Part::from_agent_transfer("calendar_agent"),
            Part::from_end_session("done", true),
            Part::from_customized_response(dtmf),
        ]
    );
}

#[tokio::test]
async fn llm_response_from_parts_sample_is_a_model_response() {
    let source = as_function(
        LLM_RESPONSE_SAMPLE,
        "assert response.content.is_model() and not response.content.is_user()\nreturn response",
    );
    let (run, _) = run_tool(&source, "sample", json!({}), json!({})).await;
    let response: LlmResponse = serde_json::from_value(run.unwrap().value).unwrap();
    assert_eq!(
        response,
        LlmResponse::from_parts(vec![Part::from_text("hello world")])
    );
}

#[tokio::test]
async fn variable_examples_read_set_and_remove_state_as_a_delta() {
    let (run, ctx) = run_tool(
        GET_VARIABLE_SAMPLE,
        "get_a_value",
        json!({}),
        json!({"my_key": 37}),
    )
    .await;
    assert_eq!(run.unwrap().value, json!(42));
    assert!(ctx.state_delta().is_empty(), "reading changes nothing");

    let (run, ctx) = run_tool(
        SET_VARIABLE_SAMPLE,
        "set_a_value",
        json!({}),
        json!({"other": 1}),
    )
    .await;
    assert_eq!(run.unwrap().value, Value::Null);
    assert_eq!(ctx.state_delta(), &obj(json!({"my_key": 10})));
    assert_eq!(ctx.get_variable("my_key", json!(0)), json!(10));

    let (run, ctx) = run_tool(
        REMOVE_VARIABLE_SAMPLE,
        "remove_a_value",
        json!({}),
        json!({"my_key": 10, "kept": true}),
    )
    .await;
    run.unwrap();
    assert_eq!(
        ctx.state_delta(),
        &obj(json!({"my_key": null})),
        "null marks a removal"
    );
    assert_eq!(ctx.variables(), &obj(json!({"kept": true})));

    // `context.state` and `context.variables` are one dict, and the shortcuts work on it.
    let source = "def same() -> list:\n    context.state['a'] = 1\n    context.variables['b'] = 2\n    del context.state['gone']\n    return [context.state is context.variables, get_variable('a'), get_variable('nope', 'dflt'), sorted(context.variables)]\n";
    let (run, ctx) = run_tool(source, "same", json!({}), json!({"gone": 0})).await;
    assert_eq!(
        run.unwrap().value,
        json!([true, 1, "dflt", ["_session", "a", "b"]]),
        "the seed's `_session` is among the variables"
    );
    assert_eq!(
        ctx.state_delta(),
        &obj(json!({"a": 1, "b": 2, "gone": null}))
    );
}

#[tokio::test]
async fn session_tool_example_answers_by_modality() {
    // The seed's example calls an internal lookup it does not show; the test supplies one.
    let source =
        format!("{SESSION_TOOL_SAMPLE}\ndef get_raw_order_status(order_id):\n  return 'shipped'\n");
    let voice = json!({"_session": {"modality": "VOICE", "channel": "PHONE"}});
    let (run, _) = run_tool(
        &source,
        "check_order_status",
        json!({"order_id": "A7"}),
        voice,
    )
    .await;
    assert_eq!(
        run.unwrap().value,
        json!("Your order has shipped and is estimated to arrive tomorrow.")
    );
    // Without `_session` the defaults apply: TEXT over the API.
    let (run, _) = run_tool(
        &source,
        "check_order_status",
        json!({"order_id": "A7"}),
        json!({}),
    )
    .await;
    assert_eq!(
        run.unwrap().value,
        json!("Your order shipped [Track it](https://shipper.com/A7).")
    );
    // `_session` is also a predefined global.
    let probe = "def probe() -> dict:\n    return _session\n";
    let state = json!({"_session": {"modality": "VOICE"}});
    let (run, _) = run_tool(probe, "probe", json!({}), state).await;
    assert_eq!(
        run.unwrap().value,
        json!({"modality": "VOICE", "channel": "API"})
    );
}

#[tokio::test]
async fn session_callback_example_records_the_modality_in_state() {
    let sandbox = common::sandbox();
    let module = PythonModule::load(&sandbox, "session.py", SESSION_CALLBACK_SAMPLE)
        .await
        .unwrap();
    assert_eq!(module.callbacks(), [CallbackKind::BeforeAgent]);
    assert!(module.tools().is_empty(), "a callback is not a tool");
    let callback = PythonCallback::new(
        Arc::new(module),
        CallbackKind::BeforeAgent,
        sandbox,
        Arc::new(pysandbox::NoHost),
        Reporter::default(),
    );
    let state = obj(json!({"_session": {"modality": "VOICE", "channel": "API"}}));
    let mut ctx = CallbackContext::new("inv", "assistant", "s1", state, Arc::default());
    // The callback runs synchronously, as the engine calls it from inside its runtime.
    let skip = callback.run_agent(&mut ctx);
    assert_eq!(skip, None, "returning None lets the agent run");
    assert_eq!(ctx.state_delta(), &obj(json!({"active_modality": "VOICE"})));
}

/// Tools and HTTP as a test double: records every call, answers from a script.
#[derive(Default)]
struct FakeHost {
    calls: Mutex<Vec<(String, Value, Option<String>)>>,
}

#[async_trait]
impl Host for FakeHost {
    async fn call_tool(
        &self,
        name: &str,
        args: serde_json::Map<String, Value>,
        call: &HostCall,
    ) -> ExternalResponse {
        self.calls.lock().unwrap().push((
            format!("tool {name}"),
            Value::Object(args.clone()),
            call.idempotency_key.clone(),
        ));
        match name {
            "get_weather" => ExternalResponse::new(
                200,
                json!({"location": args["location"], "temp_c": 21}).to_string(),
            ),
            _ => {
                ExternalResponse::new(404, r#"{"error": "no such tool"}"#).with_reason("Not Found")
            }
        }
    }

    async fn http(&self, request: HttpRequest, call: &HostCall) -> ExternalResponse {
        self.calls.lock().unwrap().push((
            format!("{} {}", request.method, request.url),
            serde_json::to_value(&request).unwrap(),
            call.idempotency_key.clone(),
        ));
        if request.url == "https://api.example.com/data" {
            ExternalResponse::new(200, r#"{"items": [1, 2, 3]}"#)
        } else {
            ExternalResponse::new(404, r#"{"error": "not found"}"#).with_reason("Not Found")
        }
    }
}

impl FakeHost {
    fn calls(&self) -> Vec<(String, Value, Option<String>)> {
        self.calls.lock().unwrap().clone()
    }
}

/// Runs `source`'s `sample` against `host`.
async fn run_with_host(source: &str, host: Arc<FakeHost>) -> pysandbox::ToolRun {
    let tool = tool_of("sample.py", source, "sample", host).await;
    let mut ctx = tool_context(json!({}));
    tool.invoke(serde_json::Map::new(), &mut ctx).await.unwrap()
}

const REPORT: &str = "return {'status': response.status_code, 'ok': response.ok, 'data': data}";

#[tokio::test]
async fn tools_sample_calls_a_tool_and_reads_its_json() {
    let host = Arc::new(FakeHost::default());
    let source = as_function(
        &fill(
            TOOLS_SAMPLE,
            "get_weather",
            r#"{"location": "Mountain View"}"#,
        ),
        REPORT,
    );
    let run = run_with_host(&source, host.clone()).await;
    assert_eq!(
        run.value,
        json!({"status": 200, "ok": true, "data": {"location": "Mountain View", "temp_c": 21}})
    );
    assert_eq!(run.stdout, "", "a successful call prints nothing");
    assert_eq!(host.calls()[0].0, "tool get_weather");
    assert_eq!(host.calls()[0].1, json!({"location": "Mountain View"}));

    // A failing tool: raise_for_status raises StatusError, and the sample prints the status.
    let source = as_function(&fill(TOOLS_SAMPLE, "no_such_tool", "{}"), REPORT);
    let run = run_with_host(&source, host).await;
    assert_eq!(
        run.value,
        json!({"status": 404, "ok": false, "data": {"error": "no such tool"}})
    );
    assert_eq!(run.stdout, "Request failed with status 404\n");
}

#[tokio::test]
async fn async_tools_sample_starts_a_call_and_polls_its_future() {
    let host = Arc::new(FakeHost::default());
    let source = as_function(
        &fill(
            ASYNC_TOOLS_SAMPLE,
            "get_weather",
            r#"{"location": "Beijing"}"#,
        ),
        "assert callable(response_future) and response_future() is response\nreturn {'status': response.status_code, 'ok': response.ok, 'data': data}",
    );
    let run = run_with_host(&source, host.clone()).await;
    assert_eq!(
        run.value,
        json!({"status": 200, "ok": true, "data": {"location": "Beijing", "temp_c": 21}})
    );
    // Two calls in flight at once: both start before either is waited for.
    let source = "def sample():\n    a = async_tools.get_weather({'location': 'A'})\n    b = async_tools.get_weather({'location': 'B'})\n    return [b().json()['location'], a().json()['location']]\n";
    assert_eq!(run_with_host(source, host).await.value, json!(["B", "A"]));
}

#[tokio::test]
async fn ces_requests_sample_gets_through_the_host_and_writes_need_approval() {
    let host = Arc::new(FakeHost::default());
    let source = as_function(CES_REQUESTS_SAMPLE, REPORT);
    let run = run_with_host(&source, host.clone()).await;
    assert_eq!(
        run.value,
        json!({"status": 200, "ok": true, "data": {"items": [1, 2, 3]}})
    );
    assert_eq!(host.calls()[0].0, "GET https://api.example.com/data");

    // Every method of Requests; the reads reach the host, the writes of a tool that was not
    // declared requires_approval are refused before it.
    let source = r#"def sample():
    out = {}
    out['get'] = ces_requests.get('https://h.test/a', params={'q': 1}, headers={'X-A': 'b'}).status_code
    out['head'] = ces_requests.head('https://h.test/a').status_code
    out['options'] = ces_requests.options('https://h.test/a').status_code
    for name in ('post', 'put', 'patch', 'delete'):
        r = getattr(ces_requests, name)('https://h.test/w')
        try:
            r.raise_for_status()
        except StatusError as e:
            out[name] = [e.status_code, e.reason, 'requires_approval' in r.text]
    return out
"#;
    let host = Arc::new(FakeHost::default());
    let run = run_with_host(source, host.clone()).await;
    assert_eq!(
        run.value,
        json!({
            "get": 404, "head": 404, "options": 404,
            "post": [403, "Forbidden", true], "put": [403, "Forbidden", true],
            "patch": [403, "Forbidden", true], "delete": [403, "Forbidden", true],
        })
    );
    let seen: Vec<String> = host.calls().into_iter().map(|c| c.0).collect();
    assert_eq!(
        seen,
        [
            "GET https://h.test/a",
            "HEAD https://h.test/a",
            "OPTIONS https://h.test/a"
        ],
        "a refused write never reaches the host"
    );
    assert_eq!(host.calls()[0].1["params"], json!({"q": "1"}));
    assert_eq!(host.calls()[0].1["headers"], json!({"X-A": "b"}));
}

#[tokio::test]
async fn every_class_member_function_and_global_of_the_seed_is_there() {
    // Each documented name, by class, from the seed's tables.
    let source = r#"
DOCUMENTED = {
    'AsyncTools': [],
    'Blob': ['display_name', 'data', 'raw_data', 'mime_type', 'transcript', 'from_json'],
    'CallbackContext': ['user_content', 'invocation_id', 'agent_name', 'session_id', 'variables',
        'state', 'events', 'get_variable', 'set_variable', 'remove_variable',
        'get_last_user_input', 'get_last_agent_output', 'parts'],
    'Content': ['parts', 'role', 'is_user', 'is_model'],
    'Event': ['id', 'invocation_id', 'author', 'timestamp', 'content', 'actions',
        'long_running_tool_ids', 'partial', 'turn_complete', 'error_code', 'error_message',
        'interrupted', 'branch', 'grounding_metadata', 'is_user', 'is_agent', 'has_error', 'parts'],
    'EventActions': ['skip_summarization', 'state_delta', 'artifact_delta', 'transfer_to_agent',
        'escalate', 'requested_auth_configs', 'end_invocation'],
    'ExternalResponse': ['text', 'status_code', 'reason', 'ok', 'json', 'raise_for_status'],
    'FunctionCall': ['id', 'args', 'name'],
    'FunctionDeclaration': ['name'],
    'FunctionResponse': ['id', 'name', 'response'],
    'GenerateContentConfig': ['system_instruction', 'tools', 'excluded_tools', 'hide_tool'],
    'HttpMethod': ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS'],
    'LlmRequest': ['model', 'contents', 'config'],
    'LlmResponse': ['content', 'partial', 'from_parts'],
    'Part': ['function_call', 'function_response', 'text', 'inline_data', 'text_or_transcript',
        'has_function_call', 'has_function_response', 'from_text', 'from_function_call',
        'from_function_response', 'from_inline_data', 'from_json', 'from_agent_transfer',
        'from_end_session', 'from_customized_response'],
    'Requests': ['get', 'post', 'put', 'delete', 'patch', 'head', 'options'],
    'StatusError': ['status_code', 'reason'],
    'Tool': ['name', 'description'],
    'ToolContext': ['function_call_id', 'get_variable', 'state', 'variables', 'events'],
    'Tools': [],
    'ToolDeclaration': ['function_declarations'],
}
INSTANCES = {
    'Blob': lambda: Blob(), 'CallbackContext': lambda: CallbackContext(),
    'Content': lambda: Content(), 'Event': lambda: Event(), 'EventActions': lambda: EventActions(),
    'ExternalResponse': lambda: ExternalResponse(), 'FunctionCall': lambda: FunctionCall(),
    'FunctionDeclaration': lambda: FunctionDeclaration(),
    'FunctionResponse': lambda: FunctionResponse(),
    'GenerateContentConfig': lambda: GenerateContentConfig(), 'LlmRequest': lambda: LlmRequest(),
    'LlmResponse': lambda: LlmResponse(), 'Part': lambda: Part(text='x'),
    'StatusError': lambda: StatusError(500, 'x'), 'Tool': lambda: Tool(),
    'ToolContext': lambda: ToolContext(), 'ToolDeclaration': lambda: ToolDeclaration(),
    'Requests': lambda: ces_requests,
}

def sample() -> list:
    missing = []
    g = globals()
    for cls, members in DOCUMENTED.items():
        if cls not in g or getattr(ces_public, cls, None) is not g[cls]:
            missing.append(cls)
            continue
        make = INSTANCES.get(cls)
        target = make() if make else g[cls]
        for m in members:
            if not hasattr(target, m):
                missing.append(f'{cls}.{m}')
    for name in ('get_variable', 'set_variable', 'remove_variable'):
        if not callable(g.get(name)):
            missing.append(name)
    for name, cls in (('tools', 'Tools'), ('async_tools', 'AsyncTools'),
                      ('ces_requests', 'Requests'), ('context', 'ToolContext')):
        if not isinstance(g.get(name), g[cls]):
            missing.append(name)
    if not isinstance(g.get('_session'), dict):
        missing.append('_session')
    if not issubclass(StatusError, Exception) or not issubclass(ToolContext, CallbackContext):
        missing.append('class hierarchy')
    # "This environment runs Python 3.12." (sys is not importable; random's own os module is.)
    import random
    if tuple(random._os.sys.version_info[:2]) != (3, 12):
        missing.append(f'Python 3.12, not {random._os.sys.version}')
    return missing
"#;
    let (run, _) = run_tool(source, "sample", json!({}), json!({})).await;
    assert_eq!(run.unwrap().value, json!([]), "missing from the runtime");
}

#[tokio::test]
async fn contexts_events_and_responses_behave_as_documented() {
    // The session's history, as the engine would hand it over.
    let mut user = Event::new("inv-1", "user").with_content(Content::user_text("hi"));
    user.timestamp = 1;
    let mut more = Event::new("inv-1", "user").with_content(Content::user_text("again"));
    more.timestamp = 2;
    let mut chunk = Event::new("inv-1", "assistant").with_content(Content::model_text("hel"));
    chunk.partial = true;
    let mut answer = Event::new("inv-1", "assistant").with_content(Content::model_text("hello"));
    answer.error_code = Some("E1".to_owned());
    answer.branch = Some("assistant.helper".to_owned());
    let events = Arc::new(vec![user, more, chunk, answer]);
    let source = r#"
def sample(tool_context: ToolContext) -> dict:
    ctx = tool_context
    assert ctx is context and ctx.function_call_id == 'call-1'
    assert ctx.invocation_id == 'inv-1' and ctx.agent_name == 'assistant' and ctx.session_id == 's1'
    assert ctx.user_content.is_user() and ctx.user_content.parts[0].text == 'again'
    events = ctx.events
    assert [e.author for e in events] == ['user', 'user', 'assistant', 'assistant']
    assert events[0].is_user() and not events[0].is_agent()
    assert events[3].is_agent() and events[3].is_agent('assistant') and not events[3].is_agent('x')
    assert events[3].has_error() and not events[0].has_error() and events[2].partial
    assert events[3].branch == 'assistant.helper' and events[3].parts()[0].text == 'hello'
    assert Event().parts() == []
    ctx.actions.skip_summarization = True
    ctx.actions.transfer_to_agent = 'helper'
    r = ExternalResponse(text='{"a": [1]}', status_code=399)
    assert r.ok and r.json() == {'a': [1]}
    bad = ExternalResponse(text='<html>', status_code=400, reason='Bad Request')
    assert not bad.ok
    try:
        bad.raise_for_status()
        raise AssertionError('no StatusError')
    except StatusError as e:
        assert e.status_code == 400 and e.reason == 'Bad Request'
    try:
        bad.json()
        raise AssertionError('parsed <html>')
    except ValueError:
        pass
    config = GenerateContentConfig(tools=[ToolDeclaration(function_declarations=[FunctionDeclaration(name='send')])])
    config.hide_tool('send')
    config.hide_tool('send')
    assert config.excluded_tools == ['send']
    assert HttpMethod.POST == 'POST' and HttpMethod('GET') is HttpMethod.GET
    return {
        'user': [p.text for p in ctx.get_last_user_input()],
        'agent': [p.text for p in ctx.get_last_agent_output()],
        'all': [p.text for p in ctx.parts()],
    }
"#;
    let tool = tool_of("sample.py", source, "sample", Arc::new(pysandbox::NoHost)).await;
    assert_eq!(
        tool.spec().parameters,
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
        "the context parameter is not an argument"
    );
    let ctx = CallbackContext::new("inv-1", "assistant", "s1", Default::default(), events);
    let mut ctx = agent::ToolContext::new(ctx, "call-1");
    let run = tool.invoke(serde_json::Map::new(), &mut ctx).await.unwrap();
    assert_eq!(
        run.value,
        json!({"user": ["hi", "again"], "agent": ["hello"], "all": ["hi", "again", "hello"]}),
        "partial chunks are left out"
    );
    assert!(ctx.actions.skip_summarization);
    assert_eq!(ctx.actions.transfer_to_agent.as_deref(), Some("helper"));
}
