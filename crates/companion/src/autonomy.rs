//! Session autonomy as the UI sets and shows it: ask for every write (the default), allow writes
//! to what this conversation already touches for 30 minutes, or read-only. The engine enforces
//! and audits it ([`agent::engine::autonomy`]); this shapes it for the banner.

use agent::Autonomy;
use agent::engine::autonomy::{AUTONOMY_VARIABLE, MAX_TOUCHED_MS};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::context::Context;
use crate::error::CompanionError;

/// A conversation's mode, for the banner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct AutonomyView {
    /// `ask`, `allow_touched` or `read_only`.
    pub mode: String,
    /// When an `allow_touched` mode ends by itself.
    #[ts(type = "number | null")]
    pub until: Option<i64>,
}

impl From<Autonomy> for AutonomyView {
    fn from(a: Autonomy) -> AutonomyView {
        let (mode, until) = match a {
            Autonomy::Ask => ("ask", None),
            Autonomy::AllowTouched { until } => ("allow_touched", Some(until)),
            Autonomy::ReadOnly => ("read_only", None),
        };
        AutonomyView {
            mode: mode.to_owned(),
            until,
        }
    }
}

/// The mode the user picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum AutonomyInput {
    /// Ask for every write.
    Ask,
    /// Allow writes to what this conversation already touches, for 30 minutes.
    AllowTouched,
    /// Refuse every write.
    ReadOnly,
}

/// A conversation's mode as it stands now (a lapsed one reads as `ask`).
pub(crate) fn autonomy_of(ctx: &Context, session_id: &str) -> Result<AutonomyView, CompanionError> {
    let state = ctx.store().load_state(session_id)?;
    Ok(Autonomy::from_value(state.get(AUTONOMY_VARIABLE), agent::now_millis()).into())
}

/// Sets a conversation's mode; the engine audits the change.
pub(crate) async fn set_autonomy(
    ctx: &Context,
    session_id: &str,
    mode: AutonomyInput,
) -> Result<AutonomyView, CompanionError> {
    let mode = match mode {
        AutonomyInput::Ask => Autonomy::Ask,
        AutonomyInput::AllowTouched => Autonomy::AllowTouched {
            until: agent::now_millis() + MAX_TOUCHED_MS,
        },
        AutonomyInput::ReadOnly => Autonomy::ReadOnly,
    };
    Ok(ctx.engine().set_autonomy(session_id, mode).await?.into())
}
