//! Tools as the engine runs them: a name, a description, a JSON-Schema for the arguments, whether
//! a call needs the user's approval, the Feishu scopes it needs, and whether Feishu deduplicates
//! its writes by idempotency key (which decides what happens to a write interrupted by a crash).

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::context::ToolContext;
use crate::llm::FunctionDeclaration;
use crate::result::ToolReturn;

/// A function the agent's model can call.
#[async_trait]
pub trait AgentTool: Send + Sync {
    /// The function's name, as the model calls it.
    fn name(&self) -> &str;

    /// What it does, for the model.
    fn description(&self) -> &str;

    /// The arguments' JSON Schema (an object schema).
    fn parameters(&self) -> Value;

    /// Whether this call must wait for the user's approval before it runs. Writes say yes.
    fn requires_approval(&self, _args: &Map<String, Value>) -> bool {
        false
    }

    /// Checks the arguments beyond what the JSON Schema can say (for instance that an id cannot
    /// leave its endpoint). Run by the engine with the schema, before a call is held or run; the
    /// error is shown to the model and recorded in the audit trail.
    fn check_args(&self, _args: &Map<String, Value>) -> Result<(), String> {
        Ok(())
    }

    /// The Feishu scopes the tool needs.
    fn scopes(&self) -> Vec<String> {
        Vec::new()
    }

    /// Whether the service deduplicates this tool's writes by the call's idempotency key, so a
    /// write interrupted by a crash may be sent again with the same key.
    fn deduplicates(&self) -> bool {
        false
    }

    /// What the call will do, in words, for the approval card (both languages). Called once
    /// when a call is held for approval; `None` leaves the card to show the arguments alone.
    async fn preview(&self, _args: &Map<String, Value>) -> Option<Preview> {
        None
    }

    /// Checks with the service that the ids in arguments the user edited name real things (an
    /// invited person who exists). Run when a held call's arguments are edited, before Approve
    /// is offered, and again when the edited call is approved, so a mistyped id is refused in
    /// the editor instead of failing after the approval. `Err` says what was not found, in the
    /// user's words. A check that cannot be made (offline, not signed in) is not a refusal.
    async fn verify(&self, _args: &Map<String, Value>) -> Result<(), Localized> {
        Ok(())
    }

    /// Where the tool's code comes from, for the audit trail: a user's Python file and function,
    /// say. `None` for the app's own tools.
    fn source(&self) -> Option<Value> {
        None
    }

    /// Runs the call. `ctx.idempotency_key` is the key a write must pass to the service.
    async fn run(&self, args: Map<String, Value>, ctx: &mut ToolContext) -> ToolReturn;

    /// The declaration shown to the model.
    fn declaration(&self) -> FunctionDeclaration {
        FunctionDeclaration::new(self.name(), self.description(), self.parameters())
    }
}

/// Decides from the arguments whether a call needs approval.
pub type ApprovalPredicate = Arc<dyn Fn(&Map<String, Value>) -> bool + Send + Sync>;

/// Text in both of the app's languages.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Localized {
    /// Simplified Chinese.
    pub zh: String,
    /// English.
    pub en: String,
}

impl Localized {
    /// Text in Chinese and English.
    pub fn new(zh: impl Into<String>, en: impl Into<String>) -> Self {
        Localized {
            zh: zh.into(),
            en: en.into(),
        }
    }
}

/// How much care a call deserves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    /// An ordinary write.
    #[default]
    Normal,
    /// Hard to undo or seen by many: deleting, messaging a large group.
    High,
}

/// One labelled value of a preview ("Recipient: 产品周会").
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PreviewField {
    /// The label.
    pub label: Localized,
    /// The value, as the user knows it (names, local times), not raw ids.
    pub value: String,
}

/// One change an update makes ("Start: 14:00 → 15:00").
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PreviewChange {
    /// What changes.
    pub field: Localized,
    /// Its value now.
    pub from: String,
    /// Its value after the call.
    pub to: String,
}

/// A write described for the person approving it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Preview {
    /// One line: what will happen ("Send a message to 产品周会 as you").
    pub summary: Localized,
    /// How much care it deserves.
    #[serde(default)]
    pub risk: Risk,
    /// The particulars.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<PreviewField>,
    /// For updates: what changes from what to what.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<PreviewChange>,
}

/// When a [`FunctionTool`] needs approval.
#[derive(Clone, Default)]
pub enum Approval {
    /// Never: a read.
    #[default]
    Never,
    /// Always: a write.
    Always,
    /// Depending on the arguments (e.g. only for chats with many members).
    When(ApprovalPredicate),
}

impl fmt::Debug for Approval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Approval::Never => f.write_str("Never"),
            Approval::Always => f.write_str("Always"),
            Approval::When(_) => f.write_str("When(..)"),
        }
    }
}

type Handler = Arc<dyn Fn(Map<String, Value>, &mut ToolContext) -> ToolReturn + Send + Sync>;

/// A tool made of a synchronous function: for simple tools and tests.
#[derive(Clone)]
pub struct FunctionTool {
    name: String,
    description: String,
    parameters: Value,
    approval: Approval,
    scopes: Vec<String>,
    deduplicates: bool,
    handler: Handler,
}

impl fmt::Debug for FunctionTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FunctionTool")
            .field("name", &self.name)
            .field("approval", &self.approval)
            .field("scopes", &self.scopes)
            .field("deduplicates", &self.deduplicates)
            .finish_non_exhaustive()
    }
}

impl FunctionTool {
    /// A read tool (no approval) running `handler`.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        handler: impl Fn(Map<String, Value>, &mut ToolContext) -> ToolReturn + Send + Sync + 'static,
    ) -> Self {
        FunctionTool {
            name: name.into(),
            description: description.into(),
            parameters,
            approval: Approval::Never,
            scopes: Vec::new(),
            deduplicates: false,
            handler: Arc::new(handler),
        }
    }

    /// Sets when the tool needs approval.
    #[must_use]
    pub fn with_approval(mut self, approval: Approval) -> Self {
        self.approval = approval;
        self
    }

    /// Sets the Feishu scopes it needs.
    #[must_use]
    pub fn with_scopes<I: IntoIterator<Item = S>, S: Into<String>>(mut self, scopes: I) -> Self {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// Declares that the service deduplicates its writes by idempotency key.
    #[must_use]
    pub fn deduplicated(mut self) -> Self {
        self.deduplicates = true;
        self
    }
}

#[async_trait]
impl AgentTool for FunctionTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    fn requires_approval(&self, args: &Map<String, Value>) -> bool {
        match &self.approval {
            Approval::Never => false,
            Approval::Always => true,
            Approval::When(predicate) => predicate(args),
        }
    }

    fn scopes(&self) -> Vec<String> {
        self.scopes.clone()
    }

    fn deduplicates(&self) -> bool {
        self.deduplicates
    }

    async fn run(&self, args: Map<String, Value>, ctx: &mut ToolContext) -> ToolReturn {
        (self.handler)(args, ctx)
    }
}
