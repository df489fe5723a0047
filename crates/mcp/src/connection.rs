//! One server's connection: started when first needed, its tools listed, its stderr kept, and
//! started again after a crash, at once the first time and then after a growing pause (1 s, 2 s,
//! 4 s … 60 s), so a server that dies at start does not spin. A call carries a progress token
//! (its notifications reach the hub for the call's card), a timeout that progress resets, and a
//! guard that tells the server `notifications/cancelled` when the call is dropped unfinished.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use tokio::io::AsyncBufReadExt;
use tokio::sync::broadcast;

use crate::config::{Resolved, TransportConfig};
use crate::elicit::{DeclineAll, Elicitor};
use crate::gate::ToolInfo;
use crate::handler::{Handler, ProgressRoutes};
use crate::hub::HubEvent;
use crate::stderr::StderrLog;

mod call;

/// How long a server may take to start and answer `initialize` and `tools/list`.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest pause between two starts of a failing server.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// A server that ran this long before it failed starts again at once.
const HEALTHY_AFTER: Duration = Duration::from_secs(60);

/// Why a call did not get the server's answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    /// The server could not be started (or not reached).
    #[error("could not be started: {0}")]
    Start(String),
    /// It failed lately and waits before the next start.
    #[error("failed ({error}); it is started again in {} s", retry_in.as_secs().max(1))]
    Waiting {
        /// The last failure.
        error: String,
        /// Until the next start.
        retry_in: Duration,
    },
    /// No answer nor progress within the server's timeout; the server was told to cancel.
    #[error("gave no answer within {} s; the call was cancelled", .0.as_secs())]
    Timeout(Duration),
    /// The server stopped during the call.
    #[error("stopped during the call ({0}); it is started again for the next call")]
    Crashed(String),
    /// The server answered with a JSON-RPC error.
    #[error("refused the call: {message} (code {code})")]
    Refused {
        /// The JSON-RPC error code.
        code: i32,
        /// Its message.
        message: String,
    },
    /// The server refuses the request over HTTP, with its `WWW-Authenticate` challenge: 401
    /// (sign in), or 403 `insufficient_scope` (grant more); and no credentials cured it.
    #[error("asks to sign in")]
    AuthRequired(String),
    /// The result the server's credentials give instead of the server's answer: typically the
    /// user must sign in or grant a permission first, and the engine's result says which.
    #[error("needs the user's sign-in")]
    NeedsAuth(agent::ToolReturn),
    /// An answer the app cannot use yet (a task, a request for input).
    #[error("answered in a way the app does not support: {0}")]
    Unsupported(String),
}

/// How a server stands, for the settings page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Not started (it starts when first needed).
    Idle,
    /// Starting now.
    Starting,
    /// Running.
    Running,
    /// Failed; started again when next needed, after the pause.
    Failed,
}

impl Phase {
    /// Its name, as the settings page and the UI's types spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Starting => "starting",
            Phase::Running => "running",
            Phase::Failed => "failed",
        }
    }
}

/// A server's state as the settings page shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ServerStatus {
    /// Where it stands.
    pub phase: Phase,
    /// The last failure, if it failed.
    pub error: Option<String>,
    /// How many times it was started.
    pub starts: u32,
    /// The server's name and version, as it gave them.
    pub server_info: Option<String>,
    /// It asks the user to sign in before anything else (HTTP 401 at connection).
    pub wants_sign_in: bool,
}

struct Live {
    service: RunningService<RoleClient, Handler>,
    /// The changing headers it was made with (see [`crate::Credentials`]).
    headers: BTreeMap<String, String>,
    started: Instant,
    /// Failures in a row before this start.
    failures: u32,
}

impl Live {
    /// Failures in a row if this connection ended now: none if it ran long enough.
    fn failures_if_ended(&self) -> u32 {
        if self.started.elapsed() < HEALTHY_AFTER {
            self.failures + 1
        } else {
            0
        }
    }
}

enum State {
    Idle,
    Live(Arc<Live>),
    Failed {
        error: String,
        next_try: Instant,
        failures: u32,
    },
}

/// One server, connected on demand.
pub struct Connection {
    resolved: Resolved,
    events: broadcast::Sender<HubEvent>,
    routes: ProgressRoutes,
    tools: Arc<Mutex<Vec<ToolInfo>>>,
    stderr: Arc<Mutex<StderrLog>>,
    state: tokio::sync::Mutex<State>,
    status: Mutex<ServerStatus>,
    elicitor: Arc<dyn Elicitor>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("server", &self.resolved.config.id)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// A connection to `resolved`, not started; `known_tools` are the tools it listed before
    /// (kept by the app), offered until it is started and lists them again.
    pub fn new(
        resolved: Resolved,
        known_tools: Vec<ToolInfo>,
        events: broadcast::Sender<HubEvent>,
    ) -> Connection {
        Connection {
            resolved,
            events,
            routes: ProgressRoutes::default(),
            tools: Arc::new(Mutex::new(known_tools)),
            stderr: Arc::new(Mutex::new(StderrLog::default())),
            state: tokio::sync::Mutex::new(State::Idle),
            status: Mutex::new(ServerStatus {
                phase: Phase::Idle,
                error: None,
                starts: 0,
                server_info: None,
                wants_sign_in: false,
            }),
            elicitor: Arc::new(DeclineAll),
        }
    }

    /// The same, with `elicitor` answering the server's requests for the user's input (each
    /// is declined otherwise).
    pub fn with_elicitor(mut self, elicitor: Arc<dyn Elicitor>) -> Connection {
        self.elicitor = elicitor;
        self
    }

    /// Its configuration and secrets.
    pub fn resolved(&self) -> &Resolved {
        &self.resolved
    }

    /// The tools it listed last.
    pub fn tools(&self) -> Vec<ToolInfo> {
        self.tools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Where it stands now.
    pub fn status(&self) -> ServerStatus {
        self.status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// What it wrote to stderr lately (stdio servers).
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .text()
    }

    /// Starts the server if it is not running (or was stopped), and lists its tools.
    pub async fn start(&self) -> Result<(), CallError> {
        let mut retry = true;
        loop {
            let headers = self.changing_headers("").await?;
            match self.live(&headers).await {
                Err(CallError::AuthRequired(challenge)) => {
                    self.challenged("", challenge, &headers, &mut retry).await?;
                }
                other => return other.map(|_| ()),
            }
        }
    }

    /// What becomes of a request the server refused with `challenge` while the credentials
    /// gave `sent`: their result (the call waits for the user's sign-in), or, once, another try
    /// when they renewed themselves (a refreshed token); else the refusal as it is.
    async fn challenged(
        &self,
        tool: &str,
        challenge: String,
        sent: &BTreeMap<String, String>,
        retry: &mut bool,
    ) -> Result<(), CallError> {
        let Some(credentials) = &self.resolved.credentials else {
            return Err(CallError::AuthRequired(challenge));
        };
        if let Some(result) = credentials.on_challenge(tool, &challenge).await {
            return Err(CallError::NeedsAuth(result));
        }
        // A 401 or 403 means the server did not act on the request: trying again is safe.
        let renewed = matches!(credentials.headers(tool).await, Ok(now) if &now != sent);
        if renewed && std::mem::take(retry) {
            Ok(())
        } else {
            Err(CallError::AuthRequired(challenge))
        }
    }

    /// The headers the server's credentials give now (none without credentials).
    async fn changing_headers(&self, tool: &str) -> Result<BTreeMap<String, String>, CallError> {
        match &self.resolved.credentials {
            Some(credentials) => credentials
                .headers(tool)
                .await
                .map_err(CallError::NeedsAuth),
            None => Ok(BTreeMap::new()),
        }
    }

    /// Stops the server if it runs; the next call starts it again.
    pub async fn stop(&self) {
        let mut state = self.state.lock().await;
        if let State::Live(live) = std::mem::replace(&mut *state, State::Idle) {
            live.service.cancellation_token().cancel();
        }
        self.set_status(|s| s.phase = Phase::Idle);
    }

    fn stderr_tail(&self) -> Option<String> {
        self.stderr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last_line()
    }

    /// The running connection, started now if needed.
    async fn live(&self, headers: &BTreeMap<String, String>) -> Result<Arc<Live>, CallError> {
        let mut state = self.state.lock().await;
        if let State::Live(live) = &*state
            && &live.headers != headers
        {
            // A refreshed token: the connection is made again with it.
            live.service.cancellation_token().cancel();
            *state = State::Idle;
        }
        let failures = match &*state {
            State::Live(live) if !live.service.is_closed() => return Ok(live.clone()),
            // It died between calls: count it like a failed call.
            State::Live(live) => live.failures_if_ended(),
            State::Idle => 0,
            State::Failed {
                error,
                next_try,
                failures,
            } => {
                let now = Instant::now();
                if *next_try > now {
                    return Err(CallError::Waiting {
                        error: error.clone(),
                        retry_in: *next_try - now,
                    });
                }
                *failures
            }
        };
        self.set_status(|s| {
            s.phase = Phase::Starting;
            s.starts += 1;
        });
        match tokio::time::timeout(START_TIMEOUT, self.connect(failures, headers)).await {
            Ok(Err(ConnectError::SignIn(challenge))) => {
                // Not a failure: the server is fine, and waiting would not sign anyone in.
                *state = State::Idle;
                self.set_status(|s| {
                    s.phase = Phase::Idle;
                    s.error = Some("it asks to sign in".to_owned());
                    s.wants_sign_in = true;
                });
                Err(CallError::AuthRequired(challenge))
            }
            Ok(Ok(live)) => {
                let live = Arc::new(live);
                *state = State::Live(live.clone());
                let info = live.service.peer().peer_info().and_then(|i| {
                    i.server_info
                        .as_ref()
                        .map(|si| format!("{} {}", si.name, si.version))
                });
                self.set_status(|s| {
                    s.phase = Phase::Running;
                    s.error = None;
                    s.wants_sign_in = false;
                    s.server_info = info;
                });
                let _ = self.events.send(HubEvent::ToolsChanged {
                    server_id: self.resolved.config.id.clone(),
                });
                Ok(live)
            }
            outcome => {
                let error = match outcome {
                    Ok(Err(ConnectError::Failed(e))) => e,
                    _ => format!("no answer within {} s", START_TIMEOUT.as_secs()),
                };
                let error = match self.stderr_tail() {
                    Some(line) if !error.contains(&line) => {
                        format!("{error}; its last words: {line}")
                    }
                    _ => error,
                };
                let failures = failures + 1;
                *state = State::Failed {
                    error: error.clone(),
                    next_try: Instant::now() + backoff(failures),
                    failures,
                };
                self.set_status(|s| {
                    s.phase = Phase::Failed;
                    s.error = Some(error.clone());
                });
                Err(CallError::Start(error))
            }
        }
    }

    /// Starts the server, shakes hands and lists its tools.
    async fn connect(
        &self,
        failures: u32,
        changing: &BTreeMap<String, String>,
    ) -> Result<Live, ConnectError> {
        let handler = Handler {
            server_id: self.resolved.config.id.clone(),
            routes: self.routes.clone(),
            events: self.events.clone(),
            tools: self.tools.clone(),
            elicitor: self.elicitor.clone(),
        };
        let service = match &self.resolved.config.transport {
            TransportConfig::Stdio {
                command, args, cwd, ..
            } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args)
                    .envs(&self.resolved.env)
                    .envs(changing)
                    .kill_on_drop(true);
                if let Some(dir) = cwd.as_deref().filter(|d| !d.is_empty()) {
                    cmd.current_dir(dir);
                }
                let (transport, stderr) = TokioChildProcess::builder(cmd)
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| format!("cannot run {command}: {e}"))?;
                if let Some(stderr) = stderr {
                    let log = self.stderr.clone();
                    tokio::spawn(async move {
                        let mut lines = tokio::io::BufReader::new(stderr).lines();
                        while let Ok(Some(line)) = lines.next_line().await {
                            log.lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .push(&line);
                        }
                    });
                }
                handler.serve(transport).await.map_err(|e| e.to_string())?
            }
            TransportConfig::Http { url, .. } => {
                let mut headers = self.resolved.headers.clone();
                headers.extend(changing.iter().map(|(k, v)| (k.clone(), v.clone())));
                let transport = crate::http::transport(url, &headers)?;
                match handler.serve(transport).await {
                    Ok(service) => service,
                    Err(e) => {
                        if let Some(challenge) = e.auth_challenge() {
                            return Err(ConnectError::SignIn(challenge.to_owned()));
                        }
                        return Err(e.to_string().into());
                    }
                }
            }
        };
        let tools = match service.peer().list_all_tools().await {
            Ok(tools) => tools,
            Err(e) => {
                service.cancellation_token().cancel();
                // Some servers let anyone shake hands and ask for a token from the first
                // request on.
                if let Some(challenge) = e.auth_challenge() {
                    return Err(ConnectError::SignIn(challenge.to_owned()));
                }
                return Err(format!("tools/list failed: {e}").into());
            }
        };
        *self.tools.lock().unwrap_or_else(PoisonError::into_inner) =
            tools.iter().map(ToolInfo::from_mcp).collect();
        Ok(Live {
            service,
            headers: changing.clone(),
            started: Instant::now(),
            failures,
        })
    }

    fn set_status(&self, change: impl FnOnce(&mut ServerStatus)) {
        change(&mut self.status.lock().unwrap_or_else(PoisonError::into_inner));
        let _ = self.events.send(HubEvent::Status {
            server_id: self.resolved.config.id.clone(),
        });
    }
}

/// Why a server could not be connected.
enum ConnectError {
    /// It asks to sign in first (its challenge).
    SignIn(String),
    /// Anything else, in words.
    Failed(String),
}

impl From<String> for ConnectError {
    fn from(error: String) -> Self {
        ConnectError::Failed(error)
    }
}

/// The pause before start number `failures + 1` of a failing server.
pub(crate) fn backoff(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    let secs = 1u64 << (failures - 1).min(6);
    Duration::from_secs(secs).min(MAX_BACKOFF)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_server_waits_longer_each_time_up_to_a_minute() {
        let pauses: Vec<u64> = (0..10).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(pauses, [0, 1, 2, 4, 8, 16, 32, 60, 60, 60]);
    }
}
