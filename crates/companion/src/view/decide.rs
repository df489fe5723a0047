//! What the user decides, as the UI sends it: a held call's decision, a batch of them, and
//! the word on a write whose outcome is unknown; each turns into the engine's own type.

use agent::{Decision, Settlement};
use serde::Deserialize;
use serde_json::{Map, Value};
use ts_rs::TS;

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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

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
