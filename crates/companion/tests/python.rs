//! The user's own Python in the app, through the functions the UI calls: a tool written in the
//! editor is loaded, called by the assistant, held for approval with its POST shown, sent once
//! approved, and audited with its file and function; a broken file shows its line and breaks
//! nothing else; a callback that edits the request changes the answer; the folder is watched;
//! the instruction and the built-in tools are the user's to set.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;
use common::last_text;

use agent::persist::AuditFilter;
use agent::{CallStatus, Decision};
use companion::python::view::{AssistantInput, SandboxStateView};
use companion::{AppPaths, Companion, OpenOptions, PythonFileSettings, Settings};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The compiled sandbox, shared by every test of this file (compiling it takes tens of seconds).
fn shared_cache() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("companion-python-cache")
}

/// The app on a fresh folder, its sandbox unstarted.
async fn open_idle(dir: &std::path::Path) -> Companion {
    let paths = AppPaths::under(dir);
    paths.create().unwrap();
    let mut settings = Settings::default();
    settings.feishu.redirect_port = free_port();
    settings.save(&paths.settings_file()).unwrap();
    let app = Companion::open(
        paths,
        OpenOptions {
            memory_keys: true,
            python_cache_dir: Some(shared_cache()),
            ..OpenOptions::default()
        },
    )
    .await
    .unwrap();
    // An empty folder leaves the sandbox unstarted: most people never write Python.
    assert_eq!(app.assistant().sandbox, SandboxStateView::Idle);
    app
}

/// The app on a fresh folder, its sandbox ready.
async fn open(dir: &std::path::Path) -> Companion {
    let app = open_idle(dir).await;
    // Its first use starts it: a run from the editor waits for it (here of a tool no file has
    // yet). Compiled here unless an earlier test cached it, which can take longer than one run
    // waits.
    tokio::time::timeout(Duration::from_secs(180), async {
        loop {
            let error = app
                .run_python_tool("absent.py", "none", "{}", false)
                .await
                .unwrap_err()
                .to_string();
            if !error.contains("still being prepared") {
                assert!(
                    error.contains("absent.py has no loaded tool none"),
                    "{error}"
                );
                return;
            }
        }
    })
    .await
    .expect("the sandbox got ready");
    assert!(matches!(
        app.assistant().sandbox,
        SandboxStateView::Ready { .. }
    ));
    app
}

/// A one-route HTTP server recording each request's method, path and body.
async fn notes_server() -> (u16, Arc<Mutex<Vec<(String, String, String)>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Arc<Mutex<Vec<(String, String, String)>>> = Arc::default();
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let log = log.clone();
            tokio::spawn(async move {
                let mut data = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let n = socket.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    data.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&data).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text[..end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if data.len() >= end + 4 + length {
                            let mut first = text.lines().next().unwrap_or("").split(' ');
                            let method = first.next().unwrap_or("").to_owned();
                            let path = first.next().unwrap_or("").to_owned();
                            let body = text[end + 4..].to_owned();
                            log.lock().unwrap().push((method, path, body));
                            break;
                        }
                    }
                }
                let body = r#"{"id": "note_1"}"#;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    (port, seen)
}

fn save_note(port: u16) -> String {
    format!(
        r#"
def save_note(title: str, body: str) -> dict:
    """Saves a note in the team notebook."""
    r = ces_requests.post('http://127.0.0.1:{port}/notes', json={{'title': title, 'body': body}})
    r.raise_for_status()
    return r.json()
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_tool_from_the_editor_is_called_held_approved_sent_and_audited() {
    let dir = tempfile::tempdir().unwrap();
    let app = open(dir.path()).await;
    let (port, seen) = notes_server().await;

    let file = app
        .save_python_file("save_note.py", &save_note(port))
        .await
        .unwrap();
    assert_eq!(file.status, "loaded", "{file:?}");
    assert_eq!(file.tools[0].name, "save_note");
    assert!(
        file.tools[0].needs_approval,
        "the file posts: every call waits"
    );
    assert!(file.tools[0].parameters.contains("\"title\""));
    app.set_python_file_settings(
        "save_note.py",
        PythonFileSettings {
            allowed_hosts: vec!["127.0.0.1".to_owned()],
            feishu_api: false,
        },
    )
    .unwrap();

    let session = app.create_session().await.unwrap();
    let outcome = app
        .send_message(&session, "帮我记一条笔记", false)
        .await
        .unwrap();
    assert_eq!(outcome.status, "suspended");
    let held = app.pending().unwrap().remove(0);
    assert_eq!(
        (held.tool.as_str(), held.status),
        ("save_note", CallStatus::AwaitingApproval)
    );
    let preview = held.preview.clone().expect("a card with the request on it");
    let post = preview
        .fields
        .iter()
        .find(|f| f.label.en == "POST request")
        .expect("the POST is on the card");
    assert!(
        post.value
            .starts_with(&format!("http://127.0.0.1:{port}/notes\n"))
            && post.value.contains("\"body\": \"周五发布新版本\""),
        "{}",
        post.value
    );
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing sent before approval"
    );

    let outcome = app.decide(&held.call_id, Decision::Approve).await.unwrap();
    assert_eq!(outcome.status, "completed");
    assert_eq!(last_text(&app, &session), "笔记已保存。");
    let sent = seen.lock().unwrap().clone();
    assert_eq!(sent.len(), 1, "sent once: {sent:?}");
    assert_eq!((sent[0].0.as_str(), sent[0].1.as_str()), ("POST", "/notes"));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&sent[0].2).unwrap(),
        serde_json::json!({"title": "周会", "body": "周五发布新版本"})
    );

    let audit = app
        .audit(&AuditFilter {
            tool: Some("save_note".to_owned()),
            ..AuditFilter::default()
        })
        .unwrap();
    let kinds: Vec<&str> = audit.iter().map(|e| e.kind.as_str()).collect();
    assert!(
        kinds.contains(&"approval.requested") && kinds.contains(&"call.completed"),
        "{kinds:?}"
    );
    // Every row names the file and function, the answer's too (it once named only the tool).
    for entry in &audit {
        assert_eq!(
            entry.detail["source"],
            serde_json::json!({"python_file": "save_note.py", "function": "save_note"}),
            "{}: {}",
            entry.kind,
            entry.detail
        );
    }

    // "Always allow" works for Python tools like any other: the next call goes straight through.
    app.engine()
        .add_rule(
            "save_note",
            agent::RuleEffect::AlwaysAllow,
            serde_json::Map::new(),
            None,
        )
        .unwrap();
    let outcome = app
        .send_message(&session, "再记一条笔记", false)
        .await
        .unwrap();
    assert_eq!(outcome.status, "completed");
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_file_shows_its_line_and_the_rest_still_works() {
    let dir = tempfile::tempdir().unwrap();
    let app = open(dir.path()).await;
    app.save_python_file("good.py", "def good() -> str:\n    return 'ok'\n")
        .await
        .unwrap();
    let broken = app
        .save_python_file(
            "broken.py",
            "def broken():\n    x = 1\n    return (x\n\nprint('never')\n",
        )
        .await
        .unwrap();
    assert_eq!(broken.status, "error");
    assert_eq!(broken.error_line, Some(3));
    let error = broken.error.unwrap();
    assert!(
        error.en.starts_with("broken.py, line 3: SyntaxError"),
        "{}",
        error.en
    );
    assert!(
        error.zh.starts_with("broken.py 第 3 行：SyntaxError"),
        "{}",
        error.zh
    );
    let files = app.assistant().files;
    let good = files.iter().find(|f| f.name == "good.py").unwrap();
    assert_eq!(good.status, "loaded");

    let plain = app
        .save_python_file(
            "helpers.py",
            "def check(order_id: str) -> str:\n    return 'shipped'\n",
        )
        .await
        .unwrap();
    assert_eq!(plain.status, "error");
    assert!(
        plain
            .error
            .unwrap()
            .zh
            .contains("在希望助手调用的函数上一行加 @tool")
    );

    // The built-in tools and the good file's tool still work.
    let run = app
        .run_python_tool("good.py", "good", "{}", false)
        .await
        .unwrap();
    assert_eq!(run.value.as_deref(), Some("\"ok\""));
    let session = app.create_session().await.unwrap();
    let outcome = app
        .send_message(&session, "帮我约个评审会", false)
        .await
        .unwrap();
    assert_eq!(
        outcome.status, "suspended",
        "the built-in write is held as ever"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_that_edits_the_request_changes_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let app = open(dir.path()).await;
    let session = app.create_session().await.unwrap();
    app.send_message(&session, "你好", false).await.unwrap();
    let before = last_text(&app, &session);
    assert!(!before.contains("Python callback"), "{before}");

    let callback = r#"
def before_model_callback(callback_context, llm_request):
    last = llm_request.contents[-1]
    last.parts.append(Part.from_text(text=" [edited by a Python callback]"))
"#;
    app.save_python_file("tagger.py", callback).await.unwrap();
    app.send_message(&session, "你好", false).await.unwrap();
    assert!(
        last_text(&app, &session).contains("This request was edited by your Python callback."),
        "{}",
        last_text(&app, &session)
    );
    let tried = app
        .try_python_callback("tagger.py", "before_model_callback")
        .await
        .unwrap();
    assert!(
        tried.edited.contains("[edited by a Python callback]"),
        "{}",
        tried.edited
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_goes_only_to_allowed_hosts_and_the_folder_is_watched() {
    let dir = tempfile::tempdir().unwrap();
    let app = open_idle(dir.path()).await;
    let (port, seen) = notes_server().await;
    let fetch = format!(
        "def fetch() -> str:\n    return ces_requests.get('http://127.0.0.1:{port}/notes').text\n"
    );
    // Written straight into the folder, as another editor would: the watcher starts the sandbox
    // (compiled here unless an earlier test cached it) and loads the file.
    std::fs::write(app.paths().python_dir().join("fetch.py"), fetch).unwrap();
    tokio::time::timeout(Duration::from_secs(180), async {
        loop {
            let loaded = app
                .assistant()
                .files
                .iter()
                .any(|f| f.name == "fetch.py" && f.status == "loaded");
            if loaded {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the watcher loaded the new file");

    let refused = app
        .run_python_tool("fetch.py", "fetch", "{}", false)
        .await
        .unwrap();
    let value = refused.value.unwrap();
    assert!(
        value.contains("127.0.0.1 is not an allowed host for fetch.py")
            && value.contains("Settings → Assistant"),
        "{value}"
    );
    assert!(seen.lock().unwrap().is_empty());

    app.set_python_file_settings(
        "fetch.py",
        PythonFileSettings {
            allowed_hosts: vec!["127.0.0.1".to_owned()],
            feishu_api: false,
        },
    )
    .unwrap();
    let allowed = app
        .run_python_tool("fetch.py", "fetch", "{}", false)
        .await
        .unwrap();
    assert_eq!(
        allowed.value.as_deref(),
        Some("\"{\\\"id\\\": \\\"note_1\\\"}\"")
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert!(
        app.set_python_file_settings(
            "fetch.py",
            PythonFileSettings {
                allowed_hosts: vec!["not a host".to_owned()],
                feishu_api: false,
            },
        )
        .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_instruction_and_the_builtin_tools_apply_to_the_next_turn() {
    let dir = tempfile::tempdir().unwrap();
    let app = open(dir.path()).await;
    let view = app.assistant();
    assert_eq!(view.instruction, view.default_instruction);
    let session = app.create_session().await.unwrap();
    let outcome = app
        .send_message(&session, "帮我约个评审会", false)
        .await
        .unwrap();
    assert_eq!(outcome.status, "suspended");

    let saved = app
        .save_assistant(AssistantInput {
            instruction: "Answer like a pirate.".to_owned(),
            disabled_tools: vec!["list_tasks".to_owned()],
        })
        .unwrap();
    assert_eq!(saved.instruction, "Answer like a pirate.");
    assert!(
        !saved
            .builtin_tools
            .iter()
            .find(|t| t.name == "list_tasks")
            .unwrap()
            .enabled
    );
    assert_eq!(
        app.pending().unwrap().len(),
        1,
        "the held approval survived"
    );

    let other = app.create_session().await.unwrap();
    app.send_message(&other, "你好", false).await.unwrap();
    let request = app
        .demo()
        .unwrap()
        .model
        .requests()
        .last()
        .unwrap()
        .body
        .clone();
    let text = request.to_string();
    assert!(text.contains("Answer like a pirate."), "{text}");
    assert!(!text.contains("\"list_tasks\""), "the tool was turned off");
    assert!(text.contains("\"list_calendar_events\""));

    // Reset: saving the built-in text (or nothing) goes back to it.
    let reset = app
        .save_assistant(AssistantInput {
            instruction: view.default_instruction.clone(),
            disabled_tools: Vec::new(),
        })
        .unwrap();
    assert_eq!(reset.instruction, view.default_instruction);
    assert!(app.settings().assistant.instruction.is_none());
    assert!(
        app.save_assistant(AssistantInput {
            instruction: String::new(),
            disabled_tools: vec!["no_such_tool".to_owned()],
        })
        .is_err()
    );
}
