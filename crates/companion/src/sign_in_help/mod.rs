//! Why a sign-in did not finish, worded so the user can fix it: the setting in the Feishu
//! developer console to change, with the exact value to enter (a scope name, the redirect URL)
//! and a link to the console page. Feishu's authorize page refuses a request with a code on the
//! page ("错误码：20029 …"); the sign-in window reads it there and the shell reports it here.
//! A sign-in that leaves for the company's identity provider continues in the system browser,
//! and one nobody finishes ends with its own explanation.
//!
//! The codes: 20027 a scope the app has not enabled and 20029 a redirect URL not registered
//! (获取授权码 → 常见问题, <https://open.feishu.cn/document/common-capabilities/sso/api/obtain-oauth-code>;
//! 如何解决授权免登页面 20029 错误, <https://open.feishu.cn/document/faq/trouble-shooting/how-to-resolve-the-authorization-page-20029-error>);
//! 20009 app not installed (no version published), 20010 user outside the app's availability,
//! 20048 app does not exist and 20069 app disabled, as Feishu's error-code table and token
//! endpoint name them (通用错误码, <https://open.feishu.cn/document/ukTMukTMukTM/ugjM14COyUjL4ITN>).

pub(crate) mod problem;

pub use problem::{SignInProblem, SignInProblemView, console_base};

use crate::context::Context;
use crate::events::SignInStatus;

/// Feishu's authorize page refused the sign-in in progress with `code` (read off the page
/// by the sign-in window; `named`: scope names it showed). The sign-in stops, its port is
/// freed, and the card says what to change.
pub(crate) async fn sign_in_refused(
    ctx: &Context,
    code: i64,
    requested: Vec<String>,
    named: Vec<String>,
) {
    ctx.stop_sign_in().await;
    let problem = SignInProblem::from_code(
        code,
        &requested,
        &named,
        &ctx.settings().feishu.redirect_url(),
        &ctx.feishu_app_id(),
    );
    tracing::info!(code, "Feishu's authorize page refused the sign-in");
    ctx.announce(SignInStatus::Refused {
        problem: describe(ctx, &problem),
    });
}

/// A problem in words for this app's console.
pub(crate) fn describe(ctx: &Context, problem: &SignInProblem) -> SignInProblemView {
    let brand = ctx.settings().feishu.brand;
    problem.view(console_base(brand), &ctx.feishu_app_id())
}

/// The sign-in left the embedded window for the system browser (the tenant's own identity
/// provider); the same sign-in (state, PKCE verifier, listener) finishes there.
pub(crate) fn sign_in_continues_in_browser(ctx: &Context) {
    ctx.announce(SignInStatus::InBrowser);
}
