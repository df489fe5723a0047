//! The signed-in user's token for lark-mcp, and its refusals as the app's authorization cards.
//!
//! lark-mcp reads the token from `USER_ACCESS_TOKEN` (its `dist/utils/constants.js` takes it into
//! the options `-u` fills, and `--token-mode user_access_token` makes every call use it), so the
//! token goes in the server's environment and a refreshed one starts the server again.
//!
//! Its error results, as its `mcp-tool.js` and `utils/handler.js` make them:
//! - 99991679 (a scope the user has not granted) and 99991668 (the token is not valid) come
//!   rewritten: `{"errorCode", "errorMessage", "instruction", "rawErrorText"}`, the last being
//!   Feishu's body as text, which names the scopes in `error.permission_violations`;
//! - no token at all gives the same shape without `errorCode`;
//! - 99991672 (the app itself lacks the scope) comes as Feishu's body, unchanged.

use std::collections::BTreeMap;
use std::sync::Arc;

use agent::{ToolOutcome, ToolResult, ToolReturn};
use async_trait::async_trait;
use feishu::TokenManager;
use mcp::Credentials;
use serde_json::Value;

/// Where lark-mcp reads the user's token.
pub(crate) const TOKEN_ENV: &str = "USER_ACCESS_TOKEN";

/// The scopes the app asks for on lark-mcp's behalf, narrowest first where Feishu offers a
/// choice: its own (`feishu::tools::APP_SCOPES`) and Base's granular ones, so a sign-in asks for
/// `base:record:create` rather than the whole of `bitable:app`.
const DECLARED: &[&str] = &[
    "base:app:create",
    "base:app:read",
    "base:table:read",
    "base:table:create",
    "base:field:read",
    "base:record:retrieve",
    "base:record:create",
    "base:record:update",
    "base:record:delete",
    "wiki:node:read",
];

/// The user's token as lark-mcp wants it.
#[derive(Debug)]
pub(crate) struct LarkToken {
    pub(crate) tokens: Arc<TokenManager>,
}

/// The call waits for a sign-in granting `scopes` (none named: the app's usual ones).
fn needs_sign_in(scopes: Vec<String>) -> ToolReturn {
    let words = if scopes.is_empty() {
        "The user must sign in to Feishu.".to_owned()
    } else {
        format!(
            "The user must sign in to Feishu and grant: {}.",
            scopes.join(", ")
        )
    };
    ToolResult::new(ToolOutcome::NeedsUserAuth)
        .with_content(format!(
            "{words} The app is showing them a sign-in card; the call runs again by itself afterwards."
        ))
        .with_auth_scopes(scopes)
        .into()
}

/// The least of `named` (Feishu's alternatives) to ask for: those the app declares, else the
/// narrowest one (a read before a write, a granular scope before a whole resource).
pub(crate) fn least(named: &[String]) -> Vec<String> {
    let mut declared: Vec<&str> = feishu::tools::APP_SCOPES.to_vec();
    declared.extend(DECLARED);
    let chosen = feishu::tools::choose_scopes(named, &declared);
    if !chosen.is_empty() {
        return chosen;
    }
    named
        .iter()
        .min_by_key(|s| feishu::tools::breadth(s))
        .cloned()
        .into_iter()
        .collect()
}

/// The scopes a Feishu error body names: `error.permission_violations[].subject`, else the
/// bracketed list of its `msg` (`required one of these privileges: [a, b]`).
pub(crate) fn named_scopes(body: &Value) -> Vec<String> {
    let listed: Vec<String> = body["error"]["permission_violations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["subject"].as_str())
        .map(str::to_owned)
        .collect();
    if !listed.is_empty() {
        return listed;
    }
    let msg = body["msg"].as_str().unwrap_or_default();
    let Some((_, rest)) = msg.split_once('[') else {
        return Vec::new();
    };
    let inside = rest.split(']').next().unwrap_or_default();
    inside
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

impl LarkToken {
    /// The app itself lacks a scope (99991672): the card links Feishu's scope-apply page, and
    /// the call runs again when the user retries, as the app's own tools do.
    fn app_lacks(&self, named: &[String]) -> ToolReturn {
        let mut scopes = least(named);
        scopes.truncate(1);
        feishu::tools::app_lacks_scope(self.tokens.oauth(), scopes)
    }
}

#[async_trait]
impl Credentials for LarkToken {
    async fn headers(&self, tool: &str) -> Result<BTreeMap<String, String>, ToolReturn> {
        use secrecy::ExposeSecret as _;
        match self.tokens.access_token().await {
            Ok(token) => Ok(BTreeMap::from([(
                TOKEN_ENV.to_owned(),
                token.expose_secret().to_owned(),
            )])),
            // Started without a token, it still lists its tools; a call waits for a sign-in.
            Err(_) if tool.is_empty() => Ok(BTreeMap::new()),
            Err(_) => Err(needs_sign_in(Vec::new())),
        }
    }

    /// lark-mcp reports Feishu's refusals as error results, never as protocol errors.
    async fn on_refusal(&self, _tool: &str, _code: i64, _message: &str) -> Option<ToolReturn> {
        None
    }

    async fn on_error_result(&self, _tool: &str, text: &str) -> Option<ToolReturn> {
        let body: Value = serde_json::from_str(text).ok()?;
        // Rewritten by lark-mcp: the code as `errorCode`, Feishu's body as text.
        if body.get("errorMessage").is_some() {
            let raw: Value = body["rawErrorText"]
                .as_str()
                .and_then(|t| serde_json::from_str(t).ok())
                .unwrap_or(Value::Null);
            return match body["errorCode"].as_i64() {
                Some(99_991_679) => Some(needs_sign_in(least(&named_scopes(&raw)))),
                _ => Some(needs_sign_in(Vec::new())),
            };
        }
        match body["code"].as_i64()? {
            99_991_672 => Some(self.app_lacks(&named_scopes(&body))),
            99_991_679 => Some(needs_sign_in(least(&named_scopes(&body)))),
            99_991_661 | 99_991_668 | 99_991_677 => Some(needs_sign_in(Vec::new())),
            _ => None,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_narrow_scope_feishu_names_is_asked_for() {
        let named = |s: &[&str]| s.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            least(&named(&["bitable:app", "base:record:create"])),
            ["base:record:create"]
        );
        assert_eq!(
            least(&named(&[
                "bitable:app",
                "bitable:app:readonly",
                "base:record:retrieve"
            ])),
            ["base:record:retrieve"]
        );
        // One the app never heard of: the narrowest.
        assert_eq!(
            least(&named(&[
                "sheets:spreadsheet",
                "sheets:spreadsheet:readonly"
            ])),
            ["sheets:spreadsheet:readonly"]
        );
        let body =
            json!({"code": 99991679, "msg": "required one of these privileges: [a:b, c:d:read]"});
        assert_eq!(named_scopes(&body), ["a:b", "c:d:read"]);
    }
}
