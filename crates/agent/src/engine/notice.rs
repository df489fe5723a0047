//! Every sentence the engine itself writes for the person using the app: the notice of a turn
//! that ended early (an event's `error_message`, with its `error_code`) and the reason recorded
//! on a decision the engine or a standing choice took. They are constants, listed in [`ALL`] and
//! [`CODES`], so the app can show each in the user's language (keeping the raw text for a
//! tooltip) and a test fails when one has no translation. The engine writes no such text inline:
//! a test of this crate reads the engine's source to make sure.
//!
//! What the *model* is told (a tool's answer) is not here: it stays in English, for the model.

/// The user pressed Stop, or cancelled the waiting turn.
pub const CANCELLED_BY_USER: &str = "cancelled by the user";

/// The other agent that asked for the call (an MCP client) went away before it was decided.
pub const ABANDONED: &str = "abandoned: the agent that asked went away before a decision";

/// The user chose to cancel the approvals still waiting when they sent a new message.
pub const CANCELLED_FOR_NEW_MESSAGE: &str = "cancelled by the user when they sent a new message";

/// A newer message closed a turn that had nothing left waiting.
pub const SUPERSEDED: &str = "superseded by a newer message from the user";

/// Nobody decided before the approval's time ran out.
pub const EXPIRED: &str = "no decision before the approval expired";

/// A standing never-allow rule refused the call.
pub const NEVER_ALLOWED: &str = "a never-allow rule the user set";

/// The conversation's read-only mode refused a write.
pub const READ_ONLY: &str = "the conversation is read-only";

/// The app stopped (quit, crash) while the turn was running.
pub const INTERRUPTED: &str = "the app stopped while this turn was running";

/// The user stopped the answer while it was being written; what was written stays.
pub const STOPPED: &str = "stopped by the user";

/// Added to a closing note when a write of the closed turn may or may not have happened.
pub const OUTCOME_UNKNOWN_SUFFIX: &str = "; whether this call took effect is unknown";

/// The `error_code` of a turn stopped for calling the model too many times; its message says
/// how many (see [`too_many_steps`]).
pub const TOO_MANY_STEPS: &str = "too_many_steps";

/// The `error_code` of a turn the app's stop interrupted ([`INTERRUPTED`]).
pub const INTERRUPTED_CODE: &str = "interrupted";

/// The `error_code` of a closing notice: the turn was cancelled ([`CANCELLED_BY_USER`],
/// [`CANCELLED_FOR_NEW_MESSAGE`]).
pub const CANCELLED_CODE: &str = "cancelled";

/// The `error_code` of a closing notice: a newer message took over ([`SUPERSEDED`]).
pub const SUPERSEDED_CODE: &str = "superseded";

/// The `error_code` of a partial answer the user stopped ([`STOPPED`]).
pub const STOPPED_CODE: &str = "stopped";

/// Every fixed sentence above, for the app's translation check.
pub const ALL: &[&str] = &[
    CANCELLED_BY_USER,
    ABANDONED,
    CANCELLED_FOR_NEW_MESSAGE,
    SUPERSEDED,
    EXPIRED,
    NEVER_ALLOWED,
    READ_ONLY,
    INTERRUPTED,
    STOPPED,
];

/// Every `error_code` the engine itself sets (a model's own codes come from the provider).
pub const CODES: &[&str] = &[
    TOO_MANY_STEPS,
    INTERRUPTED_CODE,
    CANCELLED_CODE,
    SUPERSEDED_CODE,
    STOPPED_CODE,
];

/// The message of [`TOO_MANY_STEPS`].
pub fn too_many_steps(max: u32) -> String {
    format!("stopped after {max} model calls in one turn")
}

/// The error code of a closing notice for a turn closed with `note`.
pub(crate) fn code_of(note: &str) -> &'static str {
    if note == SUPERSEDED {
        SUPERSEDED_CODE
    } else {
        CANCELLED_CODE
    }
}
