//! The API key a provider sends, kept out of logs and error messages.

use std::fmt;

/// An API key. `Debug` prints `***`; there is no `Display`, so it cannot end up in a message by
/// accident. The key itself comes from the app's encrypted vault.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    /// The key, for the one place that puts it in a request header.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the key replaced by `***`: servers sometimes echo what
    /// they were sent in an error body, and those bodies end up in messages the user sees.
    pub fn redact(&self, text: &str) -> String {
        // Keys shorter than this are test values; redacting them would mangle ordinary words.
        if self.0.len() < 8 {
            return text.to_owned();
        }
        text.replace(&self.0, "***")
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl From<String> for ApiKey {
    fn from(key: String) -> Self {
        ApiKey(key)
    }
}

impl From<&str> for ApiKey {
    fn from(key: &str) -> Self {
        ApiKey(key.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_key() {
        let key = ApiKey::new("sk-secret-0123456789");
        assert_eq!(format!("{key:?}"), "***");
        assert_eq!(format!("{:?}", Some(&key)), "Some(***)");
    }

    #[test]
    fn redact_removes_the_key_from_echoed_text() {
        let key = ApiKey::new("sk-secret-0123456789");
        assert_eq!(
            key.redact("Incorrect API key provided: sk-secret-0123456789."),
            "Incorrect API key provided: ***."
        );
    }
}
