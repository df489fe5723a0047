//! Words for the person using the app: [`Text`] carries both of the app's languages, and the
//! helpers shorten and name values for display. A leaf: it imports nothing of the crate.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use ts_rs::TS;

/// Text in both of the app's languages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct Text {
    /// Simplified Chinese.
    pub zh: String,
    /// English.
    pub en: String,
}

impl Text {
    /// Text in Chinese and English.
    pub fn new(zh: impl Into<String>, en: impl Into<String>) -> Text {
        Text {
            zh: zh.into(),
            en: en.into(),
        }
    }
}

impl From<&agent::Localized> for Text {
    fn from(l: &agent::Localized) -> Text {
        Text::new(l.zh.clone(), l.en.clone())
    }
}

/// A serde unit variant's name (`awaiting_approval`).
pub(crate) fn snake<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// At most `max` characters, with an ellipsis when cut.
pub(crate) fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_keeps_whole_characters() {
        assert_eq!(cut("飞书助手", 2), "飞书…");
        assert_eq!(cut("飞书", 2), "飞书");
    }
}
