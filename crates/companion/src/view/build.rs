//! The views built from the engine's records: a stored call's card, a stored event's entries,
//! a whole conversation. The high file of the folder: it reaches the labels, the notices and
//! the model's own items, which import the low files (call, timeline) themselves; nothing
//! imports this one to name a type but the UI's own api, so no circle runs through it.

use agent::engine::notice;
use agent::{CallRecord, CallStatus, Event, Part};
use serde::Serialize;
use serde_json::{Map, Value};
use ts_rs::TS;

use super::call::{CallView, PreviewView};
use super::timeline::{TimelineItem, ToolResultView};
use crate::autonomy::AutonomyView;
use crate::labels;
use crate::text::{Text, cut, snake};

// Here rather than in `timeline`: the autonomy it carries is a feature's, over the context,
// and `timeline` stays a leaf the features that make entries and turns can import.
/// A conversation, whole: its entries and the state of its calls.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct TimelineView {
    /// The session.
    pub session_id: String,
    /// Its entries, oldest first.
    pub items: Vec<TimelineItem>,
    /// Every call of the session the engine tracks.
    pub calls: Vec<CallView>,
    /// Whether a turn is running now.
    pub running: bool,
    /// How writes are treated in this conversation now.
    pub autonomy: AutonomyView,
}

impl From<&CallRecord> for CallView {
    fn from(c: &CallRecord) -> CallView {
        let pending = matches!(
            c.status,
            CallStatus::AwaitingApproval | CallStatus::AwaitingAuth | CallStatus::OutcomeUnknown
        );
        CallView {
            call_id: c.call_id.clone(),
            session_id: c.session_id.clone(),
            invocation_id: c.invocation_id.clone(),
            tool: c.tool.clone(),
            title: labels::tool_title(&c.tool),
            args: c.args.clone(),
            original_args: c.original_args.clone(),
            status: snake(&c.status),
            pending,
            requires_approval: c.requires_approval,
            preview: c.preview.as_ref().map(PreviewView::from),
            scopes: c.auth_scopes.iter().map(|s| labels::scope(s)).collect(),
            authorize_url: c.authorize_url.clone(),
            scope_apply_url: c.authorize_url.clone().filter(|u| {
                c.status == CallStatus::AwaitingAuth && feishu::config::is_scope_apply_page(u)
            }),
            verdict: c.decision.as_ref().map(|d| snake(&d.verdict)),
            decided_by: c.decision.as_ref().map(|d| d.decided_by.clone()),
            reason: c.decision.as_ref().and_then(|d| d.reason.clone()),
            reason_text: c
                .decision
                .as_ref()
                .and_then(|d| d.reason.as_deref())
                .and_then(crate::notices::translate),
            outcome: c.outcome.as_ref().map(snake),
            created_at: c.created_at,
            expires_at: c.expires_at,
            updated_at: c.updated_at,
            requester: crate::agents::registry::requester_name(&c.agent_name),
        }
    }
}

/// The most of a tool result the conversation shows.
const RESULT_CHARS: usize = 2_000;

/// The entries one stored event makes: text, tool calls, tool results, errors.
pub fn timeline_items(event: &Event) -> Vec<TimelineItem> {
    let mut items = Vec::new();
    if let Some(reasoning) = crate::model_items::reasoning(event) {
        items.push(reasoning);
    }
    if let Some(content) = &event.content {
        let text = content.text();
        if !text.trim().is_empty() {
            items.push(if content.is_user() && event.author == agent::USER_AUTHOR {
                TimelineItem::User {
                    id: event.id.clone(),
                    at: event.timestamp,
                    text,
                }
            } else {
                TimelineItem::Assistant {
                    id: event.id.clone(),
                    at: event.timestamp,
                    author: event.author.clone(),
                    text,
                    stopped: stopped(event),
                }
            });
        }
        for part in &content.parts {
            match part {
                Part::FunctionCall(call) => items.push(TimelineItem::Tool {
                    call_id: call.id.clone().unwrap_or_default(),
                    at: event.timestamp,
                    tool: call.name.clone(),
                    title: labels::tool_title(&call.name),
                    args: call.args.clone(),
                    result: None,
                }),
                Part::FunctionResponse(response) => items.push(TimelineItem::Tool {
                    call_id: response.id.clone().unwrap_or_default(),
                    at: event.timestamp,
                    tool: response.name.clone(),
                    title: labels::tool_title(&response.name),
                    args: Map::new(),
                    result: Some(result_view(&response.response)),
                }),
                Part::Text(_) | Part::InlineData(_) | Part::Reasoning(_) => {}
            }
        }
    }
    items.extend(crate::model_items::stopped(event));
    items.extend(crate::model_items::usage(event));
    if let Some(message) = &event.error_message {
        // The user's own acts (Stop, calling approvals off) are told, not alarmed about.
        let own = matches!(
            event.error_code.as_deref(),
            Some(notice::CANCELLED_CODE | notice::SUPERSEDED_CODE)
        );
        items.push(TimelineItem::Notice {
            id: event.id.clone(),
            at: event.timestamp,
            level: (if own { "info" } else { "error" }).to_owned(),
            text: message.clone(),
            message: crate::notices::notice(event.error_code.as_deref(), message),
            code: event.error_code.clone(),
            retry_at: crate::model_items::retry_at(event),
        });
    } else if event.interrupted && !stopped(event) {
        items.push(TimelineItem::Notice {
            id: event.id.clone(),
            at: event.timestamp,
            level: "info".to_owned(),
            text: "interrupted".to_owned(),
            message: Text::new("这一轮被中断了。", "This turn was interrupted."),
            code: None,
            retry_at: None,
        });
    }
    items
}

/// Whether `event` is an answer the user stopped half-way (kept, marked stopped).
fn stopped(event: &Event) -> bool {
    event.interrupted && event.error_code.as_deref() == Some(notice::STOPPED_CODE)
}

fn result_view(response: &Map<String, Value>) -> ToolResultView {
    let (is_error, value) = match (response.get("error"), response.get("output")) {
        (Some(error), _) => (true, error),
        (None, Some(output)) => (false, output),
        (None, None) => (false, &Value::Null),
    };
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    };
    ToolResultView {
        is_error,
        text: cut(&text, RESULT_CHARS),
        lines: if is_error {
            Vec::new()
        } else {
            crate::readable::lines(value)
        },
    }
}

/// A conversation's entries: a call's response merged into the entry of its call.
pub fn timeline(events: &[Event]) -> Vec<TimelineItem> {
    let mut items: Vec<TimelineItem> = Vec::new();
    let mut by_call: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for event in events.iter().filter(|e| !e.partial) {
        for item in timeline_items(event) {
            if let TimelineItem::Tool {
                call_id,
                result: Some(result),
                ..
            } = &item
                && let Some(&i) = by_call.get(call_id)
                && let Some(TimelineItem::Tool { result: slot, .. }) = items.get_mut(i)
            {
                *slot = Some(result.clone());
                continue;
            }
            if let TimelineItem::Tool { call_id, .. } = &item
                && !call_id.is_empty()
            {
                by_call.insert(call_id.clone(), items.len());
            }
            items.push(item);
        }
    }
    items
}
