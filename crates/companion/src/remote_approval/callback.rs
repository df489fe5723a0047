//! A click on an approval card in Feishu (`card.action.trigger`, over the long connection).
//!
//! A click decides a call only if all of these hold, checked in this order:
//! 1. the operator's `open_id` is the signed-in user's (a card forwarded to someone else, and
//!    clicked there, decides nothing);
//! 2. the button's `value` names a call the app knows and its argument hash is the hash of that
//!    call's arguments now (a tampered or stale value decides nothing);
//! 3. the call still waits for approval — checked again by the engine under the call's session
//!    lock, so a click racing the app's own click, a replayed callback or a click after expiry
//!    cannot decide it a second time.
//!
//! The decision goes through [`agent::Engine::decide_from`] with [`DecisionSource::Feishu`], the
//! same path as the app's click, so the app's card and inbox hear of it through the same events.
//! Feishu waits 3 seconds for the answer, while a decision also runs the turn on (a model call,
//! the write itself): the answer is given as soon as the decision is recorded, and the turn goes
//! on in the background. The answer is the card in its final state plus a toast.

use std::time::Duration;

use agent::persist::EngineStore as _;
use agent::{CallStatus, Decision, DecisionSource, EngineError, EngineEvent};
use serde_json::{Value, json};

use super::card::{self, Action, Lang};
use super::{RemoteApproval, WeakRemoteApproval};
use crate::view::call::CallView;

/// How long the answer waits for the decision to be recorded.
const DECISION_WAIT: Duration = Duration::from_millis(2200);

/// Receives the long connection's callbacks for the app.
pub(crate) struct Handler {
    app: WeakRemoteApproval,
}

impl Handler {
    pub(crate) fn new(app: WeakRemoteApproval) -> Handler {
        Handler { app }
    }
}

#[async_trait::async_trait]
impl feishu::longconn::CallbackHandler for Handler {
    async fn handle(&self, _kind: &str, payload: Value) -> Result<Option<Value>, String> {
        let Some(app) = self.app.upgrade() else {
            return Err("the app has closed".into());
        };
        Ok(app.card_action(&payload).await)
    }
}

/// A toast in the app's language, with both languages for Feishu to pick the client's.
fn toast(kind: &str, lang: Lang, zh: &str, en: &str) -> Value {
    json!({
        "type": kind,
        "content": match lang { Lang::Zh => zh, Lang::En => en },
        "i18n": {"zh_cn": zh, "en_us": en},
    })
}

/// What a click carries.
#[derive(Debug)]
struct Click {
    operator: String,
    call_id: String,
    args_hash: String,
    action: Option<Action>,
    reason: Option<String>,
}

fn read_click(payload: &Value) -> Option<Click> {
    let event = payload.get("event")?;
    let action = event.get("action")?;
    // Feishu hands back the value as the card gave it; some clients send it as a JSON string.
    let value = match action.get("value")? {
        Value::String(s) => serde_json::from_str::<Value>(s).ok()?,
        other => other.clone(),
    };
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    let named = text(&value, "action").as_deref().and_then(Action::parse);
    // The summary's "Open in app" names no call; every other button names one.
    let call_id = match text(&value, "call_id") {
        Some(id) => id,
        None if named == Some(Action::OpenInbox) => String::new(),
        None => return None,
    };
    Some(Click {
        operator: event
            .get("operator")
            .and_then(|o| text(o, "open_id"))
            .unwrap_or_default(),
        call_id,
        args_hash: text(&value, "args_hash").unwrap_or_default(),
        action: named,
        reason: action
            .get("form_value")
            .and_then(|f| text(f, card::REASON_FIELD))
            .map(|r| r.trim().to_owned())
            .filter(|r| !r.is_empty()),
    })
}

impl RemoteApproval {
    /// Answers one callback: a card action decides (or refuses) and answers the toast and the
    /// card; anything else is acknowledged with nothing.
    pub(crate) async fn card_action(&self, payload: &Value) -> Option<Value> {
        let event_type = payload
            .pointer("/header/event_type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if event_type != "card.action.trigger" {
            return None;
        }
        let lang = Lang::of(self.settings().language);
        let Some(click) = read_click(payload) else {
            return Some(
                json!({"toast": toast("error", lang, "这个卡片无法识别。", "This card could not be read.")}),
            );
        };
        if let Some(refused) = self.refuse_operator(&click, lang).await {
            return Some(refused);
        }
        if click.action == Some(Action::OpenInbox) {
            self.emit_open_inbox();
            return Some(json!({"toast": toast(
                "info",
                lang,
                "已在电脑上的飞书助手中打开收件箱。",
                "Opened the inbox in Feishu Companion on your computer.",
            )}));
        }
        let store = self.store();
        let (record, decision) = match self.click_decision(&store, &click, lang) {
            Ok(found) => found,
            Err(answer) => return Some(answer),
        };
        Some(
            self.decide_and_answer(&store, &click, record, decision, lang)
                .await,
        )
    }

    /// Refuses a click from anyone but the signed-in user (a card forwarded and clicked there).
    async fn refuse_operator(&self, click: &Click, lang: Lang) -> Option<Value> {
        let signed_in = match self.account().await {
            Ok(Some(account)) => account.user.map(|u| u.open_id),
            _ => None,
        };
        if signed_in.as_deref() != Some(click.operator.as_str()) || click.operator.is_empty() {
            tracing::warn!(call_id = %click.call_id, "a card click from someone other than the signed-in user was refused");
            return Some(json!({"toast": toast(
                "error",
                lang,
                "只有登录飞书助手的本人可以处理这个请求。",
                "Only the person signed in to Feishu Companion can decide this.",
            )}));
        }
        None
    }

    /// The person's call a click names and what it decides, or the answer when it decides
    /// nothing (an unknown or stale call, "Open in app", an unknown button).
    fn click_decision(
        &self,
        store: &store::Store,
        click: &Click,
        lang: Lang,
    ) -> Result<(agent::CallRecord, Decision), Value> {
        let record = match store.call(&click.call_id) {
            Ok(Some(record)) if self.users_calls().is_ok_and(|users| users(&record)) => record,
            _ => {
                tracing::warn!(call_id = %click.call_id, "a card click for an unknown call was refused");
                return Err(
                    json!({"toast": toast("error", lang, "找不到这个请求。", "This request is not known to the app.")}),
                );
            }
        };
        if click.action == Some(Action::Open) {
            self.emit_open_call(&record.call_id);
            return Err(json!({"toast": toast(
                "info",
                lang,
                "已在电脑上的飞书助手中打开。",
                "Opened in Feishu Companion on your computer.",
            )}));
        }
        if record.status != CallStatus::AwaitingApproval {
            return Err(self.already_decided(&record, lang));
        }
        if click.args_hash != agent::args_hash(&record.args) {
            tracing::warn!(call_id = %click.call_id, "a card click whose argument hash does not match the call was refused");
            return Err(json!({"toast": toast(
                "error",
                lang,
                "这个请求已经变了，请在应用中查看。",
                "This request has changed; look at it in the app.",
            )}));
        }
        let decision = match click.action {
            Some(Action::Approve) => Decision::Approve,
            Some(Action::Reject) => Decision::Reject {
                reason: click.reason.clone(),
            },
            _ => {
                return Err(
                    json!({"toast": toast("error", lang, "这个按钮无法识别。", "This button is not known.")}),
                );
            }
        };
        Ok((record, decision))
    }

    /// Decides a call from its card and answers with the outcome: the final card when the
    /// decision is recorded in time, else a toast and the card left to the loop.
    async fn decide_and_answer(
        &self,
        store: &store::Store,
        click: &Click,
        record: agent::CallRecord,
        decision: Decision,
        lang: Lang,
    ) -> Value {
        // The answer below carries the final card: the loop must not update it too.
        self.card_answering(&record.call_id, true);
        let decided = self.decide_in_background(&record.call_id, decision).await;
        let answers_with_card = match &decided {
            Ok(r) => r.status != CallStatus::AwaitingApproval,
            Err(EngineError::NotPending { .. } | EngineError::Expired { .. }) => true,
            Err(_) => false,
        };
        if !answers_with_card {
            self.card_answering(&record.call_id, false);
        }
        match decided {
            Ok(record) if record.status == CallStatus::AwaitingApproval => {
                // Not recorded in time (a busy database): the loop updates the card once it is.
                json!({"toast": toast("info", lang, "正在处理…", "Deciding…")})
            }
            Ok(record) => self.decided(&record, lang),
            Err(EngineError::NotPending { .. } | EngineError::Expired { .. }) => {
                let record = store.call(&click.call_id).ok().flatten().unwrap_or(record);
                self.already_decided(&record, lang)
            }
            Err(e) => {
                tracing::warn!(error = %e, "a decision from Feishu failed");
                json!({"toast": toast(
                    "error",
                    lang,
                    &format!("没能处理：{e}"),
                    &format!("It could not be decided: {e}"),
                )})
            }
        }
    }

    /// The answer to a click that decided its call: the final card, and a toast saying how.
    fn decided(&self, record: &agent::CallRecord, lang: Lang) -> Value {
        self.card_finished(&record.call_id);
        let (zh, en) = if record
            .decision
            .as_ref()
            .is_some_and(|d| d.verdict == agent::Verdict::Rejected)
        {
            ("已拒绝。", "Rejected.")
        } else {
            ("已批准，正在执行。", "Approved; it is running now.")
        };
        json!({
            "toast": toast("success", lang, zh, en),
            "card": {"type": "raw", "data": card::final_card(&CallView::from(record), &self.card_context(record))},
        })
    }

    /// The answer to a click on a call no longer waiting: the card as it now is, and a toast.
    fn already_decided(&self, record: &agent::CallRecord, lang: Lang) -> Value {
        self.card_finished(&record.call_id);
        json!({
            "toast": toast("info", lang, "这个请求已经处理过了。", "This request has already been decided."),
            "card": {"type": "raw", "data": card::final_card(&CallView::from(record), &self.card_context(record))},
        })
    }

    /// Decides from Feishu and answers once the decision is recorded (the turn goes on in the
    /// background); an engine refusal comes back as the error.
    async fn decide_in_background(
        &self,
        call_id: &str,
        decision: Decision,
    ) -> Result<agent::CallRecord, EngineError> {
        let engine = self.engine();
        let mut events = engine.subscribe();
        let id = call_id.to_owned();
        let mut task = tokio::spawn(async move {
            engine
                .decide_from(&id, decision, DecisionSource::Feishu)
                .await
        });
        let recorded = async {
            loop {
                match events.recv().await {
                    Ok(EngineEvent::Call(call))
                        if call.call_id == call_id
                            && call.decision.as_ref().is_some_and(|d| {
                                d.decided_by == DecisionSource::Feishu.actor()
                            }) =>
                    {
                        return Some(call);
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                }
            }
        };
        tokio::select! {
            done = &mut task => match done {
                Ok(Ok(_)) => self.store().call(call_id).ok().flatten().ok_or_else(|| EngineError::CallNotFound(call_id.to_owned())),
                Ok(Err(e)) => Err(e),
                Err(e) => Err(EngineError::CallNotFound(format!("{call_id}: {e}"))),
            },
            Some(call) = recorded => Ok(call),
            () = tokio::time::sleep(DECISION_WAIT) => {
                // Recorded or not, the decision goes on; the card follows from the loop.
                self.store().call(call_id).ok().flatten().ok_or_else(|| EngineError::CallNotFound(call_id.to_owned()))
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_click_is_read_from_feishus_callback_shape() {
        let payload = json!({
            "schema": "2.0",
            "header": {"event_type": "card.action.trigger", "event_id": "e1"},
            "event": {
                "operator": {"open_id": "ou_1"},
                "action": {
                    "tag": "button", "name": "reject",
                    "value": {"call_id": "fc_1", "args_hash": "h", "action": "reject"},
                    "form_value": {"reason": "  不要  "},
                },
                "context": {"open_message_id": "om_1"},
            },
        });
        let click = read_click(&payload).unwrap();
        assert_eq!(
            (click.operator.as_str(), click.call_id.as_str()),
            ("ou_1", "fc_1")
        );
        assert_eq!(click.action, Some(Action::Reject));
        assert_eq!(click.reason.as_deref(), Some("不要"));
        let mut stringly = payload.clone();
        stringly["event"]["action"]["value"] =
            Value::String(r#"{"call_id":"fc_2","args_hash":"h","action":"approve"}"#.into());
        assert_eq!(read_click(&stringly).unwrap().call_id, "fc_2");
        let mut no_call = payload;
        no_call["event"]["action"]["value"] = json!({"action": "approve"});
        assert!(read_click(&no_call).is_none());
        no_call["event"]["action"]["value"] = json!({"action": "open_inbox"});
        assert_eq!(
            read_click(&no_call).unwrap().action,
            Some(Action::OpenInbox),
            "the summary's button names no call"
        );
    }
}
