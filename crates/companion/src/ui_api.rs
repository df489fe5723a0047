//! The user's actions as the UI calls them: each takes and returns the view types of
//! [`crate::view`], so the desktop shell only forwards. The engine-level functions in `core`
//! stay for the CLI and the tests.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use agent::CallStatus;
use agent::persist::CallFilter;

use crate::app::Companion;
use crate::error::CompanionError;
use crate::settings::Settings;
use crate::sync::lock;
use crate::text::{Text, cut, snake};
use crate::view::audit::{AuditQuery, AuditView, ExportFormat, RuleView};
use crate::view::build::{TimelineView, timeline};
use crate::view::call::CallView;
use crate::view::decide::{BatchDecision, DecisionInput, SettlementInput};
use crate::view::settings::{
    AccountView, PresetView, SavedSettings, SettingsView, SignInTicketView,
};
use crate::view::timeline::{AppInfo, PersonView, SessionView, TurnView};

/// How much of the first message names a conversation.
const TITLE_CHARS: usize = 40;

impl Companion {
    /// About the running app, for the status bar and the demo banner.
    pub fn app_info(&self) -> AppInfo {
        let settings = self.settings();
        let (key_source, key_notice) = self.key_source();
        let model = if self.is_demo() {
            "Demo".to_owned()
        } else {
            match llm::preset(&settings.model.preset) {
                Some(p) => format!(
                    "{} · {}",
                    p.name_en,
                    settings.model.model.as_deref().unwrap_or(p.default_model)
                ),
                None => settings.model.preset.clone(),
            }
        };
        AppInfo {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            demo: self.is_demo(),
            model,
            brand: snake(&settings.feishu.brand),
            key_source,
            // Demo mode keeps nothing worth protecting (the emulator's tokens die with it), so a
            // key file there is no reason to warn.
            key_notice: key_notice.filter(|_| !self.is_demo()),
            data_dir: self.paths().data_dir.display().to_string(),
            redirect_url: settings.feishu.redirect_url(),
            person: crate::person::person(self)
                .ok()
                .flatten()
                .map(|p| PersonView {
                    name: p.name,
                    open_id: p.open_id,
                }),
        }
    }

    /// The conversations, most recent first, each with its title and what waits in it.
    pub async fn sessions(&self) -> Result<Vec<SessionView>, CompanionError> {
        let mut pending: HashMap<String, u32> = HashMap::new();
        for call in self.pending()? {
            *pending.entry(call.session_id).or_default() += 1;
        }
        let mut out = Vec::new();
        for meta in self.list_sessions().await? {
            let title = self.session_title(&meta.id)?;
            out.push(SessionView {
                pending: pending.get(&meta.id).copied().unwrap_or(0),
                id: meta.id,
                title,
                created_at: meta.created_at,
                updated_at: meta.updated_at,
            });
        }
        out.sort_by_key(|s| std::cmp::Reverse(s.updated_at));
        Ok(out)
    }

    /// A conversation's title: the start of its first message, remembered once known.
    fn session_title(&self, session_id: &str) -> Result<String, CompanionError> {
        if let Some(title) = lock(self.titles()).get(session_id) {
            return Ok(title.clone());
        }
        let events = self.session_events(session_id)?;
        let first = events.iter().find_map(|e| {
            e.content
                .as_ref()
                .filter(|c| c.is_user() && e.author == agent::USER_AUTHOR)
                .map(|c| c.text())
                .filter(|t| !t.trim().is_empty())
        });
        let Some(first) = first else {
            // No title yet: not remembered, so the first message names it.
            return Ok(String::new());
        };
        let title = cut(first.lines().next().unwrap_or_default().trim(), TITLE_CHARS);
        lock(self.titles()).insert(session_id.to_owned(), title.clone());
        Ok(title)
    }

    /// A conversation, whole: its entries and every call the engine tracks in it.
    pub fn timeline(&self, session_id: &str) -> Result<TimelineView, CompanionError> {
        let events = self.session_events(session_id)?;
        let calls = self
            .engine()
            .store()
            .calls(&CallFilter {
                session_id: Some(session_id.to_owned()),
                ..CallFilter::default()
            })
            .map_err(agent::EngineError::from)?;
        Ok(TimelineView {
            session_id: session_id.to_owned(),
            items: timeline(&events),
            calls: calls.iter().map(CallView::from).collect(),
            running: self.engine().is_running(session_id),
            autonomy: self.autonomy_of(session_id)?,
        })
    }

    /// Sends a message; returns when the turn completes or waits for the user.
    pub async fn send(&self, session_id: &str, text: &str) -> Result<TurnView, CompanionError> {
        Ok(self.send_message(session_id, text).await?.into())
    }

    /// Decides one held call.
    pub async fn decide_call(
        &self,
        call_id: &str,
        decision: DecisionInput,
    ) -> Result<TurnView, CompanionError> {
        Ok(self.decide(call_id, decision.into()).await?.into())
    }

    /// Decides many held calls at once.
    pub async fn decide_calls(
        &self,
        decisions: Vec<BatchDecision>,
    ) -> Result<Vec<TurnView>, CompanionError> {
        let decisions = decisions
            .into_iter()
            .map(|d| (d.call_id, d.decision.into()))
            .collect();
        Ok(self
            .decide_many(decisions)
            .await?
            .into_iter()
            .map(TurnView::from)
            .collect())
    }

    /// Settles a write whose outcome a crash made unknown.
    pub async fn settle(
        &self,
        call_id: &str,
        settlement: SettlementInput,
    ) -> Result<TurnView, CompanionError> {
        Ok(self
            .engine()
            .settle(call_id, settlement.into())
            .await?
            .into())
    }

    /// The user declined to sign in for a call.
    pub async fn decline_auth(&self, call_id: &str) -> Result<TurnView, CompanionError> {
        Ok(self.decline_sign_in(call_id).await?.into())
    }

    /// Everything waiting for the user, across conversations, oldest first.
    pub fn pending_calls(&self) -> Result<Vec<CallView>, CompanionError> {
        Ok(self
            .pending()?
            .iter()
            .filter(|c| {
                matches!(
                    c.status,
                    CallStatus::AwaitingApproval
                        | CallStatus::AwaitingAuth
                        | CallStatus::OutcomeUnknown
                )
            })
            .map(CallView::from)
            .collect())
    }

    /// The rules, newest first, revoked ones included.
    pub fn rule_views(&self) -> Result<Vec<RuleView>, CompanionError> {
        let mut rules: Vec<RuleView> = self.rules()?.into_iter().map(RuleView::from).collect();
        rules.sort_by_key(|r| std::cmp::Reverse(r.created_at));
        Ok(rules)
    }

    /// Revokes a rule.
    pub fn revoke(&self, rule_id: &str) -> Result<RuleView, CompanionError> {
        Ok(self.revoke_rule(rule_id)?.into())
    }

    /// The audit trail, newest first.
    pub fn audit_views(&self, query: &AuditQuery) -> Result<Vec<AuditView>, CompanionError> {
        Ok(self
            .audit(&query.into())?
            .into_iter()
            .map(AuditView::from)
            .collect())
    }

    /// Writes the audit trail (as filtered) to a new file in `dir` and returns its path.
    pub fn export_audit(
        &self,
        query: &AuditQuery,
        format: ExportFormat,
        dir: &Path,
    ) -> Result<PathBuf, CompanionError> {
        let entries = self.audit_views(&AuditQuery {
            limit: None,
            ..query.clone()
        })?;
        let (text, ext) = match format {
            ExportFormat::Json => (
                serde_json::to_string_pretty(&entries)
                    .map_err(|e| CompanionError::Other(e.to_string()))?,
                "json",
            ),
            ExportFormat::Csv => (crate::view::audit::audit_csv(&entries), "csv"),
        };
        let stamp = jiff::ZonedDateTime::now()
            .strftime("%Y%m%d-%H%M%S")
            .to_string();
        let path = dir.join(format!("feishu-companion-audit-{stamp}.{ext}"));
        std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(&path, text))
            .map_err(|e| CompanionError::Other(format!("cannot write {}: {e}", path.display())))?;
        Ok(path)
    }

    /// The signed-in account, without its tokens.
    pub async fn account_view(&self) -> Result<Option<AccountView>, CompanionError> {
        Ok(self.account().await?.map(AccountView::from))
    }

    /// Starts a sign-in; see [`Companion::begin_sign_in`].
    pub async fn sign_in(&self, scopes: Vec<String>) -> Result<SignInTicketView, CompanionError> {
        let ticket = self.begin_sign_in(scopes).await?;
        Ok(SignInTicketView {
            url: ticket.url,
            redirect_uri: ticket.redirect_uri,
            device: ticket.device.as_ref().map(Into::into),
        })
    }

    /// The settings page.
    pub fn settings_view(&self) -> Result<SettingsView, CompanionError> {
        let settings = self.settings();
        let secrets = self.secrets_present()?;
        let presets = llm::PRESETS
            .iter()
            .map(|p| PresetView {
                id: p.id.to_owned(),
                name: Text::new(p.name_zh, p.name_en),
                kind: snake(&p.kind),
                base_url: p.base_url.to_owned(),
                default_model: p.default_model.to_owned(),
                takes_key: p.key_name.is_some(),
                key_set: p.key_name.is_some_and(|k| secrets.iter().any(|s| s == k)),
            })
            .collect();
        Ok(SettingsView {
            redirect_url: settings.feishu.redirect_url(),
            app_secret_set: secrets.iter().any(|s| s == crate::options::APP_SECRET),
            settings,
            presets,
            app_scopes: crate::labels::APP_SCOPES
                .iter()
                .map(|s| crate::labels::scope(s))
                .collect(),
            system_time_zone: jiff::tz::TimeZone::system()
                .iana_name()
                .unwrap_or("UTC")
                .to_owned(),
        })
    }

    /// Saves settings and applies them at once (no restart is ever needed).
    pub async fn save_settings(
        &self,
        mut settings: Settings,
    ) -> Result<SavedSettings, CompanionError> {
        // The assistant's part belongs to its own page (and the editor's saves): a general save
        // made from an older copy must not undo what was set there meanwhile.
        settings.assistant = self.settings().assistant;
        self.apply_settings(settings).await?;
        Ok(SavedSettings {})
    }

    /// Keeps approvals from waiting past their time: every `every`, expired ones are answered
    /// `CANCELLED` ("expired") and their turns move on. Runs until the app closes.
    pub fn start_expiry(&self, every: std::time::Duration) {
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                match me.engine().expire_due().await {
                    Ok(expired) if !expired.is_empty() => {
                        tracing::info!(n = expired.len(), "approvals expired")
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "expiring approvals failed"),
                }
            }
        });
    }
}
