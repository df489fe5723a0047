//! Approving from Feishu (issue 18), end to end against the emulator: a write held in the app
//! becomes a card from the app's bot in the user's chat, a click there (over the long
//! connection) decides it through the engine's own decide path, and every way it can go wrong —
//! a click after the app decided, someone else's click, a replayed or tampered callback, a lost
//! connection, a Feishu outage — is refused or recovered with nothing decided twice.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use agent::{CallStatus, Decision};
use companion::remote_approval::{RemoteApprovalSettings, RemoteWhen};
use companion::{Companion, Demo, Settings, UiEvent};
use emulator::feishu::longconn::{Click, ClickError, ClientConfig};
use emulator::feishu::{BotCard, Fault};
use serde_json::{Value, json};

mod common;

/// Everything a test needs: the app in demo mode with approving from Feishu on ("always"),
/// signed in with the calendar scopes the demo's write needs, one write held for approval, and
/// its card in the user's chat.
struct Setup {
    _dir: tempfile::TempDir,
    app: Companion,
    demo: Arc<Demo>,
    session: String,
    call_id: String,
    card: BotCard,
    user: String,
}

/// What the tests' meeting needs: reading the calendar, creating and updating its event.
const CALENDAR_SCOPES: &[&str] = &[
    "calendar:calendar:readonly",
    "calendar:calendar.event:create",
    "calendar:calendar.event:update",
];

async fn sign_in_for(app: &Companion, scopes: &[&str]) {
    let mut events = app.subscribe();
    let ticket = app
        .begin_sign_in(scopes.iter().map(|s| (*s).to_owned()).collect())
        .await
        .unwrap();
    let location = emulator::feishu::press_consent(&ticket.url, true)
        .await
        .unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    assert!(reqwest::get(location).await.unwrap().status().is_success());
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if let UiEvent::SignIn(companion::SignInStatus::SignedIn { .. }) =
                events.recv().await.unwrap()
            {
                return;
            }
        }
    })
    .await
    .expect("signed in");
}

async fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    for _ in 0..300 {
        if let Some(found) = f() {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let paths = common::demo_paths(dir.path());
    let mut settings = Settings::load(&paths.settings_file()).unwrap();
    settings.language = companion::Language::Zh;
    settings.remote_approval = RemoteApprovalSettings {
        enabled: true,
        when: RemoteWhen::Always,
        away_minutes: 10,
    };
    settings.save(&paths.settings_file()).unwrap();
    let app = common::open(paths).await;
    let demo = app.demo().unwrap();
    // Quick reconnects, so the tests that drop the connection need not wait Feishu's minutes.
    demo.feishu.set_long_connection_config(ClientConfig {
        reconnect_count: -1,
        reconnect_interval: 1,
        reconnect_nonce: 0,
        ping_interval: 5,
    });
    sign_in_for(&app, CALENDAR_SCOPES).await;
    let user = demo.feishu.seed().demo_user;
    assert!(
        demo.feishu
            .wait_for_long_connections(companion::DEMO_APP_ID, 1, Duration::from_secs(20))
            .await,
        "the app opened its long connection"
    );
    let session = app.create_session().await.unwrap();
    let outcome = app
        .send_message(&session, "帮我约个产品评审会", false)
        .await
        .unwrap();
    assert_eq!(outcome.status, "suspended");
    let call_id = app.pending().unwrap()[0].call_id.clone();
    let card = eventually("the card in Feishu", || {
        demo.feishu.bot_cards(Some(&user)).into_iter().next()
    })
    .await;
    Setup {
        _dir: dir,
        app,
        demo,
        session,
        call_id,
        card,
        user,
    }
}

fn status(app: &Companion, call_id: &str) -> CallStatus {
    app.engine()
        .pending_calls()
        .unwrap()
        .into_iter()
        .find(|c| c.call_id == call_id)
        .map_or(CallStatus::Done, |c| c.status)
}

/// Clicks Approve on the setup's card as the user, and waits for the one event the write creates.
async fn approve_in_feishu_and_see_it_written(s: &Setup) {
    let outcome = s
        .demo
        .feishu
        .click_card(&s.card.message_id, click("approve"))
        .await
        .unwrap();
    assert_eq!(outcome.toast.unwrap()["type"], "success");
    eventually("the write", || {
        (s.demo.feishu.events_created() == 1).then_some(())
    })
    .await;
}

fn has_buttons(card: &Value) -> bool {
    card.to_string().contains("\"tag\":\"button\"")
}

fn click(name: &str) -> Click {
    Click {
        name: name.to_owned(),
        ..Click::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_write_becomes_a_card_and_a_click_in_feishu_approves_it_once() {
    let s = setup().await;
    // The card says what the app's card says.
    let text = s.card.card.to_string();
    assert!(
        text.contains("在你的日历中创建日程「产品评审会」并发送邀请"),
        "{text}"
    );
    assert!(text.contains("张伟、李娜"), "the particulars: {text}");
    assert!(text.contains("过期"), "the expiry: {text}");
    assert_eq!(s.card.card["schema"], "2.0");
    assert!(has_buttons(&s.card.card));
    let mut ui = s.app.subscribe();

    let outcome = s
        .demo
        .feishu
        .click_card(&s.card.message_id, click("approve"))
        .await
        .unwrap();
    assert_eq!(outcome.code, 200);
    assert_eq!(
        outcome.toast.as_ref().unwrap()["type"],
        "success",
        "{:?}",
        outcome.toast
    );
    assert!(
        outcome.updated,
        "the answer's card replaced the card: {:?}",
        outcome.card_error
    );
    assert!(!has_buttons(&outcome.card), "decided: no buttons left");
    assert!(
        outcome.card.to_string().contains("已批准 · 你（在飞书中）"),
        "{}",
        outcome.card
    );

    // The app heard of it at once, through the same events as its own click.
    let heard = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Ok(UiEvent::Engine(e)) = ui.recv().await
                && let agent::EngineEvent::Call(call) = *e
                && call.call_id == s.call_id
                && call.decision.is_some()
            {
                return call;
            }
        }
    })
    .await
    .expect("the app's card and inbox hear of the decision");
    assert_eq!(heard.decision.unwrap().decided_by, "user:feishu");
    eventually("the write", || {
        (s.demo.feishu.events_created() == 1).then_some(())
    })
    .await;
    let audit = s
        .app
        .audit(&agent::persist::AuditFilter::default())
        .unwrap();
    let approved = audit
        .iter()
        .find(|a| a.kind == "approval.approved")
        .unwrap();
    assert_eq!(
        (approved.actor.as_str(), &approved.detail["via"]),
        ("user:feishu", &json!("feishu"))
    );

    // Feishu pushes the same callback again: refused as already decided, nothing runs twice.
    let replay = s
        .demo
        .feishu
        .replay_last_callback(Duration::from_secs(3))
        .await
        .unwrap();
    assert_eq!(replay.toast.unwrap()["content"], "这个请求已经处理过了。");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(s.demo.feishu.events_created(), 1, "the write happened once");
    assert!(
        s.app
            .pending()
            .unwrap()
            .iter()
            .all(|c| c.call_id != s.call_id),
        "{:?}",
        s.app.pending().unwrap()
    );
    let _ = s.session;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_in_feishu_updates_its_card_once_by_the_answer_not_again_by_the_loop() {
    let s = setup().await;
    approve_in_feishu_and_see_it_written(&s).await;
    // The turn goes on and the loop runs (woken by every change of the call): none of that
    // updates the card a second time.
    eventually("the call done", || {
        (status(&s.app, &s.call_id) == CallStatus::Done).then_some(())
    })
    .await;
    s.app.remote_sync().await;
    let card = s.demo.feishu.card(&s.card.message_id).unwrap();
    let sources: Vec<&str> = card.versions.iter().map(|v| v.source.as_str()).collect();
    assert_eq!(sources, ["send", "callback"], "{sources:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_app_hears_which_calls_wait_in_feishu_as_cards_are_sent_and_finished() {
    let s = setup().await;
    // The status command gives the set at start (the UI reads it once)… The emulator holds the
    // card as soon as it is sent, a moment before the app has read Feishu's answer and kept it:
    // on a loaded machine the setup can see the card first.
    eventually("the card kept as waiting in Feishu", || {
        (s.app.remote_approval_view().waiting_in_feishu == std::slice::from_ref(&s.call_id))
            .then_some(())
    })
    .await;
    // …and every change comes as an event: a new card joins, a decided one leaves.
    let mut ui = s.app.subscribe();
    let mut next_set = async || {
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                if let Ok(UiEvent::RemoteCards { call_ids }) = ui.recv().await {
                    return call_ids;
                }
            }
        })
        .await
        .expect("a RemoteCards event")
    };
    s.app
        .send_message(&s.session, "再约一个评审会", false)
        .await
        .unwrap();
    let second = s
        .app
        .pending()
        .unwrap()
        .into_iter()
        .map(|c| c.call_id)
        .find(|id| *id != s.call_id)
        .unwrap();
    let mut both = vec![s.call_id.clone(), second.clone()];
    both.sort();
    assert_eq!(next_set().await, both, "sent: both wait in Feishu");
    s.app.decide(&second, Decision::Approve).await.unwrap();
    assert_eq!(
        next_set().await,
        std::slice::from_ref(&s.call_id),
        "finished: it left"
    );
    let outcome = s
        .demo
        .feishu
        .click_card(&s.card.message_id, click("approve"))
        .await
        .unwrap();
    assert_eq!(outcome.toast.unwrap()["type"], "success");
    assert_eq!(next_set().await, Vec::<String>::new(), "decided in Feishu");
    assert!(s.app.remote_approval_view().waiting_in_feishu.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turning_it_off_leaves_no_call_said_to_wait_in_feishu() {
    let s = setup().await;
    // Even when the card cannot be retired (Feishu refuses the update), no click there can
    // arrive any more: the app must not say it can be approved on the phone.
    s.demo.feishu.inject_fault(
        Fault::server_error(500)
            .on("/open-apis/im/v1/messages/{message_id}")
            .times(1000),
    );
    let mut settings = s.app.settings();
    settings.remote_approval.enabled = false;
    s.app.apply_settings(settings).await.unwrap();
    eventually("nothing waiting in Feishu", || {
        s.app
            .remote_approval_view()
            .waiting_in_feishu
            .is_empty()
            .then_some(())
    })
    .await;
    assert_eq!(status(&s.app, &s.call_id), CallStatus::AwaitingApproval);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_in_the_app_updates_the_card_and_a_later_click_there_decides_nothing() {
    let s = setup().await;
    // The card's update fails for a while (Feishu trouble), so the card still has its buttons
    // when the user clicks in Feishu after deciding in the app.
    s.demo.feishu.inject_fault(
        Fault::server_error(500)
            .on("/open-apis/im/v1/messages/{message_id}")
            .times(1000),
    );
    s.app
        .decide(
            &s.call_id,
            Decision::Reject {
                reason: Some("改天再约".into()),
            },
        )
        .await
        .unwrap();
    eventually("the update to be queued", || {
        (s.app.remote_approval_view().queued >= 1).then_some(())
    })
    .await;
    assert!(has_buttons(
        &s.demo.feishu.card(&s.card.message_id).unwrap().card
    ));
    let late = s
        .demo
        .feishu
        .click_card(&s.card.message_id, click("approve"))
        .await
        .unwrap();
    assert_eq!(late.toast.unwrap()["content"], "这个请求已经处理过了。");
    assert!(
        late.card.to_string().contains("已拒绝 · 你（在应用中）"),
        "{}",
        late.card
    );
    assert!(late.card.to_string().contains("改天再约"));
    assert_eq!(
        s.demo.feishu.events_created(),
        0,
        "the rejected write never ran"
    );

    // A second call, decided in the app while Feishu answers: its card turns to the decision.
    s.demo.feishu.clear_faults();
    s.app
        .send_message(&s.session, "再约一个评审会", false)
        .await
        .unwrap();
    let second = s.app.pending().unwrap()[0].call_id.clone();
    let card = eventually("the second card", || {
        s.demo.feishu.bot_cards(Some(&s.user)).into_iter().nth(1)
    })
    .await;
    s.app.decide(&second, Decision::Approve).await.unwrap();
    let updated = eventually("the second card updated", || {
        s.demo
            .feishu
            .card(&card.message_id)
            .filter(|c| !has_buttons(&c.card))
    })
    .await;
    assert!(
        updated.card.to_string().contains("已批准 · 你（在应用中）"),
        "{}",
        updated.card
    );
    assert_eq!(updated.card["header"]["template"], "green");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn someone_elses_click_a_forwarded_card_and_a_tampered_value_decide_nothing() {
    let s = setup().await;
    let someone = s
        .demo
        .feishu
        .seed()
        .people
        .iter()
        .map(|p| p.open_id.clone())
        .find(|id| *id != s.user)
        .unwrap();
    let other = s
        .demo
        .feishu
        .click_card(
            &s.card.message_id,
            Click {
                operator_open_id: Some(someone.clone()),
                ..click("approve")
            },
        )
        .await
        .unwrap();
    assert_eq!(other.toast.unwrap()["type"], "error");
    assert!(has_buttons(&other.card), "the card is unchanged");
    assert_eq!(status(&s.app, &s.call_id), CallStatus::AwaitingApproval);

    // A copy forwarded to someone else cannot be clicked at all (Feishu's side).
    let copy = s
        .demo
        .feishu
        .forward_card(&s.card.message_id, &someone)
        .unwrap();
    assert!(matches!(
        s.demo.feishu.click_card(&copy, click("approve")).await,
        Err(ClickError::ForwardedNotInteractive)
    ));

    // Values that are not the card's: a wrong hash, an unknown call, no call at all.
    for value in [
        json!({"call_id": s.call_id, "args_hash": "0".repeat(64), "action": "approve"}),
        json!({"call_id": "fc_unknown", "args_hash": "0".repeat(64), "action": "approve"}),
        json!({"action": "approve"}),
    ] {
        let tampered = s
            .demo
            .feishu
            .click_card(
                &s.card.message_id,
                Click {
                    value: Some(value.clone()),
                    ..click("approve")
                },
            )
            .await
            .unwrap();
        assert_eq!(tampered.toast.unwrap()["type"], "error", "{value}");
        assert_eq!(
            status(&s.app, &s.call_id),
            CallStatus::AwaitingApproval,
            "{value}"
        );
    }
    // The real value still works, once.
    approve_in_feishu_and_see_it_written(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejection_in_feishu_carries_its_reason_to_the_model() {
    let s = setup().await;
    let mut c = click("reject");
    c.form_value.insert("reason".into(), json!("下周再说"));
    let outcome = s
        .demo
        .feishu
        .click_card(&s.card.message_id, c)
        .await
        .unwrap();
    assert_eq!(outcome.toast.unwrap()["type"], "success");
    assert!(outcome.card.to_string().contains("下周再说"));
    let store = store::Store::open(companion::runtime::demo_database(s.app.paths())).unwrap();
    let record = eventually("the rejection", || {
        use agent::persist::EngineStore as _;
        store
            .call(&s.call_id)
            .unwrap()
            .filter(|c| c.status == CallStatus::Done)
    })
    .await;
    let decision = record.decision.unwrap();
    assert_eq!(decision.verdict, agent::Verdict::Rejected);
    assert_eq!(decision.reason.as_deref(), Some("下周再说"));
    assert_eq!(decision.decided_by, "user:feishu");
    assert_eq!(s.demo.feishu.events_created(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_connection_comes_back_and_clicks_work_again() {
    let s = setup().await;
    let devices = |feishu: &emulator::feishu::FeishuEmulator| -> Vec<String> {
        feishu
            .long_connection_status()
            .connections
            .into_iter()
            .filter(|(a, _)| a == companion::DEMO_APP_ID)
            .map(|(_, d)| d)
            .collect()
    };
    let before = devices(&s.demo.feishu);
    assert!(
        s.demo
            .feishu
            .drop_long_connections(Some(companion::DEMO_APP_ID))
            >= 1
    );
    // It comes back on its own, as a new connection (the endpoint is asked again).
    eventually("the app to reconnect", || {
        let now = devices(&s.demo.feishu);
        (!now.is_empty() && now.iter().all(|d| !before.contains(d))).then_some(())
    })
    .await;
    approve_in_feishu_and_see_it_written(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_a_feishu_outage_cards_are_queued_and_sent_after() {
    let s = setup().await;
    s.demo
        .feishu
        .long_connection_outage(Duration::from_secs(60));
    s.demo.feishu.inject_fault(
        Fault::server_error(503)
            .on("/open-apis/im/v1/messages")
            .times(1000),
    );
    s.app
        .send_message(&s.session, "再约一个评审会", false)
        .await
        .unwrap();
    let view = eventually("the card to be queued", || {
        let view = s.app.remote_approval_view();
        (view.queued >= 1).then_some(view)
    })
    .await;
    assert!(view.error.is_some(), "the status says why");
    assert_ne!(view.state, "connected", "{view:?}");
    assert_eq!(
        s.demo.feishu.bot_cards(Some(&s.user)).len(),
        1,
        "nothing sent yet"
    );
    // Feishu is back: the queued card goes out and clicks arrive again.
    s.demo.feishu.clear_faults();
    s.demo.feishu.end_long_connection_outage();
    let second = eventually("the queued card", || {
        s.demo.feishu.bot_cards(Some(&s.user)).into_iter().nth(1)
    })
    .await;
    eventually("the app to reconnect", || {
        (s.app.remote_approval_view().state == "connected").then_some(())
    })
    .await;
    let outcome = s
        .demo
        .feishu
        .click_card(&second.message_id, click("approve"))
        .await
        .unwrap();
    assert_eq!(
        outcome.toast.unwrap()["type"],
        "success",
        "{:?}",
        outcome.response
    );
    assert_eq!(
        s.demo.feishu.bot_cards(Some(&s.user)).len(),
        2,
        "one card per call, no duplicates"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_in_app_brings_the_app_to_that_call_and_check_connection_checks_the_bot() {
    let s = setup().await;
    let mut ui = s.app.subscribe();
    let outcome = s
        .demo
        .feishu
        .click_card(&s.card.message_id, click("open"))
        .await
        .unwrap();
    assert_eq!(outcome.toast.unwrap()["type"], "info");
    let opened = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Ok(UiEvent::OpenCall { call_id }) = ui.recv().await {
                return call_id;
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(opened, s.call_id);
    assert_eq!(
        status(&s.app, &s.call_id),
        CallStatus::AwaitingApproval,
        "opening decides nothing"
    );

    let items = s.app.check_remote_approval().await;
    let parts: Vec<(&str, bool)> = items.iter().map(|i| (i.part.as_str(), i.ok)).collect();
    assert_eq!(
        parts,
        [
            ("feishu_bot", true),
            ("feishu_bot_scope", true),
            ("feishu_long_connection", true)
        ],
        "{items:?}"
    );
    // The admin has not enabled sending as the bot: the second check says which scope.
    let without_send: Vec<String> = emulator::feishu::PREFERRED_SCOPES
        .iter()
        .map(|s| (*s).to_owned())
        .filter(|s| {
            !["im:message", "im:message:send_as_bot", "im:message:send"].contains(&s.as_str())
        })
        .collect();
    s.demo.feishu.register_app(emulator::feishu::App {
        app_id: companion::DEMO_APP_ID.into(),
        app_secret: companion::DEMO_APP_ID.into(),
        redirect_uris: vec![s.app.settings().feishu.redirect_url()],
        enabled_scopes: without_send,
    });
    let items = s.app.check_remote_approval().await;
    assert!(items[0].ok, "{items:?}");
    assert!(
        !items[1].ok && items[1].detail.en.contains("im:message:send_as_bot"),
        "{items:?}"
    );
    s.demo.feishu.set_bot_enabled(companion::DEMO_APP_ID, false);
    s.demo
        .feishu
        .set_long_connection_enabled(companion::DEMO_APP_ID, false);
    let items = s.app.check_remote_approval().await;
    assert!(
        !items[0].ok && items[0].detail.en.contains("Bot"),
        "{items:?}"
    );
    assert!(
        !items[2].ok && items[2].detail.en.contains("card.action.trigger"),
        "{items:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_called_off_by_a_new_message_turns_its_card_grey() {
    let s = setup().await;
    s.app
        .send_message(&s.session, "算了，不约了", true)
        .await
        .unwrap();
    let card = eventually("the card to turn final", || {
        s.demo
            .feishu
            .card(&s.card.message_id)
            .filter(|c| !has_buttons(&c.card))
    })
    .await;
    assert_eq!(card.card["header"]["template"], "grey", "{}", card.card);
    // The card has no buttons left: Feishu's client offers nothing to click.
    let late = s
        .demo
        .feishu
        .click_card(&s.card.message_id, click("approve"))
        .await;
    assert!(
        matches!(late, Err(ClickError::NoElement(_))),
        "no buttons are left to click: {late:?}"
    );
    assert_eq!(s.demo.feishu.events_created(), 0);
}

fn title(card: &BotCard) -> String {
    card.card["header"]["title"]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The summary card of a burst, and the approval cards, in the user's chat.
fn summary_and_cards(s: &Setup) -> (Vec<BotCard>, Vec<BotCard>) {
    s.demo
        .feishu
        .bot_cards(Some(&s.user))
        .into_iter()
        .partition(|c| {
            let t = title(c);
            t.contains("项等待你批准") || t == "都已处理"
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_beyond_the_cap_waits_in_one_summary_card_updated_as_it_drains() {
    let s = setup().await;
    let cap = companion::remote_approval::MAX_OPEN_CARDS;
    for _ in 0..cap + 1 {
        s.app
            .send_message(&s.session, "再约一个评审会", false)
            .await
            .unwrap();
    }
    let waiting: Vec<String> = s
        .app
        .pending()
        .unwrap()
        .into_iter()
        .map(|c| c.call_id)
        .collect();
    assert_eq!(waiting.len(), cap + 2, "every request waits in the app");
    assert_eq!(waiting[0], s.call_id);

    // Seven waiting: five cards, and one summary saying two more wait.
    let summary = eventually("five cards and a summary saying 2", || {
        let (summaries, cards) = summary_and_cards(&s);
        (cards.len() == cap
            && summaries.len() == 1
            && title(&summaries[0]) == "还有 2 项等待你批准")
            .then(|| summaries[0].clone())
    })
    .await;
    let lines = summary.card["body"]["elements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["text"]["content"]
                .as_str()
                .is_some_and(|t| t.starts_with("· "))
        })
        .count();
    assert_eq!(lines, 2, "it names both: {}", summary.card);
    assert!(has_buttons(&summary.card));
    // The status follows once the round that sent it ends.
    eventually("Settings to count two queued", || {
        let view = s.app.remote_approval_view();
        (view.open_cards as usize == cap && view.queued == 2).then_some(())
    })
    .await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let page = reqwest::get(format!(
        "{}/_emulator/cards/preview?open_id={}",
        s.demo.feishu.base_url(),
        s.user
    ))
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    assert!(page.contains("还有 2 项等待你批准"), "the preview draws it");

    // Its "Open in app" opens the app's inbox.
    let mut ui = s.app.subscribe();
    let opened = s
        .demo
        .feishu
        .click_card(&summary.message_id, click("open_inbox"))
        .await
        .unwrap();
    assert_eq!(opened.toast.unwrap()["type"], "info");
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Ok(UiEvent::OpenInbox) = ui.recv().await {
                return;
            }
        }
    })
    .await
    .expect("the inbox opens");

    // One decided: the oldest held back gets its own card, and the same summary says one.
    s.app.decide(&waiting[0], Decision::Approve).await.unwrap();
    let after_one = eventually("a sixth card and the summary saying 1", || {
        let (summaries, cards) = summary_and_cards(&s);
        (cards.len() == cap + 1
            && summaries.len() == 1
            && title(&summaries[0]) == "还有 1 项等待你批准")
            .then(|| summaries[0].clone())
    })
    .await;
    assert_eq!(
        after_one.message_id, summary.message_id,
        "updated, not sent again"
    );
    assert_eq!(after_one.versions.last().unwrap().source, "patch");
    let (_, cards) = summary_and_cards(&s);
    assert!(
        cards
            .last()
            .unwrap()
            .card
            .to_string()
            .contains(&waiting[cap]),
        "the sixth card is the oldest held back"
    );

    // Another decided: nothing waits beyond the open cards, and the summary says so, final.
    s.app.decide(&waiting[1], Decision::Approve).await.unwrap();
    let done = eventually("the summary final", || {
        let (summaries, cards) = summary_and_cards(&s);
        (cards.len() == cap + 2 && title(&summaries[0]) == "都已处理").then(|| summaries[0].clone())
    })
    .await;
    assert_eq!(done.message_id, summary.message_id);
    assert!(!has_buttons(&done.card), "no buttons once all are handled");
    assert_eq!(done.card["header"]["template"], "grey");
    let sources: Vec<&str> = done.versions.iter().map(|v| v.source.as_str()).collect();
    assert_eq!(sources.first(), Some(&"send"));
    assert!(
        sources[1..].iter().all(|s| *s == "patch") && (3..=4).contains(&sources.len()),
        "one card, patched as the count changed: {sources:?}"
    );
    // Later rounds leave the final summary alone.
    s.app.remote_sync().await;
    let view = s.app.remote_approval_view();
    assert_eq!(
        (view.open_cards as usize, view.queued),
        (cap, 0),
        "{view:?}"
    );
    let (summaries, _) = summary_and_cards(&s);
    assert_eq!(summaries.len(), 1);
    assert_eq!(summaries[0].versions.len(), sources.len());
}

/// A real app's world: its own emulator and model server, and a data folder that outlives one
/// launch of the app (the restart tests open the app on it twice).
struct Real {
    feishu: emulator::feishu::FeishuEmulator,
    model: emulator::model_server::ModelServer,
    user: String,
    dir: tempfile::TempDir,
}

impl Real {
    async fn start() -> Real {
        let feishu = emulator::feishu::FeishuEmulator::start().await.unwrap();
        let model = emulator::model_server::ModelServer::start(
            emulator::model_server::Script::demo().unwrap(),
        )
        .await
        .unwrap();
        let user = feishu.seed().demo_user;
        Real {
            feishu,
            model,
            user,
            dir: tempfile::tempdir().unwrap(),
        }
    }
}

/// The user's own Feishu app (an emulator standing in for open.feishu.cn) and model, on `dir`.
async fn open_real(
    dir: &std::path::Path,
    feishu: &emulator::feishu::FeishuEmulator,
    model: &emulator::model_server::ModelServer,
) -> Companion {
    const APP_ID: &str = "cli_remote_real_app";
    let paths = companion::AppPaths::under(dir);
    paths.create().unwrap();
    let mut settings = Settings::load(&paths.settings_file()).unwrap();
    if settings.feishu.app_id.is_empty() {
        settings.feishu.redirect_port = common::free_port();
        settings.time_zone = "Asia/Shanghai".into();
        settings.feishu.app_id = APP_ID.into();
        settings.language = companion::Language::Zh;
        settings.model.preset = "custom".into();
        settings.model.base_url = Some(model.base_url());
        settings.model.model = Some("real-model".into());
        settings.remote_approval = RemoteApprovalSettings {
            enabled: true,
            when: RemoteWhen::Always,
            away_minutes: 10,
        };
        settings.save(&paths.settings_file()).unwrap();
        feishu.register_app(emulator::feishu::App {
            app_id: APP_ID.into(),
            app_secret: "real-secret".into(),
            redirect_uris: vec![settings.feishu.redirect_url()],
            enabled_scopes: emulator::feishu::PREFERRED_SCOPES
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
        });
    }
    let app = Companion::open(
        paths,
        companion::OpenOptions {
            memory_keys: true,
            feishu_base_url: Some(feishu.base_url()),
            ..companion::OpenOptions::default()
        },
    )
    .await
    .unwrap();
    // The vault's key lives in memory in tests: a second start finds the secrets locked, forgets
    // them and enters the App Secret again (and signs in again), as a user whose key was lost.
    if app.apply_app_secret("real-secret").await.is_err() {
        app.forget_secrets().await.unwrap();
        app.apply_app_secret("real-secret").await.unwrap();
    }
    assert!(!app.is_demo());
    sign_in_for(&app, CALENDAR_SCOPES).await;
    app
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_the_card_of_a_waiting_call_is_neither_sent_again_nor_forgotten() {
    let Real {
        feishu,
        model,
        user,
        dir,
    } = Real::start().await;
    let app = open_real(dir.path(), &feishu, &model).await;
    let session = app.create_session().await.unwrap();
    app.send_message(&session, "帮我约个产品评审会", false)
        .await
        .unwrap();
    let call_id = app.pending().unwrap()[0].call_id.clone();
    let card = eventually("the card", || {
        feishu.bot_cards(Some(&user)).into_iter().next()
    })
    .await;
    drop(app);
    tokio::time::sleep(Duration::from_millis(300)).await;

    // The app starts again: the call still waits, and its card is the one already in the chat.
    let app = open_real(dir.path(), &feishu, &model).await;
    eventually("the app to reconnect", || {
        (app.remote_approval_view().state == "connected").then_some(())
    })
    .await;
    assert_eq!(
        app.remote_card_message(&call_id),
        Some(card.message_id.clone())
    );
    app.remote_sync().await;
    assert_eq!(feishu.bot_cards(Some(&user)).len(), 1, "no second card");
    // Decided in the app now: the card from before the restart shows it.
    app.decide(&call_id, Decision::Approve).await.unwrap();
    let updated = eventually("the old card updated", || {
        feishu
            .card(&card.message_id)
            .filter(|c| !has_buttons(&c.card))
    })
    .await;
    assert!(
        updated.card.to_string().contains("已批准"),
        "{}",
        updated.card
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_the_summary_of_a_burst_is_updated_not_sent_again() {
    let Real {
        feishu,
        model,
        user,
        dir,
    } = Real::start().await;
    let cap = companion::remote_approval::MAX_OPEN_CARDS;
    let is_summary = |c: &BotCard| {
        let t = title(c);
        t.contains("项等待你批准") || t == "都已处理"
    };
    let app = open_real(dir.path(), &feishu, &model).await;
    let session = app.create_session().await.unwrap();
    app.send_message(&session, "帮我约个产品评审会", false)
        .await
        .unwrap();
    for _ in 0..cap {
        app.send_message(&session, "再约一个评审会", false)
            .await
            .unwrap();
    }
    let waiting: Vec<String> = app
        .pending()
        .unwrap()
        .into_iter()
        .map(|c| c.call_id)
        .collect();
    assert_eq!(waiting.len(), cap + 1);
    let summary = eventually("the summary saying 1", || {
        feishu
            .bot_cards(Some(&user))
            .into_iter()
            .find(|c| title(c) == "还有 1 项等待你批准")
    })
    .await;
    drop(app);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Past Feishu's hour of `uuid` de-duplication: only what the app kept can name the summary.
    feishu.advance_clock(Duration::from_secs(61 * 60));

    // The app starts again and one is decided: the summary from before the restart is the one
    // updated, and no second summary or card for a call that had one is sent.
    let app = open_real(dir.path(), &feishu, &model).await;
    eventually("the app to reconnect", || {
        (app.remote_approval_view().state == "connected").then_some(())
    })
    .await;
    app.remote_sync().await;
    app.decide(&waiting[0], Decision::Approve).await.unwrap();
    let done = eventually("the old summary final", || {
        feishu
            .card(&summary.message_id)
            .filter(|c| title(c) == "都已处理")
    })
    .await;
    assert!(!has_buttons(&done.card));
    let cards = feishu.bot_cards(Some(&user));
    assert_eq!(
        cards.iter().filter(|c| is_summary(c)).count(),
        1,
        "no second summary"
    );
    assert_eq!(
        cards.iter().filter(|c| !is_summary(c)).count(),
        cap + 1,
        "one card per call: the held-back one got its own, no other was sent again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turning_it_off_leaves_no_retired_card_kept_for_a_restart() {
    let Real {
        feishu,
        model,
        user,
        dir,
    } = Real::start().await;
    let app = open_real(dir.path(), &feishu, &model).await;
    let session = app.create_session().await.unwrap();
    app.send_message(&session, "帮我约个产品评审会", false)
        .await
        .unwrap();
    let card = eventually("the card", || {
        feishu.bot_cards(Some(&user)).into_iter().next()
    })
    .await;
    let kept_file = companion::AppPaths::under(dir.path())
        .data_dir
        .join("feishu-approval-cards.json");
    let kept = || -> Value {
        std::fs::read(&kept_file)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null)
    };
    // Written once the app has read Feishu's answer, a moment after the emulator holds the card.
    eventually("the card kept", || {
        (kept()["cards"].as_object().map(serde_json::Map::len) == Some(1)).then_some(())
    })
    .await;
    let mut settings = app.settings();
    settings.remote_approval.enabled = false;
    app.apply_settings(settings).await.unwrap();
    eventually("the card retired", || {
        feishu
            .card(&card.message_id)
            .filter(|c| !has_buttons(&c.card))
    })
    .await;
    eventually("the kept cards written down without it", || {
        kept()["cards"]
            .as_object()
            .unwrap()
            .is_empty()
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turning_it_off_takes_the_buttons_off_the_cards_and_closes_the_connection() {
    let s = setup().await;
    let mut settings = s.app.settings();
    settings.remote_approval.enabled = false;
    s.app.apply_settings(settings).await.unwrap();
    let card = eventually("the card retired", || {
        s.demo
            .feishu
            .card(&s.card.message_id)
            .filter(|c| !has_buttons(&c.card))
    })
    .await;
    assert!(
        card.card.to_string().contains("请在飞书助手应用中处理"),
        "{}",
        card.card
    );
    assert_eq!(card.card["header"]["template"], "grey");
    eventually("the connection closed", || {
        s.demo
            .feishu
            .long_connection_status()
            .connections
            .iter()
            .all(|(a, _)| a != companion::DEMO_APP_ID)
            .then_some(())
    })
    .await;
    assert_eq!(s.app.remote_approval_view().state, "off");
    assert_eq!(
        status(&s.app, &s.call_id),
        CallStatus::AwaitingApproval,
        "it still waits in the app"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_servers_write_is_approved_from_feishu_like_any_write() {
    let s = setup().await;
    sign_in_for(&s.app, &["docx:document:create"]).await;
    let before = s.demo.feishu.documents_created();
    let outcome = s
        .app
        .send_message(&s.session, "帮我写一份周报", false)
        .await
        .unwrap();
    assert_eq!(outcome.status, "suspended");
    // Its card in Feishu names the MCP server and the tool, as the app's card does.
    let card = eventually("the MCP call's card in Feishu", || {
        s.demo
            .feishu
            .bot_cards(Some(&s.user))
            .into_iter()
            .find(|c| c.card.to_string().contains("create-doc"))
    })
    .await;
    let text = card.card.to_string();
    assert!(text.contains("MCP"), "{text}");
    assert!(text.contains("飞书文档"), "{text}");
    let clicked = s
        .demo
        .feishu
        .click_card(&card.message_id, click("approve"))
        .await
        .unwrap();
    assert_eq!(clicked.toast.unwrap()["type"], "success");
    eventually("the document written once", || {
        (s.demo.feishu.documents_created() == before + 1).then_some(())
    })
    .await;
    let audit = s
        .app
        .audit(&agent::persist::AuditFilter::default())
        .unwrap();
    let approved = audit
        .iter()
        .find(|a| {
            a.kind == "approval.approved" && a.tool.as_deref() == Some("mcp__feishu__create-doc")
        })
        .expect("audited");
    assert_eq!(approved.actor, "user:feishu");
}
