//! "Check connection" in Settings: whether what the user entered works, each part in words. The
//! App ID and App Secret are tried for an app access token (`auth/v3/app_access_token/internal`,
//! which takes nothing else); the redirect port is bound and released; the model is sent a
//! one-token request. Each answer says what to change when it fails. Nothing secret is shown.

use std::time::Duration;

use agent::{Content, LlmRequest};
use futures::StreamExt as _;
use secrecy::ExposeSecret as _;
use serde::Serialize;
use serde_json::{Value, json};
use ts_rs::TS;

use crate::context::Context;
use crate::options::APP_SECRET;
use crate::text::Text;

/// How long each check may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(20);

/// One part of the connection, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct CheckItemView {
    /// `feishu_app`, `redirect_port`, `model`; with approving from Feishu on, also
    /// `feishu_bot`, `feishu_bot_scope` and `feishu_long_connection`.
    pub part: String,
    /// Whether it works.
    pub ok: bool,
    /// What was checked.
    pub label: Text,
    /// The outcome in words, and what to do when it failed.
    pub detail: Text,
}

/// Every part, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct CheckView {
    /// The App ID and Secret, the redirect port, the model.
    pub items: Vec<CheckItemView>,
}

fn item(part: &str, ok: bool, label: Text, detail: Text) -> CheckItemView {
    CheckItemView {
        part: part.to_owned(),
        ok,
        label,
        detail,
    }
}

/// Checks the App ID and Secret, the redirect port and the model as the settings hold them
/// (not the demo's stand-ins), and says how each went. Approving from Feishu adds its own parts
/// ([`crate::remote_approval`]), which the facade appends.
pub(crate) async fn check_connection(ctx: &Context) -> CheckView {
    let (feishu, port, model) = tokio::join!(
        check_feishu_app(ctx),
        check_redirect_port(ctx),
        check_model(ctx)
    );
    CheckView {
        items: vec![feishu, port, model],
    }
}

async fn check_feishu_app(ctx: &Context) -> CheckItemView {
    let label = Text::new(
        "飞书应用（App ID 与 App Secret）",
        "Feishu app (App ID and App Secret)",
    );
    let (ok, detail) = match credentials(ctx) {
        Ok((app_id, secret)) => ask_for_app_token(ctx, &app_id, &secret).await,
        Err(detail) => (false, detail),
    };
    item("feishu_app", ok, label, detail)
}

/// The App ID and Secret as entered, or what is missing.
fn credentials(ctx: &Context) -> Result<(String, secrecy::SecretString), Text> {
    let settings = ctx.settings();
    let secret = ctx
        .vault_secret(APP_SECRET)
        .map(secrecy::SecretString::from);
    match (settings.feishu.app_id.as_str(), secret) {
        ("", _) | (_, None) => Err(Text::new(
            "还没有填写 App ID 和 App Secret（在开发者后台 → 凭证与基础信息中可以找到）。",
            "No App ID and App Secret yet (the developer console shows them under Credentials & Basic Info).",
        )),
        (app_id, Some(secret)) => Ok((app_id.to_owned(), secret)),
    }
}

/// Asks Feishu for an app access token with these credentials: whether it gave one, in words.
async fn ask_for_app_token(
    ctx: &Context,
    app_id: &str,
    secret: &secrecy::SecretString,
) -> (bool, Text) {
    let base = ctx.feishu_base_url(ctx.settings().feishu.brand);
    let url = format!("{base}/open-apis/auth/v3/app_access_token/internal");
    feishu::oauth::install_crypto_provider();
    let client = match reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(CHECK_TIMEOUT)
        .build()
    {
        Ok(client) => client,
        Err(e) => {
            return (
                false,
                Text::new(format!("无法检查：{e}"), format!("Cannot check: {e}")),
            );
        }
    };
    let answer = client
        .post(&url)
        .json(&json!({"app_id": app_id, "app_secret": secret.expose_secret()}))
        .send()
        .await;
    let host = url::Url::parse(&base)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or(base);
    match answer {
        Ok(answer) => token_verdict(&host, answer.json().await.ok()),
        Err(_) => (
            false,
            Text::new(
                format!("连不上 {host}：检查网络，以及设置中选择的是飞书还是 Lark。"),
                format!(
                    "Cannot reach {host}: check the network, and whether Settings say Feishu or Lark."
                ),
            ),
        ),
    }
}

/// What Feishu's answer to the token request says of the credentials.
fn token_verdict(host: &str, body: Option<Value>) -> (bool, Text) {
    let code = body.as_ref().and_then(|b| b["code"].as_i64());
    let msg = body
        .as_ref()
        .and_then(|b| b["msg"].as_str())
        .unwrap_or_default()
        .to_owned();
    match code {
        Some(0) => (
            true,
            Text::new(
                format!("{host} 接受了这个 App ID 和 App Secret。"),
                format!("{host} accepted this App ID and App Secret."),
            ),
        ),
        Some(code) => (
            false,
            Text::new(
                format!(
                    "飞书拒绝了（错误码 {code}：{msg}）。核对 App ID 与 App Secret 是否来自同一个应用，是否选对了飞书或 Lark；重置过 Secret 的话请重新填写。"
                ),
                format!(
                    "Feishu refused them (code {code}: {msg}). Check that the App ID and App Secret are the same app's, and Feishu vs Lark; if the secret was reset, enter the new one."
                ),
            ),
        ),
        None => (
            false,
            Text::new(
                format!("{host} 的回答看不懂。"),
                format!("{host} answered something that is not Feishu's."),
            ),
        ),
    }
}

async fn check_redirect_port(ctx: &Context) -> CheckItemView {
    let settings = ctx.settings();
    let port = settings.feishu.redirect_port;
    let url = settings.feishu.redirect_url();
    let label = Text::new("重定向端口", "Redirect port");
    if ctx.sign_in_waiting() {
        return item(
            "redirect_port",
            true,
            label,
            Text::new(
                format!(
                    "端口 {port} 正由进行中的登录使用；在开发者后台登记的重定向 URL 应为 {url}。"
                ),
                format!(
                    "Port {port} is in use by the sign-in in progress; the redirect URL to register is {url}."
                ),
            ),
        );
    }
    match std::net::TcpListener::bind(("127.0.0.1", port)) {
        Ok(listener) => {
            drop(listener);
            item(
                "redirect_port",
                true,
                label,
                Text::new(
                    format!(
                        "端口 {port} 可用。在开发者后台 → 安全设置中登记的重定向 URL 必须是 {url}。"
                    ),
                    format!(
                        "Port {port} is free. The redirect URL registered under Security settings must be {url}."
                    ),
                ),
            )
        }
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => item(
            "redirect_port",
            false,
            label,
            Text::new(
                format!(
                    "端口 {port} 已被其他程序占用：关闭那个程序，或换一个端口并在开发者后台登记新的重定向 URL。"
                ),
                format!(
                    "Another program holds port {port}: close it, or choose another port and register the new redirect URL in the developer console."
                ),
            ),
        ),
        Err(e) => item(
            "redirect_port",
            false,
            label,
            Text::new(
                format!("无法使用端口 {port}：{e}"),
                format!("Cannot use port {port}: {e}"),
            ),
        ),
    }
}

/// Sends the model one short request and reads its answer to the end of its first chunk: an
/// answer at all is what is being checked.
async fn ping(config: llm::ProviderConfig) -> Result<(), String> {
    let name = config.model.clone();
    let model = llm::connect(config).map_err(|e| e.to_string())?;
    let mut stream = model
        .generate(LlmRequest {
            model: Some(name),
            contents: vec![Content::user_text("ping")].into(),
            config: None,
        })
        .await
        .map_err(|e| e.message)?;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| e.message)?;
        if chunk.partial != Some(true) {
            break;
        }
    }
    Ok(())
}

async fn check_model(ctx: &Context) -> CheckItemView {
    let settings = ctx.settings();
    let label = Text::new("模型", "Model");
    let Some(preset) = llm::preset(&settings.model.preset) else {
        return item(
            "model",
            false,
            label,
            Text::new("未知的模型预设。", "Unknown model preset."),
        );
    };
    let key = preset.key_name.and_then(|name| ctx.vault_secret(name));
    if preset.key_required && key.is_none() {
        return item(
            "model",
            false,
            label,
            Text::new(
                format!("还没有填写 {} 的 API 密钥。", preset.name_zh),
                format!("No API key for {} yet.", preset.name_en),
            ),
        );
    }
    // The preset's own options (usage chunk, reasoning sent back) come with it.
    let mut config = preset.config(key.map(llm::ApiKey::new));
    if let Some(base_url) = settings.model.base_url.clone() {
        config.base_url = base_url;
    }
    if let Some(model) = settings.model.model.clone() {
        config.model = model;
    }
    // One token, no retries: an answer at all is what is being checked.
    config.options.max_tokens = Some(1);
    config.http.retry.max_retries = 0;
    config.http.read_timeout = CHECK_TIMEOUT;
    let name = config.model.clone();
    match tokio::time::timeout(CHECK_TIMEOUT, ping(config)).await {
        Ok(Ok(())) => item(
            "model",
            true,
            label,
            Text::new(
                format!("{} 的 {name} 回答了。", preset.name_zh),
                format!("{}'s {name} answered.", preset.name_en),
            ),
        ),
        Ok(Err(message)) => item(
            "model",
            false,
            label,
            Text::new(
                format!(
                    "{} 没有回答：{message}。检查 API 密钥、模型名和地址。",
                    preset.name_zh
                ),
                format!(
                    "{} did not answer: {message}. Check the API key, the model name and the address.",
                    preset.name_en
                ),
            ),
        ),
        Err(_) => item(
            "model",
            false,
            label,
            Text::new(
                format!(
                    "{} 在 {} 秒内没有回答。",
                    preset.name_zh,
                    CHECK_TIMEOUT.as_secs()
                ),
                format!(
                    "{} did not answer within {} s.",
                    preset.name_en,
                    CHECK_TIMEOUT.as_secs()
                ),
            ),
        ),
    }
}
