//! Python tools that write wait for the user like built-in writes, and their approval card says
//! what they will send: the HTTP writes of a dry run (method, URL, body) and the file's own
//! words from its preview hook.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};

use agent::{AgentTool, Decision, ExternalResponse, InvocationStatus};
use async_trait::async_trait;
use common::{call, engine_with, obj, say};
use pysandbox::{Host, HostCall, HttpRequest};
use serde_json::{Map, json};

/// Records what reaches the network.
#[derive(Default)]
struct Net(Mutex<Vec<(String, String, String)>>);

#[async_trait]
impl Host for Net {
    async fn http(&self, request: HttpRequest, call: &HostCall) -> ExternalResponse {
        self.0.lock().unwrap().push((
            request.method.to_string(),
            request.url.clone(),
            call.file.clone(),
        ));
        ExternalResponse::new(200, r#"{"id": "n1"}"#)
    }
}

const NOTES: &str = r#"
def post_note(title: str, body: str) -> dict:
    """Saves a note in the team's notebook."""
    existing = ces_requests.get('https://notes.example.com/api/notes', params={'title': title})
    r = ces_requests.post('https://notes.example.com/api/notes', json={'title': title, 'body': body})
    return r.json()

def preview_post_note(title: str, body: str) -> str:
    return f"Save the note “{title}” in the team notebook"
"#;

#[tokio::test]
async fn a_tool_whose_file_writes_waits_for_approval_and_its_card_shows_the_request() {
    let net = Arc::new(Net::default());
    let h = engine_with(
        &[("post_note.py", NOTES)],
        vec![
            call(
                "post_note",
                json!({"title": "Plan", "body": "Ship on Friday"}),
            ),
            say("Saved."),
        ],
        net.clone(),
        json!({}),
    )
    .await;
    let tool = &h.extensions.tools[0];
    assert!(tool.spec().may_write && !tool.spec().requires_approval);
    assert!(
        tool.requires_approval(&Map::new()),
        "a writing file's tools need approval"
    );
    assert!(
        h.extensions.errors.is_empty(),
        "the preview function is not a stray function: {:?}",
        h.extensions.errors
    );

    assert_eq!(
        h.send("save a note").await.status,
        InvocationStatus::Suspended
    );
    let held = h.engine.pending_calls().unwrap().remove(0);
    let preview = held.preview.clone().expect("the card has a preview");
    assert_eq!(
        preview.summary.en,
        "Save the note “Plan” in the team notebook"
    );
    let fields: Vec<(String, String)> = preview
        .fields
        .iter()
        .map(|f| (f.label.en.clone(), f.value.clone()))
        .collect();
    assert_eq!(
        fields,
        [
            (
                "POST request".to_owned(),
                "https://notes.example.com/api/notes\n{\n  \"title\": \"Plan\",\n  \"body\": \"Ship on Friday\"\n}".to_owned()
            ),
            ("Python code".to_owned(), "post_note.py · def post_note".to_owned()),
        ]
    );
    // The dry run read (GET) but sent no write.
    let sent = net.0.lock().unwrap().clone();
    assert!(sent.iter().all(|(m, _, _)| m == "GET"), "{sent:?}");

    h.engine
        .decide(&held.call_id, Decision::Approve)
        .await
        .unwrap();
    assert_eq!(
        h.last_responses(),
        vec![obj(json!({"output": r#"{"id":"n1"}"#}))]
    );
    let sent = net.0.lock().unwrap().clone();
    let posts: Vec<&(String, String, String)> =
        sent.iter().filter(|(m, _, _)| m == "POST").collect();
    assert_eq!(
        posts,
        [&(
            "POST".to_owned(),
            "https://notes.example.com/api/notes".to_owned(),
            "post_note.py".to_owned()
        )],
        "sent once, after approval, naming its file"
    );
}

#[tokio::test]
async fn a_reading_tool_needs_no_approval_and_a_declared_one_always_does() {
    let reader = "def read_notes() -> str:\n    return ces_requests.get('https://notes.example.com/api/notes').text\n";
    let declared = "@tool(requires_approval=True)\ndef wipe() -> str:\n    return 'would wipe'\n";
    let h = engine_with(
        &[("read_notes.py", reader), ("wipe.py", declared)],
        vec![
            call("read_notes", json!({})),
            say("Read."),
            call("wipe", json!({})),
            say("Wiped."),
        ],
        Arc::new(Net::default()),
        json!({}),
    )
    .await;
    assert!(!h.extensions.tools[0].requires_approval(&Map::new()));
    assert_eq!(h.send("read").await.status, InvocationStatus::Completed);
    assert_eq!(h.send("wipe").await.status, InvocationStatus::Suspended);
    let held = h.engine.pending_calls().unwrap().remove(0);
    let preview = held.preview.unwrap();
    assert_eq!(preview.summary.en, "Run the Python tool wipe (wipe.py)");
    assert_eq!(preview.summary.zh, "运行 Python 工具 wipe（wipe.py）");
}
