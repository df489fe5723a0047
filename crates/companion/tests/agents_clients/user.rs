//! The test as the user: the demo app with one registered agent, the inbox watched for that
//! agent's held calls, their cards checked, and what the app recorded read back.

use std::time::{Duration, Instant};

use agent::persist::{AuditFilter, CallFilter};
use agent::{CallRecord, CallStatus, Verdict};
use companion::Companion;
use companion::view::CallView;

use super::peers::Peer;

/// The demo app serving MCP on a free port, with one agent registered.
pub struct Demo {
    pub dir: tempfile::TempDir,
    pub app: Companion,
    pub url: String,
    pub token: String,
    /// The agent's id (`agent:<id>` in the audit).
    pub id: String,
    /// The name it was registered with (the card's requester).
    pub name: String,
}

pub async fn demo(name: &str) -> Demo {
    let dir = tempfile::tempdir().unwrap();
    let app = crate::common::open_demo(dir.path()).await;
    let new = app.add_connected_agent(name).unwrap();
    let url = app.connected_agents().url.unwrap();
    Demo {
        dir,
        app,
        url,
        token: new.token,
        id: new.agent.id,
        name: name.to_owned(),
    }
}

impl Demo {
    /// The data folder the app was opened on (`companion-cli mcp --data-dir` finds it there).
    pub fn data_dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// The next call of this agent waiting for approval, other than those in `seen`. Fails at
    /// once, with its output, if `peer` ends before one is held.
    pub async fn held(&self, peer: &mut Peer, seen: &[String], limit: Duration) -> CallRecord {
        self.held_or(peer, seen, limit, String::new).await
    }

    /// [`Demo::held`], adding `context()` (what else the test knows) to a failure's message.
    pub async fn held_or(
        &self,
        peer: &mut Peer,
        seen: &[String],
        limit: Duration,
        context: impl Fn() -> String,
    ) -> CallRecord {
        let deadline = Instant::now() + limit;
        loop {
            let found = self.app.pending().unwrap().into_iter().find(|c| {
                c.agent_name == self.id
                    && c.status == CallStatus::AwaitingApproval
                    && !seen.contains(&c.call_id)
            });
            // Only once the turn that held it has ended: a decision landing before that is lost
            // (the engine's race, see race.rs), and the call never runs nor answers.
            if let Some(call) = found
                && !self.app.engine().is_running(&call.session_id)
            {
                return call;
            }
            if let Some(status) = peer.exited() {
                panic!(
                    "the client ended ({status}) before a call was held\n{}\n{}",
                    peer.log(),
                    context()
                );
            }
            assert!(
                Instant::now() < deadline,
                "no call was held within {limit:?}; the agent's calls: {:?}\n{}\n{}",
                self.calls()
                    .iter()
                    .map(|c| (&c.tool, c.status))
                    .collect::<Vec<_>>(),
                peer.log(),
                context()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The inbox card of `call`, checked to name this agent as the one asking.
    pub fn card(&self, call: &CallRecord) -> CallView {
        let card = self
            .app
            .pending_calls()
            .unwrap()
            .into_iter()
            .find(|c| c.call_id == call.call_id)
            .expect("the held call is in the inbox");
        assert_eq!(card.requester.as_deref(), Some(self.name.as_str()));
        card
    }

    /// The call as it ends, within `limit`.
    pub async fn done(&self, call_id: &str, limit: Duration) -> CallRecord {
        let deadline = Instant::now() + limit;
        loop {
            let call = self.app.engine().store().call(call_id).unwrap().unwrap();
            if call.status == CallStatus::Done {
                return call;
            }
            assert!(Instant::now() < deadline, "the call did not end: {call:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// This agent's calls, in any state.
    pub fn calls(&self) -> Vec<CallRecord> {
        let all = self.app.engine().store().calls(&CallFilter::default());
        all.unwrap()
            .into_iter()
            .filter(|c| c.agent_name == self.id)
            .collect()
    }

    /// The audit of `call`'s session as (kind, actor).
    pub fn audit(&self, call: &CallRecord) -> Vec<(String, String)> {
        let filter = AuditFilter {
            session_id: Some(call.session_id.clone()),
            ..AuditFilter::default()
        };
        let rows = self.app.audit(&filter).unwrap();
        rows.into_iter().map(|e| (e.kind, e.actor)).collect()
    }

    /// Asserts what was recorded of a call that ended: the request named this agent, the
    /// verdict was `verdict`, and it ran once (an approval) or never (anything else).
    pub async fn assert_recorded(&self, call: &CallRecord, verdict: Verdict) {
        let call = self.done(&call.call_id, Duration::from_secs(20)).await;
        assert_eq!(
            call.decision.as_ref().map(|d| d.verdict),
            Some(verdict),
            "{call:?}"
        );
        let audit = self.audit(&call);
        let me = format!("agent:{}", self.id);
        let asked = audit
            .iter()
            .filter(|(kind, actor)| kind == "approval.requested" && *actor == me)
            .count();
        assert_eq!(asked, 1, "{audit:?}");
        let ran = audit
            .iter()
            .filter(|(kind, actor)| kind == "call.dispatched" && *actor == me)
            .count();
        let approved = matches!(verdict, Verdict::Approved | Verdict::ApprovedEdited);
        assert_eq!(
            ran,
            usize::from(approved),
            "ran once if approved: {audit:?}"
        );
        let kind = match verdict {
            Verdict::Approved => Some("approval.approved"),
            Verdict::ApprovedEdited => Some("approval.approved_edited"),
            Verdict::Rejected => Some("approval.rejected"),
            _ => None,
        };
        if let Some(kind) = kind {
            assert!(
                audit.iter().any(|(k, actor)| k == kind && *actor != me),
                "the user's {kind}: {audit:?}"
            );
        }
    }
}
