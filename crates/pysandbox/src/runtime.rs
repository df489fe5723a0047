//! The sandbox: CPython compiled to a WebAssembly component, run under wasmtime.
//!
//! The component is compiled once (and cached on disk, see [`crate::cache`]) and pre-linked
//! ([`wasmtime::component::InstancePre`]); every call gets a fresh instance of it, so nothing one
//! call does can be seen by the next. What an instance can do is only what the linker gives it:
//! WASI with no preopened directories, no network, no environment variables, no arguments and
//! captured stdio, plus this crate's host functions. Three limits hold each call:
//!
//! - **memory**: a cap on linear memory ([`wasmtime::StoreLimits`]); a refused `memory.grow`
//!   becomes `MemoryError` inside Python, and a refusal Python cannot recover from ends the call;
//! - **time**: a wall-clock deadline, checked by wasmtime's epoch interruption (a ticker thread
//!   advances the epoch; every tick the running code yields and past the deadline it is trapped,
//!   which no `except` can catch); host calls that wait (`time.sleep`, tool calls, HTTP) are
//!   bounded by the same deadline on the host side, and an outer timeout catches anything else;
//! - **output**: stdout and stderr are kept up to a bound and the rest dropped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use agent::ExternalResponse;
use serde_json::Value;
use tokio::task::JoinHandle;
use wasmtime::component::{Linker, ResourceTable};
use wasmtime::{
    Config, Engine, ResourceLimiter, Store, StoreLimits, StoreLimitsBuilder, UpdateDeadline,
};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::cache::{self, CacheOutcome};
use crate::error::{SandboxError, SetupError};
use crate::host::{Host, HostCall, HttpRequest, refused_write};
use crate::output::CapturedOutput;

mod bindings {
    // The host side of `wit/sandbox.wit`. Imports are async so that a wait can be cut short by
    // the deadline, and trappable so that the deadline can stop the call from inside them.
    wasmtime::component::bindgen!({
        path: "wit",
        world: "sandbox",
        imports: { default: async | trappable },
        exports: { default: async },
    });
}

use bindings::SandboxPre;

tokio::task_local! {
    /// How deep the running Python call is nested: 0 for a call the engine made, 1 for a tool
    /// that call reached through `tools.NAME`, and so on. Set on the tasks that serve a call's
    /// `tools.NAME`, so that a call made from there knows its depth.
    static DEPTH: u32;
}

/// How many Python calls may be nested through `tools.NAME` under the one the engine made: a
/// tool calling itself stops here, with a clear error, rather than taking every instance.
pub const MAX_NESTING: u32 = 3;

/// Instance slots nested calls may not take: they stay free for the engine's own calls (other
/// tools, and the callbacks that guard each step), whatever a runaway tool does.
const RESERVED_SLOTS: u32 = 8;

/// The depth of a Python call started from the current task.
fn current_depth() -> u32 {
    DEPTH.try_with(|d| *d).unwrap_or(0)
}

/// How often the epoch advances: the granularity of the deadline, and how often running Python
/// code yields to the other tasks of its worker thread.
const TICK: Duration = Duration::from_millis(10);

/// How long past the deadline the outer timeout waits before abandoning a call that did not stop
/// by itself (a host call that ignores the deadline); the call is then dropped mid-flight.
const GRACE: Duration = Duration::from_millis(250);

/// How many tool calls and HTTP requests one Python call may make. Past it the host answers
/// `429` without doing anything, so a loop of `async_tools` calls cannot flood the app or a
/// service for the whole deadline.
const MAX_HOST_REQUESTS: u32 = 256;

/// The limits of one Python call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock time for the whole call: instantiation, the code, and its host calls.
    pub deadline: Duration,
    /// The most linear memory the interpreter may have (its heap starts near 40 MiB).
    pub memory_bytes: usize,
    /// How much of stdout, and of stderr, is kept.
    pub output_bytes: usize,
    /// How large a return value may be, as JSON: past it the value is cut to this size and says
    /// so, as printed output is (a tool's answer goes to the model whole otherwise).
    pub value_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: Duration::from_secs(5),
            memory_bytes: 256 * 1024 * 1024,
            output_bytes: 64 * 1024,
            value_bytes: 256 * 1024,
        }
    }
}

/// Where the component comes from and where its compiled form is cached.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// The component (`scripts/build-python-sandbox` builds it).
    pub component: std::path::PathBuf,
    /// A compiled copy of the component shipped with it (the packages carry one, see
    /// [`crate::precompile`]); used when it was compiled from this component and fits this
    /// engine and CPU, so an installed app never compiles. `None` in a development build.
    pub precompiled: Option<std::path::PathBuf>,
    /// Where to cache the compiled component; `None` compiles it on every start.
    pub cache_dir: Option<std::path::PathBuf>,
    /// The limits of every call.
    pub limits: Limits,
}

impl Default for SandboxConfig {
    /// The component this crate was built with, cached under `target/python-sandbox/compiled`.
    /// The app points both at its own resources and data folder instead.
    fn default() -> Self {
        SandboxConfig {
            component: env!("PYSANDBOX_WASM").into(),
            precompiled: None,
            cache_dir: Some(env!("PYSANDBOX_CACHE_DIR").into()),
            limits: Limits::default(),
        }
    }
}

/// What one call printed and answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutput {
    /// The guest's JSON answer.
    pub answer: String,
    /// What the code printed to stdout (bounded).
    pub stdout: String,
    /// What it printed to stderr (bounded).
    pub stderr: String,
    /// Whether output was dropped at the bound.
    pub output_truncated: bool,
    /// How long the call took, instantiation included.
    pub elapsed: Duration,
    /// The memory cap, when the code reached it during the call. CPython does not always
    /// recover from a refused allocation with a `MemoryError`: where it fails inside C code it
    /// may raise a bare `SystemError`, which the user should see as the limit it is.
    pub memory_limit_hit: Option<usize>,
}

/// The data of one call's store.
pub(crate) struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: Limiter,
    deadline: Instant,
    limit: Duration,
    env: CallEnv,
    pending: HashMap<u32, (String, Pending)>,
    next_handle: u32,
    requests: u32,
    depth: u32,
}

/// What a call may reach: the host, and as whom (with the session it sees).
#[derive(Clone)]
pub(crate) struct CallEnv {
    pub(crate) host: Arc<dyn Host>,
    pub(crate) call: HostCall,
    /// A dry run for an approval card: HTTP writes are recorded here and answered without
    /// being sent.
    pub(crate) recorded: Option<Arc<std::sync::Mutex<Vec<HttpRequest>>>>,
}

enum Pending {
    Ready(ExternalResponse),
    Task(JoinHandle<ExternalResponse>),
}

impl Drop for HostState {
    fn drop(&mut self) {
        // A call the code started but never waited for ends with the Python call.
        for (_, (_, pending)) in self.pending.drain() {
            if let Pending::Task(task) = pending {
                task.abort();
            }
        }
    }
}

/// The store's limits, noting whether memory was refused so that a trap that follows can be
/// reported as what it is.
struct Limiter {
    limits: StoreLimits,
    memory_refused: bool,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = self.limits.memory_growing(current, desired, maximum)?;
        if !allowed {
            self.memory_refused = true;
        }
        Ok(allowed)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.limits.table_growing(current, desired, maximum)
    }

    fn instances(&self) -> usize {
        self.limits.instances()
    }

    fn tables(&self) -> usize {
        self.limits.tables()
    }

    fn memories(&self) -> usize {
        self.limits.memories()
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The trap that stops a call at its deadline.
#[derive(Debug, thiserror::Error)]
#[error("deadline exceeded")]
struct DeadlineTrap {
    during: Option<String>,
}

fn deadline_trap(during: impl Into<String>) -> wasmtime::Error {
    wasmtime::Error::new(DeadlineTrap {
        during: Some(during.into()),
    })
}

impl HostState {
    /// Who the next host request is from (writes get their own idempotency key), or `None`
    /// when the call has made all the requests it may.
    fn next_call(&mut self) -> Option<HostCall> {
        if self.requests >= MAX_HOST_REQUESTS {
            return None;
        }
        self.requests += 1;
        let mut call = self.env.call.clone();
        call.idempotency_key = call
            .idempotency_key
            .map(|key| format!("{key}:{}", self.requests));
        Some(call)
    }

    fn push(&mut self, what: String, pending: Pending) -> u32 {
        self.next_handle += 1;
        self.pending.insert(self.next_handle, (what, pending));
        self.next_handle
    }
}

fn bad_request(message: String) -> Pending {
    Pending::Ready(ExternalResponse::new(400, message).with_reason("Bad Request"))
}

fn too_many_requests() -> Pending {
    Pending::Ready(
        ExternalResponse::new(
            429,
            format!(
                "one Python call may make at most {MAX_HOST_REQUESTS} tool calls and HTTP requests"
            ),
        )
        .with_reason("Too Many Requests"),
    )
}

impl bindings::companion::pysandbox::host::Host for HostState {
    async fn start_tool(&mut self, name: String, args: String) -> wasmtime::Result<u32> {
        let what = format!("tools.{name}");
        let args = match serde_json::from_str::<Value>(&args) {
            Ok(Value::Object(args)) => args,
            _ => {
                return Ok(self.push(
                    what,
                    bad_request("the arguments must be a JSON object".to_owned()),
                ));
            }
        };
        let Some(call) = self.next_call() else {
            return Ok(self.push(what, too_many_requests()));
        };
        let host = self.env.host.clone();
        let depth = self.depth + 1;
        let task =
            tokio::spawn(DEPTH.scope(
                depth,
                async move { host.call_tool(&name, args, &call).await },
            ));
        Ok(self.push(what, Pending::Task(task)))
    }

    async fn start_http(&mut self, request: String) -> wasmtime::Result<u32> {
        let request: HttpRequest = match serde_json::from_str(&request) {
            Ok(request) => request,
            Err(e) => {
                return Ok(self.push(
                    "ces_requests".to_owned(),
                    bad_request(format!("bad request: {e}")),
                ));
            }
        };
        let what = format!(
            "ces_requests.{}({})",
            request.method.as_str().to_lowercase(),
            request.url
        );
        if let Some(recorded) = self
            .env
            .recorded
            .as_ref()
            .filter(|_| request.method.is_write())
        {
            recorded
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(request);
            let answer = ExternalResponse::new(200, "{}")
                .with_reason("not sent: a dry run for the approval card");
            return Ok(self.push(what, Pending::Ready(answer)));
        }
        if request.method.is_write() && !self.env.call.writes_approved {
            // The gate: an unapproved write never reaches the host.
            tracing::info!(caller = %self.env.call.caller, request = %what, "refused a write from Python");
            return Ok(self.push(what.clone(), Pending::Ready(refused_write(&what))));
        }
        let Some(call) = self.next_call() else {
            return Ok(self.push(what, too_many_requests()));
        };
        let host = self.env.host.clone();
        let task = tokio::spawn(async move { host.http(request, &call).await });
        Ok(self.push(what, Pending::Task(task)))
    }

    async fn wait(&mut self, handle: u32) -> wasmtime::Result<String> {
        let response = match self.pending.remove(&handle) {
            None => ExternalResponse::new(400, format!("no call under way with handle {handle}"))
                .with_reason("Bad Request"),
            Some((_, Pending::Ready(response))) => response,
            Some((what, Pending::Task(task))) => {
                let abort = task.abort_handle();
                match tokio::time::timeout_at(self.deadline.into(), task).await {
                    Ok(Ok(response)) => response,
                    Ok(Err(e)) => ExternalResponse::new(500, format!("{what} failed: {e}"))
                        .with_reason("Host Error"),
                    Err(_) => {
                        abort.abort();
                        return Err(deadline_trap(format!("while waiting for {what}")));
                    }
                }
            }
        };
        Ok(serde_json::to_string(&response)?)
    }

    async fn sleep(&mut self, seconds: f64) -> wasmtime::Result<()> {
        // The guest has refused negative and NaN values already.
        if seconds.is_nan() || seconds <= 0.0 {
            return Ok(());
        }
        let wake = Duration::try_from_secs_f64(seconds)
            .ok()
            .and_then(|d| Instant::now().checked_add(d));
        match wake {
            Some(wake) if wake <= self.deadline => {
                tokio::time::sleep_until(wake.into()).await;
                Ok(())
            }
            // Sleeping would only end after the deadline: stop now rather than wait for it.
            _ => Err(deadline_trap(format!(
                "time.sleep({seconds}) would outlast it"
            ))),
        }
    }

    async fn events(&mut self) -> wasmtime::Result<String> {
        Ok(serde_json::to_string(&*self.env.call.context.events)?)
    }
}

/// The Python sandbox: a compiled CPython component and the means to run calls in it.
///
/// Cloning is cheap (the compiled component is shared). Calls run on the sandbox's own worker
/// threads, whatever runtime (or none) the caller uses.
#[derive(Clone)]
pub struct Sandbox {
    shared: Arc<Shared>,
}

struct Shared {
    /// Python calls running now, nested ones included.
    active: AtomicU32,
    engine: Engine,
    pre: SandboxPre<HostState>,
    limits: Limits,
    compiled: CacheOutcome,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("limits", &self.shared.limits)
            .field("compiled", &self.shared.compiled)
            .finish_non_exhaustive()
    }
}

fn wasmtime_error(e: wasmtime::Error) -> SetupError {
    SetupError::Wasmtime(format!("{e:#}"))
}

/// The worker threads every sandbox's calls run on: two, like the machines this app targets.
/// Process-wide and never dropped, so no caller ever drops a runtime from inside another.
fn workers() -> Result<&'static tokio::runtime::Runtime, SetupError> {
    static WORKERS: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    if let Some(rt) = WORKERS.get() {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("pysandbox")
        .enable_all()
        .build()
        .map_err(SetupError::Threads)?;
    // Two threads may race to build it; the loser's runtime is dropped here, outside any runtime.
    Ok(WORKERS.get_or_init(|| rt))
}

/// Advances the engine's epoch every [`TICK`] until the engine is gone.
fn start_ticker(engine: &Engine) -> Result<(), SetupError> {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("pysandbox-epoch".to_owned())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(TICK);
            }
        })
        .map(|_| ())
        .map_err(SetupError::Threads)
}

/// How many Python calls may run at once (nested calls — a Python tool calling another through
/// `tools.NAME` — count too). A call past this fails with a clear error rather than waiting.
const POOL_SLOTS: u32 = 32;

/// The CPython component's shape, with headroom: 14 core instances, 1 memory, 2 tables, and a
/// function table of 5,508 entries.
const CORE_INSTANCES_PER_CALL: u32 = 24;
const MEMORIES_PER_CALL: u32 = 2;
const TABLES_PER_CALL: u32 = 4;
const TABLE_ELEMENTS: usize = 20_000;

/// The interpreter's memory snapshot, rounded up: the part of linear memory that is reset in
/// place between calls rather than unmapped (see [`engine`]).
const KEEP_RESIDENT: usize = 64 * 1024 * 1024;

/// The wasmtime engine: epoch interruption for deadlines, and instances from a pool.
///
/// A fresh instance per call is the point of the sandbox, and the pool makes it cheap: slots
/// stay mapped between calls and, where Linux offers `PAGEMAP_SCAN`, only the pages a call
/// touched are copied back from the snapshot, so the next call neither maps memory nor takes a
/// page fault per page it touches (about half of a small call's cost otherwise). That takes
/// wasmtime's reset from 48.0.11, which keeps scanning past the first 32 dirty stretches
/// (third_party/wasmtime/PATCHED.md): CPython dirties hundreds, and without it a call took 2 ms
/// instead of 0.8. Each instance still starts from the snapshot's exact bytes. Without `PAGEMAP_SCAN` (older kernels, macOS,
/// Windows) resetting that way would copy the whole snapshot, so pages are released instead.
fn engine(limits: &Limits) -> Result<Engine, SetupError> {
    engine_with(limits, |_| Ok(()))
}

/// [`engine`], with `adjust` applied to its configuration last: a shipped compiled copy is made
/// by an engine that differs only in the CPU features it assumes ([`crate::precompile`]).
pub(crate) fn engine_with(
    limits: &Limits,
    adjust: impl Fn(&mut Config) -> wasmtime::Result<()>,
) -> Result<Engine, SetupError> {
    let build = |reset_in_place: bool| {
        let mut pool = wasmtime::PoolingAllocationConfig::new();
        pool.total_component_instances(POOL_SLOTS)
            .total_core_instances(POOL_SLOTS * CORE_INSTANCES_PER_CALL)
            .total_memories(POOL_SLOTS * MEMORIES_PER_CALL)
            .total_tables(POOL_SLOTS * TABLES_PER_CALL)
            .total_stacks(POOL_SLOTS)
            .max_core_instances_per_component(CORE_INSTANCES_PER_CALL)
            .max_memories_per_component(MEMORIES_PER_CALL)
            .max_tables_per_component(TABLES_PER_CALL)
            .table_elements(TABLE_ELEMENTS)
            .max_memory_size(limits.memory_bytes)
            // Idle slots keep their pages; a few are plenty for calls that come one at a time.
            .max_unused_warm_slots(4);
        if reset_in_place {
            pool.pagemap_scan(wasmtime::Enabled::Yes)
                .linear_memory_keep_resident(KEEP_RESIDENT)
                .table_keep_resident(TABLE_ELEMENTS * 8)
                .async_stack_keep_resident(2 * 1024 * 1024);
        }
        let mut config = Config::new();
        config
            .epoch_interruption(true)
            .allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
        adjust(&mut config)?;
        Engine::new(&config)
    };
    build(true)
        .or_else(|_| build(false))
        .map_err(wasmtime_error)
}

impl Sandbox {
    /// Loads (or compiles and caches) the component and prepares it for calls. Compiling takes
    /// tens of seconds; loading from the cache a fraction of one.
    pub fn new(config: SandboxConfig) -> Result<Sandbox, SetupError> {
        workers()?;
        let engine = engine(&config.limits)?;
        let wasm =
            std::fs::read(&config.component).map_err(|source| SetupError::ReadComponent {
                path: config.component.clone(),
                source,
            })?;
        let (component, compiled) = cache::load_or_compile(
            &engine,
            &wasm,
            config.precompiled.as_deref(),
            config.cache_dir.as_deref(),
        )
        .map_err(wasmtime_error)?;
        drop(wasm);
        let mut linker: Linker<HostState> = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(wasmtime_error)?;
        bindings::Sandbox::add_to_linker::<_, wasmtime::component::HasSelf<HostState>>(
            &mut linker,
            |state| state,
        )
        .map_err(wasmtime_error)?;
        let pre = linker.instantiate_pre(&component).map_err(wasmtime_error)?;
        let pre = SandboxPre::new(pre).map_err(wasmtime_error)?;
        start_ticker(&engine)?;
        Ok(Sandbox {
            shared: Arc::new(Shared {
                active: AtomicU32::new(0),
                engine,
                pre,
                limits: config.limits,
                compiled,
            }),
        })
    }

    /// The limits of every call.
    pub fn limits(&self) -> Limits {
        self.shared.limits
    }

    /// Whether the component came from the cache or was compiled (and how long that took).
    pub fn compiled(&self) -> CacheOutcome {
        self.shared.compiled
    }

    /// Runs one request in a fresh instance: in the caller's task when it has a tokio runtime
    /// (running Python yields to the runtime every tick, so it shares the thread fairly), on the
    /// sandbox's workers otherwise.
    pub(crate) async fn run(
        &self,
        request: String,
        env: CallEnv,
    ) -> Result<RunOutput, SandboxError> {
        let depth = current_depth();
        if tokio::runtime::Handle::try_current().is_ok() {
            return run(&self.shared, request, env, depth).await;
        }
        let shared = self.shared.clone();
        let workers = workers().map_err(|_| SandboxError::ShutDown)?;
        workers
            .spawn(async move { run(&shared, request, env, depth).await })
            .await
            .map_err(|e| SandboxError::Trap(format!("the call's task failed: {e}")))?
    }

    /// [`Sandbox::run`] for synchronous callers (the engine's callbacks): the call runs on the
    /// sandbox's own worker threads, and this thread waits for it, which the deadline bounds.
    /// Called from a worker of a multi-threaded tokio runtime (the app's), the wait first hands
    /// that worker's other tasks to another thread (`block_in_place`), so a callback never holds
    /// up the rest of the engine's work — other conversations, streaming, timers — while it runs.
    pub(crate) fn run_blocking(
        &self,
        request: String,
        env: CallEnv,
    ) -> Result<RunOutput, SandboxError> {
        let shared = self.shared.clone();
        let workers = workers().map_err(|_| SandboxError::ShutDown)?;
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        workers.spawn(async move {
            // The receiver only goes away if the caller did, and then nobody needs the answer.
            let _ = tx.send(run(&shared, request, env, 0).await);
        });
        let wait = || rx.recv().map_err(|_| SandboxError::ShutDown);
        let on_multi_thread_worker = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        if on_multi_thread_worker {
            tokio::task::block_in_place(wait)?
        } else {
            wait()?
        }
    }
}

/// Holds one of the pool's instance slots for a call.
struct Slot<'a>(&'a AtomicU32);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Takes a slot for a call at `depth`, or says why there is none.
fn take_slot(active: &AtomicU32, depth: u32) -> Result<Slot<'_>, SandboxError> {
    if depth > MAX_NESTING {
        return Err(SandboxError::TooDeep { limit: MAX_NESTING });
    }
    let usable = if depth == 0 {
        POOL_SLOTS
    } else {
        POOL_SLOTS - RESERVED_SLOTS
    };
    let before = active.fetch_add(1, Ordering::AcqRel);
    let slot = Slot(active);
    if before >= usable {
        return Err(SandboxError::Busy {
            running: before,
            nested: depth > 0,
        });
    }
    Ok(slot)
}

async fn run(
    shared: &Shared,
    request: String,
    env: CallEnv,
    depth: u32,
) -> Result<RunOutput, SandboxError> {
    let _slot = take_slot(&shared.active, depth)?;
    let started = Instant::now();
    let limits = shared.limits;
    let deadline = started + limits.deadline;
    let stdout = CapturedOutput::new(limits.output_bytes);
    let stderr = CapturedOutput::new(limits.output_bytes);
    // No preopened directories, no environment, no arguments, no sockets: WASI gives the code
    // a clock, randomness and the two captured streams, and nothing else.
    let wasi = WasiCtxBuilder::new()
        .stdout(stdout.clone())
        .stderr(stderr.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .build();
    let limiter = Limiter {
        limits: StoreLimitsBuilder::new()
            .memory_size(limits.memory_bytes)
            // Refuse the growth and let the interpreter raise MemoryError, rather than trap.
            .trap_on_grow_failure(false)
            .build(),
        memory_refused: false,
    };
    let state = HostState {
        wasi,
        table: ResourceTable::new(),
        limiter,
        deadline,
        limit: limits.deadline,
        env,
        pending: HashMap::new(),
        next_handle: 0,
        requests: 0,
        depth,
    };
    let mut store = Store::new(&shared.engine, state);
    store.limiter(|state| &mut state.limiter);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|ctx| {
        if Instant::now() >= ctx.data().deadline {
            Err(wasmtime::Error::new(DeadlineTrap { during: None }))
        } else {
            // Yield every tick so the worker thread serves other calls and timers meanwhile.
            Ok(UpdateDeadline::Yield(1))
        }
    });
    let work = async {
        let instance = shared.pre.instantiate_async(&mut store).await?;
        instance.call_invoke(&mut store, &request).await
    };
    let result = tokio::time::timeout_at((deadline + GRACE).into(), work).await;
    let (out, out_cut) = stdout.take();
    let (err, err_cut) = stderr.take();
    let memory_refused = store.data().limiter.memory_refused;
    let limit = store.data().limit;
    drop(store);
    let answer = match result {
        Err(_) => Err(SandboxError::Deadline {
            limit,
            during: Some("the host did not return in time".to_owned()),
        }),
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(classify(&e, memory_refused, &limits)),
    };
    if !out.is_empty() || !err.is_empty() {
        tracing::debug!(stdout = %out, stderr = %err, "Python output");
    }
    answer.map(|answer| RunOutput {
        answer,
        stdout: out,
        stderr: err,
        output_truncated: out_cut || err_cut,
        elapsed: started.elapsed(),
        memory_limit_hit: memory_refused.then_some(limits.memory_bytes),
    })
}

/// Says why a call trapped.
fn classify(e: &wasmtime::Error, memory_refused: bool, limits: &Limits) -> SandboxError {
    if let Some(deadline) = e.downcast_ref::<DeadlineTrap>() {
        return SandboxError::Deadline {
            limit: limits.deadline,
            during: deadline.during.clone(),
        };
    }
    if let Some(exit) = e.downcast_ref::<wasmtime_wasi::I32Exit>() {
        return SandboxError::Exit(exit.0);
    }
    if memory_refused {
        return SandboxError::Memory {
            limit_bytes: limits.memory_bytes,
        };
    }
    if let Some(trap) = e.downcast_ref::<wasmtime::Trap>() {
        return SandboxError::Trap(trap.to_string());
    }
    SandboxError::Trap(format!("{e:#}"))
}

/// Builds the request JSON for the guest.
pub(crate) fn encode(request: &impl serde::Serialize) -> Result<String, SandboxError> {
    serde_json::to_string(request).map_err(|e| SandboxError::Protocol(e.to_string()))
}
