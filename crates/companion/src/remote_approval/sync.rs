//! One round of the loop that makes Feishu match the app: the connection as the settings want
//! it, the cards of calls no longer waiting finished, the waiting calls sent up to the chat's
//! cap, and the summary of the rest.

use agent::CallStatus;
use agent::persist::EngineStore as _;

use super::card;
use super::summary;
use super::{
    CardState, MAX_OPEN_CARDS, RemoteApproval, open_cards, refused_for_good, send_uuid, sending_now,
};
use crate::sync::lock;
use crate::view::call::CallView;

/// What a round leaves for the next one: how many cards (the summary among them) wait to be
/// sent or updated, and the errors that left them; the last error is what Settings shows.
#[derive(Default)]
struct Tally {
    queued: u32,
    errors: Vec<String>,
}

impl RemoteApproval {
    /// One round: the connection as the settings want it, then every card as the app's calls
    /// are. What fails is left for the next round.
    pub async fn remote_sync(&self) {
        let remote = self.remote();
        let _round = remote.round.lock().await;
        let settings = self.settings().remote_approval;
        if !settings.enabled {
            self.switch_off().await;
            return;
        }
        let open_id = match self.account().await {
            Ok(Some(account)) => account.user.map(|u| u.open_id),
            _ => None,
        };
        lock(&remote.state).signed_in = open_id.is_some();
        let Some(open_id) = open_id else { return };
        let bot = &match self.ensure_link().await {
            Ok(bot) => bot,
            Err(e) => {
                lock(&remote.state).last_error = Some(e.to_string());
                return;
            }
        };
        let sending = sending_now(&settings, remote.unfocused_for());
        let mut tally = Tally::default();
        self.finish_cards(bot, &mut tally).await;
        let waiting: Vec<agent::CallRecord> = self
            .pending()
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.status == CallStatus::AwaitingApproval)
            .collect();
        if sending {
            self.send_cards(bot, &open_id, &waiting, &mut tally).await;
        }
        self.summarize_held_back(bot, &open_id, &waiting, sending, &mut tally)
            .await;
        {
            let mut state = lock(&remote.state);
            state.sending = sending;
            state.queued = tally.queued;
            state.last_error = tally.errors.pop();
        }
        self.announce_cards();
        self.keep_cards();
    }

    /// Turned off: nothing goes out or waits to, and the long connection closes.
    async fn switch_off(&self) {
        let remote = self.remote();
        let bot = {
            let mut state = lock(&remote.state);
            state.sending = false;
            state.queued = 0;
            state.link.as_ref().map(|l| l.bot().clone())
        };
        if let Some(bot) = bot {
            // Retired while the link still names the app, so the kept cards are written
            // down without them (a restart must not take retired cards for open ones).
            self.retire_cards(&bot).await;
            let link = lock(&remote.state).link.take();
            if let Some(link) = link {
                link.shutdown().await;
            }
        }
        self.announce_cards();
    }

    /// Cards whose call no longer waits: show what became of it.
    async fn finish_cards(&self, bot: &feishu::BotClient, tally: &mut Tally) {
        let remote = self.remote();
        let to_finish: Vec<(String, Option<String>)> = lock(&remote.state)
            .cards
            .iter()
            .filter(|(_, c)| !c.done && !c.answering)
            .map(|(id, c)| (id.clone(), c.message_id.clone()))
            .collect();
        let store = self.store();
        for (call_id, message_id) in to_finish {
            let record = match store.call(&call_id) {
                Ok(Some(record)) => record,
                Ok(None) => {
                    lock(&remote.state).cards.remove(&call_id);
                    continue;
                }
                Err(e) => {
                    tally.errors.push(e.to_string());
                    continue;
                }
            };
            if record.status == CallStatus::AwaitingApproval {
                continue;
            }
            let Some(message_id) = message_id else {
                lock(&remote.state).cards.remove(&call_id);
                continue;
            };
            // Decided by a click in Feishu since this round began: the callback's answer
            // updates the card (it was marked before the decision, so seeing the decision
            // here means seeing the mark too).
            if lock(&remote.state)
                .cards
                .get(&call_id)
                .is_none_or(|c| c.done || c.answering)
            {
                continue;
            }
            self.update_to_final(bot, &call_id, &message_id, &record, tally)
                .await;
        }
    }

    /// Updates one card to its call's final state; a card Feishu refuses for good is given up.
    async fn update_to_final(
        &self,
        bot: &feishu::BotClient,
        call_id: &str,
        message_id: &str,
        record: &agent::CallRecord,
        tally: &mut Tally,
    ) {
        let remote = self.remote();
        let card = card::final_card(&CallView::from(record), &self.card_context(record));
        match bot.update_card(message_id, &card).await {
            Ok(()) => {
                if let Some(c) = lock(&remote.state).cards.get_mut(call_id) {
                    c.done = true;
                }
                self.announce_cards();
            }
            Err(e) if refused_for_good(&e) => {
                tracing::warn!(error = %e, "a card in Feishu cannot be updated; left as it is");
                if let Some(c) = lock(&remote.state).cards.get_mut(call_id) {
                    c.done = true;
                }
            }
            Err(e) => {
                tally.queued += 1;
                tally.errors.push(e.to_string());
            }
        }
    }

    /// Calls waiting without a card: send them, up to the chat's cap.
    async fn send_cards(
        &self,
        bot: &feishu::BotClient,
        open_id: &str,
        waiting: &[agent::CallRecord],
        tally: &mut Tally,
    ) {
        let remote = self.remote();
        for record in waiting {
            let (has_card, open) = {
                let state = lock(&remote.state);
                (
                    state
                        .cards
                        .get(&record.call_id)
                        .is_some_and(|c| c.message_id.is_some()),
                    open_cards(&state),
                )
            };
            if has_card {
                continue;
            }
            if open >= MAX_OPEN_CARDS {
                tally.queued += 1;
                continue;
            }
            let card = card::pending_card(&CallView::from(record), &self.card_context(record));
            match bot
                .send_card(open_id, &card, &send_uuid(&record.call_id))
                .await
            {
                Ok(message_id) => {
                    lock(&remote.state).cards.insert(
                        record.call_id.clone(),
                        CardState {
                            message_id: Some(message_id),
                            ..CardState::default()
                        },
                    );
                    self.announce_cards();
                }
                Err(e) => {
                    tally.queued += 1;
                    tally.errors.push(e.to_string());
                }
            }
        }
    }

    /// The calls still without a card: one summary says how many, while the cap holds them.
    async fn summarize_held_back(
        &self,
        bot: &feishu::BotClient,
        open_id: &str,
        waiting: &[agent::CallRecord],
        sending: bool,
        tally: &mut Tally,
    ) {
        let remote = self.remote();
        let (held_back, cap_reached) = {
            let state = lock(&remote.state);
            let held_back: Vec<CallView> = waiting
                .iter()
                .filter(|r| {
                    state
                        .cards
                        .get(&r.call_id)
                        .is_none_or(|c| c.message_id.is_none())
                })
                .map(CallView::from)
                .collect();
            (held_back, open_cards(&state) >= MAX_OPEN_CARDS)
        };
        let burst = summary::Burst::of(&held_back, card::Lang::of(self.settings().language));
        if !self
            .sync_summary(
                bot,
                open_id,
                &burst,
                sending && cap_reached,
                &mut tally.errors,
            )
            .await
        {
            tally.queued += 1;
        }
    }
}
