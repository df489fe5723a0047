//! Code written straight from the seed (python-runtime-reference) by someone who has read only
//! the seed: each case here broke once, and each test says what it does now.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use agent::{AgentTool, ExternalResponse, InvocationStatus, ToolContext};
use async_trait::async_trait;
use common::{call, engine_with, run_tool, say, tool_context, tool_of};
use pysandbox::{
    Host, HostCall, HttpRequest, LoadError, NoHost, PythonExtensions, PythonModule, PythonTool,
    Reporter, SandboxError,
};
use serde_json::{Map, Value, json};

/// The Python error of a failed run, or a panic naming what happened instead.
fn python_error(result: Result<pysandbox::ToolRun, SandboxError>) -> pysandbox::PythonError {
    match result {
        Err(SandboxError::Python(e)) => e,
        other => panic!("expected a Python error, got {other:?}"),
    }
}

// ------------------------------------------------------------------------------------------
// Schemas

#[tokio::test]
async fn optional_parameters_take_null_and_defaults_lists_and_literals_map_to_json_schema() {
    let source = r#"
from typing import Literal, Optional

def find(
    query: str,
    limit: Optional[int] = None,
    tags: list[str] | None = None,
    owner: str = None,
    mode: Literal['any', 'all'] = 'any',
    kind: Literal['doc', 'sheet', None] = None,
    weights: dict[str, float] = {},
    pair: tuple[str, int] = ('a', 1),
    page: int = 1,
) -> dict:
    """Finds documents."""
    return {'query': query, 'limit': limit, 'tags': tags, 'owner': owner, 'kind': kind}
"#;
    let module = PythonModule::load(&common::sandbox(), "find.py", source)
        .await
        .unwrap();
    assert_eq!(
        module.tools()[0].parameters,
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null},
                "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}], "default": null},
                "owner": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null},
                "mode": {"enum": ["any", "all"], "type": "string", "default": "any"},
                "kind": {"enum": ["doc", "sheet", null], "type": ["string", "null"], "default": null},
                "weights": {"type": "object", "additionalProperties": {"type": "number"}, "default": {}},
                "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "minItems": 2, "maxItems": 2, "default": ["a", 1]},
                "page": {"type": "integer", "default": 1}
            },
            "required": ["query"],
            "additionalProperties": false
        })
    );

    // A model sending null for the optional parameters gets an answer, not a schema error.
    let h = engine_with(
        &[("find.py", source)],
        vec![
            call(
                "find",
                json!({"query": "plans", "limit": null, "tags": null, "owner": null, "kind": null}),
            ),
            say("Found them."),
        ],
        Arc::new(NoHost),
        json!({}),
    )
    .await;
    assert_eq!(
        h.send("find plans").await.status,
        InvocationStatus::Completed
    );
    let output = h.last_responses()[0]["output"].clone();
    assert_eq!(
        serde_json::from_str::<Value>(output.as_str().unwrap()).unwrap(),
        json!({"query": "plans", "limit": null, "tags": null, "owner": null, "kind": null})
    );
}

// ------------------------------------------------------------------------------------------
// Files that declare nothing

#[tokio::test]
async fn a_file_of_plain_functions_says_it_declares_nothing_and_how_to_mark_a_tool() {
    let plain = r#"
def check_order_status(order_id: str) -> str:
    return "shipped"

def _helper():
    pass
"#;
    let loaded = PythonExtensions::load_sources(
        &common::sandbox(),
        [
            ("orders.py".to_owned(), plain.to_owned()),
            ("empty.py".to_owned(), "X = 1\n".to_owned()),
        ],
        Arc::new(NoHost),
        Reporter::default(),
    )
    .await;
    assert!(loaded.tools.is_empty() && loaded.callbacks.is_empty());
    let messages: Vec<String> = loaded.errors.iter().map(ToString::to_string).collect();
    assert!(
        matches!(&loaded.errors[0], LoadError::NothingDeclared { file, functions }
            if file == "orders.py" && functions == &["check_order_status".to_owned()]),
        "{messages:?}"
    );
    assert!(
        messages[0].contains("def orders(...)")
            && messages[0].contains("It defines check_order_status: put @tool"),
        "{}",
        messages[0]
    );
    assert!(
        messages[1].starts_with("empty.py declares no tools or callbacks")
            && !messages[1].contains("It defines"),
        "{}",
        messages[1]
    );
}

// ------------------------------------------------------------------------------------------
// Imports

#[tokio::test]
async fn future_annotations_logging_sys_asyncio_and_zoneinfo_import() {
    let source = r#"
from __future__ import annotations

import asyncio
import logging
import sys
from datetime import datetime
from typing import Optional
from zoneinfo import ZoneInfo

log = logging.getLogger("mine")

async def _twice(x):
    await asyncio.sleep(0)
    return x * 2

def probe(when: Optional[str] = None) -> dict:
    log.warning("probing %s", when)
    noon = datetime(2026, 6, 1, 12, tzinfo=ZoneInfo("Asia/Shanghai"))
    return {
        "version": list(sys.version_info[:2]),
        "has_modules": hasattr(sys, "modules"),
        "offset_h": noon.utcoffset().total_seconds() / 3600,
        "gathered": asyncio.run(_gather()),
    }

async def _gather():
    return list(await asyncio.gather(_twice(1), _twice(2)))
"#;
    let module = PythonModule::load(&common::sandbox(), "probe.py", source)
        .await
        .unwrap();
    assert_eq!(
        module.tools()[0].parameters["properties"]["when"],
        json!({"anyOf": [{"type": "string"}, {"type": "null"}], "default": null}),
        "string annotations are resolved"
    );
    let (result, _) = run_tool(source, "probe", json!({"when": "now"}), json!({})).await;
    let run = result.unwrap();
    assert_eq!(
        run.value,
        json!({"version": [3, 12], "has_modules": false, "offset_h": 8.0, "gathered": [2, 4]})
    );
    assert!(run.stderr.contains("probing now"), "{}", run.stderr);
}

#[tokio::test]
async fn refused_imports_say_why() {
    for (module, why) in [
        ("os", "no file system"),
        ("socket", "make HTTP calls with ces_requests"),
        ("subprocess", "cannot start programs"),
        ("requests", "ces_requests"),
        ("numpy", "not part of the sandbox"),
    ] {
        let source = format!("def imp():\n    import {module}\n");
        let (result, _) = run_tool(&source, "imp", json!({}), json!({})).await;
        let error = python_error(result);
        assert_eq!(error.type_name, "ImportError");
        assert_eq!(error.line, Some(2));
        assert!(
            error.message.contains(why) && error.message.contains("Available modules"),
            "{module}: {}",
            error.message
        );
    }
}

// ------------------------------------------------------------------------------------------
// Values JSON cannot carry

#[tokio::test]
async fn values_json_cannot_carry_fail_at_the_users_return_line() {
    for (expr, says) in [
        ("float('nan')", "nan has no JSON form"),
        ("{'x': float('inf')}", "inf has no JSON form"),
        ("2 ** 70", "does not fit in 64 bits"),
        ("-(2 ** 63) - 1", "does not fit in 64 bits"),
        ("10 ** 5000", "an integer of 16610 bits"),
        ("'ok \\ud800'", "lone surrogate"),
        ("deep(200)", "nested deeper than 100 levels"),
    ] {
        let source = format!(
            "def deep(n):\n    v = []\n    for _ in range(n):\n        v = [v]\n    return v\n\ndef value():\n    x = 1\n    return {expr}\n"
        );
        let (result, _) = run_tool(&source, "value", json!({}), json!({})).await;
        let error = python_error(result);
        assert_eq!(error.line, Some(9), "{expr}: {error:?}");
        assert!(error.message.contains(says), "{expr}: {}", error.message);
        assert!(
            error.traceback.contains("line 9, in value") && error.traceback.contains("return"),
            "{expr}: {}",
            error.traceback
        );
    }
}

#[tokio::test]
async fn integers_up_to_64_bits_and_deep_but_legal_values_round_trip() {
    let source = "def value():\n    v = 'end'\n    for _ in range(90):\n        v = [v]\n    return {'max': 2 ** 64 - 1, 'min': -(2 ** 63), 'deep': v}\n";
    let (result, _) = run_tool(source, "value", json!({}), json!({})).await;
    let value = result.unwrap().value;
    assert_eq!(value["max"], json!(u64::MAX));
    assert_eq!(value["min"], json!(i64::MIN));
    assert!(value["max"].is_u64(), "stays an integer, not a float");
}

#[tokio::test]
async fn an_exception_whose_message_holds_a_lone_surrogate_keeps_its_traceback() {
    let source = "def value():\n    raise ValueError('bad \\ud800 char')\n";
    let (result, _) = run_tool(source, "value", json!({}), json!({})).await;
    let error = python_error(result);
    assert_eq!(
        (error.type_name.as_str(), error.line),
        ("ValueError", Some(2))
    );
    assert!(
        error.traceback.contains("line 2, in value"),
        "{}",
        error.traceback
    );
}

// ------------------------------------------------------------------------------------------
// Nesting through tools.NAME

/// A host whose tools are set after the tools are built (they need the host themselves).
#[derive(Default)]
struct LateTools(OnceLock<Vec<Arc<dyn AgentTool>>>);

#[async_trait]
impl Host for LateTools {
    async fn call_tool(
        &self,
        name: &str,
        args: Map<String, Value>,
        call: &HostCall,
    ) -> ExternalResponse {
        let tools = self.0.get().expect("tools set");
        let tool = tools.iter().find(|t| t.name() == name).expect("known tool");
        let mut ctx = ToolContext::new(call.context.clone(), "nested");
        let (text, is_error, _) = agent::coerce_tool_result(tool.run(args, &mut ctx).await);
        ExternalResponse::new(if is_error { 500 } else { 200 }, text)
    }
}

async fn tools_over(files: &[(&str, &str)]) -> (Arc<LateTools>, Vec<Arc<PythonTool>>) {
    let host = Arc::new(LateTools::default());
    let loaded = PythonExtensions::load_sources(
        &common::sandbox(),
        files
            .iter()
            .map(|(f, s)| ((*f).to_owned(), (*s).to_owned())),
        host.clone(),
        Reporter::default(),
    )
    .await;
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let tools: Vec<Arc<dyn AgentTool>> = loaded
        .tools
        .iter()
        .map(|t| t.clone() as Arc<dyn AgentTool>)
        .collect();
    assert!(host.0.set(tools).is_ok());
    (host, loaded.tools)
}

#[tokio::test]
async fn a_tool_calling_itself_stops_at_the_nesting_bound_and_other_tools_still_run() {
    let recurse = "def recurse(n: int = 0) -> dict:\n    r = tools.recurse({'n': n + 1})\n    return {'n': n, 'below': r.status_code, 'text': r.text if not r.ok else r.json()}\n";
    let other = "def other() -> str:\n    return 'fine'\n";
    let (_host, tools) = tools_over(&[("recurse.py", recurse), ("other.py", other)]).await;
    let mut ctx = tool_context(json!({}));
    let run = tools[0].invoke(Map::new(), &mut ctx).await.unwrap();
    // Depth 0 → 1 → 2 → 3 run; the call from depth 3 is refused and says why.
    let mut level = &run.value;
    for n in 0..3 {
        assert_eq!(
            (level["n"].clone(), level["below"].clone()),
            (json!(n), json!(200)),
            "{run:?}"
        );
        level = &level["text"];
    }
    assert_eq!(level["n"], json!(3));
    assert_eq!(level["below"], json!(500));
    assert!(
        level["text"]
            .as_str()
            .unwrap()
            .contains("may nest only 3 deep"),
        "{level}"
    );
    let mut ctx = tool_context(json!({}));
    assert_eq!(
        tools[1].invoke(Map::new(), &mut ctx).await.unwrap().value,
        json!("fine")
    );
}

#[tokio::test]
async fn nested_calls_leave_instance_slots_for_the_engines_own_calls() {
    // 40 nested calls at once, each holding its instance for a while: nested calls may take
    // only 24 of the 32 slots, so a call the engine makes meanwhile still gets one.
    let fan = "def fan() -> list:\n    started = [async_tools.leaf({}) for _ in range(40)]\n    return sorted(set(f().status_code for f in started))\n";
    let leaf = "import time\n\ndef leaf() -> str:\n    time.sleep(0.4)\n    return 'leaf'\n";
    let other = "def other() -> str:\n    return 'fine'\n";
    let (_host, tools) =
        tools_over(&[("fan.py", fan), ("leaf.py", leaf), ("other.py", other)]).await;
    let fan_tool = tools[0].clone();
    let fanning = tokio::spawn(async move {
        let mut ctx = tool_context(json!({}));
        fan_tool.invoke(Map::new(), &mut ctx).await
    });
    tokio::time::sleep(Duration::from_millis(250)).await;
    let mut ctx = tool_context(json!({}));
    let other = tools[2].invoke(Map::new(), &mut ctx).await;
    assert_eq!(other.unwrap().value, json!("fine"));
    let fanned = fanning.await.unwrap().unwrap();
    assert_eq!(
        fanned.value,
        json!([200, 500]),
        "some leaves ran, the rest were refused"
    );
}

// ------------------------------------------------------------------------------------------
// Guards fail closed

#[tokio::test]
async fn a_failing_before_tool_callback_blocks_the_tool_and_a_failing_before_model_one_the_model() {
    let guard = "def before_tool_callback(tool, input, callback_context):\n    raise RuntimeError('cannot check')\n";
    let sender = "def send() -> str:\n    set_variable('sent', True)\n    return 'sent'\n";
    let h = engine_with(
        &[("guard.py", guard), ("send.py", sender)],
        vec![call("send", json!({})), say("Done.")],
        Arc::new(NoHost),
        json!({}),
    )
    .await;
    assert_eq!(h.send("send it").await.status, InvocationStatus::Completed);
    let response = &h.last_responses()[0];
    assert_eq!(response["outcome"], "blocked", "{response:?}");
    assert!(
        Value::Object(response.clone())
            .to_string()
            .contains("before_tool_callback in guard.py failed, so the tool was not run"),
        "{response:?}"
    );
    assert!(!h.state().contains_key("sent"), "the tool did not run");

    let model_guard =
        "def before_model_callback(callback_context, llm_request):\n    return 1 / 0\n";
    let h = engine_with(
        &[("model_guard.py", model_guard)],
        vec![say("The model was called.")],
        Arc::new(NoHost),
        json!({}),
    )
    .await;
    assert_eq!(h.send("hello").await.status, InvocationStatus::Completed);
    assert!(h.model.requests().is_empty(), "the model was not called");
    let said: String = h
        .events()
        .iter()
        .filter(|e| e.author != "user")
        .filter_map(|e| e.content.as_ref())
        .flat_map(|c| c.parts.iter())
        .filter_map(|p| p.text().map(str::to_owned))
        .collect();
    assert!(
        said.contains(
            "before_model_callback in model_guard.py failed, so the model was not called"
        ) && said.contains("ZeroDivisionError"),
        "{said}"
    );
}

// ------------------------------------------------------------------------------------------
// Size of return values

#[tokio::test]
async fn a_huge_return_value_is_cut_and_says_so() {
    let source = "def big() -> str:\n    return 'x' * 3_000_000\n";
    let tool = tool_of("big.py", source, "big", Arc::new(NoHost)).await;
    let mut ctx = tool_context(json!({}));
    let value = tool.invoke(Map::new(), &mut ctx).await.unwrap().value;
    let text = value.as_str().unwrap();
    let limit = common::sandbox().limits().value_bytes;
    assert!(text.len() < limit + 200, "{}", text.len());
    assert!(
        text.ends_with("[cut: the value was 3000000 bytes; only the first 262144 are kept, the limit of what a Python tool or callback returns]"),
        "{}",
        &text[text.len() - 200..]
    );
    let nested = "def big() -> dict:\n    return {'rows': ['y' * 1000] * 1000}\n";
    let tool = tool_of("big.py", nested, "big", Arc::new(NoHost)).await;
    let mut ctx = tool_context(json!({}));
    let value = tool.invoke(Map::new(), &mut ctx).await.unwrap().value;
    assert!(
        value.as_str().unwrap().starts_with("{\"rows\":[\"yyy"),
        "structured values are cut as their JSON text"
    );
}

// ------------------------------------------------------------------------------------------
// Tools, callbacks and the context

/// Records tool calls; answers each with its arguments.
#[derive(Default)]
struct Recorder(Mutex<Vec<(String, Value)>>);

#[async_trait]
impl Host for Recorder {
    async fn call_tool(
        &self,
        name: &str,
        args: Map<String, Value>,
        _: &HostCall,
    ) -> ExternalResponse {
        // Slow enough that a call still under way when the code returns would be lost.
        tokio::time::sleep(Duration::from_millis(30)).await;
        self.0
            .lock()
            .unwrap()
            .push((name.to_owned(), Value::Object(args.clone())));
        ExternalResponse::new(200, Value::Object(args).to_string())
    }

    async fn http(&self, request: HttpRequest, _: &HostCall) -> ExternalResponse {
        self.0
            .lock()
            .unwrap()
            .push(("http".to_owned(), serde_json::to_value(&request).unwrap()));
        let mut response = ExternalResponse::new(200, "{}");
        response
            .headers
            .insert("Content-Type".to_owned(), "application/json".to_owned());
        response.url = format!("{}?final", request.url);
        response
    }
}

#[tokio::test]
async fn async_tools_calls_never_waited_for_still_all_happen() {
    let source = "def notify() -> str:\n    for i in range(5):\n        async_tools.log_event({'i': i})\n    return 'started'\n";
    for _ in 0..3 {
        let host = Arc::new(Recorder::default());
        let tool = tool_of("notify.py", source, "notify", host.clone()).await;
        let mut ctx = tool_context(json!({}));
        assert_eq!(
            tool.invoke(Map::new(), &mut ctx).await.unwrap().value,
            json!("started")
        );
        let mut seen: Vec<i64> = host
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|(_, a)| a["i"].as_i64().unwrap())
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, [0, 1, 2, 3, 4]);
    }
}

#[tokio::test]
async fn tool_callbacks_see_the_tools_description_and_in_place_edits_stick() {
    let weather = "def weather(city: str) -> dict:\n    \"\"\"Tells the weather of a city.\"\"\"\n    return {'city': city, 'sky': 'rain'}\n";
    let callbacks = r#"
def before_tool_callback(tool, input, callback_context):
    callback_context.set_variable('seen_description', tool.description)

def after_tool_callback(tool, input, callback_context, tool_response):
    tool_response['sky'] = 'sun'

def after_model_callback(callback_context, llm_response):
    for part in llm_response.content.parts:
        if part.text:
            part.text = part.text.replace('rain', 'sun')
"#;
    let h = engine_with(
        &[("callbacks.py", callbacks), ("weather.py", weather)],
        vec![
            call("weather", json!({"city": "Hangzhou"})),
            say("Expect rain."),
        ],
        Arc::new(NoHost),
        json!({}),
    )
    .await;
    assert_eq!(h.send("weather?").await.status, InvocationStatus::Completed);
    assert_eq!(
        h.state().get("seen_description"),
        Some(&json!("Tells the weather of a city."))
    );
    let output = h.last_responses()[0]["output"].clone();
    assert_eq!(
        serde_json::from_str::<Value>(output.as_str().unwrap()).unwrap(),
        json!({"city": "Hangzhou", "sky": "sun"}),
        "the edited tool_response went to the model"
    );
    let last = h.events().last().cloned().unwrap();
    let text: String = last
        .content
        .unwrap()
        .parts
        .iter()
        .filter_map(|p| p.text().map(str::to_owned))
        .collect();
    assert_eq!(text, "Expect sun.", "the edited llm_response is the answer");
}

#[tokio::test]
async fn session_is_in_the_variables_and_removing_a_missing_variable_is_a_key_error() {
    let source = "def where() -> dict:\n    return context.variables.get('_session', {})\n";
    let (result, ctx) = run_tool(source, "where", json!({}), json!({})).await;
    assert_eq!(
        result.unwrap().value,
        json!({"modality": "TEXT", "channel": "API"})
    );
    assert!(
        !ctx.variables().contains_key("_session"),
        "not written back as a change"
    );

    let source = "def where() -> dict:\n    return context.variables['_session']\n";
    let (result, _) = run_tool(
        source,
        "where",
        json!({}),
        json!({"_session": {"modality": "VOICE"}}),
    )
    .await;
    assert_eq!(
        result.unwrap().value,
        json!({"modality": "VOICE", "channel": "API"})
    );

    for body in ["remove_variable('nope')", "context.remove_variable('nope')"] {
        let source = format!("def forget() -> None:\n    {body}\n");
        let (result, _) = run_tool(&source, "forget", json!({}), json!({})).await;
        let error = python_error(result);
        assert_eq!(
            (error.type_name.as_str(), error.line),
            ("KeyError", Some(2)),
            "{body}"
        );
    }
}

// ------------------------------------------------------------------------------------------
// ces_requests as requests

#[tokio::test]
async fn ces_requests_takes_the_arguments_requests_takes() {
    let source = r#"
@tool(requires_approval=True)
def fetch() -> dict:
    r = ces_requests.get('https://api.example.com/items',
                         params={'tag': ['a', 'b'], 'skip': None, 'n': 2},
                         cookies={'sid': '1'}, auth=('me', 'pw'), allow_redirects=False)
    ces_requests.get('https://api.example.com/pairs', params=[('k', '1'), ('k', '2')])
    ces_requests.post('https://api.example.com/raw', data=b'\xff\x00')
    ces_requests.post('https://api.example.com/form', data={'a': [1, 2]})
    try:
        ces_requests.get('https://api.example.com/x', verify=False)
        refused = None
    except ValueError as e:
        refused = str(e)
    return {
        'type': r.headers['content-type'],
        'url': r.url,
        'content': r.content.decode(),
        'refused': refused,
    }
"#;
    let host = Arc::new(Recorder::default());
    let tool = tool_of("fetch.py", source, "fetch", host.clone()).await;
    let mut ctx = tool_context(json!({}));
    let value = tool.invoke(Map::new(), &mut ctx).await.unwrap().value;
    assert_eq!(
        value,
        json!({
            "type": "application/json",
            "url": "https://api.example.com/items?final",
            "content": "{}",
            "refused": "ces_requests.get(): verify=False is not supported: certificates are always checked"
        })
    );
    let sent: Vec<Value> = host
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|(_, r)| r.clone())
        .collect();
    assert_eq!(
        sent[0],
        json!({
            "method": "GET", "url": "https://api.example.com/items",
            "params": {"tag": ["a", "b"], "n": "2"},
            "headers": {"Cookie": "sid=1", "Authorization": "Basic bWU6cHc="},
            "allow_redirects": false
        })
    );
    assert_eq!(sent[1]["params"], json!({"k": ["1", "2"]}));
    assert_eq!(sent[2]["data_base64"], json!("/wA="));
    assert_eq!(sent[3]["form"], json!({"a": ["1", "2"]}));
    assert_eq!(sent.len(), 4, "the verify=False call was never sent");
}

// ------------------------------------------------------------------------------------------
// The providers' reasoning part

#[tokio::test]
async fn model_callbacks_read_edit_and_pass_back_a_thinking_models_reasoning_untouched() {
    use agent::{CallbackContext, Content, LlmRequest, LlmResponse, Part};
    let source = r#"
def before_model_callback(callback_context, llm_request):
    for content in llm_request.contents:
        for part in content.parts:
            if part.reasoning is not None:
                callback_context.set_variable('reasoned', part.reasoning.text)
            if part.text:
                part.text = part.text + ' (edited)'
    return None

def after_model_callback(callback_context, llm_response):
    kinds = [
        'reasoning' if p.reasoning is not None else 'text'
        for p in llm_response.content.parts
    ]
    callback_context.set_variable('kinds', kinds)
    return LlmResponse.from_parts(
        [p for p in llm_response.content.parts] + [Part.from_text(text='!')]
    )
"#;
    let sandbox = common::sandbox();
    let module = Arc::new(
        PythonModule::load(&sandbox, "think.py", source)
            .await
            .unwrap(),
    );
    let callback = |kind| {
        pysandbox::PythonCallback::new(
            module.clone(),
            kind,
            sandbox.clone(),
            Arc::new(NoHost),
            Reporter::default(),
        )
    };
    let signed = agent::Reasoning {
        text: "The user wants tomorrow.".to_owned(),
        signature: Some("sig-abc".to_owned()),
        redacted: false,
    };
    let hidden = agent::Reasoning {
        text: String::new(),
        signature: Some("encrypted".to_owned()),
        redacted: true,
    };
    let mut request = LlmRequest {
        model: None,
        contents: vec![
            Content::user_text("What is on tomorrow?"),
            Content {
                parts: vec![
                    Part::Reasoning(signed.clone()),
                    Part::Reasoning(hidden.clone()),
                    Part::from_text("Nothing."),
                ],
                role: Some("model".to_owned()),
            },
        ]
        .into(),
        config: None,
    };
    let mut ctx = CallbackContext::new("inv", "assistant", "s1", Map::new(), Arc::default());
    let replaced =
        callback(pysandbox::CallbackKind::BeforeModel).run_before_model(&mut ctx, &mut request);
    assert_eq!(replaced, None);
    assert_eq!(
        request.contents[1].parts,
        vec![
            Part::Reasoning(signed.clone()),
            Part::Reasoning(hidden),
            Part::from_text("Nothing. (edited)"),
        ],
        "the edit stuck and the reasoning went back exactly as it came"
    );
    assert_eq!(
        ctx.state_delta()["reasoned"],
        json!(""),
        "the last one read"
    );

    let response = LlmResponse::from_parts(vec![
        Part::Reasoning(signed.clone()),
        Part::from_text("Tomorrow is free"),
    ]);
    let replaced = callback(pysandbox::CallbackKind::AfterModel)
        .run_after_model(&mut ctx, &response)
        .expect("a new response");
    assert_eq!(
        replaced.content.parts,
        vec![
            Part::Reasoning(signed),
            Part::from_text("Tomorrow is free"),
            Part::from_text("!"),
        ]
    );
    assert_eq!(ctx.state_delta()["kinds"], json!(["reasoning", "text"]));
}
