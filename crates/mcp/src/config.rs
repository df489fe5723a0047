//! What the user configured for one server: how to reach it and how far to trust it. Secrets
//! (environment values, HTTP header values) are never part of it: they live in the app's vault
//! under the names [`secret_name`] gives, and reach a connection as a [`Resolved`] server.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The longest server id: ids go into tool names, which models cap at 64 characters.
pub const MAX_ID_LEN: usize = 24;

/// How long a call may go without an answer or a progress notification, by default.
pub const DEFAULT_TIMEOUT_SECS: u32 = 60;

/// One MCP server as the user set it up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Short, unique, `[a-z0-9-]`: what tool names and the audit trail carry.
    pub id: String,
    /// The name shown to the user.
    #[serde(default)]
    pub name: String,
    /// How the app reaches it.
    pub transport: TransportConfig,
    /// Off: its tools are not offered and it is not started.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The user trusts the server's own word that a tool only reads (`readOnlyHint`).
    #[serde(default)]
    pub trusted: bool,
    /// Tools the user marked as reads themselves: they run without approval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_tools: Vec<String>,
    /// Seconds a call may go without an answer or progress before it fails.
    #[serde(default = "default_timeout")]
    pub timeout_secs: u32,
}

fn yes() -> bool {
    true
}

fn default_timeout() -> u32 {
    DEFAULT_TIMEOUT_SECS
}

/// Where a server runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum TransportConfig {
    /// A local program spoken to over its stdin and stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        args: Vec<String>,
        /// The names of the environment variables set for it; their values are in the vault.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        env: Vec<String>,
        /// The folder it starts in (the user's home when not set).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
    },
    /// A remote server over Streamable HTTP.
    Http {
        /// Its endpoint.
        url: String,
        /// The names of the headers sent with every request; their values are in the vault.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        headers: Vec<String>,
    },
}

/// A server with its secrets read from the vault, ready to connect.
#[derive(Clone)]
pub struct Resolved {
    /// The configuration.
    pub config: ServerConfig,
    /// Environment values (stdio), by name.
    pub env: BTreeMap<String, String>,
    /// Header values (HTTP), by name.
    pub headers: BTreeMap<String, String>,
    /// Headers that change while the server is in use (a user's token), asked before each
    /// call; the app's own servers only.
    pub credentials: Option<std::sync::Arc<dyn crate::Credentials>>,
}

impl PartialEq for Resolved {
    fn eq(&self, other: &Self) -> bool {
        let same_credentials = match (&self.credentials, &other.credentials) {
            (None, None) => true,
            (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b),
            _ => false,
        };
        same_credentials
            && self.config == other.config
            && self.env == other.env
            && self.headers == other.headers
    }
}

impl Eq for Resolved {}

impl std::fmt::Debug for Resolved {
    // Values are secrets: only their names are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolved")
            .field("config", &self.config)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// What a configuration gets wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The id is empty, too long or has characters other than `a-z`, `0-9` and `-`.
    #[error("server id {0:?} must be 1-{MAX_ID_LEN} characters of a-z, 0-9 and -")]
    BadId(String),
    /// Two servers have one id.
    #[error("two servers are named {0:?}")]
    DuplicateId(String),
    /// A stdio server without a program.
    #[error("server {0:?} has no command")]
    NoCommand(String),
    /// An HTTP server whose URL is not http(s).
    #[error("server {0:?}: {1:?} is not an http(s) URL")]
    BadUrl(String, String),
    /// An environment variable or header name that cannot be one.
    #[error("server {0:?}: {1:?} is not a valid name")]
    BadName(String, String),
    /// A timeout of zero or over an hour.
    #[error("server {0:?}: the timeout must be 1-3600 seconds")]
    BadTimeout(String),
}

impl ServerConfig {
    /// Checks what the user (or an imported file) gave.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let id = &self.id;
        if !valid_id(id) {
            return Err(ConfigError::BadId(id.clone()));
        }
        if self.timeout_secs == 0 || self.timeout_secs > 3600 {
            return Err(ConfigError::BadTimeout(id.clone()));
        }
        match &self.transport {
            TransportConfig::Stdio { command, env, .. } => {
                if command.trim().is_empty() {
                    return Err(ConfigError::NoCommand(id.clone()));
                }
                if let Some(bad) = env.iter().find(|n| !valid_env_name(n)) {
                    return Err(ConfigError::BadName(id.clone(), bad.clone()));
                }
            }
            TransportConfig::Http { url, headers } => {
                let ok = url.starts_with("http://") || url.starts_with("https://");
                if !ok || url.contains(char::is_whitespace) {
                    return Err(ConfigError::BadUrl(id.clone(), url.clone()));
                }
                if let Some(bad) = headers.iter().find(|n| !valid_header_name(n)) {
                    return Err(ConfigError::BadName(id.clone(), bad.clone()));
                }
            }
        }
        Ok(())
    }

    /// The name shown to the user: the given one, else the id.
    pub fn display_name(&self) -> &str {
        if self.name.trim().is_empty() {
            &self.id
        } else {
            &self.name
        }
    }
}

/// Checks a whole list: each server, and that no two share an id.
pub fn validate_all(servers: &[ServerConfig]) -> Result<(), ConfigError> {
    let mut seen = std::collections::BTreeSet::new();
    for s in servers {
        s.validate()?;
        if !seen.insert(s.id.as_str()) {
            return Err(ConfigError::DuplicateId(s.id.clone()));
        }
    }
    Ok(())
}

/// Whether `id` can name a server.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

fn valid_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn valid_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Turns any name into a server id: lowercase, `-` for anything else, at most
/// [`MAX_ID_LEN`] characters; `server` when nothing is left.
pub fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let mut out: String = out.trim_end_matches('-').chars().take(MAX_ID_LEN).collect();
    while out.ends_with('-') {
        out.pop();
    }
    if out.is_empty() {
        "server".to_owned()
    } else {
        out
    }
}

/// What kind of secret a vault entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretKind {
    /// An environment value of a stdio server.
    Env,
    /// A header value of an HTTP server.
    Header,
    /// A remote server's OAuth tokens.
    OAuth,
}

/// The vault entry that holds one secret of server `id`.
pub fn secret_name(id: &str, kind: SecretKind, key: &str) -> String {
    let kind = match kind {
        SecretKind::Env => "env",
        SecretKind::Header => "header",
        SecretKind::OAuth => "oauth",
    };
    format!("mcp/{id}/{kind}/{key}")
}

/// The prefix of every vault entry of server `id` (to delete them all with the server).
pub fn secret_prefix(id: &str) -> String {
    format!("mcp/{id}/")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn stdio(id: &str) -> ServerConfig {
        ServerConfig {
            id: id.into(),
            name: String::new(),
            transport: TransportConfig::Stdio {
                command: "npx".into(),
                args: vec![],
                env: vec!["API_KEY".into()],
                cwd: None,
            },
            enabled: true,
            trusted: false,
            read_tools: vec![],
            timeout_secs: 60,
        }
    }

    #[test]
    fn ids_are_short_slugs() {
        assert!(valid_id("github"));
        assert!(valid_id("my-server-2"));
        for bad in ["", "GitHub", "a_b", "a/b", "x".repeat(25).as_str()] {
            assert!(!valid_id(bad), "{bad:?}");
            assert_eq!(stdio(bad).validate(), Err(ConfigError::BadId(bad.into())));
        }
        assert_eq!(slug("My GitHub (work)"), "my-github-work");
        assert_eq!(slug("飞书"), "server");
        assert_eq!(slug(&"ab ".repeat(20)).len(), MAX_ID_LEN - 1);
        assert!(valid_id(&slug(&"ab ".repeat(20))));
    }

    #[test]
    fn a_list_refuses_two_servers_of_one_id() {
        assert_eq!(
            validate_all(&[stdio("a"), stdio("b"), stdio("a")]),
            Err(ConfigError::DuplicateId("a".into()))
        );
        assert_eq!(validate_all(&[stdio("a"), stdio("b")]), Ok(()));
    }

    #[test]
    fn http_servers_need_an_http_url_and_header_names() {
        let mut s = stdio("r");
        s.transport = TransportConfig::Http {
            url: "file:///etc/passwd".into(),
            headers: vec![],
        };
        assert!(matches!(s.validate(), Err(ConfigError::BadUrl(..))));
        s.transport = TransportConfig::Http {
            url: "https://mcp.example.com/mcp".into(),
            headers: vec!["Bad Header".into()],
        };
        assert!(matches!(s.validate(), Err(ConfigError::BadName(..))));
        s.transport = TransportConfig::Http {
            url: "https://mcp.example.com/mcp".into(),
            headers: vec!["Authorization".into()],
        };
        assert_eq!(s.validate(), Ok(()));
    }

    #[test]
    fn settings_round_trip_without_secret_values() {
        let s = stdio("gh");
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["transport"]["type"], "stdio");
        assert_eq!(json["transport"]["env"], serde_json::json!(["API_KEY"]));
        let back: ServerConfig = serde_json::from_value(json).unwrap();
        assert_eq!(back, s);
        let resolved = Resolved {
            config: s,
            env: [("API_KEY".to_owned(), "sk-secret".to_owned())].into(),
            headers: BTreeMap::new(),
            credentials: None,
        };
        assert!(!format!("{resolved:?}").contains("sk-secret"));
    }

    #[test]
    fn secrets_are_named_per_server() {
        assert_eq!(
            secret_name("gh", SecretKind::Env, "TOKEN"),
            "mcp/gh/env/TOKEN"
        );
        assert!(secret_name("gh", SecretKind::Header, "X").starts_with(&secret_prefix("gh")));
    }
}
