//! What the UI sees: the engine's records reshaped for display, with every label in both
//! languages, and nothing secret. The TypeScript types of `ui/src/lib/bindings/` are generated
//! from these (ts-rs); a test fails when the committed bindings fall behind.
//!
//! Times are milliseconds since the Unix epoch, as numbers (ts-rs would make `i64` a `bigint`,
//! which JSON does not carry).

use agent::engine::notice;
use agent::persist::{AuditEntry, AuditFilter};
use agent::{CallRecord, CallStatus, Content, Decision, Event, Part, Rule, Settlement};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use ts_rs::TS;

pub use crate::autonomy::{AutonomyInput, AutonomyView};
pub use crate::edit::EditCheckView;
use crate::labels;
pub use crate::text::Text;
use crate::text::{cut, snake};

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
    /// A tool call; its live state is the [`CallView`] of the same `call_id`, if any.
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

/// A permission, in plain words; the raw scope stays available for a tooltip.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct ScopeView {
    /// The Feishu scope string.
    pub scope: String,
    /// What it lets the assistant do.
    pub label: Text,
}

/// One labelled value of a preview.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct PreviewFieldView {
    /// The label.
    pub label: Text,
    /// The value as the user knows it.
    pub value: String,
}

/// One change an update makes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct PreviewChangeView {
    /// What changes.
    pub field: Text,
    /// Its value now.
    pub from: String,
    /// Its value after.
    pub to: String,
}

/// A write described for the person approving it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct PreviewView {
    /// One line: what will happen.
    pub summary: Text,
    /// `normal` or `high`.
    pub risk: String,
    /// The particulars.
    pub fields: Vec<PreviewFieldView>,
    /// For updates: from what to what.
    pub changes: Vec<PreviewChangeView>,
}

impl From<&agent::Preview> for PreviewView {
    fn from(p: &agent::Preview) -> PreviewView {
        PreviewView {
            summary: (&p.summary).into(),
            risk: snake(&p.risk),
            fields: p
                .fields
                .iter()
                .map(|f| PreviewFieldView {
                    label: (&f.label).into(),
                    value: f.value.clone(),
                })
                .collect(),
            changes: p
                .changes
                .iter()
                .map(|ch| PreviewChangeView {
                    field: (&ch.field).into(),
                    from: ch.from.clone(),
                    to: ch.to.clone(),
                })
                .collect(),
        }
    }
}

/// A call the engine tracks: held for approval or sign-in, running, or done.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct CallView {
    /// The function call id.
    pub call_id: String,
    /// The session.
    pub session_id: String,
    /// The turn.
    pub invocation_id: String,
    /// The tool's name.
    pub tool: String,
    /// The tool in words.
    pub title: Text,
    /// The arguments to be (or that were) sent.
    #[ts(type = "Record<string, unknown>")]
    pub args: Map<String, Value>,
    /// The model's own arguments, when the user edited them.
    #[ts(type = "Record<string, unknown> | null")]
    pub original_args: Option<Map<String, Value>>,
    /// `awaiting_approval`, `approved`, `dispatching`, `awaiting_auth`, `outcome_unknown`, `done`.
    pub status: String,
    /// Whether it waits for the user now.
    pub pending: bool,
    /// Whether the tool writes (so it needed approval).
    pub requires_approval: bool,
    /// What the write will do, for the approval card.
    pub preview: Option<PreviewView>,
    /// The permissions it waits for (`awaiting_auth`).
    pub scopes: Vec<ScopeView>,
    /// The fallback sign-in link the tool gave.
    pub authorize_url: Option<String>,
    /// The app itself lacks the permission (99991672): Feishu's page to apply for it. Signing
    /// in does not help; applying does (an administrator may have to approve), then Retry.
    pub scope_apply_url: Option<String>,
    /// `approved`, `approved_edited`, `rejected`, `expired`, `superseded`, `cancelled`.
    pub verdict: Option<String>,
    /// `user` or `rule:<id>`.
    pub decided_by: Option<String>,
    /// The reason of a rejection, or the note of an expiry.
    pub reason: Option<String>,
    /// The reason in the user's language when the engine wrote it (expiry, cancellation…);
    /// `null` for the user's own words.
    pub reason_text: Option<Text>,
    /// The tool's outcome, once done (`completed`, `failed`, `blocked`…).
    pub outcome: Option<String>,
    /// When it was proposed.
    #[ts(type = "number")]
    pub created_at: i64,
    /// When a pending approval expires.
    #[ts(type = "number | null")]
    pub expires_at: Option<i64>,
    /// When it last changed.
    #[ts(type = "number")]
    pub updated_at: i64,
    /// The connected agent that asked for it ("Claude Code"), when another agent did.
    pub requester: Option<String>,
}

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

/// The user's decision on a held call, as the UI sends it.
#[derive(Debug, Clone, PartialEq, Deserialize, TS)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DecisionInput {
    /// Run it as proposed.
    Approve,
    /// Run it with these arguments.
    ApproveEdited {
        /// The edited arguments.
        #[ts(type = "Record<string, unknown>")]
        args: Map<String, Value>,
    },
    /// Do not run it.
    Reject {
        /// Why, optionally.
        reason: Option<String>,
    },
    /// Run it, and this tool from now on without asking when the arguments match.
    AlwaysAllow {
        /// Argument values later calls must have; empty for any call.
        #[ts(type = "Record<string, unknown>")]
        constraints: Map<String, Value>,
        /// When the rule lapses; `null`: never.
        #[ts(type = "number | null")]
        expires_at: Option<i64>,
    },
}

impl From<DecisionInput> for Decision {
    fn from(d: DecisionInput) -> Decision {
        match d {
            DecisionInput::Approve => Decision::Approve,
            DecisionInput::ApproveEdited { args } => Decision::ApproveEdited(args),
            DecisionInput::Reject { reason } => Decision::Reject {
                reason: reason
                    .map(|r| r.trim().to_owned())
                    .filter(|r| !r.is_empty()),
            },
            DecisionInput::AlwaysAllow {
                constraints,
                expires_at,
            } => Decision::AlwaysAllow {
                constraints,
                expires_at,
            },
        }
    }
}

/// One decision of a batch.
#[derive(Debug, Clone, PartialEq, Deserialize, TS)]
pub struct BatchDecision {
    /// The call.
    pub call_id: String,
    /// What to do with it.
    pub decision: DecisionInput,
}

/// The user's word on a write whose outcome a crash made unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum SettlementInput {
    /// It happened.
    Happened,
    /// It did not.
    DidNotHappen,
    /// Send it again with the same idempotency key.
    Retry,
}

impl From<SettlementInput> for Settlement {
    fn from(s: SettlementInput) -> Settlement {
        match s {
            SettlementInput::Happened => Settlement::Happened,
            SettlementInput::DidNotHappen => Settlement::DidNotHappen,
            SettlementInput::Retry => Settlement::Retry,
        }
    }
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

/// An always/never rule.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct RuleView {
    /// The rule's id.
    pub id: String,
    /// The tool.
    pub tool: String,
    /// The tool in words.
    pub title: Text,
    /// `always_allow` or `never_allow`.
    pub effect: String,
    /// Argument values a call must have; empty for any call.
    #[ts(type = "Record<string, unknown>")]
    pub constraints: Map<String, Value>,
    /// When it lapses.
    #[ts(type = "number | null")]
    pub expires_at: Option<i64>,
    /// When it was made.
    #[ts(type = "number")]
    pub created_at: i64,
    /// When it was revoked.
    #[ts(type = "number | null")]
    pub revoked_at: Option<i64>,
}

impl From<Rule> for RuleView {
    fn from(r: Rule) -> RuleView {
        RuleView {
            title: labels::tool_title(&r.tool),
            effect: snake(&r.effect),
            id: r.id,
            tool: r.tool,
            constraints: r.arg_constraints,
            expires_at: r.expires_at,
            created_at: r.created_at,
            revoked_at: r.revoked_at,
        }
    }
}

/// One line of the audit trail.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct AuditView {
    /// When.
    #[ts(type = "number")]
    pub at: i64,
    /// The session.
    pub session_id: Option<String>,
    /// The call.
    pub call_id: Option<String>,
    /// The tool.
    pub tool: Option<String>,
    /// `approval.requested`, `approval.approved`, `call.dispatched`…
    pub kind: String,
    /// The kind in words.
    pub label: Text,
    /// `user`, `agent:<name>`, `rule:<id>`, `engine`.
    pub actor: String,
    /// The tool in words, if any.
    pub tool_title: Option<Text>,
    /// The particulars.
    #[ts(type = "unknown")]
    pub detail: Value,
}

/// A tool in words; a user's Python tool names its file and function (the audit's `source`).
fn python_tool_title(tool: &str, detail: &Value) -> Text {
    let source = &detail["source"];
    match (source["python_file"].as_str(), source["function"].as_str()) {
        (Some(file), Some(function)) => Text::new(
            format!("Python 工具 {tool}（{file} · def {function}）"),
            format!("Python tool {tool} ({file} · def {function})"),
        ),
        _ => labels::tool_title(tool),
    }
}

impl From<AuditEntry> for AuditView {
    fn from(a: AuditEntry) -> AuditView {
        AuditView {
            label: labels::audit_kind(&a.kind),
            tool_title: a
                .tool
                .as_deref()
                .map(|tool| python_tool_title(tool, &a.detail)),
            at: a.at,
            session_id: a.session_id,
            call_id: a.call_id,
            tool: a.tool,
            kind: a.kind,
            actor: a.actor,
            detail: a.detail,
        }
    }
}

/// Which audit lines to read.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, TS)]
#[serde(default)]
pub struct AuditQuery {
    /// Only this session's.
    pub session_id: Option<String>,
    /// Only this tool's.
    pub tool: Option<String>,
    /// Only kinds starting with this (`approval.`, `call.`, `rule.`).
    pub kind_prefix: Option<String>,
    /// Only at or after this time.
    #[ts(type = "number | null")]
    pub since: Option<i64>,
    /// At most this many, newest first.
    pub limit: Option<u32>,
}

impl From<&AuditQuery> for AuditFilter {
    fn from(q: &AuditQuery) -> AuditFilter {
        let nonempty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
        AuditFilter {
            session_id: nonempty(&q.session_id),
            tool: nonempty(&q.tool),
            kind_prefix: nonempty(&q.kind_prefix),
            since: q.since,
            limit: q.limit.map(|l| l as usize),
        }
    }
}

/// How to export the audit trail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum ExportFormat {
    /// A JSON array.
    Json,
    /// Comma-separated values with a header row.
    Csv,
}

/// The signed-in Feishu account, without its tokens.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct AccountView {
    /// The user's name.
    pub name: String,
    /// The user's open_id.
    pub open_id: String,
    /// Every permission granted.
    pub scopes: Vec<ScopeView>,
    /// When the access token expires (it is refreshed ahead of time).
    #[ts(type = "number")]
    pub expires_at: i64,
    /// When the user must sign in again at the latest.
    #[ts(type = "number | null")]
    pub refresh_expires_at: Option<i64>,
}

impl From<feishu::Account> for AccountView {
    fn from(a: feishu::Account) -> AccountView {
        let (name, open_id) = match a.user {
            Some(u) => (u.name, u.open_id),
            None => (String::new(), String::new()),
        };
        AccountView {
            name,
            open_id,
            scopes: a.scopes.iter().map(|s| labels::scope(s)).collect(),
            expires_at: a.expires_at,
            refresh_expires_at: a.refresh_expires_at,
        }
    }
}

/// A model preset the user can pick.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct PresetView {
    /// The id stored in settings.
    pub id: String,
    /// Its name.
    pub name: Text,
    /// `openai_compatible`, `anthropic`, `gemini`.
    pub kind: String,
    /// The API root; empty when the user enters it.
    pub base_url: String,
    /// The model used unless the user names another.
    pub default_model: String,
    /// Whether it takes an API key.
    pub takes_key: bool,
    /// Whether its API key is stored.
    pub key_set: bool,
}

/// The models a preset's service offers, for the model picker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct ModelListView {
    /// The preset asked.
    pub preset: String,
    /// The model ids the service listed (with the selected one, even if unlisted), sorted.
    pub models: Vec<String>,
    /// The one to preselect: the model saved for this preset, else the preset's default.
    pub selected: String,
    /// The preset's default model.
    pub default_model: String,
}

/// The settings page: the settings and what goes with them.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct SettingsView {
    /// What the user set.
    pub settings: crate::Settings,
    /// The redirect URL to register with the Feishu app for the chosen port, exactly.
    pub redirect_url: String,
    /// The model presets.
    pub presets: Vec<PresetView>,
    /// Whether the App Secret is stored.
    pub app_secret_set: bool,
    /// The system's time zone, shown when the setting is empty.
    pub system_time_zone: String,
    /// The user scopes to enable for a self-built Feishu app, in plain words.
    pub app_scopes: Vec<ScopeView>,
}

/// The answer to saving settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct SavedSettings {
    /// Always false: settings apply at once (kept so the UI can still say otherwise).
    pub restart_needed: bool,
}

/// Where a sign-in stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SignInView {
    /// Waiting for the user on Feishu's page.
    Waiting {
        /// The authorize page (a device sign-in's verification page).
        url: String,
        /// A device sign-in's code and QR code: shown on the card instead of a window.
        device: Option<crate::connect::view::DeviceCodeView>,
    },
    /// A device sign-in's code ran out before anyone confirmed.
    Expired,
    /// Signed in; held calls run again.
    SignedIn {
        /// Who.
        name: String,
        /// What they granted.
        scopes: Vec<ScopeView>,
        /// Who was signed in before, when it was someone else (their data is now kept apart).
        switched_from: Option<String>,
    },
    /// The user declined on Feishu's page.
    Declined,
    /// It failed.
    Failed {
        /// Why, and what to do.
        message: String,
    },
    /// Feishu refused it, or it timed out: which setting to change, with the exact value.
    Refused {
        /// The problem in words.
        problem: crate::sign_in_help::SignInProblemView,
    },
    /// It continues in the system browser (the company's own sign-in page).
    InBrowser,
}

impl From<&crate::SignInStatus> for SignInView {
    fn from(s: &crate::SignInStatus) -> SignInView {
        match s {
            crate::SignInStatus::Waiting { url, device } => SignInView::Waiting {
                url: url.clone(),
                device: device.as_ref().map(Into::into),
            },
            crate::SignInStatus::Expired => SignInView::Expired,
            crate::SignInStatus::SignedIn {
                name,
                scopes,
                switched_from,
            } => SignInView::SignedIn {
                name: name.clone(),
                scopes: scopes.iter().map(|s| labels::scope(s)).collect(),
                switched_from: switched_from.clone(),
            },
            crate::SignInStatus::Declined => SignInView::Declined,
            crate::SignInStatus::Failed { message } => SignInView::Failed {
                message: message.clone(),
            },
            crate::SignInStatus::Refused { problem } => SignInView::Refused {
                problem: problem.clone(),
            },
            crate::SignInStatus::InBrowser => SignInView::InBrowser,
        }
    }
}

/// A sign-in started: the page to open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct SignInTicketView {
    /// The authorize page (embedded window or system browser).
    pub url: String,
    /// Where Feishu sends the browser back (empty for a device sign-in).
    pub redirect_uri: String,
    /// A device sign-in's code and QR code.
    pub device: Option<crate::connect::view::DeviceCodeView>,
}

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
        status: crate::connect::view::ConnectView,
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
    pub fn from_event(event: &crate::UiEvent) -> Option<UiEventView> {
        use agent::EngineEvent;
        match event {
            crate::UiEvent::SignIn(status) => Some(UiEventView::SignIn {
                status: status.into(),
            }),
            crate::UiEvent::OpenCall { call_id } => Some(UiEventView::OpenCall {
                call_id: call_id.clone(),
            }),
            crate::UiEvent::OpenInbox => Some(UiEventView::OpenInbox),
            crate::UiEvent::Mcp(crate::mcp::McpEvent::Servers) => Some(UiEventView::McpServers),
            crate::UiEvent::Mcp(crate::mcp::McpEvent::Questions) => Some(UiEventView::McpQuestions),
            crate::UiEvent::Mcp(crate::mcp::McpEvent::Setup {
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
            crate::UiEvent::Mcp(crate::mcp::McpEvent::Progress {
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
            crate::UiEvent::RemoteCards { call_ids } => Some(UiEventView::RemoteCards {
                call_ids: call_ids.clone(),
            }),
            crate::UiEvent::Connect(status) => Some(UiEventView::Connect {
                status: status.into(),
            }),
            crate::UiEvent::Engine(e) => match &**e {
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
            requester: crate::agents::requester_name(&c.agent_name),
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

/// Every audit line as CSV, with a header row; fields quoted where needed.
pub fn audit_csv(entries: &[AuditView]) -> String {
    fn field(s: &str) -> String {
        if s.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_owned()
        }
    }
    let mut out = String::from("time,kind,actor,tool,session_id,call_id,detail\n");
    for e in entries {
        let time = jiff::Timestamp::from_millisecond(e.at)
            .map(|t| t.to_string())
            .unwrap_or_else(|_| e.at.to_string());
        let row = [
            time,
            e.kind.clone(),
            e.actor.clone(),
            e.tool.clone().unwrap_or_default(),
            e.session_id.clone().unwrap_or_default(),
            e.call_id.clone().unwrap_or_default(),
            if e.detail.is_null() {
                String::new()
            } else {
                e.detail.to_string()
            },
        ];
        let row: Vec<String> = row.iter().map(|s| field(s)).collect();
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_what_needs_quoting() {
        let entry = AuditView {
            at: 0,
            session_id: Some("s1".into()),
            call_id: None,
            tool: Some("send_message".into()),
            kind: "approval.rejected".into(),
            label: labels::audit_kind("approval.rejected"),
            actor: "user".into(),
            tool_title: Some(labels::tool_title("send_message")),
            detail: serde_json::json!({"reason": "不要, \"现在\""}),
        };
        let csv = audit_csv(&[entry]);
        let mut lines = csv.lines();
        assert_eq!(
            lines.next(),
            Some("time,kind,actor,tool,session_id,call_id,detail")
        );
        assert_eq!(
            lines.next(),
            Some(
                r#"1970-01-01T00:00:00Z,approval.rejected,user,send_message,s1,,"{""reason"":""不要, \""现在\""""}""#
            )
        );
    }

    #[test]
    fn cut_keeps_whole_characters() {
        assert_eq!(cut("飞书助手", 2), "飞书…");
        assert_eq!(cut("飞书", 2), "飞书");
    }

    #[test]
    fn rejection_reasons_are_trimmed_and_blank_ones_dropped() {
        let d: Decision = DecisionInput::Reject {
            reason: Some("  ".into()),
        }
        .into();
        assert_eq!(d, Decision::Reject { reason: None });
        let d: Decision = DecisionInput::Reject {
            reason: Some(" 改到周五 ".into()),
        }
        .into();
        assert_eq!(
            d,
            Decision::Reject {
                reason: Some("改到周五".into())
            }
        );
    }

    #[test]
    fn decisions_parse_from_the_ui_shape() {
        let d: DecisionInput = serde_json::from_str(
            r#"{"kind":"always_allow","constraints":{"chat_id":"oc_1"},"expires_at":null}"#,
        )
        .unwrap();
        assert!(matches!(d, DecisionInput::AlwaysAllow { .. }));
        assert!(serde_json::from_str::<DecisionInput>(r#"{"kind":"maybe"}"#).is_err());
    }
}
