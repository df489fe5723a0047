//! The crash test (design §4): a child process drives turns against a SQLite file and is killed
//! with SIGKILL at random points; after every kill the parent checks, on the file itself, that no
//! pending approval was lost, no approved write was lost, no write was dispatched twice, and
//! `PRAGMA integrity_check` is `ok`.
//!
//! One test plays both roles. Run normally it is the *parent*: it starts this same test binary
//! again (`--exact <this test>`) with `CRASH_CHILD_DB` set, lets it run for a random few
//! milliseconds, kills it, checks, and starts the next one. With `CRASH_CHILD_DB` set it is the
//! *child*: it recovers, then sends messages, decides approvals and settles unknown outcomes
//! forever, like a very fast user.
//!
//! The write tools stand in for Feishu: each run appends `<tool> <idempotency_key>` to a
//! "service log" next to the database, which is the ground truth of what was dispatched. One tool's
//! service deduplicates by key (it may be sent again after a crash), the other's does not.
//!
//! `CRASH_SEED=<n>` replays a run's random choices (the kill points still depend on timing).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, HashSet};
use std::fs::OpenOptions;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent::engine::args_hash;
use agent::persist::CallFilter;
use agent::{
    Approval, CallRecord, CallStatus, Content, Decision, Engine, EngineConfig, EngineStore,
    FunctionCall, FunctionTool, InvocationStatus, LlmAgent, LlmResponse, Part, RecoveryReport,
    ScriptedModel, Settlement, ToolOutcome, ToolReturn, Verdict,
};
use serde_json::{Map, Value, json};

/// This test's name, as libtest and nextest filter it.
const TEST_NAME: &str = "sigkill_at_random_points_never_loses_or_repeats_a_write";
/// Set in the child: the database to drive.
const CHILD_DB: &str = "CRASH_CHILD_DB";
/// Set in the child: the seed of its random choices.
const CHILD_SEED: &str = "CRASH_CHILD_SEED";

/// How many crash iterations the parent aims for.
const ITERATIONS: usize = 300;
/// The parent starts no new iteration after this long, so the test stays well under two minutes.
const TIME_BUDGET: Duration = Duration::from_secs(75);
/// Fewer iterations than this means the machine was too slow for the test to mean anything.
const MIN_ITERATIONS: usize = 40;
/// A child that somehow outlives its parent gives up after this long.
const CHILD_DEADLINE: Duration = Duration::from_secs(60);

const APP: &str = "crash-test";
const USER: &str = "u";
/// Sessions the child talks in at a time.
const ACTIVE_SESSIONS: usize = 3;
/// A session with this many events is retired and a new one started, so loads stay cheap.
const MAX_SESSION_EVENTS: u64 = 250;
/// Short, so approvals left behind by one child expire in a later one.
const APPROVAL_TTL_MS: i64 = 300;

const READ: &str = "list_events";
/// A write whose service deduplicates by idempotency key (like Feishu's `client_token`).
const DEDUP_WRITE: &str = "create_task";
/// A write whose service does not deduplicate: after a crash its outcome is unknown.
const PLAIN_WRITE: &str = "post_webhook";
const CHATS: [&str; 3] = ["产品周会", "design", "ops"];

const DB_FILE: &str = "engine.db";
const SERVICE_LOG: &str = "service.log";
const WITNESS_LOG: &str = "witness.log";
const CHILD_STDERR: &str = "child.stderr";

/// SplitMix64: small, seedable, good enough to pick kill points and decisions.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn index(&mut self, len: usize) -> usize {
        usize::try_from(self.below(len as u64)).unwrap()
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

fn write_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"chat": {"type": "string"}, "text": {"type": "string"}},
        "required": ["chat", "text"],
        "additionalProperties": false
    })
}

/// A write tool standing in for a Feishu API: every run is one line in the service log.
fn service_tool(name: &'static str, dedup: bool, dir: &Path, rng: Arc<Mutex<Rng>>) -> FunctionTool {
    let log = dir.join(SERVICE_LOG);
    let tool = FunctionTool::new(
        name,
        format!("test write {name}"),
        write_schema(),
        move |args, ctx| {
            // Sleep on both sides of the request, so kills land before and after the service
            // received it.
            let (before, after) = {
                let mut rng = rng.lock().unwrap();
                (rng.below(3), rng.below(3))
            };
            std::thread::sleep(Duration::from_millis(before));
            let mut file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .expect("open the service log");
            // One write of one short line: a kill cannot leave half of it.
            file.write_all(format!("{name} {}\n", ctx.idempotency_key).as_bytes())
                .expect("append to the service log");
            file.sync_data().expect("sync the service log");
            std::thread::sleep(Duration::from_millis(after));
            ToolReturn::from(json!({"ok": true, "chat": args.get("chat")}))
        },
    )
    .with_approval(Approval::Always);
    if dedup { tool.deduplicated() } else { tool }
}

fn read_tool(rng: Arc<Mutex<Rng>>) -> FunctionTool {
    FunctionTool::new(
        READ,
        "test read",
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
        move |_, _| {
            let pause = rng.lock().unwrap().below(2);
            std::thread::sleep(Duration::from_millis(pause));
            ToolReturn::from(json!({"events": ["standup"]}))
        },
    )
}

fn function_call(name: &str, args: Value) -> Part {
    Part::FunctionCall(FunctionCall::new(name, args.as_object().unwrap().clone()))
}

/// After a user message: parallel calls mixing a read and both kinds of write (sometimes more, in
/// a shuffled order, sometimes with arguments the schema refuses). Otherwise: a closing text.
fn scripted_model(rng: Arc<Mutex<Rng>>) -> ScriptedModel {
    ScriptedModel::from_fn(move |request| {
        let user_spoke = request
            .contents
            .last()
            .is_some_and(|c| c.is_user() && c.function_responses().next().is_none());
        if !user_spoke {
            return Ok(LlmResponse::from_parts(vec![Part::from_text(
                "好的，处理完了。",
            )]));
        }
        let mut rng = rng.lock().unwrap();
        let write = |rng: &mut Rng, name: &str| {
            let chat = CHATS[rng.index(CHATS.len())];
            let text = format!("note {}", rng.below(1000));
            function_call(name, json!({"chat": chat, "text": text}))
        };
        let mut parts = vec![
            function_call(READ, json!({})),
            write(&mut rng, DEDUP_WRITE),
            write(&mut rng, PLAIN_WRITE),
        ];
        if rng.chance(30) {
            let name = if rng.chance(50) {
                DEDUP_WRITE
            } else {
                PLAIN_WRITE
            };
            parts.push(write(&mut rng, name));
        }
        if rng.chance(5) {
            parts.push(function_call(PLAIN_WRITE, json!({"chat": 3})));
        }
        for i in (1..parts.len()).rev() {
            let j = rng.index(i + 1);
            parts.swap(i, j);
        }
        Ok(LlmResponse::from_parts(parts))
    })
    .with_chunk_chars(0)
}

/// The engine both roles use: the same tools, model and settings over the file in `dir`.
fn build_engine(dir: &Path, seed: u64) -> (Engine, Arc<store::Store>) {
    let store = Arc::new(store::Store::open(dir.join(DB_FILE)).expect("open the database"));
    let rng = Arc::new(Mutex::new(Rng::new(seed)));
    let model = Arc::new(scripted_model(rng.clone()));
    let agent = LlmAgent::builder("assistant", model)
        .instruction("You help with Feishu.")
        .tool(read_tool(rng.clone()))
        .tool(service_tool(DEDUP_WRITE, true, dir, rng.clone()))
        .tool(service_tool(PLAIN_WRITE, false, dir, rng))
        .build()
        .unwrap();
    let config = EngineConfig {
        app_name: APP.to_owned(),
        approval_ttl_ms: Some(APPROVAL_TTL_MS),
        ..EngineConfig::default()
    };
    (Engine::new(agent, store.clone(), config).unwrap(), store)
}

fn service_log_has(dir: &Path, tool: &str, key: &str) -> bool {
    std::fs::read_to_string(dir.join(SERVICE_LOG))
        .unwrap_or_default()
        .lines()
        .any(|line| line == format!("{tool} {key}"))
}

#[test]
fn sigkill_at_random_points_never_loses_or_repeats_a_write() {
    match std::env::var_os(CHILD_DB) {
        Some(db) => child_main(Path::new(&db)),
        None => parent_main(),
    }
}

// ---------------------------------------------------------------------------------------------
// The child: a fast user, killed at a random moment.
// ---------------------------------------------------------------------------------------------

fn child_main(db: &Path) {
    // The parent holds our stdin: when it goes away, even killed, so does this child.
    std::thread::spawn(|| {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        std::process::exit(2);
    });
    let dir = db.parent().unwrap().to_path_buf();
    let seed: u64 = std::env::var(CHILD_SEED).unwrap().parse().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(child_loop(&dir, seed));
    unreachable!("the child runs until it is killed");
}

async fn child_loop(dir: &Path, seed: u64) {
    let started = Instant::now();
    let (engine, store) = build_engine(dir, seed);
    engine
        .recover()
        .await
        .unwrap_or_else(|e| panic!("recovery failed: {e}"));
    let mut rng = Rng::new(seed ^ 0x5EED);
    let mut witnessed: HashSet<String> = HashSet::new();
    let mut step: u64 = 0;
    loop {
        if started.elapsed() > CHILD_DEADLINE {
            std::process::exit(3);
        }
        step += 1;
        if step.is_multiple_of(8) {
            engine
                .expire_due()
                .await
                .unwrap_or_else(|e| panic!("expire_due failed: {e}"));
        }
        let pending = engine.pending_calls().unwrap();
        witness(dir, &mut witnessed, &pending);
        let roll = rng.below(100);
        if !pending.is_empty() && roll < 85 {
            let call = &pending[rng.index(pending.len())];
            act_on(&engine, dir, &mut rng, call).await;
        } else if roll < 97 {
            let session = pick_session(&engine, &store, &mut rng);
            let text = format!("请帮我处理第 {step} 件事");
            engine
                .send_message(&session, Content::user_text(text))
                .await
                .unwrap_or_else(|e| panic!("send_message in {session} failed: {e}"));
        } else {
            let session = pick_session(&engine, &store, &mut rng);
            engine
                .cancel(&session)
                .await
                .unwrap_or_else(|e| panic!("cancel in {session} failed: {e}"));
        }
    }
}

/// Records every pending call this child has seen listed, for the parent to find again.
fn witness(dir: &Path, witnessed: &mut HashSet<String>, pending: &[CallRecord]) {
    let mut lines = String::new();
    for call in pending {
        if witnessed.insert(call.call_id.clone()) {
            lines.push_str(&call.call_id);
            lines.push('\n');
        }
    }
    if !lines.is_empty() {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(WITNESS_LOG))
            .unwrap()
            .write_all(lines.as_bytes())
            .unwrap();
    }
}

/// One of the active sessions; creates sessions at first start and when old ones fill up.
fn pick_session(engine: &Engine, store: &store::Store, rng: &mut Rng) -> String {
    let mut active: Vec<String> = store
        .list_sessions(APP, USER)
        .unwrap()
        .into_iter()
        .filter(|s| s.last_seq < MAX_SESSION_EVENTS)
        .map(|s| s.id)
        .collect();
    if active.len() < ACTIVE_SESSIONS {
        active.push(engine.create_session(USER, &Map::new()).unwrap());
    }
    active.swap_remove(rng.index(active.len()))
}

async fn act_on(engine: &Engine, dir: &Path, rng: &mut Rng, call: &CallRecord) {
    let id = &call.call_id;
    match call.status {
        CallStatus::AwaitingApproval => {
            let roll = rng.below(100);
            let decision = if roll < 55 {
                Decision::Approve
            } else if roll < 65 {
                let mut args = call.args.clone();
                args.insert("text".to_owned(), json!("edited by the user"));
                Decision::ApproveEdited(args)
            } else if roll < 75 {
                let mut constraints = Map::new();
                constraints.insert("chat".to_owned(), call.args["chat"].clone());
                Decision::AlwaysAllow {
                    constraints,
                    expires_at: Some(agent::now_millis() + 1_500),
                }
            } else {
                Decision::Reject {
                    reason: Some("not now".to_owned()),
                }
            };
            // Approvals live 300 ms here: on a loaded machine the time can run out between
            // listing the call and deciding it, and the engine must then refuse the decision
            // (an expired approval is never approved) and answer the call as expired.
            match engine.decide(id, decision.clone()).await {
                Ok(_) | Err(agent::EngineError::Expired { .. }) => {}
                Err(e) => panic!("decide({id}, {decision:?}) failed: {e}"),
            }
        }
        CallStatus::OutcomeUnknown => {
            // The user checks in Feishu (the service log) before settling, as the card asks.
            let settlement = if service_log_has(dir, &call.tool, &call.idempotency_key) {
                Settlement::Happened
            } else if rng.chance(70) {
                Settlement::Retry
            } else {
                Settlement::DidNotHappen
            };
            engine
                .settle(id, settlement)
                .await
                .unwrap_or_else(|e| panic!("settle({id}, {settlement:?}) failed: {e}"));
        }
        CallStatus::AwaitingAuth => {
            engine
                .auth_declined(id)
                .await
                .unwrap_or_else(|e| panic!("auth_declined({id}) failed: {e}"));
        }
        other => panic!("pending_calls listed {id} in state {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// The parent: kills children and checks what they left.
// ---------------------------------------------------------------------------------------------

/// Kills and reaps the child however the parent leaves (an assertion included): no orphans.
struct ChildGuard(Option<Child>);

impl ChildGuard {
    fn spawn(dir: &Path, seed: u64) -> ChildGuard {
        let stderr = std::fs::File::create(dir.join(CHILD_STDERR)).unwrap();
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", TEST_NAME, "--nocapture"])
            .env(CHILD_DB, dir.join(DB_FILE))
            .env(CHILD_SEED, seed.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start the child");
        ChildGuard(Some(child))
    }

    /// The child's exit status if it has already stopped by itself.
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.0.as_mut().and_then(|c| c.try_wait().unwrap())
    }

    /// SIGKILL (what `Child::kill` sends on Unix), then reap.
    fn kill(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

#[derive(Debug, Default)]
struct Stats {
    iterations: usize,
    /// Kills that left a write dispatched and not finished (journal `started` only).
    mid_write: usize,
    /// …of which the service had already received the write.
    mid_write_received: usize,
    /// Kills that left a turn running.
    mid_turn: usize,
    /// Recoveries the parent ran (the others were left to the next child).
    parent_recoveries: usize,
    retried_after_crash: usize,
    outcome_unknown: usize,
    iterations_with_progress: usize,
}

fn open_statuses() -> Vec<CallStatus> {
    vec![
        CallStatus::AwaitingApproval,
        CallStatus::Approved,
        CallStatus::Dispatching,
        CallStatus::AwaitingAuth,
        CallStatus::OutcomeUnknown,
    ]
}

fn is_pending(status: CallStatus) -> bool {
    matches!(
        status,
        CallStatus::AwaitingApproval | CallStatus::AwaitingAuth | CallStatus::OutcomeUnknown
    )
}

fn approved(call: &CallRecord) -> bool {
    call.decision
        .as_ref()
        .is_some_and(|d| matches!(d.verdict, Verdict::Approved | Verdict::ApprovedEdited))
}

/// Reads what was appended to a log since `offset`, whole lines only.
fn new_lines(path: &Path, offset: &mut usize) -> Vec<String> {
    let bytes = std::fs::read(path).unwrap_or_default();
    let end = bytes[*offset..]
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(*offset, |i| *offset + i + 1);
    let text = std::str::from_utf8(&bytes[*offset..end])
        .unwrap()
        .to_owned();
    *offset = end;
    text.lines().map(str::to_owned).collect()
}

struct Checker {
    dir: PathBuf,
    seed: u64,
    iteration: usize,
    /// Runs of each write key in the service log so far.
    service: HashMap<(String, String), usize>,
    service_offset: usize,
    witness_offset: usize,
    /// Witnessed pending calls not yet seen resolved.
    watch: HashSet<String>,
    /// The last sequence each session was checked at.
    checked: HashMap<String, u64>,
}

impl Checker {
    fn at(&self) -> String {
        format!(
            "iteration {} (CRASH_SEED={}, files in {})",
            self.iteration,
            self.seed,
            self.dir.display()
        )
    }

    /// Every write the service received carried an approval for exactly the dispatched
    /// arguments and a journal row; a key the service does not deduplicate was received at most
    /// once, a deduplicated one at most once per journalled attempt.
    fn check_service_log(&mut self, store: &store::Store) -> usize {
        let lines = new_lines(&self.dir.join(SERVICE_LOG), &mut self.service_offset);
        let mut touched = HashSet::new();
        for line in &lines {
            let (tool, key) = line
                .split_once(' ')
                .unwrap_or_else(|| panic!("{}: malformed service log line {line:?}", self.at()));
            assert!(
                tool == DEDUP_WRITE || tool == PLAIN_WRITE,
                "{}: unknown tool in the service log: {line:?}",
                self.at()
            );
            *self
                .service
                .entry((tool.to_owned(), key.to_owned()))
                .or_default() += 1;
            touched.insert((tool.to_owned(), key.to_owned()));
        }
        for (tool, key) in touched {
            let at = self.at();
            let runs = self.service[&(tool.clone(), key.clone())];
            let call_id = format!("fc_{key}");
            let call = store.call(&call_id).unwrap().unwrap_or_else(|| {
                panic!("{at}: the service received {tool} {key}, a call the database does not know")
            });
            assert_eq!(call.tool, tool, "{at}: {call_id}");
            assert!(
                approved(&call),
                "{at}: {tool} {key} reached the service without an approval: {call:?}"
            );
            let hash = args_hash(&call.args);
            assert_eq!(
                call.decision.as_ref().unwrap().args_hash.as_deref(),
                Some(hash.as_str()),
                "{at}: the approval of {call_id} is not for the arguments it carries"
            );
            let journal = store.dispatches(&call_id).unwrap();
            assert!(
                journal
                    .iter()
                    .all(|j| j.args_hash == hash && j.idempotency_key == key),
                "{at}: a dispatch of {call_id} carried other arguments or another key: {journal:?}"
            );
            assert!(
                runs <= journal.len(),
                "{at}: {tool} {key} reached the service {runs} times but was journalled {} times: {journal:?}",
                journal.len()
            );
            if tool == PLAIN_WRITE {
                assert_eq!(
                    runs,
                    1,
                    "{at}: DISPATCHED TWICE: {tool} {key} (a service that does not deduplicate) received it {runs} times; call {call:?}; journal {journal:?}; audit {:?}",
                    audit_of(store, &call_id)
                );
            }
        }
        lines.len()
    }

    /// Calls still open are in a state that makes sense, and every one waiting for the user is
    /// listed. Returns (writes in flight, of which received by the service, turns running).
    fn check_open_calls(&self, engine: &Engine, store: &store::Store) -> (usize, usize, usize) {
        let at = self.at();
        let open = store
            .calls(&CallFilter {
                statuses: open_statuses(),
                ..CallFilter::default()
            })
            .unwrap();
        let listed: HashSet<String> = engine
            .pending_calls()
            .unwrap()
            .into_iter()
            .map(|c| c.call_id)
            .collect();
        let (mut in_flight, mut received) = (0, 0);
        for call in &open {
            let id = &call.call_id;
            assert_eq!(
                listed.contains(id),
                is_pending(call.status),
                "{at}: {id} is {:?} but pending_calls {} it",
                call.status,
                if listed.contains(id) {
                    "lists"
                } else {
                    "does not list"
                }
            );
            let inv = store.invocation(&call.invocation_id).unwrap().unwrap();
            assert!(
                inv.status.is_open(),
                "{at}: {id} is {:?} in a turn that is {:?}",
                call.status,
                inv.status
            );
            let journal = store.dispatches(id).unwrap();
            match call.status {
                CallStatus::AwaitingApproval => {
                    assert!(call.requires_approval, "{at}: {call:?}");
                    assert!(call.decision.is_none(), "{at}: held yet decided: {call:?}");
                    assert!(journal.is_empty(), "{at}: held yet dispatched: {journal:?}");
                }
                CallStatus::Approved | CallStatus::Dispatching | CallStatus::OutcomeUnknown
                    if call.requires_approval =>
                {
                    assert!(
                        approved(call),
                        "{at}: {:?} without approval: {call:?}",
                        call.status
                    );
                }
                _ => {}
            }
            if call.status == CallStatus::Dispatching {
                let last = journal
                    .last()
                    .unwrap_or_else(|| panic!("{at}: {id} is dispatching with no journal row"));
                assert!(last.finished_at.is_none(), "{at}: {journal:?}");
                in_flight += 1;
                let runs = self
                    .service
                    .get(&(call.tool.clone(), call.idempotency_key.clone()))
                    .copied()
                    .unwrap_or(0);
                if runs == journal.len() {
                    received += 1;
                }
            }
            if call.status == CallStatus::OutcomeUnknown {
                assert_eq!(
                    call.tool, PLAIN_WRITE,
                    "{at}: only writes without dedup are left to the user: {call:?}"
                );
            }
        }
        let running = store
            .invocations_with_status(&[InvocationStatus::Running])
            .unwrap()
            .len();
        (in_flight, received, running)
    }

    /// Every call a child saw listed as pending is still listed, or was resolved by a recorded
    /// decision (approved, rejected, expired, superseded…).
    fn check_witnessed(&mut self, engine: &Engine, store: &store::Store) {
        let at = self.at();
        self.watch.extend(new_lines(
            &self.dir.join(WITNESS_LOG),
            &mut self.witness_offset,
        ));
        let listed: HashSet<String> = engine
            .pending_calls()
            .unwrap()
            .into_iter()
            .map(|c| c.call_id)
            .collect();
        let mut resolved = Vec::new();
        for id in &self.watch {
            let call = store
                .call(id)
                .unwrap()
                .unwrap_or_else(|| panic!("{at}: PENDING CALL LOST: {id} was listed and is gone"));
            if listed.contains(id) {
                continue;
            }
            assert!(
                call.decision.is_some() && !is_pending(call.status),
                "{at}: PENDING CALL LOST: {id} was listed, is no longer, and nobody decided it: {call:?}"
            );
            resolved.push(id.clone());
        }
        for id in resolved {
            self.watch.remove(&id);
        }
    }

    /// Each session whose events changed since its last check: every function call in the events
    /// has one record and every record one function call; a call is answered exactly once if it
    /// is done and not at all otherwise; a write done as completed reached the service.
    fn check_sessions(&mut self, store: &store::Store) {
        let at = self.at();
        for meta in store.list_sessions(APP, USER).unwrap() {
            if self.checked.get(&meta.id) == Some(&meta.last_seq) {
                continue;
            }
            let session = store.load_session(&meta.id).unwrap();
            let calls = store
                .calls(&CallFilter {
                    session_id: Some(meta.id.clone()),
                    ..CallFilter::default()
                })
                .unwrap();
            let records: HashMap<&str, &CallRecord> =
                calls.iter().map(|c| (c.call_id.as_str(), c)).collect();
            let mut asked: HashMap<String, usize> = HashMap::new();
            let mut answered: HashMap<String, usize> = HashMap::new();
            for event in &session.events {
                assert!(!event.partial, "{at}: a partial event was stored");
                for part in event.parts() {
                    if let Some(call) = part.function_call() {
                        let id = call.id.clone().unwrap_or_else(|| {
                            panic!("{at}: a stored function call has no id: {call:?}")
                        });
                        let record = records.get(id.as_str()).unwrap_or_else(|| {
                            panic!(
                                "{at}: function call {id} ({}) has no call record",
                                call.name
                            )
                        });
                        assert_eq!(record.tool, call.name, "{at}: {id}");
                        *asked.entry(id).or_default() += 1;
                    }
                    if let Some(response) = part.function_response() {
                        let id = response.id.clone().unwrap_or_else(|| {
                            panic!("{at}: a stored function response has no id: {response:?}")
                        });
                        assert!(
                            records.contains_key(id.as_str()),
                            "{at}: function response {id} answers no call of session {}",
                            meta.id
                        );
                        *answered.entry(id).or_default() += 1;
                    }
                }
            }
            for call in &calls {
                let id = &call.call_id;
                assert_eq!(
                    asked.get(id).copied(),
                    Some(1),
                    "{at}: call record {id} is not exactly one function call in its session"
                );
                let answers = answered.get(id).copied().unwrap_or(0);
                if call.status == CallStatus::Done {
                    assert_eq!(
                        answers, 1,
                        "{at}: {id} is done but answered {answers} times: {call:?}"
                    );
                    let outcome = call
                        .outcome
                        .unwrap_or_else(|| panic!("{at}: {id} is done without an outcome"));
                    // Only the user ends a held call: by deciding, by writing again (superseded),
                    // by cancelling the turn, or by letting it expire. A restart never does.
                    match call.decision.as_ref() {
                        Some(d) if d.verdict == Verdict::Rejected => {
                            assert_eq!(outcome, ToolOutcome::Blocked, "{at}: {call:?}");
                            assert_eq!(d.decided_by, "user", "{at}: {call:?}");
                        }
                        Some(d) if d.verdict == Verdict::Expired => {
                            assert_eq!(outcome, ToolOutcome::Cancelled, "{at}: {call:?}");
                            assert!(
                                call.expires_at.is_some_and(|e| d.decided_at >= e),
                                "{at}: {id} expired before its time: {call:?}"
                            );
                        }
                        Some(d)
                            if matches!(d.verdict, Verdict::Superseded | Verdict::Cancelled) =>
                        {
                            assert_eq!(outcome, ToolOutcome::Cancelled, "{at}: {call:?}");
                            let turn = store.invocation(&call.invocation_id).unwrap().unwrap();
                            let expected = if d.verdict == Verdict::Superseded {
                                InvocationStatus::Superseded
                            } else {
                                InvocationStatus::Cancelled
                            };
                            assert_eq!(
                                turn.status, expected,
                                "{at}: PENDING CALL LOST: {id} was closed as {:?} but its turn is {:?}: {call:?}",
                                d.verdict, turn.status
                            );
                        }
                        _ => {}
                    }
                    if call.requires_approval && outcome == ToolOutcome::Completed {
                        assert!(
                            approved(call),
                            "{at}: {id} completed without approval: {call:?}"
                        );
                        // The simulated user only settles "it happened" after seeing it in the
                        // service, so every completed write is there.
                        assert!(
                            self.service
                                .contains_key(&(call.tool.clone(), call.idempotency_key.clone())),
                            "{at}: APPROVED WRITE LOST: {id} is done as completed but the service never received {} {}; audit {:?}",
                            call.tool,
                            call.idempotency_key,
                            audit_of(store, id)
                        );
                    }
                } else {
                    assert_eq!(
                        answers, 0,
                        "{at}: {id} is {:?} yet already answered",
                        call.status
                    );
                }
            }
            self.checked.insert(meta.id, meta.last_seq);
        }
    }

    /// After a recovery nothing approved is left behind: no call is approved-but-not-sent or
    /// in flight, no turn is running, and everything the report calls pending is listed.
    fn check_recovered(&self, engine: &Engine, store: &store::Store, report: &RecoveryReport) {
        let at = self.at();
        let stuck = store
            .calls(&CallFilter {
                statuses: vec![CallStatus::Approved, CallStatus::Dispatching],
                ..CallFilter::default()
            })
            .unwrap();
        assert!(
            stuck.is_empty(),
            "{at}: APPROVED CALL LOST: after recovery these were neither sent nor left to the user: {stuck:?}"
        );
        let running = store
            .invocations_with_status(&[InvocationStatus::Running])
            .unwrap();
        assert!(
            running.is_empty(),
            "{at}: turns still running after recovery: {running:?}"
        );
        // A suspended turn waits for someone; one with nothing left to wait for was resumed.
        for inv in store
            .invocations_with_status(&[InvocationStatus::Suspended])
            .unwrap()
        {
            let waiting = store
                .calls(&CallFilter {
                    invocation_id: Some(inv.id.clone()),
                    statuses: open_statuses(),
                    ..CallFilter::default()
                })
                .unwrap();
            assert!(
                waiting.iter().any(|c| is_pending(c.status)),
                "{at}: turn {} is still suspended after recovery with nothing to wait for: {waiting:?}",
                inv.id
            );
        }
        let listed: HashSet<String> = engine
            .pending_calls()
            .unwrap()
            .into_iter()
            .map(|c| c.call_id)
            .collect();
        for id in report.pending.iter().chain(&report.outcome_unknown) {
            assert!(
                listed.contains(id),
                "{at}: recovery reported {id} pending but it is not listed"
            );
        }
        for id in &report.retried {
            let call = store.call(id).unwrap().unwrap();
            assert_eq!(
                call.status,
                CallStatus::Done,
                "{at}: {id} was retried after the crash but is not done: {call:?}"
            );
        }
        for entry in store.unfinished_dispatches().unwrap() {
            assert_eq!(
                entry.tool, PLAIN_WRITE,
                "{at}: a deduplicated write was left unfinished after recovery: {entry:?}"
            );
        }
    }
}

fn audit_of(store: &store::Store, call_id: &str) -> Vec<String> {
    let mut kinds: Vec<String> = store
        .audit(&agent::persist::AuditFilter::default())
        .unwrap()
        .into_iter()
        .filter(|a| a.call_id.as_deref() == Some(call_id))
        .map(|a| a.kind)
        .collect();
    kinds.reverse();
    kinds
}

#[allow(clippy::print_stdout)]
fn parent_main() {
    let seed: u64 = std::env::var("CRASH_SEED").map_or_else(
        |_| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        },
        |s| s.parse().unwrap(),
    );
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    println!("crash test: CRASH_SEED={seed}");
    let mut rng = Rng::new(seed);
    let mut checker = Checker {
        dir: dir.clone(),
        seed,
        iteration: 0,
        service: HashMap::new(),
        service_offset: 0,
        witness_offset: 0,
        watch: HashSet::new(),
        checked: HashMap::new(),
    };
    let mut stats = Stats::default();
    let started = Instant::now();
    let mut longest = Duration::ZERO;
    for iteration in 0..ITERATIONS {
        if started.elapsed() > TIME_BUDGET {
            break;
        }
        let round = Instant::now();
        checker.iteration = iteration;
        let run_for = if iteration == 0 {
            400
        } else {
            10 + rng.below(111)
        };
        let mut child = ChildGuard::spawn(&dir, rng.next());
        std::thread::sleep(Duration::from_millis(run_for));
        if let Some(status) = child.exited() {
            let stderr = std::fs::read_to_string(dir.join(CHILD_STDERR)).unwrap_or_default();
            panic!(
                "{}: the child stopped by itself ({status}) before it was killed:\n{stderr}",
                checker.at()
            );
        }
        child.kill();
        stats.iterations += 1;

        // What the kill left, before anyone recovers.
        let (engine, store) = build_engine(&dir, rng.next());
        assert_eq!(
            store.integrity_check().unwrap(),
            "ok",
            "{}: integrity_check",
            checker.at()
        );
        if checker.check_service_log(&store) > 0 {
            stats.iterations_with_progress += 1;
        }
        let (in_flight, received, running) = checker.check_open_calls(&engine, &store);
        stats.mid_write += usize::from(in_flight > 0);
        stats.mid_write_received += usize::from(received > 0);
        stats.mid_turn += usize::from(running > 0);
        checker.check_witnessed(&engine, &store);
        checker.check_sessions(&store);

        // The next start: recover here most of the time, otherwise leave it to the next child
        // (so kills also land during recovery).
        if rng.chance(75) {
            stats.parent_recoveries += 1;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let report = runtime
                .block_on(engine.recover())
                .unwrap_or_else(|e| panic!("{}: recovery failed: {e}", checker.at()));
            stats.retried_after_crash += report.retried.len();
            stats.outcome_unknown += report.outcome_unknown.len();
            checker.check_service_log(&store);
            checker.check_recovered(&engine, &store, &report);
            checker.check_open_calls(&engine, &store);
            checker.check_witnessed(&engine, &store);
            checker.check_sessions(&store);
        }
        longest = longest.max(round.elapsed());
    }
    let elapsed = started.elapsed();
    let writes: usize = checker.service.values().sum();
    println!(
        "crash test: {} kill iterations in {:.1} s (longest {} ms); {} killed a write in flight \
         ({} after the service had received it), {} killed a running turn; {} iterations \
         dispatched writes, {} writes in all; parent ran {} recoveries: {} deduplicated writes \
         retried, {} left as outcome unknown",
        stats.iterations,
        elapsed.as_secs_f64(),
        longest.as_millis(),
        stats.mid_write,
        stats.mid_write_received,
        stats.mid_turn,
        stats.iterations_with_progress,
        writes,
        stats.parent_recoveries,
        stats.retried_after_crash,
        stats.outcome_unknown,
    );
    assert!(
        stats.iterations >= MIN_ITERATIONS,
        "only {} iterations ran in {TIME_BUDGET:?}",
        stats.iterations
    );
    assert!(
        stats.iterations_with_progress * 5 >= stats.iterations,
        "too few children got as far as dispatching a write: {stats:?}"
    );
    assert!(
        stats.mid_write > 0,
        "no kill landed on a write in flight: {stats:?}"
    );
}
