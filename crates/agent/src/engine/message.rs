//! A new message: it settles the turns still open in its session (approved calls run; waiting
//! ones are kept or called off), opens a turn with the user's message, lets the agent's
//! before_agent callbacks answer for it, and hands the turn to [`Engine::advance`].

use tokio_util::sync::CancellationToken;

use super::{
    Engine, EngineError, SESSION_ENDED_VARIABLE, SessionCache, Turn, TurnOutcome, WaitingCalls,
    notice,
};
use crate::content::{Content, ROLE_MODEL, ROLE_USER};
use crate::event::Event;
use crate::persist::{Commit, InvocationRecord, InvocationStatus};
use crate::state::StateMap;

impl Engine {
    /// Sends a user message: starts a turn and runs it until it completes or suspends.
    ///
    /// Approvals and sign-ins still waiting from earlier turns keep waiting: the model is told
    /// they wait, and a later decision still runs them. To call them off instead, see
    /// [`Engine::send_message_with`].
    pub async fn send_message(
        &self,
        session_id: &str,
        content: Content,
    ) -> Result<TurnOutcome, EngineError> {
        self.send_message_with(session_id, content, WaitingCalls::Keep)
            .await
    }

    /// Sends a message to a detached agent (see [`Engine::set_detached_agents`]) instead of
    /// the root: the turn is that agent's from its first step, with its model and its tools.
    pub async fn send_message_as(
        &self,
        session_id: &str,
        agent_name: &str,
        content: Content,
    ) -> Result<TurnOutcome, EngineError> {
        if !self.is_detached(agent_name) {
            return Err(EngineError::AgentNotFound(agent_name.to_owned()));
        }
        let token = self.start_running(session_id)?;
        self.send_message_running(
            session_id,
            content,
            WaitingCalls::Keep,
            token,
            Some(agent_name),
        )
        .await
    }

    /// [`Engine::send_message`], saying what becomes of the calls still waiting in the session:
    /// kept, or cancelled by the user's choice ([`notice::CANCELLED_FOR_NEW_MESSAGE`]).
    pub async fn send_message_with(
        &self,
        session_id: &str,
        content: Content,
        waiting: WaitingCalls,
    ) -> Result<TurnOutcome, EngineError> {
        let token = self.start_running(session_id)?;
        self.send_message_running(session_id, content, waiting, token, None)
            .await
    }

    pub(super) async fn send_message_running(
        &self,
        session_id: &str,
        content: Content,
        waiting: WaitingCalls,
        cancel: CancellationToken,
        agent_name: Option<&str>,
    ) -> Result<TurnOutcome, EngineError> {
        let mut guard = match self.lock_session(session_id).await {
            Ok(guard) => guard,
            Err(e) => {
                self.stop_running(session_id);
                return Err(e);
            }
        };
        // Declared after the lock, so the turn stops running before the session is unlocked.
        let _running = StopRunning(self, session_id);
        let s = guard.cache();
        if s.state.contains_key(SESSION_ENDED_VARIABLE) {
            return Err(EngineError::SessionEnded(session_id.to_owned()));
        }
        for inv in self.open_invocations(&s.id)? {
            self.settle_earlier_turn(s, inv, waiting).await?;
        }
        let mut turn = self.open_turn(s, content, agent_name, cancel)?;
        if let Some(outcome) = self.run_before_agent(s, &mut turn)? {
            return Ok(outcome);
        }
        self.advance(s, &mut turn).await
    }

    /// Deals with a turn still open when a new message comes: only one turn of a session runs
    /// at a time, so the new message takes over from it.
    async fn settle_earlier_turn(
        &self,
        s: &mut SessionCache,
        inv: InvocationRecord,
        waiting: WaitingCalls,
    ) -> Result<(), EngineError> {
        // What the user already approved still happens.
        let mut turn = Turn {
            inv: inv.clone(),
            temp: StateMap::new(),
            cancel: CancellationToken::new(),
        };
        self.run_approved(s, &mut turn).await?;
        // A turn still waiting for the user stays suspended unless the user called its calls
        // off; one with nothing left waiting is closed, the new message takes over.
        let waits = !self.open_calls(&inv.id)?.is_empty();
        match (waits, waiting) {
            (true, WaitingCalls::Keep) => {}
            (true, WaitingCalls::Cancel) => self.close_invocation(
                s,
                inv,
                InvocationStatus::Cancelled,
                notice::CANCELLED_FOR_NEW_MESSAGE,
            )?,
            (false, _) => {
                self.close_invocation(s, inv, InvocationStatus::Superseded, notice::SUPERSEDED)?
            }
        }
        Ok(())
    }

    /// Opens the new turn and records the user's message in one commit, so a turn is never
    /// stored without the message that started it.
    fn open_turn(
        &self,
        s: &mut SessionCache,
        content: Content,
        agent_name: Option<&str>,
        cancel: CancellationToken,
    ) -> Result<Turn, EngineError> {
        let now = self.now();
        let inv = InvocationRecord {
            id: format!("inv_{}", uuid::Uuid::new_v4().simple()),
            session_id: s.id.clone(),
            agent_name: agent_name.map_or_else(|| self.root_name(), str::to_owned),
            status: InvocationStatus::Running,
            model_calls: 0,
            started_at: now,
            updated_at: now,
        };
        let mut user_event = Event::new(inv.id.clone(), crate::event::USER_AUTHOR);
        user_event.timestamp = now;
        user_event.content = Some(Content {
            role: Some(ROLE_USER.to_owned()),
            ..content
        });
        self.commit(
            s,
            Commit {
                events: vec![user_event],
                invocations: vec![inv.clone()],
                ..Commit::default()
            },
        )?;
        Ok(Turn {
            inv,
            temp: StateMap::new(),
            cancel,
        })
    }

    /// Runs the agent's before_agent callbacks: the first with content answers for the agent
    /// and completes the turn without a model call (the returned outcome). Either way the state
    /// they changed is recorded, so the model sees it.
    fn run_before_agent(
        &self,
        s: &mut SessionCache,
        turn: &mut Turn,
    ) -> Result<Option<TurnOutcome>, EngineError> {
        let node = self.node(&turn.inv.agent_name);
        let callbacks = node.agent.callbacks.before_agent.clone();
        let mut delta = StateMap::new();
        let skip = if callbacks.is_empty() {
            None
        } else {
            let mut ctx = self.callback_context(s, turn);
            let skip = callbacks.iter().find_map(|cb| cb(&mut ctx));
            Self::absorb(turn, &mut ctx, &mut delta);
            skip
        };
        if let Some(content) = skip {
            let mut event = self.agent_event(
                turn,
                Some(Content {
                    role: Some(ROLE_MODEL.to_owned()),
                    ..content
                }),
            );
            event.actions.state_delta = delta;
            event.turn_complete = true;
            // The agent did not run, so neither do its after_agent callbacks (as in ADK).
            turn.inv.status = InvocationStatus::Completed;
            turn.inv.updated_at = self.now();
            self.commit(
                s,
                Commit {
                    events: vec![event],
                    invocations: vec![turn.inv.clone()],
                    ..Commit::default()
                },
            )?;
            return Ok(Some(TurnOutcome {
                invocation_id: turn.inv.id.clone(),
                status: InvocationStatus::Completed,
            }));
        }
        if !delta.is_empty() {
            let mut event = self.agent_event(turn, None);
            event.actions.state_delta = delta;
            self.commit(
                s,
                Commit {
                    events: vec![event],
                    ..Commit::default()
                },
            )?;
        }
        Ok(None)
    }
}

/// Marks the session's turn as no longer running when dropped: held while the session is locked,
/// so a decision waiting for that lock finds the turn stopped and resumes it itself (a decision
/// made the instant a call was held was otherwise left `Approved` and never run).
struct StopRunning<'a>(&'a Engine, &'a str);

impl Drop for StopRunning<'_> {
    fn drop(&mut self) {
        self.0.stop_running(self.1);
    }
}
