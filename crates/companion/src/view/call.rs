//! A call as the approval card and the inbox show it: what it will do (the preview), the
//! permissions it waits for, and where it stands. Types only, over leaves: features that show
//! a call (labels, remote approval, edits, Python tools) import them from here. The `From` a
//! stored call is shaped by reaches the labels and notices, so it lives in [`super::build`].

use serde::Serialize;
use serde_json::{Map, Value};
use ts_rs::TS;

use crate::text::{Text, snake};

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
