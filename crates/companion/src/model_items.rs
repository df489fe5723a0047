//! What a model's own signals become in a conversation: its reasoning (shown collapsed, never
//! mixed into the answer), an answer that stopped short and why, the wait a rate limit asked
//! for, and the tokens each model call cost (the UI sums them per turn).

use agent::{Event, FinishReason};

use crate::view::timeline::TimelineItem;

/// The event's reasoning as an entry of its own, when the model reasoned.
pub(crate) fn reasoning(event: &Event) -> Option<TimelineItem> {
    let content = event.content.as_ref()?;
    let text = content.reasoning_text();
    (!text.trim().is_empty()).then(|| TimelineItem::Reasoning {
        id: event.id.clone(),
        at: event.timestamp,
        text,
    })
}

/// Why an answer did not end normally, when it did not.
pub(crate) fn stopped(event: &Event) -> Option<TimelineItem> {
    let reason = event.finish_reason.filter(|r| !r.is_complete())?;
    Some(TimelineItem::Stopped {
        id: event.id.clone(),
        at: event.timestamp,
        reason: reason_name(reason).to_owned(),
    })
}

fn reason_name(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::MaxTokens => "max_tokens",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::Refusal => "refusal",
        FinishReason::Recitation => "recitation",
        FinishReason::MalformedFunctionCall => "malformed_function_call",
        FinishReason::Other => "other",
    }
}

/// The tokens of the model call that wrote this event.
pub(crate) fn usage(event: &Event) -> Option<TimelineItem> {
    let usage = event.usage_metadata?;
    Some(TimelineItem::Usage {
        id: event.id.clone(),
        invocation_id: event.invocation_id.clone(),
        at: event.timestamp,
        input_tokens: usage.prompt_token_count,
        output_tokens: usage.candidates_token_count,
        reasoning_tokens: usage.thoughts_token_count.unwrap_or(0),
    })
}

/// When a rate-limited turn may be tried again.
pub(crate) fn retry_at(event: &Event) -> Option<i64> {
    let wait = i64::try_from(event.retry_after_ms?).ok()?;
    Some(event.timestamp.saturating_add(wait))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use agent::{Content, Part, UsageMetadata};

    use super::*;
    use crate::view::build::timeline_items;

    fn model_event() -> Event {
        let mut event = Event::new("inv-1", "companion").with_content(Content::new(
            agent::ROLE_MODEL,
            vec![
                Part::from_reasoning("先查日历。"),
                Part::from_text("明天有周会。"),
            ],
        ));
        event.timestamp = 1_000;
        event
    }

    #[test]
    fn reasoning_is_its_own_entry_before_the_answer_and_not_in_it() {
        let items = timeline_items(&model_event());
        assert!(
            matches!(&items[0], TimelineItem::Reasoning { text, .. } if text == "先查日历。"),
            "{items:?}"
        );
        assert!(
            matches!(&items[1], TimelineItem::Assistant { text, .. } if text == "明天有周会。"),
            "{items:?}"
        );
    }

    #[test]
    fn a_cut_off_or_withheld_answer_says_so_and_a_whole_one_does_not() {
        let mut event = model_event();
        event.finish_reason = Some(FinishReason::ContentFilter);
        let items = timeline_items(&event);
        assert!(
            items.iter().any(
                |i| matches!(i, TimelineItem::Stopped { reason, .. } if reason == "content_filter")
            ),
            "{items:?}"
        );
        event.finish_reason = Some(FinishReason::Stop);
        assert!(
            !timeline_items(&event)
                .iter()
                .any(|i| matches!(i, TimelineItem::Stopped { .. }))
        );
    }

    #[test]
    fn usage_and_a_rate_limit_wait_reach_the_view() {
        let mut event = model_event();
        event.usage_metadata = Some(UsageMetadata {
            prompt_token_count: 100,
            candidates_token_count: 40,
            thoughts_token_count: Some(30),
            cached_content_token_count: None,
        });
        let items = timeline_items(&event);
        assert!(items.iter().any(|i| matches!(
            i,
            TimelineItem::Usage { input_tokens: 100, output_tokens: 40, reasoning_tokens: 30, invocation_id, .. } if invocation_id == "inv-1"
        )));

        let mut failed = Event::new("inv-1", "companion");
        failed.timestamp = 5_000;
        failed.error_code = Some("rate_limited".to_owned());
        failed.error_message = Some("Gemini is limiting requests.".to_owned());
        failed.retry_after_ms = Some(36_000);
        let items = timeline_items(&failed);
        assert!(
            matches!(&items[0], TimelineItem::Notice { code: Some(code), retry_at: Some(41_000), .. } if code == "rate_limited"),
            "{items:?}"
        );
    }
}
