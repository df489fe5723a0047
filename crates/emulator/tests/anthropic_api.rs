//! The scripted model server's Anthropic Messages endpoint over raw HTTP: the named events it
//! streams, its `message` documents, steps matched on Anthropic requests, the fallback answer,
//! Anthropic-shaped errors, the key check, `count_tokens` and the `/api/hello` probe. (The
//! production Anthropic client judges it too: crates/llm/tests/anthropic_scripted_server.rs.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use emulator::model_server::{Matcher, ModelServer, Reply, Script, Step, ToolCall};
use serde_json::{Value, json};

fn client() -> reqwest::Client {
    // reqwest is built without a TLS crypto provider; plain HTTP still asks for one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

fn root(server: &ModelServer) -> String {
    format!("http://{}", server.addr())
}

fn ask(text: &str, stream: bool) -> Value {
    json!({"model": "claude-test", "max_tokens": 1024, "stream": stream,
           "system": [{"type": "text", "text": "You are Claude Code."}],
           "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]})
}

async fn post(server: &ModelServer, path: &str, body: &Value) -> reqwest::Response {
    client()
        .post(format!("{}{path}", root(server)))
        .header("x-api-key", "sk-ant-test")
        .header("anthropic-version", "2023-06-01")
        .json(body)
        .send()
        .await
        .unwrap()
}

/// The (event name, data) pairs of a named event stream.
async fn events(response: reqwest::Response) -> Vec<(String, Value)> {
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let text = response.text().await.unwrap();
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (name, data) = e.split_once('\n').expect("an event line and a data line");
            let name = name
                .strip_prefix("event: ")
                .expect("event: first")
                .to_owned();
            let data: Value =
                serde_json::from_str(data.strip_prefix("data: ").expect("then data:")).unwrap();
            assert_eq!(data["type"], name.as_str(), "the name is the data's type");
            (name, data)
        })
        .collect()
}

fn text_and_call() -> Script {
    Script::of_steps(vec![Step::reply(Reply {
        text: "I'll run it.".into(),
        tool_calls: vec![ToolCall {
            name: "Bash".into(),
            arguments: json!({"command": "echo ALLOWED >> ran.txt", "description": "append"}),
            id: None,
        }],
    })])
}

#[tokio::test]
async fn a_streamed_answer_is_the_real_event_sequence() {
    let server = ModelServer::start(text_and_call()).await.unwrap();
    let events = events(post(&server, "/v1/messages?beta=true", &ask("run it", true)).await).await;
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names[..2], ["message_start", "ping"]);
    assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
    let start = &events[0].1["message"];
    assert!(start["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(start["model"], "claude-test");
    assert_eq!(start["role"], "assistant");
    assert_eq!(start["content"], json!([]));
    assert!(start["usage"]["input_tokens"].as_u64().unwrap() > 0);

    let blocks: Vec<&Value> = events
        .iter()
        .filter(|(n, _)| n == "content_block_start")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(blocks.len(), 2);
    assert_eq!(
        blocks[0]["content_block"],
        json!({"type": "text", "text": ""})
    );
    let tool = &blocks[1]["content_block"];
    assert_eq!(tool["type"], "tool_use");
    assert_eq!(tool["name"], "Bash");
    assert!(tool["id"].as_str().unwrap().starts_with("toolu_"));
    let deltas = |index: u64, kind: &str, field: &str| -> Vec<String> {
        events
            .iter()
            .filter(|(n, d)| n == "content_block_delta" && d["index"] == index)
            .inspect(|(_, d)| assert_eq!(d["delta"]["type"], kind))
            .map(|(_, d)| d["delta"][field].as_str().unwrap().to_owned())
            .collect()
    };
    let text = deltas(0, "text_delta", "text");
    assert!(text.len() > 1, "text in pieces");
    assert_eq!(text.concat(), "I'll run it.");
    let input = deltas(1, "input_json_delta", "partial_json");
    assert!(input.len() > 2, "the input in fragments");
    assert_eq!(
        serde_json::from_str::<Value>(&input.concat()).unwrap(),
        json!({"command": "echo ALLOWED >> ran.txt", "description": "append"})
    );
    let stops = events.iter().filter(|(n, _)| n == "content_block_stop");
    assert_eq!(
        stops.map(|(_, d)| d["index"].clone()).collect::<Vec<_>>(),
        [json!(0), json!(1)]
    );
    let delta = &events[events.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert!(delta["usage"]["output_tokens"].as_u64().unwrap() > 0);

    let log = server.requests();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].path, "/v1/messages");
    assert!(log[0].authorized);
    assert_eq!(log[0].step, Some(0));
    assert_eq!(log[0].messages()[0]["role"], "user", "the request as sent");
}

#[tokio::test]
async fn a_non_streamed_answer_is_one_message_document() {
    let server = ModelServer::start(text_and_call()).await.unwrap();
    let response = post(&server, "/v1/messages", &ask("run it", false)).await;
    assert_eq!(response.status(), 200);
    let message: Value = response.json().await.unwrap();
    assert_eq!(message["type"], "message");
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(
        message["content"][0],
        json!({"type": "text", "text": "I'll run it."})
    );
    assert_eq!(message["content"][1]["type"], "tool_use");
    assert_eq!(
        message["content"][1]["input"],
        json!({"command": "echo ALLOWED >> ran.txt", "description": "append"})
    );
}

#[tokio::test]
async fn steps_match_tool_results_and_the_rest_gets_the_fallback() {
    let mut script = Script::of_steps(vec![
        Step::text("Refused: {{result.reason}}").when(Matcher {
            role: Some("tool".into()),
            tool: Some("Bash".into()),
            contains: Some("not on the list".into()),
            ..Matcher::default()
        }),
        Step::text("never").when(Matcher {
            role: Some("user".into()),
            contains: Some("nothing matches this".into()),
            ..Matcher::default()
        }),
    ]);
    script.fallback = Some("OK.".into());
    let server = ModelServer::start(script).await.unwrap();
    let mut body = ask("run it", false);
    body["messages"].as_array_mut().unwrap().extend([
        // Claude Code's environment notes come as a system message inside `messages`.
        json!({"role": "system", "content": [{"type": "text", "text": "# Environment"}]}),
        json!({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "rm -rf /"}}]}),
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": true,
               "content": "{\"reason\": \"not on the list\"}"}]}),
    ]);
    let answer: Value = post(&server, "/v1/messages", &body)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(answer["content"][0]["text"], "Refused: not on the list");
    assert_eq!(answer["stop_reason"], "end_turn");

    let side = post(&server, "/v1/messages", &ask("Write a 5-word title", true)).await;
    let texts: Vec<String> = events(side)
        .await
        .into_iter()
        .filter(|(n, _)| n == "content_block_delta")
        .map(|(_, d)| d["delta"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(texts.concat(), "OK.");
    assert_eq!(
        server.requests().iter().map(|r| r.step).collect::<Vec<_>>(),
        [Some(0), None]
    );
}

#[tokio::test]
async fn failures_are_in_anthropics_shape() {
    let server = ModelServer::start(Script::of_steps(vec![Step::error(529), Step::error(429)]))
        .await
        .unwrap();
    let overloaded = post(&server, "/v1/messages", &ask("x", true)).await;
    assert_eq!(overloaded.status(), 529);
    assert_eq!(
        overloaded.json::<Value>().await.unwrap(),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );
    let limited: Value = post(&server, "/v1/messages", &ask("x", true))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(limited["error"]["type"], "rate_limit_error");
    let exhausted = post(&server, "/v1/messages", &ask("x", true)).await;
    assert_eq!(exhausted.status(), 400);
    let exhausted: Value = exhausted.json().await.unwrap();
    assert_eq!(exhausted["type"], "error");
    assert_eq!(exhausted["error"]["type"], "invalid_request_error");
    assert!(
        exhausted["error"]["message"]
            .as_str()
            .unwrap()
            .contains("script_exhausted")
    );
    let malformed = post(&server, "/v1/messages", &json!({"model": "m"})).await;
    assert_eq!(malformed.status(), 400);
}

#[tokio::test]
async fn the_key_may_come_as_x_api_key_or_a_bearer_token() {
    let mut script = Script::of_steps(vec![Step::text("ok").when(Matcher::default())]);
    script.steps[0].repeat = true;
    script.api_key = Some("sk-ant-right".into());
    let server = ModelServer::start(script).await.unwrap();
    let url = format!("{}/v1/messages", root(&server));
    let send = |name: &'static str, value: &'static str| {
        client()
            .post(url.clone())
            .header(name, value)
            .json(&ask("x", false))
            .send()
    };
    assert_eq!(
        send("x-api-key", "sk-ant-right").await.unwrap().status(),
        200
    );
    assert_eq!(
        send("authorization", "Bearer sk-ant-right")
            .await
            .unwrap()
            .status(),
        200
    );
    let wrong = send("x-api-key", "sk-ant-wrong").await.unwrap();
    assert_eq!(wrong.status(), 401);
    let wrong: Value = wrong.json().await.unwrap();
    assert_eq!(wrong["error"]["type"], "authentication_error");
}

#[tokio::test]
async fn tokens_are_counted_and_the_probe_answered() {
    let server = ModelServer::start(Script::of_steps(Vec::new()))
        .await
        .unwrap();
    let counted = post(
        &server,
        "/v1/messages/count_tokens?beta=true",
        &ask("hello there", false),
    )
    .await;
    assert_eq!(counted.status(), 200);
    let counted: Value = counted.json().await.unwrap();
    assert!(counted["input_tokens"].as_u64().unwrap() > 0);
    let probe = client()
        .head(format!("{}/api/hello", root(&server)))
        .send()
        .await
        .unwrap();
    assert_eq!(probe.status(), 200);
    let log = server.requests();
    assert_eq!(
        log.len(),
        1,
        "the probe is not logged, as /v1/models is not"
    );
    assert_eq!(log[0].path, "/v1/messages/count_tokens");
    assert_eq!(log[0].step, None);
}
