//! Who the user is, and finding people.

use std::sync::Arc;

use reqwest::Method;
use serde_json::{Map, Value, json};

use super::{FeishuTool, Spec, ToolEnv, object_schema, pick, text_arg};
use crate::api::ApiError;
use crate::ids::{ApiPath, IdKind};

const SEARCH: &str = "contact:user:search";

pub(crate) fn whoami(env: &Arc<ToolEnv>) -> FeishuTool {
    FeishuTool::read(
        Spec {
            name: "whoami",
            description: "Who the signed-in Feishu user is (name and open_id).",
            parameters: object_schema(json!({}), &[]),
            scopes: &[],
            dedup: false,
            ids: &[],
        },
        env,
        |env, _, _| Box::pin(me(env)),
    )
}

pub(crate) fn search_people(env: &Arc<ToolEnv>) -> FeishuTool {
    FeishuTool::read(
        Spec {
            name: "search_people",
            description: "Find people in the user's organisation by name; returns their open_ids.",
            parameters: object_schema(json!({"query": {"type": "string"}}), &["query"]),
            scopes: &[SEARCH],
            dedup: false,
            ids: &[],
        },
        env,
        |env, args, _| Box::pin(search(env, args)),
    )
}

async fn me(env: Arc<ToolEnv>) -> Result<Value, ApiError> {
    let data = env
        .api
        .call(Method::GET, &ApiPath::new("authen/v1/user_info"), &[], None)
        .await?;
    Ok(pick(&data, &["name", "en_name", "open_id", "email"]))
}

/// The user's open_id.
pub(crate) async fn my_open_id(env: &ToolEnv) -> Result<String, ApiError> {
    if let Ok(Some(account)) = env.api.tokens().account().await
        && let Some(user) = account.user
    {
        return Ok(user.open_id);
    }
    let data = env
        .api
        .call(Method::GET, &ApiPath::new("authen/v1/user_info"), &[], None)
        .await?;
    data.get("open_id")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| ApiError::Malformed("user_info has no open_id".into()))
}

async fn search(env: Arc<ToolEnv>, args: Map<String, Value>) -> Result<Value, ApiError> {
    let query = text_arg(&args, "query")?;
    let data = env
        .api
        .call(
            Method::GET,
            &ApiPath::new("search/v1/user"),
            &[("query", query), ("page_size", "20".into())],
            None,
        )
        .await?;
    let users: Vec<Value> = data
        .get("users")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|u| pick(u, &["name", "open_id", "department_ids"]))
        .collect();
    Ok(json!({"people": users}))
}

/// An id that cannot be named, shortened so a card stays readable (`ou_fa77…b5f8`); the card's
/// arguments still show it whole.
fn short_id(id: &str) -> String {
    let chars: Vec<char> = id.chars().collect();
    if chars.len() <= 12 {
        return id.to_owned();
    }
    let head: String = chars[..7].iter().collect();
    let tail: String = chars[chars.len() - 4..].iter().collect();
    format!("{head}…{tail}")
}

/// One person, by open_id (`contact/v3/users/:open_id`). An id of the wrong shape is refused
/// before any request, as Feishu would refuse it.
async fn look_up(env: &ToolEnv, open_id: &str) -> Result<Value, ApiError> {
    let path = ApiPath::new("contact/v3/users").id(IdKind::OpenId, "open_id", open_id)?;
    env.api
        .call(
            Method::GET,
            &path,
            &[("user_id_type", "open_id".into())],
            None,
        )
        .await
}

/// People's names for a preview; an id that cannot be looked up is shown shortened.
pub(crate) async fn names(env: &ToolEnv, open_ids: &[String]) -> Vec<String> {
    let mut names = Vec::with_capacity(open_ids.len());
    // A preview looks up at most ten people; beyond that the count says enough.
    for id in open_ids.iter().take(10) {
        let name = look_up(env, id).await.ok().and_then(|d| {
            d.pointer("/user/name")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        names.push(name.unwrap_or_else(|| short_id(id)));
    }
    if open_ids.len() > 10 {
        names.push(format!("+{}", open_ids.len() - 10));
    }
    names
}

/// Feishu's answer to a user id no user of the tenant has (contact-v3/user/get).
const USER_ID_INVALID: i64 = 41012;

/// The open_ids Feishu says no user has. An id whose lookup fails for any other reason (not
/// signed in, offline, rate limited) is not counted: only Feishu's own "no such user" refuses.
pub(crate) async fn unknown(env: &ToolEnv, open_ids: &[String]) -> Vec<String> {
    let mut unknown = Vec::new();
    for id in open_ids {
        match look_up(env, id).await {
            Err(ApiError::BadId(_)) => unknown.push(id.clone()),
            Err(e) if e.code() == Some(USER_ID_INVALID) => unknown.push(id.clone()),
            _ => {}
        }
    }
    unknown
}

#[cfg(test)]
mod tests {
    use super::short_id;

    #[test]
    fn unnamed_ids_are_shortened_but_recognisable() {
        assert_eq!(
            short_id("ou_fa77b4f09ce1149cb948721a5ca4b5f8"),
            "ou_fa77…b5f8"
        );
        assert_eq!(short_id("ou_short"), "ou_short");
    }
}
