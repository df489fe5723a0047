//! The engine's notices and the model's failures in the user's language: one catalogue, from
//! the engine's fixed sentences ([`agent::engine::notice`]) and error codes (the engine's own and
//! the model providers' stable codes) to Chinese and English. The UI shows the translation and
//! keeps the raw text for a tooltip. A test fails when the engine gains a notice this catalogue
//! does not translate.

use agent::engine::notice;

use crate::text::Text;

/// The engine's fixed sentences.
fn sentence(text: &str) -> Option<Text> {
    let t = match text {
        notice::CANCELLED_BY_USER => Text::new("你取消了这一轮", "You cancelled this turn"),
        notice::ABANDONED => Text::new(
            "发起请求的智能体已断开，操作未执行",
            "The agent that asked went away before a decision; nothing was done",
        ),
        notice::CANCELLED_FOR_NEW_MESSAGE => Text::new(
            "你发送新消息时选择了取消等待中的审批",
            "You cancelled it when you sent a new message",
        ),
        notice::SUPERSEDED => Text::new(
            "你发送了新消息，这一轮已结束",
            "You sent a new message, so this turn ended",
        ),
        notice::EXPIRED => Text::new(
            "审批已过期，未作决定，操作未执行",
            "The approval expired before a decision; nothing was done",
        ),
        notice::NEVER_ALLOWED => Text::new(
            "你设置的“总是拒绝”规则阻止了它",
            "Blocked by a never-allow rule you set",
        ),
        notice::READ_ONLY => Text::new(
            "对话处于只读模式，写入被拒绝",
            "Refused: the conversation is read-only",
        ),
        notice::INTERRUPTED => Text::new(
            "应用在这一轮进行中停止了",
            "The app stopped while this turn was running",
        ),
        notice::STOPPED => Text::new("你停止了回答", "You stopped the answer"),
        _ => return None,
    };
    Some(t)
}

/// The user's words for an engine sentence (a notice, or the reason on a decision), if it is
/// one; a sentence with the "outcome unknown" ending gets that ending translated too.
pub fn translate(text: &str) -> Option<Text> {
    if let Some(t) = sentence(text) {
        return Some(t);
    }
    let base = text.strip_suffix(notice::OUTCOME_UNKNOWN_SUFFIX)?;
    let t = sentence(base)?;
    Some(Text::new(
        format!("{}；不确定操作是否已生效", t.zh),
        format!("{}; whether it took effect is unknown", t.en),
    ))
}

/// The user's words for a turn's notice, from its error code and message.
pub fn notice(code: Option<&str>, message: &str) -> Text {
    if let Some(t) = translate(message) {
        return t;
    }
    match code.unwrap_or_default() {
        notice::TOO_MANY_STEPS => {
            let n: String = message.chars().filter(char::is_ascii_digit).collect();
            Text::new(
                format!("助手在一轮中调用模型 {n} 次后被停止，以免无休止地运行"),
                format!("Stopped after {n} model calls in one turn, so it would not run forever"),
            )
        }
        notice::INTERRUPTED_CODE => sentence(notice::INTERRUPTED).unwrap_or_else(|| raw(message)),
        notice::CANCELLED_CODE => {
            sentence(notice::CANCELLED_BY_USER).unwrap_or_else(|| raw(message))
        }
        notice::SUPERSEDED_CODE => sentence(notice::SUPERSEDED).unwrap_or_else(|| raw(message)),
        notice::STOPPED_CODE => sentence(notice::STOPPED).unwrap_or_else(|| raw(message)),
        "unauthorized" => Text::new(
            "模型服务拒绝了 API 密钥，请在设置中检查",
            "The model service refused the API key; check it in Settings",
        ),
        "model_not_found" => Text::new(
            "模型服务找不到这个模型，请在设置中检查模型名称",
            "The model service does not know this model; check its name in Settings",
        ),
        "context_length_exceeded" => Text::new(
            "对话太长，超出了模型的上限，请开始新对话",
            "The conversation is too long for the model; start a new one",
        ),
        "quota_exceeded" => Text::new(
            "模型服务的额度已用完",
            "The model service account is out of credit",
        ),
        "rate_limited" => Text::new(
            "模型服务请求过于频繁，请稍后再试",
            "The model service is rate-limiting requests; try again shortly",
        ),
        "unavailable" => Text::new(
            "模型服务暂时不可用，请稍后再试",
            "The model service is unavailable right now; try again shortly",
        ),
        "bad_request" => Text::new(
            "模型服务拒绝了这次请求",
            "The model service refused the request",
        ),
        "malformed_stream" | "incomplete" => Text::new(
            "模型的回答中途中断了，请再试一次",
            "The model's answer broke off; try again",
        ),
        "network" => Text::new(
            "无法连接模型服务，请检查网络",
            "Could not reach the model service; check the network",
        ),
        _ => raw(message),
    }
}

/// Text the catalogue does not know, shown as it is in both languages.
fn raw(message: &str) -> Text {
    Text::new(message, message)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The build's check: every sentence and code the engine can write has a translation, in
    /// both languages, that differs from the raw English (so it was really translated).
    #[test]
    fn every_engine_notice_is_translated() {
        for text in notice::ALL {
            let t = translate(text)
                .unwrap_or_else(|| panic!("the engine notice {text:?} has no translation"));
            assert!(!t.zh.is_empty() && !t.en.is_empty(), "{text:?}");
            assert_ne!(t.zh, *text, "{text:?} is not translated to Chinese");
            assert!(t.zh.chars().any(|c| c > '\u{2e80}'), "{text:?}: {}", t.zh);
        }
        for code in notice::CODES {
            let t = notice(Some(code), "");
            assert!(
                t.zh.chars().any(|c| c > '\u{2e80}'),
                "the engine's error code {code:?} has no translation"
            );
        }
    }

    #[test]
    fn composite_and_parameterised_notices_are_translated() {
        let text = format!(
            "{}{}",
            notice::CANCELLED_BY_USER,
            notice::OUTCOME_UNKNOWN_SUFFIX
        );
        let t = translate(&text).unwrap();
        assert!(t.zh.contains("不确定"), "{}", t.zh);
        let t = notice(Some(notice::TOO_MANY_STEPS), &notice::too_many_steps(25));
        assert!(t.zh.contains("25") && t.en.contains("25"), "{t:?}");
        assert!(
            notice(Some("rate_limited"), "429 slow down")
                .en
                .contains("rate")
        );
        // Unknown text stays as it is.
        assert_eq!(notice(Some("odd"), "something odd").zh, "something odd");
    }
}
