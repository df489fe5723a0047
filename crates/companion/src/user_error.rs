//! A failed action as the person using the app reads it: every error the application core
//! returns to a surface (the desktop UI, the CLI) is worded here in Chinese and English, with a
//! stable `code` a surface can act on and the raw English text kept for a tooltip or a report.
//! Known failures get a sentence of their own; anything else keeps its raw words behind a
//! translated lead-in, so no toast is ever English-only in the Chinese UI.

use serde::Serialize;
use ts_rs::TS;

use crate::error::CompanionError;
use crate::text::Text;

/// A command's failure, as the UI receives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct UiError {
    /// What went wrong, for a surface to act on: `expired`, `not_pending`, `edit_refused`,
    /// `invalid_arguments`, `not_found`, `busy`, `session_ended`, `settings`, `sign_in`,
    /// `not_signed_in`, `storage`, `refused`, `unconfirmed`, or `other`.
    pub code: String,
    /// The core's own words (English), for a tooltip or a bug report.
    pub message: String,
    /// Simplified Chinese.
    pub zh: String,
    /// English.
    pub en: String,
}

impl UiError {
    fn new(code: &str, message: String, text: Text) -> UiError {
        UiError {
            code: code.to_owned(),
            message,
            zh: text.zh,
            en: text.en,
        }
    }

    /// A failure the caller words itself, in both languages.
    pub fn worded(code: &str, zh: impl Into<String>, en: impl Into<String>) -> UiError {
        let en = en.into();
        UiError::new(code, en.clone(), Text::new(zh, en))
    }

    /// A failure that is not one of the core's own (the shell's, the OS's): its words, with a
    /// lead-in in each language.
    pub fn other(message: impl std::fmt::Display) -> UiError {
        let message = message.to_string();
        let text = Text::new(
            format!("操作没有完成：{message}"),
            format!("That did not work: {message}"),
        );
        UiError::new("other", message, text)
    }
}

/// A message the shell already worded for the user (its own sentences carry both languages, as
/// the start-up failure does): shown as it is.
impl From<String> for UiError {
    fn from(message: String) -> UiError {
        UiError::new(
            "other",
            message.clone(),
            Text::new(message.clone(), message),
        )
    }
}

impl From<CompanionError> for UiError {
    fn from(error: CompanionError) -> UiError {
        explain(&error)
    }
}

/// The user's words for a failure of the core.
pub fn explain(error: &CompanionError) -> UiError {
    let message = error.to_string();
    let (code, text) = match error {
        CompanionError::Engine(engine) => engine_failure(engine, &message),
        CompanionError::Settings(_) => (
            "settings",
            Text::new(
                format!("设置有问题：{message}"),
                format!("There is a problem with the settings: {message}"),
            ),
        ),
        CompanionError::Store(_) | CompanionError::Vault(_) => storage(&message),
        CompanionError::Token(feishu::TokenError::NotSignedIn) => (
            "not_signed_in",
            Text::new(
                "还没有登录飞书，请先登录。",
                "You are not signed in to Feishu yet; sign in first.",
            ),
        ),
        CompanionError::Token(_) | CompanionError::SignIn(_) => (
            "sign_in",
            Text::new(
                format!("飞书登录出了问题：{message}"),
                format!("Signing in to Feishu went wrong: {message}"),
            ),
        ),
        CompanionError::Other(_) => other(&message),
    };
    UiError::new(code, message, text)
}

/// The words for the engine's failures, kept apart from the app's own as they are many: most
/// meet a decision, an edit or a turn, and say what became of it in the person's terms; a
/// storage or agent failure keeps its raw words behind a lead-in (`message`, the whole error's
/// text, as [`explain`] keeps it).
fn engine_failure(engine: &agent::EngineError, message: &str) -> (&'static str, Text) {
    use agent::EngineError as E;
    match engine {
        E::Expired { .. } => (
            "expired",
            Text::new(
                "审批在你决定前已过期，操作未执行。",
                "The approval expired before your decision; nothing was done.",
            ),
        ),
        E::NotPending { .. } => (
            "not_pending",
            Text::new(
                "这项操作已不再等待你的决定（可能已在别处处理）。",
                "This action no longer waits for your decision (it may have been decided elsewhere).",
            ),
        ),
        E::EditRefused { reason, .. } => (
            "edit_refused",
            Text::new(reason.zh.clone(), reason.en.clone()),
        ),
        E::InvalidArguments { message, .. } => (
            "invalid_arguments",
            Text::new(
                format!("修改后的参数不符合这个操作的要求：{message}"),
                format!("The edited arguments do not fit this action: {message}"),
            ),
        ),
        E::CallNotFound(_) | E::SessionNotFound(_) | E::RuleNotFound(_) | E::AgentNotFound(_) => (
            "not_found",
            Text::new(
                "找不到这一项，它可能已被删除。",
                "This item cannot be found; it may have been deleted.",
            ),
        ),
        E::Busy(_) => (
            "busy",
            Text::new(
                "助手还在回答这个对话，请等它完成或先停止。",
                "The assistant is still answering in this conversation; wait for it or stop it first.",
            ),
        ),
        E::SessionEnded(_) => (
            "session_ended",
            Text::new(
                "这个对话已结束，请新建一个对话。",
                "This conversation has ended; start a new one.",
            ),
        ),
        E::Persist(_) => storage(message),
        E::Agent(_) => other(message),
    }
}

fn storage(message: &str) -> (&'static str, Text) {
    (
        "storage",
        Text::new(
            format!("读写本地数据时出错，未做任何更改：{message}"),
            format!("Reading or writing the app's data failed; nothing was changed: {message}"),
        ),
    )
}

fn other(message: &str) -> (&'static str, Text) {
    (
        "other",
        Text::new(
            format!("操作没有完成：{message}"),
            format!("That did not work: {message}"),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_s_failures_read_in_both_languages_with_a_code() {
        let expired = explain(&CompanionError::Engine(agent::EngineError::Expired {
            call_ids: vec!["fc_1".into()],
        }));
        assert_eq!(expired.code, "expired");
        assert!(expired.zh.contains("已过期"), "{}", expired.zh);
        assert!(expired.message.contains("fc_1"), "the raw words stay");

        let refused = explain(&CompanionError::Engine(agent::EngineError::EditRefused {
            call_id: "fc_1".into(),
            reason: agent::Localized::new("找不到这些人：ou_x", "No one has these ids: ou_x"),
        }));
        assert_eq!(
            (refused.code.as_str(), refused.zh.as_str()),
            ("edit_refused", "找不到这些人：ou_x")
        );

        let signed_out = explain(&CompanionError::Token(feishu::TokenError::NotSignedIn));
        assert_eq!(signed_out.code, "not_signed_in");
        assert!(!signed_out.zh.is_ascii());

        let other = explain(&CompanionError::Other("disk on fire".into()));
        assert_eq!(other.code, "other");
        assert!(other.zh.starts_with("操作没有完成") && other.zh.contains("disk on fire"));
    }

    #[test]
    fn every_engine_failure_has_chinese_words() {
        use agent::EngineError as E;
        let all = [
            E::SessionNotFound("s".into()),
            E::SessionEnded("s".into()),
            E::Busy("s".into()),
            E::CallNotFound("c".into()),
            E::NotPending {
                call_id: "c".into(),
                status: agent::CallStatus::Done,
            },
            E::InvalidArguments {
                call_id: "c".into(),
                message: "/text: 5 is not a string".into(),
            },
            E::RuleNotFound("r".into()),
        ];
        for error in all {
            let ui = explain(&CompanionError::Engine(error));
            assert!(
                ui.zh
                    .chars()
                    .any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)),
                "{ui:?}"
            );
            assert_ne!(ui.code, "other", "{ui:?}");
        }
    }
}
