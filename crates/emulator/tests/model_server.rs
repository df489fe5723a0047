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

/// What the demo should say in one language: the prompts a user of that language types (the
/// UI's "Try:" chips among them) and the titles the assistant proposes.
struct Speaker {
    agenda: &'static str,
    meeting: &'static str,
    todos: &'static str,
    note: &'static str,
    hello: &'static str,
    meeting_summary: &'static str,
    note_title: &'static str,
    /// Whether a text is in this language. The tenant's people keep their Chinese names.
    speaks: fn(&str) -> bool,
}

fn has_han(text: &str) -> bool {
    text.chars().any(|c| ('\u{4E00}'..='\u{9FFF}').contains(&c))
}

fn english(text: &str) -> bool {
    let words = text.replace("张伟", "").replace("李娜", "");
    !has_han(&words) && words.chars().any(|c| c.is_ascii_alphabetic())
}

fn chinese(text: &str) -> bool {
    has_han(&text.replace("张伟", "").replace("李娜", ""))
}

const ENGLISH: Speaker = Speaker {
    agenda: "What do I have tomorrow?",
    meeting: "Set up a product review meeting for me",
    todos: "Show me my to-dos",
    note: "save a note",
    hello: "hello",
    meeting_summary: "Product review",
    note_title: "Weekly sync",
    speaks: english,
};

const CHINESE: Speaker = Speaker {
    agenda: "明天我有什么安排？",
    meeting: "帮我约个产品评审会",
    todos: "看看我的待办",
    note: "帮我记一条笔记",
    hello: "你好",
    meeting_summary: "产品评审会",
    note_title: "周会",
    speaks: chinese,
};

/// A conversation as the engine sends it: the app's instruction, then the messages.
struct Conversation<'a> {
    server: &'a ModelServer,
    messages: Vec<Value>,
}

impl Conversation<'_> {
    fn user(mut self, text: &str) -> Self {
        self.messages.push(json!({"role": "user", "content": text}));
        self
    }

    /// The assistant's answer to the conversation so far, kept in it.
    async fn answer(&mut self) -> Value {
        let body = json!({"model": "demo-model", "stream": false, "messages": self.messages});
        let response = post(self.server, &body).await;
        assert_eq!(response.status(), 200);
        let doc: Value = response.json().await.unwrap();
        let message = doc["choices"][0]["message"].clone();
        self.messages.push(message.clone());
        message
    }

    /// The tool's answer to the last call, as the engine sends it.
    fn tool_answer(mut self, answer: Value) -> Self {
        let id = self.messages.last().unwrap()["tool_calls"][0]["id"].clone();
        self.messages
            .push(json!({"role": "tool", "tool_call_id": id, "content": answer.to_string()}));
        self
    }
}

fn start<'a>(server: &'a ModelServer) -> Conversation<'a> {
    Conversation {
        server,
        messages: vec![json!({"role": "system", "content": "You help the user with Feishu."})],
    }
}

fn text(message: &Value) -> String {
    message["content"].as_str().unwrap_or_default().to_owned()
}

fn the_call(message: &Value, tool: &str) -> Value {
    let call = &message["tool_calls"][0]["function"];
    assert_eq!(call["name"], tool, "{message}");
    serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap()
}

/// A reply in the speaker's language, with `expected` in it.
fn says(speaker: &Speaker, message: &Value, expected: &str) {
    let text = text(message);
    assert!(
        (speaker.speaks)(&text),
        "not in the user's language: {text}"
    );
    assert!(text.contains(expected), "{text:?} lacks {expected:?}");
}

#[tokio::test]
async fn the_demo_answers_each_flow_in_the_language_the_user_writes_in() {
    let mut script = Script::demo().unwrap();
    script.chunk_delay_ms = 0;
    let server = ModelServer::start(script).await.unwrap();
    let failed = json!({"error": "The user rejected this call."});
    for (speaker, expect) in [
        (
            &ENGLISH,
            [
                "calendar",
                "free from 3 pm",
                "couldn't read",
                "product review",
                "Created “Product review”",
                "won't create",
                "to-dos",
                "I've read your to-dos",
                "no permission",
                "save_note",
                "Note saved",
                "not saved",
                "has been created",
                "was not created",
                "taken care of",
                "edited by your Python callback",
                "OK, that's done",
                "demo mode",
            ],
        ),
        (
            &CHINESE,
            [
                "日程",
                "下午 3 点以后是空的",
                "没能读到",
                "产品评审会",
                "已创建「产品评审会」",
                "这次先不创建",
                "待办",
                "待办已经读到",
                "没有飞书任务的读取权限",
                "save_note",
                "笔记已保存",
                "笔记没有保存",
                "已经创建好了",
                "没有创建",
                "已经处理好了",
                "Python 回调改写过",
                "处理完了",
                "演示模式",
            ],
        ),
    ] {
        let mut expect = expect.into_iter();
        let mut next = || expect.next().unwrap();
        // The agenda: a read, then what was found, or that it could not be read.
        let mut c = start(&server).user(speaker.agenda);
        let asked = c.answer().await;
        the_call(&asked, "list_calendar_events");
        says(speaker, &asked, next());
        let mut read = start(&server).user(speaker.agenda);
        read.answer().await;
        let mut read = read.tool_answer(json!({"output": "[{\"summary\": \"产品周会\"}]"}));
        says(speaker, &read.answer().await, next());
        let mut c = c.tool_answer(json!({"error": "Feishu did not answer."}));
        says(speaker, &c.answer().await, next());

        // The meeting: its proposal (the card's title in the user's words), then approved or
        // rejected.
        let mut c = start(&server).user(speaker.meeting);
        let proposed = c.answer().await;
        let args = the_call(&proposed, "create_calendar_event");
        assert_eq!(args["summary"], speaker.meeting_summary);
        assert!(
            (speaker.speaks)(args["description"].as_str().unwrap()),
            "{args}"
        );
        let proposal = text(&proposed).to_lowercase();
        assert!(proposal.contains(next()), "{proposal}");
        assert!(
            proposal.contains("张伟") && proposal.contains("15:00"),
            "{proposal}"
        );
        let mut done = start(&server).user(speaker.meeting);
        done.answer().await;
        let created = json!({"output": json!({"summary": args["summary"], "start": "15:00", "end": "16:00"}).to_string()});
        let mut done = done.tool_answer(created);
        says(speaker, &done.answer().await, next());
        let mut c = c.tool_answer(failed.clone());
        says(speaker, &c.answer().await, next());

        // The to-dos: read after signing in, or refused for want of the permission.
        let mut c = start(&server).user(speaker.todos);
        let asked = c.answer().await;
        the_call(&asked, "list_tasks");
        says(speaker, &asked, next());
        let mut read = start(&server).user(speaker.todos);
        read.answer().await;
        let mut read = read.tool_answer(json!({"output": "[]"}));
        says(speaker, &read.answer().await, next());
        let mut c = c.tool_answer(json!({"error": "needs task:task:read"}));
        says(speaker, &c.answer().await, next());

        // The Python note: the user's tool, saved or not.
        let mut c = start(&server).user(speaker.note);
        let asked = c.answer().await;
        let args = the_call(&asked, "save_note");
        assert_eq!(args["title"], speaker.note_title);
        assert!((speaker.speaks)(args["body"].as_str().unwrap()), "{args}");
        says(speaker, &asked, next());
        let mut saved = start(&server).user(speaker.note);
        saved.answer().await;
        let mut saved = saved.tool_answer(json!({"output": "{\"id\": \"note_1\"}"}));
        says(speaker, &saved.answer().await, next());
        let mut c = c.tool_answer(json!({"error": "ValueError"}));
        says(speaker, &c.answer().await, next());

        // A decision that came after the user wrote again arrives as the engine's note, in
        // English whatever the user speaks: the answer follows the user.
        let late = |answer: &Value| {
            format!(
                "Update on the earlier call create_calendar_event (call_1): the user has since decided it, and it answered: {answer}"
            )
        };
        let created = json!({"output": "{\"summary\": \"x\"}"});
        for answer in [&created, &failed] {
            let mut c = start(&server)
                .user(speaker.meeting)
                .user(speaker.hello)
                .user(&late(answer));
            says(speaker, &c.answer().await, next());
        }
        let mut c = start(&server).user(speaker.todos).user(
            "Update on the earlier call list_tasks (call_2): the user has since decided it, and it answered: {}",
        );
        says(speaker, &c.answer().await, next());

        // A Python callback that edits the request.
        let mut c =
            start(&server).user(&format!("{} [edited by a Python callback]", speaker.hello));
        says(speaker, &c.answer().await, next());

        // Any other tool's answer, then anything else: the demo's help, with the prompts to try.
        let mut c = start(&server).user(speaker.hello);
        c.messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_3", "type": "function", "function": {"name": "search_docs", "arguments": "{}"}}]}));
        let mut c = c.tool_answer(json!({"output": "[]"}));
        says(speaker, &c.answer().await, next());
        let mut c = start(&server).user(speaker.hello);
        let help = c.answer().await;
        says(speaker, &help, next());
        for prompt in [speaker.agenda, speaker.meeting, speaker.todos] {
            says(speaker, &help, prompt);
        }
        assert!(expect.next().is_none(), "every flow was checked");
    }
}
