//! What the user's Python reaches outside the sandbox: the built-in tools (reads, and writes only
//! inside an approved call), and HTTP to the hosts the user allowed for the calling file.
//!
//! Every request is checked against the file's list before anything is sent: the host must be
//! listed (exactly, or under a `*.` wildcard), and Feishu's Open API is reachable only when the
//! user ticked it for that file, in which case the request carries the signed-in user's token
//! (the code never sees it). A refusal names the host and where to allow it.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use agent::ExternalResponse;
use async_trait::async_trait;
use base64::Engine as _;
use feishu::TokenManager;
use pysandbox::{Host, HostCall, HttpRequest, ToolsHost};
use secrecy::ExposeSecret as _;
use serde_json::Value;
use url::Url;

use crate::settings::assistant::PythonFileSettings;

/// The longest any HTTP request from Python may take, whatever its own timeout says (the
/// sandbox's deadline bounds the whole call anyway).
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// The most of a response body handed to Python.
const MAX_BODY: usize = 4 * 1024 * 1024;

/// What the host reaches through the current runtime (see [`crate::runtime`]): replaced when
/// the settings rebuild it, so Python loaded earlier calls the new Feishu app and sign-in.
struct Attached {
    tools: ToolsHost,
    feishu_open: Url,
    tokens: Arc<TokenManager>,
}

/// The app's [`Host`] for Python code.
pub(crate) struct AppHost {
    attached: RwLock<Option<Arc<Attached>>>,
    files: Arc<RwLock<BTreeMap<String, PythonFileSettings>>>,
    client: reqwest::Client,
}

impl AppHost {
    pub(crate) fn new(
        files: Arc<RwLock<BTreeMap<String, PythonFileSettings>>>,
    ) -> Result<AppHost, String> {
        // reqwest is built without a default TLS provider; the app's is ring, as elsewhere.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(HTTP_TIMEOUT)
            // Redirects are followed by hand, so each hop is checked against the allowed list.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| e.to_string())?;
        Ok(AppHost {
            attached: RwLock::new(None),
            files,
            client,
        })
    }

    /// Points the host at a runtime's built-in tools, Feishu Open API and sign-in.
    pub(crate) fn attach(&self, runtime: &crate::runtime::Runtime) {
        let attached = Attached {
            tools: ToolsHost::new(runtime.builtin.clone()),
            feishu_open: runtime.feishu_open.clone(),
            tokens: runtime.tokens.clone(),
        };
        *self
            .attached
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::new(attached));
    }

    fn attached(&self) -> Option<Arc<Attached>> {
        self.attached
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn settings_of(&self, file: &str) -> PythonFileSettings {
        self.files
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(file)
            .cloned()
            .unwrap_or_default()
    }
}

fn not_ready() -> ExternalResponse {
    refused(
        503,
        "Service Unavailable",
        "the app is still starting; try again in a moment (应用仍在启动，请稍后重试)".to_owned(),
    )
}

/// Whether `host` is on the list: exactly, or under a `*.example.com` entry.
pub(crate) fn host_allowed(list: &[String], host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    list.iter().any(|entry| {
        let entry = entry.trim().trim_end_matches('.').to_ascii_lowercase();
        match entry.strip_prefix("*.") {
            Some(domain) => host.ends_with(&format!(".{domain}")),
            None => !entry.is_empty() && entry == host,
        }
    })
}

fn refused(status: u16, reason: &str, text: String) -> ExternalResponse {
    ExternalResponse::new(status, text).with_reason(reason)
}

/// Why a URL may not be reached from `file`, or `None` (and whether it is Feishu's Open API).
/// The refusal is the answer Python gets, built once here rather than boxed and unboxed.
#[allow(clippy::result_large_err)]
fn check(
    url: &Url,
    file: &str,
    settings: &PythonFileSettings,
    feishu_open: &Url,
) -> Result<bool, ExternalResponse> {
    let Some(host) = url.host_str() else {
        return Err(refused(400, "Bad Request", format!("{url} has no host")));
    };
    let is_feishu = url.origin() == feishu_open.origin();
    if is_feishu {
        if settings.feishu_api {
            return Ok(true);
        }
        return Err(refused(
            403,
            "Host Not Allowed",
            format!(
                "{host} is Feishu's Open API, which {file} may not call: tick “Feishu Open API as me” \
                 for {file} in Settings → Assistant (设置 → 助手 → {file} → 允许以我的身份调用飞书开放平台)"
            ),
        ));
    }
    if !matches!(url.scheme(), "https" | "http") {
        return Err(refused(
            400,
            "Bad Request",
            format!("{url}: only http and https URLs can be requested"),
        ));
    }
    if host_allowed(&settings.allowed_hosts, host) {
        Ok(false)
    } else {
        Err(refused(
            403,
            "Host Not Allowed",
            format!(
                "{host} is not an allowed host for {file}: add it to {file}'s allowed hosts in \
                 Settings → Assistant (设置 → 助手 → {file} → 允许的主机)"
            ),
        ))
    }
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `params`/`form` values as pairs: a list is a key repeated.
fn pairs(map: &serde_json::Map<String, Value>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (key, value) in map {
        match value {
            Value::Array(values) => out.extend(values.iter().map(|v| (key.clone(), text_of(v)))),
            other => out.push((key.clone(), text_of(other))),
        }
    }
    out
}

#[async_trait]
impl Host for AppHost {
    async fn call_tool(
        &self,
        name: &str,
        args: serde_json::Map<String, Value>,
        call: &HostCall,
    ) -> ExternalResponse {
        match self.attached() {
            Some(attached) => attached.tools.call_tool(name, args, call).await,
            None => not_ready(),
        }
    }

    async fn http(&self, request: HttpRequest, call: &HostCall) -> ExternalResponse {
        let Some(attached) = self.attached() else {
            return not_ready();
        };
        let settings = self.settings_of(&call.file);
        let mut url = match url_of(&request) {
            Ok(url) => url,
            Err(refusal) => return refusal,
        };
        let method = match reqwest::Method::from_bytes(request.method.as_str().as_bytes()) {
            Ok(method) => method,
            Err(e) => return refused(400, "Bad Request", e.to_string()),
        };
        let timeout = request
            .timeout
            .and_then(|t| Duration::try_from_secs_f64(t).ok())
            .map_or(HTTP_TIMEOUT, |t| t.min(HTTP_TIMEOUT));
        // Follow redirects by hand (at most 10), checking each hop against the list.
        let mut hops = 0;
        loop {
            let is_feishu = match check(&url, &call.file, &settings, &attached.feishu_open) {
                Ok(is_feishu) => is_feishu,
                Err(refusal) => return refusal,
            };
            let builder = self
                .client
                .request(method.clone(), url.clone())
                .timeout(timeout);
            let tokens = is_feishu.then_some(&*attached.tokens);
            let builder = match prepared(builder, &request, tokens).await {
                Ok(builder) => builder,
                Err(refusal) => return refusal,
            };
            let response = match builder.send().await {
                Ok(response) => response,
                Err(e) => {
                    return refused(502, "Bad Gateway", format!("{url}: {e}"));
                }
            };
            if let Some(next) = next_hop(&response, &url, &request, hops) {
                url = next;
                hops += 1;
                continue;
            }
            return answer_of(response, &url).await;
        }
    }
}

/// The URL Python asked for, with its `params` added to the query.
#[allow(clippy::result_large_err)]
fn url_of(request: &HttpRequest) -> Result<Url, ExternalResponse> {
    let mut url = match Url::parse(&request.url) {
        Ok(url) => url,
        Err(e) => return Err(refused(400, "Bad Request", format!("{}: {e}", request.url))),
    };
    if !request.params.is_empty() {
        let mut query = url.query_pairs_mut();
        for (key, value) in pairs(&request.params) {
            query.append_pair(&key, &value);
        }
    }
    Ok(url)
}

/// One hop of the request as Python described it: its headers, then the signed-in user's
/// token when the hop goes to Feishu's Open API (`tokens`, only then, so the token never
/// reaches another host), then its body. Not signed in is Python's 401, with what to do.
#[allow(clippy::result_large_err)]
async fn prepared(
    mut builder: reqwest::RequestBuilder,
    request: &HttpRequest,
    tokens: Option<&TokenManager>,
) -> Result<reqwest::RequestBuilder, ExternalResponse> {
    for (key, value) in &request.headers {
        builder = builder.header(key.as_str(), text_of(value));
    }
    if let Some(tokens) = tokens {
        match tokens.access_token().await {
            Ok(token) => {
                builder = builder.bearer_auth(token.expose_secret());
            }
            Err(e) => {
                return Err(refused(
                    401,
                    "Unauthorized",
                    format!("not signed in to Feishu (在应用中登录飞书后重试): {e}"),
                ));
            }
        }
    }
    with_body(builder, request)
}

/// The body: a JSON body, else a form, else text, else bytes (`ces_requests` sets only one,
/// this order decides if more arrive). Undecodable base64 is Python's 400 rather than an empty
/// body sent.
#[allow(clippy::result_large_err)]
fn with_body(
    mut builder: reqwest::RequestBuilder,
    request: &HttpRequest,
) -> Result<reqwest::RequestBuilder, ExternalResponse> {
    if let Some(json) = &request.json {
        builder = builder.json(json);
    } else if let Some(form) = &request.form {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs(form))
            .finish();
        builder = builder
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
    } else if let Some(data) = &request.data {
        builder = builder.body(data.clone());
    } else if let Some(data) = &request.data_base64 {
        match base64::engine::general_purpose::STANDARD.decode(data) {
            Ok(bytes) => builder = builder.body(bytes),
            Err(e) => return Err(refused(400, "Bad Request", format!("data: {e}"))),
        }
    }
    Ok(builder)
}

/// Where a redirect leads, when it is to be followed: Python allowed redirects and fewer than
/// 10 were followed so far. Otherwise (or when the location is unusable) the redirect itself
/// is the answer.
fn next_hop(
    response: &reqwest::Response,
    url: &Url,
    request: &HttpRequest,
    hops: u32,
) -> Option<Url> {
    if !(response.status().is_redirection() && request.allow_redirects && hops < 10) {
        return None;
    }
    response
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|l| l.to_str().ok())
        .and_then(|l| url.join(l).ok())
}

/// The response as Python gets it: headers that are text, at most [`MAX_BODY`] of the body
/// (with the bytes in base64 too when they are not UTF-8, so binary content survives), and a
/// reason only for a status that is neither a success nor a redirect.
async fn answer_of(response: reqwest::Response, url: &Url) -> ExternalResponse {
    let status = response.status();
    let mut headers = BTreeMap::new();
    for (name, value) in response.headers() {
        if let Ok(value) = value.to_str() {
            headers.insert(name.as_str().to_owned(), value.to_owned());
        }
    }
    let bytes = match response.bytes().await {
        Ok(bytes) => bytes,
        Err(e) => return refused(502, "Bad Gateway", format!("{url}: {e}")),
    };
    let bytes = &bytes[..bytes.len().min(MAX_BODY)];
    let (text, body_base64) = match std::str::from_utf8(bytes) {
        Ok(text) => (text.to_owned(), None),
        Err(_) => (
            String::from_utf8_lossy(bytes).into_owned(),
            Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
        ),
    };
    let mut answer = ExternalResponse::new(status.as_u16(), text).with_reason(
        if status.is_success() || status.is_redirection() {
            ""
        } else {
            status.canonical_reason().unwrap_or("Error")
        },
    );
    answer.headers = headers;
    answer.url = url.to_string();
    answer.body_base64 = body_base64;
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_match_exactly_or_under_a_wildcard() {
        let list = vec!["api.example.com".to_owned(), "*.corp.test".to_owned()];
        assert!(host_allowed(&list, "api.example.com"));
        assert!(host_allowed(&list, "API.Example.com."));
        assert!(host_allowed(&list, "wiki.corp.test"));
        assert!(!host_allowed(&list, "corp.test"));
        assert!(!host_allowed(&list, "example.com"));
        assert!(!host_allowed(&list, "api.example.com.evil.test"));
        assert!(!host_allowed(&[], "api.example.com"));
    }

    #[test]
    fn feishu_needs_its_tick_and_other_hosts_their_entry() {
        let open = Url::parse("https://open.feishu.cn").unwrap_or_else(|_| unreachable!());
        let none = PythonFileSettings::default();
        let url =
            Url::parse("https://open.feishu.cn/open-apis/x").unwrap_or_else(|_| unreachable!());
        let Err(refusal) = check(&url, "a.py", &none, &open) else {
            panic!("Feishu was reachable without the tick");
        };
        assert!(refusal.text.contains("a.py") && refusal.text.contains("Settings → Assistant"));
        let ticked = PythonFileSettings {
            feishu_api: true,
            ..PythonFileSettings::default()
        };
        assert_eq!(check(&url, "a.py", &ticked, &open).ok(), Some(true));
        let other = Url::parse("https://api.example.com/x").unwrap_or_else(|_| unreachable!());
        let Err(refusal) = check(&other, "a.py", &ticked, &open) else {
            panic!("an unlisted host was reachable");
        };
        assert_eq!(refusal.status_code, 403);
        assert!(
            refusal
                .text
                .starts_with("api.example.com is not an allowed host for a.py")
        );
    }
}
