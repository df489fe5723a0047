//! A sign-in Feishu refuses ends with what to fix, in words, with the exact value: the shell
//! reports the code Feishu's page showed, the core stops the sign-in (freeing the redirect port)
//! and the card names the console setting.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use companion::sign_in_help::{SignInProblem, SignInProblemView};
use companion::{Companion, SignInStatus, UiEvent};

mod common;
use common::open_demo as open;

async fn refused(app: &Companion, code: i64, named: &[&str]) -> SignInProblemView {
    let mut events = app.subscribe();
    let ticket = app
        .begin_sign_in(vec!["task:task:read".into()])
        .await
        .unwrap();
    let requested: Vec<String> = url::Url::parse(&ticket.url)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "scope")
        .map(|(_, v)| v.split(' ').map(str::to_owned).collect())
        .unwrap();
    app.sign_in_refused(
        code,
        requested,
        named.iter().map(|s| (*s).to_owned()).collect(),
    )
    .await;
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let UiEvent::SignIn(SignInStatus::Refused { problem }) = events.recv().await.unwrap()
            {
                return problem;
            }
        }
    })
    .await
    .expect("the card hears why")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_refusal_names_the_setting_and_the_exact_value() {
    let dir = tempfile::tempdir().unwrap();
    let app = open(dir.path()).await;
    let redirect = app.settings().feishu.redirect_url();

    let problem = refused(&app, 20029, &[]).await;
    assert_eq!(problem.kind, "redirect_not_registered");
    assert_eq!(problem.value.as_deref(), Some(redirect.as_str()));
    assert!(problem.console_url.as_deref().unwrap().ends_with("/safe"));
    assert!(
        problem.fix.en.contains("Redirect URL"),
        "{}",
        problem.fix.en
    );
    assert!(problem.fix.zh.contains("重定向 URL"), "{}", problem.fix.zh);
    // The sign-in stopped: its port is free again.
    let port = app.settings().feishu.redirect_port;
    std::net::TcpListener::bind(("127.0.0.1", port)).expect("the redirect port is free");

    let problem = refused(&app, 20027, &["task:task:read", "evil:scope:write"]).await;
    assert_eq!(problem.kind, "scopes_not_enabled");
    assert_eq!(
        problem.value.as_deref(),
        Some("task:task:read"),
        "only scopes this sign-in asked for, as the page named them"
    );
    assert!(problem.console_url.as_deref().unwrap().ends_with("/auth"));

    for (code, kind) in [
        (20009, "app_not_published"),
        (20069, "app_disabled"),
        (20010, "outside_availability"),
        (20048, "app_not_found"),
        (12345, "other"),
    ] {
        let problem = refused(&app, code, &[]).await;
        assert_eq!(problem.kind, kind, "{code}");
        assert_eq!(problem.code, Some(code));
        assert!(!problem.fix.zh.is_empty() && !problem.fix.en.is_empty());
    }
}

#[test]
fn a_page_that_names_no_scope_gets_every_scope_the_sign_in_asked_for() {
    let requested = vec![
        "task:task:read".to_owned(),
        "calendar:calendar:readonly".to_owned(),
        "offline_access".to_owned(),
    ];
    assert_eq!(
        SignInProblem::from_code(
            20027,
            &requested,
            &[],
            "http://127.0.0.1:1/callback",
            "cli_x"
        ),
        SignInProblem::ScopesNotEnabled {
            scopes: vec![
                "task:task:read".to_owned(),
                "calendar:calendar:readonly".to_owned()
            ]
        }
    );
    let timed_out = SignInProblem::TimedOut { minutes: 5 }.view("https://open.feishu.cn", "cli_x");
    assert_eq!(timed_out.kind, "timed_out");
    assert!(
        timed_out.title.en.contains("5 minutes"),
        "{}",
        timed_out.title.en
    );
}
