//! The bot client and the long connection of the app the app runs on now (the demo's emulator
//! app, or the user's own), rebuilt when that app changes; and "Check connection"'s part.

use std::sync::Arc;

use feishu::longconn::{LinkState, LongConnection, Options};
use feishu::{AppCredentials, BotClient, Endpoints};
use secrecy::SecretString;

use super::RemoteApproval;
use crate::check::CheckItemView;
use crate::error::CompanionError;
use crate::options::{APP_SECRET, DEMO_APP_ID};
use crate::sync::lock;
use crate::text::Text;

/// Feishu's code when the app has no bot capability.
const NO_BOT: i64 = 230006;

pub(super) struct Link {
    /// The Open API base and the App ID it was made for.
    key: (String, String),
    bot: BotClient,
    conn: LongConnection,
}

impl Link {
    pub(super) fn bot(&self) -> &BotClient {
        &self.bot
    }

    pub(super) fn key(&self) -> &(String, String) {
        &self.key
    }

    pub(super) fn state(&self) -> LinkState {
        self.conn.state().borrow().clone()
    }

    pub(super) async fn shutdown(self) {
        self.conn.shutdown().await;
    }
}

/// A link state's name for the UI, and its error.
pub(super) fn state_name(state: &LinkState) -> (&'static str, Option<String>) {
    match state {
        LinkState::Connecting => ("connecting", None),
        LinkState::Connected => ("connected", None),
        LinkState::Reconnecting { error, .. } => ("reconnecting", Some(error.clone())),
        LinkState::Stopped { error } => ("stopped", error.clone()),
    }
}

impl RemoteApproval {
    /// The hosts and credentials of the app the runtime uses now.
    fn bot_app(&self) -> Result<(Endpoints, AppCredentials), CompanionError> {
        let endpoints = self.tokens().oauth().endpoints().clone();
        let app_id = self.feishu_app_id();
        let secret = if self.is_demo() {
            // The demo's emulator app takes its id as its secret (see runtime::build).
            DEMO_APP_ID.to_owned()
        } else {
            self.secret(APP_SECRET)?.ok_or_else(|| {
                CompanionError::Other("the App Secret is not set (Settings → Feishu app)".into())
            })?
        };
        Ok((
            endpoints,
            AppCredentials {
                app_id,
                app_secret: SecretString::from(secret),
            },
        ))
    }

    /// The bot client for the app now, with its long connection opened (or reopened for a
    /// different app).
    pub(super) async fn ensure_link(&self) -> Result<BotClient, CompanionError> {
        let (endpoints, credentials) = self.bot_app()?;
        let key = (
            endpoints.open.as_str().to_owned(),
            credentials.app_id.clone(),
        );
        let remote = self.remote();
        let old = {
            let mut state = lock(&remote.state);
            if let Some(link) = state.link.as_ref().filter(|l| l.key == key) {
                return Ok(link.bot.clone());
            }
            state.link.take()
        };
        if let Some(old) = old {
            old.shutdown().await;
        }
        let bot = BotClient::new(endpoints.clone(), credentials.clone())
            .map_err(|e| CompanionError::Other(e.to_string()))?;
        let handler = Arc::new(super::callback::Handler::new(self.downgrade()));
        let conn = LongConnection::start(endpoints, credentials, handler, Options::default());
        // Cards of another app cannot be updated by this one's bot; this app's cards from before
        // a restart are picked up again.
        let kept = if self.is_demo() {
            Default::default()
        } else {
            super::kept::load(&self.kept_cards_file(), &key)
        };
        let mut state = lock(&remote.state);
        state.summary = kept.summary;
        state.cards = kept
            .cards
            .into_iter()
            .map(|(call_id, message_id)| {
                (
                    call_id,
                    super::CardState {
                        message_id: Some(message_id),
                        ..Default::default()
                    },
                )
            })
            .collect();
        state.link = Some(Link {
            key,
            bot: bot.clone(),
            conn,
        });
        Ok(bot)
    }
}

fn item(part: &str, ok: bool, label: Text, detail: Text) -> CheckItemView {
    CheckItemView {
        part: part.to_owned(),
        ok,
        label,
        detail,
    }
}

/// The bot capability, the scope to send as the bot, and the long connection.
pub(super) async fn check(app: &RemoteApproval) -> Vec<CheckItemView> {
    let bot_label = Text::new("机器人能力", "Bot capability");
    let scope_label = Text::new(
        "以应用身份发消息的权限",
        "Permission to send messages as the app",
    );
    let conn_label = Text::new("长连接（接收卡片回调）", "Long connection (card callbacks)");
    let (endpoints, credentials) = match app.bot_app() {
        Ok(found) => found,
        Err(e) => {
            let detail = Text::new(format!("无法检查：{e}"), format!("Cannot check: {e}"));
            return vec![
                item("feishu_bot", false, bot_label, detail.clone()),
                item("feishu_bot_scope", false, scope_label, detail.clone()),
                item("feishu_long_connection", false, conn_label, detail),
            ];
        }
    };
    let bot = match BotClient::new(endpoints.clone(), credentials.clone()) {
        Ok(bot) => bot,
        Err(e) => {
            let detail = Text::new(format!("无法检查：{e}"), format!("Cannot check: {e}"));
            return vec![item("feishu_bot", false, bot_label, detail)];
        }
    };
    vec![
        bot_item(&bot, bot_label).await,
        scope_item(&bot, scope_label).await,
        conn_item(&endpoints, &credentials, conn_label).await,
    ]
}

/// Whether the app has a bot capability.
async fn bot_item(bot: &BotClient, label: Text) -> CheckItemView {
    match bot.info().await {
        Ok(info) => item(
            "feishu_bot",
            true,
            label,
            Text::new(
                format!("机器人「{}」可用。", info.app_name),
                format!("The bot “{}” is available.", info.app_name),
            ),
        ),
        Err(e) if e.code() == Some(NO_BOT) => item(
            "feishu_bot",
            false,
            label,
            Text::new(
                "应用还没有开启机器人能力：在开发者后台 → 添加应用能力 中添加「机器人」，然后发布一个版本。",
                "The app has no bot yet: in the developer console, Add features → Bot, then publish a version.",
            ),
        ),
        Err(e) => item(
            "feishu_bot",
            false,
            label,
            Text::new(format!("飞书回答：{e}"), format!("Feishu answered: {e}")),
        ),
    }
}

/// Whether the app may send messages as its bot.
async fn scope_item(bot: &BotClient, label: Text) -> CheckItemView {
    match bot.probe_send_scope().await {
        Ok(()) => item(
            "feishu_bot_scope",
            true,
            label,
            Text::new(
                "应用可以以机器人身份发消息。",
                "The app may send messages as its bot.",
            ),
        ),
        Err(feishu::ApiError::ScopeNotEnabled { .. }) => item(
            "feishu_bot_scope",
            false,
            label,
            Text::new(
                "应用还没有开通 im:message:send_as_bot（以应用的身份发消息）：在开发者后台 → 权限管理 中开通，然后发布一个版本。",
                "The app lacks im:message:send_as_bot (send messages as the app): enable it under Permissions & Scopes in the developer console, then publish a version.",
            ),
        ),
        Err(e) => item(
            "feishu_bot_scope",
            false,
            label,
            Text::new(format!("无法检查：{e}"), format!("Cannot check: {e}")),
        ),
    }
}

/// Whether the long connection opens, which card callbacks need.
async fn conn_item(
    endpoints: &Endpoints,
    credentials: &AppCredentials,
    label: Text,
) -> CheckItemView {
    match feishu::longconn::probe(endpoints, credentials).await {
        Ok(()) => item(
            "feishu_long_connection",
            true,
            label,
            Text::new("长连接可以建立。", "The long connection opens."),
        ),
        Err(e) => item(
            "feishu_long_connection",
            false,
            label,
            Text::new(
                format!(
                    "长连接无法建立（{e}）。在开发者后台 → 事件与回调 → 回调配置 中选择「使用长连接接收回调」，并添加回调 card.action.trigger（卡片回传交互）。"
                ),
                format!(
                    "The long connection does not open ({e}). In the developer console, Events & Callbacks → Callback configuration: choose “Receive callbacks through persistent connection” and add the callback card.action.trigger."
                ),
            ),
        ),
    }
}
