//! A conversation as the UI lists and shows it: the app's status, the sessions, the entries
//! of a timeline and where a turn stands. Types only, over leaves, so features that produce
//! entries or turns (model items, chat, waiting, connect) import them without a circle.

use serde::Serialize;
use serde_json::{Map, Value};
use ts_rs::TS;

use crate::text::{Text, snake};

/// About the running app, for the status bar and the demo banner.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct AppInfo {
    /// The app's version.
    pub version: String,
    /// Running on the built-in emulator and scripted model.
    pub demo: bool,
    /// The model in use, as the user named it ("DeepSeek · deepseek-chat", "Demo").
    pub model: String,
    /// `feishu` or `lark`.
    pub brand: String,
    /// Where the master key lives.
    pub key_source: String,
    /// A warning when the master key fell back to a key file.
    pub key_notice: Option<String>,
    /// The data folder (database, key file).
    pub data_dir: String,
    /// The redirect URL to register with the Feishu app, exactly.
    pub redirect_url: String,
    /// Whose conversations are listed: the person last signed in, even when that sign-in has
    /// ended; `null` before anyone signed in.
    pub person: Option<PersonView>,
}

/// A Feishu user the conversations belong to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct PersonView {
    /// Their name.
    pub name: String,
    /// Their open_id.
    pub open_id: String,
}

/// One conversation in the sessions list.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct SessionView {
    /// The session's id.
    pub id: String,
    /// The first words of its first message; empty for a new conversation.
    pub title: String,
    /// When it was created.
    #[ts(type = "number")]
    pub created_at: i64,
    /// When it last changed.
    #[ts(type = "number")]
    pub updated_at: i64,
    /// Calls waiting for the user in it.
    pub pending: u32,
}

/// What a tool call returned, briefly.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct ToolResultView {
    /// Whether the model was given an error.
    pub is_error: bool,
    /// The result as text, cut to a readable length.
    pub text: String,
    /// The list a read returned, one readable line per item (empty when it returned no list).
    pub lines: Vec<String>,
}

/// One entry of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TimelineItem {
    /// The user's message.
    User {
        /// The event id.
        id: String,
        /// When.
        #[ts(type = "number")]
        at: i64,
        /// What they wrote.
        text: String,
    },
    /// The assistant's text (Markdown, to be sanitised when rendered).
    Assistant {
        /// The event id.
        id: String,
        /// When.
        #[ts(type = "number")]
        at: i64,
        /// The agent's name.
        author: String,
        /// Markdown.
        text: String,
        /// The user stopped the answer while it was being written: this is what it had said.
        stopped: bool,
    },
    /// A tool call; its live state is the [`CallView`](super::call::CallView) of the same `call_id`, if any.
    Tool {
        /// The function call id.
        call_id: String,
        /// When it was proposed.
        #[ts(type = "number")]
        at: i64,
        /// The tool's name.
        tool: String,
        /// The tool in words.
        title: Text,
        /// The model's arguments.
        #[ts(type = "Record<string, unknown>")]
        args: Map<String, Value>,
        /// The response, once there is one.
        result: Option<ToolResultView>,
    },
    /// Something the user should know: an error, an interrupted turn.
    Notice {
        /// The event id.
        id: String,
        /// When.
        #[ts(type = "number")]
        at: i64,
        /// `error` or `info`.
        level: String,
        /// As the engine or the model service wrote it (for a tooltip).
        text: String,
        /// For the user, in their language.
        message: Text,
        /// The error's stable code (`rate_limited`, `quota_exceeded`, …), for words in the
        /// user's language; `None` for other notices.
        code: Option<String>,
        /// When a rate-limited request may be tried again (milliseconds since the epoch), when
        /// the service said.
        #[ts(type = "number | null")]
        retry_at: Option<i64>,
    },
    /// The model's reasoning before its answer, shown collapsed ("思考过程").
    Reasoning {
        /// The event id.
        id: String,
        /// When.
        #[ts(type = "number")]
        at: i64,
        /// The reasoning, as the model wrote it.
        text: String,
    },
    /// An answer that stopped short or was withheld, and why (an [`agent::FinishReason`] other
    /// than `stop` and `tool_calls`, in snake case).
    Stopped {
        /// The event id.
        id: String,
        /// When.
        #[ts(type = "number")]
        at: i64,
        /// `max_tokens`, `content_filter`, `refusal`, `recitation`, `malformed_function_call`,
        /// `other`.
        reason: String,
    },
    /// The tokens one model call of a turn cost; the UI sums a turn's.
    Usage {
        /// The event id.
        id: String,
        /// The turn.
        invocation_id: String,
        /// When.
        #[ts(type = "number")]
        at: i64,
        /// Tokens of the request.
        #[ts(type = "number")]
        input_tokens: u64,
        /// Tokens generated, reasoning included.
        #[ts(type = "number")]
        output_tokens: u64,
        /// Of those, tokens spent reasoning.
        #[ts(type = "number")]
        reasoning_tokens: u64,
    },
}

/// Where a turn stands after an action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct TurnView {
    /// The turn.
    pub invocation_id: String,
    /// `running`, `suspended`, `completed`, `cancelled`, `superseded`, `failed`, `interrupted`.
    pub status: String,
}

impl From<agent::TurnOutcome> for TurnView {
    fn from(t: agent::TurnOutcome) -> TurnView {
        TurnView {
            invocation_id: t.invocation_id,
            status: snake(&t.status),
        }
    }
}
