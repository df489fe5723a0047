//! What the UI hears as it happens: the core's events shaped for the window, or nothing for
//! what it does not show.

use agent::Content;
use serde::Serialize;
use ts_rs::TS;

use super::build::timeline_items;
use super::call::CallView;
use super::settings::SignInView;
use super::timeline::TimelineItem;
use crate::connect::view::ConnectView;
use crate::events::UiEvent;
use crate::mcp::event::McpEvent;
use crate::text::{Text, snake};

/// What the UI hears, as it happens (the `companion://event` event).
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum UiEventView {
    /// A chunk of streamed assistant text, to append to the turn's draft.
    Text {
        /// The session.
        session_id: String,
        /// The turn.
        invocation_id: String,
        /// The new text.
        text: String,
    },
    /// Stored entries of a conversation (they replace the turn's draft).
    Items {
        /// The session.
        session_id: String,
        /// The turn.
        invocation_id: String,
        /// The entries.
        items: Vec<TimelineItem>,
    },
    /// A call changed.
    Call {
        /// Its new state.
        call: Box<CallView>,
    },
    /// A turn started, suspended or ended.
    Turn {
        /// The session.
        session_id: String,
        /// The turn.
        invocation_id: String,
        /// Its status.
        status: String,
    },
    /// A sign-in moved on.
    SignIn {
        /// Where it stands.
        status: SignInView,
    },
    /// Show this call ("Open in app" on its card in Feishu).
    OpenCall {
        /// The call.
        call_id: String,
    },
    /// Show the inbox ("Open in app" on the summary card in Feishu).
    OpenInbox,
    /// The calls whose approval card waits in Feishu now (sent there, not yet finished).
    RemoteCards {
        /// The calls.
        call_ids: Vec<String>,
    },
    /// "Connect my Feishu" moved on.
    Connect {
        /// Where it stands.
        status: ConnectView,
    },
    /// An MCP server started, stopped, failed or listed new tools: read them again.
    McpServers,
    /// An MCP server's question to the user arrived or went: read them again.
    McpQuestions,
    /// Getting the lark-mcp preset ready moved on (Settings → MCP servers).
    McpSetup {
        /// `node`, `npm` (downloads) or `lark-mcp` (the install).
        step: String,
        /// Bytes, or packages fetched.
        done: u64,
        /// Of how many, when known.
        total: Option<u64>,
        /// What it is doing.
        message: Text,
    },
    /// An MCP call reported progress, for its card.
    McpProgress {
        /// The call.
        call_id: String,
        /// How far.
        progress: f64,
        /// Of how much, if known.
        total: Option<f64>,
        /// What it is doing, in the server's words.
        message: Option<String>,
    },
}

impl UiEventView {
    /// The UI's view of an event, or `None` for what it does not show.
    pub fn from_event(event: &UiEvent) -> Option<UiEventView> {
        use agent::EngineEvent;
        match event {
            UiEvent::SignIn(status) => Some(UiEventView::SignIn {
                status: status.into(),
            }),
            UiEvent::OpenCall { call_id } => Some(UiEventView::OpenCall {
                call_id: call_id.clone(),
            }),
            UiEvent::OpenInbox => Some(UiEventView::OpenInbox),
            UiEvent::Mcp(McpEvent::Servers) => Some(UiEventView::McpServers),
            UiEvent::Mcp(McpEvent::Questions) => Some(UiEventView::McpQuestions),
            UiEvent::Mcp(McpEvent::Setup {
                step,
                done,
                total,
                message,
            }) => Some(UiEventView::McpSetup {
                step: step.clone(),
                done: *done,
                total: *total,
                message: message.clone(),
            }),
            UiEvent::Mcp(McpEvent::Progress {
                call_id,
                progress,
                total,
                message,
            }) => Some(UiEventView::McpProgress {
                call_id: call_id.clone(),
                progress: *progress,
                total: *total,
                message: message.clone(),
            }),
            UiEvent::RemoteCards { call_ids } => Some(UiEventView::RemoteCards {
                call_ids: call_ids.clone(),
            }),
            UiEvent::Connect(status) => Some(UiEventView::Connect {
                status: status.into(),
            }),
            UiEvent::Engine(e) => match &**e {
                EngineEvent::Event { session_id, event } if event.partial => {
                    let text = event.content.as_ref().map(Content::text)?;
                    (!text.is_empty()).then(|| UiEventView::Text {
                        session_id: session_id.clone(),
                        invocation_id: event.invocation_id.clone(),
                        text,
                    })
                }
                EngineEvent::Event { session_id, event } => {
                    let items = timeline_items(event);
                    (!items.is_empty()).then(|| UiEventView::Items {
                        session_id: session_id.clone(),
                        invocation_id: event.invocation_id.clone(),
                        items,
                    })
                }
                EngineEvent::Call(call) => Some(UiEventView::Call {
                    call: Box::new(CallView::from(call)),
                }),
                EngineEvent::Invocation(inv) => Some(UiEventView::Turn {
                    session_id: inv.session_id.clone(),
                    invocation_id: inv.id.clone(),
                    status: snake(&inv.status),
                }),
            },
        }
    }
}
