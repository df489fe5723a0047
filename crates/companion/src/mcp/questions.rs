//! A server's question to the user in the middle of a call (MCP elicitation): a form to fill in,
//! or a page of the server's to open. Each waits as a card until the user answers, declines or
//! dismisses it; a form's values are checked against the server's schema before they go back.
//! A question nobody answers is dismissed after the server's own timeout, when the call that
//! asked has given up anyway. Nothing here opens a page: for a URL the card asks first, and the
//! window opens it only when the user says so.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use mcp::{ElicitAnswer, ElicitModes, ElicitRequest, Elicitor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::{broadcast, oneshot};
use ts_rs::TS;

use crate::sync::lock;

/// How long a question waits when its server's timeout is not known.
const DEFAULT_WAIT: Duration = Duration::from_secs(10 * 60);

/// A question as its card shows it.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct McpQuestionView {
    /// Its id, to answer it by.
    pub id: String,
    /// The server that asks.
    pub server_id: String,
    /// `form` or `url`.
    pub kind: String,
    /// Why the server asks, in its words.
    pub message: String,
    /// The form's schema (`form`): a flat object of strings, numbers, booleans and enums.
    #[ts(type = "unknown")]
    pub schema: Value,
    /// The values the form starts with (the schema's defaults).
    #[ts(type = "Record<string, unknown>")]
    pub defaults: Map<String, Value>,
    /// The page to open (`url`).
    pub url: Option<String>,
    /// When it stops waiting (ms since the epoch).
    #[ts(type = "number")]
    pub expires_at: i64,
}

/// The user's answer, as the card sends it.
#[derive(Debug, Clone, PartialEq, Deserialize, TS)]
pub struct McpAnswerInput {
    /// `accept`, `decline` or `cancel`.
    pub action: String,
    /// The form's values (`accept` of a form).
    #[serde(default)]
    #[ts(type = "Record<string, unknown> | null")]
    pub content: Option<Map<String, Value>>,
}

struct Waiting {
    view: McpQuestionView,
    answer: oneshot::Sender<ElicitAnswer>,
}

/// The app's elicitor: questions wait here for the user.
pub(crate) struct Questions {
    waiting: Mutex<BTreeMap<String, Waiting>>,
    /// Fired when a question arrives or goes (the UI reads them again).
    changed: broadcast::Sender<()>,
    /// Each server's timeout, by id (a question waits as long as its call would).
    waits: Mutex<BTreeMap<String, Duration>>,
}

impl std::fmt::Debug for Questions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Questions").finish_non_exhaustive()
    }
}

impl Questions {
    pub(crate) fn new() -> Arc<Questions> {
        Arc::new(Questions {
            waiting: Mutex::new(BTreeMap::new()),
            changed: broadcast::channel(64).0,
            waits: Mutex::new(BTreeMap::new()),
        })
    }

    /// Fires when the questions change.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<()> {
        self.changed.subscribe()
    }

    /// Takes each server's timeout as the time its questions wait.
    pub(crate) fn set_waits(&self, waits: BTreeMap<String, Duration>) {
        *lock(&self.waits) = waits;
    }

    /// The questions waiting, oldest first.
    pub(crate) fn views(&self) -> Vec<McpQuestionView> {
        let mut views: Vec<_> = lock(&self.waiting)
            .values()
            .map(|w| w.view.clone())
            .collect();
        views.sort_by_key(|v| v.expires_at);
        views
    }

    /// The user's answer to question `id`; an error says what is wrong with the values, and
    /// the question keeps waiting.
    pub(crate) fn answer(&self, id: &str, input: McpAnswerInput) -> Result<(), String> {
        let mut waiting = lock(&self.waiting);
        let question = waiting
            .get(id)
            .ok_or_else(|| "这个问题已经不在等待了 / this question no longer waits".to_owned())?;
        let answer = match input.action.as_str() {
            "decline" => ElicitAnswer::Decline,
            "cancel" => ElicitAnswer::Cancel,
            "accept" if question.view.kind == "url" => ElicitAnswer::Accept(Map::new()),
            "accept" => {
                let values = input.content.unwrap_or_default();
                check(&question.view.schema, &values)?;
                ElicitAnswer::Accept(values)
            }
            other => return Err(format!("unknown answer {other:?}")),
        };
        if let Some(question) = waiting.remove(id) {
            let _ = question.answer.send(answer);
        }
        drop(waiting);
        let _ = self.changed.send(());
        Ok(())
    }
}

/// Checks a form's values against its schema: required fields present, each value of its type
/// and, for an enum, one of its values. The server checks too; this keeps a mistyped answer on
/// the card instead of failing the call.
fn check(schema: &Value, values: &Map<String, Value>) -> Result<(), String> {
    let properties = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for name in schema["required"].as_array().into_iter().flatten() {
        let name = name.as_str().unwrap_or_default();
        if !values.contains_key(name) {
            return Err(format!("「{name}」必填 / {name} is required"));
        }
    }
    for (name, value) in values {
        let Some(property) = properties.get(name) else {
            return Err(format!("the server did not ask for {name}"));
        };
        let fits = match property["type"].as_str().unwrap_or("string") {
            "string" => value.is_string(),
            "number" => value.is_number(),
            "integer" => value.is_i64() || value.is_u64(),
            "boolean" => value.is_boolean(),
            _ => true,
        };
        let listed = match property["enum"].as_array() {
            Some(allowed) => allowed.contains(value),
            None => true,
        };
        if !fits || !listed {
            return Err(format!(
                "「{name}」的值不合要求 / {name}: {value} is not what the server asks for"
            ));
        }
    }
    Ok(())
}

fn millis_from_now(wait: Duration) -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    i64::try_from(now + wait.as_millis()).unwrap_or(i64::MAX)
}

#[async_trait]
impl Elicitor for Questions {
    fn modes(&self) -> ElicitModes {
        ElicitModes {
            form: true,
            url: true,
        }
    }

    async fn elicit(&self, server_id: &str, request: ElicitRequest) -> ElicitAnswer {
        let wait = lock(&self.waits)
            .get(server_id)
            .copied()
            .unwrap_or(DEFAULT_WAIT);
        let id = uuid::Uuid::new_v4().to_string();
        let view = match request {
            ElicitRequest::Form { message, schema } => McpQuestionView {
                id: id.clone(),
                server_id: server_id.to_owned(),
                kind: "form".to_owned(),
                message,
                defaults: mcp::elicit::defaults(&schema),
                schema,
                url: None,
                expires_at: millis_from_now(wait),
            },
            ElicitRequest::Url { message, url, .. } => McpQuestionView {
                id: id.clone(),
                server_id: server_id.to_owned(),
                kind: "url".to_owned(),
                message,
                schema: Value::Null,
                defaults: Map::new(),
                url: Some(url),
                expires_at: millis_from_now(wait),
            },
        };
        let (tx, rx) = oneshot::channel();
        lock(&self.waiting).insert(id.clone(), Waiting { view, answer: tx });
        let _ = self.changed.send(());
        let answer = match tokio::time::timeout(wait, rx).await {
            Ok(Ok(answer)) => answer,
            // Unanswered in time, or the app closing: dismissed, not declined.
            _ => ElicitAnswer::Cancel,
        };
        if lock(&self.waiting).remove(&id).is_some() {
            let _ = self.changed.send(());
        }
        answer
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form() -> ElicitRequest {
        ElicitRequest::Form {
            message: "Which project?".into(),
            schema: json!({"type": "object", "properties": {
                "project": {"type": "string", "enum": ["a", "b"], "default": "a"},
                "count": {"type": "integer"}
            }, "required": ["project"]}),
        }
    }

    #[tokio::test]
    async fn a_form_waits_for_the_users_checked_answer() {
        let q = Questions::new();
        let mut changed = q.subscribe();
        let asking = {
            let q = q.clone();
            tokio::spawn(async move { q.elicit("notes", form()).await })
        };
        changed.recv().await.unwrap();
        let view = q.views().remove(0);
        assert_eq!(
            (view.kind.as_str(), view.server_id.as_str()),
            ("form", "notes")
        );
        assert_eq!(view.defaults["project"], "a");
        let bad = McpAnswerInput {
            action: "accept".into(),
            content: Some(json!({"project": "c"}).as_object().unwrap().clone()),
        };
        assert!(
            q.answer(&view.id, bad).is_err(),
            "not one of the enum's values"
        );
        let missing = McpAnswerInput {
            action: "accept".into(),
            content: Some(Map::new()),
        };
        assert!(q.answer(&view.id, missing).unwrap_err().contains("project"));
        let good = McpAnswerInput {
            action: "accept".into(),
            content: Some(
                json!({"project": "b", "count": 2})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        };
        q.answer(&view.id, good).unwrap();
        match asking.await.unwrap() {
            ElicitAnswer::Accept(values) => assert_eq!(values["project"], "b"),
            other => panic!("{other:?}"),
        }
        assert!(q.views().is_empty());
        assert!(
            q.answer(
                &view.id,
                McpAnswerInput {
                    action: "decline".into(),
                    content: None
                }
            )
            .is_err()
        );
    }

    #[tokio::test]
    async fn an_unanswered_question_is_dismissed_after_the_servers_timeout() {
        let q = Questions::new();
        q.set_waits([("notes".to_owned(), Duration::from_millis(50))].into());
        let url = ElicitRequest::Url {
            message: "Pay".into(),
            url: "https://example.com/pay".into(),
            elicitation_id: "e1".into(),
        };
        assert_eq!(q.elicit("notes", url).await, ElicitAnswer::Cancel);
        assert!(q.views().is_empty());
    }
}
