//! The scripted model server over raw HTTP: the Chat Completions wire format it streams, its
//! non-streaming answers, step matching, errors, the key check and the request log.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use emulator::model_server::{Matcher, ModelServer, Script, Step};
use serde_json::{Value, json};

fn client() -> reqwest::Client {
    // reqwest is built without a TLS crypto provider; plain HTTP still asks for one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

fn user(text: &str) -> Value {
    json!({"model": "gpt-test", "stream": true, "stream_options": {"include_usage": true},
           "messages": [{"role": "system", "content": "你是飞书助手。"}, {"role": "user", "content": text}]})
}

async fn post(server: &ModelServer, body: &Value) -> reqwest::Response {
    client()
        .post(format!("{}/chat/completions", server.base_url()))
        .json(body)
        .send()
        .await
        .unwrap()
}

/// The `data:` payloads of an event stream.
async fn events(response: reqwest::Response) -> Vec<String> {
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let text = response.text().await.unwrap();
    assert!(text.ends_with("\n\n"));
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            e.strip_prefix("data: ")
                .expect("every event is one data line")
                .to_owned()
        })
        .collect()
}

fn chunks(events: &[String]) -> Vec<Value> {
    assert_eq!(events.last().unwrap(), "[DONE]");
    events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect()
}

#[tokio::test]
async fn a_streamed_answer_looks_like_the_real_service() {
    let server = ModelServer::start(Script::of_steps(vec![Step::reply(
        emulator::model_server::Reply {
            text: "我先看一下你明天的日程。".into(),
            tool_calls: vec![emulator::model_server::ToolCall {
                name: "list_calendar_events".into(),
                arguments: json!({"start_time": "2026-12-01T00:00:00+08:00", "end_time": "2026-12-01T23:59:59+08:00"}),
                id: None,
            }],
        },
    )]))
    .await
    .unwrap();
    let chunks = chunks(&events(post(&server, &user("明天有什么安排？")).await).await);
    for chunk in &chunks {
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(chunk["model"], "gpt-test");
        assert_eq!(chunk["id"], chunks[0]["id"]);
        assert!(chunk["id"].as_str().unwrap().starts_with("chatcmpl-"));
    }
    let deltas: Vec<&Value> = chunks
        .iter()
        .filter(|c| !c["choices"].as_array().unwrap().is_empty())
        .map(|c| &c["choices"][0]["delta"])
        .collect();
    assert_eq!(deltas[0]["role"], "assistant");
    let text: String = deltas
        .iter()
        .filter_map(|d| d["content"].as_str())
        .collect();
    assert_eq!(text, "我先看一下你明天的日程。");
    assert!(
        deltas
            .iter()
            .filter(|d| d["content"].as_str().is_some_and(|c| !c.is_empty()))
            .count()
            > 1,
        "text comes in several deltas"
    );
    let calls: Vec<&Value> = deltas
        .iter()
        .filter_map(|d| d["tool_calls"].as_array())
        .flatten()
        .collect();
    let head = calls[0];
    assert_eq!(head["index"], 0);
    assert!(head["id"].as_str().unwrap().starts_with("call_"));
    assert_eq!(head["type"], "function");
    assert_eq!(head["function"]["name"], "list_calendar_events");
    assert_eq!(head["function"]["arguments"], "");
    let fragments: Vec<&str> = calls[1..]
        .iter()
        .map(|c| {
            assert_eq!(c["index"], 0);
            assert!(c.get("id").is_none(), "only the first chunk has the id");
            c["function"]["arguments"].as_str().unwrap()
        })
        .collect();
    assert!(fragments.len() > 3, "arguments are split over chunks");
    let arguments: Value = serde_json::from_str(&fragments.concat()).unwrap();
    assert_eq!(arguments["start_time"], "2026-12-01T00:00:00+08:00");
    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert!(usage["usage"]["total_tokens"].as_u64().unwrap() > 0);
    for chunk in &chunks[..chunks.len() - 1] {
        assert!(chunk["usage"].is_null(), "usage only on the last chunk");
    }
}

#[tokio::test]
async fn without_include_usage_there_is_no_usage_chunk() {
    let server = ModelServer::start(Script::of_steps(vec![Step::text("好的")]))
        .await
        .unwrap();
    let mut body = user("hi");
    body.as_object_mut().unwrap().remove("stream_options");
    let chunks = chunks(&events(post(&server, &body).await).await);
    assert!(chunks.iter().all(|c| c.get("usage").is_none()));
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "stop"
    );
}

#[tokio::test]
async fn an_answer_opening_with_a_tool_call_carries_the_role_in_that_chunk() {
    let server = ModelServer::start(Script::of_steps(vec![Step::call(
        "list_tasks",
        json!({"completed": false}),
    )]))
    .await
    .unwrap();
    let chunks = chunks(&events(post(&server, &user("待办")).await).await);
    let first = &chunks[0]["choices"][0]["delta"];
    assert_eq!(first["role"], "assistant");
    assert!(first["content"].is_null());
    assert_eq!(first["tool_calls"][0]["function"]["name"], "list_tasks");
}

#[tokio::test]
async fn a_non_streaming_request_gets_one_document() {
    let server = ModelServer::start(Script::of_steps(vec![Step::call(
        "send_message",
        json!({"chat": "产品周会", "text": "晚到"}),
    )]))
    .await
    .unwrap();
    let mut body = user("x");
    body["stream"] = json!(false);
    let response = post(&server, &body).await;
    assert_eq!(response.status(), 200);
    let doc: Value = response.json().await.unwrap();
    assert_eq!(doc["object"], "chat.completion");
    let choice = &doc["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert!(choice["message"]["content"].is_null());
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "send_message");
    assert_eq!(
        serde_json::from_str::<Value>(call["function"]["arguments"].as_str().unwrap()).unwrap(),
        json!({"chat": "产品周会", "text": "晚到"})
    );
    assert!(doc["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn steps_match_the_last_message_and_are_used_once_unless_repeating() {
    let script = Script::of_steps(vec![
        Step::text("日程答案").when(Matcher {
            role: Some("user".into()),
            contains_any: vec!["日程".into(), "Agenda".into()],
            ..Matcher::default()
        }),
        Step::text("工具结果答案").when(Matcher {
            role: Some("tool".into()),
            tool: Some("list_calendar_events".into()),
            ..Matcher::default()
        }),
        Step {
            repeat: true,
            ..Step::text("兜底")
        },
    ]);
    let server = ModelServer::start(script).await.unwrap();
    let text = |chunks: Vec<Value>| -> String {
        chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
            .collect()
    };
    assert_eq!(
        text(chunks(
            &events(post(&server, &user("随便聊聊")).await).await
        )),
        "兜底"
    );
    assert_eq!(
        text(chunks(
            &events(post(&server, &user("my agenda?")).await).await
        )),
        "日程答案"
    );
    // Used once: the same question now falls through.
    assert_eq!(
        text(chunks(&events(post(&server, &user("日程")).await).await)),
        "兜底"
    );
    let tool_turn = json!({"model": "m", "stream": true, "messages": [
        {"role": "user", "content": "日程"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "fc_1", "type": "function", "function": {"name": "list_calendar_events", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "fc_1", "content": "{\"output\":[]}"},
    ]});
    assert_eq!(
        text(chunks(&events(post(&server, &tool_turn).await).await)),
        "工具结果答案"
    );
    let log = server.requests();
    assert_eq!(log.len(), 4);
    assert_eq!(
        log.iter().map(|r| r.step).collect::<Vec<_>>(),
        [Some(2), Some(0), Some(2), Some(1)]
    );
    assert_eq!(server.remaining_steps(), 1);
}

#[tokio::test]
async fn an_exhausted_script_says_so() {
    let server = ModelServer::start(Script::of_steps(vec![Step::text("一次")]))
        .await
        .unwrap();
    post(&server, &user("a")).await.text().await.unwrap();
    let response = post(&server, &user("b")).await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "script_exhausted");
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn error_steps_send_their_status_headers_and_body() {
    let script = Script::from_json(
        r#"{"steps": [
            {"error": {"status": 429, "headers": {"retry-after": "2"}}},
            {"error": {"status": 503, "body": "upstream overloaded"}},
            {"error": {"status": 400, "body": {"error": {"message": "custom", "code": "x"}}}}
        ]}"#,
    )
    .unwrap();
    let server = ModelServer::start(script).await.unwrap();
    let first = post(&server, &user("a")).await;
    assert_eq!(first.status(), 429);
    assert_eq!(first.headers()["retry-after"], "2");
    let body: Value = first.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    let second = post(&server, &user("a")).await;
    assert_eq!(second.status(), 503);
    assert_eq!(second.text().await.unwrap(), "upstream overloaded");
    let third: Value = post(&server, &user("a")).await.json().await.unwrap();
    assert_eq!(third["error"]["message"], "custom");
}

#[tokio::test]
async fn a_script_with_a_key_refuses_requests_without_it() {
    let mut script = Script::of_steps(vec![Step::text("ok")]);
    script.api_key = Some("sk-demo".into());
    let server = ModelServer::start(script).await.unwrap();
    let refused = post(&server, &user("a")).await;
    assert_eq!(refused.status(), 401);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_api_key");
    let accepted = client()
        .post(format!("{}/chat/completions", server.base_url()))
        .bearer_auth("sk-demo")
        .json(&user("a"))
        .send()
        .await
        .unwrap();
    assert_eq!(accepted.status(), 200);
    let log = server.requests();
    assert_eq!(
        log.iter().map(|r| r.authorized).collect::<Vec<_>>(),
        [false, true]
    );
}

#[tokio::test]
async fn raw_string_arguments_are_sent_as_they_are() {
    let server = ModelServer::start(Script::of_steps(vec![Step::call(
        "send_message",
        json!("{\"chat\": \"未闭合"),
    )]))
    .await
    .unwrap();
    let chunks = chunks(&events(post(&server, &user("x")).await).await);
    let arguments: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(arguments, "{\"chat\": \"未闭合");
}

#[tokio::test]
async fn date_placeholders_become_real_dates() {
    let server = ModelServer::start(Script::of_steps(vec![Step::call(
        "list_calendar_events",
        json!({"start_time": "{{tomorrow}}T00:00:00{{tz}}"}),
    )]))
    .await
    .unwrap();
    let mut body = user("x");
    body["stream"] = json!(false);
    let doc: Value = post(&server, &body).await.json().await.unwrap();
    let arguments: Value = serde_json::from_str(
        doc["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let start = arguments["start_time"].as_str().unwrap();
    assert_eq!(start.len(), "2026-12-01T00:00:00+08:00".len(), "{start}");
    assert!(start.ends_with("T00:00:00+08:00"), "{start}");
    assert!(!start.contains("{{"));
}

#[tokio::test]
async fn models_and_unknown_paths() {
    let server = ModelServer::start(Script::of_steps(vec![])).await.unwrap();
    let models: Value = client()
        .get(format!("{}/models", server.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["id"], "scripted-model");
    let missing = client()
        .post(format!("{}/completions", server.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
}

#[tokio::test]
async fn the_demo_script_answers_a_whole_session() {
    let server = ModelServer::start(Script::demo().unwrap()).await.unwrap();
    let mut body = user("明天我有什么安排？");
    body["stream"] = json!(false);
    let ask = |body: &Value| {
        let body = body.clone();
        let server = &server;
        async move {
            let doc: Value = post(server, &body).await.json().await.unwrap();
            doc["choices"][0]["message"].clone()
        }
    };
    let first = ask(&body).await;
    assert_eq!(
        first["tool_calls"][0]["function"]["name"],
        "list_calendar_events"
    );
    body["messages"] = json!([{"role": "user", "content": "帮我约个产品评审会"}]);
    let second = ask(&body).await;
    assert_eq!(
        second["tool_calls"][0]["function"]["name"],
        "create_calendar_event"
    );
    let args: Value = serde_json::from_str(
        second["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    // The demo invites people of the emulated tenant, by the open_ids the real tool takes.
    let seed = emulator::feishu::FeishuEmulator::start()
        .await
        .unwrap()
        .seed();
    assert_eq!(
        args["attendees"],
        json!([
            seed.open_id_of("张伟").unwrap(),
            seed.open_id_of("李娜").unwrap()
        ])
    );
    assert!(args["start"].as_str().unwrap().ends_with("T15:00:00+08:00"));
    body["messages"] = json!([{"role": "user", "content": "看看我的待办"}]);
    let third = ask(&body).await;
    assert_eq!(third["tool_calls"][0]["function"]["name"], "list_tasks");
    body["messages"] = json!([{"role": "user", "content": "你好"}]);
    let other = ask(&body).await;
    assert!(other["content"].as_str().unwrap().contains("演示模式"));
}
