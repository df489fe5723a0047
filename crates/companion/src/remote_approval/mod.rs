//! Approve from Feishu: what waits for approval in the app reaches the user as an interactive
//! card from the app's bot in Feishu, and a tap there decides it, with the app's guarantees.
//!
//! The app stays the engine; Feishu is a second window onto its inbox. Cards go out (as the bot,
//! to the signed-in user's open_id) when the setting is on and, in "away" mode, once the app's
//! window has been unfocused for the chosen minutes (window focus, which every platform reports;
//! system-wide idle time is not asked for). Clicks come back over Feishu's long connection
//! ([`feishu::longconn`]), so no public URL is needed; see [`callback`] for what a click must
//! carry to be accepted. Once a call is no longer waiting — decided here or there, expired,
//! superseded — its card is updated: what became of it, by whom, when, without buttons.
//!
//! One loop ([`Companion::remote_sync`]) makes Feishu match the app: woken by every call change
//! and every few seconds, it sends what is missing and updates what changed. What fails (Feishu
//! unreachable, an outage) stays to do and is tried again on the next round, so nothing is lost
//! while the status in Settings says what is queued. At most [`MAX_OPEN_CARDS`] cards wait in
//! the chat at once; the rest follow as those are decided, so a burst of writes does not flood
//! the chat, and one summary card ([`summary`]) says meanwhile how many more wait.

pub mod callback;
pub mod card;
mod kept;
mod link;
pub mod summary;
mod sync;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent::CallStatus;
use agent::persist::EngineStore as _;
use serde::Serialize;
use sha2::{Digest as _, Sha256};
use ts_rs::TS;

use crate::agents::ConnectedAgents;
use crate::context::Context;
use crate::feature::{Feature, WeakFeature};
use crate::sync::lock;
use crate::view::call::CallView;

/// Cards waiting for a decision in the chat at once.
pub const MAX_OPEN_CARDS: usize = 5;
/// How often the loop runs when nothing wakes it.
const TICK: Duration = Duration::from_secs(5);

pub use crate::settings::remote::{MAX_AWAY_MINUTES, RemoteApprovalSettings, RemoteWhen};

/// Where approving from Feishu stands, for Settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct RemoteApprovalView {
    /// `off`, `not_signed_in`, `connecting`, `connected`, `reconnecting`, `stopped`.
    pub state: String,
    /// What went wrong last (connection or sending), in Feishu's words.
    pub error: Option<String>,
    /// Cards waiting to be sent or updated (Feishu unreachable, or the chat's cap reached).
    pub queued: u32,
    /// Cards in the chat that still wait for a decision.
    pub open_cards: u32,
    /// Whether cards go out now (always, or the user has been away long enough).
    pub sending: bool,
    /// The calls whose card waits for a decision in Feishu now, sorted (the app's card and
    /// inbox row say so; [`crate::UiEvent::RemoteCards`] tells of every change).
    pub waiting_in_feishu: Vec<String>,
}

/// One call's card in Feishu.
#[derive(Debug, Clone, Default)]
struct CardState {
    /// The message, once sent.
    message_id: Option<String>,
    /// The final state (decided, expired…) is shown: nothing more to do.
    done: bool,
    /// A click on it is being decided, and the callback's answer will show the final state
    /// itself: the loop leaves it alone meanwhile, or the card would be updated twice.
    answering: bool,
}

/// The app's side of approving from Feishu; lives as long as the app.
#[derive(Default)]
pub(crate) struct Remote {
    state: Mutex<RemoteState>,
    /// One round of the loop at a time.
    round: tokio::sync::Mutex<()>,
    /// Wakes the loop.
    wake: tokio::sync::Notify,
}

#[derive(Default)]
struct RemoteState {
    cards: HashMap<String, CardState>,
    /// When the window lost focus (`None`: it has focus). The app starts as if it had just
    /// lost it, so a headless app counts as away after the chosen minutes.
    unfocused_since: Option<Instant>,
    focus_known: bool,
    link: Option<link::Link>,
    last_error: Option<String>,
    queued: u32,
    sending: bool,
    signed_in: bool,
    /// The summary card of the calls held back by the cap, while it shows buttons.
    summary: Option<summary::SummaryCard>,
    /// The calls with a card waiting in Feishu, as the UI was last told.
    announced: Vec<String>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote").finish_non_exhaustive()
    }
}

/// Whether cards go out now: always, or after `away_minutes` without the window's focus.
pub fn sending_now(settings: &RemoteApprovalSettings, unfocused_for: Option<Duration>) -> bool {
    settings.enabled
        && match settings.when {
            RemoteWhen::Always => true,
            RemoteWhen::Away => unfocused_for
                .is_some_and(|d| d >= Duration::from_secs(u64::from(settings.away_minutes) * 60)),
        }
}

/// The `uuid` of a call's card: Feishu sends one message per uuid within an hour, so a send
/// whose answer was lost and is tried again does not make a second card (at most 50 chars).
fn send_uuid(name: &str) -> String {
    let digest = Sha256::digest(name.as_bytes());
    format!("approval-{}", &hex(&digest)[..32])
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The cards in the chat that still show buttons: (call id, message id).
fn shown_cards(state: &RemoteState) -> impl Iterator<Item = (&String, &String)> {
    state
        .cards
        .iter()
        .filter(|(_, c)| !c.done)
        .filter_map(|(id, c)| Some((id, c.message_id.as_ref()?)))
}

/// How many cards in the chat still show buttons.
fn open_cards(state: &RemoteState) -> usize {
    shown_cards(state).count()
}

/// The calls whose card shows buttons in the chat, sorted; none without the long connection
/// (turned off: a click there could no longer arrive).
fn waiting_in_feishu(state: &RemoteState) -> Vec<String> {
    if state.link.is_none() {
        return Vec::new();
    }
    let mut ids: Vec<String> = shown_cards(state).map(|(id, _)| id.clone()).collect();
    ids.sort();
    ids
}

/// Whether an update of a card failed for good (230xxx: the message was deleted or recalled, or
/// is too old to change), so that trying again would only queue it forever. Gateway and token
/// errors (9999xxxx) may pass and are retried.
fn refused_for_good(e: &feishu::ApiError) -> bool {
    matches!(
        e,
        feishu::ApiError::Feishu {
            code: 230_000..=239_999,
            ..
        }
    )
}

impl Remote {
    fn unfocused_for(&self) -> Option<Duration> {
        let mut state = lock(&self.state);
        if !state.focus_known && state.unfocused_since.is_none() {
            state.unfocused_since = Some(Instant::now());
        }
        state.unfocused_since.map(|at| at.elapsed())
    }
}

/// What approving from Feishu keeps: the loop's state, and the connected agents' registry
/// (their calls are the person's too, and get cards).
pub(crate) struct RemoteApprovalState {
    remote: Arc<Remote>,
    agents: Arc<ConnectedAgents>,
}

/// Approving from Feishu, as a feature (see [`crate::feature`]). The app keeps one.
pub(crate) type RemoteApproval = Feature<RemoteApprovalState>;
/// [`RemoteApproval`] that does not keep the app alive (for the loop and Feishu's callbacks).
pub(crate) type WeakRemoteApproval = WeakFeature<RemoteApprovalState>;

impl RemoteApproval {
    pub(crate) fn open(ctx: Context, agents: Arc<ConnectedAgents>) -> RemoteApproval {
        Feature::new(
            ctx,
            RemoteApprovalState {
                remote: Arc::default(),
                agents,
            },
        )
    }

    fn remote(&self) -> Arc<Remote> {
        self.state().remote.clone()
    }

    /// Which calls are the person's (see [`crate::waiting::users_calls`]).
    fn users_calls(
        &self,
    ) -> Result<impl Fn(&agent::CallRecord) -> bool + use<>, crate::error::CompanionError> {
        crate::waiting::users_calls(self, &self.state().agents)
    }

    /// Everything waiting for the person (see [`crate::waiting::pending`]).
    fn pending(&self) -> Result<Vec<agent::CallRecord>, crate::error::CompanionError> {
        crate::waiting::pending(self, &self.state().agents)
    }

    /// The signed-in account, if any.
    async fn account(&self) -> Result<Option<feishu::Account>, crate::error::CompanionError> {
        Ok(self.runtime().tokens.account().await?)
    }

    /// Asks the window to show a call ("Open in app" on its card in Feishu).
    fn emit_open_call(&self, call_id: &str) {
        self.emit(crate::events::UiEvent::OpenCall {
            call_id: call_id.to_owned(),
        });
    }

    /// Asks the window to show the inbox ("Open in app" on the summary card in Feishu).
    fn emit_open_inbox(&self) {
        self.emit(crate::events::UiEvent::OpenInbox);
    }

    /// Tells the UI which calls' cards wait in Feishu now.
    fn emit_remote_cards(&self, call_ids: Vec<String>) {
        self.emit(crate::events::UiEvent::RemoteCards { call_ids });
    }
}

impl RemoteApproval {
    /// The window gained or lost focus (the shell calls this): "away" counts from the moment
    /// it lost it.
    pub fn window_focus_changed(&self, focused: bool) {
        let remote = self.remote();
        {
            let mut state = lock(&remote.state);
            state.focus_known = true;
            state.unfocused_since = match (focused, state.unfocused_since) {
                (true, _) => None,
                (false, Some(since)) => Some(since),
                (false, None) => Some(Instant::now()),
            };
        }
        remote.wake.notify_one();
    }

    /// Where approving from Feishu stands.
    pub fn remote_approval_view(&self) -> RemoteApprovalView {
        let remote = self.remote();
        let settings = self.settings().remote_approval;
        let state = lock(&remote.state);
        let open_cards = open_cards(&state) as u32;
        let link_state = state.link.as_ref().map(|l| l.state());
        let (name, link_error) = match (&settings.enabled, state.signed_in, link_state) {
            (false, _, _) => ("off", None),
            (true, false, _) => ("not_signed_in", None),
            (true, true, None) => ("connecting", None),
            (true, true, Some(s)) => link::state_name(&s),
        };
        RemoteApprovalView {
            state: name.to_owned(),
            error: link_error.or_else(|| state.last_error.clone()),
            queued: state.queued,
            open_cards,
            sending: state.sending,
            waiting_in_feishu: waiting_in_feishu(&state),
        }
    }

    /// Starts the loop that keeps Feishu's cards in step with the app (once per app).
    pub(crate) fn start_remote_approval(&self) {
        let weak = self.downgrade();
        let mut events = self.subscribe();
        let remote = self.remote();
        // New settings and every sign-in wake it at once (the open_id, the on/off switch).
        let on_settings = Arc::downgrade(&remote);
        self.signals().settings_saved.subscribe(move |_| {
            if let Some(remote) = on_settings.upgrade() {
                remote.wake.notify_one();
            }
        });
        let on_sign_in = Arc::downgrade(&remote);
        self.signals().signed_in.subscribe(move |_| {
            if let Some(remote) = on_sign_in.upgrade() {
                remote.wake.notify_one();
            }
        });
        // Every call change wakes the loop.
        let waker = remote.clone();
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(crate::UiEvent::Engine(e)) if matches!(*e, agent::EngineEvent::Call(_)) => {
                        waker.wake.notify_one();
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        tokio::spawn(async move {
            loop {
                let Some(app) = weak.upgrade() else { return };
                app.remote_sync().await;
                drop(app);
                tokio::select! {
                    () = remote.wake.notified() => {}
                    () = tokio::time::sleep(TICK) => {}
                }
            }
        });
    }

    /// Tells the UI which calls' cards wait in Feishu, when that changed since it was last told.
    fn announce_cards(&self) {
        let remote = self.remote();
        let changed = {
            let mut state = lock(&remote.state);
            let now = waiting_in_feishu(&state);
            (now != state.announced).then(|| {
                state.announced = now.clone();
                now
            })
        };
        if let Some(call_ids) = changed {
            self.emit_remote_cards(call_ids);
        }
    }

    /// Where the cards still waiting in Feishu are kept across restarts.
    pub(super) fn kept_cards_file(&self) -> std::path::PathBuf {
        self.paths().data_dir.join("feishu-approval-cards.json")
    }

    /// Writes down the cards that still wait, for the app that sent them (not in demo mode,
    /// whose emulator starts afresh with every launch).
    fn keep_cards(&self) {
        if self.is_demo() {
            return;
        }
        let remote = self.remote();
        let kept = {
            let state = lock(&remote.state);
            let Some(key) = state.link.as_ref().map(|l| l.key().clone()) else {
                return;
            };
            kept::KeptCards {
                open: key.0,
                app_id: key.1,
                cards: shown_cards(&state)
                    .map(|(id, m)| (id.clone(), m.clone()))
                    .collect(),
                summary: state.summary.clone(),
            }
        };
        kept::save(&self.kept_cards_file(), &kept);
    }

    /// Approving from Feishu was turned off: the cards still waiting in the chat lose their
    /// buttons and say to decide in the app (a click there could no longer arrive).
    async fn retire_cards(&self, bot: &feishu::BotClient) {
        let open: Vec<(String, String)> = shown_cards(&lock(&self.remote().state))
            .map(|(id, m)| (id.clone(), m.clone()))
            .collect();
        let store = self.store();
        for (call_id, message_id) in open {
            let Ok(Some(record)) = store.call(&call_id) else {
                continue;
            };
            let view = CallView::from(&record);
            let cx = self.card_context(&record);
            let card = if record.status == CallStatus::AwaitingApproval {
                card::retired_card(&view, &cx)
            } else {
                card::final_card(&view, &cx)
            };
            match bot.update_card(&message_id, &card).await {
                Ok(()) => self.card_finished(&call_id),
                Err(e) => tracing::warn!(error = %e, "a card could not be retired"),
            }
        }
        self.retire_summary(bot).await;
        self.keep_cards();
    }

    /// What a card of `record` is made with: the user's language and time zone, the hash of
    /// the arguments now.
    fn card_context(&self, record: &agent::CallRecord) -> card::CardContext {
        let settings = self.settings();
        card::CardContext {
            lang: card::Lang::of(settings.language),
            tz: settings.tz(),
            args_hash: agent::args_hash(&record.args),
        }
    }

    /// Marks a call's card as being answered by a click's callback (`true`, before the
    /// decision), or hands it back to the loop (`false`: the answer does not carry the card).
    fn card_answering(&self, call_id: &str, answering: bool) {
        if let Some(c) = lock(&self.remote().state).cards.get_mut(call_id) {
            c.answering = answering;
        }
    }

    /// Records that a call's card now shows its final state (the callback's answer did it).
    fn card_finished(&self, call_id: &str) {
        let remote = self.remote();
        if let Some(c) = lock(&remote.state).cards.get_mut(call_id) {
            c.done = true;
            c.answering = false;
        }
        self.announce_cards();
        self.keep_cards();
    }

    /// The message id of a call's card, if one was sent.
    pub fn remote_card_message(&self, call_id: &str) -> Option<String> {
        lock(&self.remote().state)
            .cards
            .get(call_id)
            .and_then(|c| c.message_id.clone())
    }

    /// Checks what approving from Feishu needs, for "Check connection": the bot capability,
    /// the scope to send as the bot, and that the long connection opens.
    pub async fn check_remote_approval(&self) -> Vec<crate::check::CheckItemView> {
        link::check(self).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cards_go_out_always_or_after_the_minutes_away() {
        let mut s = RemoteApprovalSettings::default();
        assert!(
            !sending_now(&s, Some(Duration::from_secs(3600))),
            "off by default"
        );
        s.enabled = true;
        s.away_minutes = 10;
        assert!(!sending_now(&s, None), "the window has focus");
        assert!(!sending_now(&s, Some(Duration::from_secs(599))));
        assert!(sending_now(&s, Some(Duration::from_secs(600))));
        s.when = RemoteWhen::Always;
        assert!(sending_now(&s, None));
    }

    #[test]
    fn a_cards_uuid_is_stable_and_within_feishus_limit() {
        let a = send_uuid("fc_0123456789abcdef0123456789abcdef");
        assert_eq!(a, send_uuid("fc_0123456789abcdef0123456789abcdef"));
        assert_ne!(a, send_uuid("fc_other"));
        assert!(a.len() <= 50, "{a}");
    }
}
