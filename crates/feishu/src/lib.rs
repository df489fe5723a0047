//! Feishu (and Lark) for Feishu Companion: signing the user in and talking to the Open API.
//!
//! Terms. The *app* is the Feishu app the user registered (App ID `cli_…` and App Secret). A
//! *scope* is one Feishu permission (`calendar:calendar:readonly`); grants accumulate, so signing
//! in again asks only for what is missing. The *user access token* is what API calls carry; the
//! *refresh token* (single use, rotating) gets a new one. The *loopback listener* is the small
//! HTTP server on `127.0.0.1:<port>/callback` that catches the browser's redirect after consent.
//! The *bot* ([`bot`]) is the app acting as itself, with a tenant access token, to send the user
//! interactive cards; the *long connection* ([`longconn`]) is the WebSocket an app opens with its
//! App ID and Secret to receive card callbacks without a public URL.
//! The *device flow* ([`device`]) signs the user in with a code confirmed on Feishu's page (a QR
//! code on the phone) instead of a redirect; *self-registration* ([`registration`]) creates the
//! user's own app the same way, so no developer console is needed.
//! Base URLs are configuration, so the same code runs against Feishu, Lark and the emulator.
//!
//! Imports: `agent` (its tools), `store` (the token vault) and `lark-frame` (the long connection's
//! frames); never the application core.

pub mod api;
pub mod bot;
pub mod config;
pub mod device;
pub mod flow;
pub mod ids;
pub mod listener;
pub mod longconn;
pub mod oauth;
pub mod registration;
pub mod tokens;
pub mod tools;

pub use api::{ApiClient, ApiError, PageStyle, RetryPolicy};
pub use bot::{BotClient, BotInfo};
pub use config::{AppCredentials, Brand, Endpoints};
pub use device::{DeviceCode, DeviceFlowError};
pub use flow::{SignInError, missing_scopes_from_error};
pub use ids::{ApiPath, BadId, IdKind};
pub use listener::{CallbackOutcome, ListenerError, LoopbackListener};
pub use oauth::{FeishuOAuthError, OAuthClient, RefreshAction, SignInRequest, TokenSet, UserInfo};
pub use registration::{Registration, RegistrationClient};
pub use tokens::{
    Account, MemoryTokenStore, StoredToken, TokenError, TokenManager, TokenStore, VaultTokenStore,
};
pub use tools::{
    APP_SCOPES, AUTO_APPROVED_SCOPES, FIRST_SIGN_IN_SCOPES, FeishuTool, ToolEnv, all_tools,
    choose_scopes,
};
