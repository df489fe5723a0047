//! Signing in to Feishu, loopback or device flow, and what follows every sign-in: who it is
//! (the person, [`crate::person`]), then the calls held for a permission run again. Functions
//! over the context; the one sign-in in progress is the context's ([`Context::stop_sign_in`]).
//! A remote MCP server's own sign-in is [`crate::mcp::sign_in`]'s; the facade chooses.

use std::collections::BTreeSet;

use feishu::listener::Answer;
use feishu::{Account, DeviceFlowError, LoopbackListener};

use crate::connect::status::DeviceTicket;
use crate::context::Context;
use crate::error::CompanionError;
use crate::events::{SignInStatus, SignInTicket};
use crate::options::PEOPLE_NAMES_SCOPE;

/// Starts a sign-in for `wanted` (with the people-names scope added), returns the page to
/// open, and finishes in the background. Progress arrives as [`crate::UiEvent::SignIn`].
pub(crate) async fn begin(
    ctx: &Context,
    mut wanted: BTreeSet<String>,
) -> Result<SignInTicket, CompanionError> {
    // Asked for with every sign-in: approval cards name people instead of showing open_ids.
    wanted.insert(PEOPLE_NAMES_SCOPE.to_owned());
    let wanted: Vec<String> = wanted.into_iter().collect();
    // A sign-in already waiting holds the redirect port until its task has really ended;
    // aborting only asks for that, so wait for it before binding the port again.
    ctx.stop_sign_in().await;
    if ctx.settings().feishu.uses_device_flow() {
        let ticket = begin_device(ctx, wanted).await?;
        return Ok(SignInTicket {
            url: ticket.url.clone(),
            redirect_uri: String::new(),
            device: Some(ticket),
        });
    }
    let port = ctx.settings().feishu.redirect_port;
    let listener = LoopbackListener::bind(port)
        .await
        .map_err(feishu::SignInError::from)?;
    let request = ctx
        .runtime()
        .tokens
        .oauth()
        .begin_sign_in(&wanted, &listener.redirect_uri())
        .map_err(feishu::SignInError::from)?;
    let ticket = SignInTicket {
        url: request.url.to_string(),
        redirect_uri: request.redirect_uri.clone(),
        device: None,
    };
    ctx.announce(SignInStatus::Waiting {
        url: ticket.url.clone(),
        device: None,
    });
    let me = ctx.clone();
    let task = tokio::spawn(async move {
        let status = finish(&me, listener, request).await;
        me.announce(status);
    });
    ctx.set_sign_in_task(task);
    Ok(ticket)
}

async fn finish(
    ctx: &Context,
    listener: LoopbackListener,
    request: feishu::SignInRequest,
) -> SignInStatus {
    let callback = match listener
        .callback(request.state.secret(), feishu::flow::SIGN_IN_TIMEOUT)
        .await
    {
        Ok(callback) => callback,
        Err(feishu::ListenerError::Timeout(waited)) => {
            return SignInStatus::Refused {
                problem: crate::sign_in_help::describe(
                    ctx,
                    &crate::sign_in_help::SignInProblem::TimedOut {
                        minutes: waited.as_secs().div_ceil(60),
                    },
                ),
            };
        }
        Err(e) => {
            return SignInStatus::Failed {
                message: e.to_string(),
            };
        }
    };
    let Some((code, callback)) = callback.code_or_decline().await else {
        return SignInStatus::Declined;
    };
    // The browser's page waits for this: it says "signed in" only once it is so.
    let account = match ctx.runtime().tokens.complete_sign_in(&request, &code).await {
        Ok(account) => {
            callback.answer(Answer::SignedIn).await;
            account
        }
        Err(e) => {
            callback.answer(Answer::Failed(e.to_string())).await;
            return SignInStatus::Failed {
                message: e.to_string(),
            };
        }
    };
    after_sign_in(ctx, account).await
}

/// What follows every sign-in, loopback or device: who it is, then the held calls run again.
pub(crate) async fn after_sign_in(ctx: &Context, account: Account) -> SignInStatus {
    // Remembered before the held calls run again, so what they add is the person's.
    let switched_from = match &account.user {
        Some(user) => match crate::person::remember_person(
            ctx,
            crate::person::Person {
                open_id: user.open_id.clone(),
                name: user.name.clone(),
            },
        ) {
            Ok(previous) => previous.map(|p| p.name),
            Err(e) => {
                tracing::warn!(error = %e, "cannot remember who signed in");
                None
            }
        },
        None => None,
    };
    ctx.signals().signed_in.emit(&account);
    if let Err(e) = ctx.engine().auth_completed(&account.scopes).await {
        tracing::warn!(error = %e, "resuming calls after sign-in failed");
    }
    // Names the previews could not look up before the sign-in can be looked up now.
    if let Err(e) = ctx.engine().refresh_previews().await {
        tracing::warn!(error = %e, "refreshing previews after sign-in failed");
    }
    SignInStatus::SignedIn {
        name: account.user.map(|u| u.name).unwrap_or_default(),
        scopes: account.scopes,
        switched_from,
    }
}

/// Starts a device sign-in for `scopes`: answers the code to show and finishes in the
/// background exactly as a loopback sign-in does.
async fn begin_device(ctx: &Context, scopes: Vec<String>) -> Result<DeviceTicket, CompanionError> {
    let tokens = ctx.tokens();
    let code = tokens
        .oauth()
        .request_device_code(&scopes)
        .await
        .map_err(feishu::SignInError::from)?;
    let ticket = DeviceTicket::new(&code);
    ctx.announce(SignInStatus::Waiting {
        url: ticket.url.clone(),
        device: Some(ticket.clone()),
    });
    let me = ctx.clone();
    let task = tokio::spawn(async move {
        let status = match tokens.oauth().wait_for_device_token(&code).await {
            Ok(set) => match tokens.store_sign_in(set).await {
                Ok(account) => after_sign_in(&me, account).await,
                Err(e) => SignInStatus::Failed {
                    message: e.to_string(),
                },
            },
            Err(DeviceFlowError::Denied) => SignInStatus::Declined,
            Err(DeviceFlowError::Expired) => SignInStatus::Expired,
            Err(e) => SignInStatus::Failed {
                message: e.to_string(),
            },
        };
        me.announce(status);
    });
    ctx.set_sign_in_task(task);
    Ok(ticket)
}

/// Runs a call that waits for a permission again (after the app was granted it).
/// The answer is where the call's turn stands then.
pub(crate) async fn retry_auth_call(
    ctx: &Context,
    pending: Vec<agent::CallRecord>,
    call_id: &str,
) -> Result<crate::view::timeline::TurnView, CompanionError> {
    let call = pending
        .into_iter()
        .find(|c| c.call_id == call_id && c.status == agent::CallStatus::AwaitingAuth)
        .ok_or_else(|| CompanionError::Other("this call is no longer waiting".to_owned()))?;
    let outcomes = ctx.engine().auth_completed(&call.auth_scopes).await?;
    Ok(outcomes
        .into_iter()
        .find(|t| t.invocation_id == call.invocation_id)
        .map(Into::into)
        .unwrap_or(crate::view::timeline::TurnView {
            invocation_id: call.invocation_id,
            status: "suspended".to_owned(),
        }))
}
