//! The assistant's Feishu tools: reads that run at once, and writes that wait for the user.
//!
//! Every tool declares the scopes it needs (the narrowest that work, so a sign-in asks for
//! little), whether it writes (and so needs approval), and whether Feishu deduplicates its writes
//! by the call's idempotency key (message `uuid`, calendar `idempotency_key`, task and docx
//! `client_token`). Writes describe themselves for the approval card in Chinese and English, with
//! times in the user's time zone and people and chats by name. Feishu's failures become the
//! outcome contract: a missing user scope is `NEEDS_USER_AUTH` with exactly the scopes to ask for,
//! a scope the app lacks is `FAILED` with a message for the admin.

mod calendar;
mod docs;
mod im;
mod people;
mod tasks;
mod time;

use std::sync::Arc;

use agent::{AgentTool, Localized, Preview, ToolContext, ToolOutcome, ToolResult, ToolReturn};
use async_trait::async_trait;
use futures::future::BoxFuture;
use jiff::tz::TimeZone;
use serde_json::{Map, Value, json};

use crate::api::{ApiClient, ApiError};
use crate::ids::{BadId, IdKind};

/// What every tool needs: the API client and the user's time zone.
#[derive(Debug, Clone)]
pub struct ToolEnv {
    /// The Open API client, signed in as the user.
    pub api: ApiClient,
    /// The user's time zone, for reading and showing times.
    pub tz: TimeZone,
}

type Runner =
    fn(Arc<ToolEnv>, Map<String, Value>, String) -> BoxFuture<'static, Result<Value, ApiError>>;
type Previewer = fn(Arc<ToolEnv>, Map<String, Value>) -> BoxFuture<'static, Preview>;

/// The fixed description of one tool.
#[derive(Debug, Clone)]
pub(crate) struct Spec {
    pub(crate) name: &'static str,
    pub(crate) description: &'static str,
    pub(crate) parameters: Value,
    pub(crate) scopes: &'static [&'static str],
    pub(crate) dedup: bool,
    /// The arguments that are Feishu ids (a string, or an array of strings), with their kind.
    pub(crate) ids: &'static [(&'static str, IdKind)],
}

/// One Feishu tool.
pub struct FeishuTool {
    spec: Spec,
    env: Arc<ToolEnv>,
    run: Runner,
    preview: Option<Previewer>,
}

impl std::fmt::Debug for FeishuTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FeishuTool")
            .field("name", &self.spec.name)
            .finish_non_exhaustive()
    }
}

impl FeishuTool {
    pub(crate) fn read(spec: Spec, env: &Arc<ToolEnv>, run: Runner) -> Self {
        FeishuTool {
            spec,
            env: env.clone(),
            run,
            preview: None,
        }
    }

    pub(crate) fn write(spec: Spec, env: &Arc<ToolEnv>, run: Runner, preview: Previewer) -> Self {
        FeishuTool {
            spec,
            env: env.clone(),
            run,
            preview: Some(preview),
        }
    }

    /// Whether the tool writes (and so waits for approval).
    pub fn is_write(&self) -> bool {
        self.preview.is_some()
    }

    /// The arguments that are Feishu ids, with their kind.
    pub fn id_arguments(&self) -> &'static [(&'static str, IdKind)] {
        self.spec.ids
    }

    /// Checks every id argument's shape, so no id can steer a request to another endpoint.
    pub fn check_ids(&self, args: &Map<String, Value>) -> Result<(), BadId> {
        for (name, kind) in self.spec.ids {
            match args.get(*name) {
                Some(Value::String(value)) => {
                    kind.check(name, value)?;
                }
                Some(Value::Array(values)) => {
                    for (i, value) in values.iter().enumerate() {
                        if let Some(value) = value.as_str() {
                            kind.check(&format!("{name}[{i}]"), value)?;
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

#[async_trait]
impl AgentTool for FeishuTool {
    fn name(&self) -> &str {
        self.spec.name
    }

    fn description(&self) -> &str {
        self.spec.description
    }

    fn parameters(&self) -> Value {
        self.spec.parameters.clone()
    }

    fn requires_approval(&self, _args: &Map<String, Value>) -> bool {
        self.is_write()
    }

    fn check_args(&self, args: &Map<String, Value>) -> Result<(), String> {
        self.check_ids(args).map_err(|e| e.to_string())
    }

    fn scopes(&self) -> Vec<String> {
        self.spec.scopes.iter().map(|s| (*s).to_owned()).collect()
    }

    fn deduplicates(&self) -> bool {
        self.spec.dedup
    }

    async fn preview(&self, args: &Map<String, Value>) -> Option<Preview> {
        let preview = self.preview?;
        // A preview looks things up by id: never with an id that could leave its endpoint.
        self.check_ids(args).ok()?;
        Some(preview(self.env.clone(), args.clone()).await)
    }

    async fn verify(&self, args: &Map<String, Value>) -> Result<(), Localized> {
        // Only a write is edited by the user; its people are looked up so a mistyped open_id is
        // refused in the editor rather than by Feishu after the approval.
        if !self.is_write() {
            return Ok(());
        }
        let mut people = Vec::new();
        for (name, kind) in self.spec.ids {
            if *kind != IdKind::OpenId {
                continue;
            }
            match args.get(*name) {
                Some(Value::String(id)) => people.push(id.clone()),
                Some(Value::Array(ids)) => {
                    people.extend(ids.iter().filter_map(Value::as_str).map(str::to_owned));
                }
                _ => {}
            }
        }
        if people.is_empty() {
            return Ok(());
        }
        let unknown = people::unknown(&self.env, &people).await;
        if unknown.is_empty() {
            return Ok(());
        }
        let list = unknown.join(", ");
        Err(Localized::new(
            format!("飞书中找不到这些人：{list}。请检查 open_id，或先用“查找同事”找到正确的人。"),
            format!(
                "Feishu knows no one with these ids: {list}. Check the open_id, or find the right person by name first."
            ),
        ))
    }

    async fn run(&self, args: Map<String, Value>, ctx: &mut ToolContext) -> ToolReturn {
        // The engine has checked already; checked again here so that no caller of a tool, the
        // engine or any other, can make a request with a hostile id.
        if let Err(e) = self.check_ids(&args) {
            return self.failure(e.into());
        }
        // Checked before the first request, since some writes take two (create an event, then
        // invite): an unknown person must not leave an event behind with nobody invited.
        if let Err(reason) = self.verify(&args).await {
            return ToolResult::new(ToolOutcome::Failed)
                .with_content(format!("{} Nothing was sent to Feishu.", reason.en))
                .into();
        }
        match (self.run)(self.env.clone(), args, ctx.idempotency_key.clone()).await {
            Ok(value) => ToolReturn::from(value),
            Err(ApiError::NeedsAuth { scopes }) => self.needs_auth(scopes).await,
            Err(ApiError::ScopeNotEnabled { scopes, .. }) if !scopes.is_empty() => {
                self.app_lacks(scopes)
            }
            Err(error) => self.failure(error),
        }
    }
}

impl FeishuTool {
    /// The scopes to sign in for: the one Feishu's alternatives and the tool's declaration
    /// agree on (see [`choose_scopes`]), then any other the tool needs to run and the user has
    /// not granted, so one sign-in is enough instead of one card per request the call makes
    /// (creating an event, then inviting its attendees).
    async fn needs_auth(&self, named: Vec<String>) -> ToolReturn {
        let declared = self.spec.scopes;
        let mut scopes = choose_scopes(&named, declared);
        if scopes.is_empty() && !named.is_empty() {
            return ToolResult::new(ToolOutcome::Failed)
                .with_content(format!(
                    "Feishu asks the user to grant one of {}, none of which this app is set up to ask for. Tell the user; signing in again will not help.",
                    named.join(", ")
                ))
                .into();
        }
        let missing = self
            .env
            .api
            .tokens()
            .missing_scopes(&self.scopes())
            .await
            .unwrap_or_else(|_| self.scopes());
        for scope in missing {
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        needs_sign_in(scopes)
    }

    /// The app itself lacks a scope (99991672): only applying for it helps, and an administrator
    /// may have to approve. The call waits like one that needs a sign-in, with the scope-apply
    /// page as its link, so the app can show the page and run the call again on request.
    fn app_lacks(&self, named: Vec<String>) -> ToolReturn {
        let mut scopes = choose_scopes(&named, self.spec.scopes);
        if scopes.is_empty() {
            scopes = named;
        }
        scopes.truncate(1);
        app_lacks_scope(self.env.api.tokens().oauth(), scopes)
    }

    fn failure(&self, error: ApiError) -> ToolReturn {
        let text = match &error {
            ApiError::ScopeNotEnabled { .. } => {
                format!("{error} Tell the user this; retrying will not help.")
            }
            other => other.to_string(),
        };
        ToolResult::new(ToolOutcome::Failed)
            .with_content(text)
            .into()
    }
}

/// The result of a call the app itself cannot make until it is granted `scopes` (99991672):
/// the call waits like one that needs a sign-in, with Feishu's scope-apply page as its link, so
/// the card can show the page and run the call again when the user presses Retry.
pub fn app_lacks_scope(oauth: &crate::OAuthClient, scopes: Vec<String>) -> ToolReturn {
    let url = oauth.endpoints().scope_apply_url(oauth.app_id(), &scopes);
    ToolResult::new(ToolOutcome::NeedsUserAuth)
        .with_content(format!(
            "The user's Feishu app has not been granted {} yet. The app is showing the user a card to apply for it (an administrator may have to approve); the call runs again when they press Retry.",
            scopes.join(", ")
        ))
        .with_auth_scopes(scopes)
        .with_authorize_url(url.to_string())
        .into()
}

/// The result of a call that waits for the user to sign in to Feishu and grant `scopes`: the
/// engine holds it behind an authorization card and runs it again after the sign-in. Every
/// Feishu-backed tool answers this, the app's own and those it reaches over MCP alike.
pub fn needs_sign_in(scopes: Vec<String>) -> ToolReturn {
    ToolResult::new(ToolOutcome::NeedsUserAuth)
        .with_content(format!(
            "The user must sign in to Feishu and grant: {}. The app is showing them a sign-in card; the call runs again by itself afterwards.",
            scopes.join(", ")
        ))
        .with_auth_scopes(scopes)
        .into()
}

/// Every user scope the app may ask for, in the order the README's table and the settings page
/// list them (staying signed in, calendar, chats, docs, tasks, people): what a self-built app must
/// enable, and the only scopes a sign-in ever asks for.
pub const APP_SCOPES: &[&str] = &[
    "offline_access",
    "calendar:calendar:readonly",
    "calendar:calendar.free_busy:read",
    "calendar:calendar.event:create",
    "calendar:calendar.event:update",
    "calendar:calendar.event:delete",
    "im:chat:readonly",
    "im:message:readonly",
    "im:message.group_msg:get_as_user",
    "im:message.p2p_msg:get_as_user",
    "im:message",
    "im:message.send_as_user",
    "search:docs:read",
    "docs:document.content:read",
    "docx:document:readonly",
    "docx:document:create",
    "docx:document:write_only",
    "docx:document.block:convert",
    "drive:drive:readonly",
    "task:task:read",
    "task:task:write",
    "contact:user:search",
    "contact:contact.base:readonly",
];

/// The scopes of [`APP_SCOPES`] that Feishu grants an app made by self-registration without an
/// administrator: Feishu's command-line tool's "auto-approve" set (its scope registry's
/// `recommend: "true"` entries plus its override allow list, minus its deny list), restricted to
/// what this app asks for. `search:docs:read` and `drive:drive:readonly` are not in it, and
/// `im:message.send_as_user` is on the deny list: those need an administrator's approval.
pub const AUTO_APPROVED_SCOPES: &[&str] = &[
    "offline_access",
    "calendar:calendar:readonly",
    "calendar:calendar.free_busy:read",
    "calendar:calendar.event:create",
    "calendar:calendar.event:update",
    "calendar:calendar.event:delete",
    "im:chat:readonly",
    "im:message:readonly",
    "im:message.group_msg:get_as_user",
    "im:message.p2p_msg:get_as_user",
    "im:message",
    "docs:document.content:read",
    "docx:document:readonly",
    "docx:document:create",
    "docx:document:write_only",
    "docx:document.block:convert",
    "task:task:read",
    "task:task:write",
    "contact:user:search",
    "contact:contact.base:readonly",
];

/// What the first sign-in of an app made by self-registration asks for: the read scopes of
/// [`AUTO_APPROVED_SCOPES`], so it needs no administrator and the assistant can answer about
/// the calendar, chats, documents, tasks and people at once. Writes, and reads Feishu does not
/// grant without an administrator, are asked for when a tool first needs them.
pub const FIRST_SIGN_IN_SCOPES: &[&str] = &[
    "calendar:calendar:readonly",
    "calendar:calendar.free_busy:read",
    "im:chat:readonly",
    "im:message:readonly",
    "im:message.group_msg:get_as_user",
    "im:message.p2p_msg:get_as_user",
    "docs:document.content:read",
    "docx:document:readonly",
    "task:task:read",
    "contact:user:search",
    "contact:contact.base:readonly",
];

/// The scopes to ask for when Feishu answers 99991679 with `named`, the alternatives it would
/// accept (its `permission_violations` list *every* scope that satisfies the call, e.g. both
/// `task:task:read` and `task:task:write` for listing tasks; see the example under
/// 获取授权码 → 如何获取包含目标权限的 user_access_token,
/// <https://open.feishu.cn/document/common-capabilities/sso/api/obtain-oauth-code>).
///
/// Least privilege: the alternatives the tool declares it needs; failing that, the narrowest
/// alternative among [`APP_SCOPES`] (a read scope before a write one). Never a scope outside
/// [`APP_SCOPES`], which the app's console may not have enabled (Feishu's authorize page would
/// then fail with 20027). Empty when `named` is empty or holds nothing the app may ask for.
pub fn choose_scopes(named: &[String], declared: &[&str]) -> Vec<String> {
    let mut chosen: Vec<String> = declared
        .iter()
        .filter(|d| named.iter().any(|n| n == *d))
        .map(|d| (*d).to_owned())
        .collect();
    if chosen.is_empty()
        && let Some(narrowest) = named
            .iter()
            .filter(|n| APP_SCOPES.contains(&n.as_str()))
            .min_by_key(|n| breadth(n))
    {
        chosen.push(narrowest.clone());
    }
    chosen
}

/// How much a scope grants: 0 reads (`…:readonly`, `…:read`, reading as the user, searching),
/// 1 a narrower write or transform (three segments), 2 a whole resource (`im:message`).
pub fn breadth(scope: &str) -> u8 {
    let segments = scope.split(':').count();
    match scope.rsplit(':').next() {
        Some("readonly" | "read" | "get_as_user" | "search") => 0,
        _ if segments >= 3 => 1,
        _ => 2,
    }
}

/// Whether a scope only reads (what a read tool may ask for).
pub fn is_read_scope(scope: &str) -> bool {
    breadth(scope) == 0
}

/// Every Feishu tool, reads and writes, for an agent.
pub fn all_tools(env: ToolEnv) -> Vec<FeishuTool> {
    let env = Arc::new(env);
    let mut tools = vec![people::whoami(&env), people::search_people(&env)];
    tools.extend(calendar::tools(&env));
    tools.extend(im::tools(&env));
    tools.extend(docs::tools(&env));
    tools.extend(tasks::tools(&env));
    tools
}

/// A required string argument.
pub(crate) fn text_arg(args: &Map<String, Value>, name: &str) -> Result<String, ApiError> {
    args.get(name)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| ApiError::Malformed(format!("argument {name} is missing")))
}

/// An optional string argument.
pub(crate) fn opt_text(args: &Map<String, Value>, name: &str) -> Option<String> {
    args.get(name)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// The JSON Schema of an object with these properties, the first `required` of them required.
pub(crate) fn object_schema(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

/// Picks the named fields of a Feishu object, so the model reads what matters and not kilobytes
/// of ids and flags.
pub(crate) fn pick(value: &Value, fields: &[&str]) -> Value {
    let mut out = Map::new();
    for field in fields {
        if let Some(v) = value.get(*field).filter(|v| !v.is_null()) {
            out.insert((*field).to_owned(), v.clone());
        }
    }
    Value::Object(out)
}
