//! Editing an approval: before the user can approve edited arguments, they are checked against
//! the tool's schema and the ids in them against Feishu (a person who does not exist is refused
//! here, not after the approval), and the card's readable preview (summary, times, people) is worked out again
//! from them, so what is approved is what is seen. Problems come back in the user's language.

use serde::Serialize;
use serde_json::{Map, Value};
use ts_rs::TS;

use crate::context::Context;
use crate::error::CompanionError;
use crate::text::Text;
use crate::view::call::PreviewView;

/// What the edited arguments would do, or why they cannot be used.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct EditCheckView {
    /// Why the arguments cannot be approved, in both languages; `null` when they can.
    pub error: Option<Text>,
    /// The engine's own words for the problem (for a tooltip).
    pub raw_error: Option<String>,
    /// The preview worked out from the edited arguments.
    pub preview: Option<PreviewView>,
}

/// Checks edited arguments for a held call and previews them; nothing is recorded.
pub(crate) async fn check_edit(
    ctx: &Context,
    call_id: &str,
    args: Map<String, Value>,
) -> Result<EditCheckView, CompanionError> {
    match ctx.engine().preview_edit(call_id, &args).await {
        Ok(preview) => Ok(EditCheckView {
            error: None,
            raw_error: None,
            preview: preview.as_ref().map(PreviewView::from),
        }),
        Err(agent::EngineError::InvalidArguments { message, .. }) => Ok(EditCheckView {
            error: Some(Text::new(
                format!("修改后的参数不符合这个操作的要求：{message}"),
                format!("The edited arguments do not fit this action: {message}"),
            )),
            raw_error: Some(message),
            preview: None,
        }),
        Err(agent::EngineError::EditRefused { reason, .. }) => Ok(EditCheckView {
            raw_error: Some(reason.en.clone()),
            error: Some(Text::new(reason.zh, reason.en)),
            preview: None,
        }),
        Err(e) => Err(e.into()),
    }
}
